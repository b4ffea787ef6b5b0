/* test_report_folder: how the report folder is put in place (report_dir.c): the temporary
 * folder, replacement, symbolic links, failures that leave nothing, bad and truncated inputs,
 * progress. */
#include "analysis_internal.h"
#include "golden.h"
#include "report.h"
#include "report_fixture.h"

#define TESTUTIL_TAG "report"
#include "testutil.h"

#include <cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A pid that was and is no more: a child that has exited and been reaped. */
static pid_t gone_pid(void)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(0);
    ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
    return pid;
}

/* The temporary folders an analyse killed mid-write left: the next analyse of the same run
 * removes those whose process is gone, and nothing else. */
START_TEST(test_stale_tmp_removed)
{
    char *tmp, *dir;
    report *r = report_a(&tmp, &dir, NULL);
    report_free(r);
    char *run = path_join(tmp, "run");
    char name[128];
    /* A dead analyse's folder, with files and a folder in it. */
    snprintf(name, sizeof name, REPORT_DIR ".tmp-%d-0", (int)gone_pid());
    char *dead = path_join(run, name);
    ck_assert_int_eq(mkdir(dead, 0755), 0);
    char *f1 = path_join(dead, "op_statistics.csv"), *sub = path_join(dead, "part");
    file_write(f1, "half written", 12);
    ck_assert_int_eq(mkdir(sub, 0755), 0);
    char *f2 = path_join(sub, "timeline-1.json");
    file_write(f2, "[", 1);
    /* A live process's (ours, with a number no report of ours takes). */
    snprintf(name, sizeof name, REPORT_DIR ".tmp-%d-999999", (int)getpid());
    char *live = path_join(run, name);
    ck_assert_int_eq(mkdir(live, 0755), 0);
    /* A link with a dead pid's name, pointing to a folder that must keep its file. */
    char *kept = path_join(tmp, "kept");
    ck_assert_int_eq(mkdir(kept, 0755), 0);
    char *kept_file = path_join(kept, "precious");
    file_write(kept_file, "x", 1);
    snprintf(name, sizeof name, REPORT_DIR ".tmp-%d-1", (int)gone_pid());
    char *link = path_join(run, name);
    ck_assert_int_eq(symlink(kept, link), 0);
    /* Names that only look alike. */
    char *other = path_join(run, REPORT_DIR ".tmp-1x-0");
    ck_assert_int_eq(mkdir(other, 0755), 0);

    r = run_report(run, NULL);
    report_free(r);
    ck_assert_msg(!exists(dead), "the dead analyse's folder is still there");
    ck_assert(exists(live));
    ck_assert(exists(link));
    ck_assert(exists(kept_file));
    ck_assert(exists(other));
    ck_assert_int_eq(unlink(link), 0);
    free(f1), free(f2), free(sub), free(dead), free(live), free(kept), free(kept_file);
    free(link), free(other), free(run), free(dir);
    tmp_remove(tmp);
}
END_TEST

START_TEST(test_no_tmp_left_and_replace)
{
    char *tmp, *dir;
    report *r = report_a(&tmp, &dir, NULL);
    report_free(r);
    char *run = path_join(tmp, "run");
    ck_assert_int_eq(count_prefix(run, REPORT_DIR ".tmp"), 0);

    /* A stale file of an older report goes with it: the folder is replaced whole. */
    char *stale = path_join(dir, "timeline-7.json");
    FILE *f = fopen(stale, "w");
    fputs("{}", f);
    fclose(f);
    golden g;
    build_many(&g, 10, NULL);
    char *run2 = path_join(tmp, "run2");
    write_run(&g, run2);
    golden_free(&g);
    report_options o;
    report_options_init(&o);
    o.out_dir = dir;
    r = run_report(run2, &o);
    ck_assert_str_eq(report_info_of(r)->dir, dir);
    report_free(r);
    ck_assert(!exists(stale));
    csv_file c = csv_read(dir, "op_statistics.csv");
    ck_assert_str_eq(c.rows[1][0], "Default/layer/MatMul-op1"); /* the second recording's */
    csv_free(&c);
    ck_assert_int_eq(count_prefix(run, REPORT_DIR ".tmp"), 0);
    ck_assert_int_eq(count_prefix(run, REPORT_DIR), 1);

    /* A folder holding something that is not a report file is not replaced. */
    char *notes = path_join(dir, "notes.txt");
    f = fopen(notes, "w");
    fputs("mine", f);
    fclose(f);
    char *cause = NULL;
    ck_assert_int_eq(report_run(run2, &o, NULL, &cause), -1);
    ck_assert_ptr_nonnull(strstr(cause, "notes.txt"));
    free(cause);
    ck_assert(exists(notes));
    char *sum = path_join(dir, "summary.json");
    ck_assert(exists(sum));
    ck_assert_int_eq(count_prefix(run, REPORT_DIR ".tmp"), 0);

    /* Nor is a regular file. */
    char *file = path_join(tmp, "plain");
    f = fopen(file, "w");
    fclose(f);
    o.out_dir = file;
    cause = NULL;
    ck_assert_int_eq(report_run(run2, &o, NULL, &cause), -1);
    ck_assert_ptr_nonnull(strstr(cause, "not a folder"));
    free(cause);
    ck_assert_int_eq(count_prefix(tmp, "plain.tmp"), 0);

    free(file);
    free(sum);
    free(notes);
    free(stale);
    free(run2);
    free(run);
    free(dir);
    tmp_remove(tmp);
}
END_TEST

