/* steptrace_split: a finalized step's forward start and backward end, its computation and
 * communication overlap, its split and the gaps between its operators (the rules are in
 * steptrace.c's comment). */
#include "steptrace_internal.h"

static void keep_gap(steptrace *st, const op_gap *g)
{
    if (st->ngaps == GAPS_KEEP && g->gap_ns <= st->gaps[GAPS_KEEP - 1].gap_ns)
        return;
    uint32_t i = st->ngaps < GAPS_KEEP ? st->ngaps++ : GAPS_KEEP - 1;
    while (i > 0 && st->gaps[i - 1].gap_ns < g->gap_ns) {
        st->gaps[i] = st->gaps[i - 1];
        i--;
    }
    st->gaps[i] = *g;
}

/* Idle time on the step's thread between consecutive top-level ops, inside [fp, bp], less the
 * time communication (st->sb, st->ncomm spans) is in flight. */
uint64_t steptrace_split_gaps(steptrace *st, const slot *s, uint64_t fp, uint64_t bp)
{
    size_t at = 0;
    size_t n = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        const rec *r = &s->recs[i];
        if (r->cls == REC_HOST && !(r->flags & RF_CARRY) && r->tid == s->tid)
            st->sa[n++] = (span){r->begin, r->end, r->name};
    }
    spans_sort(st->sa, st->tmp, n);
    uint64_t sum = 0;
    if (!n)
        return 0;
    uint64_t cur_end = st->sa[0].e;
    uint32_t cur_name = st->sa[0].name;
    for (size_t i = 1; i < n; i++) {
        const span *o = &st->sa[i];
        if (o->b > cur_end) {
            uint64_t gb = cur_end > fp ? cur_end : fp;
            uint64_t ge = o->b < bp ? o->b : bp;
            uint64_t idle =
                ge > gb ? ge - gb - spans_covered_by(st->sb, st->ncomm, &at, gb, ge) : 0;
            if (idle) {
                sum += idle;
                op_gap g = {.gap_ns = idle,
                            .at_ns = gb,
                            .step = s->number,
                            .tid = s->tid,
                            .before = cur_name,
                            .after = o->name};
                keep_gap(st, &g);
            }
        }
        if (o->e > cur_end || o->b > cur_end) {
            cur_end = o->e;
            cur_name = o->name;
        }
    }
    return sum;
}

/* The evaluation passes in [lo, hi] from the step's marks, sorted and disjoint, into st->sa
 * (st->tmp is scratch); returns the count. A pass open at either edge of the window runs to it. */
static size_t eval_spans(steptrace *st, const slot *s, uint64_t lo, uint64_t hi)
{
    size_t n = 0;
    for (uint32_t i = 0; i < s->n; i++)
        if (s->recs[i].cls >= REC_EVAL_B)
            st->sa[n++] = (span){s->recs[i].begin, s->recs[i].begin, s->recs[i].cls};
    spans_sort(st->sa, st->tmp, n);
    size_t m = 0;
    int open = 0;
    uint64_t from = lo;
    for (size_t i = 0; i < n; i++) {
        uint64_t t = st->sa[i].b < lo ? lo : st->sa[i].b > hi ? hi : st->sa[i].b;
        if (st->sa[i].name == REC_EVAL_B) {
            if (!open)
                from = t;
            open = 1;
        } else if (open || m == 0) { /* an end with no begin: the pass began before lo */
            if (t > from)
                st->sa[m++] = (span){from, t, 0};
            open = 0;
            from = t;
        }
    }
    if (open && hi > from)
        st->sa[m++] = (span){from, hi, 0};
    return m;
}

/* The split (step_row in steptrace.h) from the step's communication-wait spans w (sorted, disjoint,
 * nw): the evaluation passes first, then the wait after the forward start; the rest is interval,
 * compute or tail by where it lies. */
static void step_split(steptrace *st, const slot *s, uint64_t lo, uint64_t hi, span *w, size_t nw,
                       step_row *row)
{
    uint64_t fp = row->fp_start_ns, bp = row->bp_end_ns, ev;
    size_t ne = eval_spans(st, s, lo, hi);
    ne = spans_coalesce(st->sa, ne, &ev);
    span *wait = w;
    if (ne) {
        nw = spans_minus(w, nw, st->sa, ne, st->tmp);
        wait = st->tmp;
    }
    uint64_t w_fpbp = spans_covered(wait, nw, fp, bp), w_tail = spans_covered(wait, nw, bp, hi);
    row->eval_ns = ev;
    row->interval_ns = fp - lo - spans_covered(st->sa, ne, lo, fp);
    row->comm_wait_ns = w_fpbp + w_tail;
    row->compute_ns = bp - fp - spans_covered(st->sa, ne, fp, bp) - w_fpbp;
    row->tail_ns = hi - bp - spans_covered(st->sa, ne, bp, hi) - w_tail;
}

