/*
 * termsight hot-path benchmark: what an event costs the training thread, and how many events per
 * second the lane -> recorder -> recording pipe carries. Results and method: bench/RESULTS.md;
 * driver: bench/run.sh (sets up the LTTng-UST session for termsight_bench_lttng).
 *
 * Everything goes through the public API of libtermsight.so, as a user's program would:
 * termsight_session_create with the recording in a temporary folder, the recorder thread of the
 * library draining while we measure.
 *
 * Sections (all by default, or those named with --sections):
 *   clock  cost of clock_gettime(CLOCK_MONOTONIC), rdtsc, rdtscp, termsight_now_ns (TSC-scaled
 *          and forced to clock_gettime)
 *   idle   event calls while not collecting (session created with start_collecting = 0), an
 *          empty loop, and the disabled LTTng-UST tracepoint when built with it
 *   hot    ns per event while collecting: instant (termsight_counter_id), range begin+end,
 *          range_complete with caller-given timestamps, the same with the clock forced to
 *          clock_gettime, a cold lane's first pass, the enabled LTTng-UST tracepoint, and the
 *          calls after termsight_stop. Events go in bursts of a quarter lane, each timed, with
 *          the recorder draining during the burst and a wait until it has written everything
 *          before the next burst, so nothing is dropped; kinds alternate burst by burst.
 *   parts  the recorder's own costs per 64-byte event: zlib crc32 (what the recording uses), a
 *          hardware CRC-32C for comparison, write() into the tmpfs folder and the disk folder
 *   rate   events/s through lane -> recorder -> recording: a producer paced at increasing target
 *          rates, one fresh session per rate, recording on tmpfs and on disk; drops and the
 *          recorder thread's CPU time for each. --rate-threads N shares each rate among N
 *          producer threads, each with its own lane.
 *
 * Output: a human-readable table, and one "RESULT key median min max unit n" line per figure for
 * scripts (min and max over the repeats).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>
#include <zlib.h>

#include "termsight/termsight.h"

#ifdef TS_BENCH_LTTNG
#include "lttng_tp.h"
#endif

#define MAX_REPEATS      32
#define MAX_RATES        32
#define MAX_RATE_THREADS 64

/* ---- Options ----------------------------------------------------------------------------- */

static struct {
    int repeats;              /* repeats of every measurement */
    int rate_repeats;         /* repeats of the rate section (each rate is seconds long) */
    int rate_threads;         /* producer threads of the rate section, sharing its target */
    uint32_t rate_small_lane; /* the rate section also runs with this lane size on tmpfs */
    uint64_t hot_events;      /* events per kind per repeat in the hot section */
    uint32_t lane_events;     /* lane size for the hot and rate sections */
    uint64_t idle_calls;      /* calls per repeat in the idle section */
    uint64_t clock_calls;     /* calls per repeat in the clock section */
    double rate_seconds;      /* producer time per rate */
    uint64_t rate_max_ev;     /* cap on events per rate (recording size) */
    double rates[MAX_RATES];
    int nrates;
    const char *tmpfs_dir; /* hot section and rate/parts on tmpfs */
    const char *disk_dir;  /* rate/parts on the real disk */
    const char *sections;
    const char *rate_configs; /* tmpfs, disk, tmpfs_lane16k */
    uint32_t lttng_sleep_ms;  /* pause after an LTTng burst for the consumer daemon */
} opt = {
    .repeats = 5,
    .rate_repeats = 3,
    .rate_threads = 1,
    .rate_small_lane = 16384,
    .hot_events = 4u << 20,
    .lane_events = 1u << 20,
    .idle_calls = 100000000,
    .clock_calls = 10000000,
    .rate_seconds = 2.0,
    .rate_max_ev = 64000000,
    .tmpfs_dir = "/dev/shm",
    .disk_dir = "/tmp",
    .sections = "clock,idle,hot,parts,rate",
    .rate_configs = "tmpfs_default,disk_default,tmpfs,disk,tmpfs_lane16k",
    .lttng_sleep_ms = 60,
};

/* name is one of the comma-separated words of list. */
static int listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == 0 || p[n] == ','))
            return 1;
    return 0;
}

static int section_on(const char *name)
{
    return listed(opt.sections, name);
}

/* ---- Small helpers ------------------------------------------------------------------------ */

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "termsight_bench: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
    double tmp[4096];
    if (n <= 0)
        return NAN;
    if (n > 4096)
        n = 4096;
    memcpy(tmp, v, (size_t)n * sizeof *tmp);
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_double);
    return n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
}

