/* Tests of the job report (analysis/job.c): the merge of ranks' reports. The ranks' reports
 * are written here as report_run writes them (summary.json, step_trace.csv, timeline.json) with
 * known step times, so that what the merge must conclude is known: which rank straggles and
 * why, the others' communication wait, the skew per step, what is left out and said. */
#define TESTUTIL_TAG "jobreport"
#include "job.h"
#include "model.h"
#include "report.h"
#include "testutil.h"
#include "cliutil.h"

#include <cJSON.h>
#include <check.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One rank's steps: every step has these parts (microseconds); jitter_pct varies each step's
 * compute by up to that share, step by step. */
typedef struct rank_spec {
    const char *job;
    int rank, world;
    int steps;
    double interval, compute, wait, tail;
    double jitter_pct;
    double start_s;    /* wall clock of the session start, seconds */
    int damaged;       /* bytes skipped in its recording */
    int no_report;     /* a run folder whose analysis never ran */
    const char *name;  /* folder name; NULL: rank<R>-host-<pid>-... */
    int parent;        /* a forked child (worker) of the spec at index parent - 1; 0: none */
    const char *ended; /* its recording recovered after it died: why (summary's events.ended) */
    int unfinished;    /* its last collection window has no stop */
} rank_spec;

/* Set by a test: rank slow_rank's step slow_step has an interval slow_us longer (slow_step 0:
 * none). */
static int slow_rank, slow_step;
static double slow_us;

/* Set by a test: the ranks made next recorded no communication (summary's steps.avg_comm_us
 * 0). */
static int ranks_without_comm;
/* Set by a test: the ranks made next have this many operator events a step in their timelines,
 * written as report_run writes them ("ts" before "pid"). */
static int timeline_ops_per_step;

static void make_rank(const char *job_dir, const rank_spec *s, int idx)
{
    char name[256];
    if (s->name)
        snprintf(name, sizeof name, "%s", s->name);
    else
        snprintf(name, sizeof name, "rank%d-host%d-%d-20261124-000000-0000000%d", s->rank,
                 s->rank / 2, 1000 + idx, idx % 10);
    char *run = path_join(job_dir, name);
    ck_assert_int_eq(mkdir(run, 0700), 0);
    char *rec = path_join(run, "recording");
    ck_assert_int_eq(mkdir(rec, 0700), 0);
    free(rec);
    if (s->no_report) {
        free(run);
        return;
    }
    char *rep = path_join(run, "report");
    ck_assert_int_eq(mkdir(rep, 0755), 0);

    cJSON *root = cJSON_CreateObject();
    if (s->job) {
        cJSON *j = cJSON_AddObjectToObject(root, "job");
        cJSON_AddStringToObject(j, "id", s->job);
        cJSON_AddStringToObject(j, "host", "h");
        cJSON_AddNumberToObject(j, "rank", s->rank);
        cJSON_AddNumberToObject(j, "local_rank", s->rank % 2);
        cJSON_AddNumberToObject(j, "world_size", s->world);
    } else {
        cJSON_AddNullToObject(root, "job");
    }
    cJSON *r = cJSON_AddObjectToObject(root, "recording");
    cJSON_AddStringToObject(r, "process", "python3");
    cJSON_AddNumberToObject(r, "pid", 1000 + idx);
    if (s->parent)
        cJSON_AddNumberToObject(r, "parent_pid", 1000 + s->parent - 1);
    else
        cJSON_AddNullToObject(r, "parent_pid");
    cJSON_AddNumberToObject(r, "start_realtime_ns", s->start_s * 1e9);
    cJSON_AddNumberToObject(r, "start_ns", 5e9);
    cJSON_AddNumberToObject(r, "bytes_skipped", s->damaged);
    cJSON_AddNumberToObject(r, "chunks_skipped", s->damaged ? 1 : 0);
    cJSON *st = cJSON_AddObjectToObject(root, "steps");
    cJSON_AddNumberToObject(st, "avg_comm_us", ranks_without_comm ? 0 : s->wait + 500);
    cJSON *t = cJSON_AddObjectToObject(root, "time");
    cJSON_AddNumberToObject(t, "origin_ns", 5e9);
    cJSON *e = cJSON_AddObjectToObject(root, "events");
    cJSON_AddNumberToObject(e, "lost", 0);
    cJSON *kinds = cJSON_AddObjectToObject(e, "by_kind");
    cJSON_AddNumberToObject(kinds, "collect_start", 1);
    cJSON_AddNumberToObject(kinds, "collect_stop", s->unfinished || s->ended ? 0 : 1);
    if (s->ended)
        cJSON_AddStringToObject(e, "ended", s->ended);
    else
        cJSON_AddNullToObject(e, "ended");
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    char *p = path_join(rep, "summary.json");
    file_write(p, text, strlen(text));
    free(p);
    free(text);

    p = path_join(rep, "step_trace.csv");
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs("step,begin_us,end_us,fp_start_us,bp_end_us,interval_us,fpbp_us,tail_us,total_us,fp_op,"
          "bp_op,source,compute_us,comm_wait_us\n",
          f);
    double at = 0;
    double *begins = calloc((size_t)s->steps + 1, sizeof *begins);
    ck_assert_ptr_nonnull(begins);
    for (int k = 1; k <= s->steps; k++) {
        double compute = s->compute * (1 + s->jitter_pct / 100 * ((k % 3) - 1));
        double fpbp = compute + s->wait;
        double interval = s->interval + (s->rank == slow_rank && k == slow_step ? slow_us : 0);
        double total = interval + fpbp + s->tail;
        fprintf(f,
                "%d,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,\"Conv2d, \"\"first\"\"\",op,auto,"
                "%.3f,%.3f\n",
                k, at, at + total, at + interval, at + interval + fpbp, interval, fpbp, s->tail,
                total, compute, s->wait);
        begins[k - 1] = at;
        at += total;
    }
    fclose(f);
    free(p);

    /* A timeline with one step event at 100 us on its own clock. */
    p = path_join(rep, "timeline.json");
    f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"traceEvents\":[\n"
          "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"python3\"}},\n"
          "{\"name\":\"step 1\",\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":100.000,\"dur\":5.000}",
          f);
    /* Each step's operators inside it, 10 us apart from 200 us into it. */
    for (int k = 0; k < s->steps * timeline_ops_per_step; k++)
        fprintf(f,
                ",\n{\"name\":\"Default/net/MatMul-op%d\",\"cat\":\"op\",\"ph\":\"X\",\"ts\":%.0f."
                "250,\"dur\":1.5,\"pid\":1,\"tid\":2,\"args\":{\"type\":\"MatMul\"}}",
                k, begins[k / timeline_ops_per_step] + 200 + 10 * (k % timeline_ops_per_step));
    free(begins);
    fputs("\n]}\n", f);
    fclose(f);
    free(p);
    free(rep);
    free(run);
}

