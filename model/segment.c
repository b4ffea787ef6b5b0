/* segment: the shared-memory object a collector creates and frontends attach to.
 *
 * Layout: header page, lane records, rings, grow region, string index, string arena, boards
 * (board.c); every region page-aligned and described by offsets in the header. The mailbox, the one
 * thing a monitor writes, is an object of its own beside it ("<name>-ctl"). Attach trusts nothing:
 * sizes, offsets and counts are checked against the real size of the mapping before any is used,
 * and every later access goes through segment_at(). */
#include "segment_internal.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

static int populate(void *p, uint64_t len);

/* Takes len bytes from the tree's ledger for pages about to be had: 0, or -1 when it refuses. */
int segment_charge(segment *s, uint64_t len)
{
    if (budget_take(s->budget, len) != 0)
        return -1;
    uint64_t c = atomic_fetch_add_explicit(&s->charged, len, memory_order_relaxed) + len;
    atomic_store_explicit(&segment_header(s)->budget_charged, c, memory_order_relaxed);
    return 0;
}

/* Gives back len bytes of what this segment took (at most all of it). */
void segment_discharge(segment *s, uint64_t len)
{
    uint64_t c = atomic_load_explicit(&s->charged, memory_order_relaxed), left;
    do
        left = c > len ? c - len : 0;
    while (!atomic_compare_exchange_weak_explicit(&s->charged, &c, left, memory_order_relaxed,
                                                  memory_order_relaxed));
    budget_give(s->budget, c - left);
    atomic_store_explicit(&segment_header(s)->budget_charged, left, memory_order_relaxed);
}

/* Has the pages of [p, p + len), taken from the ledger first. 0; -1 when the ledger refuses
 * (*refused 1) or shared memory is full (*refused 0; what was taken is given back). */
int segment_have(segment *s, void *p, uint64_t len, int *refused)
{
    *refused = segment_charge(s, len) != 0;
    if (*refused)
        return -1;
    if (populate(p, len) != 0) {
        segment_discharge(s, len);
        return -1;
    }
    return 0;
}

/* a then b into buf of cap bytes: 0, or -1 with errno ENAMETOOLONG when they do not fit (a
 * name cut short would name some other object). */
