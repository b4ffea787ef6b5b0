/* memory: host RSS, device memory over time with peaks, and allocations by name
 * (docs/report-format.md, "Memory Analysis").
 *
 * Allocations and frees come from several threads, so they arrive out of time order; running
 * totals and peaks only mean something in time order. They go through a reorder buffer (by
 * time) and are applied once they are MEM_REORDER_NS older than the newest one seen, when the
 * buffer holds MEM_REORDER_MAX, or at finish: the same events then give the same totals and
 * peaks whatever order they were fed in, as long as the disorder stays within that window.
 * (The live view sees device totals that much late.)
 *
 * Frees carry no name: a table of live addresses (per device) remembers each allocation's name
 * and size. A free of an unknown address (allocated before the recording, or lost) leaves the
 * totals alone and is counted. An allocation at an address still live frees the older one
 * first (its free was lost). The table is bounded: allocations beyond MEM_LIVE_MAX still count
 * in the totals but cannot be matched with their free (counted as untracked).
 *
 * Device rows go to the sink after each change, but at most one per device per MEM_ROW_NS plus
 * the highest and the last state of the changes held back in between, so a dense burst of
 * allocations gives at most three rows a millisecond and never hides a peak. Host RSS rows go
 * out as each sample arrives. */
#include "analysis_internal.h"
#include "hash.h"

#include <stdlib.h>
#include <string.h>

#define MEM_REORDER_NS  1000000000ull
#define MEM_REORDER_MAX 16384u
#define MEM_LIVE_MAX    (1u << 18)
#define MEM_DEVICES_MAX 64u
#define MEM_ROW_NS      1000000ull

enum { MEM_ALLOC = 0, MEM_FREE = 1 };

typedef struct mem_ev {
    uint64_t t, addr, bytes;
    uint32_t device, name;
    uint32_t op; /* MEM_ALLOC or MEM_FREE */
} mem_ev;

typedef struct live_slot {
    uint64_t addr, bytes;
    uint32_t device;
    uint32_t stat; /* UINT32_MAX: empty slot */
} live_slot;

typedef struct mem_device {
    uint32_t device;
    uint64_t bytes, peak;
    uint64_t last_row_t;
    int has_row, has_pend, has_hi;
    memory_row pend, hi; /* held back: the latest and the highest change since the last row */
} mem_device;

typedef struct memory_state {
    /* Host RSS. */
    uint64_t host_samples, host_rss, host_rss_t, host_peak;

    /* Reorder buffer, ordered by (t, op, device, addr, bytes, name): events that arrive in
     * order wait in a FIFO (the common case, O(1)); the others in a binary min-heap. */
    mem_ev *fifo;
    uint32_t fifo_head, fifo_n, fifo_cap; /* ring; fifo_cap a power of two */
    mem_ev *heap;
    uint32_t nheap, cap_heap;
    uint64_t newest_t;

    live_slot *live;
    uint32_t live_mask, nlive; /* mask + 1 slots; empty until the first allocation */

    mem_device dev[MEM_DEVICES_MAX];
    uint32_t ndev;

    index_map by_key;  /* name << 32 | device -> alloc stat */
    uint64_t last_key; /* one-entry cache of by_key: allocations of one name come in runs */
    uint32_t last_stat;
    alloc_stat *stats;
    uint32_t nstats, cap_stats;

    uint64_t unmatched_frees, unmatched_bytes; /* frees of unknown addresses */
    uint64_t untracked;                        /* allocations the live table had no room for */
    uint64_t replaced;                         /* allocations at a still-live address */
    uint64_t lost;                             /* out of memory, too many devices */
} memory_state;

static void *memory_create(analysis *a)
{
    (void)a;
    memory_state *s = calloc(1, sizeof *s);
    if (s)
        s->last_stat = UINT32_MAX;
    return s;
}

static void memory_destroy(void *state)
{
    memory_state *s = state;
    free(s->fifo);
    free(s->heap);
    free(s->live);
    free(s->stats);
    index_map_free(&s->by_key);
    free(s);
}

