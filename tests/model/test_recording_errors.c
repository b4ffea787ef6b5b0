/* Recording: errors, each a message and -1: paths that name no recording, inputs the reader
 * refuses, a later major version, symbolic links, writers that cannot open or fail midway. */
#include "model.h"

#define TESTUTIL_TAG "rec"
#include "testutil.h"
#include "recording_test.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* ------------------------------------------------------------------------------------------ */
/* Opening and errors                                                                         */
/* ------------------------------------------------------------------------------------------ */

START_TEST(test_open_paths)
{
    char *tmp = tmp_make();
    char *run = path_join(tmp, "run");
    char *dir = path_join(run, TS_RECORDING_DIR);
    char *file = path_join(dir, TS_RECORDING_FILE);
    ts_event *ev = ev_array(0, 4);
    recording_writer *w = writer_open(dir, 1);
    writer_events(w, lane_run_of(ev, 4));
    writer_close(w);
    const char *paths[] = {run, dir, file};
    for (size_t i = 0; i < 3; i++) {
        recording_reader *r = reader_open(paths[i]);
        readout o;
        reader_drain(r, &o);
        events_expect(&o, ev, 4);
        recording_reader_close(r);
        free(o.ev);
    }
    /* The run's report folder given for it: the message names the run folder to give. */
    char *report = path_join(run, "report");
    ck_assert_int_eq(mkdir(report, 0700), 0);
    recording_reader *r = NULL;
    char *why = NULL;
    ck_assert_int_eq(recording_reader_open(report, &r, &why), -1);
    char real[PATH_MAX];
    ck_assert_ptr_nonnull(realpath(run, real));
    ck_assert_msg(why && strstr(why, "holds no termsight recording") && strstr(why, real) &&
                      strstr(why, "give that one"),
                  "%s", why ? why : "(none)");
    free(why);
    free(report);
    free(ev);
    free(file);
    free(dir);
    free(run);
    tmp_remove(tmp);
}
END_TEST

enum bad_input { BAD_EMPTY, BAD_MISSING, BAD_FOREIGN, BAD_TINY, BAD_NO_RECORDING, BAD_FIFO };

static const struct {
    enum bad_input what;
    const char *message;
} bad_inputs[] = {
    {BAD_EMPTY, "is empty"},
    {BAD_MISSING, "No such file or directory"},
    {BAD_FOREIGN, "is not a termsight recording"},
    {BAD_TINY, "is not a termsight recording"},
    {BAD_NO_RECORDING, "holds no termsight recording"},
    {BAD_FIFO, "is not a termsight recording"},
};

START_TEST(test_reader_refuses)
{
    char *tmp = tmp_make();
    char *path = path_join(tmp, "input");
    static const char foreign[] = "#!/bin/sh\necho this is not a recording, not at all\n";
    switch (bad_inputs[_i].what) {
    case BAD_EMPTY:
        file_write(path, "", 0);
        break;
    case BAD_MISSING:
        break;
    case BAD_FOREIGN:
        file_write(path, foreign, sizeof(foreign) - 1);
        break;
    case BAD_TINY:
        file_write(path, "TS", 2);
        break;
    case BAD_NO_RECORDING: {
        ck_assert_int_eq(mkdir(path, 0700), 0);
        char *sub = path_join(path, TS_RECORDING_DIR);
        ck_assert_int_eq(mkdir(sub, 0700), 0);
        free(sub);
        break;
    }
    case BAD_FIFO:
        ck_assert_int_eq(mkfifo(path, 0600), 0);
        break;
    }
    recording_reader *r = (recording_reader *)1;
    char *cause = NULL;
    ck_assert_int_eq(recording_reader_open(path, &r, &cause), -1);
    ck_assert_ptr_null(r);
    ck_assert_ptr_nonnull(cause);
    ck_assert_msg(strstr(cause, bad_inputs[_i].message), "message: %s", cause);
    ck_assert_msg(strstr(cause, path), "message without the path: %s", cause);
    free(cause);
    ck_assert_int_eq(recording_reader_open(path, &r, NULL), -1);
    free(path);
    tmp_remove(tmp);
}
END_TEST

/* A recording from a later, incompatible format is refused with both versions named. */
START_TEST(test_reader_refuses_later_major)
{
    char *tmp = tmp_make();
    recording_meta m = meta_make(7);
    m.major = 3;
    recording_writer *w;
    ck_assert_int_eq(recording_writer_open(tmp, &m, &w, NULL), 0);
    ts_event ev = ev_make(1);
    ck_assert_int_eq(recording_append_events(w, lane_run_of(&ev, 1), NULL), 0);
    ck_assert_int_eq(recording_writer_close(w, NULL), 0);
    recording_reader *r;
    ck_assert_int_eq(recording_reader_open(tmp, &r, NULL), 0);
    const ts_event *got;
    size_t n;
    char *cause = NULL;
    ck_assert_int_eq(recording_reader_next(r, &got, &n, &cause), -1);
    ck_assert_msg(cause && strstr(cause, "recording format 3.2, this termsight reads 1.x to 2.x"),
                  "message: %s", cause);
    free(cause);
    recording_reader_close(r);
    tmp_remove(tmp);
}
END_TEST

