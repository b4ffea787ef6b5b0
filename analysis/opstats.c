/* opstats: operator statistics (per op and per type), kernel statistics and FLOPs.
 *
 * Feeding costs one array read per event: ops are found by the stream's (name, type) ids and
 * kernels by (name, op) ids, through an array indexed by the (dense) name id that remembers the
 * last pair, then an index_map. Only an id pair seen for the first time goes through names.c
 * (op key, type, scopes) and is grouped with the rows of the same bytes, so the rows are the
 * same whichever stream ids (or derived local ids) the bytes came under.
 *
 * Self time is model's (nesting.c): exclusive of nested ranges of the same kind on the same
 * thread (OP_RANGE and NVTX_RANGE number their depths independently). A range that ended on
 * another thread (TS_EF_CROSS_THREAD) takes no part in nesting.
 *
 * Kernels: device copies and memsets are listed among the kernels as "memcpy" and "memset"
 * with the op they ran under, so device time spent copying shows next to compute. FLOPs come
 * from OP_RANGE v0 only (the NVTX kind gives v0 no meaning; kernel FLOPs are not summed, so
 * that ops and their kernels never count the same work twice). */
#include "analysis_internal.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define FLAT_MAX (1u << 24) /* stream ids stay below this (the string table's limit) */

typedef struct op_row {
    uint32_t key, type; /* canonical ids: local ids of the bytes (stream ids when unknown) */
    uint32_t type_index;
    uint32_t scope_off, scope_n; /* into scope_refs */
    op_totals t;
} op_row;

typedef struct kernel_row {
    uint32_t name, op;
    op_totals t; /* self time is the total: kernels do not nest */
    int comm;
} kernel_row;

/* The row a stream name id went to last, with the type (or op) id it came with. Stream ids are
 * dense, so an array indexed by name answers most events without hashing; a name seen with
 * another type falls back to the index_map. */
typedef struct flat_slot {
    uint32_t type, row; /* row UINT32_MAX: empty */
} flat_slot;

typedef struct flat_cache {
    flat_slot *slot;
    uint32_t cap;
} flat_cache;

typedef struct scope_row {
    uint32_t id, level;
} scope_row;

typedef struct opstats {
    flat_cache op_flat;
    index_map op_slots;   /* stream name << 32 | stream type -> op row */
    index_map ops_by_key; /* canonical key << 32 | canonical type -> op row */
    op_row *ops;
    uint32_t nops, cap_ops;
    uint64_t self_total;

    index_map type_map; /* canonical type id -> type index */
    uint32_t *types;
    uint32_t ntypes, cap_types;

    index_map scope_map; /* scope id -> scope index */
    scope_row *scopes;
    uint32_t nscopes, cap_scopes;
    uint32_t *scope_refs; /* each op's scope indexes, contiguous */
    uint32_t nrefs, cap_refs;

    flat_cache kernel_flat;
    index_map kernel_slots;   /* stream name << 32 | stream op -> kernel row */
    index_map kernels_by_key; /* name << 32 | canonical op -> kernel row */
    kernel_row *kernels;
    uint32_t nkernels, cap_kernels;
    uint32_t memcpy_id, memset_id;

    nesting *nest;
} opstats;

/* Room for need elements of size in *p; -1 when out of memory. */
static int reserve(void *p, uint32_t *cap, uint32_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    uint32_t n = *cap ? *cap : 16;
    while (n < need) {
        if (n > UINT32_MAX / 2)
            return -1;
        n *= 2;
    }
    void *q = realloc(*(void **)p, (size_t)n * size);
    if (!q)
        return -1;
    *(void **)p = q;
    *cap = n;
    return 0;
}

static int same_bytes(const char *s, uint32_t len, const char *t, uint32_t tlen)
{
    return len == tlen && (!len || !memcmp(s, t, len));
}

/* ---- Feeding --------------------------------------------------------------------------- */

