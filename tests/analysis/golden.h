/* golden: hand-built event streams with known answers, for the analysis tests.
 *
 * A golden holds names (ids from 2 up, like a session's string table) and events; it feeds them
 * to an analysis, or writes them as a real recording for the writers and the CLI. Times are
 * given in microseconds to keep expectations readable. */
#ifndef TERMSIGHT_GOLDEN_H
#define TERMSIGHT_GOLDEN_H

#include "analysis.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#define US 1000ull /* ns per microsecond */
#define MS 1000000ull

typedef struct golden {
    char **names; /* id -> malloc'd bytes */
    uint32_t *lens;
    uint32_t nnames, cap_names;
    ts_event *ev;
    size_t nev, cap_ev;
    uint64_t start_ns; /* the session's start on the collector clock (the report's origin) */
} golden;

static inline void golden_init(golden *g)
{
    memset(g, 0, sizeof *g);
}

static inline void golden_free(golden *g)
{
    for (uint32_t i = 0; i < g->nnames; i++)
        free(g->names[i]);
    free(g->names);
    free(g->lens);
    free(g->ev);
    memset(g, 0, sizeof *g);
}

/* The id of bytes (any bytes), interning them; ids 0 ("") and 1 (overflow) are reserved. */
static inline uint32_t golden_name_n(golden *g, const char *bytes, uint32_t len)
{
    if (!g->nnames) {
        g->cap_names = 64;
        g->names = calloc(g->cap_names, sizeof *g->names);
        g->lens = calloc(g->cap_names, sizeof *g->lens);
        ck_assert_ptr_nonnull(g->names);
        g->names[0] = calloc(1, 1);
        g->names[1] = strdup("<names table full>");
        g->lens[1] = (uint32_t)strlen(g->names[1]);
        g->nnames = 2;
    }
    for (uint32_t i = 0; i < g->nnames; i++)
        if (g->lens[i] == len && !memcmp(g->names[i], bytes, len))
            return i;
    if (g->nnames == g->cap_names) {
        g->cap_names *= 2;
        g->names = realloc(g->names, g->cap_names * sizeof *g->names);
        g->lens = realloc(g->lens, g->cap_names * sizeof *g->lens);
        ck_assert_ptr_nonnull(g->names);
        ck_assert_ptr_nonnull(g->lens);
    }
    g->names[g->nnames] = malloc(len + 1);
    memcpy(g->names[g->nnames], bytes, len);
    g->names[g->nnames][len] = 0;
    g->lens[g->nnames] = len;
    return g->nnames++;
}

static inline uint32_t golden_name(golden *g, const char *s)
{
    return s ? golden_name_n(g, s, (uint32_t)strlen(s)) : 0;
}

static inline const char *golden_names(void *ctx, uint32_t id, uint32_t *len)
{
    golden *g = ctx;
    if (id >= g->nnames)
        return NULL;
    if (len)
        *len = g->lens[id];
    return g->names[id];
}

static inline ts_event *golden_push(golden *g, ts_event ev)
{
    if (g->nev == g->cap_ev) {
        g->cap_ev = g->cap_ev ? g->cap_ev * 2 : 256;
        g->ev = realloc(g->ev, g->cap_ev * sizeof *g->ev);
        ck_assert_ptr_nonnull(g->ev);
    }
    g->ev[g->nev] = ev;
    return &g->ev[g->nev++];
}

/* A host operator range on thread tid, [b_us, e_us], nested at depth. type may be NULL. */
static inline ts_event *golden_op(golden *g, uint32_t tid, const char *name, const char *type,
                                  uint64_t b_us, uint64_t e_us, uint32_t depth)
{
    return golden_push(g, (ts_event){.kind = TS_KIND_OP_RANGE,
                                     .tid = tid,
                                     .device = TS_DEVICE_HOST,
                                     .aux = depth,
                                     .name = golden_name(g, name),
                                     .type = golden_name(g, type),
                                     .begin_ns = b_us * US,
                                     .end_ns = e_us * US});
}

/* A device kernel on stream, launched under op (may be NULL); comm marks NCCL-like kernels. */
static inline ts_event *golden_kernel(golden *g, uint32_t device, uint32_t stream, const char *name,
                                      const char *op, uint64_t b_us, uint64_t e_us, int comm)
{
    return golden_push(g, (ts_event){.kind = TS_KIND_KERNEL,
                                     .flags = comm ? TS_EF_COMM : 0,
                                     .tid = stream,
                                     .device = device,
                                     .name = golden_name(g, name),
                                     .type = golden_name(g, op),
                                     .begin_ns = b_us * US,
                                     .end_ns = e_us * US});
}

