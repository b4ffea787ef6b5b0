/* report_json: each result as the one JSON object it is wherever it leaves the program
 * (summary.json, `termsight top --once --json`, `termsight analyse --op TYPE --json`, and
 * through them the Python binding): times in microseconds, counts as exact integers, names
 * cleaned to valid UTF-8. */
#include "report_internal.h"

#include <cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* summary.json's keys that the job report reads back (report_summary_read), named once for the
 * writer and the reader. */
#define SK_JOB            "job"
#define SK_RECORDING      "recording"
#define SK_TIME           "time"
#define SK_EVENTS         "events"
#define SK_STEPS          "steps"
#define SK_TIMELINE       "timeline"
#define SK_ID             "id"
#define SK_HOST           "host"
#define SK_RANK           "rank"
#define SK_LOCAL_RANK     "local_rank"
#define SK_WORLD_SIZE     "world_size"
#define SK_PROCESS        "process"
#define SK_PID            "pid"
#define SK_PARENT_PID     "parent_pid"
#define SK_START_REALTIME "start_realtime_ns"
#define SK_START          "start_ns"
#define SK_BYTES_SKIPPED  "bytes_skipped"
#define SK_CHUNKS_SKIPPED "chunks_skipped"
#define SK_ORIGIN         "origin_ns"
#define SK_LOST           "lost"
#define SK_BY_KIND        "by_kind"
#define SK_ENDED          "ended"
#define SK_AVG_COMM       "avg_comm_us"
#define SK_LEFT_OUT       "left_out"

int report_json_u64(void *object, const char *key, uint64_t v)
{
    /* cJSON prints a double with 15 significant digits when that reads back within its
     * tolerance: exact for integers below 10^15 only. */
    if (v < 1000000000000000ull)
        return cJSON_AddNumberToObject(object, key, (double)v) ? 0 : -1;
    char digits[24];
    snprintf(digits, sizeof digits, "%" PRIu64, v);
    return cJSON_AddRawToObject(object, key, digits) ? 0 : -1;
}

static double us_of(double ns)
{
    return ns / 1000.0;
}

int report_json_text(void *object, const char *key, const char *bytes, size_t len)
{
    char *buf = malloc(4 * len + 1);
    if (!buf)
        return -1;
    text_clean(bytes ? bytes : "", bytes ? len : 0, buf, 1);
    int rc = cJSON_AddStringToObject(object, key, buf) ? 0 : -1;
    free(buf);
    return rc;
}

void report_json_name(void *object, const char *key, const analysis *a, uint32_t id)
{
    uint32_t len = 0;
    const char *s = analysis_name(a, id, &len);
    report_json_text(object, key, s, s ? len : 0);
}

void *report_json_op(const analysis *a, const op_stat *row, int by_type)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    report_json_name(o, by_type ? "type" : "op", a, row->name);
    if (!by_type)
        report_json_name(o, "type", a, row->type);
    report_json_u64(o, "count", row->count);
    cJSON_AddNumberToObject(o, "total_us", us_of((double)row->total_ns));
    cJSON_AddNumberToObject(o, "self_us", us_of((double)row->self_ns));
    cJSON_AddNumberToObject(o, "avg_us",
                            row->count ? us_of((double)row->total_ns / (double)row->count) : 0);
    cJSON_AddNumberToObject(o, "min_us", us_of((double)row->min_ns));
    cJSON_AddNumberToObject(o, "max_us", us_of((double)row->max_ns));
    cJSON_AddNumberToObject(o, "share_pct", 100 * row->share);
    return o;
}

void *report_json_ops(const analysis *a, int by_type, uint32_t type, size_t limit)
{
    cJSON *arr = cJSON_CreateArray();
    op_query q = {.by_type = by_type, .sort = OP_SORT_TOTAL, .limit = limit, .type = type};
    op_stat *rows = NULL;
    size_t n = analysis_ops(a, &q, &rows);
    for (size_t i = 0; arr && i < n; i++) {
        cJSON *o = report_json_op(a, &rows[i], by_type);
        if (!o)
            break;
        cJSON_AddItemToArray(arr, o);
    }
    free(rows);
    return arr;
}

