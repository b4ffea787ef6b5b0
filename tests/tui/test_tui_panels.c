/* Panels drawn into canvases from crafted analyses, read back as text (no curses): the step
 * trace, operators (types, ops, sort, search, Choose Type), data queues, CPU and memory, the
 * timeline with W/A/S/D and its cursor; the header, the keys, hostile names, the glyph tables,
 * and the --once snapshots. */
#include "report.h"
#include "tui_internal.h"

#include <cJSON.h>
#include <check.h>
#include <math.h>
#include <locale.h>
#include <stdlib.h>
#include <string.h>

/* ---- A crafted run ---------------------------------------------------------------------- */

enum {
    N_NONE,
    N_OVERFLOW,
    N_MATMUL1,
    N_MATMUL,
    N_RELU1,
    N_RELU,
    N_MATMUL_GRAD,
    N_QUEUE,
    N_TRAIN,
    N_LOADER,
    N_EVIL,
    N_EVIL_TYPE,
    N_KERNEL,
    N_REC,
    N_SMP,
    N_AUTOGRAD,
    N_WORKER,
    N__COUNT
};

static const char *const names[N__COUNT] = {
    [N_NONE] = "",
    [N_OVERFLOW] = "<names table full>",
    [N_MATMUL1] = "Default/fc1/MatMul-op1",
    [N_MATMUL] = "MatMul",
    [N_RELU1] = "Default/relu1/ReLU-op2",
    [N_RELU] = "ReLU",
    [N_MATMUL_GRAD] = "Gradients/Default/fc1/gradMatMul/MatMul-op3",
    [N_QUEUE] = "batch_queue",
    [N_TRAIN] = "train",
    [N_LOADER] = "data-loader",
    [N_EVIL] = "evil\x1b[2J\r\nname\xff\xfe\x07",
    [N_EVIL_TYPE] = "Evil",
    [N_KERNEL] = "volta_sgemm_128x64_nn",
    [N_REC] = "termsight-rec",
    [N_SMP] = "termsight-smp",
    [N_AUTOGRAD] = "pt_autograd_0",
    [N_WORKER] = "evaluation DataLoader worker 1",
};

static const char *names_fn(void *ctx, uint32_t id, uint32_t *len)
{
    (void)ctx;
    if (id >= N__COUNT)
        return NULL;
    *len = (uint32_t)strlen(names[id]);
    return names[id];
}

#define US 1000ull
#define MS 1000000ull
#define T0 (1000 * MS)

#define TRAIN_TID  100
#define LOADER_TID 101
#define STEPS      20
#define SLOW_STEP  7

static ts_event ev(uint16_t kind, uint32_t tid, uint64_t b, uint64_t e)
{
    return (ts_event){
        .kind = kind, .tid = tid, .device = TS_DEVICE_HOST, .begin_ns = b, .end_ns = e};
}

static ts_event op(uint32_t name, uint32_t type, uint64_t b, uint64_t e)
{
    ts_event x = ev(TS_KIND_OP_RANGE, TRAIN_TID, b, e);
    x.name = name;
    x.type = type;
    return x;
}

typedef struct run {
    analysis *a;
    tlring tl;
    source_status st;
    panel_ctx p;
} run;

static void feed(run *r, const ts_event *e, size_t n)
{
    analysis_feed(r->a, e, n);
    tlring_feed(&r->tl, e, n);
}

/* Steps of 4 ms: interval 0.1 ms, forward+backward 3.2 ms (MatMul 1 ms, ReLU 0.2 ms, MatMul
 * gradient 2 ms), tail 0.2 ms, idle to the next; step SLOW_STEP's gradient takes 5 ms more.
 * A host queue sampled for 5 s, CPU samples, host memory, and one kernel on a stream. */
static void make_run(run *r, int evil)
{
    memset(r, 0, sizeof *r);
    r->a = analysis_create(NULL, names_fn, NULL);
    ck_assert_ptr_nonnull(r->a);
    ck_assert_int_eq(tlring_init(&r->tl, 4096), 0);
    ts_event tn = ev(TS_KIND_THREAD_NAME, TRAIN_TID, T0, T0);
    tn.name = N_TRAIN;
    feed(r, &tn, 1);
    uint64_t t = T0;
    for (uint64_t s = 1; s <= STEPS; s++) {
        uint64_t extra = s == SLOW_STEP ? 5 * MS : 0;
        ts_event e[8];
        int n = 0;
        e[n] = ev(TS_KIND_STEP_BEGIN, TRAIN_TID, t, t);
        e[n++].v0 = s;
        e[n] = ev(TS_KIND_PHASE, TRAIN_TID, t + 100 * US, t + 100 * US);
        e[n++].aux = TS_PHASE_FORWARD_START;
        e[n++] = op(N_MATMUL1, N_MATMUL, t + 100 * US, t + 1100 * US);
        e[n++] = evil ? op(N_EVIL, N_EVIL_TYPE, t + 1100 * US, t + 1300 * US)
                      : op(N_RELU1, N_RELU, t + 1100 * US, t + 1300 * US);
        e[n++] = op(N_MATMUL_GRAD, N_MATMUL, t + 1300 * US, t + 3300 * US + extra);
        e[n] = ev(TS_KIND_PHASE, TRAIN_TID, t + 3300 * US + extra, t + 3300 * US + extra);
        e[n++].aux = TS_PHASE_BACKWARD_END;
        e[n] = ev(TS_KIND_STEP_END, TRAIN_TID, t + 3500 * US + extra, t + 3500 * US + extra);
        e[n++].v0 = s;
        feed(r, e, (size_t)n);
        t += 4 * MS + extra;
    }
    ts_event k = ev(TS_KIND_KERNEL, 7, T0 + 200 * US, T0 + 900 * US);
    k.device = 0;
    k.name = N_KERNEL;
    k.type = N_MATMUL;
    feed(r, &k, 1);
    /* The queue: mostly full for 5 s. */
    for (uint64_t q = 0; q < 50; q++) {
        ts_event s = ev(TS_KIND_QUEUE_SAMPLE, LOADER_TID, T0 + q * 100 * MS, T0 + q * 100 * MS);
        s.name = N_QUEUE;
        s.aux = TS_QUEUE_HOST;
        s.v0 = q % 10 == 0 ? 4 : 8;
        s.v1 = 8;
        feed(r, &s, 1);
    }
    /* CPU: user 30 %, system 10 %, iowait 5 % of the machine; the process 150 % of one CPU. */
    for (uint64_t i = 0; i < 5; i++) {
        uint64_t b = T0 + i * 100 * MS, e = b + 100 * MS;
        uint16_t share[TS_CPU__COUNT] = {[TS_CPU_USER] = 3000,
                                         [TS_CPU_SYSTEM] = 1000,
                                         [TS_CPU_IOWAIT] = 500,
                                         [TS_CPU_IDLE] = 5500};
        ts_event m = ev(TS_KIND_CPU_MACHINE, 0, b, e);
        ts_cpu_pack(&m, share);
        ts_event p = ev(TS_KIND_CPU_PROCESS, 0, b, e);
        p.v0 = 120 * MS;
        p.v1 = 30 * MS;
        p.aux = 3;
        p.corr = 4;
        ts_event th = ev(TS_KIND_CPU_THREAD, TRAIN_TID, b, e);
        th.name = N_TRAIN;
        th.v0 = 90 * MS;
        th.v1 = 5 * MS;
        ts_event mem = ev(TS_KIND_HOST_MEMORY, 0, e, e);
        mem.v0 = 300ull << 20;
        mem.v1 = 512ull << 20;
        /* A data-loader worker process all along, and one that ended after the first sample. */
        ts_event w = ev(TS_KIND_CPU_CHILD, 5151, b, e);
        w.name = N_TRAIN;
        w.v0 = 70 * MS;
        w.corr = 200ull << 20;
        ts_event gone = ev(TS_KIND_CPU_CHILD, 5152, b, e);
        /* A worker whose name is longer than a label. */
        ts_event named = ev(TS_KIND_CPU_CHILD, 5153, b, e);
        named.name = N_WORKER;
        named.v0 = 10 * MS;
        /* The collector's own threads: 2 % and 1 % of one CPU. */
        ts_event rec = ev(TS_KIND_CPU_THREAD, 300, b, e), smp = ev(TS_KIND_CPU_THREAD, 301, b, e);
        rec.name = N_REC;
        rec.v0 = 2 * MS;
        smp.name = N_SMP;
        smp.v1 = 1 * MS;
        ts_event batch[9] = {m, p, th, mem, w, rec, smp, named, gone};
        feed(r, batch, i == 0 ? 9 : 8);
    }
    analysis_finish(r->a);
    r->st = (source_status){.pid = 4242,
                            .state = TS_STATE_COLLECTING,
                            .elapsed_s = 83,
                            .events_per_s = 12345,
                            .drops = 0,
                            .missed = 17,
                            .window = 1};
    strcpy(r->st.process, "trainer");
    strcpy(r->st.run_folder, "/tmp/runs/trainer-4242-20250101-000000");
    r->p = (panel_ctx){.a = r->a, .tl = &r->tl, .st = &r->st};
}

static void free_run(run *r)
{
    analysis_destroy(r->a);
    tlring_free(&r->tl);
}

/* ---- Reading canvases back -------------------------------------------------------------- */

static char text[64 * 1024];

/* The canvas as text, one line per row. */
static const char *dump(const canvas *c)
{
    size_t n = 0;
    for (int y = 0; y < c->rows && n + 4 * (size_t)c->cols + 2 < sizeof text; y++) {
        n += canvas_line(c, y, text + n, sizeof text - n);
        text[n++] = '\n';
    }
    text[n] = 0;
    return text;
}

static int line_with(const canvas *c, const char *needle, char *out, size_t cap)
{
    for (int y = 0; y < c->rows; y++) {
        canvas_line(c, y, out, cap);
        if (strstr(out, needle))
            return y;
    }
    return -1;
}

#define ck_assert_canvas_has(c, s)                                                                 \
    ck_assert_msg(strstr(dump(c), (s)) != NULL, "missing \"%s\" in:\n%s", (s), text)
