/* Lanes: single-producer rings in a real shared-memory segment. Order and wraparound, drops when
 * full (never overwriting what the consumer has not taken), many producer threads drained by a
 * real consumer thread, claim/retire/reclaim, the non-consuming observer (lapping, torn copies),
 * and damaged indexes. */
#include "model_test.h"

#include <pthread.h>
#include <sched.h>
#include <stdarg.h>

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                    */
/* ------------------------------------------------------------------------------------------ */

/* Every field derives from (seq, tag), so a torn or misplaced copy shows. */
static ts_event ev_make(uint64_t seq, uint32_t tag)
{
    ts_event e;
    e.kind = (uint16_t)(1 + seq % (TS_KIND__COUNT - 1));
    e.flags = (uint16_t)(seq >> 7);
    e.tid = tag;
    e.device = (uint32_t)seq;
    e.aux = ~(uint32_t)seq;
    e.name = (uint32_t)(seq * 2654435761u);
    e.type = tag ^ 0x5a5a5a5au;
    e.begin_ns = seq * 3;
    e.end_ns = seq * 3 + 1;
    e.corr = seq ^ 0x0123456789abcdefull;
    e.v0 = seq;
    e.v1 = ~seq;
    return e;
}

static int ev_ok(const ts_event *e, uint32_t tag)
{
    ts_event want = ev_make(e->v0, tag);
    return memcmp(&want, e, sizeof want) == 0;
}

