/*
 * analysis internals: the module table and the shared state the modules use. Only analysis/
 * and its tests include this.
 */
#ifndef TERMSIGHT_ANALYSIS_INTERNAL_H
#define TERMSIGHT_ANALYSIS_INTERNAL_H

#include "analysis.h"
#include "index_map.h"

/* Local ids (names the analysis derives) have this bit set; stream ids never do (the string
 * table holds at most 2^24). */
#define ANALYSIS_LOCAL_ID 0x80000000u

/* One statistic of the analysis. Modules are listed in one array (analysis.c); each says which
 * kinds it wants and gets only those. */
typedef struct analysis_module {
    const char *name;
    uint64_t kinds;       /* bit k: wants TS_KIND k */
    uint64_t board_kinds; /* of those, the ones a board analysis is not fed (the boards say) */
    void *(*create)(analysis *a);
    void (*feed)(void *state, analysis *a, const ts_event *ev);
    void (*finish)(void *state, analysis *a);
    void (*destroy)(void *state);
} analysis_module;

#define KIND_BIT(k) (1ull << (k))

extern const analysis_module opstats_module;
extern const analysis_module steps_module;
extern const analysis_module queues_module;
extern const analysis_module cpu_module;
extern const analysis_module memory_module;

/* A module's state, for its accessors. */
void *analysis_state(const analysis *a, const analysis_module *m);

const analysis_config *analysis_cfg(const analysis *a);

/* Interns derived bytes as a local id (ANALYSIS_LOCAL_ID set). The same bytes give the same id;
 * stream names are not consulted. */
uint32_t analysis_local_name(analysis *a, const char *bytes, size_t len);
/* The id of a name the analysis derived before, TS_STR_NONE when it has none of those bytes. */
uint32_t analysis_local_find(const analysis *a, const char *bytes, size_t len);

/* The bytes of an id of the stream or a local one; NULL and *len 0 when unknown. */
const char *analysis_raw_name(const analysis *a, uint32_t id, uint32_t *len);

/* ---- names.c: deriving op names, types and scopes ---------------------------------------- */

/* The op name for statistics: PyTorch's "aten::addmm, seq = 42, op_id = 17, sizes = [...]"
 * becomes "aten::addmm"; other names are kept. Returns the id to key by (the stream id when
 * unchanged, else a local id). */
uint32_t names_op_key(analysis *a, uint32_t name);

/* The op type: the given type when not 0; else derived from the name:
 * "Default/network/Conv2D-op11" -> "Conv2D", "aten::addmm, seq = 4" -> "aten::addmm",
 * "layer3.MatMul_7" -> "MatMul". */
uint32_t names_op_type(analysis *a, uint32_t name, uint32_t type);

/* Calls fn for each '/'-separated scope prefix of name above the op itself:
 * "Default/network/lenet5/Conv2D-op11" -> ("Default", 1), ("Default/network", 2),
 * ("Default/network/lenet5", 3). */
void names_scopes(analysis *a, uint32_t name, void (*fn)(void *ctx, uint32_t scope, uint32_t level),
                  void *ctx);

/* The id all names of these bytes share: a local id, or id itself when its bytes are unknown
 * (so that rows keyed by it are the same whichever stream ids the bytes came under). */
uint32_t names_canon(analysis *a, uint32_t id);

/* Case-insensitive substring test over raw bytes. */
int names_contains(const char *hay, uint32_t hay_len, const char *needle);

/* ---- stepops.c: each step's operator totals ------------------------------------------------ */

typedef struct stepops_row {
    uint32_t op, type; /* op key and type ids, as analysis_ops groups them */
    uint64_t count, total_ns;
} stepops_row;

typedef struct stepops stepops;

/* NULL when out of memory. */
stepops *stepops_create(void);
void stepops_destroy(stepops *s);
/* Keeps the operator ranges (OP_RANGE, NVTX_RANGE) of a batch until their step's row comes:
 * feed a batch before the analysis that finalizes steps from it. */
void stepops_feed(stepops *s, const ts_event *ev, size_t n);
/* The operators that began in the step's span [row->begin_ns, row->end_ns), one row per op key
 * and type with their count and inclusive time, by total time descending; ranges that began
 * before the span are dropped (in no step, or too late for theirs). *rows stays valid until the
 * next call. Returns the row count. */
size_t stepops_step(stepops *s, analysis *a, const step_row *row, const stepops_row **rows);
/* Ranges dropped: past the bound of ranges waiting for their step, or without memory. */
uint64_t stepops_dropped(const stepops *s);

#endif
