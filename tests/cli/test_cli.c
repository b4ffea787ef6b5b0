/* The termsight command, run as a real program ($TERMSIGHT_BIN) on recordings made here: dump
 * and ls (analyse and the option forms: test_cli_analyse.c). */
#include "model.h"

#define TESTUTIL_TAG "cli"
#include "testutil.h"
#include "shmnames.h"
#include "cliutil.h"
#include "recutil.h"

#include <cJSON.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static size_t lines_count(const char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += s[i] == '\n';
    return n;
}

/* The recording every dump test reads: odd names, each event kind's printing path. */
static const struct {
    const char *bytes;
    uint32_t len;
} names[] = {
#define NAME(s) s, sizeof(s) - 1 /* the bytes and their length, NULs included */
    {NAME("")},
    {NAME("<names table full>")},
    {NAME("aten::mm")},
    {NAME("a \"q\" b\\c")},
    {NAME("line\nnext\ttab")},
    {NAME("nul\0x\xff\x7f\xc3\xa9")},
    {NAME("a,b")},
#undef NAME
};
#define N_NAMES (sizeof(names) / sizeof(names[0]))

static ts_event sample_event(size_t i)
{
    double half = 1.5;
    uint64_t half_bits;
    memcpy(&half_bits, &half, sizeof(half));
    const ts_event ev[] = {
        {.kind = TS_KIND_OP_RANGE,
         .tid = 101,
         .device = TS_DEVICE_HOST,
         .aux = 1,
         .name = 2,
         .type = 6,
         .begin_ns = 1000,
         .end_ns = 2000,
         .v0 = 123},
        {.kind = TS_KIND_KERNEL,
         .flags = TS_EF_COMM,
         .tid = 7,
         .device = 0,
         .aux = 3,
         .name = 3,
         .begin_ns = 1500,
         .end_ns = 1600,
         .corr = 42},
        {.kind = TS_KIND_MEMCPY,
         .tid = 7,
         .device = 1,
         .aux = 1,
         .name = 4,
         .begin_ns = 1700,
         .end_ns = 1800,
         .corr = 43,
         .v0 = 4096},
        {.kind = TS_KIND_COUNTER,
         .flags = TS_EF_DOUBLE,
         .tid = 101,
         .device = TS_DEVICE_HOST,
         .name = 6,
         .begin_ns = 1900,
         .end_ns = 1900,
         .v0 = half_bits},
        {.kind = TS_KIND_MARK,
         .tid = 101,
         .device = TS_DEVICE_HOST,
         .name = 5,
         .begin_ns = 2000,
         .end_ns = 2000},
        {.kind = 200,
         .tid = 1,
         .device = TS_DEVICE_HOST,
         .name = 99,
         .begin_ns = 2100,
         .end_ns = 2100,
         .v1 = 5},
        {.kind = TS_KIND_STEP_BEGIN,
         .tid = 101,
         .device = TS_DEVICE_HOST,
         .name = 1,
         .type = 2,
         .begin_ns = 2200,
         .end_ns = 2200,
         .v0 = UINT64_MAX},
    };
    ck_assert_uint_lt(i, sizeof(ev) / sizeof(ev[0]));
    return ev[i];
}

#define N_SAMPLE 7

static const char *const sample_lines[N_SAMPLE] = {
    "1000 2000 op tid=101 dev=host name=\"aten::mm\" type=\"a,b\" aux=1 corr=0 v0=123 v1=0 "
    "flags=0x0",
    "1500 1600 kernel tid=7 dev=0 name=\"a \\\"q\\\" b\\\\c\" type=\"\" aux=3 corr=42 v0=0 v1=0 "
    "flags=0x4",
    "1700 1800 memcpy tid=7 dev=1 name=\"line\\x0anext\\x09tab\" type=\"\" aux=1 corr=43 v0=4096 "
    "v1=0 flags=0x0",
    "1900 1900 counter tid=101 dev=host name=\"a,b\" type=\"\" aux=0 corr=0 v0=1.5 v1=0 flags=0x1",
    "2000 2000 mark tid=101 dev=host name=\"nul\\x00x\\xff\\x7f\\xc3\\xa9\" type=\"\" aux=0 corr=0 "
    "v0=0 v1=0 flags=0x0",
    "2100 2100 unknown(200) tid=1 dev=host name=#99 type=\"\" aux=0 corr=0 v0=0 v1=5 flags=0x0",
    "2200 2200 step_begin tid=101 dev=host name=\"<names table full>\" type=\"aten::mm\" aux=0 "
    "corr=0 v0=18446744073709551615 v1=0 flags=0x0",
};