/* Keeps a value alive without a store the compiler could drop. */
static inline void keep(uint64_t v)
{
    __asm__ volatile("" : : "r"(v));
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Removes a folder this program created. */
static void rm_rf(const char *path)
{
    nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- Results ------------------------------------------------------------------------------ */

typedef struct metric {
    char key[64];
    char unit[24];
    char what[128];
    double v[MAX_REPEATS];
    int n;
} metric;

static metric metrics[256];
static int nmetrics;

static metric *metric_get(const char *key, const char *unit, const char *what)
{
    for (int i = 0; i < nmetrics; i++)
        if (!strcmp(metrics[i].key, key))
            return &metrics[i];
    if (nmetrics == (int)(sizeof metrics / sizeof *metrics))
        die("too many metrics");
    metric *m = &metrics[nmetrics++];
    snprintf(m->key, sizeof m->key, "%s", key);
    snprintf(m->unit, sizeof m->unit, "%s", unit);
    snprintf(m->what, sizeof m->what, "%s", what);
    return m;
}

static void put(const char *key, const char *unit, const char *what, double v)
{
    metric *m = metric_get(key, unit, what);
    if (m->n < MAX_REPEATS)
        m->v[m->n++] = v;
}

static void print_results(void)
{
    printf("\n%-32s %-62s %10s %10s %10s %-9s %s\n", "key", "what", "median", "min", "max", "unit",
           "n");
    for (int i = 0; i < nmetrics; i++) {
        metric *m = &metrics[i];
        double lo = m->v[0], hi = m->v[0];
        for (int j = 1; j < m->n; j++) {
            lo = m->v[j] < lo ? m->v[j] : lo;
            hi = m->v[j] > hi ? m->v[j] : hi;
        }
        printf("%-32s %-62s %10.3f %10.3f %10.3f %-9s %d\n", m->key, m->what, median(m->v, m->n),
               lo, hi, m->unit, m->n);
    }
    printf("\n");
    for (int i = 0; i < nmetrics; i++) {
        metric *m = &metrics[i];
        double lo = m->v[0], hi = m->v[0];
        for (int j = 1; j < m->n; j++) {
            lo = m->v[j] < lo ? m->v[j] : lo;
            hi = m->v[j] > hi ? m->v[j] : hi;
        }
        printf("RESULT %s %.4f %.4f %.4f %s %d\n", m->key, median(m->v, m->n), lo, hi, m->unit,
               m->n);
    }
}

/* ---- Sessions ----------------------------------------------------------------------------- */

static char work_dir[PATH_MAX]; /* <tmpfs_dir>/termsight-bench-<pid> */
static int session_serial;

typedef struct bench_session {
    termsight_session *s;
    char dir[PATH_MAX];
    pid_t rec_tid; /* the library's recorder thread, for its CPU time */
} bench_session;

/* The recorder thread: the task of this process named "termsight-rec". */
static pid_t find_recorder(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return 0;
    pid_t found = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], comm[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "re");
        if (!f)
            continue;
        if (fgets(comm, sizeof comm, f) && !strncmp(comm, "termsight-rec", 13))
            found = (pid_t)atoi(e->d_name);
        fclose(f);
    }
    closedir(d);
    return found;
}

/* Scheduler figures of a thread of this process: ns on a CPU and ns runnable but waiting for
 * one (schedstat), and its voluntary context switches (sleeps, blocking writes). */
typedef struct thread_sched {
    uint64_t run_ns, wait_ns, vol_switches;
} thread_sched;

static thread_sched thread_sched_get(pid_t tid)
{
    thread_sched t = {0, 0, 0};
    char path[80], line[256];
    unsigned long long run = 0, wait = 0;
    snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", (int)tid);
    FILE *f = fopen(path, "re");
    if (f) {
        if (fscanf(f, "%llu %llu", &run, &wait) == 2) {
            t.run_ns = run;
            t.wait_ns = wait;
        }
        fclose(f);
    }
    snprintf(path, sizeof path, "/proc/self/task/%d/status", (int)tid);
    f = fopen(path, "re");
    if (f) {
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "voluntary_ctxt_switches:", 24))
                t.vol_switches = strtoull(line + 24, NULL, 10);
        fclose(f);
    }
    return t;
}

static void session_open(bench_session *b, const char *parent, int collecting, uint32_t lane,
                         int monotonic)
{
    if (snprintf(b->dir, sizeof b->dir, "%s/s%d", parent, session_serial++) >= (int)sizeof b->dir)
        die("folder name too long under %s", parent);
    if (mkdir(b->dir, 0700) != 0 && errno != EEXIST)
        die("cannot create %s: %s", b->dir, strerror(errno));
    termsight_options o;
    termsight_options_init(&o);
    o.output_path = b->dir;
    o.start_collecting = collecting;
    if (lane) /* 0: the default lanes, as a new user has them */
        o.lane_events = lane;
    o.max_threads = 2 + opt.rate_threads;
    o.process_name = "termsight_bench";
    if (monotonic)
        setenv("TERMSIGHT_CLOCK", "monotonic", 1);
    else
        unsetenv("TERMSIGHT_CLOCK");
    int rc = termsight_session_create(&o, &b->s);
    unsetenv("TERMSIGHT_CLOCK");
    if (rc != TERMSIGHT_OK)
        die("termsight_session_create: %s (%s)", termsight_strerror(rc), termsight_last_error());
    b->rec_tid = find_recorder();
}

static void session_close(bench_session *b)
{
    int rc = termsight_session_destroy(b->s);
    if (rc != TERMSIGHT_OK)
        fprintf(stderr, "termsight_bench: destroy: %s (%s)\n", termsight_strerror(rc),
                termsight_last_error());
    b->s = NULL;
    rm_rf(b->dir);
}

/* Events recorded or counted as dropped: every one emitted is one or the other once the
 * recorder has caught up (a lane that is still growing drops some). */
static uint64_t accounted(termsight_session *s)
{
    return termsight_events_recorded(s) + termsight_events_dropped(s);
}

