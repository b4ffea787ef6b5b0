/* panel_steps: the step trace (what step_trace.csv holds): one stacked bar per recent step,
 * its split on the host from the bottom up (interval, compute, communication wait, tail,
 * evaluation), with the average drawn as a line across and the run's slowest steps marked above
 * their bars; where steps have device work, a GPU row under the bars: each step's device busy
 * share as a shade, in the color of its largest idle cause when the device idled more than half
 * of it. */
#include "tui_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RECENT_MAX 256

static int is_slowest(const step_summary *ss, uint64_t step)
{
    for (int i = 0; i < 5; i++)
        if (ss->slowest[i] && ss->slowest[i] == step)
            return 1;
    return 0;
}

static int cells_of(double v, double max, int h)
{
    if (!(max > 0) || !(v > 0))
        return 0;
    double f = v / max;
    if (!(f < 1)) /* the tallest, or times from a damaged segment: clamped before lround */
        return h;
    return (int)lround(f * h);
}

/* The n steps of rows as bars in area, one colw-wide column each from the left, under a row
 * that marks the run's slowest steps. max is the height of a full bar. */
static void draw_bars(canvas *c, rect area, const step_row *rows, size_t n, int colw,
                      const step_summary *ss, double max)
{
    const glyphs *g = c->g;
    int h = area.h - 1; /* below the marker row */
    int avg_y = ss->steps ? cells_of(ss->avg_total_ns, max, h) : 0;
    for (size_t i = 0; i < n; i++) {
        const step_row *s = &rows[i];
        int b3 = cells_of((double)s->total_ns, max, h);
        if (s->total_ns && !b3)
            b3 = 1;
        /* Cumulative tops of the split's parts, bottom up, clamped to the bar. */
        const uint64_t part[5] = {s->interval_ns, s->compute_ns, s->comm_wait_ns, s->tail_ns,
                                  s->eval_ns};
        const uint32_t part_glyph[5] = {g->interval, g->fpbp, g->wait, g->tail, g->eval};
        static const int part_role[5] = {ROLE_INTERVAL, ROLE_FPBP, ROLE_WAIT, ROLE_TAIL, ROLE_EVAL};
        int top[5];
        double sum = 0;
        for (int k = 0; k < 5; k++) {
            sum += (double)part[k];
            top[k] = cells_of(sum, max, h);
            top[k] = top[k] > b3 ? b3 : top[k];
        }
        for (int k = 4; k >= 0; k--) { /* rounding: the last part present reaches the top */
            top[k] = b3;
            if (part[k])
                break;
        }
        int known = s->source != STEP_SOURCE_NONE;
        for (int k = 0; k < colw; k++) {
            int x = (int)i * colw + k;
            for (int level = 0; level < h; level++) {
                int y = area.h - 1 - level;
                if (level < b3) {
                    int at = 0;
                    while (at < 4 && level >= top[at])
                        at++;
                    uint32_t ch = known ? part_glyph[at] : g->unknown;
                    int role = known ? part_role[at] : ROLE_DIM;
                    canvas_put(c, area, y, x, ch, role);
                }
                /* The average crosses every bar, as a reference line does. */
                if (avg_y > 0 && level == avg_y - 1)
                    canvas_put(c, area, y, x, g->avg, ROLE_AVG);
            }
            if (is_slowest(ss, s->step))
                canvas_put(c, area, 0, x, g->slow, ROLE_SLOW);
        }
    }
}

/* The role of a step's cell in the GPU row: busy at least half the step, else its largest idle
 * cause (data, host-bound, synchronization, other). */
static int gpu_role(const step_row *s)
{
    if (2 * s->gpu_busy_ns >= s->total_ns)
        return ROLE_GOOD;
    const uint64_t idle[4] = {s->gpu_idle_data_ns, s->gpu_idle_host_ns, s->gpu_idle_sync_ns,
                              s->gpu_idle_other_ns};
    static const int role[4] = {ROLE_INTERVAL, ROLE_WARN, ROLE_TAIL, ROLE_DIM};
    int big = 0;
    for (int k = 1; k < 4; k++)
        if (idle[k] > idle[big])
            big = k;
    return role[big];
}

/* The GPU row at y: per step, its device busy share in five shades. */
static void draw_gpu_row(canvas *c, rect r, int y, const step_row *rows, size_t n, int colw)
{
    const glyphs *g = c->g;
    for (size_t i = 0; i < n; i++) {
        const step_row *s = &rows[i];
        if (s->gpu_device == TS_DEVICE_HOST || !s->total_ns)
            continue;
        double share = (double)s->gpu_busy_ns / (double)s->total_ns;
        int shade = share >= 1 ? 4 : (int)(share * 5);
        for (int k = 0; k < colw; k++)
            canvas_put(c, r, y, (int)i * colw + k, g->shade[shade], gpu_role(s));
    }
}

