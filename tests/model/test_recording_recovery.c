/* Recording: recovery from cut and damaged files: every cut offset, flipped bytes, two damaged
 * chunks, a torn write reopened, crafted chunks. Every whole chunk is read back. */
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
/* Recovery                                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* A small recording of several chunks, with where each chunk ends and what it holds. */
enum { SMALL_CHUNKS = 6 };
typedef struct small_rec {
    char *tmp, *dir, *file;
    unsigned char *bytes;
    size_t size;
    uint64_t end[SMALL_CHUNKS];             /* file offset after chunk i */
    size_t events_before[SMALL_CHUNKS + 1]; /* events in chunks 0 .. i-1 */
    ts_event *ev;
    size_t n;
} small_rec;

static void small_make(small_rec *s)
{
    memset(s, 0, sizeof(*s));
    s->tmp = tmp_make();
    s->dir = path_join(s->tmp, "recording");
    s->file = path_join(s->dir, TS_RECORDING_FILE);
    s->n = 9;
    s->ev = ev_array(0, s->n);
    recording_writer *w = writer_open(s->dir, 5);
    s->end[0] = recording_bytes(w);
    writer_odd_names(w, 10); /* 1: strings */
    s->end[1] = recording_bytes(w);
    writer_events(w, lane_run_of(s->ev, 3)); /* 2: events 0..2 */
    s->end[2] = recording_bytes(w);
    writer_events(w, lane_run_of(s->ev + 3, 2)); /* 3: events 3..4 */
    s->end[3] = recording_bytes(w);
    const char *late = "late,name";
    uint32_t late_len = 9;
    char *cause = NULL;
    ck_assert_int_eq(recording_append_strings(w, 50, 1, &late, &late_len, &cause), 0); /* 4 */
    s->end[4] = recording_bytes(w);
    writer_events(w, lane_run_of(s->ev + 5, 4)); /* 5: events 5..8 */
    s->end[5] = recording_bytes(w);
    writer_close(w);
    static const size_t per_chunk[SMALL_CHUNKS] = {0, 0, 3, 2, 0, 4};
    for (size_t i = 0; i < SMALL_CHUNKS; i++)
        s->events_before[i + 1] = s->events_before[i] + per_chunk[i];
    s->bytes = file_read(s->file, &s->size);
    ck_assert_uint_eq(s->size, s->end[SMALL_CHUNKS - 1]);
}

static void small_free(small_rec *s)
{
    free(s->bytes);
    free(s->ev);
    free(s->file);
    free(s->dir);
    tmp_remove(s->tmp);
}

START_TEST(test_cut_at_every_offset)
{
    small_rec s;
    small_make(&s);
    for (size_t cut = 0; cut <= s.size; cut++) {
        file_write(s.file, s.bytes, cut);
        recording_reader *r = NULL;
        char *cause = NULL;
        int rc = recording_reader_open(s.file, &r, &cause);
        if (cut < 4) {
            /* Too short to tell it from any other file. */
            ck_assert_msg(rc == -1, "cut %zu opened", cut);
            ck_assert_ptr_null(r);
            ck_assert_ptr_nonnull(cause);
            ck_assert_ptr_nonnull(strstr(cause, cut ? "not a termsight recording" : "is empty"));
            free(cause);
            continue;
        }
        ck_assert_msg(rc == 0, "cut %zu: %s", cut, cause ? cause : "?");
        size_t whole = 0; /* whole chunks before the cut */
        while (whole < SMALL_CHUNKS && s.end[whole] <= cut)
            whole++;
        uint64_t good_end = whole ? s.end[whole - 1] : 0;
        readout o;
        reader_drain(r, &o);
        events_expect(&o, s.ev, s.events_before[whole]);
        ck_assert_uint_eq(recording_reader_skipped_bytes(r), cut - good_end);
        ck_assert_uint_eq(recording_reader_bad_chunks(r), cut > good_end ? 1 : 0);
        ck_assert_int_eq(recording_reader_meta(r) != NULL, whole >= 1);
        ck_assert_int_eq(recording_reader_string(r, 10, NULL) != NULL, whole >= 2);
        ck_assert_int_eq(recording_reader_string(r, 50, NULL) != NULL, whole >= 5);
        recording_reader_close(r);
        free(o.ev);
    }
    small_free(&s);
}
END_TEST