/* The text of dir/name, malloc'd. */
static char *text_of(const char *dir, const char *name)
{
    char *p = path_join(dir, name);
    int fd = open(p, O_RDONLY);
    ck_assert_msg(fd >= 0, "no %s", p);
    size_t len;
    char *text = file_slurp(fd, &len);
    close(fd);
    free(p);
    return text;
}

static cJSON *json_of(const char *dir, const char *name)
{
    char *text = text_of(dir, name);
    cJSON *root = cJSON_Parse(text);
    free(text);
    ck_assert_ptr_nonnull(root);
    return root;
}

static cJSON *summary_of(const char *dir)
{
    return json_of(dir, "summary.json");
}

static double rank_field(const cJSON *root, int rank, const char *key)
{
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(root, "ranks"))
    {
        if (cJSON_GetObjectItem(r, "rank")->valuedouble == rank)
            return cJSON_GetObjectItem(r, key)->valuedouble;
    }
    ck_abort_msg("no rank %d", rank);
    return 0;
}

static int has_warning(const job_report *j, const char *needle)
{
    const char *const *w;
    size_t n = job_report_warnings(j, &w);
    for (size_t i = 0; i < n; i++)
        if (strstr(w[i], needle))
            return 1;
    return 0;
}

/* Builds the job folder from specs, merges with options o (NULL: the defaults), returns the
 * report (and the folder in *dir). */
static job_report *merge_specs_with(const rank_spec *specs, size_t n, const job_options *o,
                                    char **dir)
{
    *dir = tmp_make();
    char *job = path_join(*dir, "j");
    ck_assert_int_eq(mkdir(job, 0700), 0);
    for (size_t i = 0; i < n; i++)
        make_rank(job, &specs[i], (int)i);
    job_report *j = NULL;
    char *cause = NULL;
    ck_assert_msg(job_report_run(job, o, &j, &cause) == 0, "merge: %s", cause);
    free(job);
    return j;
}

static job_report *merge_specs(const rank_spec *specs, size_t n, char **dir)
{
    return merge_specs_with(specs, n, NULL, dir);
}

/* Every row of the job's job_step_trace.csv: interval + compute + comm_wait + tail + eval is
 * the step within 1 us (the split is a partition). Returns the rows. */
static int check_partition(const char *dir)
{
    char *p = path_join(dir, "job_step_trace.csv");
    FILE *f = fopen(p, "r");
    ck_assert_ptr_nonnull(f);
    char line[512];
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    ck_assert_str_eq(line, "step,rank,total_us,interval_us,fpbp_us,compute_us,comm_wait_us,"
                           "tail_us,eval_us,busy_us\n");
    int rows = 0;
    while (fgets(line, sizeof line, f)) {
        double step, rank, total, interval, fpbp, compute, wait, tail, eval, busy;
        ck_assert_int_eq(sscanf(line, "%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf", &step, &rank,
                                &total, &interval, &fpbp, &compute, &wait, &tail, &eval, &busy),
                         10);
        ck_assert_msg(fabs(interval + compute + wait + tail + eval - total) <= 1, "%s", line);
        rows++;
    }
    fclose(f);
    free(p);
    return rows;
}