#define ck_assert_canvas_lacks(c, s)                                                               \
    ck_assert_msg(strstr(dump(c), (s)) == NULL, "unexpected \"%s\" in:\n%s", (s), text)

static void draw_panel(run *r, view *v, canvas *c, int panel, int rows, int cols, int full,
                       const glyphs *g)
{
    if (c->cells)
        canvas_free(c);
    ck_assert_int_eq(canvas_init(c, rows, cols, g), 0);
    panels[panel]->draw(&r->p, v, c, (rect){0, 0, rows, cols}, full);
}

/* ---- Step trace ------------------------------------------------------------------------- */

START_TEST(test_steps_bars)
{
    run r;
    make_run(&r, 0);
    view v;
    view_init(&v);
    canvas c = {0};
    draw_panel(&r, &v, &c, PANEL_STEPS, 12, 60, 0, &glyphs_ascii);
    ck_assert_canvas_has(&c, "Step trace");
    ck_assert_canvas_has(&c, "#1 ");
    ck_assert_canvas_has(&c, "#20");
    char line[512];
    /* Steps are one column each from the left: step SLOW_STEP's column holds the slowest
     * marker on the marker row (row 1) and the tallest bar. */
    int x = SLOW_STEP - 1;
    ck_assert_int_eq(canvas_role_at(&c, 1, x), ROLE_SLOW);
    canvas_line(&c, 2, line, sizeof line);
    ck_assert_int_eq(line[x], '#'); /* the tallest bar reaches the top (its tail rounds away) */
    ck_assert(line[x + 1] == ' ' || line[x + 1] == 0);
    /* Bottom to top: interval, compute, tail, for a regular step too. */
    int bottom = 12 - 2;
    ck_assert_int_eq(canvas_role_at(&c, bottom, 0), ROLE_FPBP); /* interval 0.1 of 3.5 ms */
    canvas_line(&c, bottom, line, sizeof line);
    ck_assert_int_eq(line[0], '#');
    /* The average line crosses above the regular bars. */
    ck_assert_msg(strchr(dump(&c), '-') != NULL, "no average line:\n%s", text);
    int avg_row = -1;
    for (int y = 2; y < bottom && avg_row < 0; y++)
        if (canvas_role_at(&c, y, 0) == ROLE_AVG)
            avg_row = y;
    ck_assert_int_ge(avg_row, 2);
    /* The title has the averages. */
    ck_assert_int_ge(line_with(&c, "avg ", line, sizeof line), 0);
    ck_assert_ptr_nonnull(strstr(line, "ms"));
    canvas_free(&c);
    free_run(&r);
}
END_TEST

START_TEST(test_steps_full_table_and_scroll)
{
    run r;
    make_run(&r, 0);
    view v;
    view_init(&v);
    canvas c = {0};
    /* An evaluation pass after the last step: counted on its own line. */
    uint64_t after = T0 + (STEPS * 4 + 6) * MS;
    ts_event pass[2] = {ev(TS_KIND_PHASE, TRAIN_TID, after, after),
                        ev(TS_KIND_PHASE, TRAIN_TID, after + 30 * MS, after + 30 * MS)};
    pass[0].aux = TS_PHASE_EVAL_BEGIN;
    pass[1].aux = TS_PHASE_EVAL_END;
    feed(&r, pass, 2);
    draw_panel(&r, &v, &c, PANEL_STEPS, 30, 100, 1, &glyphs_utf8);
    ck_assert_canvas_has(&c, "interval");
    ck_assert_canvas_has(&c, "compute");
    ck_assert_canvas_has(&c, "comm wait");
    ck_assert_canvas_has(&c, "evaluation 1 pass, 30.0 ms in all");
    ck_assert_canvas_has(&c, "FP/BP from phase marks");
    ck_assert_canvas_has(&c, "slowest #7");
    ck_assert_canvas_has(&c, "\xe2\x96\x88"); /* █: compute */
    ck_assert_canvas_has(&c, "\xe2\x96\xbc"); /* ▼: the slowest */
    /* Narrow: fewer steps fit; Left scrolls back, End returns. */
    draw_panel(&r, &v, &c, PANEL_STEPS, 30, 10, 1, &glyphs_ascii);
    ck_assert_canvas_has(&c, "#20");
    ck_assert_int_eq(panels[PANEL_STEPS]->key(&r.p, &v, VK_LEFT, 1), 1);
    ck_assert_int_eq(panels[PANEL_STEPS]->key(&r.p, &v, VK_PPAGE, 1), 1);
    draw_panel(&r, &v, &c, PANEL_STEPS, 30, 10, 1, &glyphs_ascii);
    ck_assert_canvas_lacks(&c, "#20");
    ck_assert_int_eq(panels[PANEL_STEPS]->key(&r.p, &v, VK_END, 1), 1);
    draw_panel(&r, &v, &c, PANEL_STEPS, 30, 10, 1, &glyphs_ascii);
    ck_assert_canvas_has(&c, "#20");
    canvas_free(&c);
    free_run(&r);
}
END_TEST

START_TEST(test_steps_empty)
{
    run r;
    memset(&r, 0, sizeof r);
    r.a = analysis_create(NULL, names_fn, NULL);
    ck_assert_int_eq(tlring_init(&r.tl, 16), 0);
    r.st.state = TS_STATE_IDLE;
    r.p = (panel_ctx){.a = r.a, .tl = &r.tl, .st = &r.st};
    view v;
    view_init(&v);
    canvas c = {0};
    for (int p = 0; p < PANEL__COUNT; p++) {
        draw_panel(&r, &v, &c, p, 10, 60, 0, &glyphs_ascii);
        draw_panel(&r, &v, &c, p, 40, 140, 1, &glyphs_utf8);
    }
    draw_panel(&r, &v, &c, PANEL_STEPS, 10, 60, 0, &glyphs_ascii);
    ck_assert_canvas_has(&c, "press F5 (or c) to start");
    draw_panel(&r, &v, &c, PANEL_OPS, 10, 60, 0, &glyphs_ascii);
    ck_assert_canvas_has(&c, "press F5 (or c) to start collecting");
    draw_panel(&r, &v, &c, PANEL_TIMELINE, 10, 60, 0, &glyphs_ascii);
    ck_assert_canvas_has(&c, "no ops yet");
    canvas_free(&c);
    free_run(&r);
}
END_TEST

/* ---- Operators -------------------------------------------------------------------------- */

START_TEST(test_ops_types)
{
    run r;
    make_run(&r, 0);
    view v;
    view_init(&v);
    canvas c = {0};
    draw_panel(&r, &v, &c, PANEL_OPS, 10, 100, 0, &glyphs_ascii);
    char line[512];
    ck_assert_int_eq(line_with(&c, "TYPE", line, sizeof line), 1);
    ck_assert_ptr_nonnull(strstr(line, "TOTAL*"));
    /* MatMul first: 40 calls, 20 x 1 ms + 20 x 2 ms + 5 ms = 65 ms. */
    canvas_line(&c, 2, line, sizeof line);
    ck_assert_msg(strstr(line, "MatMul") && strstr(line, " 40 ") && strstr(line, "65.0 ms"), "%s",
                  line);
    ck_assert_int_eq(canvas_role_at(&c, 2, 1), ROLE_SELECTED);
    canvas_line(&c, 3, line, sizeof line);
    ck_assert_msg(strstr(line, "ReLU") && strstr(line, " 20 ") && strstr(line, "4.00 ms"), "%s",
                  line);
    /* Sort by count: ReLU (20) after MatMul (40) still; by average MatMul (1.6 ms) first. */
    ck_assert_int_eq(panels[PANEL_OPS]->key(&r.p, &v, 'o', 0), 1);
    ck_assert_int_eq(v.ops_sort, OP_SORT_AVG);
    draw_panel(&r, &v, &c, PANEL_OPS, 10, 100, 0, &glyphs_ascii);
    ck_assert_int_eq(line_with(&c, "AVG*", line, sizeof line), 1);
    ck_assert_int_eq(panels[PANEL_OPS]->key(&r.p, &v, 'o', 0), 1);
    ck_assert_int_eq(v.ops_sort, OP_SORT_COUNT);
    draw_panel(&r, &v, &c, PANEL_OPS, 10, 100, 0, &glyphs_ascii);
    ck_assert_int_eq(line_with(&c, "COUNT*", line, sizeof line), 1);
    ck_assert_int_eq(panels[PANEL_OPS]->key(&r.p, &v, 'o', 0), 1);
    ck_assert_int_eq(v.ops_sort, OP_SORT_TOTAL);
    canvas_free(&c);
    free_run(&r);
}
END_TEST

START_TEST(test_ops_choose_type_and_back)
{
    run r;
    make_run(&r, 0);
    view v;
    view_init(&v);
    canvas c = {0};
    v.screen = 1 + PANEL_OPS;
    draw_panel(&r, &v, &c, PANEL_OPS, 12, 120, 1, &glyphs_ascii);
    ck_assert_int_eq(view_key(&v, VK_ENTER, &r.p), VA_REDRAW);
    ck_assert_uint_ne(v.ops_type, 0);
    draw_panel(&r, &v, &c, PANEL_OPS, 12, 120, 1, &glyphs_ascii);
    ck_assert_canvas_has(&c, "ops of MatMul");
    ck_assert_canvas_has(&c, "Default/fc1/MatMul-op1");
    ck_assert_canvas_has(&c, "Gradients/Default/fc1/gradMatMul/MatMul-op3");
    ck_assert_canvas_lacks(&c, "ReLU");
    char line[512];
    ck_assert_int_eq(line_with(&c, " OP", line, sizeof line), 1);
    ck_assert_ptr_nonnull(strstr(line, "TYPE"));
    ck_assert_int_eq(view_key(&v, VK_ESC, &r.p), VA_REDRAW);
    ck_assert_uint_eq(v.ops_type, 0);
    draw_panel(&r, &v, &c, PANEL_OPS, 12, 120, 1, &glyphs_ascii);
    ck_assert_canvas_has(&c, "ReLU");
    /* 't': every op, names cut at the start so their informative end shows. */
    ck_assert_int_eq(view_key(&v, 't', &r.p), VA_REDRAW);
    draw_panel(&r, &v, &c, PANEL_OPS, 12, 50, 1, &glyphs_ascii);
    ck_assert_canvas_has(&c, "~");
    ck_assert_canvas_has(&c, "MatMul-op3");
    canvas_free(&c);
    free_run(&r);
}
END_TEST

