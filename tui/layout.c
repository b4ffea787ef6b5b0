/* layout: where everything goes, as a pure function of the terminal size and the screen shown
 * (nvtop's window geometry), tested over a grid of sizes. */
#include "tui_internal.h"

#include <string.h>

#define HEADER_ROWS 2

/* The overview: step trace | operators, data queues | CPU and memory, then the timeline across
 * the whole width. The bands share the body by these shares, each with a floor that fits its
 * panel's title and a few rows at 80x24. The ranks have a screen of their own. */
static void overview(layout *L)
{
    rect b = L->body;
    int tl = b.h * 35 / 100, mid = b.h * 25 / 100;
    tl = tl < 7 ? 7 : tl;
    mid = mid < 6 ? 6 : mid;
    int top = b.h - tl - mid;
    int left = (b.w - 1) / 2, right = b.w - left - 1;

    L->panel[PANEL_STEPS] = (rect){b.y, b.x, top, left};
    L->panel[PANEL_OPS] = (rect){b.y, b.x + left + 1, top, right};
    L->rule[0] = (rect){b.y, b.x + left, top, 1};
    L->panel[PANEL_QUEUES] = (rect){b.y + top, b.x, mid, left};
    L->panel[PANEL_CPU] = (rect){b.y + top, b.x + left + 1, mid, right};
    L->rule[1] = (rect){b.y + top, b.x + left, mid, 1};
    L->panel[PANEL_TIMELINE] = (rect){b.y + top + mid, b.x, tl, b.w};
}

void layout_compute(int rows, int cols, int screen, layout *L)
{
    memset(L, 0, sizeof *L);
    L->rows = rows;
    L->cols = cols;
    if (rows < LAYOUT_MIN_ROWS || cols < LAYOUT_MIN_COLS) {
        L->too_small = 1;
        return;
    }
    L->header = (rect){0, 0, HEADER_ROWS, cols};
    L->tabs = (rect){HEADER_ROWS, 0, 1, cols};
    L->body = (rect){HEADER_ROWS + 1, 0, rows - HEADER_ROWS - 2, cols};
    L->status = (rect){rows - 1, 0, 1, cols};
    if (screen > SCREEN_OVERVIEW && screen < SCREEN__COUNT)
        L->panel[screen - 1] = L->body;
    else
        overview(L);
}
