/* test_opstats: operator, kernel and FLOPs statistics (opstats.c) on hand-made streams. */
#include "analysis_internal.h"
#include "golden.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- The main golden ------------------------------------------------------------------- *
 *
 * Operator ranges, written when they end (children first), on three threads:
 *
 *   tid 100:  fwd [0,100] d0 (type Cell)                     F
 *               Default/net/Conv2D-op1 [10,40] d1  3000 FLOPs   A
 *                 Default/net/conv/Cast-op2 [12,20] d2  100 FLOPs   A1
 *                 Default/net/conv/Cast-op3 [25,30] d2              A2
 *               Default/net/MatMul-op4 [50,90] d1  8000 FLOPs   B
 *                 Default/net/conv/Cast-op2 [60,70] d2              B1
 *             fwd [200,210] d0 (Cell)                            F2
 *             custom_block [500,502] d0 (type MatMul given), 500.0 FLOPs as a double
 *   tid 200:  fwd [5,65] d0 (Cell)                               G
 *               Default/net/MatMul-op4 [10,30] d1  4000 FLOPs   H
 *                 Default/net/conv/Cast-op3 [15,20] d2              I
 *               Default/net/Conv2D-op1 [35,60] d1  2500 FLOPs   J
 *   tid 300:  Other/Add-op9 [0,10] d0  50000 FLOPs
 *
 * Self times: A1 8, A2 5, A 30-8-5 = 17, B1 10, B 40-10 = 30, F 100-30-40 = 30, F2 10;
 *             I 5, H 20-5 = 15, J 25, G 60-20-25 = 15.
 *
 * NVTX ranges (their own depths, so OP ranges on the same thread are not their children):
 *   tid 100:  "aten::addmm, seq = 1, op_id = 2" [0,100] d0 (v0 999: no FLOPs for NVTX)
 *               "aten::mm, seq = 2" [20,30] d1
 *   tid 200:  "aten::addmm, seq = 5, op_id = 6" [300,340] d0, "aten::addmm" [400,404] d0
 *   aten::addmm: 3 ranges, total 100 + 40 + 4 = 144, self (100-10) + 40 + 4 = 134.
 */

typedef struct op_expect {
    const char *name, *type;
    uint64_t count, total_us, self_us, min_us, max_us, flops;
} op_expect;

static const op_expect ops_expected[] = {
    /* F 100 + G 60 + F2 10 = 170; self 30 + 15 + 10 = 55 */
    {"fwd", "Cell", 3, 170, 55, 10, 100, 0},
    /* A 30 + J 25; self 17 + 25 = 42; FLOPs 3000 + 2500 */
    {"Default/net/Conv2D-op1", "Conv2D", 2, 55, 42, 25, 30, 5500},
    /* B 40 + H 20; self 30 + 15 = 45; FLOPs 8000 + 4000 */
    {"Default/net/MatMul-op4", "MatMul", 2, 60, 45, 20, 40, 12000},
    /* A1 8 + B1 10 */
    {"Default/net/conv/Cast-op2", "Cast", 2, 18, 18, 8, 10, 100},
    /* A2 5 + I 5 */
    {"Default/net/conv/Cast-op3", "Cast", 2, 10, 10, 5, 5, 0},
    {"aten::addmm", "aten::addmm", 3, 144, 134, 4, 100, 0},
    {"aten::mm", "aten::mm", 1, 10, 10, 10, 10, 0},
    {"custom_block", "MatMul", 1, 2, 2, 2, 2, 500},
    {"Other/Add-op9", "Add", 1, 10, 10, 10, 10, 50000},
};

#define NOPS (sizeof ops_expected / sizeof ops_expected[0])

/* 55 + 42 + 45 + 18 + 10 + 134 + 10 + 2 + 10 */
#define SELF_TOTAL_US 326ull

static const op_expect types_expected[] = {
    {"Cell", "Cell", 3, 170, 55, 10, 100, 0},
    {"Conv2D", "Conv2D", 2, 55, 42, 25, 30, 5500},
    /* MatMul-op4 (2, 60, 45) + custom_block (1, 2, 2): min 2 max 40, FLOPs 12000 + 500 */
    {"MatMul", "MatMul", 3, 62, 47, 2, 40, 12500},
    /* Cast-op2 (2, 18, 18) + Cast-op3 (2, 10, 10) */
    {"Cast", "Cast", 4, 28, 28, 5, 10, 100},
    {"aten::addmm", "aten::addmm", 3, 144, 134, 4, 100, 0},
    {"aten::mm", "aten::mm", 1, 10, 10, 10, 10, 0},
    {"Add", "Add", 1, 10, 10, 10, 10, 50000},
};

#define NTYPES (sizeof types_expected / sizeof types_expected[0])

static ts_event *nvtx(golden *g, uint32_t tid, const char *name, uint64_t b, uint64_t e,
                      uint32_t depth)
{
    ts_event *ev = golden_op(g, tid, name, NULL, b, e, depth);
    ev->kind = TS_KIND_NVTX_RANGE;
    return ev;
}

static ts_event *device(golden *g, uint16_t kind, const char *op, uint64_t b, uint64_t e)
{
    ts_event *ev = golden_kernel(g, 0, 7, NULL, op, b, e, 0);
    ev->kind = kind;
    return ev;
}

#define ODD_KERNEL "k,\"q\"\n\xff"

