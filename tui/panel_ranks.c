/* panel_ranks: the job on this machine, one row per rank (MindInsight's cluster pages, in a
 * terminal): its state, step, the last and the average step split into interval, compute,
 * communication wait and tail (and evaluation inside steps), its event rate, drops and CPU, and the
 * job rule's straggler. The columns that fit are shown, the most telling first; the verdict follows
 * the table in words. Enter on a row makes that rank the one the other screens show (view.c). */
#include "job.h"
#include "tui_internal.h"

#include <string.h>

enum col {
    COL_MARK,
    COL_RANK,
    COL_PID,
    COL_HOST,
    COL_STATE,
    COL_STEP,
    COL_LAST,
    COL_LAST_INTERVAL,
    COL_LAST_COMPUTE,
    COL_LAST_WAIT,
    COL_LAST_TAIL,
    COL_AVG,
    COL_INTERVAL,
    COL_COMPUTE,
    COL_WAIT,
    COL_TAIL,
    COL_EVAL,
    COL_EVENTS,
    COL_DROPS,
    COL_CPU,
    COL_VERDICT,
    COL_INSIDE,
    COL__COUNT
};

/* Drawn in enum order; chosen by prio (lower first) while they fit. */
static const struct column {
    const char *head;
    int width; /* with the space after it */
    int prio;
    int left; /* text aligned left; else right, as numbers */
} columns[COL__COUNT] = {
    [COL_MARK] = {"", 2, 0, 1},
    [COL_RANK] = {"RANK", 5, 1, 0},
    [COL_PID] = {"PID", 8, 2, 0},
    [COL_HOST] = {"HOST", 14, 15, 1},
    [COL_STATE] = {"STATE", 11, 3, 1},
    [COL_STEP] = {"STEP", 8, 5, 0},
    [COL_LAST] = {"LAST STEP", 10, 9, 0},
    [COL_LAST_INTERVAL] = {"LAST INTV", 10, 18, 0},
    [COL_LAST_COMPUTE] = {"LAST COMP", 10, 17, 0},
    [COL_LAST_WAIT] = {"LAST WAIT", 10, 16, 0},
    [COL_LAST_TAIL] = {"LAST TAIL", 10, 19, 0},
    [COL_AVG] = {"AVG STEP", 10, 6, 0},
    [COL_INTERVAL] = {"INTERVAL", 10, 10, 0},
    [COL_COMPUTE] = {"COMPUTE", 10, 8, 0},
    [COL_WAIT] = {"COMM WAIT", 10, 7, 0},
    [COL_TAIL] = {"TAIL", 10, 11, 0},
    [COL_EVAL] = {"EVAL", 10, 20, 0},
    [COL_EVENTS] = {"EVENTS/S", 9, 13, 0},
    [COL_DROPS] = {"DROPS", 7, 14, 0},
    [COL_CPU] = {"CPU%", 7, 12, 0},
    [COL_VERDICT] = {"STRAGGLER", 11, 4, 1},
    [COL_INSIDE] = {"INSIDE", 40, 21, 1},
};

#define INSIDE_PRIO_STALLED 3 /* a rank has stalled: where each is comes before the figures */

static int prio_of(int k, int stalled)
{
    return k == COL_INSIDE && stalled ? INSIDE_PRIO_STALLED : columns[k].prio;
}

/* Which columns fit in width: by priority, each while it fits. stalled: a rank's step has not
 * ended for a while, so what each rank is inside goes first. */