/* Flips every byte of one middle chunk in turn; only that chunk may be lost. */
static void flip_chunk(size_t chunk, unsigned char mask)
{
    small_rec s;
    small_make(&s);
    uint64_t from = s.end[chunk - 1], to = s.end[chunk];
    unsigned char *copy = malloc(s.size);
    ck_assert_ptr_nonnull(copy);
    ts_event *want = malloc(s.n * sizeof(ts_event));
    ck_assert_ptr_nonnull(want);
    size_t nwant = 0;
    for (size_t c = 0; c < SMALL_CHUNKS; c++) {
        if (c == chunk)
            continue;
        for (size_t i = s.events_before[c]; i < s.events_before[c + 1]; i++)
            want[nwant++] = s.ev[i];
    }
    for (uint64_t at = from; at < to; at++) {
        memcpy(copy, s.bytes, s.size);
        copy[at] ^= mask;
        file_write(s.file, copy, s.size);
        recording_reader *r = reader_open(s.dir);
        readout o;
        reader_drain(r, &o);
        ck_assert_msg(o.n == nwant, "flip at %llu: %zu events", (unsigned long long)at, o.n);
        events_expect(&o, want, nwant);
        ck_assert_uint_eq(recording_reader_bad_chunks(r), 1);
        ck_assert_uint_eq(recording_reader_skipped_bytes(r), to - from);
        ck_assert_ptr_nonnull(recording_reader_meta(r));
        ck_assert_ptr_nonnull(recording_reader_string(r, 10, NULL));
        ck_assert_int_eq(recording_reader_string(r, 50, NULL) != NULL, chunk != 4);
        recording_reader_close(r);
        free(o.ev);
    }
    free(want);
    free(copy);
    small_free(&s);
}

static const struct {
    size_t chunk;
    unsigned char mask;
} flips[] = {
    {3, 0x01},            /* events chunk, low bit */
    {3, 0x80},            /* events chunk, high bit */
    {3, 0xff}, {4, 0x01}, /* strings chunk, its padding included */
    {2, 0x10},
};

START_TEST(test_flipped_bytes)
{
    flip_chunk(flips[_i].chunk, flips[_i].mask);
}
END_TEST

START_TEST(test_two_damaged_chunks)
{
    /* Neighbouring damaged chunks count one each; what follows them is still read. */
    small_rec s;
    small_make(&s);
    s.bytes[s.end[1] + T_HEADER] ^= 1; /* chunk 2's payload */
    s.bytes[s.end[2] + 4] ^= 1;        /* chunk 3's type */
    file_write(s.file, s.bytes, s.size);
    recording_reader *r = reader_open(s.file);
    readout o;
    reader_drain(r, &o);
    events_expect(&o, s.ev + s.events_before[4], s.n - s.events_before[4]);
    ck_assert_uint_eq(recording_reader_bad_chunks(r), 2);
    ck_assert_uint_eq(recording_reader_skipped_bytes(r), s.end[3] - s.end[1]);
    ck_assert_ptr_nonnull(recording_reader_string(r, 50, NULL));
    recording_reader_close(r);
    free(o.ev);
    small_free(&s);
}
END_TEST

START_TEST(test_reopen_after_torn_write)
{
    /* A crash mid-chunk leaves an unaligned tail; a later writer appends after it. */
    char *tmp = tmp_make();
    ts_event *ev = ev_array(0, 5);
    recording_writer *w = writer_open(tmp, 1);
    writer_events(w, lane_run_of(ev, 3));
    writer_close(w);
    char *file = path_join(tmp, TS_RECORDING_FILE);
    file_append(file, "torn!", 5);

    w = writer_open(tmp, 2);
    writer_events(w, lane_run_of(ev + 3, 2));
    ck_assert_uint_eq(recording_bytes(w),
                      3 + T_HEADER + sizeof(recording_meta) + T_HEADER + 2 * sizeof(ts_event));
    writer_close(w);

    recording_reader *r = reader_open(file);
    readout o;
    reader_drain(r, &o);
    events_expect(&o, ev, 5);
    ck_assert_uint_eq(recording_reader_bad_chunks(r), 1);
    ck_assert_uint_eq(recording_reader_skipped_bytes(r), 8);
    ck_assert_int_eq(recording_reader_meta(r)->pid, 1); /* the first META is kept */
    recording_reader_close(r);
    free(o.ev);
    free(file);
    free(ev);
    tmp_remove(tmp);
}
END_TEST