static recording_writer *sample_writer(const char *dir)
{
    recording_meta m;
    memset(&m, 0, sizeof(m));
    m.major = 1;
    m.pid = 4242;
    snprintf(m.process, sizeof(m.process), "train");
    recording_writer *w = NULL;
    char *cause = NULL;
    ck_assert_msg(recording_writer_open(dir, &m, &w, &cause) == 0, "writer: %s", cause);
    const char *bytes[N_NAMES];
    uint32_t lens[N_NAMES];
    for (size_t i = 0; i < N_NAMES; i++) {
        bytes[i] = names[i].bytes;
        lens[i] = names[i].len;
    }
    ck_assert_int_eq(recording_append_strings(w, 0, N_NAMES, bytes, lens, &cause), 0);
    return w;
}

static void sample_events(recording_writer *w, size_t from, size_t to)
{
    ts_event ev[N_SAMPLE];
    for (size_t i = from; i < to; i++)
        ev[i - from] = sample_event(i);
    char *cause = NULL;
    ck_assert_msg(recording_append_events(w, lane_run_of(ev, to - from), &cause) == 0, "events: %s",
                  cause);
}

/* tmp/run/recording/events.tsr holding the sample events; returns the run folder. */
static char *sample_make(const char *tmp)
{
    char *run = path_join(tmp, "run");
    char *dir = path_join(run, TS_RECORDING_DIR);
    recording_writer *w = sample_writer(dir);
    sample_events(w, 0, 4);
    sample_events(w, 4, N_SAMPLE);
    ck_assert_int_eq(recording_writer_close(w, NULL), 0);
    free(dir);
    return run;
}

/* ------------------------------------------------------------------------------------------ */
/* dump                                                                                       */
/* ------------------------------------------------------------------------------------------ */

START_TEST(test_dump_lines)
{
    char *tmp = tmp_make();
    char *run = sample_make(tmp);
    char *file = path_join(run, TS_RECORDING_DIR "/" TS_RECORDING_FILE);
    char *rec = path_join(run, TS_RECORDING_DIR);
    const char *paths[] = {run, rec, file};
    for (size_t i = 0; i < 3; i++) {
        cli_result res;
        cli_run(tmp, (const char *[]){"dump", paths[i], NULL}, &res);
        ck_assert_msg(res.status == 0, "status %d: %s", res.status, res.err);
        lines_expect(&res, sample_lines, N_SAMPLE);
        ck_assert_str_eq(res.err, "7 events printed\n");
        cli_result_free(&res);
    }
    free(rec);
    free(file);
    free(run);
    tmp_remove(tmp);
}
END_TEST

START_TEST(test_dump_kind_filter)
{
    char *tmp = tmp_make();
    char *run = sample_make(tmp);
    cli_result res;
    cli_run(tmp, (const char *[]){"dump", "--kind", "kernel", run, "--kind=counter", NULL}, &res);
    ck_assert_int_eq(res.status, 0);
    lines_expect(&res, (const char *const[]){sample_lines[1], sample_lines[3]}, 2);
    err_expect(&res, "2 events printed");
    cli_result_free(&res);

    cli_run(tmp, (const char *[]){"dump", "-k", "memset", run, NULL}, &res);
    ck_assert_int_eq(res.status, 0);
    lines_expect(&res, NULL, 0);
    err_expect(&res, "0 events printed");
    cli_result_free(&res);
    free(run);
    tmp_remove(tmp);
}
END_TEST

