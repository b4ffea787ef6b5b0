/* recording_internal: the recording's chunk format, shared by its writer (recording.c) and its
 * reader (recording_read.c); only they and their tests include it.
 *
 * Format (little-endian, host order on every supported host). The file is a sequence of chunks,
 * each starting at an 8-byte aligned offset:
 *
 *   offset  size  field
 *        0     4  magic, CHUNK_MAGIC ("TSRC")
 *        4     2  type, enum ts_chunk_type
 *        6     2  flags: bits 0-3 name the checksum (0 CRC-32 as zlib computes it, 1 CRC-32C,
 *                 the Castagnoli polynomial of SSE4.2's crc32 instruction); a chunk with any of
 *                 bits 4-15 set is from a later writer and is skipped
 *        8     4  payload length in bytes, at most CHUNK_PAYLOAD_MAX
 *       12     4  the checksum of bytes 0..11, bytes 16..23, then the padded payload
 *       16     8  sequence number, 0, 1, 2 ... from each opening of the file
 *       24     -  payload, then zeros up to the next multiple of 8
 *
 *   META     recording_meta as laid out in recording.h
 *   STRINGS  uint32 first id, uint32 count, then count times { uint32 length, bytes }
 *   EVENTS   ts_event records, at most CHUNK_EVENTS_MAX per chunk
 *
 * Names that do not fit one chunk are split over several, each for consecutive ids.
 *
 * Format 2 (this writer) checksums every chunk with CRC-32C but its META chunk, which keeps
 * CRC-32 so that a reader of format 1 (CRC-32 only, flags 0) can read the major there and say
 * that the recording is newer than it. Both checksums come from ISA-L, which picks the fastest
 * code for the CPU (about 1 ns per 64-byte event here, against 9-19 ns for zlib's crc32). Format 1
 * recordings are read as before.
 *
 * The checksum covers the header as well, so a flipped type or length is damage too. A writer
 * that appends to an existing file first pads it to 8 bytes, so that chunks after a torn write
 * stay aligned for the reader's resynchronization. */
#ifndef TERMSIGHT_RECORDING_INTERNAL_H
#define TERMSIGHT_RECORDING_INTERNAL_H

#include "model.h"

#include <stddef.h>
#include <stdint.h>
#include <isa-l/crc.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the recording format is little-endian and written in host order"
#endif

#define CHUNK_MAGIC       0x43525354u /* "TSRC" little-endian */
#define CHUNK_HEADER      24u
#define CHUNK_PAYLOAD_MAX (16u << 20) /* larger is damage */
#define CHUNK_EVENTS_MAX  4096u

typedef struct chunk_header {
    uint32_t magic;
    uint16_t type;
    uint16_t flags;
    uint32_t length;
    uint32_t crc;
    uint64_t seq;
} chunk_header;

_Static_assert(sizeof(chunk_header) == CHUNK_HEADER, "chunk header layout");
_Static_assert(_Alignof(ts_event) <= 8, "events in a chunk are 8-byte aligned");
_Static_assert(CHUNK_EVENTS_MAX * sizeof(ts_event) <= CHUNK_PAYLOAD_MAX, "events chunk fits");

static inline uint32_t pad8(uint32_t n)
{
    return (8u - (n & 7u)) & 7u;
}

static const unsigned char zeros[8];

/* The checksums a chunk's flags name (bits 0-3); the other bits are a later writer's. */
#define CHUNK_SUM_MASK    0x000fu
#define CHUNK_SUM_CRC32   0u /* CRC-32 (IEEE, reflected), as zlib's crc32 */
#define CHUNK_SUM_CRC32C  1u /* CRC-32C (Castagnoli), as SSE4.2's crc32 instruction */
#define CHUNK_SUM_WRITTEN CHUNK_SUM_CRC32C

/* A running checksum of kind sum: started at 0, continued over each part, finished by sum_end.
 * ISA-L's CRC-32C takes and returns the register without zlib's inversions. */
static inline uint32_t sum_add(unsigned sum, uint32_t crc, const void *p, size_t n)
{
    if (sum == CHUNK_SUM_CRC32C)
        return ~crc32_iscsi((unsigned char *)(uintptr_t)p, (int)n, ~crc);
    return crc32_gzip_refl(crc, p, n);
}

/* The checksum of kind sum of a header (its crc field left out), to be continued over the
 * payload. */
static inline uint32_t chunk_sum_header(unsigned sum, const chunk_header *h)
{
    uint32_t crc = sum_add(sum, 0, h, offsetof(chunk_header, crc));
    return sum_add(sum, crc, &h->seq, sizeof(h->seq));
}

#endif
