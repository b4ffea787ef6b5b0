/* recording: the append-only file of checksummed chunks that a collector writes while it
 * collects (its format: recording_internal.h; its reader: recording_read.c). */
#include "recording_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ */
/* Writer                                                                                     */
/* ------------------------------------------------------------------------------------------ */

struct recording_writer {
    int fd;
    dev_t dev; /* the file fd was opened on: checked before every write */
    ino_t ino;
    char *path;
    uint64_t seq;
    uint64_t bytes;
    uint64_t events; /* in EVENTS chunks written whole */
    uint64_t start;  /* the file's size when opened: it is appended to */
};

static uint64_t iov_total(const struct iovec *iov, int n)
{
    uint64_t len = 0;
    for (int i = 0; i < n; i++)
        len += iov[i].iov_len;
    return len;
}

static int writer_fail(const recording_writer *w, int err, char **cause)
{
    return cause_set(cause, "cannot write %s: %s", w->path, strerror(err));
}

/* Whether fd still names the file it was opened on. A program may close every descriptor it
 * did not open and open its own files under the same numbers (daemons, some launchers): the
 * writer must then stop, never write into them. (The collector's recorder keeps its descriptors
 * in a table of its own where the system allows, where this always holds; elsewhere this check
 * narrows the window to the instant between it and the write.) */
static int writer_owns_fd(const recording_writer *w)
{
    struct stat st;
    return fstat(w->fd, &st) == 0 && st.st_dev == w->dev && st.st_ino == w->ino;
}

/* Writes every iovec, across EINTR and short writes. iov is consumed. */
static int writer_writev(recording_writer *w, struct iovec *iov, int iovcnt, char **cause)
{
    if (!writer_owns_fd(w)) {
        errno = EBADF;
        return cause_set(cause,
                         "cannot write %s: its descriptor %d was closed or reused by the program, "
                         "so recording stops",
                         w->path, w->fd);
    }
    /* Past ulimit -f the kernel would send SIGXFSZ, whose disposition is the program's: the
     * writer stops short of it instead, and tears no chunk there. */
    if (rlimits_file_check(w->start + w->bytes + iov_total(iov, iovcnt)) != 0)
        return cause_set(cause,
                         "cannot write %s: it would pass the file-size limit (ulimit -f) at "
                         "%llu bytes",
                         w->path, (unsigned long long)(w->start + w->bytes));
    while (iovcnt > 0) {
        ssize_t n = writev(w->fd, iov, iovcnt);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return writer_fail(w, errno, cause);
        }
        if (n == 0)
            return writer_fail(w, EIO, cause);
        w->bytes += (uint64_t)n;
        size_t left = (size_t)n;
        while (iovcnt > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            iov++;
            iovcnt--;
        }
        if (iovcnt > 0) {
            iov->iov_base = (char *)iov->iov_base + left;
            iov->iov_len -= left;
        }
    }
    return 0;
}

/* Appends one chunk whose payload is the concatenation of parts (at most 3). */
static int writer_chunk(recording_writer *w, uint16_t type, const struct iovec *parts, int nparts,
                        char **cause)
{
    uint64_t length = iov_total(parts, nparts);
    if (length > CHUNK_PAYLOAD_MAX)
        return cause_set(cause, "cannot write %s: a chunk of %llu bytes is over the limit", w->path,
                         (unsigned long long)length);

    /* META keeps CRC-32, for older readers (see the top of this file). */
    unsigned sum = type == TS_CHUNK_META ? CHUNK_SUM_CRC32 : CHUNK_SUM_WRITTEN;
    chunk_header h = {.magic = CHUNK_MAGIC,
                      .type = type,
                      .flags = (uint16_t)sum,
                      .length = (uint32_t)length,
                      .seq = w->seq};
    uint32_t pad = pad8(h.length);
    uint32_t crc = chunk_sum_header(sum, &h);
    struct iovec iov[5];
    int n = 0;
    iov[n++] = (struct iovec){.iov_base = &h, .iov_len = sizeof(h)};
    for (int i = 0; i < nparts; i++) {
        if (!parts[i].iov_len)
            continue;
        crc = sum_add(sum, crc, parts[i].iov_base, parts[i].iov_len);
        iov[n++] = parts[i];
    }
    if (pad) {
        crc = sum_add(sum, crc, zeros, pad);
        iov[n++] = (struct iovec){.iov_base = (void *)zeros, .iov_len = pad};
    }
    h.crc = crc;
    if (writer_writev(w, iov, n, cause) < 0)
        return -1;
    w->seq++;
    return 0;
}

