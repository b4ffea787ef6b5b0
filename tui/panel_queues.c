/* panel_queues: data queues (what data_queues.csv and data_queue_usage.csv hold): a heatmap with
 * one row per queue and one column per time bucket, shaded by usage, and the bottleneck verdict
 * with its numbers and the analysis's suggestion (analysis_queue_findings). */
#include "tui_internal.h"

#include <stdlib.h>
#include <string.h>

#define BUCKETS_MAX  512
#define FINDINGS_MAX 16

static const char *const verdict_text[] = {
    [QUEUE_VERDICT_NONE] = "-",
    [QUEUE_VERDICT_OK] = "ok",
    [QUEUE_VERDICT_DATA_PROCESSING] = "data processing slow",
    [QUEUE_VERDICT_TRANSFER] = "transfer slow",
    [QUEUE_VERDICT_OPERATOR] = "operator bottleneck",
    [QUEUE_VERDICT_TRAINING] = "training is slower",
};

static const char *const role_text[] = {"pipeline", "host", "device"};

static const char *verdict_of(uint32_t v)
{
    return v < sizeof verdict_text / sizeof verdict_text[0] ? verdict_text[v] : "?";
}

static int verdict_role(uint32_t v)
{
    return v == QUEUE_VERDICT_OK || v == QUEUE_VERDICT_TRAINING ? ROLE_GOOD
           : v == QUEUE_VERDICT_NONE                            ? ROLE_DIM
                                                                : ROLE_BAD;
}

static void heat_row(const panel_ctx *p, canvas *c, rect r, int y, int x, int w, uint32_t q,
                     queue_bucket *buf)
{
    size_t n =
        analysis_queue_recent(p->a, q, buf, (size_t)w < BUCKETS_MAX ? (size_t)w : BUCKETS_MAX);
    int at = x + w - (int)n; /* newest at the right edge */
    for (size_t i = 0; i < n; i++) {
        int k = buf[i].samples ? format_shade(buf[i].avg_usage) : -1;
        if (k >= 0)
            canvas_put(c, r, y, at + (int)i, c->g->shade[k], ROLE_HEAT0 + k);
    }
}

/* The columns' widths: name, [role], heatmap, usage, [empty], [verdict] (the bracketed ones on
 * the full screen only, 0 otherwise). */
typedef struct columns {
    int name, role, heat, use, empty, verdict;
} columns;

static columns columns_for(int w, int full)
{
    columns cw = {.name = full ? (w >= 110 ? 20 : 14) : 12, .role = full ? 9 : 0, .use = 6};
    cw.empty = full ? 8 : 0;
    cw.verdict = full ? 21 : 0; /* the longest verdict and a blank */
    cw.heat = w - 1 - cw.name - 1 - cw.role - cw.use - cw.empty - cw.verdict - 1;
    return cw;
}

static void draw_head(canvas *c, rect body, const columns *cw, int full)
{
    rect head = {body.y, body.x, 1, body.w};
    canvas_fill(c, head, ' ', ROLE_LABEL);
    int x = 1;
    canvas_str(c, head, 0, x, ROLE_LABEL, "QUEUE");
    x += cw->name + 1;
    if (cw->role)
        canvas_str(c, head, 0, x, ROLE_LABEL, "ROLE");
    x += cw->role;
    /* The heatmap's head as long as its column allows. */
    const char *usage = full && cw->heat >= 30   ? "USAGE OVER TIME (newest right)"
                        : full && cw->heat >= 15 ? "USAGE OVER TIME"
                                                 : "USAGE";
    canvas_text_fit(c, head, 0, x, cw->heat, ROLE_LABEL, usage, strlen(usage), 0);
    x += cw->heat + 1;
    canvas_str(c, head, 0, x, ROLE_LABEL, "  AVG");
    x += cw->use;
    if (cw->empty)
        canvas_str(c, head, 0, x, ROLE_LABEL, "  EMPTY");
    x += cw->empty;
    if (cw->verdict)
        canvas_str(c, head, 0, x + 1, ROLE_LABEL, "VERDICT");
}

/* Queue i's row at y: its name, role, heatmap (buf: room for its buckets), usage, time empty
 * and the verdict of its finding among the nf in f. */
static void draw_queue(const panel_ctx *p, canvas *c, rect body, int y, const columns *cw,
                       const queue_stat *q, size_t i, const queue_finding *f, size_t nf,
                       queue_bucket *buf)
{
    uint32_t len = 0;
    const char *name = analysis_name(p->a, q->name, &len);
    int x = 1;
    canvas_text_fit(c, body, y, x, cw->name, ROLE_NORMAL, name, len, 0);
    x += cw->name + 1;
    if (cw->role)
        canvas_str(c, body, y, x, ROLE_DIM, q->role < 3 ? role_text[q->role] : "?");
    x += cw->role;
    if (cw->heat > 0)
        heat_row(p, c, body, y, x, cw->heat, (uint32_t)i, buf);
    x += cw->heat + 1;
    canvas_printf(c, body, y, x, ROLE_NORMAL, "%5.0f%%", 100 * q->avg_usage);
    x += cw->use;
    if (cw->empty)
        canvas_printf(c, body, y, x, ROLE_NORMAL, "%7.0f%%", 100 * q->empty_share);
    x += cw->empty;
    if (cw->verdict) {
        uint32_t verdict = QUEUE_VERDICT_NONE;
        for (size_t k = 0; k < nf; k++)
            if (f[k].queue == i) {
                verdict = f[k].verdict;
                break;
            }
        canvas_str(c, body, y, x + 1, verdict_role(verdict), verdict_of(verdict));
    }
}

