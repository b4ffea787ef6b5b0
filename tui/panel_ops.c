/* panel_ops: operator statistics (what op_type_statistics.csv and op_statistics.csv hold): the top
 * op types or ops by total time, sortable by total, average and count, with a search over names and
 * types, and one type's ops on Enter ("Choose Type"); on 'k', the device kernels with the operator
 * each ran under (what kernel_statistics.csv holds), sortable and searchable alike. */
#include "tui_internal.h"

#include <stdlib.h>
#include <string.h>

#define OVERVIEW_LIMIT 20

enum col { COL_COUNT, COL_TOTAL, COL_AVG, COL_MAX, COL_SHARE, COL_TYPE, COL__N };

static const struct {
    const char *head;
    int width;
} cols[COL__N] = {
    [COL_COUNT] = {"COUNT", 9}, [COL_TOTAL] = {"TOTAL", 10}, [COL_AVG] = {"AVG", 10},
    [COL_MAX] = {"MAX", 10},    [COL_SHARE] = {"SHARE", 7},  [COL_TYPE] = {"TYPE", 18},
};

/* Columns by priority; one is shown while the name keeps at least this many cells. */
#define NAME_MIN 14
static const enum col priority[] = {COL_TOTAL, COL_SHARE, COL_AVG, COL_COUNT, COL_TYPE, COL_MAX};

static const char *sort_name(int sort)
{
    return sort == OP_SORT_AVG ? "avg" : sort == OP_SORT_COUNT ? "count" : "total";
}

static int sorted_col(int sort)
{
    return sort == OP_SORT_AVG ? COL_AVG : sort == OP_SORT_COUNT ? COL_COUNT : COL_TOTAL;
}

static void cell_text(const analysis *a, const op_stat *s, enum col k, char *out, size_t cap)
{
    switch (k) {
    case COL_COUNT:
        format_count((double)s->count, out, cap);
        break;
    case COL_TOTAL:
        format_duration((double)s->total_ns, out, cap);
        break;
    case COL_AVG:
        format_duration(s->count ? (double)s->total_ns / (double)s->count : -1, out, cap);
        break;
    case COL_MAX:
        format_duration((double)s->max_ns, out, cap);
        break;
    case COL_SHARE:
        snprintf(out, cap, "%.1f%%", 100 * s->share);
        break;
    case COL_TYPE: {
        uint32_t len = 0;
        const char *t = analysis_name(a, s->type, &len);
        snprintf(out, cap, "%.*s", (int)(len < cap - 1 ? len : cap - 1), t);
        break;
    }
    default:
        out[0] = 0;
    }
}

/* Keeps the selection on its row when the table re-sorts, and the selected row in view. */
static void clamp_selection(view *v, int n, int h)
{
    if (v->ops_sel >= n)
        v->ops_sel = n - 1;
    if (v->ops_sel < 0)
        v->ops_sel = 0;
    if (v->ops_top > v->ops_sel)
        v->ops_top = v->ops_sel;
    if (v->ops_sel >= v->ops_top + h)
        v->ops_top = v->ops_sel - h + 1;
    if (v->ops_top > n - h)
        v->ops_top = n - h > 0 ? n - h : 0;
}

/* ---- Kernels ------------------------------------------------------------------------------ */

enum kcol { KCOL_OP, KCOL_COUNT, KCOL_TOTAL, KCOL_AVG, KCOL_MAX, KCOL__N };

static const struct {
    const char *head;
    int width;
} kcols[KCOL__N] = {
    [KCOL_OP] = {"OP", 32},   [KCOL_COUNT] = {"COUNT", 9}, [KCOL_TOTAL] = {"TOTAL", 10},
    [KCOL_AVG] = {"AVG", 10}, [KCOL_MAX] = {"MAX", 10},
};

static const enum kcol kpriority[] = {KCOL_TOTAL, KCOL_OP, KCOL_AVG, KCOL_COUNT, KCOL_MAX};
static const enum kcol korder[] = {KCOL_OP, KCOL_COUNT, KCOL_TOTAL, KCOL_AVG, KCOL_MAX};

static int kernel_sorted_col(int sort)
{
    return sort == OP_SORT_AVG ? KCOL_AVG : sort == OP_SORT_COUNT ? KCOL_COUNT : KCOL_TOTAL;
}

