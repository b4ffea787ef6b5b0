/* job: the job report, merged from the ranks' reports (job.h).
 *
 * Three passes over what the ranks' analyses wrote, none over events:
 * - each rank's summary.json (small): who it is (job, rank, host, pid), its clock, its damage;
 *   the ranks that can be used are chosen (one job, one folder per rank, the newest of a rank's
 *   duplicates) and sorted by rank;
 * - each rank's step_trace.csv, streamed: its per-step rows go to job_step_trace.csv in rank
 *   order, its averages are summed, and per step number the slowest and fastest rank are kept
 *   (arrays indexed by step number, not by rank: memory grows with the steps, not the ranks),
 *   and its steps' spans;
 * - each rank's timeline files, streamed line by line into one Chrome trace: each rank's
 *   processes renumbered (rank R's pid p becomes (R + 1) * 1000 + p) and renamed ("rank R:
 *   ..."), its times moved onto one clock (each rank's wall clock at its start), within its
 *   share of the limit, chosen by its steps (timeline_pick: the slowest whole first) when it may
 *   not all fit: a pass to weigh, then one to write.
 *
 * A rank's "busy" time in a step is the step minus the time it waited in communication: what it
 * spent on its own work (data, compute, tail). The ranks of a synchronous job have the same step
 * times (each waits for the slowest in its collectives), so the slowest rank is the one with the
 * most busy time, and the others' waiting is where the job loses time. */
#include "job_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void job_options_init(job_options *o)
{
    memset(o, 0, sizeof *o);
    o->timeline_limit_mb = -1;
}

double job_timeline_share_mb(double limit_mb, int ranks)
{
    if (limit_mb < 0)
        limit_mb = REPORT_TIMELINE_LIMIT_MB;
    return ranks > 0 ? limit_mb / ranks * SHARE_SLACK : 0;
}

void job_warn(job_report *j, const char *fmt, ...)
{
    if (j->nwarn >= MAX_WARNINGS) {
        j->warn_dropped++;
        return;
    }
    char **w = realloc(j->warn, (j->nwarn + 1) * sizeof *w);
    if (!w)
        return;
    j->warn = w;
    va_list ap;
    va_start(ap, fmt);
    char *line = NULL;
    int len = vasprintf(&line, fmt, ap);
    va_end(ap);
    if (len < 0)
        return;
    /* Warnings name folders and say what ranks recorded: one clean line wherever they go. */
    char *clean = report_clean_dup(line);
    if (clean)
        j->warn[j->nwarn++] = clean;
    free(line);
}

/* ---- The steps, merged ----------------------------------------------------------------------- */

static step_agg *agg_at(merge *m, uint64_t step)
{
    uint32_t i = index_map_find(&m->steps, step);
    if (i != UINT32_MAX)
        return &m->agg[i];
    if (m->nagg >= MAX_ALIGNED_STEPS) {
        m->unaligned++;
        return NULL;
    }
    if (m->nagg == m->cap) {
        size_t want = m->cap ? 2 * m->cap : 1024;
        step_agg *a = realloc(m->agg, want * sizeof *a);
        if (!a)
            return NULL;
        m->agg = a;
        m->cap = want;
    }
    if (index_map_get(&m->steps, step, (uint32_t)m->nagg, NULL) == UINT32_MAX)
        return NULL;
    step_agg *a = &m->agg[m->nagg++];
    memset(a, 0, sizeof *a);
    a->step = step;
    return a;
}

void job_merge_free(merge *m)
{
    index_map_free(&m->steps);
    free(m->agg);
}

/* Streams the rank's step_trace.csv: its rows into job_step_trace.csv, its sums, the per-step
 * aggregates. 0, or -1 with why. */
