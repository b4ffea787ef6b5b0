/* report_html: report.html, the report as a picture: one self-contained page (inline SVG and
 * CSS, no script, no network) with the step trace bars, the operator top 20, the data queue
 * heatmap, the CPU gauges and the advisor's suggestions, linking to the Chrome trace and the
 * other files. Steps and queue buckets are gathered from the analysis sink as they complete,
 * into a bounded number of bins (neighbours merged two by two when full), so a long run costs
 * what a short one does. */
#include "report_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define STEP_BINS   600 /* bars of the step trace at most */
#define QUEUE_BINS  300 /* cells of a queue's heatmap row at most */
#define QUEUES_MAX  16
#define TOP_HTML    20
#define THREADS_MAX 12

enum { SPLIT_PARTS = 5 };

typedef struct step_bin {
    uint64_t first, last;     /* step numbers */
    double part[SPLIT_PARTS]; /* sums of the split, ns: interval, compute, wait, tail, eval */
    double total;             /* sum, ns */
    uint32_t n;
} step_bin;

typedef struct queue_bin {
    double usage; /* sum of the buckets' mean usage */
    uint32_t n;
} queue_bin;

struct report_picture {
    step_bin steps[STEP_BINS];
    size_t nsteps;
    uint32_t per_bin; /* steps a full bin holds */
    struct {
        queue_bin bins[QUEUE_BINS];
        size_t n;
        uint32_t per_bin;
    } queues[QUEUES_MAX];
};

report_picture *report_picture_create(void)
{
    report_picture *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->per_bin = 1;
    for (size_t q = 0; q < QUEUES_MAX; q++)
        p->queues[q].per_bin = 1;
    return p;
}

void report_picture_free(report_picture *p)
{
    free(p);
}

void report_picture_step(report_picture *p, const step_row *s)
{
    if (!p)
        return;
    if (p->nsteps == STEP_BINS && p->steps[STEP_BINS - 1].n == p->per_bin) {
        /* Full: neighbours merge, each bin now holds twice as many steps. */
        for (size_t i = 0; i < STEP_BINS / 2; i++) {
            step_bin *a = &p->steps[2 * i], *b = &p->steps[2 * i + 1];
            step_bin m = {
                .first = a->first, .last = b->last, .total = a->total + b->total, .n = a->n + b->n};
            for (int k = 0; k < SPLIT_PARTS; k++)
                m.part[k] = a->part[k] + b->part[k];
            p->steps[i] = m;
        }
        p->nsteps = STEP_BINS / 2;
        p->per_bin *= 2;
    }
    if (!p->nsteps || p->steps[p->nsteps - 1].n == p->per_bin)
        p->steps[p->nsteps++] = (step_bin){.first = s->step};
    step_bin *b = &p->steps[p->nsteps - 1];
    b->last = s->step;
    const uint64_t part[SPLIT_PARTS] = {s->interval_ns, s->compute_ns, s->comm_wait_ns, s->tail_ns,
                                        s->eval_ns};
    for (int k = 0; k < SPLIT_PARTS; k++)
        b->part[k] += (double)part[k];
    b->total += (double)s->total_ns;
    b->n++;
}

void report_picture_bucket(report_picture *p, const queue_bucket *b)
{
    if (!p || b->queue >= QUEUES_MAX || !b->samples)
        return;
    typeof(p->queues[0]) *q = &p->queues[b->queue];
    if (q->n == QUEUE_BINS && q->bins[QUEUE_BINS - 1].n == q->per_bin) {
        for (size_t i = 0; i < QUEUE_BINS / 2; i++)
            q->bins[i] = (queue_bin){.usage = q->bins[2 * i].usage + q->bins[2 * i + 1].usage,
                                     .n = q->bins[2 * i].n + q->bins[2 * i + 1].n};
        q->n = QUEUE_BINS / 2;
        q->per_bin *= 2;
    }
    if (!q->n || q->bins[q->n - 1].n == q->per_bin)
        q->bins[q->n++] = (queue_bin){0};
    q->bins[q->n - 1].usage += b->avg_usage;
    q->bins[q->n - 1].n++;
}

/* ---- Writing ------------------------------------------------------------------------------ */

void report_html_text(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&#39;", f);
            break;
        default:
            fputc(*s, f);
            break;
        }
    }
}

static void put_name(FILE *f, scratch *sc, const analysis *a, uint32_t id)
{
    report_html_text(f, report_clean_id(sc, a, id, 0));
}

