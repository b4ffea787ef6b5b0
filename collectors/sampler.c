/* sampler: the /proc sampler thread ("termsight-smp").
 *
 * Every sample_interval_ms while a window is open it reads /proc/stat, /proc/self/stat,
 * /proc/self/status, /proc/self/task/<tid>/{stat,comm} and, for each descendant process (the
 * process's children, their children ...), /proc/<pid>/{stat,comm}, and writes for the interval
 * since the previous sample one CPU_MACHINE, one CPU_PROCESS, one CPU_THREAD per thread, one
 * CPU_CHILD per descendant and one HOST_MEMORY event through the collector's own lane (under
 * the drain lock, like every other event the collector writes itself). The first sample of a
 * window only sets the baseline.
 *
 * The /proc files are read outside the drain lock; the window is checked again under it, so a
 * sample never straddles a stop and a start. Memory is allocated once when the thread starts;
 * /proc/stat's buffer may grow (up to STAT_BUF_MAX) on machines whose file is larger.
 *
 * At most SAMPLER_MAX_THREADS threads and SAMPLER_MAX_CHILDREN descendants are followed one by
 * one (the first ones the kernel lists; the time of the other threads is still in the process
 * sample, the descendants left out are counted). A thread or process that appeared since the
 * previous sample is reported with all its time so far, over an interval that begins at its
 * start (or at the previous sample, if that is later), so its share is of the time it lived.
 *
 * Descendants are found through /proc/<pid>/task/<tid>/children (a child belongs to the thread
 * that forked it), and where the kernel has no such file (CONFIG_PROC_CHILDREN off) by reading
 * every process's parent from /proc/<pid>/stat. A descendant is only read, never signalled or
 * waited for: its parent's wait and its exit go on as without the profiler. */
#include "collectors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SAMPLER_MAX_THREADS  1024
#define SAMPLER_MAX_CHILDREN 256
#define SCAN_MAX             65536 /* processes read where there are no children files */
#define STAT_BUF_MIN         (64u << 10)
#define STAT_BUF_MAX         (4u << 20)
#define DENTS_BUF            (32u << 10)
#define COMM_MAX             256

/* A thread or a descendant process at one sample. */
typedef struct task_ticks {
    uint32_t id; /* tid or pid */
    uint32_t name;
    uint32_t ppid;
    uint64_t utime, stime, start; /* clock ticks; start since boot */
    uint64_t rss;                 /* bytes; descendants only */
    uint64_t run_ns;              /* threads: time on a CPU from schedstat; 0 when unknown */
    int exited;                   /* a zombie: its times are final */
} task_ticks;

typedef struct snapshot {
    uint64_t t_ns;
    uint64_t boot_ns; /* CLOCK_BOOTTIME - CLOCK_MONOTONIC: where /proc's start times begin */
    procfs_machine machine;
    procfs_task process;
    uint64_t rss, hwm;
    uint32_t nthreads, nchildren;
    int truncated;          /* more threads than SAMPLER_MAX_THREADS */
    uint32_t children_left; /* descendants seen past SAMPLER_MAX_CHILDREN */
    task_ticks threads[SAMPLER_MAX_THREADS];
    task_ticks children[SAMPLER_MAX_CHILDREN];
} snapshot;

/* (pid, parent) of every process, where descendants are found by a scan of /proc. */
typedef struct proc_link {
    uint32_t pid, ppid;
} proc_link;

typedef struct sampler {
    termsight_session *s;
    char *buf;
    size_t cap;
    int task_fd;
    int private_fds;    /* the thread's descriptor table is its own (util_private_fds) */
    int children_files; /* /proc/<pid>/task/<tid>/children exist */
    int schedstat;      /* /proc/thread-self/schedstat exists (CONFIG_SCHED_INFO) */
    uint32_t pid;
    uint64_t tick_ns; /* ns per clock tick */
    uint64_t page_size;
    uint32_t tid;
    snapshot *prev, *cur;
    proc_link *scan;  /* SCAN_MAX, allocated on first use */
    ts_event *events; /* SAMPLER_MAX_THREADS + SAMPLER_MAX_CHILDREN + 3 */
} sampler;

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* ---- Descriptors ------------------------------------------------------------------------ */