void *report_json_kernels(const analysis *a, size_t limit)
{
    cJSON *arr = cJSON_CreateArray();
    kernel_stat *ks = NULL;
    size_t n = arr ? analysis_kernels(a, limit, &ks) : 0;
    for (size_t i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        if (!o)
            break;
        report_json_name(o, "kernel", a, ks[i].name);
        report_json_name(o, "op", a, ks[i].op);
        report_json_u64(o, "count", ks[i].count);
        cJSON_AddNumberToObject(o, "total_us", us_of((double)ks[i].total_ns));
        cJSON_AddBoolToObject(o, "communication", ks[i].comm);
        cJSON_AddItemToArray(arr, o);
    }
    free(ks);
    return arr;
}

void *report_json_device_split(void *object, uint32_t device, const double ns[6])
{
    cJSON *d = cJSON_AddObjectToObject(object, "device");
    if (!d)
        return NULL;
    report_json_u64(d, "device", device);
    static const char *const keys[] = {"busy_us", "idle_data_us", "idle_host_us", "idle_sync_us",
                                       "idle_other_us"};
    cJSON_AddNumberToObject(d, keys[0], us_of(ns[1]));
    cJSON_AddNumberToObject(d, "idle_us", us_of(ns[0] - ns[1]));
    for (size_t i = 1; i < sizeof keys / sizeof keys[0]; i++)
        cJSON_AddNumberToObject(d, keys[i], us_of(ns[i + 1]));
    return d;
}

/* "device" in summary.json's "steps": the step on the device, averaged over the steps with
 * device work; null without any. */
static void json_step_device(cJSON *st, const step_summary *ss)
{
    if (!ss->gpu_steps) {
        cJSON_AddNullToObject(st, "device");
        return;
    }
    const double ns[6] = {ss->avg_gpu_total_ns,     ss->avg_gpu_busy_ns,
                          ss->avg_gpu_idle_data_ns, ss->avg_gpu_idle_host_ns,
                          ss->avg_gpu_idle_sync_ns, ss->avg_gpu_idle_other_ns};
    cJSON *d = report_json_device_split(st, ss->gpu_device, ns);
    if (!d)
        return;
    report_json_u64(d, "steps", ss->gpu_steps);
    cJSON_AddNumberToObject(d, "total_us", us_of(ns[0]));
}

void *report_json_steps(const analysis *a)
{
    step_summary ss = analysis_steps(a);
    cJSON *st = cJSON_CreateObject();
    if (!st)
        return NULL;
    report_json_u64(st, "count", ss.steps);
    cJSON_AddStringToObject(st, "source", step_source_name(ss.source));
    const struct {
        const char *key;
        double ns;
    } avg[] = {
        {"avg_total_us", ss.avg_total_ns},
        {"avg_interval_us", ss.avg_interval_ns},
        {"avg_compute_us", ss.avg_compute_ns},
        {"avg_comm_wait_us", ss.avg_comm_wait_ns},
        {"avg_tail_us", ss.avg_tail_ns},
        {"avg_eval_us", ss.avg_eval_ns},
        {"avg_fpbp_us", ss.avg_fpbp_ns},
        {"avg_overlap_compute_us", ss.avg_overlap_compute_ns},
        {SK_AVG_COMM, ss.avg_comm_ns},
        {"avg_pure_comm_us", ss.avg_pure_comm_ns},
        {"avg_free_us", ss.avg_free_ns},
        {"avg_gap_us", ss.avg_gap_ns},
    };
    for (size_t i = 0; i < sizeof avg / sizeof avg[0]; i++)
        cJSON_AddNumberToObject(st, avg[i].key, us_of(avg[i].ns));
    if (ss.unfinished_step)
        report_json_u64(st, "unfinished_step", ss.unfinished_step);
    else
        cJSON_AddNullToObject(st, "unfinished_step");
    report_json_u64(st, "eval_passes", ss.evals);
    cJSON_AddNumberToObject(st, "eval_us", us_of(ss.eval_ns));
    json_step_device(st, &ss);
    cJSON *slow = cJSON_AddArrayToObject(st, "slowest");
    for (int i = 0; slow && i < 5 && ss.slowest_ns[i]; i++) {
        cJSON *o = cJSON_CreateObject();
        if (!o)
            break;
        report_json_u64(o, "step", ss.slowest[i]);
        cJSON_AddNumberToObject(o, "total_us", us_of((double)ss.slowest_ns[i]));
        cJSON_AddItemToArray(slow, o);
    }
    return st;
}

