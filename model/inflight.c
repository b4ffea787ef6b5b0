/* inflight: what a process is inside now, for hang triage.
 *
 * Ranges are recorded when they end, so a thread stuck inside one leaves nothing in its ring.
 * Two things are published as they happen instead, for monitors (termsight top, termsight hang):
 * - each lane's innermost open range (lane_open_set, inline in lane.h), written by the lane's
 *   producer under a sequence lock of its own on the producer's cache line;
 * - the communications issued and not yet complete (a collective's issue to its completion,
 *   which another thread sees), in a small table of slots in the header. Any thread may issue or
 *   complete one, so a slot is claimed through a bitmap in the creator's own memory
 *   (inflight_claims), never through the segment, which another process could write; the slot's
 *   fields are mirrors under a sequence lock per slot.
 * Readers copy fields under the sequence, give up on a sequence that stays odd (a writer died
 * mid-way, or a hostile segment) and check every value before handing it on. */
#include "model.h"

#include <stdlib.h>
#include <string.h>

#define OPEN_READ_TRIES 64
#define CLOCK_SLACK_NS  1000000000ull /* readers' and writer's monotonic clocks may differ a bit */

int inflight_lane_read(const ts_lane *l, uint32_t window, open_range *out)
{
    for (int t = 0; t < OPEN_READ_TRIES; t++) {
        uint32_t q = atomic_load_explicit(&l->open_seq, memory_order_acquire);
        if (q & 1)
            continue;
        open_range r = {.tid = atomic_load_explicit(&l->tid, memory_order_relaxed)};
        r.depth = atomic_load_explicit(&l->open_depth, memory_order_relaxed);
        r.name = atomic_load_explicit(&l->open_name, memory_order_relaxed);
        uint32_t w = atomic_load_explicit(&l->open_window, memory_order_relaxed);
        r.begin_ns = atomic_load_explicit(&l->open_begin_ns, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&l->open_seq, memory_order_relaxed) != q)
            continue;
        if (!r.depth || w != window)
            return 0;
        *out = r;
        return 1;
    }
    return -1;
}

/* Whether a range read from s may be shown: a name the string table can hold, a begin within
 * the segment's life. */
static int plausible(const segment *s, const open_range *r, uint64_t now_ns)
{
    const ts_segment_header *h = segment_header(s);
    if (r->name >= segment_geometry_of(s)->string_max)
        return 0;
    return r->begin_ns && r->begin_ns + CLOCK_SLACK_NS >= h->start_ns &&
           r->begin_ns <= now_ns + CLOCK_SLACK_NS;
}

uint32_t inflight_ranges(const segment *s, uint64_t now_ns, open_range *out, uint32_t max)
{
    ts_segment_header *h = segment_header(s);
    if (atomic_load_explicit(&h->state, memory_order_acquire) != TS_STATE_COLLECTING)
        return 0; /* ranges are followed while collecting only: what is left is stale */
    uint32_t window = atomic_load_explicit(&h->window, memory_order_relaxed);
    uint32_t n = 0, used = segment_lanes_used(s);
    for (uint32_t i = 0; i < used && n < max; i++) {
        const ts_lane *l = segment_lane(s, i);
        open_range r;
        if (!l || atomic_load_explicit(&l->state, memory_order_acquire) != TS_LANE_OWNED ||
            inflight_lane_read(l, window, &r) != 1 || !plausible(s, &r, now_ns))
            continue;
        out[n++] = r;
    }
    return n;
}

uint32_t inflight_comms(const segment *s, uint64_t now_ns, open_range *out, uint32_t max)
{
    ts_segment_header *h = segment_header(s);
    uint32_t n = 0;
    for (uint32_t i = 0; i < TS_COMM_SLOTS && n < max; i++) {
        const ts_comm_slot *c = &h->comm[i];
        for (int t = 0; t < OPEN_READ_TRIES; t++) {
            uint32_t q = atomic_load_explicit(&c->seq, memory_order_acquire);
            if (q & 1)
                continue;
            open_range r = {.depth = 1};
            r.name = atomic_load_explicit(&c->name, memory_order_relaxed);
            r.begin_ns = atomic_load_explicit(&c->begin_ns, memory_order_relaxed);
            atomic_thread_fence(memory_order_acquire);
            if (atomic_load_explicit(&c->seq, memory_order_relaxed) != q)
                continue;
            if (plausible(s, &r, now_ns)) {
                /* Oldest first: an insertion, the table is small. */
                uint32_t j = n++;
                for (; j > 0 && out[j - 1].begin_ns > r.begin_ns; j--)
                    out[j] = out[j - 1];
                out[j] = r;
            }
            break;
        }
    }
    return n;
}