/* A descriptor the sampler opened, with the identity of what it opened. Where the thread shares
 * the program's descriptor table, the program may close the number and open its own file under
 * it at any time: before every read and before the close, the descriptor must still name what
 * was opened, else the sampler leaves it alone (never reads, never closes the program's file). */
typedef struct owned_fd {
    int fd;
    dev_t dev;
    ino_t ino;
} owned_fd;

static int fd_is_mine(const sampler *m, const owned_fd *o)
{
    struct stat st;
    if (o->fd < 0)
        return 0;
    if (m->private_fds)
        return 1;
    return fstat(o->fd, &st) == 0 && st.st_dev == o->dev && st.st_ino == o->ino;
}

/* Opens path under dir: 0, or -1 (o->fd is then -1). */
static int fd_open(const sampler *m, int dir, const char *path, int flags, owned_fd *o)
{
    o->dev = 0;
    o->ino = 0;
    o->fd = openat(dir, path, flags | O_RDONLY | O_CLOEXEC);
    if (o->fd < 0 || m->private_fds)
        return o->fd < 0 ? -1 : 0;
    /* The number is checked against the path at once: a descriptor that names something else
     * already is not ours (and not closed). */
    struct stat byfd, bypath;
    if (fstat(o->fd, &byfd) != 0 || fstatat(dir, path, &bypath, 0) != 0 ||
        byfd.st_dev != bypath.st_dev || byfd.st_ino != bypath.st_ino) {
        o->fd = -1;
        return -1;
    }
    o->dev = byfd.st_dev;
    o->ino = byfd.st_ino;
    return 0;
}

static void fd_close(const sampler *m, owned_fd *o)
{
    if (fd_is_mine(m, o))
        close(o->fd);
    o->fd = -1;
}

/* Reads a whole small file: its length, or -1. A file that fills buf is cut short: the length
 * is cap and the caller decides. */