static void kernel_cell(const analysis *a, const kernel_stat *k, enum kcol col, char *out,
                        size_t cap)
{
    switch (col) {
    case KCOL_OP: {
        uint32_t len = 0;
        const char *t = k->op ? analysis_name(a, k->op, &len) : "-";
        if (!k->op)
            len = 1;
        snprintf(out, cap, "%.*s", (int)(len < cap - 1 ? len : cap - 1), t);
        break;
    }
    case KCOL_COUNT:
        format_count((double)k->count, out, cap);
        break;
    case KCOL_TOTAL:
        format_duration((double)k->total_ns, out, cap);
        break;
    case KCOL_AVG:
        format_duration(k->count ? (double)k->total_ns / (double)k->count : -1, out, cap);
        break;
    case KCOL_MAX:
        format_duration((double)k->max_ns, out, cap);
        break;
    default:
        out[0] = 0;
    }
}

/* A table row: the selection bar and the name column; returns where the next column starts.
 * keep_end keeps a cut name's end (scoped op names differ at the end). */
static int row_start(canvas *c, rect body, int y, int sel, int role, const analysis *a,
                     uint32_t name, int namew, int keep_end)
{
    if (sel)
        canvas_fill(c, (rect){body.y + y, body.x, 1, body.w}, ' ', ROLE_SELECTED);
    uint32_t len = 0;
    const char *text = analysis_name(a, name, &len);
    canvas_text_fit(c, body, y, 1, namew, role, text, len, keep_end);
    return 1 + namew + 1;
}

/* One cell: text fitted to the left, numbers right-aligned; returns the next column's start. */
static int row_cell(canvas *c, rect body, int y, int x, int width, int role, const char *t,
                    int is_text, int keep_end)
{
    if (is_text)
        canvas_text_fit(c, body, y, x, width, role, t, strlen(t), keep_end);
    else
        canvas_str(c, body, y, x + width - (int)strlen(t), role, t);
    return x + width + 1;
}

/* ", partial" after the title's text (n bytes of cap) when the collector's operator board had no
 * room for some operators: their events are not in the live table (the report has them). */
static void ops_partial(const panel_ctx *p, char *extra, int n, size_t cap)
{
    if (p->st && p->st->ops_lost && n >= 0 && (size_t)n < cap)
        snprintf(extra + n, cap - (size_t)n, ", partial");
}

/* The kernels table: the analysis's kernel query, sorted and searched as the operators are. */
static void kernels_draw(const panel_ctx *p, view *v, canvas *c, rect r, int full)
{
    char extra[200];
    int n0 = snprintf(extra, sizeof extra, "kernels, by %s", sort_name(v->ops_sort));
    if (v->search[0] || v->searching)
        n0 += snprintf(extra + n0, sizeof extra - (size_t)n0, ", search \"%s%s\"", v->search,
                       v->searching ? "_" : "");
    ops_partial(p, extra, n0, sizeof extra);
    frame_title(c, r, "Operators", extra);

    kernel_stat *rows = NULL;
    op_query q = {
        .sort = (enum op_sort)v->ops_sort, .search = v->search, .limit = full ? 0 : OVERVIEW_LIMIT};
    size_t n = analysis_kernels_query(p->a, &q, &rows);

    int show[KCOL__N] = {0};
    int used = 1;
    for (size_t i = 0; i < sizeof kpriority / sizeof kpriority[0]; i++) {
        enum kcol k = kpriority[i];
        if (r.w - used - kcols[k].width - 1 >= NAME_MIN) {
            show[k] = 1;
            used += kcols[k].width + 1;
        }
    }
    /* The columns that fit, in display order, with their heads and widths: header and rows go
     * through this list. */
    struct {
        enum kcol k;
        const char *head;
        int width;
    } vis[KCOL__N];
    int nvis = 0;
    for (size_t i = 0; i < sizeof korder / sizeof korder[0]; i++)
        if (show[korder[i]])
            vis[nvis++] =
                (typeof(vis[0])){korder[i], kcols[korder[i]].head, kcols[korder[i]].width};
    int namew = r.w - used - 1;
    rect head = {r.y + 1, r.x, 1, r.w};
    canvas_fill(c, head, ' ', ROLE_LABEL);
    canvas_str(c, head, 0, 1, ROLE_LABEL, "KERNEL");
    int x = 1 + namew + 1;
    for (int j = 0; j < nvis; j++) {
        enum kcol k = vis[j].k;
        char h[24];
        snprintf(h, sizeof h, "%s%s", vis[j].head,
                 (int)k == kernel_sorted_col(v->ops_sort) ? "*" : "");
        int hw = (int)strlen(h);
        canvas_str(c, head, 0, k == KCOL_OP ? x : x + vis[j].width - hw, ROLE_LABEL, h);
        x += vis[j].width + 1;
    }

    rect body = {r.y + 2, r.x, r.h - 2, r.w};
    v->ops_rows = (int)n;
    v->ops_page = body.h;
    if (!n) {
        const char *why = v->search[0] ? "no kernel matches the search"
                                       : "no kernels yet (CUDA activity needs CUPTI and a GPU)";
        canvas_str(c, body, 0, 2, ROLE_DIM, why);
        free(rows);
        return;
    }
    clamp_selection(v, (int)n, body.h);
    for (int y = 0; y < body.h && v->ops_top + y < (int)n; y++) {
        const kernel_stat *k = &rows[v->ops_top + y];
        int sel = v->ops_top + y == v->ops_sel;
        int role = sel ? ROLE_SELECTED : k->comm ? ROLE_WARN : ROLE_NORMAL;
        x = row_start(c, body, y, sel, role, p->a, k->name, namew, 0);
        for (int j = 0; j < nvis; j++) {
            char t[128];
            kernel_cell(p->a, k, vis[j].k, t, sizeof t);
            x = row_cell(c, body, y, x, vis[j].width, role, t, vis[j].k == KCOL_OP, 1);
        }
    }
    free(rows);
}

