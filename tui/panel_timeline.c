/* panel_timeline: the recent ops of each host thread and the work of each device stream as
 * blocks on a time axis (the report's timeline.json has the whole run), W/S to zoom in and out, A/D
 * to move left and right, a cursor on one op with its details. The data is the bounded ring the
 * source keeps; the window follows the latest event until the user moves it. */
#include "tui_internal.h"

#include <stdlib.h>
#include <string.h>

#define LABEL_W      14
#define SPAN_MIN_NS  1000ull          /* 1 us */
#define SPAN_MAX_NS  3600000000000ull /* an hour */
#define SPAN_AUTO_NS 20000000ull      /* 20 ms before any step is known */

typedef struct tl_cell {
    uint64_t cover; /* ns of the column the winning event covers */
    int32_t ev;     /* ring index of the winner, -1: none */
    uint16_t count; /* events in the column */
    uint16_t depth;
} tl_cell;

static uint64_t span_of(const panel_ctx *p, const view *v)
{
    if (v->tl_span_ns)
        return v->tl_span_ns;
    step_summary ss = analysis_steps(p->a);
    uint64_t s = ss.steps && ss.avg_total_ns > 0 ? (uint64_t)(2 * ss.avg_total_ns) : SPAN_AUTO_NS;
    return s < SPAN_MIN_NS ? SPAN_MIN_NS : s > SPAN_MAX_NS ? SPAN_MAX_NS : s;
}

static uint64_t end_of(const panel_ctx *p, const view *v)
{
    return v->tl_follow ? p->tl->latest_ns : v->tl_end_ns;
}

static const ts_event *ring_at(const tlring *r, size_t k) /* k: 0 = oldest */
{
    return &r->ev[(r->next + r->cap - r->n + k) % r->cap];
}

static int is_device_lane(const tl_lane *l)
{
    return l->device != TS_DEVICE_HOST;
}

/* The event on lane with begin == at, or the latest one that begins at or before end when at
 * is 0. Returns its ring position (0 = oldest), or -1. */
static long find_cursor(const tlring *r, int lane, uint64_t at, uint64_t end)
{
    long best = -1;
    uint64_t best_begin = 0;
    for (size_t k = 0; k < r->n; k++) {
        const ts_event *e = ring_at(r, k);
        if (tlring_lane_of(r, e) != lane)
            continue;
        if (at) {
            if (e->begin_ns == at)
                return (long)k;
            continue;
        }
        if (e->begin_ns <= end && (best < 0 || e->begin_ns >= best_begin)) {
            best = (long)k;
            best_begin = e->begin_ns;
        }
    }
    return best;
}

/* The op before (dir < 0) or after the one beginning at `at` on lane, by begin time. */
static long step_cursor(const tlring *r, int lane, uint64_t at, int dir)
{
    long best = -1;
    uint64_t best_begin = 0;
    for (size_t k = 0; k < r->n; k++) {
        const ts_event *e = ring_at(r, k);
        if (tlring_lane_of(r, e) != lane)
            continue;
        if (dir < 0 ? e->begin_ns < at && (best < 0 || e->begin_ns > best_begin)
                    : e->begin_ns > at && (best < 0 || e->begin_ns < best_begin)) {
            best = (long)k;
            best_begin = e->begin_ns;
        }
    }
    return best;
}

static void short_name(const analysis *a, const ts_event *e, const char **s, uint32_t *len)
{
    *s = analysis_name(a, e->name, len);
    if (e->kind == TS_KIND_OP_RANGE || e->kind == TS_KIND_NVTX_RANGE) {
        const char *slash = memrchr(*s, '/', *len);
        if (slash && slash + 1 < *s + *len) {
            *len -= (uint32_t)(slash + 1 - *s);
            *s = slash + 1;
        }
    }
}

