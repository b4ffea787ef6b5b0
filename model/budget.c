/* budget: the shared-memory ledger of a process tree.
 *
 * Every byte of /dev/shm that the segments of one process tree have (their pages made present:
 * headers, names, rings) is taken from one ledger first, and given back when the pages go (a
 * grown ring freed, a segment unlinked, a dead process's segment reaped). A request that would
 * pass the ledger's limit is refused: the caller goes without (no lane, no larger ring, no name,
 * no segment) and counts what it drops, instead of touching pages a full file system would answer
 * with SIGBUS, for the program too.
 *
 * The ledger is one page of shared memory. A process that starts a tree has an anonymous one,
 * which its forked children share; `termsight run` makes a named one ("/termsight-budget-<pid>-
 * <16 hex>") and names it to the programs it starts (TERMSIGHT_SHM_BUDGET), so that what they
 * exec and fork shares it too. Any process of the user can write into a named ledger: a damaged
 * one misleads its tree only, and every value read from it is bounded before use. */
#include "model.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define BUDGET_SIZE 4096u

static uint64_t random_id(void)
{
    uint64_t r = 0;
    while (!r)
        if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
            r = (uint64_t)getpid() << 32 ^ (uint64_t)(uintptr_t)&r;
    return r;
}

static void budget_init(ts_shm_budget *b, uint64_t limit)
{
    b->id = random_id();
    b->limit = limit;
    b->uid = geteuid();
    atomic_thread_fence(memory_order_release);
    b->magic = TS_BUDGET_MAGIC;
}

ts_shm_budget *budget_create_private(uint64_t limit)
{
    void *m = mmap(NULL, BUDGET_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    budget_init(m, limit);
    return m;
}

int budget_create_named(uint64_t limit, char *name, size_t cap, ts_shm_budget **out, char **cause)
{
    *out = NULL;
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 16; tries++) {
        snprintf(name, cap, "/" TS_BUDGET_PREFIX "%d-%016llx", (int)getpid(),
                 (unsigned long long)random_id());
        fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0)
        return cause_set(cause, "cannot create the shared-memory ledger: %s", strerror(errno));
    void *m = MAP_FAILED;
    if (fchmod(fd, 0600) == 0 && rlimits_file_check(BUDGET_SIZE) == 0 &&
        posix_fallocate(fd, 0, BUDGET_SIZE) == 0)
        m = mmap(NULL, BUDGET_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (m == MAP_FAILED) {
        shm_unlink(name);
        return cause_set(cause, "cannot have the shared-memory ledger: %s", strerror(e));
    }
    budget_init(m, limit);
    *out = m;
    return 0;
}

int budget_attach(const char *name, ts_shm_budget **out, char **cause)
{
    *out = NULL;
    if (!name || name[0] != '/' || strchr(name + 1, '/') ||
        strncmp(name + 1, TS_BUDGET_PREFIX, strlen(TS_BUDGET_PREFIX)))
        return cause_set(cause, "%s is not a termsight ledger name", name ? name : "(null)");
    int fd = shm_open(name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0);
    if (fd < 0)
        return cause_set(cause, "%s: %s", name, strerror(errno));
    struct stat st;
    void *m = MAP_FAILED;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
        st.st_size == BUDGET_SIZE)
        m = mmap(NULL, BUDGET_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return cause_set(cause, "%s is not a ledger of yours", name);
    ts_shm_budget *b = m;
    if (b->magic != TS_BUDGET_MAGIC || b->uid != geteuid() || !b->id) {
        munmap(m, BUDGET_SIZE);
        return cause_set(cause, "%s is not a termsight ledger", name);
    }
    *out = b;
    return 0;
}

void budget_close(ts_shm_budget *b)
{
    if (b)
        munmap(b, BUDGET_SIZE);
}

int budget_take(ts_shm_budget *b, uint64_t bytes)
{
    if (!b)
        return 0;
    uint64_t limit = b->limit;
    uint64_t used = atomic_load_explicit(&b->used, memory_order_relaxed);
    do {
        if (used > limit || bytes > limit - used) {
            atomic_fetch_add_explicit(&b->refused, 1, memory_order_relaxed);
            return -1;
        }
    } while (!atomic_compare_exchange_weak_explicit(&b->used, &used, used + bytes,
                                                    memory_order_relaxed, memory_order_relaxed));
    uint64_t peak = atomic_load_explicit(&b->peak, memory_order_relaxed);
    while (peak < used + bytes &&
           !atomic_compare_exchange_weak_explicit(&b->peak, &peak, used + bytes,
                                                  memory_order_relaxed, memory_order_relaxed))
        ;
    return 0;
}

void budget_give(ts_shm_budget *b, uint64_t bytes)
{
    if (!b)
        return;
    uint64_t used = atomic_load_explicit(&b->used, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&b->used, &used, used > bytes ? used - bytes : 0,
                                                  memory_order_relaxed, memory_order_relaxed))
        ;
}

int budget_remove_orphans(void)
{
    DIR *d = opendir("/dev/shm");
    if (!d)
        return 0;
    int removed = 0;
    size_t pl = strlen(TS_BUDGET_PREFIX);
    for (struct dirent *e; (e = readdir(d));) {
        uint32_t pid;
        char digits[16];
        const char *p = e->d_name + pl, *dash;
        struct stat st;
        if (strncmp(e->d_name, TS_BUDGET_PREFIX, pl) || !(dash = strchr(p, '-')) ||
            (size_t)(dash - p) >= sizeof digits)
            continue;
        memcpy(digits, p, (size_t)(dash - p));
        digits[dash - p] = 0;
        if (options_parse_u32(digits, 1, INT32_MAX, &pid) != 0 ||
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_uid != geteuid() ||
            kill((pid_t)pid, 0) == 0 || errno == EPERM)
            continue; /* not ours, or its maker lives */
        removed += unlinkat(dirfd(d), e->d_name, 0) == 0;
    }
    closedir(d);
    return removed;
}

int budget_limit_for(uint64_t available, const char *mb, uint64_t *limit, char **cause)
{
    if (mb && *mb) {
        uint32_t v;
        if (options_parse_u32(mb, 1, TS_BUDGET_MB_MAX, &v) != 0)
            return cause_set(cause, "TERMSIGHT_SHM_BUDGET_MB=%s is invalid: from 1 to %u MiB", mb,
                             TS_BUDGET_MB_MAX);
        *limit = (uint64_t)v << 20;
        return 0;
    }
    uint64_t share = available == UINT64_MAX ? TS_BUDGET_CEILING : available / TS_BUDGET_SHARE;
    ts_rlimits lim;
    rlimits_read(&lim);
    uint64_t cgroup = rlimits_shm_max(&lim); /* tmpfs pages count against a memory cgroup */
    share = share < cgroup ? share : cgroup;
    *limit = share < TS_BUDGET_CEILING ? share : TS_BUDGET_CEILING;
    return 0;
}
