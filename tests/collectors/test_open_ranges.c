/* What the API publishes for hang triage, read back through a read-only attach of the session's
 * own segment as a monitor reads it: a thread's first range shows open at once (it claims the
 * thread's lane), nested ranges show the innermost with the depth, an end shows the enclosing one
 * again and termsight_range_drop clears it like an end; nothing shows after a stop; communications
 * in flight from termsight_comm_issue to termsight_comm_done; termsight_stacks_signal takes
 * real-time signals only and records them in the header. */
#define TESTUTIL_TAG "openranges"
#include "collectors.h"
#include "testutil.h"

#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static termsight_session *session;
static segment *monitor;
static char out[512];

static void setup(void)
{
    const char *base = getenv("TERMSIGHT_TEST_TMP");
    snprintf(out, sizeof out, "%s/openranges-%d-%ld", base && *base ? base : "/tmp", (int)getpid(),
             (long)time(NULL));
    termsight_options o;
    termsight_options_init(&o);
    o.output_path = out;
    ck_assert_int_eq(termsight_session_create(&o, &session), TERMSIGHT_OK);
    char *cause = NULL;
    ck_assert_msg(segment_attach(getpid(), 0, &monitor, &cause) == 0, "%s", cause);
}

static void teardown(void)
{
    segment_close(monitor, 0);
    ck_assert_int_eq(termsight_session_destroy(session), TERMSIGHT_OK);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", out);
    ck_assert_int_eq(system(cmd), 0);
}

/* What a monitor saw after one step of the thread below. */
typedef struct sight {
    char name[64]; /* "" when no range showed */
    uint32_t depth, count, tid_ok;
} sight;

static void look(sight *out)
{
    open_range r[INFLIGHT_RANGES];
    memset(out, 0, sizeof *out);
    out->count = inflight_ranges(monitor, tsclock_monotonic_ns(), r, INFLIGHT_RANGES);
    if (!out->count)
        return;
    uint32_t len = 0;
    const char *b = strtab_get(monitor, r[0].name, &len);
    snprintf(out->name, sizeof out->name, "%.*s", b ? (int)len : 0, b ? b : "");
    out->depth = r[0].depth;
    out->tid_ok = r[0].tid == (uint32_t)gettid();
}

enum { SIGHTS = 6 };

/* Its first event a range's begin: it shows before any range has ended. Threads do not assert:
 * what they saw is checked by the test's thread. */
static void *ranges_thread(void *arg)
{
    sight *s = arg;
    termsight_range_begin("DataLoader.__next__", "DataLoader");
    look(&s[0]);
    termsight_range_begin("aten::add", NULL);
    look(&s[1]);
    termsight_range_end();
    look(&s[2]);
    termsight_range_drop();
    look(&s[3]);
    termsight_range_begin("stuck", NULL);
    look(&s[4]);
    termsight_stop(session);
    look(&s[5]); /* not collecting: what is left open is stale */
    return NULL;
}

START_TEST(test_ranges_published)
{
    static const struct {
        const char *name;
        uint32_t depth;
    } want[SIGHTS] = {{"DataLoader.__next__", 1},
                      {"aten::add", 2},
                      {"DataLoader.__next__", 1},
                      {"", 0},
                      {"stuck", 1},
                      {"", 0}};
    sight s[SIGHTS];
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, ranges_thread, s), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    for (int i = 0; i < SIGHTS; i++) {
        ck_assert_msg(!strcmp(s[i].name, want[i].name), "step %d: '%s', not '%s'", i, s[i].name,
                      want[i].name);
        ck_assert_uint_eq(s[i].count, want[i].name[0] ? 1 : 0);
        ck_assert_uint_eq(s[i].depth, want[i].depth);
        ck_assert_uint_eq(s[i].tid_ok, want[i].name[0] ? 1 : 0);
    }
}
END_TEST

START_TEST(test_comm_in_flight)
{
    uint32_t name = termsight_name("DDP/bucket0/allreduce");
    uint64_t t0 = termsight_now_ns();
    uint64_t ticket = termsight_comm_issue(name, t0);
    ck_assert_uint_ne(ticket, 0);
    open_range r[TS_COMM_SLOTS];
    ck_assert_uint_eq(inflight_comms(monitor, tsclock_monotonic_ns(), r, TS_COMM_SLOTS), 1);
    ck_assert_uint_eq(r[0].name, name);
    ck_assert_uint_eq(r[0].begin_ns, t0);
    termsight_comm_done(ticket);
    ck_assert_uint_eq(inflight_comms(monitor, tsclock_monotonic_ns(), r, TS_COMM_SLOTS), 0);
    termsight_comm_done(ticket); /* twice: nothing */
    termsight_comm_done(0);
}
END_TEST

START_TEST(test_stacks_signal)
{
    const ts_segment_header *h = segment_header(monitor);
    ck_assert_int_eq(termsight_stacks_signal(SIGKILL), TERMSIGHT_E_INVALID);
    ck_assert_int_eq(termsight_stacks_signal(SIGSTOP), TERMSIGHT_E_INVALID);
    ck_assert_int_eq(termsight_stacks_signal(-1), TERMSIGHT_E_INVALID);
    ck_assert_int_eq(atomic_load(&h->stacks_signal), 0);
    ck_assert_int_eq(termsight_stacks_signal(SIGRTMAX - 3), TERMSIGHT_OK);
    ck_assert_int_eq(atomic_load(&h->stacks_signal), SIGRTMAX - 3);
    ck_assert_int_eq(termsight_stacks_signal(0), TERMSIGHT_OK);
    ck_assert_int_eq(atomic_load(&h->stacks_signal), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("open_ranges");
    TCase *tc = tcase_create("api");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_ranges_published);
    tcase_add_test(tc, test_comm_in_flight);
    tcase_add_test(tc, test_stacks_signal);
    suite_add_tcase(s, tc);
    return tests_run(s);
}
