/* Helpers shared by the recording tests (test_recording, test_recording_recovery,
 * test_recording_errors): the chunk layout restated (chunk_make) on purpose, since the on-disk
 * format is a contract, events, writers and readers. */
#ifndef TERMSIGHT_RECORDING_TEST_H
#define TERMSIGHT_RECORDING_TEST_H

#include "model_test.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* The documented format (model/recording_internal.h). */
#define T_MAGIC       0x43525354u
#define T_HEADER      24u
#define T_EVENTS_MAX  4096u
#define T_PAYLOAD_MAX (16u << 20)

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static inline void file_append(const char *path, const void *bytes, size_t len)
{
    FILE *f = fopen(path, "ab");
    ck_assert_msg(f != NULL, "fopen %s: %s", path, strerror(errno));
    ck_assert_uint_eq(fwrite(bytes, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

static inline unsigned char *file_read(const char *path, size_t *len)
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
static inline ts_event ev_make(uint64_t i)
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

static inline ts_event *ev_array(uint64_t first, size_t n)
{
    ts_event *ev = malloc((n ? n : 1) * sizeof(*ev));
    ck_assert_ptr_nonnull(ev);
    for (size_t i = 0; i < n; i++)
        ev[i] = ev_make(first + i);
    return ev;
}

static inline recording_meta meta_make(int32_t pid)
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

static inline recording_writer *writer_open(const char *dir, int32_t pid)
{
    recording_meta m = meta_make(pid);
    recording_writer *w = NULL;
    char *cause = NULL;
    int rc = recording_writer_open(dir, &m, &w, &cause);
    ck_assert_msg(rc == 0, "writer_open %s: %s", dir, cause ? cause : "?");
    ck_assert_ptr_nonnull(w);
    return w;
}

static inline void writer_events(recording_writer *w, lane_run run)
{
    char *cause = NULL;
    int rc = recording_append_events(w, run, &cause);
    ck_assert_msg(rc == 0, "append_events: %s", cause ? cause : "?");
}

static inline void writer_close(recording_writer *w)
{
    char *cause = NULL;
    int rc = recording_writer_close(w, &cause);
    ck_assert_msg(rc == 0, "writer_close: %s", cause ? cause : "?");
}

static inline recording_reader *reader_open(const char *path)
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

static inline void reader_drain(recording_reader *r, readout *o)
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

static inline void events_expect(const readout *o, const ts_event *want, size_t n)
{
    ck_assert_uint_eq(o->n, n);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(!memcmp(&o->ev[i], &want[i], sizeof(ts_event)), "event %zu differs", i);
}

/* CRC-32C (Castagnoli, reflected, as SSE4.2's crc32 instruction and RFC 3720), bit by bit: the
 * reference the writer's library must agree with. Continued from crc (0 to start). */
static inline uint32_t crc32c_ref(uint32_t crc, const unsigned char *p, size_t n)
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
static inline uint32_t chunk_sum(uint16_t flags, const unsigned char *p, size_t n, uint32_t crc)
{
    if ((flags & 15u) == 1u)
        return crc32c_ref(crc, p, n);
    return (uint32_t)crc32(crc, p, (uInt)n);
}

/* One chunk in the documented layout, for crafted files; returns its size. */
static inline size_t chunk_make(unsigned char *out, uint16_t type, uint16_t flags, uint32_t length,
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
static inline size_t abc_strings_chunk(unsigned char *out, uint16_t flags, uint64_t seq)
{
    unsigned char payload[16] = {0};
    memcpy(payload, &(uint32_t){7}, 4);
    memcpy(payload + 4, &(uint32_t){1}, 4);
    memcpy(payload + 8, &(uint32_t){3}, 4);
    memcpy(payload + 12, "abc", 3);
    return chunk_make(out, TS_CHUNK_STRINGS, flags, 15, seq, payload, 15);
}

/* The reader has id 7 as "abc", and no damage. */
static inline void expect_abc(const recording_reader *r)
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

static inline void writer_odd_names(recording_writer *w, uint32_t first)
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

#endif