static void draw_axis(canvas *c, rect r, int y, const step_row *rows, size_t n)
{
    const glyphs *g = c->g;
    char left[32] = "", right[32] = "";
    if (n) {
        snprintf(left, sizeof left, "#%llu", (unsigned long long)rows[0].step);
        snprintf(right, sizeof right, "#%llu", (unsigned long long)rows[n - 1].step);
    }
    int lw = canvas_str(c, r, y, 0, ROLE_DIM, left);
    int rw = (int)strlen(right);
    canvas_str(c, r, y, r.w - rw, ROLE_DIM, right);
    /* The legend, in the longest form that fits between the step numbers. */
    int room = r.w - lw - rw - 2;
    static const char *const names[2][7] = {
        {"interval", "compute", "comm wait", "tail", "eval", "avg", "slowest"},
        {"int", "comp", "wait", "tail", "eval", "avg", "slow"}};
    static const struct {
        int form, items;
    } forms[] = {{0, 7}, {1, 7}, {1, 4}};
    const uint32_t gl[7] = {g->interval, g->fpbp, g->wait, g->tail, g->eval, g->avg, g->slow};
    const int roles[7] = {ROLE_INTERVAL, ROLE_FPBP, ROLE_WAIT, ROLE_TAIL,
                          ROLE_EVAL,     ROLE_AVG,  ROLE_SLOW};
    for (size_t f = 0; f < sizeof forms / sizeof forms[0]; f++) {
        int need = 0;
        for (int i = 0; i < forms[f].items; i++)
            need += 2 + (int)strlen(names[forms[f].form][i]) + 1;
        if (need - 1 > room)
            continue;
        int x = lw + 1 + (room - need) / 2;
        for (int i = 0; i < forms[f].items; i++) {
            canvas_put(c, r, y, x, gl[i], roles[i]);
            x += 2;
            x += canvas_str(c, r, y, x, ROLE_DIM, names[forms[f].form][i]) + 1;
        }
        return;
    }
}

/* The averages and the slowest steps, under the bars on the full screen. */
static void draw_table(canvas *c, rect r, int y, const step_summary *ss)
{
    static const char *const source_text[] = {"not found (no ops in the steps)", "phase marks",
                                              "operator names given by option",
                                              "automatic (first op; op before the last comm)"};
    char a[32], t[32];
    int x;
    if (!ss->steps) {
        canvas_str(c, r, y, 1, ROLE_DIM, "no finished steps yet");
        return;
    }
    double tot = ss->avg_total_ns > 0 ? ss->avg_total_ns : 1;
    const struct {
        const char *name;
        double ns;
    } part[5] = {{"interval", ss->avg_interval_ns},
                 {"compute", ss->avg_compute_ns},
                 {"comm wait", ss->avg_comm_wait_ns},
                 {"tail", ss->avg_tail_ns},
                 {"eval", ss->avg_eval_ns}};
    canvas_printf(c, r, y++, 1, ROLE_LABEL, "%-12s %12s %8s", "average", "time", "share");
    for (int k = 0; k < 5; k++) {
        format_duration(part[k].ns, a, sizeof a);
        canvas_printf(c, r, y++, 1, ROLE_NORMAL, "%-12s %12s %7.1f%%", part[k].name, a,
                      100 * part[k].ns / tot);
    }
    format_duration(ss->avg_total_ns, t, sizeof t);
    canvas_printf(c, r, y++, 1, ROLE_NORMAL, "%-12s %12s   (on the host)", "step", t);
    if (ss->gpu_steps) {
        double gt = ss->avg_gpu_total_ns > 0 ? ss->avg_gpu_total_ns : 1;
        char d[32], h[32], s[32];
        format_duration(ss->avg_gpu_busy_ns, a, sizeof a);
        format_duration(ss->avg_gpu_idle_data_ns, d, sizeof d);
        format_duration(ss->avg_gpu_idle_host_ns, h, sizeof h);
        format_duration(ss->avg_gpu_idle_sync_ns, s, sizeof s);
        format_duration(ss->avg_gpu_idle_other_ns, t, sizeof t);
        x = 1 + canvas_printf(c, r, y, 1, ROLE_HEADER_KEY, "GPU %u ", ss->gpu_device);
        canvas_printf(c, r, y++, x, ROLE_NORMAL,
                      "busy %s %.0f%%, idle: data %s, host-bound %s, sync %s, other %s", a,
                      100 * ss->avg_gpu_busy_ns / gt, d, h, s, t);
    }
    x = 1;
    x += canvas_printf(c, r, y, x, ROLE_HEADER_KEY, "%llu steps, FP/BP from ",
                       (unsigned long long)ss->steps);
    canvas_str(c, r, y++, x, ROLE_NORMAL, source_text[ss->source < 4 ? ss->source : 0]);
    x = 1;
    x += canvas_str(c, r, y, x, ROLE_HEADER_KEY, "slowest ");
    for (int i = 0; i < 5 && ss->slowest[i]; i++) {
        format_duration((double)ss->slowest_ns[i], a, sizeof a);
        x += canvas_printf(c, r, y, x, ROLE_SLOW, "#%llu", (unsigned long long)ss->slowest[i]);
        x += canvas_printf(c, r, y, x, ROLE_NORMAL, " %s  ", a);
    }
    y++;
    if (ss->evals) {
        format_duration(ss->eval_ns, a, sizeof a);
        x = 1 + canvas_str(c, r, y, 1, ROLE_HEADER_KEY, "evaluation ");
        canvas_printf(c, r, y, x, ROLE_NORMAL, "%llu pass%s, %s in all",
                      (unsigned long long)ss->evals, ss->evals == 1 ? "" : "es", a);
    } else if (ss->unfinished_step) {
        x = 1 + canvas_str(c, r, y, 1, ROLE_HEADER_KEY, "under way ");
        canvas_printf(c, r, y, x, ROLE_NORMAL, "step #%llu (in no average yet)",
                      (unsigned long long)ss->unfinished_step);
    }
}

