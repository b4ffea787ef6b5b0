/* job_write: the job report's files (job_internal.h): ranks.csv, job_steps.csv, summary.json
 * and report.txt (job_step_trace.csv is written as the steps are merged, timeline.json by
 * job_timeline.c). */
#include "job_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* ---- CSV ------------------------------------------------------------------------------------ */

/* text (at most cap bytes, NUL-terminated or not) as one CSV field, made clean text first. */
static void csv_text(FILE *f, const char *text, size_t cap)
{
    size_t len = strnlen(text, cap);
    char *c = malloc(4 * len + 1);
    if (!c)
        return;
    text_clean(text, len, c, 1);
    report_csv_field(f, c);
    free(c);
}

void job_write_ranks_csv(job_report *j, report_dir *d, size_t used)
{
    FILE *f = report_dir_file(d, "ranks.csv");
    if (!f)
        return;
    fputs("rank,local_rank,host,pid,steps,avg_step_us,avg_interval_us,avg_fpbp_us,avg_compute_us,"
          "avg_comm_wait_us,avg_tail_us,avg_eval_us,avg_busy_us,events_lost,bytes_skipped,"
          "straggler,"
          "workers,run_folder,state,last_step\n",
          f);
    for (size_t i = 0; i < used; i++) {
        const rank_in *r = &j->r[i];
        const char *cause = "";
        for (size_t k = 0; k < j->nstrag; k++)
            if (j->strag[k].idx == i)
                cause = j->strag[k].cause;
        fprintf(f, "%ld,%ld,", r->rank, r->local_rank);
        csv_text(f, r->host, sizeof r->host);
        fprintf(f, ",%ld,%" PRIu64 ",%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.0f,%.0f,%s,", r->pid,
                r->steps, job_avg(r->sum_total, r->steps), job_avg(r->sum_interval, r->steps),
                job_avg(r->sum_fpbp, r->steps), job_avg(r->sum_compute, r->steps),
                job_avg(r->sum_wait, r->steps), job_avg(r->sum_tail, r->steps),
                job_avg(r->sum_eval, r->steps), job_busy_of(r), r->lost, r->bytes_skipped, cause);
        fprintf(f, "%u,", r->workers);
        csv_text(f, job_base_name(r->folder), 4096);
        fprintf(f, ",%s,%" PRIu64 "\n", r->state, r->last_step);
    }
    report_dir_close_file(d, f, "ranks.csv");
}

static int by_step(const void *a, const void *b)
{
    const step_agg *x = a, *y = b;
    return (x->step > y->step) - (x->step < y->step);
}

/* job_steps.csv, by step number (the aggregates are sorted: the map is of no use after). */
void job_write_steps_csv(job_report *j, report_dir *d, merge *m)
{
    FILE *f = report_dir_file(d, "job_steps.csv");
    if (!f)
        return;
    fputs("step,ranks,slowest_rank,slowest_busy_us,fastest_rank,fastest_busy_us,skew_us,"
          "max_step_us\n",
          f);
    if (m->nagg)
        qsort(m->agg, m->nagg, sizeof *m->agg, by_step);
    for (size_t s = 0; s < m->nagg; s++) {
        const step_agg *a = &m->agg[s];
        double skew = a->max_busy - a->min_busy;
        fprintf(f, "%" PRIu64 ",%u,%u,%.3f,%u,%.3f,%.3f,%.3f\n", a->step, a->ranks, a->slowest,
                a->max_busy, a->fastest, a->min_busy, skew, a->max_total);
        if (a->ranks < 2)
            continue;
        j->aligned_steps++;
        j->sum_skew += skew;
        if (skew > j->max_skew)
            j->max_skew = skew, j->max_skew_step = a->step;
    }
    report_dir_close_file(d, f, "job_steps.csv");
}

/* key: text from outside (a folder's name, what a rank recorded) in valid UTF-8 (report_json_text),
 * as the run's summary.json has it. */
static void json_text(cJSON *o, const char *key, const char *text)
{
    report_json_text(o, key, text, strlen(text));
}