static uint64_t rnd_next(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* Threads do not call ck_assert: they record the first failure here and stop; the test's thread
 * asserts on it after joining. */
static _Atomic int thread_failed;
static char thread_error[512];

__attribute__((format(printf, 1, 2))) static void thread_fail(const char *fmt, ...)
{
    int expect = 0;
    if (!atomic_compare_exchange_strong(&thread_failed, &expect, 1))
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(thread_error, sizeof thread_error, fmt, ap);
    va_end(ap);
}

static void threads_reset(void)
{
    atomic_store(&thread_failed, 0);
    thread_error[0] = 0;
}

static void threads_check(void)
{
    ck_assert_msg(!atomic_load(&thread_failed), "thread: %s", thread_error);
}

static segment *lane_segment(int pid_offset, uint32_t lanes, uint32_t cap)
{
    segment_config cfg = mt_config(mt_pid(pid_offset));
    cfg.lane_count = lanes;
    cfg.lane_events = cap;
    return mt_create(&cfg);
}

/* The same with lanes that grow from cap up to max events, within budget bytes. */
static segment *grow_segment(int pid_offset, uint32_t lanes, uint32_t cap, uint32_t max,
                             uint64_t budget)
{
    segment_config cfg = mt_config(mt_pid(pid_offset));
    cfg.lane_count = lanes;
    cfg.lane_events = cap;
    cfg.lane_max_events = max;
    cfg.grow_budget = budget;
    return mt_create(&cfg);
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

typedef struct claim_race {
    const segment *s;
    pthread_barrier_t *start;
    uint32_t tid;
    int rc;
    lane_writer w;
} claim_race;

static void *claim_racer(void *arg)
{
    claim_race *c = arg;
    memset(&c->w, 0, sizeof c->w);
    pthread_barrier_wait(c->start);
    c->rc = lane_claim(c->s, c->tid, &c->w);
    return NULL;
}

/* More threads than lanes claim at once, round after round: each lane goes to exactly one. */
START_TEST(test_claim_race)
{
    enum { LANES = 4 };
    unsigned nthreads = mt_scale(12, 6), rounds = mt_scale(200, 20);
    segment *s = lane_segment(3, LANES, 64);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, nthreads);
    claim_race *c = calloc(nthreads, sizeof *c);
    pthread_t *t = calloc(nthreads, sizeof *t);
    ck_assert(c && t);
    for (unsigned round = 1; round <= rounds; round++) {
        for (unsigned i = 0; i < nthreads; i++) {
            c[i] = (claim_race){.s = s, .start = &start, .tid = 400 + i};
            ck_assert_int_eq(pthread_create(&t[i], NULL, claim_racer, &c[i]), 0);
        }
        for (unsigned i = 0; i < nthreads; i++)
            pthread_join(t[i], NULL);
        unsigned won = 0;
        for (unsigned i = 0; i < nthreads; i++) {
            if (c[i].rc != 0) {
                ck_assert_int_eq(c[i].rc, -1);
                ck_assert_ptr_null(c[i].w.lane);
                continue;
            }
            won++;
            uint32_t owner = atomic_load(&c[i].w.lane->tid);
            ck_assert_msg(owner == c[i].tid, "round %u: lane of thread %u says tid %u", round,
                          c[i].tid, owner);
            for (unsigned j = 0; j < i; j++)
                ck_assert_msg(c[j].rc != 0 || c[j].w.lane != c[i].w.lane,
                              "round %u: threads %u and %u share a lane", round, j, i);
        }
        ck_assert_uint_eq(won, LANES);
        /* Give the lanes back through the protocol for the next round. */
        for (unsigned i = 0; i < nthreads; i++)
            lane_retire(&c[i].w);
        for (uint32_t i = 0; i < LANES; i++) {
            ck_assert_int_eq(lane_reclaim(s, i), 1);
            uint64_t gen = atomic_load(&segment_lane(s, i)->generation);
            ck_assert_uint_eq(gen, round);
        }
    }
    pthread_barrier_destroy(&start);
    free(c);
    free(t);
    segment_close(s, 1);
}
END_TEST

/* ------------------------------------------------------------------------------------------ */
/* Many producers, one consumer                                                               */
/* ------------------------------------------------------------------------------------------ */

typedef struct producer {
    const segment *s;
    pthread_barrier_t *start;
    _Atomic unsigned *done;
    uint32_t tag;
    uint64_t emit;
    uint64_t recorded, recorded_sum; /* pushes that returned 1, and the sum of their seqs */
} producer;

static void *producer_run(void *arg)
{
    producer *p = arg;
    lane_writer w;
    memset(&w, 0, sizeof w);
    int rc = lane_claim(p->s, 1000 + p->tag, &w);
    pthread_barrier_wait(p->start);
    if (rc != 0) {
        thread_fail("producer %u could not claim a lane", p->tag);
    } else {
        for (uint64_t seq = 0; seq < p->emit; seq++) {
            ts_event e = ev_make(seq, p->tag);
            if (lane_push(&w, &e)) {
                p->recorded++;
                p->recorded_sum += seq;
            } else {
                /* Dropped for good; give the consumer a chance so that events keep flowing
                 * rather than nearly all being dropped. */
                sched_yield();
            }
        }
        lane_retire(&w);
    }
    atomic_fetch_add(p->done, 1);
    return NULL;
}

typedef struct lane_tally {
    int64_t tag; /* -1 until the first event */
    uint64_t count, sum, last;
    int reclaimed;
} lane_tally;

typedef struct consumer {
    const segment *s;
    pthread_barrier_t *start;
    _Atomic unsigned *done;
    unsigned producers;
    lane_tally *tally; /* one per lane */
    int grow;          /* lanes found a quarter full get a ring four times larger */
    uint64_t grown;    /* rings offered */
} consumer;

/* Drains every lane once; returns the number of events taken, or -1 after a failure. */
static int64_t drain_pass(consumer *c)
{
    uint32_t used = atomic_load_explicit(&segment_header(c->s)->lanes_used, memory_order_acquire);
    int64_t total = 0;
    for (uint32_t i = 0; i < used; i++) {
        lane_run run;
        size_t n = lane_peek(c->s, i, &run);
        lane_tally *t = &c->tally[i];
        for (size_t k = 0; k < n; k++) {
            const ts_event *e = lane_run_at(&run, k);
            if (t->tag < 0)
                t->tag = e->tid;
            if (e->tid != (uint32_t)t->tag || !ev_ok(e, e->tid)) {
                thread_fail("lane %u: event seq %llu tid %u damaged or foreign (lane of %lld)", i,
                            (unsigned long long)e->v0, e->tid, (long long)t->tag);
                return -1;
            }
            if (t->count && e->v0 <= t->last) {
                thread_fail("lane %u: seq %llu after %llu", i, (unsigned long long)e->v0,
                            (unsigned long long)t->last);
                return -1;
            }
            t->last = e->v0;
            t->count++;
            t->sum += e->v0;
        }
        lane_consume(c->s, i, n);
        if (c->grow) {
            uint32_t cap = lane_capacity(c->s, i);
            uint32_t max = segment_header(c->s)->lane_max_events;
            int want = n > cap / 4 && cap < max;
            if (lane_grow(c->s, i, want ? cap * 4 : 0, 1u << 20) == 1 && want)
                c->grown++;
        }
        if (lane_reclaim(c->s, i))
            t->reclaimed++;
        total += (int64_t)n;
    }
    return total;
}

static void *consumer_run(void *arg)
{
    consumer *c = arg;
    pthread_barrier_wait(c->start);
    for (;;) {
        /* Read "all done" before the pass: a pass that then finds nothing saw everything. */
        int finished = atomic_load(c->done) == c->producers;
        int64_t n = drain_pass(c);
        if (n < 0 || (finished && n == 0))
            break;
        if (n == 0)
            sched_yield();
    }
    return NULL;
}

/* _i 0: rings of 128 events; 1: rings that start at 64 and grow up to 4096 while the consumer
 * finds them a quarter full. */
START_TEST(test_many_producers_one_consumer)
{
    unsigned np = mt_scale(8, 4);
    uint64_t emit = mt_scale(200000, 20000);
    segment *s = _i ? grow_segment(4, np, 64, 4096, (uint64_t)np * 4096 * sizeof(ts_event))
                    : lane_segment(4, np, 128);
    threads_reset();
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, np + 1);
    _Atomic unsigned done = 0;
    producer *p = calloc(np, sizeof *p);
    pthread_t *pt = calloc(np, sizeof *pt);
    lane_tally *tally = calloc(np, sizeof *tally);
    ck_assert(p && pt && tally);
    for (unsigned i = 0; i < np; i++)
        tally[i].tag = -1;
    consumer c = {
        .s = s, .start = &start, .done = &done, .producers = np, .tally = tally, .grow = _i};
    pthread_t ct;
    ck_assert_int_eq(pthread_create(&ct, NULL, consumer_run, &c), 0);
    for (unsigned i = 0; i < np; i++) {
        p[i] = (producer){.s = s, .start = &start, .done = &done, .tag = i, .emit = emit};
        ck_assert_int_eq(pthread_create(&pt[i], NULL, producer_run, &p[i]), 0);
    }
    for (unsigned i = 0; i < np; i++)
        pthread_join(pt[i], NULL);
    pthread_join(ct, NULL);
    threads_check();

    uint64_t recorded = 0, dropped = 0;
    for (unsigned i = 0; i < np; i++) {
        /* The lane that carried producer i's events. */
        int found = -1;
        for (unsigned l = 0; l < np; l++)
            if (tally[l].tag == (int64_t)i) {
                ck_assert_int_eq(found, -1);
                found = (int)l;
            }
        ck_assert_msg(found >= 0, "producer %u: no lane carried its events", i);
        ts_lane *lane = segment_lane(s, (uint32_t)found);
        uint64_t drops = atomic_load(&lane->drops);
        ck_assert_uint_eq(tally[found].count, p[i].recorded);
        ck_assert_uint_eq(tally[found].sum, p[i].recorded_sum);
        ck_assert_uint_eq(p[i].recorded + drops, emit);
        ck_assert_uint_eq(atomic_load(&lane->head), atomic_load(&lane->tail));
        /* Retired and drained, so the consumer freed it. */
        ck_assert_int_eq(tally[found].reclaimed, 1);
        ck_assert_uint_eq(atomic_load(&lane->state), TS_LANE_FREE);
        recorded += p[i].recorded;
        dropped += drops;
    }
    ck_assert_uint_eq(recorded + dropped, (uint64_t)np * emit);
    fprintf(stderr, "producers: %llu recorded, %llu dropped, %llu rings grown\n",
            (unsigned long long)recorded, (unsigned long long)dropped, (unsigned long long)c.grown);
    /* Every lane was reclaimed: every grown ring went back. */
    ck_assert_uint_eq(atomic_load(&segment_header(s)->grow_used), 0);
    ck_assert_uint_eq(atomic_load(&segment_header(s)->lanes_used), np);
    pthread_barrier_destroy(&start);
    free(p);
    free(pt);
    free(tally);
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

typedef struct race {
    const segment *s;  /* the owner's mapping: producer and consumer */
    const segment *ro; /* the observer's read-only mapping */
    pthread_barrier_t *start;
    _Atomic int producer_done;
    uint64_t emit;
    uint64_t observed, missed, calls;
    uint64_t final_head;
} race;

static void *race_producer(void *arg)
{
    race *r = arg;
    lane_writer w;
    memset(&w, 0, sizeof w);
    if (lane_claim(r->s, 600, &w) != 0)
        thread_fail("producer could not claim");
    pthread_barrier_wait(r->start);
    if (w.lane) {
        /* seq = the index the event gets, so readers can check each event's place. A full
         * ring drops (counted) and the event is offered again, so that the ring keeps turning
         * over under the observer. */
        for (uint64_t k = 0; k < r->emit; k++) {
            ts_event e = ev_make(w.head, 3);
            while (!lane_push(&w, &e))
                sched_yield();
        }
        r->final_head = w.head;
    }
    atomic_store(&r->producer_done, 1);
    return NULL;
}

static void *race_consumer(void *arg)
{
    race *r = arg;
    pthread_barrier_wait(r->start);
    uint64_t next = 0;
    for (;;) {
        int finished = atomic_load(&r->producer_done);
        lane_run run;
        size_t n = lane_peek(r->s, 0, &run);
        for (size_t k = 0; k < n; k++) {
            const ts_event *e = lane_run_at(&run, k);
            if (e->v0 != next || !ev_ok(e, 3)) {
                thread_fail("consumer: got seq %llu, expected %llu", (unsigned long long)e->v0,
                            (unsigned long long)next);
                return NULL;
            }
            next++;
        }
        lane_consume(r->s, 0, n);
        if (finished && n == 0)
            return NULL;
        if (n == 0)
            sched_yield();
    }
}

static void *race_observer(void *arg)
{
    race *r = arg;
    ts_event out[16];
    uint64_t cursor = 0, missed = 0;
    pthread_barrier_wait(r->start);
    const ts_lane *lane = segment_lane(r->ro, 0);
    for (;;) {
        int finished = atomic_load(&r->producer_done);
        uint64_t before = cursor, missed_before = missed;
        size_t n = lane_observe(r->ro, 0, &cursor, out, 16, &missed);
        r->calls++;
        if (cursor - before != n + (missed - missed_before)) {
            thread_fail("observer: cursor moved %llu for %zu events and %llu missed",
                        (unsigned long long)(cursor - before), n,
                        (unsigned long long)(missed - missed_before));
            return NULL;
        }
        for (size_t k = 0; k < n; k++) {
            uint64_t want = cursor - n + k;
            if (out[k].v0 != want || !ev_ok(&out[k], 3)) {
                thread_fail("observer: event %llu torn or misplaced (expected seq %llu)",
                            (unsigned long long)out[k].v0, (unsigned long long)want);
                return NULL;
            }
        }
        r->observed += n;
        if (finished && n == 0 && cursor == atomic_load_explicit(&lane->head, memory_order_acquire))
            break;
        if (n == 0)
            sched_yield();
    }
    r->missed = missed;
    return NULL;
}

/* The observer reads through its own read-only mapping, as the TUI does from another process.
 * (TSan keys its shadow memory by address and so does not see the observer's slot copies race
 * the producer's rewrites across the two mappings; that race is by design, and what this test
 * checks instead is its outcome: no torn or misplaced event is ever returned.) */
START_TEST(test_observer_concurrent)
{
    pid_t pid = mt_pid(6);
    segment_config cfg = mt_config(pid);
    cfg.lane_count = 1;
    cfg.lane_events = 64;
    segment *s = mt_create(&cfg);
    segment *ro = mt_attach(pid, 0);
    threads_reset();
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 3);
    race r = {.s = s, .ro = ro, .start = &start, .emit = mt_scale(400000, 30000)};
    pthread_t t[3];
    ck_assert_int_eq(pthread_create(&t[0], NULL, race_producer, &r), 0);
    ck_assert_int_eq(pthread_create(&t[1], NULL, race_consumer, &r), 0);
    ck_assert_int_eq(pthread_create(&t[2], NULL, race_observer, &r), 0);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    threads_check();
    ts_lane *lane = segment_lane(s, 0);
    ck_assert_uint_eq(atomic_load(&lane->head), r.final_head);
    ck_assert_uint_eq(r.final_head, r.emit);
    ck_assert_uint_eq(r.observed + r.missed, r.final_head);
    ck_assert_uint_gt(r.observed, 0);
    fprintf(stderr, "observer: %llu observed, %llu missed in %llu calls; %llu dropped\n",
            (unsigned long long)r.observed, (unsigned long long)r.missed,
            (unsigned long long)r.calls, (unsigned long long)atomic_load(&lane->drops));
    pthread_barrier_destroy(&start);
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

static uint64_t grow_used(const segment *s)
{
    return atomic_load(&segment_header(s)->grow_used);
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

    tc = tcase_create("threads");
    tcase_add_unchecked_fixture(tc, NULL, mt_unlink_band);
    tcase_add_test(tc, test_claim_race);
    tcase_add_loop_test(tc, test_many_producers_one_consumer, 0, 2);
    tcase_add_test(tc, test_observer_concurrent);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return mt_run(lane_suite());
}
