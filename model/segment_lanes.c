/* segment_lanes: the segment's side of its lanes: their control blocks (the creator's own copies)
 * and mirrors, each lane's first ring made ready, the grow region that larger rings come from,
 * and the lanes used and their losses. lane.c goes by these; none of them calls into lane.c. */
#include "segment_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

int segment_lane_ready(const segment *s, uint32_t i)
{
    segment *m = (segment *)s;
    ts_event *ring = segment_ring(s, i);
    if (!ring)
        return -1;
    if (!s->ready || atomic_load_explicit(&m->ready[i], memory_order_acquire))
        return 0;
    /* One at a time: rings populated side by side would each take part of what is left and all
     * fail. A ring that fails gives its pages back, and after one failure no more is tried
     * (shared memory is full: each try would cost a system call and pages for nothing). */
    pthread_mutex_lock(&m->ready_lock);
    int rc = 0;
    if (!atomic_load_explicit(&m->ready[i], memory_order_relaxed)) {
        uint64_t len = (uint64_t)s->g.lane_events * sizeof(ts_event);
        int refused = 0;
        if (m->full || segment_have(m, ring, len, &refused) != 0) {
            /* The ledger's no is for now (rings go back as threads end); a full file system's
             * is for good. */
            if (!m->full && !refused) {
                madvise(ring, len, MADV_REMOVE);
                m->full = 1;
            }
            rc = -1;
        } else {
            atomic_store_explicit(&m->ready[i], 1, memory_order_release);
        }
    }
    pthread_mutex_unlock(&m->ready_lock);
    return rc;
}

ts_event *segment_ring_at(const segment *s, uint64_t off, uint32_t events)
{
    /* A ring lies whole in the first rings or in the grow region, whatever a mirror says. */
    if (!segment_is_pow2(events) || events < LANE_EVENTS_MIN || events > s->g.lane_max_events ||
        off % sizeof(ts_event))
        return NULL;
    uint64_t len = (uint64_t)events * sizeof(ts_event);
    uint64_t first = (uint64_t)s->g.lane_count * s->g.lane_events * sizeof(ts_event);
    int in_first = off >= s->g.rings_off && off - s->g.rings_off <= first &&
                   len <= first - (off - s->g.rings_off);
    int in_grow = off >= s->g.grow_off && off - s->g.grow_off <= s->g.grow_bytes &&
                  len <= s->g.grow_bytes - (off - s->g.grow_off);
    return in_first || in_grow ? segment_at(s, off, len) : NULL;
}

int segment_ring_grown(const segment *s, uint64_t off)
{
    return s->g.grow_bytes && off >= s->g.grow_off && off - s->g.grow_off < s->g.grow_bytes;
}

static int order_of(uint32_t events)
{
    return __builtin_ctz(events);
}

int segment_grow_alloc(const segment *s, uint32_t events, uint64_t *off)
{
    segment *m = (segment *)s;
    uint64_t len = (uint64_t)events * sizeof(ts_event);
    uint64_t budget = s->g.grow_bytes / 2;
    if (!s->ctl || !segment_is_pow2(events) || events > s->g.lane_max_events || m->grow_full ||
        m->grow_used + len > budget)
        return -1;
    grow_list *fl = &m->grow_free[order_of(events)];
    if (fl->n) {
        *off = fl->off[--fl->n];
    } else {
        /* Aligned to its size, up to a page: a ring never straddles what another was. */
        uint64_t at = segment_round_up(m->grow_next, len < PAGE ? len : PAGE);
        if (at + len > s->g.grow_bytes)
            return -1;
        *off = s->g.grow_off + at;
        m->grow_next = at + len;
    }
    m->grow_used += len;
    atomic_store_explicit(&segment_header(s)->grow_used, m->grow_used, memory_order_relaxed);
    return 0;
}

void segment_grow_free(const segment *s, uint64_t off, uint32_t events, uint64_t had)
{
    segment *m = (segment *)s;
    uint64_t len = (uint64_t)events * sizeof(ts_event);
    if (!s->ctl || !segment_ring_grown(s, off))
        return;
    /* Its pages go back: the budget is memory, not address space. */
    madvise(m->base + off, len, MADV_REMOVE);
    segment_discharge(m, had < len ? had : len);
    m->grow_used -= len < m->grow_used ? len : m->grow_used;
    atomic_store_explicit(&segment_header(s)->grow_used, m->grow_used, memory_order_relaxed);
    grow_list *fl = &m->grow_free[order_of(events)];
    if (fl->n == fl->cap) {
        size_t cap = fl->cap ? 2 * fl->cap : 8;
        uint64_t *o = realloc(fl->off, cap * sizeof *o);
        if (!o)
            return; /* the space is lost to reuse; the budget was given back */
        fl->off = o;
        fl->cap = cap;
    }
    fl->off[fl->n++] = off;
}

int segment_grow_populate(const segment *s, uint64_t off, uint64_t len)
{
    segment *m = (segment *)s;
    if (m->grow_full || !segment_at(s, off, len))
        return -1;
    int refused;
    if (segment_have(m, m->base + off, len, &refused) != 0) {
        if (!refused)
            m->grow_full = 1; /* shared memory is full: no more growing */
        return -1;
    }
    return 0;
}

lane_grow_state *segment_grow_state(const segment *s, uint32_t i)
{
    return s->grow && i < s->g.lane_count ? &s->grow[i] : NULL;
}

ts_lane *segment_lane_ctl(const segment *s, uint32_t i)
{
    if (!s->ctl)
        return segment_lane(s, i);
    return i < s->g.lane_count ? &s->ctl[i] : NULL;
}

uint32_t segment_lanes_used(const segment *s)
{
    uint32_t used =
        s->ctl ? atomic_load_explicit(&((segment *)s)->lanes_used, memory_order_acquire)
               : atomic_load_explicit(&segment_header(s)->lanes_used, memory_order_acquire);
    return used < s->g.lane_count ? used : s->g.lane_count;
}

uint32_t segment_lane_losses(const segment *s, lane_loss *out, uint32_t max)
{
    uint32_t used = segment_lanes_used(s), n = 0;
    for (uint32_t i = 0; i < used; i++) {
        const ts_lane *l = segment_lane(s, i);
        lane_loss x = {.tid = atomic_load_explicit(&l->tid, memory_order_relaxed),
                       .lost = atomic_load_explicit(&l->lost_window, memory_order_relaxed),
                       .first_ns = atomic_load_explicit(&l->lost_first_ns, memory_order_relaxed),
                       .rate = atomic_load_explicit(&l->lost_rate, memory_order_relaxed)};
        if (!x.lost)
            continue;
        /* Kept most first: an insertion into the first max. */
        uint32_t k = n < max ? n : max;
        while (k > 0 && out[k - 1].lost < x.lost) {
            if (k < max)
                out[k] = out[k - 1];
            k--;
        }
        if (k < max)
            out[k] = x;
        n++;
    }
    return n;
}

static void raise_to(_Atomic uint32_t *v, uint32_t n)
{
    uint32_t cur = atomic_load_explicit(v, memory_order_relaxed);
    while (cur < n && !atomic_compare_exchange_weak_explicit(v, &cur, n, memory_order_release,
                                                             memory_order_relaxed))
        ;
}

void segment_lane_claimed(const segment *s, uint32_t i)
{
    if (s->ctl)
        raise_to(&((segment *)s)->lanes_used, i + 1);
    /* The mirror only ever grows, whatever another process wrote into it. */
    raise_to(&segment_header(s)->lanes_used, i + 1);
}