/* Waits until the recorder has accounted for target events (a burst emitted after the count was
 * base). */
static void wait_recorded(termsight_session *s, uint64_t target)
{
    uint64_t t0 = mono_ns();
    while (accounted(s) < target) {
        sleep_ns(50000);
        if (mono_ns() - t0 > 20000000000ull) {
            fprintf(stderr,
                    "termsight_bench: recorder did not catch up (%" PRIu64 " of %" PRIu64 ")\n",
                    termsight_events_recorded(s), target);
            return;
        }
    }
}

/* ---- Bursts ------------------------------------------------------------------------------- */

enum kind { K_INSTANT, K_PAIR, K_COMPLETE, K_LTTNG, K__COUNT };

static uint32_t id_name, id_type;
static uint32_t my_tid;

/* Emits n events of kind k and returns the nanoseconds the calls took. For K_PAIR, n ranges
 * (begin + end each; one event is written per range). */
static uint64_t burst(enum kind k, uint64_t n)
{
    uint64_t t0 = mono_ns();
    switch (k) {
    case K_INSTANT:
        for (uint64_t i = 0; i < n; i++)
            termsight_counter_id(id_name, (double)i);
        break;
    case K_PAIR:
        for (uint64_t i = 0; i < n; i++) {
            termsight_range_begin_id(id_name, id_type);
            termsight_range_end();
        }
        break;
    case K_COMPLETE: {
        uint64_t t = t0;
        for (uint64_t i = 0; i < n; i++) {
            termsight_range_complete(id_name, id_type, t, t + 100, i);
            t += 128;
        }
        break;
    }
    case K_LTTNG:
#ifdef TS_BENCH_LTTNG
        for (uint64_t i = 0; i < n; i++)
            lttng_ust_tracepoint(termsight_bench, event, 15, 1, my_tid, id_name, t0, t0, i);
#endif
        break;
    default:
        break;
    }
    return mono_ns() - t0;
}

/* ---- Section: clocks ---------------------------------------------------------------------- */

static double per_call_clock_gettime(uint64_t n)
{
    uint64_t acc = 0, t0 = mono_ns();
    for (uint64_t i = 0; i < n; i++) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        acc += (uint64_t)ts.tv_nsec;
    }
    uint64_t dt = mono_ns() - t0;
    keep(acc);
    return (double)dt / (double)n;
}

static double per_call_rdtsc(uint64_t n)
{
    uint64_t acc = 0, t0 = mono_ns();
    for (uint64_t i = 0; i < n; i++)
        acc += __rdtsc();
    uint64_t dt = mono_ns() - t0;
    keep(acc);
    return (double)dt / (double)n;
}

static double per_call_rdtscp(uint64_t n)
{
    uint64_t acc = 0, t0 = mono_ns();
    unsigned aux;
    for (uint64_t i = 0; i < n; i++)
        acc += __rdtscp(&aux);
    uint64_t dt = mono_ns() - t0;
    keep(acc);
    return (double)dt / (double)n;
}

static double per_call_now_ns(uint64_t n)
{
    uint64_t acc = 0, t0 = mono_ns();
    for (uint64_t i = 0; i < n; i++)
        acc += termsight_now_ns();
    uint64_t dt = mono_ns() - t0;
    keep(acc);
    return (double)dt / (double)n;
}

static void section_clock(void)
{
    printf("== clock: %" PRIu64 " calls per repeat, %d repeats\n", opt.clock_calls, opt.repeats);
    bench_session tsc, mono;
    for (int r = 0; r < opt.repeats; r++) {
        session_open(&tsc, work_dir, 0, 1024, 0);
        put("clock.clock_gettime", "ns/call", "clock_gettime(CLOCK_MONOTONIC)",
            per_call_clock_gettime(opt.clock_calls));
        put("clock.rdtsc", "ns/call", "rdtsc (__rdtsc)", per_call_rdtsc(opt.clock_calls));
        put("clock.rdtscp", "ns/call", "rdtscp (__rdtscp)", per_call_rdtscp(opt.clock_calls));
        put("clock.now_ns_tsc", "ns/call", "termsight_now_ns, TSC-scaled (default)",
            per_call_now_ns(opt.clock_calls));
        session_close(&tsc);
        session_open(&mono, work_dir, 0, 1024, 1);
        put("clock.now_ns_monotonic", "ns/call", "termsight_now_ns, TERMSIGHT_CLOCK=monotonic",
            per_call_now_ns(opt.clock_calls));
        session_close(&mono);
    }
}

/* ---- Section: not collecting -------------------------------------------------------------- */

static double idle_pair(uint64_t n)
{
    uint64_t t0 = mono_ns();
    for (uint64_t i = 0; i < n; i++) {
        termsight_range_begin_id(id_name, id_type);
        termsight_range_end();
    }
    return (double)(mono_ns() - t0) / (double)n;
}

static double idle_counter(uint64_t n)
{
    uint64_t t0 = mono_ns();
    for (uint64_t i = 0; i < n; i++)
        termsight_counter_id(id_name, (double)i);
    return (double)(mono_ns() - t0) / (double)n;
}