static void lane_label(const panel_ctx *p, const tl_lane *l, char *out, size_t cap)
{
    if (is_device_lane(l)) {
        snprintf(out, cap, "dev%u s%u", l->device, l->tid);
        return;
    }
    /* The name the program gave the thread, else the OS's (its comm, as sampled). */
    uint32_t len = 0;
    uint32_t id = analysis_thread_label(p->a, l->tid);
    const char *name = id ? analysis_name(p->a, id, &len) : NULL;
    if (name && len)
        snprintf(out, cap, "%.*s", (int)(len < 64 ? len : 64), name);
    else
        snprintf(out, cap, "tid %u", l->tid);
}

/* A block's colour: device work in one, ops by their type as the statistics have it. */
static int block_role(const analysis *a, const ts_event *e)
{
    if (e->kind == TS_KIND_KERNEL || e->kind == TS_KIND_MEMCPY || e->kind == TS_KIND_MEMSET)
        return ROLE_DEVICE;
    uint32_t key = analysis_op_type_of(a, e->name, e->type);
    return ROLE_BLOCK0 + (int)((key * 2654435761u) >> 30);
}

static uint64_t nice_tick(uint64_t min_ns)
{
    uint64_t t = 1;
    for (;;) {
        if (t >= min_ns)
            return t;
        if (2 * t >= min_ns)
            return 2 * t;
        if (5 * t >= min_ns)
            return 5 * t;
        t *= 10;
    }
}

/* Ticks at multiples of a round interval back from the latest event, each labelled on its left
 * with its distance to the latest ("now" for the latest itself). */
/* An offset from the latest event in the unit its size asks for, with the decimals that tell
 * ticks tick_ns apart (format_duration's three digits would print "-11.2 s" for every tick
 * 2 ms apart, 11 s back). */
static void format_offset(uint64_t ns, uint64_t tick_ns, char *out, size_t cap)
{
    static const struct {
        uint64_t ns;
        const char *unit;
    } units[] = {{1000000000ull, "s"}, {1000000ull, "ms"}, {1000ull, "us"}, {1, "ns"}};
    size_t u = 0;
    while (u + 1 < sizeof units / sizeof units[0] && ns < units[u].ns)
        u++;
    int decimals = 0;
    for (uint64_t step = units[u].ns; step > tick_ns && step > 1 && decimals < 6; step /= 10)
        decimals++;
    snprintf(out, cap, "%.*f %s", decimals, (double)ns / (double)units[u].ns, units[u].unit);
}

static void draw_axis(canvas *c, rect r, int y, int x0, int w, uint64_t start, uint64_t end,
                      uint64_t latest)
{
    uint64_t span = end - start;
    uint64_t tick = nice_tick(span * 12 / (uint64_t)(w > 0 ? w : 1) + 1);
    uint64_t first = latest >= start ? latest - (latest - start) / tick * tick
                                     : latest + (start - latest + tick - 1) / tick * tick;
    int free_from = x0;
    /* The times come from the segment: an empty span must not divide by zero, and a tick past
     * UINT64_MAX must end the loop rather than wrap around to the start. */
    int more = 1;
    for (uint64_t t = first; more && t <= end; more = end - t >= tick, t += tick) {
        double at = span ? (double)(t - start) / (double)span : 0;
        int x = x0 + (int)(at * w + 0.5);
        x = x > x0 + w - 1 ? x0 + w - 1 : x;
        char lab[32], d[28];
        if (t == latest) {
            snprintf(lab, sizeof lab, "now");
        } else {
            format_offset(t < latest ? latest - t : t - latest, tick, d, sizeof d);
            snprintf(lab, sizeof lab, "%c%s", t < latest ? '-' : '+', d);
        }
        int lw = (int)strlen(lab);
        if (x - lw < free_from)
            continue;
        canvas_str(c, r, y, x - lw, ROLE_DIM, lab);
        canvas_put(c, r, y, x, c->g->vline, ROLE_DIM);
        free_from = x + 2;
    }
}

