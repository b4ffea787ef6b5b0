/* view: what the user has chosen to look at, and the keys that change it. No curses and no
 * data of its own: keys arrive as numbers (curses' numbering) and panels are asked about the
 * keys that are theirs, so the room's tests drive it directly. */
#include "tui_internal.h"

#include <string.h>

void view_init(view *v)
{
    memset(v, 0, sizeof *v);
    v->screen = SCREEN_OVERVIEW;
    v->ops_by_type = 1;
    v->ops_sort = OP_SORT_TOTAL;
    v->tl_follow = 1;
}

int view_scroll(const scroll_keys *s, int key, int *pos)
{
    /* Keys: a row towards 0 and away from it, a page towards and away, then 0 and the last. */
    static const int keys[2][6] = {{VK_UP, VK_DOWN, VK_PPAGE, VK_NPAGE, VK_HOME, VK_END},
                                   {VK_RIGHT, VK_LEFT, VK_NPAGE, VK_PPAGE, VK_END, VK_HOME}};
    const int *k = keys[s->back_in_time != 0];
    int p = *pos, page = s->page, last = s->last, end = last > 0 ? last : 0;
    if (key == k[0])
        p = p > 0 ? p - 1 : 0;
    else if (key == k[1])
        p = p < last ? p + 1 : p;
    else if (page > 0 && key == k[2])
        p = p > page ? p - page : 0;
    else if (page > 0 && key == k[3])
        p = p <= last - page ? p + page : end;
    else if (key == k[4])
        p = 0;
    else if (last != SCROLL_OPEN && key == k[5])
        p = end;
    else
        return 0;
    *pos = p;
    return 1;
}

/* Typing into the operators' search. */
static int search_key(view *v, int key)
{
    size_t n = strlen(v->search);
    switch (key) {
    case VK_ENTER:
    case '\r':
    case VK_ENTER_KP:
        v->searching = 0;
        break;
    case VK_ESC:
        memcpy(v->search, v->search_before, sizeof v->search);
        v->searching = 0;
        break;
    case VK_BACKSPACE:
    case VK_BACKSPACE_ASCII:
    case 8:
        if (n)
            v->search[n - 1] = 0;
        break;
    default:
        /* Printable ASCII only: the search matches bytes of names, case-insensitively. */
        if (key >= 0x20 && key < 0x7f && n + 1 < sizeof v->search) {
            v->search[n] = (char)key;
            v->search[n + 1] = 0;
        }
        break;
    }
    v->ops_sel = 0;
    v->ops_sel_id = 0;
    return VA_REDRAW;
}

/* The keys that change the run rather than the view: function keys, each with a letter away
 * from the navigation keys (htop's way); a stop or an analysis waits for 'y' (or the same key
 * again), any other key cancels it. */
static int is_collect_key(int key)
{
    return key == VK_F5 || key == 'c';
}

static int is_analyse_key(int key)
{
    return key == VK_F6 || key == 'r';
}

