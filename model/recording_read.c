/* recording_read: the reader of recordings (the format: recording_internal.h), which recovers
 * every whole chunk from a damaged or cut file.
 *
 * Reading: a file is a recording when it starts with the magic (its first chunk may itself be
 * damaged). A chunk whose magic, length or checksum does not hold, or that the end of the file
 * cuts short, counts as one bad chunk; the reader then scans forward 8 bytes at a time to the
 * next chunk that checks out, counting the bytes it skips. */
#include "recording_internal.h"
#include "index_map.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define READ_BLOCK      (256u << 10) /* reader's read-ahead */
#define CHECK_FACTOR    4u           /* failed checksums: bytes per byte of file passed */
#define CHECK_ALLOWANCE (2ull * CHUNK_PAYLOAD_MAX) /* ... and this much to begin with */
#define HOLE_MIN        (64u << 10)                /* a hole at least this long is jumped over */
#define NAME_BLOCK      (1u << 20)                 /* names are kept in blocks of this size */

/* ------------------------------------------------------------------------------------------ */
/* Reader                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* Names: their bytes in blocks that never move (a name's pointer stays valid until the reader
 * is closed), each stored as {uint32 length, bytes, NUL}; found by id through a dense array for
 * the ids a writer hands out (0, 1, 2 ...), and an index_map for the others. Memory is bounded
 * by a multiple of the STRINGS bytes read (docs/reliability.md). */
typedef struct name_block {
    struct name_block *next;
    size_t used, cap;
    char bytes[];
} name_block;

struct recording_reader {
    int fd;
    char *path;
    uint64_t size; /* the file's size when opened: nothing past it is read (a live recording) */

    /* A window on the file: buf[0 .. len) holds the bytes at file offset base (8-aligned, so
     * that every chunk in it is 8-aligned in memory). */
    unsigned char *buf;
    size_t cap, len;
    uint64_t base;
    uint64_t pos; /* next chunk's file offset */

    name_block *blocks;
    const char **dense; /* entry of id, for ids below dense_cap */
    uint32_t dense_cap;
    index_map sparse_ids; /* the other ids -> their index in sparse */
    const char **sparse;  /* entries of the other ids */
    uint32_t sparse_cap;
    uint32_t names; /* distinct ids stored */
    uint64_t name_memory;

    recording_meta meta;
    int have_meta;
    uint64_t skipped, bad;
    uint64_t bytes_read, bytes_checked, failed_checked;
};

enum chunk_status { CHUNK_OK, CHUNK_BAD, CHUNK_END, CHUNK_IOERR };

/* Whether the file, past the size it had when opened, now holds bytes up to end: it was still
 * being written then. */
static int reader_written_since(const recording_reader *r, uint64_t end)
{
    struct stat st;
    return end > r->size && fstat(r->fd, &st) == 0 && (uint64_t)st.st_size >= end;
}

/* Makes bytes [off, off + want) available in the window (off never goes backwards). Returns how
 * many of them the file has (fewer at its end), or -1 on a read error with errno set. */
static ssize_t reader_fill(recording_reader *r, uint64_t off, size_t want)
{
    if (off + want <= r->base + r->len)
        return (ssize_t)want;
    /* Drop what lies before off, never more than was read (the window stays one contiguous run
     * of the file, so read() continues where the last one stopped) and in multiples of 8 (so
     * base stays 8-aligned). */
    uint64_t keep = off & ~(uint64_t)7;
    if (keep > r->base) {
        size_t most = r->len & ~(size_t)7;
        size_t drop = keep - r->base < most ? (size_t)(keep - r->base) : most;
        memmove(r->buf, r->buf + drop, r->len - drop);
        r->len -= drop;
        r->base += drop;
    }
    size_t need = (size_t)(off - r->base) + want;
    if (need > r->cap || r->cap - need < READ_BLOCK / 4) {
        size_t cap = need + READ_BLOCK;
        unsigned char *nb = realloc(r->buf, cap);
        if (!nb) {
            errno = ENOMEM;
            return -1;
        }
        r->buf = nb;
        r->cap = cap;
    }
    while (r->len < need && r->base + r->len < r->size) {
        uint64_t left = r->size - (r->base + r->len);
        size_t room = r->cap - r->len < left ? r->cap - r->len : (size_t)left;
        ssize_t n = read(r->fd, r->buf + r->len, room);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0)
            break;
        r->len += (size_t)n;
        r->bytes_read += (uint64_t)n;
    }
    size_t have = r->base + r->len > off ? (size_t)(r->base + r->len - off) : 0;
    return (ssize_t)(have < want ? have : want);
}

