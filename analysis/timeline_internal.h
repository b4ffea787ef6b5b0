/* timeline_internal: what timeline.c (the writer), timeline_nest.c (the nesting check) and
 * timeline_tmpl.c (the template printer) share. Only analysis/ includes it. */
#ifndef TERMSIGHT_TIMELINE_INTERNAL_H
#define TERMSIGHT_TIMELINE_INTERNAL_H

#include "analysis_internal.h"
#include "timeline.h"

#include <cJSON.h>
#include <stdint.h>

#define BUF_SIZE       (4u << 20)
#define BUF_MARGIN     (1u << 20) /* free space kept for one emission (names are <= 8 KiB) */
#define FILE_HEAD      "{\"traceEvents\":["
#define FILE_TAIL      "\n]}\n"
#define MAX_ROOTS      512 /* top-level spans kept per track before the oldest half is forgotten */
#define OVERLAP_LEVELS 3   /* overlap tracks per track */
#define FLOW_SLOTS     (1u << 16)
#define NO_TRACK       UINT32_MAX

enum proc_kind { PROC_HOST, PROC_DEVICE, PROC_STEPS, PROC_OVERLAP };

typedef struct proc {
    uint32_t pid;
    uint32_t kind;   /* enum proc_kind */
    uint32_t device; /* PROC_DEVICE */
    uint32_t next_tid;
    uint32_t meta_file; /* file number + 1 whose metadata names it; 0: none yet */
} proc;

typedef struct span {
    uint64_t b, e;
    uint32_t kids; /* it has nested spans we no longer know */
} span;

typedef struct track {
    uint32_t proc; /* index in procs */
    uint32_t tid;
    uint32_t os_tid;   /* thread id or stream (PROC_HOST, PROC_DEVICE) */
    const char *label; /* fixed name (steps, overlap rows), else NULL */
    uint32_t level;    /* 0, or which overlap track */
    uint32_t base;     /* the level-0 track */
    uint32_t overflow; /* next overlap track, NO_TRACK until needed */
    uint32_t meta_file;
    uint32_t meta_name;  /* thread name id its metadata carried */
    uint64_t names_seen; /* timeline.names_gen when its name was last checked */
    int counters;        /* holds counters only: no thread of its own */
    span *roots;         /* disjoint, by begin */
    uint32_t nroots, cap;
    int forgot; /* spans were forgotten: they lie within [fb, fe] */
    uint64_t fb, fe;
} track;

/* Where an event line of a kept share begins (timeline_thin.c): its file and the offset of its
 * separator (file << MARK_OFF_BITS | offset), its ts and kind (enum pick_kind). */
typedef struct tl_mark {
    uint64_t at;
    int64_t ts;
    uint8_t kind;
} tl_mark;

#define MARK_OFF_BITS 40

typedef struct flow_slot {
    uint64_t corr;
    uint64_t ts;
    uint32_t track;
    uint32_t side; /* 0 empty, 1 launch (API), 2 kernel */
} flow_slot;

/* One event shape: a cJSON object whose values are raw items we point at our text. */
enum {
    S_NAME,
    S_CAT,
    S_TS,
    S_DUR,
    S_PID,
    S_TID,
    S_ID,
    S_A0,
    S_A1,
    S_A2,
    S_A3,
    S_A4,
    S_A5,
    S_A6,
    S_COUNT
};

typedef struct shape {
    cJSON *root;
    cJSON *slot[S_COUNT];
} shape;

