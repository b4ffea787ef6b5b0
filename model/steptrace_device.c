/* steptrace_device: a finalized step on the device. With CUDA the host only launches: the device
 * runs the work later, and the host waits for it in a synchronization (loss.item(), a copy to the
 * host). The host's split says where the host was; this says whether the device was busy, and
 * when it was idle, why (the rules are in steptrace.c's comment, "The step on the device"). */
#include "steptrace_internal.h"

#define DEVICES_WEIGHED 8 /* distinct devices of one step weighed to choose the step's device */

static int on_device(const rec *r)
{
    return r->dev != REC_NO_DEVICE &&
           (r->cls == REC_KERNEL || r->cls == REC_COMM || r->cls == REC_COPY);
}

/* The device whose records in [lo, hi] take the most time (the lowest index on a tie; a step of
 * zero-length records still has one); REC_NO_DEVICE when the window has none. */
static uint8_t step_device(const slot *s, uint64_t lo, uint64_t hi)
{
    uint8_t dev[DEVICES_WEIGHED];
    uint64_t sum[DEVICES_WEIGHED];
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        const rec *r = &s->recs[i];
        if (!on_device(r) || r->begin > hi || r->end < lo)
            continue;
        uint64_t b = r->begin > lo ? r->begin : lo, e = r->end < hi ? r->end : hi;
        uint32_t k = 0;
        while (k < n && dev[k] != r->dev)
            k++;
        if (k == n) {
            if (n == DEVICES_WEIGHED)
                continue;
            dev[n] = r->dev;
            sum[n++] = 0;
        }
        sum[k] += e > b ? e - b : 0;
    }
    uint32_t best = 0;
    for (uint32_t k = 1; k < n; k++)
        if (sum[k] > sum[best] || (sum[k] == sum[best] && dev[k] < dev[best]))
            best = k;
    return n ? dev[best] : REC_NO_DEVICE;
}

/* The launches of the step (API calls of every thread) as {b: correlation id, e: begin}, sorted by
 * id, into st->sb; returns the count. */
static size_t launches(steptrace *st, const slot *s)
{
    size_t n = 0;
    for (uint32_t i = 0; i < s->n; i++)
        if (s->recs[i].cls == REC_LAUNCH && s->recs[i].corr)
            st->sb[n++] = (span){s->recs[i].corr, s->recs[i].begin, 0};
    spans_sort(st->sb, st->tmp, n);
    return n;
}

/* The index of the first of v (sorted by b) whose b is key or more; n when none. */
static size_t first_from(const span *v, size_t n, uint64_t key)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].b < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* When the work with correlation id corr was launched: 1 and *at, 0 when not in the step. */
static int launched_at(const span *v, size_t n, uint32_t corr, uint64_t *at)
{
    size_t i = first_from(v, n, corr);
    if (i == n || v[i].b != corr)
        return 0;
    *at = v[i].e;
    return 1;
}

/* The first busy span (sorted, disjoint) that begins at or after t: its begin, or hi. */
static uint64_t next_busy(const span *busy, size_t n, uint64_t t, uint64_t hi)
{
    size_t i = first_from(busy, n, t);
    return i < n && busy[i].b < hi ? busy[i].b : hi;
}

/* Sorts and merges v[0..n) (st->tmp is scratch); returns the count. */
static size_t merged(steptrace *st, span *v, size_t n)
{
    uint64_t covered;
    spans_sort(v, st->tmp, n);
    return spans_coalesce(v, n, &covered);
}

/* What the host waits for while the device idles, each sorted and disjoint: data (the step's
 * interval before the forward start and the step thread's data fetches, into st->sw) and the
 * device (each synchronization of the step's thread, from its begin until the device runs again
 * after it, less the data spans, into st->sx). */
typedef struct host_waits {
    size_t ndata, nsync;
} host_waits;