static double idle_complete(uint64_t n)
{
    uint64_t t0 = mono_ns();
    for (uint64_t i = 0; i < n; i++)
        termsight_range_complete(id_name, id_type, i, i + 1, 0);
    return (double)(mono_ns() - t0) / (double)n;
}

static double empty_loop(uint64_t n)
{
    uint64_t t0 = mono_ns();
    for (uint64_t i = 0; i < n; i++)
        __asm__ volatile("" : : "r"(i));
    return (double)(mono_ns() - t0) / (double)n;
}

#ifdef TS_BENCH_LTTNG
static double lttng_disabled(uint64_t n)
{
    uint64_t t0 = mono_ns();
    for (uint64_t i = 0; i < n; i++)
        lttng_ust_tracepoint(termsight_bench, event_off, 15, 1, my_tid, id_name, t0, t0, i);
    return (double)(mono_ns() - t0) / (double)n;
}
#endif

static void section_idle(void)
{
    printf("== idle: %" PRIu64 " calls per repeat, %d repeats\n", opt.idle_calls, opt.repeats);
    bench_session b;
    session_open(&b, work_dir, 0, 1024, 0);
    id_name = termsight_name("bench.op");
    id_type = termsight_name("bench.type");
    for (int r = 0; r < opt.repeats; r++) {
        double pair = idle_pair(opt.idle_calls / 2);
        put("idle.pair", "ns/range", "not collecting: range_begin_id + range_end", pair);
        put("idle.pair_per_call", "ns/call", "not collecting: the same, per call", pair / 2);
        put("idle.counter", "ns/call", "not collecting: termsight_counter_id",
            idle_counter(opt.idle_calls));
        put("idle.complete", "ns/call", "not collecting: termsight_range_complete",
            idle_complete(opt.idle_calls));
        put("idle.empty_loop", "ns/iter", "empty loop (loop overhead alone)",
            empty_loop(opt.idle_calls));
#ifdef TS_BENCH_LTTNG
        put("lttng.disabled", "ns/call", "LTTng-UST tracepoint, disabled",
            lttng_disabled(opt.idle_calls));
#endif
    }
    put("idle.drops", "events", "not collecting: events dropped",
        (double)termsight_events_dropped(b.s));
    session_close(&b);
}

/* ---- Section: collecting ------------------------------------------------------------------ */

/* A fresh session's lanes are untouched shared memory: the first pass through a lane pays a page
 * fault per 64 events. Measured once per session, then every later burst is warm. */
static double warm_lane(termsight_session *s, uint64_t burst_events)
{
    uint64_t total = 0, ns = 0;
    while (total < (uint64_t)opt.lane_events + burst_events) {
        uint64_t base = accounted(s);
        ns += burst(K_INSTANT, burst_events);
        total += burst_events;
        wait_recorded(s, base + burst_events);
    }
    return (double)ns / (double)total;
}

#ifdef TS_BENCH_LTTNG
static void lttng_burst_pause(uint64_t burst_ns)
{
    /* The consumer daemon drains LTTng's buffers on its own: give it time to do so, outside
     * the timed part, so that its work does not fall into our bursts. */
    sleep_ns((uint64_t)opt.lttng_sleep_ms * 1000000ull + 2 * burst_ns);
}
#endif

/* The LTTng-UST tracepoint's ns per event in this process's last hot repeat; 0: not measured.
 * LTTng records every event it is given (discard mode reports none discarded at these sizes),
 * so this is also its cost per recorded event. */
static double lttng_last;

static const char *kind_key[K__COUNT] = {"hot.instant", "hot.pair", "hot.complete",
                                         "lttng.enabled"};