static inline uint32_t flat_find(const flat_cache *c, uint32_t name, uint32_t type)
{
    if (name < c->cap && c->slot[name].type == type)
        return c->slot[name].row;
    return UINT32_MAX;
}

static void flat_put(flat_cache *c, uint32_t name, uint32_t type, uint32_t row)
{
    if (name >= FLAT_MAX)
        return;
    if (name >= c->cap) {
        uint32_t n = c->cap ? c->cap : 256;
        while (n <= name)
            n *= 2;
        flat_slot *s = realloc(c->slot, (size_t)n * sizeof *s);
        if (!s)
            return;
        for (uint32_t i = c->cap; i < n; i++)
            s[i] = (flat_slot){0, UINT32_MAX};
        c->slot = s;
        c->cap = n;
    }
    c->slot[name] = (flat_slot){type, row};
}

/* The row of (name, type) through the flat cache, then the map; UINT32_MAX when new. */
static inline uint32_t slot_find(flat_cache *c, const index_map *m, uint32_t name, uint32_t type)
{
    uint32_t r = flat_find(c, name, type);
    if (r != UINT32_MAX)
        return r;
    r = index_map_find(m, (uint64_t)name << 32 | type);
    if (r != UINT32_MAX)
        flat_put(c, name, type, r);
    return r;
}

static void add_scope_ref(void *ctx, uint32_t scope, uint32_t level)
{
    opstats *st = ctx;
    uint32_t i = index_map_find(&st->scope_map, scope);
    if (i == UINT32_MAX) {
        if (reserve(&st->scopes, &st->cap_scopes, st->nscopes + 1, sizeof *st->scopes) != 0 ||
            index_map_get(&st->scope_map, scope, st->nscopes, NULL) == UINT32_MAX)
            return;
        i = st->nscopes++;
        st->scopes[i] = (scope_row){scope, level};
    }
    if (reserve(&st->scope_refs, &st->cap_refs, st->nrefs + 1, sizeof *st->scope_refs) != 0)
        return;
    st->scope_refs[st->nrefs++] = i;
}

static uint32_t type_index(opstats *st, uint32_t type)
{
    uint32_t i = index_map_find(&st->type_map, type);
    if (i != UINT32_MAX)
        return i;
    if (reserve(&st->types, &st->cap_types, st->ntypes + 1, sizeof *st->types) != 0 ||
        index_map_get(&st->type_map, type, st->ntypes, NULL) == UINT32_MAX)
        return UINT32_MAX;
    st->types[st->ntypes] = type;
    return st->ntypes++;
}

static uint32_t op_row_new(opstats *st, analysis *a, uint32_t key, uint32_t type)
{
    uint32_t t = type_index(st, type);
    if (t == UINT32_MAX || reserve(&st->ops, &st->cap_ops, st->nops + 1, sizeof *st->ops) != 0 ||
        index_map_get(&st->ops_by_key, (uint64_t)key << 32 | type, st->nops, NULL) == UINT32_MAX)
        return UINT32_MAX;
    op_row *o = &st->ops[st->nops];
    memset(o, 0, sizeof *o);
    o->key = key;
    o->type = type;
    o->type_index = t;
    o->scope_off = st->nrefs;
    names_scopes(a, key, add_scope_ref, st);
    o->scope_n = st->nrefs - o->scope_off;
    return st->nops++;
}

/* The op row of a stream (name, type) pair seen for the first time. */
static uint32_t op_slot_new(opstats *st, analysis *a, uint32_t name, uint32_t type)
{
    uint32_t key = names_canon(a, names_op_key(a, name));
    uint32_t ty = names_canon(a, names_op_type(a, name, type));
    uint32_t r = index_map_find(&st->ops_by_key, (uint64_t)key << 32 | ty);
    if (r == UINT32_MAX)
        r = op_row_new(st, a, key, ty);
    if (r != UINT32_MAX) {
        index_map_get(&st->op_slots, (uint64_t)name << 32 | type, r, NULL);
        flat_put(&st->op_flat, name, type, r);
    }
    return r; /* a failed slot insert only means the next event asks again */
}