/* "12.3 ms", "1.50 s", "850 us". */
static void put_duration(FILE *f, double ns)
{
    if (!(ns >= 0))
        fputs("-", f);
    else if (ns >= 1e9)
        fprintf(f, "%.3g s", ns / 1e9);
    else if (ns >= 1e6)
        fprintf(f, "%.3g ms", ns / 1e6);
    else if (ns >= 1e3)
        fprintf(f, "%.3g us", ns / 1e3);
    else
        fprintf(f, "%.0f ns", ns);
}

static const char style[] =
    "body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px auto;"
    "max-width:1200px;padding:0 16px;color:#1d1d1f;background:#fff}"
    "h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;"
    "border-bottom:1px solid #ddd;padding-bottom:4px}.meta{color:#555}.meta b{color:#1d1d1f}"
    "a{color:#0b63c5}table{border-collapse:collapse;width:100%}"
    "th,td{padding:3px 8px;text-align:right;white-space:nowrap}"
    "th{border-bottom:1px solid #bbb;font-weight:600}td.n,th.n{text-align:left;"
    "white-space:normal;word-break:break-all}tr:nth-child(even){background:#f6f6f8}"
    ".bar{display:inline-block;height:10px;background:#4a7fd6;vertical-align:middle}"
    ".legend span{display:inline-block;margin-right:16px}.legend i{display:inline-block;"
    "width:12px;height:12px;margin-right:4px;vertical-align:-1px}"
    ".gauge{display:flex;align-items:center;margin:3px 0}.gauge .l{width:180px;"
    "overflow:hidden;text-overflow:ellipsis;white-space:nowrap}"
    ".gauge .g{flex:0 0 420px;height:14px;background:#eee;display:flex;margin:0 10px}"
    ".gauge .g i{display:block;height:100%}.advice{margin:6px 0 12px}"
    ".advice b{display:block}.dim{color:#777}svg{display:block}";

#define C_INTERVAL "#b0b7c3"
#define C_FPBP     "#4a7fd6"
#define C_TAIL     "#e8953a"
#define C_WAIT     "#c8504a"
#define C_EVAL     "#7fb04f"
#define C_SYSTEM   "#d2554a"
#define C_IOWAIT   "#8e6bbf"

/* The losses' list, opened at its first line. */
typedef struct loss_list {
    FILE *f;
    int open;
} loss_list;

static void put_loss_line(void *ctx, const char *text)
{
    loss_list *l = ctx;
    if (!l->open++)
        fputs("<ul class=\"advice\">\n", l->f);
    fputs("<li>", l->f);
    report_html_text(l->f, text);
    fputs("</li>\n", l->f);
}

static void write_header(FILE *f, report *r, const step_summary *ss)
{
    const analysis_totals *t = analysis_totals_of(r->a);
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n"
          "<title>termsight report",
          f);
    /* The recording's own words are cleaned like any name: a file can say anything. */
    char *process = r->have_meta ? report_clean_dup(r->meta.process) : NULL;
    char *host = r->have_meta ? report_clean_dup(r->meta.host) : NULL;
    if (process && *process) {
        fputs(": ", f);
        report_html_text(f, process);
    }
    fprintf(f, "</title>\n<style>%s</style>\n</head>\n<body>\n<h1>termsight report", style);
    if (process && *process) {
        fputs(": ", f);
        report_html_text(f, process);
    }
    fputs("</h1>\n<p class=\"meta\">", f);
    if (r->have_meta) {
        fprintf(f, "pid <b>%d</b> &middot; host <b>", (int)r->meta.pid);
        report_html_text(f, host ? host : "");
        fputs("</b> &middot; ", f);
    }
    free(process);
    free(host);
    fprintf(f, "<b>%llu</b> events &middot; <b>%llu</b> steps &middot; average step <b>",
            (unsigned long long)t->events, (unsigned long long)ss->steps);
    put_duration(f, ss->steps ? ss->avg_total_ns : -1);
    fprintf(f, "</b> &middot; %u collection window%s", t->windows, t->windows == 1 ? "" : "s");
    if (t->lost)
        fprintf(f, " &middot; <b>%llu events lost</b>", (unsigned long long)t->lost);
    fputs("</p>\n<p>", f);
    char tl[64];
    timeline_file_name(0, tl, sizeof tl);
    fprintf(f,
            "<a href=\"%s\">Timeline</a> (a Chrome trace: open it in "
            "<a href=\"https://ui.perfetto.dev\">ui.perfetto.dev</a> or chrome://tracing) "
            "&middot; <a href=\"summary.json\">summary.json</a> &middot; "
            "<a href=\"report.txt\">report.txt</a> &middot; "
            "<a href=\"op_statistics.csv\">op_statistics.csv</a> &middot; "
            "<a href=\"step_trace.csv\">step_trace.csv</a></p>\n",
            tl);
    /* What was lost, per window and thread, the largest first (as in report.txt). */
    loss_list list = {f, 0};
    if (report_loss_lines(r, put_loss_line, &list))
        fputs("</ul>\n", f);
}