int job_load_steps(merge *m, rank_in *r, char *why, size_t cap)
{
    report_step_reader sr;
    if (report_step_trace_open(&sr, r->folder, MAX_STEP_TRACE_BYTES, &m->j->long_lines, why, cap) <
        0)
        return -1;
    const int *col = sr.col;
    r->have_wait = col[STEP_COL_COMM_WAIT] >= 0 && r->avg_comm_us > 0;
    double v[STEP_COL__COUNT];
    while (report_step_trace_next(&sr, v)) {
        /* A value that is not a number is 0 (the reader skips rows whose step or total is not). */
        for (int k = 0; k < STEP_COL__COUNT; k++)
            v[k] = fmax(v[k], 0);
        double wait = v[STEP_COL_COMM_WAIT], total = v[STEP_COL_TOTAL];
        double compute =
            col[STEP_COL_COMPUTE] >= 0 ? v[STEP_COL_COMPUTE] : fmax(0, v[STEP_COL_FPBP] - wait);
        double busy = fmax(0, total - wait);
        uint64_t step = (uint64_t)v[STEP_COL_STEP];
        r->steps++;
        if (step > r->last_step)
            r->last_step = step;
        r->sum_total += total;
        r->sum_interval += v[STEP_COL_INTERVAL];
        r->sum_fpbp += v[STEP_COL_FPBP];
        r->sum_tail += v[STEP_COL_TAIL];
        r->sum_compute += compute;
        r->sum_wait += wait;
        r->sum_eval += v[STEP_COL_EVAL];
        if (col[STEP_COL_BEGIN] >= 0 && col[STEP_COL_END] >= 0)
            step_spans_add(&r->spans, &r->nspans, &r->cap_spans,
                           (step_span){step, llround(v[STEP_COL_BEGIN] * 1000),
                                       llround(v[STEP_COL_END] * 1000)});
        if (m->trace)
            fprintf(m->trace, "%.0f,%ld,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f\n",
                    v[STEP_COL_STEP], r->rank, total, v[STEP_COL_INTERVAL], v[STEP_COL_FPBP],
                    compute, wait, v[STEP_COL_TAIL], v[STEP_COL_EVAL], busy);
        step_agg *a = agg_at(m, step);
        if (!a)
            continue;
        if (!a->ranks || busy > a->max_busy)
            a->max_busy = busy, a->slowest = (uint32_t)r->rank;
        if (!a->ranks || busy < a->min_busy)
            a->min_busy = busy, a->fastest = (uint32_t)r->rank;
        if (total > a->max_total)
            a->max_total = total;
        a->ranks++;
    }
    report_step_trace_close(&sr);
    return 0;
}

/* ---- Choosing the ranks ------------------------------------------------------------------- */

/* ---- Stragglers ------------------------------------------------------------------------------ */

double job_avg(double sum, uint64_t n)
{
    return n ? sum / (double)n : 0;
}

double job_busy_of(const rank_in *r)
{
    return job_avg(r->sum_total - r->sum_wait, r->steps);
}

static int by_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double avg_busy(const job_rank_avg *r)
{
    return fmax(0, r->total_us - r->wait_us);
}

/* The typical rank is the lower median of the busy times (the fastest of two, the middle of
 * three), so that one slow rank never moves it; the rank nearest to it is the base that a
 * straggler's parts are compared with, to name the part that grew. */
size_t job_stragglers(const job_rank_avg *r, size_t n, job_straggler *out)
{
    size_t with = 0;
    for (size_t i = 0; i < n; i++)
        with += r[i].steps > 0;
    if (with < 2)
        return 0;
    double *busy = malloc(with * sizeof *busy);
    if (!busy)
        return 0;
    for (size_t i = 0, k = 0; i < n; i++)
        if (r[i].steps)
            busy[k++] = avg_busy(&r[i]);
    qsort(busy, with, sizeof *busy, by_double);
    double typical = busy[(with - 1) / 2];
    free(busy);
    const job_rank_avg *base = NULL;
    for (size_t i = 0; i < n; i++)
        if (r[i].steps &&
            (!base || fabs(avg_busy(&r[i]) - typical) < fabs(avg_busy(base) - typical)))
            base = &r[i];
    double typical_step = base->total_us;
    size_t found = 0;
    for (size_t i = 0; i < n; i++) {
        double excess = avg_busy(&r[i]) - typical;
        if (!r[i].steps || excess < JOB_STRAGGLER_MIN_US ||
            excess < JOB_STRAGGLER_SHARE * fmax(typical_step, typical))
            continue;
        double d_interval = r[i].interval_us - base->interval_us;
        double d_compute = r[i].compute_us - base->compute_us;
        double d_tail = r[i].tail_us - base->tail_us;
        const char *cause = "compute";
        if (d_interval >= d_compute && d_interval >= d_tail)
            cause = "data";
        else if (d_tail > d_compute)
            cause = "tail";
        double others = 0;
        for (size_t k = 0; k < n; k++)
            if (k != i && r[k].steps)
                others += r[k].wait_us;
        out[found++] = (job_straggler){.idx = i,
                                       .cause = cause,
                                       .excess_us = excess,
                                       .others_wait_us = others / (double)(with - 1)};
    }
    return found;
}