/* Chunks that check out or nearly do, placed between two valid events chunks. */
enum crafted_kind {
    CRAFT_UNKNOWN_TYPE,  /* valid checksum, type from a later writer: skipped silently */
    CRAFT_FLAGS,         /* valid checksum, flags from a later writer: skipped silently */
    CRAFT_UNKNOWN_SUM,   /* a checksum this reader does not know (flags 2): damage */
    CRAFT_CRC32C,        /* valid CRC-32C (flags 1), as this writer makes them */
    CRAFT_EMPTY_EVENTS,  /* valid, no events */
    CRAFT_COUNT_LIES,    /* STRINGS whose count is larger than its payload */
    CRAFT_LENGTH_LIES,   /* STRINGS whose name length runs past its payload */
    CRAFT_SHORT_STRINGS, /* STRINGS with less than its 8-byte head */
    CRAFT_ODD_EVENTS,    /* EVENTS whose length is not a whole number of events */
    CRAFT_OVER_CAP,      /* a length over the cap: damage, even with a good checksum */
    CRAFT_BAD_CRC,       /* a checksum that does not match */
    CRAFT_IDS_WRAP,      /* STRINGS whose ids run past UINT32_MAX */
};

static const struct {
    enum crafted_kind kind;
    int bad;    /* chunks the reader must refuse */
    int string; /* 1 when the crafted name must be readable */
} crafted[] = {
    {CRAFT_UNKNOWN_TYPE, 0, 0}, {CRAFT_FLAGS, 0, 0},       {CRAFT_EMPTY_EVENTS, 0, 0},
    {CRAFT_COUNT_LIES, 1, 0},   {CRAFT_LENGTH_LIES, 1, 0}, {CRAFT_SHORT_STRINGS, 1, 0},
    {CRAFT_ODD_EVENTS, 1, 0},   {CRAFT_OVER_CAP, 1, 0},    {CRAFT_BAD_CRC, 1, 0},
    {CRAFT_IDS_WRAP, 1, 0},     {CRAFT_UNKNOWN_SUM, 1, 0}, {CRAFT_CRC32C, 0, 1},
};