START_TEST(test_ops_search)
{
    run r;
    make_run(&r, 0);
    view v;
    view_init(&v);
    canvas c = {0};
    ck_assert_int_eq(view_key(&v, '/', &r.p), VA_REDRAW);
    ck_assert(v.searching);
    /* Keys that are commands elsewhere are text while searching. */
    const char *typed = "relu";
    for (const char *k = typed; *k; k++)
        ck_assert_int_eq(view_key(&v, *k, &r.p), VA_REDRAW);
    ck_assert_str_eq(v.search, "relu");
    draw_panel(&r, &v, &c, PANEL_OPS, 10, 100, 0, &glyphs_ascii);
    ck_assert_canvas_has(&c, "search \"relu_\"");
    ck_assert_canvas_has(&c, "ReLU");
    ck_assert_canvas_lacks(&c, "MatMul");
    ck_assert_int_eq(view_key(&v, VK_ENTER, &r.p), VA_REDRAW);
    ck_assert(!v.searching);
    ck_assert_int_eq(view_key(&v, 'q', &r.p), VA_QUIT);
    /* Esc while typing restores the search before. */
    view_key(&v, '/', &r.p);
    view_key(&v, 'x', &r.p);
    view_key(&v, VK_ESC, &r.p);
    ck_assert_str_eq(v.search, "relu");
    view_key(&v, '/', &r.p);
    view_key(&v, VK_BACKSPACE, &r.p);
    view_key(&v, VK_BACKSPACE_ASCII, &r.p);
    view_key(&v, VK_ENTER, &r.p);
    ck_assert_str_eq(v.search, "re");
    view_key(&v, '/', &r.p);
    view_key(&v, 'z', &r.p);
    view_key(&v, 'z', &r.p);
    view_key(&v, VK_ENTER, &r.p);
    draw_panel(&r, &v, &c, PANEL_OPS, 10, 100, 0, &glyphs_ascii);
    ck_assert_canvas_has(&c, "no operator matches the search");
    canvas_free(&c);
    free_run(&r);
}
END_TEST

/* 'k': the kernels with the op each ran under, re-sorted and searched like the ops; 't' back. */
START_TEST(test_ops_kernels)
{
    run r;
    make_run(&r, 0);
    for (int i = 0; i < 2; i++) {
        ts_event k =
            ev(TS_KIND_KERNEL, 7, T0 + (2 + 2 * (uint64_t)i) * MS, T0 + (3 + 2 * (uint64_t)i) * MS);
        k.device = 0;
        k.name = N_KERNEL;
        k.type = N_MATMUL1;
        feed(&r, &k, 1);
    }
    view v;
    view_init(&v);
    canvas c = {0};
    ck_assert_int_eq(view_key(&v, 'k', &r.p), VA_REDRAW);
    ck_assert(v.ops_kernels);
    draw_panel(&r, &v, &c, PANEL_OPS, 10, 120, 0, &glyphs_ascii);
    ck_assert_canvas_has(&c, "kernels, by total");
    char line[512];
    ck_assert_int_eq(line_with(&c, "KERNEL", line, sizeof line), 1);
    ck_assert_msg(strstr(line, " OP ") && strstr(line, "TOTAL*") && strstr(line, "COUNT"), "%s",
                  line);
    /* By total: the two 1 ms launches under fc1's MatMul, then the 0.7 ms one under "MatMul". */
    canvas_line(&c, 2, line, sizeof line);
    ck_assert_msg(strstr(line, "volta_sgemm_128x64_nn") && strstr(line, "Default/fc1/MatMul-op1") &&
                      strstr(line, " 2 ") && strstr(line, "2.00 ms"),
                  "%s", line);
    ck_assert_int_eq(canvas_role_at(&c, 2, 1), ROLE_SELECTED);
    canvas_line(&c, 3, line, sizeof line);
    ck_assert_msg(strstr(line, "volta_sgemm_128x64_nn") && strstr(line, " MatMul ") &&
                      strstr(line, " 1 ") && strstr(line, "700 us"),
                  "%s", line);
    /* By count: the same order; the search matches op names too. */
    view_key(&v, 'o', &r.p);
    view_key(&v, 'o', &r.p);
    draw_panel(&r, &v, &c, PANEL_OPS, 10, 120, 0, &glyphs_ascii);
    ck_assert_int_eq(line_with(&c, "COUNT*", line, sizeof line), 1);
    view_key(&v, '/', &r.p);
    for (const char *k = "FC1"; *k; k++)
        view_key(&v, *k, &r.p);
    view_key(&v, VK_ENTER, &r.p);
    draw_panel(&r, &v, &c, PANEL_OPS, 10, 120, 0, &glyphs_ascii);
    ck_assert_canvas_has(&c, "Default/fc1/MatMul-op1");
    ck_assert_canvas_lacks(&c, " MatMul ");
    view_key(&v, '/', &r.p);
    view_key(&v, 'z', &r.p);
    view_key(&v, VK_ENTER, &r.p);
    draw_panel(&r, &v, &c, PANEL_OPS, 10, 120, 0, &glyphs_ascii);
    ck_assert_canvas_has(&c, "no kernel matches the search");
    /* 't' returns to the op types. */
    ck_assert_int_eq(view_key(&v, VK_ESC, &r.p), VA_REDRAW);
    ck_assert_int_eq(view_key(&v, 't', &r.p), VA_REDRAW);
    ck_assert(!v.ops_kernels);
    ck_assert(v.ops_by_type);
    draw_panel(&r, &v, &c, PANEL_OPS, 10, 120, 0, &glyphs_ascii);
    ck_assert_int_eq(line_with(&c, "TYPE", line, sizeof line), 1);
    canvas_free(&c);
    free_run(&r);
}
END_TEST

START_TEST(test_hostile_names)
{
    run r;
    make_run(&r, 1);
    view v;
    view_init(&v);
    v.ops_by_type = 0;
    canvas c = {0};
    for (int g = 0; g < 2; g++) {
        draw_panel(&r, &v, &c, PANEL_OPS, 10, 120, 1, g ? &glyphs_utf8 : &glyphs_ascii);
        const char *t = dump(&c);
        ck_assert_canvas_has(&c, "evil?[2J??name");
        for (const unsigned char *p = (const unsigned char *)t; *p; p++)
            ck_assert_msg(*p >= 0x20 || *p == '\n', "control byte %#x in:\n%s", *p, t);
    }
    /* Invalid UTF-8, overlong forms, surrogates and wide characters in the canvas itself. */
    canvas_free(&c);
    ck_assert_int_eq(canvas_init(&c, 1, 12, &glyphs_utf8), 0);
    rect all = {0, 0, 1, 12};
    const char bad[] = "a\xc0\xaf"
                       "b\xed\xa0\x80"
                       "c\xe4\xb8\xad"
                       "d";
    canvas_text(&c, all, 0, 0, -1, ROLE_NORMAL, bad, sizeof bad - 1);
    char line[64];
    canvas_line(&c, 0, line, sizeof line);
    ck_assert_str_eq(line, "a?b?c\xe4\xb8\xad"
                           "d");
    /* A wide character that would be cut at the edge is left out whole. */
    canvas_clear(&c);
    canvas_text(&c, all, 0, 10, -1, ROLE_NORMAL, "x\xe4\xb8\xad", 4);
    canvas_line(&c, 0, line, sizeof line);
    ck_assert_str_eq(line, "          x");
    /* ASCII glyphs: anything outside ASCII is '?'. */
    canvas_free(&c);
    ck_assert_int_eq(canvas_init(&c, 1, 12, &glyphs_ascii), 0);
    canvas_text(&c, all, 0, 0, -1, ROLE_NORMAL, "\xc3\xa9t\xc3\xa9", 5);
    canvas_line(&c, 0, line, sizeof line);
    ck_assert_str_eq(line, "?t?");
    canvas_free(&c);
    free_run(&r);
}
END_TEST

/* ---- Queues, CPU, memory ---------------------------------------------------------------- */

START_TEST(test_queues_heatmap)
{
    run r;
    make_run(&r, 0);
    view v;
    view_init(&v);
    canvas c = {0};
    draw_panel(&r, &v, &c, PANEL_QUEUES, 8, 60, 0, &glyphs_ascii);
    char line[512];
    int y = line_with(&c, "batch_queue", line, sizeof line);
    ck_assert_int_ge(y, 2);
    /* Five 1 s buckets at 90 % usage: the top shade, newest at the right edge. */
    ck_assert_msg(strstr(line, "#####"), "%s", line);
    ck_assert_msg(strstr(line, "95%"), "%s", line);
    int hash = (int)(strstr(line, "#####") - line);
    ck_assert_int_eq(canvas_role_at(&c, y, hash), ROLE_HEAT4);
    draw_panel(&r, &v, &c, PANEL_QUEUES, 20, 140, 1, &glyphs_utf8);
    ck_assert_canvas_has(&c, "host");
    ck_assert_canvas_has(&c, "VERDICT");
    ck_assert_canvas_has(&c, "0-20%");
    ck_assert_canvas_has(&c, "\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88"); /* ███ */
    canvas_free(&c);
    free_run(&r);
}
END_TEST

