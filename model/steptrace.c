/* steptrace: the step trace, computation/communication overlap and the gaps between operators:
 * which events belong to which step, and each step's split. In model so that every room that
 * needs steps (the analysis, analysis/steps.c; the collector, for its live view) has the same
 * definition. Pure: no threads, no I/O; names come through a hook.
 *
 * A step's window runs from the previous step's end (step n-1, when it was recorded and no
 * collection window opened in between; else the step's own begin) to its end. Every event that
 * matters here (top-level host ops, kernels, communication, phase marks) becomes a small record
 * that is attributed to a step by its begin time:
 *
 * - Events arrive in recording order, not time order (a lane at a time, ranges when they end,
 *   device kernels late). A record whose time lies after the latest step end seen so far (the
 *   horizon) waits in `pending` until a step end covers it; an earlier one goes straight to the
 *   open step whose window holds it.
 * - Steps stay open until LAG_STEPS later steps have ended and the horizon is LAG_NS past their
 *   end (or MAX_OPEN steps are open, or HOLD_MAX records are held), then they are finalized, in
 *   order, and handed to the row hook. steptrace_finish finalizes every ended step; a step begun
 * and not ended stays open (it is the current step of a live run).
 * - A record for a step already finalized is counted (late) and not re-attributed: the row has
 *   gone to the hook. Records outside every step are counted too.
 *
 * When a step is finalized (over its window [lo, end]):
 *
 * - Forward start and backward end, per boundary, from the first rule that gives one: phase
 *   marks in the window (the first forward start, the last backward end); the operator options
 *   (steptrace_set_options): the begin of the first op so
 *   named, the end of the last, where an op matches by its exact name bytes or by its normalized
 *   key (opname_key_length, so "aten::addmm" names "aten::addmm, seq = 4, ..."); the seeds' rule:
 * the first op beginning at or after the end of the step's first data fetch (ops named like
 *   get_next, GetNext, data fetch, DataLoader, next batch), else the first op; the end of the op
 *   that began last strictly before the last communication op began, else the end of the op that
 *   ends last. The ops are the top-level host ops of the thread that marked the step and the
 *   device kernels; fetch ops are never FP or BP themselves. The row's source is the weaker rule
 *   of its two boundaries. With no boundary at all (no op, no mark) the source is NONE and the
 *   whole step counts as FP/BP, so interval + fpbp + tail = total always holds.
 * - Overlap: computation is the union of non-communication kernels when the window holds any
 *   kernel, else of top-level host ops of every thread; communication the union of TS_EF_COMM
 *   kernels and ranges and COMM_OP; both clipped to the window. An interval running past its
 *   step's end carries its remainder into the next step.
 * - Communication wait: the time in the window during which communication is in flight and
 *   nothing computes. Nothing computes means: no compute kernel runs, when the window holds any
 *   kernel (the device does the work; the host thread only launches); else no top-level op of
 *   the step's thread runs (communication ranges excepted; a data fetch counts as running, since
 *   the step then waits for data). Other threads do not hide the wait: the step waits when its
 *   thread does. For a rank that waits for a slower one, this is the time it spends waiting;
 *   with DDP it is at the end of backward, which the seeds' rule puts in the tail.
 * - The split (model.h), a partition of the window: evaluation passes (between the step's
 *   evaluation marks) are eval; the rest before the forward start is interval, whatever it
 *   holds; after it, the communication wait is comm_wait; the rest is compute up to the
 *   backward end and tail after it.
 * - Gaps: the holes between consecutive top-level ops of the step's thread, clipped to [FP, BP],
 *   less the part during which communication is in flight (that is a communication wait, not
 *   idle time). Other threads (data workers) have their own rhythm and are not counted.
 *
 * Memory is the open steps' records (at most HOLD_MAX), the recent rows and the top gaps, and a
 * flag byte per distinct op name: it does not grow with the length of the run. */
#include "index_map.h"
#include "model.h"

#include <stdlib.h>
#include <string.h>

#define MAX_OPEN      64             /* unfinalized steps; the oldest is finalized beyond */
#define LAG_STEPS     4              /* a step waits for this many later steps to end ... */
#define LAG_NS        1000000000ull  /* ... and for a step end this far past its own */
#define HOLD_MAX      (1u << 19)     /* records held (pending and open steps), 16 MiB */
#define GAPS_KEEP     32             /* largest gaps kept for steptrace_gaps */
#define WINDOW_STARTS 8              /* recent collection window starts, for step windows */
#define NAME_CACHE    4096           /* direct-mapped cache in front of the name flags */
#define SLOTS         (MAX_OPEN + 1) /* one spare for the step being inserted */

enum rec_class {
    REC_HOST,   /* top-level host op (OP_RANGE / NVTX_RANGE with depth 0), any thread */
    REC_KERNEL, /* device kernel, computation */
    REC_COMM,   /* communication: TS_EF_COMM kernel or range, or COMM_OP */
    REC_FWD,    /* phase mark: forward start */
    REC_BWD,    /* phase mark: backward end */
    REC_EVAL_B, /* phase mark: an evaluation pass begins */
    REC_EVAL_E, /* phase mark: an evaluation pass ends */
};

enum rec_flag {
    RF_CARRY = 1,  /* the part of an interval that runs on past its step: overlap only */
    RF_DEVICE = 2, /* device work (a kernel) */
};

