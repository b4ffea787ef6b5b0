/* Hang triage's published state (model/inflight.c) in a real shared-memory segment, read through
 * a second, read-only mapping as a monitor reads it: each lane's innermost open range (published,
 * replaced, cleared, left out once the window or the state moves on, reset when the lane is
 * reclaimed), never torn under a concurrent writer, and a hostile segment's fields (a sequence
 * stuck odd, names and times out of range) refused; the communication slots (issue, complete,
 * full table, stale tickets, oldest first, concurrent issuers). */
#include "model_test.h"

#include <pthread.h>
#include <sched.h>

static segment *collecting_segment(int pid_offset)
{
    segment_config cfg = mt_config(mt_pid(pid_offset));
    segment *s = mt_create(&cfg);
    ts_segment_header *h = segment_header(s);
    atomic_store(&h->window, 1);
    atomic_store(&h->state, TS_STATE_COLLECTING);
    return s;
}

static uint32_t name(segment *s, strtab *t, const char *text)
{
    (void)s;
    return strtab_intern(t, text, strlen(text), NULL);
}

START_TEST(test_open_range_published)
{
    segment *s = collecting_segment(0);
    strtab *t = NULL;
    ck_assert_int_eq(strtab_create(s, &t, NULL), 0);
    segment *ro = mt_attach(segment_header(s)->pid, 0);
    uint32_t outer = name(s, t, "DataLoader.__next__"), inner = name(s, t, "aten::add");
    lane_writer w = {0};
    ck_assert_int_eq(lane_claim(s, 4242, &w), 0);
    open_range r[INFLIGHT_RANGES];
    uint64_t now = mt_now_ns();
    ck_assert_uint_eq(inflight_ranges(ro, now, r, INFLIGHT_RANGES), 0); /* claimed, none open */

    lane_open_set(&w, 1, outer, 1, now - 5000000000ull);
    ck_assert_uint_eq(inflight_ranges(ro, now, r, INFLIGHT_RANGES), 1);
    ck_assert_uint_eq(r[0].tid, 4242);
    ck_assert_uint_eq(r[0].depth, 1);
    ck_assert_uint_eq(r[0].name, outer);
    ck_assert_uint_eq(r[0].begin_ns, now - 5000000000ull);

    lane_open_set(&w, 2, inner, 1, now - 1000);
    ck_assert_uint_eq(inflight_ranges(ro, now, r, INFLIGHT_RANGES), 1);
    ck_assert_uint_eq(r[0].name, inner);
    ck_assert_uint_eq(r[0].depth, 2);

    /* Another window's range is stale; so is every range once the collector stops. */
    lane_open_set(&w, 1, outer, 7, now - 1000);
    ck_assert_uint_eq(inflight_ranges(ro, now, r, INFLIGHT_RANGES), 0);
    lane_open_set(&w, 1, outer, 1, now - 1000);
    atomic_store(&segment_header(s)->state, TS_STATE_STOPPED);
    ck_assert_uint_eq(inflight_ranges(ro, now, r, INFLIGHT_RANGES), 0);
    atomic_store(&segment_header(s)->state, TS_STATE_COLLECTING);
    ck_assert_uint_eq(inflight_ranges(ro, now, r, INFLIGHT_RANGES), 1);

    /* A retired lane shows nothing; reclaimed, it starts with nothing open and an even
     * sequence that went on from where it was. */
    uint32_t seq = atomic_load(&segment_lane(s, 0)->open_seq);
    lane_retire(&w);
    ck_assert_uint_eq(inflight_ranges(ro, now, r, INFLIGHT_RANGES), 0);
    atomic_store(&segment_lane_ctl(s, 0)->state, TS_LANE_FREE);
    ck_assert_int_eq(lane_claim(s, 4343, &w), 0);
    ck_assert_uint_eq(inflight_ranges(ro, now, r, INFLIGHT_RANGES), 0);
    uint32_t seq2 = atomic_load(&segment_lane(s, 0)->open_seq);
    ck_assert_uint_gt(seq2, seq);
    ck_assert_uint_eq(seq2 & 1, 0);
    ck_assert_uint_eq(atomic_load(&segment_lane(s, 0)->open_depth), 0);

    strtab_destroy(t);
    segment_close(ro, 0);
    segment_close(s, 1);
}
END_TEST

/* The writer publishes (depth k, name k, begin 3k) in a loop; every whole read a reader makes
 * must be one such triple. */
