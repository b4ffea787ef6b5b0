/* steps_fixture: feeding a golden in the orders a recorder produces and checking the rows it
 * gives (steps_fixture.h). */
#include "steps_fixture.h"

#include <malloc.h>
#include <stdio.h>

const order orders[] = {
    {"as pushed", 0, 0, 0, 0},
    {"as pushed, one by one", 0, 0, 0, 1},
    {"a block per lane, step thread last", UINT64_MAX, 1, 0, 0},
    {"a block per lane, step thread first", UINT64_MAX, 0, 0, 7},
    {"drains of 50us, kernels 120us late", 50, 1, 120, 3},
    {"drains of 7us", 7, 0, 0, 0},
    {"drains of 30us, lanes reversed, kernels 400us late", 30, 1, 400, 1},
};
const size_t n_orders = sizeof orders / sizeof orders[0];

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

void capture_step(void *ctx, const step_row *row)
{
    capture *c = ctx;
    if (c->calls && row->step <= c->last_step)
        c->out_of_order++;
    c->last_step = row->step;
    c->calls++;
    if (c->n < sizeof c->rows / sizeof c->rows[0])
        c->rows[c->n++] = *row;
}

analysis *analyse_in_order(golden *g, const analysis_config *base, const order *o, capture *cap,
                           analysis_sink *sink)
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

void check_row(const analysis *a, const step_row *r, const exp_row *e, const char *label)
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
    ck_assert_msg(r->end_ns - r->bp_end_ns == e->tail * US, "%s: step %llu: tail %llu ns", label,
                  (unsigned long long)e->step, (unsigned long long)(r->end_ns - r->bp_end_ns));
    EQ_US(total_ns, e->total);
    EQ_US(overlap_compute_ns, e->compute);
    /* The split is a partition: its parts add up to the step, and compute and tail are the
     * forward/backward and the tail (step_trace.csv's) less what waits or evaluates in them. */
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

void check_all_orders(golden *g, const analysis_config *cfg, const exp_row *want, size_t n)
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

void build_marks(golden *g)
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

const exp_row marks_rows[] = {
    {1, 100, 1100, 210, 850, 110, 640, 250, 1000, STEP_SOURCE_MARKS, "", "", 820, 0, 0, 180, 80},
    {2, 1100, 2200, 1310, 1950, 210, 640, 250, 1100, STEP_SOURCE_MARKS, "", "", 800, 0, 0, 300,
     110},
};