START_TEST(test_cpu_gauges)
{
    run r;
    make_run(&r, 0);
    view v;
    view_init(&v);
    canvas c = {0};
    draw_panel(&r, &v, &c, PANEL_CPU, 8, 70, 0, &glyphs_ascii);
    char line[512];
    ck_assert_int_ge(line_with(&c, "machine", line, sizeof line), 1);
    /* One unit for every figure, stated: percent of one CPU (4 CPUs: 400 %). */
    ck_assert_canvas_has(&c, "% of one CPU, 4 CPUs = 400%");
    ck_assert_msg(strstr(line, "180.0% of 400% usr 120 sys 40 io 20"), "%s", line);
    /* The bar: user '|', then system '+', then iowait '!', in that order. */
    char *u = strchr(line, '|'), *s = strchr(line, '+'), *i = strchr(line, '!');
    ck_assert_msg(u && s && i && u < s && s < i, "%s", line);
    ck_assert_int_ge(line_with(&c, "process", line, sizeof line), 1);
    ck_assert_msg(strstr(line, "150.0% of 400%"), "%s", line);
    /* The bar says what the text says: 150 of 400 is three eighths of it. */
    const char *open = strchr(line, '['), *close = strchr(line, ']');
    ck_assert_ptr_nonnull(open);
    ck_assert_ptr_nonnull(close);
    int filled = 0, width = (int)(close - open - 1);
    for (const char *q = open + 1; q < close; q++)
        filled += *q != ' ';
    ck_assert_msg(abs(filled * 8 - width * 3) <= 8, "%d of %d: %s", filled, width, line);
    ck_assert_int_ge(line_with(&c, "train", line, sizeof line), 1);
    ck_assert_msg(strstr(line, "95.0%") && strstr(line, "tid 100"), "%s", line);
    /* The collector's threads in one row, its cost; not each on its own. */
    ck_assert_int_lt(line_with(&c, "termsight-rec", line, sizeof line), 0);
    ck_assert_int_ge(line_with(&c, "termsight", line, sizeof line), 1);
    ck_assert_msg(strstr(line, "3.0%") && strstr(line, "2 threads: profiling's cost"), "%s", line);
    ck_assert_int_ge(line_with(&c, "host RSS", line, sizeof line), 1);
    ck_assert_msg(strstr(line, "300 MiB of peak 512 MiB"), "%s", line);
    ck_assert_int_lt(line_with(&c, "pid 5151", line, sizeof line), 0); /* full screen only */
    draw_panel(&r, &v, &c, PANEL_CPU, 20, 140, 1, &glyphs_utf8);
    ck_assert_int_ge(line_with(&c, "pid 5151", line, sizeof line), 1);
    ck_assert_msg(strstr(line, " 70.0% pid 5151 RSS 200 MiB"), "%s", line);
    ck_assert_int_ge(line_with(&c, "pid 5153", line, sizeof line), 1);
    ck_assert_msg(strstr(line, "evaluation DataLoader worker 1, pid 5153"), "%s", line);
    ck_assert_int_lt(line_with(&c, "pid 5152", line, sizeof line), 0);
    ck_assert_canvas_has(&c, "1 child process ended");
    ck_assert_canvas_has(&c, "averages: user 30.0%");
    ck_assert_canvas_has(&c, "iowait");
    canvas_free(&c);
    free_run(&r);
}
END_TEST

/* ---- Timeline --------------------------------------------------------------------------- */

static uint64_t last_end(void)
{
    uint64_t t = T0;
    for (int s = 1; s <= STEPS; s++)
        t += 4 * MS + (s == SLOW_STEP ? 5 * MS : 0);
    return t - 4 * MS + 3300 * US; /* the last op's end */
}

START_TEST(test_timeline_lanes_and_cursor)
{
    run r;
    make_run(&r, 0);
    ck_assert_uint_eq(r.tl.latest_ns, last_end());
    ck_assert_uint_eq(r.tl.nlanes, 2); /* the train thread, then device 0 stream 7 */
    view v;
    view_init(&v);
    v.tl_span_ns = 4 * MS;
    canvas c = {0};
    draw_panel(&r, &v, &c, PANEL_TIMELINE, 8, 140, 1, &glyphs_ascii);
    ck_assert_canvas_has(&c, "span 4.00 ms, following the latest");
    ck_assert_canvas_has(&c, "train");
    ck_assert_canvas_has(&c, "dev0 s7");
    ck_assert_canvas_has(&c, "MatMul-op3"); /* the short name inside its block */
    ck_assert_canvas_has(&c, "now");
    /* The cursor: the latest op of the thread, with its details. */
    char line[512];
    canvas_line(&c, 7, line, sizeof line);
    ck_assert_msg(strstr(line, "Gradients/Default/fc1/gradMatMul/MatMul-op3") &&
                      strstr(line, "type MatMul") && strstr(line, "2.00 ms") &&
                      strstr(line, "thread train (100)"),
                  "%s", line);
    /* Left: the op before (ReLU-op2), its block drawn in the cursor's role. */
    ck_assert_int_eq(panels[PANEL_TIMELINE]->key(&r.p, &v, VK_LEFT, 1), 1);
    draw_panel(&r, &v, &c, PANEL_TIMELINE, 8, 140, 1, &glyphs_ascii);
    canvas_line(&c, 7, line, sizeof line);
    ck_assert_msg(strstr(line, "Default/relu1/ReLU-op2") && strstr(line, "200 us"), "%s", line);
    int cursor_cells = 0;
    for (int x = 0; x < 140; x++)
        cursor_cells += canvas_role_at(&c, 2 + v.tl_rows_above, x) == ROLE_CURSOR;
    ck_assert_int_ge(cursor_cells, 1);
    /* The steps above the lanes, numbered; the queue's track below them. */
    ck_assert_int_eq(v.tl_rows_above, 1);
    canvas_line(&c, 2, line, sizeof line);
    ck_assert_msg(strstr(line, "steps") && strstr(line, "#20"), "%s", line);
    int qy = line_with(&c, "batch_queue", line, sizeof line);
    ck_assert_int_ge(qy, 3);
    /* Its size in the window is the sample before it (4 of 8, at the run's start): half. */
    ck_assert_int_eq(canvas_role_at(&c, qy, 139), ROLE_HEAT2);
    ck_assert_int_eq(canvas_role_at(&c, qy, 20), ROLE_HEAT2);
    /* Down: the device stream, its kernel. */
    ck_assert_int_eq(panels[PANEL_TIMELINE]->key(&r.p, &v, VK_DOWN, 1), 1);
    v.tl_span_ns = 200 * MS;
    draw_panel(&r, &v, &c, PANEL_TIMELINE, 8, 100, 1, &glyphs_ascii);
    canvas_line(&c, 7, line, sizeof line);
    ck_assert_msg(strstr(line, "volta_sgemm_128x64_nn") && strstr(line, "device 0 stream 7"), "%s",
                  line);
    canvas_free(&c);
    free_run(&r);
}
END_TEST

START_TEST(test_timeline_wasd)
{
    run r;
    make_run(&r, 0);
    view v;
    view_init(&v);
    v.tl_span_ns = 8 * MS;
    ck_assert(v.tl_follow);
    /* W halves the span, S doubles it, still following. */
    ck_assert_int_eq(view_key(&v, 'W', &r.p), VA_REDRAW);
    ck_assert_uint_eq(v.tl_span_ns, 4 * MS);
    ck_assert_int_eq(view_key(&v, 'S', &r.p), VA_REDRAW);
    ck_assert_uint_eq(v.tl_span_ns, 8 * MS);
    ck_assert(v.tl_follow);
    /* A moves left a quarter of the span and stops following; D moves back and follows at the
     * end. */
    ck_assert_int_eq(view_key(&v, 'A', &r.p), VA_REDRAW);
    ck_assert(!v.tl_follow);
    ck_assert_uint_eq(v.tl_end_ns, last_end() - 2 * MS);
    canvas c = {0};
    draw_panel(&r, &v, &c, PANEL_TIMELINE, 8, 100, 1, &glyphs_ascii);
    ck_assert_canvas_has(&c, "ending 2.00 ms before the latest");
    ck_assert_int_eq(view_key(&v, 'A', &r.p), VA_REDRAW);
    ck_assert_uint_eq(v.tl_end_ns, last_end() - 4 * MS);
    ck_assert_int_eq(view_key(&v, 'W', &r.p), VA_REDRAW); /* zoom in, around the middle */
    ck_assert_uint_eq(v.tl_span_ns, 4 * MS);
    ck_assert_uint_eq(v.tl_end_ns, last_end() - 6 * MS);
    ck_assert_int_eq(view_key(&v, 'D', &r.p), VA_REDRAW);
    ck_assert_uint_eq(v.tl_end_ns, last_end() - 5 * MS);
    for (int i = 0; i < 5; i++)
        view_key(&v, 'D', &r.p);
    ck_assert(v.tl_follow);
    /* Lower case navigates as well (users type it so): a moves left, d right, w and s zoom;
     * none of them touches the run. */
    ck_assert_int_eq(view_key(&v, 'a', &r.p), VA_REDRAW);
    ck_assert(!v.tl_follow);
    ck_assert_uint_eq(v.tl_end_ns, last_end() - 1 * MS);
    ck_assert_int_eq(view_key(&v, 'w', &r.p), VA_REDRAW);
    ck_assert_uint_eq(v.tl_span_ns, 2 * MS);
    ck_assert_int_eq(view_key(&v, 's', &r.p), VA_REDRAW);
    ck_assert_uint_eq(v.tl_span_ns, 4 * MS);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(view_key(&v, 'd', &r.p), VA_REDRAW);
    ck_assert(v.tl_follow);
    ck_assert(!v.confirm);
    /* Home: the oldest ops; End: follow again. */
    v.screen = 1 + PANEL_TIMELINE;
    ck_assert_int_eq(view_key(&v, VK_HOME, &r.p), VA_REDRAW);
    ck_assert(!v.tl_follow);
    ck_assert_uint_eq(v.tl_end_ns, T0 + 100 * US + 4 * MS);
    ck_assert_int_eq(view_key(&v, VK_END, &r.p), VA_REDRAW);
    ck_assert(v.tl_follow);
    canvas_free(&c);
    free_run(&r);
}
END_TEST

/* Far back in time the axis labels still tell the ticks apart; a thread the program did not
 * name is named as the OS names it; a moment the live view no longer holds is said to be gone,
 * with how much the view keeps and where the whole run is. */