int segment_join2(char *buf, size_t cap, const char *a, const char *b)
{
    int n = snprintf(buf, cap, "%s%s", a, b);
    if (n < 0 || (size_t)n >= cap) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

/* Creates and maps the control object beside the segment named name. 0, or -1 with errno. */
static int ctl_create(const char *name, ts_mailbox **out)
{
    char ctl[96];
    if (segment_join2(ctl, sizeof ctl, name, CTL_SUFFIX) != 0)
        return -1;
    int fd = shm_open(ctl, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    void *m = MAP_FAILED;
    if (fchmod(fd, 0600) == 0 && rlimits_file_check(CTL_SIZE) == 0 && ftruncate(fd, CTL_SIZE) == 0)
        m = mmap(NULL, CTL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (m == MAP_FAILED || populate(m, CTL_SIZE) != 0) {
        e = errno;
        if (m != MAP_FAILED)
            munmap(m, CTL_SIZE);
        shm_unlink(ctl);
        errno = e;
        return -1;
    }
    *out = m;
    return 0;
}

/* Unmaps (when mapped) and removes (when a shm name) the control object beside name. */
static void ctl_remove(const char *name, ts_mailbox *m)
{
    if (m)
        munmap(m, CTL_SIZE);
    if (name[0] == '/' && !strchr(name + 1, '/')) {
        char ctl[96];
        if (segment_join2(ctl, sizeof ctl, name, CTL_SUFFIX) == 0)
            shm_unlink(ctl);
    }
}

/* Opens and maps, writable, the control object beside the segment named label (a shm name, or
 * a path for a file copy): it must be a regular file of this user, of the control object's
 * size. 0, or -1 with *cause. */
static int ctl_attach(const char *label, ts_mailbox **out, char **cause)
{
    char ctl[4200];
    if (segment_join2(ctl, sizeof ctl, label, CTL_SUFFIX) != 0)
        return cause_set(cause, "%s: name too long", label);
    int flags = O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
    int is_shm = label[0] == '/' && !strchr(label + 1, '/');
    int fd = is_shm ? shm_open(ctl, flags, 0) : open(ctl, flags);
    if (fd < 0)
        return cause_set(cause, "%s: no control object for commands (%s)", label, strerror(errno));
    struct stat st;
    void *m = MAP_FAILED;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
        (uint64_t)st.st_size >= CTL_SIZE)
        m = mmap(NULL, CTL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return cause_set(cause, "%s: its control object is not one of yours, or not whole", label);
    *out = m;
    return 0;
}

static void geometry_from(segment *s, const ts_segment_header *h)
{
    s->g = (segment_geometry){.lane_count = h->lane_count,
                              .lane_events = h->lane_events,
                              .lane_max_events = h->lane_max_events,
                              .grow_off = h->grow_off,
                              .grow_bytes = h->grow_bytes,
                              .string_max = h->string_max,
                              .string_arena = h->string_arena,
                              .lanes_off = h->lanes_off,
                              .rings_off = h->rings_off,
                              .string_index_off = h->string_index_off,
                              .string_arena_off = h->string_arena_off,
                              .mailbox_off = h->mailbox_off,
                              .board_off = h->board_off};
}

/* Region sizes for a configuration, the same computation for create and validate. */
typedef struct layout {
    uint64_t lanes_off, rings_off, grow_off, string_index_off, string_arena_off, mailbox_off;
    uint64_t board_off, size;
} layout;

/* The grow region for a budget: twice it, so that rings freed in one size never keep another
 * size from its budget (the region is sparse: only rings in use have pages). */
static uint64_t grow_bytes_of(uint64_t budget)
{
    return budget ? segment_round_up(2 * budget, PAGE) : 0;
}

static layout layout_of(uint64_t lanes, uint64_t lane_events, uint64_t grow_bytes, uint64_t strings,
                        uint64_t arena)
{
    layout l;
    l.lanes_off = PAGE;
    l.rings_off = segment_round_up(l.lanes_off + lanes * sizeof(ts_lane), PAGE);
    l.grow_off = l.rings_off + lanes * lane_events * sizeof(ts_event);
    l.string_index_off = l.grow_off + grow_bytes;
    l.string_arena_off = segment_round_up(l.string_index_off + strings * sizeof(uint32_t), PAGE);
    l.mailbox_off = 0; /* the mailbox is in the control object (ctl_create) */
    l.board_off = segment_round_up(l.string_arena_off + arena, PAGE);
    l.size = segment_round_up(l.board_off + sizeof(ts_board), PAGE);
    return l;
}

void segment_copy_field(char *dst, size_t cap, const char *src, size_t src_cap)
{
    size_t n = strnlen(src, src_cap < cap ? src_cap : cap - 1);
    memcpy(dst, src, n);
    dst[n] = 0;
}

void segment_copy_str(char *dst, size_t cap, const char *src)
{
    if (!src)
        src = "";
    size_t n = strnlen(src, cap - 1);
    memcpy(dst, src, n);
    dst[n] = 0;
}

/* A fresh name for pid's segment: "/termsight-<pid>-<16 hex digits from getrandom>", so that no
 * one can take it first by guessing it from the pid. */
static void shm_name_new(pid_t pid, char *out, size_t cap)
{
    uint64_t r;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        r = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)(uintptr_t)out << 3);
    }
    snprintf(out, cap, "/" TS_SEGMENT_PREFIX "%d-%016llx", (int)pid, (unsigned long long)r);
}

#define CREATE_TRIES 16 /* names tried before giving up: each taken one was a planted object */

/* Makes the pages of [p, p + len) present and writable (MADV_POPULATE_WRITE, Linux 5.14): on a
 * full tmpfs that fails with an error instead of a SIGBUS at the first store. 0 also where the
 * kernel does not know the advice (the pages then come as they are touched). */
static int populate(void *p, uint64_t len)
{
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)(PAGE - 1);
    len += (uintptr_t)p - a;
    if (madvise((void *)a, len, MADV_POPULATE_WRITE) == 0 || errno == EINVAL)
        return 0;
    return -1;
}

uint64_t segment_shm_available(void)
{
    struct statvfs v;
    if (statvfs(SHM_DIR, &v) != 0)
        return UINT64_MAX;
    return (uint64_t)v.f_bavail * v.f_frsize;
}

/* The pid in a name of SHM_DIR: "termsight-<pid>-<16 hex digits>", or "termsight-<pid>" (the
 * names older versions gave, still listed so that they can be cleaned). 1 and *pid, or 0. */
int segment_parse_pid(const char *entry, pid_t *pid)
{
    size_t pl = strlen(TS_SEGMENT_PREFIX);
    if (strncmp(entry, TS_SEGMENT_PREFIX, pl))
        return 0;
    const char *d = entry + pl;
    if (!*d || *d == '0') /* the pid is written without leading zeros */
        return 0;
    long v = 0;
    for (; *d >= '0' && *d <= '9'; d++) {
        if (v > 1000000000L)
            return 0;
        v = v * 10 + (*d - '0');
    }
    if (*d == '-') {
        size_t hex = strspn(d + 1, "0123456789abcdef");
        if (hex != 16 || d[17])
            return 0;
    } else if (*d) {
        return 0;
    }
    if (v <= 0)
        return 0;
    *pid = (pid_t)v;
    return 1;
}

