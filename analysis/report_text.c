/* report_text: report.txt and the short summary termsight analyse prints: the run, its
 * events, steps, operators, kernels, queues, CPU, memory, the advisor's suggestions, the files. */
#include "report_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- report.txt and the short summary ------------------------------------------------------ */

static void print_ms(FILE *out, double ns)
{
    fprintf(out, "%.3f ms", ns == ns ? ns / 1e6 : 0.0);
}

static void print_meta_line(const report *r, FILE *out)
{
    char proc[4 * sizeof r->meta.process + 1], host[4 * sizeof r->meta.host + 1];
    if (r->have_meta) {
        text_clean(r->meta.process, strnlen(r->meta.process, sizeof r->meta.process), proc, 0);
        text_clean(r->meta.host, strnlen(r->meta.host, sizeof r->meta.host), host, 0);
        long ppid = report_parent_pid(r->a);
        char forked[48] = "";
        if (ppid)
            snprintf(forked, sizeof forked, ", forked from pid %ld", ppid);
        fprintf(out,
                "run:        %s (pid %" PRId32 "%s)%s%s, recording format %" PRIu32 ".%" PRIu32
                "\n",
                proc[0] ? proc : "?", r->meta.pid, forked, host[0] ? " on " : "", host,
                r->meta.major, r->meta.minor);
    } else {
        fputs("run:        (the recording has no description)\n", out);
    }
    report_job job;
    if (report_job_of(r->a, &job)) {
        char id[4 * sizeof job.id + 1];
        text_clean(job.id, strlen(job.id), id, 0);
        fprintf(out, "job:        %s", id);
        if (job.rank >= 0)
            fprintf(out, ", rank %ld", job.rank);
        if (job.world_size > 0)
            fprintf(out, " of %ld", job.world_size);
        if (job.local_rank >= 0)
            fprintf(out, " (local rank %ld)", job.local_rank);
        fputc('\n', out);
    }
    size_t len = strlen(r->info.recording);
    char *rec = malloc(4 * len + 1);
    if (rec) {
        text_clean(r->info.recording, len, rec, 0);
        fprintf(out, "recording:  %s\n", rec);
        free(rec);
    }
}

/* The descendant processes in report.txt's CPU section, the busiest TOP_OPS. */
static void print_children(const analysis *a, FILE *out, scratch *sc)
{
    cpu_child *rows = NULL;
    size_t n = analysis_cpu_children(a, &rows);
    cpu_summary cs = analysis_cpu(a);
    if (n)
        fprintf(out, "  child processes: %zu (cpu_processes.csv)\n", n);
    for (size_t i = 0; i < n && i < TOP_OPS; i++) {
        const cpu_child *p = &rows[i];
        fprintf(out,
                "    %-20s pid %-7" PRIu32 " CPU avg %5.1f %%, peak %5.1f %%; RSS %.1f MiB, peak "
                "%.1f MiB%s\n",
                report_clean_id(sc, a, p->name, 0), p->pid, p->avg_user + p->avg_system,
                p->peak_total, (double)p->last_rss / 1048576.0, (double)p->peak_rss / 1048576.0,
                p->ended ? " (ended)" : "");
    }
    if (n > TOP_OPS)
        fprintf(out, "    ... and %zu more\n", n - TOP_OPS);
    if (cs.processes_left_out)
        fprintf(out, "  %" PRIu32 " more descendant processes were not followed (limit 256)\n",
                cs.processes_left_out);
    free(rows);
}

static void print_loss_line(void *out, const char *text)
{
    fprintf(out, "            %s\n", text);
}

/* A section of report.txt and of the short summary (brief): what it prints for r. */
typedef void (*text_section)(const report *r, FILE *out, int brief, scratch *sc);

static void text_events(const report *r, FILE *out, int brief, scratch *sc)
{
    (void)brief, (void)sc;
    const analysis_totals *t = analysis_totals_of(r->a);
    double span = t->first_ns != UINT64_MAX && t->last_ns > t->first_ns
                      ? (double)(t->last_ns - t->first_ns) / 1e9
                      : 0;
    fprintf(out,
            "events:     %" PRIu64 " over %.3f s, %" PRIu32 " thread%s, %" PRIu32
            " collection window%s\n",
            t->events, span, t->threads, t->threads == 1 ? "" : "s", t->windows,
            t->windows == 1 ? "" : "s");
    if (!t->lost)
        return;
    fprintf(out, "lost:       %" PRIu64 " events were lost by the profiler: results are partial\n",
            t->lost);
    /* As LTTng-UST says what it discarded: per window and thread, the largest first. */
    report_loss_lines(r, print_loss_line, out);
}