START_TEST(test_crafted_chunks)
{
    char *tmp = tmp_make();
    ts_event *ev = ev_array(0, 5);
    recording_writer *w = writer_open(tmp, 1);
    writer_events(w, lane_run_of(ev, 2));
    writer_close(w);
    char *file = path_join(tmp, TS_RECORDING_FILE);

    /* Room for the over-cap case, whose payload is real and whose checksum holds. */
    size_t room = T_PAYLOAD_MAX + 2 * sizeof(ts_event);
    unsigned char *payload = calloc(1, room), *chunk = malloc(T_HEADER + room);
    ck_assert_ptr_nonnull(payload);
    ck_assert_ptr_nonnull(chunk);
    uint32_t first = 7, count = 1, nlen = 3;
    memcpy(payload, &first, 4);
    memcpy(payload + 4, &count, 4);
    memcpy(payload + 8, &nlen, 4);
    memcpy(payload + 12, "abc", 3);
    size_t size = 0;
    switch (crafted[_i].kind) {
    case CRAFT_UNKNOWN_TYPE:
        size = chunk_make(chunk, 99, 0, 15, 2, payload, 15);
        break;
    case CRAFT_FLAGS:       /* a bit past the checksum's: 0x10 */
    case CRAFT_UNKNOWN_SUM: /* checksum 2 */
    case CRAFT_CRC32C:      /* checksum 1 */
        size = chunk_make(chunk, TS_CHUNK_STRINGS,
                          crafted[_i].kind == CRAFT_FLAGS         ? 0x10
                          : crafted[_i].kind == CRAFT_UNKNOWN_SUM ? 2
                                                                  : 1,
                          15, 2, payload, 15);
        break;
    case CRAFT_EMPTY_EVENTS:
        size = chunk_make(chunk, TS_CHUNK_EVENTS, 0, 0, 2, payload, 0);
        break;
    case CRAFT_COUNT_LIES:
        memcpy(payload + 4, &(uint32_t){1000}, 4);
        size = chunk_make(chunk, TS_CHUNK_STRINGS, 0, 15, 2, payload, 15);
        break;
    case CRAFT_LENGTH_LIES:
        memcpy(payload + 8, &(uint32_t){4}, 4);
        size = chunk_make(chunk, TS_CHUNK_STRINGS, 0, 15, 2, payload, 15);
        break;
    case CRAFT_SHORT_STRINGS:
        size = chunk_make(chunk, TS_CHUNK_STRINGS, 0, 6, 2, payload, 6);
        break;
    case CRAFT_ODD_EVENTS:
        size = chunk_make(chunk, TS_CHUNK_EVENTS, 0, 65, 2, payload, 65);
        break;
    case CRAFT_OVER_CAP:
        memset(payload, 0, 16);
        size = chunk_make(chunk, TS_CHUNK_EVENTS, 0, T_PAYLOAD_MAX + sizeof(ts_event), 2, payload,
                          T_PAYLOAD_MAX + sizeof(ts_event));
        break;
    case CRAFT_BAD_CRC:
        size = chunk_make(chunk, TS_CHUNK_STRINGS, 0, 15, 2, payload, 15);
        chunk[12] ^= 1;
        break;
    case CRAFT_IDS_WRAP:
        memcpy(payload, &(uint32_t){UINT32_MAX}, 4);
        memcpy(payload + 4, &(uint32_t){2}, 4);
        memcpy(payload + 15, &(uint32_t){0}, 4);
        size = chunk_make(chunk, TS_CHUNK_STRINGS, 0, 19, 2, payload, 19);
        break;
    }
    file_append(file, chunk, size);
    unsigned char tail[T_HEADER + 3 * sizeof(ts_event)];
    size_t tail_size =
        chunk_make(tail, TS_CHUNK_EVENTS, 0, 3 * sizeof(ts_event), 3, ev + 2, 3 * sizeof(ts_event));
    file_append(file, tail, tail_size);

    recording_reader *r = reader_open(file);
    readout o;
    reader_drain(r, &o);
    events_expect(&o, ev, 5);
    ck_assert_uint_eq(recording_reader_bad_chunks(r), (uint64_t)crafted[_i].bad);
    ck_assert_uint_eq(recording_reader_skipped_bytes(r), (crafted[_i].bad ? size : 0));
    ck_assert_int_eq(recording_reader_string(r, 7, NULL) != NULL, crafted[_i].string);
    ck_assert_ptr_null(recording_reader_string(r, UINT32_MAX, NULL));
    recording_reader_close(r);
    free(o.ev);
    free(chunk);
    free(payload);
    free(file);
    free(ev);
    tmp_remove(tmp);
}
END_TEST

START_TEST(test_strings_chunk_stored)
{
    /* The control for test_crafted_chunks: the same STRINGS chunk, intact, is stored. */
    char *tmp = tmp_make();
    recording_writer *w = writer_open(tmp, 1);
    writer_close(w);
    char *file = path_join(tmp, TS_RECORDING_FILE);
    unsigned char chunk[64];
    file_append(file, chunk, abc_strings_chunk(chunk, 0, 1));
    recording_reader *r = reader_open(file);
    readout o;
    reader_drain(r, &o);
    expect_abc(r);
    recording_reader_close(r);
    free(o.ev);
    free(file);
    tmp_remove(tmp);
}
END_TEST

static Suite *recording_recovery_suite(void)
{
    Suite *s = suite_create("recording_recovery");
    TCase *tc = tcase_create("recovery");
    tcase_add_test(tc, test_cut_at_every_offset);
    tcase_add_loop_test(tc, test_flipped_bytes, 0, sizeof(flips) / sizeof(flips[0]));
    tcase_add_test(tc, test_two_damaged_chunks);
    tcase_add_test(tc, test_reopen_after_torn_write);
    tcase_add_loop_test(tc, test_crafted_chunks, 0, sizeof(crafted) / sizeof(crafted[0]));
    tcase_add_test(tc, test_strings_chunk_stored);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return mt_run(recording_recovery_suite());
}