enum {
    SH_X0,       /* X, no args */
    SH_X_OP,     /* X, args type */
    SH_X_OPF,    /* X, args type, flops */
    SH_X_KERNEL, /* X, args op, correlation */
    SH_X_COPY,   /* X, args op, bytes, direction */
    SH_X_API,    /* X, args correlation */
    SH_X_COMM,   /* X, args bytes */
    SH_X_STEP,   /* X, args step, interval_us, fpbp_us, tail_us, source */
    SH_X_SHARE,  /* X, args step, share_pct */
    SH_I,        /* instant on a thread */
    SH_IG,       /* global instant */
    SH_B,        /* async begin, args type */
    SH_E,        /* async end */
    SH_FS,       /* flow start */
    SH_FF,       /* flow end */
    SH_C1,       /* counter: args {A0 key} */
    SH_C_BYTES,
    SH_C_SIZE,
    SH_C_CPU,  /* user, system, iowait */
    SH_C_PROC, /* user, system */
    SH_M,      /* metadata: name, pid, tid, args name */
    SH_MP,     /* metadata without tid */
    SH_COUNT
};

/* A shape printed once by cJSON for one combination of fixed values (name, category, args
 * strings, pid, tid), with a marker byte where each varying value goes: the event is then this
 * text with the numbers spliced in. */
#define TMPL_SLOTS (1u << 14)
#define TMPL_MAX   4096         /* longest template kept; longer events are printed directly */
#define MARK(s)    (0x10 + (s)) /* 0x10..0x1d: raw bytes cJSON never writes (it escapes them) */

typedef struct tmpl_seg {
    uint32_t lit; /* literal bytes before the value */
    int slot;     /* -1: the end */
} tmpl_seg;

typedef struct tmpl_entry {
    uint64_t hash; /* 0: empty */
    uint32_t shape;
    uint64_t key[S_COUNT];
    char *text;
    tmpl_seg seg[S_COUNT + 1];
} tmpl_entry;

struct timeline {
    timeline_config cfg;
    analysis *a;
    char *procname;

    /* Output. */
    char *buf;
    size_t len;
    int fd;
    uint32_t file;        /* current file number */
    int open;             /* a file is open */
    uint64_t file_bytes;  /* bytes of the current file, buffered or written */
    uint64_t file_events; /* events in the current file */
    uint64_t total;       /* bytes of all files */
    int stopped;          /* the size limit was reached */
    int error;            /* errno of the first write error */

    timeline_stats st;

    /* Escaped JSON strings, by (class, id). */
    index_map strings;
    char *arena;
    size_t arena_len, arena_cap;
    index_map optype; /* op name id -> its type id, derived once */

    proc *procs;
    uint32_t nprocs;
    index_map proc_of; /* kind << 32 | device -> proc */
    track *tracks;
    uint32_t ntracks, cap_tracks;
    index_map track_of; /* proc << 32 | os tid -> track */
    uint32_t steps_track, overlap_track[4];
    step_span *spans; /* every step, in the order they came (timeline_thin) */
    size_t nspans, cap_spans;

    /* A share kept by steps (cfg.keep; timeline_thin.c): the text held in memory until it
     * passes cfg.hold_max (then written to its file: spilled), and each line marked. */
    int holding, spilled;
    char *held;
    size_t held_len, held_cap;
    tl_mark *marks;
    size_t nmarks, cap_marks;
    int marks_lost;
    int64_t ev_ts; /* the ts of the event being printed */
    int ev_has_ts;
    uint64_t names_gen; /* THREAD_NAME events seen */

    flow_slot *flows;
    uint64_t async_ids;

    shape shapes[SH_COUNT];
    char num[S_COUNT][64];  /* varying value text per slot */
    char knum[S_COUNT][16]; /* pid, tid text */
    uint64_t key[S_COUNT];  /* per slot: arena offset, pid/tid, or VARY */
    tmpl_entry *tmpl;       /* printed templates, direct-mapped by key hash (mapped: few used) */
    uint32_t *tmpl_used;    /* the slots holding one */
    uint32_t ntmpl_used;
    char *scratch; /* where templates are printed */
};

#define VARY UINT64_MAX /* a slot's key when its value varies from event to event */