/* How the recording ended when it did not end as it should, and what it could not read. */
static void text_notices(const report *r, FILE *out, int brief, scratch *sc)
{
    (void)brief, (void)sc;
    const analysis *a = r->a;
    const analysis_totals *t = analysis_totals_of(a);
    char *record_error = report_clean_dup(analysis_config_value(a, "record_error"));
    if (record_error)
        fprintf(out,
                "stopped:    recording stopped early (%s): the %" PRIu64
                " events emitted after that are not here\n",
                record_error, t->lost_by_reason[TS_LOST_WRITE]);
    free(record_error);
    char *snapshot = report_clean_dup(analysis_config_value(a, "snapshot"));
    if (snapshot)
        fprintf(out,
                "snapshot:   a flight-recorder snapshot (%s): the events the process kept, from "
                "the first whole step they held\n",
                snapshot);
    free(snapshot);
    char *ended = report_clean_dup(analysis_config_value(a, "ended"));
    if (ended)
        fprintf(out,
                "ended:      the process ended (%s) before it closed its session; what its "
                "lanes still held was recovered from its shared memory\n",
                ended);
    if (ended)
        free(ended);
    else if (t->by_kind[TS_KIND_COLLECT_START] > t->by_kind[TS_KIND_COLLECT_STOP])
        fprintf(out,
                "unfinished: collection window %" PRIu32
                " has no stop: the process was still collecting or ended without stopping "
                "(killed?); what it emitted after the recorder's last drain is not here\n",
                t->windows);
    if (r->info.skipped_bytes || r->info.bad_chunks)
        fprintf(out,
                "damaged:    %" PRIu64 " bytes skipped in %" PRIu64
                " damaged chunks; everything else was analysed\n",
                r->info.skipped_bytes, r->info.bad_chunks);
    if (r->info.grown_bytes)
        fprintf(out,
                "live:       the recording was still being written: read its first %" PRIu64
                " bytes, its size when the analysis began (%" PRIu64 " more by its end)\n",
                r->info.read_bytes, r->info.grown_bytes);
}

/* The full report's lines under the step averages: the overlap split and the slowest steps. */
static void print_step_details(const step_summary *ss, FILE *out)
{
    fputs("forward/backward per step: ", out);
    print_ms(out, ss->avg_fpbp_ns);
    fputs("\noverlap per step: computation ", out);
    print_ms(out, ss->avg_overlap_compute_ns);
    fputs(", communication ", out);
    print_ms(out, ss->avg_comm_ns);
    fputs(", pure communication ", out);
    print_ms(out, ss->avg_pure_comm_ns);
    fputs(", free ", out);
    print_ms(out, ss->avg_free_ns);
    fputs(", gaps between ops ", out);
    print_ms(out, ss->avg_gap_ns);
    fputs("\nslowest steps:", out);
    for (int i = 0; i < 5 && ss->slowest_ns[i]; i++) {
        fprintf(out, "%s %" PRIu64 " (", i ? "," : "", ss->slowest[i]);
        print_ms(out, (double)ss->slowest_ns[i]);
        fputc(')', out);
    }
    fputc('\n', out);
}

static void print_step_average(const step_summary *ss, FILE *out)
{
    fprintf(out, "%" PRIu64 " steps, average ", ss->steps);
    print_ms(out, ss->avg_total_ns);
    fputs(" = interval ", out);
    print_ms(out, ss->avg_interval_ns);
    fputs(" + compute ", out);
    print_ms(out, ss->avg_compute_ns);
    if (ss->avg_comm_wait_ns > 0) {
        fputs(" + communication wait ", out);
        print_ms(out, ss->avg_comm_wait_ns);
    }
    fputs(" + tail ", out);
    print_ms(out, ss->avg_tail_ns);
    if (ss->avg_eval_ns > 0) {
        fputs(" + evaluation ", out);
        print_ms(out, ss->avg_eval_ns);
    }
    fprintf(out, " (on the host; FP/BP from %s)\n", step_source_name(ss->source));
}

