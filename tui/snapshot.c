/* snapshot: `termsight top --once`, the same views printed without curses: as text (the panels
 * drawn into canvases and written line by line) or as one JSON object through cJSON, for
 * scripts. */
#include "report.h"
#include "tui_internal.h"

#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

#define PANEL_ROWS  24
#define JSON_TOP    20
#define JSON_RECENT 256 /* the steps a live view keeps */

static void print_canvas(FILE *out, const canvas *c)
{
    char *line = malloc((size_t)c->cols * 4 + 1);
    if (!line)
        return;
    int last = c->rows - 1;
    while (last > 0 && canvas_line(c, last, line, (size_t)c->cols * 4 + 1) == 0)
        last--;
    for (int y = 0; y <= last; y++) {
        canvas_line(c, y, line, (size_t)c->cols * 4 + 1);
        fprintf(out, "%s\n", line);
    }
    free(line);
}

void snapshot_text(FILE *out, const panel_ctx *p, const glyphs *g, int cols)
{
    canvas c;
    if (canvas_init(&c, 2, cols, g) != 0)
        return;
    frame_header(&c, (rect){0, 0, 2, cols}, p->st, p->a, NULL, ROLE_NORMAL, -1, 0);
    print_canvas(out, &c);
    if (canvas_resize(&c, PANEL_ROWS, cols) != 0) {
        canvas_free(&c);
        return;
    }
    for (int i = 0; i < PANEL__COUNT; i++) {
        if (i == PANEL_RANKS && (!p->rk || !p->rk->job[0]))
            continue; /* no job: nothing to show there */
        view v;
        view_init(&v);
        canvas_clear(&c);
        panels[i]->draw(p, &v, &c, (rect){0, 0, PANEL_ROWS, cols}, 1);
        fputc('\n', out);
        print_canvas(out, &c);
    }
    canvas_free(&c);
}

static void add_name(cJSON *o, const char *key, const analysis *a, uint32_t id)
{
    report_json_name(o, key, a, id);
}

static void add_clean(cJSON *o, const char *key, const char *s)
{
    size_t len = strlen(s);
    char *buf = malloc(4 * len + 1);
    if (!buf)
        return;
    text_clean(s, len, buf, 1);
    cJSON_AddStringToObject(o, key, buf);
    free(buf);
}

/* Microseconds, as in every JSON the program writes (report_json.c). */
static double us(double ns)
{
    return ns / 1e3;
}

static void json_status(cJSON *o, const source_status *st)
{
    if (!st)
        return;
    add_clean(o, "process", st->process);
    cJSON_AddNumberToObject(o, "pid", st->pid);
    cJSON_AddStringToObject(o, "state", st->gone ? "ended" : state_name(st->state));
    cJSON_AddNumberToObject(o, "elapsed_s", st->elapsed_s);
    cJSON_AddNumberToObject(o, "events_per_s", st->events_per_s);
    report_json_u64(o, "drops", st->drops);
    /* The thread that lost most in the window under way, and how many lost some. */
    cJSON_AddNumberToObject(o, "lost_threads", st->lost_threads);
    if (st->lost_threads) {
        cJSON *w = cJSON_AddObjectToObject(o, "lost_most");
        cJSON_AddNumberToObject(w, "tid", st->worst.tid);
        report_json_u64(w, "lost", st->worst.lost);
        report_json_u64(w, "offered_per_s", st->worst.rate);
    }
    report_json_u64(o, "missed", st->missed);
    report_json_u64(o, "observed", st->observed);
    /* Hang triage: what it is inside now, and whether its step has not ended for a while. */
    add_clean(o, "inside", st->inside);
    cJSON_AddBoolToObject(o, "stalled", st->stalled);
    cJSON_AddNumberToObject(o, "since_step_end_s", st->since_s);
    /* One word per view: what the collector's boards give is whole; what comes from the lanes
     * is a sample while the monitor misses some of them. */
    cJSON *live = cJSON_AddObjectToObject(o, "live");
    cJSON_AddStringToObject(live, "steps", "exact");
    cJSON_AddStringToObject(live, "operators", st->ops_lost ? "partial" : "exact");
    cJSON_AddStringToObject(live, "queues", st->sampled ? "sampled" : "exact");
    cJSON_AddStringToObject(live, "timeline", st->sampled ? "sampled" : "exact");
    report_json_u64(live, "as_of_ns", st->board_ns);
    cJSON_AddNumberToObject(o, "window", st->window);
    add_clean(o, "run_folder", st->run_folder);
    if (st->record_error)
        add_clean(o, "recording_stopped", st->record_notice);
}