static void build_main(golden *g)
{
    golden_init(g);
    golden_op(g, 100, "Default/net/conv/Cast-op2", NULL, 12, 20, 2)->v0 = 100;
    golden_op(g, 100, "Default/net/conv/Cast-op3", NULL, 25, 30, 2);
    golden_op(g, 100, "Default/net/Conv2D-op1", NULL, 10, 40, 1)->v0 = 3000;
    golden_op(g, 100, "Default/net/conv/Cast-op2", NULL, 60, 70, 2);
    golden_op(g, 100, "Default/net/MatMul-op4", NULL, 50, 90, 1)->v0 = 8000;
    golden_op(g, 100, "fwd", "Cell", 0, 100, 0);
    golden_op(g, 100, "fwd", "Cell", 200, 210, 0);
    ts_event *cb = golden_op(g, 100, "custom_block", "MatMul", 500, 502, 0);
    double f = 500.0;
    memcpy(&cb->v0, &f, sizeof f);
    cb->flags |= TS_EF_DOUBLE;
    nvtx(g, 100, "aten::mm, seq = 2", 20, 30, 1);
    nvtx(g, 100, "aten::addmm, seq = 1, op_id = 2", 0, 100, 0)->v0 = 999;

    golden_op(g, 200, "Default/net/conv/Cast-op3", NULL, 15, 20, 2);
    golden_op(g, 200, "Default/net/MatMul-op4", NULL, 10, 30, 1)->v0 = 4000;
    golden_op(g, 200, "Default/net/Conv2D-op1", NULL, 35, 60, 1)->v0 = 2500;
    golden_op(g, 200, "fwd", "Cell", 5, 65, 0);
    nvtx(g, 200, "aten::addmm, seq = 5, op_id = 6", 300, 340, 0);
    nvtx(g, 200, "aten::addmm", 400, 404, 0);

    golden_op(g, 300, "Other/Add-op9", NULL, 0, 10, 0)->v0 = 50000;

    /* Device work on streams 7 and 8. */
    golden_kernel(g, 0, 7, "volta_sgemm", "Default/net/MatMul-op4", 10, 14, 0);
    golden_kernel(g, 0, 7, "volta_sgemm", "Default/net/MatMul-op4", 20, 26, 0);
    /* Stream 8: orders that merge streams differently create the kernel rows in another
     * order, so the tie of the two volta_sgemm rows is settled by the sort, not by chance. */
    golden_kernel(g, 0, 8, "volta_sgemm", "aten::addmm, seq = 1, op_id = 2", 30, 33, 0);
    golden_kernel(g, 0, 8, "volta_sgemm", "aten::addmm, seq = 5, op_id = 6", 40, 47, 0);
    golden_kernel(g, 0, 7, "ncclAllReduce", NULL, 50, 70, 1);
    golden_kernel(g, 0, 7, ODD_KERNEL, "Default/net/Conv2D-op1", 80, 81, 0);
    device(g, TS_KIND_MEMCPY, "Default/net/Conv2D-op1", 0, 2)->v0 = 4096;
    device(g, TS_KIND_MEMCPY, "Default/net/Conv2D-op1", 3, 6)->v0 = 4096;
    device(g, TS_KIND_MEMSET, NULL, 7, 8);
}

/* ---- Feeding orders ---------------------------------------------------------------------- */

/* A random merge of the per-thread (per-stream) sequences: each thread's own order is kept, as
 * the recorder keeps a lane's order, and everything else is shuffled. order 0: as built;
 * order 1: threads in reverse order, block after block; others: seeded random merges. */
static ts_event *reorder(const golden *g, int order)
{
    ts_event *out = malloc(g->nev * sizeof *out);
    ck_assert_ptr_nonnull(out);
    if (order == 0) {
        memcpy(out, g->ev, g->nev * sizeof *out);
        return out;
    }
    uint32_t tids[16];
    size_t ntids = 0, next[16] = {0}, n = 0;
    for (size_t i = 0; i < g->nev; i++) {
        size_t t = 0;
        while (t < ntids && tids[t] != g->ev[i].tid)
            t++;
        if (t == ntids) {
            ck_assert_uint_lt(ntids, 16);
            tids[ntids++] = g->ev[i].tid;
        }
    }
    uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)order;
    while (n < g->nev) {
        size_t t;
        if (order == 1) {
            t = ntids - 1;
            while (next[t] >= g->nev)
                t--;
        } else {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            t = (size_t)(seed >> 33) % ntids;
            if (next[t] >= g->nev)
                continue;
        }
        /* The next event of thread t at or after next[t]. */
        size_t i = next[t];
        while (i < g->nev && g->ev[i].tid != tids[t])
            i++;
        if (i == g->nev) {
            next[t] = g->nev;
            continue;
        }
        out[n++] = g->ev[i];
        next[t] = i + 1;
        while (next[t] < g->nev && g->ev[next[t]].tid != tids[t])
            next[t]++;
    }
    return out;
}

#define NORDERS 5
static const size_t batches[] = {0, 1, 3, 7};
#define NBATCHES (sizeof batches / sizeof batches[0])

static analysis *analyse_order(golden *g, const analysis_config *cfg, int order, size_t batch)
{
    ts_event *saved = g->ev;
    g->ev = reorder(g, order);
    analysis *a = golden_analyse(g, cfg, batch);
    free(g->ev);
    g->ev = saved;
    return a;
}

/* ---- Helpers ----------------------------------------------------------------------------- */

static int name_is(const analysis *a, uint32_t id, const char *s)
{
    uint32_t len;
    const char *n = analysis_name(a, id, &len);
    return len == strlen(s) && !memcmp(n, s, len);
}

static const op_stat *find_op(const analysis *a, const op_stat *rows, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (name_is(a, rows[i].name, name))
            return &rows[i];
    return NULL;
}

