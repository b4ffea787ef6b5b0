/* Recordings crafted to make the reader work or hold memory out of proportion to what the file
 * holds. Reproduced before: a chunk header every 24 bytes claiming 16 MiB had every one of them
 * checksummed over 16 MiB (10,000 headers: 38-53 s; 32 MB of them: about an hour); a 50 GB sparse
 * file was read as 50 GB of zeros (63-84 s); STRINGS chunks of millions of empty names took 16
 * times their size in memory (64 MB: 1.07 GB). The bounds asserted are the documented ones
 * (model.h, recording_reader_work; docs/reliability.md), through the reader's own counts.
 *
 * The files are written under TERMSIGHT_TEST_TMP and removed; the sparse one takes no space. */
#define TESTUTIL_TAG "crafted"
#include "testutil.h"

#include "model.h"

#include <errno.h>
#include <fcntl.h>
#include <zlib.h>

#define MAGIC     0x43525354u
#define MIB       (1ull << 20)
#define MAX_CLAIM (16u << 20)

/* A chunk of the recording format (model/recording_internal.h): header, payload, padding, CRC. */
static size_t chunk_make(unsigned char *out, uint16_t type, const void *payload, uint32_t len,
                         uint64_t seq, int good_crc)
{
    uint32_t pad = (8 - (len & 7)) & 7;
    uint16_t flags = 0;
    memcpy(out, &(uint32_t){MAGIC}, 4);
    memcpy(out + 4, &type, 2);
    memcpy(out + 6, &flags, 2);
    memcpy(out + 8, &len, 4);
    memcpy(out + 16, &seq, 8);
    memcpy(out + 24, payload, len);
    memset(out + 24 + len, 0, pad);
    uLong crc = crc32(0, out, 12);
    crc = crc32(crc, out + 16, 8);
    crc = crc32(crc, out + 24, len + pad);
    uint32_t c = good_crc ? (uint32_t)crc : (uint32_t)crc ^ 1u;
    memcpy(out + 12, &c, 4);
    return 24 + len + pad;
}

/* A real recording of n counters (the writer's own META and chunks) at dir/events.tsr; returns
 * the file's path. */
static char *recording_start(const char *dir, uint64_t first, size_t n)
{
    recording_meta meta = {.major = TS_RECORDING_MAJOR, .minor = TS_RECORDING_MINOR, .pid = 1};
    recording_writer *w;
    char *why = NULL;
    ck_assert_msg(recording_writer_open(dir, &meta, &w, &why) == 0, "open: %s", why);
    ts_event ev[64];
    for (size_t i = 0; i < n; i++)
        ev[i] = (ts_event){.kind = TS_KIND_COUNTER, .v0 = first + i, .begin_ns = i, .end_ns = i};
    ck_assert_int_eq(recording_append_events(w, lane_run_of(ev, n), NULL), 0);
    ck_assert_int_eq(recording_writer_close(w, NULL), 0);
    return path_join(dir, TS_RECORDING_FILE);
}

static void append(const char *path, const void *bytes, size_t len)
{
    int fd = open(path, O_WRONLY | O_APPEND);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, bytes, len), (ssize_t)len);
    close(fd);
}

/* Reads the whole recording; the counters' values and the reader's work. */
static void read_all(const char *path, uint64_t *values, size_t cap, size_t *n,
                     recording_reader_work *work, uint64_t *bad)
{
    recording_reader *r;
    char *why = NULL;
    ck_assert_msg(recording_reader_open(path, &r, &why) == 0, "open: %s", why);
    const ts_event *ev;
    size_t got;
    int rc;
    *n = 0;
    while ((rc = recording_reader_next(r, &ev, &got, &why)) == 1)
        for (size_t i = 0; i < got; i++)
            if (ev[i].kind == TS_KIND_COUNTER && *n < cap)
                values[(*n)++] = ev[i].v0;
    ck_assert_msg(rc == 0, "read: %s", why);
    *work = recording_reader_work_done(r);
    *bad = recording_reader_bad_chunks(r);
    recording_reader_close(r);
}

/* Headers every 24 bytes, each claiming 16 MiB and with 16 MiB of bytes after it, then a real
 * chunk: checksums that fail cost at most 4 times the bytes passed plus 32 MiB, and the real
 * chunk after them is found. */
START_TEST(headers_claiming_16_mib)
{
    char *dir = tmp_make();
    char *path = recording_start(dir, 0, 10);
    enum { HEADERS = 20000 };
    size_t len = (size_t)HEADERS * 24 + MAX_CLAIM;
    unsigned char *junk = calloc(1, len);
    ck_assert_ptr_nonnull(junk);
    for (size_t i = 0; i < HEADERS; i++) {
        unsigned char *h = junk + i * 24;
        memcpy(h, &(uint32_t){MAGIC}, 4);
        memcpy(h + 4, &(uint16_t){TS_CHUNK_STRINGS}, 2);
        memcpy(h + 8, &(uint32_t){MAX_CLAIM}, 4);
        memcpy(h + 12, &(uint32_t){0xdeadbeef}, 4);
    }
    append(path, junk, len);
    free(junk);
    ts_event tail[5];
    for (int i = 0; i < 5; i++)
        tail[i] = (ts_event){.kind = TS_KIND_COUNTER, .v0 = 100 + (uint64_t)i};
    unsigned char chunk[24 + sizeof tail];
    append(path, chunk, chunk_make(chunk, TS_CHUNK_EVENTS, tail, sizeof tail, 9, 1));

    uint64_t values[32], bad;
    size_t n;
    recording_reader_work w;
    read_all(path, values, 32, &n, &w, &bad);
    ck_assert_uint_eq(n, 15);
    ck_assert_uint_eq(values[10], 100);
    ck_assert_uint_eq(values[14], 104);
    ck_assert_uint_ge(bad, 1);
    uint64_t size = path_size(path);
    ck_assert_msg(w.bytes_checked <= 4 * size + 2ull * MAX_CLAIM + 4096,
                  "%llu bytes checksummed for a file of %llu", (unsigned long long)w.bytes_checked,
                  (unsigned long long)size);
    ck_assert_uint_le(w.bytes_read, size);
    printf("headers: %d claiming 16 MiB in a %.1f MB file: %.1f MB checksummed, %.1f MB read\n",
           HEADERS, (double)size / MIB, (double)w.bytes_checked / MIB, (double)w.bytes_read / MIB);
    free(path);
    tmp_remove(dir);
}
END_TEST

