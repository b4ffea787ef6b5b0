/* test_steps_split: a step's time split (analysis/steps.c), case by case: computation and
 * communication overlap, the communication wait, the split that adds up to the step. Each case is
 * fed in the orders a recorder produces (steps_fixture.c). */
#include "analysis/golden.h"
#include "steps_fixture.h"
#include "testutil.h"

#include <malloc.h>
#include <stdio.h>

enum { K_COMPUTE, K_COMPUTE2, K_COMM, K_COMM_OP, K_HOST1, K_HOST2 };

typedef struct piece {
    int what;
    uint64_t b, e;
} piece;

typedef struct overlap_case {
    const char *label;
    piece p[6];
    size_t np;
    int two_steps; /* a second step [600, 1100] */
    uint64_t compute[2], comm[2], pure[2], idle[2];
} overlap_case;

/* Step 1 is [100, 600] (500 long), step 2 [600, 1100]. */
static const overlap_case overlap_cases[] = {
    /* [200,400] and [300,500] meet on [300,400]: pure 200-100 = 100, free 500-300 = 200. */
    {"partial", {{K_COMPUTE, 200, 400}, {K_COMM, 300, 500}}, 2, 0, {200}, {200}, {100}, {200}},
    /* Communication inside computation: pure 0; free 500-300 = 200. */
    {"comm inside", {{K_COMPUTE, 200, 500}, {K_COMM, 300, 400}}, 2, 0, {300}, {100}, {0}, {200}},
    /* Disjoint: pure = all 100; free 500-200 = 300. */
    {"disjoint", {{K_COMPUTE, 200, 300}, {K_COMM, 400, 500}}, 2, 0, {100}, {100}, {100}, {300}},
    /* Computation inside communication: pure 300-100 = 200; free 500-300 = 200. */
    {"compute inside",
     {{K_COMPUTE, 300, 400}, {K_COMM, 200, 500}},
     2,
     0,
     {100},
     {300},
     {200},
     {200}},
    /* Two streams [200,350] u [300,400] = 200; a host COMM_OP [380,450] 70, overlap 20, pure
     * 50; free 500-(200+70-20) = 250. */
    {"two streams, host comm",
     {{K_COMPUTE, 200, 350}, {K_COMPUTE2, 300, 400}, {K_COMM_OP, 380, 450}},
     3,
     0,
     {200},
     {70},
     {50},
     {250}},
    /* No device: host ops of two threads [150,300] u [250,400] = 250; COMM_OP [350,500] 150,
     * overlap 50, pure 100; free 500-350 = 150. */
    {"host only",
     {{K_HOST1, 150, 300}, {K_HOST2, 250, 400}, {K_COMM_OP, 350, 500}},
     3,
     0,
     {250},
     {150},
     {100},
     {150}},
    /* Pieces: [150,200] [250,300] [350,400] = 150 under comm [180,370] 190: overlap 20+50+20 =
     * 90, pure 100, free 500-250 = 250. */
    {"comm over pieces",
     {{K_COMPUTE, 150, 200}, {K_COMPUTE, 250, 300}, {K_COMPUTE, 350, 400}, {K_COMM, 180, 370}},
     4,
     0,
     {150},
     {190},
     {100},
     {250}},
    /* Across the step boundary at 600: step 1 gets compute [500,600] 100 and comm [550,600] 50
     * (all overlapped), free 400; step 2 gets compute [600,800] 200 and comm [600,650] 50,
     * free 300. */
    {"across steps",
     {{K_COMPUTE, 500, 800}, {K_COMM, 550, 650}},
     2,
     1,
     {100, 200},
     {50, 50},
     {0, 0},
     {400, 300}},
    {"empty", {{0, 0, 0}}, 0, 0, {0}, {0}, {0}, {500}},
};

