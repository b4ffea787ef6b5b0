/* lane: one single-producer ring per producing thread, in the segment.
 *
 * The producer (lane_push, inline in lane.h) writes a slot, then publishes head with a release
 * store. The consumer (the recorder) reads up to head with an acquire load and publishes tail;
 * the producer never writes a slot the consumer has not released, so a full ring drops. The
 * observer (another process, read-only) copies slots and then re-reads head: a slot whose index
 * is at least cap below head may have been rewritten during the copy, and is counted as missed,
 * the way a sequence lock's reader retries.
 *
 * In the segment's creator, producer and consumer go by control blocks in its own memory
 * (segment_lane_ctl) and keep the segment's lane records as mirrors for observers: a monitor
 * that rewrites a head or a tail there misleads only itself.
 *
 * Growing: the consumer (lane_grow) takes a larger ring from the segment's grow region, has its
 * pages a slice per call, and offers it in the control block. The producer takes the offer on
 * its slow path (lane_make_room, when its ring looks full) at its head h: from h on it writes
 * into the new ring, and it records the switch (ring_from = h, the old ring kept) under the
 * lane's sequence lock, in the control block and its mirror. The consumer reads the old ring
 * up to ring_from, then the new one, and gives the old ring back once it has passed it; it offers
 * no other ring before that, so a lane has at most two.
 *
 * The arrow is one way: lane.c goes by segment.c's accessors (segment_lane_ctl, segment_ring_at,
 * the grow region), and segment.c, which lays lanes out, never calls in here. */
#include "model.h"

#include <string.h>

/* The sequence lock over a lane's ring fields. Writers: the producer (a switch) and, for a lane no
 * producer owns, the consumer (a reset); readers: the consumer and observers. */
static void rings_write_begin(ts_lane *l)
{
    uint32_t q = atomic_load_explicit(&l->ring_seq, memory_order_relaxed);
    atomic_store_explicit(&l->ring_seq, q + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
}

static void rings_write_end(ts_lane *l)
{
    uint32_t q = atomic_load_explicit(&l->ring_seq, memory_order_relaxed);
    atomic_store_explicit(&l->ring_seq, q + 1, memory_order_release);
}

static void rings_set(ts_lane *l, uint64_t off, uint32_t events, uint64_t from, uint64_t old_off,
                      uint32_t old_events)
{
    rings_write_begin(l);
    atomic_store_explicit(&l->ring_off, off, memory_order_relaxed);
    atomic_store_explicit(&l->ring_events, events, memory_order_relaxed);
    atomic_store_explicit(&l->ring_from, from, memory_order_relaxed);
    atomic_store_explicit(&l->old_off, old_off, memory_order_relaxed);
    atomic_store_explicit(&l->old_events, old_events, memory_order_relaxed);
    rings_write_end(l);
}

/* Sets l's rings to its first one alone (a reclaimed lane): no reader may be in the middle of
 * them but through the sequence lock. */
static void ring_reset(ts_lane *l, uint64_t off, uint32_t events)
{
    atomic_store_explicit(&l->next_events, 0, memory_order_relaxed);
    rings_set(l, off, events, 0, 0, 0);
}

#define RINGS_READ_TRIES 64 /* a torn read this often: the writer died mid-way, or damage */

int lane_rings_read(const segment *s, const ts_lane *l, lane_rings *out)
{
    for (int t = 0; t < RINGS_READ_TRIES; t++) {
        uint32_t q = atomic_load_explicit(&l->ring_seq, memory_order_acquire);
        if (q & 1)
            continue;
        lane_rings r = {.seq = q};
        r.off = atomic_load_explicit(&l->ring_off, memory_order_relaxed);
        r.events = atomic_load_explicit(&l->ring_events, memory_order_relaxed);
        r.from = atomic_load_explicit(&l->ring_from, memory_order_relaxed);
        r.old_off = atomic_load_explicit(&l->old_off, memory_order_relaxed);
        r.old_events = atomic_load_explicit(&l->old_events, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&l->ring_seq, memory_order_relaxed) != q)
            continue;
        r.ring = segment_ring_at(s, r.off, r.events);
        r.old = r.old_events ? segment_ring_at(s, r.old_off, r.old_events) : NULL;
        if (!r.ring)
            return -1;
        *out = r;
        return 0;
    }
    return -1;
}

