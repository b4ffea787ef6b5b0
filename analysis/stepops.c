/* stepops: each step's operator totals (report/step_ops.csv), what `termsight diff` compares
 * operators by, step against step.
 *
 * An operator range belongs to the step whose span (step_row: from the previous step's end, or
 * its own window's start, to its end) holds its begin, on any thread. Ranges are attributed as
 * the step trace attributes its records (model/steptrace.c): one that began before the latest
 * step end seen so far (the horizon) goes at once to the first step that ended after it began;
 * a later one waits in `pending` (the current step's ranges) until a step end covers it. A step
 * keeps its ranges until its row comes (the step trace finalizes steps a few steps late, so that
 * late records find theirs), which takes those inside the row's span and lets go of that step and
 * every earlier one. So each range is handled twice, and memory holds the ranges of the steps not
 * yet finalized, at most STEPOPS_MAX_HELD: past that a range is dropped and counted, as is one
 * for a step that never ends. Ranges are grouped by their stream ids first (cheap), then by the
 * op key and type the operator statistics use (names.c, once per stream pair), so a step's rows
 * read as op_statistics.csv's do. */
#include "analysis_internal.h"

#include <stdlib.h>
#include <string.h>

#define STEPOPS_MAX_HELD  (1u << 20) /* ranges held, 24 MiB */
#define STEPOPS_MAX_STEPS 256        /* steps holding ranges; the oldest is let go beyond */

typedef struct held {
    uint64_t begin_ns, dur_ns;
    uint32_t name, type;
} held;

typedef struct ranges {
    held *r;
    size_t n, cap;
} ranges;

typedef struct step_slot {
    uint64_t number, end_ns;
    ranges in;
} step_slot;

typedef struct canon_pair {
    uint32_t op, type;
} canon_pair;

struct stepops {
    step_slot *steps; /* by end time */
    size_t nsteps, csteps;
    ranges pending;   /* began after the horizon */
    uint64_t horizon; /* the latest step end seen */
    size_t held;      /* ranges in steps and pending */
    uint64_t dropped;
    index_map canon;   /* stream name << 32 | stream type -> index in pairs */
    canon_pair *pairs; /* the op key and type each stream pair groups under */
    size_t npairs, cpairs;
    stepops_row *raw, *rows; /* one step's, by stream ids, then grouped */
    size_t nraw, craw, nrows, crows;
};

stepops *stepops_create(void)
{
    return calloc(1, sizeof(stepops));
}

void stepops_destroy(stepops *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nsteps; i++)
        free(s->steps[i].in.r);
    free(s->steps);
    free(s->pending.r);
    index_map_free(&s->canon);
    free(s->pairs);
    free(s->raw);
    free(s->rows);
    free(s);
}

uint64_t stepops_dropped(const stepops *s)
{
    return s ? s->dropped : 0;
}

static int ranges_push(ranges *v, const held *h)
{
    if (v->n == v->cap) {
        size_t want = v->cap ? 2 * v->cap : 256;
        held *r = realloc(v->r, want * sizeof *r);
        if (!r)
            return -1;
        v->r = r;
        v->cap = want;
    }
    v->r[v->n++] = *h;
    return 0;
}

/* Lets go of steps[0..n) and their ranges. */
static void let_go(stepops *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        s->held -= s->steps[i].in.n;
        free(s->steps[i].in.r);
    }
    memmove(s->steps, s->steps + n, (s->nsteps - n) * sizeof *s->steps);
    s->nsteps -= n;
}

/* A range at or before the horizon: into the first step that ended at or after its begin. */
static void attribute(stepops *s, const held *h)
{
    size_t lo = 0, hi = s->nsteps;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->steps[mid].end_ns < h->begin_ns)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == s->nsteps || ranges_push(&s->steps[lo].in, h) < 0) {
        s->dropped++; /* its step was written already, or no memory */
        s->held--;
    }
}

/* A step's end: a step to hold ranges, and the pending ranges it covers. */
static void step_end(stepops *s, uint64_t number, uint64_t end_ns)
{
    size_t at = s->nsteps;
    for (size_t i = 0; i < s->nsteps; i++) {
        if (s->steps[i].number == number)
            return; /* a repeated marker */
        if (s->steps[i].end_ns > end_ns && at == s->nsteps)
            at = i;
    }
    if (s->nsteps == STEPOPS_MAX_STEPS) { /* rows that never come: the oldest goes */
        s->dropped += s->steps[0].in.n;
        let_go(s, 1);
        at = at ? at - 1 : 0;
    }
    if (s->nsteps == s->csteps) {
        size_t want = s->csteps ? 2 * s->csteps : 16;
        step_slot *g = realloc(s->steps, want * sizeof *g);
        if (!g)
            return;
        s->steps = g;
        s->csteps = want;
    }
    memmove(s->steps + at + 1, s->steps + at, (s->nsteps - at) * sizeof *s->steps);
    s->steps[at] = (step_slot){.number = number, .end_ns = end_ns};
    s->nsteps++;
    if (end_ns <= s->horizon)
        return;
    s->horizon = end_ns;
    size_t kept = 0;
    for (size_t i = 0; i < s->pending.n; i++) {
        if (s->pending.r[i].begin_ns > end_ns)
            s->pending.r[kept++] = s->pending.r[i];
        else
            attribute(s, &s->pending.r[i]);
    }
    s->pending.n = kept;
}