/* summary.json's "cpu": the machine's and the process's averages, then the descendant
 * processes (the busiest limit of them; 0: all), their times rebased to origin. */
void *report_json_cpu(const analysis *a, uint64_t origin, size_t limit)
{
    cpu_summary cs = analysis_cpu(a);
    cJSON *cpu = cJSON_CreateObject();
    if (!cpu)
        return NULL;
    report_json_u64(cpu, "samples", cs.samples);
    static const char *const fields[TS_CPU__COUNT] = {"user_pct",    "nice_pct",   "system_pct",
                                                      "idle_pct",    "iowait_pct", "irq_pct",
                                                      "softirq_pct", "steal_pct"};
    for (int f = 0; f < TS_CPU__COUNT; f++)
        cJSON_AddNumberToObject(cpu, fields[f], cs.machine[f]);
    cJSON_AddNumberToObject(cpu, "context_switches_per_s", cs.context_switches_per_s);
    cJSON_AddNumberToObject(cpu, "avg_running", cs.avg_running);
    cJSON_AddNumberToObject(cpu, "avg_blocked", cs.avg_blocked);
    cJSON_AddNumberToObject(cpu, "process_user_pct", cs.process_user);
    cJSON_AddNumberToObject(cpu, "process_system_pct", cs.process_system);
    cJSON_AddNumberToObject(cpu, "cpus", cs.cpus);
    cJSON_AddNumberToObject(cpu, "processes_left_out", cs.processes_left_out);
    cJSON *procs = cJSON_AddArrayToObject(cpu, "processes");
    cpu_child *kids = NULL;
    size_t nkids = analysis_cpu_children(a, &kids);
    for (size_t i = 0; procs && i < nkids && (!limit || i < limit); i++) {
        const cpu_child *p = &kids[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "pid", p->pid);
        cJSON_AddNumberToObject(o, "ppid", p->ppid);
        report_json_name(o, "name", a, p->name);
        report_json_u64(o, "samples", p->samples);
        cJSON_AddNumberToObject(o, "avg_user_pct", p->avg_user);
        cJSON_AddNumberToObject(o, "avg_system_pct", p->avg_system);
        cJSON_AddNumberToObject(o, "avg_cpu_pct", p->avg_user + p->avg_system);
        cJSON_AddNumberToObject(o, "peak_cpu_pct", p->peak_total);
        cJSON_AddNumberToObject(o, "cpu_us", us_of((double)p->cpu_ns));
        report_json_u64(o, "last_rss_bytes", p->last_rss);
        report_json_u64(o, "peak_rss_bytes", p->peak_rss);
        cJSON_AddNumberToObject(o, "first_us", us_of((double)(int64_t)(p->first_ns - origin)));
        cJSON_AddNumberToObject(o, "last_us", us_of((double)(int64_t)(p->last_ns - origin)));
        cJSON_AddBoolToObject(o, "ended", p->ended);
        cJSON_AddItemToArray(procs, o);
    }
    free(kids);
    return cpu;
}

/* summary.json's "memory": the host's RSS, each device's allocated bytes and peak. */
void *report_json_memory(const analysis *a)
{
    memory_summary ms = analysis_memory(a);
    cJSON *mem = cJSON_CreateObject();
    if (!mem)
        return NULL;
    report_json_u64(mem, "host_samples", ms.host_samples);
    report_json_u64(mem, "host_rss_bytes", ms.host_rss);
    report_json_u64(mem, "host_peak_rss_bytes", ms.host_peak_rss);
    cJSON *devs = cJSON_AddArrayToObject(mem, "devices");
    for (uint32_t d = 0; devs && d < 8; d++) {
        if (!ms.device_bytes[d] && !ms.device_peak[d])
            continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "device", d);
        report_json_u64(o, "bytes", ms.device_bytes[d]);
        report_json_u64(o, "peak_bytes", ms.device_peak[d]);
        cJSON_AddItemToArray(devs, o);
    }
    return mem;
}

/* ---- summary.json ---------------------------------------------------------------------- */

/* cJSON wants C strings: names are cleaned (valid UTF-8, no NUL) first. */
static void j_name(cJSON *o, const char *key, scratch *sc, const analysis *a, uint32_t id)
{
    cJSON_AddStringToObject(o, key, report_clean_id(sc, a, id, 1));
}