static void choose(int width, int *shown, int stalled)
{
    int order[COL__COUNT];
    for (int i = 0; i < COL__COUNT; i++)
        order[i] = i;
    for (int i = 1; i < COL__COUNT; i++) /* a handful: insertion sort by prio */
        for (int j = i; j > 0 && prio_of(order[j], stalled) < prio_of(order[j - 1], stalled); j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    int used = 1;
    memset(shown, 0, COL__COUNT * sizeof *shown);
    for (int i = 0; i < COL__COUNT; i++)
        if (used + columns[order[i]].width <= width) {
            shown[order[i]] = 1;
            used += columns[order[i]].width;
        }
}

static const char *row_state(const rank_row *r)
{
    return r->gone ? "ended" : state_name(r->state);
}

static int state_role_of(const rank_row *r)
{
    if (r->gone)
        return ROLE_DIM;
    return r->state == TS_STATE_COLLECTING ? ROLE_GOOD
           : r->state == TS_STATE_STOPPED  ? ROLE_WARN
                                           : ROLE_NORMAL;
}

/* The step time column k shows (the last step's parts, then the average's, in enum order), or
 * -1 when unknown. */
static double duration_of(const rank_row *r, int k)
{
    const double last[] = {r->last_total_ns, r->last_interval_ns, r->last_compute_ns,
                           r->last_wait_ns, r->last_tail_ns};
    const double avg[] = {r->avg_total_ns, r->avg_interval_ns, r->avg_compute_ns,
                          r->avg_wait_ns,  r->avg_tail_ns,     r->avg_eval_ns};
    if (k >= COL_LAST && k <= COL_LAST_TAIL)
        return r->have_last ? last[k - COL_LAST] : -1;
    if (k >= COL_AVG && k <= COL_EVAL)
        return r->steps ? avg[k - COL_AVG] : -1;
    return -1;
}

/* The text of column k of row r into buf; returns its role. */
static int cell_text(const rank_row *r, int k, char *buf, size_t cap)
{
    double ns;
    snprintf(buf, cap, "-");
    switch (k) {
    case COL_MARK: /* a glyph, put by the caller */
        buf[0] = 0;
        return ROLE_TITLE;
    case COL_RANK:
        if (r->rank >= 0)
            snprintf(buf, cap, "%d", (int)r->rank);
        return ROLE_NORMAL;
    case COL_PID:
        snprintf(buf, cap, "%d", (int)r->pid);
        return ROLE_NORMAL;
    case COL_HOST:
        snprintf(buf, cap, "%s", r->host[0] ? r->host : "-");
        return ROLE_NORMAL;
    case COL_STATE:
        snprintf(buf, cap, "%s", row_state(r));
        return state_role_of(r);
    case COL_STEP:
        if (r->step)
            snprintf(buf, cap, "%llu", (unsigned long long)r->step);
        return ROLE_NORMAL;
    case COL_EVENTS:
        format_count(r->events_per_s, buf, cap);
        return ROLE_NORMAL;
    case COL_DROPS:
        format_count((double)r->drops, buf, cap);
        return r->drops ? ROLE_WARN : ROLE_NORMAL;
    case COL_CPU:
        if (r->cpu >= 0)
            snprintf(buf, cap, "%.0f", r->cpu);
        return ROLE_NORMAL;
    case COL_VERDICT:
        snprintf(buf, cap, "%s", r->straggler ? r->cause : "");
        return ROLE_BAD;
    case COL_INSIDE:
        snprintf(buf, cap, "%s", r->gone ? "" : r->inside);
        return r->waited_for ? ROLE_BAD : r->stalled ? ROLE_WARN : ROLE_NORMAL;
    default:
        break;
    }
    ns = duration_of(r, k);
    format_duration(ns, buf, cap);
    return ns < 0 ? ROLE_DIM : ROLE_NORMAL;
}

static void put_cell(canvas *c, rect r, int y, int x, int k, int role, const char *text)
{
    int w = columns[k].width - 1;
    int tw = canvas_text_width(c, text, strlen(text));
    int at = columns[k].left || tw >= w ? x : x + w - tw;
    canvas_text_fit(c, r, y, at, w, role, text, strlen(text), 0);
}

/* The verdict in words, after the table. Returns the rows used. */
static int verdict_lines(const ranks_table *t, canvas *c, rect r, int y)
{
    int used = 0;
    size_t with = 0;
    if (t->waited_for) /* a hang: the rank the others wait for, before any straggler */
        return frame_wrap(c, r, y, 2, ROLE_BAD, t->hang_verdict);
    for (size_t i = 0; i < t->n; i++)
        with += t->row[i].steps > 0;
    if (with < 2)
        return frame_wrap(c, r, y, 2, ROLE_DIM,
                          "straggler: no verdict until two ranks have finished steps");
    if (!t->stragglers && t->unmeasured) {
        char line[256];
        job_unknown_verdict(line, sizeof line, t->unmeasured);
        strncat(line, " (termsight.torch instruments DDP)", sizeof line - strlen(line) - 1);
        return frame_wrap(c, r, y, 2, ROLE_WARN, line);
    }
    if (!t->stragglers)
        return frame_wrap(c, r, y, 2, ROLE_GOOD,
                          "stragglers: none: the ranks' busy times (step less communication "
                          "wait) are within the job rule of each other");
    for (size_t i = 0; i < t->n && y + used < r.h; i++) {
        const rank_row *w = &t->row[i];
        if (!w->straggler)
            continue;
        char ex[32], wait[32], line[256];
        format_duration(w->excess_ns, ex, sizeof ex);
        format_duration(w->others_wait_ns, wait, sizeof wait);
        snprintf(line, sizeof line,
                 "straggler: rank %d (pid %d), %s: busy %s per step longer than the typical "
                 "rank; the others wait %s per step in communication",
                 (int)w->rank, (int)w->pid, w->cause, ex, wait);
        used += frame_wrap(c, r, y + used, 2, ROLE_BAD, line);
    }
    return used;
}

static void ranks_draw(const panel_ctx *p, view *v, canvas *c, rect r, int full)
{
    (void)full;
    const ranks_table *t = p->rk;
    char extra[160];
    if (!t || !t->job[0]) {
        frame_title(c, r, "Ranks", "");
        frame_wrap(c, (rect){r.y + 2, r.x, r.h - 2, r.w}, 0, 2, ROLE_DIM,
                   "This session is no rank of a job. A job's ranks (torchrun, Slurm, mpirun, "
                   "or TERMSIGHT_JOB with TERMSIGHT_RANK and TERMSIGHT_WORLD_SIZE) are shown "
                   "here side by side, with the straggler marked.");
        return;
    }
    int k = snprintf(extra, sizeof extra, "job %s: %zu rank%s on this machine", t->job, t->n,
                     t->n == 1 ? "" : "s");
    if (t->world_size > 0 && k > 0 && (size_t)k < sizeof extra)
        k += snprintf(extra + k, sizeof extra - (size_t)k, " of %d", (int)t->world_size);
    if (t->hidden && k > 0 && (size_t)k < sizeof extra)
        snprintf(extra + k, sizeof extra - (size_t)k, "; %zu more not shown (at most %d)",
                 t->hidden, RANKS_MAX);
    frame_title(c, r, "Ranks", extra);
    int shown[COL__COUNT];
    choose(r.w, shown, t->stalled > 0);
    rect body = {r.y + 1, r.x, r.h - 1, r.w};
    canvas_fill(c, (rect){body.y, body.x, 1, body.w}, ' ', ROLE_LABEL);
    int x = 1;
    for (int i = 0; i < COL__COUNT; i++)
        if (shown[i]) {
            put_cell(c, body, 0, x, i, ROLE_LABEL, columns[i].head);
            x += columns[i].width;
        }
    /* Rows, then a blank line and the verdict (two lines kept for it). */
    int n = (int)t->n;
    int page = body.h - 1 - 3;
    page = page < 1 ? 1 : page;
    v->ranks_sel = v->ranks_sel >= n ? n - 1 : v->ranks_sel < 0 ? 0 : v->ranks_sel;
    if (v->ranks_sel < v->ranks_top)
        v->ranks_top = v->ranks_sel;
    if (v->ranks_sel >= v->ranks_top + page)
        v->ranks_top = v->ranks_sel - page + 1;
    v->ranks_top = v->ranks_top > n - page ? n - page : v->ranks_top;
    v->ranks_top = v->ranks_top < 0 ? 0 : v->ranks_top;
    int y = 1;
    for (int i = v->ranks_top; i < n && y <= page; i++, y++) {
        const rank_row *row = &t->row[i];
        int sel = i == v->ranks_sel;
        if (sel)
            canvas_fill(c, (rect){body.y + y, body.x, 1, body.w}, ' ', ROLE_SELECTED);
        x = 1;
        for (int col = 0; col < COL__COUNT; col++) {
            if (!shown[col])
                continue;
            char buf[160];
            int role = cell_text(row, col, buf, sizeof buf);
            put_cell(c, body, y, x, col, sel ? ROLE_SELECTED : role, buf);
            if (col == COL_MARK && i == t->selected) /* the rank the other screens show */
                canvas_put(c, body, y, x, c->g->selected, sel ? ROLE_SELECTED : ROLE_TITLE);
            x += columns[col].width;
        }
    }
    if (!n)
        canvas_str(c, body, y++, 2, ROLE_DIM, "no rank yet");
    verdict_lines(t, c, body, y + 1);
}

static int ranks_key(const panel_ctx *p, view *v, int key, int full)
{
    const scroll_keys s = {.page = 10, .last = (p->rk ? (int)p->rk->n : 0) - 1};
    return full && view_scroll(&s, key, &v->ranks_sel);
}

/* A click on a rank's row selects it; on the selected one, shows that rank (Enter). */
static int ranks_click(const panel_ctx *p, view *v, rect r, int y, int x, int full)
{
    (void)r;
    (void)x;
    int n = p->rk ? (int)p->rk->n : 0, i = v->ranks_top + y - 2;
    if (!full || y < 2 || i >= n)
        return VA_NONE;
    if (i == v->ranks_sel)
        return VA_RANK;
    v->ranks_sel = i;
    return VA_REDRAW;
}

static const key_hint ranks_hints[] = {
    {"Enter", "Show rank", 1, VK_ENTER}, {"\u2191\u2193", "Choose", 4, 0}, {NULL, NULL, 0, 0}};

const panel_class panel_ranks = {
    .title = "Ranks",
    .tab = "Ranks",
    .draw = ranks_draw,
    .key = ranks_key,
    .hints = ranks_hints,
    .click = ranks_click,
    .wheel_up = VK_UP,
    .wheel_down = VK_DOWN,
};