static void draw_details(const panel_ctx *p, canvas *c, rect r, int y, const ts_event *e,
                         const tl_lane *l, uint64_t latest)
{
    char dur[32], at[32], lane[80];
    int x = 1;
    if (!e) {
        canvas_str(c, r, y, x, ROLE_DIM, "no op under the cursor");
        return;
    }
    canvas_put(c, r, y, x, c->g->selected, ROLE_CURSOR);
    x += 2;
    uint32_t len = 0, tlen = 0;
    const char *name = analysis_name(p->a, e->name, &len);
    uint32_t type_id = analysis_op_type_of(p->a, e->name, e->type);
    const char *type = type_id != e->name ? analysis_name(p->a, type_id, &tlen) : "";
    format_duration((double)(e->end_ns - e->begin_ns), dur, sizeof dur);
    format_duration(latest > e->begin_ns ? (double)(latest - e->begin_ns) : 0, at, sizeof at);
    lane_label(p, l, lane, sizeof lane);
    char tail[200];
    if (is_device_lane(l))
        snprintf(tail, sizeof tail, "  %s  at -%s  device %u stream %u", dur, at, l->device,
                 l->tid);
    else
        snprintf(tail, sizeof tail, "  %s  at -%s  thread %s (%u)", dur, at, lane, l->tid);
    int tw = canvas_text_width(c, tail, strlen(tail));
    int tyw = tlen ? canvas_text_width(c, type, tlen) : 0;
    tyw = tyw > 20 ? 20 : tyw;
    int nw = canvas_text_width(c, name, len);
    int room = r.w - x - tw - (tlen ? 7 + tyw : 0) - 1;
    x += canvas_text_fit(c, r, y, x, nw < room ? nw : room, ROLE_TITLE, name, len, 1);
    if (tlen) {
        x += canvas_str(c, r, y, x, ROLE_DIM, "  type ");
        x += canvas_text_fit(c, r, y, x, tyw, ROLE_NORMAL, type, tlen, 0);
    }
    canvas_str(c, r, y, x, ROLE_NORMAL, tail);
}

/* Columns [x0, x1) of w that [b, e] covers in the window [start, end) of span ns drawn w
 * columns wide; 0 when it covers none. */
static int columns_of(uint64_t b, uint64_t e, uint64_t start, uint64_t end, uint64_t span, int w,
                      int *x0, int *x1)
{
    if (e <= start || b >= end)
        return 0;
    double nspc = (double)span / w;
    *x0 = (int)((double)(b > start ? b - start : 0) / nspc);
    *x1 = (int)((double)(e < end ? e - start : span) / nspc + 0.999999);
    *x1 = *x1 <= *x0 ? *x0 + 1 : *x1 > w ? w : *x1;
    return 1;
}

/* The steps row: each step a block from its begin to its end (the open one to the latest),
 * shaded in turn, its number inside where it fits. Returns whether the ring holds steps. */
static int draw_steps(canvas *c, rect r, int y, int x0, int w, const tlring *ring, uint64_t start,
                      uint64_t span)
{
    canvas_str(c, r, y, 1, ROLE_HEADER_KEY, "steps");
    uint64_t begin = 0, number = 0;
    for (size_t k = 0; k <= ring->nmarks; k++) {
        const ts_event *m = k < ring->nmarks ? tlring_mark(ring, k) : NULL;
        if (m && m->kind == TS_KIND_STEP_BEGIN) {
            begin = m->begin_ns;
            number = m->v0;
            continue;
        }
        int end_now = !m && begin; /* the step still open at the latest */
        if (!end_now && (!m || m->kind != TS_KIND_STEP_END || !begin || m->v0 != number))
            continue;
        uint64_t end = end_now ? ring->latest_ns : m->begin_ns;
        int a, b;
        if (columns_of(begin, end, start, start + span, span, w, &a, &b)) {
            int role = number % 2 ? ROLE_INTERVAL : ROLE_FPBP;
            canvas_put(c, r, y, x0 + a, c->g->edge, role);
            for (int x = a + 1; x < b; x++)
                canvas_put(c, r, y, x0 + x, c->g->interval, role);
            char label[24];
            int n = snprintf(label, sizeof label, "#%llu", (unsigned long long)number);
            if (b - a - 1 >= n)
                canvas_str(c, r, y, x0 + a + 1 + (b - a - 1 - n) / 2, role, label);
        }
        begin = 0;
    }
    return 1;
}