/* Rank 2 waits 60 ms a step for data; ranks 0 and 1 wait as long for it in the all-reduce. */
START_TEST(straggler_waiting_for_data)
{
    rank_spec s[] = {
        {"j", 0, 3, 20, 1000, 30000, 60000, 500, 2, 100, 0, 0, NULL, 0, NULL, 0},
        {"j", 1, 3, 20, 1000, 30000, 60000, 500, 2, 100.001, 0, 0, NULL, 0, NULL, 0},
        {"j", 2, 3, 20, 61000, 30000, 200, 500, 2, 100.002, 0, 0, NULL, 0, NULL, 0},
    };
    char *dir;
    job_report *j = merge_specs(s, 3, &dir);
    cJSON *root = summary_of(job_report_dir(j));
    const cJSON *sg = cJSON_GetObjectItem(root, "stragglers");
    ck_assert_int_eq(cJSON_GetArraySize(sg), 1);
    const cJSON *g = cJSON_GetArrayItem(sg, 0);
    ck_assert_int_eq(cJSON_GetObjectItem(g, "rank")->valueint, 2);
    ck_assert_str_eq(cJSON_GetObjectItem(g, "cause")->valuestring, "data");
    ck_assert_double_eq_tol(cJSON_GetObjectItem(g, "others_comm_wait_us")->valuedouble, 60000, 1);
    ck_assert_double_eq_tol(cJSON_GetObjectItem(g, "excess_us")->valuedouble, 60000, 1);
    /* The contract's per-rank fields. */
    ck_assert_double_eq_tol(rank_field(root, 0, "avg_comm_wait_us"), 60000, 0.01);
    ck_assert_double_eq_tol(rank_field(root, 2, "avg_interval_us"), 61000, 0.01);
    ck_assert_double_eq_tol(rank_field(root, 1, "avg_compute_us"), 30000, 30000 * 0.021);
    ck_assert_double_eq(rank_field(root, 0, "steps"), 20);
    ck_assert_double_eq_tol(rank_field(root, 2, "avg_step_us"), 61000 + 30000 + 200 + 500, 700);
    ck_assert_str_eq(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "ranks"), 1), "host")
            ->valuestring,
        "h");
    /* Steps aligned: 20, each with rank 2 slowest. */
    const cJSON *st = cJSON_GetObjectItem(root, "steps");
    ck_assert_int_eq(cJSON_GetObjectItem(st, "aligned")->valueint, 20);
    ck_assert_double_eq_tol(cJSON_GetObjectItem(st, "avg_skew_us")->valuedouble, 60000, 1);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "warnings")), 0);
    ck_assert_int_eq(check_partition(job_report_dir(j)), 60);
    /* The advisor's first suggestion: the straggler, and what to look at for data. */
    const cJSON *adv = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "advice"), 0);
    ck_assert_str_eq(cJSON_GetObjectItem(adv, "kind")->valuestring, "straggler");
    ck_assert_ptr_nonnull(strstr(cJSON_GetObjectItem(adv, "text")->valuestring, "DataLoader"));
    cJSON_Delete(root);

    /* job_steps.csv: a row per step naming rank 2. */
    char *p = path_join(job_report_dir(j), "job_steps.csv");
    FILE *f = fopen(p, "r");
    ck_assert_ptr_nonnull(f);
    char line[512];
    int rows = 0;
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    while (fgets(line, sizeof line, f)) {
        int step, ranks, slowest;
        ck_assert_int_eq(sscanf(line, "%d,%d,%d,", &step, &ranks, &slowest), 3);
        ck_assert_int_eq(ranks, 3);
        ck_assert_int_eq(slowest, 2);
        rows++;
    }
    fclose(f);
    free(p);
    ck_assert_int_eq(rows, 20);
    job_report_free(j);
    tmp_remove(dir);
}
END_TEST

/* Rank 1 computes 40 % longer; the cause is its computation. */
START_TEST(straggler_computing)
{
    rank_spec s[] = {
        {"j", 0, 2, 10, 1000, 50000, 20000, 500, 0, 100, 0, 0, NULL, 0, NULL, 0},
        {"j", 1, 2, 10, 1000, 70000, 100, 500, 0, 100, 0, 0, NULL, 0, NULL, 0},
    };
    char *dir;
    job_report *j = merge_specs(s, 2, &dir);
    cJSON *root = summary_of(job_report_dir(j));
    const cJSON *sg = cJSON_GetObjectItem(root, "stragglers");
    ck_assert_int_eq(cJSON_GetArraySize(sg), 1);
    ck_assert_int_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(sg, 0), "rank")->valueint, 1);
    ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(sg, 0), "cause")->valuestring,
                     "compute");
    cJSON_Delete(root);
    job_report_free(j);
    tmp_remove(dir);
}
END_TEST

