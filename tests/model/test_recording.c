/* Recording: round trips, recovery from cut and damaged files, errors. The chunk layout is
 * restated here (chunk_make) on purpose: the on-disk format is a contract, so a change to it
 * must show up as a failing test. */
#include "model.h"

#define TESTUTIL_TAG "rec"
#include "testutil.h"

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

/* The documented format (model/recording.c). */
#define T_MAGIC       0x43525354u
#define T_HEADER      24u
#define T_EVENTS_MAX  4096u
#define T_PAYLOAD_MAX (16u << 20)

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static void file_append(const char *path, const void *bytes, size_t len)
{
    FILE *f = fopen(path, "ab");
    ck_assert_msg(f != NULL, "fopen %s: %s", path, strerror(errno));
    ck_assert_uint_eq(fwrite(bytes, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

static unsigned char *file_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "fopen %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    for (;;) {
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            ck_assert_ptr_nonnull(buf);
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        if (!got)
            break;
        n += got;
    }
    fclose(f);
    *len = n;
    return buf;
}

/* Distinct, recognizable events; no field holds the chunk magic. */
static ts_event ev_make(uint64_t i)
{
    return (ts_event){
        .kind = (uint16_t)(1 + i % (TS_KIND__COUNT - 1)),
        .flags = (uint16_t)(i & 3),
        .tid = (uint32_t)(1000 + i),
        .device = i % 5 ? TS_DEVICE_HOST : (uint32_t)(i % 8),
        .aux = (uint32_t)(i * 3),
        .name = (uint32_t)(i % 7),
        .type = (uint32_t)(i % 11),
        .begin_ns = 1000000 + i * 10,
        .end_ns = 1000000 + i * 10 + 5,
        .corr = i * 13,
        .v0 = i * 17,
        .v1 = ~i,
    };
}

static ts_event *ev_array(uint64_t first, size_t n)
{
    ts_event *ev = malloc((n ? n : 1) * sizeof(*ev));
    ck_assert_ptr_nonnull(ev);
    for (size_t i = 0; i < n; i++)
        ev[i] = ev_make(first + i);
    return ev;
}

static recording_meta meta_make(int32_t pid)
{
    recording_meta m;
    memset(&m, 0, sizeof(m));
    m.major = TS_RECORDING_MAJOR;
    m.minor = 2;
    m.pid = pid;
    snprintf(m.process, sizeof(m.process), "train-%d", pid);
    snprintf(m.clock, sizeof(m.clock), "tsc");
    m.start_realtime_ns = 1700000000123456789ull;
    m.start_ns = 42;
    snprintf(m.host, sizeof(m.host), "host.example");
    return m;
}

static recording_writer *writer_open(const char *dir, int32_t pid)
{
    recording_meta m = meta_make(pid);
    recording_writer *w = NULL;
    char *cause = NULL;
    int rc = recording_writer_open(dir, &m, &w, &cause);
    ck_assert_msg(rc == 0, "writer_open %s: %s", dir, cause ? cause : "?");
    ck_assert_ptr_nonnull(w);
    return w;
}

static void writer_events(recording_writer *w, lane_run run)
{
    char *cause = NULL;
    int rc = recording_append_events(w, run, &cause);
    ck_assert_msg(rc == 0, "append_events: %s", cause ? cause : "?");
}

static void writer_close(recording_writer *w)
{
    char *cause = NULL;
    int rc = recording_writer_close(w, &cause);
    ck_assert_msg(rc == 0, "writer_close: %s", cause ? cause : "?");
}

static recording_reader *reader_open(const char *path)
{
    recording_reader *r = NULL;
    char *cause = NULL;
    int rc = recording_reader_open(path, &r, &cause);
    ck_assert_msg(rc == 0, "reader_open %s: %s", path, cause ? cause : "?");
    ck_assert_ptr_nonnull(r);
    return r;
}

/* Everything a reader returns. */
typedef struct readout {
    ts_event *ev;
    size_t n;
    size_t batches;
    size_t max_batch;
} readout;

static void reader_drain(recording_reader *r, readout *o)
{
    memset(o, 0, sizeof(*o));
    size_t cap = 64;
    o->ev = malloc(cap * sizeof(ts_event));
    ck_assert_ptr_nonnull(o->ev);
    for (;;) {
        const ts_event *ev = NULL;
        size_t n = 0;
        char *cause = NULL;
        int rc = recording_reader_next(r, &ev, &n, &cause);
        ck_assert_msg(rc >= 0, "reader_next: %s", cause ? cause : "?");
        if (rc == 0)
            break;
        ck_assert_uint_gt(n, 0);
        ck_assert_uint_eq((uintptr_t)ev % 8, 0);
        while (o->n + n > cap) {
            cap *= 2;
            o->ev = realloc(o->ev, cap * sizeof(ts_event));
            ck_assert_ptr_nonnull(o->ev);
        }
        memcpy(o->ev + o->n, ev, n * sizeof(ts_event));
        o->n += n;
        o->batches++;
        if (n > o->max_batch)
            o->max_batch = n;
    }
}

static void events_expect(const readout *o, const ts_event *want, size_t n)
{
    ck_assert_uint_eq(o->n, n);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(!memcmp(&o->ev[i], &want[i], sizeof(ts_event)), "event %zu differs", i);
}

/* CRC-32C (Castagnoli, reflected, as SSE4.2's crc32 instruction and RFC 3720), bit by bit: the
 * reference the writer's library must agree with. Continued from crc (0 to start). */
static uint32_t crc32c_ref(uint32_t crc, const unsigned char *p, size_t n)
{
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
    }
    return ~crc;
}