typedef struct torn_run {
    lane_writer *w;
    _Atomic int stop;
    _Atomic uint64_t writes; /* triples published */
    uint32_t iterations;
} torn_run;

static void *torn_writer(void *arg)
{
    torn_run *t = arg;
    for (uint32_t k = 1; !atomic_load(&t->stop); k = k % 1000 + 1) {
        lane_open_set(t->w, k, k, 1, 3ull * k);
        atomic_fetch_add(&t->writes, 1);
    }
    return NULL;
}

START_TEST(test_open_range_never_torn)
{
    segment *s = collecting_segment(1);
    segment *ro = mt_attach(segment_header(s)->pid, 0);
    lane_writer w = {0};
    ck_assert_int_eq(lane_claim(s, 1, &w), 0);
    torn_run t = {.w = &w, .iterations = mt_scale(2000000, 100000)};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, torn_writer, &t), 0);
    const ts_lane *l = segment_lane(ro, 0);
    /* The reads race the writer once it runs: on a loaded machine its thread may start late
     * (bounded: 30 s), and a read finds a whole triple at least once (the same bound). */
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (!atomic_load(&t.writes) && mt_seconds_since(&t0) < 30)
        sched_yield();
    uint32_t whole = 0;
    for (uint32_t i = 0; i < t.iterations || (!whole && mt_seconds_since(&t0) < 30); i++) {
        open_range r;
        int rc = inflight_lane_read(l, 1, &r);
        if (rc != 1)
            continue;
        whole++;
        if (r.name != r.depth || r.begin_ns != 3ull * r.depth) {
            atomic_store(&t.stop, 1);
            pthread_join(th, NULL);
            ck_abort_msg("torn read: depth %u name %u begin %llu", r.depth, r.name,
                         (unsigned long long)r.begin_ns);
        }
    }
    atomic_store(&t.stop, 1);
    pthread_join(th, NULL);
    ck_assert_uint_gt(whole, 0);
    segment_close(ro, 0);
    segment_close(s, 1);
}
END_TEST

/* What another process may have written into a lane's open range or a communication slot. */
typedef struct hostile_case {
    const char *what;
    uint32_t seq, depth, name;
    int64_t begin_from_now_s; /* begin = now + this; INT64_MIN: 0 */
    int want;                 /* ranges shown */
} hostile_case;

static const hostile_case hostile[] = {
    {"a whole, plausible range", 2, 1, 1, -3, 1},
    {"a sequence stuck odd (a writer died mid-way)", 3, 1, 1, -3, 0},
    {"a name id past the string table", 2, 1, 5000000, -3, 0},
    {"a name id of all ones", 2, 1, UINT32_MAX, -3, 0},
    {"a begin an hour in the future", 2, 1, 1, 3600, 0},
    {"a begin of 0", 2, 1, 1, INT64_MIN, 0},
    {"depth 0: nothing open", 2, 0, 1, -3, 0},
};

START_TEST(test_hostile_fields)
{
    const hostile_case *c = &hostile[_i];
    segment *s = collecting_segment(2 + _i);
    segment *ro = mt_attach(segment_header(s)->pid, 0);
    lane_writer w = {0};
    ck_assert_int_eq(lane_claim(s, 77, &w), 0);
    uint64_t now = mt_now_ns();
    uint64_t begin = c->begin_from_now_s == INT64_MIN
                         ? 0
                         : (uint64_t)((int64_t)now + c->begin_from_now_s * 1000000000ll);
    /* Written straight into the segment, as a hostile process would. */
    ts_lane *m = segment_lane(s, 0);
    atomic_store(&m->open_seq, c->seq);
    atomic_store(&m->open_depth, c->depth);
    atomic_store(&m->open_name, c->name);
    atomic_store(&m->open_window, 1);
    atomic_store(&m->open_begin_ns, begin);
    ts_comm_slot *slot = &segment_header(s)->comm[5];
    atomic_store(&slot->seq, c->seq);
    atomic_store(&slot->name, c->name);
    atomic_store(&slot->begin_ns, c->depth ? begin : 0);
    /* A lanes-used count past the lanes must not lead a reader past them either. */
    atomic_store(&segment_header(s)->lanes_used, UINT32_MAX);

    open_range r[INFLIGHT_RANGES], comms[TS_COMM_SLOTS];
    ck_assert_msg(inflight_ranges(ro, now, r, INFLIGHT_RANGES) == (uint32_t)c->want, "%s", c->what);
    ck_assert_msg(inflight_comms(ro, now, comms, TS_COMM_SLOTS) == (uint32_t)c->want, "%s",
                  c->what);
    inflight_summary sum;
    inflight_read(ro, now, &sum);
    ck_assert_int_eq(sum.main, c->want ? 0 : -1);
    segment_close(ro, 0);
    segment_close(s, 1);
}
END_TEST