/* A 50 GB file, all hole but a real chunk at its start and one at 40 GB: both found, the hole
 * jumped over (where the file system says where data is). */
START_TEST(sparse_50_gb)
{
    char *dir = tmp_make();
    char *path = recording_start(dir, 0, 10);
    uint64_t start = path_size(path);
    int fd = open(path, O_WRONLY);
    ck_assert_int_ge(fd, 0);
    ts_event tail[3];
    for (int i = 0; i < 3; i++)
        tail[i] = (ts_event){.kind = TS_KIND_COUNTER, .v0 = 200 + (uint64_t)i};
    unsigned char chunk[24 + sizeof tail];
    size_t clen = chunk_make(chunk, TS_CHUNK_EVENTS, tail, sizeof tail, 7, 1);
    ck_assert_int_eq(pwrite(fd, chunk, clen, (off_t)(40ull << 30)), (ssize_t)clen);
    ck_assert_int_eq(ftruncate(fd, (off_t)(50ull << 30)), 0);
    int holes = lseek(fd, (off_t)MIB, SEEK_DATA) == (off_t)(40ull << 30);
    close(fd);
    if (!holes) {
        printf("sparse: skipped, this file system does not report holes (SEEK_DATA)\n");
        free(path);
        tmp_remove(dir);
        return;
    }
    uint64_t values[32], bad;
    size_t n;
    recording_reader_work w;
    read_all(path, values, 32, &n, &w, &bad);
    ck_assert_uint_eq(n, 13);
    ck_assert_uint_eq(values[10], 200);
    ck_assert_msg(w.bytes_read < 4 * MIB, "%llu bytes read of a file holding %llu",
                  (unsigned long long)w.bytes_read, (unsigned long long)(start + clen));
    printf("sparse: 50 GB file, %llu bytes of data: %llu bytes read\n",
           (unsigned long long)(start + clen), (unsigned long long)w.bytes_read);
    unlink(path);
    free(path);
    tmp_remove(dir);
}
END_TEST

/* STRINGS chunks of names of 0 or 1 byte, each as many as a 16 MiB chunk holds: names cost at
 * most 5 times the bytes of their chunks (and a name block). */
static void tiny_names(uint32_t name_len)
{
    char *dir = tmp_make();
    char *path = recording_start(dir, 0, 1);
    uint32_t per = (MAX_CLAIM - 8) / (4 + name_len);
    unsigned char *payload = malloc(MAX_CLAIM);
    unsigned char *chunk = malloc(MAX_CLAIM + 32);
    ck_assert(payload && chunk);
    uint64_t strings_bytes = 0;
    for (uint32_t k = 0; k < 2; k++) {
        uint32_t first = 16 + k * per;
        memcpy(payload, &first, 4);
        memcpy(payload + 4, &per, 4);
        unsigned char *p = payload + 8;
        for (uint32_t i = 0; i < per; i++) {
            memcpy(p, &name_len, 4);
            memset(p + 4, 'x', name_len);
            p += 4 + name_len;
        }
        uint32_t len = (uint32_t)(p - payload);
        size_t clen = chunk_make(chunk, TS_CHUNK_STRINGS, payload, len, 5 + k, 1);
        append(path, chunk, clen);
        strings_bytes += clen;
    }
    free(payload);
    free(chunk);
    recording_reader *r;
    ck_assert_int_eq(recording_reader_open(path, &r, NULL), 0);
    const ts_event *ev;
    size_t n;
    while (recording_reader_next(r, &ev, &n, NULL) == 1)
        ;
    uint32_t len = 99;
    ck_assert_ptr_nonnull(recording_reader_string(r, 16 + 2 * per - 1, &len));
    ck_assert_uint_eq(len, name_len);
    recording_reader_work w = recording_reader_work_done(r);
    recording_reader_close(r);
    ck_assert_msg(w.name_memory <= 5 * strings_bytes + 2 * MIB,
                  "%u-byte names: %llu bytes held for %llu bytes of names", name_len,
                  (unsigned long long)w.name_memory, (unsigned long long)strings_bytes);
    printf("names of %u bytes: %u of them in %.1f MB of chunks, %.1f MB held (%.2f times)\n",
           name_len, 2 * per, (double)strings_bytes / MIB, (double)w.name_memory / MIB,
           (double)w.name_memory / (double)strings_bytes);
    free(path);
    tmp_remove(dir);
}

START_TEST(millions_of_empty_names)
{
    tiny_names(0);
}
END_TEST

START_TEST(millions_of_one_byte_names)
{
    tiny_names(1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hostile_crafted");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, headers_claiming_16_mib);
    tcase_add_test(tc, sparse_50_gb);
    tcase_add_test(tc, millions_of_empty_names);
    tcase_add_test(tc, millions_of_one_byte_names);
    suite_add_tcase(s, tc);
    return tests_run(s);
}