/* The op row of a stream (name, type) pair, new when first seen; UINT32_MAX without memory. */
static uint32_t op_row_of(opstats *st, analysis *a, uint32_t name, uint32_t type)
{
    uint32_t r = slot_find(&st->op_flat, &st->op_slots, name, type);
    return r != UINT32_MAX ? r : op_slot_new(st, a, name, type);
}

static void op_add(opstats *st, uint32_t r, const op_totals *t)
{
    op_totals_add(&st->ops[r].t, t);
    st->self_total += t->self_ns;
}

static void feed_op(opstats *st, analysis *a, const ts_event *ev)
{
    uint32_t r = op_row_of(st, a, ev->name, ev->type);
    if (r == UINT32_MAX)
        return;
    uint64_t dur = event_duration(ev);
    uint64_t self = dur;
    if (!(ev->flags & TS_EF_CROSS_THREAD))
        self = nesting_self(st->nest, ev->kind, ev->tid, ev->aux, ev->begin_ns, dur);
    op_totals_count(&st->ops[r].t, dur, self, event_flops(ev));
    st->self_total += self;
}

static uint32_t kernel_slot_new(opstats *st, analysis *a, uint32_t name, uint32_t op)
{
    uint32_t cop = op != TS_STR_NONE ? names_canon(a, names_op_key(a, op)) : TS_STR_NONE;
    uint64_t key = (uint64_t)name << 32 | cop;
    uint32_t r = index_map_find(&st->kernels_by_key, key);
    if (r == UINT32_MAX) {
        if (reserve(&st->kernels, &st->cap_kernels, st->nkernels + 1, sizeof *st->kernels) != 0 ||
            index_map_get(&st->kernels_by_key, key, st->nkernels, NULL) == UINT32_MAX)
            return UINT32_MAX;
        r = st->nkernels++;
        st->kernels[r] = (kernel_row){.name = name, .op = cop};
    }
    index_map_get(&st->kernel_slots, (uint64_t)name << 32 | op, r, NULL);
    flat_put(&st->kernel_flat, name, op, r);
    return r;
}

/* The kernel row of a device event's kind, name and op (copies and memsets are listed as
 * "memcpy" and "memset" with their op); UINT32_MAX without memory. */
static uint32_t kernel_row_of(opstats *st, analysis *a, uint32_t kind, uint32_t name, uint32_t op)
{
    if (kind == TS_KIND_MEMCPY) {
        if (!st->memcpy_id)
            st->memcpy_id = analysis_local_name(a, "memcpy", 6);
        name = st->memcpy_id;
    } else if (kind == TS_KIND_MEMSET) {
        if (!st->memset_id)
            st->memset_id = analysis_local_name(a, "memset", 6);
        name = st->memset_id;
    }
    uint32_t r = slot_find(&st->kernel_flat, &st->kernel_slots, name, op);
    return r != UINT32_MAX ? r : kernel_slot_new(st, a, name, op);
}

static void kernel_add(opstats *st, uint32_t r, const op_totals *t, uint32_t flags)
{
    kernel_row *k = &st->kernels[r];
    op_totals_add(&k->t, t);
    if (flags & TS_EF_COMM)
        k->comm = 1;
}

static void feed_device(opstats *st, analysis *a, const ts_event *ev)
{
    uint32_t r = kernel_row_of(st, a, ev->kind, ev->name, ev->type);
    if (r == UINT32_MAX)
        return;
    uint64_t dur = event_duration(ev);
    op_totals_count(&st->kernels[r].t, dur, dur, 0);
    if (ev->flags & TS_EF_COMM)
        st->kernels[r].comm = 1;
}