START_TEST(test_overlap_cases)
{
    const overlap_case *c = &overlap_cases[_i];
    golden g;
    golden_init(&g);
    golden_step(&g, 1, 1, 100, 600);
    if (c->two_steps)
        golden_step(&g, 1, 2, 600, 1100);
    for (size_t i = 0; i < c->np; i++) {
        const piece *p = &c->p[i];
        switch (p->what) {
        case K_COMPUTE:
            golden_kernel(&g, 0, 7, "gemm", NULL, p->b, p->e, 0);
            break;
        case K_COMPUTE2:
            golden_kernel(&g, 0, 9, "conv", NULL, p->b, p->e, 0);
            break;
        case K_COMM:
            golden_kernel(&g, 0, 8, "nccl", NULL, p->b, p->e, 1);
            break;
        case K_COMM_OP: {
            ts_event *e = golden_op(&g, 3, "all_reduce", NULL, p->b, p->e, 0);
            e->kind = TS_KIND_COMM_OP;
            break;
        }
        case K_HOST1:
            golden_op(&g, 1, "op1", NULL, p->b, p->e, 0);
            break;
        case K_HOST2:
            golden_op(&g, 2, "op2", NULL, p->b, p->e, 0);
            break;
        }
    }
    size_t nsteps = c->two_steps ? 2 : 1;
    for (size_t o = 0; o < N_ORDERS; o++) {
        capture cap;
        analysis_sink sink;
        analysis *a = analyse_in_order(&g, NULL, &orders[o], &cap, &sink);
        ck_assert_uint_eq(cap.n, nsteps);
        for (size_t s = 0; s < nsteps; s++) {
            const step_row *r = &cap.rows[s];
            ck_assert_msg(r->overlap_compute_ns == c->compute[s] * US &&
                              r->comm_ns == c->comm[s] * US && r->pure_comm_ns == c->pure[s] * US &&
                              r->free_ns == c->idle[s] * US,
                          "%s, %s, step %zu: compute %llu comm %llu pure %llu free %llu ns",
                          c->label, orders[o].label, s + 1,
                          (unsigned long long)r->overlap_compute_ns, (unsigned long long)r->comm_ns,
                          (unsigned long long)r->pure_comm_ns, (unsigned long long)r->free_ns);
        }
        analysis_destroy(a);
    }
    golden_free(&g);
}
END_TEST

enum { W_OP, W_OP_OTHER, W_FETCH, W_COMM_OP, W_COMM_RANGE, W_KERNEL, W_NCCL, W_FWD, W_BWD, W_EVAL };

typedef struct wait_case {
    const char *label;
    piece p[5];
    size_t np;
    uint64_t wait, gap, pure;
} wait_case;

/* One step [100, 600] marked by thread 1; communication recorded on thread 3 (the thread that
 * saw it complete), as termsight.torch's DDP hook does. */
static const wait_case wait_cases[] = {
    /* Compute, then the collective in flight with the training thread idle: all of it waits. */
    {"compute then comm", {{W_OP, 150, 300}, {W_COMM_OP, 300, 450}}, 2, 150, 0, 150},
    /* The collective overlapped by compute on the training thread: no wait. */
    {"comm under compute", {{W_OP, 150, 500}, {W_COMM_OP, 200, 400}}, 2, 0, 0, 0},
    /* The hole between two ops [250,400] is inside the collective [200,450]: a wait of 150, and
     * no gap (a gap is idle time with nothing in flight). */
    {"wait between ops",
     {{W_OP, 150, 250}, {W_OP, 400, 500}, {W_COMM_OP, 200, 450}},
     3,
     150,
     0,
     150},
    /* Another thread computing does not hide the training thread's wait (pure communication,
     * which counts every thread, is 0 here). */
    {"other thread busy",
     {{W_OP, 150, 250}, {W_OP_OTHER, 250, 450}, {W_COMM_OP, 250, 450}},
     3,
     200,
     0,
     0},
    /* Waiting for data while a collective is in flight is a data wait, not a communication
     * wait; a communication range (TS_EF_COMM) on the training thread is not computation. */
    {"fetch and comm range",
     {{W_FETCH, 200, 300}, {W_COMM_OP, 200, 300}, {W_OP, 310, 400}, {W_COMM_RANGE, 400, 460}},
     4,
     60,
     0,
     60},
    /* A gap with nothing in flight stays a gap: ops [150,200] and [300,400] (gap 100 in FP/BP,
     * BP = the op before the collective), then the collective [420,450]: a wait of 30. */
    {"gap then comm", {{W_OP, 150, 200}, {W_OP, 300, 400}, {W_COMM_OP, 420, 450}}, 3, 30, 100, 30},
    /* With device work the wait is the communication no compute kernel overlaps. */
    {"device", {{W_KERNEL, 200, 300}, {W_NCCL, 250, 400}, {W_OP, 150, 500}}, 3, 100, 0, 100},
};