static void check_rows(const analysis *a, const op_stat *rows, size_t n, const op_expect *want,
                       size_t nwant)
{
    ck_assert_uint_eq(n, nwant);
    double share = 0;
    for (size_t i = 0; i < nwant; i++) {
        const op_stat *r = find_op(a, rows, n, want[i].name);
        ck_assert_msg(r != NULL, "no row %s", want[i].name);
        ck_assert_msg(name_is(a, r->type, want[i].type), "%s: type %s", want[i].name,
                      golden_str(a, r->type));
        ck_assert_uint_eq(r->count, want[i].count);
        ck_assert_uint_eq(r->total_ns, want[i].total_us * US);
        ck_assert_uint_eq(r->self_ns, want[i].self_us * US);
        ck_assert_uint_eq(r->min_ns, want[i].min_us * US);
        ck_assert_uint_eq(r->max_ns, want[i].max_us * US);
        ck_assert_uint_eq(r->flops, want[i].flops);
        ck_assert_double_eq_tol(r->share, (double)want[i].self_us / SELF_TOTAL_US, 1e-12);
        share += r->share;
    }
    ck_assert_double_eq_tol(share, 1.0, 1e-12);
}

static size_t query(const analysis *a, int by_type, enum op_sort sort, const char *search,
                    uint32_t type, size_t limit, op_stat **rows)
{
    op_query q = {.by_type = by_type, .sort = sort, .search = search, .type = type, .limit = limit};
    return analysis_ops(a, &q, rows);
}

/* The rows' names, in order, are exactly want (NULL-terminated). */
static void check_order(const analysis *a, const op_stat *rows, size_t n, const char *const *want)
{
    size_t k = 0;
    while (want[k])
        k++;
    ck_assert_uint_eq(n, k);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(name_is(a, rows[i].name, want[i]), "row %zu: %s, want %s", i,
                      golden_str(a, rows[i].name), want[i]);
}

/* ---- Everything the main golden must answer --------------------------------------------- */

static void check_ops(const analysis *a)
{
    op_stat *rows;
    size_t n = query(a, 0, OP_SORT_TOTAL, NULL, 0, 0, &rows);
    check_rows(a, rows, n, ops_expected, NOPS);
    free(rows);
    n = query(a, 1, OP_SORT_TOTAL, NULL, 0, 0, &rows);
    check_rows(a, rows, n, types_expected, NTYPES);
    for (size_t i = 0; i < n; i++)
        ck_assert_uint_eq(rows[i].name, rows[i].type);
    free(rows);
    ck_assert_uint_eq(analysis_ops_self_ns(a), SELF_TOTAL_US * US);
}

static void check_sorts(const analysis *a)
{
    /* Ties go by name bytes: 'D' < 'O' < 'a' < 'c' < 'f', and "Default/net/C" < "/M" < "/c". */
    static const char *const by_total[] = {"fwd", "aten::addmm", "Default/net/MatMul-op4",
                                           "Default/net/Conv2D-op1", "Default/net/conv/Cast-op2",
                                           /* 10 us each: */
                                           "Default/net/conv/Cast-op3", "Other/Add-op9", "aten::mm",
                                           "custom_block", NULL};
    static const char *const by_self[] = {"aten::addmm",
                                          "fwd",
                                          "Default/net/MatMul-op4",
                                          "Default/net/Conv2D-op1",
                                          "Default/net/conv/Cast-op2",
                                          "Default/net/conv/Cast-op3",
                                          "Other/Add-op9",
                                          "aten::mm",
                                          "custom_block",
                                          NULL};
    /* Averages: fwd 170/3 = 56.7, addmm 144/3 = 48, MatMul-op4 30, Conv2D-op1 27.5, Add 10,
     * mm 10, Cast-op2 9, Cast-op3 5, custom_block 2. */
    static const char *const by_avg[] = {
        "fwd",           "aten::addmm", "Default/net/MatMul-op4",    "Default/net/Conv2D-op1",
        "Other/Add-op9", "aten::mm",    "Default/net/conv/Cast-op2", "Default/net/conv/Cast-op3",
        "custom_block",  NULL};
    static const char *const by_count[] = {"aten::addmm",
                                           "fwd",
                                           "Default/net/Conv2D-op1",
                                           "Default/net/MatMul-op4",
                                           "Default/net/conv/Cast-op2",
                                           "Default/net/conv/Cast-op3",
                                           "Other/Add-op9",
                                           "aten::mm",
                                           "custom_block",
                                           NULL};
    static const char *const by_name[] = {"Default/net/Conv2D-op1",
                                          "Default/net/MatMul-op4",
                                          "Default/net/conv/Cast-op2",
                                          "Default/net/conv/Cast-op3",
                                          "Other/Add-op9",
                                          "aten::addmm",
                                          "aten::mm",
                                          "custom_block",
                                          "fwd",
                                          NULL};
    static const char *const *want[] = {[OP_SORT_TOTAL] = by_total,
                                        [OP_SORT_SELF] = by_self,
                                        [OP_SORT_AVG] = by_avg,
                                        [OP_SORT_COUNT] = by_count,
                                        [OP_SORT_NAME] = by_name};
    for (int s = OP_SORT_TOTAL; s <= OP_SORT_NAME; s++) {
        op_stat *rows;
        size_t n = query(a, 0, (enum op_sort)s, NULL, 0, 0, &rows);
        check_order(a, rows, n, want[s]);
        free(rows);
    }
    /* Types: Cell 170, addmm 144, MatMul 62, Conv2D 55, Cast 28, then Add 10 and mm 10. */
    static const char *const types_by_total[] = {"Cell", "aten::addmm", "MatMul",   "Conv2D",
                                                 "Cast", "Add",         "aten::mm", NULL};
    op_stat *rows;
    size_t n = query(a, 1, OP_SORT_TOTAL, NULL, 0, 0, &rows);
    check_order(a, rows, n, types_by_total);
    free(rows);
    /* Types by average: Cell 56.7, addmm 48, Conv2D 27.5, MatMul 62/3 = 20.7, Add 10, mm 10,
     * Cast 7. */
    static const char *const types_by_avg[] = {"Cell", "aten::addmm", "Conv2D", "MatMul",
                                               "Add",  "aten::mm",    "Cast",   NULL};
    n = query(a, 1, OP_SORT_AVG, NULL, 0, 0, &rows);
    check_order(a, rows, n, types_by_avg);
    free(rows);
}