void job_unknown_verdict(char *buf, size_t cap, size_t unmeasured)
{
    snprintf(buf, cap,
             "stragglers: unknown: %zu rank%s recorded no communication, so waiting for another "
             "rank cannot be told from work",
             unmeasured, unmeasured == 1 ? "" : "s");
}

/* Stragglers among the merged ranks, by job_stragglers over their averages. */
void job_find_stragglers(job_report *j, size_t used)
{
    job_rank_avg *v = calloc(used ? used : 1, sizeof *v);
    j->strag = calloc(used ? used : 1, sizeof *j->strag);
    if (!v || !j->strag) {
        free(v);
        return;
    }
    for (size_t i = 0; i < used; i++) {
        const rank_in *r = &j->r[i];
        v[i] = (job_rank_avg){.steps = r->steps,
                              .total_us = job_avg(r->sum_total, r->steps),
                              .interval_us = job_avg(r->sum_interval, r->steps),
                              .compute_us = job_avg(r->sum_compute, r->steps),
                              .wait_us = job_avg(r->sum_wait, r->steps),
                              .tail_us = job_avg(r->sum_tail, r->steps)};
    }
    j->nstrag = job_stragglers(v, used, j->strag);
    free(v);
}

/* ---- The cluster advisor ------------------------------------------------------------------ */

const char *job_cause_text(const char *cause)
{
    if (!strcmp(cause, "data"))
        return "its step interval is longer: it waits for data (its input pipeline or "
               "DataLoader is slower)";
    if (!strcmp(cause, "tail"))
        return "its step tail is longer: work after the backward pass (optimizer, logging, "
               "checkpoints) takes longer on it";
    return "its computation is longer: its operators take longer (a slower device, more work, "
           "or CPU contention)";
}

static int by_weight(const void *a, const void *b)
{
    const job_advice *x = a, *y = b;
    return (x->weight < y->weight) - (x->weight > y->weight);
}

/* The job's suggestions, most important first: each straggler (what to look at on that rank),
 * communication that every rank waits for (no straggler to blame), and the ranks that could not
 * be merged. */
size_t job_advise(const job_report *j, size_t used, job_advice *adv)
{
    size_t n = 0;
    double steps = 0, waits = 0;
    for (size_t i = 0; i < used; i++) {
        steps += job_avg(j->r[i].sum_total, j->r[i].steps);
        waits += job_avg(j->r[i].sum_wait, j->r[i].steps);
    }
    double step = used ? steps / (double)used : 0, wait = used ? waits / (double)used : 0;
    for (size_t k = 0; k < j->nstrag && n < MAX_JOB_ADVICE; k++) {
        const job_straggler *g = &j->strag[k];
        const rank_in *r = &j->r[g->idx];
        job_advice *a = &adv[n++];
        a->kind = "straggler";
        a->weight = step > 0 ? fmin(1, g->excess_us / step) : 0;
        snprintf(a->title, sizeof a->title,
                 "Rank %ld is the straggler (%s): the others wait for it", r->rank, g->cause);
        const char *what =
            !strcmp(g->cause, "data")
                ? "its input arrives late: give its DataLoader more workers or prefetching, check "
                  "its host's disk and CPU (termsight analyse its run folder: data queues and CPU)"
            : !strcmp(g->cause, "tail")
                ? "it spends longer after the backward pass: look for rank-specific work there "
                  "(logging, checkpoints, evaluation on one rank) and move or spread it"
                : "its operators take longer: compare its operator table with another rank's "
                  "(a slower or busier device, CPU contention on its host, uneven work)";
        snprintf(a->text, sizeof a->text,
                 "Rank %ld (%s, pid %ld) works %.3f ms more per step than the typical rank, and "
                 "the others wait %.3f ms per step for it in communication: %s.",
                 r->rank, r->host, r->pid, g->excess_us / 1000, g->others_wait_us / 1000, what);
    }
    if (!j->nstrag && used >= 2 && step > 0 && wait > 0.2 * step && n < MAX_JOB_ADVICE) {
        job_advice *a = &adv[n++];
        a->kind = "communication";
        a->weight = wait / step;
        snprintf(a->title, sizeof a->title,
                 "Every rank waits in communication (%.0f %% of the step), none is a straggler",
                 100 * wait / step);
        snprintf(a->text, sizeof a->text,
                 "The ranks are balanced, yet each waits %.3f ms of its %.3f ms step with "
                 "communication in flight and nothing computing: the collectives themselves are "
                 "slow. Overlap them with computation (DDP buckets: bucket_cap_mb, "
                 "gradient_as_bucket_view), send less (mixed precision, gradient compression "
                 "hooks), or check the network between the hosts.",
                 wait / 1000, step / 1000);
    }
    if (j->nwarn && n < MAX_JOB_ADVICE) {
        job_advice *a = &adv[n++];
        a->kind = "incomplete";
        a->weight = 0;
        snprintf(a->title, sizeof a->title, "The job report is incomplete: %zu warning%s",
                 j->nwarn + j->warn_dropped, j->nwarn + j->warn_dropped == 1 ? "" : "s");
        snprintf(a->text, sizeof a->text,
                 "Ranks were left out or merged from partial data (see the warnings); a "
                 "straggler among the missing ranks cannot be seen.");
    }
    qsort(adv, n, sizeof *adv, by_weight);
    return n;
}

