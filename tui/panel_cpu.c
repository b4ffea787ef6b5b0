/* panel_cpu: CPU and memory (what cpu_utilization.csv, cpu_threads.csv and memory.csv hold), as
 * htop-like gauges: the machine (user, system, iowait), the process, the busiest threads by name,
 * on the full screen the running descendant processes (data-loader workers, helpers) with their
 * RSS, host RSS and device memory. Gauges show the latest sample; the averages follow in text. */
#include "tui_internal.h"

#include <stdlib.h>
#include <string.h>

#define LABEL_W 10

typedef struct part {
    double pct; /* of the gauge's full scale */
    uint32_t glyph;
    int role;
} part;

/* label [|||||+++!!!      ] text */
static void gauge(canvas *c, rect r, int y, const char *label, const part *parts, int nparts,
                  const char *text)
{
    int tw = (int)strlen(text);
    int bw = r.w - 1 - LABEL_W - 2 - 1 - tw - 1;
    canvas_text_fit(c, r, y, 1, LABEL_W - 1, ROLE_HEADER_KEY, label, strlen(label), 0);
    if (bw < 4) {
        canvas_str(c, r, y, 1 + LABEL_W, ROLE_NORMAL, text);
        return;
    }
    int x = 1 + LABEL_W;
    canvas_put(c, r, y, x++, '[', ROLE_DIM);
    double acc = 0;
    int filled = 0;
    for (int i = 0; i < nparts; i++) {
        acc += parts[i].pct > 0 ? parts[i].pct : 0; /* a NaN adds nothing either */
        /* Clamped before the conversion: a damaged segment's share can be any double. */
        double want = acc / 100 * bw + 0.5;
        int upto = want >= bw ? bw : (int)want;
        for (; filled < upto; filled++)
            canvas_put(c, r, y, x + filled, parts[i].glyph, parts[i].role);
    }
    canvas_put(c, r, y, x + bw, ']', ROLE_DIM);
    canvas_str(c, r, y, x + bw + 2, ROLE_NORMAL, text);
}

/* The rows of a panel that scrolls: the first skip rows are passed over, then rows are drawn
 * while they fit. Counts them all, for clamping the scroll position. */
typedef struct rows {
    int skip, h, total;
} rows;

/* 1 when the next row is to be drawn at *y. */
static int row_take(rows *r, const int *y)
{
    r->total++;
    if (r->skip > 0) {
        r->skip--;
        return 0;
    }
    return *y < r->h;
}

/* The descendant processes still running, busiest first (as the analysis sorts them), then how
 * many ended. */
static void draw_children(const panel_ctx *p, canvas *c, rect body, rows *rw, int *y)
{
    cpu_child *ch = NULL;
    size_t n = analysis_cpu_children(p->a, &ch);
    size_t ended = 0;
    char label[64], t[160], rss[32];
    for (size_t i = 0; i < n; i++) {
        if (ch[i].ended) {
            ended++;
            continue;
        }
        if (!row_take(rw, y))
            continue;
        uint32_t len = 0;
        const char *name = ch[i].name ? analysis_name(p->a, ch[i].name, &len) : NULL;
        snprintf(label, sizeof label, "%.*s",
                 (int)(name && len < 40 ? len
                       : name           ? 40
                                        : 0),
                 name ? name : "");
        format_bytes((double)ch[i].last_rss, rss, sizeof rss);
        /* A name longer than the label ("DataLoader worker 0", "evaluation DataLoader worker
         * 1") is told whole beside the figures, so that workers can be told apart. */
        if (name && len >= LABEL_W)
            snprintf(t, sizeof t, "%5.1f%% %s, pid %u RSS %s", ch[i].last_total, label, ch[i].pid,
                     rss);
        else
            snprintf(t, sizeof t, "%5.1f%% pid %u RSS %s", ch[i].last_total, ch[i].pid, rss);
        part parts[1] = {{ch[i].last_total, c->g->used, ROLE_PROCESS}};
        gauge(c, body, (*y)++, name && len ? label : "process", parts, 1, t);
    }
    if (ended && row_take(rw, y))
        canvas_printf(c, body, (*y)++, 2, ROLE_DIM, "%zu child process%s ended", ended,
                      ended == 1 ? "" : "es");
    free(ch);
}

/* The title: the unit of every figure (percent of one CPU) and how many samples there are. */
static void draw_title(canvas *c, rect r, const cpu_summary *cs)
{
    char extra[96];
    unsigned cpus = cs->cpus ? cs->cpus : 1;
    if (cs->samples)
        snprintf(extra, sizeof extra, "%% of one CPU, %u CPU%s = %u%%, %llu samples", cpus,
                 cpus == 1 ? "" : "s", 100 * cpus, (unsigned long long)cs->samples);
    else
        snprintf(extra, sizeof extra, "no CPU samples yet");
    frame_title(c, r, "CPU and memory", extra);
}