enum name_flag {
    NF_FP = 1,    /* matches the forward-start op option */
    NF_BP = 2,    /* matches the backward-end op option */
    NF_FETCH = 4, /* a data fetch (get_next, GetNext, data fetch, DataLoader, next batch) */
    NF_KNOWN = 0x80,
};

typedef struct rec {
    uint64_t begin, end;
    uint32_t name, tid;
    uint8_t cls, flags;
    uint8_t nf; /* enum name_flag, set while finalizing */
} rec;

typedef struct slot {
    uint64_t number;
    uint64_t begin, end, lo; /* markers, and the window start */
    uint32_t tid;            /* the thread that marks steps: its ops drive FP/BP and gaps */
    uint8_t has_begin, has_end, has_lo, used;
    rec *recs;
    uint32_t n, cap;
} slot;

typedef struct span {
    uint64_t b, e;
    uint32_t name;
} span;

typedef struct name_cache_entry {
    uint32_t id;
    uint8_t flags; /* 0: empty */
} name_cache_entry;

struct steptrace {
    steptrace_hooks hooks;
    slot slots[SLOTS];
    slot *open[SLOTS]; /* open steps by number */
    uint32_t nopen;

    rec *pending;
    size_t npending, cap_pending;
    size_t slot_recs; /* records held by open steps */
    uint64_t horizon; /* latest step end seen */

    int have_final; /* the last finalized step, for the next window's start */
    uint64_t final_number, final_end;
    uint64_t window_start[WINDOW_STARTS];
    uint32_t nwindow;
    uint64_t eval_end[WINDOW_STARTS]; /* recent evaluation passes' ends */
    uint32_t neval;

    int have_current;
    uint64_t current_begin;

    step_totals tot; /* sums, the slowest steps, what is not in the trace */

    step_row *recent; /* ring of the last finalized rows */
    uint32_t recent_cap, recent_n, recent_head;

    op_gap gaps[GAPS_KEEP]; /* largest first */
    uint32_t ngaps;

    char *fp_opt, *bp_opt; /* the operator options in force, NULL when none */
    index_map name_map;    /* name id -> index in name_flags */
    uint8_t *name_flags;
    uint32_t nnames, cap_names;
    name_cache_entry cache[NAME_CACHE];

    span *sa, *sb, *sw, *tmp; /* scratch for finalizing, grown to the largest step */
    size_t cap_span;
    size_t ncomm; /* disjoint communication spans in sb, from step_overlap for step_gaps */
};

/* ---- Names ------------------------------------------------------------------------------- */

static int bytes_eq(const char *s, uint32_t len, const char *opt)
{
    return s && opt && strlen(opt) == len && !memcmp(s, opt, len);
}

/* The option matches the op's name exactly, or its key (opname_key_length: PyTorch's
 * "aten::addmm, seq = 4, ..." is matched by "aten::addmm"). */
static uint8_t compute_name_flags(steptrace *st, uint32_t id)
{
    uint8_t f = NF_KNOWN;
    uint32_t len = 0;
    const char *s = st->hooks.name ? st->hooks.name(st->hooks.ctx, id, &len) : NULL;
    if (!s)
        return f;
    if (opname_is_fetch(s, len))
        f |= NF_FETCH;
    if (!st->fp_opt && !st->bp_opt)
        return f;
    uint32_t key = opname_key_length(s, len);
    if (bytes_eq(s, len, st->fp_opt) || bytes_eq(s, key, st->fp_opt))
        f |= NF_FP;
    if (bytes_eq(s, len, st->bp_opt) || bytes_eq(s, key, st->bp_opt))
        f |= NF_BP;
    return f;
}

static uint8_t name_flags(steptrace *st, uint32_t id)
{
    name_cache_entry *c = &st->cache[id & (NAME_CACHE - 1)];
    if (c->flags && c->id == id)
        return c->flags;
    uint8_t f;
    uint32_t i = index_map_get(&st->name_map, id, st->nnames, NULL);
    if (i == UINT32_MAX)
        return compute_name_flags(st, id);
    if (i == st->nnames) {
        if (st->nnames == st->cap_names) {
            uint32_t cap = st->cap_names ? st->cap_names * 2 : 256;
            uint8_t *nf = realloc(st->name_flags, cap);
            if (!nf) {
                /* The map now holds an index without flags: forget it all, recompute later. */
                index_map_free(&st->name_map);
                st->nnames = 0;
                return compute_name_flags(st, id);
            }
            st->name_flags = nf;
            st->cap_names = cap;
        }
        st->name_flags[st->nnames++] = compute_name_flags(st, id);
    }
    f = st->name_flags[i];
    c->id = id;
    c->flags = f;
    return f;
}