int report_job_of(const analysis *a, report_job *job)
{
    memset(job, 0, sizeof *job);
    const char *id = analysis_config_value(a, "job");
    if (!id || !*id)
        return 0;
    const struct {
        const char *key;
        char *out;
    } texts[] = {{"job", job->id}, {"job_source", job->source}, {"host", job->host}};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        const char *v = analysis_config_value(a, texts[i].key);
        snprintf(texts[i].out, sizeof job->id, "%s", v ? v : "");
    }
    const struct {
        const char *key;
        long *out;
    } nums[] = {
        {"rank", &job->rank}, {"local_rank", &job->local_rank}, {"world_size", &job->world_size}};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        const char *v = analysis_config_value(a, nums[i].key);
        char *end;
        long n = v && *v ? strtol(v, &end, 10) : -1;
        *nums[i].out = v && *v && !*end && n >= 0 && n <= INT32_MAX ? n : -1;
    }
    return 1;
}

/* What summary.json's sections are written from: the report, its findings and advice, a
 * scratch buffer for names. */
typedef struct summary_ctx {
    report *r;
    const queue_finding *qf;
    size_t nqf;
    const advice *adv;
    size_t nadv;
    scratch sc;
} summary_ctx;

static void json_version(cJSON *root, summary_ctx *c)
{
    (void)c;
    cJSON *ver = cJSON_AddObjectToObject(root, "termsight");
    cJSON_AddStringToObject(ver, "version", TERMSIGHT_VERSION);
    cJSON_AddNumberToObject(ver, "report_format", REPORT_FORMAT);
}

static void json_recording(cJSON *root, summary_ctx *c)
{
    const report *r = c->r;
    cJSON *rec = cJSON_AddObjectToObject(root, SK_RECORDING);
    report_json_text(rec, "path", r->info.recording, strlen(r->info.recording));
    report_json_text(rec, "run_folder", r->run_folder, strlen(r->run_folder));
    if (r->have_meta) {
        char v[32];
        snprintf(v, sizeof v, "%" PRIu32 ".%" PRIu32, r->meta.major, r->meta.minor);
        cJSON_AddStringToObject(rec, "format", v);
        report_json_text(rec, SK_PROCESS, r->meta.process,
                         strnlen(r->meta.process, sizeof r->meta.process));
        cJSON_AddNumberToObject(rec, SK_PID, r->meta.pid);
        report_json_text(rec, SK_HOST, r->meta.host, strnlen(r->meta.host, sizeof r->meta.host));
        report_json_text(rec, "clock", r->meta.clock, strnlen(r->meta.clock, sizeof r->meta.clock));
        report_json_u64(rec, SK_START_REALTIME, r->meta.start_realtime_ns);
        report_json_u64(rec, SK_START, r->meta.start_ns);
        /* A forked child's session: the process it was forked from. */
        long ppid = report_parent_pid(r->a);
        if (ppid)
            cJSON_AddNumberToObject(rec, SK_PARENT_PID, (double)ppid);
        else
            cJSON_AddNullToObject(rec, SK_PARENT_PID);
    } else {
        cJSON_AddNullToObject(rec, "format");
    }
    report_json_u64(rec, SK_BYTES_SKIPPED, r->info.skipped_bytes);
    report_json_u64(rec, SK_CHUNKS_SKIPPED, r->info.bad_chunks);
    /* A recording still being written is read up to its size at the start. */
    report_json_u64(rec, "bytes_read", r->info.read_bytes);
    report_json_u64(rec, "bytes_grown", r->info.grown_bytes);
}

/* The job this process was a rank of, as its session recorded it; null when none. */
static void json_job(cJSON *root, summary_ctx *c)
{
    report_job job;
    if (!report_job_of(c->r->a, &job)) {
        cJSON_AddNullToObject(root, SK_JOB);
        return;
    }
    cJSON *jo = cJSON_AddObjectToObject(root, SK_JOB);
    report_json_text(jo, SK_ID, job.id, strlen(job.id));
    report_json_text(jo, "source", job.source, strlen(job.source));
    report_json_text(jo, SK_HOST, job.host, strlen(job.host));
    const struct {
        const char *key;
        long value;
    } ranks[] = {
        {SK_RANK, job.rank}, {SK_LOCAL_RANK, job.local_rank}, {SK_WORLD_SIZE, job.world_size}};
    for (size_t i = 0; i < sizeof ranks / sizeof ranks[0]; i++) {
        if (ranks[i].value >= 0)
            cJSON_AddNumberToObject(jo, ranks[i].key, (double)ranks[i].value);
        else
            cJSON_AddNullToObject(jo, ranks[i].key);
    }
}

