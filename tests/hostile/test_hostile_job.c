/* The job report and the analysis against hostile report folders and recordings: FIFOs,
 * oversized files and links where a rank's report files should be, rank folders named with
 * terminal escapes and invalid UTF-8, a recording still being written while it is analysed, and a
 * step trace claiming a step number far past its rows. Every run of `termsight analyse` here is
 * bounded in time: one that blocks is killed and fails its test. */
#define TESTUTIL_TAG "hostile-job"
#include "model.h"
#include "testutil.h"
#include "cliutil.h"
#include "recutil.h"

#include <cJSON.h>
#include <check.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ANALYSE_TIMEOUT_S 60 /* far past what each run here takes (under a second) */

/* Every test's folders lie in one made and removed by the unchecked fixture, in this process:
 * removed also after a test that failed (its child process ended at the failure). */
static char *base_dir;

static void base_make(void)
{
    base_dir = tmp_make();
}

static void base_remove(void)
{
    tmp_remove(base_dir);
}

/* A new folder for one test, in base_dir. */
static char *case_make(void)
{
    char *dir = path_join(base_dir, "case-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    return dir;
}

/* A job folder tmp/j with ranks 0 and 1 (rec_make_rank), both analysed: their reports are there.
 * *r1: rank 1's run folder. */
static char *job_make(const char *tmp, char **r1)
{
    char *job = path_join(tmp, "j");
    ck_assert_int_eq(mkdir(job, 0700), 0);
    free(rec_make_rank(job, 0, NULL));
    *r1 = rec_make_rank(job, 1, NULL);
    cli_result r;
    cli_run_bounded(tmp, (const char *const[]){"analyse", job, NULL}, &r, NULL, NULL,
                    ANALYSE_TIMEOUT_S);
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    cli_result_free(&r);
    return job;
}

/* The text of dir/name, malloc'd. */
static char *text_of(const char *dir, const char *name, size_t *len)
{
    char *p = path_join(dir, name);
    int fd = open(p, O_RDONLY);
    ck_assert_msg(fd >= 0, "no %s", p);
    char *text = file_slurp(fd, len);
    close(fd);
    free(p);
    return text;
}

/* ---- Things planted at a rank's report files --------------------------------------------- */

enum plant { PLANT_FIFO, PLANT_HUGE, PLANT_LINK };

typedef struct plant_case {
    const char *file;
    enum plant plant;
    int merge_only;
    const char *said; /* what the warning says of the file */
} plant_case;

static const plant_case plants[] = {
    {"summary.json", PLANT_FIFO, 0, "report/summary.json is a FIFO"},
    {"summary.json", PLANT_FIFO, 1, "report/summary.json is a FIFO"},
    {"step_trace.csv", PLANT_FIFO, 0, "report/step_trace.csv is a FIFO"},
    {"step_trace.csv", PLANT_FIFO, 1, "report/step_trace.csv is a FIFO"},
    {"timeline.json", PLANT_FIFO, 0, "report/timeline.json is a FIFO"},
    {"timeline.json", PLANT_FIFO, 1, "report/timeline.json is a FIFO"},
    /* Sparse files one byte past the documented maximum (docs/jobs.md, "Bad input and limits"). */
    {"summary.json", PLANT_HUGE, 1, "report/summary.json holds 67108865 bytes, more than"},
    {"step_trace.csv", PLANT_HUGE, 1, "report/step_trace.csv holds 1073741825 bytes, more than"},
    {"timeline.json", PLANT_HUGE, 1, "report/timeline.json holds 4294967297 bytes, more than"},
    {"step_trace.csv", PLANT_LINK, 1, "report/step_trace.csv: a symbolic link, not followed"},
};

static void plant_at(const char *path, enum plant plant)
{
    ck_assert_int_eq(unlink(path), 0);
    if (plant == PLANT_FIFO) {
        ck_assert_int_eq(mkfifo(path, 0600), 0);
    } else if (plant == PLANT_LINK) {
        ck_assert_int_eq(symlink("/dev/zero", path), 0);
    } else {
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
        ck_assert_int_ge(fd, 0);
        off_t max = !strcmp(path + strlen(path) - 12, "summary.json") ? (64ll << 20)
                    : strstr(path, "step_trace")                      ? (1ll << 30)
                                                                      : (4ll << 30);
        ck_assert_int_eq(ftruncate(fd, max + 1), 0); /* a hole: no disk used */
        close(fd);
    }
}

/* A FIFO (no writer: reading it would block forever), a file past its maximum or a link at one of
 * rank 1's report files: analyse JOB (which analyses rank 1 again: that fails, its folder
 * holding a FIFO) and --merge-only end, merge rank 0, and name the file in a warning. */
START_TEST(test_planted)
{
    const plant_case *c = &plants[_i];
    char *tmp = case_make();
    char *r1;
    char *job = job_make(tmp, &r1);
    char *rep = path_join(r1, "report");
    char *at = path_join(rep, c->file);
    plant_at(at, c->plant);

    cli_result r;
    const char *full[] = {"analyse", job, NULL}, *merge[] = {"analyse", "--merge-only", job, NULL};
    cli_run_bounded(tmp, c->merge_only ? merge : full, &r, NULL, NULL, ANALYSE_TIMEOUT_S);
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    ck_assert_msg(strstr(r.out, c->said), "stdout lacks '%s':\n%s", c->said, r.out);
    /* Rank 0 is merged whatever rank 1's files are; rank 1 too unless its summary is gone. */
    const char *ranks = strcmp(c->file, "summary.json") ? "job:        j, 2 ranks of 2"
                                                        : "job:        j, 1 rank of 2";
    ck_assert_msg(strstr(r.out, ranks), "stdout lacks '%s':\n%s", ranks, r.out);
    size_t len;
    char *json = text_of(job, "report/summary.json", &len);
    cJSON *root = cJSON_Parse(json);
    ck_assert_ptr_nonnull(root);
    const cJSON *w, *warnings = cJSON_GetObjectItem(root, "warnings");
    int found = 0;
    cJSON_ArrayForEach(w, warnings) found |= strstr(w->valuestring, c->said) != NULL;
    ck_assert_msg(found, "summary.json's warnings lack '%s'", c->said);
    cJSON_Delete(root);
    free(json);
    cli_result_free(&r);
    /* What was planted is left as it was. */
    struct stat st;
    ck_assert_int_eq(lstat(at, &st), 0);
    ck_assert(c->plant == PLANT_FIFO   ? S_ISFIFO(st.st_mode)
              : c->plant == PLANT_LINK ? S_ISLNK(st.st_mode)
                                       : S_ISREG(st.st_mode));
    free(at);
    free(rep);
    free(r1);
    free(job);
    tmp_remove(tmp);
}
END_TEST

/* ---- Names ---------------------------------------------------------------------------------- */

/* Whether bytes are strict UTF-8 (model's codec: no overlong forms, surrogates or code points
 * past U+10FFFF). */
static int strict_utf8(const char *s, size_t len)
{
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t n = utf8_decode((const unsigned char *)s + i, len - i, &cp);
        if (!n)
            return 0;
        i += n;
    }
    return 1;
}

