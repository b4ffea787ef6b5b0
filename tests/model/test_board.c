/* The step and operator boards: what the recorder publishes reaches a reader in another mapping
 * whole and in order, the step ring keeps the newest TS_BOARD_STEPS, op records fill up to the
 * board's size and are counted lost past it, a reader never takes a record being rewritten (a
 * writer thread against a reader thread, also under TSan), and a record left torn is refused. */
#include "model_test.h"

#include <pthread.h>

static void put(board_writer *w, uint64_t k);

/* A row whose every field follows from its step number, so a torn copy shows. */
static step_row row_of(uint64_t k)
{
    step_row r;
    memset(&r, 0, sizeof r);
    r.step = k + 1;
    r.begin_ns = 1000 * k;
    r.end_ns = 1000 * k + 900;
    r.total_ns = 900;
    r.interval_ns = 100 + k % 7;
    r.fpbp_ns = 700 - k % 7;
    r.tail_ns = 100;
    r.fp_start_ns = r.begin_ns + r.interval_ns;
    r.bp_end_ns = r.fp_start_ns + r.fpbp_ns;
    r.comm_wait_ns = k % 13;
    r.ops = k % 20;
    r.ops_ns = 10 * (k % 20);
    r.tid = (uint32_t)(k * 3);
    r.source = STEP_SOURCE_MARKS;
    return r;
}

/* Step k with totals that follow from it too. */
static void put(board_writer *w, uint64_t k)
{
    step_row r = row_of(k);
    step_totals t = {.steps = k + 1, .current_step = k + 1, .total_ns = 900 * (k + 1)};
    board_put_step(w, &r, &t);
}

static void check_row(const step_row *r, uint64_t k)
{
    step_row want = row_of(k);
    ck_assert_msg(!memcmp(r, &want, sizeof want), "step %llu copied torn or wrong",
                  (unsigned long long)k + 1);
}

START_TEST(test_steps_round_trip)
{
    segment_config cfg = mt_config(mt_pid(0));
    segment *s = mt_create(&cfg);
    board_writer w;
    ck_assert_int_eq(board_writer_init(&w, s), 0);
    segment *r = mt_attach(cfg.pid, 0);
    step_row rows[TS_BOARD_STEPS];
    uint64_t next = 99;
    ck_assert_uint_eq(board_get_steps(r, 0, rows, TS_BOARD_STEPS, &next, NULL), 0);
    ck_assert_uint_eq(next, 0);
    for (uint64_t k = 0; k < 10; k++)
        put(&w, k);
    size_t n = board_get_steps(r, 0, rows, TS_BOARD_STEPS, &next, NULL);
    ck_assert_uint_eq(n, 10);
    ck_assert_uint_eq(next, 10);
    for (size_t i = 0; i < n; i++)
        check_row(&rows[i], i);
    /* From where the last read ended: only what is new. */
    put(&w, 10);
    n = board_get_steps(r, next, rows, TS_BOARD_STEPS, &next, NULL);
    ck_assert_uint_eq(n, 1);
    check_row(&rows[0], 10);
    /* Past a wrap, the newest TS_BOARD_STEPS, oldest first. */
    for (uint64_t k = 11; k < 1300; k++)
        put(&w, k);
    n = board_get_steps(r, 0, rows, TS_BOARD_STEPS, &next, NULL);
    ck_assert_uint_eq(n, TS_BOARD_STEPS);
    ck_assert_uint_eq(next, 1300);
    for (size_t i = 0; i < n; i++)
        check_row(&rows[i], 1300 - TS_BOARD_STEPS + i);
    /* Fewer asked for than there are: the newest of them. */
    n = board_get_steps(r, 0, rows, 5, &next, NULL);
    ck_assert_uint_eq(n, 5);
    check_row(&rows[4], 1299);
    segment_close(r, 0);
    segment_close(s, 1);
}
END_TEST