static void slot_set(ts_comm_slot *c, uint32_t q, uint32_t name, uint64_t begin_ns)
{
    atomic_store_explicit(&c->seq, q + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&c->name, name, memory_order_relaxed);
    atomic_store_explicit(&c->begin_ns, begin_ns, memory_order_relaxed);
    atomic_store_explicit(&c->seq, q + 2, memory_order_release);
}

uint64_t inflight_comm_issue(const segment *s, inflight_claims *c, uint32_t name, uint64_t begin_ns)
{
    uint32_t busy = atomic_load_explicit(&c->busy, memory_order_relaxed);
    for (;;) {
        if (busy == UINT32_MAX >> (32 - TS_COMM_SLOTS))
            return 0;
        uint32_t i = (uint32_t)__builtin_ctz(~busy);
        if (!atomic_compare_exchange_weak_explicit(&c->busy, &busy, busy | 1u << i,
                                                   memory_order_acquire, memory_order_relaxed))
            continue;
        uint32_t q = atomic_load_explicit(&c->seq[i], memory_order_relaxed);
        atomic_store_explicit(&c->seq[i], q + 4, memory_order_relaxed); /* issue, completion */
        slot_set(&segment_header(s)->comm[i], q, name, begin_ns ? begin_ns : 1);
        /* The ticket names the slot and this issue of it, so a stale one finds it moved on. */
        return (uint64_t)(q + 4) << 32 | (i + 1);
    }
}

void inflight_comm_done(const segment *s, inflight_claims *c, uint64_t ticket)
{
    uint32_t i = (uint32_t)(ticket & 0xffffffffu) - 1, q = (uint32_t)(ticket >> 32);
    if (!ticket || i >= TS_COMM_SLOTS ||
        !(atomic_load_explicit(&c->busy, memory_order_acquire) & 1u << i) ||
        atomic_load_explicit(&c->seq[i], memory_order_relaxed) != q)
        return;
    slot_set(&segment_header(s)->comm[i], q - 2, TS_STR_NONE, 0);
    atomic_fetch_and_explicit(&c->busy, ~(1u << i), memory_order_release);
}

#define TYPICAL_STEPS 32

static int by_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void read_steps(const segment *s, inflight_summary *out)
{
    step_row rows[TYPICAL_STEPS];
    uint64_t written = board_steps_written(s), next;
    uint64_t from = written > TYPICAL_STEPS ? written - TYPICAL_STEPS : 0;
    size_t n = board_get_steps(s, from, rows, TYPICAL_STEPS, &next, NULL);
    out->steps = written;
    if (!n)
        return;
    uint64_t totals[TYPICAL_STEPS];
    for (size_t i = 0; i < n; i++)
        totals[i] = rows[i].total_ns;
    qsort(totals, n, sizeof totals[0], by_u64);
    out->typical_step_ns = totals[(n - 1) / 2];
    out->last_step_end_ns = rows[n - 1].end_ns;
}

void inflight_read(const segment *s, uint64_t now_ns, inflight_summary *out)
{
    memset(out, 0, sizeof *out);
    out->main = -1;
    out->nranges = inflight_ranges(s, now_ns, out->ranges, INFLIGHT_RANGES);
    uint32_t pid = (uint32_t)segment_header(s)->pid;
    for (uint32_t i = 0; i < out->nranges; i++) {
        if (out->ranges[i].tid == pid) {
            out->main = (int)i;
            break;
        }
        if (out->main < 0 || out->ranges[i].begin_ns < out->ranges[out->main].begin_ns)
            out->main = (int)i;
    }
    out->ncomms = inflight_comms(s, now_ns, out->comms, TS_COMM_SLOTS);
    read_steps(s, out);
}