/* A recent step's "device" (step_trace.csv's gpu columns): null without device work. */
static void json_step_device(cJSON *e, const step_row *r)
{
    if (r->gpu_device == TS_DEVICE_HOST) {
        cJSON_AddNullToObject(e, "device");
        return;
    }
    const double ns[6] = {(double)r->total_ns,         (double)r->gpu_busy_ns,
                          (double)r->gpu_idle_data_ns, (double)r->gpu_idle_host_ns,
                          (double)r->gpu_idle_sync_ns, (double)r->gpu_idle_other_ns};
    report_json_device_split(e, r->gpu_device, ns);
}

/* The step summary in summary.json's shape, with what only a live view has: the step under way
 * and the last finished ones. */
static void json_steps(cJSON *o, const analysis *a, const source_status *st)
{
    cJSON *s = report_json_steps(a);
    if (!s)
        return;
    cJSON_AddItemToObject(o, "steps", s);
    report_json_u64(s, "current", source_step_now(st, a));
    step_row rows[JSON_RECENT];
    size_t n = analysis_recent_steps(a, rows, JSON_RECENT);
    cJSON *recent = cJSON_AddArrayToObject(s, "recent");
    for (size_t i = 0; recent && i < n; i++) {
        cJSON *e = cJSON_CreateObject();
        report_json_u64(e, "step", rows[i].step);
        cJSON_AddNumberToObject(e, "total_us", us((double)rows[i].total_ns));
        cJSON_AddNumberToObject(e, "interval_us", us((double)rows[i].interval_ns));
        cJSON_AddNumberToObject(e, "compute_us", us((double)rows[i].compute_ns));
        cJSON_AddNumberToObject(e, "comm_wait_us", us((double)rows[i].comm_wait_ns));
        cJSON_AddNumberToObject(e, "tail_us", us((double)rows[i].tail_ns));
        cJSON_AddNumberToObject(e, "eval_us", us((double)rows[i].eval_ns));
        cJSON_AddNumberToObject(e, "fpbp_us", us((double)rows[i].fpbp_ns));
        json_step_device(e, &rows[i]);
        cJSON_AddItemToArray(recent, e);
    }
}

/* The operators and kernels in summary.json's shape: the top JSON_TOP types, operators and
 * kernels by total time. */
static void json_ops(cJSON *o, const analysis *a)
{
    cJSON *ops = cJSON_AddObjectToObject(o, "ops");
    if (!ops)
        return;
    cJSON_AddNumberToObject(ops, "self_us", us((double)analysis_ops_self_ns(a)));
    cJSON_AddItemToObject(ops, "top_types", report_json_ops(a, 1, 0, JSON_TOP));
    cJSON_AddItemToObject(ops, "top_ops", report_json_ops(a, 0, 0, JSON_TOP));
    cJSON_AddItemToObject(o, "top_kernels", report_json_kernels(a, JSON_TOP));
}