/* Fills pn with pid's names: 0, or -1 with *cause when SHM_DIR cannot be read (pn->own is then
 * NULL). Free pn->own. */
int segment_names_of_pid(pid_t pid, pid_names *pn, char **cause)
{
    memset(pn, 0, sizeof *pn);
    DIR *d = opendir(SHM_DIR);
    if (!d)
        return cause_set(cause, "cannot read " SHM_DIR ": %s", strerror(errno));
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        pid_t p;
        struct stat st;
        if (!segment_parse_pid(e->d_name, &p) || p != pid ||
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (st.st_uid != geteuid()) {
            if (!pn->foreign++)
                snprintf(pn->why, sizeof pn->why, "/%.62s belongs to uid %u, not to you (uid %u)",
                         e->d_name, (unsigned)st.st_uid, (unsigned)geteuid());
            continue;
        }
        if (pn->n == cap) {
            cap = cap ? cap * 2 : 4;
            char(*grown)[64] = realloc(pn->own, (size_t)cap * sizeof *grown);
            if (!grown) {
                closedir(d);
                free(pn->own);
                pn->own = NULL;
                return cause_set(cause, "out of memory");
            }
            pn->own = grown;
        }
        snprintf(pn->own[pn->n++], 64, "/%.62s", e->d_name); /* segment_parse_pid: at most 37 */
    }
    closedir(d);
    return 0;
}

/* The message when pid has no name of this user's: the first one passed over, or none. */
int segment_no_own_name(pid_t pid, const pid_names *pn, char **cause)
{
    if (!pn->foreign)
        return cause_set(cause, "pid %d: no such segment", (int)pid);
    if (pn->foreign == 1)
        return cause_set(cause, "%s", pn->why);
    return cause_set(cause, "%s (and %d more names of pid %d that are not yours)", pn->why,
                     pn->foreign - 1, (int)pid);
}

/* A new lane record's rings: its first ring alone. No reader can see the record before the
 * header's magic is published, so no sequence lock is needed here (lane.c rewrites the ring
 * fields of a lane in use under one). */
static void first_ring(ts_lane *l, uint64_t off, uint32_t events)
{
    atomic_store_explicit(&l->ring_off, off, memory_order_relaxed);
    atomic_store_explicit(&l->ring_events, events, memory_order_relaxed);
}

/* cfg's sizes, checked: 0 and the largest ring a lane may grow to, or -1 with *cause. */
static int config_check(const segment_config *cfg, uint32_t *max_events, char **cause)
{
    if (cfg->lane_count < 1 || cfg->lane_count > LANES_MAX)
        return cause_set(cause, "lane count %u outside 1..%u", cfg->lane_count, LANES_MAX);
    if (!segment_is_pow2(cfg->lane_events) || cfg->lane_events < LANE_EVENTS_MIN ||
        cfg->lane_events > LANE_EVENTS_MAX)
        return cause_set(cause, "lane size %u is not a power of two in %u..%u", cfg->lane_events,
                         LANE_EVENTS_MIN, LANE_EVENTS_MAX);
    uint32_t max = cfg->lane_max_events ? cfg->lane_max_events : cfg->lane_events;
    if (!segment_is_pow2(max) || max < cfg->lane_events || max > LANE_EVENTS_MAX)
        return cause_set(cause, "largest lane size %u is not a power of two in %u..%u", max,
                         cfg->lane_events, LANE_EVENTS_MAX);
    if (cfg->grow_budget > GROW_BUDGET_MAX)
        return cause_set(cause, "lane growth budget %llu bytes over %llu",
                         (unsigned long long)cfg->grow_budget, GROW_BUDGET_MAX);
    if (cfg->string_max < STRINGS_MIN || cfg->string_max > STRINGS_MAX)
        return cause_set(cause, "string table size %u outside %u..%u", cfg->string_max, STRINGS_MIN,
                         STRINGS_MAX);
    if (cfg->string_arena < ARENA_MIN || cfg->string_arena > ARENA_MAX)
        return cause_set(cause, "string arena %u bytes outside %u..%u", cfg->string_arena,
                         ARENA_MIN, ARENA_MAX);
    *max_events = max;
    return 0;
}

/* The bytes of the ledger a new segment takes from the start, or -1 with *cause when the ledger
 * refuses them. */
