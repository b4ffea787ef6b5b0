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

void timeline_stats_of(const timeline *t, timeline_stats *out);

/* The name of file i ("timeline.json", "timeline-1.json", ...) into buf. */
void timeline_file_name(uint32_t i, char *buf, size_t len);

/* Frees; a file not finished is removed. */
void timeline_destroy(timeline *t);

#endif
