/* model: hang triage, what each thread is inside and the communications in flight (inflight.c). */
#ifndef TERMSIGHT_MODEL_INFLIGHT_H
#define TERMSIGHT_MODEL_INFLIGHT_H

#include "segment.h"

/* A thread's innermost open range, or a communication in flight, as a monitor read it whole. */
typedef struct open_range {
    uint32_t tid;   /* the lane's thread; 0 for a communication */
    uint32_t depth; /* ranges open on the thread (1 for a communication) */
    uint32_t name;  /* string id; TS_STR_NONE when deeper than the frames kept */
    uint64_t begin_ns;
} open_range;

/* Reader (any process): the innermost open range of lane l, as published (lane_open_set): 1 and
 * *out when a range is open in collection window `window`, 0 when none is (or it is from another
 * window), -1 when the fields stay torn (a writer died mid-way, or damage). */
int inflight_lane_read(const ts_lane *l, uint32_t window, open_range *out);

/* Reader: the innermost open ranges of s's owned lanes while it collects, up to max of them in
 * out, each checked (a name id within the string table, a begin at or after the segment's start
 * and not after now_ns); returns how many. */
uint32_t inflight_ranges(const segment *s, uint64_t now_ns, open_range *out, uint32_t max);

/* Reader: the communications in flight in s, oldest first, checked as above; up to max in out. */
uint32_t inflight_comms(const segment *s, uint64_t now_ns, open_range *out, uint32_t max);

#define INFLIGHT_RANGES 16 /* threads' open ranges a summary keeps */

/* What one process is inside now, read whole and checked (inflight_read). */
typedef struct inflight_summary {
    uint32_t nranges; /* the threads' innermost open ranges (at most INFLIGHT_RANGES) */
    open_range ranges[INFLIGHT_RANGES];
    int main; /* the one to show: the main thread's (tid == pid), else the longest open; -1 */
    uint32_t ncomms; /* communications in flight, oldest first */
    open_range comms[TS_COMM_SLOTS];
    uint64_t steps;            /* steps ended on the board */
    uint64_t last_step_end_ns; /* the last one's end; 0: none yet */
    uint64_t typical_step_ns;  /* the median of the last steps; 0: unknown */
} inflight_summary;

/* Reader: what s's process is inside at now_ns (the collector clock, tsclock_monotonic_ns). */
void inflight_read(const segment *s, uint64_t now_ns, inflight_summary *out);

/* The creator's private claim on the communication slots (never in the segment, which another
 * process could write). */
typedef struct inflight_claims {
    _Atomic uint32_t busy; /* a bit per slot */
    /* Each slot's sequence, written by its owner for the time it owns it; atomic because a stale
     * ticket's completion may read it while a new owner writes it. */
    _Atomic uint32_t seq[TS_COMM_SLOTS];
} inflight_claims;

/* Any thread of the creator: publishes a communication issued at begin_ns, not yet complete. A
 * ticket for inflight_comm_done, 0 when every slot is taken. No lock, no system call. */
uint64_t inflight_comm_issue(const segment *s, inflight_claims *c, uint32_t name,
                             uint64_t begin_ns);

/* Any thread: the communication of ticket completed; a ticket already done, or 0, does nothing. */
void inflight_comm_done(const segment *s, inflight_claims *c, uint64_t ticket);

#endif