/* The same job with no communication recorded (DDP not instrumented): every rank's step looks
 * like work, so there is no verdict, and the report says why instead of "balanced". */
START_TEST(ranks_without_communication)
{
    rank_spec s[] = {
        {"j", 0, 2, 10, 1000, 90000, 0, 500, 2, 100, 0, 0, NULL, 0, NULL, 0},
        {"j", 1, 2, 10, 61000, 30000, 0, 500, 2, 100.001, 0, 0, NULL, 0, NULL, 0},
    };
    char *dir;
    ranks_without_comm = 1;
    job_report *j = merge_specs(s, 2, &dir);
    ranks_without_comm = 0;
    cJSON *root = summary_of(job_report_dir(j));
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "stragglers")), 0);
    for (int r = 0; r < 2; r++)
        ck_assert(!cJSON_IsTrue(cJSON_GetObjectItem(
            cJSON_GetArrayItem(cJSON_GetObjectItem(root, "ranks"), r), "comm_wait_measured")));
    const cJSON *w = cJSON_GetObjectItem(root, "warnings");
    ck_assert_int_eq(cJSON_GetArraySize(w), 1);
    ck_assert_ptr_nonnull(strstr(cJSON_GetArrayItem(w, 0)->valuestring,
                                 "2 ranks of the job recorded no communication"));
    cJSON_Delete(root);
    char *txt = text_of(job_report_dir(j), "report.txt");
    ck_assert_ptr_nonnull(strstr(txt, "stragglers: unknown: 2 ranks recorded no communication"));
    ck_assert_ptr_null(strstr(txt, "balanced"));
    free(txt);
    ck_assert_int_eq(check_partition(job_report_dir(j)), 20);
    job_report_free(j);
    tmp_remove(dir);
}
END_TEST

/* Four balanced ranks, a few percent apart: no straggler. */
START_TEST(balanced_ranks)
{
    rank_spec s[4];
    for (int r = 0; r < 4; r++)
        s[r] = (rank_spec){"j",
                           r,
                           4,
                           15,
                           2000 + 100 * r,
                           40000 * (1 + 0.02 * r),
                           1500 - 300 * r,
                           400,
                           5,
                           100,
                           0,
                           0,
                           NULL,
                           0,
                           NULL,
                           0};
    char *dir;
    job_report *j = merge_specs(s, 4, &dir);
    cJSON *root = summary_of(job_report_dir(j));
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "stragglers")), 0);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "advice")), 0);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "ranks")), 4);
    ck_assert_int_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "job"), "world_size")->valueint,
                     4);
    cJSON_Delete(root);
    char *txt = text_of(job_report_dir(j), "report.txt");
    ck_assert_ptr_nonnull(strstr(txt, "stragglers: none"));
    free(txt);
    job_report_free(j);
    tmp_remove(dir);
}
END_TEST

/* Balanced ranks that all wait long in communication: the collectives are slow, no rank is to
 * blame. */
START_TEST(everyone_waits)
{
    rank_spec s[3];
    for (int r = 0; r < 3; r++)
        s[r] = (rank_spec){"j", r, 3, 10, 1000, 20000, 25000, 500, 0, 100, 0, 0, NULL, 0, NULL, 0};
    char *dir;
    job_report *j = merge_specs(s, 3, &dir);
    cJSON *root = summary_of(job_report_dir(j));
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "stragglers")), 0);
    const cJSON *adv = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "advice"), 0);
    ck_assert_ptr_nonnull(adv);
    ck_assert_str_eq(cJSON_GetObjectItem(adv, "kind")->valuestring, "communication");
    ck_assert_double_eq_tol(cJSON_GetObjectItem(adv, "weight")->valuedouble,
                            25000.0 / (1000 + 20000 + 25000 + 500), 0.001);
    cJSON_Delete(root);
    job_report_free(j);
    tmp_remove(dir);
}
END_TEST

