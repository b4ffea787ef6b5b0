/* test_steps_phases: where a step's forward/backward comes from (analysis/steps.c): phase
 * marks, the FP-start and BP-end options (by config, by recording, their precedence, odd names),
 * the automatic rule with and without communication, fetch names, a backward that ends before
 * communication. Each golden is fed in the orders a recorder produces (steps_fixture.c). */
#include "analysis/golden.h"
#include "steps_fixture.h"
#include "testutil.h"

#include <malloc.h>
#include <stdio.h>

START_TEST(test_marks)
{
    golden g;
    golden_init(&g);
    build_marks(&g);
    check_all_orders(&g, NULL, marks_rows, 2);

    analysis *a = golden_analyse(&g, NULL, 0);
    step_summary s = analysis_steps(a);
    ck_assert_uint_eq(s.steps, 2);
    /* Averages: interval (110+210)/2 = 160, fpbp 640, tail 250, total (1000+1100)/2 = 1050,
     * compute (820+800)/2 = 810, free (180+300)/2 = 240, gap (80+110)/2 = 95. */
    ck_assert_double_eq(s.avg_interval_ns, 160.0 * US);
    ck_assert_double_eq(s.avg_fpbp_ns, 640.0 * US);
    ck_assert_double_eq(s.avg_tail_ns, 250.0 * US);
    ck_assert_double_eq(s.avg_total_ns, 1050.0 * US);
    ck_assert_double_eq(s.avg_overlap_compute_ns, 810.0 * US);
    ck_assert_double_eq(s.avg_comm_ns, 0.0);
    ck_assert_double_eq(s.avg_pure_comm_ns, 0.0);
    ck_assert_double_eq(s.avg_free_ns, 240.0 * US);
    ck_assert_double_eq(s.avg_gap_ns, 95.0 * US);
    /* Slowest: step 2 (1100) then step 1 (1000), the rest zero. */
    ck_assert_uint_eq(s.slowest[0], 2);
    ck_assert_uint_eq(s.slowest_ns[0], 1100 * US);
    ck_assert_uint_eq(s.slowest[1], 1);
    ck_assert_uint_eq(s.slowest_ns[1], 1000 * US);
    ck_assert_uint_eq(s.slowest[2], 0);
    ck_assert_uint_eq(s.slowest_ns[2], 0);
    ck_assert_uint_eq(s.current_step, 2);
    ck_assert_uint_eq(s.source, STEP_SOURCE_MARKS);

    /* The largest gaps, largest first; equal gaps in the order found (step, then time). */
    static const struct {
        uint64_t gap, at, step;
        const char *before, *after;
    } want[] = {
        {50, 800, 1, "MatMul", "ApplyMomentum"},  {50, 1600, 2, "Conv2D", "MatMul"},
        {50, 1900, 2, "MatMul", "ApplyMomentum"}, {20, 500, 1, "Conv2D", "MatMul"},
        {10, 210, 1, "get_next", "Conv2D"},       {10, 1310, 2, "get_next", "Conv2D"},
    };
    op_gap gaps[16];
    ck_assert_uint_eq(analysis_gaps(a, gaps, 16), 6);
    for (size_t i = 0; i < 6; i++) {
        ck_assert_uint_eq(gaps[i].gap_ns, want[i].gap * US);
        ck_assert_uint_eq(gaps[i].at_ns, want[i].at * US);
        ck_assert_uint_eq(gaps[i].step, want[i].step);
        ck_assert_uint_eq(gaps[i].tid, 1);
        ck_assert_str_eq(golden_str(a, gaps[i].before), want[i].before);
        ck_assert_str_eq(golden_str(a, gaps[i].after), want[i].after);
    }
    ck_assert_uint_eq(analysis_gaps(a, gaps, 2), 2);
    ck_assert_uint_eq(gaps[1].at_ns, 1600 * US);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

/* Step 1 [100, 1000] on thread 1: get_next, Cast, Conv2D, MatMul, Conv2D, MatMul,
 * ApplyMomentum. Step 2 [1000 (step 1's end), 1500]: Relu, Add, no fetch. */
static void build_ops(golden *g, int with_config)
{
    if (with_config) {
        golden_config(g, "fp_start_op", "Conv2D");
        golden_config(g, "bp_end_op", "MatMul");
    }
    golden_instant(g, TS_KIND_STEP_BEGIN, 1, 100)->v0 = 1;
    golden_op(g, 1, "get_next", NULL, 100, 150, 0);
    golden_op(g, 1, "Cast", NULL, 160, 200, 0);
    golden_op(g, 1, "Conv2D", NULL, 210, 400, 0);
    golden_op(g, 1, "MatMul", NULL, 420, 600, 0);
    golden_op(g, 1, "Conv2D", NULL, 610, 650, 0);
    golden_op(g, 1, "MatMul", NULL, 660, 700, 0);
    golden_op(g, 1, "ApplyMomentum", NULL, 720, 950, 0);
    golden_instant(g, TS_KIND_STEP_END, 1, 1000)->v0 = 1;
    golden_instant(g, TS_KIND_STEP_BEGIN, 1, 1100)->v0 = 2;
    golden_op(g, 1, "Relu", NULL, 1120, 1300, 0);
    golden_op(g, 1, "Add", NULL, 1310, 1480, 0);
    golden_instant(g, TS_KIND_STEP_END, 1, 1500)->v0 = 2;
}

/* Step 1 computation: 50+40+190+180+40+40+230 = 770, free 900-770 = 130 (in every variant).
 * Step 2 (no op named by the options, no fetch): the automatic rule, FP = first op Relu 1120,
 *   BP = last op Add 1480: interval 1120-1000 = 120, fpbp 360, tail 20, total 500; computation
 *   180+170 = 350, free 150; gap (1300,1310) 10. */
#define OPS_STEP2                                                                                  \
    {                                                                                              \
        2, 1000, 1500, 1120, 1480, 120, 360, 20, 500, STEP_SOURCE_AUTO, "Relu", "Add", 350, 0, 0,  \
            150, 10                                                                                \
    }

static const exp_row ops_step2 = OPS_STEP2; /* a constant initializer only as the macro */

/* Options Conv2D / MatMul: FP = first Conv2D 210, BP = last MatMul's end 700.
 *   interval 210-100 = 110, fpbp 700-210 = 490, tail 1000-700 = 300, total 900.
 *   gaps in [210,700]: (400,420) 20 + (600,610) 10 + (650,660) 10 = 40. */
static const exp_row ops_option_rows[] = {
    {1, 100, 1000, 210, 700, 110, 490, 300, 900, STEP_SOURCE_OPTION, "Conv2D", "MatMul", 770, 0, 0,
     130, 40},
    OPS_STEP2,
};

/* No options: first op after the fetch (get_next ends 150): Cast 160; no communication: the
 *   last op, ApplyMomentum, ends 950. interval 60, fpbp 790, tail 50; gaps in [160,950]:
 *   (200,210) 10 + 20 + 10 + 10 + (700,720) 20 = 70. */
static const exp_row ops_auto_rows[] = {
    {1, 100, 1000, 160, 950, 60, 790, 50, 900, STEP_SOURCE_AUTO, "Cast", "ApplyMomentum", 770, 0, 0,
     130, 70},
    OPS_STEP2,
};

START_TEST(test_option_by_config)
{
    golden g;
    golden_init(&g);
    build_ops(&g, 0);
    analysis_config cfg;
    analysis_config_init(&cfg);
    cfg.fp_start_op = "Conv2D";
    cfg.bp_end_op = "MatMul";
    check_all_orders(&g, &cfg, ops_option_rows, 2);
    golden_free(&g);
}
END_TEST

START_TEST(test_option_by_recording)
{
    golden g;
    golden_init(&g);
    build_ops(&g, 1); /* TS_KIND_CONFIG fp_start_op / bp_end_op, as the collector writes */
    check_all_orders(&g, NULL, ops_option_rows, 2);
    golden_free(&g);
}
END_TEST

START_TEST(test_option_precedence)
{
    golden g;
    golden_init(&g);
    build_ops(&g, 1);
    /* The analysis's option wins over the recording's for its boundary: FP = Cast 160, BP still
     * the recording's MatMul, 700. interval 60, fpbp 540, tail 300; gaps in [160,700]:
     * 10 + 20 + 10 + 10 = 50. */
    analysis_config cfg;
    analysis_config_init(&cfg);
    cfg.fp_start_op = "Cast";
    const exp_row rows[] = {
        {1, 100, 1000, 160, 700, 60, 540, 300, 900, STEP_SOURCE_OPTION, "Cast", "MatMul", 770, 0, 0,
         130, 50},
        ops_step2,
    };
    check_all_orders(&g, &cfg, rows, 2);

    /* An option that names no op of the step leaves that boundary to the automatic rule; the row
     * says AUTO, the weaker of its two halves. FP = Cast 160 (auto), BP = MatMul 700. */
    cfg.fp_start_op = "NoSuchOp";
    const exp_row mixed[] = {
        {1, 100, 1000, 160, 700, 60, 540, 300, 900, STEP_SOURCE_AUTO, "Cast", "MatMul", 770, 0, 0,
         130, 50},
        ops_step2,
    };
    check_all_orders(&g, &cfg, mixed, 2);

    /* Phase marks win over options: FP 300, BP 900 from marks. interval 200, fpbp 600,
     * tail 100; gaps in [300,900]: (400,420) 20, (600,610) 10, (650,660) 10, (700,720) 20. */
    golden_phase(&g, 1, TS_PHASE_FORWARD_START, 300);
    golden_phase(&g, 1, TS_PHASE_BACKWARD_END, 900);
    const exp_row marked[] = {
        {1, 100, 1000, 300, 900, 200, 600, 100, 900, STEP_SOURCE_MARKS, "", "", 770, 0, 0, 130, 60},
        ops_step2,
    };
    check_all_orders(&g, &cfg, marked, 2);
    golden_free(&g);
}
END_TEST

START_TEST(test_auto_without_communication)
{
    golden g;
    golden_init(&g);
    build_ops(&g, 0);
    check_all_orders(&g, NULL, ops_auto_rows, 2);
    golden_free(&g);
}
END_TEST

/* Options match the op's exact bytes (any bytes), or its normalized key. */
START_TEST(test_option_odd_names)
{
    static const char odd[] = "fc,\"1\"\nbias\xff\xfe";
    golden g;
    golden_init(&g);
    golden_step(&g, 1, 1, 100, 500);
    golden_op(&g, 1, "first", NULL, 110, 150, 0);
    golden_op(&g, 1, odd, NULL, 200, 250, 0);
    golden_op(&g, 1, "aten::addmm, seq = 41, op_id = 7", NULL, 300, 380, 0);
    golden_op(&g, 1, "aten::addmm, seq = 42, op_id = 9", NULL, 400, 450, 0);
    golden_op(&g, 1, "last", NULL, 460, 490, 0);
    analysis_config cfg;
    analysis_config_init(&cfg);
    cfg.fp_start_op = odd;
    cfg.bp_end_op = "aten::addmm"; /* the key of both addmm ops: the last one ends at 450 */
    /* FP 200, BP 450: interval 100, fpbp 250, tail 50; computation 40+50+80+50+30 = 250, free
     * 150; gaps in [200,450]: (250,300) 50 + (380,400) 20 = 70. */
    const exp_row rows[] = {{1, 100, 500, 200, 450, 100, 250, 50, 400, STEP_SOURCE_OPTION, odd,
                             "aten::addmm, seq = 42, op_id = 9", 250, 0, 0, 150, 70}};
    check_all_orders(&g, &cfg, rows, 1);
    golden_free(&g);
}
END_TEST

/* Step 1 [1000, 2000] with device kernels and NCCL-like kernels; step 2 [2000, 3000] with
 * kernels and no communication. */
static void build_device(golden *g)
{
    golden_instant(g, TS_KIND_STEP_BEGIN, 1, 1000)->v0 = 1;
    golden_op(g, 1, "GetNext", NULL, 1010, 1050, 0);
    golden_op(g, 1, "forward", NULL, 1060, 1300, 0);
    golden_op(g, 1, "backward", NULL, 1310, 1700, 0);
    golden_op(g, 1, "optimizer", NULL, 1720, 1980, 0);
    golden_instant(g, TS_KIND_STEP_END, 1, 2000)->v0 = 1;
    golden_kernel(g, 0, 7, "conv_fwd", "forward", 1080, 1200, 0);
    golden_kernel(g, 0, 7, "gemm_bwd", "backward", 1320, 1500, 0);
    golden_kernel(g, 0, 8, "ncclAllReduce", "backward", 1450, 1600, 1);
    golden_kernel(g, 0, 7, "gemm_bwd2", "backward", 1510, 1650, 0);
    golden_kernel(g, 0, 8, "ncclAllReduce", "optimizer", 1660, 1760, 1);
    golden_kernel(g, 0, 7, "sgd_kernel", "optimizer", 1740, 1900, 0);

    golden_op(g, 1, "GetNext", NULL, 2010, 2120, 0);
    golden_instant(g, TS_KIND_STEP_BEGIN, 1, 2100)->v0 = 2;
    golden_op(g, 1, "forward", NULL, 2130, 2400, 0);
    golden_op(g, 1, "backward", NULL, 2400, 2800, 0);
    golden_op(g, 1, "optimizer", NULL, 2860, 2990, 0);
    golden_instant(g, TS_KIND_STEP_END, 1, 3000)->v0 = 2;
    golden_kernel(g, 0, 7, "conv_fwd", "forward", 2150, 2300, 0);
    golden_kernel(g, 0, 7, "gemm_bwd", "backward", 2420, 2850, 0);
}

/* Step 1: FP = first op after GetNext (ends 1050): forward 1060. The last communication begins
 *   at 1660; the op before it (latest begin under 1660, host ops of thread 1 and kernels):
 *   gemm_bwd2 [1510,1650], so BP = 1650. interval 60, fpbp 590, tail 350, total 1000.
 *   computation = kernels: 120+180+140+160 = 600; communication 150+100 = 250; overlap
 *   [1450,1500] 50 + [1510,1600] 90 + [1740,1760] 20 = 160; pure 250-160 = 90;
 *   free 1000-(600+250-160) = 310. gaps on thread 1 in [1060,1650]: (1300,1310) 10.
 * Step 2: FP = forward 2130 (GetNext ends 2120); no communication: BP = the last op to end,
 *   optimizer 2990. interval 2130-2000 = 130, fpbp 860, tail 10; computation 150+430 = 580,
 *   free 420; gaps in [2130,2990]: (2800,2860) 60. */
static const exp_row device_rows[] = {
    {1, 1000, 2000, 1060, 1650, 60, 590, 350, 1000, STEP_SOURCE_AUTO, "forward", "gemm_bwd2", 600,
     250, 90, 310, 10},
    {2, 2000, 3000, 2130, 2990, 130, 860, 10, 1000, STEP_SOURCE_AUTO, "forward", "optimizer", 580,
     0, 0, 420, 60},
};

START_TEST(test_auto_with_communication)
{
    golden g;
    golden_init(&g);
    build_device(&g);
    check_all_orders(&g, NULL, device_rows, 2);

    analysis *a = golden_analyse(&g, NULL, 0);
    step_summary s = analysis_steps(a);
    /* (600+580)/2 = 590 computation, 250/2 = 125 communication, 90/2 = 45 pure, (310+420)/2 =
     * 365 free. */
    ck_assert_double_eq(s.avg_overlap_compute_ns, 590.0 * US);
    ck_assert_double_eq(s.avg_comm_ns, 125.0 * US);
    ck_assert_double_eq(s.avg_pure_comm_ns, 45.0 * US);
    ck_assert_double_eq(s.avg_free_ns, 365.0 * US);
    ck_assert_uint_eq(s.source, STEP_SOURCE_AUTO);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

/* The data fetch words: the first op after any of them starts the forward pass. */
START_TEST(test_fetch_names)
{
    static const struct {
        const char *name;
        int fetch;
    } cases[] = {
        {"get_next", 1},
        {"GetNext", 1},
        {"IteratorGetNext", 1},
        {"data fetch", 1},
        {"enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 1},
        {"next_batch", 1},
        {"Get-Next\n\xff", 1},
        {"forward", 0},
        {"getter", 0},
        {"", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        golden g;
        golden_init(&g);
        golden_step(&g, 1, 1, 100, 500);
        golden_op(&g, 1, cases[i].name, NULL, 100, 200, 0);
        golden_op(&g, 1, "x", NULL, 250, 400, 0);
        /* A kernel that runs during the fetch is not "after" it. */
        golden_kernel(&g, 0, 7, "copy", NULL, 120, 180, 0);
        analysis *a = golden_analyse(&g, NULL, 0);
        step_row r;
        ck_assert_uint_eq(analysis_recent_steps(a, &r, 1), 1);
        /* A fetch: FP = x at 250; otherwise the first op at 100. BP is x's end either way. */
        ck_assert_msg(r.fp_start_ns == (cases[i].fetch ? 250 : 100) * US, "%s: fp %llu",
                      cases[i].name, (unsigned long long)r.fp_start_ns);
        ck_assert_uint_eq(r.bp_end_ns, 400 * US);
        analysis_destroy(a);
        golden_free(&g);
    }
}
END_TEST

/* The automatic backward end: the op that began last strictly before the last communication op
 * began (a kernel or a host COMM_OP); the last op to end when there is none. */
START_TEST(test_bp_before_communication)
{
    static const struct {
        const char *label;
        int comm_kind; /* 0: none, 1: NCCL kernel, 2: host COMM_OP */
        uint64_t bp;
        const char *bp_op;
    } cases[] = {
        /* a [110,200], k1 kernel [150,260], comm [300,400], k2 kernel [300,350] (begins with
         * the communication, so not before it), b [420,480]. */
        {"kernel comm", 1, 260, "k1"},
        {"host comm", 2, 260, "k1"},
        /* No communication: the last op to end, b at 480. */
        {"no comm", 0, 480, "b"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        golden g;
        golden_init(&g);
        golden_step(&g, 1, 1, 100, 500);
        golden_op(&g, 1, "a", NULL, 110, 200, 0);
        golden_kernel(&g, 0, 7, "k1", NULL, 150, 260, 0);
        golden_kernel(&g, 0, 7, "k2", NULL, 300, 350, 0);
        golden_op(&g, 1, "b", NULL, 420, 480, 0);
        if (cases[i].comm_kind == 1)
            golden_kernel(&g, 0, 8, "nccl", NULL, 300, 400, 1);
        else if (cases[i].comm_kind == 2)
            golden_op(&g, 2, "all_reduce", NULL, 300, 400, 0)->kind = TS_KIND_COMM_OP;
        for (size_t o = 0; o < N_ORDERS; o++) {
            capture cap;
            analysis_sink sink;
            analysis *a = analyse_in_order(&g, NULL, &orders[o], &cap, &sink);
            ck_assert_uint_eq(cap.n, 1);
            ck_assert_msg(cap.rows[0].bp_end_ns == cases[i].bp * US, "%s, %s: bp %llu",
                          cases[i].label, orders[o].label,
                          (unsigned long long)cap.rows[0].bp_end_ns);
            ck_assert_str_eq(golden_str(a, cap.rows[0].bp_op), cases[i].bp_op);
            ck_assert_uint_eq(cap.rows[0].fp_start_ns, 110 * US);
            ck_assert_uint_eq(cap.rows[0].source, STEP_SOURCE_AUTO);
            analysis_destroy(a);
        }
        golden_free(&g);
    }
}
END_TEST

static Suite *steps_phases_suite(void)
{
    Suite *s = suite_create("steps_phases");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_marks);
    tcase_add_test(tc, test_option_by_config);
    tcase_add_test(tc, test_option_by_recording);
    tcase_add_test(tc, test_option_precedence);
    tcase_add_test(tc, test_auto_without_communication);
    tcase_add_test(tc, test_option_odd_names);
    tcase_add_test(tc, test_auto_with_communication);
    tcase_add_test(tc, test_fetch_names);
    tcase_add_test(tc, test_bp_before_communication);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tests_run(steps_phases_suite());
}
