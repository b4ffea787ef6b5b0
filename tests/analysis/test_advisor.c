/* The advisor (analysis/advisor.c): crafted runs that trigger each rule, and runs that trigger
 * none. Each case checks the kinds in order, the weights, and that the numbers that triggered a
 * suggestion appear in its text. Times are microseconds. */
#include "analysis/golden.h"

#include <stdio.h>

/* ---- Building runs ----------------------------------------------------------------------- */

typedef struct opspec {
    const char *name, *type;
    uint64_t dur, gap_after;
} opspec;

/* Steps 1..n on thread 1 ("train"), each `interval + fpbp + tail` long, back to back from
 * 1000 us: phase marks at the forward start and the backward end, the ops laid out from the
 * forward start. Returns the step length. */
static uint64_t build_steps(golden *g, int n, uint64_t interval, uint64_t fpbp, uint64_t tail,
                            const opspec *ops, size_t nops)
{
    uint64_t total = interval + fpbp + tail;
    golden_thread_name(g, 1, "train");
    for (int k = 1; k <= n; k++) {
        uint64_t lo = 1000 + (uint64_t)(k - 1) * total;
        golden_instant(g, TS_KIND_STEP_BEGIN, 1, lo)->v0 = (uint64_t)k;
        golden_phase(g, 1, TS_PHASE_FORWARD_START, lo + interval);
        uint64_t t = lo + interval;
        for (size_t i = 0; i < nops; i++) {
            golden_op(g, 1, ops[i].name, ops[i].type, t, t + ops[i].dur, 0);
            t += ops[i].dur + ops[i].gap_after;
        }
        golden_phase(g, 1, TS_PHASE_BACKWARD_END, lo + interval + fpbp);
        golden_instant(g, TS_KIND_STEP_END, 1, lo + total)->v0 = (uint64_t)k;
    }
    return total;
}

static uint64_t step_lo(int k, uint64_t total)
{
    return 1000 + (uint64_t)(k - 1) * total;
}

/* A host queue fed by "generator", empty in every one of 12 samples. */
static void starved_host_queue(golden *g)
{
    golden_queue_info(g, "batch_queue", TS_QUEUE_HOST, 8, "generator", "train");
    for (uint64_t i = 0; i < 12; i++)
        golden_queue(g, "batch_queue", TS_QUEUE_HOST, 1000 + i * 300, 0, 8);
}

/* Machine CPU over [b, e] s: shares in percent, context switches, running processes. */
static void cpu_machine(golden *g, uint64_t b_s, uint64_t e_s, double user, double sys, double idle,
                        uint64_t switches, uint32_t running)
{
    ts_event *e = golden_instant(g, TS_KIND_CPU_MACHINE, 0, b_s * 1000000);
    e->end_ns = e_s * 1000000 * US;
    uint16_t share[TS_CPU__COUNT] = {0};
    share[TS_CPU_USER] = (uint16_t)(user * 100);
    share[TS_CPU_SYSTEM] = (uint16_t)(sys * 100);
    share[TS_CPU_IDLE] = (uint16_t)(idle * 100);
    ts_cpu_pack(e, share);
    e->corr = switches;
    e->aux = running << 16;
}

/* The profiled process over [b_s, e_s]: user_ms and sys_ms of CPU time in each second. */
static void cpu_process_ms(golden *g, uint64_t b_s, uint64_t e_s, uint32_t cpus, uint64_t user_ms,
                           uint64_t sys_ms)
{
    ts_event *e = golden_instant(g, TS_KIND_CPU_PROCESS, 0, b_s * 1000000);
    e->end_ns = e_s * 1000000 * US;
    e->v0 = user_ms * MS;
    e->v1 = sys_ms * MS;
    e->aux = 4;
    e->corr = cpus;
}

/* ---- Checking ---------------------------------------------------------------------------- */

typedef struct expect {
    uint32_t kind;
    double weight;
    const char *has[8]; /* substrings of title or text; "!x": x must not be in the text */
} expect;

static void check_text_ascii(const char *s, size_t cap, const char *what)
{
    size_t n = strnlen(s, cap);
    ck_assert_msg(n < cap, "%s not terminated", what);
    ck_assert_msg(n > 0, "%s empty", what);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(s[i] >= 0x20 && s[i] < 0x7f, "%s: byte %zu is 0x%02x: %s", what, i,
                      (unsigned char)s[i], s);
    ck_assert_msg(s[n - 1] != ' ', "%s ends with a space", what);
}

