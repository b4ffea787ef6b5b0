/* report_csv: the report folder's CSV files (RFC 4180: fields holding a comma, a quote, CR or
 * LF quoted with quotes doubled; LF line ends; names cleaned to valid UTF-8; times in
 * microseconds with three decimals, rebased to the run's origin): the five written row by row
 * through the analysis sink as rows complete, the tables written at the end. */
#include "report_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- CSV ---------------------------------------------------------------------------------- */

static void csv_sep(csv *c)
{
    if (c->col++)
        putc_unlocked(',', c->f);
}

void report_csv_field(FILE *f, const char *s)
{
    if (!s[strcspn(s, ",\"\r\n")]) {
        fputs(s, f);
        return;
    }
    putc_unlocked('"', f);
    for (; *s; s++) {
        if (*s == '"')
            putc_unlocked('"', f);
        putc_unlocked(*s, f);
    }
    putc_unlocked('"', f);
}

/* A field of text already cleaned: quoted when it holds a comma, a quote, CR or LF. */
static void csv_put(csv *c, const char *s)
{
    if (c->sql) {
        report_sqlite_text(c->sql, c->col++, s);
        return;
    }
    csv_sep(c);
    report_csv_field(c->f, s);
}

static void csv_name(csv *c, const analysis *a, uint32_t id)
{
    csv_put(c, report_clean_id(&c->sc, a, id, 1));
}

static void csv_u64(csv *c, uint64_t v)
{
    if (c->sql) {
        report_sqlite_int(c->sql, c->col++, (int64_t)v);
        return;
    }
    csv_sep(c);
    fprintf(c->f, "%" PRIu64, v);
}

/* Nanoseconds as microseconds with three decimals, exactly. */
static void csv_us(csv *c, int64_t ns)
{
    if (c->sql) {
        report_sqlite_real(c->sql, c->col++, (double)ns / 1000.0);
        return;
    }
    csv_sep(c);
    uint64_t u = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    fprintf(c->f, "%s%" PRIu64 ".%03u", ns < 0 ? "-" : "", u / 1000, (unsigned)(u % 1000));
}

static void csv_usd(csv *c, double ns)
{
    if (c->sql) {
        report_sqlite_real(c->sql, c->col++, ns == ns ? round(ns) / 1000.0 : 0.0);
        return;
    }
    csv_sep(c);
    fprintf(c->f, "%.3f", ns == ns ? ns / 1000.0 : 0.0);
}

static void csv_num(csv *c, double v, int decimals)
{
    if (c->sql) {
        double scale = pow(10, decimals);
        report_sqlite_real(c->sql, c->col++, v == v ? round(v * scale) / scale : 0.0);
        return;
    }
    csv_sep(c);
    fprintf(c->f, "%.*f", decimals, v == v ? v : 0.0);
}

static void csv_end(report *r, csv *c)
{
    if (c->sql)
        report_sqlite_row(r, c->sql);
    else
        putc_unlocked('\n', c->f);
    c->col = 0;
}

/* Whether the table is being written (a CSV file, or its table in report.sqlite). */
static int csv_on(const csv *c)
{
    return c->f || c->sql;
}

static int csv_open(report *r, csv *c, const char *name, const char *header)
{
    c->col = 0;
    if (r->sql) {
        c->sql = report_sqlite_rows(r, name, header);
        return c->sql ? 0 : -1;
    }
    c->f = report_file_create(r, name);
    if (!c->f)
        return -1;
    fputs(header, c->f);
    putc('\n', c->f);
    return 0;
}

static void csv_close(report *r, csv *c, const char *name)
{
    if (c->f)
        report_file_close(r, c->f, name);
    c->f = NULL;
    c->sql = NULL; /* the statement is the database's, finalized with it */
    free(c->sc.p);
    c->sc = (scratch){0};
}

/* ---- Rows streamed from the analysis sink ------------------------------------------------- */

/* step_trace.csv's device columns: empty for a step without device work. */
static void step_device_fields(csv *c, const step_row *s)
{
    int dev = s->gpu_device != TS_DEVICE_HOST;
    if (dev)
        csv_u64(c, s->gpu_device);
    else
        csv_put(c, "");
    const uint64_t v[] = {s->gpu_busy_ns,      s->total_ns - s->gpu_busy_ns, s->gpu_idle_data_ns,
                          s->gpu_idle_host_ns, s->gpu_idle_sync_ns,          s->gpu_idle_other_ns};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        if (dev)
            csv_us(c, (int64_t)v[i]);
        else
            csv_put(c, "");
    }
}