/* The findings, most severe first, from row y up to bottom: on the overview the first one in a
 * line, on the full screen each with its numbers and suggestion. */
static void draw_findings(canvas *c, rect body, int y, int bottom, const queue_finding *f,
                          size_t nf, int full)
{
    for (size_t k = 0; k < nf && y < bottom; k++) {
        int role = verdict_role(f[k].verdict);
        if (!full) {
            canvas_put(c, body, y, 1, c->g->selected, role);
            canvas_text_fit(c, body, y, 3, body.w - 4, role, f[k].text, strlen(f[k].text), 0);
            break;
        }
        rect fr = {body.y + y, body.x + 3, bottom - y, body.w - 4};
        canvas_put(c, body, y, 1, c->g->selected, role);
        y += frame_wrap(c, fr, 0, 0, role, f[k].text);
        if (f[k].suggestion[0] && y < bottom) {
            fr = (rect){body.y + y, body.x + 3, bottom - y, body.w - 4};
            y += frame_wrap(c, fr, 0, 0, ROLE_NORMAL, f[k].suggestion);
        }
    }
}

/* The shades of usage, on the last row. */
static void draw_legend(canvas *c, rect body)
{
    int lx = 1;
    for (int k = 0; k < 5; k++) {
        canvas_put(c, body, body.h - 1, lx, c->g->shade[k], ROLE_HEAT0 + k);
        lx += 2 +
              canvas_printf(c, body, body.h - 1, lx + 2, ROLE_DIM, "%d-%d%%", k * 20, k * 20 + 20);
        lx += 2;
    }
    canvas_str(c, body, body.h - 1, lx, ROLE_DIM, "blank: no samples");
}

static void queues_draw(const panel_ctx *p, view *v, canvas *c, rect r, int full)
{
    queue_stat *qs = NULL;
    size_t nq = analysis_queues(p->a, &qs);
    queue_finding f[FINDINGS_MAX];
    size_t nf = analysis_queue_findings(p->a, f, FINDINGS_MAX);
    char extra[96];
    snprintf(extra, sizeof extra, "%zu queue%s, usage per %s%s", nq, nq == 1 ? "" : "s", "second",
             p->st && p->st->sampled ? ", sampled" : "");
    frame_title(c, r, "Data queues", extra);
    rect body = {r.y + 1, r.x, r.h - 1, r.w};
    if (!nq) {
        canvas_str(c, body, 0, 2, ROLE_DIM, "no queue samples yet (termsight_queue_size)");
        free(qs);
        return;
    }
    queue_bucket *buf = malloc(BUCKETS_MAX * sizeof *buf);
    if (!buf) {
        free(qs);
        return;
    }
    columns cw = columns_for(r.w, full);
    /* Rows: the head, the queues, a finding (all of them on the full screen, up to half the
     * rows), and the legend on the full screen. */
    int legend = full ? 1 : 0;
    int want_findings = full ? (int)nf * 3 : nf ? 1 : 0;
    int findings =
        want_findings < (body.h - 1 - legend) / 2 ? want_findings : (body.h - 1 - legend) / 2;
    int rows_for_queues = body.h - 1 - legend - findings;
    if (rows_for_queues < 1)
        rows_for_queues = 1;
    if (v->queues_top > (int)nq - rows_for_queues)
        v->queues_top = (int)nq - rows_for_queues;
    if (v->queues_top < 0)
        v->queues_top = 0;
    draw_head(c, body, &cw, full);
    int y = 1;
    for (size_t i = (size_t)v->queues_top; i < nq && y <= rows_for_queues; i++, y++)
        draw_queue(p, c, body, y, &cw, &qs[i], i, f, nf, buf);
    draw_findings(c, body, y, body.h - legend, f, nf, full);
    if (legend)
        draw_legend(c, body);
    free(buf);
    free(qs);
}

static int queues_key(const panel_ctx *p, view *v, int key, int full)
{
    (void)p;
    const scroll_keys s = {.last = SCROLL_OPEN}; /* Up, Down and Home: the draw bounds the end */
    return full && view_scroll(&s, key, &v->queues_top);
}

static const key_hint queues_hints[] = {{"\u2191\u2193", "Scroll", 4, 0}, {NULL, NULL, 0, 0}};

const panel_class panel_queues = {
    .title = "Data queues",
    .tab = "Queues",
    .draw = queues_draw,
    .key = queues_key,
    .hints = queues_hints,
    .wheel_up = VK_UP,
    .wheel_down = VK_DOWN,
};