START_TEST(test_dump_limit)
{
    char *tmp = tmp_make();
    char *run = sample_make(tmp);
    static const struct {
        const char *opt, *value;
        size_t lines;
    } cases[] = {
        {"--limit", "2", 2},
        {"-n", "5", 5},
        {"--limit", "0", 0},
        {"--limit", "1000", N_SAMPLE},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cli_result res;
        cli_run(tmp, (const char *[]){"dump", cases[i].opt, cases[i].value, run, NULL}, &res);
        ck_assert_int_eq(res.status, 0);
        lines_expect(&res, sample_lines, cases[i].lines);
        cli_result_free(&res);
    }
    cli_result res;
    cli_run(tmp, (const char *[]){"dump", "--limit=1", "--kind", "mark", run, NULL}, &res);
    ck_assert_int_eq(res.status, 0);
    lines_expect(&res, &sample_lines[4], 1);
    err_expect(&res, "1 events printed");
    cli_result_free(&res);
    free(run);
    tmp_remove(tmp);
}
END_TEST

START_TEST(test_dump_many)
{
    /* Two runs across several chunks: one line per event, in order. */
    enum { N = 10000, SPLIT = 6000 };
    char *tmp = tmp_make();
    char *dir = path_join(tmp, "rec");
    recording_writer *w = sample_writer(dir);
    ts_event *ev = calloc(N, sizeof(*ev));
    ck_assert_ptr_nonnull(ev);
    for (size_t i = 0; i < N; i++)
        ev[i] = (ts_event){.kind = TS_KIND_QUEUE_SAMPLE,
                           .device = TS_DEVICE_HOST,
                           .name = (uint32_t)(i % N_NAMES),
                           .begin_ns = i,
                           .end_ns = i,
                           .v0 = i};
    ck_assert_int_eq(
        recording_append_events(
            w, (lane_run){.a = ev, .na = SPLIT, .b = ev + SPLIT, .nb = N - SPLIT}, NULL),
        0);
    ck_assert_int_eq(recording_writer_close(w, NULL), 0);

    cli_result res;
    cli_run(tmp, (const char *[]){"dump", dir, NULL}, &res);
    ck_assert_int_eq(res.status, 0);
    ck_assert_uint_eq(lines_count(res.out, res.out_len), N);
    ck_assert_str_eq(res.err, "10000 events printed\n");
    const char *p = res.out;
    for (size_t i = 0; i < N; i++) {
        char want[64];
        int n = snprintf(want, sizeof(want), "%zu %zu queue ", i, i);
        ck_assert_msg(!strncmp(p, want, (size_t)n), "line %zu: %.60s", i, p);
        p = strchr(p, '\n') + 1;
    }
    cli_result_free(&res);
    free(ev);
    free(dir);
    tmp_remove(tmp);
}
END_TEST

START_TEST(test_dump_damaged)
{
    /* A flipped byte in the middle chunk: the rest is printed, the damage reported, exit 0. */
    char *tmp = tmp_make();
    char *dir = path_join(tmp, "rec");
    recording_writer *w = sample_writer(dir);
    sample_events(w, 0, 2);
    uint64_t middle = recording_bytes(w);
    sample_events(w, 2, 5);
    uint64_t after = recording_bytes(w);
    sample_events(w, 5, N_SAMPLE);
    ck_assert_int_eq(recording_writer_close(w, NULL), 0);
    char *file = path_join(dir, TS_RECORDING_FILE);
    int fd = open(file, O_RDWR);
    ck_assert_int_ge(fd, 0);
    unsigned char c;
    ck_assert_int_eq(pread(fd, &c, 1, (off_t)middle + 40), 1);
    c ^= 0x20;
    ck_assert_int_eq(pwrite(fd, &c, 1, (off_t)middle + 40), 1);
    close(fd);

    cli_result res;
    cli_run(tmp, (const char *[]){"dump", file, NULL}, &res);
    ck_assert_int_eq(res.status, 0);
    lines_expect(
        &res,
        (const char *const[]){sample_lines[0], sample_lines[1], sample_lines[5], sample_lines[6]},
        4);
    err_expect(&res, "4 events printed");
    char want[256];
    snprintf(want, sizeof(want), "%llu bytes skipped in 1 damaged chunks",
             (unsigned long long)(after - middle));
    err_expect(&res, want);
    err_expect(&res, file);
    cli_result_free(&res);
    free(file);
    free(dir);
    tmp_remove(tmp);
}
END_TEST

