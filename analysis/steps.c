/* steps: the analysis's step trace, computation/communication overlap and gaps between
 * operators. What a step is and how its time splits is model's step trace (steptrace.c), the
 * same definition the collector publishes live on its step board; this module feeds it, gives
 * it the operator options in force (the analysis's config first, else what the recording says:
 * the collector records PROFILING_FP_START / PROFILING_BP_END there), hands each finalized row to
 * the sink, and turns its totals into averages.
 *
 * A live monitor's analysis (analysis_config.board) is not fed the step events: the collector's
 * step board gives its totals and recent rows (analysis_steps_load). */
#include "analysis_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct steps_state {
    steptrace *t;
    analysis *a;
    /* Evaluation passes (TS_PHASE_EVAL_BEGIN .. END): how many ended, their time. */
    uint64_t evals, eval_ns, eval_begin;
    int eval_open;
} steps_state;

static const char *step_name(void *ctx, uint32_t id, uint32_t *len)
{
    const steps_state *st = ctx;
    return analysis_raw_name(st->a, id, len);
}

static void step_prepare(void *ctx, steptrace *t)
{
    const steps_state *st = ctx;
    const analysis_config *c = analysis_cfg(st->a);
    steptrace_set_options(
        t, c->fp_start_op ? c->fp_start_op : analysis_config_value(st->a, "fp_start_op"),
        c->bp_end_op ? c->bp_end_op : analysis_config_value(st->a, "bp_end_op"));
}

static void step_row_done(void *ctx, const step_row *row)
{
    const steps_state *st = ctx;
    const analysis_sink *sink = analysis_cfg(st->a)->sink;
    if (sink && sink->step)
        sink->step(sink->ctx, row);
}

static void *steps_create(analysis *a)
{
    steps_state *st = calloc(1, sizeof *st);
    if (!st)
        return NULL;
    st->a = a;
    steptrace_hooks h = {
        .ctx = st, .name = step_name, .prepare = step_prepare, .row = step_row_done};
    st->t = steptrace_create(&h, analysis_cfg(a)->recent_steps);
    if (!st->t) {
        free(st);
        return NULL;
    }
    return st;
}

static void steps_feed(void *state, analysis *a, const ts_event *ev)
{
    (void)a;
    steps_state *st = state;
    if (ev->kind == TS_KIND_PHASE && ev->aux == TS_PHASE_EVAL_BEGIN) {
        st->eval_open = 1;
        st->eval_begin = ev->begin_ns;
    } else if (ev->kind == TS_KIND_PHASE && ev->aux == TS_PHASE_EVAL_END && st->eval_open) {
        st->eval_open = 0;
        st->evals++;
        st->eval_ns += ev->begin_ns > st->eval_begin ? ev->begin_ns - st->eval_begin : 0;
    }
    steptrace_feed(st->t, ev);
}

static void steps_finish(void *state, analysis *a)
{
    (void)a;
    steps_state *st = state;
    steptrace_finish(st->t);
}

static void steps_destroy(void *state)
{
    steps_state *st = state;
    steptrace_destroy(st->t);
    free(st);
}

#define STEP_KINDS                                                                                 \
    (KIND_BIT(TS_KIND_STEP_BEGIN) | KIND_BIT(TS_KIND_STEP_END) | KIND_BIT(TS_KIND_PHASE) |         \
     KIND_BIT(TS_KIND_OP_RANGE) | KIND_BIT(TS_KIND_NVTX_RANGE) | KIND_BIT(TS_KIND_KERNEL) |        \
     KIND_BIT(TS_KIND_MEMCPY) | KIND_BIT(TS_KIND_MEMSET) | KIND_BIT(TS_KIND_SYNC) |                \
     KIND_BIT(TS_KIND_CUDA_API) | KIND_BIT(TS_KIND_COMM_OP) | KIND_BIT(TS_KIND_COLLECT_START))

const analysis_module steps_module = {
    .name = "steps",
    .kinds = STEP_KINDS,
    .board_kinds = STEP_KINDS,
    .create = steps_create,
    .feed = steps_feed,
    .finish = steps_finish,
    .destroy = steps_destroy,
};

/* ---- Accessors --------------------------------------------------------------------------- */

step_summary analysis_steps(const analysis *a)
{
    const steps_state *st = analysis_state(a, &steps_module);
    step_summary s;
    memset(&s, 0, sizeof s);
    if (!st)
        return s;
    const step_totals *t = steptrace_totals(st->t);
    s.steps = t->steps;
    if (t->steps) {
        double n = (double)t->steps;
        s.avg_total_ns = (double)t->total_ns / n;
        s.avg_fpbp_ns = (double)t->fpbp_ns / n;
        s.avg_interval_ns = (double)t->interval_ns / n;
        s.avg_compute_ns = (double)t->compute_ns / n;
        s.avg_comm_wait_ns = (double)t->comm_wait_ns / n;
        s.avg_tail_ns = (double)t->tail_ns / n;
        s.avg_eval_ns = (double)t->eval_ns / n;
        s.avg_overlap_compute_ns = (double)t->overlap_compute_ns / n;
        s.avg_comm_ns = (double)t->comm_ns / n;
        s.avg_pure_comm_ns = (double)t->pure_comm_ns / n;
        s.avg_free_ns = (double)t->free_ns / n;
        s.avg_gap_ns = (double)t->gap_ns / n;
    }
    s.gpu_steps = t->gpu_steps;
    s.gpu_device = t->gpu_steps ? t->gpu_device : TS_DEVICE_HOST;
    if (t->gpu_steps) {
        double n = (double)t->gpu_steps;
        s.avg_gpu_total_ns = (double)t->gpu_total_ns / n;
        s.avg_gpu_busy_ns = (double)t->gpu_busy_ns / n;
        s.avg_gpu_idle_data_ns = (double)t->gpu_idle_data_ns / n;
        s.avg_gpu_idle_host_ns = (double)t->gpu_idle_host_ns / n;
        s.avg_gpu_idle_sync_ns = (double)t->gpu_idle_sync_ns / n;
        s.avg_gpu_idle_other_ns = (double)t->gpu_idle_other_ns / n;
    }
    for (uint32_t i = 0; i < t->nslowest && i < 5; i++) {
        s.slowest[i] = t->slowest[i];
        s.slowest_ns[i] = t->slowest_ns[i];
    }
    s.current_step = t->current_step;
    step_row last;
    if (t->current_step && (steptrace_recent(st->t, &last, 1) != 1 || last.step < t->current_step))
        s.unfinished_step = t->current_step;
    s.evals = st->evals;
    s.eval_ns = (double)st->eval_ns;
    s.eval_inside_ns = (double)t->eval_ns;
    s.source = t->last_source;
    s.late_events = t->late;
    s.outside_events = t->outside;
    s.dropped_events = t->dropped;
    s.incomplete_steps = t->incomplete;
    return s;
}

size_t analysis_recent_steps(const analysis *a, step_row *out, size_t max)
{
    const steps_state *st = analysis_state(a, &steps_module);
    return st ? steptrace_recent(st->t, out, max) : 0;
}

size_t analysis_gaps(const analysis *a, op_gap *out, size_t max)
{
    const steps_state *st = analysis_state(a, &steps_module);
    return st ? steptrace_gaps(st->t, out, max) : 0;
}

void analysis_steps_load(analysis *a, const step_totals *t, const step_row *rows, size_t n)
{
    steps_state *st = analysis_state(a, &steps_module);
    if (st)
        steptrace_load(st->t, t, rows, n);
}
