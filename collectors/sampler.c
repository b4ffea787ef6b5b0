/* sampler: the /proc sampler thread ("termsight-smp").
 *
 * Every sample_interval_ms while a window is open it reads /proc/stat, /proc/self/stat,
 * /proc/self/status and /proc/self/task/<tid>/{stat,comm}, and writes for the interval since
 * the previous sample one CPU_MACHINE, one CPU_PROCESS, one CPU_THREAD per thread and one
 * HOST_MEMORY event through the collector's own lane (under the drain lock, like every other
 * event the collector writes itself). The first sample of a window only sets the baseline.
 *
 * The /proc files are read outside the drain lock; the window is checked again under it, so a
 * sample never straddles a stop and a start. Memory is allocated once when the thread starts;
 * /proc/stat's buffer may grow (up to STAT_BUF_MAX) on machines whose file is larger.
 *
 * At most SAMPLER_MAX_THREADS threads are followed one by one (the first ones the kernel lists);
 * the time of the others is still in the process sample. A thread that appeared since the
 * previous sample is reported with all its time so far, which all lies inside the interval. */
#include "collectors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SAMPLER_MAX_THREADS 1024
#define STAT_BUF_MIN        (64u << 10)
#define STAT_BUF_MAX        (4u << 20)
#define DENTS_BUF           (32u << 10)
#define COMM_MAX            256

typedef struct thread_ticks {
    uint32_t tid;
    uint32_t name;
    uint64_t utime, stime;
} thread_ticks;

typedef struct snapshot {
    uint64_t t_ns;
    procfs_machine machine;
    procfs_task process;
    uint64_t rss, hwm;
    uint32_t nthreads;
    int truncated; /* more threads than SAMPLER_MAX_THREADS */
    thread_ticks threads[SAMPLER_MAX_THREADS];
} snapshot;

typedef struct sampler {
    termsight_session *s;
    char *buf;
    size_t cap;
    int task_fd;
    uint64_t tick_ns; /* ns per clock tick */
    uint32_t tid;
    snapshot *prev, *cur;
    ts_event *events; /* SAMPLER_MAX_THREADS + 3 */
} sampler;

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* Reads a whole small file: its length, or -1. A file that fills buf is cut short: the length
 * is cap and the caller decides. */