START_TEST(test_totals_and_ops)
{
    segment_config cfg = mt_config(mt_pid(1));
    segment *s = mt_create(&cfg);
    board_writer w;
    ck_assert_int_eq(board_writer_init(&w, s), 0);
    segment *r = mt_attach(cfg.pid, 0);
    step_totals t = {.steps = 42,
                     .current_step = 43,
                     .total_ns = 4200,
                     .nslowest = 2,
                     .slowest = {7, 9},
                     .slowest_ns = {300, 200},
                     .late = 3};
    board_put_totals(&w, &t);
    step_totals got;
    ck_assert_int_eq(board_get_totals(r, &got), 0);
    ck_assert(!memcmp(&got, &t, sizeof t));

    ck_assert_uint_eq(board_ops_used(r), 0);
    for (uint32_t i = 0; i < TS_BOARD_OPS; i++)
        ck_assert_int_eq(board_op_new(&w, TS_KIND_OP_RANGE, i + 2, 1, 0), (int)i);
    ck_assert_int_eq(board_op_new(&w, TS_KIND_KERNEL, 5, 6, TS_EF_COMM), -1);
    ck_assert_uint_eq(board_ops_used(r), TS_BOARD_OPS);
    op_totals o = {.count = 3, .total_ns = 30, .self_ns = 20, .min_ns = 5, .max_ns = 15};
    board_put_op(&w, 17, &o);
    board_put_ops_lost(&w, 11, 123);
    ts_op_record rec;
    ck_assert_int_eq(board_get_op(r, 17, &rec), 0);
    ck_assert_uint_eq(rec.kind, TS_KIND_OP_RANGE);
    ck_assert_uint_eq(rec.name, 19);
    ck_assert_uint_eq(rec.type, 1);
    ck_assert(!memcmp(&rec.t, &o, sizeof o));
    ck_assert_int_eq(board_get_op(r, 18, &rec), 0);
    ck_assert_uint_eq(rec.t.count, 0);
    ck_assert_int_eq(board_get_op(r, TS_BOARD_OPS, &rec), -1);
    ck_assert_uint_eq(board_ops_lost(r), 11);

    /* Names: one record a thread, renamed in place, up to the board's size. */
    uint32_t tid, nm;
    ck_assert_uint_eq(board_names_used(r), 0);
    ck_assert_int_eq(board_put_name(&w, 77, 5), 0);
    ck_assert_int_eq(board_put_name(&w, 78, 6), 0);
    ck_assert_int_eq(board_put_name(&w, 77, 9), 0);
    ck_assert_uint_eq(board_names_used(r), 2);
    ck_assert_int_eq(board_get_name(r, 0, &tid, &nm), 0);
    ck_assert_uint_eq(tid, 77);
    ck_assert_uint_eq(nm, 9);
    for (uint32_t k = 2; k < TS_BOARD_NAMES; k++)
        ck_assert_int_eq(board_put_name(&w, 1000 + k, 1), 0);
    ck_assert_int_eq(board_put_name(&w, 5000, 1), -1);
    ck_assert_int_eq(board_get_name(r, TS_BOARD_NAMES, &tid, &nm), -1);

    /* A record its writer left half-written (a writer that died mid-way) is refused, never
     * taken torn; the creator's mapping plays the dying writer. */
    atomic_store(&segment_board(s)->ops[17].seq, 7);
    ck_assert_int_eq(board_get_op(r, 17, &rec), -1);
    atomic_store(&segment_board(s)->totals_seq, 9);
    ck_assert_int_eq(board_get_totals(r, &got), -1);
    segment_close(r, 0);
    segment_close(s, 1);
}
END_TEST

START_TEST(test_op_totals_add)
{
    op_totals a = {0}, b = {.count = 2, .total_ns = 10, .self_ns = 8, .min_ns = 4, .max_ns = 6};
    op_totals_add(&a, &b);
    ck_assert(!memcmp(&a, &b, sizeof a));
    op_totals c = {.count = 1, .total_ns = 9, .self_ns = 9, .min_ns = 9, .max_ns = 9, .flops = 5};
    op_totals_add(&a, &c);
    ck_assert_uint_eq(a.count, 3);
    ck_assert_uint_eq(a.total_ns, 19);
    ck_assert_uint_eq(a.self_ns, 17);
    ck_assert_uint_eq(a.min_ns, 4);
    ck_assert_uint_eq(a.max_ns, 9);
    ck_assert_uint_eq(a.flops, 5);
    op_totals none = {.min_ns = 1};
    op_totals_add(&a, &none); /* nothing counted: nothing changes, min included */
    ck_assert_uint_eq(a.min_ns, 4);
}
END_TEST

/* ---- A writer and a reader at once ------------------------------------------------------- */

typedef struct race {
    board_writer w;
    uint64_t steps;
    _Atomic int done;
} race;