/* ---- Live addresses: open addressing with backward-shift deletion ----------------------- */

/* A table of its own rather than the analysis's index_map: entries come and go (every free
 * deletes one), which index_map, an insert-only map of ids, does not do; the key is an address
 * and a device together, wider than index_map's 64 bits. */

static uint64_t live_hash(uint64_t addr, uint32_t device)
{
    return hash_mix(addr ^ ((uint64_t)device << 40) ^ device);
}

static live_slot *live_find(const memory_state *s, uint64_t addr, uint32_t device)
{
    if (!s->live)
        return NULL;
    for (uint64_t i = live_hash(addr, device) & s->live_mask;; i = (i + 1) & s->live_mask) {
        live_slot *e = &s->live[i];
        if (e->stat == UINT32_MAX)
            return NULL;
        if (e->addr == addr && e->device == device)
            return e;
    }
}

static int live_grow(memory_state *s)
{
    uint32_t n = s->live ? (s->live_mask + 1) * 2 : 1024;
    live_slot *t = malloc(n * sizeof *t);
    if (!t)
        return -1;
    for (uint32_t i = 0; i < n; i++)
        t[i].stat = UINT32_MAX;
    for (uint32_t i = 0; s->live && i <= s->live_mask; i++) {
        if (s->live[i].stat == UINT32_MAX)
            continue;
        uint64_t j = live_hash(s->live[i].addr, s->live[i].device) & (n - 1);
        while (t[j].stat != UINT32_MAX)
            j = (j + 1) & (n - 1);
        t[j] = s->live[i];
    }
    free(s->live);
    s->live = t;
    s->live_mask = n - 1;
    return 0;
}

/* Inserts a new entry (the caller checked it is absent). 0, or -1 when the table is full. */
static int live_insert(memory_state *s, uint64_t addr, uint32_t device, uint64_t bytes,
                       uint32_t stat)
{
    if (s->nlive >= MEM_LIVE_MAX)
        return -1;
    if ((!s->live || (s->nlive + 1) * 2 > s->live_mask + 1) && live_grow(s) != 0)
        return -1;
    uint64_t i = live_hash(addr, device) & s->live_mask;
    while (s->live[i].stat != UINT32_MAX)
        i = (i + 1) & s->live_mask;
    s->live[i] = (live_slot){.addr = addr, .bytes = bytes, .device = device, .stat = stat};
    s->nlive++;
    return 0;
}

static void live_remove(memory_state *s, live_slot *e)
{
    uint64_t i = (uint64_t)(e - s->live);
    uint64_t j = i;
    for (;;) {
        j = (j + 1) & s->live_mask;
        if (s->live[j].stat == UINT32_MAX)
            break;
        uint64_t home = live_hash(s->live[j].addr, s->live[j].device) & s->live_mask;
        /* Move j back into the hole at i unless its home lies cyclically in (i, j]. */
        int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!stays) {
            s->live[i] = s->live[j];
            i = j;
        }
    }
    s->live[i].stat = UINT32_MAX;
    s->nlive--;
}

/* ---- Statistics ------------------------------------------------------------------------- */

static mem_device *device_of(memory_state *s, uint32_t device)
{
    for (uint32_t i = 0; i < s->ndev; i++)
        if (s->dev[i].device == device)
            return &s->dev[i];
    if (s->ndev == MEM_DEVICES_MAX)
        return NULL;
    mem_device *d = &s->dev[s->ndev++];
    memset(d, 0, sizeof *d);
    d->device = device;
    d->hi.device = d->pend.device = device;
    return d;
}

static uint32_t stat_of(memory_state *s, uint32_t name, uint32_t device)
{
    uint64_t key = (uint64_t)name << 32 | device;
    if (key == s->last_key && s->last_stat != UINT32_MAX)
        return s->last_stat;
    uint32_t i = index_map_find(&s->by_key, key);
    if (i != UINT32_MAX) {
        s->last_key = key;
        s->last_stat = i;
        return i;
    }
    if (s->nstats == s->cap_stats) {
        uint32_t n = s->cap_stats ? s->cap_stats * 2 : 32;
        alloc_stat *ns = realloc(s->stats, n * sizeof *ns);
        if (!ns)
            return UINT32_MAX;
        s->stats = ns;
        s->cap_stats = n;
    }
    if (index_map_get(&s->by_key, key, s->nstats, NULL) == UINT32_MAX)
        return UINT32_MAX;
    s->stats[s->nstats] = (alloc_stat){.name = name, .device = device};
    return s->nstats++;
}