static void json_time(cJSON *root, summary_ctx *c)
{
    const report *r = c->r;
    const analysis_totals *t = analysis_totals_of(r->a);
    cJSON *tm = cJSON_AddObjectToObject(root, SK_TIME);
    int any = t->first_ns != UINT64_MAX;
    report_json_u64(tm, SK_ORIGIN, r->origin);
    cJSON_AddNumberToObject(tm, "first_us", any ? us_of((double)report_rebase(r, t->first_ns)) : 0);
    cJSON_AddNumberToObject(tm, "last_us", any ? us_of((double)report_rebase(r, t->last_ns)) : 0);
    cJSON_AddNumberToObject(
        tm, "duration_us",
        any && t->last_ns > t->first_ns ? us_of((double)(t->last_ns - t->first_ns)) : 0);
}

/* Each loss row: window, thread, how many, why, from when, at what rate. */
static void json_losses(cJSON *evs, const report *r)
{
    cJSON *losses = cJSON_AddArrayToObject(evs, "losses");
    const analysis_loss *rows;
    size_t nl = analysis_losses(r->a, &rows);
    for (size_t i = 0; losses && i < nl; i++) {
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(losses, o)) {
            cJSON_Delete(o);
            break;
        }
        cJSON_AddNumberToObject(o, "window", rows[i].window);
        cJSON_AddNumberToObject(o, "tid", rows[i].tid);
        report_json_u64(o, "lost", rows[i].lost);
        cJSON_AddStringToObject(o, "reason", report_lost_reason_name(rows[i].reason));
        cJSON_AddNumberToObject(o, "first_us", us_of((double)report_rebase(r, rows[i].first_ns)));
        report_json_u64(o, "offered_per_s", rows[i].rate);
    }
}

static void json_events(cJSON *root, summary_ctx *c)
{
    const analysis *a = c->r->a;
    const analysis_totals *t = analysis_totals_of(a);
    cJSON *evs = cJSON_AddObjectToObject(root, SK_EVENTS);
    report_json_u64(evs, "total", t->events);
    cJSON *bk = cJSON_AddObjectToObject(evs, SK_BY_KIND);
    for (uint32_t k = 0; k < TS_KIND__COUNT; k++)
        report_json_u64(bk, k ? event_kind_name(k) : "unknown", t->by_kind[k]);
    report_json_u64(evs, SK_LOST, t->lost);
    cJSON *lr = cJSON_AddObjectToObject(evs, "lost_by_reason");
    for (uint32_t k = 1; k < 5; k++)
        report_json_u64(lr, report_lost_reason_name(k), t->lost_by_reason[k]);
    json_losses(evs, c->r);
    cJSON_AddNumberToObject(evs, "windows", t->windows);
    cJSON_AddNumberToObject(evs, "threads", t->threads);
    /* How the recording ended when it did not end as it should: null when it did. */
    const char *ended = analysis_config_value(a, "ended");
    const char *record_error = analysis_config_value(a, "record_error");
    /* These, and a snapshot's reason (any bytes `snapshot --why` was given), are cleaned as
     * names are: summary.json stays valid UTF-8. */
    if (ended)
        report_json_text(evs, SK_ENDED, ended, strlen(ended));
    else
        cJSON_AddNullToObject(evs, SK_ENDED);
    if (record_error)
        report_json_text(evs, "record_error", record_error, strlen(record_error));
    else
        cJSON_AddNullToObject(evs, "record_error");
    /* A flight-recorder snapshot says why it was taken: null for a recording. */
    const char *snap = analysis_config_value(a, "snapshot");
    const char *cause = analysis_config_value(a, "snapshot_cause");
    if (snap) {
        cJSON *o = cJSON_AddObjectToObject(evs, "snapshot");
        report_json_text(o, "why", snap, strlen(snap));
        report_json_text(o, "cause", cause, cause ? strlen(cause) : 0);
    } else {
        cJSON_AddNullToObject(evs, "snapshot");
    }
}