/* Checks the chunk at off: header, length and checksum. On CHUNK_OK, *h is its header and its
 * payload lies at r->buf + (off - r->base) + CHUNK_HEADER until the next fill. */
static int reader_check(recording_reader *r, uint64_t off, chunk_header *h)
{
    ssize_t got = reader_fill(r, off, CHUNK_HEADER);
    if (got < 0)
        return CHUNK_IOERR;
    if (got == 0)
        return CHUNK_END;
    if (got < (ssize_t)CHUNK_HEADER)
        return reader_written_since(r, off + CHUNK_HEADER) ? CHUNK_END : CHUNK_BAD;
    memcpy(h, r->buf + (off - r->base), CHUNK_HEADER);
    /* A checksum this reader does not know cannot vouch for the header: damage. */
    unsigned sum = h->flags & CHUNK_SUM_MASK;
    if (h->magic != CHUNK_MAGIC || h->length > CHUNK_PAYLOAD_MAX ||
        (sum != CHUNK_SUM_CRC32 && sum != CHUNK_SUM_CRC32C))
        return CHUNK_BAD;
    size_t body = (size_t)h->length + pad8(h->length);
    /* A length that runs past the end of the file is refused unread; past the size the file
     * had when opened, into bytes written since, it is the chunk a live recording's writer was
     * writing: the end of what is read. */
    if (off + CHUNK_HEADER + body > r->size)
        return reader_written_since(r, off + CHUNK_HEADER + body) ? CHUNK_END : CHUNK_BAD;
    /* Checksums that fail may cost at most CHECK_FACTOR times the bytes passed so far (plus
     * CHECK_ALLOWANCE): headers planted every 8 bytes, each claiming 16 MiB, would otherwise
     * checksum 16 MiB apiece. A real chunk after damage costs its own size, well inside. */
    if (r->failed_checked + body > CHECK_ALLOWANCE + CHECK_FACTOR * off)
        return CHUNK_BAD;
    got = reader_fill(r, off, CHUNK_HEADER + body);
    if (got < 0)
        return CHUNK_IOERR;
    if ((size_t)got < CHUNK_HEADER + body)
        return CHUNK_BAD;
    uint32_t crc = chunk_sum_header(sum, h);
    crc = sum_add(sum, crc, r->buf + (off - r->base) + CHUNK_HEADER, body);
    r->bytes_checked += body;
    if (crc == h->crc)
        return CHUNK_OK;
    r->failed_checked += body;
    return CHUNK_BAD;
}

/* In a resynchronization, before the window moves past its end to off: a hole in a sparse file
 * (SEEK_DATA) is jumped over rather than read as zeros. Returns the offset to go on from. */
static uint64_t reader_skip_hole(recording_reader *r, uint64_t off)
{
    if (off < r->base + r->len)
        return off;
    off_t data = lseek(r->fd, (off_t)off, SEEK_DATA);
    if (data < 0 && errno == ENXIO)
        data = (off_t)(r->size > off ? r->size : off); /* only a hole up to the end */
    if (data >= 0 && (uint64_t)data > r->size)
        data = (off_t)(r->size > off ? r->size : off); /* data written since the reader opened */
    if (data < 0 || (uint64_t)data < off + HOLE_MIN) {
        lseek(r->fd, (off_t)(r->base + r->len), SEEK_SET); /* where read() goes on */
        return off;
    }
    uint64_t to = (uint64_t)data & ~(uint64_t)7;
    r->base = to;
    r->len = 0;
    lseek(r->fd, (off_t)to, SEEK_SET);
    return to;
}

/* After a bad chunk at r->pos: the next 8-aligned offset holding a valid chunk, or the end. Every
 * further header with our magic that fails its check counts as one more damaged chunk. */