static void sink_step(void *ctx, const step_row *s)
{
    report *r = ctx;
    report_picture_step(r->picture, s);
    if (csv_on(&r->steps)) {
        csv *c = &r->steps;
        csv_u64(c, s->step);
        csv_us(c, report_rebase(r, s->begin_ns));
        csv_us(c, report_rebase(r, s->end_ns));
        if (s->source == STEP_SOURCE_NONE) {
            csv_put(c, "");
            csv_put(c, "");
        } else {
            csv_us(c, report_rebase(r, s->fp_start_ns));
            csv_us(c, report_rebase(r, s->bp_end_ns));
        }
        csv_us(c, (int64_t)s->interval_ns);
        csv_us(c, (int64_t)s->fpbp_ns);
        csv_us(c, (int64_t)s->tail_ns);
        csv_us(c, (int64_t)s->total_ns);
        csv_name(c, r->a, s->fp_op);
        csv_name(c, r->a, s->bp_op);
        csv_put(c, step_source_name(s->source));
        csv_us(c, (int64_t)s->compute_ns);
        csv_us(c, (int64_t)s->comm_wait_ns);
        csv_us(c, (int64_t)s->eval_ns);
        step_device_fields(c, s);
        csv_end(r, c);
    }
    if (csv_on(&r->overlap)) {
        csv *c = &r->overlap;
        csv_u64(c, s->step);
        csv_us(c, report_rebase(r, s->begin_ns));
        csv_us(c, report_rebase(r, s->end_ns));
        csv_us(c, (int64_t)s->total_ns);
        csv_us(c, (int64_t)s->overlap_compute_ns);
        csv_us(c, (int64_t)s->comm_ns);
        csv_us(c, (int64_t)s->pure_comm_ns);
        csv_us(c, (int64_t)s->free_ns);
        csv_us(c, (int64_t)s->gap_ns);
        csv_end(r, c);
    }
    if (csv_on(&r->step_ops)) {
        const stepops_row *rows;
        size_t n = stepops_step(r->so, r->a, s, &rows);
        csv *c = &r->step_ops;
        for (size_t i = 0; i < n; i++) {
            csv_u64(c, s->step);
            csv_name(c, r->a, rows[i].op);
            csv_name(c, r->a, rows[i].type);
            csv_u64(c, rows[i].count);
            csv_us(c, (int64_t)rows[i].total_ns);
            csv_end(r, c);
        }
    }
    if (r->tl)
        timeline_step(r->tl, s);
}

/* The name id of queue index q (cached; refreshed when a new queue shows up). */
static uint32_t queue_name(report *r, uint32_t q)
{
    if (q >= r->nq) {
        queue_stat *rows = NULL;
        size_t n = analysis_queues(r->a, &rows);
        uint32_t *names = n ? realloc(r->qnames, n * sizeof *names) : NULL;
        if (names) {
            for (size_t i = 0; i < n; i++)
                names[i] = rows[i].name;
            r->qnames = names;
            r->nq = n;
        }
        free(rows);
    }
    return q < r->nq ? r->qnames[q] : TS_STR_NONE;
}

static void sink_bucket(void *ctx, const queue_bucket *b)
{
    report *r = ctx;
    report_picture_bucket(r->picture, b);
    csv *c = &r->qusage;
    if (!csv_on(c))
        return;
    csv_name(c, r->a, queue_name(r, b->queue));
    /* Buckets are aligned on the clock; the first may begin before the run: it begins with it. */
    csv_us(c, report_rebase(r, b->begin_ns < r->origin && b->end_ns > r->origin ? r->origin
                                                                                : b->begin_ns));
    csv_us(c, report_rebase(r, b->end_ns));
    csv_u64(c, b->samples);
    csv_num(c, 100 * b->avg_usage, 3);
    csv_num(c, 100 * b->empty_share, 3);
    csv_num(c, 100 * b->full_share, 3);
    csv_end(r, c);
}

static void sink_cpu(void *ctx, const cpu_row *row)
{
    report *r = ctx;
    csv *c = &r->cpu;
    if (csv_on(c)) {
        csv_us(c, report_rebase(r, row->begin_ns));
        csv_us(c, report_rebase(r, row->end_ns));
        for (int f = 0; f < TS_CPU__COUNT; f++)
            csv_num(c, row->machine[f], 2);
        csv_u64(c, row->context_switches);
        csv_u64(c, row->running);
        csv_u64(c, row->blocked);
        csv_num(c, row->process_user, 2);
        csv_num(c, row->process_system, 2);
        csv_u64(c, row->cpus);
        csv_end(r, c);
    }
    if (r->tl)
        timeline_cpu(r->tl, row);
}