/* The checksum named by a chunk's flags (bits 0-3): 0 CRC-32 (zlib), 1 CRC-32C; another value
 * gets CRC-32, which such a chunk's reader cannot check. */
static uint32_t chunk_sum(uint16_t flags, const unsigned char *p, size_t n, uint32_t crc)
{
    if ((flags & 15u) == 1u)
        return crc32c_ref(crc, p, n);
    return (uint32_t)crc32(crc, p, (uInt)n);
}

/* One chunk in the documented layout, for crafted files; returns its size. */
static size_t chunk_make(unsigned char *out, uint16_t type, uint16_t flags, uint32_t length,
                         uint64_t seq, const void *payload, size_t payload_len)
{
    uint32_t pad = (8u - (uint32_t)(payload_len & 7)) & 7;
    memcpy(out, &(uint32_t){T_MAGIC}, 4);
    memcpy(out + 4, &type, 2);
    memcpy(out + 6, &flags, 2);
    memcpy(out + 8, &length, 4);
    memcpy(out + 16, &seq, 8);
    memcpy(out + T_HEADER, payload, payload_len);
    memset(out + T_HEADER + payload_len, 0, pad);
    uint32_t c = chunk_sum(flags, out, 12, 0);
    c = chunk_sum(flags, out + 16, 8, c);
    c = chunk_sum(flags, out + T_HEADER, payload_len + pad, c);
    memcpy(out + 12, &c, 4);
    return T_HEADER + payload_len + pad;
}

/* A STRINGS chunk naming id 7 "abc", as crafted files use it. */
static size_t abc_strings_chunk(unsigned char *out, uint16_t flags, uint64_t seq)
{
    unsigned char payload[16] = {0};
    memcpy(payload, &(uint32_t){7}, 4);
    memcpy(payload + 4, &(uint32_t){1}, 4);
    memcpy(payload + 8, &(uint32_t){3}, 4);
    memcpy(payload + 12, "abc", 3);
    return chunk_make(out, TS_CHUNK_STRINGS, flags, 15, seq, payload, 15);
}