static void steps_draw(const panel_ctx *p, view *v, canvas *c, rect r, int full)
{
    step_summary ss = analysis_steps(p->a);
    char extra[160] = "";
    if (ss.steps) {
        char t[32], a[32], b[32], w[32], d[32];
        format_duration(ss.avg_total_ns, t, sizeof t);
        format_duration(ss.avg_interval_ns, a, sizeof a);
        format_duration(ss.avg_compute_ns, b, sizeof b);
        format_duration(ss.avg_comm_wait_ns, w, sizeof w);
        format_duration(ss.avg_tail_ns, d, sizeof d);
        int n =
            ss.avg_comm_wait_ns > 0
                ? snprintf(extra, sizeof extra, "avg %s = %s + %s + wait %s + %s", t, a, b, w, d)
                : snprintf(extra, sizeof extra, "avg %s = %s + %s + %s", t, a, b, d);
        if (ss.slowest[0] && n > 0 && (size_t)n < sizeof extra) {
            format_duration((double)ss.slowest_ns[0], t, sizeof t);
            snprintf(extra + n, sizeof extra - (size_t)n, ", slowest #%llu %s",
                     (unsigned long long)ss.slowest[0], t);
        }
    } else {
        snprintf(extra, sizeof extra, "no finished steps yet");
    }
    frame_title(c, r, "Step trace (on the host)", extra);

    step_row *rows = malloc(RECENT_MAX * sizeof *rows);
    if (!rows)
        return;
    size_t n = analysis_recent_steps(p->a, rows, RECENT_MAX);
    int gpu = 0; /* a GPU row under the bars */
    for (size_t i = 0; i < n && !gpu; i++)
        gpu = rows[i].gpu_device != TS_DEVICE_HOST;
    int table_rows = ss.gpu_steps > 0 ? 11 : 10; /* the device's line where there is one */
    table_rows = full && r.h >= 12 + table_rows ? table_rows : 0;
    rect area = {r.y + 1, r.x, r.h - 2 - table_rows - gpu, r.w};
    if (area.h < 2) {
        free(rows);
        return;
    }
    int colw = 1;
    if (full && n && (size_t)r.w / n >= 2)
        colw = (size_t)r.w / n >= 3 ? 3 : 2;
    size_t fit = (size_t)(r.w / colw);
    /* Scrolled back: steps_back newest steps hidden on the right. */
    size_t maxback = n > fit ? n - fit : 0;
    if (v->steps_back < 0)
        v->steps_back = 0;
    if ((size_t)v->steps_back > maxback)
        v->steps_back = (int)maxback;
    v->steps_page = (int)fit;
    size_t end = n - (size_t)v->steps_back;
    size_t first = end > fit ? end - fit : 0;
    double max = 0;
    for (size_t i = first; i < end; i++)
        if ((double)rows[i].total_ns > max)
            max = (double)rows[i].total_ns;
    if (end > first) {
        char m[32];
        format_duration(max, m, sizeof m);
        canvas_printf(c, area, 0, 0, ROLE_DIM, "%s", m);
        draw_bars(c, area, rows + first, end - first, colw, &ss, max);
    } else {
        const source_status *st = p->st;
        canvas_str(c, area, area.h / 2, 2, ROLE_DIM,
                   st && st->state != TS_STATE_COLLECTING && !st->gone
                       ? "not collecting: press F5 (or c) to start"
                       : "waiting for steps (termsight_step_begin / step_end)");
    }
    if (gpu)
        draw_gpu_row(c, (rect){r.y + 1 + area.h, r.x, 1, r.w}, 0, rows + first, end - first, colw);
    draw_axis(c, r, 1 + area.h + gpu, rows + first, end - first);
    if (table_rows)
        draw_table(c, r, 2 + area.h + gpu, &ss);
    free(rows);
}

static int steps_key(const panel_ctx *p, view *v, int key, int full)
{
    (void)p;
    const scroll_keys s = {
        .page = v->steps_page > 1 ? v->steps_page : 1, .last = RECENT_MAX, .back_in_time = 1};
    return full && view_scroll(&s, key, &v->steps_back);
}

static const key_hint steps_hints[] = {{"\u2190\u2192", "Older/newer", 2, 0}, {NULL, NULL, 0, 0}};

const panel_class panel_steps = {
    .title = "Step trace",
    .tab = "Steps",
    .draw = steps_draw,
    .key = steps_key,
    .hints = steps_hints,
    .wheel_up = VK_LEFT,
    .wheel_down = VK_RIGHT,
};