/* What cannot be used is left out, with a line each, and the rest merged. */
START_TEST(bad_ranks_left_out)
{
    rank_spec s[] = {
        {"j", 0, 5, 10, 1000, 30000, 100, 500, 0, 100, 0, 0, NULL, 0, NULL, 0},
        {"j", 1, 5, 12, 1000, 30000, 100, 500, 0, 100, 4096, 0, NULL, 0, NULL,
         0}, /* damaged, 12 steps */
        {"other", 2, 5, 10, 1000, 30000, 100, 500, 0, 100, 0, 0, NULL, 0, NULL,
         0}, /* another job */
        {"j", 3, 5, 10, 1000, 30000, 100, 500, 0, 50, 0, 0, "rank3-old-run", 0, NULL,
         0}, /* earlier run */
        {"j", 3, 5, 10, 1000, 30000, 100, 500, 0, 100, 0, 0, "rank3-new-run", 0, NULL, 0},
        {"j", 4, 5, 10, 1000, 30000, 100, 500, 0, 100, 0, 1, NULL, 0, NULL, 0}, /* never analysed */
        {NULL, 0, 0, 10, 1000, 30000, 100, 500, 0, 100, 0, 0, "python3-77-x", 0, NULL,
         0}, /* no job */
    };
    char *dir;
    job_report *j = merge_specs(s, sizeof s / sizeof s[0], &dir);
    ck_assert(has_warning(j, "rank 2 of another job (other, not j)"));
    ck_assert(has_warning(j, "rank3-old-run: a second folder of rank 3"));
    ck_assert(has_warning(j, "no report"));
    ck_assert(has_warning(j, "python3-77-x: not a rank of a job"));
    ck_assert(has_warning(j, "its recording is damaged (4096 bytes skipped"));
    ck_assert(has_warning(j, "different numbers of steps (10 to 12)"));
    ck_assert(has_warning(j, "rank 2 of 5 is missing") || has_warning(j, "ranks are missing"));
    cJSON *root = summary_of(job_report_dir(j));
    const cJSON *adv = cJSON_GetObjectItem(root, "advice");
    ck_assert_str_eq(
        cJSON_GetObjectItem(cJSON_GetArrayItem(adv, cJSON_GetArraySize(adv) - 1), "kind")
            ->valuestring,
        "incomplete");
    const cJSON *ranks = cJSON_GetObjectItem(root, "ranks");
    ck_assert_int_eq(cJSON_GetArraySize(ranks), 3); /* 0, 1, 3 (the new run) */
    ck_assert_ptr_nonnull(
        strstr(cJSON_GetObjectItem(cJSON_GetArrayItem(ranks, 2), "run_folder")->valuestring,
               "rank3-new-run"));
    cJSON_Delete(root);
    job_report_free(j);
    tmp_remove(dir);
}
END_TEST

/* A rank killed mid-run (its recording recovered from its shared memory) and one whose recording
 * ends inside its window are named: their state and last step in ranks.csv, summary.json and
 * report.txt, a warning each, and the incomplete advice. */
START_TEST(dead_ranks_named)
{
    rank_spec s[] = {
        {"j", 0, 3, 10, 1000, 30000, 100, 500, 0, 100, 0, 0, NULL, 0, NULL, 0},
        {"j", 1, 3, 7, 1000, 30000, 100, 500, 0, 100, 0, 0, NULL, 0, "killed by signal 9", 0},
        {"j", 2, 3, 9, 1000, 30000, 100, 500, 0, 100, 0, 0, NULL, 0, NULL, 1},
    };
    char *dir;
    job_report *j = merge_specs(s, sizeof s / sizeof s[0], &dir);
    ck_assert(has_warning(j, "rank 1 (pid 1001) died without closing its session (killed by "
                             "signal 9), its last step 7"));
    ck_assert(has_warning(j, "rank 2 (pid 1002) did not finish: its recording ends inside a "
                             "collection window, its last step 9"));
    ck_assert(!has_warning(j, "rank 0 (pid"));
    cJSON *root = summary_of(job_report_dir(j));
    const cJSON *ranks = cJSON_GetObjectItem(root, "ranks");
    static const char *const states[] = {"finished", "ended", "unfinished"};
    for (int i = 0; i < 3; i++) {
        const cJSON *r = cJSON_GetArrayItem(ranks, i);
        ck_assert_str_eq(cJSON_GetObjectItem(r, "state")->valuestring, states[i]);
    }
    ck_assert_int_eq((int)rank_field(root, 1, "last_step"), 7);
    ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(ranks, 1), "ended")->valuestring,
                     "killed by signal 9");
    ck_assert(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetArrayItem(ranks, 0), "ended")));
    const cJSON *adv = cJSON_GetObjectItem(root, "advice");
    ck_assert_str_eq(
        cJSON_GetObjectItem(cJSON_GetArrayItem(adv, cJSON_GetArraySize(adv) - 1), "kind")
            ->valuestring,
        "incomplete");
    cJSON_Delete(root);
    char *csv = text_of(job_report_dir(j), "ranks.csv");
    ck_assert_msg(strstr(csv, ",run_folder,state,last_step\n"), "%s", csv);
    ck_assert_msg(strstr(csv, ",ended,7\n") && strstr(csv, ",unfinished,9\n") &&
                      strstr(csv, ",finished,10\n"),
                  "%s", csv);
    free(csv);
    char *txt = text_of(job_report_dir(j), "report.txt");
    ck_assert_msg(strstr(txt, "STATE") && strstr(txt, "  ended\n"), "%s", txt);
    free(txt);
    job_report_free(j);
    tmp_remove(dir);
}
END_TEST