static void hot_repeat(int monotonic, int with_lttng)
{
    uint64_t burst_events = opt.lane_events / 4;
    uint64_t bursts = (opt.hot_events + burst_events - 1) / burst_events;
    bench_session b;
    session_open(&b, work_dir, 1, opt.lane_events, monotonic);
    id_name = termsight_name("bench.op");
    id_type = termsight_name("bench.type");
    double cold = warm_lane(b.s, burst_events);
    uint64_t warm_drops = termsight_events_dropped(b.s); /* while the lane grew to fit */
#ifdef TS_BENCH_LTTNG
    /* LTTng's ring buffers get the same first pass before anything is timed. */
    if (with_lttng && !monotonic)
        for (uint64_t done = 0; done < (uint64_t)opt.lane_events + burst_events;
             done += burst_events)
            lttng_burst_pause(burst(K_LTTNG, burst_events));
#endif
    if (!monotonic)
        put("hot.cold_lane", "ns/event", "instant, first pass through a fresh lane (page faults)",
            cold);
    static double per[K__COUNT][4096];
    uint64_t lttng_events = 0;
    int nk = monotonic ? 2 : (with_lttng ? K__COUNT : K_LTTNG);
    if (bursts > 4096)
        bursts = 4096;
    for (uint64_t j = 0; j < bursts; j++) {
        for (int k = 0; k < nk; k++) {
            uint64_t n = burst_events;
            uint64_t base = accounted(b.s);
            uint64_t ns = burst((enum kind)k, n);
            per[k][j] = (double)ns / (double)n;
            if (k == K_LTTNG) {
#ifdef TS_BENCH_LTTNG
                lttng_events += n;
                lttng_burst_pause(ns);
#endif
            } else {
                wait_recorded(b.s, base + n);
            }
        }
    }
    uint64_t drops = termsight_events_dropped(b.s) - warm_drops;
    double med[K__COUNT];
    for (int k = 0; k < nk; k++)
        med[k] = median(per[k], (int)bursts);
    if (monotonic) {
        put("hot.instant_monoclock", "ns/event", "instant, TERMSIGHT_CLOCK=monotonic",
            med[K_INSTANT]);
        put("hot.pair_monoclock", "ns/range", "range begin+end, TERMSIGHT_CLOCK=monotonic",
            med[K_PAIR]);
        put("hot.drops_monoclock", "events", "dropped, monotonic-clock session", (double)drops);
    } else {
        put(kind_key[K_INSTANT], "ns/event", "instant: termsight_counter_id", med[K_INSTANT]);
        put(kind_key[K_PAIR], "ns/range", "range: begin_id+end (1 event written per range)",
            med[K_PAIR]);
        put("hot.pair_per_call", "ns/call", "range: the same, per call", med[K_PAIR] / 2);
        put(kind_key[K_COMPLETE], "ns/event", "range_complete, caller timestamps", med[K_COMPLETE]);
        if (nk > K_LTTNG) {
            lttng_last = med[K_LTTNG];
            put(kind_key[K_LTTNG], "ns/event", "LTTng-UST tracepoint, enabled session",
                med[K_LTTNG]);
            put("ratio.instant_lttng", "x", "instant / LTTng (target <= 0.2)",
                med[K_INSTANT] / med[K_LTTNG]);
            put("ratio.pair_lttng", "x", "range (one event) / LTTng", med[K_PAIR] / med[K_LTTNG]);
            put("ratio.complete_lttng", "x", "range_complete / LTTng",
                med[K_COMPLETE] / med[K_LTTNG]);
            put("lttng.events", "events", "LTTng events emitted", (double)lttng_events);
        }
        put("hot.events", "events", "termsight events per kind, timed",
            (double)(bursts * burst_events));
        put("hot.drops", "events", "termsight_events_dropped after the bursts", (double)drops);

        /* The same calls after termsight_stop: the not-collecting path of a stopped session. */
        if (termsight_stop(b.s) != TERMSIGHT_OK)
            die("termsight_stop: %s", termsight_last_error());
        double pair = idle_pair(opt.idle_calls / 2);
        put("stopped.pair", "ns/range", "after termsight_stop: range_begin_id + range_end", pair);
        put("stopped.pair_per_call", "ns/call", "after termsight_stop: the same, per call",
            pair / 2);
        put("stopped.counter", "ns/call", "after termsight_stop: termsight_counter_id",
            idle_counter(opt.idle_calls));
    }
    session_close(&b);
}

static void section_hot(int with_lttng)
{
    printf("== hot: %d repeats of %" PRIu64 " events per kind, bursts of %u, lane %u events%s\n",
           opt.repeats, opt.hot_events, opt.lane_events / 4, opt.lane_events,
           with_lttng ? ", LTTng-UST bursts interleaved" : "");
    for (int r = 0; r < opt.repeats; r++) {
        hot_repeat(0, with_lttng);
        hot_repeat(1, 0);
    }
}

/* ---- Section: the recorder's parts -------------------------------------------------------- */

__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const void *p, size_t n)
{
    const uint64_t *q = p;
    uint64_t c = ~crc;
    for (size_t i = 0; i < n / 8; i++)
        c = __builtin_ia32_crc32di(c, q[i]);
    return ~(uint32_t)c;
}

#define PART_CHUNK (4096u * 64u) /* one EVENTS chunk of the recording: 4096 events */
#define PART_BUF   (64u << 20)   /* walked through, so the data is not all in cache */

static void section_parts(void)
{
    unsigned char *buf = malloc(PART_BUF);
    if (!buf)
        die("out of memory");
    for (size_t i = 0; i < PART_BUF; i++)
        buf[i] = (unsigned char)(i * 131u);
    uint64_t total = 1ull << 30;
    printf("== parts: %" PRIu64 " MiB per repeat in chunks of %u bytes\n", total >> 20, PART_CHUNK);
    for (int r = 0; r < opt.repeats; r++) {
        uLong crc = crc32(0L, Z_NULL, 0);
        uint64_t t0 = mono_ns();
        for (uint64_t off = 0; off < total; off += PART_CHUNK)
            crc = crc32(crc, buf + off % PART_BUF, PART_CHUNK);
        double ns = (double)(mono_ns() - t0);
        keep(crc);
        put("parts.crc32_zlib", "ns/event", "zlib crc32 (the recording's), per 64 B",
            ns * 64 / (double)total);
        uint32_t c2 = 0;
        t0 = mono_ns();
        for (uint64_t off = 0; off < total; off += PART_CHUNK)
            c2 = crc32c_hw(c2, buf + off % PART_BUF, PART_CHUNK);
        ns = (double)(mono_ns() - t0);
        keep(c2);
        put("parts.crc32c_hw", "ns/event", "SSE4.2 CRC-32C, one stream, per 64 B (compare)",
            ns * 64 / (double)total);
        const char *dirs[2] = {opt.tmpfs_dir, opt.disk_dir};
        const char *keys[2] = {"parts.write_tmpfs", "parts.write_disk"};
        const char *whats[2] = {"write() 256 KiB blocks to tmpfs, per 64 B",
                                "write() 256 KiB blocks to disk (page cache), per 64 B"};
        for (int d = 0; d < 2; d++) {
            char dir[PATH_MAX], path[PATH_MAX + 16];
            snprintf(dir, sizeof dir, "%s/termsight-bench-%d-parts", dirs[d], (int)getpid());
            mkdir(dir, 0700);
            snprintf(path, sizeof path, "%s/w", dir);
            int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
            if (fd < 0)
                die("cannot create %s: %s", path, strerror(errno));
            t0 = mono_ns();
            for (uint64_t off = 0; off < total; off += PART_CHUNK) {
                const unsigned char *p = buf + off % PART_BUF;
                size_t left = PART_CHUNK;
                while (left) {
                    ssize_t w = write(fd, p, left);
                    if (w <= 0)
                        die("write %s: %s", path, strerror(errno));
                    p += w;
                    left -= (size_t)w;
                }
            }
            ns = (double)(mono_ns() - t0);
            close(fd);
            rm_rf(dir);
            put(keys[d], "ns/event", whats[d], ns * 64 / (double)total);
        }
    }
    free(buf);
}

