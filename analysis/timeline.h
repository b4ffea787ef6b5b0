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
} timeline_config;

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

/* A decimal of at most 3 places at p (no sign) as an integer of thousandths (a time in
 * microseconds as nanoseconds): the digits' end, or NULL. */
const char *timeline_thousandths(const char *p, const char *end, int64_t *out);

/* Which events of a timeline a share keeps, by steps (timeline_pick.c; README "The job
 * report"): the metadata (names), then the slowest steps whole (every event whose ts lies in
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
void timeline_pick_free(timeline_pick *p);

/* The event text of one line of a timeline file (separator, newline stripped): its length, 0
 * for a line that is no event (the file's head and tail). */
size_t timeline_event_text(const char *line, size_t len);

/* After timeline_finish: the files cut down to keep_bytes in one timeline.json, by steps
 * (timeline_thin.c: the metadata, then the slowest steps whole, then the other events in time
 * order until full); what is cut is counted as left out. Nothing to do when the files fit (or
 * are pretty-printed). Returns -1 on a read or write error (cause says which). */
int timeline_thin(timeline *t, uint64_t keep_bytes, uint64_t first, uint64_t last, char **cause);

void timeline_stats_of(const timeline *t, timeline_stats *out);

/* The name of file i ("timeline.json", "timeline-1.json", ...) into buf. */
void timeline_file_name(uint32_t i, char *buf, size_t len);

/* Frees; a file not finished is removed. */
void timeline_destroy(timeline *t);

#endif
