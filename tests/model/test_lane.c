/* Lanes: single-producer rings in a real shared-memory segment, one thread. Order and wraparound,
 * drops when full (never overwriting what the consumer has not taken), claim/retire/reclaim,
 * growing, the non-consuming observer lapped, and damaged indexes. */
#include "model_test.h"
#include "lane_test.h"

#include <pthread.h>
#include <sched.h>
#include <stdarg.h>

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static uint64_t rnd_next(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static lane_writer claim(const segment *s, uint32_t tid)
{
    lane_writer w;
    memset(&w, 0, sizeof w);
    ck_assert_int_eq(lane_claim(s, tid, &w), 0);
    ck_assert_ptr_nonnull(w.lane);
    return w;
}

/* The index of a lane given by its control block (the creator's own copy) or its record in the
 * segment. */
static uint32_t lane_index(const segment *s, const ts_lane *l)
{
    for (uint32_t i = 0; i < segment_header(s)->lane_count; i++)
        if (segment_lane(s, i) == l || segment_lane_ctl(s, i) == l)
            return i;
    ck_abort_msg("lane %p is not in the segment", (const void *)l);
    return UINT32_MAX;
}

/* Peeks lane i and checks the two runs against the ring and the expected sequence from *next;
 * returns how many events there were. */
static size_t peek_check(const segment *s, uint32_t i, uint64_t *next, uint32_t tag)
{
    lane_run run;
    size_t n = lane_peek(s, i, &run);
    uint64_t cap = segment_header(s)->lane_events;
    const ts_event *ring = segment_ring(s, i);
    uint64_t tail = atomic_load(&segment_lane_ctl(s, i)->tail);
    ck_assert_uint_eq(lane_run_count(&run), n);
    ck_assert_uint_le(n, cap);
    if (n) {
        ck_assert_ptr_eq(run.a, ring + (tail & (cap - 1)));
        ck_assert_uint_eq(run.na, n < cap - (tail & (cap - 1)) ? n : cap - (tail & (cap - 1)));
    }
    if (run.nb)
        ck_assert_ptr_eq(run.b, ring);
    else
        ck_assert_ptr_null(run.b);
    for (size_t k = 0; k < n; k++) {
        const ts_event *e = lane_run_at(&run, k);
        ck_assert_uint_eq(e->v0, *next);
        ck_assert_msg(ev_ok(e, tag), "event %llu damaged", (unsigned long long)e->v0);
        (*next)++;
    }
    return n;
}

/* ------------------------------------------------------------------------------------------ */
/* One thread                                                                                 */
/* ------------------------------------------------------------------------------------------ */

static const uint32_t ring_sizes[] = {64, 128, 256, 1024, 4096};

START_TEST(test_order_and_wraparound)
{
    uint32_t cap = ring_sizes[_i];
    segment *s = lane_segment(0, 2, cap);
    lane_writer w = claim(s, 101);
    uint32_t li = lane_index(s, w.lane);
    uint64_t pushed = 0, consumed = 0, drops = 0, rng = 0x9e3779b97f4a7c15ull ^ cap;
    /* Random bursts, sometimes one more than fits, and random partial consumption: every split
     * of the ring into two runs gets exercised. */
    while (consumed < 8ull * cap) {
        uint64_t burst = rnd_next(&rng) % (cap + 2);
        for (uint64_t k = 0; k < burst; k++) {
            ts_event e = ev_make(pushed, 7);
            int r = lane_push(&w, &e);
            if (pushed - consumed < cap) {
                ck_assert_int_eq(r, 1);
                pushed++;
            } else {
                ck_assert_int_eq(r, 0);
                drops++;
            }
        }
        ck_assert_uint_eq(atomic_load(&w.lane->head), pushed);
        ck_assert_uint_eq(atomic_load(&w.mirror->head), pushed); /* what observers read */
        uint64_t next = consumed;
        size_t n = peek_check(s, li, &next, 7);
        ck_assert_uint_eq(n, pushed - consumed);
        size_t take = (size_t)(rnd_next(&rng) % (n + 1));
        lane_consume(s, li, take);
        consumed += take;
        ck_assert_uint_eq(atomic_load(&w.lane->tail), consumed);
        ck_assert_uint_eq(atomic_load(&w.mirror->tail), consumed);
    }
    ck_assert_uint_eq(atomic_load(&w.lane->drops), drops);
    ck_assert_uint_eq(atomic_load(&w.mirror->drops), drops);
    ck_assert_ptr_eq(w.mirror, segment_lane(s, li));
    ck_assert_ptr_eq(w.lane, segment_lane_ctl(s, li));
    ck_assert_ptr_ne(w.lane, w.mirror); /* the creator's control block is its own */
    ck_assert_uint_gt(drops, 0);        /* the bursts did overfill */
    /* The other lane saw nothing. */
    lane_run run;
    ck_assert_uint_eq(lane_peek(s, 1 - li, &run), 0);
    segment_close(s, 1);
}
END_TEST

START_TEST(test_full_ring_drops_and_keeps)
{
    const uint32_t cap = 64;
    segment *s = lane_segment(1, 1, cap);
    lane_writer w = claim(s, 102);
    ts_event *ring = segment_ring(s, 0);
    for (uint64_t i = 0; i < cap; i++) {
        ts_event e = ev_make(i, 1);
        ck_assert_int_eq(lane_push(&w, &e), 1);
    }
    ts_event *before = malloc(cap * sizeof(ts_event));
    ck_assert_ptr_nonnull(before);
    memcpy(before, ring, cap * sizeof(ts_event));
    for (uint64_t i = 0; i < 100; i++) {
        ts_event e = ev_make(1000 + i, 1);
        ck_assert_int_eq(lane_push(&w, &e), 0);
        ck_assert_uint_eq(atomic_load(&w.lane->drops), i + 1);
    }
    ck_assert_int_eq(memcmp(before, ring, cap * sizeof(ts_event)), 0);
    ck_assert_uint_eq(atomic_load(&w.lane->head), cap);

    uint64_t next = 0;
    ck_assert_uint_eq(peek_check(s, 0, &next, 1), cap);
    lane_consume(s, 0, 10);
    /* Exactly the ten released slots are writable again. */
    for (uint64_t i = cap; i < cap + 10; i++) {
        ts_event e = ev_make(i, 1);
        ck_assert_int_eq(lane_push(&w, &e), 1);
    }
    ts_event e = ev_make(cap + 10, 1);
    ck_assert_int_eq(lane_push(&w, &e), 0);
    ck_assert_uint_eq(atomic_load(&w.lane->drops), 101);
    ck_assert_int_eq(memcmp(before + 10, ring + 10, (cap - 10) * sizeof(ts_event)), 0);

    lane_run run;
    ck_assert_uint_eq(lane_peek(s, 0, &run), cap);
    ck_assert_ptr_eq(run.a, ring + 10);
    ck_assert_uint_eq(run.na, cap - 10);
    ck_assert_ptr_eq(run.b, ring);
    ck_assert_uint_eq(run.nb, 10);
    next = 10;
    ck_assert_uint_eq(peek_check(s, 0, &next, 1), cap);
    free(before);
    segment_close(s, 1);
}
END_TEST

/* ------------------------------------------------------------------------------------------ */
/* Claims                                                                                     */
/* ------------------------------------------------------------------------------------------ */

START_TEST(test_claim_retire_reclaim)
{
    segment *s = lane_segment(2, 4, 64);
    ts_segment_header *h = segment_header(s);
    lane_writer w[4];
    for (uint32_t i = 0; i < 4; i++) {
        w[i] = claim(s, 200 + i);
        ck_assert_uint_eq(atomic_load(&w[i].lane->state), TS_LANE_OWNED);
        ck_assert_uint_eq(atomic_load(&w[i].lane->tid), 200 + i);
        ck_assert_uint_eq(atomic_load(&w[i].lane->generation), 1);
        for (uint32_t j = 0; j < i; j++)
            ck_assert_ptr_ne(w[i].lane, w[j].lane);
    }
    ck_assert_uint_eq(atomic_load(&h->lanes_used), 4);
    lane_writer extra;
    memset(&extra, 0, sizeof extra);
    ck_assert_int_eq(lane_claim(s, 300, &extra), -1);
    ck_assert_ptr_null(extra.lane);

    ts_lane *l1 = w[1].lane;
    uint32_t i1 = lane_index(s, l1);
    for (uint64_t k = 0; k < 3; k++) {
        ts_event e = ev_make(k, 9);
        ck_assert_int_eq(lane_push(&w[1], &e), 1);
    }
    lane_retire(&w[1]);
    ck_assert_ptr_null(w[1].lane);
    lane_retire(&w[1]); /* a second retire of the cleared writer does nothing */
    ck_assert_uint_eq(atomic_load(&l1->state), TS_LANE_RETIRED);
    /* Not drained yet: stays retired, and is not claimable. */
    ck_assert_int_eq(lane_reclaim(s, i1), 0);
    ck_assert_int_eq(lane_claim(s, 301, &extra), -1);
    uint64_t next = 0;
    ck_assert_uint_eq(peek_check(s, i1, &next, 9), 3);
    lane_consume(s, i1, 3);
    /* Owned, free and out-of-range lanes are not reclaimed. */
    ck_assert_int_eq(lane_reclaim(s, lane_index(s, w[0].lane)), 0);
    ck_assert_int_eq(lane_reclaim(s, 4), 0);
    ck_assert_int_eq(lane_reclaim(s, i1), 1);
    ck_assert_uint_eq(atomic_load(&l1->state), TS_LANE_FREE);
    ck_assert_int_eq(lane_reclaim(s, i1), 0);

    lane_writer again = claim(s, 302);
    ck_assert_ptr_eq(again.lane, l1);
    ck_assert_uint_eq(atomic_load(&l1->generation), 2);
    ck_assert_uint_eq(atomic_load(&l1->tid), 302);
    ck_assert_uint_eq(again.head, 3); /* indexes go on */
    ts_event e = ev_make(3, 9);
    ck_assert_int_eq(lane_push(&again, &e), 1);
    ck_assert_uint_eq(peek_check(s, i1, &next, 9), 1);
    ck_assert_uint_eq(next, 4);
    lane_run run;
    lane_peek(s, i1, &run);
    ck_assert_ptr_eq(run.a, segment_ring(s, i1) + 3);
    ck_assert_uint_eq(atomic_load(&h->lanes_used), 4);
    segment_close(s, 1);
}
END_TEST

/* ------------------------------------------------------------------------------------------ */
/* Observer                                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* Pushes n events with consecutive sequences from the lane's head, consuming as it goes. */
static void push_consume(const segment *s, uint32_t li, lane_writer *w, uint64_t n)
{
    for (uint64_t k = 0; k < n; k++) {
        ts_event e = ev_make(w->head, 3);
        ck_assert_int_eq(lane_push(w, &e), 1);
        lane_run run;
        lane_consume(s, li, lane_peek(s, li, &run));
    }
}

static void observed_are(const ts_event *out, size_t n, uint64_t first)
{
    for (size_t k = 0; k < n; k++) {
        ck_assert_uint_eq(out[k].v0, first + k);
        ck_assert(ev_ok(&out[k], 3));
    }
}

/* The observer is read-only (a read-only mapping, as in another process) and independent of the
 * consumer. Once the producer is a full ring ahead, the oldest slot of the window counts as
 * missed as well: the producer may be rewriting it as index head at that very moment. */
START_TEST(test_observer_lapped)
{
    const uint32_t cap = 64;
    pid_t pid = mt_pid(5);
    segment_config cfg = mt_config(pid);
    cfg.lane_count = 1;
    cfg.lane_events = cap;
    segment *s = mt_create(&cfg);
    segment *ro = mt_attach(pid, 0);
    lane_writer w = claim(s, 500);
    ts_event out[2 * 64];
    uint64_t cursor = 0, missed = 0;

    /* Fewer than a ring: everything, nothing missed. */
    push_consume(s, 0, &w, 40);
    ck_assert_uint_eq(lane_observe(ro, 0, &cursor, out, 2 * cap, &missed), 40);
    observed_are(out, 40, 0);
    ck_assert_uint_eq(cursor, 40);
    ck_assert_uint_eq(missed, 0);

    /* Lapped five times over. */
    push_consume(s, 0, &w, 5 * cap + 10 - 40);
    uint64_t head = 5 * cap + 10;
    cursor = 0;
    missed = 0;
    size_t n = lane_observe(ro, 0, &cursor, out, 2 * cap, &missed);
    ck_assert_uint_eq(n, cap - 1);
    ck_assert_uint_eq(missed, head - cap + 1);
    observed_are(out, n, head - cap + 1);
    ck_assert_uint_eq(cursor, head);
    /* Caught up: nothing new, nothing missed. */
    ck_assert_uint_eq(lane_observe(ro, 0, &cursor, out, 2 * cap, &missed), 0);
    ck_assert_uint_eq(missed, head - cap + 1);
    ck_assert_uint_eq(cursor, head);

    /* New events, read in pieces smaller than what is there. */
    push_consume(s, 0, &w, 5);
    ck_assert_uint_eq(lane_observe(ro, 0, &cursor, out, 3, &missed), 3);
    observed_are(out, 3, head);
    ck_assert_uint_eq(lane_observe(ro, 0, &cursor, out, 3, &missed), 2);
    observed_are(out, 2, head + 3);
    head += 5;
    ck_assert_uint_eq(cursor, head);
    ck_assert_uint_eq(missed, head - 5 - cap + 1);

    /* A cursor within the ring but behind: the events from there on. */
    cursor = head - 35;
    missed = 0;
    ck_assert_uint_eq(lane_observe(ro, 0, &cursor, out, 2 * cap, &missed), 35);
    observed_are(out, 35, head - 35);
    ck_assert_uint_eq(missed, 0);

    /* A cursor ahead of the lane (the lane was reset): it follows the lane. */
    cursor = head + 1000;
    ck_assert_uint_eq(lane_observe(ro, 0, &cursor, out, 2 * cap, &missed), 0);
    ck_assert_uint_eq(cursor, head);
    ck_assert_uint_eq(missed, 0);

    /* Out of range. */
    cursor = 0;
    ck_assert_uint_eq(lane_observe(ro, 1, &cursor, out, 2 * cap, &missed), 0);
    ck_assert_uint_eq(lane_observe(ro, UINT32_MAX, &cursor, out, 2 * cap, &missed), 0);

    /* The observer changed nothing. */
    ck_assert_uint_eq(atomic_load(&w.lane->head), head);
    ck_assert_uint_eq(atomic_load(&w.lane->tail), head);
    ck_assert_uint_eq(atomic_load(&w.lane->drops), 0);
    segment_close(ro, 0);
    segment_close(s, 1);
}
END_TEST

/* ------------------------------------------------------------------------------------------ */
/* Growing                                                                                    */
/* ------------------------------------------------------------------------------------------ */

/* Pushes n events whose sequence is their index; all must fit. */
static void push_n(lane_writer *w, uint64_t n)
{
    for (uint64_t k = 0; k < n; k++) {
        ts_event e = ev_make(w->head, 3);
        ck_assert_int_eq(lane_push(w, &e), 1);
    }
}

/* One peek of lane li, checked from *next on and consumed; returns its count. */
static size_t drain_one(const segment *s, uint32_t li, uint64_t *next)
{
    lane_run run;
    size_t n = lane_peek(s, li, &run);
    for (size_t k = 0; k < n; k++) {
        const ts_event *e = lane_run_at(&run, k);
        ck_assert_uint_eq(e->v0, *next);
        ck_assert(ev_ok(e, 3));
        (*next)++;
    }
    lane_consume(s, li, n);
    return n;
}

/* A full lane takes the larger ring the consumer offered, at its head. The consumer reads the
 * old ring up to there, then the new one, in order; the old grown ring goes back once passed,
 * and no other ring is offered before; the budget holds; an observer reads the new ring; a
 * reclaimed lane starts again in its first ring. */
START_TEST(test_grow_switch)
{
    const uint64_t ev = sizeof(ts_event);
    segment *s = grow_segment(9, 2, 64, 1024, (256 + 1024) * ev);
    lane_writer w = claim(s, 5);
    uint32_t li = lane_index(s, w.lane);
    uint64_t next = 0;
    push_n(&w, 64);
    ts_event e = ev_make(w.head, 3);
    ck_assert_int_eq(lane_push(&w, &e), 0); /* full, nothing offered: dropped */
    ck_assert_uint_eq(atomic_load(&w.lane->drops), 1);

    /* 16 KiB had 4 KiB per call, then offered; the producer has not taken it yet. */
    ck_assert_int_eq(lane_grow(s, li, 256, 4096), 0);
    ck_assert_int_eq(lane_grow(s, li, 0, 4096), 0);
    ck_assert_int_eq(lane_grow(s, li, 0, 4096), 0);
    ck_assert_int_eq(lane_grow(s, li, 0, 4096), 1);
    ck_assert_int_eq(lane_grow(s, li, 0, 4096), 1);
    ck_assert_uint_eq(grow_used(s), 256 * ev);
    ck_assert_uint_eq(lane_capacity(s, li), 64);
    push_n(&w, 200); /* the first push takes it: no drop */
    ck_assert_uint_eq(atomic_load(&w.lane->drops), 1);
    ck_assert_uint_eq(lane_capacity(s, li), 256);
    ck_assert_uint_eq(atomic_load(&segment_lane(s, li)->ring_events), 256); /* the mirror */
    /* The old ring is not passed yet: no other ring. */
    ck_assert_int_eq(lane_grow(s, li, 1024, 1u << 20), -1);
    ck_assert_uint_eq(drain_one(s, li, &next), 64);
    ck_assert_uint_eq(drain_one(s, li, &next), 200);
    ck_assert_uint_eq(drain_one(s, li, &next), 0);
    ck_assert_uint_eq(grow_used(s), 256 * ev); /* the first ring is no grown one */

    /* Again, to 1024, taken when the ring looks full to the producer: it last read the tail at
     * index 64, so at index 320 (the consumer is at 264). One more would be over the budget. */
    ck_assert_int_eq(lane_grow(s, li, 1024, 1u << 20), 1);
    ck_assert_uint_eq(grow_used(s), (256 + 1024) * ev);
    push_n(&w, 56 + 500);
    ck_assert_uint_eq(lane_capacity(s, li), 1024);
    ck_assert_uint_eq(atomic_load(&w.lane->ring_from), 320);
    ck_assert_uint_eq(drain_one(s, li, &next), 56);
    ck_assert_uint_eq(grow_used(s), 1024 * ev); /* the 256-event ring went back */
    ck_assert_uint_eq(drain_one(s, li, &next), 500);
    ck_assert_int_eq(lane_grow(s, li, 4096, 1u << 20), -1); /* over the largest lane */

    /* An observer in another process reads the ring the lane writes now. */
    segment *ro = mt_attach(segment_header(s)->pid, 0);
    ts_event out[1024];
    uint64_t cursor = 0, missed = 0;
    ck_assert_uint_eq(lane_observe(ro, li, &cursor, out, 1024, &missed), 500);
    observed_are(out, 500, 320);
    ck_assert_uint_eq(missed, 320);
    segment_close(ro, 0);

    lane_retire(&w);
    ck_assert_int_eq(lane_reclaim(s, li), 1);
    ck_assert_uint_eq(grow_used(s), 0);
    ck_assert_uint_eq(lane_capacity(s, li), 64);
    w = claim(s, 6);
    ck_assert_uint_eq(lane_index(s, w.lane), li);
    push_n(&w, 64);
    e = ev_make(w.head, 3);
    ck_assert_int_eq(lane_push(&w, &e), 0);
    segment_close(s, 1);
}
END_TEST

/* ------------------------------------------------------------------------------------------ */
/* Damaged lanes                                                                              */
/* ------------------------------------------------------------------------------------------ */

static const struct damaged_lane {
    uint64_t head, tail;
    uint64_t expect; /* UINT64_MAX: one ring */
} damaged_lanes[] = {
    {1ull << 40, 0, UINT64_MAX},       /* head far ahead */
    {65, 0, UINT64_MAX},               /* one more than a ring */
    {0, 1000, UINT64_MAX},             /* tail ahead of head */
    {UINT64_MAX, 0, UINT64_MAX},       /* head at the end of the range */
    {5, UINT64_MAX - 2, 8},            /* indexes wrapping around 2^64: a legitimate 8 */
    {1000, 1000, 0},                   /* empty */
    {(1ull << 40) + 3, 1ull << 40, 3}, /* far along, but consistent */
};

START_TEST(test_damaged_lane)
{
    const struct damaged_lane *d = &damaged_lanes[_i];
    const uint32_t cap = 64;
    segment *owner = lane_segment(7, 2, cap);
    /* Another process rewrites lane 1's record in the segment. */
    ts_lane *l = segment_lane(owner, 1);
    atomic_store(&l->head, d->head);
    atomic_store(&l->tail, d->tail);

    /* The creator goes by its own control block: it sees nothing, and its producer and consumer
     * still agree. */
    lane_run run;
    ck_assert_uint_eq(lane_peek(owner, 1, &run), 0);
    lane_writer ow = claim(owner, 77);
    ck_assert_uint_eq(lane_index(owner, ow.lane), 0);
    lane_writer w1 = claim(owner, 78);
    ck_assert_uint_eq(lane_index(owner, w1.lane), 1);
    ts_event e = ev_make(0, 3);
    ck_assert_int_eq(lane_push(&w1, &e), 1);
    uint64_t next = 0;
    ck_assert_uint_eq(peek_check(owner, 1, &next, 3), 1);
    lane_consume(owner, 1, 1);
    ck_assert_uint_eq(lane_peek(owner, 1, &run), 0);
    ck_assert_uint_eq(segment_lanes_used(owner), 2);
    atomic_store(&segment_header(owner)->lanes_used, UINT32_MAX);
    ck_assert_uint_eq(segment_lanes_used(owner), 2);
    atomic_store(&l->head, d->head);
    atomic_store(&l->tail, d->tail);

    /* An attacher (salvage after the process died) reads the segment's records, clamped to one
     * ring. */
    segment *s = mt_attach(segment_header(owner)->pid, 1);
    uint64_t expect = d->expect == UINT64_MAX ? cap : d->expect;
    size_t n = lane_peek(s, 1, &run);
    ck_assert_uint_eq(n, expect);
    ck_assert_uint_eq(lane_run_count(&run), n);
    const ts_event *ring = segment_ring(s, 1);
    if (run.na) {
        ck_assert(run.a >= ring && run.a + run.na <= ring + cap);
    }
    if (run.nb) {
        ck_assert_ptr_eq(run.b, ring);
        ck_assert_uint_le(run.nb, cap);
    }

    /* The observer follows the lane and reads at most one ring. */
    ts_event out[2 * 64];
    uint64_t cursor = d->tail, missed = 0;
    size_t got = lane_observe(s, 1, &cursor, out, 2 * cap, &missed);
    ck_assert_uint_le(got, cap);
    ck_assert_uint_eq(cursor, d->head);
    if (d->tail <= d->head)
        ck_assert_uint_eq(got + missed, d->head - d->tail);

    /* Out of range. */
    ck_assert_uint_eq(lane_peek(s, 2, &run), 0);
    ck_assert_ptr_null(run.a);
    ck_assert_ptr_null(run.b);
    ck_assert_uint_eq(lane_run_count(&run), 0);
    lane_consume(s, 2, 5); /* no effect, no crash */
    segment_close(s, 0);
    segment_close(owner, 1);
}
END_TEST

static Suite *lane_suite(void)
{
    Suite *s = suite_create("lane");
    TCase *tc = tcase_create("single");
    tcase_add_unchecked_fixture(tc, NULL, mt_unlink_band);
    tcase_add_loop_test(tc, test_order_and_wraparound, 0, sizeof ring_sizes / sizeof ring_sizes[0]);
    tcase_add_test(tc, test_full_ring_drops_and_keeps);
    tcase_add_test(tc, test_claim_retire_reclaim);
    tcase_add_test(tc, test_grow_switch);
    tcase_add_test(tc, test_observer_lapped);
    tcase_add_loop_test(tc, test_damaged_lane, 0, sizeof damaged_lanes / sizeof damaged_lanes[0]);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return mt_run(lane_suite());
}