/* The step on the device, averaged over the steps with device work: busy, and idle by cause. */
static void print_step_device(const step_summary *ss, const char *indent, FILE *out)
{
    double total = ss->avg_gpu_total_ns;
    fprintf(out, "%son the device (GPU %" PRIu32 ", %" PRIu64 " step%s with device work): busy ",
            indent, ss->gpu_device, ss->gpu_steps, ss->gpu_steps == 1 ? "" : "s");
    print_ms(out, ss->avg_gpu_busy_ns);
    fprintf(out, " (%.0f %%), idle ", total > 0 ? 100 * ss->avg_gpu_busy_ns / total : 0.0);
    print_ms(out, total - ss->avg_gpu_busy_ns);
    fputs(" = waiting for data ", out);
    print_ms(out, ss->avg_gpu_idle_data_ns);
    fputs(" + host-bound ", out);
    print_ms(out, ss->avg_gpu_idle_host_ns);
    fputs(" + synchronization ", out);
    print_ms(out, ss->avg_gpu_idle_sync_ns);
    fputs(" + other ", out);
    print_ms(out, ss->avg_gpu_idle_other_ns);
    fputc('\n', out);
}

static void text_steps(const report *r, FILE *out, int brief, scratch *sc)
{
    (void)sc;
    step_summary ss = analysis_steps(r->a);
    fputs(brief ? "steps:      " : "\nSteps\n-----\n", out);
    const char *indent = brief ? "            " : "";
    if (ss.steps) {
        print_step_average(&ss, out);
        if (ss.gpu_steps)
            print_step_device(&ss, indent, out);
        if (!brief)
            print_step_details(&ss, out);
    } else {
        fputs("none recorded\n", out);
    }
    if (ss.unfinished_step)
        fprintf(out,
                "%sunfinished: step %" PRIu64
                " began and did not end (interrupted, or under way): in no average\n",
                indent, ss.unfinished_step);
    if (!ss.evals)
        return;
    fprintf(out, "%sevaluation: %" PRIu64 " pass%s, ", indent, ss.evals, ss.evals == 1 ? "" : "es");
    print_ms(out, ss.eval_ns);
    if (ss.eval_inside_ns > 0) {
        fputs(" in all, ", out);
        print_ms(out, ss.eval_inside_ns);
        fputs(" of it inside steps (their evaluation part)\n", out);
    } else {
        fputs(" in all, in no step\n", out);
    }
}

/* The operator types (and in the full report the operators too) by total time. */
static void text_ops(const report *r, FILE *out, int brief, scratch *sc)
{
    const analysis *a = r->a;
    for (int by_type = 1; by_type >= (brief ? 1 : 0); by_type--) {
        op_query q = {.by_type = by_type, .sort = OP_SORT_TOTAL, .limit = brief ? 5 : TOP_OPS};
        op_stat *rows = NULL;
        size_t n = analysis_ops(a, &q, &rows);
        if (brief)
            fputs("top op types by total time:\n", out);
        else
            fprintf(out, "\n%s\n%s\n",
                    by_type ? "Operator types (top 10 by total time)"
                            : "Operators (top 10 by total time)",
                    by_type ? "-------------------------------------"
                            : "--------------------------------");
        if (!n)
            fputs("  none recorded\n", out);
        else /* self: the share of all operators' self time (nested operators' time apart) */
            fprintf(out, "      %13s  %10s  %8s  %11s  %s\n", "total", "self share", "calls",
                    "average", by_type ? "type" : "operator [type]");
        for (size_t i = 0; i < n; i++) {
            fprintf(out, "  %2zu. %10.3f ms  %8.1f %%  %8" PRIu64 "  %8.3f ms", i + 1,
                    (double)rows[i].total_ns / 1e6, 100 * rows[i].share, rows[i].count,
                    rows[i].count ? (double)rows[i].total_ns / (double)rows[i].count / 1e6 : 0.0);
            fprintf(out, "  %s", report_clean_id(sc, a, rows[i].name, 0));
            if (!by_type)
                fprintf(out, " [%s]", report_clean_id(sc, a, rows[i].type, 0));
            fputc('\n', out);
        }
        free(rows);
    }
}

static void text_kernels(const report *r, FILE *out, int brief, scratch *sc)
{
    (void)brief;
    kernel_stat *ks = NULL;
    size_t nk = analysis_kernels(r->a, TOP_OPS, &ks);
    fputs("\nKernels (top 10 by total time)\n------------------------------\n", out);
    device_attribution d = analysis_device_attribution(r->a);
    if (!nk)
        fputs("  none recorded\n", out);
    else
        fprintf(out,
                "  %" PRIu64 " kernels, copies and memsets, %" PRIu64
                " (%.1f %%) under an operator; under none: %" PRIu64 " (%.1f %% of their time)\n"
                "      %13s  %8s  %s\n",
                d.records, d.with_op, d.records ? 100.0 * (double)d.with_op / (double)d.records : 0,
                d.records - d.with_op,
                d.time_ns ? 100.0 * (double)(d.time_ns - d.with_op_ns) / (double)d.time_ns : 0,
                "total", "calls", "kernel under operator");
    for (size_t i = 0; i < nk; i++) {
        fprintf(out, "  %2zu. %10.3f ms  %8" PRIu64 "  %s", i + 1, (double)ks[i].total_ns / 1e6,
                ks[i].count, report_clean_id(sc, r->a, ks[i].name, 0));
        fprintf(out, " under %s%s\n",
                ks[i].op ? report_clean_id(sc, r->a, ks[i].op, 0) : "(unknown op)",
                ks[i].comm ? " (communication)" : "");
    }
    free(ks);
}