static void *opstats_create(analysis *a)
{
    (void)a;
    opstats *st = calloc(1, sizeof *st);
    if (st && !(st->nest = nesting_create())) {
        free(st);
        return NULL;
    }
    return st;
}

static void opstats_feed(void *state, analysis *a, const ts_event *ev)
{
    if (ev->kind == TS_KIND_OP_RANGE || ev->kind == TS_KIND_NVTX_RANGE)
        feed_op(state, a, ev);
    else
        feed_device(state, a, ev);
}

static void opstats_finish(void *state, analysis *a)
{
    /* Every row is complete as soon as its event is fed: nothing waits for the end. */
    (void)state;
    (void)a;
}

static void opstats_destroy(void *state)
{
    opstats *st = state;
    free(st->op_flat.slot);
    free(st->kernel_flat.slot);
    index_map_free(&st->op_slots);
    index_map_free(&st->ops_by_key);
    index_map_free(&st->type_map);
    index_map_free(&st->scope_map);
    index_map_free(&st->kernel_slots);
    index_map_free(&st->kernels_by_key);
    nesting_destroy(st->nest);
    free(st->ops);
    free(st->types);
    free(st->scopes);
    free(st->scope_refs);
    free(st->kernels);
    free(st);
}

const analysis_module opstats_module = {
    .name = "opstats",
    .kinds = KIND_BIT(TS_KIND_OP_RANGE) | KIND_BIT(TS_KIND_NVTX_RANGE) | KIND_BIT(TS_KIND_KERNEL) |
             KIND_BIT(TS_KIND_MEMCPY) | KIND_BIT(TS_KIND_MEMSET),
    .board_kinds = KIND_BIT(TS_KIND_OP_RANGE) | KIND_BIT(TS_KIND_NVTX_RANGE) |
                   KIND_BIT(TS_KIND_KERNEL) | KIND_BIT(TS_KIND_MEMCPY) | KIND_BIT(TS_KIND_MEMSET),
    .create = opstats_create,
    .feed = opstats_feed,
    .finish = opstats_finish,
    .destroy = opstats_destroy,
};

void analysis_ops_add(analysis *a, uint32_t kind, uint32_t name, uint32_t type, uint32_t flags,
                      const op_totals *t)
{
    opstats *st = analysis_state(a, &opstats_module);
    if (!st || !t->count)
        return;
    if (kind == TS_KIND_OP_RANGE || kind == TS_KIND_NVTX_RANGE) {
        uint32_t r = op_row_of(st, a, name, type);
        if (r != UINT32_MAX)
            op_add(st, r, t);
    } else if (kind == TS_KIND_KERNEL || kind == TS_KIND_MEMCPY || kind == TS_KIND_MEMSET) {
        uint32_t r = kernel_row_of(st, a, kind, name, type);
        if (r != UINT32_MAX)
            kernel_add(st, r, t, flags);
    }
}

/* ---- Accessors ------------------------------------------------------------------------- */

static const opstats *state_of(const analysis *a)
{
    return analysis_state(a, &opstats_module);
}

/* Orders names by bytes, then length; ids break ties of equal bytes (unknown names). */
static int cmp_names(const analysis *a, uint32_t x, uint32_t y)
{
    uint32_t xl, yl;
    const char *xs = analysis_name(a, x, &xl);
    const char *ys = analysis_name(a, y, &yl);
    uint32_t n = xl < yl ? xl : yl;
    int c = n ? memcmp(xs, ys, n) : 0;
    if (c)
        return c;
    if (xl != yl)
        return xl < yl ? -1 : 1;
    return x < y ? -1 : x > y;
}

static int cmp_desc(uint64_t x, uint64_t y)
{
    return x > y ? -1 : x < y;
}

typedef struct op_sort_row {
    op_stat s;
    const analysis *a;
    enum op_sort sort;
} op_sort_row;
_Static_assert(offsetof(op_sort_row, s) == 0, "sort_limit_copy copies the statistics first");