static void no_raw_bytes(const char *what, const char *s, size_t len)
{
    ck_assert_msg(!memchr(s, 0x1b, len), "%s holds an ESC byte:\n%s", what, s);
    ck_assert_msg(!memchr(s, 0x07, len), "%s holds a BEL byte", what);
    ck_assert_msg(strict_utf8(s, len), "%s is not valid UTF-8", what);
}

/* Rank folders named with terminal escapes (a colour, a title set, a screen clear) and bytes that
 * are no UTF-8, one of them a second folder of rank 1 (so that a warning names both): stdout,
 * stderr, report.txt and ranks.csv hold none of those bytes, summary.json is strict UTF-8 that
 * cJSON parses, and holds the names escaped (\xHH). */
START_TEST(test_names)
{
    char *tmp = case_make();
    char *job = path_join(tmp, "j");
    ck_assert_int_eq(mkdir(job, 0700), 0);
    free(rec_make_rank(job, 0, NULL));
    free(rec_make_rank(job, 1, "rank1-\x1b[31mred\x1b]0;title\x07-\xff\xfe-\xc3("));
    free(rec_make_rank(job, 1, "rank1-\x1b[2J\x1b[H-\xed\xa0\x80-\xc0\xaf"));

    cli_result r;
    cli_run_bounded(tmp, (const char *const[]){"analyse", job, NULL}, &r, NULL, NULL,
                    ANALYSE_TIMEOUT_S);
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    ck_assert_msg(strstr(r.out, "a second folder of rank 1"), "%s", r.out);
    no_raw_bytes("stdout", r.out, r.out_len);
    no_raw_bytes("stderr", r.err, r.err_len);
    cli_result_free(&r);

    size_t len;
    const char *files[] = {"report/report.txt", "report/ranks.csv", "report/summary.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char *text = text_of(job, files[i], &len);
        no_raw_bytes(files[i], text, len);
        free(text);
    }
    char *json = text_of(job, "report/summary.json", &len);
    cJSON *root = cJSON_Parse(json);
    ck_assert_msg(root != NULL, "summary.json does not parse");
    const cJSON *rank, *w;
    int escaped = 0;
    cJSON_ArrayForEach(rank, cJSON_GetObjectItem(root, "ranks"))
    {
        const char *f = cJSON_GetStringValue(cJSON_GetObjectItem(rank, "run_folder"));
        ck_assert_ptr_nonnull(f);
        escaped |= strstr(f, "rank1-\\x1b[31mred\\x1b]0;title\\x07-\\xff\\xfe-\\xc3(") ||
                   strstr(f, "rank1-\\x1b[2J\\x1b[H-\\xed\\xa0\\x80-\\xc0\\xaf");
    }
    ck_assert_msg(escaped, "summary.json's ranks lack the escaped folder name:\n%s", json);
    int warned = 0;
    cJSON_ArrayForEach(w, cJSON_GetObjectItem(root, "warnings")) warned |=
        strstr(w->valuestring, "\\x1b") != NULL;
    ck_assert_msg(warned, "no warning names a folder, escaped:\n%s", json);
    cJSON_Delete(root);
    free(json);
    free(job);
    tmp_remove(tmp);
}
END_TEST