static void check_advice(const analysis *a, const expect *want, size_t nwant)
{
    advice adv[32];
    size_t n = analysis_advise(a, adv, 32);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, "  [%zu] kind %u weight %.4f: %s\n      %s\n", i, adv[i].kind,
                adv[i].weight, adv[i].title, adv[i].text);
    ck_assert_uint_eq(n, nwant);
    for (size_t i = 0; i < n; i++) {
        check_text_ascii(adv[i].title, sizeof adv[i].title, "title");
        check_text_ascii(adv[i].text, sizeof adv[i].text, "text");
        ck_assert_msg(adv[i].kind == want[i].kind, "advice %zu: kind %u, want %u", i, adv[i].kind,
                      want[i].kind);
        ck_assert_double_eq_tol(adv[i].weight, want[i].weight, 1e-9);
        if (i)
            ck_assert(adv[i].weight <= adv[i - 1].weight);
        for (size_t k = 0; k < 8 && want[i].has[k]; k++) {
            const char *h = want[i].has[k];
            if (h[0] == '!')
                ck_assert_msg(!strstr(adv[i].text, h + 1), "advice %zu has \"%s\": %s", i, h + 1,
                              adv[i].text);
            else
                ck_assert_msg(strstr(adv[i].text, h) || strstr(adv[i].title, h),
                              "advice %zu lacks \"%s\": %s | %s", i, h, adv[i].title, adv[i].text);
        }
    }
}

/* ---- Rules ------------------------------------------------------------------------------- */

