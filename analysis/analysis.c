/* analysis: the core that feeds events to the statistics modules.
 *
 * Each module says which kinds it wants; a per-kind dispatch list built once sends every event
 * only where it is used. The core keeps what every module shares: totals, thread names, the
 * recorded options and the table of names the analysis derives. */
#include "analysis_internal.h"
#include "hash.h"

#include <stdlib.h>
#include <string.h>

static const analysis_module *const modules[] = {
    &opstats_module, &steps_module, &queues_module, &cpu_module, &memory_module,
};

#define N_MODULES  (sizeof(modules) / sizeof(modules[0]))
#define MAX_CONFIG 32

typedef struct local_name {
    uint32_t off, len;
} local_name;

struct analysis {
    analysis_config cfg;
    char *fp_start_op, *bp_end_op;
    analysis_name_fn names;
    void *names_ctx;
    analysis_totals totals;

    char *local_bytes;
    size_t local_used, local_cap;
    local_name *local;
    uint32_t nlocal, local_slots;
    index_map local_map; /* hash of bytes -> local index */

    index_map threads; /* tid -> index */
    uint32_t *thread_names;
    uint32_t thread_cap;

    index_map loss_map; /* (window, tid, reason) -> row of losses */
    analysis_loss *losses;
    uint32_t nloss, loss_cap;

    struct {
        uint32_t key, value;
    } config[MAX_CONFIG];
    uint32_t nconfig;

    void *state[N_MODULES];
    uint8_t dispatch[TS_KIND__COUNT][N_MODULES + 1]; /* module indexes, ends with 0xff */
};

/* ---- Names ----------------------------------------------------------------------------- */

const char *analysis_names_recording(void *reader, uint32_t id, uint32_t *len)
{
    return recording_reader_string(reader, id, len);
}

const char *analysis_names_segment(void *seg, uint32_t id, uint32_t *len)
{
    return strtab_get(seg, id, len);
}

const char *analysis_raw_name(const analysis *a, uint32_t id, uint32_t *len)
{
    if (id & ANALYSIS_LOCAL_ID) {
        uint32_t i = id & ~ANALYSIS_LOCAL_ID;
        if (i >= a->nlocal) {
            if (len)
                *len = 0;
            return NULL;
        }
        if (len)
            *len = a->local[i].len;
        return a->local_bytes + a->local[i].off;
    }
    uint32_t l = 0;
    const char *s = a->names ? a->names(a->names_ctx, id, &l) : NULL;
    if (len)
        *len = s ? l : 0;
    return s;
}

const char *analysis_name(const analysis *a, uint32_t id, uint32_t *len)
{
    const char *s = analysis_raw_name(a, id, len);
    return s ? s : "";
}

uint32_t analysis_local_find(const analysis *a, const char *bytes, size_t len)
{
    if (len > TS_NAME_MAX)
        len = TS_NAME_MAX;
    /* Keyed by hash; a collision of different bytes moves on to the next key. */
    for (uint64_t key = hash_bytes(bytes, len);; key = key * 31 + 1) {
        uint32_t i = index_map_find(&a->local_map, key);
        if (i == UINT32_MAX)
            return TS_STR_NONE;
        if (a->local[i].len == len && !memcmp(a->local_bytes + a->local[i].off, bytes, len))
            return i | ANALYSIS_LOCAL_ID;
    }
}

uint32_t analysis_local_name(analysis *a, const char *bytes, size_t len)
{
    if (len > TS_NAME_MAX)
        len = TS_NAME_MAX;
    uint32_t known = analysis_local_find(a, bytes, len);
    if (known != TS_STR_NONE)
        return known;
    if (a->nlocal == a->local_slots) {
        uint32_t n = a->local_slots ? a->local_slots * 2 : 64;
        local_name *nl = realloc(a->local, n * sizeof *nl);
        if (!nl)
            return TS_STR_NONE;
        a->local = nl;
        a->local_slots = n;
    }
    if (a->local_used + len + 1 > a->local_cap) {
        size_t n = a->local_cap ? a->local_cap * 2 : 4096;
        while (n < a->local_used + len + 1)
            n *= 2;
        /* bytes may be a local name itself (a prefix of one): keep it valid across the move. */
        int inside =
            a->local_bytes && bytes >= a->local_bytes && bytes < a->local_bytes + a->local_used;
        size_t at = inside ? (size_t)(bytes - a->local_bytes) : 0;
        char *nb = realloc(a->local_bytes, n);
        if (!nb)
            return TS_STR_NONE;
        a->local_bytes = nb;
        a->local_cap = n;
        if (inside)
            bytes = nb + at;
    }
    uint64_t key = hash_bytes(bytes, len);
    while (index_map_find(&a->local_map, key) != UINT32_MAX)
        key = key * 31 + 1;
    if (index_map_get(&a->local_map, key, a->nlocal, NULL) == UINT32_MAX)
        return TS_STR_NONE;
    memcpy(a->local_bytes + a->local_used, bytes, len);
    a->local_bytes[a->local_used + len] = 0;
    a->local[a->nlocal] = (local_name){(uint32_t)a->local_used, (uint32_t)len};
    a->local_used += len + 1;
    return a->nlocal++ | ANALYSIS_LOCAL_ID;
}