/* ---- A recording still being written -------------------------------------------------------- */

#define LIVE_CHUNK_EVENTS 16384u        /* 1 MiB of events a chunk */
#define LIVE_START_BYTES  (48ull << 20) /* the recording before analyse starts */
#define LIVE_MAX_BYTES    (LIVE_START_BYTES + (256ull << 20)) /* the writer stops there */

/* Appends 1 MiB chunks of operator ranges to the recording in dir until it holds max bytes;
 * paced (one chunk a period) so that it is still writing while analyse runs. */
static void live_append(const char *dir, uint64_t max, long period_ns)
{
    recording_meta m = {.major = TS_RECORDING_MAJOR, .pid = 5151};
    recording_writer *w = NULL;
    char *cause = NULL;
    ck_assert_msg(recording_writer_open(dir, &m, &w, &cause) == 0, "writer: %s", cause);
    ts_event *ev = calloc(LIVE_CHUNK_EVENTS, sizeof *ev);
    ck_assert_ptr_nonnull(ev);
    static uint64_t t = 3000000;
    while (recording_bytes(w) < max) {
        for (uint32_t i = 0; i < LIVE_CHUNK_EVENTS; i++, t += 1000)
            ev[i] = (ts_event){.kind = TS_KIND_OP_RANGE,
                               .tid = 10,
                               .device = TS_DEVICE_HOST,
                               .name = 2 + i % 3,
                               .begin_ns = t,
                               .end_ns = t + 500};
        ck_assert_int_eq(recording_append_events(w, lane_run_of(ev, LIVE_CHUNK_EVENTS), &cause), 0);
        if (period_ns)
            nanosleep(&(struct timespec){.tv_nsec = period_ns}, NULL);
    }
    free(ev);
    ck_assert_int_eq(recording_writer_close(w, &cause), 0);
}

/* analyse of a recording that a writer keeps appending to: it ends (before the writer does),
 * having read no more than the recording's size when it began plus one chunk (rchar of its
 * /proc/<pid>/io), and says what it read; the next analyse, after the writer stopped, says
 * nothing of the kind. */