/* A rank's forked children (DataLoader workers) with sessions of their own are counted with
 * their rank, never merged as ranks, and warned about by no one. */
START_TEST(workers_are_no_ranks)
{
    rank_spec s[] = {
        {"j", 0, 2, 10, 1000, 30000, 100, 500, 0, 100, 0, 0, NULL, 0, NULL, 0},
        {"j", 1, 2, 10, 1000, 30000, 100, 500, 0, 100, 0, 0, NULL, 0, NULL, 0},
        {"j", 0, 2, 3, 10, 10, 0, 0, 0, 100, 0, 0, "rank0-worker-h-77-20261124-000000-00000001", 1,
         NULL, 0},
        {"j", 0, 2, 3, 10, 10, 0, 0, 0, 100, 0, 0, "rank0-worker-h-78-20261124-000000-00000002", 1,
         NULL, 0},
    };
    char *dir;
    job_report *j = merge_specs(s, 4, &dir);
    const char *const *w;
    ck_assert_uint_eq(job_report_warnings(j, &w), 0);
    cJSON *root = summary_of(job_report_dir(j));
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "ranks")), 2);
    ck_assert_double_eq(rank_field(root, 0, "workers"), 2);
    ck_assert_double_eq(rank_field(root, 1, "workers"), 0);
    cJSON_Delete(root);
    job_report_free(j);
    tmp_remove(dir);
}
END_TEST

/* No usable rank: a clear failure, nothing written. */
START_TEST(nothing_to_merge)
{
    char *dir = tmp_make();
    char *job = path_join(dir, "j");
    ck_assert_int_eq(mkdir(job, 0700), 0);
    job_report *j = NULL;
    char *cause = NULL;
    ck_assert_int_eq(job_report_run(job, NULL, &j, &cause), -1);
    ck_assert_ptr_nonnull(strstr(cause, "no run folder"));
    free(cause);
    cause = NULL;
    rank_spec s = {"j", 0, 1, 10, 1, 1, 1, 1, 0, 1, 0, 1, NULL, 0, NULL, 0};
    make_rank(job, &s, 0);
    ck_assert_int_eq(job_report_run(job, NULL, &j, &cause), -1);
    ck_assert_ptr_nonnull(strstr(cause, "no rank of a job could be used"));
    free(cause);
    char *rep = path_join(job, "report");
    ck_assert_int_ne(access(rep, F_OK), 0);
    free(rep);
    free(job);
    tmp_remove(dir);
}
END_TEST

/* One trace: each rank's processes renumbered and named after it, times on one clock. */
START_TEST(merged_timeline)
{
    rank_spec s[] = {
        {"j", 0, 2, 3, 1000, 30000, 100, 500, 0, 100.0, 0, 0, NULL, 0, NULL, 0},
        {"j", 1, 2, 3, 1000, 30000, 100, 500, 0, 100.25, 0, 0, NULL, 0, NULL,
         0}, /* started 250 ms later */
    };
    char *dir;
    job_report *j = merge_specs(s, 2, &dir);
    cJSON *root = json_of(job_report_dir(j), "timeline.json");
    const cJSON *ev;
    int names = 0, steps = 0;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(root, "traceEvents"))
    {
        int pid = cJSON_GetObjectItem(ev, "pid")->valueint;
        const char *name = cJSON_GetObjectItem(ev, "name")->valuestring;
        if (!strcmp(name, "process_name")) {
            const char *pn =
                cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "args"), "name")->valuestring;
            ck_assert_str_eq(pn, pid == 1001 ? "rank 0: python3" : "rank 1: python3");
            names++;
        } else {
            double ts = cJSON_GetObjectItem(ev, "ts")->valuedouble;
            ck_assert_double_eq_tol(ts, pid == 1001 ? 100.0 : 250100.0, 0.01);
            steps++;
        }
    }
    ck_assert_int_eq(names, 2);
    ck_assert_int_eq(steps, 2);
    cJSON_Delete(root);
    job_report_free(j);
    tmp_remove(dir);
}
END_TEST

/* 64 ranks, rank 63 late for data in every step and much later in step 15, a timeline limit far
 * below what they have: every rank is in the timeline with its share, the straggler's share
 * twice the others', its slowest step (15, late in its run) whole, what each left out counted
 * per rank and in all, and said in the warnings and report.txt. */