/* Bad input and bad usage: the status, a message on stderr, nothing on stdout. */
enum dump_input { IN_RUN, IN_MISSING, IN_EMPTY, IN_FOREIGN, IN_EMPTY_DIR };

static const struct {
    enum dump_input input;
    const char *args[5]; /* "@" stands for the input's path */
    int status;
    const char *message;
} dump_errors[] = {
    {IN_MISSING, {"@"}, 1, "No such file or directory"},
    {IN_EMPTY, {"@"}, 1, "is empty"},
    {IN_FOREIGN, {"@"}, 1, "is not a termsight recording"},
    {IN_EMPTY_DIR, {"@"}, 1, "holds no termsight recording"},
    {IN_RUN, {NULL}, 2, "which recording"},
    {IN_RUN, {"--frobnicate", "@"}, 2, "unknown option '--frobnicate'"},
    {IN_RUN, {"--kind", "bogus", "@"}, 2, "unknown kind 'bogus'"},
    {IN_RUN, {"@", "--kind"}, 2, "--kind needs a value"},
    {IN_RUN, {"--limit", "ten", "@"}, 2, "--limit needs a whole number"},
    {IN_RUN, {"--limit=-1", "@"}, 2, "--limit needs a whole number"},
    {IN_RUN, {"@", "@"}, 2, "one recording at a time"},
};

START_TEST(test_dump_errors)
{
    char *tmp = tmp_make();
    static const char foreign[] = "PK\3\4 this is a zip file, or so it says\n";
    char *path = NULL;
    switch (dump_errors[_i].input) {
    case IN_RUN:
        path = sample_make(tmp);
        break;
    case IN_MISSING:
        path = path_join(tmp, "no-such-run");
        break;
    case IN_EMPTY:
        path = path_join(tmp, "empty.tsr");
        file_write(path, "", 0);
        break;
    case IN_FOREIGN:
        path = path_join(tmp, "foreign.tsr");
        file_write(path, foreign, sizeof(foreign) - 1);
        break;
    case IN_EMPTY_DIR:
        path = path_join(tmp, "empty-run");
        ck_assert_int_eq(mkdir(path, 0700), 0);
        break;
    }
    const char *args[7] = {"dump"};
    for (size_t i = 0; i < 5 && dump_errors[_i].args[i]; i++)
        args[i + 1] = strcmp(dump_errors[_i].args[i], "@") ? dump_errors[_i].args[i] : path;
    cli_result res;
    cli_run(tmp, args, &res);
    ck_assert_msg(res.status == dump_errors[_i].status, "status %d, stderr: %s", res.status,
                  res.err);
    ck_assert_msg(res.out_len == 0, "stdout: %s", res.out);
    err_expect(&res, dump_errors[_i].message);
    err_expect(&res, "termsight: ");
    if (res.status == 1)
        err_expect(&res, path);
    else
        err_expect(&res, "usage: termsight dump");
    cli_result_free(&res);
    free(path);
    tmp_remove(tmp);
}
END_TEST