START_TEST(test_long_interval_with_queue_and_cpu)
{
    golden g;
    golden_init(&g);
    /* 4 steps of 1000: interval 600, FP/BP 300 (MatMul 200, ReLU 100), tail 100. */
    static const opspec ops[] = {{"MatMul", "MatMul", 200, 0}, {"ReLU", "ReLU", 100, 0}};
    build_steps(&g, 4, 600, 300, 100, ops, 2);
    starved_host_queue(&g);
    /* User 20%, system 5%, idle 75% over three 1 s samples. */
    for (uint64_t s = 0; s < 3; s++)
        cpu_machine(&g, s, s + 1, 20, 5, 75, 1000, 1);
    analysis *a = golden_analyse(&g, NULL, 0);
    /* Interval 600/1000 = 0.6 (> 0.15). FP/BP 0.3 < 0.5: no operator advice; tail 0.1: none.
     * The CPU rule (user 20% < 50% with a data bottleneck) weighs the same 0.6 and comes
     * second, as found. The queue finding is cited by the interval advice, not repeated. */
    const expect want[] = {
        {ADVICE_STEP_INTERVAL,
         0.6,
         {"60.0%", "600.0 us", "1.00 ms", "4 steps", "batch_queue", "100.0%",
          "num_parallel_workers"}},
        {ADVICE_CPU, 0.6, {"20.0%", "5.0%", "75.0%", "3 samples", "60.0%", "num_parallel_workers"}},
    };
    check_advice(a, want, 2);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

/* The same data-bound run on a machine with no idle CPU (user 90%, system 8%, idle 2%): no
 * advice anywhere to add workers; the interval advice says why and what helps instead. */
START_TEST(test_data_bound_without_idle_cpu)
{
    golden g;
    golden_init(&g);
    static const opspec ops[] = {{"MatMul", "MatMul", 200, 0}, {"ReLU", "ReLU", 100, 0}};
    build_steps(&g, 4, 600, 300, 100, ops, 2);
    starved_host_queue(&g);
    for (uint64_t s = 0; s < 3; s++)
        cpu_machine(&g, s, s + 1, 90, 8, 2, 1000, 2);
    analysis *a = golden_analyse(&g, NULL, 0);
    const expect want[] = {
        {ADVICE_STEP_INTERVAL,
         0.6,
         {"60.0%", "batch_queue", "no idle time to spare", "2.0% idle", "cheaper",
          "!num_parallel_workers of", "!increase"}},
    };
    check_advice(a, want, 1);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

START_TEST(test_long_interval_without_queues)
{
    golden g;
    golden_init(&g);
    static const opspec ops[] = {{"MatMul", "MatMul", 500, 0}};
    /* Interval 250 of 1000 = 25%; FP/BP 500 = 50% busy 100%: operators weigh 0.5 x 1.0. */
    build_steps(&g, 2, 250, 500, 250, ops, 1);
    analysis *a = golden_analyse(&g, NULL, 0);
    const expect want[] = {
        {ADVICE_OPERATORS, 0.5, {"50.0%", "500.0 us", "\"MatMul\" 100.0%", "1.00 ms", "2 calls"}},
        {ADVICE_STEP_INTERVAL, 0.25, {"25.0%", "250.0 us", "No data queues were recorded"}},
        {ADVICE_TAIL, 0.25, {"25.0%", "250.0 us", "No communication was recorded"}},
    };
    check_advice(a, want, 3);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

START_TEST(test_operators)
{
    golden g;
    golden_init(&g);
    /* 4 steps: interval 100, FP/BP 800, tail 100. Self time per step: MatMul 400 (50%),
     * Conv2D 240 (30%), ReLU 100 (12.5%), Add 60 (7.5%). Busy 800/1000 = 0.8, the top three
     * types hold 0.925: weight 0.74. MatMul's self time 4 x 400 = 1.60 ms over 4 calls. */
    static const opspec ops[] = {{"MatMul_1", "MatMul", 400, 0},
                                 {"Conv2D_1", "Conv2D", 240, 0},
                                 {"ReLU_1", "ReLU", 100, 0},
                                 {"Add_1", "Add", 60, 0}};
    build_steps(&g, 4, 100, 800, 100, ops, 4);
    analysis *a = golden_analyse(&g, NULL, 0);
    const expect want[] = {
        {ADVICE_OPERATORS,
         0.74,
         {"80.0%", "800.0 us", "1.00 ms", "100.0%", "\"MatMul\" 50.0% (1.60 ms over 4 calls)",
          "\"Conv2D\" 30.0% (960.0 us", "\"ReLU\" 12.5%", "!Add"}},
    };
    check_advice(a, want, 1);

    /* The output is cut at max, the most important first. */
    advice one[1];
    ck_assert_uint_eq(analysis_advise(a, one, 1), 1);
    ck_assert_uint_eq(one[0].kind, ADVICE_OPERATORS);
    ck_assert_uint_eq(analysis_advise(a, one, 0), 0);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

/* A data wait recorded as a range (termsight.torch's "DataLoader.__next__", type "DataLoader")
 * is never an operator to optimize: the operator advice names the others only, and weighs
 * only their share. Self time per step: DataLoader 400 (50%), MatMul 240 (30%), ReLU 100
 * (12.5%), Add 60 (7.5%): busy 0.8 x the three kept (MatMul, ReLU, Add: 0.5) = 0.4. */
START_TEST(test_data_wait_is_no_operator)
{
    golden g;
    golden_init(&g);
    static const opspec ops[] = {{"DataLoader.__next__", "DataLoader", 400, 0},
                                 {"MatMul_1", "MatMul", 240, 0},
                                 {"ReLU_1", "ReLU", 100, 0},
                                 {"Add_1", "Add", 60, 0}};
    build_steps(&g, 4, 100, 800, 100, ops, 4);
    analysis *a = golden_analyse(&g, NULL, 0);
    const expect want[] = {
        {ADVICE_OPERATORS,
         0.40,
         {"\"MatMul\" 30.0%", "\"ReLU\" 12.5%", "\"Add\" 7.5%", "!DataLoader"}},
    };
    check_advice(a, want, 1);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

START_TEST(test_gaps)
{
    golden g;
    golden_init(&g);
    /* FP/BP 800: MatMul 300, 200 idle, ReLU 300. Gaps 200/800 = 25% (> 10%): weight 200/1000.
     * Operators busy 600/1000 = 0.6 with MatMul and ReLU 50% each: weight 0.6, first. */
    static const opspec ops[] = {{"MatMul", "MatMul", 300, 200}, {"ReLU", "ReLU", 300, 0}};
    build_steps(&g, 4, 100, 800, 100, ops, 2);
    analysis *a = golden_analyse(&g, NULL, 0);
    const expect want[] = {
        {ADVICE_OPERATORS, 0.6, {"75.0%", "\"MatMul\" 50.0%", "\"ReLU\" 50.0%"}},
        {ADVICE_GAPS,
         0.2,
         {"200.0 us per step", "25.0%", "800.0 us",
          "200.0 us in step 1 on thread 1 (\"train\") between \"MatMul\" and \"ReLU\"", "in step 2",
          "in step 3", "!in step 4"}},
    };
    check_advice(a, want, 2);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

START_TEST(test_tail_is_communication_wait)
{
    golden g;
    golden_init(&g);
    /* Interval 100, FP/BP 500 (fwd), tail 400 with an update op [600,700] and a collective
     * [650,950] on thread 2. Computation (no device: host ops) [100,700]; communication 300,
     * overlapped [650,700] 50: pure 250, 250/300 = 83.3%. Tail 0.4; operators busy 0.5. */
    static const opspec ops[] = {{"fwd", "Forward", 500, 0}};
    uint64_t total = build_steps(&g, 4, 100, 500, 400, ops, 1);
    for (int k = 1; k <= 4; k++) {
        uint64_t lo = step_lo(k, total);
        golden_op(&g, 1, "update", "Update", lo + 600, lo + 700, 0);
        golden_op(&g, 2, "all_reduce", NULL, lo + 650, lo + 950, 0)->kind = TS_KIND_COMM_OP;
    }
    analysis *a = golden_analyse(&g, NULL, 0);
    /* The training thread runs nothing in [700,950] while the collective is in flight: it
     * waits 250 per step (25 %). That wait is the tail less 150 (15 %, not above TAIL_SHARE):
     * one finding, the wait, and no tail advice beside it. */
    const expect want[] = {
        {ADVICE_OPERATORS, 0.5, {"50.0%", "500.0 us", "\"Forward\""}},
        {ADVICE_COMM_WAIT,
         0.25,
         {"waits 250.0 us per step", "25.0%", "1.00 ms", "300.0 us per step", "another rank",
          "job report"}},
    };
    check_advice(a, want, 2);
    step_summary s = analysis_steps(a);
    ck_assert_double_eq_tol(s.avg_comm_wait_ns, 250.0 * 1000, 1e-6);
    ck_assert_double_eq_tol(s.avg_pure_comm_ns, 250.0 * 1000, 1e-6);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

/* The step on the device: 4 steps of 1000 (interval 100, FP/BP 800, tail 100) with one host op
 * "fwd" over FP/BP; per step a kernel [100,400] launched at 100, a kernel [600,800] launched at
 * 600 (nothing queued in [400,600]: host-bound 200), and a synchronization [790,810] after which
 * nothing runs (sync 200). The data wait is the interval, 100 (10 %, not above the rule's
 * share). */
START_TEST(test_device_idle)
{
    golden g;
    golden_init(&g);
    static const opspec ops[] = {{"fwd", "Forward", 800, 0}};
    uint64_t total = build_steps(&g, 4, 100, 800, 100, ops, 1);
    for (int k = 1; k <= 4; k++) {
        uint64_t lo = step_lo(k, total);
        uint32_t corr = (uint32_t)k * 10;
        const uint64_t kern[2][2] = {{lo + 100, lo + 400}, {lo + 600, lo + 800}};
        for (int i = 0; i < 2; i++) {
            ts_event *l = golden_op(&g, 1, "cudaLaunchKernel", NULL, kern[i][0], kern[i][0], 0);
            l->kind = TS_KIND_CUDA_API;
            l->corr = corr + (uint32_t)i;
            golden_kernel(&g, 0, 7, "gemm", "fwd", kern[i][0], kern[i][1], 0)->corr =
                corr + (uint32_t)i;
        }
        golden_op(&g, 1, "", NULL, lo + 790, lo + 810, 0)->kind = TS_KIND_SYNC;
    }
    analysis *a = golden_analyse(&g, NULL, 0);
    step_summary s = analysis_steps(a);
    ck_assert_uint_eq(s.gpu_steps, 4);
    ck_assert_double_eq_tol(s.avg_gpu_busy_ns, 500.0 * US, 1e-6);
    ck_assert_double_eq_tol(s.avg_gpu_idle_data_ns, 100.0 * US, 1e-6);
    ck_assert_double_eq_tol(s.avg_gpu_idle_host_ns, 200.0 * US, 1e-6);
    ck_assert_double_eq_tol(s.avg_gpu_idle_sync_ns, 200.0 * US, 1e-6);
    const expect want[] = {
        {ADVICE_OPERATORS, 0.8, {"80.0%"}},
        {ADVICE_GPU_HOST,
         0.2,
         {"GPU idle 20.0% of each step waiting for the host: launch-bound", "GPU 0, 4 steps",
          "busy 500.0 us (50.0%)", "idle 200.0 us (20.0%)", "CUDA graph", "20.0% shorter"}},
        {ADVICE_GPU_SYNC,
         0.2,
         {"GPU idle 20.0% of each step around synchronizations", "Synchronize less often",
          "!launch-bound"}},
    };
    check_advice(a, want, 3);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

START_TEST(test_lost_events)
{
    golden g;
    golden_init(&g);
    static const opspec ops[] = {{"MatMul", "MatMul", 800, 0}};
    build_steps(&g, 2, 100, 800, 100, ops, 1);
    ts_event *l = golden_instant(&g, TS_KIND_LOST, 1, 1500);
    l->v0 = 1200;
    l->aux = TS_LOST_LANE_FULL;
    l = golden_instant(&g, TS_KIND_LOST, 1, 1600);
    l->v0 = 34;
    l->aux = TS_LOST_NO_LANE;
    analysis *a = golden_analyse(&g, NULL, 0);
    /* 1234 lost of g.nev events fed + 1234. Lost comes first (weight 1). */
    char share[64];
    snprintf(share, sizeof share, "(%.1f%% of %zu", 100.0 * 1234 / (double)(g.nev + 1234),
             g.nev + 1234);
    const expect want[] = {
        {ADVICE_LOST,
         1.0,
         {"1234 events", share, "1200 because a lane was full", "34 because every lane was taken",
          "TERMSIGHT_LANE_EVENTS", "TERMSIGHT_MAX_THREADS", "partial"}},
        {ADVICE_OPERATORS, 0.8, {"80.0%", "\"MatMul\" 100.0%"}},
    };
    check_advice(a, want, 2);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

START_TEST(test_cpu_too_many_threads)
{
    golden g;
    golden_init(&g);
    /* No steps. The program: 400 ms system and 600 ms user per second, 40% of a CPU and 40%
     * of its CPU time in the kernel (both > 20%), with 100000 switches/s over 8 CPUs = 12500
     * per CPU (> 5000), 12 runnable: weight 0.40. Machine user 40% but no data bottleneck: no
     * "more workers". Not a PyTorch program: MindSpore's knobs. */
    for (uint64_t s = 0; s < 3; s++) {
        cpu_machine(&g, s, s + 1, 40, 35, 25, 100000, 12);
        cpu_process_ms(&g, s, s + 1, 8, 600, 400);
    }
    analysis *a = golden_analyse(&g, NULL, 0);
    const expect want[] = {
        {ADVICE_CPU,
         0.40,
         {"40.0% system time", "40.0% of a CPU in system time (user 60.0%: 40% of its CPU time",
          "100000 context switches", "12500 per CPU over 8 CPUs", "12.0 runnable",
          "machine system time 35.0%", "fewer threads", "num_parallel_workers"}},
    };
    check_advice(a, want, 1);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

/* The machine busy in the kernel is not the program's doing: a program at 5.6% system time is
 * told nothing about threads, however much the machine's other programs switch. */
START_TEST(test_cpu_system_of_the_machine_not_the_program)
{
    golden g;
    golden_init(&g);
    for (uint64_t s = 0; s < 3; s++) {
        cpu_machine(&g, s, s + 1, 40, 24, 36, 100000, 12);
        cpu_process_ms(&g, s, s + 1, 8, 500, 56);
    }
    analysis *a = golden_analyse(&g, NULL, 0);
    check_advice(a, NULL, 0);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

/* A PyTorch program (aten operators) is told PyTorch's knobs; its record_function labels are
 * never operator types to optimize. Interval 300 of 1000 (no queues: raise the workers); FP/BP
 * 600, busy: aten::mm 400 self (the label's 100 of self time is left out). */
START_TEST(test_pytorch_words_and_labels)
{
    golden g;
    golden_init(&g);
    static const opspec ops[] = {{"train_block", "record_function", 100, 0},
                                 {"0/aten::mm", "aten::mm", 400, 0},
                                 {"1/aten::relu", "aten::relu", 100, 0}};
    build_steps(&g, 4, 300, 600, 100, ops, 3);
    analysis *a = golden_analyse(&g, NULL, 0);
    const expect want[] = {
        {ADVICE_OPERATORS, 0.5, {"\"aten::mm\"", "\"aten::relu\"", "!record_function"}},
        {ADVICE_STEP_INTERVAL,
         0.30,
         {"30.0%", "(DataLoader num_workers)", "!num_parallel_workers"}},
    };
    check_advice(a, want, 2);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

START_TEST(test_queue_not_cited)
{
    golden g;
    golden_init(&g);
    /* The interval is short (100 of 1000), so the queue verdict is advice of its own with the
     * interval's weight 0.1, after the operators (0.8 x 1.0). */
    static const opspec ops[] = {{"MatMul", "MatMul", 800, 0}};
    build_steps(&g, 4, 100, 800, 100, ops, 1);
    starved_host_queue(&g);
    analysis *a = golden_analyse(&g, NULL, 0);
    const expect want[] = {
        {ADVICE_OPERATORS, 0.8, {"80.0%"}},
        {ADVICE_QUEUE,
         0.1,
         {"batch_queue", "100.0%", "12 samples", "num_parallel_workers", "10.0%", "100.0 us"}},
    };
    check_advice(a, want, 2);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

START_TEST(test_odd_names)
{
    golden g;
    golden_init(&g);
    static const char odd[] = "Mat\"Mul,\n\xff\xfe";
    static const opspec ops[] = {{"op", odd, 400, 200}, {"op2", "x", 200, 0}};
    build_steps(&g, 2, 100, 800, 100, ops, 2);
    golden_thread_name(&g, 1, "tr\"ain\t\xc3\xa9");
    analysis *a = golden_analyse(&g, NULL, 0);
    /* Busy 600/1000 with both types: 0.6; gaps 200/800 = 25%: 0.2. Names in ASCII. */
    const expect want[] = {
        {ADVICE_OPERATORS, 0.6, {"\"Mat'Mul,???\" 66.7%"}},
        {ADVICE_GAPS, 0.2, {"(\"tr'ain???\")"}},
    };
    check_advice(a, want, 2);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

/* ---- Runs that trigger nothing ----------------------------------------------------------- */

START_TEST(test_none)
{
    advice adv[8];
    /* Nothing fed. */
    analysis *a = analysis_create(NULL, NULL, NULL);
    analysis_finish(a);
    ck_assert_uint_eq(analysis_advise(a, adv, 8), 0);
    analysis_destroy(a);

    /* Healthy steps (interval 10%, tail 10%) with no operator statistics to point at, a device
     * queue that always holds data, CPU user 70% and system 5%: no rule fires. */
    golden g;
    golden_init(&g);
    build_steps(&g, 4, 100, 800, 100, NULL, 0);
    golden_queue_info(&g, "device_queue", TS_QUEUE_DEVICE, 4, "transfer", "train");
    for (uint64_t i = 0; i < 12; i++)
        golden_queue(&g, "device_queue", TS_QUEUE_DEVICE, 1000 + i * 300, 3, 4);
    for (uint64_t s = 0; s < 3; s++)
        cpu_machine(&g, s, s + 1, 70, 5, 25, 1000, 2);
    a = golden_analyse(&g, NULL, 0);
    ck_assert_uint_eq(analysis_steps(a).steps, 4);
    ck_assert_uint_eq(analysis_advise(a, adv, 8), 0);
    analysis_destroy(a);
    golden_free(&g);

    /* At the thresholds, which must be exceeded: interval 150 and tail 150 of 1000 (15%), gaps
     * 70 of FP/BP 700 (10%). Only the operator rule fires: FP/BP 70% with operators busy
     * 630/700 = 90%, weight 0.63. */
    golden_init(&g);
    static const opspec ops[] = {{"a", "A", 315, 70}, {"b", "B", 315, 0}};
    build_steps(&g, 4, 150, 700, 150, ops, 2);
    a = golden_analyse(&g, NULL, 0);
    const expect only_ops[] = {{ADVICE_OPERATORS, 0.63, {"70.0%", "90.0%"}}};
    check_advice(a, only_ops, 1);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("advisor");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_long_interval_with_queue_and_cpu);
    tcase_add_test(tc, test_data_bound_without_idle_cpu);
    tcase_add_test(tc, test_long_interval_without_queues);
    tcase_add_test(tc, test_operators);
    tcase_add_test(tc, test_data_wait_is_no_operator);
    tcase_add_test(tc, test_gaps);
    tcase_add_test(tc, test_tail_is_communication_wait);
    tcase_add_test(tc, test_device_idle);
    tcase_add_test(tc, test_lost_events);
    tcase_add_test(tc, test_cpu_too_many_threads);
    tcase_add_test(tc, test_cpu_system_of_the_machine_not_the_program);
    tcase_add_test(tc, test_pytorch_words_and_labels);
    tcase_add_test(tc, test_queue_not_cited);
    tcase_add_test(tc, test_odd_names);
    tcase_add_test(tc, test_none);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