static void check_search_filter_limit(const analysis *a, golden *g)
{
    op_stat *rows;
    /* "CAST" matches both Cast ops (by name and by type). */
    static const char *const cast[] = {"Default/net/conv/Cast-op2", "Default/net/conv/Cast-op3",
                                       NULL};
    size_t n = query(a, 0, OP_SORT_TOTAL, "CAST", 0, 0, &rows);
    check_order(a, rows, n, cast);
    free(rows);
    /* "matmul": MatMul-op4 by name, custom_block by its type only. */
    static const char *const matmul[] = {"Default/net/MatMul-op4", "custom_block", NULL};
    n = query(a, 0, OP_SORT_TOTAL, "matmul", 0, 0, &rows);
    check_order(a, rows, n, matmul);
    free(rows);
    static const char *const aten[] = {"aten::addmm", "aten::mm", NULL};
    n = query(a, 0, OP_SORT_TOTAL, "ATEN::", 0, 0, &rows);
    check_order(a, rows, n, aten);
    free(rows);
    n = query(a, 0, OP_SORT_TOTAL, "zzz", 0, 0, &rows);
    ck_assert_uint_eq(n, 0);
    free(rows);
    n = query(a, 0, OP_SORT_TOTAL, "", 0, 0, &rows);
    ck_assert_uint_eq(n, NOPS);
    free(rows);
    /* Per type: only "MatMul" holds "ma" ("aten::addmm" and "aten::mm" do not). */
    static const char *const ma[] = {"MatMul", NULL};
    n = query(a, 1, OP_SORT_TOTAL, "Ma", 0, 0, &rows);
    check_order(a, rows, n, ma);
    free(rows);

    /* Choose Type: by the id analysis_op_type gives, or by the stream's id of the same text. */
    uint32_t cast_type = analysis_op_type(a, "Cast");
    ck_assert_uint_ne(cast_type, 0);
    ck_assert(name_is(a, cast_type, "Cast"));
    n = query(a, 0, OP_SORT_TOTAL, NULL, cast_type, 0, &rows);
    check_order(a, rows, n, cast);
    free(rows);
    n = query(a, 0, OP_SORT_TOTAL, NULL, golden_name(g, "MatMul"), 0, &rows);
    check_order(a, rows, n, matmul);
    free(rows);
    /* Filter and search together: MatMul ops whose name or type holds "block". */
    static const char *const block[] = {"custom_block", NULL};
    n = query(a, 0, OP_SORT_TOTAL, "BLOCK", analysis_op_type(a, "MatMul"), 0, &rows);
    check_order(a, rows, n, block);
    free(rows);
    n = query(a, 1, OP_SORT_TOTAL, NULL, analysis_op_type(a, "MatMul"), 0, &rows);
    ck_assert_uint_eq(n, 1);
    ck_assert(name_is(a, rows[0].name, "MatMul"));
    ck_assert_uint_eq(rows[0].count, 3);
    free(rows);
    ck_assert_uint_eq(analysis_op_type(a, "Nope"), 0);
    ck_assert_uint_eq(analysis_op_type(a, "cast"), 0); /* exact text, unlike search */
    /* An event's type as the statistics have it (what the live timeline shows): derived from a
     * name without one, the event's own when given, the name when nothing was derived. */
    uint32_t mm = golden_name(g, "Default/net/MatMul-op4");
    ck_assert_uint_eq(analysis_op_type_of(a, mm, 0), analysis_op_type(a, "MatMul"));
    ck_assert_uint_eq(analysis_op_type_of(a, mm, cast_type), cast_type);
    uint32_t fwd = golden_name(g, "fwd");
    ck_assert_uint_eq(analysis_op_type_of(a, fwd, 0), fwd);
    /* A type id no op has: no rows, not all rows. */
    n = query(a, 0, OP_SORT_TOTAL, NULL, golden_name(g, "fwd"), 0, &rows);
    ck_assert_uint_eq(n, 0);
    free(rows);

    /* Limit: the top 3 by total; a limit above the row count changes nothing. */
    static const char *const top3[] = {"fwd", "aten::addmm", "Default/net/MatMul-op4", NULL};
    n = query(a, 0, OP_SORT_TOTAL, NULL, 0, 3, &rows);
    check_order(a, rows, n, top3);
    free(rows);
    n = query(a, 0, OP_SORT_TOTAL, NULL, 0, 100, &rows);
    ck_assert_uint_eq(n, NOPS);
    free(rows);
    /* No query at all: every op. */
    n = analysis_ops(a, NULL, &rows);
    ck_assert_uint_eq(n, NOPS);
    free(rows);
}

typedef struct kernel_expect {
    const char *name, *op; /* op NULL: none */
    uint64_t count, total_us, min_us, max_us;
    int comm;
} kernel_expect;