/* ---- Section: events per second ----------------------------------------------------------- */

typedef struct rate_result {
    double target, achieved; /* events/s; target 0: unpaced */
    uint64_t emitted, recorded, drops, file_bytes;
    double seconds, rec_cpu; /* recorder CPU time / wall time */
    double rec_wait;         /* recorder runnable but not running / wall time */
    uint64_t rec_sleeps;     /* recorder voluntary context switches */
} rate_result;

static uint64_t file_size(const char *run_folder)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/recording/events.tsr", run_folder);
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* One producer of the rate section: termsight_range_complete at its target rate (0: as fast as
 * it can, up to max_ev events) for limit_ns. */
typedef struct producer {
    pthread_t thread;
    double target;
    uint64_t max_ev, limit_ns, emitted;
} producer;

static void produce(producer *p)
{
    uint64_t t0 = mono_ns(), now = t0, emitted = 0, t = t0;
    const uint64_t step = 256;
    while (now - t0 < p->limit_ns && (p->target > 0 || emitted < p->max_ev)) {
        for (uint64_t i = 0; i < step; i++) {
            termsight_range_complete(id_name, id_type, t, t + 100, i);
            t += 128;
        }
        emitted += step;
        now = mono_ns();
        if (p->target > 0) {
            /* Ahead of the schedule: spin until the clock catches up. */
            double due = (double)emitted / p->target * 1e9;
            while ((double)(now - t0) < due)
                now = mono_ns();
        }
    }
    p->emitted = emitted;
}

static void *produce_thread(void *arg)
{
    produce(arg);
    return NULL;
}

static rate_result rate_run(const char *parent, double target, uint32_t lane)
{
    rate_result res = {.target = target};
    bench_session b;
    session_open(&b, parent, 1, lane, 0);
    id_name = termsight_name("bench.op");
    id_type = termsight_name("bench.type");
    warm_lane(b.s, (lane ? lane : 65536) / 4);
    uint64_t rec0 = termsight_events_recorded(b.s);
    uint64_t drop0 = termsight_events_dropped(b.s);
    double secs = opt.rate_seconds;
    if (target > 0 && target * secs > (double)opt.rate_max_ev)
        secs = (double)opt.rate_max_ev / target;
    uint64_t limit_ns = (uint64_t)(secs * 1e9);
    thread_sched sc0 = thread_sched_get(b.rec_tid);
    uint64_t t0 = mono_ns(), emitted = 0;
    int nthreads = opt.rate_threads;
    producer prod[MAX_RATE_THREADS];
    for (int i = 0; i < nthreads; i++) {
        prod[i] = (producer){.target = target / nthreads,
                             .max_ev = opt.rate_max_ev / (uint64_t)nthreads,
                             .limit_ns = limit_ns};
        if (i > 0 && pthread_create(&prod[i].thread, NULL, produce_thread, &prod[i]) != 0)
            die("pthread_create failed");
    }
    produce(&prod[0]); /* the first producer is this thread, whose lane warm_lane grew */
    emitted = prod[0].emitted;
    for (int i = 1; i < nthreads; i++) {
        pthread_join(prod[i].thread, NULL);
        emitted += prod[i].emitted;
    }
    uint64_t t1 = mono_ns();
    thread_sched sc1 = thread_sched_get(b.rec_tid);
    if (termsight_stop(b.s) != TERMSIGHT_OK)
        die("termsight_stop: %s", termsight_last_error());
    res.emitted = emitted;
    res.seconds = (double)(t1 - t0) / 1e9;
    res.achieved = (double)emitted / res.seconds;
    res.recorded = termsight_events_recorded(b.s) - rec0;
    res.drops = termsight_events_dropped(b.s) - drop0;
    res.rec_cpu = b.rec_tid ? (double)(sc1.run_ns - sc0.run_ns) / (double)(t1 - t0) : NAN;
    res.rec_wait = b.rec_tid ? (double)(sc1.wait_ns - sc0.wait_ns) / (double)(t1 - t0) : NAN;
    res.rec_sleeps = sc1.vol_switches - sc0.vol_switches;
    res.file_bytes = file_size(termsight_run_folder(b.s));
    session_close(&b);
    return res;
}