/* One piece of a wait or split case: thread 1 trains (its ops and marks), thread 2 is another
 * thread, thread 3 saw the communication complete. */
static void add_piece(golden *g, const piece *p)
{
    ts_event *e = NULL;
    switch (p->what) {
    case W_OP:
        golden_op(g, 1, "op", NULL, p->b, p->e, 0);
        break;
    case W_OP_OTHER:
        golden_op(g, 2, "other", NULL, p->b, p->e, 0);
        break;
    case W_FETCH:
        golden_op(g, 1, "DataLoader.__next__", NULL, p->b, p->e, 0);
        break;
    case W_COMM_OP:
        e = golden_op(g, 3, "DDP/bucket0/allreduce", NULL, p->b, p->e, 0);
        e->kind = TS_KIND_COMM_OP;
        e->flags = TS_EF_COMM;
        break;
    case W_COMM_RANGE:
        golden_op(g, 1, "c10d::allreduce_", NULL, p->b, p->e, 0)->flags = TS_EF_COMM;
        break;
    case W_KERNEL:
        golden_kernel(g, 0, 7, "gemm", NULL, p->b, p->e, 0);
        break;
    case W_NCCL:
        golden_kernel(g, 0, 8, "nccl", NULL, p->b, p->e, 1);
        break;
    case W_FWD:
        golden_phase(g, 1, TS_PHASE_FORWARD_START, p->b);
        break;
    case W_BWD:
        golden_phase(g, 1, TS_PHASE_BACKWARD_END, p->b);
        break;
    case W_EVAL:
        golden_phase(g, 1, TS_PHASE_EVAL_BEGIN, p->b);
        golden_phase(g, 1, TS_PHASE_EVAL_END, p->e);
        break;
    }
}

/* One step [100, 600] of thread 1 with the pieces, into g (golden_free). */
static void build_one_step(golden *g, const piece *p, size_t np)
{
    golden_init(g);
    golden_step(g, 1, 1, 100, 600);
    for (size_t i = 0; i < np; i++)
        add_piece(g, &p[i]);
}

/* g analysed in order o (*a to destroy): its one row. */
static const step_row *one_row(golden *g, size_t o, capture *cap, analysis_sink *sink, analysis **a)
{
    *a = analyse_in_order(g, NULL, &orders[o], cap, sink);
    ck_assert_uint_eq(cap->n, 1);
    return &cap->rows[0];
}

START_TEST(test_comm_wait_cases)
{
    const wait_case *c = &wait_cases[_i];
    golden g;
    build_one_step(&g, c->p, c->np);
    for (size_t o = 0; o < N_ORDERS; o++) {
        capture cap;
        analysis_sink sink;
        analysis *a;
        const step_row *r = one_row(&g, o, &cap, &sink, &a);
        ck_assert_msg(r->comm_wait_ns == c->wait * US && r->gap_ns == c->gap * US &&
                          r->pure_comm_ns == c->pure * US,
                      "%s, %s: comm_wait %llu gap %llu pure %llu ns, want %llu %llu %llu us",
                      c->label, orders[o].label, (unsigned long long)r->comm_wait_ns,
                      (unsigned long long)r->gap_ns, (unsigned long long)r->pure_comm_ns,
                      (unsigned long long)c->wait, (unsigned long long)c->gap,
                      (unsigned long long)c->pure);
        ck_assert_uint_eq(r->interval_ns + r->compute_ns + r->comm_wait_ns + r->tail_ns +
                              r->eval_ns,
                          r->total_ns);
        step_summary s = analysis_steps(a);
        ck_assert_double_eq(s.avg_comm_wait_ns, (double)(c->wait * US));
        analysis_destroy(a);
    }
    golden_free(&g);
}
END_TEST

typedef struct split_case {
    const char *label;
    piece p[6];
    size_t np;
    uint64_t interval, compute, wait, tail, eval; /* us, adding up to the step [100, 600] */
} split_case;

