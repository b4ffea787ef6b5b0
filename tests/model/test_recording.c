/* Recording: round trips (events in runs, names of any bytes, sparse ids), and the format pinned
 * and read back from its first version. The chunk layout is restated (recording_test.h) on
 * purpose: the on-disk format is a contract, so a change to it must show up as a failing test. */
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
/* Round trips                                                                                */
/* ------------------------------------------------------------------------------------------ */

START_TEST(test_round_trip)
{
    char *tmp = tmp_make();
    char *dir = path_join(tmp, "a/b/run/recording");
    recording_writer *w = writer_open(dir, 77);
    writer_odd_names(w, 100);
    ts_event *ev = ev_array(0, 300);
    writer_events(w, lane_run_of(ev, 300));
    char *cause = NULL;
    ck_assert_int_eq(recording_sync(w, &cause), 0);
    uint64_t bytes = recording_bytes(w);
    writer_close(w);

    char *file = path_join(dir, TS_RECORDING_FILE);
    struct stat st;
    ck_assert_int_eq(stat(file, &st), 0);
    ck_assert_uint_eq((uint64_t)st.st_size, bytes);
    ck_assert_uint_eq(bytes % 8, 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0600);
    ck_assert_int_eq(stat(dir, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0700);
    char *made = path_join(tmp, "a");
    ck_assert_int_eq(stat(made, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0700);

    recording_reader *r = reader_open(file);
    ck_assert_ptr_null(recording_reader_meta(r));
    readout o;
    reader_drain(r, &o);
    events_expect(&o, ev, 300);
    ck_assert_uint_eq(recording_reader_skipped_bytes(r), 0);
    ck_assert_uint_eq(recording_reader_bad_chunks(r), 0);

    const recording_meta *m = recording_reader_meta(r);
    ck_assert_ptr_nonnull(m);
    recording_meta want = meta_make(77);
    ck_assert_uint_eq(m->major, want.major);
    ck_assert_uint_eq(m->minor, want.minor);
    ck_assert_int_eq(m->pid, 77);
    ck_assert_str_eq(m->process, want.process);
    ck_assert_str_eq(m->clock, want.clock);
    ck_assert_str_eq(m->host, want.host);
    ck_assert_uint_eq(m->start_realtime_ns, want.start_realtime_ns);
    ck_assert_uint_eq(m->start_ns, want.start_ns);

    for (size_t i = 0; i < N_ODD; i++) {
        uint32_t len = 12345;
        const char *s = recording_reader_string(r, 100 + (uint32_t)i, &len);
        ck_assert_msg(s != NULL, "name %zu missing", i);
        ck_assert_uint_eq(len, odd_names[i].len);
        ck_assert_mem_eq(s, odd_names[i].bytes, len);
        ck_assert_int_eq(s[len], '\0');
    }
    ck_assert_ptr_null(recording_reader_string(r, 99, NULL));
    ck_assert_ptr_null(recording_reader_string(r, 100 + N_ODD, NULL));

    recording_reader_close(r);
    free(o.ev);
    free(ev);
    free(made);
    free(file);
    free(dir);
    tmp_remove(tmp);
}
END_TEST

START_TEST(test_long_and_many_names)
{
    /* Names at the string table's limit, and enough of them to need several chunks. */
    char *tmp = tmp_make();
    recording_writer *w = writer_open(tmp, 1);
    enum { N = 2100 };
    char *big = malloc(TS_NAME_MAX);
    ck_assert_ptr_nonnull(big);
    const char **bytes = malloc(N * sizeof(*bytes));
    uint32_t *lens = malloc(N * sizeof(*lens));
    ck_assert_ptr_nonnull(bytes);
    ck_assert_ptr_nonnull(lens);
    for (size_t i = 0; i < TS_NAME_MAX; i++)
        big[i] = (char)(i * 31 + 7);
    for (uint32_t i = 0; i < N; i++) {
        bytes[i] = big + (i % 5);
        lens[i] = TS_NAME_MAX - (i % 5);
    }
    char *cause = NULL;
    ck_assert_int_eq(recording_append_strings(w, 2, N, bytes, lens, &cause), 0);
    ck_assert_int_eq(recording_append_strings(w, 5000, 0, NULL, NULL, &cause), 0);
    writer_close(w);

    recording_reader *r = reader_open(tmp);
    readout o;
    reader_drain(r, &o);
    ck_assert_uint_eq(o.n, 0);
    ck_assert_uint_eq(recording_reader_bad_chunks(r), 0);
    for (uint32_t i = 0; i < N; i++) {
        uint32_t len = 0;
        const char *s = recording_reader_string(r, 2 + i, &len);
        ck_assert_ptr_nonnull(s);
        ck_assert_uint_eq(len, lens[i]);
        ck_assert_mem_eq(s, bytes[i], len);
    }
    ck_assert_ptr_null(recording_reader_string(r, 2 + N, NULL));
    recording_reader_close(r);
    free(o.ev);
    free(bytes);
    free(lens);
    free(big);
    tmp_remove(tmp);
}
END_TEST

START_TEST(test_sparse_name_ids)
{
    /* Ids far apart (a hostile or merged file's) go to the sparse map, not a giant array: each
     * reads back, a later chunk's name for an id wins, ids between them have none. */
    char *tmp = tmp_make();
    recording_writer *w = writer_open(tmp, 1);
    enum { N = 3000, GAP = 100003 };
    char text[32];
    char *cause = NULL;
    for (uint32_t i = 0; i < N; i++) {
        const char *b = text;
        uint32_t len = (uint32_t)snprintf(text, sizeof text, "name-%u", i);
        ck_assert_int_eq(recording_append_strings(w, 1 + i * GAP, 1, &b, &len, &cause), 0);
    }
    const char *again = "renamed";
    uint32_t again_len = 7;
    ck_assert_int_eq(recording_append_strings(w, 1 + 7 * GAP, 1, &again, &again_len, &cause), 0);
    writer_close(w);

    recording_reader *r = reader_open(tmp);
    readout o;
    reader_drain(r, &o);
    ck_assert_uint_eq(recording_reader_bad_chunks(r), 0);
    for (uint32_t i = 0; i < N; i++) {
        uint32_t len = 0;
        const char *got = recording_reader_string(r, 1 + i * GAP, &len);
        ck_assert_ptr_nonnull(got);
        int want = i == 7 ? snprintf(text, sizeof text, "renamed")
                          : snprintf(text, sizeof text, "name-%u", i);
        ck_assert_uint_eq(len, (uint32_t)want);
        ck_assert_mem_eq(got, text, len);
        ck_assert_ptr_null(recording_reader_string(r, 2 + i * GAP, NULL));
    }
    /* Not an array up to id 3e8: the names, the map and its entries. */
    ck_assert_uint_lt(recording_reader_work_done(r).name_memory, 4u << 20);
    recording_reader_close(r);
    free(o.ev);
    tmp_remove(tmp);
}
END_TEST

START_TEST(test_bad_strings_arguments)
{
    char *tmp = tmp_make();
    recording_writer *w = writer_open(tmp, 1);
    uint64_t before = recording_bytes(w);
    const char *bytes[2] = {"a", NULL};
    uint32_t lens[2] = {1, 3};
    char *cause = NULL;
    ck_assert_int_eq(recording_append_strings(w, 0, 2, bytes, lens, &cause), -1);
    ck_assert_ptr_nonnull(cause);
    free(cause);
    cause = NULL;
    ck_assert_int_eq(recording_append_strings(w, UINT32_MAX, 2, bytes, lens, &cause), -1);
    ck_assert_ptr_nonnull(cause);
    free(cause);
    ck_assert_uint_eq(recording_bytes(w), before);
    writer_close(w);
    tmp_remove(tmp);
}
END_TEST

/* Two runs (a ring's wrapped halves) of assorted sizes around the chunk limit. */
static const struct {
    size_t na, nb;
} runs[] = {
    {0, 0},
    {1, 0},
    {0, 1},
    {T_EVENTS_MAX, 0},
    {T_EVENTS_MAX + 1, 0},
    {T_EVENTS_MAX - 1, 2},
    {5000, 3500},
    {3, 2 * T_EVENTS_MAX + 7},
    {0, T_EVENTS_MAX},
};

START_TEST(test_two_runs_split)
{
    size_t na = runs[_i].na, nb = runs[_i].nb, total = na + nb;
    char *tmp = tmp_make();
    ts_event *all = ev_array(0, total);
    recording_writer *w = writer_open(tmp, 1);
    uint64_t before = recording_bytes(w);
    writer_events(w, (lane_run){.a = all, .na = na, .b = all + na, .nb = nb});
    size_t chunks = (total + T_EVENTS_MAX - 1) / T_EVENTS_MAX;
    ck_assert_uint_eq(recording_bytes(w) - before, total * sizeof(ts_event) + chunks * T_HEADER);
    writer_close(w);

    recording_reader *r = reader_open(tmp);
    readout o;
    reader_drain(r, &o);
    events_expect(&o, all, total);
    ck_assert_uint_eq(o.batches, chunks);
    ck_assert_uint_le(o.max_batch, T_EVENTS_MAX);
    ck_assert_uint_eq(recording_reader_bad_chunks(r), 0);
    recording_reader_close(r);
    free(o.ev);
    free(all);
    tmp_remove(tmp);
}
END_TEST

START_TEST(test_format_is_pinned)
{
    /* The writer's bytes are exactly the documented layout: META checksummed with CRC-32 (flags
     * 0, for older readers), every other chunk with CRC-32C (flags 1). */
    char *tmp = tmp_make();
    ts_event *ev = ev_array(0, 2);
    recording_writer *w = writer_open(tmp, 9);
    writer_events(w, lane_run_of(ev, 2));
    writer_close(w);
    char *file = path_join(tmp, TS_RECORDING_FILE);
    size_t len;
    unsigned char *got = file_read(file, &len);

    unsigned char want[1024];
    recording_meta m = meta_make(9);
    size_t n = chunk_make(want, TS_CHUNK_META, 0, sizeof(m), 0, &m, sizeof(m));
    n +=
        chunk_make(want + n, TS_CHUNK_EVENTS, 1, 2 * sizeof(ts_event), 1, ev, 2 * sizeof(ts_event));
    ck_assert_uint_eq(len, n);
    ck_assert_mem_eq(got, want, n);
    free(got);
    free(file);
    free(ev);
    tmp_remove(tmp);
}
END_TEST

/* A recording of format 1, every chunk checksummed with CRC-32 (flags 0) as termsight wrote them
 * before format 2, is read whole: its META, its names and its events. */
START_TEST(test_reads_format_1)
{
    char *tmp = tmp_make();
    char *file = path_join(tmp, TS_RECORDING_FILE);
    ts_event *ev = ev_array(0, 3);
    recording_meta m = meta_make(11);
    m.major = 1;
    m.minor = 0;
    unsigned char buf[1024];
    size_t n = chunk_make(buf, TS_CHUNK_META, 0, sizeof(m), 0, &m, sizeof(m));
    n += abc_strings_chunk(buf + n, 0, 1);
    n += chunk_make(buf + n, TS_CHUNK_EVENTS, 0, 3 * sizeof(ts_event), 2, ev, 3 * sizeof(ts_event));
    file_append(file, buf, n);
    recording_reader *r = reader_open(file);
    readout o;
    reader_drain(r, &o);
    events_expect(&o, ev, 3);
    ck_assert_uint_eq(recording_reader_meta(r)->major, 1);
    ck_assert_uint_eq(recording_reader_meta(r)->pid, 11);
    expect_abc(r);
    recording_reader_close(r);
    free(o.ev);
    free(ev);
    free(file);
    tmp_remove(tmp);
}
END_TEST

static Suite *recording_suite(void)
{
    Suite *s = suite_create("recording");
    TCase *tc = tcase_create("round_trip");
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_long_and_many_names);
    tcase_add_test(tc, test_sparse_name_ids);
    tcase_add_test(tc, test_bad_strings_arguments);
    tcase_add_loop_test(tc, test_two_runs_split, 0, sizeof(runs) / sizeof(runs[0]));
    tcase_add_test(tc, test_format_is_pinned);
    tcase_add_test(tc, test_reads_format_1);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return mt_run(recording_suite());
}
