/* test_cpu_memory: CPU utilization rows and averages (cpu.c); host RSS, device memory totals,
 * peaks and allocations by name (memory.c). */
#include "analysis_internal.h"
#include "golden.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define EPS     1e-9
#define SEC_NS  1000000000ull
#define SAMPLER 7u /* the sampler thread's tid */

/* ---- Feeding in other orders ------------------------------------------------------------ */

enum order { ORDER_AS_PUSHED, ORDER_REVERSED, ORDER_SHUFFLED, ORDER_THREAD_BLOCKS, ORDER__COUNT };

static uint64_t rng_next(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* A copy of g's events permuted by order. Thread blocks: the events of each thread together,
 * threads in descending tid order (as a drain writes one lane after another). */
static ts_event *permuted(const golden *g, enum order order)
{
    ts_event *ev = malloc((g->nev ? g->nev : 1) * sizeof *ev);
    ck_assert_ptr_nonnull(ev);
    memcpy(ev, g->ev, g->nev * sizeof *ev);
    uint64_t x = 0x2545f4914f6cdd1dull;
    switch (order) {
    case ORDER_REVERSED:
        for (size_t i = 0; i < g->nev; i++)
            ev[i] = g->ev[g->nev - 1 - i];
        break;
    case ORDER_SHUFFLED:
        for (size_t i = 1; i < g->nev; i++) {
            size_t j = rng_next(&x) % (i + 1);
            ts_event t = ev[i];
            ev[i] = ev[j];
            ev[j] = t;
        }
        break;
    case ORDER_THREAD_BLOCKS: {
        size_t n = 0;
        for (uint32_t done = UINT32_MAX;;) {
            uint32_t tid = 0;
            int any = 0;
            for (size_t i = 0; i < g->nev; i++)
                if (g->ev[i].tid < done && (!any || g->ev[i].tid > tid)) {
                    tid = g->ev[i].tid;
                    any = 1;
                }
            if (!any)
                break;
            for (size_t i = 0; i < g->nev; i++)
                if (g->ev[i].tid == tid)
                    ev[n++] = g->ev[i];
            done = tid;
        }
        ck_assert_uint_eq(n, g->nev);
        break;
    }
    default:
        break;
    }
    return ev;
}

static analysis *feed_order(golden *g, const analysis_config *cfg, enum order order, size_t batch)
{
    ts_event *ev = permuted(g, order);
    analysis *a = analysis_create(cfg, golden_names, g);
    ck_assert_ptr_nonnull(a);
    if (!batch)
        batch = g->nev ? g->nev : 1;
    for (size_t i = 0; i < g->nev; i += batch)
        analysis_feed(a, ev + i, g->nev - i < batch ? g->nev - i : batch);
    analysis_finish(a);
    free(ev);
    return a;
}

/* ---- CPU -------------------------------------------------------------------------------- */

static ts_event *cpu_machine(golden *g, uint64_t b_ns, uint64_t e_ns,
                             const uint16_t share[TS_CPU__COUNT], uint64_t cs, uint32_t running,
                             uint32_t blocked)
{
    ts_event *e = golden_push(g, (ts_event){.kind = TS_KIND_CPU_MACHINE,
                                            .tid = SAMPLER,
                                            .device = TS_DEVICE_HOST,
                                            .begin_ns = b_ns,
                                            .end_ns = e_ns,
                                            .corr = cs,
                                            .aux = running << 16 | blocked});
    ts_cpu_pack(e, share);
    return e;
}

static void cpu_process(golden *g, uint64_t b_ns, uint64_t e_ns, uint64_t user_ns,
                        uint64_t system_ns, uint32_t threads, uint32_t cpus)
{
    golden_push(g, (ts_event){.kind = TS_KIND_CPU_PROCESS,
                              .tid = SAMPLER,
                              .device = TS_DEVICE_HOST,
                              .begin_ns = b_ns,
                              .end_ns = e_ns,
                              .aux = threads,
                              .corr = cpus,
                              .v0 = user_ns,
                              .v1 = system_ns});
}

static void cpu_thread_sample(golden *g, uint32_t tid, const char *name, uint64_t b_ns,
                              uint64_t e_ns, uint64_t user_ns, uint64_t system_ns)
{
    golden_push(g, (ts_event){.kind = TS_KIND_CPU_THREAD,
                              .tid = tid,
                              .device = TS_DEVICE_HOST,
                              .name = golden_name(g, name),
                              .begin_ns = b_ns,
                              .end_ns = e_ns,
                              .v0 = user_ns,
                              .v1 = system_ns});
}

static ts_event *cpu_child_sample(golden *g, uint32_t pid, uint32_t ppid, const char *name,
                                  uint64_t b_ns, uint64_t e_ns, uint64_t user_ns,
                                  uint64_t system_ns, uint64_t rss)
{
    return golden_push(g, (ts_event){.kind = TS_KIND_CPU_CHILD,
                                     .tid = pid,
                                     .device = TS_DEVICE_HOST,
                                     .name = golden_name(g, name),
                                     .aux = ppid,
                                     .begin_ns = b_ns,
                                     .end_ns = e_ns,
                                     .corr = rss,
                                     .v0 = user_ns,
                                     .v1 = system_ns});
}

typedef struct cpu_log {
    cpu_row r[64];
    size_t n;
} cpu_log;

static void log_cpu(void *ctx, const cpu_row *r)
{
    cpu_log *l = ctx;
    ck_assert_uint_lt(l->n, 64);
    l->r[l->n++] = *r;
}

/* Shares in 0.01 % of the interval, by enum ts_cpu_field:
 * user, nice, system, idle, iowait, irq, softirq, steal. */
static const uint16_t shares[3][TS_CPU__COUNT] = {
    {2500, 0, 1000, 6000, 500, 0, 0, 0},
    {3000, 100, 1000, 5900, 0, 0, 0, 0},
    {3500, 200, 1000, 5200, 100, 0, 0, 0},
};

/* Three one-second intervals; the process sample of each ends 200 us after the machine's. */
static void cpu_golden(golden *g)
{
    static const uint64_t user_ms[3] = {500, 1500, 1000};
    static const uint32_t cpus[3] = {8, 8, 12};
    for (uint64_t i = 0; i < 3; i++) {
        cpu_machine(g, i * SEC_NS, (i + 1) * SEC_NS, shares[i], 1000 * (i + 1), (uint32_t)(4 + i),
                    i == 1 ? 0 : (uint32_t)(i + 1));
        cpu_process(g, i * SEC_NS + 200 * US, (i + 1) * SEC_NS + 200 * US, user_ms[i] * MS,
                    100 * MS, 12, cpus[i]);
    }
}

START_TEST(test_cpu_rows)
{
    golden g;
    golden_init(&g);
    cpu_golden(&g);
    for (int order = 0; order < ORDER__COUNT; order++) {
        cpu_log log = {.n = 0};
        analysis_sink sink = {.ctx = &log, .cpu = log_cpu};
        analysis_config cfg;
        analysis_config_init(&cfg);
        cfg.sink = &sink;
        analysis *a = feed_order(&g, &cfg, (enum order)order, order == ORDER_SHUFFLED ? 1 : 0);
        /* Every machine sample found its process half: three rows, none alone. */
        ck_assert_uint_eq(log.n, 3);
        static const double user_pct[3] = {50, 150, 100}; /* 500, 1500, 1000 ms of 1 s */
        static const uint32_t blocked[3] = {1, 0, 3};
        for (size_t k = 0; k < 3; k++) {
            const cpu_row *r = NULL;
            for (size_t i = 0; i < log.n; i++)
                if (log.r[i].begin_ns == k * SEC_NS)
                    r = &log.r[i];
            ck_assert_ptr_nonnull(r);
            ck_assert_uint_eq(r->end_ns, (k + 1) * SEC_NS);
            for (int f = 0; f < TS_CPU__COUNT; f++)
                ck_assert_double_eq_tol(r->machine[f], shares[k][f] / 100.0, EPS);
            ck_assert_uint_eq(r->context_switches, 1000 * (k + 1));
            ck_assert_uint_eq(r->running, 4 + k);
            ck_assert_uint_eq(r->blocked, blocked[k]);
            ck_assert_double_eq_tol(r->process_user, user_pct[k], EPS);
            ck_assert_double_eq_tol(r->process_system, 10.0, EPS); /* 100 ms of 1 s */
        }

        cpu_summary s = analysis_cpu(a);
        ck_assert_uint_eq(s.samples, 3);
        /* Equal intervals: plain means. user (25+30+35)/3, nice (0+1+2)/3, system 10,
         * idle (60+59+52)/3, iowait (5+0+1)/3. */
        ck_assert_double_eq_tol(s.machine[TS_CPU_USER], 30.0, EPS);
        ck_assert_double_eq_tol(s.machine[TS_CPU_NICE], 1.0, EPS);
        ck_assert_double_eq_tol(s.machine[TS_CPU_SYSTEM], 10.0, EPS);
        ck_assert_double_eq_tol(s.machine[TS_CPU_IDLE], 57.0, EPS);
        ck_assert_double_eq_tol(s.machine[TS_CPU_IOWAIT], 2.0, EPS);
        ck_assert_double_eq_tol(s.machine[TS_CPU_STEAL], 0.0, EPS);
        /* (1000 + 2000 + 3000) switches in 3 s */
        ck_assert_double_eq_tol(s.context_switches_per_s, 2000.0, EPS);
        ck_assert_double_eq_tol(s.avg_running, 5.0, EPS);       /* (4+5+6)/3 */
        ck_assert_double_eq_tol(s.avg_blocked, 4.0 / 3.0, EPS); /* (1+0+3)/3 */
        /* (500 + 1500 + 1000) ms user and 300 ms system in 3 s: percent of one CPU */
        ck_assert_double_eq_tol(s.process_user, 100.0, EPS);
        ck_assert_double_eq_tol(s.process_system, 10.0, EPS);
        /* CPUs online: the latest process sample's */
        ck_assert_uint_eq(s.cpus, 12);
        ck_assert_uint_eq(log.r[0].cpus + log.r[1].cpus + log.r[2].cpus, 8 + 8 + 12);
        analysis_destroy(a);
    }
    golden_free(&g);
}
END_TEST

/* Intervals of different lengths weigh by their length. */
START_TEST(test_cpu_weighted)
{
    golden g;
    golden_init(&g);
    uint16_t s1[TS_CPU__COUNT] = {1000, 0, 0, 9000, 0, 0, 0, 0};
    uint16_t s2[TS_CPU__COUNT] = {5000, 0, 0, 5000, 0, 0, 0, 0};
    cpu_machine(&g, 0, SEC_NS, s1, 100, 2, 0);
    cpu_machine(&g, SEC_NS, 4 * SEC_NS, s2, 500, 6, 0);
    cpu_log log = {.n = 0};
    analysis_sink sink = {.ctx = &log, .cpu = log_cpu};
    analysis_config cfg;
    analysis_config_init(&cfg);
    cfg.sink = &sink;
    analysis *a = golden_analyse(&g, &cfg, 0);
    cpu_summary s = analysis_cpu(a);
    ck_assert_uint_eq(s.samples, 2);
    /* user (10 % x 1 s + 50 % x 3 s) / 4 s = 40 %; idle (90 + 150) / 4 = 60 % */
    ck_assert_double_eq_tol(s.machine[TS_CPU_USER], 40.0, EPS);
    ck_assert_double_eq_tol(s.machine[TS_CPU_IDLE], 60.0, EPS);
    ck_assert_double_eq_tol(s.context_switches_per_s, 150.0, EPS); /* 600 in 4 s */
    ck_assert_double_eq_tol(s.avg_running, 5.0, EPS);              /* (2 x 1 + 6 x 3) / 4 */
    /* No process samples: no process part, CPUs unknown. */
    ck_assert_double_eq_tol(s.process_user, 0.0, EPS);
    ck_assert_uint_eq(s.cpus, 0);
    /* The machine rows went alone, at finish, in time order. */
    ck_assert_uint_eq(log.n, 2);
    ck_assert_uint_eq(log.r[0].begin_ns, 0);
    ck_assert_uint_eq(log.r[1].begin_ns, SEC_NS);
    ck_assert_double_eq_tol(log.r[1].machine[TS_CPU_USER], 50.0, EPS);
    ck_assert_double_eq_tol(log.r[1].process_user, 0.0, EPS);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

/* Halves that do not pair go alone: a machine sample waits until 8 newer ones came without
 * its partner, or until finish. */
START_TEST(test_cpu_unpaired)
{
    golden g;
    golden_init(&g);
    uint16_t sh[TS_CPU__COUNT] = {2000, 0, 0, 8000, 0, 0, 0, 0};
    cpu_log log = {.n = 0};
    analysis_sink sink = {.ctx = &log, .cpu = log_cpu};
    analysis_config cfg;
    analysis_config_init(&cfg);
    cfg.sink = &sink;
    analysis *a = analysis_create(&cfg, golden_names, &g);
    for (uint64_t i = 0; i < 10; i++) {
        ts_event e = {
            .kind = TS_KIND_CPU_MACHINE, .begin_ns = i * SEC_NS, .end_ns = (i + 1) * SEC_NS};
        ts_cpu_pack(&e, sh);
        analysis_feed(a, &e, 1);
        /* Samples 0..7 wait; the 9th pushes out the oldest, the 10th the next. */
        ck_assert_uint_eq(log.n, i < 8 ? 0 : i - 7);
    }
    ck_assert_uint_eq(log.r[0].begin_ns, 0);
    ck_assert_uint_eq(log.r[1].begin_ns, SEC_NS);
    /* A process sample 20 s later pairs with none of them (ends 11 s apart, more than half an
     * interval). */
    ts_event p = {.kind = TS_KIND_CPU_PROCESS,
                  .begin_ns = 20 * SEC_NS,
                  .end_ns = 22 * SEC_NS,
                  .v0 = SEC_NS,
                  .v1 = SEC_NS / 2,
                  .corr = 4};
    analysis_feed(a, &p, 1);
    ck_assert_uint_eq(log.n, 2);
    analysis_finish(a);
    ck_assert_uint_eq(log.n, 11);
    for (size_t i = 0; i < 10; i++) {
        ck_assert_uint_eq(log.r[i].begin_ns, i * SEC_NS);
        ck_assert_double_eq_tol(log.r[i].machine[TS_CPU_USER], 20.0, EPS);
        ck_assert_double_eq_tol(log.r[i].process_user, 0.0, EPS);
    }
    /* The process row alone: 1 s user and 0.5 s system in 2 s. */
    ck_assert_uint_eq(log.r[10].begin_ns, 20 * SEC_NS);
    ck_assert_double_eq_tol(log.r[10].machine[TS_CPU_USER], 0.0, EPS);
    ck_assert_double_eq_tol(log.r[10].process_user, 50.0, EPS);
    ck_assert_double_eq_tol(log.r[10].process_system, 25.0, EPS);
    ck_assert_uint_eq(log.r[10].cpus, 4);
    /* Finishing again emits nothing more. */
    analysis_finish(a);
    ck_assert_uint_eq(log.n, 11);
    /* The live ring: the last rows, oldest first. */
    cpu_row r[3];
    ck_assert_uint_eq(analysis_cpu_recent(a, r, 3), 3);
    ck_assert_uint_eq(r[0].begin_ns, 8 * SEC_NS);
    ck_assert_uint_eq(r[2].begin_ns, 20 * SEC_NS);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

START_TEST(test_cpu_recent_bound)
{
    golden g;
    golden_init(&g);
    cpu_golden(&g);
    analysis_config cfg;
    analysis_config_init(&cfg);
    cfg.recent_buckets = 2;
    analysis *a = golden_analyse(&g, &cfg, 0);
    cpu_row r[4];
    ck_assert_uint_eq(analysis_cpu_recent(a, r, 4), 2);
    ck_assert_uint_eq(r[0].begin_ns, SEC_NS);
    ck_assert_uint_eq(r[1].begin_ns, 2 * SEC_NS);
    ck_assert_double_eq_tol(r[1].process_user, 100.0, EPS);
    ck_assert_uint_eq(analysis_cpu_recent(a, r, 0), 0);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

START_TEST(test_cpu_threads)
{
    golden g;
    golden_init(&g);
    golden_thread_name(&g, 102, "loader");
    golden_thread_name(&g, 103, "given-name"); /* wins over the OS name its samples carry */
    cpu_thread_sample(&g, 101, "worker-1", 0, SEC_NS, 200 * MS, 100 * MS);
    cpu_thread_sample(&g, 101, "worker-1", SEC_NS, 2 * SEC_NS, 400 * MS, 100 * MS);
    cpu_thread_sample(&g, 102, NULL, 0, SEC_NS, 800 * MS, 100 * MS);
    cpu_thread_sample(&g, 103, "os-name", 0, SEC_NS, 50 * MS, 50 * MS);
    static const char odd[] = "bad\xff,\"name\"\n";
    golden_push(&g, (ts_event){.kind = TS_KIND_CPU_THREAD,
                               .tid = 104,
                               .name = golden_name_n(&g, odd, sizeof odd - 1),
                               .begin_ns = 0,
                               .end_ns = 2 * SEC_NS,
                               .v0 = 0,
                               .v1 = 0});
    for (int order = 0; order < ORDER__COUNT; order++) {
        analysis *a = feed_order(&g, NULL, (enum order)order, 2);
        cpu_thread *t;
        ck_assert_uint_eq(analysis_cpu_threads(a, &t), 4);
        /* 102: 800 + 100 ms of 1 s = 90 %; 101: (200+400) user and 200 system ms of 2 s = 30 %
         * + 10 %; 103: 5 % + 5 %; 104: idle. Sorted by user + system. */
        ck_assert_uint_eq(t[0].tid, 102);
        ck_assert_str_eq(golden_str(a, t[0].name), "loader"); /* from THREAD_NAME */
        ck_assert_double_eq_tol(t[0].avg_user, 80.0, EPS);
        ck_assert_double_eq_tol(t[0].avg_system, 10.0, EPS);
        ck_assert_double_eq_tol(t[0].last_total, 90.0, EPS);
        ck_assert_uint_eq(t[1].tid, 101);
        ck_assert_str_eq(golden_str(a, t[1].name), "worker-1"); /* from the samples */
        ck_assert_uint_eq(t[1].samples, 2);
        ck_assert_double_eq_tol(t[1].avg_user, 30.0, EPS);
        ck_assert_double_eq_tol(t[1].avg_system, 10.0, EPS);
        ck_assert_double_eq_tol(t[1].last_total, 50.0, EPS); /* the later sample: 400 + 100 */
        ck_assert_uint_eq(t[2].tid, 103);
        ck_assert_str_eq(golden_str(a, t[2].name), "given-name");
        ck_assert_double_eq_tol(t[2].last_total, 10.0, EPS);
        ck_assert_uint_eq(t[3].tid, 104);
        uint32_t len;
        const char *nm = analysis_name(a, t[3].name, &len);
        ck_assert_uint_eq(len, sizeof odd - 1);
        ck_assert_mem_eq(nm, odd, len);
        free(t);
        analysis_destroy(a);
    }
    golden_free(&g);
}
END_TEST

/* Descendant processes: averages over the time each was sampled, its busiest and latest
 * interval, RSS, the one that ended last, the count left out of a sample. */
START_TEST(test_cpu_children)
{
    golden g;
    golden_init(&g);
    cpu_process(&g, 0, SEC_NS, 100 * MS, 0, 3, 2);
    golden_push(&g, (ts_event){.kind = TS_KIND_CPU_PROCESS,
                               .tid = SAMPLER,
                               .device = TS_DEVICE_HOST,
                               .begin_ns = SEC_NS,
                               .end_ns = 2 * SEC_NS,
                               .aux = 3,
                               .corr = 2 | 3ull << 32, /* 3 descendants left out */
                               .v0 = 100 * MS});
    cpu_child_sample(&g, 500, 100, "worker", 0, SEC_NS, 400 * MS, 100 * MS, 10 << 20);
    cpu_child_sample(&g, 500, 100, "worker", SEC_NS, 2 * SEC_NS, 900 * MS, 0, 30 << 20);
    /* Started at 0.5 s, gone before the second sample. */
    cpu_child_sample(&g, 501, 500, "helper", SEC_NS / 2, SEC_NS, 250 * MS, 0, 5 << 20);
    /* Then exited, not yet waited for: listed, no more time, no RSS. */
    cpu_child_sample(&g, 501, 500, "helper", SEC_NS, 2 * SEC_NS, 0, 0, 0)->flags = TS_EF_EXITED;
    for (int order = 0; order < ORDER__COUNT; order++) {
        analysis *a = feed_order(&g, NULL, (enum order)order, 2);
        cpu_summary cs = analysis_cpu(a);
        ck_assert_uint_eq(cs.processes, 2);
        ck_assert_uint_eq(cs.processes_left_out, 3);
        ck_assert_uint_eq(cs.cpus, 2);
        cpu_child *c;
        ck_assert_uint_eq(analysis_cpu_children(a, &c), 2);
        ck_assert_uint_eq(c[0].pid, 500);
        ck_assert_uint_eq(c[0].ppid, 100);
        ck_assert_str_eq(golden_str(a, c[0].name), "worker");
        ck_assert_uint_eq(c[0].samples, 2);
        ck_assert_double_eq_tol(c[0].avg_user, 65.0, EPS);
        ck_assert_double_eq_tol(c[0].avg_system, 5.0, EPS);
        ck_assert_double_eq_tol(c[0].peak_total, 90.0, EPS);
        ck_assert_double_eq_tol(c[0].last_total, 90.0, EPS);
        ck_assert_uint_eq(c[0].cpu_ns, 1400 * MS);
        ck_assert_uint_eq(c[0].last_rss, 30 << 20);
        ck_assert_uint_eq(c[0].peak_rss, 30 << 20);
        ck_assert_uint_eq(c[0].first_ns, 0);
        ck_assert_uint_eq(c[0].last_ns, 2 * SEC_NS);
        ck_assert_int_eq(c[0].ended, 0);
        ck_assert_uint_eq(c[1].pid, 501);
        ck_assert_uint_eq(c[1].ppid, 500);
        /* 250 ms of the 1.5 s it was sampled; its busiest interval 50 % of its 0.5 s. */
        ck_assert_double_eq_tol(c[1].avg_user + c[1].avg_system, 100.0 / 6, EPS);
        ck_assert_double_eq_tol(c[1].peak_total, 50.0, EPS);
        ck_assert_double_eq_tol(c[1].last_total, 0.0, EPS);
        ck_assert_uint_eq(c[1].samples, 2);
        ck_assert_uint_eq(c[1].first_ns, SEC_NS / 2);
        ck_assert_uint_eq(c[1].last_rss, 5 << 20);
        ck_assert_int_eq(c[1].ended, 1);
        free(c);
        /* Children are not threads, nor the other way round. */
        cpu_thread *t;
        ck_assert_uint_eq(analysis_cpu_threads(a, &t), 0);
        analysis_destroy(a);
    }
    golden_free(&g);
}
END_TEST

START_TEST(test_cpu_empty)
{
    golden g;
    golden_init(&g);
    golden_step(&g, 1, 1, 0, 10);
    analysis *a = golden_analyse(&g, NULL, 0);
    cpu_summary s = analysis_cpu(a);
    ck_assert_uint_eq(s.samples, 0);
    ck_assert_double_eq(s.machine[TS_CPU_USER], 0.0);
    cpu_thread *t;
    ck_assert_uint_eq(analysis_cpu_threads(a, &t), 0);
    ck_assert_ptr_null(t);
    cpu_child *c;
    ck_assert_uint_eq(analysis_cpu_children(a, &c), 0);
    ck_assert_ptr_null(c);
    ck_assert_uint_eq(s.processes, 0);
    cpu_row r[1];
    ck_assert_uint_eq(analysis_cpu_recent(a, r, 1), 0);
    alloc_stat *al;
    ck_assert_uint_eq(analysis_allocations(a, &al), 0);
    ck_assert_ptr_null(al);
    memory_summary m = analysis_memory(a);
    ck_assert_uint_eq(m.devices, 0);
    ck_assert_uint_eq(m.host_samples, 0);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

/* ---- Memory ----------------------------------------------------------------------------- */

#define ALLOCATOR 10u /* thread that allocates */
#define FREER     11u /* thread that frees */

static void mem_alloc(golden *g, uint16_t kind, uint32_t device, const char *name, uint64_t addr,
                      uint64_t bytes, uint64_t t_us)
{
    golden_push(g, (ts_event){.kind = kind,
                              .tid = ALLOCATOR,
                              .device = device,
                              .name = golden_name(g, name),
                              .begin_ns = t_us * US,
                              .end_ns = t_us * US,
                              .v0 = bytes,
                              .v1 = addr});
}

static void mem_free(golden *g, uint16_t kind, uint32_t device, uint64_t addr, uint64_t bytes,
                     uint64_t t_us)
{
    golden_push(g, (ts_event){.kind = kind,
                              .tid = FREER,
                              .device = device,
                              .begin_ns = t_us * US,
                              .end_ns = t_us * US,
                              .v0 = bytes,
                              .v1 = addr});
}

static void host_sample(golden *g, uint64_t t_us, uint64_t rss, uint64_t peak)
{
    golden_push(g, (ts_event){.kind = TS_KIND_HOST_MEMORY,
                              .tid = SAMPLER,
                              .device = TS_DEVICE_HOST,
                              .begin_ns = t_us * US,
                              .end_ns = t_us * US,
                              .v0 = rss,
                              .v1 = peak});
}

typedef struct mem_log {
    memory_row r[256];
    size_t n;
} mem_log;

static void log_mem(void *ctx, const memory_row *r)
{
    mem_log *l = ctx;
    ck_assert_uint_lt(l->n, 256);
    l->r[l->n++] = *r;
}

/* The rows of one device, in the order the sink got them. */
static size_t rows_of(const mem_log *l, uint32_t device, memory_row *out)
{
    size_t n = 0;
    for (size_t i = 0; i < l->n; i++)
        if (l->r[i].device == device)
            out[n++] = l->r[i];
    return n;
}

static void memory_golden(golden *g)
{
    host_sample(g, 1000, 100, 100);
    host_sample(g, 2000, 300, 300);
    host_sample(g, 3000, 200, 350); /* the sampler's peak RSS is above any RSS seen */
    /* Device 0. A free with bytes 0 (unknown): the allocation's size is used. */
    mem_alloc(g, TS_KIND_DEVMEM_ALLOC, 0, "weights", 0x10, 1000, 1000);
    mem_alloc(g, TS_KIND_DEVMEM_ALLOC, 0, "activations", 0x20, 500, 2000);
    mem_free(g, TS_KIND_DEVMEM_FREE, 0, 0x20, 0, 3000);
    mem_alloc(g, TS_KIND_DEVMEM_ALLOC, 0, "activations", 0x30, 700, 4000);
    mem_free(g, TS_KIND_DEVMEM_FREE, 0, 0x10, 1000, 5000);
    /* Allocated before the recording: ignored for the total (which never goes below 0). */
    mem_free(g, TS_KIND_DEVMEM_FREE, 0, 0x99, 300, 6000);
    mem_free(g, TS_KIND_DEVMEM_FREE, 1, 0x77, 300, 100);
    /* Device 1: the same address as on device 0, another allocation. */
    mem_alloc(g, TS_KIND_DEVMEM_ALLOC, 1, "weights", 0x10, 4096, 2500);
    /* Host allocations from the API: by name, no device rows. */
    mem_alloc(g, TS_KIND_HOST_ALLOC, TS_DEVICE_HOST, "pinned", 0x7000, 8192, 1500);
    mem_free(g, TS_KIND_HOST_FREE, TS_DEVICE_HOST, 0x7000, 8192, 2500);
}

START_TEST(test_memory)
{
    golden g;
    golden_init(&g);
    memory_golden(&g);
    for (int order = 0; order < ORDER__COUNT; order++) {
        for (size_t batch = 0; batch <= 3; batch += 3) {
            mem_log log = {.n = 0};
            analysis_sink sink = {.ctx = &log, .memory = log_mem};
            analysis_config cfg;
            analysis_config_init(&cfg);
            cfg.sink = &sink;
            analysis *a = feed_order(&g, &cfg, (enum order)order, batch);
            memory_summary m = analysis_memory(a);
            ck_assert_uint_eq(m.host_samples, 3);
            ck_assert_uint_eq(m.host_rss, 200); /* the latest by time */
            ck_assert_uint_eq(m.host_peak_rss, 350);
            ck_assert_uint_eq(m.devices, 2);
            /* Device 0: 1000, 1500, 1000, 1700, 700. */
            ck_assert_uint_eq(m.device_bytes[0], 700);
            ck_assert_uint_eq(m.device_peak[0], 1700);
            ck_assert_uint_eq(m.device_bytes[1], 4096);
            ck_assert_uint_eq(m.device_peak[1], 4096);
            ck_assert_uint_eq(m.device_bytes[2], 0);
            /* The frees of 0x99 on device 0 and 0x77 on device 1, 300 bytes each. */
            ck_assert_uint_eq(m.unmatched_frees, 2);
            ck_assert_uint_eq(m.unmatched_bytes, 600);
            ck_assert_uint_eq(m.replaced, 0);
            ck_assert_uint_eq(m.untracked, 0);

            /* Rows: each device change (1 ms apart, so none held back), in time order. */
            memory_row r[16];
            ck_assert_uint_eq(rows_of(&log, 0, r), 5);
            static const uint64_t t_us[5] = {1000, 2000, 3000, 4000, 5000};
            static const uint64_t bytes[5] = {1000, 1500, 1000, 1700, 700};
            static const uint64_t peak[5] = {1000, 1500, 1500, 1700, 1700};
            for (int i = 0; i < 5; i++) {
                ck_assert_uint_eq(r[i].t_ns, t_us[i] * US);
                ck_assert_uint_eq(r[i].bytes, bytes[i]);
                ck_assert_uint_eq(r[i].peak_bytes, peak[i]);
            }
            ck_assert_uint_eq(rows_of(&log, 1, r), 1);
            ck_assert_uint_eq(r[0].bytes, 4096);
            /* Host rows: one per RSS sample, whatever the order. */
            size_t nh = rows_of(&log, TS_DEVICE_HOST, r);
            ck_assert_uint_eq(nh, 3);
            uint64_t sum = 0;
            for (size_t i = 0; i < nh; i++)
                sum += r[i].bytes;
            ck_assert_uint_eq(sum, 100 + 300 + 200);
            ck_assert_uint_eq(log.n, 5 + 1 + 3);

            alloc_stat *al;
            ck_assert_uint_eq(analysis_allocations(a, &al), 4);
            /* By peak live bytes: pinned 8192, weights/1 4096, weights/0 1000,
             * activations/0 700 (500, freed, then 700). */
            ck_assert_str_eq(golden_str(a, al[0].name), "pinned");
            ck_assert_uint_eq(al[0].device, TS_DEVICE_HOST);
            ck_assert_uint_eq(al[0].live_bytes, 0);
            ck_assert_uint_eq(al[0].peak_live_bytes, 8192);
            ck_assert_str_eq(golden_str(a, al[1].name), "weights");
            ck_assert_uint_eq(al[1].device, 1);
            ck_assert_uint_eq(al[1].live_bytes, 4096);
            ck_assert_str_eq(golden_str(a, al[2].name), "weights");
            ck_assert_uint_eq(al[2].device, 0);
            ck_assert_uint_eq(al[2].count, 1);
            ck_assert_uint_eq(al[2].bytes_total, 1000);
            ck_assert_uint_eq(al[2].live_bytes, 0);
            ck_assert_uint_eq(al[2].peak_live_bytes, 1000);
            ck_assert_str_eq(golden_str(a, al[3].name), "activations");
            ck_assert_uint_eq(al[3].count, 2);
            ck_assert_uint_eq(al[3].bytes_total, 1200);
            ck_assert_uint_eq(al[3].live_bytes, 700);
            ck_assert_uint_eq(al[3].peak_live_bytes, 700);
            free(al);
            analysis_destroy(a);
        }
    }
    golden_free(&g);
}
END_TEST

/* Dense changes: at most one row per device per millisecond, plus the highest and the latest
 * state of the changes held back in between. */
START_TEST(test_memory_rate_limit)
{
    golden g;
    golden_init(&g);
    for (uint64_t i = 1; i <= 100; i++)
        mem_alloc(&g, TS_KIND_DEVMEM_ALLOC, 2, "burst", 0x1000 + i, 10, i);
    for (uint64_t i = 1; i <= 100; i++)
        mem_free(&g, TS_KIND_DEVMEM_FREE, 2, 0x1000 + i, 10, 199 + i);
    mem_alloc(&g, TS_KIND_DEVMEM_ALLOC, 2, "burst", 0x5000, 5, 2000);
    for (int order = 0; order < ORDER__COUNT; order++) {
        mem_log log = {.n = 0};
        analysis_sink sink = {.ctx = &log, .memory = log_mem};
        analysis_config cfg;
        analysis_config_init(&cfg);
        cfg.sink = &sink;
        analysis *a = feed_order(&g, &cfg, (enum order)order, 16);
        /* 1 us: the first change goes out (10 B). 2..100 us: held, highest 1000 B at 100 us.
         * 200..299 us: frees held, last 0 B at 299 us. 2 ms: more than 1 ms after the last row,
         * so the held highest and latest go out first, then 5 B. */
        ck_assert_uint_eq(log.n, 4);
        static const uint64_t t_us[4] = {1, 100, 299, 2000};
        static const uint64_t bytes[4] = {10, 1000, 0, 5};
        static const uint64_t peak[4] = {10, 1000, 1000, 1000};
        for (int i = 0; i < 4; i++) {
            ck_assert_uint_eq(log.r[i].device, 2);
            ck_assert_uint_eq(log.r[i].t_ns, t_us[i] * US);
            ck_assert_uint_eq(log.r[i].bytes, bytes[i]);
            ck_assert_uint_eq(log.r[i].peak_bytes, peak[i]);
        }
        memory_summary m = analysis_memory(a);
        ck_assert_uint_eq(m.device_bytes[2], 5);
        ck_assert_uint_eq(m.device_peak[2], 1000);
        alloc_stat *al;
        ck_assert_uint_eq(analysis_allocations(a, &al), 1);
        ck_assert_uint_eq(al[0].count, 101);
        ck_assert_uint_eq(al[0].bytes_total, 1005);
        ck_assert_uint_eq(al[0].live_bytes, 5);
        ck_assert_uint_eq(al[0].peak_live_bytes, 1000);
        free(al);
        analysis_destroy(a);
    }
    golden_free(&g);
}
END_TEST

/* An allocation at an address still live: its free was lost, so the older one is released
 * first. Devices beyond 8 count but are not in the summary's arrays. */
START_TEST(test_memory_reused_address)
{
    golden g;
    golden_init(&g);
    mem_alloc(&g, TS_KIND_DEVMEM_ALLOC, 3, "x", 0x1, 100, 1000);
    mem_alloc(&g, TS_KIND_DEVMEM_ALLOC, 3, "x", 0x1, 200, 2000);
    mem_alloc(&g, TS_KIND_DEVMEM_ALLOC, 9, NULL, 0x1, 64, 2500);
    mem_free(&g, TS_KIND_DEVMEM_FREE, 3, 0x1, 200, 3000);
    analysis *a = golden_analyse(&g, NULL, 0);
    memory_summary m = analysis_memory(a);
    ck_assert_uint_eq(m.devices, 2);
    ck_assert_uint_eq(m.device_bytes[3], 0);
    ck_assert_uint_eq(m.device_peak[3], 200); /* 100, then 200 instead of 300 */
    ck_assert_uint_eq(m.replaced, 1);
    ck_assert_uint_eq(m.unmatched_frees, 0);
    alloc_stat *al;
    ck_assert_uint_eq(analysis_allocations(a, &al), 2);
    ck_assert_str_eq(golden_str(a, al[0].name), "x");
    ck_assert_uint_eq(al[0].count, 2);
    ck_assert_uint_eq(al[0].bytes_total, 300);
    ck_assert_uint_eq(al[0].live_bytes, 0);
    ck_assert_uint_eq(al[0].peak_live_bytes, 200);
    ck_assert_uint_eq(al[1].name, 0); /* unnamed */
    ck_assert_uint_eq(al[1].device, 9);
    ck_assert_uint_eq(al[1].live_bytes, 64);
    free(al);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

/* More live allocations than the address table holds (MEM_LIVE_MAX, 2^18, in memory.c): the
 * ones beyond still count, but their frees cannot be matched, so they stay in the total. */
/* Pinned host and managed allocations (cudaMallocHost, cudaMallocManaged) are not the device's
 * memory; device and unsaid kinds are. */
START_TEST(test_memory_device_kinds_only)
{
    golden g;
    golden_init(&g);
    static const struct {
        uint32_t kind;
        uint64_t bytes;
    } allocs[] = {{TS_DEVMEM_DEVICE, 1000},       {TS_DEVMEM_PINNED, 1u << 20},
                  {TS_DEVMEM_MANAGED, 1u << 21},  {TS_DEVMEM_UNKNOWN, 10},
                  {TS_DEVMEM_PAGEABLE, 1u << 22}, {TS_DEVMEM_MANAGED_STATIC, 1u << 23}};
    for (size_t i = 0; i < sizeof allocs / sizeof allocs[0]; i++) {
        mem_alloc(&g, TS_KIND_DEVMEM_ALLOC, 0, "x", 0x100 + i, allocs[i].bytes, 1000 + i);
        g.ev[g.nev - 1].aux = allocs[i].kind;
    }
    mem_free(&g, TS_KIND_DEVMEM_FREE, 0, 0x101, 1u << 20, 2000); /* the pinned one */
    g.ev[g.nev - 1].aux = TS_DEVMEM_PINNED;
    analysis *a = golden_analyse(&g, NULL, 0);
    memory_summary m = analysis_memory(a);
    ck_assert_uint_eq(m.device_bytes[0], 1010);
    ck_assert_uint_eq(m.device_peak[0], 1010);
    ck_assert_uint_eq(m.unmatched_frees, 0);
    alloc_stat *al;
    ck_assert_uint_eq(analysis_allocations(a, &al), 1); /* "x": the device ones */
    ck_assert_uint_eq(al[0].count, 2);
    free(al);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

START_TEST(test_memory_live_bound)
{
    enum { N = (1 << 18) + 1000 };
    golden g;
    golden_init(&g);
    uint32_t name = golden_name(&g, "many");
    analysis *a = analysis_create(NULL, golden_names, &g);
    ts_event e = {.kind = TS_KIND_DEVMEM_ALLOC, .device = 0, .name = name, .v0 = 2};
    for (uint64_t i = 0; i < N; i++) {
        e.begin_ns = e.end_ns = i * 10;
        e.v1 = 0x100000 + i * 16;
        analysis_feed(a, &e, 1);
    }
    e.kind = TS_KIND_DEVMEM_FREE;
    e.name = 0;
    for (uint64_t i = 0; i < N; i++) {
        e.begin_ns = e.end_ns = 10 * MS + i * 10;
        e.v1 = 0x100000 + i * 16;
        analysis_feed(a, &e, 1);
    }
    analysis_finish(a);
    memory_summary m = analysis_memory(a);
    ck_assert_uint_eq(m.device_peak[0], 2ull * N);
    ck_assert_uint_eq(m.device_bytes[0], 2ull * 1000); /* the 1000 beyond the table */
    ck_assert_uint_eq(m.untracked, 1000);
    ck_assert_uint_eq(m.unmatched_frees, 1000); /* their frees find no allocation */
    alloc_stat *al;
    ck_assert_uint_eq(analysis_allocations(a, &al), 1);
    ck_assert_uint_eq(al[0].count, N);
    ck_assert_uint_eq(al[0].live_bytes, 2ull * 1000);
    free(al);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

/* Damaged values: an interval that ends before it begins, shares beyond 100 %, more devices
 * than kept (64), a free on a device never seen. Nothing breaks; what is kept is right. */
START_TEST(test_hostile_values)
{
    golden g;
    golden_init(&g);
    uint16_t sh[TS_CPU__COUNT] = {65535, 0, 0, 0, 0, 0, 0, 0};
    cpu_machine(&g, 5 * SEC_NS, 4 * SEC_NS, sh, 1, 1, 1);
    cpu_process(&g, 5 * SEC_NS, 5 * SEC_NS, SEC_NS, SEC_NS, 1, 1);
    cpu_thread_sample(&g, 1, "t", 2 * SEC_NS, SEC_NS, 5, 5);
    for (uint32_t d = 0; d < 70; d++)
        mem_alloc(&g, TS_KIND_DEVMEM_ALLOC, d, "m", 0x10, 100 + d, 1000 + d);
    mem_free(&g, TS_KIND_DEVMEM_FREE, 5000, 0x10, 7, 2000);
    mem_free(&g, TS_KIND_DEVMEM_FREE, 65, 0x10, 165, 2100);
    analysis *a = golden_analyse(&g, NULL, 0);
    cpu_summary c = analysis_cpu(a);
    ck_assert_uint_eq(c.samples, 1);
    /* Empty interval: no weight, the plain mean of 655.35 %. */
    ck_assert_double_eq_tol(c.machine[TS_CPU_USER], 655.35, EPS);
    ck_assert_double_eq_tol(c.process_user, 0.0, EPS);
    cpu_thread *t;
    ck_assert_uint_eq(analysis_cpu_threads(a, &t), 1);
    ck_assert_double_eq_tol(t[0].avg_user, 0.0, EPS);
    free(t);
    memory_summary m = analysis_memory(a);
    ck_assert_uint_eq(m.devices, 64);
    ck_assert_uint_eq(m.device_bytes[7], 107);
    alloc_stat *al;
    /* Allocations by name and device are kept for all 70 devices; device 65's was freed. */
    size_t n = analysis_allocations(a, &al);
    ck_assert_uint_eq(n, 70);
    for (size_t i = 0; i < n; i++)
        ck_assert_uint_eq(al[i].live_bytes, al[i].device == 65 ? 0 : 100 + al[i].device);
    free(al);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cpu_memory");
    TCase *tc = tcase_create("cpu");
    tcase_add_test(tc, test_cpu_rows);
    tcase_add_test(tc, test_cpu_weighted);
    tcase_add_test(tc, test_cpu_unpaired);
    tcase_add_test(tc, test_cpu_recent_bound);
    tcase_add_test(tc, test_cpu_threads);
    tcase_add_test(tc, test_cpu_children);
    tcase_add_test(tc, test_cpu_empty);
    suite_add_tcase(s, tc);
    tc = tcase_create("memory");
    tcase_add_test(tc, test_memory);
    tcase_add_test(tc, test_memory_rate_limit);
    tcase_add_test(tc, test_memory_reused_address);
    tcase_add_test(tc, test_memory_live_bound);
    tcase_add_test(tc, test_memory_device_kinds_only);
    tcase_add_test(tc, test_hostile_values);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