cJSON *job_summary_json(const job_report *j, size_t used)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *ver = cJSON_AddObjectToObject(root, "termsight");
    cJSON_AddStringToObject(ver, "version", TERMSIGHT_VERSION);
    cJSON_AddNumberToObject(ver, "report_format", REPORT_FORMAT);
    cJSON *job = cJSON_AddObjectToObject(root, "job");
    json_text(job, "id", used ? j->r[0].job : "");
    json_text(job, "folder", j->folder);
    if (j->world_size > 0)
        cJSON_AddNumberToObject(job, "world_size", (double)j->world_size);
    else
        cJSON_AddNullToObject(job, "world_size");
    cJSON_AddNumberToObject(job, "ranks_found", (double)used);

    cJSON *ranks = cJSON_AddArrayToObject(root, "ranks");
    for (size_t i = 0; i < used; i++) {
        const rank_in *r = &j->r[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "rank", (double)r->rank);
        if (r->local_rank >= 0)
            cJSON_AddNumberToObject(o, "local_rank", (double)r->local_rank);
        else
            cJSON_AddNullToObject(o, "local_rank");
        json_text(o, "host", r->host);
        cJSON_AddNumberToObject(o, "pid", (double)r->pid);
        json_text(o, "run_folder", r->folder);
        report_json_u64(o, "steps", r->steps);
        cJSON_AddNumberToObject(o, "avg_step_us", job_avg(r->sum_total, r->steps));
        cJSON_AddNumberToObject(o, "avg_interval_us", job_avg(r->sum_interval, r->steps));
        cJSON_AddNumberToObject(o, "avg_fpbp_us", job_avg(r->sum_fpbp, r->steps));
        cJSON_AddNumberToObject(o, "avg_compute_us", job_avg(r->sum_compute, r->steps));
        cJSON_AddNumberToObject(o, "avg_comm_wait_us", job_avg(r->sum_wait, r->steps));
        cJSON_AddNumberToObject(o, "avg_comm_us", r->avg_comm_us);
        cJSON_AddNumberToObject(o, "avg_tail_us", job_avg(r->sum_tail, r->steps));
        cJSON_AddNumberToObject(o, "avg_eval_us", job_avg(r->sum_eval, r->steps));
        cJSON_AddNumberToObject(o, "avg_busy_us", job_busy_of(r));
        cJSON_AddBoolToObject(o, "comm_wait_measured", r->have_wait);
        report_json_u64(o, "events_lost", (uint64_t)r->lost);
        report_json_u64(o, "bytes_skipped", (uint64_t)r->bytes_skipped);
        cJSON_AddNumberToObject(o, "workers", r->workers);
        cJSON_AddStringToObject(o, "state", r->state);
        report_json_u64(o, "last_step", r->last_step);
        report_json_u64(o, "timeline_events", r->tl_events);
        report_json_u64(o, "timeline_left_out", r->tl_left_out);
        if (r->ended_why[0])
            cJSON_AddStringToObject(o, "ended", r->ended_why);
        else
            cJSON_AddNullToObject(o, "ended");
        cJSON_AddItemToArray(ranks, o);
    }

    cJSON *st = cJSON_AddObjectToObject(root, "steps");
    report_json_u64(st, "aligned", j->aligned_steps);
    cJSON_AddNumberToObject(st, "avg_skew_us", job_avg(j->sum_skew, j->aligned_steps));
    cJSON_AddNumberToObject(st, "max_skew_us", j->max_skew);
    report_json_u64(st, "max_skew_step", j->max_skew_step);

    cJSON *sg = cJSON_AddArrayToObject(root, "stragglers");
    for (size_t k = 0; k < j->nstrag; k++) {
        const rank_in *r = &j->r[j->strag[k].idx];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "rank", (double)r->rank);
        json_text(o, "host", r->host);
        cJSON_AddStringToObject(o, "cause", j->strag[k].cause);
        cJSON_AddNumberToObject(o, "excess_us", j->strag[k].excess_us);
        cJSON_AddNumberToObject(o, "others_comm_wait_us", j->strag[k].others_wait_us);
        cJSON_AddStringToObject(o, "text", job_cause_text(j->strag[k].cause));
        cJSON_AddItemToArray(sg, o);
    }
    job_advice adv[MAX_JOB_ADVICE];
    size_t nadv = job_advise(j, used, adv);
    cJSON *ad = cJSON_AddArrayToObject(root, "advice");
    for (size_t k = 0; k < nadv; k++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "kind", adv[k].kind);
        cJSON_AddNumberToObject(o, "weight", adv[k].weight);
        json_text(o, "title", adv[k].title);
        json_text(o, "text", adv[k].text);
        cJSON_AddItemToArray(ad, o);
    }
    cJSON *tl = cJSON_AddObjectToObject(root, "timeline");
    report_json_u64(tl, "events", j->timeline_events);
    report_json_u64(tl, "left_out", j->timeline_left_out);
    report_json_u64(tl, "bytes", j->timeline_bytes);
    cJSON_AddNumberToObject(tl, "ranks", j->timeline_ranks);
    if (j->steps_last) {
        cJSON *w = cJSON_AddObjectToObject(tl, "steps");
        report_json_u64(w, "first", j->steps_first);
        report_json_u64(w, "last", j->steps_last);
    } else {
        cJSON_AddNullToObject(tl, "steps");
    }
    cJSON *w = cJSON_AddArrayToObject(root, "warnings");
    for (size_t i = 0; i < j->nwarn; i++)
        cJSON_AddItemToArray(w, cJSON_CreateString(j->warn[i]));
    report_json_u64(root, "warnings_left_out", j->warn_dropped);
    return root;
}

static void print_ms(FILE *out, double us)
{
    fprintf(out, "%.3f ms", us / 1000.0);
}