static int budget_first(const segment_config *cfg, const layout *l, uint64_t *fixed, char **cause)
{
    /* What a segment has from the start: the header and lane records, the boards' head, the
     * control object. The names' pages come as names do (strtab.c), the rings' as lanes do. */
    *fixed = l->rings_off + segment_round_up(offsetof(ts_board, ops), PAGE) + CTL_SIZE;
    if (budget_take(cfg->budget, *fixed) == 0)
        return 0;
    const ts_shm_budget *b = cfg->budget;
    unsigned long long used = atomic_load(&((ts_shm_budget *)b)->used) >> 10;
    return cause_set(cause,
                     "the shared-memory budget of this process tree has no room for a segment's "
                     "first %llu KiB (%llu of %llu KiB in use; TERMSIGHT_SHM_BUDGET_MB sets it)",
                     (unsigned long long)(*fixed >> 10), used,
                     (unsigned long long)(b->limit >> 10));
}

/* A new shared-memory object of pid's, its name into name, and its control object beside it
 * (*mailbox): the descriptor, or -1 with errno. Both exclusively, under names nobody can predict:
 * whatever sits at a taken one (another user's object, a link, a FIFO) is never opened, followed,
 * replaced or removed; both names are drawn again (the segment's just made is removed, it is
 * ours). */
static int shm_create_new(pid_t pid, char *name, size_t cap, ts_mailbox **mailbox)
{
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < CREATE_TRIES; tries++) {
        shm_name_new(pid, name, cap);
        fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
        if (fd < 0 && errno != EEXIST)
            break;
        if (fd < 0 || ctl_create(name, mailbox) == 0)
            continue;
        int e = errno;
        close(fd);
        shm_unlink(name);
        fd = -1;
        errno = e;
        if (e != EEXIST)
            break;
    }
    return fd;
}

/* Sizes and maps the new object fd for s, read-only for others after: the mapping, or
 * MAP_FAILED with errno and *what saying which step failed. */
static void *map_new(int fd, const layout *l, const char **what)
{
    int e;
    *what = "cannot size shared memory";
    if (fchmod(fd, 0600) != 0 || rlimits_file_check(l->size) != 0 ||
        ftruncate(fd, (off_t)l->size) != 0)
        return MAP_FAILED;
    *what = "cannot map shared memory";
    void *base = mmap(NULL, l->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED)
        return MAP_FAILED;
    /* Everything but the rings is written from the start: its pages are had now, so that a
     * full shared-memory file system fails here, with a message, rather than kill the process
     * with SIGBUS at its first store. The rings are had lane by lane (segment_lane_ready). */
    *what = "cannot have the shared memory the segment starts with";
    if (populate(base, l->rings_off) != 0 ||
        populate((uint8_t *)base + l->board_off, offsetof(ts_board, ops)) != 0)
        goto unmap;
    /* The mailbox, the one thing a monitor writes, lives in an object of its own (made with the
     * name, shm_create_new); the segment is read-only for every process but this one (which
     * keeps its writable mapping): a monitor that strays cannot write into lanes or names,
     * whatever the collector already does not trust there. */
    *what = "cannot make the segment read-only for others";
    if (fchmod(fd, 0400) == 0)
        return base;
unmap:
    e = errno;
    munmap(base, l->size);
    errno = e;
    return MAP_FAILED;
}

/* The creator's own state beside the segment: the lanes' control blocks, which lanes are
 * ready, the growth state. 0, or -1 without memory. */
static int creator_state(segment *s, uint32_t lanes)
{
    s->ctl = aligned_alloc(_Alignof(ts_lane), lanes * sizeof(ts_lane));
    s->ready = calloc(lanes, 1);
    s->grow = calloc(lanes, sizeof *s->grow);
    if (!s->ctl || !s->ready || !s->grow)
        return -1;
    memset(s->ctl, 0, lanes * sizeof(ts_lane));
    pthread_mutex_init(&s->ready_lock, NULL);
    s->ready_lock_made = 1;
    return 0;
}