static void sink_memory(void *ctx, const memory_row *row)
{
    report *r = ctx;
    csv *c = &r->mem;
    if (csv_on(c)) {
        csv_us(c, report_rebase(r, row->t_ns));
        if (row->device == TS_DEVICE_HOST)
            csv_put(c, "host");
        else
            csv_u64(c, row->device);
        csv_u64(c, row->bytes);
        csv_u64(c, row->peak_bytes);
        csv_end(r, c);
    }
    if (r->tl)
        timeline_memory(r->tl, row);
}

/* ---- Start: the folder, the streams, the timeline ---------------------------------------- */

const char *const report_step_columns[STEP_COL__COUNT] = {
    [STEP_COL_STEP] = "step",
    [STEP_COL_BEGIN] = "begin_us",
    [STEP_COL_END] = "end_us",
    [STEP_COL_FP_START] = "fp_start_us",
    [STEP_COL_BP_END] = "bp_end_us",
    [STEP_COL_INTERVAL] = "interval_us",
    [STEP_COL_FPBP] = "fpbp_us",
    [STEP_COL_TAIL] = "tail_us",
    [STEP_COL_TOTAL] = "total_us",
    [STEP_COL_FP_OP] = "fp_op",
    [STEP_COL_BP_OP] = "bp_op",
    [STEP_COL_SOURCE] = "source",
    [STEP_COL_COMPUTE] = "compute_us",
    [STEP_COL_COMM_WAIT] = "comm_wait_us",
    [STEP_COL_EVAL] = "eval_us",
    [STEP_COL_GPU_DEVICE] = "gpu_device",
    [STEP_COL_GPU_BUSY] = "gpu_busy_us",
    [STEP_COL_GPU_IDLE] = "gpu_idle_us",
    [STEP_COL_GPU_IDLE_DATA] = "gpu_idle_data_us",
    [STEP_COL_GPU_IDLE_HOST] = "gpu_idle_host_us",
    [STEP_COL_GPU_IDLE_SYNC] = "gpu_idle_sync_us",
    [STEP_COL_GPU_IDLE_OTHER] = "gpu_idle_other_us",
};