static void text_queues(const report *r, FILE *out, int brief, scratch *sc)
{
    const analysis *a = r->a;
    queue_finding qf[MAX_FIND];
    size_t nqf = analysis_queue_findings(a, qf, MAX_FIND);
    queue_stat *qs = NULL;
    size_t nq = analysis_queues(a, &qs);
    fputs(brief ? "data queues:" : "\nData queues\n-----------\n", out);
    if (!nq)
        fputs(brief ? " none recorded\n" : "  none recorded\n", out);
    else if (brief)
        fputc('\n', out);
    for (size_t i = 0; i < nq; i++) {
        const queue_finding *f = report_finding_of(qf, nqf, (uint32_t)i);
        fprintf(out, "  %s (%s): %s, average usage %.1f %%, empty %.1f %%, full %.1f %%\n",
                report_clean_id(sc, a, qs[i].name, 0), queues_role_name(qs[i].role),
                queues_verdict_name(f ? f->verdict : QUEUE_VERDICT_NONE), 100 * qs[i].avg_usage,
                100 * qs[i].empty_share, 100 * qs[i].full_share);
    }
    free(qs);
    for (size_t i = 0; !brief && i < nqf; i++) {
        char text[4 * sizeof qf[i].text + 1], sug[4 * sizeof qf[i].suggestion + 1];
        text_clean(qf[i].text, strnlen(qf[i].text, sizeof qf[i].text), text, 1);
        text_clean(qf[i].suggestion, strnlen(qf[i].suggestion, sizeof qf[i].suggestion), sug, 1);
        fprintf(out, "  - %s: %s%s%s\n", queues_verdict_name(qf[i].verdict), text,
                sug[0] ? "; " : "", sug);
    }
}

static void text_cpu(const report *r, FILE *out, int brief, scratch *sc)
{
    (void)brief;
    cpu_summary cs = analysis_cpu(r->a);
    fputs("\nCPU\n---\n", out);
    if (cs.samples)
        fprintf(out,
                "  machine: user %.1f %%, system %.1f %%, iowait %.1f %%, idle %.1f %%, "
                "%.0f context switches/s, %.1f running, %.1f blocked\n"
                "  process: user %.1f %%, system %.1f %% of one CPU (%" PRIu32 " CPUs)\n",
                cs.machine[TS_CPU_USER], cs.machine[TS_CPU_SYSTEM], cs.machine[TS_CPU_IOWAIT],
                cs.machine[TS_CPU_IDLE], cs.context_switches_per_s, cs.avg_running, cs.avg_blocked,
                cs.process_user, cs.process_system, cs.cpus);
    else
        fputs("  no samples\n", out);
    print_children(r->a, out, sc);
}

static void text_memory(const report *r, FILE *out, int brief, scratch *sc)
{
    (void)brief, (void)sc;
    memory_summary ms = analysis_memory(r->a);
    fputs("\nMemory\n------\n", out);
    if (ms.host_samples)
        fprintf(out, "  host RSS: %.1f MiB at the end, peak %.1f MiB\n",
                (double)ms.host_rss / 1048576.0, (double)ms.host_peak_rss / 1048576.0);
    else
        fputs("  host RSS: no samples\n", out);
    for (uint32_t d = 0; d < 8; d++)
        if (ms.device_bytes[d] || ms.device_peak[d])
            fprintf(out, "  device %" PRIu32 ": %.1f MiB allocated at the end, peak %.1f MiB\n", d,
                    (double)ms.device_bytes[d] / 1048576.0, (double)ms.device_peak[d] / 1048576.0);
}

static void text_flops(const report *r, FILE *out, int brief, scratch *sc)
{
    (void)brief, (void)sc;
    flops_summary fs = analysis_flops(r->a);
    fputs("\nCalculation quantity\n--------------------\n", out);
    if (!fs.flops) {
        fputs("  no operator carried FLOPs\n", out);
        return;
    }
    fprintf(out, "  %.3f MFLOPs in ", (double)fs.flops / 1e6);
    print_ms(out, (double)fs.time_ns);
    fprintf(out, ": %.3f GFLOPS", fs.flops_per_s / 1e9);
    if (fs.utilization >= 0)
        fprintf(out, ", %.1f %% of the peak", 100 * fs.utilization);
    fputc('\n', out);
}