START_TEST(test_live_recording)
{
    char *tmp = case_make();
    char *run = rec_make_run(tmp, "run");
    char *dir = path_join(run, TS_RECORDING_DIR);
    char *file = path_join(dir, TS_RECORDING_FILE);
    live_append(dir, LIVE_START_BYTES, 0);

    fflush(NULL);
    pid_t writer = fork();
    ck_assert_int_ge(writer, 0);
    if (writer == 0) {
        live_append(dir, LIVE_MAX_BYTES, 4000000); /* 250 MiB/s at most: about a second */
        _exit(0);
    }
    /* The writer is writing: the file grew (a bounded wait for that). */
    uint64_t before = path_size(file);
    for (int k = 0; k < 10000 && path_size(file) == before; k++)
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    uint64_t at_start = path_size(file);
    ck_assert_uint_gt(at_start, before);

    cli_result r;
    cli_run_bounded(tmp, (const char *const[]){"analyse", run, NULL}, &r, NULL, NULL,
                    ANALYSE_TIMEOUT_S);
    uint64_t at_end = path_size(file);
    int st;
    ck_assert_int_eq(waitpid(writer, &st, 0), writer);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "writer status %d", st);
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    const char *said = strstr(r.out, "live:       the recording was still being written: read "
                                     "its first ");
    ck_assert_msg(said, "stdout does not say the recording was being written:\n%s", r.out);
    uint64_t read = strtoull(strstr(said, "first ") + 6, NULL, 10);
    err_expect(&r, "the recording was still being written");
    fprintf(stderr,
            "live: %" PRIu64 " bytes at start, read %" PRIu64 " (rchar %" PRIu64 "), %" PRIu64
            " when it ended, peak RSS %ld KiB\n",
            at_start, read, r.read_chars, at_end, r.usage.ru_maxrss);
    ck_assert_uint_ge(read, at_start);
    ck_assert_msg(read < at_end, "it read %" PRIu64 " of %" PRIu64 ": it followed the writer", read,
                  at_end);
    if (r.read_chars != UINT64_MAX)
        ck_assert_uint_le(r.read_chars, read + (1u << 20) + (64u << 10));
    cli_result_free(&r);

    /* Once the writer stopped, the whole file is read and nothing more is said. */
    cli_run_bounded(tmp, (const char *const[]){"analyse", run, NULL}, &r, NULL, NULL,
                    ANALYSE_TIMEOUT_S);
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    ck_assert_msg(!strstr(r.out, "still being written"), "%s", r.out);
    cli_result_free(&r);
    free(file);
    free(dir);
    free(run);
    tmp_remove(tmp);
}
END_TEST

/* ---- A step number far past the rows -------------------------------------------------------- */

/* Rank 1's step_trace.csv is 154 bytes claiming steps 1, 16,777,215 and 10^15: the merge takes
 * memory for the rows it read, not for the numbers (peak RSS under 64 MiB, was 658 MB), and
 * job_steps.csv lists the three steps in order. */
START_TEST(test_step_number)
{
    char *tmp = case_make();
    char *r1;
    char *job = job_make(tmp, &r1);
    char *trace = path_join(r1, "report/step_trace.csv");
    static const char rows[] = "step,total_us,comm_wait_us\n"
                               "1,1000,10\n"
                               "16777215,1000,10\n"
                               "1000000000000000,1000,10\n";
    ck_assert_int_eq(unlink(trace), 0);
    file_write(trace, rows, sizeof rows - 1);
    cli_result r;
    cli_run_bounded(tmp, (const char *const[]){"analyse", "--merge-only", job, NULL}, &r, NULL,
                    NULL, ANALYSE_TIMEOUT_S);
    fprintf(stderr, "step 16777215: peak RSS %ld KiB\n", r.usage.ru_maxrss);
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    ck_assert_msg(strstr(r.out, "job:        j, 2 ranks of 2"), "%s", r.out);
    ck_assert_int_lt(r.usage.ru_maxrss, 64 * 1024);
    cli_result_free(&r);
    size_t len;
    char *steps = text_of(job, "report/job_steps.csv", &len);
    const char *one = strstr(steps, "\n1,2,"), *big = strstr(steps, "\n16777215,1,1,"),
               *huge = strstr(steps, "\n1000000000000000,1,1,");
    ck_assert_msg(one && big && huge && one < big && big < huge, "job_steps.csv:\n%s", steps);
    free(steps);
    free(trace);
    free(r1);
    free(job);
    tmp_remove(tmp);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("hostile_job");
    TCase *tc = tcase_create("job");
    tcase_set_timeout(tc, 300);
    tcase_add_unchecked_fixture(tc, base_make, base_remove);
    tcase_add_loop_test(tc, test_planted, 0, (int)(sizeof plants / sizeof plants[0]));
    tcase_add_test(tc, test_names);
    tcase_add_test(tc, test_live_recording);
    tcase_add_test(tc, test_step_number);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tests_run(suite());
}