/* A folder the writer names itself must be a real folder of this user: a symbolic link or
 * another user's folder found there was put by someone else, and is never written into. */
static int writer_own_dir(const char *dir, char **cause)
{
    struct stat st;
    if (path_mkdirs(dir, 1, 0700, cause) < 0)
        return -1;
    if (lstat(dir, &st) < 0)
        return cause_set(cause, "cannot use folder %s: %s", dir, strerror(errno));
    if (S_ISLNK(st.st_mode))
        return cause_set(
            cause, "cannot write into %s: it is a symbolic link, which is never followed", dir);
    if (!S_ISDIR(st.st_mode))
        return cause_set(cause, "cannot create folder %s: it exists and is not a folder", dir);
    if (st.st_uid != geteuid())
        return cause_set(cause, "cannot write into %s: it belongs to uid %u, not to you (uid %u)",
                         dir, (unsigned)st.st_uid, (unsigned)geteuid());
    return 0;
}

/* dir, and the run folder above it when dir is its recording/ folder, created or checked. */
static int writer_dirs(const char *dir, char **cause)
{
    char *d = strdup(dir);
    if (!d)
        return cause_set(cause, "out of memory");
    size_t len = strlen(d);
    while (len > 1 && d[len - 1] == '/')
        d[--len] = '\0';
    char *slash = strrchr(d, '/');
    int rc = 0;
    if (slash && slash > d && !strcmp(slash + 1, TS_RECORDING_DIR)) {
        *slash = '\0';
        rc = writer_own_dir(d, cause);
        *slash = '/';
    }
    if (rc == 0)
        rc = writer_own_dir(d, cause);
    free(d);
    return rc;
}

int recording_writer_open(const char *dir, const recording_meta *meta, recording_writer **out,
                          char **cause)
{
    *out = NULL;
    if (!dir || !*dir)
        return cause_set(cause, "no recording folder given");
    if (writer_dirs(dir, cause) < 0)
        return -1;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return cause_set(cause, "cannot open folder %s: %s", dir, strerror(errno));
    int r = recording_writer_openat(dfd, dir, meta, out, cause);
    close(dfd);
    return r;
}