START_TEST(test_writer_refuses_symlink)
{
    char *tmp = tmp_make();
    char *target = path_join(tmp, "elsewhere");
    char *dir = path_join(tmp, "rec");
    char *link = path_join(dir, TS_RECORDING_FILE);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    ck_assert_int_eq(symlink(target, link), 0);
    recording_meta m = meta_make(1);
    recording_writer *w = (recording_writer *)1;
    char *cause = NULL;
    ck_assert_int_eq(recording_writer_open(dir, &m, &w, &cause), -1);
    ck_assert_ptr_null(w);
    ck_assert_ptr_nonnull(cause);
    ck_assert_msg(strstr(cause, "symbolic link"), "message: %s", cause);
    ck_assert_msg(strstr(cause, link), "message without the path: %s", cause);
    free(cause);
    struct stat st;
    ck_assert_int_eq(lstat(target, &st), -1); /* nothing was created through the link */

    /* A link to an existing file: the file is left alone. */
    file_write(target, "keep", 4);
    ck_assert_int_eq(recording_writer_open(dir, &m, &w, NULL), -1);
    ck_assert_int_eq(stat(target, &st), 0);
    ck_assert_int_eq(st.st_size, 4);
    free(link);
    free(dir);
    free(target);
    tmp_remove(tmp);
}
END_TEST

START_TEST(test_writer_open_fails)
{
    char *tmp = tmp_make();
    recording_meta m = meta_make(1);
    recording_writer *w = NULL;
    char *cause = NULL;

    /* A folder where the file should be. */
    char *dir = path_join(tmp, "rec");
    char *file = path_join(dir, TS_RECORDING_FILE);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    ck_assert_int_eq(mkdir(file, 0700), 0);
    ck_assert_int_eq(recording_writer_open(dir, &m, &w, &cause), -1);
    ck_assert_ptr_null(w);
    ck_assert_ptr_nonnull(cause);
    ck_assert_msg(strstr(cause, file) && strstr(cause, strerror(EISDIR)), "message: %s", cause);
    free(cause);
    cause = NULL;

    /* A file where a folder should be. */
    char *plain = path_join(tmp, "plain");
    file_write(plain, "x", 1);
    char *below = path_join(plain, "rec");
    ck_assert_int_eq(recording_writer_open(below, &m, &w, &cause), -1);
    ck_assert_ptr_nonnull(cause);
    ck_assert_msg(strstr(cause, "plain"), "message: %s", cause);
    free(cause);
    cause = NULL;
    ck_assert_int_eq(recording_writer_open(plain, &m, &w, &cause), -1);
    ck_assert_msg(strstr(cause, "not a folder"), "message: %s", cause);
    free(cause);

    free(below);
    free(plain);
    free(file);
    free(dir);
    tmp_remove(tmp);
}
END_TEST

START_TEST(test_write_stops_at_file_limit)
{
    /* A chunk that would pass the file-size limit (ulimit -f) is not written: the writer says
     * why, the file ends at the last whole chunk, and no SIGXFSZ comes (its disposition is left
     * at the default, which would end this process). */
    char *tmp = tmp_make();
    recording_writer *w = writer_open(tmp, 1);
    uint64_t meta_end = recording_bytes(w);
    ts_event *ev = ev_array(0, 100);
    struct rlimit old, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = meta_end + 1000;
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    char *cause = NULL;
    int rc = recording_append_events(w, lane_run_of(ev, 100), &cause);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
    ck_assert_int_eq(rc, -1);
    ck_assert_ptr_nonnull(cause);
    ck_assert_msg(strstr(cause, TS_RECORDING_FILE) && strstr(cause, "file-size limit"),
                  "message: %s", cause);
    free(cause);
    ck_assert_uint_eq(recording_bytes(w), meta_end);
    writer_close(w);

    recording_reader *r = reader_open(tmp);
    readout o;
    reader_drain(r, &o);
    ck_assert_uint_eq(o.n, 0);
    ck_assert_ptr_nonnull(recording_reader_meta(r));
    ck_assert_uint_eq(recording_reader_bad_chunks(r), 0);
    recording_reader_close(r);
    free(o.ev);
    free(ev);
    tmp_remove(tmp);
}
END_TEST

static Suite *recording_errors_suite(void)
{
    Suite *s = suite_create("recording_errors");
    TCase *tc = tcase_create("errors");
    tcase_add_test(tc, test_open_paths);
    tcase_add_loop_test(tc, test_reader_refuses, 0, sizeof(bad_inputs) / sizeof(bad_inputs[0]));
    tcase_add_test(tc, test_reader_refuses_later_major);
    tcase_add_test(tc, test_writer_refuses_symlink);
    tcase_add_test(tc, test_writer_open_fails);
    tcase_add_test(tc, test_write_stops_at_file_limit);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return mt_run(recording_errors_suite());
}