static const split_case split_cases[] = {
    /* A rank waiting for a slower one (DDP): forward/backward [150,300], the all-reduce in
     * flight [280,500], the optimizer [500,550]. The wait [300,500] lies in step_trace.csv's tail
     * [300,600] and is taken out of it. */
    {"waits in the tail",
     {{W_FWD, 150, 150},
      {W_OP, 150, 300},
      {W_BWD, 300, 300},
      {W_COMM_OP, 280, 500},
      {W_OP, 500, 550}},
     5,
     50,
     150,
     200,
     100,
     0},
    /* The slow rank's data wait [100,400] is interval, never compute, though the fetch is a
     * host op that the overlap counts as computation. */
    {"data wait is not compute",
     {{W_FETCH, 100, 400}, {W_FWD, 400, 400}, {W_OP, 400, 500}, {W_BWD, 500, 500}},
     4,
     300,
     100,
     0,
     100,
     0},
    /* A wait inside forward/backward (no op between [200,260] while a collective is in flight)
     * is taken out of compute. */
    {"waits in backward",
     {{W_FWD, 150, 150},
      {W_OP, 150, 200},
      {W_OP, 260, 400},
      {W_BWD, 400, 400},
      {W_COMM_OP, 190, 270}},
     5,
     50,
     190,
     60,
     200,
     0},
    /* An evaluation pass [400,550] inside the step, a collective in flight during it: the pass
     * is eval, the collective's time in it no wait. */
    {"evaluation inside",
     {{W_FWD, 150, 150},
      {W_OP, 150, 300},
      {W_BWD, 300, 300},
      {W_EVAL, 400, 550},
      {W_COMM_OP, 420, 480}},
     5,
     50,
     150,
     0,
     150,
     150},
    /* Two evaluation passes back to back, [400,450] and [450,500]: one stretch of 100. */
    {"evaluations back to back",
     {{W_FWD, 150, 150},
      {W_OP, 150, 300},
      {W_BWD, 300, 300},
      {W_EVAL, 400, 450},
      {W_EVAL, 450, 500}},
     5,
     50,
     150,
     0,
     200,
     100},
    /* A collective in flight before the forward start is interval (the step has not begun its
     * work), not a communication wait. */
    {"comm before forward",
     {{W_COMM_OP, 100, 200}, {W_FWD, 200, 200}, {W_OP, 200, 500}, {W_BWD, 500, 500}},
     4,
     100,
     300,
     0,
     100,
     0},
    /* Device work: forward/backward [150,450], compute kernels [150,250] and [350,450], the
     * all-reduce kernel [250,350] with no compute kernel beside it: a wait of 100 in it. */
    {"device",
     {{W_FWD, 150, 150},
      {W_KERNEL, 150, 250},
      {W_NCCL, 250, 350},
      {W_KERNEL, 350, 450},
      {W_BWD, 450, 450}},
     5,
     50,
     200,
     100,
     150,
     0},
};

START_TEST(test_split_cases)
{
    const split_case *c = &split_cases[_i];
    golden g;
    build_one_step(&g, c->p, c->np);
    for (size_t o = 0; o < N_ORDERS; o++) {
        capture cap;
        analysis_sink sink;
        analysis *a;
        const step_row *r = one_row(&g, o, &cap, &sink, &a);
        ck_assert_msg(r->interval_ns == c->interval * US && r->compute_ns == c->compute * US &&
                          r->comm_wait_ns == c->wait * US && r->tail_ns == c->tail * US &&
                          r->eval_ns == c->eval * US,
                      "%s, %s: interval %llu compute %llu wait %llu tail %llu eval %llu ns",
                      c->label, orders[o].label, (unsigned long long)r->interval_ns,
                      (unsigned long long)r->compute_ns, (unsigned long long)r->comm_wait_ns,
                      (unsigned long long)r->tail_ns, (unsigned long long)r->eval_ns);
        ck_assert_uint_eq(r->total_ns, 500 * US);
        step_summary s = analysis_steps(a);
        ck_assert_double_eq(s.avg_interval_ns + s.avg_compute_ns + s.avg_comm_wait_ns +
                                s.avg_tail_ns + s.avg_eval_ns,
                            s.avg_total_ns);
        analysis_destroy(a);
    }
    golden_free(&g);
}
END_TEST

static Suite *steps_split_suite(void)
{
    Suite *s = suite_create("steps_split");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, test_overlap_cases, 0,
                        (int)(sizeof overlap_cases / sizeof overlap_cases[0]));
    tcase_add_loop_test(tc, test_split_cases, 0, sizeof split_cases / sizeof split_cases[0]);
    tcase_add_loop_test(tc, test_comm_wait_cases, 0,
                        (int)(sizeof wait_cases / sizeof wait_cases[0]));
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tests_run(steps_split_suite());
}