/* An instant of kind at t_us on tid. */
static inline ts_event *golden_instant(golden *g, uint16_t kind, uint32_t tid, uint64_t t_us)
{
    return golden_push(g, (ts_event){.kind = kind,
                                     .tid = tid,
                                     .device = TS_DEVICE_HOST,
                                     .begin_ns = t_us * US,
                                     .end_ns = t_us * US});
}

static inline void golden_step(golden *g, uint32_t tid, uint64_t step, uint64_t b_us, uint64_t e_us)
{
    golden_instant(g, TS_KIND_STEP_BEGIN, tid, b_us)->v0 = step;
    golden_instant(g, TS_KIND_STEP_END, tid, e_us)->v0 = step;
}

static inline void golden_phase(golden *g, uint32_t tid, enum ts_phase phase, uint64_t t_us)
{
    golden_instant(g, TS_KIND_PHASE, tid, t_us)->aux = phase;
}

static inline void golden_queue_info(golden *g, const char *queue, enum ts_queue_role role,
                                     uint64_t capacity, const char *producer, const char *consumer)
{
    ts_event *e = golden_instant(g, TS_KIND_QUEUE_INFO, 1, 0);
    e->name = golden_name(g, queue);
    e->aux = role;
    e->v0 = capacity;
    e->v1 = (uint64_t)golden_name(g, producer) << 32 | golden_name(g, consumer);
}

static inline void golden_queue(golden *g, const char *queue, enum ts_queue_role role,
                                uint64_t t_us, uint64_t size, uint64_t capacity)
{
    ts_event *e = golden_instant(g, TS_KIND_QUEUE_SAMPLE, 1, t_us);
    e->name = golden_name(g, queue);
    e->aux = role;
    e->v0 = size;
    e->v1 = capacity;
}

static inline void golden_config(golden *g, const char *key, const char *value)
{
    ts_event *e = golden_instant(g, TS_KIND_CONFIG, 1, 0);
    e->name = golden_name(g, key);
    e->type = golden_name(g, value);
}

static inline void golden_thread_name(golden *g, uint32_t tid, const char *name)
{
    golden_instant(g, TS_KIND_THREAD_NAME, tid, 0)->name = golden_name(g, name);
}

/* Feeds everything (in the order pushed, in batches of `batch`, 0: all at once) and finishes. */
static inline analysis *golden_analyse(golden *g, const analysis_config *cfg, size_t batch)
{
    analysis *a = analysis_create(cfg, golden_names, g);
    ck_assert_ptr_nonnull(a);
    if (!batch)
        batch = g->nev ? g->nev : 1;
    for (size_t i = 0; i < g->nev; i += batch)
        analysis_feed(a, g->ev + i, g->nev - i < batch ? g->nev - i : batch);
    analysis_finish(a);
    return a;
}

/* Writes the golden as a real recording in dir (names first, then the events). */
static inline void golden_write_recording(golden *g, const char *dir)
{
    recording_meta meta = {.major = TS_RECORDING_MAJOR, .minor = TS_RECORDING_MINOR, .pid = 4242};
    /* 2026-11-24, in ns: past 2^53, so no double holds it exactly (summary.json must). */
    meta.start_realtime_ns = 1795471056859229185ull;
    meta.start_ns = g->start_ns;
    strcpy(meta.process, "golden");
    strcpy(meta.clock, "tsc");
    recording_writer *w;
    char *why = NULL;
    ck_assert_msg(recording_writer_open(dir, &meta, &w, &why) == 0, "open: %s", why);
    if (g->nnames) {
        const char **bytes = calloc(g->nnames, sizeof *bytes);
        for (uint32_t i = 0; i < g->nnames; i++)
            bytes[i] = g->names[i];
        ck_assert_int_eq(recording_append_strings(w, 0, g->nnames, bytes, g->lens, &why), 0);
        free(bytes);
    }
    if (g->nev)
        ck_assert_int_eq(recording_append_events(w, lane_run_of(g->ev, g->nev), &why), 0);
    ck_assert_int_eq(recording_writer_close(w, &why), 0);
}

/* The bytes of an analysis id as a C string, for ck_assert_str_eq. */
static inline const char *golden_str(const analysis *a, uint32_t id)
{
    return analysis_name(a, id, NULL);
}

#endif