START_TEST(test_timeline_far_and_named)
{
    run r;
    make_run(&r, 0);
    /* An op of an unnamed thread 11.2 s after the run's, and that thread's CPU sample. */
    uint64_t later = last_end() + 11200 * MS;
    ts_event far = op(N_MATMUL1, N_MATMUL, later, later + 1 * MS);
    far.tid = 555;
    ts_event cpu = ev(TS_KIND_CPU_THREAD, 555, later - 100 * MS, later);
    cpu.name = N_AUTOGRAD;
    feed(&r, &far, 1);
    analysis_feed(r.a, &cpu, 1);
    view v;
    view_init(&v);
    v.tl_follow = 0;
    v.tl_span_ns = 8 * MS;
    v.tl_end_ns = last_end(); /* 11.2 s before the latest */
    canvas c = {0};
    draw_panel(&r, &v, &c, PANEL_TIMELINE, 10, 120, 1, &glyphs_ascii);
    char axis[512];
    canvas_line(&c, 1, axis, sizeof axis);
    /* The labels: distinct, each with the tick's precision. */
    char seen[16][32];
    int n = 0;
    for (char *save = NULL, *t = strtok_r(axis, "|", &save); t; t = strtok_r(NULL, "|", &save)) {
        while (*t == ' ')
            t++;
        if (!*t)
            continue;
        for (int i = 0; i < n; i++)
            ck_assert_msg(strcmp(seen[i], t), "the label \"%s\" twice on the axis", t);
        if (n < 16)
            snprintf(seen[n++], sizeof seen[0], "%s", t);
    }
    ck_assert_int_ge(n, 2);
    ck_assert_msg(strstr(seen[0], "-11.2") && strlen(seen[0]) > strlen("-11.2 s"), "%s", seen[0]);
    /* Following: the new thread's lane has its OS name. */
    v.tl_follow = 1;
    draw_panel(&r, &v, &c, PANEL_TIMELINE, 10, 120, 1, &glyphs_ascii);
    ck_assert_canvas_has(&c, "pt_autograd_0");
    ck_assert_canvas_lacks(&c, "tid 555");
    /* Before the oldest op the view holds: said, not blank. */
    v.tl_follow = 0;
    v.tl_end_ns = T0 - 50 * MS;
    draw_panel(&r, &v, &c, PANEL_TIMELINE, 10, 120, 1, &glyphs_ascii);
    ck_assert_canvas_has(&c, "left the live view");
    ck_assert_canvas_has(&c, "End returns to the latest");
    ck_assert_canvas_lacks(&c, "no op under the cursor");
    canvas_free(&c);
    free_run(&r);
}
END_TEST

/* Tracks drawn from a damaged segment's values (infinities, a NaN, a size far over its
 * capacity) stay within their shades: a share is clamped, never converted out of range. */
START_TEST(test_timeline_tracks_hostile_values)
{
    ck_assert_int_eq(format_shade(NAN), 0);
    ck_assert_int_eq(format_shade(-INFINITY), 0);
    ck_assert_int_eq(format_shade(INFINITY), 4);
    ck_assert_int_eq(format_shade(1e308), 4);
    ck_assert_int_eq(format_shade(0.5), 2);
    ck_assert_int_eq(format_shade(0.99), 4);
    run r;
    make_run(&r, 0);
    uint64_t t = last_end() - MS;
    double values[] = {INFINITY, -INFINITY, NAN, 1e308};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        ts_event cnt = ev(TS_KIND_COUNTER, TRAIN_TID, t + i, t + i);
        cnt.name = N_KERNEL;
        cnt.flags = TS_EF_DOUBLE;
        memcpy(&cnt.v0, &values[i], sizeof values[i]);
        feed(&r, &cnt, 1);
    }
    ts_event q = ev(TS_KIND_QUEUE_SAMPLE, LOADER_TID, t, t);
    q.name = N_QUEUE;
    q.v0 = UINT64_MAX;
    q.v1 = 1;
    feed(&r, &q, 1);
    view v;
    view_init(&v);
    canvas c = {0};
    draw_panel(&r, &v, &c, PANEL_TIMELINE, 20, 140, 1, &glyphs_ascii);
    char line[512];
    int y = line_with(&c, "volta_sgemm", line, sizeof line); /* the counter's track */
    ck_assert_int_ge(y, 3);
    for (int x = 16; x < 140; x++) {
        int role = canvas_role_at(&c, y, x);
        ck_assert(role == ROLE_NORMAL || (role >= ROLE_HEAT0 && role <= ROLE_HEAT4));
    }
    canvas_free(&c);
    free_run(&r);
}
END_TEST

START_TEST(test_tlring_bounded)
{
    tlring t;
    ck_assert_int_eq(tlring_init(&t, 100), 0);
    for (uint32_t i = 0; i < 1000; i++) {
        ts_event e = ev(TS_KIND_OP_RANGE, 1 + i / 10, i * US, i * US + 500);
        tlring_feed(&t, &e, 1);
        ts_event other = ev(TS_KIND_QUEUE_SAMPLE, 1, i * US, i * US); /* not kept */
        tlring_feed(&t, &other, 1);
    }
    ck_assert_uint_eq(t.n, 100);
    /* Lanes leave with their last event: the last 100 events are of 10 threads. */
    ck_assert_uint_eq(t.nlanes, 10);
    uint32_t sum = 0;
    for (uint32_t i = 0; i < t.nlanes; i++)
        sum += t.lanes[i].count;
    ck_assert_uint_eq(sum, 100);
    ck_assert_uint_eq(t.latest_ns, 999 * US + 500);
    /* More threads than lanes: the rest are refused and counted. */
    for (uint32_t i = 0; i < 2 * TLRING_LANES; i++) {
        ts_event e = ev(TS_KIND_OP_RANGE, 10000 + i, 2 * MS, 2 * MS + 1);
        tlring_feed(&t, &e, 1);
    }
    ck_assert_uint_le(t.nlanes, TLRING_LANES);
    ck_assert_uint_gt(t.refused, 0);
    tlring_free(&t);
}
END_TEST

/* ---- Header, frame, keys ---------------------------------------------------------------- */

START_TEST(test_header)
{
    run r;
    make_run(&r, 0);
    canvas c = {0};
    ck_assert_int_eq(canvas_init(&c, 2, 120, &glyphs_ascii), 0);
    frame_header(&c, (rect){0, 0, 2, 120}, &r.st, r.a, NULL, ROLE_NORMAL, -1, 0);
    char line[512];
    canvas_line(&c, 0, line, sizeof line);
    ck_assert_msg(strstr(line, "trainer") && strstr(line, "pid 4242") &&
                      strstr(line, "collecting") && strstr(line, "events/s 12.3k") &&
                      strstr(line, "drops 0") && strstr(line, "up 0:01:23"),
                  "%s", line);
    /* What the live view skipped is no number to interpret: the panels built from the lanes
     * say "sampled" instead. */
    ck_assert_msg(!strstr(line, "missed") && !strstr(line, "17"), "%s", line);
    canvas_line(&c, 1, line, sizeof line);
    ck_assert_msg(strstr(line, "step 20") && strstr(line, "avg step") &&
                      strstr(line, "run /tmp/runs/") && !strstr(line, "last"),
                  "%s", line);
    /* A thread that lost events in this window: which, and how fast it emitted then. */
    r.st.drops = 5000;
    r.st.lost_threads = 2;
    r.st.worst = (lane_loss){.tid = 812, .lost = 4000, .first_ns = 1, .rate = 48000000};
    frame_header(&c, (rect){0, 0, 2, 120}, &r.st, r.a, NULL, ROLE_NORMAL, -1, 0);
    canvas_line(&c, 0, line, sizeof line);
    ck_assert_msg(strstr(line, "drops 5.00k") && strstr(line, "lost by tid 812 at 48.0M/s +"), "%s",
                  line);
    r.st.drops = 0;
    r.st.lost_threads = 0;
    /* A message, while it is news, in place of the run folder. */
    frame_header(&c, (rect){0, 0, 2, 120}, &r.st, r.a, "start: ok", ROLE_GOOD, -1, 0);
    canvas_line(&c, 1, line, sizeof line);
    ck_assert_msg(strstr(line, "start: ok") && !strstr(line, "run /tmp/runs/"), "%s", line);
    /* The analysis's progress. */
    frame_header(&c, (rect){0, 0, 2, 120}, &r.st, r.a, NULL, ROLE_NORMAL, 0.5, 0);
    canvas_line(&c, 1, line, sizeof line);
    ck_assert_msg(strstr(line, "analysing [||||||||        ]  50 %"), "%s", line);
    /* At 80 columns the run folder keeps its end. */
    canvas_free(&c);
    ck_assert_int_eq(canvas_init(&c, 2, 80, &glyphs_ascii), 0);
    r.st.gone = 1;
    r.st.record_error = 0;
    frame_header(&c, (rect){0, 0, 2, 80}, &r.st, r.a, NULL, ROLE_NORMAL, -1, 1);
    canvas_line(&c, 0, line, sizeof line);
    ck_assert_msg(strstr(line, "ended (process gone)") && strstr(line, "FROZEN"), "%s", line);
    canvas_line(&c, 1, line, sizeof line);
    ck_assert_msg(strstr(line, "-000000"), "%s", line);
    /* A failed command is an error. */
    frame_header(&c, (rect){0, 0, 2, 80}, &r.st, r.a, "stop: error: not collecting", ROLE_ERROR, -1,
                 1);
    canvas_line(&c, 1, line, sizeof line);
    ck_assert_ptr_nonnull(strstr(line, "stop: error"));
    int x = (int)(strstr(line, "stop: error") - line);
    ck_assert_int_eq(canvas_role_at(&c, 1, x), ROLE_ERROR);
    /* A stopped recording says why, in place of the folder. */
    r.st.record_error = 28;
    strcpy(r.st.record_notice, "cannot write events.tsr: No space left on device");
    frame_header(&c, (rect){0, 0, 2, 80}, &r.st, r.a, NULL, ROLE_NORMAL, -1, 0);
    canvas_line(&c, 1, line, sizeof line);
    ck_assert_msg(strstr(line, "recording stopped (No space"), "%s", line);
    canvas_free(&c);
    free_run(&r);
}
END_TEST