static int cmp_op_rows(const void *pa, const void *pb)
{
    const op_sort_row *x = pa, *y = pb;
    int c = 0;
    switch (x->sort) {
    case OP_SORT_TOTAL:
        c = cmp_desc(x->s.total_ns, y->s.total_ns);
        break;
    case OP_SORT_SELF:
        c = cmp_desc(x->s.self_ns, y->s.self_ns);
        break;
    case OP_SORT_AVG: {
        /* total/count compared exactly: x.total * y.count against y.total * x.count */
        unsigned __int128 l = (unsigned __int128)x->s.total_ns * y->s.count;
        unsigned __int128 r = (unsigned __int128)y->s.total_ns * x->s.count;
        c = l > r ? -1 : l < r;
        break;
    }
    case OP_SORT_COUNT:
        c = cmp_desc(x->s.count, y->s.count);
        break;
    case OP_SORT_NAME:
        break;
    }
    if (!c)
        c = cmp_names(x->a, x->s.name, y->s.name);
    if (!c)
        c = cmp_names(x->a, x->s.type, y->s.type);
    return c;
}

/* The type index for a type id given by a caller: matched by bytes, so a stream id, a derived
 * id and our canonical id of the same text all select the same type. */
static uint32_t find_type(const opstats *st, const analysis *a, uint32_t id)
{
    uint32_t len;
    const char *s = analysis_raw_name(a, id, &len);
    for (uint32_t i = 0; i < st->ntypes; i++) {
        if (st->types[i] == id)
            return i;
        uint32_t tl;
        const char *t = analysis_raw_name(a, st->types[i], &tl);
        if (s && t && same_bytes(s, len, t, tl))
            return i;
    }
    return UINT32_MAX;
}

/* A query's search (a case-insensitive substring) against a row's two names: an op's name and
 * type, a kernel's name and op (0: none). Every row matches no search. */
static int matches(const analysis *a, const char *search, uint32_t name, uint32_t other)
{
    if (!search || !*search)
        return 1;
    uint32_t len;
    const char *n = analysis_name(a, name, &len);
    if (names_contains(n, len, search))
        return 1;
    n = other ? analysis_name(a, other, &len) : NULL;
    return n && names_contains(n, len, search);
}

/* The *n kept rows of a query (row_size bytes each, the statistics of stat_size bytes first)
 * sorted by cmp, the first limit of them (0: all) copied out: malloc'd, NULL (and *n 0) when
 * none or out of memory. sr is freed. */
static void *sort_limit_copy(void *sr, size_t *n, size_t row_size,
                             int (*cmp)(const void *, const void *), size_t limit, size_t stat_size)
{
    qsort(sr, *n, row_size, cmp);
    if (limit && *n > limit)
        *n = limit;
    char *o = *n ? malloc(*n * stat_size) : NULL;
    for (size_t i = 0; o && i < *n; i++)
        memcpy(o + i * stat_size, (const char *)sr + i * row_size, stat_size);
    free(sr);
    if (!o)
        *n = 0;
    return o;
}

static void add_into(op_stat *t, const op_row *o)
{
    if (!o->t.count)
        return;
    t->count += o->t.count;
    t->total_ns += o->t.total_ns;
    t->self_ns += o->t.self_ns;
    if (o->t.min_ns < t->min_ns)
        t->min_ns = o->t.min_ns;
    if (o->t.max_ns > t->max_ns)
        t->max_ns = o->t.max_ns;
    t->flops += o->t.flops;
}

