/* model: the shared-memory ledger of a process tree (budget.c). */
#ifndef TERMSIGHT_MODEL_BUDGET_H
#define TERMSIGHT_MODEL_BUDGET_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define TS_BUDGET_MAGIC   0x5447445542535354ull /* "TSSBUDGT" little-endian */
#define TS_BUDGET_PREFIX  "termsight-budget-"   /* a named ledger: /dev/shm/<this><pid>-<hex> */
#define TS_BUDGET_SHARE   4                     /* a tree has a quarter of what /dev/shm has free */
#define TS_BUDGET_CEILING (2ull << 30)          /* ... and 2 GiB at most */
#define TS_BUDGET_MB_MAX  1048576u              /* TERMSIGHT_SHM_BUDGET_MB: up to 1 TiB */

/* One page, shared by the processes of a tree. Any process of the user may write a named one:
 * readers bound what they read, and a damaged ledger misleads its own tree only. */
typedef struct ts_shm_budget {
    uint64_t magic; /* TS_BUDGET_MAGIC, written last */
    uint64_t id;    /* random, never 0: segments charged to it say it (budget_id) */
    uint64_t limit; /* bytes the tree's segments may have */
    uint32_t uid;   /* its creator */
    uint32_t pad;
    _Atomic uint64_t used;    /* bytes had now */
    _Atomic uint64_t peak;    /* the most had at once */
    _Atomic uint64_t refused; /* requests refused */
} ts_shm_budget;

/* An anonymous ledger of limit bytes (a tree's first process; its forked children share it).
 * NULL when it cannot be mapped. */
ts_shm_budget *budget_create_private(uint64_t limit);
/* A named ledger ("/termsight-budget-<pid>-<hex>" into name) for processes that exec. 0, or -1
 * with *cause. The creator unlinks the name when the tree ends (shm_unlink). */
int budget_create_named(uint64_t limit, char *name, size_t cap, ts_shm_budget **out, char **cause);
/* Maps the named ledger of this user: 0, or -1 with *cause (not one, not ours, damaged). */
int budget_attach(const char *name, ts_shm_budget **out, char **cause);
void budget_close(ts_shm_budget *b);
/* Takes bytes from the ledger: 0, or -1 (refused and counted) when that would pass its limit.
 * A NULL ledger has no limit. */
int budget_take(ts_shm_budget *b, uint64_t bytes);
/* Gives bytes back (never below 0). */
void budget_give(ts_shm_budget *b, uint64_t bytes);
/* Removes this user's named ledgers whose maker (termsight run) is gone without removing them
 * (it was killed): the count removed. */
int budget_remove_orphans(void);
/* The limit of a new tree's ledger: TERMSIGHT_SHM_BUDGET_MB (mb) when set, else a
 * TS_BUDGET_SHARE-th of what /dev/shm has free (available), no more than the memory cgroup
 * allows (rlimits_shm_max), at most TS_BUDGET_CEILING. 0, or -1 with *cause when mb does not
 * parse. */
int budget_limit_for(uint64_t available, const char *mb, uint64_t *limit, char **cause);

#endif