static int opt_same(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

void steptrace_set_options(steptrace *st, const char *fp_start_op, const char *bp_end_op)
{
    const char *fp = fp_start_op && *fp_start_op ? fp_start_op : NULL;
    const char *bp = bp_end_op && *bp_end_op ? bp_end_op : NULL;
    if (opt_same(fp, st->fp_opt) && opt_same(bp, st->bp_opt))
        return;
    free(st->fp_opt);
    free(st->bp_opt);
    st->fp_opt = fp ? strdup(fp) : NULL;
    st->bp_opt = bp ? strdup(bp) : NULL;
    index_map_free(&st->name_map);
    st->nnames = 0;
    memset(st->cache, 0, sizeof st->cache);
}

/* ---- Open steps -------------------------------------------------------------------------- */

static slot *find_slot(steptrace *st, uint64_t number)
{
    /* Open steps are sorted by number: most lookups are of the newest, or of none. */
    if (!st->nopen || number > st->open[st->nopen - 1]->number || number < st->open[0]->number)
        return NULL;
    for (uint32_t i = st->nopen; i-- > 0;)
        if (st->open[i]->number == number)
            return st->open[i];
    return NULL;
}

static int window_started_in(const steptrace *st, uint64_t after, uint64_t upto)
{
    uint32_t n = st->nwindow < WINDOW_STARTS ? st->nwindow : WINDOW_STARTS;
    for (uint32_t i = 0; i < n; i++)
        if (st->window_start[i] > after && st->window_start[i] <= upto)
            return 1;
    return 0;
}

/* The latest end of an evaluation pass in (after, upto], or 0. */
static uint64_t eval_ended_in(const steptrace *st, uint64_t after, uint64_t upto)
{
    uint32_t n = st->neval < WINDOW_STARTS ? st->neval : WINDOW_STARTS;
    uint64_t latest = 0;
    for (uint32_t i = 0; i < n; i++)
        if (st->eval_end[i] > after && st->eval_end[i] <= upto && st->eval_end[i] > latest)
            latest = st->eval_end[i];
    return latest;
}

/* The window start of s: step n-1's end when it ended before s began (or the end of an
 * evaluation pass in between), else s's own begin. */
static void compute_lo(steptrace *st, slot *s)
{
    int have_prev = 0;
    uint64_t prev_end = 0;
    if (st->have_final && st->final_number + 1 == s->number) {
        have_prev = 1;
        prev_end = st->final_end;
    } else {
        slot *p = s->number ? find_slot(st, s->number - 1) : NULL;
        if (p && p->has_end) {
            have_prev = 1;
            prev_end = p->end;
        }
    }
    s->has_lo = 0;
    if (s->has_begin) {
        s->lo = s->begin;
        s->has_lo = 1;
        if (have_prev && prev_end <= s->begin && !window_started_in(st, prev_end, s->begin)) {
            uint64_t eval = eval_ended_in(st, prev_end, s->begin);
            s->lo = eval ? eval : prev_end;
        }
    } else if (have_prev && s->has_end && prev_end <= s->end) {
        s->lo = prev_end;
        s->has_lo = 1;
    }
}

static void refresh_lo(steptrace *st, uint64_t number)
{
    slot *s = find_slot(st, number);
    if (s)
        compute_lo(st, s);
    s = find_slot(st, number + 1);
    if (s)
        compute_lo(st, s);
}

/* The open, ended step whose window holds t; NULL when none does. */
static slot *find_step(steptrace *st, uint64_t t)
{
    for (uint32_t i = st->nopen; i-- > 0;) {
        slot *s = st->open[i];
        if (!s->has_end || !s->has_lo)
            continue;
        if (t >= s->end)
            return NULL; /* after this step and before the next one's window */
        if (t >= s->lo)
            return s;
    }
    return NULL;
}

static void slot_push(steptrace *st, slot *s, const rec *r)
{
    if (s->n == s->cap) {
        uint32_t cap = s->cap ? s->cap * 2 : 256;
        rec *nr = realloc(s->recs, cap * sizeof *nr);
        if (!nr) {
            st->tot.dropped++;
            return;
        }
        s->recs = nr;
        s->cap = cap;
    }
    s->recs[s->n++] = *r;
    st->slot_recs++;
}

static void pending_push(steptrace *st, const rec *r)
{
    if (st->npending == st->cap_pending) {
        size_t cap = st->cap_pending ? st->cap_pending * 2 : 1024;
        rec *nr = realloc(st->pending, cap * sizeof *nr);
        if (!nr) {
            st->tot.dropped++;
            return;
        }
        st->pending = nr;
        st->cap_pending = cap;
    }
    st->pending[st->npending++] = *r;
}

/* A record whose time is before the horizon: to its step, or counted. */
static void attribute(steptrace *st, const rec *r)
{
    slot *s = find_step(st, r->begin);
    if (s)
        slot_push(st, s, r);
    else if (st->have_final && r->begin < st->final_end)
        st->tot.late++;
    else if (r->cls < REC_EVAL_B)
        st->tot.outside++; /* evaluation marks between steps are what they should be */
}

/* A step end moved the horizon: pending records before it find their step. */
static void scan_pending(steptrace *st)
{
    size_t w = 0;
    for (size_t i = 0; i < st->npending; i++) {
        if (st->pending[i].begin >= st->horizon)
            st->pending[w++] = st->pending[i];
        else
            attribute(st, &st->pending[i]);
    }
    st->npending = w;
}

static void release_slot(steptrace *st, uint32_t at)
{
    slot *s = st->open[at];
    st->slot_recs -= s->n;
    s->n = 0;
    /* A step far larger than usual does not pin its memory for the rest of the run. */
    if (s->cap > 65536) {
        free(s->recs);
        s->recs = NULL;
        s->cap = 0;
    }
    s->used = 0;
    memmove(&st->open[at], &st->open[at + 1], (st->nopen - at - 1) * sizeof st->open[0]);
    st->nopen--;
}

/* ---- Finalizing a step ------------------------------------------------------------------- */

static int grow_spans(steptrace *st, size_t n)
{
    if (n <= st->cap_span)
        return 0;
    size_t cap = st->cap_span ? st->cap_span : 1024;
    while (cap < n)
        cap *= 2;
    span *a = realloc(st->sa, cap * sizeof *a);
    if (a)
        st->sa = a;
    span *b = realloc(st->sb, cap * sizeof *b);
    if (b)
        st->sb = b;
    span *w = realloc(st->sw, cap * sizeof *w);
    if (w)
        st->sw = w;
    span *t = realloc(st->tmp, cap * sizeof *t);
    if (t)
        st->tmp = t;
    if (!a || !b || !w || !t)
        return -1;
    st->cap_span = cap;
    return 0;
}

static size_t run_end(const span *v, size_t i, size_t n)
{
    size_t j = i + 1;
    while (j < n && v[j - 1].b <= v[j].b)
        j++;
    return j;
}

/* Sorts by begin, in place and stable. Natural merge sort: records come in runs (a lane's
 * drain, a buffer of kernels), so this costs n * log2(runs), n when already sorted. */
static void sort_spans(span *v, span *tmp, size_t n)
{
    if (n < 2 || run_end(v, 0, n) == n)
        return;
    span *src = v, *dst = tmp;
    for (;;) {
        size_t i = 0, runs = 0;
        while (i < n) {
            size_t m = run_end(src, i, n);
            size_t e = m < n ? run_end(src, m, n) : n;
            size_t x = i, y = m, k = i;
            while (x < m && y < e)
                dst[k++] = src[y].b < src[x].b ? src[y++] : src[x++];
            while (x < m)
                dst[k++] = src[x++];
            while (y < e)
                dst[k++] = src[y++];
            runs++;
            i = e;
        }
        span *t = src;
        src = dst;
        dst = t;
        if (runs == 1)
            break;
    }
    if (src != v)
        memcpy(v, src, n * sizeof *v);
}

/* Merges sorted spans into disjoint ones in place; returns the count and the covered length. */
static size_t coalesce(span *v, size_t n, uint64_t *covered)
{
    size_t m = 0;
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && v[i].b <= v[m - 1].e) {
            if (v[i].e > v[m - 1].e)
                v[m - 1].e = v[i].e;
        } else {
            if (m)
                sum += v[m - 1].e - v[m - 1].b;
            v[m++] = v[i];
        }
    }
    if (m)
        sum += v[m - 1].e - v[m - 1].b;
    *covered = sum;
    return m;
}