/* ---- Operators ---------------------------------------------------------------------------- */

static void ops_draw(const panel_ctx *p, view *v, canvas *c, rect r, int full)
{
    if (v->ops_kernels) {
        kernels_draw(p, v, c, r, full);
        return;
    }
    char extra[200];
    uint32_t tl = 0;
    const char *tname = v->ops_type ? analysis_name(p->a, v->ops_type, &tl) : "";
    int n0 = snprintf(extra, sizeof extra, "%s",
                      v->ops_type      ? ""
                      : v->ops_by_type ? "types"
                                       : "ops");
    if (v->ops_type)
        n0 = snprintf(extra, sizeof extra, "ops of %.*s", (int)(tl < 60 ? tl : 60), tname);
    n0 += snprintf(extra + n0, sizeof extra - (size_t)n0, ", by %s", sort_name(v->ops_sort));
    if (v->search[0] || v->searching)
        n0 += snprintf(extra + n0, sizeof extra - (size_t)n0, ", search \"%s%s\"", v->search,
                       v->searching ? "_" : "");
    ops_partial(p, extra, n0, sizeof extra);
    frame_title(c, r, "Operators", extra);

    op_query q = {.by_type = v->ops_by_type && !v->ops_type,
                  .sort = v->ops_sort,
                  .search = v->search[0] ? v->search : NULL,
                  .type = v->ops_type,
                  .limit = full ? 0 : OVERVIEW_LIMIT};
    op_stat *rows = NULL;
    size_t n = analysis_ops(p->a, &q, &rows);

    /* Columns that fit, shown in a fixed order. */
    int show[COL__N] = {0};
    int used = 1;
    for (size_t i = 0; i < sizeof priority / sizeof priority[0]; i++) {
        enum col k = priority[i];
        if (k == COL_TYPE && q.by_type)
            continue;
        if (r.w - used - cols[k].width - 1 >= NAME_MIN) {
            show[k] = 1;
            used += cols[k].width + 1;
        }
    }
    /* The columns that fit, in display order: header and rows go through this list. */
    static const enum col order[] = {COL_TYPE, COL_COUNT, COL_TOTAL, COL_AVG, COL_MAX, COL_SHARE};
    struct {
        enum col k;
        const char *head;
        int width;
    } vis[COL__N];
    int nvis = 0;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (show[order[i]])
            vis[nvis++] = (typeof(vis[0])){order[i], cols[order[i]].head, cols[order[i]].width};
    int namew = r.w - used - 1;
    rect head = {r.y + 1, r.x, 1, r.w};
    canvas_fill(c, head, ' ', ROLE_LABEL);
    canvas_str(c, head, 0, 1, ROLE_LABEL, q.by_type ? "TYPE" : "OP");
    int x = 1 + namew + 1;
    for (int j = 0; j < nvis; j++) {
        enum col k = vis[j].k;
        char h[24];
        snprintf(h, sizeof h, "%s%s", vis[j].head, (int)k == sorted_col(v->ops_sort) ? "*" : "");
        int hw = (int)strlen(h);
        canvas_str(c, head, 0, k == COL_TYPE ? x : x + vis[j].width - hw, ROLE_LABEL, h);
        x += vis[j].width + 1;
    }

    rect body = {r.y + 2, r.x, r.h - 2, r.w};
    v->ops_rows = (int)n;
    v->ops_page = body.h;
    if (!n) {
        const source_status *st = p->st;
        const char *why = v->search[0] ? "no operator matches the search"
                          : st && st->state != TS_STATE_COLLECTING && !st->gone
                              ? "no operators yet: press F5 (or c) to start collecting"
                              : "no operators yet";
        canvas_str(c, body, 0, 2, ROLE_DIM, why);
        free(rows);
        return;
    }
    /* The selection follows its row when the table re-sorts. */
    for (size_t i = 0; v->ops_sel_id && i < n; i++)
        if (rows[i].name == v->ops_sel_id) {
            v->ops_sel = (int)i;
            break;
        }
    clamp_selection(v, (int)n, body.h);
    v->ops_sel_id = rows[v->ops_sel].name;

    for (int y = 0; y < body.h && v->ops_top + y < (int)n; y++) {
        const op_stat *s = &rows[v->ops_top + y];
        int sel = v->ops_top + y == v->ops_sel;
        int role = sel ? ROLE_SELECTED : ROLE_NORMAL;
        x = row_start(c, body, y, sel, role, p->a, s->name, namew, 1);
        for (int j = 0; j < nvis; j++) {
            char t[64];
            cell_text(p->a, s, vis[j].k, t, sizeof t);
            x = row_cell(c, body, y, x, vis[j].width, role, t, vis[j].k == COL_TYPE, 0);
        }
    }
    free(rows);
}