/* ---- Life cycle ------------------------------------------------------------------------ */

void analysis_config_init(analysis_config *c)
{
    memset(c, 0, sizeof *c);
    c->recent_steps = 256;
    c->recent_buckets = 120;
    c->bucket_ns = 1000000000ull;
}

analysis *analysis_create(const analysis_config *cfg, analysis_name_fn names, void *names_ctx)
{
    analysis *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    if (cfg)
        a->cfg = *cfg;
    else
        analysis_config_init(&a->cfg);
    if (!a->cfg.recent_steps)
        a->cfg.recent_steps = 256;
    if (!a->cfg.recent_buckets)
        a->cfg.recent_buckets = 120;
    if (!a->cfg.bucket_ns)
        a->cfg.bucket_ns = 1000000000ull;
    a->fp_start_op = a->cfg.fp_start_op ? strdup(a->cfg.fp_start_op) : NULL;
    a->bp_end_op = a->cfg.bp_end_op ? strdup(a->cfg.bp_end_op) : NULL;
    a->cfg.fp_start_op = a->fp_start_op;
    a->cfg.bp_end_op = a->bp_end_op;
    a->names = names;
    a->names_ctx = names_ctx;
    a->totals.first_ns = UINT64_MAX;

    for (size_t k = 0; k < TS_KIND__COUNT; k++) {
        size_t n = 0;
        for (size_t m = 0; m < N_MODULES; m++)
            if (modules[m]->kinds & ~(a->cfg.board ? modules[m]->board_kinds : 0) & KIND_BIT(k))
                a->dispatch[k][n++] = (uint8_t)m;
        a->dispatch[k][n] = 0xff;
    }
    for (size_t m = 0; m < N_MODULES; m++) {
        a->state[m] = modules[m]->create(a);
        if (!a->state[m]) {
            analysis_destroy(a);
            return NULL;
        }
    }
    return a;
}

void analysis_destroy(analysis *a)
{
    if (!a)
        return;
    for (size_t m = 0; m < N_MODULES; m++)
        if (a->state[m])
            modules[m]->destroy(a->state[m]);
    index_map_free(&a->local_map);
    index_map_free(&a->threads);
    index_map_free(&a->loss_map);
    free(a->losses);
    free(a->local);
    free(a->local_bytes);
    free(a->thread_names);
    free(a->fp_start_op);
    free(a->bp_end_op);
    free(a);
}

void *analysis_state(const analysis *a, const analysis_module *m)
{
    for (size_t i = 0; i < N_MODULES; i++)
        if (modules[i] == m)
            return a->state[i];
    return NULL;
}

const analysis_config *analysis_cfg(const analysis *a)
{
    return &a->cfg;
}

const analysis_totals *analysis_totals_of(const analysis *a)
{
    return &a->totals;
}

/* ---- Feeding --------------------------------------------------------------------------- */

static void note_thread(analysis *a, uint32_t tid, uint32_t name)
{
    uint32_t idx = index_map_get(&a->threads, tid, a->totals.threads, NULL);
    if (idx == UINT32_MAX)
        return;
    if (idx == a->totals.threads) {
        if (idx == a->thread_cap) {
            uint32_t n = a->thread_cap ? a->thread_cap * 2 : 64;
            uint32_t *nt = realloc(a->thread_names, n * sizeof *nt);
            if (!nt)
                return;
            a->thread_names = nt;
            a->thread_cap = n;
        }
        a->thread_names[idx] = TS_STR_NONE;
        a->totals.threads++;
    }
    if (name != TS_STR_NONE)
        a->thread_names[idx] = name;
}

void analysis_name_thread(analysis *a, uint32_t tid, uint32_t name)
{
    note_thread(a, tid, name);
}

uint32_t analysis_thread_name(const analysis *a, uint32_t tid)
{
    uint32_t idx = index_map_find(&a->threads, tid);
    return idx == UINT32_MAX ? TS_STR_NONE : a->thread_names[idx];
}

static void note_config(analysis *a, uint32_t key, uint32_t value)
{
    for (uint32_t i = 0; i < a->nconfig; i++) {
        if (a->config[i].key == key) {
            a->config[i].value = value;
            return;
        }
    }
    if (a->nconfig < MAX_CONFIG)
        a->config[a->nconfig++] = (typeof(a->config[0])){key, value};
}