static void rate_put(const char *cfg, const char *what_cfg, const rate_result *x)
{
    char key[64], what[128], rate[16];
    if (x->target > 0)
        snprintf(rate, sizeof rate, "%.0fM", x->target / 1e6);
    else
        snprintf(rate, sizeof rate, "unpaced");
    snprintf(key, sizeof key, "rate.%s.%s", cfg, rate);
    snprintf(what, sizeof what, "%s: achieved at target %s/s", what_cfg, rate);
    put(key, "Mev/s", what, x->achieved / 1e6);
    snprintf(key, sizeof key, "rate.%s.%s.drops", cfg, rate);
    snprintf(what, sizeof what, "%s: drops at target %s/s", what_cfg, rate);
    put(key, "events", what, (double)x->drops);
    snprintf(key, sizeof key, "rate.%s.%s.reccpu", cfg, rate);
    snprintf(what, sizeof what, "%s: recorder CPU at target %s/s", what_cfg, rate);
    put(key, "%", what, 100 * x->rec_cpu);
    if (x->recorded) {
        /* What one event that reached the recording cost the producer (its calls' time over
         * what was recorded): the figure to hold against LTTng-UST's per event under saturation. */
        snprintf(key, sizeof key, "rate.%s.%s.per_recorded", cfg, rate);
        snprintf(what, sizeof what, "%s: producer ns per recorded event at %s/s", what_cfg, rate);
        put(key, "ns", what, x->seconds * 1e9 / (double)x->recorded);
        if (lttng_last > 0 && x->target == 0) {
            snprintf(key, sizeof key, "ratio.saturated_%s_lttng", cfg);
            snprintf(what, sizeof what, "%s: unpaced, per recorded event / LTTng (target <= 0.2)",
                     what_cfg);
            put(key, "x", what, x->seconds * 1e9 / (double)x->recorded / lttng_last);
        }
    }
}

static void section_rate(void)
{
    struct {
        const char *key, *what, *dir;
        uint32_t lane;
    } cfgs[5] = {
        {"tmpfs_default", "tmpfs, default lanes (grow up to 2^24)", opt.tmpfs_dir, 0},
        {"disk_default", "disk, default lanes (grow up to 2^24)", opt.disk_dir, 0},
        {"tmpfs", "tmpfs, lanes up to 2^20", opt.tmpfs_dir, opt.lane_events},
        {"disk", "disk, lanes up to 2^20", opt.disk_dir, opt.lane_events},
        {"tmpfs_lane16k", "tmpfs, fixed 16384-event lane", opt.tmpfs_dir, opt.rate_small_lane},
    };
    int ncfg = opt.rate_small_lane ? 5 : 4;
    printf("== rate: %d producer thread(s) of termsight_range_complete sharing each target, for up "
           "to %.1f s (at most %" PRIu64 " events), %d repeats\n",
           opt.rate_threads, opt.rate_seconds, opt.rate_max_ev, opt.rate_repeats);
    for (int d = 0; d < ncfg; d++) {
        if (!listed(opt.rate_configs, cfgs[d].key))
            continue;
        char parent[PATH_MAX];
        snprintf(parent, sizeof parent, "%s/termsight-bench-%d-rate", cfgs[d].dir, (int)getpid());
        if (mkdir(parent, 0700) != 0 && errno != EEXIST)
            die("cannot create %s: %s", parent, strerror(errno));
        for (int r = 0; r < opt.rate_repeats; r++) {
            double best = 0;
            int failures = 0;
            for (int i = 0; i < opt.nrates; i++) {
                /* Climb until two rates in a row drop; the unpaced run always goes. */
                if (failures >= 2 && opt.rates[i] > 0)
                    continue;
                rate_result x = rate_run(parent, opt.rates[i], cfgs[d].lane);
                printf("  %-13s target %6.1f M/s  achieved %6.2f M/s  %5.2f s  emitted %10" PRIu64
                       "  recorded %10" PRIu64 "  drops %9" PRIu64
                       "  recorder CPU %5.1f %% waiting %4.1f %% sleeps %6" PRIu64
                       "  file %7.1f MiB  (%.0f MB/s)\n",
                       cfgs[d].key, x.target / 1e6, x.achieved / 1e6, x.seconds, x.emitted,
                       x.recorded, x.drops, 100 * x.rec_cpu, 100 * x.rec_wait, x.rec_sleeps,
                       (double)x.file_bytes / 1048576.0, (double)x.file_bytes / 1e6 / x.seconds);
                fflush(stdout);
                rate_put(cfgs[d].key, cfgs[d].what, &x);
                /* A paced run that fell short of its target (the producer itself did not get
                 * the CPU: other load on the machine) says nothing about the pipe. */
                int starved = x.target > 0 && x.achieved < 0.95 * x.target;
                if (starved)
                    printf("  %-13s (producer starved: achieved < 95 %% of the target, not counted)"
                           "\n",
                           cfgs[d].key);
                if (x.drops == 0 && x.recorded >= x.emitted && !starved) {
                    if (x.achieved > best)
                        best = x.achieved;
                    failures = 0;
                } else if (x.target > 0 && !starved) {
                    failures++;
                }
            }
            char key[64], what[128];
            snprintf(key, sizeof key, "rate.%s.max_zero_drop", cfgs[d].key);
            snprintf(what, sizeof what, "%s: highest achieved rate with zero drops", cfgs[d].what);
            put(key, "Mev/s", what, best / 1e6);
        }
        rm_rf(parent);
    }
}