START_TEST(test_frame_and_screens)
{
    run r;
    make_run(&r, 0);
    view v;
    view_init(&v);
    canvas c = {0};
    ck_assert_int_eq(canvas_init(&c, 40, 120, &glyphs_utf8), 0);
    layout L;
    for (int s = 0; s < SCREEN__COUNT; s++) {
        ck_assert_int_eq(view_key(&v, '1' + s, &r.p), VA_REDRAW);
        ck_assert_int_eq(v.screen, s);
        layout_compute(40, 120, v.screen, &L);
        canvas_clear(&c);
        frame_draw(&c, &L, &v, &r.p, NULL, ROLE_NORMAL, -1);
        char line[1024];
        canvas_line(&c, 2, line, sizeof line);
        ck_assert_msg(strstr(line, "1 Overview") && strstr(line, "6 Timeline"), "%s", line);
        ck_assert_int_eq(
            canvas_role_at(&c, 2, (int)(strstr(line, "1 Overview") - line) - 1 + (s ? 0 : 0)),
            s == 0 ? ROLE_TAB_ACTIVE : ROLE_TAB);
    }
    ck_assert_int_eq(view_key(&v, VK_TAB, &r.p), VA_REDRAW);
    ck_assert_int_eq(v.screen, SCREEN_OVERVIEW);
    ck_assert_int_eq(view_key(&v, VK_BTAB, &r.p), VA_REDRAW);
    ck_assert_int_eq(v.screen, SCREEN__COUNT - 1);
    /* Help lists every key and closes on any key; q quits from anywhere. */
    ck_assert_int_eq(view_key(&v, '?', &r.p), VA_REDRAW);
    layout_compute(40, 120, v.screen, &L);
    frame_draw(&c, &L, &v, &r.p, NULL, ROLE_NORMAL, -1);
    static const char *const keys[] = {"Tab",  "1 .. 7", "F5  c", "F6  r", "space",    "?",   "q ",
                                       "w  s", "a  d",   "/",     "Enter", "Home End", "PgUp"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        ck_assert_canvas_has(&c, keys[i]);
    ck_assert_int_eq(view_key(&v, 'x', &r.p), VA_REDRAW);
    ck_assert(!v.help);
    ck_assert_int_eq(view_key(&v, ' ', &r.p), VA_FREEZE);
    ck_assert(v.frozen);
    ck_assert_int_eq(view_key(&v, VK_CTRL_L, &r.p), VA_REPAINT);
    ck_assert_int_eq(view_key(&v, VK_F10, &r.p), VA_QUIT);
    /* The overview at 80x24 shows every panel. */
    canvas_free(&c);
    ck_assert_int_eq(canvas_init(&c, 24, 80, &glyphs_ascii), 0);
    view_init(&v);
    layout_compute(24, 80, SCREEN_OVERVIEW, &L);
    frame_draw(&c, &L, &v, &r.p, "report written: /x/report", ROLE_GOOD, -1);
    static const char *const parts[] = {"Step trace",     "Operators",  "Data queues",
                                        "CPU and memory", "Timeline",   "report written",
                                        "MatMul",         "batch_queue"};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        ck_assert_canvas_has(&c, parts[i]);
    canvas_free(&c);
    free_run(&r);
}
END_TEST

/* The help explains every header figure and the panels' one-word marks, and scrolls where the
 * terminal is short; the step is the training's own count, final once the process ended. */
START_TEST(test_help_and_header_figures)
{
    run r;
    make_run(&r, 0);
    view v;
    view_init(&v);
    canvas c = {0};
    ck_assert_int_eq(canvas_init(&c, 24, 80, &glyphs_ascii), 0);
    layout L;
    layout_compute(24, 80, v.screen, &L);
    ck_assert_int_eq(view_key(&v, VK_F1, &r.p), VA_REDRAW);
    frame_draw(&c, &L, &v, &r.p, NULL, ROLE_NORMAL, -1);
    ck_assert_canvas_has(&c, "F5  c");
    ck_assert_canvas_has(&c, "PgDn scroll");
    ck_assert(v.help_more);
    static const char *const figures[] = {"The header", "events/s", "drops", "sampled", "partial",
                                          "avg step", "FROZEN", "(final)",
                                          /* wrapped, not cut: an entry's last words */
                                          "are always whole"};
    enum { NF = sizeof figures / sizeof figures[0] };
    int seen[NF] = {0};
    for (int page = 0; page < 6; page++) {
        ck_assert_int_eq(view_key(&v, VK_NPAGE, &r.p), VA_REDRAW);
        ck_assert(v.help);
        frame_draw(&c, &L, &v, &r.p, NULL, ROLE_NORMAL, -1);
        for (size_t i = 0; i < NF; i++)
            seen[i] |= strstr(dump(&c), figures[i]) != NULL;
    }
    for (size_t i = 0; i < NF; i++)
        ck_assert_msg(seen[i], "the help never shows \"%s\"", figures[i]);
    ck_assert_int_eq(view_key(&v, 'x', &r.p), VA_REDRAW); /* any other key closes it */
    ck_assert(!v.help);
    canvas_free(&c);

    ck_assert_int_eq(canvas_init(&c, 2, 120, &glyphs_ascii), 0);
    r.st.steps = 5000;
    r.st.gone = 1;
    frame_header(&c, (rect){0, 0, 2, 120}, &r.st, r.a, NULL, ROLE_NORMAL, -1, 0);
    char line[512];
    canvas_line(&c, 1, line, sizeof line);
    ck_assert_msg(strstr(line, "step 5000 (final)"), "%s", line);
    canvas_free(&c);

    /* One word in the titles of what is not whole: the lanes' views while the monitor misses
     * events, the operators when the collector's board had no room for some. */
    static const int marked[] = {PANEL_QUEUES, PANEL_TIMELINE, PANEL_OPS};
    for (int sampled = 0; sampled < 2; sampled++) {
        r.st.sampled = sampled;
        r.st.ops_lost = sampled ? 3 : 0;
        for (size_t i = 0; i < sizeof marked / sizeof marked[0]; i++) {
            view_init(&v);
            draw_panel(&r, &v, &c, marked[i], 20, 160, 1, &glyphs_ascii);
            canvas_line(&c, 0, line, sizeof line);
            const char *word = marked[i] == PANEL_OPS ? "partial" : "sampled";
            ck_assert_msg(!strstr(line, word) == !sampled, "panel %d: %s", marked[i], line);
        }
    }
    canvas_free(&c);
    free_run(&r);
}
END_TEST

/* The mouse: a click on a tab shows its screen, on a key bar entry presses its key, on a row
 * selects it (again: opens it), on a timeline block puts the cursor there; the wheel scrolls
 * tables and moves the timeline. */
static void draw_all(canvas *c, layout *L, view *v, run *r)
{
    layout_compute(c->rows, c->cols, v->screen, L);
    canvas_clear(c);
    frame_draw(c, L, v, &r->p, NULL, ROLE_NORMAL, -1);
}

START_TEST(test_mouse)
{
    run r;
    make_run(&r, 0);
    view v;
    view_init(&v);
    canvas c = {0};
    ck_assert_int_eq(canvas_init(&c, 30, 100, &glyphs_ascii), 0);
    layout L;
    char line[1024];
    /* Tabs. */
    for (int s = SCREEN__COUNT - 1; s >= 0; s--) {
        draw_all(&c, &L, &v, &r);
        canvas_line(&c, L.tabs.y, line, sizeof line);
        char tab[32];
        snprintf(tab, sizeof tab, "%d %s", s + 1, s ? panels[s - 1]->tab : "Overview");
        const char *at = strstr(line, tab);
        ck_assert_ptr_nonnull(at);
        ck_assert_int_eq(view_mouse(&v, &L, &r.p, MOUSE_CLICK, L.tabs.y, (int)(at - line) + 2),
                         VA_REDRAW);
        ck_assert_int_eq(v.screen, s);
    }
    /* The key bar: F6 asks, a click anywhere says no. */
    draw_all(&c, &L, &v, &r);
    canvas_line(&c, L.status.y, line, sizeof line);
    const char *f6 = strstr(line, "F6Analyse");
    ck_assert_ptr_nonnull(f6);
    ck_assert_int_eq(view_mouse(&v, &L, &r.p, MOUSE_CLICK, L.status.y, (int)(f6 - line) + 3),
                     VA_REDRAW);
    ck_assert_int_eq(v.confirm, VA_ANALYSE);
    ck_assert_int_eq(view_mouse(&v, &L, &r.p, MOUSE_CLICK, 10, 10), VA_REDRAW);
    ck_assert(!v.confirm);
    /* The operators: a click selects the second row; the wheel moves the selection; a click
     * on the selected type opens its ops. */
    v.screen = 1 + PANEL_OPS;
    draw_all(&c, &L, &v, &r);
    rect ops = L.panel[PANEL_OPS];
    ck_assert_int_eq(view_mouse(&v, &L, &r.p, MOUSE_CLICK, ops.y + 3, 5), VA_REDRAW);
    ck_assert_int_eq(v.ops_sel, 1);
    draw_all(&c, &L, &v, &r);
    ck_assert_int_eq(view_mouse(&v, &L, &r.p, MOUSE_WHEEL_UP, ops.y + 5, 5), VA_REDRAW);
    ck_assert_int_eq(v.ops_sel, 0);
    draw_all(&c, &L, &v, &r);
    ck_assert_int_eq(view_mouse(&v, &L, &r.p, MOUSE_CLICK, ops.y + 2, 5), VA_REDRAW);
    ck_assert_uint_ne(v.ops_type, 0);
    ck_assert_int_eq(view_mouse(&v, &L, &r.p, MOUSE_CLICK, ops.y + 25, 5), VA_NONE); /* none */
    /* The timeline: a click on a block puts the cursor on that op and stops following. */
    v.screen = 1 + PANEL_TIMELINE;
    draw_all(&c, &L, &v, &r);
    rect tl = L.panel[PANEL_TIMELINE];
    int bx = -1, lane_y = tl.y + 2 + v.tl_rows_above; /* under the steps row */
    canvas_line(&c, lane_y, line, sizeof line);
    for (int x = 16; x < tl.w && bx < 0; x++)
        if (line[x] != ' ')
            bx = x;
    ck_assert_msg(bx > 0, "no block on the first lane: %s", line);
    ck_assert(v.tl_follow);
    ck_assert_int_eq(view_mouse(&v, &L, &r.p, MOUSE_CLICK, lane_y, bx), VA_REDRAW);
    ck_assert(!v.tl_follow);
    ck_assert_uint_ne(v.tl_cursor, 0);
    ck_assert_int_eq(v.tl_lane, 0);
    uint64_t end = v.tl_end_ns;
    ck_assert_int_eq(view_mouse(&v, &L, &r.p, MOUSE_WHEEL_UP, lane_y, bx), VA_REDRAW);
    ck_assert_uint_lt(v.tl_end_ns, end); /* older */
    /* On the help, the wheel scrolls and a click closes it. */
    view_key(&v, VK_F1, &r.p);
    ck_assert_int_eq(view_mouse(&v, &L, &r.p, MOUSE_CLICK, 5, 5), VA_REDRAW);
    ck_assert(!v.help);
    canvas_free(&c);
    free_run(&r);
}
END_TEST

/* Every screen at 80x24, 100x30 and 200x60: the tables' column heads are whole words of their
 * own (none written over another), the tabs and the key bar are there. */
static int head_words_ok(const char *line, const char *const *words, size_t n)
{
    char copy[2048];
    snprintf(copy, sizeof copy, "%s", line);
    for (char *save = NULL, *w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        int known = 0;
        for (size_t i = 0; i < n && !known; i++)
            known = !strcmp(w, words[i]);
        if (!known)
            return 0;
    }
    return 1;
}

START_TEST(test_screens_at_three_sizes)
{
    run r;
    make_run(&r, 0);
    static const int sizes[][2] = {{24, 80}, {30, 100}, {60, 200}};
    static const char *const queue_words[] = {"QUEUE",   "ROLE",   "USAGE", "OVER",  "TIME",
                                              "(newest", "right)", "AVG",   "EMPTY", "VERDICT"};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int rows = sizes[k][0], cols = sizes[k][1];
        canvas c = {0};
        ck_assert_int_eq(canvas_init(&c, rows, cols, &glyphs_ascii), 0);
        for (int s = 0; s < SCREEN__COUNT; s++) {
            view v;
            view_init(&v);
            v.screen = s;
            layout L;
            layout_compute(rows, cols, s, &L);
            ck_assert(!L.too_small);
            canvas_clear(&c);
            frame_draw(&c, &L, &v, &r.p, NULL, ROLE_NORMAL, -1);
            char line[2048];
            canvas_line(&c, 2, line, sizeof line);
            ck_assert_msg(strstr(line, "1 Overview") && strstr(line, "7 Ranks"), "%s", line);
            canvas_line(&c, rows - 1, line, sizeof line);
            ck_assert_msg(strstr(line, "F1Help") && strstr(line, "F10Quit"), "%s", line);
            int queue_heads = 0;
            for (int y = 0; y < rows; y++) {
                canvas_line(&c, y, line, sizeof line);
                const char *q = strstr(line, " QUEUE ");
                if (!q)
                    continue;
                /* The queues' head, up to the overview's separator when there is one. */
                char head[2048];
                snprintf(head, sizeof head, "%s", q);
                char *bar = strchr(head, '|');
                if (bar)
                    *bar = 0;
                ck_assert_msg(head_words_ok(head, queue_words, 10), "%dx%d screen %d: '%s'", cols,
                              rows, s, head);
                queue_heads++;
            }
            if (s == SCREEN_OVERVIEW || s == 1 + PANEL_QUEUES)
                ck_assert_msg(queue_heads == 1, "%dx%d screen %d", cols, rows, s);
        }
        canvas_free(&c);
    }
    free_run(&r);
}
END_TEST