START_TEST(test_symlink_target)
{
    golden g;
    build_many(&g, 10, NULL);
    char *tmp = tmp_make();
    char *run = path_join(tmp, "run");
    write_run(&g, run);
    golden_free(&g);
    char *elsewhere = path_join(tmp, "elsewhere"), *keep = path_join(elsewhere, "summary.json");
    ck_assert_int_eq(mkdir(elsewhere, 0700), 0);
    FILE *f = fopen(keep, "w");
    fputs("theirs", f);
    fclose(f);
    char *target = path_join(run, REPORT_DIR);
    ck_assert_int_eq(symlink(elsewhere, target), 0);

    char *cause = NULL;
    ck_assert_int_eq(report_run(run, NULL, NULL, &cause), -1);
    ck_assert_msg(strstr(cause, "symbolic link"), "cause: %s", cause);
    free(cause);
    struct stat st;
    ck_assert_int_eq(lstat(target, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    ck_assert_int_eq(count_prefix(elsewhere, ""), 3); /* ., .. and summary.json */
    char *text = slurp(keep, NULL);
    ck_assert_str_eq(text, "theirs");
    free(text);
    ck_assert_int_eq(count_prefix(run, REPORT_DIR ".tmp"), 0);
    free(target);
    free(keep);
    free(elsewhere);
    free(run);
    tmp_remove(tmp);
}
END_TEST

/* A write that fails midway (the file size limit): -1 with the reason, no temporary folder, and
 * the earlier report untouched. */
START_TEST(test_failure_leaves_nothing)
{
    char *tmp, *dir;
    report *r = report_a(&tmp, &dir, NULL);
    report_free(r);
    char *sum = path_join(dir, "summary.json");
    char *before = slurp(sum, NULL);
    golden g;
    build_many(&g, 3000, NULL);
    char *run2 = path_join(tmp, "run2");
    write_run(&g, run2);
    golden_free(&g);

    struct rlimit old, small;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    small = old;
    small.rlim_cur = 16 * 1024;
    signal(SIGXFSZ, SIG_IGN);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &small), 0);
    report_options o;
    report_options_init(&o);
    o.out_dir = dir;
    char *cause = NULL;
    int rc = report_run(run2, &o, NULL, &cause);
    setrlimit(RLIMIT_FSIZE, &old);
    ck_assert_int_eq(rc, -1);
    ck_assert_msg(strstr(cause, "File too large"), "cause: %s", cause);
    free(cause);
    char *after = slurp(sum, NULL);
    ck_assert_str_eq(after, before);
    char *run = path_join(tmp, "run");
    ck_assert_int_eq(count_prefix(run, REPORT_DIR ".tmp"), 0);
    ck_assert_int_eq(count_prefix(run, REPORT_DIR), 1);

    /* And with no earlier report: nothing at all. */
    o.out_dir = NULL;
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &small), 0);
    cause = NULL;
    rc = report_run(run2, &o, NULL, &cause);
    setrlimit(RLIMIT_FSIZE, &old);
    ck_assert_int_eq(rc, -1);
    free(cause);
    ck_assert_int_eq(count_prefix(run2, REPORT_DIR), 0);
    free(run);
    free(after);
    free(before);
    free(sum);
    free(run2);
    free(dir);
    tmp_remove(tmp);
}
END_TEST

START_TEST(test_bad_inputs)
{
    char *tmp = tmp_make();
    char *missing = path_join(tmp, "missing"), *empty = path_join(tmp, "empty.tsr"),
         *foreign = path_join(tmp, "foreign.tsr");
    FILE *f = fopen(empty, "w");
    fclose(f);
    f = fopen(foreign, "w");
    fputs("{\"traceEvents\": []} and more bytes than a chunk header", f);
    fclose(f);
    const struct {
        const char *path, *says;
    } cases[] = {
        {missing, "cannot open"},
        {empty, "is empty"},
        {foreign, "not a termsight recording"},
    };
    for (size_t i = 0; i < 3; i++) {
        char *cause = NULL;
        ck_assert_int_eq(report_run(cases[i].path, NULL, NULL, &cause), -1);
        ck_assert_msg(strstr(cause, cases[i].says), "%s: %s", cases[i].path, cause);
        free(cause);
    }
    ck_assert_int_eq(count_prefix(tmp, REPORT_DIR), 0);
    free(missing);
    free(empty);
    free(foreign);
    tmp_remove(tmp);
}
END_TEST

/* A recording cut short: the whole chunks are analysed, the damage reported. The events go in
 * two chunks (10 ops, then 10 more); the cut falls inside the second. */