/* The header of a new segment of pid laid out as l, all but the magic. */
static void header_fill(ts_segment_header *h, const segment_config *cfg, pid_t pid, const layout *l,
                        uint32_t max_events, uint64_t grow_bytes, uint64_t fixed)
{
    h->endian = 0x01020304u;
    h->major = TS_SEGMENT_MAJOR;
    h->minor = TS_SEGMENT_MINOR;
    h->header_size = sizeof(ts_segment_header);
    h->event_size = sizeof(ts_event);
    h->lane_size = sizeof(ts_lane);
    h->word_size = sizeof(void *);
    h->segment_size = l->size;
    h->pid = pid;
    h->uid = geteuid();
    segment_copy_str(h->process, sizeof h->process, cfg->process);
    segment_copy_str(h->clock, sizeof h->clock, cfg->clock);
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    h->start_realtime_ns = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
    h->start_ns = cfg->start_ns;
    segment_copy_str(h->run_folder, sizeof h->run_folder, cfg->run_folder);
    segment_copy_str(h->job, sizeof h->job, cfg->job ? cfg->job : "");
    segment_copy_str(h->host, sizeof h->host, cfg->host ? cfg->host : "");
    int in_job = cfg->job && *cfg->job;
    h->rank = in_job && cfg->rank >= 0 ? cfg->rank : -1;
    h->local_rank = in_job && cfg->local_rank >= 0 ? cfg->local_rank : -1;
    h->world_size = in_job && cfg->world_size > 0 ? cfg->world_size : -1;
    h->parent_pid = cfg->parent_pid > 0 ? cfg->parent_pid : 0;
    h->lane_count = cfg->lane_count;
    h->lane_events = cfg->lane_events;
    h->lanes_off = l->lanes_off;
    h->rings_off = l->rings_off;
    h->lane_max_events = max_events;
    h->grow_off = l->grow_off;
    h->grow_bytes = grow_bytes;
    h->string_max = cfg->string_max;
    h->string_arena = cfg->string_arena;
    h->string_index_off = l->string_index_off;
    h->string_arena_off = l->string_arena_off;
    h->mailbox_off = l->mailbox_off;
    h->board_off = l->board_off;
    h->budget_id = cfg->budget ? cfg->budget->id : 0;
    atomic_store_explicit(&h->budget_charged, fixed, memory_order_relaxed);
}

/* Shrinks c until its segment spans at most c->size_max bytes (0: any size), since the whole
 * span is sized (a file: RLIMIT_FSIZE) and mapped (RLIMIT_AS) even where its pages are not had:
 * the rings' growth region first, then the first rings, then the name table. The layout into
 * *l: 0, or -1 with *cause when even the smallest segment is over. */
static int config_fit(segment_config *c, uint32_t *max_events, uint64_t *grow_bytes, layout *l,
                      char **cause)
{
    for (;;) {
        *grow_bytes = *max_events > c->lane_events ? grow_bytes_of(c->grow_budget) : 0;
        *l = layout_of(c->lane_count, c->lane_events, *grow_bytes, c->string_max, c->string_arena);
        if (!c->size_max || l->size <= c->size_max)
            return 0;
        if (*grow_bytes && c->grow_budget / 2 >= (uint64_t)c->lane_events * 2 * sizeof(ts_event)) {
            c->grow_budget /= 2; /* still room for a ring twice the first */
        } else if (*grow_bytes || *max_events > c->lane_events) {
            c->grow_budget = 0;
            *max_events = c->lane_events;
        } else if (c->lane_events > LANE_EVENTS_MIN) {
            c->lane_events /= 2;
            *max_events = c->lane_events;
        } else if (c->string_arena / 2 >= ARENA_MIN || c->string_max / 2 >= STRINGS_MIN) {
            c->string_arena = c->string_arena / 2 >= ARENA_MIN ? c->string_arena / 2 : ARENA_MIN;
            c->string_max = c->string_max / 2 >= STRINGS_MIN ? c->string_max / 2 : STRINGS_MIN;
        } else {
            return cause_set(cause,
                             "the smallest segment (%llu bytes for %u threads) is over the %llu "
                             "bytes the process's limits leave",
                             (unsigned long long)l->size, c->lane_count,
                             (unsigned long long)c->size_max);
        }
    }
}

int segment_create(const segment_config *asked, segment **out, char **cause)
{
    *out = NULL;
    uint32_t max_events = 0;
    segment_config fitted = *asked;
    const segment_config *cfg = &fitted;
    uint64_t grow_bytes;
    layout l;
    if (config_check(cfg, &max_events, cause) != 0 ||
        config_fit(&fitted, &max_events, &grow_bytes, &l, cause) != 0)
        return -1;
    pid_t pid = cfg->pid ? cfg->pid : getpid();
    uint64_t fixed = 0;
    if (budget_first(cfg, &l, &fixed, cause) != 0)
        return -1;
    segment *s = calloc(1, sizeof *s);
    if (!s) {
        budget_give(cfg->budget, fixed);
        return cause_set(cause, "out of memory");
    }
    int fd = shm_create_new(pid, s->name, sizeof s->name, &s->mailbox);
    if (fd < 0) {
        int e = errno;
        char name[64];
        segment_copy_str(name, sizeof name, s->name);
        free(s);
        budget_give(cfg->budget, fixed);
        return cause_set(cause,
                         "cannot create shared memory " SHM_DIR "%s or its control object: %s",
                         name, strerror(e));
    }
    const char *what;
    void *base = map_new(fd, &l, &what);
    if (base == MAP_FAILED) {
        int e = errno;
        close(fd);
        ctl_remove(s->name, s->mailbox);
        shm_unlink(s->name);
        free(s);
        budget_give(cfg->budget, fixed);
        return cause_set(cause, "%s (%llu bytes in " SHM_DIR "): %s", what,
                         (unsigned long long)l.size, strerror(e));
    }
    close(fd);
    s->base = base;
    s->size = l.size;
    s->writable = 1;
    s->budget = cfg->budget;
    atomic_store(&s->charged, fixed);
    if (creator_state(s, cfg->lane_count) != 0) {
        segment_close(s, 1);
        return cause_set(cause, "out of memory");
    }
    ts_segment_header *h = base;
    header_fill(h, cfg, pid, &l, max_events, grow_bytes, fixed);
    geometry_from(s, h);
    /* Every lane starts in its first ring, in the control blocks and their mirrors alike. */
    for (uint32_t i = 0; i < cfg->lane_count; i++) {
        first_ring(&s->ctl[i], segment_first_ring_off(s, i), cfg->lane_events);
        first_ring(segment_lane(s, i), segment_first_ring_off(s, i), cfg->lane_events);
    }
    /* The magic goes last: a reader that sees it sees a complete header. */
    atomic_thread_fence(memory_order_release);
    h->magic = TS_SEGMENT_MAGIC;
    *out = s;
    return 0;
}

