/* Step trace, overlap and gaps (analysis/steps.c) on hand-made streams with hand-computed
 * answers. Every golden is also fed in the orders a recorder produces (lanes one after another,
 * drains of a few microseconds, kernels late, one event per call), and must give the same rows.
 * Times in the goldens and the expectations are microseconds. */
#include "analysis/golden.h"

#include <malloc.h>
#include <stdio.h>

/* ---- Feeding in recorder orders ---------------------------------------------------------- */

typedef struct order {
    const char *label;
    uint64_t period_us;       /* drain period; 0: as pushed; UINT64_MAX: one block per lane */
    int lanes_desc;           /* lanes drained from the highest id down */
    uint64_t kernel_delay_us; /* device records reach their lane this much later */
    size_t batch;             /* events per analysis_feed call; 0: all */
} order;

static const order orders[] = {
    {"as pushed", 0, 0, 0, 0},
    {"as pushed, one by one", 0, 0, 0, 1},
    {"a block per lane, step thread last", UINT64_MAX, 1, 0, 0},
    {"a block per lane, step thread first", UINT64_MAX, 0, 0, 7},
    {"drains of 50us, kernels 120us late", 50, 1, 120, 3},
    {"drains of 7us", 7, 0, 0, 0},
    {"drains of 30us, lanes reversed, kernels 400us late", 30, 1, 400, 1},
};
#define N_ORDERS (sizeof orders / sizeof orders[0])

typedef struct keyed {
    uint64_t period, lane, written;
    size_t index;
    ts_event ev;
} keyed;

static int desc_lanes;

