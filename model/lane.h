/* model: lanes, one single-producer ring per producing thread in the segment (lane.c). */
#ifndef TERMSIGHT_MODEL_LANE_H
#define TERMSIGHT_MODEL_LANE_H

#include "base.h"
#include "event.h"
#include "segment.h"

/* The producer's private view of its lane (thread-local in the collector). */
typedef struct lane_writer {
    ts_lane *lane;   /* segment_lane_ctl: what producer and consumer go by */
    ts_lane *mirror; /* segment_lane: the copy observers read; never read back */
    ts_event *ring;
    uint64_t mask;
    uint64_t head;        /* our copy of lane->head */
    uint64_t cached_tail; /* last tail seen, at least ring_from; re-read when the ring looks full */
    uint64_t ring_from;   /* the first index in ring */
    uint64_t ring_off;
    const segment *seg;
    uint32_t open_seq; /* our copy of mirror->open_seq */
} lane_writer;

/* A ring's fields as one reader saw them whole (the lane's sequence lock). */
typedef struct lane_rings {
    uint32_t seq;
    ts_event *ring; /* indexes from `from` on; NULL when the fields name no ring */
    uint32_t events;
    uint64_t off, from;
    ts_event *old; /* indexes below `from`; NULL when none */
    uint32_t old_events;
    uint64_t old_off;
} lane_rings;

/* l's rings as whole fields, checked against s. 0, or -1 when they stay torn (a writer died
 * mid-way or the record is damaged) or name no ring of s. */
int lane_rings_read(const segment *s, const ts_lane *l, lane_rings *out);

/* The producer's slow path, when its ring looks full: takes a larger ring the consumer offered,
 * else re-reads the consumer's tail. 1 when there is room now. No lock, no system call. */
int lane_make_room(lane_writer *w);

/* Claims a free lane of s for thread tid. Returns 0, or -1 when every lane is taken. */
int lane_claim(const segment *s, uint32_t tid, lane_writer *w);

/* The producer's thread ends: the consumer frees the lane once it has drained it. */
void lane_retire(lane_writer *w);

/* Appends ev. No lock, no allocation, no system call. Returns 1, or 0 when the ring is full (the
 * drop is counted in the lane). */
static inline int lane_push(lane_writer *w, const ts_event *ev)
{
    uint64_t h = w->head;
    if (h - w->cached_tail > w->mask && !lane_make_room(w)) {
        uint64_t d = atomic_fetch_add_explicit(&w->lane->drops, 1, memory_order_relaxed);
        atomic_store_explicit(&w->mirror->drops, d + 1, memory_order_relaxed);
        return 0;
    }
    /* Orders the previous head store before this slot's stores, so an observer that copied a
     * half-written slot also sees the head that tells it so (lane_observe). The slot is written
     * as eight words with relaxed atomic stores because that observer may read it concurrently
     * (on x86 both are plain moves). Each word is built from the fields rather than re-read
     * from *ev: reading 8 bytes that were just stored 2 and 4 at a time stalls store-to-load
     * forwarding, about 5 ns an event. */
    atomic_thread_fence(memory_order_release);
    uint64_t *to = (uint64_t *)(void *)&w->ring[h & w->mask];
    __atomic_store_n(&to[0],
                     (uint64_t)ev->kind | (uint64_t)ev->flags << 16 | (uint64_t)ev->tid << 32,
                     __ATOMIC_RELAXED);
    __atomic_store_n(&to[1], (uint64_t)ev->device | (uint64_t)ev->aux << 32, __ATOMIC_RELAXED);
    __atomic_store_n(&to[2], (uint64_t)ev->name | (uint64_t)ev->type << 32, __ATOMIC_RELAXED);
    __atomic_store_n(&to[3], ev->begin_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&to[4], ev->end_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&to[5], ev->corr, __ATOMIC_RELAXED);
    __atomic_store_n(&to[6], ev->v0, __ATOMIC_RELAXED);
    __atomic_store_n(&to[7], ev->v1, __ATOMIC_RELAXED);
    w->head = h + 1;
    atomic_store_explicit(&w->lane->head, h + 1, memory_order_release);
    atomic_store_explicit(&w->mirror->head, h + 1, memory_order_release);
    return 1;
}

