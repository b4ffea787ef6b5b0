/* stepops: each step's operator totals (report/step_ops.csv), what `termsight diff` compares
 * operators by, step against step.
 *
 * An operator belongs to the step whose span (step_row: from the previous step's end to its own
 * end) holds its begin, on any thread. Steps are finalized late (the step trace waits for later
 * steps, so that late records find theirs), so operator ranges wait in a buffer until the step
 * row that holds them comes; a row takes the ranges in its span and drops those before it (in no
 * step, or too late for theirs). The buffer holds what came since the last finalized step (a few
 * steps), and at most STEPOPS_MAX_PENDING ranges: past that the oldest half is dropped and
 * counted. Ranges are grouped by their stream ids first (cheap), then by the op key and type the
 * operator statistics use (names.c), so a step's rows read as op_statistics.csv's do. */
#include "analysis_internal.h"

#include <stdlib.h>
#include <string.h>

#define STEPOPS_MAX_PENDING (1u << 20)

typedef struct pending {
    uint64_t begin_ns, dur_ns;
    uint32_t name, type;
} pending;

struct stepops {
    pending *buf;
    size_t n, cap;
    uint64_t dropped;
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
    free(s->buf);
    free(s->raw);
    free(s->rows);
    free(s);
}

uint64_t stepops_dropped(const stepops *s)
{
    return s ? s->dropped : 0;
}

static int by_begin(const void *x, const void *y)
{
    const pending *a = x, *b = y;
    return a->begin_ns < b->begin_ns ? -1 : a->begin_ns > b->begin_ns;
}

/* Room for one more range: grown, or, at the bound, the oldest half dropped. */
static int make_room(stepops *s)
{
    if (s->n < s->cap)
        return 0;
    if (s->cap >= STEPOPS_MAX_PENDING) {
        qsort(s->buf, s->n, sizeof *s->buf, by_begin);
        size_t half = s->n / 2;
        memmove(s->buf, s->buf + half, (s->n - half) * sizeof *s->buf);
        s->dropped += half;
        s->n -= half;
        return 0;
    }
    size_t want = s->cap ? 2 * s->cap : 4096;
    pending *b = realloc(s->buf, want * sizeof *b);
    if (!b)
        return -1;
    s->buf = b;
    s->cap = want;
    return 0;
}

void stepops_feed(stepops *s, const ts_event *ev, size_t n)
{
    for (size_t i = 0; s && i < n; i++) {
        if (ev[i].kind != TS_KIND_OP_RANGE && ev[i].kind != TS_KIND_NVTX_RANGE)
            continue;
        if (make_room(s) < 0) {
            s->dropped++;
            continue;
        }
        s->buf[s->n++] = (pending){ev[i].begin_ns, event_duration(&ev[i]), ev[i].name, ev[i].type};
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
    size_t kept = 0;
    for (size_t i = 0; i < s->n; i++) {
        const pending *p = &s->buf[i];
        if (p->begin_ns >= row->end_ns)
            s->buf[kept++] = *p;
        else if (p->begin_ns >= row->begin_ns &&
                 add_row(&s->raw, &s->nraw, &s->craw, &raw, p->name, p->type, 1, p->dur_ns) < 0)
            s->dropped++;
    }
    s->n = kept;
    for (size_t i = 0; i < s->nraw; i++) {
        const stepops_row *r = &s->raw[i];
        uint32_t key = names_canon(a, names_op_key(a, r->op));
        uint32_t type = names_canon(a, names_op_type(a, r->op, r->type));
        if (add_row(&s->rows, &s->nrows, &s->crows, &grouped, key, type, r->count, r->total_ns) < 0)
            s->dropped += r->count;
    }
    index_map_free(&raw);
    index_map_free(&grouped);
    if (s->nrows > 1)
        qsort(s->rows, s->nrows, sizeof *s->rows, by_total);
    *rows = s->rows;
    return s->nrows;
}