static void json_steps(cJSON *root, summary_ctx *c)
{
    cJSON *steps = report_json_steps(c->r->a);
    /* Operator ranges step_ops.csv left out (past the bound of those waiting for their step). */
    if (steps)
        report_json_u64(steps, "step_ops_dropped", stepops_dropped(c->r->so));
    cJSON_AddItemToObject(root, SK_STEPS, steps);
}

static void json_ops(cJSON *root, summary_ctx *c)
{
    const analysis *a = c->r->a;
    cJSON *ops = cJSON_AddObjectToObject(root, "ops");
    cJSON_AddNumberToObject(ops, "self_us", us_of((double)analysis_ops_self_ns(a)));
    cJSON_AddItemToObject(ops, "top_types", report_json_ops(a, 1, 0, TOP_OPS));
    cJSON_AddItemToObject(ops, "top_ops", report_json_ops(a, 0, 0, TOP_OPS));
    cJSON_AddItemToObject(root, "top_kernels", report_json_kernels(a, TOP_OPS));
    device_attribution da = analysis_device_attribution(a);
    cJSON *dev = cJSON_AddObjectToObject(root, "device_records");
    if (dev) {
        report_json_u64(dev, "count", da.records);
        report_json_u64(dev, "with_op", da.with_op);
        report_json_u64(dev, "without_op", da.records - da.with_op);
        cJSON_AddNumberToObject(dev, "total_us", us_of((double)da.time_ns));
        cJSON_AddNumberToObject(dev, "without_op_us", us_of((double)(da.time_ns - da.with_op_ns)));
    }
}

static void json_queues(cJSON *root, summary_ctx *c)
{
    const analysis *a = c->r->a;
    queue_stat *qs = NULL;
    size_t nq = analysis_queues(a, &qs);
    cJSON *qa = cJSON_AddArrayToObject(root, "queues");
    for (size_t i = 0; i < nq; i++) {
        const queue_finding *f = report_finding_of(c->qf, c->nqf, (uint32_t)i);
        cJSON *o = cJSON_CreateObject();
        j_name(o, "queue", &c->sc, a, qs[i].name);
        cJSON_AddStringToObject(o, "role", queues_role_name(qs[i].role));
        report_json_u64(o, "samples", qs[i].samples);
        cJSON_AddNumberToObject(o, "avg_usage_pct", 100 * qs[i].avg_usage);
        cJSON_AddNumberToObject(o, "empty_pct", 100 * qs[i].empty_share);
        cJSON_AddNumberToObject(o, "full_pct", 100 * qs[i].full_share);
        cJSON_AddStringToObject(o, "verdict",
                                queues_verdict_name(f ? f->verdict : QUEUE_VERDICT_NONE));
        cJSON_AddItemToArray(qa, o);
    }
    free(qs);
    cJSON *fa = cJSON_AddArrayToObject(root, "queue_findings");
    for (size_t i = 0; i < c->nqf; i++) {
        const queue_finding *f = &c->qf[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "verdict", queues_verdict_name(f->verdict));
        cJSON_AddNumberToObject(o, "queue", f->queue);
        j_name(o, "bottleneck_op", &c->sc, a, f->op);
        report_json_text(o, "text", f->text, strnlen(f->text, sizeof f->text));
        report_json_text(o, "suggestion", f->suggestion,
                         strnlen(f->suggestion, sizeof f->suggestion));
        cJSON_AddItemToArray(fa, o);
    }
}

static void json_cpu(cJSON *root, summary_ctx *c)
{
    cJSON_AddItemToObject(root, "cpu", report_json_cpu(c->r->a, c->r->origin, 0));
}

static void json_memory(cJSON *root, summary_ctx *c)
{
    cJSON_AddItemToObject(root, "memory", report_json_memory(c->r->a));
}

static void json_flops(cJSON *root, summary_ctx *c)
{
    flops_summary fs = analysis_flops(c->r->a);
    cJSON *fl = cJSON_AddObjectToObject(root, "flops");
    report_json_u64(fl, "flops", fs.flops);
    cJSON_AddNumberToObject(fl, "time_us", us_of((double)fs.time_ns));
    cJSON_AddNumberToObject(fl, "flops_per_s",
                            fs.flops_per_s == fs.flops_per_s ? fs.flops_per_s : 0);
    if (fs.utilization >= 0)
        cJSON_AddNumberToObject(fl, "utilization", fs.utilization);
    else
        cJSON_AddNullToObject(fl, "utilization");
    cJSON_AddNumberToObject(fl, "peak_flops_per_s", c->r->opt.peak_flops);
}