/* The producer, on its hot path: publishes its thread's innermost open range (depth 0: none open)
 * in its lane's mirror for monitors, under the open range's sequence lock: two stores of the
 * sequence around four relaxed ones, on the producer's own cache line; nothing read back. */
static inline void lane_open_set(lane_writer *w, uint32_t depth, uint32_t name, uint32_t window,
                                 uint64_t begin_ns)
{
    ts_lane *m = w->mirror;
    uint32_t q = w->open_seq;
    w->open_seq = q + 2;
    atomic_store_explicit(&m->open_seq, q + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&m->open_depth, depth, memory_order_relaxed);
    atomic_store_explicit(&m->open_name, name, memory_order_relaxed);
    atomic_store_explicit(&m->open_window, window, memory_order_relaxed);
    atomic_store_explicit(&m->open_begin_ns, begin_ns, memory_order_relaxed);
    atomic_store_explicit(&m->open_seq, q + 2, memory_order_release);
}

/* Events as at most two contiguous runs (a and then b, where a lane's ring wraps): what a drain
 * finds in a lane, and what the recorder, the flight recorder and the recording writer take. A run
 * may be NULL when its count is 0. */
typedef struct lane_run {
    const ts_event *a, *b;
    size_t na, nb;
} lane_run;

/* One contiguous array of n events as a run. */
static inline lane_run lane_run_of(const ts_event *ev, size_t n)
{
    return (lane_run){.a = ev, .na = n};
}

/* The events in a run. */
static inline size_t lane_run_count(const lane_run *r)
{
    return r->na + r->nb;
}

/* Event k (below lane_run_count) of a run. */
static inline const ts_event *lane_run_at(const lane_run *r, size_t k)
{
    return k < r->na ? &r->a[k] : &r->b[k - r->na];
}

/* The first events of *rest, at most max, into *piece, and *rest stepped past them: how many. */
size_t lane_run_take(lane_run *rest, size_t max, lane_run *piece);

/* Consumer: the events published and not yet consumed, as at most two contiguous runs of one
 * ring (of the old ring first, while the consumer has not passed it: a later peek has the rest),
 * into *out. Returns the total; release them with lane_consume. head and tail come from shared
 * memory and are clamped so that a damaged lane yields at most one ring's worth. */
size_t lane_peek(const segment *s, uint32_t i, lane_run *out);
/* The same from index `from` on instead of the tail (a reader that does not consume). */
size_t lane_peek_at(const segment *s, uint32_t i, uint64_t from, lane_run *out);
/* Releases n events; an old ring the consumer has passed goes back to the grow region. */
void lane_consume(const segment *s, uint32_t i, size_t n);

/* The size of lane i's ring now (0 when its fields name no ring). */
uint32_t lane_capacity(const segment *s, uint32_t i);

/* Consumer, the segment's creator: makes a ring of `events` ready for lane i, had bytes at a time
 * (a large ring's pages cost milliseconds: the drains go on between), then offers it; the
 * producer takes it when its ring is full. Returns 1 when a ring was offered or is waiting to be
 * taken, 0 while pages are being had, -1 when lane i cannot grow now (no budget, shared memory
 * full, its old ring not yet passed, or events not larger than its ring). A call with events 0
 * only goes on with a ring begun before. */
int lane_grow(const segment *s, uint32_t i, uint32_t events, uint64_t bytes);

/* Consumer: a retired lane that is fully drained becomes free. Returns 1 when it was freed. */
int lane_reclaim(const segment *s, uint32_t i);

/* Observer (another process, read-only): copies up to max events from *cursor onward into out,
 * never writing to the lane. Events the producer overwrote before or during the copy are not
 * returned and are added to *missed; *cursor advances past what was returned or missed. */
size_t lane_observe(const segment *s, uint32_t i, uint64_t *cursor, ts_event *out, size_t max,
                    uint64_t *missed);

#endif