static host_waits waits_of(steptrace *st, const slot *s, uint64_t lo, uint64_t hi,
                           const step_row *row, size_t nbusy)
{
    host_waits w = {0, 0};
    if (row->fp_start_ns > lo)
        st->sw[w.ndata++] = (span){lo, row->fp_start_ns, 0};
    size_t nsync = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        const rec *r = &s->recs[i];
        if (r->tid != s->tid)
            continue;
        uint64_t b = r->begin > lo ? r->begin : lo, e = r->end < hi ? r->end : hi;
        if (r->cls == REC_HOST && (r->nf & NF_FETCH) && e > b)
            st->sw[w.ndata++] = (span){b, e, 0};
        else if (r->cls == REC_SYNC && r->end >= lo && b < hi) {
            uint64_t until = next_busy(st->sa, nbusy, r->end > lo ? r->end : lo, hi);
            st->sx[nsync++] = (span){b, until > b ? until : b, 0};
        }
    }
    w.ndata = merged(st, st->sw, w.ndata);
    nsync = merged(st, st->sx, nsync);
    /* Data first: the host that waits for a batch after a synchronization waits for data. */
    w.nsync = spans_minus(st->sx, nsync, st->sw, w.ndata, st->tmp);
    for (size_t i = 0; i < w.nsync; i++)
        st->sx[i] = st->tmp[i];
    return w;
}

/* One idle stretch [a, b) of the device, before the work (correlation id next, 0: none, the step
 * ends) that ends it, into the row's causes. */
typedef struct idle_walk {
    const span *launch;
    size_t nlaunch;
    host_waits w;
    size_t at_data, at_sync; /* cursors: stretches come in order */
} idle_walk;

static void idle_stretch(steptrace *st, idle_walk *k, uint64_t a, uint64_t b, uint32_t next,
                         step_row *row)
{
    /* Until the next work was launched nothing was queued; after, it waited to run. A launch not
     * in the step was made before it; without launch records at all, the queue counts as
     * empty. */
    uint64_t empty_to = b, at;
    if (next && k->nlaunch)
        empty_to = launched_at(k->launch, k->nlaunch, next, &at) && at > a ? (at < b ? at : b) : a;
    uint64_t data = spans_covered_by(st->sw, k->w.ndata, &k->at_data, a, empty_to);
    uint64_t sync = spans_covered_by(st->sx, k->w.nsync, &k->at_sync, a, empty_to);
    row->gpu_idle_data_ns += data;
    row->gpu_idle_sync_ns += sync;
    row->gpu_idle_host_ns += empty_to - a - data - sync;
    row->gpu_idle_other_ns += b - empty_to;
}

void steptrace_split_device(steptrace *st, const slot *s, uint64_t lo, uint64_t hi, step_row *row)
{
    uint8_t dev = step_device(s, lo, hi);
    if (dev == REC_NO_DEVICE)
        return;
    row->gpu_device = dev;
    /* Busy: the union of the device's records, each span named by the correlation id of the
     * record that begins it (coalescing keeps the first). */
    size_t nbusy = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        const rec *r = &s->recs[i];
        uint64_t b = r->begin > lo ? r->begin : lo, e = r->end < hi ? r->end : hi;
        if (on_device(r) && r->dev == dev && e > b)
            st->sa[nbusy++] = (span){b, e, r->corr};
    }
    spans_sort(st->sa, st->tmp, nbusy);
    nbusy = spans_coalesce(st->sa, nbusy, &row->gpu_busy_ns);

    idle_walk k = {.nlaunch = launches(st, s)};
    k.launch = st->sb;
    k.w = waits_of(st, s, lo, hi, row, nbusy);
    uint64_t t = lo;
    for (size_t i = 0; i < nbusy; i++) {
        if (st->sa[i].b > t)
            idle_stretch(st, &k, t, st->sa[i].b, st->sa[i].name, row);
        t = st->sa[i].e;
    }
    if (hi > t)
        idle_stretch(st, &k, t, hi, 0, row);
}