static ssize_t read_at(const sampler *m, int dir, const char *path, char *buf, size_t cap)
{
    owned_fd o;
    if (fd_open(m, dir, path, 0, &o) != 0)
        return -1;
    size_t len = 0;
    while (len < cap) {
        ssize_t n = fd_is_mine(m, &o) ? read(o.fd, buf + len, cap - len) : -1;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            fd_close(m, &o);
            return -1;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    fd_close(m, &o);
    return (ssize_t)len;
}

/* A file of any size (up to STAT_BUF_MAX) into the growable buffer: its length, or -1. */
static ssize_t read_big(sampler *m, int dir, const char *path)
{
    for (;;) {
        ssize_t n = read_at(m, dir, path, m->buf, m->cap);
        if (n < 0 || (size_t)n < m->cap)
            return n;
        if (m->cap >= STAT_BUF_MAX)
            return -1;
        char *nb = realloc(m->buf, m->cap * 2);
        if (!nb)
            return -1;
        m->buf = nb;
        m->cap *= 2;
    }
}

/* Calls fn(m, arg, id) for every numeric entry of the folder at dir/path (tids, pids), in the
 * kernel's order. Returns -1 when the folder cannot be opened. */
static int each_entry(sampler *m, int dir, const char *path, void *arg,
                      void (*fn)(sampler *m, void *arg, uint32_t id))
{
    char dents[DENTS_BUF];
    owned_fd o;
    if (fd_open(m, dir, path, O_DIRECTORY, &o) != 0)
        return -1;
    for (;;) {
        long n = fd_is_mine(m, &o) ? syscall(SYS_getdents64, o.fd, dents, sizeof dents) : -1;
        if (n <= 0)
            break;
        for (long off = 0; off < n;) {
            const struct linux_dirent64 *d = (const void *)(dents + off);
            off += d->d_reclen;
            uint32_t id;
            if (options_parse_u32(d->d_name, 1, UINT32_MAX, &id) == 0) /* not "." and ".." */
                fn(m, arg, id);
        }
    }
    fd_close(m, &o);
    return 0;
}

/* ---- Threads and descendants ------------------------------------------------------------- */

static int by_id(const void *a, const void *b)
{
    uint32_t x = ((const task_ticks *)a)->id, y = ((const task_ticks *)b)->id;
    return x < y ? -1 : x > y;
}

/* dir/<id>/stat and dir/<id>/comm into *t: 0, or -1 when it ended meanwhile. */
static int read_task(sampler *m, int dir, const char *prefix, uint32_t id, task_ticks *t)
{
    char path[64], text[1024], comm[COMM_MAX];
    procfs_task pt;
    snprintf(path, sizeof path, "%s%u/stat", prefix, id);
    ssize_t n = read_at(m, dir, path, text, sizeof text);
    if (n <= 0 || procfs_parse_task_stat(text, (size_t)n, &pt) != 0)
        return -1;
    *t = (task_ticks){.id = id,
                      .name = TS_STR_NONE,
                      .ppid = pt.ppid,
                      .utime = pt.utime,
                      .stime = pt.stime,
                      .start = pt.start,
                      .rss = pt.rss_pages * m->page_size,
                      .exited = pt.state == 'Z' || pt.state == 'X'};
    snprintf(path, sizeof path, "%s%u/comm", prefix, id);
    n = read_at(m, dir, path, text, sizeof text);
    if (n > 0 && procfs_parse_comm(text, (size_t)n, comm, sizeof comm) == 0)
        t->name = strtab_intern(m->s->names, comm, strlen(comm), NULL);
    if (dir == m->task_fd && m->schedstat) {
        /* A thread's CPU time to the nanosecond: ticks make 10 % steps over 100 ms. */
        snprintf(path, sizeof path, "%u/schedstat", id);
        n = read_at(m, dir, path, text, sizeof text);
        if (n <= 0 || procfs_parse_schedstat(text, (size_t)n, &t->run_ns) != 0)
            t->run_ns = 0;
    }
    return 0;
}

static void add_thread(sampler *m, void *arg, uint32_t tid)
{
    snapshot *sn = arg;
    if (sn->nthreads == SAMPLER_MAX_THREADS)
        sn->truncated = 1;
    else if (read_task(m, m->task_fd, "", tid, &sn->threads[sn->nthreads]) == 0)
        sn->nthreads++;
}

static void read_threads(sampler *m, snapshot *sn)
{
    sn->nthreads = 0;
    sn->truncated = 0;
    /* Opened for each sample and closed after it, never kept: see sampler_main. */
    owned_fd task;
    if (fd_open(m, AT_FDCWD, "/proc/self/task", O_DIRECTORY, &task) != 0)
        return;
    m->task_fd = task.fd;
    each_entry(m, task.fd, ".", sn, add_thread);
    m->task_fd = -1;
    fd_close(m, &task);
    qsort(sn->threads, sn->nthreads, sizeof sn->threads[0], by_id);
}

/* The walk over the process tree, breadth first: pids found, in the order found, which is
 * also the queue of processes whose children are still to be looked for. */
typedef struct walk {
    uint32_t root;
    uint32_t pid[SAMPLER_MAX_CHILDREN];
    uint32_t n, left_out;
    uint32_t parent; /* whose children are being listed */
} walk;

static void walk_add(walk *w, uint32_t pid)
{
    if (pid == w->root)
        return;
    for (uint32_t i = 0; i < w->n; i++)
        if (w->pid[i] == pid)
            return; /* listed by two threads while it moved, or a pid reused meanwhile */
    if (w->n == SAMPLER_MAX_CHILDREN)
        w->left_out++;
    else
        w->pid[w->n++] = pid;
}

/* The pids of one children file ("123 456 "), each followed by a space. */
static void walk_add_text(walk *w, const char *text, size_t len)
{
    uint32_t v = 0;
    int digits = 0;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (c >= '0' && c <= '9' && v <= (UINT32_MAX - 9) / 10) {
            v = v * 10 + (uint32_t)(c - '0');
            digits = 1;
        } else {
            if (c == ' ' && digits && v)
                walk_add(w, v);
            v = 0;
            digits = 0;
        }
    }
}