int segment_validate(const void *base, uint64_t size, char **cause)
{
    if (size < sizeof(ts_segment_header))
        return cause_set(cause, "too small for a termsight segment (%llu bytes)",
                         (unsigned long long)size);
    const ts_segment_header *h = base;
    if (h->magic != TS_SEGMENT_MAGIC)
        return cause_set(cause, "not a termsight segment (bad magic)");
    if (h->endian != 0x01020304u)
        return cause_set(cause, "written with another byte order");
    if (h->major != TS_SEGMENT_MAJOR)
        return cause_set(cause, "layout version %u.%u, this termsight reads %u.x", h->major,
                         h->minor, TS_SEGMENT_MAJOR);
    if (h->header_size < sizeof(ts_segment_header) || h->header_size > PAGE)
        return cause_set(cause, "header size %u does not match", h->header_size);
    if (h->event_size != sizeof(ts_event) || h->lane_size != sizeof(ts_lane) ||
        h->word_size != sizeof(void *))
        return cause_set(cause, "record sizes do not match (event %u, lane %u, word %u)",
                         h->event_size, h->lane_size, h->word_size);
    if (h->segment_size != size)
        return cause_set(cause, "header says %llu bytes but the segment has %llu",
                         (unsigned long long)h->segment_size, (unsigned long long)size);
    if (h->pid <= 0)
        return cause_set(cause, "bad pid %d", h->pid);
    if (!memchr(h->process, 0, sizeof h->process) || !memchr(h->clock, 0, sizeof h->clock) ||
        !memchr(h->run_folder, 0, sizeof h->run_folder) ||
        !memchr(h->record_notice, 0, sizeof h->record_notice))
        return cause_set(cause, "unterminated text in header");
    if (h->lane_count < 1 || h->lane_count > LANES_MAX || !segment_is_pow2(h->lane_events) ||
        h->lane_events < LANE_EVENTS_MIN || h->lane_events > LANE_EVENTS_MAX)
        return cause_set(cause, "bad lane geometry (%u lanes of %u events)", h->lane_count,
                         h->lane_events);
    if (h->string_max < STRINGS_MIN || h->string_max > STRINGS_MAX || h->string_arena < ARENA_MIN ||
        h->string_arena > ARENA_MAX)
        return cause_set(cause, "bad string table geometry (%u ids, %u bytes)", h->string_max,
                         h->string_arena);
    if (!segment_is_pow2(h->lane_max_events) || h->lane_max_events < h->lane_events ||
        h->lane_max_events > LANE_EVENTS_MAX || h->grow_bytes > 2 * GROW_BUDGET_MAX ||
        h->grow_bytes % PAGE)
        return cause_set(cause, "bad lane growth geometry (up to %u events, %llu bytes)",
                         h->lane_max_events, (unsigned long long)h->grow_bytes);
    /* The geometry is bounded above, so this cannot overflow; the offsets must be exactly the
     * ones it implies, which also proves every region lies inside the segment. */
    layout l =
        layout_of(h->lane_count, h->lane_events, h->grow_bytes, h->string_max, h->string_arena);
    if (h->lanes_off != l.lanes_off || h->rings_off != l.rings_off || h->grow_off != l.grow_off ||
        h->string_index_off != l.string_index_off || h->string_arena_off != l.string_arena_off ||
        h->mailbox_off != l.mailbox_off || h->board_off != l.board_off || l.size != size)
        return cause_set(cause, "region offsets do not match the geometry");
    return 0;
}