/* The split's parts, in the order of step_bin.part: colour and name. */
static const char *const split_colour[SPLIT_PARTS] = {C_INTERVAL, C_FPBP, C_WAIT, C_TAIL, C_EVAL};
static const char *const split_name[SPLIT_PARTS] = {"interval", "compute", "communication wait",
                                                    "tail", "evaluation"};

/* Stacked bars, one per bin: the step's split (interval, compute, communication wait, tail,
 * evaluation), which adds up to the step. */
static void write_steps(FILE *f, const report_picture *p)
{
    fputs("<h2 id=\"steps\">Step trace (on the host)</h2>\n", f);
    if (!p || !p->nsteps) {
        fputs("<p class=\"dim\">No steps recorded (termsight_step_begin / end, NVTX step "
              "ranges, or termsight.torch.steps).</p>\n",
              f);
        return;
    }
    double top = 0;
    int used[SPLIT_PARTS] = {0};
    for (size_t i = 0; i < p->nsteps; i++) {
        double total = p->steps[i].total / p->steps[i].n;
        top = total > top ? total : top;
        for (int k = 0; k < SPLIT_PARTS; k++)
            used[k] |= p->steps[i].part[k] > 0;
    }
    used[0] = used[1] = used[3] = 1; /* interval, compute, tail: always named */
    const int w = 1000, h = 220, axis = 56;
    double bw = (double)(w - axis) / (double)p->nsteps;
    fprintf(f,
            "<svg viewBox=\"0 0 %d %d\" width=\"100%%\" role=\"img\" "
            "aria-label=\"step trace\">\n",
            w, h + 20);
    fprintf(f,
            "<line x1=\"%d\" y1=\"0\" x2=\"%d\" y2=\"%d\" stroke=\"#999\"/>"
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#999\"/>\n",
            axis, axis, h, axis, h, w, h);
    fputs("<text x=\"0\" y=\"12\" font-size=\"11\" fill=\"#555\">", f);
    put_duration(f, top);
    fprintf(f, "</text><text x=\"0\" y=\"%d\" font-size=\"11\" fill=\"#555\">0</text>\n", h);
    for (size_t i = 0; i < p->nsteps; i++) {
        const step_bin *b = &p->steps[i];
        double x = axis + (double)i * bw, y = h;
        fputs("<g><title>", f);
        if (b->first == b->last)
            fprintf(f, "step %llu: ", (unsigned long long)b->first);
        else
            fprintf(f, "steps %llu-%llu (mean): ", (unsigned long long)b->first,
                    (unsigned long long)b->last);
        put_duration(f, b->total / b->n);
        for (int k = 0, first = 1; k < SPLIT_PARTS; k++) {
            if (!used[k])
                continue;
            fprintf(f, " %s %s ", first ? "=" : "+", split_name[k]);
            put_duration(f, b->part[k] / b->n);
            first = 0;
        }
        fputs("</title>", f);
        for (int k = 0; k < SPLIT_PARTS; k++) {
            double bh = top > 0 ? b->part[k] / b->n / top * (h - 4) : 0;
            if (!(bh > 0))
                continue;
            y -= bh;
            fprintf(f,
                    "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
                    "fill=\"%s\"/>",
                    x, y, bw > 1.5 ? bw - 0.5 : bw, bh, split_colour[k]);
        }
        fputs("</g>\n", f);
    }
    fprintf(f,
            "<text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"#555\">step %llu</text>"
            "<text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"#555\" text-anchor=\"end\">"
            "step %llu</text>\n</svg>\n",
            axis, h + 16, (unsigned long long)p->steps[0].first, w, h + 16,
            (unsigned long long)p->steps[p->nsteps - 1].last);
    fputs("<p class=\"legend\">", f);
    for (int k = 0; k < SPLIT_PARTS; k++)
        if (used[k])
            fprintf(f, "<span><i style=\"background:%s\"></i>%s</span>", split_colour[k],
                    split_name[k]);
    if (p->per_bin > 1)
        fprintf(f, "<span class=\"dim\">each bar: the mean of %u steps</span>", p->per_bin);
    fputs("</p>\n", f);
}

