/* hotpath_harness: the hot-path benchmark's helpers, its results table, its sessions and the
 * bursts of events it times (hotpath.h). */
#include "hotpath.h"

/* ---- Small helpers ------------------------------------------------------------------------ */

void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "termsight_bench: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void sleep_ns(uint64_t ns)
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

double median(const double *v, int n)
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

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Removes a folder this program created. */
void rm_rf(const char *path)
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

void put(const char *key, const char *unit, const char *what, double v)
{
    metric *m = metric_get(key, unit, what);
    if (m->n < MAX_REPEATS)
        m->v[m->n++] = v;
}

/* The smallest and largest of m's measurements. */
static void min_max(const metric *m, double *lo, double *hi)
{
    *lo = *hi = m->v[0];
    for (int j = 1; j < m->n; j++) {
        *lo = m->v[j] < *lo ? m->v[j] : *lo;
        *hi = m->v[j] > *hi ? m->v[j] : *hi;
    }
}

void print_results(void)
{
    printf("\n%-32s %-62s %10s %10s %10s %-9s %s\n", "key", "what", "median", "min", "max", "unit",
           "n");
    for (int i = 0; i < nmetrics; i++) {
        metric *m = &metrics[i];
        double lo, hi;
        min_max(m, &lo, &hi);
        printf("%-32s %-62s %10.3f %10.3f %10.3f %-9s %d\n", m->key, m->what, median(m->v, m->n),
               lo, hi, m->unit, m->n);
    }
    printf("\n");
    for (int i = 0; i < nmetrics; i++) {
        metric *m = &metrics[i];
        double lo, hi;
        min_max(m, &lo, &hi);
        printf("RESULT %s %.4f %.4f %.4f %s %d\n", m->key, median(m->v, m->n), lo, hi, m->unit,
               m->n);
    }
}

/* ---- Sessions ----------------------------------------------------------------------------- */

char work_dir[PATH_MAX];
static int session_serial;

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

thread_sched thread_sched_get(pid_t tid)
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

void session_open(bench_session *b, const char *parent, int collecting, uint32_t lane,
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

void session_close(bench_session *b)
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
uint64_t accounted(termsight_session *s)
{
    return termsight_events_recorded(s) + termsight_events_dropped(s);
}

/* Waits until the recorder has accounted for target events (a burst emitted after the count was
 * base). */
void wait_recorded(termsight_session *s, uint64_t target)
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

uint32_t id_name, id_type;
uint32_t my_tid;

/* Emits n events of kind k and returns the nanoseconds the calls took. For K_PAIR, n ranges
 * (begin + end each; one event is written per range). */
uint64_t burst(enum kind k, uint64_t n)
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

/* A fresh session's lanes are untouched shared memory: the first pass through a lane pays a page
 * fault per 64 events. Measured once per session, then every later burst is warm. */
double warm_lane(termsight_session *s, uint64_t burst_events)
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