int view_key(view *v, int key, const panel_ctx *p)
{
    if (v->searching)
        return search_key(v, key);
    if (v->confirm) {
        int action = v->confirm;
        v->confirm = 0;
        if (key == 'y' || key == 'Y' || (action == VA_STARTSTOP && is_collect_key(key)) ||
            (action == VA_ANALYSE && is_analyse_key(key)))
            return action;
        return VA_REDRAW; /* cancelled */
    }
    if (key == 'q' || key == VK_F10)
        return VA_QUIT;
    if (v->help) {
        /* Scrolled by the arrows and pages; any other key closes it. */
        int page = v->help_page > 1 ? v->help_page : 1;
        switch (key) {
        case VK_UP:
            v->help_top--;
            return VA_REDRAW;
        case VK_DOWN:
            v->help_top++;
            return VA_REDRAW;
        case VK_PPAGE:
            v->help_top -= page;
            return VA_REDRAW;
        case VK_NPAGE:
            v->help_top += page;
            return VA_REDRAW;
        default:
            v->help = 0;
            return VA_REDRAW;
        }
    }
    if (v->notice) {
        v->notice = 0;
        return VA_REDRAW;
    }
    switch (key) {
    case '?':
    case 'h':
    case VK_F1:
        v->help = 1;
        v->help_top = 0;
        return VA_REDRAW;
    case VK_F5:
    case 'c':
        if (p && p->st && !p->st->gone && p->st->state == TS_STATE_COLLECTING) {
            v->confirm = VA_STARTSTOP; /* a stop ends the window: asked first */
            return VA_REDRAW;
        }
        return VA_STARTSTOP;
    case VK_F6:
    case 'r':
        v->confirm = VA_ANALYSE; /* it replaces the report folder: asked first */
        return VA_REDRAW;
    case VK_F7:
    case 'p':
        return VA_SNAPSHOT;
    case ' ':
        v->frozen = !v->frozen;
        return VA_FREEZE;
    case VK_TAB:
        v->screen = (v->screen + 1) % SCREEN__COUNT;
        return VA_REDRAW;
    case VK_BTAB:
        v->screen = (v->screen + SCREEN__COUNT - 1) % SCREEN__COUNT;
        return VA_REDRAW;
    case VK_CTRL_L:
        return VA_REPAINT;
    default:
        break;
    }
    if (key >= '1' && key < '1' + SCREEN__COUNT) {
        v->screen = key - '1';
        return VA_REDRAW;
    }
    if (v->screen == 1 + PANEL_RANKS && (key == VK_ENTER || key == '\r' || key == VK_ENTER_KP))
        return p->rk && p->rk->n ? VA_RANK : VA_NONE;
    if (v->screen != SCREEN_OVERVIEW)
        return panels[v->screen - 1]->key(p, v, key, 1) ? VA_REDRAW : VA_NONE;
    if (panels[PANEL_OPS]->key(p, v, key, 0) || panels[PANEL_TIMELINE]->key(p, v, key, 0))
        return VA_REDRAW;
    return VA_NONE;
}

static int inside(rect r, int y, int x)
{
    return r.h > 0 && y >= r.y && y < r.y + r.h && x >= r.x && x < r.x + r.w;
}

int view_mouse(view *v, const layout *L, const panel_ctx *p, int kind, int y, int x)
{
    if (!kind || L->too_small || v->searching)
        return VA_NONE;
    if (v->help && kind != MOUSE_CLICK) /* the wheel scrolls the help */
        return view_key(v, kind == MOUSE_WHEEL_UP ? VK_UP : VK_DOWN, p);
    if (v->help || v->notice || v->confirm)
        return kind == MOUSE_CLICK ? view_key(v, VK_ESC, p) : VA_NONE; /* closes, or: no */
    if (kind == MOUSE_CLICK && inside(L->tabs, y, x)) {
        int s = frame_tab_at(L->tabs.w, x - L->tabs.x);
        if (s < 0 || s == v->screen)
            return VA_NONE;
        v->screen = s;
        return VA_REDRAW;
    }
    if (kind == MOUSE_CLICK && inside(L->status, y, x)) {
        for (int i = 0; i < v->nbar; i++)
            if (x - L->status.x >= v->bar[i].x0 && x - L->status.x < v->bar[i].x1)
                return view_key(v, v->bar[i].key, p);
        return VA_NONE;
    }
    int full = v->screen != SCREEN_OVERVIEW;
    for (int i = 0; i < PANEL__COUNT; i++) {
        rect r = L->panel[i];
        if (!inside(r, y, x))
            continue;
        const panel_class *pc = panels[i];
        if (kind == MOUSE_CLICK)
            return pc->click ? pc->click(p, v, r, y - r.y, x - r.x, full) : VA_NONE;
        int key = kind == MOUSE_WHEEL_UP ? pc->wheel_up : pc->wheel_down;
        return key && pc->key(p, v, key, full) ? VA_REDRAW : VA_NONE;
    }
    return VA_NONE;
}