/* The key bar: the screen's keys with the global ones, always on the bottom line, the least
 * needed left out at 80 columns, never cut in the middle of an entry; a question while an
 * action waits for its confirmation. */
START_TEST(test_key_bar)
{
    run r;
    make_run(&r, 0);
    view v;
    canvas c = {0};
    layout L;
    static const int widths[] = {80, 100, 200};
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        int cols = widths[w];
        ck_assert_int_eq(canvas_init(&c, 24, cols, &glyphs_ascii), 0);
        for (int s = 0; s < SCREEN__COUNT; s++) {
            view_init(&v);
            v.screen = s;
            layout_compute(24, cols, s, &L);
            canvas_clear(&c);
            frame_draw(&c, &L, &v, &r.p, NULL, ROLE_NORMAL, -1);
            char bar[1024];
            canvas_line(&c, 23, bar, sizeof bar);
            /* The run's keys and quitting are always there; collecting shows Stop. */
            ck_assert_msg(strstr(bar, "F1Help") && strstr(bar, "F5Stop") &&
                              strstr(bar, "F6Analyse") && strstr(bar, "F10Quit"),
                          "%d cols, screen %d: %s", cols, s, bar);
            if (s == 1 + PANEL_TIMELINE || (s == SCREEN_OVERVIEW && cols >= 100))
                ck_assert_msg(strstr(bar, "W/SZoom") && strstr(bar, "A/DMove"), "%s", bar);
            if (s == 1 + PANEL_OPS)
                ck_assert_msg(strstr(bar, "/Search"), "%s", bar);
            if (s == 1 + PANEL_RANKS)
                ck_assert_msg(strstr(bar, "EnterShow rank"), "%s", bar);
            if (cols >= 200)
                ck_assert_msg(strstr(bar, "TabScreen") && strstr(bar, "SpaceFreeze"), "%s", bar);
            /* Nothing cut: the line ends in blanks. */
            ck_assert_int_eq(bar[cols - 1], ' ');
        }
        canvas_free(&c);
    }
    /* Not collecting: F5 collects at once; collecting: F5 (or c) asks first. */
    view_init(&v);
    ck_assert_int_eq(canvas_init(&c, 24, 80, &glyphs_ascii), 0);
    layout_compute(24, 80, v.screen, &L);
    ck_assert_int_eq(view_key(&v, 'c', &r.p), VA_REDRAW);
    ck_assert_int_eq(v.confirm, VA_STARTSTOP);
    frame_draw(&c, &L, &v, &r.p, NULL, ROLE_NORMAL, -1);
    char bar[1024];
    canvas_line(&c, 23, bar, sizeof bar);
    ck_assert_msg(strstr(bar, "Stop collecting?") && strstr(bar, "y stop"), "%s", bar);
    ck_assert_int_eq(view_key(&v, 'x', &r.p), VA_REDRAW); /* any other key: no */
    ck_assert(!v.confirm);
    ck_assert_int_eq(view_key(&v, VK_F5, &r.p), VA_REDRAW);
    ck_assert_int_eq(view_key(&v, 'y', &r.p), VA_STARTSTOP);
    ck_assert_int_eq(view_key(&v, VK_F5, &r.p), VA_REDRAW);
    ck_assert_int_eq(view_key(&v, VK_F5, &r.p), VA_STARTSTOP); /* the same key again */
    ck_assert_int_eq(view_key(&v, 'q', &r.p), VA_QUIT);
    r.st.state = TS_STATE_STOPPED;
    ck_assert_int_eq(view_key(&v, VK_F5, &r.p), VA_STARTSTOP);
    frame_draw(&c, &L, &v, &r.p, NULL, ROLE_NORMAL, -1);
    canvas_line(&c, 23, bar, sizeof bar);
    ck_assert_msg(strstr(bar, "F5Collect"), "%s", bar);
    /* The analysis always asks: it replaces the report folder. */
    ck_assert_int_eq(view_key(&v, 'r', &r.p), VA_REDRAW);
    frame_draw(&c, &L, &v, &r.p, NULL, ROLE_NORMAL, -1);
    canvas_line(&c, 23, bar, sizeof bar);
    ck_assert_msg(strstr(bar, "Run the analysis?"), "%s", bar);
    ck_assert_int_eq(view_key(&v, 'Y', &r.p), VA_ANALYSE);
    ck_assert_int_eq(view_key(&v, VK_F6, &r.p), VA_REDRAW);
    ck_assert_int_eq(view_key(&v, 'n', &r.p), VA_REDRAW);
    ck_assert(!v.confirm);
    /* No run key is reachable from the navigation keys on any screen. */
    for (int s = 0; s < SCREEN__COUNT; s++) {
        view_init(&v);
        v.screen = s;
        const int nav[] = {'w', 'a', 's', 'd', 'W', 'A', 'S', 'D'};
        for (size_t k = 0; k < sizeof nav / sizeof nav[0]; k++) {
            int act = view_key(&v, nav[k], &r.p);
            ck_assert_msg(act != VA_STARTSTOP && act != VA_ANALYSE && !v.confirm,
                          "screen %d key %c", s, nav[k]);
        }
    }
    canvas_free(&c);
    free_run(&r);
}
END_TEST

START_TEST(test_glyph_tables)
{
    const glyphs *tables[2] = {&glyphs_ascii, &glyphs_utf8};
    for (int t = 0; t < 2; t++) {
        const glyphs *g = tables[t];
        /* Parts that colors tell apart differ by glyph too (monochrome shows them). */
        uint32_t bar[] = {g->interval, g->fpbp, g->tail, g->unknown};
        for (int i = 0; i < 4; i++)
            for (int j = i + 1; j < 4; j++)
                ck_assert_uint_ne(bar[i], bar[j]);
        for (int i = 0; i < 5; i++)
            for (int j = i + 1; j < 5; j++)
                ck_assert_uint_ne(g->shade[i], g->shade[j]);
        ck_assert(g->user != g->system && g->system != g->iowait && g->user != g->iowait);
        ck_assert_uint_ne(g->edge, g->dense);
    }
    const uint32_t *p = (const uint32_t *)(const void *)&glyphs_ascii.hline;
    const uint32_t *end = (const uint32_t *)(const void *)(&glyphs_ascii.down + 1);
    for (; p < end; p++)
        ck_assert_uint_lt(*p, 0x80);
}
END_TEST