/* Under the bars: the evaluation passes and a step that never ended, each on its own line. */
static void write_step_notes(FILE *f, const step_summary *ss)
{
    if (ss->gpu_steps) {
        double total = ss->avg_gpu_total_ns;
        fprintf(f, "<p>On the device (GPU %u, %llu step%s with device work): busy ", ss->gpu_device,
                (unsigned long long)ss->gpu_steps, ss->gpu_steps == 1 ? "" : "s");
        put_duration(f, ss->avg_gpu_busy_ns);
        fprintf(f, " (%.0f %%) of ", total > 0 ? 100 * ss->avg_gpu_busy_ns / total : 0.0);
        put_duration(f, total);
        const struct {
            const char *name;
            double ns;
        } idle[] = {{"waiting for data", ss->avg_gpu_idle_data_ns},
                    {"host-bound", ss->avg_gpu_idle_host_ns},
                    {"synchronization", ss->avg_gpu_idle_sync_ns},
                    {"other", ss->avg_gpu_idle_other_ns}};
        fputs("; idle: ", f);
        for (size_t i = 0; i < sizeof idle / sizeof idle[0]; i++) {
            fprintf(f, "%s%s ", i ? ", " : "", idle[i].name);
            put_duration(f, idle[i].ns);
        }
        fputs(" per step.</p>\n", f);
    }
    if (ss->evals) {
        fprintf(f, "<p>Evaluation: %llu pass%s, ", (unsigned long long)ss->evals,
                ss->evals == 1 ? "" : "es");
        put_duration(f, ss->eval_ns);
        if (ss->eval_inside_ns > 0) {
            fputs(" in all, ", f);
            put_duration(f, ss->eval_inside_ns);
            fputs(" of it inside steps (their evaluation part).</p>\n", f);
        } else {
            fputs(" in all, in no step.</p>\n", f);
        }
    }
    if (ss->unfinished_step)
        fprintf(f,
                "<p>Unfinished: step %llu began and did not end (interrupted, or under way); it "
                "is in no average.</p>\n",
                (unsigned long long)ss->unfinished_step);
}

static void write_ops(FILE *f, report *r)
{
    fputs("<h2 id=\"ops\">Operators: the top 20 by total time</h2>\n", f);
    op_stat *rows = NULL;
    op_query q = {.by_type = 0, .sort = OP_SORT_TOTAL, .limit = TOP_HTML};
    size_t n = analysis_ops(r->a, &q, &rows);
    if (!n) {
        fputs("<p class=\"dim\">No operators recorded.</p>\n", f);
        free(rows);
        return;
    }
    uint64_t most = rows[0].total_ns ? rows[0].total_ns : 1;
    scratch sc = {0};
    fputs("<table>\n<tr><th class=\"n\">operator</th><th class=\"n\">type</th><th>count</th>"
          "<th>total</th><th>self</th><th>average</th><th>share of self time</th><th></th></tr>\n",
          f);
    for (size_t i = 0; i < n; i++) {
        const op_stat *s = &rows[i];
        fputs("<tr><td class=\"n\">", f);
        put_name(f, &sc, r->a, s->name);
        fputs("</td><td class=\"n\">", f);
        put_name(f, &sc, r->a, s->type);
        fprintf(f, "</td><td>%llu</td><td>", (unsigned long long)s->count);
        put_duration(f, (double)s->total_ns);
        fputs("</td><td>", f);
        put_duration(f, (double)s->self_ns);
        fputs("</td><td>", f);
        put_duration(f, s->count ? (double)s->total_ns / (double)s->count : -1);
        fprintf(f,
                "</td><td>%.1f %%</td><td style=\"width:160px;text-align:left\">"
                "<span class=\"bar\" style=\"width:%.1fpx\"></span></td></tr>\n",
                100 * s->share, 150.0 * (double)s->total_ns / (double)most);
    }
    fputs("</table>\n", f);
    free(sc.p);
    free(rows);
}

/* Five shades of usage, empty to full. */
static const char *shade(double usage)
{
    static const char *const s[5] = {"#f1f4f9", "#c6d6ef", "#8fb0e3", "#4a7fd6", "#1d4fa3"};
    /* A recording's sizes can say anything: clamped before the conversion, NaN to empty. */
    int k = !(usage > 0) ? 0 : usage >= 1 ? 4 : (int)(usage * 5);
    return s[k > 4 ? 4 : k];
}

