/* timeline: the Chrome trace-event timeline of a report folder (timeline.c), written as the
 * recording is read. Used by the report writer (report.c); knows nothing of the rest of the
 * report. */
#ifndef TERMSIGHT_TIMELINE_H
#define TERMSIGHT_TIMELINE_H

#include "analysis.h"

#include <stddef.h>
#include <stdint.h>

/* Each timeline file stays below this by default (chrome://tracing fails near 256 MB). */
#define TIMELINE_SPLIT_DEFAULT (240ull * 1024 * 1024)

/* Chrome trace-event JSON, streamed as the recording is read: {"traceEvents":[...]} in files
 * timeline.json, timeline-1.json, ... each below split_bytes and complete with its own
 * metadata, all together below limit_bytes (events past it are counted, not written). */
typedef struct timeline timeline;

typedef struct timeline_config {
    int dirfd;            /* folder the files go to */
    uint64_t limit_bytes; /* all files together */
    uint64_t split_bytes; /* each file; 0: TIMELINE_SPLIT_DEFAULT */
    int pretty;
    uint64_t origin_ns;  /* collector time of ts 0 */
    const char *process; /* host process name, NULL: "host" */
    int32_t os_pid;      /* for the process name; 0: none */
    /* A share kept by steps (a job's lean rank report): the timeline written within limit_bytes
     * is cut at timeline_finish to keep_bytes in one timeline.json by timeline_pick (the
     * metadata, then the slowest steps whole, then the other events in time order until full),
     * holding only steps keep_first..keep_last when keep_last is not 0; what is cut is counted
     * as left out. It is held in memory until it grows large, each event marked with its kind
     * and ts as it is written, so the cut reads no text back. Not with pretty. */
    int keep;
    uint64_t keep_bytes, keep_first, keep_last;
    /* Bounds of the keeping: bytes held in memory, events marked (0: TIMELINE_HOLD_MAX,
     * TIMELINE_MARKS_MAX). Past the first the text goes to its files; past the second the cut
     * reads the text back (slower, the same choice). */
    uint64_t hold_max;
    size_t marks_max;
} timeline_config;

#define TIMELINE_HOLD_MAX  (16u << 20)
#define TIMELINE_MARKS_MAX (1u << 20)

typedef struct timeline_stats {
    uint32_t files;
    uint64_t events;      /* trace events written, metadata included */
    uint64_t left_out;    /* events the size limit left out */
    uint64_t moved;       /* complete events moved to an overlap track */
    uint64_t dropped;     /* complete events dropped: overlapping on every track */
    uint64_t flows;       /* launch -> kernel arrows */
    uint64_t bytes;       /* all files */
    uint64_t limit_bytes; /* the size limit in force at the end */
} timeline_stats;

/* Names are resolved through a (thread names, derived op types). NULL when out of memory. */
timeline *timeline_create(const timeline_config *cfg, analysis *a);

/* Events in recording order. */
void timeline_feed(timeline *t, const ts_event *ev, size_t n);

/* Rows from the analysis sink: the step and overlap tracks, memory and CPU counters. */
void timeline_step(timeline *t, const step_row *row);
void timeline_memory(timeline *t, const memory_row *row);
void timeline_cpu(timeline *t, const cpu_row *row);

/* A new size limit, taking effect for the events still to come (the recording's option can be
 * read only once its CONFIG event has been). */
void timeline_set_limit(timeline *t, uint64_t limit_bytes);

/* Completes and renames the last file. Returns -1 on a write error (also one met earlier). */
int timeline_finish(timeline *t, char **cause);

/* A step's span, in nanoseconds from the timeline's origin (its events' ts). */
typedef struct step_span {
    uint64_t step;
    int64_t begin, end;
} step_span;

/* Appends s to a growable array of spans; without memory for it, the step is not added (its
 * events are then taken as those between steps). */
void step_spans_add(step_span **spans, size_t *n, size_t *cap, step_span s);

/* v in decimal at p, NUL-terminated: the end (before the NUL). */
char *timeline_put_u64(char *p, uint64_t v);

/* A decimal of at most 3 places at p (no sign) as an integer of thousandths (a time in
 * microseconds as nanoseconds): the digits' end, or NULL. */
const char *timeline_thousandths(const char *p, const char *end, int64_t *out);

/* Which events of a timeline a share keeps, by steps (timeline_pick.c; docs/jobs.md, "The
 * job timeline"): the metadata (names), then the slowest steps whole (every event whose ts lies in
 * the step's span), slowest first, each one that still fits, then the other events in time
 * order until the next one does not fit. Only the steps first..last are kept when a window is
 * given: the events outside them are cut. Used in two passes over the events in the order of
 * their files: weigh each, plan, then take each. An event is its line's text without separator;
 * it costs its length + 2 + extra bytes. */
typedef struct timeline_pick timeline_pick;

/* spans (copied, sorted here); first..last the window (0 and UINT64_MAX: all). NULL: out of
 * memory. */
timeline_pick *timeline_pick_create(const step_span *spans, size_t n, uint64_t first,
                                    uint64_t last);
void timeline_pick_weigh(timeline_pick *p, const char *ev, size_t len, uint64_t extra);
/* After weighing: what budget bytes hold (the file's frame not counted). */
void timeline_pick_plan(timeline_pick *p, uint64_t budget);
/* 1 when the event is kept; 0 when it is cut. */
int timeline_pick_take(timeline_pick *p, const char *ev, size_t len, uint64_t extra);
/* The same for an event whose kind and ts are known without its text (the writer's own index):
 * cost is what it takes of the budget. */
enum pick_kind { PICK_META, PICK_TS, PICK_NONE };
void timeline_pick_weigh_at(timeline_pick *p, enum pick_kind k, int64_t ts, uint64_t cost);
int timeline_pick_take_at(timeline_pick *p, enum pick_kind k, int64_t ts, uint64_t cost);
void timeline_pick_free(timeline_pick *p);

/* The event text of one line of a timeline file (separator, newline stripped): its length, 0
 * for a line that is no event (the file's head and tail). */
size_t timeline_event_text(const char *line, size_t len);

void timeline_stats_of(const timeline *t, timeline_stats *out);

/* The name of file i ("timeline.json", "timeline-1.json", ...) into buf. */
void timeline_file_name(uint32_t i, char *buf, size_t len);

/* Frees; a file not finished is removed. */
void timeline_destroy(timeline *t);

#endif