static int attach_fd(int fd, const char *label, int writable, segment **out, char **cause)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return cause_set(cause, "%s: %s", label, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return cause_set(cause, "%s is not a regular file", label);
    if (st.st_uid != geteuid())
        return cause_set(cause, "%s belongs to uid %u, not to you (uid %u)", label,
                         (unsigned)st.st_uid, (unsigned)geteuid());
    if ((uint64_t)st.st_size < sizeof(ts_segment_header))
        return cause_set(cause, "%s: too small for a termsight segment (%lld bytes)", label,
                         (long long)st.st_size);
    uint64_t size = (uint64_t)st.st_size;
    /* Read-only whatever the caller does: what a monitor may write is the control object. */
    void *base = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED)
        return cause_set(cause, "%s: cannot map: %s", label, strerror(errno));
    char *why = NULL;
    if (segment_validate(base, size, &why) != 0) {
        munmap(base, size);
        int r = cause_set(cause, "%s: %s", label, why ? why : "invalid");
        free(why);
        return r;
    }
    segment *s = calloc(1, sizeof *s);
    if (!s) {
        munmap(base, size);
        return cause_set(cause, "out of memory");
    }
    s->base = base;
    s->size = size;
    segment_copy_str(s->name, sizeof s->name, label);
    geometry_from(s, base);
    if (writable && ctl_attach(label, &s->mailbox, cause) != 0) {
        segment_close(s, 0);
        return -1;
    }
    *out = s;
    return 0;
}

int segment_attach_name(const char *name, int writable, segment **out, char **cause)
{
    *out = NULL;
    /* O_NONBLOCK: a FIFO planted at the name fails the checks below instead of hanging. */
    int flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
    /* "/termsight-123" is a shm name; anything with another slash is a file path. */
    int is_shm = name[0] == '/' && !strchr(name + 1, '/');
    int fd = is_shm ? shm_open(name, flags, 0) : open(name, flags);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT)
            return cause_set(cause, "%s: no such segment", name);
        return cause_set(cause, "%s: %s", name, strerror(e));
    }
    int r = attach_fd(fd, name, writable, out, cause);
    close(fd);
    return r;
}

/* Attaches name and checks that its header names pid. */
static int attach_of_pid(const char *name, pid_t pid, int writable, segment **out, char **cause)
{
    int r = segment_attach_name(name, writable, out, cause);
    if (r == 0 && segment_header(*out)->pid != pid) {
        int named = segment_header(*out)->pid;
        segment_close(*out, 0);
        *out = NULL;
        return cause_set(cause, "%s: header names pid %d", name, named);
    }
    return r;
}

/* Of pid's own names, the segment the process maps, else the newest that validates: 0, or -1
 * with the first one's error. */
static int attach_best(pid_t pid, const pid_names *pn, int writable, segment **out, char **cause)
{
    if (pn->n == 1)
        return attach_of_pid(pn->own[0], pid, writable, out, cause);
    /* Several: an exec'd program's earlier images each left one. */
    segment *best = NULL;
    int best_alive = 0;
    char *first_cause = NULL;
    for (int i = 0; i < pn->n; i++) {
        segment *s;
        char *why = NULL;
        if (attach_of_pid(pn->own[i], pid, writable, &s, &why) != 0) {
            if (!first_cause)
                first_cause = why;
            else
                free(why);
            continue;
        }
        int alive = segment_alive(pid, pn->own[i]);
        if (!best || (alive && !best_alive) ||
            (alive == best_alive &&
             segment_header(s)->start_realtime_ns > segment_header(best)->start_realtime_ns)) {
            segment_close(best, 0);
            best = s;
            best_alive = alive;
        } else {
            segment_close(s, 0);
        }
    }
    if (!best) {
        int r = cause_set(cause, "%s", first_cause ? first_cause : "no readable segment");
        free(first_cause);
        return r;
    }
    free(first_cause);
    *out = best;
    return 0;
}

int segment_attach(pid_t pid, int writable, segment **out, char **cause)
{
    *out = NULL;
    pid_names pn;
    if (segment_names_of_pid(pid, &pn, cause) != 0)
        return -1;
    /* Another user's objects at pid's names are passed over: they never hide ours. */
    int r =
        pn.n ? attach_best(pid, &pn, writable, out, cause) : segment_no_own_name(pid, &pn, cause);
    if (r == 0 && pn.foreign)
        snprintf((*out)->note, sizeof(*out)->note,
                 "passed over %d name%s of pid %d in " SHM_DIR " that %s not yours (%s)",
                 pn.foreign, pn.foreign == 1 ? "" : "s", (int)pid, pn.foreign == 1 ? "is" : "are",
                 pn.why);
    free(pn.own);
    return r;
}