/* The reader has id 7 as "abc", and no damage. */
static void expect_abc(const recording_reader *r)
{
    uint32_t len = 0;
    const char *name = recording_reader_string(r, 7, &len);
    ck_assert_ptr_nonnull(name);
    ck_assert_uint_eq(len, 3);
    ck_assert_mem_eq(name, "abc", 3);
    ck_assert_uint_eq(recording_reader_bad_chunks(r), 0);
}

/* Odd names: every byte value a name may hold must come back unchanged. */
static const struct {
    const char *bytes;
    uint32_t len;
} odd_names[] = {
#define NAME(s) s, sizeof(s) - 1 /* the bytes and their length, NULs included */
    {NAME("")},
    {NAME("aten::conv2d")},
    {NAME("a,b,c")},
    {NAME("\"quoted\" 'name'")},
    {NAME("line\nbreak\r\n")},
    {NAME("nul\0inside")},
    {NAME("\xff\xfe\xc3(invalid utf-8")},
    {NAME("tab\tback\\slash")},
    {NAME("\0")},
    {NAME("x")},
#undef NAME
};
#define N_ODD (sizeof(odd_names) / sizeof(odd_names[0]))

static void writer_odd_names(recording_writer *w, uint32_t first)
{
    const char *bytes[N_ODD];
    uint32_t lens[N_ODD];
    for (size_t i = 0; i < N_ODD; i++) {
        bytes[i] = odd_names[i].bytes;
        lens[i] = odd_names[i].len;
    }
    char *cause = NULL;
    int rc = recording_append_strings(w, first, N_ODD, bytes, lens, &cause);
    ck_assert_msg(rc == 0, "append_strings: %s", cause ? cause : "?");
}

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

START_TEST(test_write_fails_midway)
{
    /* The file size limit stands in for a full disk: writes stop partway through a chunk. */
    char *tmp = tmp_make();
    recording_writer *w = writer_open(tmp, 1);
    uint64_t meta_end = recording_bytes(w);
    ts_event *ev = ev_array(0, 100);
    struct rlimit old, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = meta_end + 1000;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    char *cause = NULL;
    int rc = recording_append_events(w, lane_run_of(ev, 100), &cause);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, prev);
    ck_assert_int_eq(rc, -1);
    ck_assert_ptr_nonnull(cause);
    ck_assert_msg(strstr(cause, TS_RECORDING_FILE) && strstr(cause, strerror(EFBIG)), "message: %s",
                  cause);
    free(cause);
    ck_assert_uint_eq(recording_bytes(w), meta_end + 1000);
    writer_close(w);

    recording_reader *r = reader_open(tmp);
    readout o;
    reader_drain(r, &o);
    ck_assert_uint_eq(o.n, 0);
    ck_assert_ptr_nonnull(recording_reader_meta(r));
    ck_assert_uint_eq(recording_reader_bad_chunks(r), 1);
    ck_assert_uint_eq(recording_reader_skipped_bytes(r), 1000);
    recording_reader_close(r);
    free(o.ev);
    free(ev);
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

    tc = tcase_create("recovery");
    tcase_add_test(tc, test_cut_at_every_offset);
    tcase_add_loop_test(tc, test_flipped_bytes, 0, sizeof(flips) / sizeof(flips[0]));
    tcase_add_test(tc, test_two_damaged_chunks);
    tcase_add_test(tc, test_reopen_after_torn_write);
    tcase_add_loop_test(tc, test_crafted_chunks, 0, sizeof(crafted) / sizeof(crafted[0]));
    tcase_add_test(tc, test_strings_chunk_stored);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_test(tc, test_open_paths);
    tcase_add_loop_test(tc, test_reader_refuses, 0, sizeof(bad_inputs) / sizeof(bad_inputs[0]));
    tcase_add_test(tc, test_reader_refuses_later_major);
    tcase_add_test(tc, test_writer_refuses_symlink);
    tcase_add_test(tc, test_writer_open_fails);
    tcase_add_test(tc, test_write_fails_midway);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(recording_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