static void emit(analysis *a, const memory_row *r)
{
    const analysis_sink *sink = analysis_cfg(a)->sink;
    if (sink && sink->memory)
        sink->memory(sink->ctx, r);
}

static void flush_held(analysis *a, mem_device *d)
{
    if (d->has_hi && d->hi.t_ns < d->pend.t_ns && d->hi.bytes > d->pend.bytes)
        emit(a, &d->hi);
    if (d->has_pend)
        emit(a, &d->pend);
    d->has_hi = d->has_pend = 0;
}

/* A device total changed at t: a row now, or held back (see the top of the file). */
static void device_changed(analysis *a, mem_device *d, uint64_t t)
{
    if (!d->has_row || t >= d->last_row_t + MEM_ROW_NS || t < d->last_row_t) {
        flush_held(a, d);
        memory_row r = {.t_ns = t, .device = d->device, .bytes = d->bytes, .peak_bytes = d->peak};
        emit(a, &r);
        d->has_row = 1;
        d->last_row_t = t;
        return;
    }
    if (!d->has_hi || d->bytes > d->hi.bytes) {
        d->hi.t_ns = t;
        d->hi.bytes = d->bytes;
        d->hi.peak_bytes = d->peak;
        d->has_hi = 1;
    }
    d->pend.t_ns = t;
    d->pend.bytes = d->bytes;
    d->pend.peak_bytes = d->peak;
    d->has_pend = 1;
}

static void sub_clamped(uint64_t *v, uint64_t by)
{
    *v = *v > by ? *v - by : 0;
}

/* Releases a live entry: its stat and its device lose its bytes. */
static void release(memory_state *s, analysis *a, live_slot *e, uint64_t t)
{
    sub_clamped(&s->stats[e->stat].live_bytes, e->bytes);
    if (e->device != TS_DEVICE_HOST) {
        mem_device *d = device_of(s, e->device);
        if (d) {
            sub_clamped(&d->bytes, e->bytes);
            device_changed(a, d, t);
        }
    }
    live_remove(s, e);
}

static void apply(memory_state *s, analysis *a, const mem_ev *m)
{
    live_slot *e = live_find(s, m->addr, m->device);
    if (m->op == MEM_FREE) {
        if (!e) {
            s->unmatched_frees++;
            s->unmatched_bytes += m->bytes;
            return;
        }
        release(s, a, e, m->t);
        return;
    }
    if (e) {
        s->replaced++;
        release(s, a, e, m->t);
    }
    uint32_t si = stat_of(s, m->name, m->device);
    if (si == UINT32_MAX) {
        s->lost++;
        return;
    }
    alloc_stat *st = &s->stats[si];
    st->count++;
    st->bytes_total += m->bytes;
    st->live_bytes += m->bytes;
    if (st->live_bytes > st->peak_live_bytes)
        st->peak_live_bytes = st->live_bytes;
    if (live_insert(s, m->addr, m->device, m->bytes, si) != 0)
        s->untracked++;
    if (m->device != TS_DEVICE_HOST) {
        mem_device *d = device_of(s, m->device);
        if (!d) {
            s->lost++;
            return;
        }
        d->bytes += m->bytes;
        if (d->bytes > d->peak)
            d->peak = d->bytes;
        device_changed(a, d, m->t);
    }
}

/* ---- Reorder buffer ---------------------------------------------------------------------- */

static int ev_less(const mem_ev *x, const mem_ev *y)
{
    if (x->t != y->t)
        return x->t < y->t;
    /* Equal times: allocations first, then a fixed order of the rest, so ties never depend on
     * the order of arrival. */
    if (x->op != y->op)
        return x->op < y->op;
    if (x->device != y->device)
        return x->device < y->device;
    if (x->addr != y->addr)
        return x->addr < y->addr;
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes;
    return x->name < y->name;
}