START_TEST(test_format)
{
    char b[32];
    format_duration(850, b, sizeof b);
    ck_assert_str_eq(b, "850 ns");
    format_duration(12345, b, sizeof b);
    ck_assert_str_eq(b, "12.3 us");
    format_duration(4.56e6, b, sizeof b);
    ck_assert_str_eq(b, "4.56 ms");
    format_duration(1.5e9, b, sizeof b);
    ck_assert_str_eq(b, "1.50 s");
    format_duration(-1, b, sizeof b);
    ck_assert_str_eq(b, "-");
    format_count(950, b, sizeof b);
    ck_assert_str_eq(b, "950");
    format_count(1.02e6, b, sizeof b);
    ck_assert_str_eq(b, "1.02M");
    format_bytes(300.0 * 1024 * 1024, b, sizeof b);
    ck_assert_str_eq(b, "300 MiB");
    format_elapsed(90061, b, sizeof b);
    ck_assert_str_eq(b, "1d 01:01:01");
}
END_TEST

/* ---- Snapshots (--once) ----------------------------------------------------------------- */

START_TEST(test_snapshot_text)
{
    run r;
    make_run(&r, 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    snapshot_text(f, &r.p, &glyphs_ascii, 120);
    fclose(f);
    static const char *const parts[] = {"trainer",  "pid 4242",    "Step trace",  "Operators",
                                        "MatMul",   "Data queues", "batch_queue", "CPU and memory",
                                        "Timeline", "train"};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        ck_assert_msg(strstr(buf, parts[i]), "missing %s in:\n%s", parts[i], buf);
    for (const unsigned char *p = (const unsigned char *)buf; *p; p++)
        ck_assert_msg(*p < 0x80 && (*p >= 0x20 || *p == '\n'), "byte %#x", *p);
    free(buf);
    free_run(&r);
}
END_TEST

/* top --once --json of r, parsed; *buf its text (the caller frees both). */
static cJSON *snapshot_of(run *r, char **buf)
{
    size_t len = 0;
    *buf = NULL;
    FILE *f = open_memstream(buf, &len);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(snapshot_json(f, &r->p), 0);
    fclose(f);
    cJSON *o = cJSON_Parse(*buf);
    ck_assert_msg(o != NULL, "not JSON:\n%s", *buf);
    return o;
}

START_TEST(test_snapshot_json)
{
    run r;
    make_run(&r, 1);
    char *buf;
    cJSON *o = snapshot_of(&r, &buf);
    ck_assert_str_eq(cJSON_GetObjectItem(o, "process")->valuestring, "trainer");
    ck_assert_str_eq(cJSON_GetObjectItem(o, "state")->valuestring, "collecting");
    ck_assert_int_eq(cJSON_GetObjectItem(o, "missed")->valueint, 17);
    ck_assert_int_eq(cJSON_GetObjectItem(o, "lost_threads")->valueint, 0);
    ck_assert_ptr_null(cJSON_GetObjectItem(o, "lost_most"));
    cJSON *steps = cJSON_GetObjectItem(o, "steps");
    /* summary.json's shapes and units: steps counted as "count", times in microseconds. */
    ck_assert_int_eq(cJSON_GetObjectItem(steps, "count")->valueint, STEPS);
    ck_assert_ptr_nonnull(cJSON_GetObjectItem(steps, "avg_total_us"));
    ck_assert_msg(!strstr(buf, "_ms\""), "a time in milliseconds:\n%s", buf);
    ck_assert_int_eq(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(steps, "slowest"), 0), "step")
            ->valueint,
        SLOW_STEP);
    cJSON *types = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "ops"), "top_types");
    ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(types, 0), "type")->valuestring,
                     "MatMul");
    ck_assert_int_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(types, 0), "count")->valueint, 40);
    /* The hostile name comes out as valid text with its bytes escaped. */
    int found = 0;
    cJSON *ops = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "ops"), "top_ops"), *it;
    cJSON_ArrayForEach(it, ops)
    {
        const char *n = cJSON_GetObjectItem(it, "op")->valuestring;
        if (strstr(n, "evil")) {
            found = 1;
            ck_assert_ptr_nonnull(strstr(n, "\\xff\\xfe"));
        }
    }
    ck_assert(found);
    cJSON *q = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "queues"), 0);
    ck_assert_str_eq(cJSON_GetObjectItem(q, "queue")->valuestring, "batch_queue");
    ck_assert_str_eq(cJSON_GetObjectItem(q, "role")->valuestring, "host");
    cJSON *cpu = cJSON_GetObjectItem(o, "cpu");
    ck_assert_int_eq(cJSON_GetObjectItem(cpu, "cpus")->valueint, 4);
    cJSON *procs = cJSON_GetObjectItem(cpu, "processes");
    ck_assert_int_eq(cJSON_GetArraySize(procs), 3);
    ck_assert_int_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(procs, 0), "pid")->valueint, 5151);
    cJSON *tl = cJSON_GetObjectItem(o, "timeline");
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(tl, "lanes")), 2);
    cJSON_Delete(o);
    free(buf);
    /* A thread that lost events: the one that lost most, and at what rate it emitted then. */
    r.st.lost_threads = 3;
    r.st.worst = (lane_loss){.tid = 812, .lost = 4000, .first_ns = 1, .rate = 48000000};
    o = snapshot_of(&r, &buf);
    ck_assert_int_eq(cJSON_GetObjectItem(o, "lost_threads")->valueint, 3);
    cJSON *most = cJSON_GetObjectItem(o, "lost_most");
    ck_assert_int_eq(cJSON_GetObjectItem(most, "tid")->valueint, 812);
    ck_assert_int_eq(cJSON_GetObjectItem(most, "lost")->valueint, 4000);
    ck_assert_int_eq(cJSON_GetObjectItem(most, "offered_per_s")->valueint, 48000000);
    cJSON_Delete(o);
    free(buf);
    free_run(&r);
}
END_TEST

/* Whether every key of want is in got with the same type, objects and first array elements
 * compared key by key; and whether got has no other key than want's and those in extra. */
static void same_keys(const cJSON *want, const cJSON *got, const char *const *extra,
                      const char *where)
{
    const cJSON *w;
    cJSON_ArrayForEach(w, want)
    {
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(got, w->string);
        ck_assert_msg(g != NULL, "%s: top --once --json has no \"%s\"", where, w->string);
        ck_assert_msg((g->type & 0xff) == (w->type & 0xff) || (cJSON_IsBool(g) && cJSON_IsBool(w)),
                      "%s: \"%s\" is not of the same type", where, w->string);
        if (cJSON_IsObject(w))
            same_keys(w, g, extra, w->string);
        if (cJSON_IsArray(w) && cJSON_GetArraySize(w) > 0) {
            ck_assert_int_gt(cJSON_GetArraySize(g), 0);
            same_keys(cJSON_GetArrayItem(w, 0), cJSON_GetArrayItem(g, 0), extra, w->string);
        }
    }
    const cJSON *g;
    cJSON_ArrayForEach(g, got)
    {
        int known = cJSON_GetObjectItemCaseSensitive(want, g->string) != NULL;
        for (size_t i = 0; !known && extra[i]; i++)
            known = !strcmp(g->string, extra[i]);
        ck_assert_msg(known, "%s: top --once --json has \"%s\", which summary.json has not", where,
                      g->string);
    }
}

/* top --once --json's "cpu" and "memory" have summary.json's keys (the report's section
 * builders), with only the live view's additions besides. */
START_TEST(test_snapshot_json_cpu_memory_keys)
{
    run r;
    make_run(&r, 0);
    char *buf;
    cJSON *o = snapshot_of(&r, &buf);
    cJSON *cpu = report_json_cpu(r.a, 0, 0), *mem = report_json_memory(r.a);
    ck_assert_ptr_nonnull(cpu);
    ck_assert_ptr_nonnull(mem);
    /* The fixture has what every key needs: descendant processes, samples, host memory. */
    ck_assert_int_gt(cJSON_GetArraySize(cJSON_GetObjectItem(cpu, "processes")), 0);
    ck_assert_ptr_nonnull(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "memory"), "host_rss_bytes"));
    ck_assert_ptr_nonnull(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "cpu"), "process_user_pct"));
    static const char *const live[] = {"threads", "last_cpu_pct", NULL};
    same_keys(cpu, cJSON_GetObjectItem(o, "cpu"), live, "cpu");
    same_keys(mem, cJSON_GetObjectItem(o, "memory"), live, "memory");
    cJSON_Delete(cpu);
    cJSON_Delete(mem);
    cJSON_Delete(o);
    free(buf);
    free_run(&r);
}
END_TEST

int main(void)
{
    /* Double-width characters need a UTF-8 locale for wcwidth, as in termsight top. */
    setlocale(LC_ALL, "C.UTF-8");
    Suite *s = suite_create("tui_panels");
    TCase *tc = tcase_create("panels");
    tcase_add_test(tc, test_steps_bars);
    tcase_add_test(tc, test_steps_full_table_and_scroll);
    tcase_add_test(tc, test_steps_empty);
    tcase_add_test(tc, test_ops_types);
    tcase_add_test(tc, test_ops_choose_type_and_back);
    tcase_add_test(tc, test_ops_search);
    tcase_add_test(tc, test_ops_kernels);
    tcase_add_test(tc, test_hostile_names);
    tcase_add_test(tc, test_queues_heatmap);
    tcase_add_test(tc, test_cpu_gauges);
    tcase_add_test(tc, test_timeline_lanes_and_cursor);
    tcase_add_test(tc, test_timeline_wasd);
    tcase_add_test(tc, test_tlring_bounded);
    tcase_add_test(tc, test_header);
    tcase_add_test(tc, test_key_bar);
    tcase_add_test(tc, test_timeline_far_and_named);
    tcase_add_test(tc, test_timeline_tracks_hostile_values);
    tcase_add_test(tc, test_mouse);
    tcase_add_test(tc, test_help_and_header_figures);
    tcase_add_test(tc, test_screens_at_three_sizes);
    tcase_add_test(tc, test_frame_and_screens);
    tcase_add_test(tc, test_glyph_tables);
    tcase_add_test(tc, test_format);
    tcase_add_test(tc, test_snapshot_text);
    tcase_add_test(tc, test_snapshot_json);
    tcase_add_test(tc, test_snapshot_json_cpu_memory_keys);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
