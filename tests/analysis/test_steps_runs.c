/* test_steps_runs: steps over a run (analysis/steps.c): collection windows, evaluation between
 * steps, steps that do not end, the live finish, long runs with late kernels, an empty stream,
 * steps loaded from the collector's board. */
#include "analysis/golden.h"
#include "steps_fixture.h"
#include "testutil.h"

#include <malloc.h>
#include <stdio.h>

START_TEST(test_windows)
{
    golden g;
    golden_init(&g);
    golden_step(&g, 1, 1, 100, 200);
    golden_step(&g, 1, 2, 300, 400);
    /* A collection window opened between steps 2 and 3: step 3 starts at its own begin. */
    golden_instant(&g, TS_KIND_COLLECT_START, 1, 450)->v0 = 2;
    golden_step(&g, 1, 3, 500, 600);
    /* Steps 4..9 not recorded: step 10 starts at its own begin too. */
    golden_step(&g, 1, 10, 1000, 1100);
    golden_step(&g, 1, 11, 1150, 1300);
    /* No ops: FP/BP unknown, the whole step is FP/BP. */
    const exp_row rows[] = {
        {1, 100, 200, 100, 200, 0, 100, 0, 100, STEP_SOURCE_NONE, "", "", 0, 0, 0, 100, 0},
        {2, 200, 400, 200, 400, 0, 200, 0, 200, STEP_SOURCE_NONE, "", "", 0, 0, 0, 200, 0},
        {3, 500, 600, 500, 600, 0, 100, 0, 100, STEP_SOURCE_NONE, "", "", 0, 0, 0, 100, 0},
        {10, 1000, 1100, 1000, 1100, 0, 100, 0, 100, STEP_SOURCE_NONE, "", "", 0, 0, 0, 100, 0},
        {11, 1100, 1300, 1100, 1300, 0, 200, 0, 200, STEP_SOURCE_NONE, "", "", 0, 0, 0, 200, 0},
    };
    check_all_orders(&g, NULL, rows, 5);
    golden_free(&g);
}
END_TEST

/* An evaluation pass between steps 2 and 3 (400..700 us): in no step. Step 3's window opens at
 * the pass's end, not at step 2's end, and the pass is counted apart with its time. */