static void *writer(void *arg)
{
    race *rc = arg;
    op_totals o = {0};
    for (uint64_t k = 0; k < rc->steps; k++) {
        put(&rc->w, k);
        step_totals t = {.steps = k + 1, .total_ns = 900 * (k + 1), .current_step = k + 1};
        board_put_totals(&rc->w, &t);
        o.count = k + 1;
        o.total_ns = 3 * (k + 1);
        o.self_ns = 2 * (k + 1);
        board_put_op(&rc->w, 0, &o);
    }
    atomic_store(&rc->done, 1);
    return NULL;
}

START_TEST(test_writer_against_reader)
{
    segment_config cfg = mt_config(mt_pid(2));
    segment *s = mt_create(&cfg);
    race rc = {.steps = mt_scale(400000, 40000)};
    ck_assert_int_eq(board_writer_init(&rc.w, s), 0);
    ck_assert_int_eq(board_op_new(&rc.w, TS_KIND_OP_RANGE, 2, 3, 0), 0);
    segment *r = mt_attach(cfg.pid, 0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, writer, &rc), 0);
    static step_row rows[TS_BOARD_STEPS];
    uint64_t from = 0, seen = 0, last_total = 0;
    int finished = 0;
    while (!finished) {
        finished = atomic_load(&rc.done);
        uint64_t next;
        step_totals rt;
        size_t n = board_get_steps(r, from, rows, TS_BOARD_STEPS, &next, &rt);
        /* The totals that come with the rows are those of the newest of them. */
        if (n)
            ck_assert_uint_eq(rt.steps, rows[n - 1].step);
        for (size_t i = 0; i < n; i++) {
            uint64_t k = rows[i].step - 1;
            ck_assert_uint_ge(k, from); /* in order, never one read before */
            check_row(&rows[i], k);
            from = k + 1;
        }
        seen += n;
        from = next > from ? from : next;
        step_totals tt;
        if (board_get_totals(r, &tt) == 0) {
            ck_assert_uint_eq(tt.total_ns, 900 * tt.steps);
            ck_assert_uint_ge(tt.steps, last_total);
            last_total = tt.steps;
        }
        ts_op_record op;
        if (board_get_op(r, 0, &op) == 0)
            ck_assert_uint_eq(op.t.total_ns, 3 * op.t.count);
    }
    pthread_join(t, NULL);
    uint64_t next;
    size_t n = board_get_steps(r, 0, rows, TS_BOARD_STEPS, &next, NULL);
    ck_assert_uint_eq(next, rc.steps);
    ck_assert_uint_eq(n, TS_BOARD_STEPS);
    check_row(&rows[n - 1], rc.steps - 1);
    ck_assert_uint_gt(seen, 0);
    segment_close(r, 0);
    segment_close(s, 1);
}
END_TEST

/* ---- The digest that fills them --------------------------------------------------------- */

static ts_event ev_range(uint32_t tid, uint32_t name, uint32_t depth, uint64_t b, uint64_t e)
{
    return (ts_event){.kind = TS_KIND_OP_RANGE,
                      .tid = tid,
                      .device = TS_DEVICE_HOST,
                      .aux = depth,
                      .name = name,
                      .type = 9,
                      .begin_ns = b,
                      .end_ns = e};
}

static ts_event ev_mark(uint16_t kind, uint64_t t, uint64_t step)
{
    return (ts_event){
        .kind = kind, .tid = 1, .device = TS_DEVICE_HOST, .begin_ns = t, .end_ns = t, .v0 = step};
}

static const ts_op_record *find_op(const segment *r, uint32_t kind, uint32_t name,
                                   ts_op_record *buf)
{
    for (uint32_t i = 0; i < board_ops_used(r); i++)
        if (board_get_op(r, i, buf) == 0 && buf->kind == kind && buf->name == name)
            return buf;
    return NULL;
}

/* Steps settle 50 ms after their end (2 s once device work was seen) or at the end; operators
 * carry their self time; a board full of operators counts the rest lost. */