/* Kinds of keyed strings: names by id, queues by id, literals by key, fallbacks by address. */
enum { STR_NAME = 0, STR_QUEUE = 1, STR_LITERAL = 2, STR_FALLBACK = 3 };

/* Literal keys: category names and fixed labels. */
enum {
    L_EMPTY = 0,
    L_OP,
    L_NVTX,
    L_API,
    L_KERNEL,
    L_COMM_KERNEL,
    L_MEMCPY,
    L_MEMSET,
    L_SYNC,
    L_COMM,
    L_MARK,
    L_PHASE,
    L_FWD,
    L_BWD,
    L_STEP,
    L_OVERLAP,
    L_AC2G,
    L_LOST,
    L_HOST_MEMORY,
    L_DEVICE_MEMORY,
    L_CPU,
    L_PROC_CPU,
    L_PROCESS_NAME,
    L_THREAD_NAME,
    L_SOURCE0,      /* + enum step_source */
    L_DYNAMIC = 64, /* per-number labels from here */
};

/* timeline_strings.c: the shapes built (0, or -1 out of memory); the arena's strings as JSON
 * strings (their offsets; UINT32_MAX or 0 when out of memory, as each says). */
int timeline_shapes_build(timeline *t);
uint32_t timeline_arena_add(timeline *t, const char *prefix, const char *bytes, size_t len);
uint32_t timeline_jstr(timeline *t, uint32_t cls, uint32_t id, const char *fallback);
uint32_t timeline_literal(timeline *t, uint32_t key, const char *text);

/* timeline_tracks.c: processes and tracks, found or made (NO_TRACK when out of memory), the
 * track a complete event [b, e] goes to (its own or an overlap track; NO_TRACK: dropped), and
 * the labels of their metadata. */
uint32_t timeline_proc_get(timeline *t, uint32_t kind, uint32_t device);
uint32_t timeline_track_new(timeline *t, uint32_t p, uint32_t os_tid, const char *label,
                            uint32_t level, uint32_t base);
uint32_t timeline_track_get(timeline *t, uint32_t p, uint32_t os_tid);
uint32_t timeline_place(timeline *t, uint32_t ti, uint64_t b, uint64_t e);
void timeline_proc_label(timeline *t, const proc *p, char *buf, size_t len);
uint32_t timeline_thread_name_id(timeline *t, const track *tr);
uint32_t timeline_track_label(timeline *t, const track *tr, uint32_t nid);

/* Checks that [b, e] nests with or is disjoint from every span on tr and records it. Returns 1
 * when it fits, 0 when it would partially overlap one (or cannot be verified), -1 out of
 * memory. */
int timeline_nest_fit(track *tr, uint64_t b, uint64_t e);

/* The current file's temporary file opened for writing: its descriptor, or -1 (t->error set).
 * Writes n bytes to it: 0, or -1 (t->error set). */
int timeline_file_fd(timeline *t);
int timeline_write_all(timeline *t, const char *p, size_t n);

/* For a share kept by steps (timeline_thin.c). timeline_hold takes the buffer's text into the
 * held text: 0, or 1 when the caller is to write it to the file (it was spilled, or nothing is
 * held). timeline_unhold writes what is held to the file (0, or -1). timeline_mark notes an event
 * line accepted at offset of the current file. timeline_keep_finish cuts the finished timeline
 * to cfg.keep_bytes. */
int timeline_hold(timeline *t);
int timeline_unhold(timeline *t);
void timeline_mark(timeline *t, uint64_t offset, enum pick_kind k, int64_t ts);
int timeline_keep_finish(timeline *t, char **cause);

/* Prints sh into the buffer after a separator. Returns 0, or -1 when it did not fit. */
int timeline_print_shape(timeline *t, shape *sh);

/* Prints the event: its template (made on first use) with the varying values (t->num) spliced
 * in, or directly when it has none. Returns 0, or -1 when it did not fit the buffer. */
int timeline_print_event(timeline *t, int shi, shape *sh);

#endif