/* The machine's gauge (user, system, iowait) and the process's, from the latest sample (last,
 * when there is one) else the averages. */
static void draw_machine(canvas *c, rect body, rows *rw, int *y, const cpu_summary *cs,
                         const cpu_row *last)
{
    const glyphs *g = c->g;
    unsigned cpus = cs->cpus ? cs->cpus : 1;
    char t[96];
    if (cs->samples && row_take(rw, y)) {
        const double *m = last ? last->machine : cs->machine;
        double user = m[TS_CPU_USER] + m[TS_CPU_NICE];
        double sys = m[TS_CPU_SYSTEM] + m[TS_CPU_IRQ] + m[TS_CPU_SOFTIRQ];
        double io = m[TS_CPU_IOWAIT];
        part parts[3] = {{user, g->user, ROLE_CPU_USER},
                         {sys, g->system, ROLE_CPU_SYSTEM},
                         {io, g->iowait, ROLE_CPU_IOWAIT}};
        /* The shares are of the whole machine: in units of one CPU for the text. */
        snprintf(t, sizeof t, "%5.1f%% of %u%% usr %.0f sys %.0f io %.0f", (user + sys + io) * cpus,
                 100 * cpus, user * cpus, sys * cpus, io * cpus);
        gauge(c, body, (*y)++, "machine", parts, 3, t);
    }
    if (cs->samples && row_take(rw, y)) {
        double pu = last ? last->process_user : cs->process_user;
        double ps = last ? last->process_system : cs->process_system;
        double scale = cs->cpus ? 100.0 * cs->cpus : 100.0;
        part parts[2] = {{100 * pu / scale, g->user, ROLE_PROCESS},
                         {100 * ps / scale, g->system, ROLE_CPU_SYSTEM}};
        snprintf(t, sizeof t, "%5.1f%% of %u%%", pu + ps, 100 * cpus);
        gauge(c, body, (*y)++, "process", parts, 2, t);
    }
}

/* Threads, busiest first, each of one CPU, told apart by their tid (three on the overview); the
 * collector's own (termsight-rec, -smp ...) in one row: what profiling costs. */
static void draw_threads(const panel_ctx *p, canvas *c, rect body, rows *rw, int *y, int full)
{
    const glyphs *g = c->g;
    char t[96];
    cpu_thread *th = NULL;
    size_t nt = analysis_cpu_threads(p->a, &th);
    size_t show_threads = full ? nt : 3, shown = 0;
    double own_last = 0, own_avg = 0;
    int own = 0;
    for (size_t i = 0; i < nt; i++) {
        uint32_t len = 0;
        const char *name = th[i].name ? analysis_name(p->a, th[i].name, &len) : NULL;
        if (name && len > 10 && !memcmp(name, "termsight-", 10)) {
            own++;
            own_last += th[i].last_total;
            own_avg += th[i].avg_user + th[i].avg_system;
            continue;
        }
        if (shown++ >= show_threads || !row_take(rw, y))
            continue;
        char label[64];
        if (name && len)
            snprintf(label, sizeof label, "%.*s", (int)(len < 40 ? len : 40), name);
        else
            snprintf(label, sizeof label, "thread");
        part parts[1] = {{th[i].last_total, g->used, ROLE_PROCESS}};
        snprintf(t, sizeof t, "%5.1f%% avg %5.1f%% tid %u", th[i].last_total,
                 th[i].avg_user + th[i].avg_system, th[i].tid);
        gauge(c, body, (*y)++, label, parts, 1, t);
    }
    if (own && row_take(rw, y)) {
        part parts[1] = {{own_last, g->used, ROLE_DIM}};
        snprintf(t, sizeof t, "%5.1f%% avg %5.1f%% %d thread%s: profiling's cost", own_last,
                 own_avg, own, own == 1 ? "" : "s");
        gauge(c, body, (*y)++, "termsight", parts, 1, t);
    }
    free(th);
}