/* Union of computation and of communication over [lo, hi], their overlap, and from them the
 * split (step_split). */
void steptrace_split_overlap(steptrace *st, const slot *s, uint64_t lo, uint64_t hi, step_row *row)
{
    int device = 0;
    for (uint32_t i = 0; i < s->n && !device; i++)
        device = (s->recs[i].flags & RF_DEVICE) != 0;
    size_t na = 0, nb = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        const rec *r = &s->recs[i];
        uint64_t b = r->begin > lo ? r->begin : lo;
        uint64_t e = r->end < hi ? r->end : hi;
        if (e <= b)
            continue;
        if (r->cls == REC_COMM)
            st->sb[nb++] = (span){b, e, 0};
        else if (r->cls == (device ? REC_KERNEL : REC_HOST))
            st->sa[na++] = (span){b, e, 0};
    }
    uint64_t comp, comm;
    spans_sort(st->sa, st->tmp, na);
    na = spans_coalesce(st->sa, na, &comp);
    spans_sort(st->sb, st->tmp, nb);
    nb = spans_coalesce(st->sb, nb, &comm);
    uint64_t both = spans_intersection(st->sa, na, st->sb, nb);
    row->overlap_compute_ns = comp;
    row->comm_ns = comm;
    row->pure_comm_ns = comm - both;
    uint64_t busy = comp + comm - both;
    row->free_ns = row->total_ns > busy ? row->total_ns - busy : 0;
    st->ncomm = nb;

    /* The wait: communication while nothing computes (see the file's comment). With device
     * work, while no compute kernel runs; on the host, while the step's thread runs no op. */
    if (!device && nb) {
        na = 0;
        for (uint32_t i = 0; i < s->n; i++) {
            const rec *r = &s->recs[i];
            uint64_t b = r->begin > lo ? r->begin : lo;
            uint64_t e = r->end < hi ? r->end : hi;
            if (e > b && r->cls == REC_HOST && r->tid == s->tid)
                st->sa[na++] = (span){b, e, 0};
        }
        uint64_t thread_busy;
        spans_sort(st->sa, st->tmp, na);
        na = spans_coalesce(st->sa, na, &thread_busy);
    }
    size_t nw = spans_minus(st->sb, nb, st->sa, na, st->sw);
    step_split(st, s, lo, hi, st->sw, nw, row);
}

enum { RANK_MARKS = 1, RANK_OPTION = 2, RANK_AUTO = 3, RANK_NONE = 4 };

/* A candidate for a boundary: its time and the op that gives it (0: a mark), when there is one. */
typedef struct pick {
    uint64_t t;
    uint32_t name;
    int have;
} pick;

/* What a step's records say about its boundaries: the phase marks, the ops the operator options
 * name, the data fetch, the first and last candidate ops, the last communication. */
typedef struct phase_scan {
    pick fwd, bwd, opt_fp, opt_bp;
    pick first, last; /* have: any candidate op */
    uint64_t fetch_b, fetch_e;
    int have_fetch;
    uint64_t last_comm;
    int have_comm;
} phase_scan;

/* One record of the step into p; sets the record's name flags (r->nf) for the default rule. */
static void scan_rec(steptrace *st, const slot *s, rec *r, phase_scan *p)
{
    if (r->cls == REC_FWD) {
        if (r->begin < p->fwd.t)
            p->fwd.t = r->begin;
        p->fwd.have = 1;
        return;
    }
    if (r->cls == REC_BWD) {
        if (r->begin >= p->bwd.t)
            p->bwd.t = r->begin;
        p->bwd.have = 1;
        return;
    }
    if ((r->flags & RF_CARRY) || r->cls >= REC_COPY) /* copies, syncs, API calls, evaluation */
        return;
    if (r->cls == REC_COMM) {
        if (!p->have_comm || r->begin > p->last_comm)
            p->last_comm = r->begin;
        p->have_comm = 1;
        return;
    }
    if (r->cls == REC_HOST && r->tid != s->tid)
        return;
    uint8_t f = r->nf = steptrace_name_flags(st, r->name);
    if ((f & NF_FP) && r->begin < p->opt_fp.t)
        p->opt_fp = (pick){r->begin, r->name, 1};
    if ((f & NF_BP) && (!p->opt_bp.have || r->end >= p->opt_bp.t))
        p->opt_bp = (pick){r->end, r->name, 1};
    if (f & NF_FETCH) {
        if (r->begin < p->fetch_b || (r->begin == p->fetch_b && r->end > p->fetch_e)) {
            p->fetch_b = r->begin;
            p->fetch_e = r->end;
        }
        p->have_fetch = 1;
        return;
    }
    if (r->begin < p->first.t) {
        p->first.t = r->begin;
        p->first.name = r->name;
    }
    if (!p->last.have || r->end >= p->last.t)
        p->last = (pick){r->end, r->name, 1};
    p->first.have = 1;
}