START_TEST(test_eval_between_steps)
{
    golden g;
    golden_init(&g);
    golden_step(&g, 1, 1, 100, 200);
    golden_step(&g, 1, 2, 200, 400);
    golden_phase(&g, 1, TS_PHASE_EVAL_BEGIN, 400);
    golden_op(&g, 1, "validation forward", "aten::mm", 450, 650, 0);
    golden_phase(&g, 1, TS_PHASE_EVAL_END, 700);
    golden_step(&g, 1, 3, 750, 900); /* the wait for its batch (700..750) is its interval */
    const exp_row rows[] = {
        {1, 100, 200, 100, 200, 0, 100, 0, 100, STEP_SOURCE_NONE, "", "", 0, 0, 0, 100, 0},
        {2, 200, 400, 200, 400, 0, 200, 0, 200, STEP_SOURCE_NONE, "", "", 0, 0, 0, 200, 0},
        {3, 700, 900, 700, 900, 0, 200, 0, 200, STEP_SOURCE_NONE, "", "", 0, 0, 0, 200, 0},
    };
    check_all_orders(&g, NULL, rows, 3);
    analysis *a = golden_analyse(&g, NULL, 0);
    step_summary ss = analysis_steps(a);
    ck_assert_uint_eq(ss.evals, 1);
    ck_assert_double_eq(ss.eval_ns, 300.0 * US);
    ck_assert_uint_eq(ss.outside_events, 1); /* the validation forward */
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

START_TEST(test_incomplete_steps)
{
    golden g;
    golden_init(&g);
    /* Step 7 ended without its begin recorded (the window opened inside it): not in the trace,
     * but step 8's window starts at its end. */
    golden_instant(&g, TS_KIND_STEP_END, 1, 150)->v0 = 7;
    golden_step(&g, 1, 8, 200, 300);
    golden_op(&g, 1, "a", NULL, 160, 190, 0);
    /* Step 9 begun and never ended, then step 10: 9 is dropped, 10 starts at its begin. */
    golden_instant(&g, TS_KIND_STEP_BEGIN, 1, 400)->v0 = 9;
    golden_step(&g, 1, 10, 500, 600);
    golden_op(&g, 1, "b", NULL, 510, 590, 0);
    /* Step 8: op a [160,190]: FP 160, BP 190: interval 10, fpbp 30, tail 110; free 150-30.
     * Step 10: op b: interval 10, fpbp 80, tail 10, free 20. */
    const exp_row rows[] = {
        {8, 150, 300, 160, 190, 10, 30, 110, 150, STEP_SOURCE_AUTO, "a", "a", 30, 0, 0, 120, 0},
        {10, 500, 600, 510, 590, 10, 80, 10, 100, STEP_SOURCE_AUTO, "b", "b", 80, 0, 0, 20, 0},
    };
    check_all_orders(&g, NULL, rows, 2);
    golden_free(&g);
}
END_TEST

START_TEST(test_live_finish)
{
    golden g;
    golden_init(&g);
    build_marks(&g);
    size_t first = g.nev;
    golden_instant(&g, TS_KIND_STEP_BEGIN, 1, 2300)->v0 = 3;
    golden_op(&g, 1, "Conv2D", NULL, 2310, 2400, 0);
    size_t second = g.nev;
    golden_instant(&g, TS_KIND_STEP_END, 1, 2500)->v0 = 3;

    capture cap;
    memset(&cap, 0, sizeof cap);
    analysis_sink sink = {.ctx = &cap, .step = capture_step};
    analysis_config cfg;
    analysis_config_init(&cfg);
    cfg.sink = &sink;
    analysis *a = analysis_create(&cfg, golden_names, &g);
    analysis_feed(a, g.ev, first);
    analysis_finish(a);
    ck_assert_uint_eq(cap.calls, 2);
    analysis_feed(a, g.ev + first, second - first);
    analysis_finish(a);
    analysis_finish(a);
    /* Step 3 is begun, not ended: current, not in the trace; nothing handed twice. */
    step_summary s = analysis_steps(a);
    ck_assert_uint_eq(cap.calls, 2);
    ck_assert_uint_eq(s.steps, 2);
    ck_assert_uint_eq(s.current_step, 3);
    analysis_feed(a, g.ev + second, g.nev - second);
    analysis_finish(a);
    /* Step 3: window [2200, 2500], op Conv2D [2310,2400] plus Decode's rest [2200,2300] from
     * step 2: computation [2200,2300] 100 + [2310,2400] 90 = 190. */
    ck_assert_uint_eq(cap.calls, 3);
    ck_assert_uint_eq(cap.out_of_order, 0);
    ck_assert_uint_eq(cap.rows[2].step, 3);
    ck_assert_uint_eq(cap.rows[2].begin_ns, 2200 * US);
    ck_assert_uint_eq(cap.rows[2].overlap_compute_ns, 190 * US);
    ck_assert_uint_eq(cap.rows[2].fp_start_ns, 2310 * US);
    check_row(a, &cap.rows[0], &marks_rows[0], "live");
    check_row(a, &cap.rows[1], &marks_rows[1], "live");
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

typedef struct gen_names {
    uint32_t fwd, bwd, gemm;
} gen_names;

static gen_names gen_init(golden *g)
{
    return (gen_names){golden_name(g, "fwd"), golden_name(g, "bwd"), golden_name(g, "gemm")};
}

/* One 1 ms step k (k >= 1): begin at k ms, ops fwd [+100,+400] and bwd [+450,+900] us on thread
 * 1, a kernel [+200,+600]; kernels of step k are handed over with step k+delay's events. */
static size_t gen_step(const gen_names *nm, ts_event *out, uint64_t k, uint32_t delay)
{
    uint32_t fwd = nm->fwd, bwd = nm->bwd, gemm = nm->gemm;
    uint64_t t = k * 1000;
    size_t n = 0;
    out[n++] = (ts_event){.kind = TS_KIND_STEP_BEGIN,
                          .tid = 1,
                          .device = TS_DEVICE_HOST,
                          .begin_ns = t * US,
                          .end_ns = t * US,
                          .v0 = k};
    out[n++] = (ts_event){.kind = TS_KIND_OP_RANGE,
                          .tid = 1,
                          .device = TS_DEVICE_HOST,
                          .name = fwd,
                          .begin_ns = (t + 100) * US,
                          .end_ns = (t + 400) * US};
    out[n++] = (ts_event){.kind = TS_KIND_OP_RANGE,
                          .tid = 1,
                          .device = TS_DEVICE_HOST,
                          .name = bwd,
                          .begin_ns = (t + 450) * US,
                          .end_ns = (t + 900) * US};
    out[n++] = (ts_event){.kind = TS_KIND_STEP_END,
                          .tid = 1,
                          .device = TS_DEVICE_HOST,
                          .begin_ns = (t + 1000) * US,
                          .end_ns = (t + 1000) * US,
                          .v0 = k};
    if (k > delay) {
        uint64_t kt = (k - delay) * 1000;
        out[n++] = (ts_event){.kind = TS_KIND_KERNEL,
                              .tid = 7,
                              .device = 0,
                              .name = gemm,
                              .begin_ns = (kt + 200) * US,
                              .end_ns = (kt + 600) * US};
    }
    return n;
}

typedef struct counter {
    uint64_t calls, out_of_order, last_step, bad;
} counter;

static void count_step(void *ctx, const step_row *row)
{
    counter *c = ctx;
    if (c->calls && row->step != c->last_step + 1)
        c->out_of_order++;
    c->last_step = row->step;
    c->calls++;
    /* Each step: FP 100 (fwd), BP 900 (bwd): interval 100 (from the previous end), fpbp 800,
     * tail 100; computation = the kernel, 400; gap (400,450) 50. Step 1 starts at its begin. */
    if (row->total_ns != 1000 * US || row->interval_ns != 100 * US || row->fpbp_ns != 800 * US ||
        row->gap_ns != 50 * US || row->overlap_compute_ns != 400 * US)
        c->bad++;
}

START_TEST(test_long_run)
{
    const uint64_t steps = 20000;
    const uint32_t delay = 3; /* kernels three steps late: inside the open window */
    golden g;
    golden_init(&g);
    counter cnt = {0};
    analysis_sink sink = {.ctx = &cnt, .step = count_step};
    analysis_config cfg;
    analysis_config_init(&cfg);
    cfg.sink = &sink;
    cfg.recent_steps = 16;
    analysis *a = analysis_create(&cfg, golden_names, &g);
    gen_names nm = gen_init(&g);
    ts_event ev[8];
    size_t at_2000 = 0;
    for (uint64_t k = 1; k <= steps + delay; k++) {
        size_t n;
        if (k <= steps) {
            n = gen_step(&nm, ev, k, delay);
        } else { /* the last kernels */
            n = gen_step(&nm, ev, k, delay);
            ev[0] = ev[n - 1];
            n = 1;
        }
        analysis_feed(a, ev, n);
        if (k == 2000)
            at_2000 = mallinfo2().uordblks;
        if (k == 5000) {
            /* Steps are finalized while feeding, not only at the end: at most 64 stay open. */
            ck_assert_uint_ge(cnt.calls, 5000 - 64 - 1);
        }
    }
    size_t at_end = mallinfo2().uordblks;
    /* Memory does not follow the run: 18000 more steps, under 64 KiB more heap. */
    ck_assert_msg(at_end <= at_2000 + 65536, "heap grew from %zu to %zu", at_2000, at_end);
    analysis_finish(a);
    ck_assert_uint_eq(cnt.calls, steps);
    ck_assert_uint_eq(cnt.out_of_order, 0);
    ck_assert_uint_eq(cnt.last_step, steps);
    /* Step 1 starts at its own begin (interval 100 too), so every row has the same shape. */
    ck_assert_uint_eq(cnt.bad, 0);

    step_row recent[32];
    ck_assert_uint_eq(analysis_recent_steps(a, recent, 32), 16);
    for (size_t i = 0; i < 16; i++)
        ck_assert_uint_eq(recent[i].step, steps - 15 + i);
    ck_assert_uint_eq(analysis_recent_steps(a, recent, 4), 4);
    ck_assert_uint_eq(recent[0].step, steps - 3);
    ck_assert_uint_eq(recent[3].step, steps);
    step_summary s = analysis_steps(a);
    ck_assert_uint_eq(s.steps, steps);
    ck_assert_double_eq(s.avg_total_ns, 1000.0 * US);
    ck_assert_double_eq(s.avg_overlap_compute_ns, 400.0 * US);

    /* A kernel for step 1, long finalized, arrives now: counted as late, not re-attributed,
     * and nothing is handed to the sink again. */
    ts_event late = {.kind = TS_KIND_KERNEL,
                     .tid = 7,
                     .device = 0,
                     .name = nm.gemm,
                     .begin_ns = 1100 * US,
                     .end_ns = 1900 * US};
    analysis_feed(a, &late, 1);
    analysis_finish(a);
    ck_assert_uint_eq(cnt.calls, steps);
    uint64_t late_before = s.late_events;
    s = analysis_steps(a);
    ck_assert_double_eq(s.avg_overlap_compute_ns, 400.0 * US);
    ck_assert_uint_eq(s.late_events, late_before + 1);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

/* Kernels far later than the open window: their steps were finalized without them, every step
 * is still handed over once and in order, and the run finishes. */
START_TEST(test_long_run_very_late_kernels)
{
    golden g;
    golden_init(&g);
    counter cnt = {0};
    analysis_sink sink = {.ctx = &cnt, .step = count_step};
    analysis_config cfg;
    analysis_config_init(&cfg);
    cfg.sink = &sink;
    analysis *a = analysis_create(&cfg, golden_names, &g);
    gen_names nm = gen_init(&g);
    ts_event ev[8];
    for (uint64_t k = 1; k <= 1000; k++)
        analysis_feed(a, ev, gen_step(&nm, ev, k, 100));
    analysis_finish(a);
    ck_assert_uint_eq(cnt.calls, 1000);
    ck_assert_uint_eq(cnt.out_of_order, 0);
    step_summary s = analysis_steps(a);
    /* Every kernel came after its step was finalized (100 steps late, 64 open at most): no step
     * saw device work, so computation is its host ops, 300 + 450 = 750. */
    ck_assert_double_eq(s.avg_overlap_compute_ns, 750.0 * US);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

START_TEST(test_empty)
{
    analysis *a = analysis_create(NULL, NULL, NULL);
    analysis_finish(a);
    step_summary s = analysis_steps(a);
    ck_assert_uint_eq(s.steps, 0);
    ck_assert_double_eq(s.avg_total_ns, 0.0);
    step_row r;
    op_gap gp;
    ck_assert_uint_eq(analysis_recent_steps(a, &r, 1), 0);
    ck_assert_uint_eq(analysis_gaps(a, &gp, 1), 0);
    /* Ops and kernels with no step markers at all: held, bounded, never reported. */
    golden g;
    golden_init(&g);
    for (uint64_t i = 0; i < 1000; i++)
        golden_op(&g, 1, "op", NULL, i * 10, i * 10 + 5, 0);
    analysis_destroy(a);
    a = golden_analyse(&g, NULL, 0);
    ck_assert_uint_eq(analysis_steps(a).steps, 0);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

/* A live monitor's analysis takes its steps from the collector's step board: fed step events
 * it finalizes none; what is loaded is what the summary, the recent rows and the slowest steps
 * say, the newest rows kept when more come than it keeps. */
START_TEST(test_board_load)
{
    golden g;
    golden_init(&g);
    for (uint64_t k = 1; k <= 10; k++)
        golden_step(&g, 1, k, k * 100, k * 100 + 50);
    analysis_config cfg;
    analysis_config_init(&cfg);
    cfg.board = 1;
    cfg.recent_steps = 4;
    analysis *a = golden_analyse(&g, &cfg, 0);
    ck_assert_uint_eq(analysis_steps(a).steps, 0);
    step_row rows[6];
    memset(rows, 0, sizeof rows);
    for (int i = 0; i < 6; i++) {
        rows[i].step = 20 + (uint64_t)i;
        rows[i].total_ns = 1000 * (uint64_t)(i + 1);
    }
    step_totals t = {.steps = 26,
                     .current_step = 27,
                     .total_ns = 26000,
                     .interval_ns = 2600,
                     .nslowest = 2,
                     .slowest = {25, 24},
                     .slowest_ns = {6000, 5000},
                     .late = 4};
    analysis_steps_load(a, &t, rows, 6);
    step_summary s = analysis_steps(a);
    ck_assert_uint_eq(s.steps, 26);
    ck_assert_double_eq_tol(s.avg_total_ns, 1000.0, 1e-9);
    ck_assert_double_eq_tol(s.avg_interval_ns, 100.0, 1e-9);
    ck_assert_uint_eq(s.current_step, 27);
    ck_assert_uint_eq(s.slowest[0], 25);
    ck_assert_uint_eq(s.slowest[1], 24);
    ck_assert_uint_eq(s.slowest[2], 0);
    ck_assert_uint_eq(s.late_events, 4);
    step_row got[8];
    ck_assert_uint_eq(analysis_recent_steps(a, got, 8), 4);
    ck_assert_uint_eq(got[0].step, 22);
    ck_assert_uint_eq(got[3].step, 25);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

static Suite *steps_runs_suite(void)
{
    Suite *s = suite_create("steps_runs");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_windows);
    tcase_add_test(tc, test_eval_between_steps);
    tcase_add_test(tc, test_incomplete_steps);
    tcase_add_test(tc, test_live_finish);
    tcase_add_test(tc, test_long_run);
    tcase_add_test(tc, test_long_run_very_late_kernels);
    tcase_add_test(tc, test_empty);
    tcase_add_test(tc, test_board_load);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tests_run(steps_runs_suite());
}