START_TEST(test_truncated)
{
    golden g;
    build_many(&g, 20, NULL);
    char *tmp = tmp_make();
    char *run = path_join(tmp, "run"), *rec = path_join(run, TS_RECORDING_DIR);
    recording_meta meta = {.major = TS_RECORDING_MAJOR, .minor = TS_RECORDING_MINOR, .pid = 7};
    recording_writer *w;
    char *why = NULL;
    ck_assert_int_eq(recording_writer_open(rec, &meta, &w, &why), 0);
    const char **bytes = calloc(g.nnames, sizeof *bytes);
    for (uint32_t i = 0; i < g.nnames; i++)
        bytes[i] = g.names[i];
    ck_assert_int_eq(recording_append_strings(w, 0, g.nnames, bytes, g.lens, &why), 0);
    free(bytes);
    ck_assert_int_eq(recording_append_events(w, lane_run_of(g.ev, 10), &why), 0);
    ck_assert_int_eq(recording_append_events(w, lane_run_of(g.ev + 10, 10), &why), 0);
    ck_assert_int_eq(recording_writer_close(w, &why), 0);
    golden_free(&g);
    char *file = path_join(rec, TS_RECORDING_FILE);
    struct stat st;
    ck_assert_int_eq(stat(file, &st), 0);
    ck_assert_int_eq(truncate(file, st.st_size - 100), 0);

    report *r = run_report(file, NULL);
    const report_info *info = report_info_of(r);
    ck_assert_uint_eq(info->events, 10);
    ck_assert_uint_gt(info->skipped_bytes + info->bad_chunks, 0);
    cJSON *j = json_read(info->dir, "summary.json");
    ck_assert_double_eq(jnum(j, "recording.bytes_skipped"), (double)info->skipped_bytes);
    ck_assert_double_eq(jnum(j, "recording.chunks_skipped"), (double)info->bad_chunks);
    ck_assert_int_eq((int)jnum(j, "events.total"), 10);
    cJSON_Delete(j);
    char *real = realpath(run, NULL);
    char *want = path_join(real, REPORT_DIR);
    ck_assert_str_eq(info->dir, want); /* the run folder's, from the .tsr path */
    free(real);
    free(want);
    report_free(r);
    free(file);
    free(rec);
    free(run);
    tmp_remove(tmp);
}
END_TEST

typedef struct progress_log {
    double v[4096];
    int n;
} progress_log;

static void progress_note(void *ctx, double f)
{
    progress_log *l = ctx;
    if (l->n < 4096)
        l->v[l->n++] = f;
}

START_TEST(test_progress)
{
    golden g;
    build_many(&g, 100, NULL);
    char *tmp = tmp_make();
    char *run = path_join(tmp, "run"), *rec = path_join(run, TS_RECORDING_DIR);
    recording_meta meta = {.major = TS_RECORDING_MAJOR, .minor = TS_RECORDING_MINOR};
    recording_writer *w;
    char *why = NULL;
    ck_assert_int_eq(recording_writer_open(rec, &meta, &w, &why), 0);
    const char **bytes = calloc(g.nnames, sizeof *bytes);
    for (uint32_t i = 0; i < g.nnames; i++)
        bytes[i] = g.names[i];
    ck_assert_int_eq(recording_append_strings(w, 0, g.nnames, bytes, g.lens, &why), 0);
    free(bytes);
    for (int i = 0; i < 10; i++) /* ten chunks: ten batches */
        ck_assert_int_eq(recording_append_events(w, lane_run_of(g.ev + 10 * i, 10), &why), 0);
    ck_assert_int_eq(recording_writer_close(w, &why), 0);
    golden_free(&g);

    progress_log log = {.n = 0};
    report_options o;
    report_options_init(&o);
    o.progress = progress_note;
    o.progress_ctx = &log;
    report_free(run_report(run, &o));
    ck_assert_int_ge(log.n, 11);
    for (int i = 0; i < log.n; i++) {
        ck_assert(log.v[i] >= 0 && log.v[i] <= 1);
        if (i)
            ck_assert(log.v[i] >= log.v[i - 1]);
    }
    ck_assert(log.v[log.n - 1] == 1.0);
    ck_assert(log.v[log.n - 2] > 0.5 && log.v[log.n - 2] < 1.0);
    free(rec);
    free(run);
    tmp_remove(tmp);
}
END_TEST

static Suite *report_folder_suite(void)
{
    Suite *s = suite_create("report_folder");
    TCase *tc = tcase_create("folder");
    tcase_add_test(tc, test_no_tmp_left_and_replace);
    tcase_add_test(tc, test_stale_tmp_removed);
    tcase_add_test(tc, test_symlink_target);
    tcase_add_test(tc, test_failure_leaves_nothing);
    tcase_add_test(tc, test_bad_inputs);
    tcase_add_test(tc, test_truncated);
    tcase_add_test(tc, test_progress);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tests_run(report_folder_suite());
}