static uint64_t intersection(const span *a, size_t na, const span *b, size_t nb)
{
    uint64_t sum = 0;
    size_t i = 0, j = 0;
    while (i < na && j < nb) {
        uint64_t lo = a[i].b > b[j].b ? a[i].b : b[j].b;
        uint64_t hi = a[i].e < b[j].e ? a[i].e : b[j].e;
        if (hi > lo)
            sum += hi - lo;
        if (a[i].e < b[j].e)
            i++;
        else
            j++;
    }
    return sum;
}

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

/* The part of [b, e] that the disjoint, sorted spans v[*at..n) cover. Calls come with
 * increasing b, so *at only moves on. */
static uint64_t covered_by(const span *v, size_t n, size_t *at, uint64_t b, uint64_t e)
{
    while (*at < n && v[*at].e <= b)
        (*at)++;
    uint64_t sum = 0;
    for (size_t j = *at; j < n && v[j].b < e; j++) {
        uint64_t lo = v[j].b > b ? v[j].b : b;
        uint64_t hi = v[j].e < e ? v[j].e : e;
        if (hi > lo)
            sum += hi - lo;
    }
    return sum;
}

/* Idle time on the step's thread between consecutive top-level ops, inside [fp, bp], less the
 * time communication (st->sb, st->ncomm spans) is in flight. */
static uint64_t step_gaps(steptrace *st, const slot *s, uint64_t fp, uint64_t bp)
{
    size_t at = 0;
    size_t n = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        const rec *r = &s->recs[i];
        if (r->cls == REC_HOST && !(r->flags & RF_CARRY) && r->tid == s->tid)
            st->sa[n++] = (span){r->begin, r->end, r->name};
    }
    sort_spans(st->sa, st->tmp, n);
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
            uint64_t idle = ge > gb ? ge - gb - covered_by(st->sb, st->ncomm, &at, gb, ge) : 0;
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

/* a minus b (both sorted and disjoint) into out, which holds na + nb spans; returns the count. */
static size_t span_minus(const span *a, size_t na, const span *b, size_t nb, span *out)
{
    size_t n = 0, j = 0;
    for (size_t i = 0; i < na; i++) {
        uint64_t cur = a[i].b;
        while (j < nb && b[j].e <= cur)
            j++;
        for (size_t k = j; k < nb && b[k].b < a[i].e; k++) {
            if (b[k].b > cur)
                out[n++] = (span){cur, b[k].b, a[i].name};
            if (b[k].e > cur)
                cur = b[k].e;
        }
        if (cur < a[i].e)
            out[n++] = (span){cur, a[i].e, a[i].name};
    }
    return n;
}

/* The part of [b, e] that the sorted, disjoint spans v cover. */
static uint64_t covered(const span *v, size_t n, uint64_t b, uint64_t e)
{
    size_t at = 0;
    return e > b ? covered_by(v, n, &at, b, e) : 0;
}

/* The evaluation passes in [lo, hi] from the step's marks, sorted and disjoint, into st->sa
 * (st->tmp is scratch); returns the count. A pass open at either edge of the window runs to it. */
