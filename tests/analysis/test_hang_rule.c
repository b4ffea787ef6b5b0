/* The hang rule (analysis/hang.c), table-driven: which ranks the others wait for, from how long
 * each rank's communication has been in flight; the verdict in words; when a rank counts as
 * stalled. */
#define TESTUTIL_TAG "hangrule"
#include "job.h"
#include "testutil.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#define NO_COMM -1.0

typedef struct hang_case {
    const char *what;
    size_t n;
    job_rank_wait r[5];
    size_t want[5]; /* the ranks waited for */
    size_t nwant;
    size_t waiting;
    const char *verdict;
} hang_case;

/* live, rank, pid, comm_s, since_s */
#define R(live, rank, comm)                                                                        \
    {                                                                                              \
        live, rank, 100 + (rank), comm, 5                                                          \
    }

static const hang_case cases[] = {
    {"one rank stuck in its data, three in the all-reduce",
     4,
     {R(1, 0, 41.2), R(1, 1, 41.0), R(1, 2, NO_COMM), R(1, 3, 40.9)},
     {2},
     1,
     3,
     "rank 2 is the one the others wait for (3 ranks wait in a communication)"},
    {"no rank in a communication: nothing to say",
     3,
     {R(1, 0, NO_COMM), R(1, 1, NO_COMM), R(1, 2, NO_COMM)},
     {0},
     0,
     0,
     "no rank waits in a communication"},
    {"every rank in a communication: none can be named",
     2,
     {R(1, 0, 30), R(1, 1, 31)},
     {0},
     0,
     2,
     "every rank waits in a communication: none can be named"},
    {"a communication of a moment is no wait",
     2,
     {R(1, 0, JOB_HANG_COMM_S / 2), R(1, 1, NO_COMM)},
     {0},
     0,
     0,
     "no rank waits in a communication"},
    {"two ranks stuck, two waiting",
     4,
     {R(1, 0, NO_COMM), R(1, 1, 9), R(1, 2, NO_COMM), R(1, 3, 9)},
     {0, 2},
     2,
     2,
     "rank 0, rank 2 are the ones the others wait for (2 ranks wait in a communication)"},
    {"a gone rank is left out",
     3,
     {R(0, 0, NO_COMM), R(1, 1, 5), R(1, 2, NO_COMM)},
     {2},
     1,
     1,
     "rank 2 is the one the others wait for (1 rank waits in a communication)"},
    {"a launcher of no rank, in no communication, is no rank waited for",
     4,
     {{1, -1, 4242, NO_COMM, 5}, R(1, 0, 12), R(1, 1, NO_COMM), R(1, 2, 12)},
     {2},
     1,
     2,
     "rank 1 is the one the others wait for (2 ranks wait in a communication)"},
    {"processes of no rank at all are named by pid",
     2,
     {{1, -1, 4242, 7, 5}, {1, -1, 4343, NO_COMM, 5}},
     {1},
     1,
     1,
     "pid 4343 is the one the others wait for (1 rank waits in a communication)"},
};

START_TEST(test_waited_for)
{
    const hang_case *c = &cases[_i];
    size_t out[5], waiting = 99;
    size_t k = job_waited_for(c->r, c->n, out, &waiting);
    ck_assert_msg(k == c->nwant, "%s: %zu ranks named", c->what, k);
    ck_assert_uint_eq(waiting, c->waiting);
    for (size_t j = 0; j < k; j++)
        ck_assert_uint_eq(out[j], c->want[j]);
    char buf[256];
    job_hang_verdict(buf, sizeof buf, c->r, c->n);
    ck_assert_str_eq(buf, c->verdict);
}
END_TEST

START_TEST(test_verdict_short_buffer)
{
    job_rank_wait r[2] = {R(1, 0, 5), R(1, 1, NO_COMM)};
    char tiny[8];
    job_hang_verdict(tiny, sizeof tiny, r, 2);
    ck_assert_uint_lt(strlen(tiny), sizeof tiny);
    ck_assert_str_eq(tiny, "rank 1 ");
}
END_TEST

START_TEST(test_stalled)
{
    ck_assert(!job_stalled(1.0, 0.1)); /* under the floor */
    ck_assert(job_stalled(2.5, 0.1));  /* past the floor and 3 steps */
    ck_assert(!job_stalled(20.0, 10)); /* two typical steps only */
    ck_assert(job_stalled(31.0, 10));  /* three */
    ck_assert(job_stalled(5.0, 0));    /* no step yet: the floor alone */
    ck_assert(!job_stalled(-1, 0));    /* unknown */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hang");
    TCase *tc = tcase_create("rule");
    tcase_add_loop_test(tc, test_waited_for, 0, sizeof cases / sizeof cases[0]);
    tcase_add_test(tc, test_verdict_short_buffer);
    tcase_add_test(tc, test_stalled);
    suite_add_tcase(s, tc);
    return tests_run(s);
}