START_TEST(test_dump_help)
{
    char *tmp = tmp_make();
    cli_result res;
    cli_run(tmp, (const char *[]){"dump", "--help", NULL}, &res);
    ck_assert_int_eq(res.status, 0);
    ck_assert_ptr_nonnull(strstr(res.out, "usage: termsight dump"));
    ck_assert_ptr_nonnull(strstr(res.out, "--kind"));
    ck_assert_ptr_nonnull(strstr(res.out, "--limit"));
    ck_assert_ptr_nonnull(strstr(res.out, " kernel "));
    cli_result_free(&res);
    tmp_remove(tmp);
}
END_TEST

Suite *dump_suite(void)
{
    Suite *s = suite_create("dump");
    TCase *tc = tcase_create("output");
    tcase_add_test(tc, test_dump_lines);
    tcase_add_test(tc, test_dump_kind_filter);
    tcase_add_test(tc, test_dump_limit);
    tcase_add_test(tc, test_dump_many);
    tcase_add_test(tc, test_dump_damaged);
    tcase_add_test(tc, test_dump_help);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_add_loop_test(tc, test_dump_errors, 0, sizeof(dump_errors) / sizeof(dump_errors[0]));
    suite_add_tcase(s, tc);
    return s;
}

/* ------------------------------------------------------------------------------------------ */
/* ls                                                                                         */
/* ------------------------------------------------------------------------------------------ */

/* A pid no process has: above the kernel's pid_max (at most 2^22). */
static pid_t dead_pid(int k)
{
    return (pid_t)(5000000 + (getpid() % 100000) * 10 + k);
}

static segment *ls_job_segment(pid_t pid, const char *process, uint32_t state, const char *job,
                               int32_t rank, int32_t parent_pid)
{
    segment_config cfg = {.pid = pid,
                          .process = process,
                          .run_folder = "/data/run-folder",
                          .clock = "tsc",
                          .lane_count = 2,
                          .lane_events = 64,
                          .string_max = 16,
                          .string_arena = 4096,
                          .job = job,
                          .rank = rank,
                          .local_rank = rank,
                          .world_size = 2,
                          .parent_pid = parent_pid};
    segment *s;
    char *why = NULL;
    ck_assert_msg(segment_create(&cfg, &s, &why) == 0, "create: %s", why);
    ts_segment_header *h = segment_header(s);
    atomic_store(&h->state, state);
    atomic_store(&h->events_recorded, 4242);
    atomic_store(&h->drops, 7);
    return s;
}

static segment *ls_segment(pid_t pid, const char *process, uint32_t state)
{
    return ls_job_segment(pid, process, state, NULL, -1, 0);
}

static const char *line_with(const cli_result *r, const char *needle)
{
    const char *p = strstr(r->out, needle);
    ck_assert_msg(p != NULL, "no line with '%s' in:\n%s", needle, r->out);
    while (p > r->out && p[-1] != '\n')
        p--;
    return p;
}