static void write_queues(FILE *f, report *r, const report_picture *p, const queue_finding *qf,
                         size_t nqf)
{
    fputs("<h2 id=\"queues\">Data queues: usage over time</h2>\n", f);
    queue_stat *qs = NULL;
    size_t nq = analysis_queues(r->a, &qs);
    if (!nq) {
        fputs("<p class=\"dim\">No queue sizes recorded (termsight_queue_size, or "
              "termsight.torch.steps over a DataLoader).</p>\n",
              f);
        free(qs);
        return;
    }
    scratch sc = {0};
    for (size_t i = 0; i < nq && i < QUEUES_MAX; i++) {
        const queue_finding *fd = report_finding_of(qf, nqf, (uint32_t)i);
        fputs("<p><b>", f);
        put_name(f, &sc, r->a, qs[i].name);
        fprintf(f, "</b> (%s, capacity %llu): used %.1f %% on average, empty %.1f %% of the time",
                queues_role_name(qs[i].role), (unsigned long long)qs[i].capacity,
                100 * qs[i].avg_usage, 100 * qs[i].empty_share);
        if (fd) {
            fputs(" &middot; <b>", f);
            report_html_text(f, queues_verdict_name(fd->verdict));
            fputs("</b>: ", f);
            report_html_text(f, fd->text);
            if (fd->suggestion[0]) {
                fputs(" ", f);
                report_html_text(f, fd->suggestion);
            }
        }
        fputs("</p>\n", f);
        size_t n = p ? p->queues[i].n : 0;
        if (!n)
            continue;
        double cw = 1000.0 / (double)n;
        fputs("<svg viewBox=\"0 0 1000 24\" width=\"100%\" role=\"img\" "
              "aria-label=\"queue usage\">",
              f);
        for (size_t k = 0; k < n; k++) {
            const queue_bin *b = &p->queues[i].bins[k];
            double u = b->n ? b->usage / b->n : 0;
            fprintf(f,
                    "<rect x=\"%.2f\" y=\"0\" width=\"%.2f\" height=\"24\" fill=\"%s\">"
                    "<title>%.0f %% used</title></rect>",
                    (double)k * cw, cw + 0.3, shade(u), 100 * u);
        }
        fputs("</svg>\n", f);
    }
    fputs("<p class=\"legend\">", f);
    static const char *const label[5] = {"0-20 %", "20-40 %", "40-60 %", "60-80 %", "80-100 %"};
    for (int k = 0; k < 5; k++)
        fprintf(f, "<span><i style=\"background:%s\"></i>%s</span>", shade(0.2 * k + 0.1),
                label[k]);
    fputs("</p>\n", f);
    free(sc.p);
    free(qs);
}

/* label [user|system|iowait ...] text; shares are of the gauge's full scale (0..100). */
static void gauge(FILE *f, const char *label, const double *pct, const char *const *colour, int n,
                  const char *text)
{
    fputs("<div class=\"gauge\"><span class=\"l\">", f);
    report_html_text(f, label);
    fputs("</span><span class=\"g\">", f);
    double left = 100;
    for (int i = 0; i < n; i++) {
        double w = pct[i] > 0 ? (pct[i] < left ? pct[i] : left) : 0;
        left -= w;
        fprintf(f, "<i style=\"width:%.2f%%;background:%s\"></i>", w, colour[i]);
    }
    fputs("</span><span>", f);
    report_html_text(f, text);
    fputs("</span></div>\n", f);
}