static void children_of_thread(sampler *m, void *arg, uint32_t tid)
{
    char path[64];
    snprintf(path, sizeof path, "%u/children", tid);
    ssize_t n = read_big(m, m->task_fd, path);
    if (n > 0)
        walk_add_text(arg, m->buf, (size_t)n);
}

/* The children of w->parent, through its threads' children files. */
static void children_from_files(sampler *m, walk *w)
{
    char path[48];
    owned_fd task;
    snprintf(path, sizeof path, "/proc/%u/task", w->parent);
    if (fd_open(m, AT_FDCWD, path, O_DIRECTORY, &task) != 0)
        return; /* it ended meanwhile */
    m->task_fd = task.fd;
    each_entry(m, task.fd, ".", w, children_of_thread);
    m->task_fd = -1;
    fd_close(m, &task);
}

static int by_ppid(const void *a, const void *b)
{
    const proc_link *x = a, *y = b;
    if (x->ppid != y->ppid)
        return x->ppid < y->ppid ? -1 : 1;
    return x->pid < y->pid ? -1 : x->pid > y->pid;
}

typedef struct scan {
    proc_link *links;
    uint32_t n;
} scan;

static void scan_one(sampler *m, void *arg, uint32_t pid)
{
    scan *sc = arg;
    char path[32], text[1024];
    procfs_task t;
    snprintf(path, sizeof path, "/proc/%u/stat", pid);
    ssize_t n = read_at(m, AT_FDCWD, path, text, sizeof text);
    if (sc->n < SCAN_MAX && n > 0 && procfs_parse_task_stat(text, (size_t)n, &t) == 0)
        sc->links[sc->n++] = (proc_link){pid, t.ppid};
}