static int reader_resync(recording_reader *r)
{
    uint64_t from = r->pos;
    r->bad++;
    for (uint64_t off = from + 8;; off += 8) {
        off = reader_skip_hole(r, off);
        ssize_t got = reader_fill(r, off, 4);
        if (got < 0)
            return -1;
        if (got < 4) {
            /* The end (a short fill read up to it): whatever is left of the file is skipped. */
            uint64_t end = r->base + r->len;
            r->skipped += end - from;
            r->pos = end;
            return 0;
        }
        uint32_t magic;
        memcpy(&magic, r->buf + (off - r->base), 4);
        if (magic != CHUNK_MAGIC)
            continue;
        chunk_header h;
        int st = reader_check(r, off, &h);
        if (st == CHUNK_IOERR)
            return -1;
        if (st == CHUNK_OK || st == CHUNK_END) {
            r->skipped += off - from;
            r->pos = off;
            return 0;
        }
        r->bad++;
    }
}

/* The entry of an id beyond the dense array, or NULL. */
static const char *reader_sparse(const recording_reader *r, uint32_t id)
{
    uint32_t i = index_map_find(&r->sparse_ids, id);
    return i == UINT32_MAX ? NULL : r->sparse[i];
}

/* Sets the entry of an id beyond the dense array. Returns 0 or -1 out of memory. */
static int reader_put_sparse(recording_reader *r, uint32_t id, const char *entry)
{
    uint32_t next = r->sparse_ids.count;
    if (next == r->sparse_cap) {
        uint32_t cap = r->sparse_cap ? r->sparse_cap * 2 : 1024;
        const char **grown = cap > r->sparse_cap ? realloc(r->sparse, cap * sizeof *grown) : NULL;
        if (!grown)
            return -1;
        r->name_memory += (uint64_t)(cap - r->sparse_cap) * sizeof *grown;
        r->sparse = grown;
        r->sparse_cap = cap;
    }
    uint64_t slots_before = r->sparse_ids.keys ? r->sparse_ids.mask + 1ull : 0;
    int inserted = 0;
    uint32_t i = index_map_get(&r->sparse_ids, id, next, &inserted);
    if (i == UINT32_MAX)
        return -1;
    /* The map's slots count as the names' memory. */
    r->name_memory += (r->sparse_ids.mask + 1ull - slots_before) *
                      (sizeof *r->sparse_ids.keys + sizeof *r->sparse_ids.values);
    r->names += inserted;
    r->sparse[i] = entry;
    return 0;
}

/* The dense array covers ids up to twice the names stored (and a first stretch): a writer's ids
 * are consecutive, a hostile file's far apart ones go to the index_map instead. */
static int reader_dense_covers(recording_reader *r, uint32_t id)
{
    if (id < r->dense_cap)
        return 1;
    uint64_t want = (uint64_t)r->dense_cap * 2;
    if (want < 4096)
        want = 4096;
    if (id >= want || want > 2ull * r->names + 4096)
        return 0;
    const char **d = realloc(r->dense, want * sizeof(*d));
    if (!d)
        return 0;
    memset(d + r->dense_cap, 0, (want - r->dense_cap) * sizeof(*d));
    r->name_memory += (want - r->dense_cap) * sizeof(*d);
    r->dense = d;
    r->dense_cap = (uint32_t)want;
    return 1;
}

/* A copy of a name in the blocks: {uint32 length, bytes, NUL}, 4-byte aligned. Every empty name
 * shares one entry. */
static const char *reader_keep(recording_reader *r, const unsigned char *p, uint32_t len)
{
    static const uint32_t empty_entry[2];
    if (!len)
        return (const char *)empty_entry;
    size_t need = (sizeof(uint32_t) + (size_t)len + 1 + 3) & ~(size_t)3;
    name_block *b = r->blocks;
    if (!b || b->cap - b->used < need) {
        size_t cap = need > NAME_BLOCK ? need : NAME_BLOCK;
        b = malloc(sizeof(*b) + cap);
        if (!b)
            return NULL;
        r->name_memory += sizeof(*b) + cap;
        b->next = r->blocks;
        b->used = 0;
        b->cap = cap;
        r->blocks = b;
    }
    char *e = b->bytes + b->used;
    memcpy(e, &len, sizeof len);
    memcpy(e + sizeof len, p, len);
    e[sizeof len + len] = '\0';
    b->used += need;
    return e;
}

/* Stores a name; a later chunk naming the same id (a later writer of the same file) wins. */
static int reader_put_string(recording_reader *r, uint32_t id, const unsigned char *p, uint32_t len)
{
    const char *e = reader_keep(r, p, len);
    if (!e)
        return -1;
    if (reader_dense_covers(r, id)) {
        r->names += !r->dense[id];
        r->dense[id] = e;
        return 0;
    }
    return reader_put_sparse(r, id, e);
}

