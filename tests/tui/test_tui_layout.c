/* Layout as a pure function of the terminal size: over a grid of sizes from 80x24 up, every
 * rectangle lies inside the terminal, none overlaps another, the body is covered whole, every
 * panel has room for its title and rows; below 80x24 the layout says "too small". */
#include "tui_internal.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static int overlap(rect a, rect b)
{
    return a.h > 0 && a.w > 0 && b.h > 0 && b.w > 0 && a.y < b.y + b.h && b.y < a.y + a.h &&
           a.x < b.x + b.w && b.x < a.x + a.w;
}

static int inside(rect a, int rows, int cols)
{
    return a.y >= 0 && a.x >= 0 && a.h >= 0 && a.w >= 0 && a.y + a.h <= rows && a.x + a.w <= cols;
}

/* Every rectangle the layout hands out, body excluded (the panels share it). */
static int all_rects(const layout *L, rect *out)
{
    int n = 0;
    out[n++] = L->header;
    out[n++] = L->tabs;
    out[n++] = L->status;
    for (int i = 0; i < PANEL__COUNT; i++)
        out[n++] = L->panel[i];
    for (int i = 0; i < 2; i++)
        out[n++] = L->rule[i];
    return n;
}

static void check_size(int rows, int cols, int screen)
{
    layout L;
    layout_compute(rows, cols, screen, &L);
    ck_assert_msg(!L.too_small, "%dx%d screen %d: too small", cols, rows, screen);
    rect r[16];
    int n = all_rects(&L, r);
    long area = 0;
    for (int i = 0; i < n; i++) {
        ck_assert_msg(inside(r[i], rows, cols), "%dx%d screen %d: rect %d (%d,%d %dx%d) outside",
                      cols, rows, screen, i, r[i].x, r[i].y, r[i].w, r[i].h);
        for (int j = i + 1; j < n; j++)
            ck_assert_msg(!overlap(r[i], r[j]), "%dx%d screen %d: rects %d and %d overlap", cols,
                          rows, screen, i, j);
        area += (long)r[i].h * r[i].w;
    }
    ck_assert_msg(area == (long)rows * cols, "%dx%d screen %d: %ld of %ld cells covered", cols,
                  rows, screen, area, (long)rows * cols);
    ck_assert(inside(L.body, rows, cols));
    for (int i = 0; i < PANEL__COUNT; i++) {
        if (screen == SCREEN_OVERVIEW && i == PANEL_RANKS) {
            ck_assert_int_eq(L.panel[i].h, 0); /* a screen of its own */
        } else if (screen == SCREEN_OVERVIEW) {
            ck_assert_msg(L.panel[i].h >= 6 && L.panel[i].w >= 39, "%dx%d: panel %d is %dx%d", cols,
                          rows, i, L.panel[i].w, L.panel[i].h);
        } else if (i == screen - 1) {
            ck_assert(L.panel[i].y == L.body.y && L.panel[i].h == L.body.h && L.panel[i].w == cols);
        } else {
            ck_assert_int_eq(L.panel[i].h, 0);
        }
    }
    ck_assert_int_eq(L.status.y, rows - 1);
}

START_TEST(test_grid)
{
    static const int rows[] = {24, 25, 26, 27, 30, 31, 33, 40, 41, 50, 60, 75, 100, 150, 300};
    static const int cols[] = {80, 81, 82, 83, 99, 100, 119, 120, 121, 132, 160, 200, 255, 400};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        for (size_t j = 0; j < sizeof cols / sizeof cols[0]; j++)
            for (int s = 0; s < SCREEN__COUNT; s++)
                check_size(rows[i], cols[j], s);
}
END_TEST

START_TEST(test_every_size_near_minimum)
{
    for (int r = 24; r <= 64; r++)
        for (int c = 80; c <= 180; c++)
            for (int s = 0; s < SCREEN__COUNT; s++)
                check_size(r, c, s);
}
END_TEST

START_TEST(test_too_small)
{
    static const int sizes[][2] = {{23, 80},  {24, 79},  {1, 1},    {0, 0},
                                   {-5, 100}, {100, -1}, {10, 200}, {200, 40}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        layout L;
        layout_compute(sizes[i][0], sizes[i][1], SCREEN_OVERVIEW, &L);
        ck_assert_msg(L.too_small, "%dx%d", sizes[i][1], sizes[i][0]);
        for (int p = 0; p < PANEL__COUNT; p++)
            ck_assert_int_eq(L.panel[p].h, 0);
    }
}
END_TEST

START_TEST(test_too_small_page)
{
    /* The page says so at any size, even one narrower than its message. */
    static const int sizes[][2] = {{23, 80}, {10, 30}, {3, 10}, {1, 1}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        canvas c;
        ck_assert_int_eq(canvas_init(&c, sizes[i][0], sizes[i][1], &glyphs_ascii), 0);
        frame_too_small(&c, sizes[i][0], sizes[i][1]);
        char line[512];
        int found = 0;
        for (int y = 0; y < c.rows; y++) {
            canvas_line(&c, y, line, sizeof line);
            found |= strstr(line, "too") != NULL;
        }
        ck_assert_msg(found || sizes[i][1] < 4, "%dx%d", sizes[i][1], sizes[i][0]);
        canvas_free(&c);
    }
}
END_TEST

START_TEST(test_bad_screen_is_overview)
{
    layout a, b;
    layout_compute(40, 120, SCREEN_OVERVIEW, &a);
    layout_compute(40, 120, 99, &b);
    ck_assert_mem_eq(&a, &b, sizeof a);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tui_layout");
    TCase *tc = tcase_create("layout");
    tcase_add_test(tc, test_grid);
    tcase_add_test(tc, test_every_size_near_minimum);
    tcase_add_test(tc, test_too_small);
    tcase_add_test(tc, test_too_small_page);
    tcase_add_test(tc, test_bad_screen_is_overview);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