static void text_gaps(const report *r, FILE *out, int brief, scratch *sc)
{
    (void)brief;
    op_gap gaps[5];
    size_t ng = analysis_gaps(r->a, gaps, 5);
    if (ng)
        fputs("\nLargest gaps between operators\n------------------------------\n", out);
    for (size_t i = 0; i < ng; i++) {
        fputs("  ", out);
        print_ms(out, (double)gaps[i].gap_ns);
        fprintf(out, " in step %" PRIu64 " on thread %" PRIu32 ", after %s", gaps[i].step,
                gaps[i].tid, report_clean_id(sc, r->a, gaps[i].before, 0));
        fprintf(out, ", before %s\n", report_clean_id(sc, r->a, gaps[i].after, 0));
    }
}

static void text_advice(const report *r, FILE *out, int brief, scratch *sc)
{
    (void)sc;
    advice adv[MAX_ADVICE];
    size_t nadv = analysis_advise(r->a, adv, brief ? 3 : MAX_ADVICE);
    fputs(brief ? "suggestions:" : "\nSuggestions\n-----------\n", out);
    if (!nadv)
        fputs(brief ? " none\n" : "  none: nothing stands out\n", out);
    else if (brief)
        fputc('\n', out);
    for (size_t i = 0; i < nadv; i++) {
        char title[4 * sizeof adv[i].title + 1], text[4 * sizeof adv[i].text + 1];
        text_clean(adv[i].title, strnlen(adv[i].title, sizeof adv[i].title), title, 0);
        text_clean(adv[i].text, strnlen(adv[i].text, sizeof adv[i].text), text, 1);
        fprintf(out, "  %zu. %s\n", i + 1, title);
        if (!brief || text[0])
            fprintf(out, "     %s\n", text);
    }
}

static void text_timeline(const report *r, FILE *out, int brief, scratch *sc)
{
    (void)brief, (void)sc;
    const report_info *in = &r->info;
    fputs("\nTimeline\n--------\n", out);
    fprintf(out, "  %" PRIu32 " file%s, %" PRIu64 " trace events, %.1f MiB (limit %.0f MiB)\n",
            in->timeline_files, in->timeline_files == 1 ? "" : "s", in->timeline_events,
            (double)in->timeline_bytes / 1048576.0, (double)in->timeline_limit_bytes / 1048576.0);
    if (in->timeline_left_out)
        fprintf(out, "  %" PRIu64 " events left out by the size limit\n", in->timeline_left_out);
    if (in->timeline_moved || in->timeline_dropped)
        fprintf(out,
                "  %" PRIu64 " overlapping events moved to overlap tracks, %" PRIu64 " dropped\n",
                in->timeline_moved, in->timeline_dropped);
}

/* The report's files (full), or where the report is (brief). */
static void text_files(const report *r, FILE *out, int brief, scratch *sc)
{
    (void)sc;
    if (!brief) {
        fputs("\nFiles\n-----\n", out);
        for (size_t i = 0; i < r->nfiles; i++)
            if (strcmp(r->files[i], "summary.json") && strcmp(r->files[i], "report.txt"))
                fprintf(out, "  %s\n", r->files[i]);
        fputs("  summary.json\n  report.txt\n", out);
        return;
    }
    if (!r->info.dir)
        return;
    size_t len = strlen(r->info.dir);
    char *dir = malloc(4 * len + 1);
    if (dir) {
        text_clean(r->info.dir, len, dir, 0);
        fprintf(out, "report:     %s\n", dir);
        free(dir);
    }
}

static void text_run(const report *r, FILE *out, int brief, scratch *sc)
{
    (void)sc;
    if (!brief)
        fputs("termsight report\n================\n\n", out);
    print_meta_line(r, out);
}

/* The sections in their order; full_only: in report.txt, not in the short summary. */
static const struct {
    text_section print;
    int full_only;
} sections[] = {
    {text_run, 0},     {text_events, 0}, {text_notices, 0},  {text_steps, 0},  {text_ops, 0},
    {text_kernels, 1}, {text_queues, 0}, {text_cpu, 1},      {text_memory, 1}, {text_flops, 1},
    {text_gaps, 1},    {text_advice, 0}, {text_timeline, 1}, {text_files, 0},
};

void report_print(const report *r, FILE *out, int brief)
{
    scratch sc = {0};
    for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++)
        if (!brief || !sections[i].full_only)
            sections[i].print(r, out, brief, &sc);
    free(sc.p);
}