size_t analysis_ops(const analysis *a, const op_query *q, op_stat **rows)
{
    *rows = NULL;
    const opstats *st = state_of(a);
    op_query all = {0};
    if (!q)
        q = &all;
    if (!st || !st->nops)
        return 0;
    uint32_t want = UINT32_MAX;
    if (q->type != TS_STR_NONE) {
        want = find_type(st, a, q->type);
        if (want == UINT32_MAX)
            return 0;
    }
    size_t n = q->by_type ? st->ntypes : st->nops;
    op_sort_row *sr = calloc(n, sizeof *sr);
    if (!sr)
        return 0;
    if (q->by_type) {
        for (uint32_t i = 0; i < st->ntypes; i++)
            sr[i].s = (op_stat){.name = st->types[i], .type = st->types[i], .min_ns = UINT64_MAX};
        for (uint32_t i = 0; i < st->nops; i++)
            add_into(&sr[st->ops[i].type_index].s, &st->ops[i]);
    } else {
        for (uint32_t i = 0; i < st->nops; i++) {
            const op_row *o = &st->ops[i];
            sr[i].s = (op_stat){.name = o->key, .type = o->type, .min_ns = UINT64_MAX};
            add_into(&sr[i].s, o);
        }
    }
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t t = q->by_type ? (uint32_t)i : st->ops[i].type_index;
        if (!sr[i].s.count || (want != UINT32_MAX && t != want) ||
            !matches(a, q->search, sr[i].s.name, sr[i].s.type))
            continue;
        sr[i].s.share = st->self_total ? (double)sr[i].s.self_ns / (double)st->self_total : 0;
        sr[i].a = a;
        sr[i].sort = q->sort;
        sr[kept++] = sr[i];
    }
    *rows = sort_limit_copy(sr, &kept, sizeof *sr, cmp_op_rows, q->limit, sizeof **rows);
    return kept;
}

uint32_t analysis_op_type(const analysis *a, const char *type)
{
    const opstats *st = state_of(a);
    if (!st || !type)
        return TS_STR_NONE;
    uint32_t len = (uint32_t)strlen(type);
    for (uint32_t i = 0; i < st->ntypes; i++) {
        uint32_t tl;
        const char *t = analysis_raw_name(a, st->types[i], &tl);
        if (t && same_bytes(type, len, t, tl))
            return st->types[i];
    }
    return TS_STR_NONE;
}

uint64_t analysis_ops_self_ns(const analysis *a)
{
    const opstats *st = state_of(a);
    return st ? st->self_total : 0;
}

typedef struct kernel_sort_row {
    kernel_stat s;
    const analysis *a;
    enum op_sort sort;
} kernel_sort_row;
_Static_assert(offsetof(kernel_sort_row, s) == 0, "sort_limit_copy copies the statistics first");

static uint64_t kernel_avg(const kernel_stat *k)
{
    return k->count ? k->total_ns / k->count : 0;
}

/* Descending by the query's key (ascending by name for OP_SORT_NAME; a kernel has no self time:
 * OP_SORT_SELF sorts by total), then by kernel name and op name. */
static int cmp_kernel_rows(const void *pa, const void *pb)
{
    const kernel_sort_row *x = pa, *y = pb;
    int c = 0;
    switch (x->sort) {
    case OP_SORT_AVG:
        c = cmp_desc(kernel_avg(&x->s), kernel_avg(&y->s));
        break;
    case OP_SORT_COUNT:
        c = cmp_desc(x->s.count, y->s.count);
        break;
    case OP_SORT_NAME:
        break;
    default:
        c = cmp_desc(x->s.total_ns, y->s.total_ns);
        break;
    }
    if (!c)
        c = cmp_names(x->a, x->s.name, y->s.name);
    if (!c)
        c = cmp_names(x->a, x->s.op, y->s.op);
    return c;
}