static void json_gaps(cJSON *root, summary_ctx *c)
{
    const report *r = c->r;
    op_gap gaps[5];
    size_t ng = analysis_gaps(r->a, gaps, 5);
    cJSON *ga = cJSON_AddArrayToObject(root, "largest_gaps");
    for (size_t i = 0; i < ng; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "gap_us", us_of((double)gaps[i].gap_ns));
        cJSON_AddNumberToObject(o, "at_us", us_of((double)report_rebase(r, gaps[i].at_ns)));
        report_json_u64(o, "step", gaps[i].step);
        cJSON_AddNumberToObject(o, "tid", gaps[i].tid);
        j_name(o, "before", &c->sc, r->a, gaps[i].before);
        j_name(o, "after", &c->sc, r->a, gaps[i].after);
        cJSON_AddItemToArray(ga, o);
    }
}

static void json_advice(cJSON *root, summary_ctx *c)
{
    cJSON *ad = cJSON_AddArrayToObject(root, "advice");
    for (size_t i = 0; i < c->nadv; i++) {
        const advice *v = &c->adv[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "kind", advisor_kind_name(v->kind));
        cJSON_AddNumberToObject(o, "weight", v->weight);
        report_json_text(o, "title", v->title, strnlen(v->title, sizeof v->title));
        report_json_text(o, "text", v->text, strnlen(v->text, sizeof v->text));
        cJSON_AddItemToArray(ad, o);
    }
}

static void json_timeline(cJSON *root, summary_ctx *c)
{
    const report_info *in = &c->r->info;
    cJSON *tl = cJSON_AddObjectToObject(root, SK_TIMELINE);
    report_json_u64(tl, "limit_bytes", in->timeline_limit_bytes);
    cJSON_AddNumberToObject(tl, "files", in->timeline_files);
    report_json_u64(tl, "events", in->timeline_events);
    report_json_u64(tl, SK_LEFT_OUT, in->timeline_left_out);
    report_json_u64(tl, "moved_to_overlap_tracks", in->timeline_moved);
    report_json_u64(tl, "dropped_overlapping", in->timeline_dropped);
    report_json_u64(tl, "bytes", in->timeline_bytes);
}

static void json_files(cJSON *root, summary_ctx *c)
{
    cJSON *files = cJSON_AddArrayToObject(root, "files");
    for (size_t i = 0; i < c->r->nfiles; i++)
        cJSON_AddItemToArray(files, cJSON_CreateString(c->r->files[i]));
    cJSON_AddItemToArray(files, cJSON_CreateString("summary.json"));
    cJSON_AddItemToArray(files, cJSON_CreateString("report.txt"));
}

/* summary.json's sections, in their order (docs/report-format.md). */
static void (*const summary_sections[])(cJSON *root, summary_ctx *c) = {
    json_version, json_recording, json_job,    json_time,     json_events,
    json_steps,   json_ops,       json_queues, json_cpu,      json_memory,
    json_flops,   json_gaps,      json_advice, json_timeline, json_files,
};

static cJSON *summary_json(report *r, const queue_finding *qf, size_t nqf, const advice *adv,
                           size_t nadv)
{
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return NULL;
    summary_ctx c = {.r = r, .qf = qf, .nqf = nqf, .adv = adv, .nadv = nadv};
    for (size_t i = 0; i < sizeof summary_sections / sizeof summary_sections[0]; i++)
        summary_sections[i](root, &c);
    free(c.sc.p);
    return root;
}

/* ---- Finishing and swapping in --------------------------------------------------------- */

int report_json_write_summary(report *r, const queue_finding *qf, size_t nqf, const advice *adv,
                              size_t nadv)
{
    cJSON *root = summary_json(r, qf, nqf, adv, nadv);
    char *text = root ? (r->opt.pretty ? cJSON_Print(root) : cJSON_PrintUnformatted(root)) : NULL;
    cJSON_Delete(root);
    if (!text) {
        report_note_error(r, "summary.json", ENOMEM);
        return -1;
    }
    FILE *f = report_file_create(r, "summary.json");
    if (f) {
        fputs(text, f);
        putc('\n', f);
        report_file_close(r, f, "summary.json");
    }
    free(text);
    return 0;
}