START_TEST(test_comm_slots)
{
    segment *s = collecting_segment(20);
    segment *ro = mt_attach(segment_header(s)->pid, 0);
    inflight_claims c = {0};
    uint64_t now = mt_now_ns();
    uint64_t ticket[TS_COMM_SLOTS];
    for (uint32_t i = 0; i < TS_COMM_SLOTS; i++) {
        /* Issued newest first: the reader must still give them oldest first. */
        ticket[i] = inflight_comm_issue(s, &c, 10 + i, now - 1000ull * (i + 1));
        ck_assert_uint_ne(ticket[i], 0);
    }
    ck_assert_uint_eq(inflight_comm_issue(s, &c, 99, now), 0); /* full: not shown, no harm */
    open_range r[TS_COMM_SLOTS];
    ck_assert_uint_eq(inflight_comms(ro, now, r, TS_COMM_SLOTS), TS_COMM_SLOTS);
    ck_assert_uint_eq(r[0].name, 10 + TS_COMM_SLOTS - 1);
    for (uint32_t i = 1; i < TS_COMM_SLOTS; i++)
        ck_assert_uint_le(r[i - 1].begin_ns, r[i].begin_ns);

    inflight_comm_done(s, &c, ticket[3]);
    ck_assert_uint_eq(inflight_comms(ro, now, r, TS_COMM_SLOTS), TS_COMM_SLOTS - 1);
    /* The slot is issued again; the old ticket, done twice, must not end the new issue. */
    uint64_t again = inflight_comm_issue(s, &c, 500, now);
    ck_assert_uint_ne(again, 0);
    inflight_comm_done(s, &c, ticket[3]);
    inflight_comm_done(s, &c, 0);
    inflight_comm_done(s, &c, UINT64_MAX);
    ck_assert_uint_eq(inflight_comms(ro, now, r, TS_COMM_SLOTS), TS_COMM_SLOTS);
    inflight_comm_done(s, &c, again);
    for (uint32_t i = 0; i < TS_COMM_SLOTS; i++)
        inflight_comm_done(s, &c, ticket[i]);
    ck_assert_uint_eq(inflight_comms(ro, now, r, TS_COMM_SLOTS), 0);
    ck_assert_uint_eq(atomic_load(&c.busy), 0);
    segment_close(ro, 0);
    segment_close(s, 1);
}
END_TEST

typedef struct comm_run {
    segment *s;
    inflight_claims *c;
    uint32_t rounds;
} comm_run;

static void *comm_thread(void *arg)
{
    comm_run *r = arg;
    for (uint32_t i = 0; i < r->rounds; i++) {
        uint64_t t = inflight_comm_issue(r->s, r->c, 1, 1 + i);
        inflight_comm_done(r->s, r->c, t);
    }
    return NULL;
}

START_TEST(test_comm_slots_concurrent)
{
    segment *s = collecting_segment(21);
    inflight_claims c = {0};
    comm_run run = {.s = s, .c = &c, .rounds = mt_scale(200000, 20000)};
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, comm_thread, &run), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    open_range r[TS_COMM_SLOTS];
    ck_assert_uint_eq(atomic_load(&c.busy), 0);
    ck_assert_uint_eq(inflight_comms(s, mt_now_ns(), r, TS_COMM_SLOTS), 0);
    segment_close(s, 1);
}
END_TEST

static Suite *inflight_suite(void)
{
    Suite *s = suite_create("inflight");
    TCase *tc = tcase_create("published");
    tcase_add_unchecked_fixture(tc, NULL, mt_unlink_band);
    tcase_add_test(tc, test_open_range_published);
    tcase_add_loop_test(tc, test_hostile_fields, 0, sizeof hostile / sizeof hostile[0]);
    tcase_add_test(tc, test_comm_slots);
    suite_add_tcase(s, tc);
    tc = tcase_create("concurrent");
    tcase_set_timeout(tc, 120);
    tcase_add_unchecked_fixture(tc, NULL, mt_unlink_band);
    tcase_add_test(tc, test_open_range_never_torn);
    tcase_add_test(tc, test_comm_slots_concurrent);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return mt_run(inflight_suite());
}