/* The default rule: the first op after the data fetch, else the first op; the end of the op
 * before the last communication, else the last op. Fetch ops are never FP/BP themselves. */
static void default_rule(const slot *s, const phase_scan *p, pick *fp, pick *bp)
{
    *fp = p->first;
    *bp = p->last;
    if (!p->first.have || (!p->have_fetch && !p->have_comm))
        return;
    uint64_t after_b = UINT64_MAX, before_b = 0, before_e = 0;
    uint32_t after_name = 0, before_name = 0;
    int have_after = 0, have_before = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        const rec *r = &s->recs[i];
        if ((r->flags & RF_CARRY) || (r->cls != REC_HOST && r->cls != REC_KERNEL) ||
            (r->cls == REC_HOST && r->tid != s->tid) || (r->nf & NF_FETCH))
            continue;
        if (p->have_fetch && r->begin >= p->fetch_e && r->begin < after_b) {
            after_b = r->begin;
            after_name = r->name;
            have_after = 1;
        }
        if (p->have_comm && r->begin < p->last_comm &&
            (!have_before || r->begin > before_b || (r->begin == before_b && r->end > before_e))) {
            before_b = r->begin;
            before_e = r->end;
            before_name = r->name;
            have_before = 1;
        }
    }
    if (have_after) {
        fp->t = after_b;
        fp->name = after_name;
    }
    if (have_before) {
        bp->t = before_e;
        bp->name = before_name;
    }
}

/* A boundary from the first rule that gives one (a mark, the operator option, the default
 * rule) into *t and *op (left as they are when none does): its rank. */
static uint32_t boundary(const pick *mark, const pick *opt, const pick *dflt, uint64_t *t,
                         uint32_t *op)
{
    if (mark->have) {
        *t = mark->t;
        return RANK_MARKS;
    }
    if (opt->have) {
        *t = opt->t;
        *op = opt->name;
        return RANK_OPTION;
    }
    if (dflt->have) {
        *t = dflt->t;
        *op = dflt->name;
        return RANK_AUTO;
    }
    return RANK_NONE;
}

/* Forward start and backward end: marks, else the operator options, else the default rule. */
void steptrace_split_phases(steptrace *st, slot *s, uint64_t lo, uint64_t hi, step_row *row)
{
    phase_scan p = {
        .fwd.t = UINT64_MAX, .opt_fp.t = UINT64_MAX, .first.t = UINT64_MAX, .fetch_b = UINT64_MAX};
    for (uint32_t i = 0; i < s->n; i++)
        scan_rec(st, s, &s->recs[i], &p);
    pick auto_fp, auto_bp;
    default_rule(s, &p, &auto_fp, &auto_bp);

    uint64_t fp = lo, bp = hi;
    row->fp_op = row->bp_op = 0;
    uint32_t fp_rank = boundary(&p.fwd, &p.opt_fp, &auto_fp, &fp, &row->fp_op);
    uint32_t bp_rank = boundary(&p.bwd, &p.opt_bp, &auto_bp, &bp, &row->bp_op);
    /* A row is as reliable as its weaker half. */
    uint32_t rank = fp_rank > bp_rank ? fp_rank : bp_rank;
    row->source = rank == RANK_MARKS    ? STEP_SOURCE_MARKS
                  : rank == RANK_OPTION ? STEP_SOURCE_OPTION
                  : rank == RANK_AUTO   ? STEP_SOURCE_AUTO
                                        : STEP_SOURCE_NONE;
    if (rank == RANK_NONE) {
        /* Unknown: the whole step counts as FP/BP, so interval + fpbp + tail = total. */
        fp = lo;
        bp = hi;
        row->fp_op = row->bp_op = 0;
    }
    if (fp < lo)
        fp = lo;
    if (fp > hi)
        fp = hi;
    if (bp < fp)
        bp = fp;
    if (bp > hi)
        bp = hi;
    row->fp_start_ns = fp;
    row->bp_end_ns = bp;
    row->fpbp_ns = bp - fp;
    /* The split before waits and evaluation are known (step_split refines it). */
    row->interval_ns = fp - lo;
    row->compute_ns = bp - fp;
    row->tail_ns = hi - bp;
}
