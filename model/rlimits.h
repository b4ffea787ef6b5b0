/* model: what the process's resource limits leave to termsight (rlimits.c). */
#ifndef TERMSIGHT_MODEL_RLIMITS_H
#define TERMSIGHT_MODEL_RLIMITS_H

#include <stddef.h>
#include <stdint.h>

/* termsight maps at most a 16th of the address space or memory left. */
#define TS_RLIMITS_SHARE 16

/* The limits a process runs under, read at one moment. UINT64_MAX where there is none. */
typedef struct ts_rlimits {
    uint64_t file_max; /* RLIMIT_FSIZE (soft): the largest file it may write */
    uint64_t as_free;  /* RLIMIT_AS (soft) less the address space it has mapped */
    uint64_t mem_free; /* its memory cgroup's limit (the least of its and its ancestors') less
                        * what the cgroup uses; tmpfs pages count there */
} ts_rlimits;

/* Reads this process's limits now (never fails: what cannot be read is no limit). */
void rlimits_read(ts_rlimits *l);

/* The same from files of another root (tests): proc_cgroup for /proc/self/cgroup, cgroup_root
 * for /sys/fs/cgroup; the rlimits and address space are this process's. */
void rlimits_read_at(ts_rlimits *l, const char *proc_cgroup, const char *cgroup_root);

/* The most bytes one mapping of termsight's may span under l: a TS_RLIMITS_SHARE-th of the
 * address space left and, when file is 1 (a file it sizes: a shm object), no more than the
 * file-size limit. UINT64_MAX when nothing limits it. */
uint64_t rlimits_map_max(const ts_rlimits *l, int file);

/* The most bytes of shared memory a new process tree may have under l: a TS_RLIMITS_SHARE-th of
 * the memory its cgroup has left. UINT64_MAX when unlimited. */
uint64_t rlimits_shm_max(const ts_rlimits *l);

/* 0 when a file of this process may reach end bytes, or -1 with errno EFBIG when RLIMIT_FSIZE
 * forbids it (past it, the kernel ends the process with SIGXFSZ unless it ignores that signal,
 * which is the program's to choose). */
int rlimits_file_check(uint64_t end);

/* Says which of l's limits bound max bytes ("the file-size limit (ulimit -f) of 540 MiB", ...)
 * into buf; "" when none does. */
void rlimits_describe(const ts_rlimits *l, uint64_t max, char *buf, size_t cap);

#endif