static ssize_t read_at(int dir, const char *path, char *buf, size_t cap)
{
    int fd = openat(dir, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = 0;
    while (len < cap) {
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            close(fd);
            return -1;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    return (ssize_t)len;
}

/* /proc/stat into the growable buffer: its length, or -1. */
static ssize_t read_big(sampler *m, const char *path)
{
    for (;;) {
        ssize_t n = read_at(AT_FDCWD, path, m->buf, m->cap);
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

static int by_tid(const void *a, const void *b)
{
    uint32_t x = ((const thread_ticks *)a)->tid, y = ((const thread_ticks *)b)->tid;
    return x < y ? -1 : x > y;
}

static void read_thread(sampler *m, snapshot *sn, uint32_t tid)
{
    char path[48], text[1024], comm[COMM_MAX];
    procfs_task t;
    snprintf(path, sizeof path, "%u/stat", tid);
    ssize_t n = read_at(m->task_fd, path, text, sizeof text);
    if (n <= 0 || procfs_parse_task_stat(text, (size_t)n, &t) != 0)
        return; /* it ended meanwhile */
    thread_ticks *th = &sn->threads[sn->nthreads++];
    th->tid = tid;
    th->utime = t.utime;
    th->stime = t.stime;
    th->name = TS_STR_NONE;
    snprintf(path, sizeof path, "%u/comm", tid);
    n = read_at(m->task_fd, path, text, sizeof text);
    if (n > 0 && procfs_parse_comm(text, (size_t)n, comm, sizeof comm) == 0)
        th->name = strtab_intern(m->s->names, comm, strlen(comm), NULL);
}

static void read_threads(sampler *m, snapshot *sn)
{
    char dents[DENTS_BUF];
    sn->nthreads = 0;
    sn->truncated = 0;
    /* Opened for each sample and closed after it, never kept: see sampler_main. */
    m->task_fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (m->task_fd < 0)
        return;
    for (;;) {
        long n = syscall(SYS_getdents64, m->task_fd, dents, sizeof dents);
        if (n <= 0)
            break;
        for (long off = 0; off < n;) {
            const struct linux_dirent64 *d = (const void *)(dents + off);
            off += d->d_reclen;
            uint32_t tid;
            if (util_parse_u32(d->d_name, 1, UINT32_MAX, &tid) != 0)
                continue; /* "." and ".." */
            if (sn->nthreads == SAMPLER_MAX_THREADS) {
                sn->truncated = 1;
                continue;
            }
            read_thread(m, sn, tid);
        }
    }
    close(m->task_fd);
    m->task_fd = -1;
    qsort(sn->threads, sn->nthreads, sizeof sn->threads[0], by_tid);
}

static int take(sampler *m, snapshot *sn)
{
    char text[2048];
    sn->t_ns = tsclock_now(&ts_clock);
    ssize_t n = read_big(m, "/proc/stat");
    if (n <= 0 || procfs_parse_stat(m->buf, (size_t)n, &sn->machine) != 0)
        return -1;
    n = read_at(AT_FDCWD, "/proc/self/stat", text, sizeof text);
    if (n <= 0 || procfs_parse_task_stat(text, (size_t)n, &sn->process) != 0)
        return -1;
    n = read_big(m, "/proc/self/status");
    if (n <= 0 || procfs_parse_status(m->buf, (size_t)n, &sn->rss, &sn->hwm) != 0)
        return -1;
    read_threads(m, sn);
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
    ev->v0 = ticks_ns(m, delta(cur->process.utime, prev->process.utime));
    ev->v1 = ticks_ns(m, delta(cur->process.stime, prev->process.stime));
    ev->aux = cur->process.num_threads;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    ev->corr = cpus > 0 ? (uint64_t)cpus : 0;

    for (uint32_t i = 0; i < cur->nthreads; i++) {
        const thread_ticks *t = &cur->threads[i];
        const thread_ticks *p = bsearch(t, prev->threads, prev->nthreads, sizeof *t, by_tid);
        if (!p && prev->truncated)
            continue; /* not followed before: its time so far may lie outside the interval */
        ev = &m->events[n++];
        *ev = base;
        ev->kind = TS_KIND_CPU_THREAD;
        ev->tid = t->tid;
        ev->name = t->name;
        ev->v0 = ticks_ns(m, p ? delta(t->utime, p->utime) : t->utime);
        ev->v1 = ticks_ns(m, p ? delta(t->stime, p->stime) : t->stime);
    }

    ev = &m->events[n++];
    *ev = base;
    ev->kind = TS_KIND_HOST_MEMORY;
    ev->begin_ns = cur->t_ns;
    ev->v0 = cur->rss;
    ev->v1 = cur->hwm > cur->rss ? cur->hwm : cur->rss;
    return n;
}

enum wake { WAKE_TIME, WAKE_ASKED, WAKE_QUIT };

/* Sleeps until deadline (collector clock is CLOCK_MONOTONIC's epoch, as is the condition's
 * clock), until a sample is asked for (*asked: the request served) or until asked to quit. */
static enum wake wait_until(termsight_session *s, uint64_t deadline, uint64_t *asked)
{
    struct timespec ts = {(time_t)(deadline / 1000000000ull), (long)(deadline % 1000000000ull)};
    enum wake why = WAKE_TIME;
    pthread_mutex_lock(&s->sampler_lock);
    for (;;) {
        if (atomic_load(&s->sampler_quit)) {
            why = WAKE_QUIT;
            break;
        }
        if (s->sample_asked != s->sample_taken) {
            *asked = s->sample_asked;
            why = WAKE_ASKED;
            break;
        }
        if (tsclock_monotonic_ns() >= deadline ||
            pthread_cond_timedwait(&s->sampler_wake, &s->sampler_lock, &ts) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&s->sampler_lock);
    return why;
}

static void answered(termsight_session *s, uint64_t asked)
{
    pthread_mutex_lock(&s->sampler_lock);
    if (s->sample_taken < asked)
        s->sample_taken = asked;
    pthread_cond_broadcast(&s->sampler_wake);
    pthread_mutex_unlock(&s->sampler_lock);
}

void sampler_sample_now(termsight_session *s, int wait)
{
    if (!s->sampler_running)
        return;
    uint64_t deadline = tsclock_monotonic_ns() + 1000000000ull;
    struct timespec ts = {(time_t)(deadline / 1000000000ull), (long)(deadline % 1000000000ull)};
    pthread_mutex_lock(&s->sampler_lock);
    uint64_t mine = ++s->sample_asked;
    pthread_cond_broadcast(&s->sampler_wake);
    while (wait && s->sample_taken < mine && !atomic_load(&s->sampler_quit))
        if (pthread_cond_timedwait(&s->sampler_wake, &s->sampler_lock, &ts) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&s->sampler_lock);
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
    sampler m = {.s = s, .cap = STAT_BUF_MIN, .tid = (uint32_t)gettid()};
    long tck = sysconf(_SC_CLK_TCK);
    m.tick_ns = tck > 0 ? 1000000000ull / (uint64_t)tck : 10000000ull;
    m.buf = malloc(m.cap);
    m.prev = malloc(sizeof *m.prev);
    m.cur = malloc(sizeof *m.cur);
    m.events = malloc((SAMPLER_MAX_THREADS + 3) * sizeof *m.events);
    /* Every descriptor the sampler opens lives for one read, in a table of its own where the
     * system allows one: a program that closes descriptors or opens its own under the same
     * numbers never has its files read, rewound or closed by us. */
    util_private_fds();
    m.task_fd = -1;
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
    return NULL;
}

int sampler_start(termsight_session *s)
{
    atomic_store(&s->sampler_quit, 0);
    if (util_thread_start(&s->sampler, 0, sampler_main, s, "termsight-smp") != 0)
        return -1;
    s->sampler_running = 1;
    return 0;
}

void sampler_stop(termsight_session *s)
{
    if (!s->sampler_running)
        return;
    pthread_mutex_lock(&s->sampler_lock);
    atomic_store(&s->sampler_quit, 1);
    pthread_cond_signal(&s->sampler_wake);
    pthread_mutex_unlock(&s->sampler_lock);
    pthread_join(s->sampler, NULL);
    s->sampler_running = 0;
}