/* step_trace.csv's header line, from report_step_columns. */
static void step_header(char *buf, size_t cap)
{
    size_t o = 0;
    buf[0] = 0;
    for (int k = 0; k < STEP_COL__COUNT && o < cap; k++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%s", k ? "," : "", report_step_columns[k]);
}

static const char overlap_header[] =
    "step,begin_us,end_us,total_us,compute_us,comm_us,pure_comm_us,free_us,gap_us";
static const char qusage_header[] =
    "queue,begin_us,end_us,samples,avg_usage_pct,empty_pct,full_pct";
static const char cpu_header[] =
    "begin_us,end_us,user_pct,nice_pct,system_pct,idle_pct,iowait_pct,irq_pct,softirq_pct,"
    "steal_pct,context_switches,running,blocked,process_user_pct,process_system_pct,cpus";
static const char mem_header[] = "t_us,device,bytes,peak_bytes";
static const char step_ops_header[] = REPORT_STEP_OPS_HEADER;

/* ---- Tables written at the end ------------------------------------------------------------ */

static void write_ops(report *r, int by_type)
{
    const char *name = by_type ? "op_type_statistics.csv" : "op_statistics.csv";
    csv c = {0};
    if (csv_open(r, &c, name,
                 by_type
                     ? "type,count,total_us,self_us,avg_us,min_us,max_us,share_pct,flops"
                     : "op,type,count,total_us,self_us,avg_us,min_us,max_us,share_pct,flops") < 0)
        return;
    op_query q = {.by_type = by_type, .sort = OP_SORT_TOTAL};
    op_stat *rows = NULL;
    size_t n = analysis_ops(r->a, &q, &rows);
    for (size_t i = 0; i < n; i++) {
        const op_stat *s = &rows[i];
        csv_name(&c, r->a, s->name);
        if (!by_type)
            csv_name(&c, r->a, s->type);
        csv_u64(&c, s->count);
        csv_us(&c, (int64_t)s->total_ns);
        csv_us(&c, (int64_t)s->self_ns);
        csv_usd(&c, s->count ? (double)s->total_ns / (double)s->count : 0);
        csv_us(&c, (int64_t)s->min_ns);
        csv_us(&c, (int64_t)s->max_ns);
        csv_num(&c, 100 * s->share, 3);
        csv_u64(&c, s->flops);
        csv_end(r, &c);
    }
    free(rows);
    csv_close(r, &c, name);
}

static void write_kernels(report *r)
{
    csv c = {0};
    if (csv_open(r, &c, "kernel_statistics.csv",
                 "kernel,op,count,total_us,avg_us,min_us,max_us,communication") < 0)
        return;
    kernel_stat *rows = NULL;
    size_t n = analysis_kernels(r->a, 0, &rows);
    for (size_t i = 0; i < n; i++) {
        const kernel_stat *k = &rows[i];
        csv_name(&c, r->a, k->name);
        csv_name(&c, r->a, k->op);
        csv_u64(&c, k->count);
        csv_us(&c, (int64_t)k->total_ns);
        csv_usd(&c, k->count ? (double)k->total_ns / (double)k->count : 0);
        csv_us(&c, (int64_t)k->min_ns);
        csv_us(&c, (int64_t)k->max_ns);
        csv_u64(&c, k->comm ? 1 : 0);
        csv_end(r, &c);
    }
    free(rows);
    csv_close(r, &c, "kernel_statistics.csv");
}

static void write_queues(report *r, const queue_finding *f, size_t nf)
{
    csv c = {0};
    if (csv_open(r, &c, "data_queues.csv",
                 "queue,role,producer,consumer,capacity,samples,avg_size,avg_usage_pct,"
                 "empty_pct,full_pct,verdict,bottleneck_op,finding,suggestion") < 0)
        return;
    queue_stat *rows = NULL;
    size_t n = analysis_queues(r->a, &rows);
    for (size_t i = 0; i < n; i++) {
        const queue_stat *q = &rows[i];
        const queue_finding *qf = report_finding_of(f, nf, (uint32_t)i);
        csv_name(&c, r->a, q->name);
        csv_put(&c, queues_role_name(q->role));
        csv_name(&c, r->a, q->producer);
        csv_name(&c, r->a, q->consumer);
        csv_u64(&c, q->capacity);
        csv_u64(&c, q->samples);
        csv_num(&c, q->avg_size, 3);
        csv_num(&c, 100 * q->avg_usage, 3);
        csv_num(&c, 100 * q->empty_share, 3);
        csv_num(&c, 100 * q->full_share, 3);
        csv_put(&c, queues_verdict_name(qf ? qf->verdict : QUEUE_VERDICT_NONE));
        csv_name(&c, r->a, qf ? qf->op : 0);
        char buf[4 * sizeof qf->text + 1];
        text_clean(qf ? qf->text : "", qf ? strnlen(qf->text, sizeof qf->text) : 0, buf, 1);
        csv_put(&c, buf);
        text_clean(qf ? qf->suggestion : "",
                   qf ? strnlen(qf->suggestion, sizeof qf->suggestion) : 0, buf, 1);
        csv_put(&c, buf);
        csv_end(r, &c);
    }
    free(rows);
    csv_close(r, &c, "data_queues.csv");
}

static void write_threads(report *r)
{
    csv c = {0};
    if (csv_open(r, &c, "cpu_threads.csv",
                 "tid,thread,samples,avg_user_pct,avg_system_pct,last_total_pct") < 0)
        return;
    cpu_thread *rows = NULL;
    size_t n = analysis_cpu_threads(r->a, &rows);
    for (size_t i = 0; i < n; i++) {
        csv_u64(&c, rows[i].tid);
        csv_name(&c, r->a, rows[i].name);
        csv_u64(&c, rows[i].samples);
        csv_num(&c, rows[i].avg_user, 2);
        csv_num(&c, rows[i].avg_system, 2);
        csv_num(&c, rows[i].last_total, 2);
        csv_end(r, &c);
    }
    free(rows);
    csv_close(r, &c, "cpu_threads.csv");
}

static void write_children(report *r)
{
    csv c = {0};
    if (csv_open(r, &c, "cpu_processes.csv",
                 "pid,ppid,process,samples,avg_user_pct,avg_system_pct,avg_cpu_pct,peak_cpu_pct,"
                 "cpu_us,last_rss_bytes,peak_rss_bytes,first_us,last_us,ended") < 0)
        return;
    cpu_child *rows = NULL;
    size_t n = analysis_cpu_children(r->a, &rows);
    for (size_t i = 0; i < n; i++) {
        const cpu_child *p = &rows[i];
        csv_u64(&c, p->pid);
        csv_u64(&c, p->ppid);
        csv_name(&c, r->a, p->name);
        csv_u64(&c, p->samples);
        csv_num(&c, p->avg_user, 2);
        csv_num(&c, p->avg_system, 2);
        csv_num(&c, p->avg_user + p->avg_system, 2);
        csv_num(&c, p->peak_total, 2);
        csv_us(&c, (int64_t)p->cpu_ns);
        csv_u64(&c, p->last_rss);
        csv_u64(&c, p->peak_rss);
        csv_us(&c, report_rebase(r, p->first_ns));
        csv_us(&c, report_rebase(r, p->last_ns));
        csv_u64(&c, (uint64_t)p->ended);
        csv_end(r, &c);
    }
    free(rows);
    csv_close(r, &c, "cpu_processes.csv");
}

static void write_allocations(report *r)
{
    csv c = {0};
    if (csv_open(r, &c, "memory_allocations.csv",
                 "name,device,count,bytes_total,live_bytes,peak_live_bytes") < 0)
        return;
    alloc_stat *rows = NULL;
    size_t n = analysis_allocations(r->a, &rows);
    for (size_t i = 0; i < n; i++) {
        csv_name(&c, r->a, rows[i].name);
        if (rows[i].device == TS_DEVICE_HOST)
            csv_put(&c, "host");
        else
            csv_u64(&c, rows[i].device);
        csv_u64(&c, rows[i].count);
        csv_u64(&c, rows[i].bytes_total);
        csv_u64(&c, rows[i].live_bytes);
        csv_u64(&c, rows[i].peak_live_bytes);
        csv_end(r, &c);
    }
    free(rows);
    csv_close(r, &c, "memory_allocations.csv");
}

static void write_flops(report *r)
{
    csv c = {0};
    if (csv_open(r, &c, "flops.csv", "scope,level,flops,time_us,gflops_per_s") < 0)
        return;
    flops_scope *rows = NULL;
    size_t n = analysis_flops_scopes(r->a, &rows);
    for (size_t i = 0; i < n; i++) {
        csv_name(&c, r->a, rows[i].scope);
        csv_u64(&c, rows[i].level);
        csv_u64(&c, rows[i].flops);
        csv_us(&c, (int64_t)rows[i].time_ns);
        csv_num(&c, rows[i].time_ns ? (double)rows[i].flops / (double)rows[i].time_ns : 0, 3);
        csv_end(r, &c);
    }
    free(rows);
    csv_close(r, &c, "flops.csv");
}

/* ---- What report.c calls ------------------------------------------------------------------ */

int report_csv_open_streams(report *r)
{
    char steps[256];
    step_header(steps, sizeof steps);
    if (csv_open(r, &r->steps, REPORT_STEP_TRACE_CSV, steps) < 0 ||
        csv_open(r, &r->overlap, "overlap.csv", overlap_header) < 0 ||
        csv_open(r, &r->qusage, "data_queue_usage.csv", qusage_header) < 0 ||
        csv_open(r, &r->cpu, "cpu_utilization.csv", cpu_header) < 0 ||
        csv_open(r, &r->mem, "memory.csv", mem_header) < 0 ||
        csv_open(r, &r->step_ops, REPORT_STEP_OPS_CSV, step_ops_header) < 0)
        return -1;
    return 0;
}

void report_csv_close_streams(report *r)
{
    csv_close(r, &r->steps, "step_trace.csv");
    csv_close(r, &r->overlap, "overlap.csv");
    csv_close(r, &r->qusage, "data_queue_usage.csv");
    csv_close(r, &r->cpu, "cpu_utilization.csv");
    csv_close(r, &r->mem, "memory.csv");
    csv_close(r, &r->step_ops, REPORT_STEP_OPS_CSV);
}

void report_csv_sink(report *r, analysis_sink *sink)
{
    *sink = (analysis_sink){.ctx = r,
                            .step = sink_step,
                            .queue_bucket = sink_bucket,
                            .cpu = sink_cpu,
                            .memory = sink_memory};
}

void report_csv_tables(report *r, const queue_finding *qf, size_t nqf)
{
    write_ops(r, 0);
    write_ops(r, 1);
    write_kernels(r);
    write_queues(r, qf, nqf);
    write_threads(r);
    write_children(r);
    write_allocations(r);
    write_flops(r);
}