/* Validates a STRINGS payload completely before storing any of it: counts and lengths come
 * from the file and are never trusted. Returns 0, 1 when malformed, -1 out of memory. */
static int reader_strings(recording_reader *r, const unsigned char *p, uint32_t len)
{
    uint32_t first, count;
    if (len < 8)
        return 1;
    memcpy(&first, p, 4);
    memcpy(&count, p + 4, 4);
    if (count > (len - 8) / 4 || (count && (uint64_t)first + count - 1 > UINT32_MAX))
        return 1;
    uint64_t at = 8;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t n;
        if (at + 4 > len)
            return 1;
        memcpy(&n, p + at, 4);
        at += 4;
        if (n > len - at)
            return 1;
        at += n;
    }
    at = 8;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t n;
        memcpy(&n, p + at, 4);
        if (reader_put_string(r, first + i, p + at + 4, n) < 0)
            return -1;
        at += 4 + (uint64_t)n;
    }
    return 0;
}

/* Keeps the first META chunk; a shorter one (older writer) is zero-extended. */
static void reader_meta(recording_reader *r, const unsigned char *p, uint32_t len)
{
    if (r->have_meta)
        return;
    memset(&r->meta, 0, sizeof(r->meta));
    memcpy(&r->meta, p, len < sizeof(r->meta) ? len : sizeof(r->meta));
    r->meta.process[sizeof(r->meta.process) - 1] = '\0';
    r->meta.clock[sizeof(r->meta.clock) - 1] = '\0';
    r->meta.host[sizeof(r->meta.host) - 1] = '\0';
    r->have_meta = 1;
}

/* The file a path names: the file itself, dir/events.tsr or dir/recording/events.tsr. */
static int reader_locate(const char *path, char **file, char **cause)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return cause_set(cause, "cannot open %s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode)) {
        *file = strdup(path);
        return *file ? 0 : cause_set(cause, "out of memory");
    }
    static const char *const tries[] = {TS_RECORDING_FILE, TS_RECORDING_DIR "/" TS_RECORDING_FILE};
    for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
        if (asprintf(file, "%s/%s", path, tries[i]) < 0)
            return cause_set(cause, "out of memory");
        if (stat(*file, &st) == 0 && !S_ISDIR(st.st_mode))
            return 0;
        free(*file);
        *file = NULL;
    }
    /* A folder inside a run folder (its report/, most likely) given for the run folder. */
    char *up = NULL;
    if (asprintf(&up, "%s/../" TS_RECORDING_DIR "/" TS_RECORDING_FILE, path) >= 0 &&
        stat(up, &st) == 0 && !S_ISDIR(st.st_mode)) {
        free(up);
        char *run = NULL;
        int rc = asprintf(&run, "%s/..", path) < 0 ? -1 : 0;
        char real[PATH_MAX];
        const char *name = rc == 0 && realpath(run, real) ? real : "the folder above it";
        rc = cause_set(cause,
                       "%s holds no termsight recording: it lies in the run folder %s, which "
                       "does; give that one",
                       path, name);
        free(run);
        return rc;
    }
    free(up);
    return cause_set(cause, "%s holds no termsight recording (no %s or %s/%s in it)", path,
                     TS_RECORDING_FILE, TS_RECORDING_DIR, TS_RECORDING_FILE);
}

