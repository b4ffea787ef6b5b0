/* Helpers shared by the lane tests (test_lane, test_lane_threads): events that show a torn or
 * misplaced copy, segments and claims. */
#ifndef TERMSIGHT_LANE_TEST_H
#define TERMSIGHT_LANE_TEST_H

#include "model_test.h"

/* Every field derives from (seq, tag), so a torn or misplaced copy shows. */
static inline ts_event ev_make(uint64_t seq, uint32_t tag)
{
    ts_event e;
    e.kind = (uint16_t)(1 + seq % (TS_KIND__COUNT - 1));
    e.flags = (uint16_t)(seq >> 7);
    e.tid = tag;
    e.device = (uint32_t)seq;
    e.aux = ~(uint32_t)seq;
    e.name = (uint32_t)(seq * 2654435761u);
    e.type = tag ^ 0x5a5a5a5au;
    e.begin_ns = seq * 3;
    e.end_ns = seq * 3 + 1;
    e.corr = seq ^ 0x0123456789abcdefull;
    e.v0 = seq;
    e.v1 = ~seq;
    return e;
}

static inline int ev_ok(const ts_event *e, uint32_t tag)
{
    ts_event want = ev_make(e->v0, tag);
    return memcmp(&want, e, sizeof want) == 0;
}

static inline segment *lane_segment(int pid_offset, uint32_t lanes, uint32_t cap)
{
    segment_config cfg = mt_config(mt_pid(pid_offset));
    cfg.lane_count = lanes;
    cfg.lane_events = cap;
    return mt_create(&cfg);
}

/* The same with lanes that grow from cap up to max events, within budget bytes. */
static inline segment *grow_segment(int pid_offset, uint32_t lanes, uint32_t cap, uint32_t max,
                                    uint64_t budget)
{
    segment_config cfg = mt_config(mt_pid(pid_offset));
    cfg.lane_count = lanes;
    cfg.lane_events = cap;
    cfg.lane_max_events = max;
    cfg.grow_budget = budget;
    return mt_create(&cfg);
}

static inline uint64_t grow_used(const segment *s)
{
    return atomic_load(&segment_header(s)->grow_used);
}

#endif