/* By total descending; ties ("k..." and "memset", 1 us each) by name bytes, 'k' < 'm'. */
static const kernel_expect kernels_expected[] = {
    {"ncclAllReduce", NULL, 1, 20, 20, 20, 1},
    /* [10,14] 4 + [20,26] 6 = 10, average 5 */
    {"volta_sgemm", "Default/net/MatMul-op4", 2, 10, 4, 6, 0},
    /* under "aten::addmm, seq = 1..." [30,33] 3 and "..., seq = 5..." [40,47] 7: one op;
     * the tie of totals with the row above goes by op name bytes, 'D' < 'a' */
    {"volta_sgemm", "aten::addmm", 2, 10, 3, 7, 0},
    /* [0,2] 2 + [3,6] 3 */
    {"memcpy", "Default/net/Conv2D-op1", 2, 5, 2, 3, 0},
    {ODD_KERNEL, "Default/net/Conv2D-op1", 1, 1, 1, 1, 0},
    {"memset", NULL, 1, 1, 1, 1, 0},
};

#define NKERNELS (sizeof kernels_expected / sizeof kernels_expected[0])

static void check_kernels(const analysis *a)
{
    kernel_stat *rows;
    size_t n = analysis_kernels(a, 0, &rows);
    ck_assert_uint_eq(n, NKERNELS);
    for (size_t i = 0; i < n; i++) {
        const kernel_expect *w = &kernels_expected[i];
        ck_assert_msg(name_is(a, rows[i].name, w->name), "kernel %zu: %s", i,
                      golden_str(a, rows[i].name));
        if (w->op)
            ck_assert_msg(name_is(a, rows[i].op, w->op), "kernel %zu op %s", i,
                          golden_str(a, rows[i].op));
        else
            ck_assert_uint_eq(rows[i].op, 0);
        ck_assert_uint_eq(rows[i].count, w->count);
        ck_assert_uint_eq(rows[i].total_ns, w->total_us * US);
        ck_assert_uint_eq(rows[i].min_ns, w->min_us * US);
        ck_assert_uint_eq(rows[i].max_ns, w->max_us * US);
        ck_assert_int_eq(rows[i].comm, w->comm);
    }
    /* The average the report shows: total / count = 10 us / 2 = 5 us. */
    ck_assert_uint_eq(rows[1].total_ns / rows[1].count, 5 * US);
    free(rows);
    n = analysis_kernels(a, 2, &rows);
    ck_assert_uint_eq(n, 2);
    ck_assert(name_is(a, rows[0].name, "ncclAllReduce"));
    ck_assert(name_is(a, rows[1].name, "volta_sgemm"));
    ck_assert(name_is(a, rows[1].op, "Default/net/MatMul-op4"));
    free(rows);

    /* The query the TUI asks: by count (ties by name), searched over kernel and op names. */
    op_query q = {.sort = OP_SORT_COUNT};
    n = analysis_kernels_query(a, &q, &rows);
    ck_assert_uint_eq(n, NKERNELS);
    ck_assert(name_is(a, rows[0].name, "memcpy")); /* count 2; "memcpy" < "volta_sgemm" */
    ck_assert_uint_eq(rows[0].count, 2);
    ck_assert_uint_eq(rows[NKERNELS - 1].count, 1);
    free(rows);
    q = (op_query){.sort = OP_SORT_AVG, .search = "conv2d"};
    n = analysis_kernels_query(a, &q, &rows);
    ck_assert_uint_eq(n, 2); /* the two kernels under Default/net/Conv2D-op1, by op name */
    ck_assert(name_is(a, rows[0].name, "memcpy")); /* average 2.5 us before 1 us */
    free(rows);
    q = (op_query){.sort = OP_SORT_TOTAL, .search = "SGEMM", .limit = 1};
    n = analysis_kernels_query(a, &q, &rows);
    ck_assert_uint_eq(n, 1);
    ck_assert(name_is(a, rows[0].op, "Default/net/MatMul-op4"));
    free(rows);
}

/* FLOP-carrying ops: Conv2D-op1 5500 (A, J: 30 + 25 us, self 17 + 25), MatMul-op4 12000 (B, H:
 * 40 + 20, self 30 + 15), Cast-op2 100 (A1 only: 8, self 8), custom_block 500 (2, self 2),
 * Other/Add-op9 50000 (10, self 10). The NVTX range's v0 999 is not FLOPs. */
#define FLOPS_TOTAL   68100ull /* 5500 + 12000 + 100 + 500 + 50000 */
#define FLOPS_SELF_US 107ull   /* 42 + 45 + 8 + 2 + 10 */

static void check_flops(const analysis *a, double peak)
{
    flops_scope *rows;
    size_t n = analysis_flops_scopes(a, &rows);
    /* Other: Add-op9 only. Default and Default/net: Conv2D-op1, MatMul-op4, Cast-op2: 5500 +
     * 12000 + 100 = 17600 FLOPs over 55 + 60 + 8 = 123 us. Default/net/conv: Cast-op2. The tie
     * of Default and Default/net goes to the lower level. custom_block has no scope. */
    static const struct {
        const char *scope;
        uint32_t level;
        uint64_t flops, time_us;
    } want[] = {{"Other", 1, 50000, 10},
                {"Default", 1, 17600, 123},
                {"Default/net", 2, 17600, 123},
                {"Default/net/conv", 3, 100, 8}};
    ck_assert_uint_eq(n, 4);
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(name_is(a, rows[i].scope, want[i].scope), "scope %zu: %s", i,
                      golden_str(a, rows[i].scope));
        ck_assert_uint_eq(rows[i].level, want[i].level);
        ck_assert_uint_eq(rows[i].flops, want[i].flops);
        ck_assert_uint_eq(rows[i].time_ns, want[i].time_us * US);
    }
    free(rows);

    flops_summary f = analysis_flops(a);
    ck_assert_uint_eq(f.flops, FLOPS_TOTAL);
    ck_assert_uint_eq(f.time_ns, FLOPS_SELF_US * US);
    /* 68100 FLOPs / 107 us = 636448598.13 FLOP/s */
    ck_assert_double_eq_tol(f.flops_per_s, 68100.0 / 107e-6, 1e-3);
    if (peak > 0)
        ck_assert_double_eq_tol(f.utilization, 68100.0 / 107e-6 / peak, 1e-12);
    else
        ck_assert_double_eq(f.utilization, -1);
}