static void write_cpu(FILE *f, report *r)
{
    fputs("<h2 id=\"cpu\">CPU</h2>\n", f);
    cpu_summary cs = analysis_cpu(r->a);
    if (!cs.samples) {
        fputs("<p class=\"dim\">No CPU samples.</p>\n", f);
        return;
    }
    unsigned cpus = cs.cpus ? cs.cpus : 1;
    fprintf(f,
            "<p class=\"dim\">Averages over %llu samples, in percent of one CPU (%u CPU%s: "
            "%u %%).</p>\n",
            (unsigned long long)cs.samples, cpus, cpus == 1 ? "" : "s", 100 * cpus);
    char text[128];
    double user = cs.machine[TS_CPU_USER] + cs.machine[TS_CPU_NICE];
    double sys = cs.machine[TS_CPU_SYSTEM] + cs.machine[TS_CPU_IRQ] + cs.machine[TS_CPU_SOFTIRQ];
    double io = cs.machine[TS_CPU_IOWAIT];
    static const char *const m_colour[3] = {C_FPBP, C_SYSTEM, C_IOWAIT};
    double m[3] = {user, sys, io};
    snprintf(text, sizeof text, "%.1f %% of %u %%: user %.0f, system %.0f, iowait %.0f",
             (user + sys + io) * cpus, 100 * cpus, user * cpus, sys * cpus, io * cpus);
    gauge(f, "machine", m, m_colour, 3, text);
    double pr[2] = {cs.process_user / cpus, cs.process_system / cpus};
    snprintf(text, sizeof text, "%.1f %% of %u %%", cs.process_user + cs.process_system,
             100 * cpus);
    gauge(f, "process", pr, m_colour, 2, text);
    cpu_thread *th = NULL;
    size_t nt = analysis_cpu_threads(r->a, &th);
    scratch sc = {0};
    for (size_t i = 0; i < nt && i < THREADS_MAX; i++) {
        double t[2] = {th[i].avg_user, th[i].avg_system};
        char label[96];
        const char *name = th[i].name ? report_clean_id(&sc, r->a, th[i].name, 0) : "";
        snprintf(label, sizeof label, "%.80s (%u)", *name ? name : "thread", th[i].tid);
        snprintf(text, sizeof text, "%.1f %% of 100 %%", th[i].avg_user + th[i].avg_system);
        gauge(f, label, t, m_colour, 2, text);
    }
    if (nt > THREADS_MAX)
        fprintf(f, "<p class=\"dim\">%zu more threads in cpu_threads.csv</p>\n", nt - THREADS_MAX);
    /* The processes it started (DataLoader workers by the names the program gave them), running
     * ones first: each a gauge over the time it was sampled, with its pid and whether it ended. */
    cpu_child *ch = NULL;
    size_t nc = analysis_cpu_children(r->a, &ch);
    if (nc)
        fprintf(f, "<h3>Processes it started: %zu</h3>\n", nc);
    for (size_t i = 0; i < nc && i < THREADS_MAX; i++) {
        double t[2] = {ch[i].avg_user, ch[i].avg_system};
        char label[112];
        const char *name = ch[i].name ? report_clean_id(&sc, r->a, ch[i].name, 0) : "";
        snprintf(label, sizeof label, "%.80s (pid %u%s)", *name ? name : "process", ch[i].pid,
                 ch[i].ended ? ", ended" : "");
        snprintf(text, sizeof text, "%.1f %% of 100 %%", ch[i].avg_user + ch[i].avg_system);
        gauge(f, label, t, m_colour, 2, text);
    }
    if (nc > THREADS_MAX)
        fprintf(f, "<p class=\"dim\">%zu more processes in cpu_processes.csv</p>\n",
                nc - THREADS_MAX);
    free(ch);
    fputs("<p class=\"legend\"><span><i style=\"background:" C_FPBP
          "\"></i>user</span><span><i style=\"background:" C_SYSTEM
          "\"></i>system</span><span><i style=\"background:" C_IOWAIT "\"></i>iowait</span></p>\n",
          f);
    free(sc.p);
    free(th);
}

static void write_advice(FILE *f, const advice *adv, size_t nadv)
{
    fputs("<h2 id=\"advice\">Suggestions</h2>\n", f);
    if (!nadv)
        fputs("<p class=\"dim\">Nothing to suggest.</p>\n", f);
    for (size_t i = 0; i < nadv; i++) {
        fputs("<div class=\"advice\"><b>", f);
        report_html_text(f, adv[i].title);
        fputs("</b>", f);
        report_html_text(f, adv[i].text);
        fputs("</div>\n", f);
    }
}

void report_html_write(report *r, const queue_finding *qf, size_t nqf, const advice *adv,
                       size_t nadv)
{
    FILE *f = report_file_create(r, "report.html");
    if (!f)
        return;
    step_summary ss = analysis_steps(r->a);
    write_header(f, r, &ss);
    write_steps(f, r->picture);
    write_step_notes(f, &ss);
    write_ops(f, r);
    write_queues(f, r, r->picture, qf, nqf);
    write_cpu(f, r);
    write_advice(f, adv, nadv);
    fputs("<p class=\"dim\">Written by termsight analyse.</p>\n</body>\n</html>\n", f);
    report_file_close(r, f, "report.html");
}
