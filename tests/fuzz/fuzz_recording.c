/* libFuzzer target for the recording reader (model/recording_read.c). The input is a recording
 * file, read twice: as it is, and with the checksum of every chunk header that fits the file made
 * right (CRC-32 or CRC-32C, as its flags name), so that mutations reach the payload parsers (META,
 * STRINGS, EVENTS) instead of stopping at the CRC. Promises checked: open and next fail with a
 * message, never crash; every batch of events and every name returned lies inside the reader's
 * memory (ASan) and is NUL-terminated after its length; damage is counted within the file's size;
 * the reader ends. */
#include "fuzz.h"
#include "model.h"

#include <isa-l/crc.h>
#include <string.h>
#include <zlib.h>

#define CHUNK_MAGIC   0x43525354u /* "TSRC", as recording.c writes it */
#define CHUNK_HEADER  24u
#define CHUNK_PAYLOAD (16u << 20)

static int input_fd = -1;
static char input_path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    input_fd = fuzz_memfd("fuzz_recording");
    snprintf(input_path, sizeof input_path, "/proc/self/fd/%d", input_fd);
    return 0;
}

static void touch_name(const recording_reader *r, uint32_t id)
{
    uint32_t len = UINT32_MAX;
    const char *s = recording_reader_string(r, id, &len);
    if (!s)
        return;
    FUZZ_CHECK(len <= CHUNK_PAYLOAD);
    for (uint32_t i = 0; i < len; i++)
        fuzz_sink ^= (unsigned char)s[i];
    FUZZ_CHECK(s[len] == 0);
}

static void read_all(size_t size)
{
    recording_reader *r = NULL;
    char *cause = NULL;
    int rc = recording_reader_open(input_path, &r, &cause);
    FUZZ_CHECK_CAUSE(rc, cause);
    free(cause);
    if (rc != 0) {
        FUZZ_CHECK(r == NULL);
        return;
    }
    uint64_t events = 0;
    for (;;) {
        const ts_event *ev;
        size_t n;
        cause = NULL;
        rc = recording_reader_next(r, &ev, &n, &cause);
        if (rc <= 0) {
            FUZZ_CHECK(rc == 0 || (cause && cause[0]));
            free(cause);
            break;
        }
        FUZZ_CHECK(ev && n > 0 && ((uintptr_t)ev & 7) == 0);
        events += n;
        FUZZ_CHECK(events * sizeof(ts_event) <= size);
        for (size_t i = 0; i < n; i++) {
            touch_name(r, ev[i].name);
            touch_name(r, ev[i].type);
            FUZZ_CHECK(event_kind_name(ev[i].kind) != NULL);
        }
    }
    const recording_meta *m = recording_reader_meta(r);
    if (m)
        FUZZ_CHECK(memchr(m->process, 0, sizeof m->process) &&
                   memchr(m->clock, 0, sizeof m->clock) && memchr(m->host, 0, sizeof m->host));
    FUZZ_CHECK(recording_reader_skipped_bytes(r) <= size);
    FUZZ_CHECK(recording_reader_bad_chunks(r) <= size / 8 + 1);
    touch_name(r, 0);
    touch_name(r, UINT32_MAX);
    recording_reader_close(r);
}

/* Sets the CRC of every chunk header whose payload fits the file; returns how many changed. */
static int fix_checksums(uint8_t *p, size_t size)
{
    int changed = 0;
    for (size_t off = 0; off + CHUNK_HEADER <= size; off += 8) {
        uint32_t magic, length, crc;
        memcpy(&magic, p + off, 4);
        memcpy(&length, p + off + 8, 4);
        if (magic != CHUNK_MAGIC || length > CHUNK_PAYLOAD)
            continue;
        size_t body = (size_t)length + ((8u - (length & 7u)) & 7u);
        if (body > size - off - CHUNK_HEADER)
            continue;
        uint16_t flags;
        memcpy(&flags, p + off + 6, 2);
        uint32_t c;
        if ((flags & 15u) == 1u) { /* CRC-32C, ISA-L's register without zlib's inversions */
            c = crc32_iscsi(p + off, 12, ~0u);
            c = crc32_iscsi(p + off + 16, 8, c);
            c = ~crc32_iscsi(p + off + CHUNK_HEADER, (int)body, c);
        } else {
            c = (uint32_t)crc32(0L, p + off, 12);
            c = (uint32_t)crc32(c, p + off + 16, 8);
            c = (uint32_t)crc32(c, p + off + CHUNK_HEADER, (uInt)body);
        }
        memcpy(&crc, p + off + 12, 4);
        if (crc != c) {
            crc = c;
            memcpy(p + off + 12, &crc, 4);
            changed++;
        }
    }
    return changed;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_fd_fill(input_fd, data, size);
    read_all(size);
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    if (fix_checksums(copy, size)) {
        fuzz_fd_fill(input_fd, copy, size);
        read_all(size);
    }
    free(copy);
    return 0;
}