static void json_queues(cJSON *o, const analysis *a)
{
    static const char *const roles[] = {"pipeline", "host", "device"};
    static const char *const verdicts[] = {"none",     "ok",       "data_processing",
                                           "transfer", "operator", "training"};
    queue_stat *qs = NULL;
    size_t n = analysis_queues(a, &qs);
    cJSON *arr = cJSON_AddArrayToObject(o, "queues");
    for (size_t i = 0; i < n; i++) {
        cJSON *e = cJSON_CreateObject();
        add_name(e, "queue", a, qs[i].name);
        cJSON_AddStringToObject(e, "role", qs[i].role < 3 ? roles[qs[i].role] : "unknown");
        report_json_u64(e, "capacity", qs[i].capacity);
        report_json_u64(e, "samples", qs[i].samples);
        cJSON_AddNumberToObject(e, "avg_usage", qs[i].avg_usage);
        cJSON_AddNumberToObject(e, "empty_share", qs[i].empty_share);
        cJSON_AddNumberToObject(e, "full_share", qs[i].full_share);
        cJSON_AddItemToArray(arr, e);
    }
    free(qs);
    queue_finding f[16];
    size_t nf = analysis_queue_findings(a, f, 16);
    arr = cJSON_AddArrayToObject(o, "queue_findings");
    for (size_t i = 0; i < nf; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "verdict", f[i].verdict < 6 ? verdicts[f[i].verdict] : "?");
        cJSON_AddNumberToObject(e, "queue", f[i].queue);
        add_clean(e, "text", f[i].text);
        add_clean(e, "suggestion", f[i].suggestion);
        cJSON_AddItemToArray(arr, e);
    }
}

/* The CPU and memory summaries in summary.json's shapes (report_json_cpu, report_json_memory;
 * times from the first event the view holds, the busiest JSON_TOP processes), with what only a
 * live view has: each process's CPU in the last sample, and the busiest threads. */
static void json_cpu_memory(cJSON *o, const analysis *a)
{
    const analysis_totals *t = analysis_totals_of(a);
    cJSON *c = report_json_cpu(a, t->first_ns != UINT64_MAX ? t->first_ns : 0, JSON_TOP);
    if (c) {
        cJSON_AddItemToObject(o, "cpu", c);
        cpu_child *ch = NULL;
        size_t nc = analysis_cpu_children(a, &ch);
        cJSON *procs = cJSON_GetObjectItemCaseSensitive(c, "processes");
        for (size_t i = 0; i < nc && i < JSON_TOP; i++)
            cJSON_AddNumberToObject(cJSON_GetArrayItem(procs, (int)i), "last_cpu_pct",
                                    ch[i].last_total);
        free(ch);
        cpu_thread *th = NULL;
        size_t nt = analysis_cpu_threads(a, &th);
        cJSON *arr = cJSON_AddArrayToObject(c, "threads");
        for (size_t i = 0; arr && i < nt && i < JSON_TOP; i++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "tid", th[i].tid);
            if (th[i].name)
                add_name(e, "name", a, th[i].name);
            cJSON_AddNumberToObject(e, "avg_cpu_pct", th[i].avg_user + th[i].avg_system);
            cJSON_AddNumberToObject(e, "last_cpu_pct", th[i].last_total);
            cJSON_AddItemToArray(arr, e);
        }
        free(th);
    }
    cJSON_AddItemToObject(o, "memory", report_json_memory(a));
}

static void json_timeline(cJSON *o, const panel_ctx *p)
{
    cJSON *t = cJSON_AddObjectToObject(o, "timeline");
    const tlring *r = p->tl;
    cJSON_AddNumberToObject(t, "events", r ? (double)r->n : 0);
    cJSON *arr = cJSON_AddArrayToObject(t, "lanes");
    for (uint32_t i = 0; r && i < r->nlanes; i++) {
        cJSON *e = cJSON_CreateObject();
        int host = r->lanes[i].device == TS_DEVICE_HOST;
        cJSON_AddStringToObject(e, "kind", host ? "thread" : "stream");
        if (!host)
            cJSON_AddNumberToObject(e, "device", r->lanes[i].device);
        cJSON_AddNumberToObject(e, host ? "tid" : "stream", r->lanes[i].tid);
        cJSON_AddNumberToObject(e, "events", r->lanes[i].count);
        uint32_t name = host ? analysis_thread_name(p->a, r->lanes[i].tid) : 0;
        if (name)
            add_name(e, "name", p->a, name);
        cJSON_AddItemToArray(arr, e);
    }
}