const char *analysis_config_value(const analysis *a, const char *key)
{
    size_t kl = strlen(key);
    /* The last one: a window repeats its metadata, and a value may change within it (the CUDA
     * collector's status once CUPTI started). */
    for (uint32_t i = a->nconfig; i-- > 0;) {
        uint32_t len;
        const char *k = analysis_raw_name(a, a->config[i].key, &len);
        if (k && len == kl && !memcmp(k, key, kl))
            return analysis_name(a, a->config[i].value, NULL);
    }
    return NULL;
}

static int host_thread_kind(uint32_t kind)
{
    return kind == TS_KIND_OP_RANGE || kind == TS_KIND_NVTX_RANGE || kind == TS_KIND_CUDA_API ||
           kind == TS_KIND_THREAD_NAME || kind == TS_KIND_STEP_BEGIN || kind == TS_KIND_MARK;
}

/* A LOST notice into its row: the window under way, its thread and reason. Past
 * ANALYSIS_LOSS_ROWS rows, new ones add to one more row of tid 0. */
static void note_loss(analysis *a, const ts_event *e)
{
    enum { REASONS = sizeof a->totals.lost_by_reason / sizeof a->totals.lost_by_reason[0] };
    uint32_t reason = e->aux < REASONS ? e->aux : 0;
    uint64_t key = (uint64_t)a->totals.windows << 35 | (uint64_t)e->tid << 3 | reason;
    uint32_t i = index_map_find(&a->loss_map, key);
    if (i == UINT32_MAX && a->nloss > ANALYSIS_LOSS_ROWS) {
        i = ANALYSIS_LOSS_ROWS; /* the row of the rest, made already */
    } else if (i == UINT32_MAX) {
        if (a->nloss == a->loss_cap) {
            uint32_t cap = a->loss_cap ? a->loss_cap * 2 : 16;
            if (cap > ANALYSIS_LOSS_ROWS + 1)
                cap = ANALYSIS_LOSS_ROWS + 1;
            analysis_loss *l = realloc(a->losses, cap * sizeof *l);
            if (!l)
                return; /* counted in the totals all the same */
            a->losses = l;
            a->loss_cap = cap;
        }
        int inserted = 0;
        i = a->nloss < ANALYSIS_LOSS_ROWS ? index_map_get(&a->loss_map, key, a->nloss, &inserted)
                                          : ANALYSIS_LOSS_ROWS;
        if (i == UINT32_MAX)
            return;
        int rest = i == ANALYSIS_LOSS_ROWS;
        a->losses[i] = (analysis_loss){.window = a->totals.windows,
                                       .tid = rest ? 0 : e->tid,
                                       .reason = reason,
                                       .first_ns = e->begin_ns,
                                       .rate = rest ? 0 : e->v1};
        a->nloss++;
    }
    a->losses[i].lost += e->v0;
}

size_t analysis_losses(const analysis *a, const analysis_loss **rows)
{
    *rows = a->losses;
    return a->nloss;
}

void analysis_feed(analysis *a, const ts_event *ev, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const ts_event *e = &ev[i];
        uint32_t kind = e->kind < TS_KIND__COUNT ? e->kind : TS_KIND_NONE;
        a->totals.events++;
        a->totals.by_kind[kind]++;
        if (kind == TS_KIND_NONE)
            continue;
        if (e->begin_ns < a->totals.first_ns)
            a->totals.first_ns = e->begin_ns;
        if (e->end_ns > a->totals.last_ns)
            a->totals.last_ns = e->end_ns;
        switch (kind) {
        case TS_KIND_LOST:
            a->totals.lost += e->v0;
            if (e->aux < sizeof a->totals.lost_by_reason / sizeof a->totals.lost_by_reason[0])
                a->totals.lost_by_reason[e->aux] += e->v0;
            note_loss(a, e);
            break;
        case TS_KIND_THREAD_NAME:
            note_thread(a, e->tid, e->name);
            break;
        case TS_KIND_CONFIG:
            note_config(a, e->name, e->type);
            break;
        case TS_KIND_COLLECT_START:
            a->totals.windows++;
            break;
        default:
            if (host_thread_kind(kind) && e->device == TS_DEVICE_HOST)
                note_thread(a, e->tid, TS_STR_NONE);
            break;
        }
        for (const uint8_t *m = a->dispatch[kind]; *m != 0xff; m++)
            modules[*m]->feed(a->state[*m], a, e);
    }
}

void analysis_finish(analysis *a)
{
    for (size_t m = 0; m < N_MODULES; m++)
        modules[m]->finish(a->state[m], a);
}