static size_t eval_spans(steptrace *st, const slot *s, uint64_t lo, uint64_t hi)
{
    size_t n = 0;
    for (uint32_t i = 0; i < s->n; i++)
        if (s->recs[i].cls >= REC_EVAL_B)
            st->sa[n++] = (span){s->recs[i].begin, s->recs[i].begin, s->recs[i].cls};
    sort_spans(st->sa, st->tmp, n);
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

/* The split (model.h) from the step's communication-wait spans w (sorted, disjoint, nw): the
 * evaluation passes first, then the wait after the forward start; the rest is interval,
 * compute or tail by where it lies. */
static void step_split(steptrace *st, const slot *s, uint64_t lo, uint64_t hi, span *w, size_t nw,
                       step_row *row)
{
    uint64_t fp = row->fp_start_ns, bp = row->bp_end_ns, ev;
    size_t ne = eval_spans(st, s, lo, hi);
    ne = coalesce(st->sa, ne, &ev);
    span *wait = w;
    if (ne) {
        nw = span_minus(w, nw, st->sa, ne, st->tmp);
        wait = st->tmp;
    }
    uint64_t w_fpbp = covered(wait, nw, fp, bp), w_tail = covered(wait, nw, bp, hi);
    row->eval_ns = ev;
    row->interval_ns = fp - lo - covered(st->sa, ne, lo, fp);
    row->comm_wait_ns = w_fpbp + w_tail;
    row->compute_ns = bp - fp - covered(st->sa, ne, fp, bp) - w_fpbp;
    row->tail_ns = hi - bp - covered(st->sa, ne, bp, hi) - w_tail;
}

/* Union of computation and of communication over [lo, hi], their overlap, and from them the
 * split (step_split). */
static void step_overlap(steptrace *st, const slot *s, uint64_t lo, uint64_t hi, step_row *row)
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
    sort_spans(st->sa, st->tmp, na);
    na = coalesce(st->sa, na, &comp);
    sort_spans(st->sb, st->tmp, nb);
    nb = coalesce(st->sb, nb, &comm);
    uint64_t both = intersection(st->sa, na, st->sb, nb);
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
        sort_spans(st->sa, st->tmp, na);
        na = coalesce(st->sa, na, &thread_busy);
    }
    size_t nw = span_minus(st->sb, nb, st->sa, na, st->sw);
    step_split(st, s, lo, hi, st->sw, nw, row);
}

enum { RANK_MARKS = 1, RANK_OPTION = 2, RANK_AUTO = 3, RANK_NONE = 4 };