int recording_reader_open(const char *path, recording_reader **out, char **cause)
{
    *out = NULL;
    char *file = NULL;
    if (reader_locate(path, &file, cause) < 0)
        return -1;

    recording_reader *r = calloc(1, sizeof(*r));
    if (!r) {
        free(file);
        return cause_set(cause, "out of memory");
    }
    r->path = file;
    /* O_NONBLOCK: opening a FIFO must not hang; it is refused below as not a regular file. */
    r->fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (r->fd < 0) {
        cause_set(cause, "cannot open %s: %s", file, strerror(errno));
        goto fail;
    }
    struct stat st;
    if (fstat(r->fd, &st) < 0) {
        cause_set(cause, "cannot read %s: %s", file, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        cause_set(cause, "%s is not a termsight recording (not a regular file)", file);
        goto fail;
    }
    r->size = (uint64_t)st.st_size;
    ssize_t got = reader_fill(r, 0, 4);
    if (got < 0) {
        cause_set(cause, "cannot read %s: %s", file, strerror(errno));
        goto fail;
    }
    if (got == 0) {
        cause_set(cause, "%s is empty", file);
        goto fail;
    }
    /* A recording starts with a chunk header. Its checksum is not required here: a first chunk
     * cut short or damaged is the reader's to report as damage, a foreign file is refused. */
    uint32_t magic = 0;
    if (got == 4)
        memcpy(&magic, r->buf, 4);
    if (magic != CHUNK_MAGIC) {
        cause_set(cause, "%s is not a termsight recording", file);
        goto fail;
    }
    *out = r;
    return 0;

fail:
    recording_reader_close(r);
    return -1;
}

int recording_reader_next(recording_reader *r, const ts_event **ev, size_t *n, char **cause)
{
    *ev = NULL;
    *n = 0;
    for (;;) {
        chunk_header h;
        int st = reader_check(r, r->pos, &h);
        if (st == CHUNK_END)
            return 0;
        if (st == CHUNK_BAD && reader_resync(r) == 0)
            continue;
        if (st != CHUNK_OK)
            return cause_set(cause, "cannot read %s: %s", r->path, strerror(errno));

        const unsigned char *p = r->buf + (r->pos - r->base) + CHUNK_HEADER;
        uint64_t size = CHUNK_HEADER + (uint64_t)h.length + pad8(h.length);
        int malformed = 0;
        r->pos += size;
        if (h.flags & ~CHUNK_SUM_MASK) /* a later writer's variant: skipped like an unknown type */
            continue;
        switch (h.type) {
        case TS_CHUNK_META:
            reader_meta(r, p, h.length);
            if (r->meta.major < TS_RECORDING_OLDEST || r->meta.major > TS_RECORDING_MAJOR)
                return cause_set(
                    cause, "%s: recording format %u.%u, this termsight reads %u.x to %u.x", r->path,
                    r->meta.major, r->meta.minor, TS_RECORDING_OLDEST, TS_RECORDING_MAJOR);
            break;
        case TS_CHUNK_STRINGS:
            malformed = reader_strings(r, p, h.length);
            if (malformed < 0)
                return cause_set(cause, "out of memory reading %s", r->path);
            break;
        case TS_CHUNK_EVENTS:
            if (h.length % sizeof(ts_event)) {
                malformed = 1;
                break;
            }
            if (!h.length)
                break;
            *ev = (const ts_event *)(const void *)p;
            *n = h.length / sizeof(ts_event);
            return 1;
        default: /* unknown types are for later readers */
            break;
        }
        if (malformed) {
            /* A checksum that holds over a payload that does not parse: a writer's bug. */
            r->bad++;
            r->skipped += size;
        }
    }
}

const char *recording_reader_string(const recording_reader *r, uint32_t id, uint32_t *len)
{
    const char *e = NULL;
    if (id < r->dense_cap) {
        e = r->dense[id];
    } else {
        e = reader_sparse(r, id);
    }
    if (!e)
        return NULL;
    if (len)
        memcpy(len, e, sizeof *len);
    return e + sizeof(uint32_t);
}

const recording_meta *recording_reader_meta(const recording_reader *r)
{
    return r->have_meta ? &r->meta : NULL;
}

uint64_t recording_reader_skipped_bytes(const recording_reader *r)
{
    return r->skipped;
}

uint64_t recording_reader_bad_chunks(const recording_reader *r)
{
    return r->bad;
}

uint64_t recording_reader_extent(const recording_reader *r, uint64_t *grown)
{
    struct stat st;
    if (grown)
        *grown = fstat(r->fd, &st) == 0 && (uint64_t)st.st_size > r->size
                     ? (uint64_t)st.st_size - r->size
                     : 0;
    return r->size;
}

recording_reader_work recording_reader_work_done(const recording_reader *r)
{
    return (recording_reader_work){.bytes_read = r->bytes_read,
                                   .bytes_checked = r->bytes_checked,
                                   .name_memory = r->name_memory};
}

void recording_reader_close(recording_reader *r)
{
    if (!r)
        return;
    if (r->fd >= 0)
        close(r->fd);
    for (name_block *b = r->blocks, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    free(r->dense);
    index_map_free(&r->sparse_ids);
    free(r->sparse);
    free(r->buf);
    free(r->path);
    free(r);
}
