/* tlring: the timeline's memory, a fixed ring of the latest ranges (ops, NVTX ranges,
 * communication, kernels, copies, memsets) and the lanes they ran on. Older events are
 * overwritten, so it stays the same size over a run of days. */
#include "tui_internal.h"

#include <stdlib.h>
#include <string.h>

static int keeps(uint32_t kind)
{
    switch (kind) {
    case TS_KIND_OP_RANGE:
    case TS_KIND_NVTX_RANGE:
    case TS_KIND_COMM_OP:
    case TS_KIND_KERNEL:
    case TS_KIND_MEMCPY:
    case TS_KIND_MEMSET:
        return 1;
    default:
        return 0;
    }
}

int tlring_init(tlring *r, size_t cap)
{
    memset(r, 0, sizeof *r);
    r->cap = cap ? cap : 1;
    r->ev = calloc(r->cap, sizeof *r->ev);
    r->marks = calloc(TLRING_MARKS, sizeof *r->marks);
    return r->ev && r->marks ? 0 : -1;
}

void tlring_free(tlring *r)
{
    free(r->ev);
    free(r->marks);
    memset(r, 0, sizeof *r);
}

/* Step edges, queue sizes and counter values: into the marks ring; a queue or counter seen
 * for the first time gets a track while there is room. */
static void keep_mark(tlring *r, const ts_event *e)
{
    if (e->kind == TS_KIND_QUEUE_SAMPLE || e->kind == TS_KIND_COUNTER) {
        uint32_t t = 0;
        while (t < r->ntracks && !(r->tracks[t].kind == e->kind && r->tracks[t].name == e->name))
            t++;
        if (t == r->ntracks) {
            if (r->ntracks == TLRING_TRACKS)
                return;
            r->tracks[r->ntracks++] = (tl_track){.kind = e->kind, .name = e->name};
        }
    }
    r->marks[r->next_mark] = *e;
    r->next_mark = (r->next_mark + 1) % TLRING_MARKS;
    if (r->nmarks < TLRING_MARKS)
        r->nmarks++;
}

const ts_event *tlring_mark(const tlring *r, size_t k)
{
    return &r->marks[(r->next_mark + TLRING_MARKS - r->nmarks + k) % TLRING_MARKS];
}

static int is_device(uint32_t kind)
{
    return kind == TS_KIND_KERNEL || kind == TS_KIND_MEMCPY || kind == TS_KIND_MEMSET;
}

int tlring_lane_of(const tlring *r, const ts_event *ev)
{
    uint32_t dev = is_device(ev->kind) ? ev->device : TS_DEVICE_HOST;
    for (uint32_t i = 0; i < r->nlanes; i++)
        if (r->lanes[i].device == dev && r->lanes[i].tid == ev->tid)
            return (int)i;
    return -1;
}

/* Host threads first in the order they appeared, then device streams by device and stream. */
static int add_lane(tlring *r, const ts_event *ev)
{
    uint32_t dev = is_device(ev->kind) ? ev->device : TS_DEVICE_HOST;
    if (r->nlanes == TLRING_LANES)
        return -1;
    uint32_t at = r->nlanes;
    if (dev != TS_DEVICE_HOST) {
        while (at > 0 && r->lanes[at - 1].device != TS_DEVICE_HOST &&
               (r->lanes[at - 1].device > dev ||
                (r->lanes[at - 1].device == dev && r->lanes[at - 1].tid > ev->tid)))
            at--;
    } else {
        while (at > 0 && r->lanes[at - 1].device != TS_DEVICE_HOST)
            at--;
    }
    memmove(&r->lanes[at + 1], &r->lanes[at], (r->nlanes - at) * sizeof r->lanes[0]);
    r->lanes[at] = (tl_lane){.device = dev, .tid = ev->tid};
    r->nlanes++;
    return (int)at;
}

static void remove_lane(tlring *r, uint32_t i)
{
    memmove(&r->lanes[i], &r->lanes[i + 1], (r->nlanes - i - 1) * sizeof r->lanes[0]);
    r->nlanes--;
}

void tlring_feed(tlring *r, const ts_event *ev, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const ts_event *e = &ev[i];
        if (e->kind == TS_KIND_STEP_BEGIN || e->kind == TS_KIND_STEP_END ||
            e->kind == TS_KIND_QUEUE_SAMPLE || e->kind == TS_KIND_COUNTER) {
            if (r->marks)
                keep_mark(r, e);
            continue;
        }
        if (!keeps(e->kind) || e->end_ns < e->begin_ns)
            continue;
        if (r->n == r->cap) { /* the oldest event leaves: so does its lane when it was the last */
            int old = tlring_lane_of(r, &r->ev[r->next]);
            if (old >= 0 && --r->lanes[old].count == 0)
                remove_lane(r, (uint32_t)old);
            r->n--;
        }
        int lane = tlring_lane_of(r, e);
        if (lane < 0 && (lane = add_lane(r, e)) < 0) {
            r->refused++;
            continue;
        }
        r->lanes[lane].count++;
        r->ev[r->next] = *e;
        r->next = (r->next + 1) % r->cap;
        r->n++;
        if (e->end_ns > r->latest_ns)
            r->latest_ns = e->end_ns;
    }
}