START_TEST(test_digest)
{
    segment_config cfg = mt_config(mt_pid(3));
    segment *s = mt_create(&cfg);
    digest *d = digest_create(s, NULL, NULL, NULL, NULL);
    ck_assert_ptr_nonnull(d);
    segment *r = mt_attach(cfg.pid, 0);
    const uint64_t MS = 1000000;
    for (uint64_t k = 1; k <= 3; k++) {
        uint64_t t = k * 100 * MS;
        ts_event ev[4] = {
            ev_mark(TS_KIND_STEP_BEGIN, t, k), ev_range(1, 20, 1, t + 1 * MS, t + 11 * MS),
            ev_range(1, 21, 0, t, t + 30 * MS), ev_mark(TS_KIND_STEP_END, t + 40 * MS, k)};
        digest_feed(d, ev, 4);
    }
    /* Step 3 ended at 340 ms: at 360 ms steps 1 and 2 have settled, 3 has not. */
    digest_publish(d, 360 * MS, 0);
    step_totals t;
    ck_assert_int_eq(board_get_totals(r, &t), 0);
    ck_assert_uint_eq(t.steps, 2);
    ck_assert_uint_eq(t.current_step, 3);
    step_row rows[4];
    uint64_t next;
    step_totals rt;
    ck_assert_uint_eq(board_get_steps(r, 0, rows, 4, &next, &rt), 2);
    ck_assert_uint_eq(rt.steps, 2);
    ck_assert_uint_eq(rows[1].step, 2);
    ck_assert_uint_eq(rows[1].begin_ns, 140 * MS); /* from step 1's end */
    ck_assert_uint_eq(rows[1].end_ns, 240 * MS);
    ck_assert_uint_eq(rows[1].ops, 1); /* the top-level op */
    ck_assert_uint_eq(rows[1].ops_ns, 30 * MS);
    digest_publish(d, 390 * MS, 0);
    ck_assert_int_eq(board_get_totals(r, &t), 0);
    ck_assert_uint_eq(t.steps, 3);
    ts_op_record op;
    ck_assert_ptr_nonnull(find_op(r, TS_KIND_OP_RANGE, 21, &op));
    ck_assert_uint_eq(op.t.count, 3);
    ck_assert_uint_eq(op.t.total_ns, 90 * MS);
    ck_assert_uint_eq(op.t.self_ns, 60 * MS); /* less its child's 10 each time */
    ck_assert_ptr_nonnull(find_op(r, TS_KIND_OP_RANGE, 20, &op));
    ck_assert_uint_eq(op.t.self_ns, 30 * MS);

    /* Device work seen: a step waits 2 s for its kernels; the end finalizes it at once. */
    ts_event k = {.kind = TS_KIND_KERNEL,
                  .tid = 7,
                  .name = 30,
                  .type = 21,
                  .flags = TS_EF_COMM,
                  .begin_ns = 410 * MS,
                  .end_ns = 420 * MS};
    ts_event ev[3] = {ev_mark(TS_KIND_STEP_BEGIN, 400 * MS, 4), k,
                      ev_mark(TS_KIND_STEP_END, 440 * MS, 4)};
    digest_feed(d, ev, 3);
    digest_publish(d, 1000 * MS, 0);
    ck_assert_int_eq(board_get_totals(r, &t), 0);
    ck_assert_uint_eq(t.steps, 3);
    digest_publish(d, 1001 * MS, 1);
    ck_assert_int_eq(board_get_totals(r, &t), 0);
    ck_assert_uint_eq(t.steps, 4);
    ck_assert_ptr_nonnull(find_op(r, TS_KIND_KERNEL, 30, &op));
    ck_assert_uint_eq(op.flags, TS_EF_COMM);
    ck_assert_uint_eq(op.type, 21);

    /* More operators than the board holds: the rest counted, not kept. */
    for (uint32_t i = 0; i < TS_BOARD_OPS + 10; i++) {
        ts_event e = ev_range(2, 1000 + i, 0, 1, 2);
        digest_feed(d, &e, 1);
    }
    digest_publish(d, 1002 * MS, 0);
    ck_assert_uint_eq(board_ops_used(r), TS_BOARD_OPS);
    ck_assert_uint_eq(board_ops_lost(r), 10 + 3 /* the 3 ops already there took room */);
    ck_assert_uint_eq(board_published_ns(r), 1002 * MS);
    digest_destroy(d);
    segment_close(r, 0);
    segment_close(s, 1);
}
END_TEST

static Suite *board_suite(void)
{
    Suite *s = suite_create("board");
    TCase *tc = tcase_create("board");
    tcase_add_unchecked_fixture(tc, NULL, mt_unlink_band);
    tcase_add_test(tc, test_steps_round_trip);
    tcase_add_test(tc, test_totals_and_ops);
    tcase_add_test(tc, test_op_totals_add);
    tcase_add_test(tc, test_writer_against_reader);
    tcase_add_test(tc, test_digest);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return mt_run(board_suite());
}
