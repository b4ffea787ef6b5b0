/* hotpath_rate: events per second through lane -> recorder -> recording, a producer paced at
 * increasing target rates, one fresh session per rate (hotpath.h). */
#include "hotpath.h"

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

void section_rate(void)
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