static int keyed_cmp(const void *pa, const void *pb)
{
    const keyed *a = pa, *b = pb;
    if (a->period != b->period)
        return a->period < b->period ? -1 : 1;
    if (a->lane != b->lane)
        return (a->lane < b->lane) == !desc_lanes ? -1 : 1;
    if (a->written != b->written)
        return a->written < b->written ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

/* The events as a recorder would write them: a range when it ends, lane after lane per drain. */
static ts_event *reorder(const golden *g, const order *o)
{
    ts_event *out = malloc((g->nev ? g->nev : 1) * sizeof *out);
    ck_assert_ptr_nonnull(out);
    if (!o->period_us) {
        memcpy(out, g->ev, g->nev * sizeof *out);
        return out;
    }
    keyed *k = malloc((g->nev ? g->nev : 1) * sizeof *k);
    ck_assert_ptr_nonnull(k);
    for (size_t i = 0; i < g->nev; i++) {
        const ts_event *e = &g->ev[i];
        int dev = e->device != TS_DEVICE_HOST;
        uint64_t w = e->end_ns + (dev ? o->kernel_delay_us * US : 0);
        k[i] = (keyed){.period = o->period_us == UINT64_MAX ? 0 : w / (o->period_us * US),
                       .lane = dev ? (1ull << 40) | e->tid : e->tid,
                       .written = w,
                       .index = i,
                       .ev = *e};
    }
    desc_lanes = o->lanes_desc;
    qsort(k, g->nev, sizeof *k, keyed_cmp);
    for (size_t i = 0; i < g->nev; i++)
        out[i] = k[i].ev;
    free(k);
    return out;
}

typedef struct capture {
    step_row rows[64];
    size_t n;
    uint64_t calls, out_of_order, last_step;
} capture;

static void capture_step(void *ctx, const step_row *row)
{
    capture *c = ctx;
    if (c->calls && row->step <= c->last_step)
        c->out_of_order++;
    c->last_step = row->step;
    c->calls++;
    if (c->n < sizeof c->rows / sizeof c->rows[0])
        c->rows[c->n++] = *row;
}

static analysis *analyse_in_order(golden *g, const analysis_config *base, const order *o,
                                  capture *cap, analysis_sink *sink)
{
    analysis_config cfg;
    if (base)
        cfg = *base;
    else
        analysis_config_init(&cfg);
    memset(cap, 0, sizeof *cap);
    *sink = (analysis_sink){.ctx = cap, .step = capture_step};
    cfg.sink = sink;
    analysis *a = analysis_create(&cfg, golden_names, g);
    ck_assert_ptr_nonnull(a);
    ts_event *ev = reorder(g, o);
    size_t batch = o->batch ? o->batch : (g->nev ? g->nev : 1);
    for (size_t i = 0; i < g->nev; i += batch)
        analysis_feed(a, ev + i, g->nev - i < batch ? g->nev - i : batch);
    free(ev);
    analysis_finish(a);
    return a;
}

/* ---- Expectations ------------------------------------------------------------------------ */

typedef struct exp_row {
    uint64_t step, begin, end, fp, bp;
    uint64_t interval, fpbp, tail, total; /* tail: backward end to step end, as the seeds say */
    uint32_t source;
    const char *fp_op, *bp_op;
    uint64_t compute, comm, pure, idle, gap; /* compute: merged, as overlap.csv has it */
} exp_row;

static void check_row(const analysis *a, const step_row *r, const exp_row *e, const char *label)
{
#define EQ_US(field, want)                                                                         \
    ck_assert_msg(r->field == (want)*US, "%s: step %llu: " #field " = %llu ns, want %llu us",      \
                  label, (unsigned long long)e->step, (unsigned long long)r->field,                \
                  (unsigned long long)(want))
    ck_assert_msg(r->step == e->step, "%s: step %llu, want %llu", label,
                  (unsigned long long)r->step, (unsigned long long)e->step);
    EQ_US(begin_ns, e->begin);
    EQ_US(end_ns, e->end);
    EQ_US(fp_start_ns, e->fp);
    EQ_US(bp_end_ns, e->bp);
    EQ_US(interval_ns, e->interval);
    EQ_US(fpbp_ns, e->fpbp);
    ck_assert_msg(r->end_ns - r->bp_end_ns == e->tail * US, "%s: step %llu: seeds' tail %llu ns",
                  label, (unsigned long long)e->step,
                  (unsigned long long)(r->end_ns - r->bp_end_ns));
    EQ_US(total_ns, e->total);
    EQ_US(overlap_compute_ns, e->compute);
    /* The split is a partition: its parts add up to the step, and compute and tail are the
     * forward/backward and the seeds' tail less what waits or evaluates in them. */
    ck_assert_msg(r->interval_ns + r->compute_ns + r->comm_wait_ns + r->tail_ns + r->eval_ns ==
                      r->total_ns,
                  "%s: step %llu: the split does not add up", label, (unsigned long long)e->step);
    ck_assert_msg(r->compute_ns <= r->fpbp_ns && r->tail_ns <= e->tail * US,
                  "%s: step %llu: compute or tail past its phase", label,
                  (unsigned long long)e->step);
    EQ_US(comm_ns, e->comm);
    EQ_US(pure_comm_ns, e->pure);
    EQ_US(free_ns, e->idle);
    EQ_US(gap_ns, e->gap);
#undef EQ_US
    ck_assert_msg(r->source == e->source, "%s: step %llu: source %u, want %u", label,
                  (unsigned long long)e->step, r->source, e->source);
    ck_assert_msg(!strcmp(golden_str(a, r->fp_op), e->fp_op),
                  "%s: step %llu: fp_op '%s', want '%s'", label, (unsigned long long)e->step,
                  golden_str(a, r->fp_op), e->fp_op);
    ck_assert_msg(!strcmp(golden_str(a, r->bp_op), e->bp_op),
                  "%s: step %llu: bp_op '%s', want '%s'", label, (unsigned long long)e->step,
                  golden_str(a, r->bp_op), e->bp_op);
}

/* Feeds g in every order and checks the rows the sink got (and analysis_recent_steps). */
static void check_all_orders(golden *g, const analysis_config *cfg, const exp_row *want, size_t n)
{
    for (size_t o = 0; o < N_ORDERS; o++) {
        capture cap;
        analysis_sink sink;
        analysis *a = analyse_in_order(g, cfg, &orders[o], &cap, &sink);
        ck_assert_msg(cap.calls == n, "%s: %llu rows, want %zu", orders[o].label,
                      (unsigned long long)cap.calls, n);
        ck_assert_uint_eq(cap.out_of_order, 0);
        step_row recent[64];
        ck_assert_uint_eq(analysis_recent_steps(a, recent, 64), n);
        for (size_t i = 0; i < n; i++) {
            check_row(a, &cap.rows[i], &want[i], orders[o].label);
            check_row(a, &recent[i], &want[i], orders[o].label);
        }
        analysis_destroy(a);
    }
}

/* ---- Goldens ----------------------------------------------------------------------------- */

/* Two steps with phase marks on thread 1 and a data thread 2; no device. */
static void build_marks(golden *g)
{
    golden_instant(g, TS_KIND_STEP_BEGIN, 1, 100)->v0 = 1;
    golden_op(g, 1, "get_next", NULL, 110, 200, 0);
    golden_phase(g, 1, TS_PHASE_FORWARD_START, 210);
    golden_op(g, 1, "Conv2D/inner", NULL, 230, 300, 1); /* nested: not a top-level op */
    golden_op(g, 1, "Conv2D", NULL, 220, 500, 0);
    golden_op(g, 2, "Decode", NULL, 480, 560, 0);
    golden_op(g, 1, "MatMul", NULL, 520, 800, 0);
    golden_phase(g, 1, TS_PHASE_BACKWARD_END, 850);
    golden_op(g, 1, "ApplyMomentum", NULL, 900, 1050, 0);
    golden_instant(g, TS_KIND_STEP_END, 1, 1100)->v0 = 1;

    golden_op(g, 1, "get_next", NULL, 1120, 1190, 0);
    golden_instant(g, TS_KIND_STEP_BEGIN, 1, 1200)->v0 = 2;
    golden_phase(g, 1, TS_PHASE_FORWARD_START, 1310);
    golden_op(g, 1, "Conv2D", NULL, 1320, 1600, 0);
    golden_op(g, 1, "MatMul", NULL, 1650, 1900, 0);
    golden_phase(g, 1, TS_PHASE_BACKWARD_END, 1950);
    golden_op(g, 1, "ApplyMomentum", NULL, 2000, 2150, 0);
    golden_op(g, 2, "Decode", NULL, 2100, 2300, 0); /* runs on past the last step */
    golden_instant(g, TS_KIND_STEP_END, 1, 2200)->v0 = 2;
}

/* Step 1: marks FP 210, BP 850 in [100, 1100].
 *   interval 210-100 = 110, fpbp 850-210 = 640, tail 1100-850 = 250, total 1000.
 *   computation (no device: top-level host ops of every thread): [110,200] 90 + [220,500] u
 *   [480,560] u [520,800] = [220,800] 580 + [900,1050] 150 = 820; free 1000-820 = 180.
 *   gaps on thread 1 inside [210,850]: (200,220) clipped to [210,220] 10, (500,520) 20,
 *   (800,900) clipped to [800,850] 50: 80.
 * Step 2: window from step 1's end, [1100, 2200]; marks FP 1310, BP 1950.
 *   interval 1310-1100 = 210, fpbp 1950-1310 = 640, tail 2200-1950 = 250, total 1100.
 *   computation [1120,1190] 70 + [1320,1600] 280 + [1650,1900] 250 + [2000,2150] u [2100,2200]
 *   (Decode clipped to the step) 200 = 800; free 1100-800 = 300.
 *   gaps inside [1310,1950]: (1190,1320) clipped 10, (1600,1650) 50, (1900,2000) clipped 50:
 *   110. */
static const exp_row marks_rows[] = {
    {1, 100, 1100, 210, 850, 110, 640, 250, 1000, STEP_SOURCE_MARKS, "", "", 820, 0, 0, 180, 80},
    {2, 1100, 2200, 1310, 1950, 210, 640, 250, 1100, STEP_SOURCE_MARKS, "", "", 800, 0, 0, 300,
     110},
};

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
 * Step 2 (no op named by the options, no fetch): the seeds' rule, FP = first op Relu 1120,
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

    /* An option that names no op of the step leaves that boundary to the seeds' rule; the row
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

/* ---- Overlap on crafted intervals -------------------------------------------------------- */

enum { K_COMPUTE, K_COMPUTE2, K_COMM, K_COMM_OP, K_HOST1, K_HOST2 };

typedef struct piece {
    int what;
    uint64_t b, e;
} piece;

typedef struct overlap_case {
    const char *label;
    piece p[6];
    size_t np;
    int two_steps; /* a second step [600, 1100] */
    uint64_t compute[2], comm[2], pure[2], idle[2];
} overlap_case;

/* Step 1 is [100, 600] (500 long), step 2 [600, 1100]. */
static const overlap_case overlap_cases[] = {
    /* [200,400] and [300,500] meet on [300,400]: pure 200-100 = 100, free 500-300 = 200. */
    {"partial", {{K_COMPUTE, 200, 400}, {K_COMM, 300, 500}}, 2, 0, {200}, {200}, {100}, {200}},
    /* Communication inside computation: pure 0; free 500-300 = 200. */
    {"comm inside", {{K_COMPUTE, 200, 500}, {K_COMM, 300, 400}}, 2, 0, {300}, {100}, {0}, {200}},
    /* Disjoint: pure = all 100; free 500-200 = 300. */
    {"disjoint", {{K_COMPUTE, 200, 300}, {K_COMM, 400, 500}}, 2, 0, {100}, {100}, {100}, {300}},
    /* Computation inside communication: pure 300-100 = 200; free 500-300 = 200. */
    {"compute inside",
     {{K_COMPUTE, 300, 400}, {K_COMM, 200, 500}},
     2,
     0,
     {100},
     {300},
     {200},
     {200}},
    /* Two streams [200,350] u [300,400] = 200; a host COMM_OP [380,450] 70, overlap 20, pure
     * 50; free 500-(200+70-20) = 250. */
    {"two streams, host comm",
     {{K_COMPUTE, 200, 350}, {K_COMPUTE2, 300, 400}, {K_COMM_OP, 380, 450}},
     3,
     0,
     {200},
     {70},
     {50},
     {250}},
    /* No device: host ops of two threads [150,300] u [250,400] = 250; COMM_OP [350,500] 150,
     * overlap 50, pure 100; free 500-350 = 150. */
    {"host only",
     {{K_HOST1, 150, 300}, {K_HOST2, 250, 400}, {K_COMM_OP, 350, 500}},
     3,
     0,
     {250},
     {150},
     {100},
     {150}},
    /* Pieces: [150,200] [250,300] [350,400] = 150 under comm [180,370] 190: overlap 20+50+20 =
     * 90, pure 100, free 500-250 = 250. */
    {"comm over pieces",
     {{K_COMPUTE, 150, 200}, {K_COMPUTE, 250, 300}, {K_COMPUTE, 350, 400}, {K_COMM, 180, 370}},
     4,
     0,
     {150},
     {190},
     {100},
     {250}},
    /* Across the step boundary at 600: step 1 gets compute [500,600] 100 and comm [550,600] 50
     * (all overlapped), free 400; step 2 gets compute [600,800] 200 and comm [600,650] 50,
     * free 300. */
    {"across steps",
     {{K_COMPUTE, 500, 800}, {K_COMM, 550, 650}},
     2,
     1,
     {100, 200},
     {50, 50},
     {0, 0},
     {400, 300}},
    {"empty", {{0, 0, 0}}, 0, 0, {0}, {0}, {0}, {500}},
};

START_TEST(test_overlap_cases)
{
    const overlap_case *c = &overlap_cases[_i];
    golden g;
    golden_init(&g);
    golden_step(&g, 1, 1, 100, 600);
    if (c->two_steps)
        golden_step(&g, 1, 2, 600, 1100);
    for (size_t i = 0; i < c->np; i++) {
        const piece *p = &c->p[i];
        switch (p->what) {
        case K_COMPUTE:
            golden_kernel(&g, 0, 7, "gemm", NULL, p->b, p->e, 0);
            break;
        case K_COMPUTE2:
            golden_kernel(&g, 0, 9, "conv", NULL, p->b, p->e, 0);
            break;
        case K_COMM:
            golden_kernel(&g, 0, 8, "nccl", NULL, p->b, p->e, 1);
            break;
        case K_COMM_OP: {
            ts_event *e = golden_op(&g, 3, "all_reduce", NULL, p->b, p->e, 0);
            e->kind = TS_KIND_COMM_OP;
            break;
        }
        case K_HOST1:
            golden_op(&g, 1, "op1", NULL, p->b, p->e, 0);
            break;
        case K_HOST2:
            golden_op(&g, 2, "op2", NULL, p->b, p->e, 0);
            break;
        }
    }
    size_t nsteps = c->two_steps ? 2 : 1;
    for (size_t o = 0; o < N_ORDERS; o++) {
        capture cap;
        analysis_sink sink;
        analysis *a = analyse_in_order(&g, NULL, &orders[o], &cap, &sink);
        ck_assert_uint_eq(cap.n, nsteps);
        for (size_t s = 0; s < nsteps; s++) {
            const step_row *r = &cap.rows[s];
            ck_assert_msg(r->overlap_compute_ns == c->compute[s] * US &&
                              r->comm_ns == c->comm[s] * US && r->pure_comm_ns == c->pure[s] * US &&
                              r->free_ns == c->idle[s] * US,
                          "%s, %s, step %zu: compute %llu comm %llu pure %llu free %llu ns",
                          c->label, orders[o].label, s + 1,
                          (unsigned long long)r->overlap_compute_ns, (unsigned long long)r->comm_ns,
                          (unsigned long long)r->pure_comm_ns, (unsigned long long)r->free_ns);
        }
        analysis_destroy(a);
    }
    golden_free(&g);
}
END_TEST

/* ---- Communication wait ------------------------------------------------------------------ */

enum { W_OP, W_OP_OTHER, W_FETCH, W_COMM_OP, W_COMM_RANGE, W_KERNEL, W_NCCL, W_FWD, W_BWD, W_EVAL };

typedef struct wait_case {
    const char *label;
    piece p[5];
    size_t np;
    uint64_t wait, gap, pure;
} wait_case;

/* One step [100, 600] marked by thread 1; communication recorded on thread 3 (the thread that
 * saw it complete), as termsight.torch's DDP hook does. */
static const wait_case wait_cases[] = {
    /* Compute, then the collective in flight with the training thread idle: all of it waits. */
    {"compute then comm", {{W_OP, 150, 300}, {W_COMM_OP, 300, 450}}, 2, 150, 0, 150},
    /* The collective overlapped by compute on the training thread: no wait. */
    {"comm under compute", {{W_OP, 150, 500}, {W_COMM_OP, 200, 400}}, 2, 0, 0, 0},
    /* The hole between two ops [250,400] is inside the collective [200,450]: a wait of 150, and
     * no gap (a gap is idle time with nothing in flight). */
    {"wait between ops",
     {{W_OP, 150, 250}, {W_OP, 400, 500}, {W_COMM_OP, 200, 450}},
     3,
     150,
     0,
     150},
    /* Another thread computing does not hide the training thread's wait (pure communication,
     * which counts every thread, is 0 here). */
    {"other thread busy",
     {{W_OP, 150, 250}, {W_OP_OTHER, 250, 450}, {W_COMM_OP, 250, 450}},
     3,
     200,
     0,
     0},
    /* Waiting for data while a collective is in flight is a data wait, not a communication
     * wait; a communication range (TS_EF_COMM) on the training thread is not computation. */
    {"fetch and comm range",
     {{W_FETCH, 200, 300}, {W_COMM_OP, 200, 300}, {W_OP, 310, 400}, {W_COMM_RANGE, 400, 460}},
     4,
     60,
     0,
     60},
    /* A gap with nothing in flight stays a gap: ops [150,200] and [300,400] (gap 100 in FP/BP,
     * BP = the op before the collective), then the collective [420,450]: a wait of 30. */
    {"gap then comm", {{W_OP, 150, 200}, {W_OP, 300, 400}, {W_COMM_OP, 420, 450}}, 3, 30, 100, 30},
    /* With device work the wait is the communication no compute kernel overlaps. */
    {"device", {{W_KERNEL, 200, 300}, {W_NCCL, 250, 400}, {W_OP, 150, 500}}, 3, 100, 0, 100},
};

/* One piece of a wait or split case: thread 1 trains (its ops and marks), thread 2 is another
 * thread, thread 3 saw the communication complete. */
static void add_piece(golden *g, const piece *p)
{
    ts_event *e = NULL;
    switch (p->what) {
    case W_OP:
        golden_op(g, 1, "op", NULL, p->b, p->e, 0);
        break;
    case W_OP_OTHER:
        golden_op(g, 2, "other", NULL, p->b, p->e, 0);
        break;
    case W_FETCH:
        golden_op(g, 1, "DataLoader.__next__", NULL, p->b, p->e, 0);
        break;
    case W_COMM_OP:
        e = golden_op(g, 3, "DDP/bucket0/allreduce", NULL, p->b, p->e, 0);
        e->kind = TS_KIND_COMM_OP;
        e->flags = TS_EF_COMM;
        break;
    case W_COMM_RANGE:
        golden_op(g, 1, "c10d::allreduce_", NULL, p->b, p->e, 0)->flags = TS_EF_COMM;
        break;
    case W_KERNEL:
        golden_kernel(g, 0, 7, "gemm", NULL, p->b, p->e, 0);
        break;
    case W_NCCL:
        golden_kernel(g, 0, 8, "nccl", NULL, p->b, p->e, 1);
        break;
    case W_FWD:
        golden_phase(g, 1, TS_PHASE_FORWARD_START, p->b);
        break;
    case W_BWD:
        golden_phase(g, 1, TS_PHASE_BACKWARD_END, p->b);
        break;
    case W_EVAL:
        golden_phase(g, 1, TS_PHASE_EVAL_BEGIN, p->b);
        golden_phase(g, 1, TS_PHASE_EVAL_END, p->e);
        break;
    }
}

/* One step [100, 600] of thread 1 with the pieces, into g (golden_free). */
static void build_one_step(golden *g, const piece *p, size_t np)
{
    golden_init(g);
    golden_step(g, 1, 1, 100, 600);
    for (size_t i = 0; i < np; i++)
        add_piece(g, &p[i]);
}

/* g analysed in order o (*a to destroy): its one row. */
static const step_row *one_row(golden *g, size_t o, capture *cap, analysis_sink *sink, analysis **a)
{
    *a = analyse_in_order(g, NULL, &orders[o], cap, sink);
    ck_assert_uint_eq(cap->n, 1);
    return &cap->rows[0];
}

START_TEST(test_comm_wait_cases)
{
    const wait_case *c = &wait_cases[_i];
    golden g;
    build_one_step(&g, c->p, c->np);
    for (size_t o = 0; o < N_ORDERS; o++) {
        capture cap;
        analysis_sink sink;
        analysis *a;
        const step_row *r = one_row(&g, o, &cap, &sink, &a);
        ck_assert_msg(r->comm_wait_ns == c->wait * US && r->gap_ns == c->gap * US &&
                          r->pure_comm_ns == c->pure * US,
                      "%s, %s: comm_wait %llu gap %llu pure %llu ns, want %llu %llu %llu us",
                      c->label, orders[o].label, (unsigned long long)r->comm_wait_ns,
                      (unsigned long long)r->gap_ns, (unsigned long long)r->pure_comm_ns,
                      (unsigned long long)c->wait, (unsigned long long)c->gap,
                      (unsigned long long)c->pure);
        ck_assert_uint_eq(r->interval_ns + r->compute_ns + r->comm_wait_ns + r->tail_ns +
                              r->eval_ns,
                          r->total_ns);
        step_summary s = analysis_steps(a);
        ck_assert_double_eq(s.avg_comm_wait_ns, (double)(c->wait * US));
        analysis_destroy(a);
    }
    golden_free(&g);
}
END_TEST

/* ---- The split ---------------------------------------------------------------------------- */

typedef struct split_case {
    const char *label;
    piece p[6];
    size_t np;
    uint64_t interval, compute, wait, tail, eval; /* us, adding up to the step [100, 600] */
} split_case;

static const split_case split_cases[] = {
    /* A rank waiting for a slower one (DDP): forward/backward [150,300], the all-reduce in
     * flight [280,500], the optimizer [500,550]. The wait [300,500] lies in the seeds' tail
     * [300,600] and is taken out of it. */
    {"waits in the tail",
     {{W_FWD, 150, 150},
      {W_OP, 150, 300},
      {W_BWD, 300, 300},
      {W_COMM_OP, 280, 500},
      {W_OP, 500, 550}},
     5,
     50,
     150,
     200,
     100,
     0},
    /* The slow rank's data wait [100,400] is interval, never compute, though the fetch is a
     * host op that the overlap counts as computation. */
    {"data wait is not compute",
     {{W_FETCH, 100, 400}, {W_FWD, 400, 400}, {W_OP, 400, 500}, {W_BWD, 500, 500}},
     4,
     300,
     100,
     0,
     100,
     0},
    /* A wait inside forward/backward (no op between [200,260] while a collective is in flight)
     * is taken out of compute. */
    {"waits in backward",
     {{W_FWD, 150, 150},
      {W_OP, 150, 200},
      {W_OP, 260, 400},
      {W_BWD, 400, 400},
      {W_COMM_OP, 190, 270}},
     5,
     50,
     190,
     60,
     200,
     0},
    /* An evaluation pass [400,550] inside the step, a collective in flight during it: the pass
     * is eval, the collective's time in it no wait. */
    {"evaluation inside",
     {{W_FWD, 150, 150},
      {W_OP, 150, 300},
      {W_BWD, 300, 300},
      {W_EVAL, 400, 550},
      {W_COMM_OP, 420, 480}},
     5,
     50,
     150,
     0,
     150,
     150},
    /* Two evaluation passes back to back, [400,450] and [450,500]: one stretch of 100. */
    {"evaluations back to back",
     {{W_FWD, 150, 150},
      {W_OP, 150, 300},
      {W_BWD, 300, 300},
      {W_EVAL, 400, 450},
      {W_EVAL, 450, 500}},
     5,
     50,
     150,
     0,
     200,
     100},
    /* A collective in flight before the forward start is interval (the step has not begun its
     * work), not a communication wait. */
    {"comm before forward",
     {{W_COMM_OP, 100, 200}, {W_FWD, 200, 200}, {W_OP, 200, 500}, {W_BWD, 500, 500}},
     4,
     100,
     300,
     0,
     100,
     0},
    /* Device work: forward/backward [150,450], compute kernels [150,250] and [350,450], the
     * all-reduce kernel [250,350] with no compute kernel beside it: a wait of 100 in it. */
    {"device",
     {{W_FWD, 150, 150},
      {W_KERNEL, 150, 250},
      {W_NCCL, 250, 350},
      {W_KERNEL, 350, 450},
      {W_BWD, 450, 450}},
     5,
     50,
     200,
     100,
     150,
     0},
};

START_TEST(test_split_cases)
{
    const split_case *c = &split_cases[_i];
    golden g;
    build_one_step(&g, c->p, c->np);
    for (size_t o = 0; o < N_ORDERS; o++) {
        capture cap;
        analysis_sink sink;
        analysis *a;
        const step_row *r = one_row(&g, o, &cap, &sink, &a);
        ck_assert_msg(r->interval_ns == c->interval * US && r->compute_ns == c->compute * US &&
                          r->comm_wait_ns == c->wait * US && r->tail_ns == c->tail * US &&
                          r->eval_ns == c->eval * US,
                      "%s, %s: interval %llu compute %llu wait %llu tail %llu eval %llu ns",
                      c->label, orders[o].label, (unsigned long long)r->interval_ns,
                      (unsigned long long)r->compute_ns, (unsigned long long)r->comm_wait_ns,
                      (unsigned long long)r->tail_ns, (unsigned long long)r->eval_ns);
        ck_assert_uint_eq(r->total_ns, 500 * US);
        step_summary s = analysis_steps(a);
        ck_assert_double_eq(s.avg_interval_ns + s.avg_compute_ns + s.avg_comm_wait_ns +
                                s.avg_tail_ns + s.avg_eval_ns,
                            s.avg_total_ns);
        analysis_destroy(a);
    }
    golden_free(&g);
}
END_TEST

/* ---- Step windows, incomplete steps, live use --------------------------------------------- */

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

/* ---- Long runs: bounded memory, every step once, late events ------------------------------ */

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

/* The seeds' backward end: the op that began last strictly before the last communication op began
 * (a kernel or a host COMM_OP); the last op to end when there is none. */
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

int main(void)
{
    Suite *s = suite_create("steps");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_marks);
    tcase_add_test(tc, test_option_by_config);
    tcase_add_test(tc, test_option_by_recording);
    tcase_add_test(tc, test_option_precedence);
    tcase_add_test(tc, test_auto_without_communication);
    tcase_add_test(tc, test_option_odd_names);
    tcase_add_test(tc, test_auto_with_communication);
    tcase_add_loop_test(tc, test_overlap_cases, 0,
                        (int)(sizeof overlap_cases / sizeof overlap_cases[0]));
    tcase_add_loop_test(tc, test_split_cases, 0, sizeof split_cases / sizeof split_cases[0]);
    tcase_add_loop_test(tc, test_comm_wait_cases, 0,
                        (int)(sizeof wait_cases / sizeof wait_cases[0]));
    tcase_add_test(tc, test_windows);
    tcase_add_test(tc, test_eval_between_steps);
    tcase_add_test(tc, test_incomplete_steps);
    tcase_add_test(tc, test_live_finish);
    tcase_add_test(tc, test_long_run);
    tcase_add_test(tc, test_long_run_very_late_kernels);
    tcase_add_test(tc, test_fetch_names);
    tcase_add_test(tc, test_bp_before_communication);
    tcase_add_test(tc, test_empty);
    tcase_add_test(tc, test_board_load);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