/* Forward start and backward end: marks, else the operator options, else the seeds' rule. */
static void step_phases(steptrace *st, slot *s, uint64_t lo, uint64_t hi, step_row *row)
{
    uint64_t fwd = UINT64_MAX, bwd = 0, opt_fp = UINT64_MAX, opt_bp = 0;
    uint64_t fetch_b = UINT64_MAX, fetch_e = 0, first_b = UINT64_MAX, last_e = 0;
    uint64_t last_comm = 0;
    uint32_t opt_fp_name = 0, opt_bp_name = 0, first_name = 0, last_name = 0;
    int have_fwd = 0, have_bwd = 0, have_opt_fp = 0, have_opt_bp = 0, have_fetch = 0;
    int have_cand = 0, have_comm = 0;

    for (uint32_t i = 0; i < s->n; i++) {
        rec *r = &s->recs[i];
        if (r->cls == REC_FWD) {
            if (r->begin < fwd)
                fwd = r->begin;
            have_fwd = 1;
            continue;
        }
        if (r->cls == REC_BWD) {
            if (r->begin >= bwd)
                bwd = r->begin;
            have_bwd = 1;
            continue;
        }
        if ((r->flags & RF_CARRY) || r->cls >= REC_EVAL_B)
            continue;
        if (r->cls == REC_COMM) {
            if (!have_comm || r->begin > last_comm)
                last_comm = r->begin;
            have_comm = 1;
            continue;
        }
        if (r->cls == REC_HOST && r->tid != s->tid)
            continue;
        uint8_t f = r->nf = name_flags(st, r->name);
        if ((f & NF_FP) && r->begin < opt_fp) {
            opt_fp = r->begin;
            opt_fp_name = r->name;
            have_opt_fp = 1;
        }
        if ((f & NF_BP) && (!have_opt_bp || r->end >= opt_bp)) {
            opt_bp = r->end;
            opt_bp_name = r->name;
            have_opt_bp = 1;
        }
        if (f & NF_FETCH) {
            if (r->begin < fetch_b || (r->begin == fetch_b && r->end > fetch_e)) {
                fetch_b = r->begin;
                fetch_e = r->end;
            }
            have_fetch = 1;
            continue;
        }
        if (r->begin < first_b) {
            first_b = r->begin;
            first_name = r->name;
        }
        if (!have_cand || r->end >= last_e) {
            last_e = r->end;
            last_name = r->name;
        }
        have_cand = 1;
    }

    /* The seeds' rule: the first op after the data fetch; the op before the last
     * communication, else the last op. Fetch ops are never FP/BP themselves. */
    uint64_t auto_fp = first_b, auto_bp = last_e;
    uint32_t auto_fp_name = first_name, auto_bp_name = last_name;
    if (have_cand && (have_fetch || have_comm)) {
        uint64_t after_b = UINT64_MAX, before_b = 0, before_e = 0;
        uint32_t after_name = 0, before_name = 0;
        int have_after = 0, have_before = 0;
        for (uint32_t i = 0; i < s->n; i++) {
            const rec *r = &s->recs[i];
            if ((r->flags & RF_CARRY) || (r->cls != REC_HOST && r->cls != REC_KERNEL) ||
                (r->cls == REC_HOST && r->tid != s->tid) || (r->nf & NF_FETCH))
                continue;
            if (have_fetch && r->begin >= fetch_e && r->begin < after_b) {
                after_b = r->begin;
                after_name = r->name;
                have_after = 1;
            }
            if (have_comm && r->begin < last_comm &&
                (!have_before || r->begin > before_b ||
                 (r->begin == before_b && r->end > before_e))) {
                before_b = r->begin;
                before_e = r->end;
                before_name = r->name;
                have_before = 1;
            }
        }
        if (have_after) {
            auto_fp = after_b;
            auto_fp_name = after_name;
        }
        if (have_before) {
            auto_bp = before_e;
            auto_bp_name = before_name;
        }
    }

    uint64_t fp = lo, bp = hi;
    uint32_t fp_rank = RANK_NONE, bp_rank = RANK_NONE;
    row->fp_op = row->bp_op = 0;
    if (have_fwd) {
        fp = fwd;
        fp_rank = RANK_MARKS;
    } else if (have_opt_fp) {
        fp = opt_fp;
        row->fp_op = opt_fp_name;
        fp_rank = RANK_OPTION;
    } else if (have_cand) {
        fp = auto_fp;
        row->fp_op = auto_fp_name;
        fp_rank = RANK_AUTO;
    }
    if (have_bwd) {
        bp = bwd;
        bp_rank = RANK_MARKS;
    } else if (have_opt_bp) {
        bp = opt_bp;
        row->bp_op = opt_bp_name;
        bp_rank = RANK_OPTION;
    } else if (have_cand) {
        bp = auto_bp;
        row->bp_op = auto_bp_name;
        bp_rank = RANK_AUTO;
    }
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

static void account_row(steptrace *st, const step_row *row)
{
    step_totals *t = &st->tot;
    t->steps++;
    t->fpbp_ns += row->fpbp_ns;
    t->total_ns += row->total_ns;
    t->interval_ns += row->interval_ns;
    t->compute_ns += row->compute_ns;
    t->comm_wait_ns += row->comm_wait_ns;
    t->tail_ns += row->tail_ns;
    t->eval_ns += row->eval_ns;
    t->overlap_compute_ns += row->overlap_compute_ns;
    t->comm_ns += row->comm_ns;
    t->pure_comm_ns += row->pure_comm_ns;
    t->free_ns += row->free_ns;
    t->gap_ns += row->gap_ns;
    t->last_source = row->source;

    /* The slowest by their training time: an evaluation pass inside a step is no slow step. */
    uint64_t train_ns = row->total_ns - row->eval_ns;
    if (t->nslowest < 5 || train_ns > t->slowest_ns[4]) {
        uint32_t i = t->nslowest < 5 ? t->nslowest++ : 4;
        while (i > 0 && t->slowest_ns[i - 1] < train_ns) {
            t->slowest[i] = t->slowest[i - 1];
            t->slowest_ns[i] = t->slowest_ns[i - 1];
            i--;
        }
        t->slowest[i] = row->step;
        t->slowest_ns[i] = train_ns;
    }

    if (st->recent_cap) {
        st->recent[st->recent_head] = *row;
        st->recent_head = (st->recent_head + 1) % st->recent_cap;
        if (st->recent_n < st->recent_cap)
            st->recent_n++;
    }
    if (st->hooks.row)
        st->hooks.row(st->hooks.ctx, row);
}

/* The part of an interval that runs past the step goes on to the next one (overlap only). */
static void carry_on(steptrace *st, const slot *s)
{
    for (uint32_t i = 0; i < s->n; i++) {
        const rec *r = &s->recs[i];
        if (r->end <= s->end || r->cls > REC_COMM)
            continue;
        rec c = *r;
        c.begin = s->end;
        c.flags |= RF_CARRY;
        if (c.begin >= st->horizon)
            pending_push(st, &c);
        else
            attribute(st, &c);
    }
}

/* The top-level host ops of the step's thread that begin in [lo, hi]: their count and time. */
static void step_ops(const slot *s, uint64_t lo, uint64_t hi, step_row *row)
{
    for (uint32_t i = 0; i < s->n; i++) {
        const rec *r = &s->recs[i];
        if (r->cls == REC_HOST && !(r->flags & RF_CARRY) && r->tid == s->tid && r->begin >= lo &&
            r->begin <= hi) {
            row->ops++;
            row->ops_ns += r->end - r->begin;
        }
    }
}

/* Finalizes open[0] (an ended step): its row to the totals, the ring and the row hook. */
static void finalize_head(steptrace *st)
{
    slot *s = st->open[0];
    if (!s->has_lo) {
        st->tot.incomplete++; /* its begin was never recorded */
    } else {
        uint64_t lo = s->lo, hi = s->end > s->lo ? s->end : s->lo;
        step_row row;
        memset(&row, 0, sizeof row);
        row.step = s->number;
        row.begin_ns = lo;
        row.end_ns = hi;
        row.total_ns = hi - lo;
        row.tid = s->tid;
        step_ops(s, lo, hi, &row);
        if (st->hooks.prepare)
            st->hooks.prepare(st->hooks.ctx, st);
        step_phases(st, s, lo, hi, &row);
        if (grow_spans(st, s->n) == 0) {
            step_overlap(st, s, lo, hi, &row);
            row.gap_ns = step_gaps(st, s, row.fp_start_ns, row.bp_end_ns);
        } else {
            st->tot.dropped += s->n; /* no room to sort: the row has no overlap */
        }
        account_row(st, &row);
    }
    st->have_final = 1;
    st->final_number = s->number;
    st->final_end = s->end;
    carry_on(st, s); /* before release: the records go with the slot */
    release_slot(st, 0);
    refresh_lo(st, st->final_number);
}

static uint32_t ended_after(const steptrace *st, uint32_t i, uint64_t *latest)
{
    uint32_t n = 0;
    *latest = 0;
    for (uint32_t j = i + 1; j < st->nopen; j++) {
        if (st->open[j]->has_end) {
            n++;
            if (st->open[j]->end > *latest)
                *latest = st->open[j]->end;
        }
    }
    return n;
}

static int due(const steptrace *st, uint32_t i)
{
    uint64_t latest;
    return ended_after(st, i, &latest) >= LAG_STEPS && st->horizon - st->open[i]->end >= LAG_NS;
}

/* Finalizes or abandons the oldest open step, to make room. 0 when nothing could go. */
static int force_one(steptrace *st)
{
    if (!st->nopen)
        return 0;
    if (st->open[0]->has_end) {
        finalize_head(st);
        return 1;
    }
    if (st->nopen > 1) {
        st->tot.incomplete++;
        release_slot(st, 0);
        return 1;
    }
    return 0;
}

/* When open steps may be finalized: every ended one (all), those whose end lies quiet_ns before
 * now_ns (a live trace settling, quiet_ns > 0), else those due by later steps. */
typedef struct finalize_rule {
    int all;
    uint64_t now_ns, quiet_ns;
} finalize_rule;

static int ready(const steptrace *st, uint32_t i, const finalize_rule *w)
{
    const slot *o = st->open[i];
    if (!o->has_end)
        return 0;
    if (w->all)
        return 1;
    if (w->quiet_ns)
        return o->end <= w->now_ns && w->now_ns - o->end >= w->quiet_ns;
    return due(st, i);
}

/* Finalizes the steps the rule allows, oldest first; a step begun and never ended is abandoned
 * once a later one may be finalized. Returns how many were finalized. */
static size_t advance(steptrace *st, const finalize_rule *w)
{
    size_t n = 0;
    while (st->nopen) {
        if (st->open[0]->has_end) {
            if (!ready(st, 0, w))
                break;
            finalize_head(st);
            n++;
            continue;
        }
        int later = 0;
        for (uint32_t j = 1; j < st->nopen && !later; j++)
            later = ready(st, j, w);
        if (!later)
            break;
        st->tot.incomplete++;
        release_slot(st, 0);
    }
    return n;
}

static slot *new_slot(steptrace *st, uint64_t number)
{
    while (st->nopen >= MAX_OPEN && force_one(st))
        ;
    slot *s = NULL;
    for (uint32_t i = 0; i < SLOTS && !s; i++)
        if (!st->slots[i].used)
            s = &st->slots[i];
    rec *recs = s->recs;
    uint32_t cap = s->cap;
    memset(s, 0, sizeof *s);
    s->recs = recs;
    s->cap = cap;
    s->used = 1;
    s->number = number;
    uint32_t at = st->nopen;
    while (at > 0 && st->open[at - 1]->number > number)
        at--;
    memmove(&st->open[at + 1], &st->open[at], (st->nopen - at) * sizeof st->open[0]);
    st->open[at] = s;
    st->nopen++;
    return s;
}

/* The slot for a marker of step number, or NULL when that step is already finalized. */
static slot *marker_slot(steptrace *st, uint64_t number)
{
    slot *s = find_slot(st, number);
    if (s)
        return s;
    if (st->have_final && number <= st->final_number) {
        st->tot.late++;
        return NULL;
    }
    return new_slot(st, number);
}

static void relieve(steptrace *st)
{
    const size_t low = HOLD_MAX / 4 * 3;
    while (st->npending + st->slot_recs >= low && force_one(st))
        ;
    if (st->npending + st->slot_recs >= low && st->npending) {
        /* No step ends to place them: give up the oldest half rather than grow. */
        size_t drop = st->npending / 2 ? st->npending / 2 : 1;
        memmove(st->pending, st->pending + drop, (st->npending - drop) * sizeof *st->pending);
        st->npending -= drop;
        st->tot.dropped += drop;
    }
}

static void add_rec(steptrace *st, const ts_event *ev, uint8_t cls, uint8_t flags)
{
    rec r = {.begin = ev->begin_ns,
             .end = ev->end_ns > ev->begin_ns ? ev->end_ns : ev->begin_ns,
             .name = ev->name,
             .tid = ev->tid,
             .cls = cls,
             .flags = flags};
    if (st->npending + st->slot_recs >= HOLD_MAX)
        relieve(st);
    if (r.begin >= st->horizon)
        pending_push(st, &r);
    else
        attribute(st, &r);
}

/* ---- The engine ------------------------------------------------------------------------- */

steptrace *steptrace_create(const steptrace_hooks *hooks, uint32_t recent)
{
    steptrace *st = calloc(1, sizeof *st);
    if (!st)
        return NULL;
    if (hooks)
        st->hooks = *hooks;
    st->recent_cap = recent;
    if (recent) {
        st->recent = calloc(recent, sizeof *st->recent);
        if (!st->recent) {
            free(st);
            return NULL;
        }
    }
    return st;
}

void steptrace_feed(steptrace *st, const ts_event *ev)
{
    switch (ev->kind) {
    case TS_KIND_OP_RANGE:
    case TS_KIND_NVTX_RANGE:
        if (ev->aux == 0)
            add_rec(st, ev, (ev->flags & TS_EF_COMM) ? REC_COMM : REC_HOST, 0);
        break;
    case TS_KIND_KERNEL:
        add_rec(st, ev, (ev->flags & TS_EF_COMM) ? REC_COMM : REC_KERNEL, RF_DEVICE);
        break;
    case TS_KIND_COMM_OP:
        add_rec(st, ev, REC_COMM, 0);
        break;
    case TS_KIND_PHASE:
        if (ev->aux == TS_PHASE_FORWARD_START)
            add_rec(st, ev, REC_FWD, 0);
        else if (ev->aux == TS_PHASE_BACKWARD_END)
            add_rec(st, ev, REC_BWD, 0);
        else if (ev->aux == TS_PHASE_EVAL_BEGIN)
            add_rec(st, ev, REC_EVAL_B, 0);
        else if (ev->aux == TS_PHASE_EVAL_END) {
            add_rec(st, ev, REC_EVAL_E, 0);
            st->eval_end[st->neval++ % WINDOW_STARTS] = ev->begin_ns;
            for (uint32_t i = 0; i < st->nopen; i++)
                compute_lo(st, st->open[i]);
        }
        break;
    case TS_KIND_STEP_BEGIN: {
        slot *s = marker_slot(st, ev->v0);
        if (!s || s->has_begin)
            break; /* finalized, or a repeated marker */
        s->has_begin = 1;
        s->begin = ev->begin_ns;
        s->tid = ev->tid;
        if (!st->have_current || ev->begin_ns >= st->current_begin) {
            st->have_current = 1;
            st->tot.current_step = ev->v0;
            st->current_begin = ev->begin_ns;
        }
        refresh_lo(st, ev->v0);
        break;
    }
    case TS_KIND_STEP_END: {
        slot *s = marker_slot(st, ev->v0);
        if (!s || s->has_end)
            break;
        s->has_end = 1;
        s->end = ev->begin_ns;
        if (!s->has_begin)
            s->tid = ev->tid;
        refresh_lo(st, ev->v0);
        if (ev->begin_ns > st->horizon) {
            st->horizon = ev->begin_ns;
            scan_pending(st);
        }
        advance(st, &(finalize_rule){0});
        break;
    }
    case TS_KIND_COLLECT_START:
        st->window_start[st->nwindow++ % WINDOW_STARTS] = ev->begin_ns;
        for (uint32_t i = 0; i < st->nopen; i++)
            compute_lo(st, st->open[i]);
        break;
    default:
        break;
    }
}

void steptrace_finish(steptrace *st)
{
    advance(st, &(finalize_rule){.all = 1});
}

size_t steptrace_settle(steptrace *st, uint64_t now_ns, uint64_t quiet_ns)
{
    finalize_rule w = {.now_ns = now_ns, .quiet_ns = quiet_ns ? quiet_ns : 1};
    return advance(st, &w);
}

void steptrace_destroy(steptrace *st)
{
    if (!st)
        return;
    for (uint32_t i = 0; i < SLOTS; i++)
        free(st->slots[i].recs);
    free(st->pending);
    free(st->recent);
    free(st->fp_opt);
    free(st->bp_opt);
    index_map_free(&st->name_map);
    free(st->name_flags);
    free(st->sa);
    free(st->sb);
    free(st->sw);
    free(st->tmp);
    free(st);
}

const step_totals *steptrace_totals(const steptrace *st)
{
    return &st->tot;
}

size_t steptrace_recent(const steptrace *st, step_row *out, size_t max)
{
    if (!out)
        return 0;
    size_t n = st->recent_n < max ? st->recent_n : max;
    /* The newest n, oldest first: they end just before recent_head. */
    size_t start = (st->recent_head + st->recent_cap - n) % (st->recent_cap ? st->recent_cap : 1);
    for (size_t i = 0; i < n; i++)
        out[i] = st->recent[(start + i) % st->recent_cap];
    return n;
}

size_t steptrace_gaps(const steptrace *st, op_gap *out, size_t max)
{
    if (!out)
        return 0;
    size_t n = st->ngaps < max ? st->ngaps : max;
    memcpy(out, st->gaps, n * sizeof *out);
    return n;
}

void steptrace_load(steptrace *st, const step_totals *tot, const step_row *rows, size_t n)
{
    st->tot = *tot;
    if (st->tot.nslowest > 5)
        st->tot.nslowest = 5;
    st->recent_n = st->recent_head = 0;
    if (!st->recent_cap)
        return;
    size_t from = n > st->recent_cap ? n - st->recent_cap : 0;
    for (size_t i = from; i < n; i++) {
        st->recent[st->recent_head] = rows[i];
        st->recent_head = (st->recent_head + 1) % st->recent_cap;
    }
    st->recent_n = (uint32_t)(n - from);
}

const char *step_source_name(uint32_t source)
{
    static const char *const n[] = {"none", "marks", "option", "auto"};
    return source < 4 ? n[source] : "unknown";
}