int recording_writer_openat(int dirfd, const char *dir, const recording_meta *meta,
                            recording_writer **out, char **cause)
{
    *out = NULL;
    recording_writer *w = calloc(1, sizeof(*w));
    if (!w || asprintf(&w->path, "%s/%s", dir, TS_RECORDING_FILE) < 0) {
        free(w);
        return cause_set(cause, "out of memory");
    }
    /* O_NONBLOCK: a FIFO planted at the path fails instead of blocking the recorder. */
    w->fd = openat(dirfd, TS_RECORDING_FILE,
                   O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
    if (w->fd < 0) {
        int err = errno;
        if (err == ELOOP)
            cause_set(cause, "cannot write %s: it is a symbolic link, which is never followed",
                      w->path);
        else
            cause_set(cause, "cannot open %s: %s", w->path, strerror(err));
        free(w->path);
        free(w);
        return -1;
    }
    struct stat st;
    if (fstat(w->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        cause_set(cause, "cannot write %s: not a regular file", w->path);
        recording_writer_close(w, NULL);
        return -1;
    }
    if (st.st_uid != geteuid()) {
        cause_set(cause, "cannot write %s: it belongs to uid %u, not to you (uid %u)", w->path,
                  (unsigned)st.st_uid, (unsigned)geteuid());
        recording_writer_close(w, NULL);
        return -1;
    }
    w->dev = st.st_dev;
    w->ino = st.st_ino;
    w->start = (uint64_t)st.st_size;
    /* A torn chunk left by an earlier writer: realign so the reader finds what follows. */
    uint32_t pad = pad8((uint32_t)(st.st_size & 7));
    if (pad) {
        struct iovec iov = {.iov_base = (void *)zeros, .iov_len = pad};
        if (writer_writev(w, &iov, 1, cause) < 0) {
            recording_writer_close(w, NULL);
            return -1;
        }
    }

    /* Field by field into a zeroed record, so that no padding byte of the caller's leaks. */
    recording_meta m;
    memset(&m, 0, sizeof(m));
    if (meta) {
        m.major = meta->major;
        m.minor = meta->minor;
        m.pid = meta->pid;
        memcpy(m.process, meta->process, sizeof(m.process));
        memcpy(m.clock, meta->clock, sizeof(m.clock));
        m.start_realtime_ns = meta->start_realtime_ns;
        m.start_ns = meta->start_ns;
        memcpy(m.host, meta->host, sizeof(m.host));
    }
    struct iovec part = {.iov_base = &m, .iov_len = sizeof(m)};
    if (writer_chunk(w, TS_CHUNK_META, &part, 1, cause) < 0) {
        recording_writer_close(w, NULL);
        return -1;
    }
    *out = w;
    return 0;
}

/* Writes names [from, to) of the caller's arrays as one STRINGS chunk. */
static int writer_strings(recording_writer *w, uint32_t first, uint32_t from, uint32_t to,
                          size_t size, const char *const *bytes, const uint32_t *lens, char **cause)
{
    unsigned char *buf = malloc(size);
    if (!buf)
        return cause_set(cause, "out of memory");
    uint32_t id = first + from, count = to - from;
    memcpy(buf, &id, 4);
    memcpy(buf + 4, &count, 4);
    size_t at = 8;
    for (uint32_t i = from; i < to; i++) {
        memcpy(buf + at, &lens[i], 4);
        if (lens[i])
            memcpy(buf + at + 4, bytes[i], lens[i]);
        at += 4 + (size_t)lens[i];
    }
    struct iovec part = {.iov_base = buf, .iov_len = size};
    int rc = writer_chunk(w, TS_CHUNK_STRINGS, &part, 1, cause);
    free(buf);
    return rc;
}

int recording_append_strings(recording_writer *w, uint32_t first, uint32_t count,
                             const char *const *bytes, const uint32_t *lens, char **cause)
{
    if (count && (uint64_t)first + count - 1 > UINT32_MAX)
        return cause_set(cause, "string ids %u + %u are out of range", first, count);
    /* More names than one chunk holds go into several, each for consecutive ids. */
    uint32_t from = 0;
    size_t size = 8;
    for (uint32_t i = 0; i < count; i++) {
        if (lens[i] && !bytes[i])
            return cause_set(cause, "string %u has no bytes", first + i);
        if (lens[i] > CHUNK_PAYLOAD_MAX - 12)
            return cause_set(cause, "string %u is too long (%u bytes)", first + i, lens[i]);
        size_t add = 4 + (size_t)lens[i];
        if (size + add > CHUNK_PAYLOAD_MAX) {
            if (writer_strings(w, first, from, i, size, bytes, lens, cause) < 0)
                return -1;
            from = i;
            size = 8;
        }
        size += add;
    }
    if (from < count)
        return writer_strings(w, first, from, count, size, bytes, lens, cause);
    return 0;
}

int recording_append_events(recording_writer *w, lane_run run, char **cause)
{
    /* Chunks of up to CHUNK_EVENTS_MAX, each written straight from the two runs. */
    lane_run rest = run, p;
    while (lane_run_take(&rest, CHUNK_EVENTS_MAX, &p)) {
        struct iovec parts[2] = {
            {.iov_base = (void *)p.a, .iov_len = p.na * sizeof(ts_event)},
            {.iov_base = (void *)p.b, .iov_len = p.nb * sizeof(ts_event)},
        };
        if (writer_chunk(w, TS_CHUNK_EVENTS, parts, 2, cause) < 0)
            return -1;
        w->events += p.na + p.nb;
    }
    return 0;
}

int recording_sync(recording_writer *w, char **cause)
{
    if (!writer_owns_fd(w))
        return cause_set(cause, "cannot sync %s: its descriptor %d was closed or reused", w->path,
                         w->fd);
    while (fdatasync(w->fd) < 0) {
        if (errno != EINTR)
            return cause_set(cause, "cannot sync %s: %s", w->path, strerror(errno));
    }
    return 0;
}

uint64_t recording_bytes(const recording_writer *w)
{
    return w->bytes;
}

uint64_t recording_events(const recording_writer *w)
{
    return w->events;
}

int recording_writer_close(recording_writer *w, char **cause)
{
    if (!w)
        return 0;
    int rc = 0;
    /* close() is not retried on EINTR: on Linux the descriptor is gone either way. A descriptor
     * that now names someone else's file is theirs to close. */
    if (w->fd >= 0 && writer_owns_fd(w) && close(w->fd) < 0)
        rc = cause_set(cause, "cannot close %s: %s", w->path, strerror(errno));
    free(w->path);
    free(w);
    return rc;
}