void job_report_free(job_report *j)
{
    if (!j)
        return;
    for (size_t i = 0; i < j->n; i++) {
        free(j->r[i].folder);
        free(j->r[i].spans);
    }
    free(j->r);
    for (size_t i = 0; i < j->nwarn; i++)
        free(j->warn[i]);
    free(j->warn);
    free(j->strag);
    free(j->folder);
    free(j->dir);
    free(j);
}

size_t job_report_warnings(const job_report *j, const char *const **lines)
{
    *lines = (const char *const *)j->warn;
    return j->nwarn;
}

const char *job_report_dir(const job_report *j)
{
    return j->dir;
}

/* The job's run folders and their summaries, the ranks chosen: 0 with *used the ranks merged,
 * or -1 with cause. */
static int load_ranks(job_report *j, const char *job_folder, size_t *used, char **cause)
{
    char **folders;
    int n = job_rank_folders(j->folder, &folders, cause);
    if (n < 0)
        return -1;
    if (n == 0)
        return cause_set(cause, "%s holds no run folder (folders with recording/ in them)",
                         job_folder);
    j->r = calloc((size_t)n, sizeof *j->r);
    if (!j->r) {
        job_folders_free(folders, n);
        return cause_set(cause, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        rank_in *r = &j->r[j->n++];
        r->folder = folders[i];
        char why[512];
        errno = 0;
        r->use = job_load_summary(r, why, sizeof why) == 0;
        if (!r->use)
            job_warn(j, "%s: %s: left out", job_base_name(r->folder), why);
    }
    free(folders);
    job_choose_ranks(j);
    *used = 0;
    while (*used < j->n && j->r[*used].use)
        (*used)++;
    if (!*used)
        return cause_set(cause,
                         "%s: no rank of a job could be used (each run folder needs its "
                         "report, made by termsight analyse RUN_FOLDER, and a recorded "
                         "job and rank)",
                         job_folder);
    return 0;
}

/* Warnings on what the steps merged say of the ranks: unfinished, unequal, unaligned, without
 * communication. */
static void warn_steps(job_report *j, size_t used, const merge *m, int no_wait)
{
    uint64_t min_steps = UINT64_MAX, max_steps = 0;
    for (size_t i = 0; i < used; i++) {
        if (j->r[i].steps < min_steps)
            min_steps = j->r[i].steps;
        if (j->r[i].steps > max_steps)
            max_steps = j->r[i].steps;
    }
    job_warn_unfinished(j, used);
    if (min_steps != max_steps)
        job_warn(j,
                 "the ranks recorded different numbers of steps (%" PRIu64 " to %" PRIu64
                 "): steps are aligned by their numbers",
                 min_steps, max_steps);
    if (m->unaligned)
        job_warn(j,
                 "%" PRIu64 " step rows past the first %u step numbers are not aligned (their "
                 "steps are in job_step_trace.csv)",
                 m->unaligned, MAX_ALIGNED_STEPS);
    j->no_wait = used > 1 ? no_wait : 0;
    if (j->no_wait)
        job_warn(j,
                 "%d rank%s of the job recorded no communication (its collectives were not "
                 "instrumented): the split cannot see %s waits for the others, taken as 0, and "
                 "the straggler verdict is unreliable",
                 no_wait, no_wait == 1 ? "" : "s", no_wait == 1 ? "its" : "their");
}

/* Each rank's step_trace.csv into job_step_trace.csv and the per-step aggregates (written as
 * job_steps.csv), then the stragglers and ranks.csv. */
static void merge_steps(job_report *j, report_dir *d, size_t used)
{
    merge m = {.j = j, .trace = report_dir_file(d, "job_step_trace.csv")};
    if (m.trace)
        fputs("step,rank,total_us,interval_us,fpbp_us,compute_us,comm_wait_us,tail_us,eval_us,"
              "busy_us\n",
              m.trace);
    int no_wait = 0;
    for (size_t i = 0; i < used; i++) {
        rank_in *r = &j->r[i];
        char why[512];
        if (job_load_steps(&m, r, why, sizeof why) != 0)
            job_warn(j, "rank %ld (%s): %s: its steps are not merged", r->rank,
                     job_base_name(r->folder), why);
        if (r->bytes_skipped > 0 || r->chunks_skipped > 0)
            job_warn(j,
                     "rank %ld (%s): its recording is damaged (%.0f bytes skipped in %.0f "
                     "chunks): merged from what its analysis could read",
                     r->rank, job_base_name(r->folder), r->bytes_skipped, r->chunks_skipped);
        no_wait += !r->have_wait;
    }
    if (m.trace)
        report_dir_close_file(d, m.trace, "job_step_trace.csv");
    warn_steps(j, used, &m, no_wait);
    job_write_steps_csv(j, d, &m);
    job_merge_free(&m);
    job_find_stragglers(j, used);
    job_write_ranks_csv(j, d, used);
}

int job_report_run(const char *job_folder, const job_options *o, job_report **out, char **cause)
{
    *out = NULL;
    job_options dflt;
    if (!o) {
        job_options_init(&dflt);
        o = &dflt;
    }
    job_report *j = calloc(1, sizeof *j);
    if (!j || !(j->folder = strdup(job_folder))) {
        free(j);
        return cause_set(cause, "out of memory");
    }
    size_t fl = strlen(j->folder);
    while (fl > 1 && j->folder[fl - 1] == '/')
        j->folder[--fl] = 0;
    size_t used;
    char *target = NULL;
    report_dir *d = NULL;
    if (load_ranks(j, job_folder, &used, cause) < 0)
        goto fail;
    if (o->out_dir ? !(target = strdup(o->out_dir))
                   : asprintf(&target, "%s/" REPORT_DIR, j->folder) < 0) {
        cause_set(cause, "out of memory");
        goto fail;
    }
    if (report_dir_open(target, &d, cause) < 0)
        goto fail;
    merge_steps(j, d, used);

    double mb = o->timeline_limit_mb < 0 ? REPORT_TIMELINE_LIMIT_MB : o->timeline_limit_mb;
    j->steps_first = o->steps_first;
    j->steps_last = o->steps_last;
    if (mb > 0) {
        job_write_timeline(j, d, used, (uint64_t)(mb * 1024 * 1024), o);
        job_warn_timeline_cut(j, used, mb, o);
    }
    if (j->long_lines)
        job_warn(j, "%" PRIu64 " lines of the ranks' reports longer than %u bytes were passed over",
                 j->long_lines, REPORT_MAX_LINE_BYTES);
    job_write_summary(j, d, used, o->pretty);
    if (report_dir_commit(d, cause) < 0)
        goto fail;
    j->dir = target;
    *out = j;
    return 0;
fail:
    free(target);
    job_report_free(j);
    return -1;
}
