/* rlimits: what the process's resource limits leave to termsight.
 *
 * A program that runs under a file-size limit (RLIMIT_FSIZE, `ulimit -f`), an address-space
 * limit (RLIMIT_AS, `ulimit -v`) or a memory cgroup must run under termsight too. termsight's
 * shared-memory objects are files that count against the file-size limit when they are sized
 * (ftruncate past it raises SIGXFSZ, which ends the process), its mappings count against the
 * address space whether their pages are had or not, and its tmpfs pages count against the
 * memory cgroup. So the segment, the flight recorder's ring and the tree's shared-memory budget
 * are sized from what these limits leave, read when they are made, and every file termsight
 * writes is checked against the file-size limit before it grows. */
#include "model.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define LIMIT_NONE_V1 (1ull << 62) /* cgroup v1 writes "no limit" as a page-rounded LONG_MAX */

/* The first unsigned number in the file at path: 0 and *v, or -1 ("max", absent, unreadable). */
static int read_u64(const char *path, uint64_t *v)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return -1;
    char buf[64];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(buf, &end, 10);
    if (errno || end == buf)
        return -1;
    *v = x;
    return 0;
}

/* The least of limit less usage in dir and each folder above it up to root. */
static uint64_t cgroup_free(const char *root, const char *path, const char *max_file,
                            const char *cur_file)
{
    char dir[4096];
    uint64_t best = UINT64_MAX;
    int n = snprintf(dir, sizeof dir, "%s%s", root, path);
    if (n < 0 || (size_t)n >= sizeof dir)
        return best;
    size_t rl = strlen(root);
    for (;;) {
        size_t dl = strlen(dir);
        while (dl > rl && dir[dl - 1] == '/')
            dir[--dl] = 0;
        char f[4200];
        uint64_t max, cur;
        snprintf(f, sizeof f, "%s/%s", dir, max_file);
        if (read_u64(f, &max) == 0 && max < LIMIT_NONE_V1) {
            snprintf(f, sizeof f, "%s/%s", dir, cur_file);
            if (read_u64(f, &cur) != 0)
                cur = 0;
            uint64_t left = cur < max ? max - cur : 0;
            best = left < best ? left : best;
        }
        char *slash = strrchr(dir, '/');
        if (dl <= rl || !slash || (size_t)(slash - dir) < rl)
            break;
        *slash = 0;
    }
    return best;
}

/* The memory cgroup's room for this process from a /proc/<pid>/cgroup file. */
static uint64_t mem_free_at(const char *proc_cgroup, const char *cgroup_root)
{
    FILE *f = fopen(proc_cgroup, "re");
    if (!f)
        return UINT64_MAX;
    uint64_t best = UINT64_MAX, left;
    char line[4096], root[512];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = *c2 = 0;
        const char *ctrl = c1 + 1, *path = c2 + 1;
        if (!strcmp(line, "0") && !*ctrl) { /* v2: "0::/path" */
            left = cgroup_free(cgroup_root, path, "memory.max", "memory.current");
        } else if (!strcmp(ctrl, "memory") || strstr(ctrl, ",memory") ||
                   !strncmp(ctrl, "memory,", 7)) {
            snprintf(root, sizeof root, "%s/memory", cgroup_root);
            left = cgroup_free(root, path, "memory.limit_in_bytes", "memory.usage_in_bytes");
        } else {
            continue;
        }
        best = left < best ? left : best;
    }
    fclose(f);
    return best;
}

/* The address space this process has mapped: VmSize, from /proc/self/statm (in pages). */
static uint64_t as_used(void)
{
    uint64_t pages;
    if (read_u64("/proc/self/statm", &pages) != 0)
        return 0;
    return pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

static uint64_t soft_limit(int resource)
{
    struct rlimit r;
    if (getrlimit(resource, &r) != 0 || r.rlim_cur == RLIM_INFINITY)
        return UINT64_MAX;
    return (uint64_t)r.rlim_cur;
}

void rlimits_read_at(ts_rlimits *l, const char *proc_cgroup, const char *cgroup_root)
{
    l->file_max = soft_limit(RLIMIT_FSIZE);
    uint64_t as = soft_limit(RLIMIT_AS), used = as == UINT64_MAX ? 0 : as_used();
    l->as_free = as == UINT64_MAX ? as : as > used ? as - used : 0;
    l->mem_free = mem_free_at(proc_cgroup, cgroup_root);
}

void rlimits_read(ts_rlimits *l)
{
    rlimits_read_at(l, "/proc/self/cgroup", "/sys/fs/cgroup");
}

static uint64_t share(uint64_t v)
{
    return v == UINT64_MAX ? v : v / TS_RLIMITS_SHARE;
}

static uint64_t least(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

uint64_t rlimits_map_max(const ts_rlimits *l, int file)
{
    return least(share(l->as_free), file ? l->file_max : UINT64_MAX);
}

uint64_t rlimits_shm_max(const ts_rlimits *l)
{
    return share(l->mem_free);
}

int rlimits_file_check(uint64_t end)
{
    if (end <= soft_limit(RLIMIT_FSIZE))
        return 0;
    errno = EFBIG;
    return -1;
}

void rlimits_describe(const ts_rlimits *l, uint64_t max, char *buf, size_t cap)
{
    if (max == l->file_max)
        snprintf(buf, cap, "the file-size limit (ulimit -f) of %llu KiB",
                 (unsigned long long)(l->file_max >> 10));
    else if (max == share(l->as_free))
        snprintf(buf, cap, "a %dth of the %llu MiB of address space left (ulimit -v)",
                 TS_RLIMITS_SHARE, (unsigned long long)(l->as_free >> 20));
    else if (max == share(l->mem_free))
        snprintf(buf, cap, "a %dth of the %llu MiB its memory cgroup has left", TS_RLIMITS_SHARE,
                 (unsigned long long)(l->mem_free >> 20));
    else
        snprintf(buf, cap, "%s", "");
}