START_TEST(test_ls_lists_and_cleans)
{
    char *tmp = tmp_make();
    segment *live = ls_segment(getpid(), "trainer", TS_STATE_COLLECTING);
    segment *stale = ls_segment(dead_pid(1), "crashed", TS_STATE_STOPPED);
    char junk[64];
    snprintf(junk, sizeof junk, "/dev/shm/termsight-%d", (int)dead_pid(2));
    file_write(junk, "not a segment at all", 20);
    /* A control object whose segment is gone (removed by hand): an orphan. */
    char orphan[80];
    snprintf(orphan, sizeof orphan, "/dev/shm/termsight-%d-0123456789abcdef-ctl", (int)dead_pid(8));
    file_write(orphan, "", 0);

    cli_result r;
    cli_run(tmp, (const char *const[]){"ls", NULL}, &r);
    ck_assert_int_eq(r.status, 0);
    char want[128];
    snprintf(want, sizeof want, "%d", (int)getpid());
    const char *l = line_with(&r, want);
    ck_assert(!strncmp(l, want, strlen(want)));
    ck_assert_ptr_nonnull(strstr(l, "trainer"));
    ck_assert_ptr_nonnull(strstr(l, "collecting"));
    ck_assert_ptr_nonnull(strstr(l, "4242"));
    ck_assert_ptr_nonnull(strstr(l, "/data/run-folder"));
    const char *end = strchr(l, '\n');
    ck_assert_msg(!strstr(l, "stale") || strstr(l, "stale") > end, "live marked stale");
    l = line_with(&r, "crashed");
    ck_assert_ptr_nonnull(strstr(l, "stopped"));
    ck_assert_ptr_nonnull(strstr(l, "stale: process gone"));
    snprintf(want, sizeof want, "%d", (int)dead_pid(2));
    l = line_with(&r, want);
    ck_assert_ptr_nonnull(strstr(l, "unreadable"));
    cli_result_free(&r);

    cli_run(tmp, (const char *const[]){"ls", "--clean", NULL}, &r);
    ck_assert_int_eq(r.status, 0);
    snprintf(want, sizeof want, "%s (pid %d", segment_shm_name(stale), (int)dead_pid(1));
    l = line_with(&r, want);
    ck_assert(!strncmp(l, "removed ", 8));
    snprintf(want, sizeof want, "removed /termsight-%d (pid %d", (int)dead_pid(2),
             (int)dead_pid(2));
    ck_assert_ptr_nonnull(strstr(r.out, want));
    ck_assert_ptr_nonnull(strstr(r.out, "control object"));
    cli_result_free(&r);
    ck_assert_int_ne(access(junk, F_OK), 0);
    ck_assert_int_ne(access(orphan, F_OK), 0);
    ck_assert(!shm_exists_pid(dead_pid(1)));
    ck_assert(shm_exists_pid(getpid())); /* the live one stays */

    cli_run(tmp, (const char *const[]){"ls", NULL}, &r);
    ck_assert_ptr_null(strstr(r.out, "crashed"));
    cli_result_free(&r);
    segment_close(stale, 0);
    segment_close(live, 1);
    tmp_remove(tmp);
}
END_TEST

/* ls --clean PID: only that process's stale session goes; another's stays, a running one's is
 * named and left, a word that is no pid is refused. */
START_TEST(test_ls_cleans_the_pids_given)
{
    char *tmp = tmp_make();
    segment *live = ls_segment(getpid(), "trainer", TS_STATE_COLLECTING);
    segment *one = ls_segment(dead_pid(3), "crashed", TS_STATE_STOPPED);
    segment *other = ls_segment(dead_pid(4), "crashed", TS_STATE_STOPPED);
    char pid_text[16], live_text[16];
    snprintf(pid_text, sizeof pid_text, "%d", (int)dead_pid(3));
    snprintf(live_text, sizeof live_text, "%d", (int)getpid());
    cli_result r;
    cli_run(tmp, (const char *const[]){"ls", "--clean", pid_text, NULL}, &r);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "1 stale session removed"));
    cli_result_free(&r);
    ck_assert(!shm_exists_pid(dead_pid(3)));
    ck_assert(shm_exists_pid(dead_pid(4)));
    cli_run(tmp, (const char *const[]){"ls", "--clean", live_text, NULL}, &r);
    ck_assert_int_eq(r.status, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "is running"));
    cli_result_free(&r);
    ck_assert(shm_exists_pid(getpid()));
    cli_run(tmp, (const char *const[]){"ls", "--clean", "12ab", NULL}, &r);
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "process ids, not '12ab'"));
    cli_result_free(&r);
    cli_run(tmp, (const char *const[]){"ls", "7", NULL}, &r);
    ck_assert_int_eq(r.status, 2); /* pids only with --clean */
    cli_result_free(&r);
    segment_close(one, 0);
    segment_close(other, 1);
    segment_close(live, 1);
    tmp_remove(tmp);
}
END_TEST

/* Sessions grouped by job, ranks in order, under a line naming the job; sessions of no job
 * first. */