/* ---- Reading a rank's summary.json back ------------------------------------------------- */

static double num(const cJSON *o, const char *key, double dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

static void text(const cJSON *o, const char *key, char *out, size_t cap)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    snprintf(out, cap, "%s", cJSON_IsString(v) ? v->valuestring : "");
}

static long index_of(const cJSON *o, const char *key)
{
    double v = num(o, key, -1);
    return v >= 0 && v <= INT32_MAX && v == floor(v) ? (long)v : -1;
}

/* The whole of FOLDER/report/summary.json, NUL-terminated (malloc'd), or NULL with why. */
static char *summary_text(const char *folder, uint64_t max, char *why, size_t cap)
{
    char opened[480];
    uint64_t size = 0;
    FILE *f = report_file_read(folder, "summary.json", max, &size, opened, sizeof opened);
    if (!f) {
        if (errno == ENOENT)
            snprintf(why, cap, "no report (%s)", opened);
        else
            snprintf(why, cap, "%s", opened);
        return NULL;
    }
    char *buf = malloc((size_t)size + 1);
    size_t got = buf ? fread(buf, 1, (size_t)size, f) : 0;
    if (buf)
        buf[got] = 0;
    else
        snprintf(why, cap, "%s/summary.json: out of memory", REPORT_DIR);
    fclose(f);
    return buf;
}

int report_summary_read(const char *folder, uint64_t max, report_summary *s, char *why, size_t cap)
{
    memset(s, 0, sizeof *s);
    s->rank = s->local_rank = s->world_size = -1;
    char *t = summary_text(folder, max, why, cap);
    if (!t)
        return -1;
    cJSON *root = cJSON_Parse(t);
    free(t);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        snprintf(why, cap, "its %s/summary.json is not a report summary", REPORT_DIR);
        return -1;
    }
    const cJSON *job = cJSON_GetObjectItemCaseSensitive(root, SK_JOB);
    const cJSON *rec = cJSON_GetObjectItemCaseSensitive(root, SK_RECORDING);
    const cJSON *tm = cJSON_GetObjectItemCaseSensitive(root, SK_TIME);
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(root, SK_EVENTS);
    if (cJSON_IsObject(job)) {
        text(job, SK_ID, s->job, sizeof s->job);
        text(job, SK_HOST, s->host, sizeof s->host);
        s->rank = index_of(job, SK_RANK);
        s->local_rank = index_of(job, SK_LOCAL_RANK);
        s->world_size = index_of(job, SK_WORLD_SIZE);
    }
    text(rec, SK_PROCESS, s->process, sizeof s->process);
    if (!s->host[0])
        text(rec, SK_HOST, s->host, sizeof s->host);
    s->pid = (long)num(rec, SK_PID, -1);
    s->parent_pid = (long)num(rec, SK_PARENT_PID, 0);
    /* Wall clock of the origin: the session's start on the wall clock, plus how far the origin
     * lies from the start on the collector's clock. */
    double wall = num(rec, SK_START_REALTIME, 0), start = num(rec, SK_START, 0),
           origin = num(tm, SK_ORIGIN, start);
    s->origin_wall_us = (wall + (origin - start)) / 1000.0;
    s->bytes_skipped = num(rec, SK_BYTES_SKIPPED, 0);
    s->chunks_skipped = num(rec, SK_CHUNKS_SKIPPED, 0);
    s->lost = num(ev, SK_LOST, 0);
    s->avg_comm_us = num(cJSON_GetObjectItemCaseSensitive(root, SK_STEPS), SK_AVG_COMM, 0);
    s->timeline_left_out =
        (uint64_t)num(cJSON_GetObjectItemCaseSensitive(root, SK_TIMELINE), SK_LEFT_OUT, 0);
    const cJSON *kinds = cJSON_GetObjectItemCaseSensitive(ev, SK_BY_KIND);
    text(ev, SK_ENDED, s->ended, sizeof s->ended);
    s->unfinished = num(kinds, event_kind_name(TS_KIND_COLLECT_START), 0) >
                    num(kinds, event_kind_name(TS_KIND_COLLECT_STOP), 0);
    cJSON_Delete(root);
    return 0;
}