static mem_ev heap_pop(memory_state *s)
{
    mem_ev top = s->heap[0];
    mem_ev last = s->heap[--s->nheap];
    uint32_t i = 0;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= s->nheap)
            break;
        if (c + 1 < s->nheap && ev_less(&s->heap[c + 1], &s->heap[c]))
            c++;
        if (!ev_less(&s->heap[c], &last))
            break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (s->nheap)
        s->heap[i] = last;
    return top;
}

static int heap_push(memory_state *s, const mem_ev *m)
{
    if (s->nheap == s->cap_heap) {
        uint32_t n = s->cap_heap ? s->cap_heap * 2 : 256;
        mem_ev *nh = realloc(s->heap, n * sizeof *nh);
        if (!nh)
            return -1;
        s->heap = nh;
        s->cap_heap = n;
    }
    uint32_t i = s->nheap++;
    while (i > 0 && ev_less(m, &s->heap[(i - 1) / 2])) {
        s->heap[i] = s->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap[i] = *m;
    return 0;
}

static const mem_ev *fifo_tail(const memory_state *s)
{
    return &s->fifo[(s->fifo_head + s->fifo_n - 1) & (s->fifo_cap - 1)];
}

static int fifo_push(memory_state *s, const mem_ev *m)
{
    if (s->fifo_n == s->fifo_cap) {
        uint32_t n = s->fifo_cap ? s->fifo_cap * 2 : 256;
        mem_ev *nf = malloc(n * sizeof *nf);
        if (!nf)
            return -1;
        for (uint32_t i = 0; i < s->fifo_n; i++)
            nf[i] = s->fifo[(s->fifo_head + i) & (s->fifo_cap - 1)];
        free(s->fifo);
        s->fifo = nf;
        s->fifo_cap = n;
        s->fifo_head = 0;
    }
    s->fifo[(s->fifo_head + s->fifo_n++) & (s->fifo_cap - 1)] = *m;
    return 0;
}

/* The oldest waiting event, or NULL. */
static const mem_ev *oldest(const memory_state *s)
{
    const mem_ev *f = s->fifo_n ? &s->fifo[s->fifo_head] : NULL;
    const mem_ev *h = s->nheap ? &s->heap[0] : NULL;
    if (!f)
        return h;
    if (!h)
        return f;
    return ev_less(h, f) ? h : f;
}

static void apply_oldest(memory_state *s, analysis *a)
{
    mem_ev m;
    if (s->fifo_n && (!s->nheap || !ev_less(&s->heap[0], &s->fifo[s->fifo_head]))) {
        m = s->fifo[s->fifo_head];
        s->fifo_head = (s->fifo_head + 1) & (s->fifo_cap - 1);
        s->fifo_n--;
    } else {
        m = heap_pop(s);
    }
    apply(s, a, &m);
}

static void reorder_push(memory_state *s, analysis *a, const mem_ev *m)
{
    if (s->fifo_n + s->nheap >= MEM_REORDER_MAX)
        apply_oldest(s, a);
    int r = !s->fifo_n || !ev_less(m, fifo_tail(s)) ? fifo_push(s, m) : heap_push(s, m);
    /* No room to wait: apply it now, out of order rather than not at all. */
    if (r != 0)
        apply(s, a, m);
}

static void memory_feed(void *state, analysis *a, const ts_event *ev)
{
    memory_state *s = state;
    if (ev->kind == TS_KIND_HOST_MEMORY) {
        uint64_t t = ev->begin_ns;
        s->host_samples++;
        if (s->host_samples == 1 || t > s->host_rss_t ||
            (t == s->host_rss_t && ev->v0 > s->host_rss)) {
            s->host_rss = ev->v0;
            s->host_rss_t = t;
        }
        uint64_t peak = ev->v0 > ev->v1 ? ev->v0 : ev->v1;
        if (peak > s->host_peak)
            s->host_peak = peak;
        memory_row r = {
            .t_ns = t, .device = TS_DEVICE_HOST, .bytes = ev->v0, .peak_bytes = s->host_peak};
        emit(a, &r);
        return;
    }
    int host = ev->kind == TS_KIND_HOST_ALLOC || ev->kind == TS_KIND_HOST_FREE;
    if (!host && !ts_devmem_on_device(ev->aux))
        return; /* pinned host or managed memory: not the device's */
    mem_ev m = {.t = ev->begin_ns,
                .addr = ev->v1,
                .bytes = ev->v0,
                .device = host ? TS_DEVICE_HOST : ev->device,
                .name = ev->name,
                .op = ev->kind == TS_KIND_DEVMEM_FREE || ev->kind == TS_KIND_HOST_FREE ? MEM_FREE
                                                                                       : MEM_ALLOC};
    if (m.t > s->newest_t)
        s->newest_t = m.t;
    reorder_push(s, a, &m);
    for (const mem_ev *o; (o = oldest(s)) && o->t + MEM_REORDER_NS < s->newest_t;)
        apply_oldest(s, a);
}

static void memory_finish(void *state, analysis *a)
{
    memory_state *s = state;
    while (s->fifo_n || s->nheap)
        apply_oldest(s, a);
    for (uint32_t i = 0; i < s->ndev; i++)
        flush_held(a, &s->dev[i]);
}

const analysis_module memory_module = {
    .name = "memory",
    .kinds = KIND_BIT(TS_KIND_HOST_MEMORY) | KIND_BIT(TS_KIND_DEVMEM_ALLOC) |
             KIND_BIT(TS_KIND_DEVMEM_FREE) | KIND_BIT(TS_KIND_HOST_ALLOC) |
             KIND_BIT(TS_KIND_HOST_FREE),
    .create = memory_create,
    .feed = memory_feed,
    .finish = memory_finish,
    .destroy = memory_destroy,
};

/* ---- Accessors ------------------------------------------------------------------------- */

/* host_rss is the latest sample by time, host_peak_rss the largest RSS or peak RSS any sample
 * reported. Device totals include what the reorder buffer has applied so far. */
memory_summary analysis_memory(const analysis *a)
{
    memory_summary r;
    memset(&r, 0, sizeof r);
    const memory_state *s = analysis_state(a, &memory_module);
    if (!s)
        return r;
    r.host_samples = s->host_samples;
    r.host_rss = s->host_rss;
    r.host_peak_rss = s->host_peak;
    r.devices = s->ndev;
    r.unmatched_frees = s->unmatched_frees;
    r.unmatched_bytes = s->unmatched_bytes;
    r.untracked = s->untracked;
    r.replaced = s->replaced;
    for (uint32_t i = 0; i < s->ndev; i++) {
        uint32_t d = s->dev[i].device;
        if (d < 8) {
            r.device_bytes[d] = s->dev[i].bytes;
            r.device_peak[d] = s->dev[i].peak;
        }
    }
    return r;
}

static int alloc_cmp(const void *x, const void *y)
{
    const alloc_stat *a = x, *b = y;
    if (a->peak_live_bytes != b->peak_live_bytes)
        return a->peak_live_bytes < b->peak_live_bytes ? 1 : -1;
    if (a->bytes_total != b->bytes_total)
        return a->bytes_total < b->bytes_total ? 1 : -1;
    if (a->device != b->device)
        return a->device < b->device ? -1 : 1;
    return a->name < b->name ? -1 : a->name > b->name;
}

size_t analysis_allocations(const analysis *a, alloc_stat **rows)
{
    const memory_state *s = analysis_state(a, &memory_module);
    *rows = NULL;
    if (!s || !s->nstats)
        return 0;
    alloc_stat *r = malloc(s->nstats * sizeof *r);
    if (!r)
        return 0;
    memcpy(r, s->stats, s->nstats * sizeof *r);
    qsort(r, s->nstats, sizeof *r, alloc_cmp);
    *rows = r;
    return s->nstats;
}