/* Every order and batching of the main golden gives the same answers: loop index = order *
 * NBATCHES + batch index. */
START_TEST(test_main_golden)
{
    golden g;
    build_main(&g);
    analysis_config cfg;
    analysis_config_init(&cfg);
    cfg.peak_flops = _i % 2 ? 1e9 : 0; /* with and without a peak */
    analysis *a = analyse_order(&g, &cfg, _i / (int)NBATCHES, batches[_i % NBATCHES]);
    check_ops(a);
    check_sorts(a);
    check_search_filter_limit(a, &g);
    check_kernels(a);
    check_flops(a, cfg.peak_flops);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

/* A live monitor's analysis takes operator totals from the collector's board, not from the
 * events: fed the golden's events it counts none; given each event's totals as the collector sums
 * them (self time by model's nesting, per kind and thread) it gives the golden's answers, whether
 * the totals come one event at a time or summed per operator. */
START_TEST(test_board_input)
{
    golden g;
    build_main(&g);
    analysis_config cfg;
    analysis_config_init(&cfg);
    cfg.board = 1;
    analysis *a = analysis_create(&cfg, golden_names, &g);
    ck_assert_ptr_nonnull(a);
    analysis_feed(a, g.ev, g.nev);
    op_stat *rows;
    op_query q = {0};
    ck_assert_uint_eq(analysis_ops(a, &q, &rows), 0);
    free(rows);
    kernel_stat *krows;
    ck_assert_uint_eq(analysis_kernels(a, 0, &krows), 0);
    free(krows);

    nesting *n = nesting_create();
    op_totals *sum = calloc(g.nev, sizeof *sum);
    ck_assert_ptr_nonnull(n);
    ck_assert_ptr_nonnull(sum);
    for (size_t i = 0; i < g.nev; i++) {
        const ts_event *ev = &g.ev[i];
        uint64_t dur = ev->end_ns - ev->begin_ns, self = dur;
        int range = ev->kind == TS_KIND_OP_RANGE || ev->kind == TS_KIND_NVTX_RANGE;
        if (range && !(ev->flags & TS_EF_CROSS_THREAD))
            self = nesting_self(n, ev->kind, ev->tid, ev->aux, ev->begin_ns, dur);
        op_totals one = op_totals_of(ev, self);
        if (_i == 0) {
            analysis_ops_add(a, ev->kind, ev->name, ev->type, ev->flags, &one);
            continue;
        }
        /* Summed into the first event of the same key, handed over once at the end. */
        size_t k = 0;
        while (g.ev[k].kind != ev->kind || g.ev[k].name != ev->name || g.ev[k].type != ev->type)
            k++;
        op_totals_add(&sum[k], &one);
    }
    for (size_t k = 0; _i == 1 && k < g.nev; k++)
        analysis_ops_add(a, g.ev[k].kind, g.ev[k].name, g.ev[k].type, g.ev[k].flags, &sum[k]);
    check_ops(a);
    check_kernels(a);
    check_flops(a, 0);
    nesting_destroy(n);
    free(sum);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

/* The reorder helper really reorders, and keeps each thread's order. */
START_TEST(test_reorder_is_a_merge)
{
    golden g;
    build_main(&g);
    for (int order = 1; order < NORDERS; order++) {
        ts_event *r = reorder(&g, order);
        ck_assert_msg(memcmp(r, g.ev, g.nev * sizeof *r) != 0, "order %d is the identity", order);
        uint32_t tids[] = {100, 200, 300, 7, 8};
        for (size_t t = 0; t < 5; t++) {
            size_t j = 0;
            for (size_t i = 0; i < g.nev; i++) {
                if (r[i].tid != tids[t])
                    continue;
                while (g.ev[j].tid != tids[t])
                    j++;
                ck_assert(!memcmp(&r[i], &g.ev[j], sizeof r[i]));
                j++;
            }
        }
        free(r);
    }
    golden_free(&g);
}
END_TEST

/* Accessors in the middle of feeding (the live monitor), then feeding after finish. */
START_TEST(test_live_snapshots)
{
    golden g;
    build_main(&g);
    analysis *a = analysis_create(NULL, golden_names, &g);
    size_t half = g.nev / 2;
    analysis_feed(a, g.ev, half);
    analysis_finish(a);
    op_stat *rows;
    size_t n = analysis_ops(a, NULL, &rows);
    ck_assert_uint_gt(n, 0);
    free(rows);
    analysis_feed(a, g.ev + half, g.nev - half);
    analysis_finish(a);
    check_ops(a);
    check_kernels(a);
    check_flops(a, 0);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

/* Fed 1000 times, the stream gives the same rows with 1000 times the counts and sums. */
START_TEST(test_repeated_stream)
{
    golden g;
    golden_init(&g);
    golden_op(&g, 1, "child_1", NULL, 1, 3, 1);
    golden_op(&g, 1, "parent", NULL, 0, 10, 0);
    analysis *a = analysis_create(NULL, golden_names, &g);
    for (int i = 0; i < 1000; i++)
        analysis_feed(a, g.ev, g.nev);
    analysis_finish(a);
    op_stat *rows;
    size_t n = analysis_ops(a, &(op_query){.sort = OP_SORT_NAME}, &rows);
    ck_assert_uint_eq(n, 2);
    ck_assert(name_is(a, rows[0].name, "child_1"));
    ck_assert(name_is(a, rows[0].type, "child"));
    ck_assert_uint_eq(rows[0].count, 1000);
    ck_assert_uint_eq(rows[0].self_ns, 1000 * 2 * US);
    ck_assert(name_is(a, rows[1].name, "parent"));
    ck_assert_uint_eq(rows[1].total_ns, 1000 * 10 * US);
    ck_assert_uint_eq(rows[1].self_ns, 1000 * 8 * US); /* 10 - 2, each time */
    free(rows);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

/* Nesting where the stream is not tidy. Each op's self time, one thread per case. */
START_TEST(test_nesting_edges)
{
    golden g;
    golden_init(&g);
    /* tid 1: child whose parent was not recorded, then a grandparent around both: the orphan
     * [12,14] at depth 2 lies inside g1 [10,50]: g1 self 40 - 2 = 38. */
    golden_op(&g, 1, "orphan1", NULL, 12, 14, 2);
    golden_op(&g, 1, "g1", NULL, 10, 50, 0);
    /* tid 2: an orphan [2,4] at depth 1 from before g2 [10,20] began is not g2's: self 10. */
    golden_op(&g, 2, "orphan2", NULL, 2, 4, 1);
    golden_op(&g, 2, "g2", NULL, 10, 20, 0);
    /* tid 3: a range that ended on another thread is nobody's child: p3 self 30. */
    golden_op(&g, 3, "cross3", NULL, 10, 20, 1)->flags |= TS_EF_CROSS_THREAD;
    golden_op(&g, 3, "p3", NULL, 0, 30, 0);
    /* tid 4: a depth beyond any real nesting is counted, with its full time as self. */
    golden_op(&g, 4, "deep4", NULL, 0, 5, 4000000000u);
    golden_op(&g, 4, "p4", NULL, 0, 30, 0);
    /* tid 5: end before begin counts as 0 long. */
    golden_op(&g, 5, "neg5", NULL, 20, 10, 1);
    golden_op(&g, 5, "p5", NULL, 0, 30, 0);
    /* tid 6: a chain 100 levels deep, [d, 200 - d] at depth d: each level lasts 2 us more than
     * the one inside it, so each has 2 us of self time, the innermost [99,101] too. */
    for (int d = 99; d >= 0; d--)
        golden_op(&g, 6, "chain", NULL, (uint64_t)d, (uint64_t)(200 - d), (uint32_t)d);
    /* tid 7: OP and NVTX ranges on one thread keep separate depths: p7 self 30 - 10 = 20,
     * its NVTX sibling n7 [0,30] d0 (no NVTX children) self 30. */
    golden_op(&g, 7, "c7", NULL, 5, 15, 1);
    nvtx(&g, 7, "n7", 0, 30, 0);
    golden_op(&g, 7, "p7", NULL, 0, 30, 0);
    /* tid 8: children that overlap (a malformed stream) sum to more than their parent:
     * 15 + 15 > 20, and self time stops at 0. */
    golden_op(&g, 8, "o8", NULL, 10, 25, 1);
    golden_op(&g, 8, "o8", NULL, 15, 30, 1);
    golden_op(&g, 8, "p8", NULL, 10, 30, 0);

    static const struct {
        const char *name;
        uint64_t self_us;
    } want[] = {
        {"orphan1", 2}, {"g1", 38}, {"orphan2", 2}, {"g2", 10}, {"cross3", 10}, {"p3", 30},
        {"deep4", 5},   {"p4", 30}, {"neg5", 0},    {"p5", 30}, {"chain", 200}, /* 100 ranges * 2 us
                                                                                 */
        {"c7", 10},     {"n7", 30}, {"p7", 20},     {"o8", 30}, {"p8", 0},
    };
    analysis *a = golden_analyse(&g, NULL, 0);
    op_stat *rows;
    size_t n = analysis_ops(a, NULL, &rows);
    ck_assert_uint_eq(n, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const op_stat *r = find_op(a, rows, n, want[i].name);
        ck_assert_msg(r != NULL, "no %s", want[i].name);
        ck_assert_msg(r->self_ns == want[i].self_us * US, "%s: self %llu ns, want %llu us",
                      want[i].name, (unsigned long long)r->self_ns,
                      (unsigned long long)want[i].self_us);
    }
    const op_stat *chain = find_op(a, rows, n, "chain");
    ck_assert_uint_eq(chain->count, 100);
    /* sum over d of (200 - 2d) = 100 * 200 - 2 * 4950 = 10100 */
    ck_assert_uint_eq(chain->total_ns, 10100 * US);
    ck_assert_uint_eq(chain->min_ns, 2 * US);
    ck_assert_uint_eq(chain->max_ns, 200 * US);
    free(rows);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

/* Names with commas, quotes, newlines, NULs and invalid UTF-8 group, derive and search. */
START_TEST(test_odd_names)
{
    golden g;
    golden_init(&g);
    static const char odd[] = "w,\"x\"\n\xfe\xff/Y_3";
    static const char nul[] = "a\0b/Z-op1";
    golden_op(&g, 1, odd, NULL, 0, 4, 0)->v0 = 10;
    golden_push(&g, (ts_event){.kind = TS_KIND_OP_RANGE,
                               .tid = 1,
                               .device = TS_DEVICE_HOST,
                               .name = golden_name_n(&g, nul, sizeof nul - 1),
                               .begin_ns = 10 * US,
                               .end_ns = 13 * US});
    analysis *a = golden_analyse(&g, NULL, 0);
    op_stat *rows;
    size_t n = analysis_ops(a, &(op_query){.search = "\"X\"\n"}, &rows);
    ck_assert_uint_eq(n, 1);
    uint32_t len;
    const char *s = analysis_name(a, rows[0].name, &len);
    ck_assert(len == sizeof odd - 1 && !memcmp(s, odd, len));
    ck_assert(name_is(a, rows[0].type, "Y"));
    ck_assert_uint_eq(rows[0].total_ns, 4 * US);
    free(rows);
    /* The name with a NUL: found by the bytes after the NUL, type Z. */
    n = analysis_ops(a, &(op_query){.search = "B/z"}, &rows);
    ck_assert_uint_eq(n, 1);
    s = analysis_name(a, rows[0].name, &len);
    ck_assert(len == sizeof nul - 1 && !memcmp(s, nul, len));
    ck_assert(name_is(a, rows[0].type, "Z"));
    free(rows);
    flops_scope *sc;
    n = analysis_flops_scopes(a, &sc);
    ck_assert_uint_eq(n, 1);
    s = analysis_name(a, sc[0].scope, &len);
    ck_assert(len == 8 && !memcmp(s, "w,\"x\"\n\xfe\xff", 8));
    free(sc);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

/* One op name given with different types is one row per type; its derived type equals a given
 * one of the same text and shares that row. Interleaved, so each event switches type. */
START_TEST(test_same_name_types)
{
    golden g;
    golden_init(&g);
    for (int i = 0; i < 3; i++) {
        golden_op(&g, 1, "Dense_1", "Linear", 10 * i, 10 * i + 1, 0);    /* 1 us each */
        golden_op(&g, 1, "Dense_1", NULL, 10 * i + 2, 10 * i + 4, 0);    /* 2 us, type Dense */
        golden_op(&g, 1, "Dense_1", "Dense", 10 * i + 5, 10 * i + 8, 0); /* 3 us */
    }
    analysis *a = golden_analyse(&g, NULL, 0);
    op_stat *rows;
    size_t n = analysis_ops(a, &(op_query){.sort = OP_SORT_TOTAL}, &rows);
    ck_assert_uint_eq(n, 2);
    ck_assert(name_is(a, rows[0].type, "Dense"));
    ck_assert_uint_eq(rows[0].count, 6);
    ck_assert_uint_eq(rows[0].total_ns, 15 * US); /* 3 * (2 + 3) */
    ck_assert(name_is(a, rows[1].type, "Linear"));
    ck_assert_uint_eq(rows[1].count, 3);
    ck_assert_uint_eq(rows[1].total_ns, 3 * US);
    free(rows);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

/* Names the callback cannot resolve still count, each under its own id. */
START_TEST(test_unknown_names)
{
    golden g;
    golden_init(&g);
    ts_event ev[3] = {
        {.kind = TS_KIND_OP_RANGE, .tid = 1, .name = 500, .begin_ns = 0, .end_ns = 5 * US},
        {.kind = TS_KIND_OP_RANGE, .tid = 1, .name = 500, .begin_ns = 6 * US, .end_ns = 8 * US},
        {.kind = TS_KIND_KERNEL, .tid = 7, .name = 501, .type = 500, .end_ns = 1 * US},
    };
    analysis *a = analysis_create(NULL, golden_names, &g);
    analysis_feed(a, ev, 3);
    analysis_finish(a);
    op_stat *rows;
    size_t n = analysis_ops(a, NULL, &rows);
    ck_assert_uint_eq(n, 1);
    ck_assert_uint_eq(rows[0].name, 500);
    ck_assert_uint_eq(rows[0].count, 2);
    ck_assert_uint_eq(rows[0].total_ns, 7 * US);
    ck_assert_double_eq(rows[0].share, 1);
    free(rows);
    kernel_stat *k;
    n = analysis_kernels(a, 0, &k);
    ck_assert_uint_eq(n, 1);
    ck_assert_uint_eq(k[0].name, 501);
    ck_assert_uint_eq(k[0].op, 500);
    free(k);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

START_TEST(test_empty)
{
    golden g;
    golden_init(&g);
    analysis_config cfg;
    analysis_config_init(&cfg);
    cfg.peak_flops = 1e12;
    analysis *a = golden_analyse(&g, &cfg, 0);
    op_stat *rows = (op_stat *)&g; /* must be overwritten */
    ck_assert_uint_eq(analysis_ops(a, NULL, &rows), 0);
    ck_assert_ptr_null(rows);
    kernel_stat *k = (kernel_stat *)&g;
    ck_assert_uint_eq(analysis_kernels(a, 0, &k), 0);
    ck_assert_ptr_null(k);
    flops_scope *s = (flops_scope *)&g;
    ck_assert_uint_eq(analysis_flops_scopes(a, &s), 0);
    ck_assert_ptr_null(s);
    flops_summary f = analysis_flops(a);
    ck_assert_uint_eq(f.flops, 0);
    ck_assert_double_eq(f.flops_per_s, 0);
    ck_assert_double_eq(f.utilization, 0); /* a peak, and nothing achieved */
    ck_assert_uint_eq(analysis_ops_self_ns(a), 0);
    ck_assert_uint_eq(analysis_op_type(a, "x"), 0);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("opstats");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, test_main_golden, 0, NORDERS * (int)NBATCHES);
    tcase_add_test(tc, test_reorder_is_a_merge);
    tcase_add_loop_test(tc, test_board_input, 0, 2);
    tcase_add_test(tc, test_live_snapshots);
    tcase_add_test(tc, test_repeated_stream);
    tcase_add_test(tc, test_nesting_edges);
    tcase_add_test(tc, test_odd_names);
    tcase_add_test(tc, test_same_name_types);
    tcase_add_test(tc, test_unknown_names);
    tcase_add_test(tc, test_empty);
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