const char *segment_note(const segment *s)
{
    return s->note;
}

int segment_run_folder(const segment *s, char *out, size_t cap, char **cause)
{
    const ts_segment_header *h = segment_header(s);
    int len = (int)strnlen(h->run_folder, sizeof h->run_folder);
    int n;
    if (h->run_folder[0] == '/') {
        n = snprintf(out, cap, "%.*s", len, h->run_folder);
        return n < 0 || (size_t)n >= cap ? cause_set(cause, "run folder too long") : 0;
    }
    /* Older collectors wrote the output folder as given, relative to the process's working
     * directory: only the process that still maps the segment can say which (a pid since
     * reused may be anywhere), and only to its own user. It may have changed directory since;
     * then the folder is not found there and nothing is written. */
    char link[64], cwd[4096];
    struct stat st;
    snprintf(link, sizeof link, "/proc/%d", (int)h->pid);
    if (!len || stat(link, &st) != 0 || st.st_uid != geteuid() || !segment_alive(h->pid, s->name))
        return cause_set(cause,
                         "its run folder '%.*s' is relative and its process (pid %d) is gone or "
                         "not yours: where it lies cannot be told",
                         len, h->run_folder, (int)h->pid);
    snprintf(link, sizeof link, "/proc/%d/cwd", (int)h->pid);
    ssize_t cl = readlink(link, cwd, sizeof cwd - 1);
    if (cl <= 0)
        return cause_set(cause, "its run folder '%.*s' is relative and %s cannot be read: %s", len,
                         h->run_folder, link, cl < 0 ? strerror(errno) : "empty");
    cwd[cl] = 0;
    n = snprintf(out, cap, "%s/%.*s", cwd, len, h->run_folder);
    return n < 0 || (size_t)n >= cap ? cause_set(cause, "run folder too long") : 0;
}

void segment_close(segment *s, int remove)
{
    if (!s)
        return;
    if (remove)
        segment_unlink(s);
    munmap(s->base, s->size);
    if (s->mailbox)
        munmap(s->mailbox, CTL_SIZE);
    free(s->ctl);
    free(s->grow);
    for (int k = 0; k < GROW_ORDERS; k++)
        free(s->grow_free[k].off);
    if (s->ready_lock_made)
        pthread_mutex_destroy(&s->ready_lock);
    free((void *)s->ready);
    free(s);
}

void segment_unlink(const segment *s)
{
    if (s->writable)
        segment_discharge((segment *)s, UINT64_MAX); /* its pages go with the name */
    if (s->name[0] == '/' && !strchr(s->name + 1, '/')) {
        shm_unlink(s->name);
        ctl_remove(s->name, NULL);
    }
    /* The rings hold most of the pages; give them back now. A late writer still finds mapped
     * memory (a fresh zero page), never a fault. */
    if (s->writable) {
        uint64_t len =
            (uint64_t)s->g.lane_count * s->g.lane_events * sizeof(ts_event) + s->g.grow_bytes;
        if (segment_at(s, s->g.rings_off, len))
            madvise(s->base + s->g.rings_off, len, MADV_REMOVE);
    }
}

int segment_populate(const segment *s, uint64_t off, uint64_t len)
{
    void *p = s->writable ? segment_at(s, off, len) : NULL;
    int refused;
    return p ? segment_have((segment *)s, p, len, &refused) : -1;
}

void *segment_at(const segment *s, uint64_t off, uint64_t len)
{
    if (off > s->size || len > s->size - off)
        return NULL;
    return s->base + off;
}

ts_segment_header *segment_header(const segment *s)
{
    return (ts_segment_header *)s->base;
}

uint64_t segment_size(const segment *s)
{
    return s->size;
}

const char *segment_shm_name(const segment *s)
{
    return s->name;
}

ts_mailbox *segment_mailbox(const segment *s)
{
    return s->mailbox;
}

const segment_geometry *segment_geometry_of(const segment *s)
{
    return &s->g;
}

ts_lane *segment_lane(const segment *s, uint32_t i)
{
    if (i >= s->g.lane_count)
        return NULL;
    return segment_at(s, s->g.lanes_off + (uint64_t)i * sizeof(ts_lane), sizeof(ts_lane));
}

uint64_t segment_first_ring_off(const segment *s, uint32_t i)
{
    return s->g.rings_off + (uint64_t)i * s->g.lane_events * sizeof(ts_event);
}

ts_event *segment_ring(const segment *s, uint32_t i)
{
    if (i >= s->g.lane_count)
        return NULL;
    uint64_t bytes = (uint64_t)s->g.lane_events * sizeof(ts_event);
    return segment_at(s, segment_first_ring_off(s, i), bytes);
}