static void json_split(cJSON *o, const char *key, double total, double interval, double compute,
                       double wait, double tail, double eval)
{
    cJSON *e = cJSON_AddObjectToObject(o, key);
    cJSON_AddNumberToObject(e, "total_us", us(total));
    cJSON_AddNumberToObject(e, "interval_us", us(interval));
    cJSON_AddNumberToObject(e, "compute_us", us(compute));
    cJSON_AddNumberToObject(e, "comm_wait_us", us(wait));
    cJSON_AddNumberToObject(e, "tail_us", us(tail));
    cJSON_AddNumberToObject(e, "eval_us", us(eval));
}

/* The job's ranks on this machine, when the session is a rank of one. */
static void json_job(cJSON *o, const ranks_table *t)
{
    if (!t || !t->job[0])
        return;
    cJSON *j = cJSON_AddObjectToObject(o, "job");
    add_clean(j, "id", t->job);
    cJSON_AddNumberToObject(j, "world_size", t->world_size);
    report_json_u64(j, "ranks_not_shown", t->hidden);
    cJSON *arr = cJSON_AddArrayToObject(j, "ranks");
    for (size_t i = 0; i < t->n; i++) {
        const rank_row *r = &t->row[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "rank", r->rank);
        cJSON_AddNumberToObject(e, "local_rank", r->local_rank);
        cJSON_AddNumberToObject(e, "pid", r->pid);
        add_clean(e, "host", r->host);
        cJSON_AddStringToObject(e, "state", r->gone ? "ended" : state_name(r->state));
        cJSON_AddBoolToObject(e, "shown", (int)i == t->selected);
        report_json_u64(e, "step", r->step);
        report_json_u64(e, "steps", r->steps);
        if (r->have_last)
            json_split(e, "last", r->last_total_ns, r->last_interval_ns, r->last_compute_ns,
                       r->last_wait_ns, r->last_tail_ns, r->last_eval_ns);
        if (r->steps)
            json_split(e, "avg", r->avg_total_ns, r->avg_interval_ns, r->avg_compute_ns,
                       r->avg_wait_ns, r->avg_tail_ns, r->avg_eval_ns);
        cJSON_AddNumberToObject(e, "events_per_s", r->events_per_s);
        report_json_u64(e, "drops", r->drops);
        if (r->cpu >= 0)
            cJSON_AddNumberToObject(e, "cpu_percent", r->cpu);
        cJSON_AddBoolToObject(e, "straggler", r->straggler);
        cJSON_AddBoolToObject(e, "comm_wait_measured", r->steps && r->avg_comm_ns > 0);
        add_clean(e, "inside", r->gone ? "" : r->inside);
        cJSON_AddBoolToObject(e, "stalled", r->stalled);
        cJSON_AddBoolToObject(e, "waited_for", r->waited_for);
        cJSON_AddItemToArray(arr, e);
    }
    arr = cJSON_AddArrayToObject(j, "stragglers");
    for (size_t i = 0; i < t->n; i++) {
        const rank_row *r = &t->row[i];
        if (!r->straggler)
            continue;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "rank", r->rank);
        cJSON_AddNumberToObject(e, "pid", r->pid);
        cJSON_AddStringToObject(e, "cause", r->cause);
        cJSON_AddNumberToObject(e, "excess_us", us(r->excess_ns));
        cJSON_AddNumberToObject(e, "others_comm_wait_us", us(r->others_wait_ns));
        cJSON_AddItemToArray(arr, e);
    }
    add_clean(j, "hang_verdict", t->hang_verdict);
}

int snapshot_json(FILE *out, const panel_ctx *p)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return -1;
    cJSON_AddNumberToObject(o, "termsight_top", 1);
    json_status(o, p->st);
    json_steps(o, p->a, p->st);
    json_ops(o, p->a);
    json_queues(o, p->a);
    json_cpu_memory(o, p->a);
    json_timeline(o, p);
    json_job(o, p->rk);
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    if (!text)
        return -1;
    fprintf(out, "%s\n", text);
    cJSON_free(text);
    return 0;
}