int lane_make_room(lane_writer *w)
{
    uint64_t h = w->head;
    uint32_t ev = atomic_load_explicit(&w->lane->next_events, memory_order_acquire);
    if (ev > w->mask + 1) {
        uint64_t off = atomic_load_explicit(&w->lane->next_off, memory_order_relaxed);
        ts_event *ring = segment_ring_at(w->seg, off, ev);
        if (ring) {
            uint32_t old_events = (uint32_t)(w->mask + 1);
            rings_set(w->lane, off, ev, h, w->ring_off, old_events);
            if (w->mirror != w->lane)
                rings_set(w->mirror, off, ev, h, w->ring_off, old_events);
            /* Taken: the consumer that sees 0 here sees the switch above. */
            atomic_store_explicit(&w->lane->next_events, 0, memory_order_release);
            w->ring = ring;
            w->mask = ev - 1;
            w->ring_from = h;
            w->ring_off = off;
            w->cached_tail = h; /* the new ring is empty */
            return 1;
        }
    }
    uint64_t t = atomic_load_explicit(&w->lane->tail, memory_order_acquire);
    w->cached_tail = t < w->ring_from ? w->ring_from : t;
    return h - w->cached_tail <= w->mask;
}

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
        lane_rings r;
        if (lane_rings_read(s, l, &r) != 0) {
            atomic_store_explicit(&l->state, TS_LANE_FREE, memory_order_release);
            return -1;
        }
        atomic_store_explicit(&l->tid, tid, memory_order_relaxed);
        uint64_t gen = atomic_fetch_add_explicit(&l->generation, 1, memory_order_relaxed) + 1;
        w->lane = l;
        w->mirror = segment_lane(s, i);
        w->seg = s;
        w->ring = r.ring;
        w->mask = r.events - 1;
        w->ring_from = r.from;
        w->ring_off = r.off;
        /* A reclaimed lane was drained: head == tail, and indexes go on from there. */
        w->head = atomic_load_explicit(&l->head, memory_order_relaxed);
        w->cached_tail = atomic_load_explicit(&l->tail, memory_order_acquire);
        if (w->cached_tail < w->ring_from)
            w->cached_tail = w->ring_from;
        /* The open range goes on from the sequence the lane's last owner left (read once, here:
         * a sequence that went back could pass a torn read as whole), none open. */
        w->open_seq = (atomic_load_explicit(&w->mirror->open_seq, memory_order_relaxed) + 1) & ~1u;
        lane_open_set(w, 0, TS_STR_NONE, 0, 0);
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
    lane_open_set(w, 0, TS_STR_NONE, 0, 0);
    /* The mirror first: once the control block says RETIRED the consumer may free the lane. */
    if (w->mirror != w->lane)
        atomic_store_explicit(&w->mirror->state, TS_LANE_RETIRED, memory_order_relaxed);
    /* Release: the consumer that sees RETIRED sees every head we published. */
    atomic_store_explicit(&w->lane->state, TS_LANE_RETIRED, memory_order_release);
    memset(w, 0, sizeof *w);
}

size_t lane_peek_at(const segment *s, uint32_t i, uint64_t from, lane_run *out)
{
    *out = (lane_run){0};
    ts_lane *l = segment_lane_ctl(s, i);
    if (!l)
        return 0;
    /* head first: the rings read after it hold every index below it (a switch after the load
     * is at an index at or past it). */
    uint64_t head = atomic_load_explicit(&l->head, memory_order_acquire);
    lane_rings r;
    if (lane_rings_read(s, l, &r) != 0)
        return 0;
    ts_event *ring = r.ring;
    uint64_t cap = r.events, end = head;
    /* Indexes are compared modulo 2^64, as the producer counts them. */
    if (r.old && (int64_t)(from - r.from) < 0) {
        ring = r.old;
        cap = r.old_events;
        if ((int64_t)(head - r.from) > 0)
            end = r.from;
    }
    uint64_t n = end - from;
    if (n > cap) /* only a damaged lane (an attacher's view); never read more than one ring */
        n = cap;
    if (!n)
        return 0;
    uint64_t start = from & (cap - 1);
    uint64_t first = cap - start < n ? cap - start : n;
    out->a = ring + start;
    out->na = first;
    if (n > first) {
        out->b = ring;
        out->nb = n - first;
    }
    return n;
}

size_t lane_peek(const segment *s, uint32_t i, lane_run *out)
{
    ts_lane *l = segment_lane_ctl(s, i);
    uint64_t tail = l ? atomic_load_explicit(&l->tail, memory_order_relaxed) : 0;
    return lane_peek_at(s, i, tail, out);
}

size_t lane_run_take(lane_run *rest, size_t max, lane_run *piece)
{
    size_t ta = rest->na < max ? rest->na : max;
    size_t tb = rest->nb < max - ta ? rest->nb : max - ta;
    *piece = (lane_run){.a = rest->a, .na = ta, .b = rest->b, .nb = tb};
    /* A run may be NULL when empty: NULL + 0 is undefined in C, so only step on. */
    if (ta)
        rest->a += ta;
    if (tb)
        rest->b += tb;
    rest->na -= ta;
    rest->nb -= tb;
    return ta + tb;
}

/* The consumer has passed the old ring of lane i: it goes back (once per switch). */
static void old_ring_passed(const segment *s, uint32_t i, const ts_lane *l, uint64_t tail)
{
    lane_grow_state *g = segment_grow_state(s, i);
    lane_rings r;
    if (!g || lane_rings_read(s, l, &r) != 0 || !r.old_events || tail < r.from ||
        g->freed_seq == r.seq)
        return;
    segment_grow_free(s, r.old_off, r.old_events, UINT64_MAX);
    g->freed_seq = r.seq;
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
    old_ring_passed(s, i, l, tail);
}