START_TEST(test_ls_groups_jobs)
{
    char *tmp = tmp_make();
    segment *segs[] = {
        ls_job_segment(dead_pid(3), "rank-b1", TS_STATE_COLLECTING, "jobB", 1, 0),
        ls_job_segment(dead_pid(4), "rank-a1", TS_STATE_COLLECTING, "jobA", 1, 0),
        ls_job_segment(dead_pid(5), "rank-a0", TS_STATE_COLLECTING, "jobA", 0, 0),
        ls_job_segment(dead_pid(6), "solo", TS_STATE_IDLE, NULL, 3, 0),
        ls_job_segment(dead_pid(7), "worker-a0", TS_STATE_COLLECTING, "jobA", 0, dead_pid(5)),
    };
    cli_result r;
    cli_run(tmp, (const char *const[]){"ls", NULL}, &r);
    ck_assert_int_eq(r.status, 0);
    const char *solo = line_with(&r, "solo"), *a = line_with(&r, "job jobA: "),
               *a0 = line_with(&r, "rank-a0"), *a1 = line_with(&r, "rank-a1"),
               *b = line_with(&r, "job jobB: "), *b1 = line_with(&r, "rank-b1");
    ck_assert_msg(solo < a && a < a0 && a0 < a1 && a1 < b && b < b1, "order:\n%s", r.out);
    ck_assert(!strncmp(b, "job jobB: 1 session of 2 ranks", 30));
    /* The RANK column: the rank for a job's sessions, "-" without a job. */
    char want[64];
    snprintf(want, sizeof want, "%-8d %-16s %-6s ", (int)dead_pid(4), "rank-a1", "1");
    ck_assert_msg(!strncmp(a1, want, strlen(want)), "%s", a1);
    snprintf(want, sizeof want, "%-8d %-16s %-6s ", (int)dead_pid(6), "solo", "-");
    ck_assert_msg(!strncmp(solo, want, strlen(want)), "%s", solo);
    /* A rank's forked child: its rank with "w", in its job. */
    const char *w = line_with(&r, "worker-a0");
    snprintf(want, sizeof want, "%-8d %-16s %-6s ", (int)dead_pid(7), "worker-a0", "0w");
    ck_assert_msg(!strncmp(w, want, strlen(want)), "%s", w);
    ck_assert(a < w && w < b);
    ck_assert(!strncmp(a, "job jobA: 3 sessions of 2 ranks", 31));
    cli_result_free(&r);
    for (size_t i = 0; i < sizeof segs / sizeof segs[0]; i++)
        segment_close(segs[i], 1);
    tmp_remove(tmp);
}
END_TEST

START_TEST(test_ls_usage)
{
    char *tmp = tmp_make();
    cli_result r;
    cli_run(tmp, (const char *const[]){"ls", "--bogus", NULL}, &r);
    ck_assert_int_eq(r.status, 2);
    err_expect(&r, "unknown option '--bogus'");
    cli_result_free(&r);
    cli_run(tmp, (const char *const[]){"ls", "--help", NULL}, &r);
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "usage: termsight ls"));
    cli_result_free(&r);
    cli_run(tmp, (const char *const[]){"no-such-command", NULL}, &r);
    ck_assert_int_eq(r.status, 2);
    err_expect(&r, "unknown command 'no-such-command'");
    cli_result_free(&r);
    tmp_remove(tmp);
}
END_TEST

Suite *ls_suite(void)
{
    Suite *s = suite_create("ls");
    TCase *tc = tcase_create("sessions");
    tcase_add_test(tc, test_ls_lists_and_cleans);
    tcase_add_test(tc, test_ls_cleans_the_pids_given);
    tcase_add_test(tc, test_ls_groups_jobs);
    tcase_add_test(tc, test_ls_usage);
    suite_add_tcase(s, tc);
    return s;
}

/* ------------------------------------------------------------------------------------------ */

int main(void)
{
    Suite *(*const suites[])(void) = {
        dump_suite,
        ls_suite,
    };
    SRunner *sr = srunner_create(NULL);
    for (size_t i = 0; i < sizeof(suites) / sizeof(suites[0]); i++)
        srunner_add_suite(sr, suites[i]());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