START_TEST(timeline_shared_by_ranks)
{
    enum { N = 64, OPS = 50 };
    rank_spec s[N];
    for (int r = 0; r < N; r++)
        s[r] = (rank_spec){.job = "j",
                           .rank = r,
                           .world = N,
                           .steps = 20,
                           .interval = r == N - 1 ? 3000 : 1000,
                           .compute = 30000,
                           .wait = 100,
                           .tail = 500,
                           .start_s = 100.0};
    timeline_ops_per_step = OPS; /* 1,000 events a rank, about 100 KB */
    slow_rank = N - 1;
    slow_step = 15;
    slow_us = 20000;
    job_options o;
    job_options_init(&o);
    o.timeline_limit_mb = 1; /* 16 KiB a rank */
    char *dir;
    job_report *j = merge_specs_with(s, N, &o, &dir);
    timeline_ops_per_step = 0;
    slow_step = 0;
    /* Rank 63's step 15 on the job's clock (every rank started at once). */
    const double step = 3000 + 30000 + 100 + 500, slow_begin = 14 * step,
                 slow_end = slow_begin + step + 20000;
    cJSON *tl = json_of(job_report_dir(j), "timeline.json");
    int events[N] = {0}, in_slow = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(tl, "traceEvents"))
    {
        int pid = cJSON_GetObjectItem(ev, "pid")->valueint;
        ck_assert_int_eq(pid % 1000, 1);
        ck_assert(pid / 1000 >= 1 && pid / 1000 <= N);
        events[pid / 1000 - 1]++;
        const cJSON *ts = cJSON_GetObjectItem(ev, "ts");
        in_slow +=
            pid / 1000 == N && ts && ts->valuedouble >= slow_begin && ts->valuedouble <= slow_end;
    }
    cJSON_Delete(tl);
    ck_assert_int_eq(in_slow, OPS); /* the straggler's slowest step whole */
    cJSON *root = summary_of(job_report_dir(j));
    double left = 0;
    for (int r = 0; r < N; r++) {
        ck_assert_msg(events[r] > 10, "rank %d: %d events", r, events[r]);
        ck_assert_double_eq(rank_field(root, r, "timeline_events"), events[r]);
        ck_assert_msg(rank_field(root, r, "timeline_left_out") > 0, "rank %d", r);
        ck_assert_double_eq(rank_field(root, r, "timeline_events") +
                                rank_field(root, r, "timeline_left_out"),
                            2 + 20 * OPS);
        left += rank_field(root, r, "timeline_left_out");
    }
    ck_assert_msg(events[N - 1] > 3 * events[0] / 2, "straggler %d, rank 0 %d", events[N - 1],
                  events[0]);
    const cJSON *t = cJSON_GetObjectItem(root, "timeline");
    ck_assert_double_eq(cJSON_GetObjectItem(t, "left_out")->valuedouble, left);
    ck_assert_double_eq(cJSON_GetObjectItem(t, "ranks")->valuedouble, N);
    ck_assert(cJSON_GetObjectItem(t, "bytes")->valuedouble <= 1024 * 1024);
    cJSON_Delete(root);
    ck_assert(has_warning(j, "the timeline limit (1 MiB, shared by 64 ranks) left out"));
    ck_assert(has_warning(j, "of 64 ranks (0, 1, 2,"));
    char *txt = text_of(job_report_dir(j), "report.txt");
    ck_assert_ptr_nonnull(strstr(txt, "the timeline limit (1 MiB, shared by 64 ranks)"));
    free(txt);
    job_report_free(j);
    tmp_remove(dir);
}
END_TEST

/* --steps 5-6: every rank is in the timeline with the events of steps 5 and 6 only (and its
 * names); the rest counted per rank as left out, the window in summary.json and the warning. */
START_TEST(timeline_step_window)
{
    enum { N = 4, OPS = 20 };
    rank_spec s[N];
    for (int r = 0; r < N; r++)
        s[r] = (rank_spec){.job = "j",
                           .rank = r,
                           .world = N,
                           .steps = 10,
                           .interval = 1000,
                           .compute = 30000,
                           .wait = 100,
                           .tail = 500,
                           .start_s = 100.0};
    timeline_ops_per_step = OPS;
    job_options o;
    job_options_init(&o);
    o.steps_first = 5;
    o.steps_last = 6;
    char *dir;
    job_report *j = merge_specs_with(s, N, &o, &dir);
    timeline_ops_per_step = 0;
    const double step = 1000 + 30000 + 100 + 500;
    cJSON *tl = json_of(job_report_dir(j), "timeline.json");
    int ops[N] = {0};
    const cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(tl, "traceEvents"))
    {
        int pid = cJSON_GetObjectItem(ev, "pid")->valueint;
        const cJSON *ts = cJSON_GetObjectItem(ev, "ts");
        if (!ts)
            continue; /* a name */
        ck_assert_msg(ts->valuedouble >= 4 * step && ts->valuedouble <= 6 * step,
                      "ts %.3f outside steps 5-6", ts->valuedouble);
        ops[pid / 1000 - 1]++;
    }
    cJSON_Delete(tl);
    cJSON *root = summary_of(job_report_dir(j));
    for (int r = 0; r < N; r++) {
        ck_assert_int_eq(ops[r], 2 * OPS);
        ck_assert_double_eq(rank_field(root, r, "timeline_events"), 1 + 2 * OPS);
        ck_assert_double_eq(rank_field(root, r, "timeline_left_out"), 1 + 8 * OPS);
    }
    const cJSON *w = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "timeline"), "steps");
    ck_assert_double_eq(cJSON_GetObjectItem(w, "first")->valuedouble, 5);
    ck_assert_double_eq(cJSON_GetObjectItem(w, "last")->valuedouble, 6);
    cJSON_Delete(root);
    ck_assert(has_warning(j, "and the step window (--steps 5-6) left out"));
    job_report_free(j);
    tmp_remove(dir);
}
END_TEST