/* Every descendant of w->root into w, breadth first. */
static void walk_tree(sampler *m, walk *w)
{
    scan sc = {0};
    if (!m->children_files) {
        if (!m->scan && !(m->scan = malloc(SCAN_MAX * sizeof *m->scan)))
            return;
        sc.links = m->scan;
        each_entry(m, AT_FDCWD, "/proc", &sc, scan_one);
        qsort(sc.links, sc.n, sizeof *sc.links, by_ppid);
    }
    for (uint32_t next = 0, parent = w->root;; parent = w->pid[next++]) {
        w->parent = parent;
        if (m->children_files) {
            children_from_files(m, w);
        } else {
            /* The first link whose parent is this one, then the others after it. */
            uint32_t lo = 0, hi = sc.n;
            while (lo < hi) {
                uint32_t mid = lo + (hi - lo) / 2;
                if (sc.links[mid].ppid < parent)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            for (; lo < sc.n && sc.links[lo].ppid == parent; lo++)
                walk_add(w, sc.links[lo].pid);
        }
        if (next >= w->n)
            break;
    }
}

static void read_children(sampler *m, snapshot *sn)
{
    walk w = {.root = m->pid};
    walk_tree(m, &w);
    sn->nchildren = 0;
    sn->children_left = w.left_out;
    for (uint32_t i = 0; i < w.n; i++)
        if (read_task(m, AT_FDCWD, "/proc/", w.pid[i], &sn->children[sn->nchildren]) == 0)
            sn->nchildren++;
    qsort(sn->children, sn->nchildren, sizeof sn->children[0], by_id);
}

int sampler_descendants(int children_files, uint32_t pid, uint32_t *out, uint32_t max,
                        uint32_t *left_out)
{
    sampler m = {.cap = STAT_BUF_MIN, .task_fd = -1, .children_files = children_files};
    walk *w = calloc(1, sizeof *w);
    m.buf = malloc(m.cap);
    if (!w || !m.buf) {
        free(w);
        free(m.buf);
        return -1;
    }
    /* The caller's descriptors are shared: every one is checked (private_fds 0). */
    w->root = pid;
    walk_tree(&m, w);
    uint32_t n = w->n < max ? w->n : max;
    memcpy(out, w->pid, n * sizeof *out);
    if (left_out)
        *left_out = w->left_out + (w->n - n);
    free(w);
    free(m.buf);
    free(m.scan);
    return (int)n;
}

static uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int take(sampler *m, snapshot *sn)
{
    char text[2048];
    sn->t_ns = tsclock_now(&ts_clock);
    uint64_t boot = clock_ns(CLOCK_BOOTTIME), mono = clock_ns(CLOCK_MONOTONIC);
    sn->boot_ns = boot > mono ? boot - mono : 0;
    ssize_t n = read_big(m, AT_FDCWD, "/proc/stat");
    if (n <= 0 || procfs_parse_stat(m->buf, (size_t)n, &sn->machine) != 0)
        return -1;
    n = read_at(m, AT_FDCWD, "/proc/self/stat", text, sizeof text);
    if (n <= 0 || procfs_parse_task_stat(text, (size_t)n, &sn->process) != 0)
        return -1;
    n = read_big(m, AT_FDCWD, "/proc/self/status");
    if (n <= 0 || procfs_parse_status(m->buf, (size_t)n, &sn->rss, &sn->hwm) != 0)
        return -1;
    read_threads(m, sn);
    read_children(m, sn);
    return 0;
}

static uint64_t delta(uint64_t now, uint64_t before)
{
    return now > before ? now - before : 0;
}

/* Shares in 0.01 % that sum to exactly 10000 (largest remainders get the rounding). Returns -1
 * when no tick passed on any CPU. */
static int shares(const procfs_machine *a, const procfs_machine *b, uint16_t out[TS_CPU__COUNT])
{
    uint64_t d[TS_CPU__COUNT], total = 0, rem[TS_CPU__COUNT];
    for (int f = 0; f < TS_CPU__COUNT; f++)
        total += d[f] = delta(b->cpu[f], a->cpu[f]);
    if (!total)
        return -1;
    uint32_t sum = 0;
    for (int f = 0; f < TS_CPU__COUNT; f++) {
        unsigned __int128 x = (unsigned __int128)d[f] * 10000;
        out[f] = (uint16_t)(x / total);
        rem[f] = (uint64_t)(x % total);
        sum += out[f];
    }
    while (sum < 10000) {
        int best = 0;
        for (int f = 1; f < TS_CPU__COUNT; f++)
            if (rem[f] > rem[best])
                best = f;
        out[best]++;
        rem[best] = 0;
        sum++;
    }
    return 0;
}

static uint64_t ticks_ns(const sampler *m, uint64_t ticks)
{
    return ticks * m->tick_ns;
}

/* total nanoseconds into user and system as the ticks ut and st share them (all user when
 * neither ticked). */
static void split_ns(uint64_t total, uint64_t ut, uint64_t st, uint64_t *user, uint64_t *sys)
{
    uint64_t ticks = ut + st;
    *user = ticks ? (uint64_t)((double)total * (double)ut / (double)ticks) : total;
    if (*user > total)
        *user = total;
    *sys = total - *user;
}

/* A thread's time on a CPU over an interval span long, from schedstat: since the previous
 * sample p (NULL: new to this one, when it ran at most the interval's length). 0 and *ns set,
 * or -1 when schedstat was not read for it (or for p). */
static int run_in_interval(const task_ticks *t, const task_ticks *p, uint64_t span, uint64_t *ns)
{
    if (!t->run_ns || (p && !p->run_ns))
        return -1;
    *ns = p ? delta(t->run_ns, p->run_ns) : t->run_ns < span ? t->run_ns : span;
    return 0;
}

/* One event of kind per task of now (threads or descendants, sorted by id) into ev: their
 * count. A task is new when the previous sample did not have it (or had another task under its
 * id, which was reused): its interval begins at its start, clamped into the sample's. */
static size_t build_tasks(const sampler *m, const ts_event *base, uint16_t kind,
                          const task_ticks *now, uint32_t n_now, const task_ticks *before,
                          uint32_t n_before, int before_partial, uint64_t boot_ns, ts_event *ev)
{
    size_t n = 0;
    for (uint32_t i = 0; i < n_now; i++) {
        const task_ticks *t = &now[i];
        const task_ticks *p = bsearch(t, before, n_before, sizeof *t, by_id);
        if (p && p->start != t->start)
            p = NULL;
        if (!p && before_partial)
            continue; /* not followed before: its time so far may lie outside the interval */
        ts_event *e = &ev[n++];
        *e = *base;
        e->kind = kind;
        e->tid = t->id;
        e->name = t->name;
        uint64_t ut = p ? delta(t->utime, p->utime) : t->utime;
        uint64_t st = p ? delta(t->stime, p->stime) : t->stime;
        uint64_t run;
        if (run_in_interval(t, p, e->end_ns - e->begin_ns, &run) == 0) {
            /* The scheduler's nanoseconds, split into user and system as the ticks split. */
            split_ns(run, ut, st, &e->v0, &e->v1);
        } else {
            e->v0 = ticks_ns(m, ut);
            e->v1 = ticks_ns(m, st);
        }
        if (!p) {
            uint64_t start = delta(ticks_ns(m, t->start), boot_ns);
            e->begin_ns = start < e->begin_ns ? e->begin_ns : start > e->end_ns ? e->end_ns : start;
        }
        if (kind == TS_KIND_CPU_CHILD) {
            e->aux = t->ppid;
            e->corr = t->rss;
            e->flags = t->exited ? TS_EF_EXITED : 0;
        }
    }
    return n;
}

/* The events of the interval prev -> cur into m->events: their count, or 0 when the interval
 * saw no tick (the baseline is then kept and the next interval covers both). A sample that must
 * be taken (a window's last) has no machine shares then, but the rest. */
static size_t build(sampler *m, const snapshot *prev, const snapshot *cur, int must)
{
    uint16_t share[TS_CPU__COUNT];
    int ticked = shares(&prev->machine, &cur->machine, share) == 0;
    if (!ticked && !must)
        return 0;
    ts_event base = {
        .tid = m->tid, .device = TS_DEVICE_HOST, .begin_ns = prev->t_ns, .end_ns = cur->t_ns};
    size_t n = 0;

    ts_event *ev;
    if (ticked) {
        ev = &m->events[n++];
        *ev = base;
        ev->kind = TS_KIND_CPU_MACHINE;
        ts_cpu_pack(ev, share);
        ev->corr = delta(cur->machine.ctxt, prev->machine.ctxt);
        uint32_t run = cur->machine.running > 0xffff ? 0xffff : cur->machine.running;
        uint32_t blk = cur->machine.blocked > 0xffff ? 0xffff : cur->machine.blocked;
        ev->aux = run << 16 | blk;
    }

    ev = &m->events[n++];
    *ev = base;
    ev->kind = TS_KIND_CPU_PROCESS;
    uint64_t put = delta(cur->process.utime, prev->process.utime);
    uint64_t pst = delta(cur->process.stime, prev->process.stime);
    ev->v0 = ticks_ns(m, put);
    ev->v1 = ticks_ns(m, pst);
    /* Where every thread's schedstat was read, the process's time is theirs summed: to the
     * nanosecond, and never less than one of its threads shows (ticks, 10 ms each, make the
     * two disagree by a tick an interval). A thread that ended during the interval is then
     * missed for its last part; with ticks it would not be. Where only some were read (a
     * thread too new to have its interval, a list cut short), the process shows at least what
     * they add up to: never less than its threads, however the reads fall on a busy machine. */
    uint64_t threads_ns = 0, span = delta(cur->t_ns, prev->t_ns);
    int all = m->schedstat && !cur->truncated && !prev->truncated;
    for (uint32_t i = 0; m->schedstat && i < cur->nthreads; i++) {
        const task_ticks *t = &cur->threads[i];
        const task_ticks *p = bsearch(t, prev->threads, prev->nthreads, sizeof *t, by_id);
        if (p && p->start != t->start)
            p = NULL;
        uint64_t run = 0;
        if ((p || !prev->truncated) && run_in_interval(t, p, span, &run) == 0)
            threads_ns += run; /* as build_tasks shows it */
        else
            all = 0;
    }
    if (cur->nthreads && (all || threads_ns > ev->v0 + ev->v1))
        split_ns(threads_ns, put, pst, &ev->v0, &ev->v1);
    ev->aux = cur->process.num_threads;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    ev->corr = (cpus > 0 ? (uint64_t)(uint32_t)cpus : 0) | (uint64_t)cur->children_left << 32;

    n += build_tasks(m, &base, TS_KIND_CPU_THREAD, cur->threads, cur->nthreads, prev->threads,
                     prev->nthreads, prev->truncated, cur->boot_ns, &m->events[n]);
    n += build_tasks(m, &base, TS_KIND_CPU_CHILD, cur->children, cur->nchildren, prev->children,
                     prev->nchildren, prev->children_left > 0, cur->boot_ns, &m->events[n]);

    ev = &m->events[n++];
    *ev = base;
    ev->kind = TS_KIND_HOST_MEMORY;
    ev->begin_ns = cur->t_ns;
    ev->v0 = cur->rss;
    ev->v1 = cur->hwm > cur->rss ? cur->hwm : cur->rss;
    return n;
}

/* The sampler thread and how other threads wake it: its own, freed with the session (the loop
 * may ask for a sample until the session ends). */
struct sampler_ctl {
    pthread_t thread;
    _Atomic int running; /* read by the loop (window samples) */
    _Atomic int quit;
    pthread_mutex_t lock; /* with wake: ends the sampler's sleep */
    pthread_cond_t wake;  /* timed on CLOCK_MONOTONIC, the collector clock's epoch */
    /* Under lock: samples asked for out of turn (a window's baseline at its start, its last
     * sample at its stop) and taken, so that every window has its figures however short. */
    uint64_t asked, taken;
};

enum wake { WAKE_TIME, WAKE_ASKED, WAKE_QUIT };

/* Sleeps until deadline (collector clock is CLOCK_MONOTONIC's epoch, as is the condition's
 * clock), until a sample is asked for (*asked: the request served) or until asked to quit. */
static enum wake wait_until(termsight_session *s, uint64_t deadline, uint64_t *asked)
{
    struct timespec ts = {(time_t)(deadline / 1000000000ull), (long)(deadline % 1000000000ull)};
    enum wake why = WAKE_TIME;
    pthread_mutex_lock(&s->smp->lock);
    for (;;) {
        if (atomic_load(&s->smp->quit)) {
            why = WAKE_QUIT;
            break;
        }
        if (s->smp->asked != s->smp->taken) {
            *asked = s->smp->asked;
            why = WAKE_ASKED;
            break;
        }
        if (tsclock_monotonic_ns() >= deadline ||
            pthread_cond_timedwait(&s->smp->wake, &s->smp->lock, &ts) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&s->smp->lock);
    return why;
}

static void answered(termsight_session *s, uint64_t asked)
{
    pthread_mutex_lock(&s->smp->lock);
    if (s->smp->taken < asked)
        s->smp->taken = asked;
    pthread_cond_broadcast(&s->smp->wake);
    pthread_mutex_unlock(&s->smp->lock);
}

void sampler_sample_now(termsight_session *s, int wait)
{
    if (!s->smp || !atomic_load(&s->smp->running))
        return;
    uint64_t deadline = tsclock_monotonic_ns() + 1000000000ull;
    struct timespec ts = {(time_t)(deadline / 1000000000ull), (long)(deadline % 1000000000ull)};
    pthread_mutex_lock(&s->smp->lock);
    uint64_t mine = ++s->smp->asked;
    pthread_cond_broadcast(&s->smp->wake);
    while (wait && s->smp->taken < mine && !atomic_load(&s->smp->quit))
        if (pthread_cond_timedwait(&s->smp->wake, &s->smp->lock, &ts) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&s->smp->lock);
}

static void sampler_loop(sampler *m)
{
    termsight_session *s = m->s;
    uint64_t interval = (uint64_t)s->opts.sample_interval_ms * 1000000ull;
    uint64_t next = tsclock_monotonic_ns() + interval;
    uint32_t base_window = 0; /* window of m->prev; 0 when there is no baseline */
    uint64_t asked = 0;
    enum wake why;
    while ((why = wait_until(s, next, &asked)) != WAKE_QUIT) {
        uint64_t now = tsclock_monotonic_ns();
        if (why == WAKE_TIME) {
            next += interval;
            if (next <= now)
                next = now + interval; /* we fell behind: skip, do not burst */
        }
        uint32_t w = atomic_load(&s->sample_window);
        if (!w) {
            base_window = 0;
        } else if (take(m, m->cur) == 0) {
            /* A failed read keeps the baseline: the next interval covers this one. */
            int keep_base = 0;
            pthread_mutex_lock(&s->drain);
            if (atomic_load(&s->sample_window) != w) {
                w = 0; /* a stop (and maybe a start) came in while we read */
            } else if (base_window == w) {
                /* Asked for out of turn, the sample is taken however short its interval. */
                size_t n = build(m, m->prev, m->cur, why == WAKE_ASKED);
                if (n)
                    recorder_append_locked(s, m->events, n);
                else
                    keep_base = 1;
            }
            pthread_mutex_unlock(&s->drain);
            if (!keep_base) {
                snapshot *t = m->prev;
                m->prev = m->cur;
                m->cur = t;
                base_window = w;
            }
        }
        if (why == WAKE_ASKED)
            answered(s, asked);
    }
}

static void *sampler_main(void *arg)
{
    termsight_session *s = arg;
    sampler m = {.s = s, .cap = STAT_BUF_MIN, .tid = (uint32_t)gettid(), .pid = (uint32_t)getpid()};
    long tck = sysconf(_SC_CLK_TCK);
    m.tick_ns = tck > 0 ? 1000000000ull / (uint64_t)tck : 10000000ull;
    long page = sysconf(_SC_PAGESIZE);
    m.page_size = page > 0 ? (uint64_t)page : 4096;
    m.buf = malloc(m.cap);
    m.prev = malloc(sizeof *m.prev);
    m.cur = malloc(sizeof *m.cur);
    m.events = malloc((SAMPLER_MAX_THREADS + SAMPLER_MAX_CHILDREN + 3) * sizeof *m.events);
    /* Every descriptor the sampler opens lives for one read, in a table of its own where the
     * system allows one: a program that closes descriptors or opens its own under the same
     * numbers never has its files read, rewound or closed by us. */
    m.private_fds = util_private_fds();
    m.task_fd = -1;
    m.children_files = access("/proc/thread-self/children", R_OK) == 0;
    m.schedstat = access("/proc/thread-self/schedstat", R_OK) == 0;
    /* Without memory there is nothing to sample: the thread answers and idles until the end. */
    if (m.buf && m.prev && m.cur && m.events) {
        sampler_loop(&m);
    } else {
        uint64_t asked = 0;
        enum wake why;
        while ((why = wait_until(s, UINT64_MAX / 2, &asked)) != WAKE_QUIT)
            if (why == WAKE_ASKED)
                answered(s, asked);
    }
    free(m.buf);
    free(m.prev);
    free(m.cur);
    free(m.events);
    free(m.scan);
    return NULL;
}

int sampler_init(termsight_session *s)
{
    sampler_ctl *c = calloc(1, sizeof *c);
    if (!c)
        return -1;
    pthread_mutex_init(&c->lock, NULL);
    util_cond_init_monotonic(&c->wake);
    s->smp = c;
    return 0;
}

int sampler_start(termsight_session *s)
{
    sampler_ctl *c = s->smp;
    if (!c || util_thread_start(&c->thread, 0, sampler_main, s, "termsight-smp") != 0)
        return -1;
    atomic_store(&c->running, 1);
    return 0;
}

void sampler_stop(termsight_session *s)
{
    sampler_ctl *c = s->smp;
    if (!c || !atomic_load(&c->running))
        return;
    /* A window still open gets its last figures first: a program that ends its session
     * without a stop (at exit) sooner than an interval would have only its baseline. */
    if (atomic_load(&s->sample_window))
        sampler_sample_now(s, 1);
    pthread_mutex_lock(&c->lock);
    atomic_store(&c->quit, 1);
    pthread_cond_signal(&c->wake);
    pthread_mutex_unlock(&c->lock);
    pthread_join(c->thread, NULL);
    atomic_store(&c->running, 0);
}

void sampler_free(termsight_session *s)
{
    sampler_ctl *c = s->smp;
    if (!c)
        return;
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->wake);
    free(c);
    s->smp = NULL;
}
