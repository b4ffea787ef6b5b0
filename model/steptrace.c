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
 *   (steptrace_set_options): the begin of the first op so named, the end of the last, where an
 *   op matches by its exact name bytes or by its normalized key (opname_key_length, so
 *   "aten::addmm" names "aten::addmm, seq = 4, ..."); the default rule (steptrace_split.c,
 *   default_rule): the first op beginning at or after the end of the step's first data fetch
 *   (ops named like get_next, GetNext, data fetch, DataLoader, next batch), else the first op;
 *   the end of the op that began last strictly before the last communication op began, else the
 *   end of the op that ends last. The ops are the top-level host ops of the thread that marked
 *   the step and the device kernels; fetch ops are never FP or BP themselves. The row's source
 *   is the weaker rule of its two boundaries. With no boundary at all (no op, no mark) the
 *   source is NONE and the whole step counts as FP/BP, so interval + fpbp + tail = total always
 *   holds.
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
 *   with DDP it is at the end of backward, which the default rule puts in the tail.
 * - The split (step_row in steptrace.h), a partition of the window: evaluation passes (between the
 * step's evaluation marks) are eval; the rest before the forward start is interval, whatever it
 *   holds; after it, the communication wait is comm_wait; the rest is compute up to the
 *   backward end and tail after it.
 * - Gaps: the holes between consecutive top-level ops of the step's thread, clipped to [FP, BP],
 *   less the part during which communication is in flight (that is a communication wait, not
 *   idle time). Other threads (data workers) have their own rhythm and are not counted.
 *
 * - The step on the device (steptrace_device.c), when the window holds device records (kernels,
 *   copies, memsets): the device whose records take the most time in it; busy is the union of
 *   that device's records on every stream, clipped to the window; the rest of the window is idle,
 *   and each idle stretch is split by cause. Up to the moment the work that ends the stretch was
 *   launched (its API call, matched by correlation id; launched before the window: at once; the
 *   window's end: no such work) nothing was queued, and that time is the host's: data while the
 *   step's thread waits for data (before the forward start, or in a data fetch), sync while it
 *   waits in a synchronization and until the device runs again after it (the queue it drained
 *   must be filled again: loss.item() every step), host-bound for the rest (the host does not
 *   launch fast enough). From the launch on, the work is queued and does not run yet: other
 *   (a dependency on another stream or device, the launch latency). Without any API record in
 *   the window the queue counts as empty.
 *
 * Memory is the open steps' records (at most HOLD_MAX), the recent rows and the top gaps, and a
 * flag byte per distinct op name: it does not grow with the length of the run. */
#include "steptrace_internal.h"

#include <stdlib.h>
#include <string.h>

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

uint8_t steptrace_name_flags(steptrace *st, uint32_t id)
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
    else if (r->cls <= REC_BWD)
        st->tot.outside++; /* evaluation marks between steps are what they should be, and API
                              calls and synchronizations are counted as the work they wait for */
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
    span *x = realloc(st->sx, cap * sizeof *x);
    if (x)
        st->sx = x;
    span *t = realloc(st->tmp, cap * sizeof *t);
    if (t)
        st->tmp = t;
    if (!a || !b || !w || !x || !t)
        return -1;
    st->cap_span = cap;
    return 0;
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
    if (row->gpu_device != TS_DEVICE_HOST) {
        t->gpu_steps++;
        t->gpu_total_ns += row->total_ns;
        t->gpu_busy_ns += row->gpu_busy_ns;
        t->gpu_idle_data_ns += row->gpu_idle_data_ns;
        t->gpu_idle_host_ns += row->gpu_idle_host_ns;
        t->gpu_idle_sync_ns += row->gpu_idle_sync_ns;
        t->gpu_idle_other_ns += row->gpu_idle_other_ns;
        t->gpu_device = row->gpu_device;
    }
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
        if (r->end <= s->end || r->cls > REC_SYNC)
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
        row.gpu_device = TS_DEVICE_HOST;
        step_ops(s, lo, hi, &row);
        if (st->hooks.prepare)
            st->hooks.prepare(st->hooks.ctx, st);
        steptrace_split_phases(st, s, lo, hi, &row);
        if (grow_spans(st, (size_t)s->n + 2) == 0) {
            steptrace_split_overlap(st, s, lo, hi, &row);
            row.gap_ns = steptrace_split_gaps(st, s, row.fp_start_ns, row.bp_end_ns);
            steptrace_split_device(st, s, lo, hi, &row);
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
    int on_device = cls == REC_COPY || (flags & RF_DEVICE);
    rec r = {.begin = ev->begin_ns,
             .end = ev->end_ns > ev->begin_ns ? ev->end_ns : ev->begin_ns,
             .name = ev->name,
             .tid = ev->tid,
             .corr = (uint32_t)ev->corr,
             .cls = cls,
             .flags = flags,
             .dev = !on_device           ? REC_NO_DEVICE
                    : ev->device >= 254u ? 254
                                         : (uint8_t)ev->device};
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
    st->tot.gpu_device = TS_DEVICE_HOST;
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
    case TS_KIND_MEMCPY:
    case TS_KIND_MEMSET:
        add_rec(st, ev, REC_COPY, 0);
        break;
    case TS_KIND_SYNC:
        if (ev->device == TS_DEVICE_HOST)
            add_rec(st, ev, REC_SYNC, 0);
        break;
    case TS_KIND_CUDA_API:
        add_rec(st, ev, REC_LAUNCH, 0);
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
    free(st->sx);
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
