/* lane: one single-producer ring per producing thread, in the segment.
 *
 * The producer (lane_push, inline in model.h) writes a slot, then publishes head with a release
 * store. The consumer (the recorder) reads up to head with an acquire load and publishes tail;
 * the producer never writes a slot the consumer has not released, so a full ring drops. The
 * observer (another process, read-only) copies slots and then re-reads head: a slot whose index
 * is at least cap below head may have been rewritten during the copy, and is counted as missed,
 * the way a sequence lock's reader retries.
 *
 * In the segment's creator, producer and consumer go by control blocks in its own memory
 * (segment_lane_ctl) and keep the segment's lane records as mirrors for observers: a monitor
 * that rewrites a head or a tail there misleads only itself. */
#include "model.h"

#include <string.h>

int lane_claim(const segment *s, uint32_t tid, lane_writer *w)
{
    const segment_geometry *g = segment_geometry_of(s);
    for (uint32_t i = 0; i < g->lane_count; i++) {
        ts_lane *l = segment_lane_ctl(s, i);
        uint32_t expect = TS_LANE_FREE;
        if (atomic_load_explicit(&l->state, memory_order_relaxed) != TS_LANE_FREE ||
            !atomic_compare_exchange_strong_explicit(&l->state, &expect, TS_LANE_OWNED,
                                                     memory_order_acquire, memory_order_relaxed))
            continue;
        if (segment_lane_ready(s, i) != 0) {
            /* Its pages cannot be had (shared memory is full): no lane, rather than a SIGBUS. */
            atomic_store_explicit(&l->state, TS_LANE_FREE, memory_order_release);
            return -1;
        }
        atomic_store_explicit(&l->tid, tid, memory_order_relaxed);
        uint64_t gen = atomic_fetch_add_explicit(&l->generation, 1, memory_order_relaxed) + 1;
        w->lane = l;
        w->mirror = segment_lane(s, i);
        w->ring = segment_ring(s, i);
        w->mask = g->lane_events - 1;
        /* A reclaimed lane was drained: head == tail, and indexes go on from there. */
        w->head = atomic_load_explicit(&l->head, memory_order_relaxed);
        w->cached_tail = atomic_load_explicit(&l->tail, memory_order_acquire);
        if (w->mirror != l) {
            atomic_store_explicit(&w->mirror->tid, tid, memory_order_relaxed);
            atomic_store_explicit(&w->mirror->generation, gen, memory_order_relaxed);
            atomic_store_explicit(&w->mirror->state, TS_LANE_OWNED, memory_order_relaxed);
        }
        segment_lane_claimed(s, i);
        return 0;
    }
    return -1;
}

void lane_retire(lane_writer *w)
{
    if (!w->lane)
        return;
    /* The mirror first: once the control block says RETIRED the consumer may free the lane. */
    if (w->mirror != w->lane)
        atomic_store_explicit(&w->mirror->state, TS_LANE_RETIRED, memory_order_relaxed);
    /* Release: the consumer that sees RETIRED sees every head we published. */
    atomic_store_explicit(&w->lane->state, TS_LANE_RETIRED, memory_order_release);
    memset(w, 0, sizeof *w);
}

size_t lane_peek(const segment *s, uint32_t i, const ts_event **a, size_t *na, const ts_event **b,
                 size_t *nb)
{
    *a = *b = NULL;
    *na = *nb = 0;
    ts_lane *l = segment_lane_ctl(s, i);
    ts_event *ring = segment_ring(s, i);
    if (!l || !ring)
        return 0;
    uint64_t cap = segment_geometry_of(s)->lane_events;
    uint64_t head = atomic_load_explicit(&l->head, memory_order_acquire);
    uint64_t tail = atomic_load_explicit(&l->tail, memory_order_relaxed);
    uint64_t n = head - tail;
    if (n > cap) /* only a damaged lane (an attacher's view); never read more than one ring */
        n = cap;
    uint64_t start = tail & (cap - 1);
    uint64_t first = cap - start < n ? cap - start : n;
    *a = ring + start;
    *na = first;
    if (n > first) {
        *b = ring;
        *nb = n - first;
    }
    return n;
}

void lane_consume(const segment *s, uint32_t i, size_t n)
{
    ts_lane *l = segment_lane_ctl(s, i);
    ts_lane *mirror = segment_lane(s, i);
    if (!l || !n)
        return;
    uint64_t tail = atomic_load_explicit(&l->tail, memory_order_relaxed) + n;
    atomic_store_explicit(&l->tail, tail, memory_order_release);
    if (mirror != l)
        atomic_store_explicit(&mirror->tail, tail, memory_order_relaxed);
}

int lane_reclaim(const segment *s, uint32_t i)
{
    ts_lane *l = segment_lane_ctl(s, i);
    ts_lane *mirror = segment_lane(s, i);
    if (!l || atomic_load_explicit(&l->state, memory_order_acquire) != TS_LANE_RETIRED)
        return 0;
    uint64_t head = atomic_load_explicit(&l->head, memory_order_acquire);
    if (head != atomic_load_explicit(&l->tail, memory_order_relaxed))
        return 0;
    uint32_t expect = TS_LANE_RETIRED;
    if (!atomic_compare_exchange_strong_explicit(&l->state, &expect, TS_LANE_FREE,
                                                 memory_order_release, memory_order_relaxed))
        return 0;
    if (mirror != l)
        atomic_store_explicit(&mirror->state, TS_LANE_FREE, memory_order_relaxed);
    return 1;
}

/* Word by word with atomic loads: the producer may be rewriting the slot; what we copy is
 * checked against head afterwards and discarded if it could be torn. */
static void copy_slot(ts_event *dst, const ts_event *src)
{
    const uint64_t *from = (const uint64_t *)(const void *)src;
    uint64_t *to = (uint64_t *)(void *)dst;
    for (size_t k = 0; k < sizeof(ts_event) / sizeof(uint64_t); k++)
        to[k] = __atomic_load_n(&from[k], __ATOMIC_RELAXED);
}

size_t lane_observe(const segment *s, uint32_t i, uint64_t *cursor, ts_event *out, size_t max,
                    uint64_t *missed)
{
    ts_lane *l = segment_lane(s, i);
    ts_event *ring = segment_ring(s, i);
    if (!l || !ring)
        return 0;
    uint64_t cap = segment_geometry_of(s)->lane_events;
    uint64_t head = atomic_load_explicit(&l->head, memory_order_acquire);
    uint64_t cur = *cursor;
    if (cur > head) /* the lane was reset or damaged: follow it from where it is */
        cur = head;
    if (head - cur > cap) {
        *missed += head - cap - cur;
        cur = head - cap;
    }
    size_t n = head - cur < max ? (size_t)(head - cur) : max;
    for (size_t k = 0; k < n; k++)
        copy_slot(&out[k], &ring[(cur + k) & (cap - 1)]);
    atomic_thread_fence(memory_order_acquire);
    uint64_t after = atomic_load_explicit(&l->head, memory_order_relaxed);
    /* Index j is intact iff the producer has not reached j + cap: after < j + cap. */
    uint64_t first_ok = after >= cap ? after - cap + 1 : 0;
    size_t bad = 0;
    if (cur < first_ok)
        bad = first_ok - cur < n ? (size_t)(first_ok - cur) : n;
    if (bad) {
        memmove(out, out + bad, (n - bad) * sizeof *out);
        *missed += bad;
    }
    *cursor = cur + n;
    return n - bad;
}
