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
#include "hotpath.h"

/* ---- Options ----------------------------------------------------------------------------- */

bench_opts opt = {
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
int listed(const char *list, const char *name)
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
double lttng_last;

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