START_TEST(job_folder_detection)
{
    char *dir = tmp_make();
    ck_assert(!job_is_folder(dir)); /* empty */
    rank_spec plain = {
        NULL, 0, 0, 1, 1, 1, 1, 1, 0, 1, 0, 1, "python3-1-20261124-000000-00000000", 0, NULL, 0};
    make_rank(dir, &plain, 0);
    ck_assert(!job_is_folder(dir)); /* an output folder of unrelated runs */
    rank_spec r = {"j", 0, 1, 1, 1, 1, 1, 1, 0, 1, 0, 1, NULL, 0, NULL, 0};
    make_rank(dir, &r, 1);
    ck_assert(job_is_folder(dir));
    char *run = path_join(dir, "python3-1-20261124-000000-00000000");
    ck_assert(!job_is_folder(run)); /* a run folder */
    free(run);
    tmp_remove(dir);
}
END_TEST

/* The rule alone, over averages as the live monitor gives them: the typical rank is the lower
 * median of the ranks with steps (a rank without steps is left out), the cause is the part that
 * grew, and the margin must pass both the share and the minimum. */
START_TEST(straggler_rule_on_averages)
{
    static const struct {
        job_rank_avg r[4];
        size_t n;
        long want; /* index of the straggler, -1: none */
        const char *cause;
    } cases[] = {
        /* Two ranks wait 30 ms for the third, which computes 30 ms more. */
        {{{10, 100000, 10000, 50000, 30000, 10000},
          {10, 100000, 10000, 50000, 30000, 10000},
          {10, 100000, 10000, 80000, 0, 10000}},
         3,
         2,
         "compute"},
        /* The slow one waits for data. */
        {{{10, 100000, 40000, 50000, 0, 10000}, {10, 100000, 10000, 50000, 30000, 10000}},
         2,
         0,
         "data"},
        /* A rank with no step yet is left out; the other two still have a verdict. */
        {{{0, 0, 0, 0, 0, 0},
          {10, 100000, 10000, 50000, 30000, 10000},
          {10, 100000, 10000, 80000, 0, 10000}},
         3,
         2,
         "compute"},
        /* Balanced: 10 % apart is under the share. */
        {{{10, 100000, 10000, 50000, 10000, 10000}, {10, 100000, 10000, 60000, 0, 10000}},
         2,
         -1,
         NULL},
        /* Past the share but under the minimum (short steps). */
        {{{10, 1000, 100, 500, 300, 100}, {10, 1000, 100, 800, 0, 100}}, 2, -1, NULL},
        /* One rank with steps: no verdict. */
        {{{10, 1000, 100, 500, 300, 100}, {0, 0, 0, 0, 0, 0}}, 2, -1, NULL},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        job_straggler out[4];
        size_t n = job_stragglers(cases[c].r, cases[c].n, out);
        if (cases[c].want < 0) {
            ck_assert_msg(n == 0, "case %zu: %zu stragglers", c, n);
            continue;
        }
        ck_assert_msg(n == 1, "case %zu: %zu stragglers", c, n);
        ck_assert_uint_eq(out[0].idx, (size_t)cases[c].want);
        ck_assert_str_eq(out[0].cause, cases[c].cause);
        ck_assert(out[0].excess_us > 29000 && out[0].excess_us < 31000);
    }
}
END_TEST

static Suite *job_report_suite(void)
{
    Suite *s = suite_create("job_report");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, straggler_waiting_for_data);
    tcase_add_test(tc, straggler_computing);
    tcase_add_test(tc, balanced_ranks);
    tcase_add_test(tc, ranks_without_communication);
    tcase_add_test(tc, everyone_waits);
    tcase_add_test(tc, bad_ranks_left_out);
    tcase_add_test(tc, dead_ranks_named);
    tcase_add_test(tc, workers_are_no_ranks);
    tcase_add_test(tc, nothing_to_merge);
    tcase_add_test(tc, merged_timeline);
    tcase_add_test(tc, timeline_shared_by_ranks);
    tcase_add_test(tc, timeline_step_window);
    tcase_add_test(tc, job_folder_detection);
    tcase_add_test(tc, straggler_rule_on_averages);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(job_report_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