size_t analysis_kernels_query(const analysis *a, const op_query *q, kernel_stat **rows)
{
    *rows = NULL;
    const opstats *st = state_of(a);
    if (!st || !st->nkernels)
        return 0;
    kernel_sort_row *sr = malloc(st->nkernels * sizeof *sr);
    if (!sr)
        return 0;
    size_t n = 0;
    for (uint32_t i = 0; i < st->nkernels; i++) {
        const kernel_row *k = &st->kernels[i];
        kernel_stat s = {.name = k->name,
                         .op = k->op,
                         .count = k->t.count,
                         .total_ns = k->t.total_ns,
                         .min_ns = k->t.min_ns,
                         .max_ns = k->t.max_ns,
                         .comm = k->comm};
        if (matches(a, q->search, s.name, s.op))
            sr[n++] = (kernel_sort_row){.s = s, .a = a, .sort = q->sort};
    }
    *rows = sort_limit_copy(sr, &n, sizeof *sr, cmp_kernel_rows, q->limit, sizeof **rows);
    return n;
}

size_t analysis_kernels(const analysis *a, size_t limit, kernel_stat **rows)
{
    op_query q = {.sort = OP_SORT_TOTAL, .limit = limit};
    return analysis_kernels_query(a, &q, rows);
}

device_attribution analysis_device_attribution(const analysis *a)
{
    device_attribution d = {0};
    kernel_stat *ks = NULL;
    size_t n = analysis_kernels(a, 0, &ks);
    for (size_t i = 0; i < n; i++) {
        d.records += ks[i].count;
        d.time_ns += ks[i].total_ns;
        if (ks[i].op) {
            d.with_op += ks[i].count;
            d.with_op_ns += ks[i].total_ns;
        }
    }
    free(ks);
    return d;
}

typedef struct scope_sort_row {
    flops_scope s;
    const analysis *a;
} scope_sort_row;

static int cmp_scope_rows(const void *pa, const void *pb)
{
    const scope_sort_row *x = pa, *y = pb;
    int c = cmp_desc(x->s.flops, y->s.flops);
    if (!c)
        c = x->s.level < y->s.level ? -1 : x->s.level > y->s.level;
    if (!c)
        c = cmp_names(x->a, x->s.scope, y->s.scope);
    return c;
}

size_t analysis_flops_scopes(const analysis *a, flops_scope **rows)
{
    *rows = NULL;
    const opstats *st = state_of(a);
    if (!st || !st->nscopes)
        return 0;
    scope_sort_row *sr = calloc(st->nscopes, sizeof *sr);
    if (!sr)
        return 0;
    for (uint32_t i = 0; i < st->nops; i++) {
        const op_row *o = &st->ops[i];
        if (!o->t.flops)
            continue;
        for (uint32_t j = 0; j < o->scope_n; j++) {
            flops_scope *s = &sr[st->scope_refs[o->scope_off + j]].s;
            s->flops += o->t.flops;
            s->time_ns += o->t.flops_ns;
        }
    }
    size_t n = 0;
    for (uint32_t i = 0; i < st->nscopes; i++) {
        if (!sr[i].s.flops)
            continue;
        sr[i].s.scope = st->scopes[i].id;
        sr[i].s.level = st->scopes[i].level;
        sr[i].a = a;
        sr[n++] = sr[i];
    }
    qsort(sr, n, sizeof *sr, cmp_scope_rows);
    flops_scope *out = n ? malloc(n * sizeof *out) : NULL;
    if (out)
        for (size_t i = 0; i < n; i++)
            out[i] = sr[i].s;
    free(sr);
    *rows = out;
    return out ? n : 0;
}

flops_summary analysis_flops(const analysis *a)
{
    flops_summary f = {.utilization = -1};
    const opstats *st = state_of(a);
    if (!st)
        return f;
    for (uint32_t i = 0; i < st->nops; i++) {
        f.flops += st->ops[i].t.flops;
        f.time_ns += st->ops[i].t.flops_self_ns;
    }
    if (f.time_ns)
        f.flops_per_s = (double)f.flops * 1e9 / (double)f.time_ns;
    double peak = analysis_cfg(a)->peak_flops;
    if (peak > 0)
        f.utilization = f.flops_per_s / peak;
    return f;
}