void job_print_report(const job_report *j, FILE *out, int brief)
{
    size_t used = 0;
    while (used < j->n && j->r[used].use)
        used++;
    if (!brief)
        fputs("termsight job report\n====================\n\n", out);
    char id[4 * 64 + 1];
    text_clean(used ? j->r[0].job : "", used ? strlen(j->r[0].job) : 0, id, 1);
    fprintf(out, "job:        %s, %zu rank%s", id, used, used == 1 ? "" : "s");
    if (j->world_size > 0)
        fprintf(out, " of %ld", j->world_size);
    fputc('\n', out);
    if (j->workers)
        fprintf(out,
                "workers:    %u forked children of the ranks (DataLoader workers) recorded "
                "sessions of their own, in their run folders here\n",
                j->workers);
    for (size_t i = 0; i < j->nwarn; i++)
        fprintf(out, "warning:    %s\n", j->warn[i]);
    if (j->warn_dropped)
        fprintf(out, "warning:    and %zu more\n", j->warn_dropped);
    if (!brief) {
        fputs("\nRanks (averages per step)\n-------------------------\n", out);
        fprintf(out, "%6s %-16s %8s %6s %12s %12s %12s %12s %12s %12s  %s\n", "RANK", "HOST", "PID",
                "STEPS", "STEP ms", "INTERVAL ms", "COMPUTE ms", "COMM WAIT ms", "TAIL ms",
                "EVAL ms", "STATE");
        for (size_t i = 0; i < used; i++) {
            const rank_in *r = &j->r[i];
            char host[4 * sizeof r->host + 1];
            text_clean(r->host, strlen(r->host), host, 1);
            fprintf(
                out,
                "%6ld %-16.16s %8ld %6" PRIu64 " %12.3f %12.3f %12.3f %12.3f %12.3f %12.3f  %s\n",
                r->rank, host, r->pid, r->steps, job_avg(r->sum_total, r->steps) / 1000,
                job_avg(r->sum_interval, r->steps) / 1000, job_avg(r->sum_compute, r->steps) / 1000,
                job_avg(r->sum_wait, r->steps) / 1000, job_avg(r->sum_tail, r->steps) / 1000,
                job_avg(r->sum_eval, r->steps) / 1000, r->state);
        }
        fputc('\n', out);
    }
    if (j->aligned_steps) {
        fprintf(out, "skew:       %" PRIu64 " steps aligned by number, average ", j->aligned_steps);
        print_ms(out, job_avg(j->sum_skew, j->aligned_steps));
        fputs(", largest ", out);
        print_ms(out, j->max_skew);
        fprintf(out, " (step %" PRIu64 ")\n", j->max_skew_step);
    }
    if (!j->nstrag && j->no_wait) {
        char verdict[160];
        job_unknown_verdict(verdict, sizeof verdict, (size_t)j->no_wait);
        fprintf(out, "%s\n", verdict);
    } else if (!j->nstrag) {
        fputs("stragglers: none: the ranks are balanced\n", out);
    }
    for (size_t k = 0; k < j->nstrag; k++) {
        const rank_in *r = &j->r[j->strag[k].idx];
        fprintf(out, "straggler:  rank %ld (%s): ", r->rank, j->strag[k].cause);
        print_ms(out, j->strag[k].excess_us);
        fprintf(out, " more work per step than the typical rank; %s",
                job_cause_text(j->strag[k].cause));
        if (j->strag[k].others_wait_us > 0) {
            fputs(". The other ranks wait for it in communication: ", out);
            print_ms(out, j->strag[k].others_wait_us);
            fputs(" per step on average", out);
        }
        fputs("\n", out);
    }
    if (!brief) {
        job_advice adv[MAX_JOB_ADVICE];
        size_t nadv = job_advise(j, used, adv);
        fputs("\nSuggestions\n-----------\n", out);
        if (!nadv)
            fputs("none: the ranks are balanced and wait little for each other\n", out);
        for (size_t k = 0; k < nadv; k++) {
            char title[4 * sizeof adv[k].title + 1], text[4 * sizeof adv[k].text + 1];
            text_clean(adv[k].title, strlen(adv[k].title), title, 1);
            text_clean(adv[k].text, strlen(adv[k].text), text, 1);
            fprintf(out, "%zu. %s\n   %s\n", k + 1, title, text);
        }
    }
    if (j->dir && brief) {
        char dir[4 * 4096 + 1];
        text_clean(j->dir, strnlen(j->dir, 4096), dir, 1);
        fprintf(out, "report:     %s\n", dir);
    }
}

void job_report_print(const job_report *j, FILE *out)
{
    job_print_report(j, out, 1);
}

void job_write_summary(job_report *j, report_dir *d, size_t used, int pretty)
{
    cJSON *root = job_summary_json(j, used);
    char *js = root ? (pretty ? cJSON_Print(root) : cJSON_PrintUnformatted(root)) : NULL;
    cJSON_Delete(root);
    FILE *f = js ? report_dir_file(d, "summary.json") : NULL;
    if (f) {
        fputs(js, f);
        fputc('\n', f);
        report_dir_close_file(d, f, "summary.json");
    }
    free(js);
    f = report_dir_file(d, "report.txt");
    if (f) {
        job_print_report(j, f, 0);
        report_dir_close_file(d, f, "report.txt");
    }
}
