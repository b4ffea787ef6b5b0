/* Panels drawn into canvases from crafted analyses (tui_fixture.c), read back as text (no
 * curses): the step trace, operators (types, ops, sort, search, Choose Type), data queues, CPU
 * and memory, the timeline with W/A/S/D and its cursor, hostile names, and the --once
 * snapshots. */
#include "report.h"
#include "tui_fixture.h"

#include <cJSON.h>
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
    /* Under the bars, the GPU row: step 1 alone has device work, a kernel of 0.7 ms in its
     * 3.5 ms (20 %: the second shade), and no launch record: the idle time is the host's. */
    canvas_line(&c, 12 - 2, line, sizeof line);
    ck_assert_int_eq(line[0], '-');
    ck_assert(line[1] == ' ' || line[1] == 0);
    ck_assert_int_eq(canvas_role_at(&c, 12 - 2, 0), ROLE_WARN);
    ck_assert_canvas_has(&c, "(on the host)");
    /* Bottom to top: interval, compute, tail, for a regular step too. */
    int bottom = 12 - 3;
    ck_assert_int_eq(canvas_role_at(&c, bottom, 0), ROLE_FPBP); /* interval 0.1 of 3.5 ms */
    canvas_line(&c, bottom, line, sizeof line);
    ck_assert_int_eq(line[0], '#');
    /* The average line crosses above the regular bars. */
    ck_assert_msg(strchr(dump(&c), '-') != NULL, "no average line:\n%s", dump_text);
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
    ck_assert_canvas_has(&c, "timeline.json opens"); /* the file the report writes */
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
    cJSON *steps = cJSON_GetObjectItem(o, "steps"), *it;
    /* summary.json's shapes and units: steps counted as "count", times in microseconds. */
    ck_assert_int_eq(cJSON_GetObjectItem(steps, "count")->valueint, STEPS);
    ck_assert_ptr_nonnull(cJSON_GetObjectItem(steps, "avg_total_us"));
    ck_assert_msg(!strstr(buf, "_ms\""), "a time in milliseconds:\n%s", buf);
    ck_assert_int_eq(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(steps, "slowest"), 0), "step")
            ->valueint,
        SLOW_STEP);
    /* The step on the device: step 1 alone ran a kernel (700 us). */
    cJSON *dev = cJSON_GetObjectItem(steps, "device");
    ck_assert_int_eq(cJSON_GetObjectItem(dev, "steps")->valueint, 1);
    ck_assert_double_eq_tol(cJSON_GetObjectItem(dev, "busy_us")->valuedouble, 700, 1e-6);
    cJSON *recent = cJSON_GetObjectItem(steps, "recent");
    int with_device = 0;
    cJSON_ArrayForEach(it, recent)
    {
        cJSON *d = cJSON_GetObjectItem(it, "device");
        ck_assert_ptr_nonnull(d);
        if (cJSON_IsNull(d))
            continue;
        with_device++;
        ck_assert_int_eq(cJSON_GetObjectItem(it, "step")->valueint, 1);
        ck_assert_double_eq_tol(cJSON_GetObjectItem(d, "busy_us")->valuedouble, 700, 1e-6);
    }
    ck_assert_int_eq(with_device, 1);
    cJSON *types = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "ops"), "top_types");
    ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(types, 0), "type")->valuestring,
                     "MatMul");
    ck_assert_int_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(types, 0), "count")->valueint, 40);
    /* The hostile name comes out as valid text with its bytes escaped. */
    int found = 0;
    cJSON *ops = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "ops"), "top_ops");
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
    tcase_add_test(tc, test_timeline_far_and_named);
    tcase_add_test(tc, test_timeline_tracks_hostile_values);
    tcase_add_test(tc, test_snapshot_text);
    tcase_add_test(tc, test_snapshot_json);
    tcase_add_test(tc, test_snapshot_json_cpu_memory_keys);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