/* Host RSS and each device's memory (eight at most), against their peaks. */
static void draw_memory(canvas *c, rect body, rows *rw, int *y, const memory_summary *ms)
{
    const glyphs *g = c->g;
    char t[96], a[32], b[32];
    if (ms->host_samples && row_take(rw, y)) {
        format_bytes((double)ms->host_rss, a, sizeof a);
        format_bytes((double)ms->host_peak_rss, b, sizeof b);
        part parts[1] = {
            {ms->host_peak_rss ? 100.0 * (double)ms->host_rss / (double)ms->host_peak_rss : 0,
             g->used, ROLE_MEMORY}};
        snprintf(t, sizeof t, "%s of peak %s", a, b);
        gauge(c, body, (*y)++, "host RSS", parts, 1, t);
    }
    for (uint32_t d = 0; d < ms->devices && d < 8; d++) {
        if (!row_take(rw, y))
            continue;
        char label[16];
        snprintf(label, sizeof label, "device %u", d);
        format_bytes((double)ms->device_bytes[d], a, sizeof a);
        format_bytes((double)ms->device_peak[d], b, sizeof b);
        part parts[1] = {{ms->device_peak[d]
                              ? 100.0 * (double)ms->device_bytes[d] / (double)ms->device_peak[d]
                              : 0,
                          g->used, ROLE_MEMORY}};
        snprintf(t, sizeof t, "%s of peak %s", a, b);
        gauge(c, body, (*y)++, label, parts, 1, t);
    }
    if (!ms->host_samples && !ms->devices && row_take(rw, y))
        canvas_str(c, body, (*y)++, 2, ROLE_DIM, "no memory samples yet");
}

/* The full screen's averages over the whole window, in two lines under a blank one. */
static void draw_averages(canvas *c, rect body, int *y, const cpu_summary *cs)
{
    (*y)++;
    canvas_printf(c, body, (*y)++, 1, ROLE_NORMAL,
                  "averages: user %.1f%%  system %.1f%%  iowait %.1f%%  idle %.1f%%  "
                  "context switches %.0f/s  running %.1f  blocked %.1f",
                  cs->machine[TS_CPU_USER] + cs->machine[TS_CPU_NICE],
                  cs->machine[TS_CPU_SYSTEM] + cs->machine[TS_CPU_IRQ] +
                      cs->machine[TS_CPU_SOFTIRQ],
                  cs->machine[TS_CPU_IOWAIT], cs->machine[TS_CPU_IDLE], cs->context_switches_per_s,
                  cs->avg_running, cs->avg_blocked);
    canvas_printf(c, body, (*y)++, 1, ROLE_NORMAL,
                  "process: user %.1f%%  system %.1f%% (of one CPU)", cs->process_user,
                  cs->process_system);
}

/* The gauges' parts, on the last row. */
static void draw_legend(canvas *c, rect body)
{
    const glyphs *g = c->g;
    int lx = 1;
    const struct {
        uint32_t gl;
        int role;
        const char *name;
    } legend[] = {{g->user, ROLE_CPU_USER, "user"},
                  {g->system, ROLE_CPU_SYSTEM, "system"},
                  {g->iowait, ROLE_CPU_IOWAIT, "iowait"}};
    for (int k = 0; k < 3; k++) {
        canvas_put(c, body, body.h - 1, lx, legend[k].gl, legend[k].role);
        lx += 2 + canvas_str(c, body, body.h - 1, lx + 2, ROLE_DIM, legend[k].name) + 2;
    }
}

static void cpu_draw(const panel_ctx *p, view *v, canvas *c, rect r, int full)
{
    cpu_summary cs = analysis_cpu(p->a);
    memory_summary ms = analysis_memory(p->a);
    cpu_row last;
    int have_last = analysis_cpu_recent(p->a, &last, 1) == 1;
    draw_title(c, r, &cs);
    rect body = {r.y + 1, r.x, r.h - 1, r.w};
    int y = 0;

    /* Rows that scroll on the full screen: machine, process, threads..., memory. */
    if (v->cpu_top < 0)
        v->cpu_top = 0;
    rows rw = {.skip = full ? v->cpu_top : 0, .h = body.h};
    draw_machine(c, body, &rw, &y, &cs, have_last ? &last : NULL);
    draw_threads(p, c, body, &rw, &y, full);
    if (full)
        draw_children(p, c, body, &rw, &y);
    if (!cs.samples && row_take(&rw, &y))
        canvas_str(c, body, y++, 2, ROLE_DIM, "no CPU samples from the collector yet");
    draw_memory(c, body, &rw, &y, &ms);

    if (v->cpu_top > rw.total - 1)
        v->cpu_top = rw.total > 0 ? rw.total - 1 : 0;
    if (full && cs.samples && y + 2 < body.h)
        draw_averages(c, body, &y, &cs);
    if (full && y < body.h)
        draw_legend(c, body);
}

static int cpu_key(const panel_ctx *p, view *v, int key, int full)
{
    (void)p;
    const scroll_keys s = {.last = SCROLL_OPEN}; /* Up, Down and Home: the draw bounds the end */
    return full && view_scroll(&s, key, &v->cpu_top);
}

static const key_hint cpu_hints[] = {{"\u2191\u2193", "Scroll", 4, 0}, {NULL, NULL, 0, 0}};

const panel_class panel_cpu = {
    .title = "CPU and memory",
    .tab = "CPU/Memory",
    .draw = cpu_draw,
    .key = cpu_key,
    .hints = cpu_hints,
    .wheel_up = VK_UP,
    .wheel_down = VK_DOWN,
};