/* A mark's value: a queue's usage (size / capacity), a counter's number. */
static double mark_value(const ts_event *m)
{
    if (m->kind == TS_KIND_QUEUE_SAMPLE)
        return m->v1 ? (double)m->v0 / (double)m->v1 : 0;
    if (m->flags & TS_EF_DOUBLE) {
        double d;
        memcpy(&d, &m->v0, sizeof d);
        return d == d ? d : 0;
    }
    return (double)m->v0;
}

/* One track: the value in each column (the latest sample before the column's end), shaded from
 * empty to full (a queue) or from the window's lowest to its highest value (a counter). */
static void draw_track(const panel_ctx *p, canvas *c, rect r, int y, int x0, int w,
                       const tl_track *t, uint64_t start, uint64_t span)
{
    const tlring *ring = p->tl;
    uint32_t len = 0;
    const char *name = analysis_name(p->a, t->name, &len);
    canvas_text_fit(c, r, y, 1, LABEL_W - 1, ROLE_DIM, name ? name : "", name ? len : 0, 0);
    double lo = 0, hi = 1, last = 0;
    int have = 0;
    if (t->kind == TS_KIND_COUNTER) { /* the window's range */
        lo = 1e300, hi = -1e300;
        for (size_t k = 0; k < ring->nmarks; k++) {
            const ts_event *m = tlring_mark(ring, k);
            if (m->kind != t->kind || m->name != t->name || m->begin_ns >= start + span)
                continue;
            double v = mark_value(m);
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
        if (hi < lo)
            return;
    }
    double nspc = (double)span / w;
    size_t k = 0;
    for (int x = 0; x < w; x++) {
        uint64_t col_end = start + (uint64_t)((x + 1) * nspc);
        /* The track's own samples come in time order (other marks need not). */
        for (; k < ring->nmarks; k++) {
            const ts_event *m = tlring_mark(ring, k);
            if (m->kind != t->kind || m->name != t->name)
                continue;
            if (m->begin_ns > col_end)
                break;
            last = mark_value(m);
            have = 1;
        }
        if (!have)
            continue;
        double u = hi > lo ? (last - lo) / (hi - lo) : t->kind == TS_KIND_COUNTER ? 0.5 : last;
        int s = format_shade(u); /* the values come from the segment: anything at all */
        canvas_put(c, r, y, x0 + x, c->g->shade[s], ROLE_HEAT0 + s);
    }
}

/* The title: the span, and whether the window follows the latest event. */
static void draw_title(const panel_ctx *p, const view *v, canvas *c, rect r, int full,
                       uint64_t span, uint64_t end)
{
    const tlring *ring = p->tl;
    char extra[160], s[32], d[32];
    format_duration((double)span, s, sizeof s);
    if (v->tl_follow || !ring || end >= ring->latest_ns)
        snprintf(extra, sizeof extra, "span %s, following the latest%s", s,
                 full ? "  (w/s zoom, a/d move, arrows: op and lane)" : ", w/s zoom, a/d move");
    else {
        format_duration((double)(ring->latest_ns - end), d, sizeof d);
        snprintf(extra, sizeof extra, "span %s, ending %s before the latest%s", s, d,
                 full ? "  (D to the end or End: follow)" : "");
    }
    if (p->st && p->st->sampled)
        snprintf(extra + strlen(extra), sizeof extra - strlen(extra), ", sampled");
    frame_title(c, r, "Timeline", extra);
}

/* The rows under the axis: the steps above the lanes, the queues' and counters' tracks below
 * them (on the overview one), as the rows allow: one lane at least. */
typedef struct tl_rows {
    int steps, tracks, lanes;
} tl_rows;

static tl_rows plan_rows(const tlring *ring, int lanes_h, int full)
{
    int has_steps = 0;
    for (size_t k = 0; k < ring->nmarks && !has_steps; k++)
        has_steps = tlring_mark(ring, k)->kind == TS_KIND_STEP_BEGIN;
    int steps_row = has_steps && lanes_h >= 3 ? 1 : 0;
    int tracks = (int)ring->ntracks < (full ? TLRING_TRACKS : 1) ? (int)ring->ntracks
                                                                 : (full ? TLRING_TRACKS : 1);
    if (tracks > lanes_h - steps_row - 1)
        tracks = lanes_h - steps_row - 1 > 0 ? lanes_h - steps_row - 1 : 0;
    return (tl_rows){.steps = steps_row, .tracks = tracks, .lanes = lanes_h - steps_row - tracks};
}

/* Looking back past what the live view keeps: say so, how much it keeps, and where the whole run
 * is, rather than a blank. */
static void draw_left_behind(const tlring *ring, canvas *c, rect r, uint64_t oldest)
{
    char kept[32], text[400];
    format_duration((double)(ring->latest_ns - oldest), kept, sizeof kept);
    snprintf(text, sizeof text,
             "This moment has left the live view, which keeps the latest %s of ops (%zu "
             "events). End returns to the latest. The recording has the whole run: F6 "
             "writes the report, whose timeline.json opens in ui.perfetto.dev or "
             "chrome://tracing.",
             kept, ring->n);
    frame_wrap(c, (rect){r.y + 2, r.x + 2, r.h - 2, r.w - 4}, 0, 0, ROLE_WARN, text);
}

/* The selected lane kept among the nl lanes, and the first lane shown moved so that it is in
 * view. Returns how many lanes are shown. */
static int place_lanes(view *v, int nl, int lanes_h)
{
    if (v->tl_lane >= nl)
        v->tl_lane = nl - 1;
    if (v->tl_lane < 0)
        v->tl_lane = 0;
    if (v->tl_lane_top > v->tl_lane)
        v->tl_lane_top = v->tl_lane;
    if (v->tl_lane >= v->tl_lane_top + lanes_h)
        v->tl_lane_top = v->tl_lane - lanes_h + 1;
    if (v->tl_lane_top < 0)
        v->tl_lane_top = 0;
    return nl - v->tl_lane_top < lanes_h ? nl - v->tl_lane_top : lanes_h;
}

/* The columns of the shown lanes (from lane_top), w a lane: in each, the event that wins it and
 * how many share it. Returns NULL when out of memory. */
static tl_cell *fill_cells(const tlring *ring, int lane_top, int shown, int w, uint64_t start,
                           uint64_t end, uint64_t span)
{
    tl_cell *cells = malloc((size_t)(shown > 0 ? shown : 1) * (size_t)w * sizeof *cells);
    if (!cells)
        return NULL;
    for (size_t i = 0; i < (size_t)shown * (size_t)w; i++)
        cells[i] = (tl_cell){.ev = -1};
    double nspc = (double)span / w;
    for (size_t k = 0; k < ring->n; k++) {
        const ts_event *e = ring_at(ring, k);
        int x0, x1;
        if (!columns_of(e->begin_ns, e->end_ns, start, end, span, w, &x0, &x1))
            continue;
        int lane = tlring_lane_of(ring, e) - lane_top;
        if (lane < 0 || lane >= shown)
            continue;
        double b = (double)(e->begin_ns > start ? e->begin_ns - start : 0);
        double f = (double)(e->end_ns < end ? e->end_ns - start : span);
        uint16_t depth = (uint16_t)(e->kind == TS_KIND_OP_RANGE ? e->aux : 0);
        for (int x = x0; x < x1; x++) {
            double cb = x * nspc, cf = cb + nspc;
            double ov = (f < cf ? f : cf) - (b > cb ? b : cb);
            uint64_t cover = ov > 0 ? (uint64_t)ov : 0;
            tl_cell *cl = &cells[(size_t)lane * (size_t)w + (size_t)x];
            cl->count++;
            /* The event covering most of the column wins; on a tie the outer op (top-level
             * ranges name the work; nested ones are its parts). */
            if (cl->ev < 0 || cover > cl->cover || (cover == cl->cover && depth < cl->depth)) {
                cl->cover = cover;
                cl->ev = (int32_t)k;
                cl->depth = depth;
            }
        }
    }
    return cells;
}

/* One lane at row y: its label (marked when sel), then its blocks, a run of columns that one
 * event wins at a time; cur is the event under the cursor, nspc the ns a column covers. */
static void draw_lane(const panel_ctx *p, canvas *c, rect r, int y, const tl_lane *l, int sel,
                      const tl_cell *row, int w, long cur, double nspc)
{
    const tlring *ring = p->tl;
    int x0 = LABEL_W + 1;
    char label[80];
    lane_label(p, l, label, sizeof label);
    if (sel)
        canvas_put(c, r, y, 0, c->g->selected, ROLE_CURSOR);
    canvas_text_fit(c, r, y, 1, LABEL_W - 1, sel ? ROLE_TITLE : ROLE_HEADER_KEY, label,
                    strlen(label), 0);
    for (int x = 0; x < w;) {
        if (row[x].ev < 0) {
            x++;
            continue;
        }
        int run = 1;
        while (x + run < w && row[x + run].ev == row[x].ev)
            run++;
        const ts_event *e = ring_at(ring, (size_t)row[x].ev);
        int role = row[x].ev == cur ? ROLE_CURSOR : block_role(p->a, e);
        for (int k = 0; k < run; k++) {
            const tl_cell *cl = &row[x + k];
            /* Several ops share the column and none fills half of it: which one "won" says
             * nothing, so the column gets the neutral dense glyph (and costs the terminal
             * no color changes from one column to the next). */
            int dense = cl->count > 1 && (double)cl->cover < nspc / 2;
            if (dense)
                canvas_put(c, r, y, x0 + x + k, c->g->dense,
                           row[x].ev == cur ? ROLE_CURSOR : ROLE_DIM);
            else
                canvas_put(c, r, y, x0 + x + k, k ? ' ' : c->g->edge, role);
        }
        if (run >= 3) {
            const char *name;
            uint32_t len;
            short_name(p->a, e, &name, &len);
            canvas_text_fit(c, r, y, x0 + x + 1, run - 1, role, name, len, 0);
        }
        x += run;
    }
}

static void timeline_draw(const panel_ctx *p, view *v, canvas *c, rect r, int full)
{
    const tlring *ring = p->tl;
    uint64_t span = span_of(p, v);
    uint64_t end = end_of(p, v);
    uint64_t start = end > span ? end - span : 0;
    v->tl_latest = ring ? ring->latest_ns : 0;
    draw_title(p, v, c, r, full, span, end);
    if (!ring || !ring->n) {
        const source_status *st = p->st;
        canvas_str(c, r, 2, 2, ROLE_DIM,
                   st && st->state != TS_STATE_COLLECTING && !st->gone
                       ? "no ops yet: press F5 (or c) to start collecting"
                       : "no ops yet");
        return;
    }
    int w = r.w - LABEL_W - 1;
    int lanes_h = r.h - 3; /* title, axis, details */
    if (w < 8 || lanes_h < 1)
        return;
    tl_rows rows = plan_rows(ring, lanes_h, full);
    lanes_h = rows.lanes;
    v->tl_rows_above = rows.steps;
    uint64_t oldest = ring_at(ring, 0)->begin_ns;
    if (!v->tl_follow && end < oldest) {
        draw_left_behind(ring, c, r, oldest);
        return;
    }
    int nl = (int)ring->nlanes;
    int shown = place_lanes(v, nl, lanes_h);

    long cur = find_cursor(ring, v->tl_lane, v->tl_cursor, end);
    /* The op left the ring, or scrolled out of a window that follows: back to the latest. */
    if (v->tl_cursor &&
        (cur < 0 || (v->tl_follow && ring_at(ring, (size_t)cur)->end_ns <= start))) {
        v->tl_cursor = 0;
        cur = find_cursor(ring, v->tl_lane, 0, end);
    }

    tl_cell *cells = fill_cells(ring, v->tl_lane_top, shown, w, start, end, span);
    if (!cells)
        return;
    int x0 = LABEL_W + 1;
    draw_axis(c, r, 1, x0, w, start, end, ring->latest_ns);
    if (rows.steps)
        draw_steps(c, r, 2, x0, w, ring, start, span);
    for (int t = 0; t < rows.tracks; t++)
        draw_track(p, c, r, 2 + rows.steps + lanes_h + t, x0, w, &ring->tracks[t], start, span);
    for (int li = 0; li < shown; li++)
        draw_lane(p, c, r, 2 + rows.steps + li, &ring->lanes[v->tl_lane_top + li],
                  v->tl_lane_top + li == v->tl_lane, &cells[(size_t)li * (size_t)w], w, cur,
                  (double)span / w);
    if (nl > shown && lanes_h > 0) {
        char more[32];
        snprintf(more, sizeof more, "%d more lanes", nl - shown);
        canvas_str(c, r, 1, 1, ROLE_DIM, more);
    }
    free(cells);
    draw_details(p, c, r, r.h - 1, cur >= 0 ? ring_at(ring, (size_t)cur) : NULL,
                 &ring->lanes[v->tl_lane], ring->latest_ns);
}

/* Moves the window so that the op at ring position k is inside it. */
static void reveal(const panel_ctx *p, view *v, long k)
{
    const ts_event *e = ring_at(p->tl, (size_t)k);
    uint64_t span = span_of(p, v), end = end_of(p, v);
    uint64_t start = end > span ? end - span : 0;
    v->tl_cursor = e->begin_ns;
    if (e->begin_ns >= start && e->begin_ns < end)
        return;
    v->tl_follow = 0;
    v->tl_span_ns = span;
    v->tl_end_ns = e->begin_ns + span / 2;
    if (v->tl_end_ns >= p->tl->latest_ns) {
        v->tl_end_ns = p->tl->latest_ns;
        v->tl_follow = 1;
    }
}

static int timeline_key(const panel_ctx *p, view *v, int key, int full)
{
    const tlring *ring = p->tl;
    uint64_t span = span_of(p, v), end = end_of(p, v);
    uint64_t latest = ring ? ring->latest_ns : 0;
    switch (key) {
    case 'W':
    case 'w':
        v->tl_span_ns = span / 2 < SPAN_MIN_NS ? SPAN_MIN_NS : span / 2;
        if (!v->tl_follow && v->tl_cursor) /* zoom toward the op under the cursor */
            v->tl_end_ns = v->tl_cursor + v->tl_span_ns / 2 < latest
                               ? v->tl_cursor + v->tl_span_ns / 2
                               : latest;
        else if (!v->tl_follow)
            v->tl_end_ns = end - (span - v->tl_span_ns) / 2;
        return 1;
    case 'S':
    case 's':
        v->tl_span_ns = span * 2 > SPAN_MAX_NS ? SPAN_MAX_NS : span * 2;
        if (!v->tl_follow) {
            v->tl_end_ns = end + span / 2;
            if (v->tl_end_ns >= latest) {
                v->tl_end_ns = latest;
                v->tl_follow = 1;
            }
        }
        return 1;
    case 'A':
    case 'a':
        v->tl_span_ns = span;
        v->tl_end_ns = end > span / 4 ? end - span / 4 : 0;
        v->tl_follow = 0;
        return 1;
    case 'D':
    case 'd':
        v->tl_span_ns = span;
        v->tl_end_ns = end + span / 4;
        if (v->tl_end_ns >= latest) {
            v->tl_end_ns = latest;
            v->tl_follow = 1;
        }
        return 1;
    case VK_LEFT:
    case VK_RIGHT: {
        if (!ring || !ring->n)
            return 1;
        long cur = find_cursor(ring, v->tl_lane, v->tl_cursor, end);
        if (cur < 0)
            return 1;
        long k = step_cursor(ring, v->tl_lane, ring_at(ring, (size_t)cur)->begin_ns,
                             key == VK_LEFT ? -1 : 1);
        if (k >= 0)
            reveal(p, v, k);
        return 1;
    }
    default:
        break;
    }
    if (!full)
        return 0;
    switch (key) {
    case VK_UP:
        v->tl_lane = v->tl_lane > 0 ? v->tl_lane - 1 : 0;
        v->tl_cursor = 0;
        return 1;
    case VK_DOWN:
        v->tl_lane++;
        v->tl_cursor = 0;
        return 1;
    case VK_PPAGE:
        v->tl_lane_top = v->tl_lane_top > 4 ? v->tl_lane_top - 4 : 0;
        v->tl_lane = v->tl_lane_top;
        return 1;
    case VK_NPAGE:
        v->tl_lane_top += 4;
        v->tl_lane = v->tl_lane_top;
        return 1;
    case VK_HOME:
        if (ring && ring->n) {
            uint64_t oldest = UINT64_MAX;
            for (size_t k = 0; k < ring->n; k++)
                if (ring_at(ring, k)->begin_ns < oldest)
                    oldest = ring_at(ring, k)->begin_ns;
            v->tl_span_ns = span;
            v->tl_end_ns = oldest + span;
            v->tl_follow = v->tl_end_ns >= latest;
            v->tl_cursor = 0;
        }
        return 1;
    case VK_END:
        v->tl_follow = 1;
        v->tl_cursor = 0;
        return 1;
    default:
        return 0;
    }
}

/* A click on a lane selects it and puts the cursor on the op under the click (the one
 * covering that moment, else the nearest before it); the window stops following, so the op
 * stays in view. */
static int timeline_click(const panel_ctx *p, view *v, rect r, int y, int x, int full)
{
    (void)full;
    const tlring *ring = p->tl;
    int w = r.w - LABEL_W - 1, row = y - 2 - v->tl_rows_above, lane = v->tl_lane_top + row;
    if (!ring || !ring->n || w < 8 || row < 0 || y >= r.h - 1 || lane >= (int)ring->nlanes)
        return VA_NONE;
    v->tl_lane = lane;
    if (x < LABEL_W + 1)
        return VA_REDRAW; /* on the lane's name: the lane only */
    uint64_t span = span_of(p, v), end = end_of(p, v);
    uint64_t start = end > span ? end - span : 0;
    uint64_t at = start + (uint64_t)(((double)(x - LABEL_W - 1) + 0.5) * (double)span / w);
    long best = -1;
    for (size_t k = 0; k < ring->n; k++) {
        const ts_event *e = ring_at(ring, k);
        if (tlring_lane_of(ring, e) != lane || e->begin_ns > at)
            continue;
        /* Covering the moment beats ending before it; then the later begin (the inner op). */
        const ts_event *b = best >= 0 ? ring_at(ring, (size_t)best) : NULL;
        int covers = e->end_ns >= at, b_covers = b && b->end_ns >= at;
        if (!b || covers > b_covers || (covers == b_covers && e->begin_ns > b->begin_ns))
            best = (long)k;
    }
    v->tl_follow = 0;
    v->tl_span_ns = span;
    v->tl_end_ns = end;
    if (best >= 0)
        v->tl_cursor = ring_at(ring, (size_t)best)->begin_ns;
    return VA_REDRAW;
}

static const key_hint timeline_hints[] = {{"W/S", "Zoom", 1, 0},
                                          {"A/D", "Move", 1, 0},
                                          {"\u2190\u2192", "Op", 3, 0},
                                          {"\u2191\u2193", "Lane", 4, 0},
                                          {NULL, NULL, 0, 0}};

const panel_class panel_timeline = {
    .title = "Timeline",
    .tab = "Timeline",
    .draw = timeline_draw,
    .key = timeline_key,
    .hints = timeline_hints,
    .click = timeline_click,
    .wheel_up = 'a',
    .wheel_down = 'd',
};