void stepops_feed(stepops *s, const ts_event *ev, size_t n)
{
    for (size_t i = 0; s && i < n; i++) {
        if (ev[i].kind == TS_KIND_STEP_END) {
            step_end(s, ev[i].v0, ev[i].begin_ns);
            continue;
        }
        if (ev[i].kind != TS_KIND_OP_RANGE && ev[i].kind != TS_KIND_NVTX_RANGE)
            continue;
        if (s->held >= STEPOPS_MAX_HELD) {
            s->dropped++;
            continue;
        }
        held h = {ev[i].begin_ns, event_duration(&ev[i]), ev[i].name, ev[i].type};
        s->held++;
        if (!s->nsteps || h.begin_ns > s->horizon) {
            if (ranges_push(&s->pending, &h) < 0) {
                s->dropped++;
                s->held--;
            }
        } else {
            attribute(s, &h);
        }
    }
}

/* Adds one range (or row) to the rows keyed by (name, type) through map. */
static int add_row(stepops_row **rows, size_t *n, size_t *cap, index_map *map, uint32_t name,
                   uint32_t type, uint64_t count, uint64_t total_ns)
{
    int inserted = 0;
    uint32_t i = index_map_get(map, (uint64_t)name << 32 | type, (uint32_t)*n, &inserted);
    if (i == UINT32_MAX)
        return -1;
    if (inserted) {
        if (*n == *cap) {
            size_t want = *cap ? 2 * *cap : 64;
            stepops_row *r = realloc(*rows, want * sizeof *r);
            if (!r)
                return -1;
            *rows = r;
            *cap = want;
        }
        (*rows)[*n] = (stepops_row){name, type, 0, 0};
        (*n)++;
    }
    (*rows)[i].count += count;
    (*rows)[i].total_ns += total_ns;
    return 0;
}

static int by_total(const void *x, const void *y)
{
    const stepops_row *a = x, *b = y;
    if (a->total_ns != b->total_ns)
        return a->total_ns < b->total_ns ? 1 : -1;
    return a->op != b->op ? (a->op < b->op ? -1 : 1) : (a->type > b->type) - (a->type < b->type);
}

/* The op key and type a stream (name, type) pair groups under, worked out once per pair. */
static int canon_of(stepops *s, analysis *a, uint32_t name, uint32_t type, canon_pair *out)
{
    if (!s->canon.keys && index_map_init(&s->canon, 256) < 0)
        return -1;
    int inserted = 0;
    uint32_t i =
        index_map_get(&s->canon, (uint64_t)name << 32 | type, (uint32_t)s->npairs, &inserted);
    if (i == UINT32_MAX)
        return -1;
    if (inserted) {
        if (s->npairs == s->cpairs) {
            size_t want = s->cpairs ? 2 * s->cpairs : 64;
            canon_pair *p = realloc(s->pairs, want * sizeof *p);
            if (!p)
                return -1; /* the map names a pair past npairs: refused below ever after */
            s->pairs = p;
            s->cpairs = want;
        }
        s->pairs[s->npairs++] = (canon_pair){names_canon(a, names_op_key(a, name)),
                                             names_canon(a, names_op_type(a, name, type))};
    }
    if (i >= s->npairs)
        return -1;
    *out = s->pairs[i];
    return 0;
}

size_t stepops_step(stepops *s, analysis *a, const step_row *row, const stepops_row **rows)
{
    *rows = NULL;
    if (!s)
        return 0;
    index_map raw, grouped;
    if (index_map_init(&raw, 256) < 0)
        return 0;
    if (index_map_init(&grouped, 256) < 0) {
        index_map_free(&raw);
        return 0;
    }
    s->nraw = s->nrows = 0;
    size_t at = 0;
    while (at < s->nsteps && s->steps[at].number != row->step)
        at++;
    if (at == s->nsteps) { /* its end was never seen: let go of the steps that ended before it */
        while (at && s->steps[at - 1].end_ns > row->end_ns)
            at--;
    } else {
        const ranges *v = &s->steps[at].in;
        for (size_t i = 0; i < v->n; i++) {
            const held *h = &v->r[i];
            if (h->begin_ns >= row->begin_ns && h->begin_ns <= row->end_ns &&
                add_row(&s->raw, &s->nraw, &s->craw, &raw, h->name, h->type, 1, h->dur_ns) < 0)
                s->dropped++;
        }
        at++;
    }
    let_go(s, at);
    for (size_t i = 0; i < s->nraw; i++) {
        const stepops_row *r = &s->raw[i];
        canon_pair c;
        if (canon_of(s, a, r->op, r->type, &c) < 0 ||
            add_row(&s->rows, &s->nrows, &s->crows, &grouped, c.op, c.type, r->count, r->total_ns) <
                0)
            s->dropped += r->count;
    }
    index_map_free(&raw);
    index_map_free(&grouped);
    if (s->nrows > 1)
        qsort(s->rows, s->nrows, sizeof *s->rows, by_total);
    *rows = s->rows;
    return s->nrows;
}