uint32_t lane_capacity(const segment *s, uint32_t i)
{
    ts_lane *l = segment_lane_ctl(s, i);
    lane_rings r;
    return l && lane_rings_read(s, l, &r) == 0 ? r.events : 0;
}

/* Whether the producer took the ring offered to lane i; forgets the offer then. */
static int offer_taken(const ts_lane *l, lane_grow_state *g)
{
    if (!g->offered || atomic_load_explicit(&l->next_events, memory_order_acquire))
        return 0;
    g->offered = 0;
    g->events = 0;
    return 1;
}

int lane_grow(const segment *s, uint32_t i, uint32_t events, uint64_t bytes)
{
    lane_grow_state *g = segment_grow_state(s, i);
    ts_lane *l = segment_lane_ctl(s, i);
    if (!g || !l)
        return -1;
    if (g->offered && !offer_taken(l, g))
        return 1;
    if (!g->events) {
        lane_rings r;
        if (!events || lane_rings_read(s, l, &r) != 0 || events <= r.events ||
            (r.old_events && g->freed_seq != r.seq) || segment_grow_alloc(s, events, &g->off) != 0)
            return -1;
        g->events = events;
        g->populated = 0;
    }
    uint64_t len = (uint64_t)g->events * sizeof(ts_event);
    uint64_t step = len - g->populated < bytes ? len - g->populated : bytes;
    if (step && segment_grow_populate(s, g->off + g->populated, step) != 0) {
        segment_grow_free(s, g->off, g->events, g->populated);
        g->events = 0;
        return -1;
    }
    g->populated += step;
    if (g->populated < len)
        return 0;
    atomic_store_explicit(&l->next_off, g->off, memory_order_relaxed);
    atomic_store_explicit(&l->next_events, g->events, memory_order_release);
    g->offered = 1;
    return 1;
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
    /* No producer now: the lane's grown rings go back and it starts again in its first ring,
     * before anyone can claim it. */
    lane_grow_state *g = segment_grow_state(s, i);
    lane_rings r;
    if (g && lane_rings_read(s, l, &r) == 0 && (r.old_events || segment_ring_grown(s, r.off))) {
        old_ring_passed(s, i, l, head);
        segment_grow_free(s, r.off, r.events, UINT64_MAX);
        uint32_t first = segment_geometry_of(s)->lane_events;
        uint64_t off = segment_first_ring_off(s, i);
        ring_reset(l, off, first);
        if (mirror != l)
            ring_reset(mirror, off, first);
        g->freed_seq = atomic_load_explicit(&l->ring_seq, memory_order_relaxed);
    }
    if (g && g->events) { /* a ring made ready or offered, never taken */
        atomic_store_explicit(&l->next_events, 0, memory_order_relaxed);
        segment_grow_free(s, g->off, g->events, g->populated);
        g->events = 0;
        g->offered = 0;
    }
    uint32_t expect = TS_LANE_RETIRED;
    if (!atomic_compare_exchange_strong_explicit(&l->state, &expect, TS_LANE_FREE,
                                                 memory_order_release, memory_order_relaxed))
        return 0;
    if (mirror != l)
        atomic_store_explicit(&mirror->state, TS_LANE_FREE, memory_order_relaxed);
    return 1;
}

size_t lane_observe(const segment *s, uint32_t i, uint64_t *cursor, ts_event *out, size_t max,
                    uint64_t *missed)
{
    ts_lane *l = segment_lane(s, i);
    lane_rings r;
    if (!l)
        return 0;
    uint64_t head = atomic_load_explicit(&l->head, memory_order_acquire);
    if (lane_rings_read(s, l, &r) != 0)
        return 0;
    ts_event *ring = r.ring;
    uint64_t cap = r.events;
    uint64_t cur = *cursor;
    if (cur > head) /* the lane was reset or damaged: follow it from where it is */
        cur = head;
    if (r.old && (int64_t)(cur - r.from) < 0 && (int64_t)(head - r.from) >= 0) {
        /* What is left in a ring the lane has grown out of may be given back while we copy:
         * only the ring it writes now is read. */
        *missed += r.from - cur;
        cur = r.from;
    }
    if (head - cur > cap) {
        *missed += head - cap - cur;
        cur = head - cap;
    }
    size_t n = head - cur < max ? (size_t)(head - cur) : max;
    for (size_t k = 0; k < n; k++)
        /* the producer may be rewriting the slot: checked against head below */
        words_load(&out[k], &ring[(cur + k) & (cap - 1)], sizeof(ts_event));
    atomic_thread_fence(memory_order_acquire);
    uint64_t after = atomic_load_explicit(&l->head, memory_order_relaxed);
    if (atomic_load_explicit(&l->ring_seq, memory_order_relaxed) != r.seq) {
        /* The lane grew (or was reset) during the copy: the next call reads the new ring. */
        *cursor = cur;
        return 0;
    }
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