/* ---- Main --------------------------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr,
            "usage: termsight_bench [--sections clock,idle,hot,parts,rate] [--repeats N]\n"
            "         [--hot-events N] [--lane-events N] [--idle-calls N] [--clock-calls N]\n"
            "         [--rates 10,20,30,50,0 (M/s; 0 = unpaced)] [--rate-seconds S]\n"
            "         [--rate-max-events N] [--rate-repeats N] [--rate-small-lane N (0: off)]\n"
            "         [--rate-threads N (producers sharing each rate, 1..%d)]\n"
            "         [--rate-configs tmpfs_default,disk_default,tmpfs,disk,tmpfs_lane16k]\n"
            "         [--tmpfs DIR] [--disk DIR] [--lttng-sleep-ms N]\n",
            MAX_RATE_THREADS);
    exit(2);
}

static uint64_t parse_u64(const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end || end == s)
        die("not a number: %s", s);
    return v;
}

static void parse_rates(const char *s)
{
    opt.nrates = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok && opt.nrates < MAX_RATES;
         tok = strtok_r(NULL, ",", &save))
        opt.rates[opt.nrates++] = strtod(tok, NULL) * 1e6;
}

int main(int argc, char **argv)
{
    parse_rates("5,10,15,20,30,40,50,0");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help") || !v)
            usage();
        i++;
        if (!strcmp(a, "--sections"))
            opt.sections = v;
        else if (!strcmp(a, "--repeats"))
            opt.repeats = (int)parse_u64(v);
        else if (!strcmp(a, "--hot-events"))
            opt.hot_events = parse_u64(v);
        else if (!strcmp(a, "--lane-events"))
            opt.lane_events = (uint32_t)parse_u64(v);
        else if (!strcmp(a, "--idle-calls"))
            opt.idle_calls = parse_u64(v);
        else if (!strcmp(a, "--clock-calls"))
            opt.clock_calls = parse_u64(v);
        else if (!strcmp(a, "--rates"))
            parse_rates(v);
        else if (!strcmp(a, "--rate-seconds"))
            opt.rate_seconds = strtod(v, NULL);
        else if (!strcmp(a, "--rate-configs"))
            opt.rate_configs = v;
        else if (!strcmp(a, "--rate-repeats"))
            opt.rate_repeats = (int)parse_u64(v);
        else if (!strcmp(a, "--rate-small-lane"))
            opt.rate_small_lane = (uint32_t)parse_u64(v);
        else if (!strcmp(a, "--rate-max-events"))
            opt.rate_max_ev = parse_u64(v);
        else if (!strcmp(a, "--rate-threads"))
            opt.rate_threads = (int)parse_u64(v);
        else if (!strcmp(a, "--tmpfs"))
            opt.tmpfs_dir = v;
        else if (!strcmp(a, "--disk"))
            opt.disk_dir = v;
        else if (!strcmp(a, "--lttng-sleep-ms"))
            opt.lttng_sleep_ms = (uint32_t)parse_u64(v);
        else
            usage();
    }
    if (opt.repeats < 1 || opt.repeats > MAX_REPEATS)
        die("--repeats must be 1..%d", MAX_REPEATS);
    if (opt.lane_events < 1024 || (opt.lane_events & (opt.lane_events - 1)))
        die("--lane-events must be a power of two >= 1024");
    if (opt.rate_small_lane &&
        (opt.rate_small_lane < 1024 || (opt.rate_small_lane & (opt.rate_small_lane - 1))))
        die("--rate-small-lane must be 0 or a power of two >= 1024");
    if (opt.rate_repeats < 1 || opt.rate_repeats > MAX_REPEATS)
        die("--rate-repeats must be 1..%d", MAX_REPEATS);
    if (opt.rate_threads < 1 || opt.rate_threads > MAX_RATE_THREADS)
        die("--rate-threads must be 1..%d", MAX_RATE_THREADS);

    my_tid = (uint32_t)gettid();
    snprintf(work_dir, sizeof work_dir, "%s/termsight-bench-%d", opt.tmpfs_dir, (int)getpid());
    if (mkdir(work_dir, 0700) != 0 && errno != EEXIST)
        die("cannot create %s: %s", work_dir, strerror(errno));

#ifdef TS_BENCH_LTTNG
    int with_lttng = 1;
    printf("termsight_bench (with the LTTng-UST peer): %s\n", opt.sections);
#else
    int with_lttng = 0;
    printf("termsight_bench: %s\n", opt.sections);
#endif
    fflush(stdout);
    if (section_on("clock"))
        section_clock();
    if (section_on("idle"))
        section_idle();
    if (section_on("hot"))
        section_hot(with_lttng);
    if (section_on("parts"))
        section_parts();
    if (section_on("rate"))
        section_rate();
    rm_rf(work_dir);
    print_results();
    return 0;
}
