/* The frame around the panels, drawn from the crafted run (tui_fixture.c) and read back as text
 * (no curses): the header and its figures, the tabs and screens at several sizes, the help, the
 * key bar, the mouse, the scroll keys, the glyph tables and the formatting of figures. */
#include "tui_fixture.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

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

/* The scroll keys of the lists (view_scroll serves the five): which each takes, on the full
 * screen or the overview, and where they leave its position. */
static int *scroll_pos(view *v, int panel)
{
    switch (panel) {
    case PANEL_CPU:
        return &v->cpu_top;
    case PANEL_QUEUES:
        return &v->queues_top;
    case PANEL_RANKS:
        return &v->ranks_sel;
    case PANEL_STEPS:
        return &v->steps_back;
    default:
        return &v->ops_sel;
    }
}

#define OLDEST 9999 /* back past every step the panel keeps (the draw stops at the oldest) */

START_TEST(test_scroll_keys)
{
    static const struct {
        int panel, nranks, key, full, from, taken, to;
    } cases[] = {
        /* CPU and queues: Up, Down and Home, only on their own screen; the draw bounds the end. */
        {PANEL_CPU, 0, VK_UP, 1, 0, 1, 0},
        {PANEL_CPU, 0, VK_UP, 1, 5, 1, 4},
        {PANEL_CPU, 0, VK_DOWN, 1, 5, 1, 6},
        {PANEL_CPU, 0, VK_HOME, 1, 5, 1, 0},
        {PANEL_CPU, 0, VK_NPAGE, 1, 5, 0, 5},
        {PANEL_CPU, 0, VK_END, 1, 5, 0, 5},
        {PANEL_CPU, 0, VK_DOWN, 0, 5, 0, 5},
        {PANEL_QUEUES, 0, VK_UP, 1, 3, 1, 2},
        {PANEL_QUEUES, 0, VK_UP, 1, 0, 1, 0},
        {PANEL_QUEUES, 0, VK_DOWN, 1, 3, 1, 4},
        {PANEL_QUEUES, 0, VK_PPAGE, 1, 3, 0, 3},
        {PANEL_QUEUES, 0, VK_LEFT, 1, 3, 0, 3},
        /* Ranks: 25 rows, pages of 10, bounded both ways; none: End stays at 0. */
        {PANEL_RANKS, 25, VK_DOWN, 1, 23, 1, 24},
        {PANEL_RANKS, 25, VK_DOWN, 1, 24, 1, 24},
        {PANEL_RANKS, 25, VK_NPAGE, 1, 3, 1, 13},
        {PANEL_RANKS, 25, VK_NPAGE, 1, 20, 1, 24},
        {PANEL_RANKS, 25, VK_PPAGE, 1, 13, 1, 3},
        {PANEL_RANKS, 25, VK_PPAGE, 1, 7, 1, 0},
        {PANEL_RANKS, 25, VK_END, 1, 0, 1, 24},
        {PANEL_RANKS, 25, VK_HOME, 1, 9, 1, 0},
        {PANEL_RANKS, 25, VK_DOWN, 0, 3, 0, 3},
        {PANEL_RANKS, 0, VK_END, 1, 0, 1, 0},
        {PANEL_RANKS, 0, VK_DOWN, 1, 0, 1, 0},
        /* Steps, back in time from the newest (pages of 4): Left and PgUp older, Home the
         * oldest kept, Right, PgDn and End newer; Up and Down are not theirs. */
        {PANEL_STEPS, 0, VK_LEFT, 1, 0, 1, 1},
        {PANEL_STEPS, 0, VK_RIGHT, 1, 0, 1, 0},
        {PANEL_STEPS, 0, VK_RIGHT, 1, 6, 1, 5},
        {PANEL_STEPS, 0, VK_PPAGE, 1, 2, 1, 6},
        {PANEL_STEPS, 0, VK_NPAGE, 1, 6, 1, 2},
        {PANEL_STEPS, 0, VK_NPAGE, 1, 3, 1, 0},
        {PANEL_STEPS, 0, VK_HOME, 1, 0, 1, OLDEST},
        {PANEL_STEPS, 0, VK_END, 1, 9, 1, 0},
        {PANEL_STEPS, 0, VK_UP, 1, 9, 0, 9},
        {PANEL_STEPS, 0, VK_LEFT, 0, 0, 0, 0},
        /* Operators: 12 rows, pages of 5, on the overview too. */
        {PANEL_OPS, 0, VK_DOWN, 0, 10, 1, 11},
        {PANEL_OPS, 0, VK_DOWN, 1, 11, 1, 11},
        {PANEL_OPS, 0, VK_NPAGE, 1, 9, 1, 11},
        {PANEL_OPS, 0, VK_PPAGE, 1, 9, 1, 4},
        {PANEL_OPS, 0, VK_PPAGE, 1, 3, 1, 0},
        {PANEL_OPS, 0, VK_END, 0, 0, 1, 11},
        {PANEL_OPS, 0, VK_HOME, 1, 7, 1, 0},
        {PANEL_OPS, 0, VK_UP, 0, 0, 1, 0},
        {PANEL_OPS, 0, VK_LEFT, 1, 3, 0, 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ranks_table t = {.n = (size_t)cases[i].nranks};
        panel_ctx p = {.rk = &t};
        view v;
        view_init(&v);
        v.steps_page = 4;
        v.ops_page = 5;
        v.ops_rows = 12;
        v.ops_sel_id = 7;
        int *pos = scroll_pos(&v, cases[i].panel);
        *pos = cases[i].from;
        int taken = panels[cases[i].panel]->key(&p, &v, cases[i].key, cases[i].full);
        int at = cases[i].to == OLDEST ? *pos >= 100 : *pos == cases[i].to;
        ck_assert_msg(taken == cases[i].taken && at,
                      "case %zu: key %#o took %d, position %d (want %d, %d)", i, cases[i].key,
                      taken, *pos, cases[i].taken, cases[i].to);
        /* The operators' selection is a row now: the draw finds its id again. */
        if (cases[i].panel == PANEL_OPS)
            ck_assert_uint_eq(v.ops_sel_id, taken ? 0 : 7);
    }
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

int main(void)
{
    Suite *s = suite_create("tui_frame");
    TCase *tc = tcase_create("frame");
    tcase_add_test(tc, test_header);
    tcase_add_test(tc, test_key_bar);
    tcase_add_test(tc, test_scroll_keys);
    tcase_add_test(tc, test_mouse);
    tcase_add_test(tc, test_help_and_header_figures);
    tcase_add_test(tc, test_screens_at_three_sizes);
    tcase_add_test(tc, test_frame_and_screens);
    tcase_add_test(tc, test_glyph_tables);
    tcase_add_test(tc, test_format);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