static void select_row(view *v, int row)
{
    v->ops_sel = row < 0 ? 0 : row;
    if (v->ops_rows > 0 && v->ops_sel >= v->ops_rows)
        v->ops_sel = v->ops_rows - 1;
    v->ops_sel_id = 0; /* the draw picks the id of the row now selected */
}

static int ops_key(const panel_ctx *p, view *v, int key, int full)
{
    (void)p;
    (void)full;
    switch (key) {
    case 't':
        /* From the kernels, back to the table that was shown; else types <-> ops. */
        if (v->ops_kernels)
            v->ops_kernels = 0;
        else
            v->ops_by_type = !v->ops_by_type;
        v->ops_type = 0;
        select_row(v, 0);
        return 1;
    case 'k':
        v->ops_kernels = !v->ops_kernels;
        v->ops_type = 0;
        select_row(v, 0);
        return 1;
    case 'o':
        v->ops_sort = v->ops_sort == OP_SORT_TOTAL ? OP_SORT_AVG
                      : v->ops_sort == OP_SORT_AVG ? OP_SORT_COUNT
                                                   : OP_SORT_TOTAL;
        select_row(v, 0);
        return 1;
    case '/':
        v->searching = 1;
        memcpy(v->search_before, v->search, sizeof v->search);
        return 1;
    case VK_ENTER:
    case '\r':
    case VK_ENTER_KP:
        if (!v->ops_kernels && v->ops_by_type && !v->ops_type && v->ops_sel_id) {
            v->ops_type = v->ops_sel_id;
            select_row(v, 0);
        }
        return 1;
    case VK_ESC:
    case VK_BACKSPACE:
    case VK_BACKSPACE_ASCII:
    case 8:
        if (v->ops_type) {
            v->ops_sel_id = v->ops_type;
            v->ops_type = 0;
            return 1;
        }
        if (v->search[0]) {
            v->search[0] = 0;
            return 1;
        }
        return 0;
    default:
        break;
    }
    const scroll_keys s = {.page = v->ops_page > 1 ? v->ops_page : 1, .last = v->ops_rows - 1};
    int row = v->ops_sel;
    if (!view_scroll(&s, key, &row))
        return 0;
    select_row(v, row);
    return 1;
}

/* A click on a row selects it; on the selected type's row, opens its ops (Enter). */
static int ops_click(const panel_ctx *p, view *v, rect r, int y, int x, int full)
{
    (void)r;
    (void)x;
    int row = y - 2; /* under the title and the column heads */
    if (row < 0 || row >= v->ops_page || v->ops_top + row >= v->ops_rows)
        return VA_NONE;
    if (v->ops_top + row == v->ops_sel && v->ops_sel_id)
        return ops_key(p, v, VK_ENTER, full) ? VA_REDRAW : VA_NONE;
    select_row(v, v->ops_top + row);
    return VA_REDRAW;
}

static const key_hint ops_hints[] = {{"/", "Search", 1, '/'},
                                     {"o", "Sort", 2, 'o'},
                                     {"t", "Type/op", 3, 't'},
                                     {"k", "Kernels", 4, 'k'},
                                     {NULL, NULL, 0, 0}};

const panel_class panel_ops = {
    .title = "Operators",
    .tab = "Operators",
    .draw = ops_draw,
    .key = ops_key,
    .hints = ops_hints,
    .click = ops_click,
    .wheel_up = VK_UP,
    .wheel_down = VK_DOWN,
};
