/* model: the recording, its writer, reader and salvage (recording.c, recording_read.c, salvage.c).
 */
#ifndef TERMSIGHT_MODEL_RECORDING_H
#define TERMSIGHT_MODEL_RECORDING_H

#include "budget.h"
#include "lane.h"
#include "segment.h"

/* A recording is one append-only file of chunks, written by one process: a 24-byte chunk header
 * (magic, type, flags, payload length, checksum, sequence number) and the payload, padded to 8
 * bytes. The checksum (CRC-32C since format 2, CRC-32 before; the flags name it) covers the
 * header's other fields and the padded payload. A reader
 * resynchronizes on the next valid chunk after damage, so a file cut short or with flipped bytes
 * still yields every whole chunk. */

#define TS_RECORDING_MAJOR  2 /* recording_meta.major: incompatible changes (2: CRC-32C) */
#define TS_RECORDING_MINOR  0 /* recording_meta.minor: compatible additions */
#define TS_RECORDING_OLDEST 1 /* the oldest major still read */
#define TS_RECORDING_FILE   "events.tsr"
#define TS_RECORDING_DIR    "recording"
/* A run folder's flight-recorder snapshots: snapshots/NN-cause[-stepN]/, each a run folder of its
 * own (a recording/ folder, and the report once analysed). */
#define TS_SNAPSHOT_DIR "snapshots"
/* Beside the recording while it is written: disk space kept so that a recording that a full disk
 * stopped can still be closed with a note of what was lost. Removed at the end. */
#define TS_RECORDING_RESERVE "events.reserve"

enum ts_chunk_type {
    TS_CHUNK_META = 1,    /* recording_meta */
    TS_CHUNK_STRINGS = 2, /* names for consecutive ids */
    TS_CHUNK_EVENTS = 3,  /* ts_event records */
};

typedef struct recording_meta {
    uint32_t major, minor; /* recording format */
    int32_t pid;
    char process[64];
    char clock[16];
    uint64_t start_realtime_ns;
    uint64_t start_ns;
    char host[64];
} recording_meta;

typedef struct recording_writer recording_writer;

/* Creates dir (and parents) mode 0700 and appends to dir/events.tsr (created 0600, never through a
 * symbolic link), starting with a META chunk. dir, and its parent when dir is a run folder's
 * recording/ folder, must be folders of this user and not symbolic links: else -1. */
int recording_writer_open(const char *dir, const recording_meta *meta, recording_writer **out,
                          char **cause);

/* The same in the folder open as dirfd (dir names it in messages): dir/events.tsr opened there,
 * never through a link, and only when it is a regular file of this user. */
int recording_writer_openat(int dirfd, const char *dir, const recording_meta *meta,
                            recording_writer **out, char **cause);

/* STRINGS chunks holding ids first .. first+count-1 (one, or several over 16 MiB). */
int recording_append_strings(recording_writer *w, uint32_t first, uint32_t count,
                             const char *const *bytes, const uint32_t *lens, char **cause);

/* One or more EVENTS chunks holding the events of run, in order (lane_run_of for one array). */
int recording_append_events(recording_writer *w, lane_run run, char **cause);

/* Everything appended so far reaches the disk (fdatasync). */
int recording_sync(recording_writer *w, char **cause);

uint64_t recording_bytes(const recording_writer *w);

/* Events appended so far. A recording_append_events that fails has still written the events of
 * the chunks it finished before the failure: they count here, and are in the file. */
uint64_t recording_events(const recording_writer *w);

int recording_writer_close(recording_writer *w, char **cause);

/* After a collector's process ended without closing its session (a signal, _exit): appends to
 * the recording in dir what its segment (attached; read-only is enough) still holds: the names
 * the recorder had not written, the events every lane held past its last drain, a stop marker for
 * a window left open and a CONFIG event "ended" whose value is why. *events: the lanes' events
 * copied. Returns 0 (nothing done when the session never opened a window or closed its recording
 * itself), -1 with *cause when the recording cannot be written. */
int recording_salvage(const segment *seg, const char *dir, const char *why, uint64_t *events,
                      char **cause);

/* Appends names [from, to) of seg's string table to w (an unpublished or damaged entry as "").
 * 0, or -1 with *cause. */
int recording_copy_names(const segment *seg, recording_writer *w, uint32_t from, uint32_t to,
                         char **cause);

/* A segment whose process is gone (info from segment_list): what its lanes still held goes
 * into its recording (recording_salvage, why as the "ended" note; only when its run folder lies
 * under within, unless within is NULL; a relative one, which older collectors wrote, only when
 * segment_run_folder can resolve it), then the segment is removed, and what it held of ledger
 * given back (when the segment was charged to that ledger; NULL: none). One reaper at a time: the
 * segment is first renamed out of the way ("<name>-reap"), and a segment another reaper took
 * meanwhile is left to it (0, nothing done). *events: the events recovered. 0, or -1 with *cause
 * (the first thing that failed; the rest is still done). */
int segment_reap(const segment_info *info, const char *why, const char *within,
                 ts_shm_budget *ledger, uint64_t *events, char **cause);

typedef struct recording_reader recording_reader;

/* Opens a recording file, a recording/ folder or a run folder holding one. */
int recording_reader_open(const char *path, recording_reader **out, char **cause);

/* Next batch of events, in file order: 1 with *ev, *n set (valid until the next call), 0 at the
 * end, -1 on a read error. STRINGS and META chunks are absorbed on the way. */
int recording_reader_next(recording_reader *r, const ts_event **ev, size_t *n, char **cause);

/* A name seen so far, or NULL. */
const char *recording_reader_string(const recording_reader *r, uint32_t id, uint32_t *len);

/* The first META chunk, or NULL before it was read. */
const recording_meta *recording_reader_meta(const recording_reader *r);

/* Damage seen so far: bytes skipped and chunks refused (bad checksum, bad length, cut short). */
uint64_t recording_reader_skipped_bytes(const recording_reader *r);
uint64_t recording_reader_bad_chunks(const recording_reader *r);

/* The bytes the reader reads: the file's size when it was opened. A recording still being
 * written is read up to there and no further (the chunk its writer was writing then is the end,
 * not damage), so reading ends whatever the writer does; *grown (may be NULL): how many bytes
 * the file has now past that size, 0 when none. */
uint64_t recording_reader_extent(const recording_reader *r, uint64_t *grown);

/* What reading cost so far: bytes read from the file, bytes checksummed (valid chunks and
 * candidates that failed), bytes held for names. Reading is linear in the bytes the file holds
 * (holes of a sparse file are jumped over, failed checksums are bounded by a multiple of the
 * bytes passed), and names cost a bounded multiple of their chunks (docs/reliability.md). */
typedef struct recording_reader_work {
    uint64_t bytes_read;
    uint64_t bytes_checked;
    uint64_t name_memory;
} recording_reader_work;
recording_reader_work recording_reader_work_done(const recording_reader *r);

void recording_reader_close(recording_reader *r);

#endif
