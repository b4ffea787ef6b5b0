/* termsight analyse: a recording's report folder, and a short summary on stdout.
 *
 * The work is report_run's (analysis/report.h); this file parses the command line, shows
 * progress on a terminal, prints the summary or, with --op, one op type's statistics (as
 * MindSpore's op_analyse), and maps failures to exit statuses. A job folder gets its ranks
 * analysed, several at a time on threads of this process, then the job report (analysis/job.h). */
#include "analyse_dask.h"
#include "cli.h"
#include "job.h"
#include "report.h"

#include <cJSON.h>

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void analyse_usage(FILE *out)
{
    fputs("usage: termsight analyse [options] RUN_FOLDER_OR_RECORDING\n"
          "\n"
          "Analyses a recording and writes its report folder (by default RUN_FOLDER/report),\n"
          "then prints a short summary: the run, its events, the steps and their averages,\n"
          "the top 5 op types, the data-queue verdicts, the top 3 suggestions and where the\n"
          "report is. RUN_FOLDER_OR_RECORDING is a run folder, its recording/ folder, or the\n"
          "" TS_RECORDING_FILE " file. The report folder's files are described in\n"
          "docs/report-format.md and the man page; an earlier report there is replaced whole.\n"
          "\n"
          "  -o, --output DIR        write the report folder to DIR instead\n"
          "      --op NAME           print the statistics of op type NAME and its ops instead\n"
          "                          of writing the report (case-insensitive; a unique\n"
          "                          substring will do), or of the operator or label named\n"
          "                          NAME exactly when no type is\n"
          "      --json              with --op: the same as JSON, in summary.json's shape\n"
          "                          (times in microseconds)\n"
          "      --pretty            indent the JSON files\n"
          "      --timeline-limit MB size limit of the timeline in MiB (default: the\n"
          "                          recording's option, else 500)\n"
          "      --peak-tflops X     the device's peak, for the FLOPS utilization\n"
          "      --fp-start OP       the operator that starts the forward pass\n"
          "      --bp-end OP         the operator that ends the backward pass\n"
          "      --sqlite-only       write the tables only as report.sqlite, without their\n"
          "                          CSV files (for large recordings; not for a job folder,\n"
          "                          whose report reads its ranks' CSV files)\n"
          "\n"
          "A recording cut short or damaged is analysed up to its last whole chunk, with a\n"
          "warning saying what was skipped. Exit status: 0 (also after skipping damage), 1\n"
          "when the recording is missing, empty or not a recording, or the report cannot be\n"
          "written, 2 on bad usage.\n"
          "\n"
          "termsight analyse [options] JOB_FOLDER\n"
          "\n"
          "A job folder (<output>/<job>/, holding the run folders of a job's ranks) gets the\n"
          "job report: each rank's run folder is analysed as above, several at a time, then\n"
          "their reports are merged into JOB_FOLDER/report/ (or DIR): the ranks side by side,\n"
          "the steps aligned by number with the slowest rank of each, the stragglers and their\n"
          "cause, one timeline with a process per rank. A rank that cannot be used is left out\n"
          "with a warning and the rest is merged.\n"
          "\n"
          "  -j, --jobs N            rank analyses at a time (default: the CPUs, at most 8)\n"
          "      --merge-only        merge the reports the ranks have, analysing none (when\n"
          "                          they were analysed elsewhere, e.g. on a Dask cluster)\n"
          "      --scheduler ADDR    analyse the ranks as tasks on the Dask cluster whose\n"
          "                          scheduler is at ADDR (tcp://HOST:PORT; default: the\n"
          "                          TERMSIGHT_SCHEDULER variable), then merge here; each\n"
          "                          worker runs the termsight command and must see the job\n"
          "                          folder at the same path (docs/jobs.md, \"A job on a\n"
          "                          Dask cluster\")\n"
          "      --task-timeout S    with --scheduler: seconds a rank's analysis may take on\n"
          "                          a worker (default 600)\n"
          "      --steps A-B         the job's timeline (and each rank's share of it) holds\n"
          "                          only steps A to B (step numbers, 1 <= A <= B); with\n"
          "                          --lean, a run folder's timeline\n"
          "      --lean              for a run folder: the lean report a job's rank gets (no\n"
          "                          report.html, files not synced one by one)\n"
          "      --rank R            write the full report of rank R only (its timeline and\n"
          "                          report.html, which the job's analysis leaves out) into\n"
          "                          its run folder's report/ (or DIR), as for one run\n",
          out);
}

static int analyse_bad_usage(void)
{
    fputs(
        "usage: termsight analyse [-o DIR] [--op NAME [--json]] [--pretty] [--timeline-limit MB]\n"
        "                         [--peak-tflops X] [--fp-start OP] [--bp-end OP]\n"
        "                         [--sqlite-only]\n"
        "                         RUN_FOLDER_OR_RECORDING\n"
        "       termsight analyse [-o DIR] [-j N] [--merge-only] [--pretty]\n"
        "                         [--timeline-limit MB] [--steps A-B] JOB_FOLDER\n"
        "       termsight analyse [-o DIR] [--pretty] [--timeline-limit MB] --rank R JOB_FOLDER\n",
        stderr);
    return 2;
}

enum {
    OPT_OUT = 'o',
    OPT_JOBS = 'j',
    OPT_OP = 256,
    OPT_PRETTY,
    OPT_LIMIT,
    OPT_PEAK,
    OPT_FP,
    OPT_BP,
    OPT_MERGE,
    OPT_JSON,
    OPT_SQLITE_ONLY,
    OPT_RANK,
    OPT_SCHEDULER,
    OPT_TASK_TIMEOUT,
    OPT_LEAN,
    OPT_STEPS
};

static const struct option analyse_longs[] = {
    {"output", required_argument, NULL, OPT_OUT},
    {"op", required_argument, NULL, OPT_OP},
    {"pretty", no_argument, NULL, OPT_PRETTY},
    {"timeline-limit", required_argument, NULL, OPT_LIMIT},
    {"peak-tflops", required_argument, NULL, OPT_PEAK},
    {"fp-start", required_argument, NULL, OPT_FP},
    {"bp-end", required_argument, NULL, OPT_BP},
    {"jobs", required_argument, NULL, OPT_JOBS},
    {"merge-only", no_argument, NULL, OPT_MERGE},
    {"json", no_argument, NULL, OPT_JSON},
    {"sqlite-only", no_argument, NULL, OPT_SQLITE_ONLY},
    {"rank", required_argument, NULL, OPT_RANK},
    {"scheduler", required_argument, NULL, OPT_SCHEDULER},
    {"task-timeout", required_argument, NULL, OPT_TASK_TIMEOUT},
    {"lean", no_argument, NULL, OPT_LEAN},
    {"steps", required_argument, NULL, OPT_STEPS},
    {NULL, 0, NULL, 0},
};

/* A non-negative finite number, or -1. */
static double parse_number(const char *v)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (end == v || *end || errno || !isfinite(d) || d < 0)
        return -1;
    return d;
}

static void progress(void *ctx, double fraction)
{
    int *last = ctx;
    int pct = (int)(fraction * 100);
    if (pct == *last)
        return;
    *last = pct;
    fprintf(stderr, "\ranalysing: %3d %%", pct);
    if (pct >= 100)
        fputs("\r                \r", stderr);
}

/* A name as one line of text. */
static void put_name(const analysis *a, uint32_t id)
{
    uint32_t len = 0;
    const char *s = analysis_name(a, id, &len);
    char *buf = malloc(4 * (size_t)len + 1);
    if (!buf)
        return;
    text_clean(s, len, buf, 1);
    for (char *p = buf; *p; p++) {
        if (*p == '\n' || *p == '\r' || *p == '\t')
            *p = ' ';
    }
    fputs(buf, stdout);
    free(buf);
}

static void put_stat(const op_stat *s)
{
    printf("%8" PRIu64 " %12.3f %10.3f %10.3f %10.3f %6.1f  ", s->count, (double)s->total_ns / 1e6,
           s->count ? (double)s->total_ns / (double)s->count / 1e6 : 0.0, (double)s->min_ns / 1e6,
           (double)s->max_ns / 1e6, 100 * s->share);
}

/* One type's totals and its ops as JSON: {"type": {...}, "ops": [...]}, the rows in the shape
 * summary.json gives them (report_json.c). */
/* Prints o indented and frees it: 0, or 1 when out of memory (o NULL included). */
static int print_json(cJSON *o)
{
    char *text = o ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    if (!text)
        return 1;
    puts(text);
    cJSON_free(text);
    return 0;
}

static int print_op_json(const analysis *a, const op_stat *ts)
{
    cJSON *o = cJSON_CreateObject();
    if (o) {
        cJSON_AddItemToObject(o, "type", report_json_op(a, ts, 1));
        cJSON_AddItemToObject(o, "ops", report_json_ops(a, 0, ts->name, 0));
    }
    return print_json(o);
}

/* A row's totals, the line under its name. */
static void print_totals(const op_stat *s)
{
    printf("\ncount %" PRIu64 ", total %.3f ms, average %.3f ms, min %.3f ms, max %.3f ms, "
           "%.1f %% of all ops' self time\n",
           s->count, (double)s->total_ns / 1e6,
           s->count ? (double)s->total_ns / (double)s->count / 1e6 : 0.0, (double)s->min_ns / 1e6,
           (double)s->max_ns / 1e6, 100 * s->share);
}

/* The operator (or label: a record_function's, a range's) named exactly name, as --op names one
 * that is no type: its totals and its type, as text or JSON ({"op": {...}}). 1 when there is
 * one, 0 when none is so named. */
static int print_named_op(const analysis *a, const char *name, int json)
{
    op_query q = {.by_type = 0, .sort = OP_SORT_TOTAL, .search = name};
    op_stat *rows = NULL;
    size_t n = analysis_ops(a, &q, &rows);
    const op_stat *hit = NULL;
    for (size_t i = 0; i < n && !hit; i++) {
        uint32_t len = 0;
        const char *s = analysis_name(a, rows[i].name, &len);
        if (len == strlen(name) && !memcmp(s, name, len))
            hit = &rows[i];
    }
    if (hit && json) {
        cJSON *o = cJSON_CreateObject();
        if (o)
            cJSON_AddItemToObject(o, "op", report_json_op(a, hit, 0));
        print_json(o);
    } else if (hit) {
        fputs("op: ", stdout);
        put_name(a, hit->name);
        fputs("\ntype: ", stdout);
        put_name(a, hit->type);
        print_totals(hit);
    }
    free(rows);
    return hit != NULL;
}

/* MindSpore's op_analyse: one type's totals, then its ops (as text, or as JSON); an operator or
 * label so named when no type is. */
static int print_op(const analysis *a, const char *name, int json)
{
    uint32_t type = analysis_op_type(a, name);
    if (!type && print_named_op(a, name, json))
        return 0;
    if (!type) {
        op_query q = {.by_type = 1, .sort = OP_SORT_TOTAL, .search = name};
        op_stat *rows = NULL;
        size_t n = analysis_ops(a, &q, &rows);
        if (n == 1) {
            type = rows[0].name;
        } else {
            cli_error("analyse: no op type or operator named '%s' in this recording%s", name,
                      n ? "; it matches:" : "");
            for (size_t i = 0; i < n && i < 20; i++) {
                uint32_t len = 0;
                const char *s = analysis_name(a, rows[i].name, &len);
                char *buf = malloc(4 * (size_t)len + 1);
                if (buf) {
                    text_clean(s, len, buf, 1);
                    fprintf(stderr, "  %s\n", buf);
                    free(buf);
                }
            }
            free(rows);
            return 1;
        }
        free(rows);
    }
    op_query tq = {.by_type = 1, .sort = OP_SORT_TOTAL};
    op_stat *types = NULL, *ops = NULL;
    size_t nt = analysis_ops(a, &tq, &types);
    const op_stat *ts = NULL;
    for (size_t i = 0; i < nt; i++)
        if (types[i].name == type)
            ts = &types[i];
    if (!ts) {
        cli_error("analyse: op type '%s' has no operator in this recording", name);
        free(types);
        return 1;
    }
    if (json) {
        int rc = print_op_json(a, ts);
        free(types);
        return rc;
    }
    fputs("op type: ", stdout);
    put_name(a, type);
    print_totals(ts);
    op_query oq = {.by_type = 0, .sort = OP_SORT_TOTAL, .type = type};
    size_t no = analysis_ops(a, &oq, &ops);
    printf("\n%8s %12s %10s %10s %10s %6s  %s\n", "count", "total_ms", "avg_ms", "min_ms", "max_ms",
           "share", "op");
    for (size_t i = 0; i < no; i++) {
        put_stat(&ops[i]);
        put_name(a, ops[i].name);
        putchar('\n');
    }
    free(types);
    free(ops);
    return 0;
}

/* ---- A job folder ------------------------------------------------------------------------ */

typedef struct rank_work {
    char **folders;
    int n;
    _Atomic int next;
    const report_options *opt;
    char **causes; /* per folder: why its analysis failed, or NULL */
} rank_work;

static void *rank_worker(void *arg)
{
    rank_work *w = arg;
    for (int i; (i = atomic_fetch_add(&w->next, 1)) < w->n;) {
        char *cause = NULL;
        if (report_write(w->folders[i], w->opt, &cause) < 0)
            w->causes[i] = cause ? cause : strdup("analyse failed");
        else
            free(cause);
    }
    return NULL;
}

/* Each rank's analysis, `threads` at a time; a failure is said and the rest goes on. */
static void analyse_ranks(char **folders, int n, const report_options *opt, int threads)
{
    rank_work w = {
        .folders = folders, .n = n, .opt = opt, .causes = calloc((size_t)n, sizeof(char *))};
    if (!w.causes)
        return;
    if (threads > n)
        threads = n;
    pthread_t t[64];
    int started = 0;
    for (; started < threads - 1 && started < 64; started++)
        if (pthread_create(&t[started], NULL, rank_worker, &w) != 0)
            break;
    rank_worker(&w);
    for (int i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < n; i++) {
        if (w.causes[i]) {
            /* A folder's name is any bytes: said as clean text, as the reports say it. */
            char *folder = report_clean_dup(folders[i]), *cause = report_clean_dup(w.causes[i]);
            cli_error("analyse: %s: %s", folder ? folder : "?", cause ? cause : "?");
            free(folder);
            free(cause);
        }
        free(w.causes[i]);
    }
    free(w.causes);
}

/* The rank analyses as tasks on a Dask cluster: `termsight analyse --lean` with the options
 * that shape a rank's report. 0, or -1 when the cluster could not be used. */
static int analyse_ranks_dask(char **folders, int n, const report_options *o, const char *sched,
                              double timeout_s)
{
    char share[32], steps[48];
    snprintf(share, sizeof share, "%.6f", o->timeline_limit_mb);
    snprintf(steps, sizeof steps, "%" PRIu64 "-%" PRIu64, o->steps_first, o->steps_last);
    char *opts[12];
    int k = 0;
    opts[k++] = "--lean";
    opts[k++] = "--timeline-limit";
    opts[k++] = share;
    if (o->pretty)
        opts[k++] = "--pretty";
    if (o->steps_last) {
        opts[k++] = "--steps";
        opts[k++] = steps;
    }
    if (o->fp_start_op) {
        opts[k++] = "--fp-start";
        opts[k++] = (char *)o->fp_start_op;
    }
    if (o->bp_end_op) {
        opts[k++] = "--bp-end";
        opts[k++] = (char *)o->bp_end_op;
    }
    opts[k] = NULL;
    /* The workers see the folders at the same paths, from their own working folders. */
    char **abs = calloc((size_t)n, sizeof *abs);
    if (!abs) {
        cli_error("analyse: out of memory");
        return -1;
    }
    for (int i = 0; i < n; i++)
        abs[i] = realpath(folders[i], NULL);
    for (int i = 0; i < n; i++)
        if (!abs[i])
            abs[i] = strdup(folders[i]);
    int rc = analyse_dask_ranks(sched, timeout_s > 0 ? timeout_s : 600, abs, n, opts);
    job_folders_free(abs, n);
    return rc;
}

static int analyse_job(const char *path, const report_options *o, int threads, int merge_only,
                       const char *sched, double timeout_s)
{
    char **folders;
    char *cause = NULL;
    int n = job_rank_folders(path, &folders, &cause);
    if (n <= 0) {
        cli_error("analyse: %s", cause ? cause : "no run folders");
        free(cause);
        return 1;
    }
    if (!merge_only) {
        report_options rank_opt = *o;
        rank_opt.out_dir = NULL; /* each rank's own report/ */
        rank_opt.progress = NULL;
        /* Lean: what the merge reads, each rank's timeline cut to its share of the job's. */
        rank_opt.lean = 1;
        rank_opt.timeline_limit_mb = job_timeline_share_mb(o->timeline_limit_mb, n);
        if (sched && analyse_ranks_dask(folders, n, &rank_opt, sched, timeout_s) < 0) {
            job_folders_free(folders, n);
            return 1;
        }
        if (!sched) {
            /* Each rank's analysis allocates and frees the same few tens of MiB: kept in the
             * threads' heaps for the next rank rather than given back to the system and faulted
             * in again (a quarter of a job's CPU time, bench/RESULTS.md). */
            mallopt(M_MMAP_THRESHOLD, 64 << 20);
            mallopt(M_TRIM_THRESHOLD, 256 << 20);
            analyse_ranks(folders, n, &rank_opt, threads);
        }
    }
    job_folders_free(folders, n);
    job_options jo;
    job_options_init(&jo);
    jo.out_dir = o->out_dir;
    jo.pretty = o->pretty;
    jo.timeline_limit_mb = o->timeline_limit_mb;
    jo.steps_first = o->steps_first;
    jo.steps_last = o->steps_last;
    job_report *j = NULL;
    if (job_report_run(path, &jo, &j, &cause) < 0) {
        cli_error("analyse: %s", cause ? cause : "cannot merge the job's reports");
        free(cause);
        return 1;
    }
    job_report_print(j, stdout);
    job_report_free(j);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error("analyse: cannot write the output: %s", strerror(errno));
        return 1;
    }
    return 0;
}

/* What the command line asks for. */
typedef struct analyse_opts {
    report_options report;
    const char *path, *op;
    int threads, merge_only, rank_only, json;
    long rank;             /* --rank: -1 when not given */
    const char *scheduler; /* --scheduler, else TERMSIGHT_SCHEDULER; NULL: none */
    double task_timeout;   /* --task-timeout; 0: the default */
} analyse_opts;

/* "A-B" (or "A": one step), whole step numbers 1 <= A <= B: 0, or -1. */
static int parse_steps(const char *v, uint64_t *first, uint64_t *last)
{
    char *end;
    if (*v < '0' || *v > '9')
        return -1;
    errno = 0;
    unsigned long long a = strtoull(v, &end, 10), b = a;
    if (*end == '-') {
        const char *bs = end + 1;
        if (*bs < '0' || *bs > '9')
            return -1;
        b = strtoull(bs, &end, 10);
    }
    if (*end || errno || a < 1 || b < a)
        return -1;
    *first = a;
    *last = b;
    return 0;
}

/* Parses and checks argv into a: 0, or 2 after saying what is wrong. */
static int analyse_parse(int argc, char **argv, analyse_opts *a)
{
    memset(a, 0, sizeof *a);
    report_options_init(&a->report);
    a->rank = -1;
    report_options *o = &a->report;
    int c, first = 1;
    while ((c = cli_getopt("analyse", argc, argv, "o:j:", analyse_longs, 0, &first)) != -1) {
        double d;
        const char *v = optarg;
        switch (c) {
        case OPT_OUT:
            if (!*v) {
                cli_error("analyse: -o needs a folder");
                return analyse_bad_usage();
            }
            o->out_dir = v;
            break;
        case OPT_OP:
            a->op = v;
            break;
        case OPT_PRETTY:
            o->pretty = 1;
            break;
        case OPT_LIMIT:
            if ((d = parse_number(v)) < 0) {
                cli_error("analyse: --timeline-limit needs a size in MiB, not '%s'", v);
                return analyse_bad_usage();
            }
            o->timeline_limit_mb = d;
            break;
        case OPT_PEAK:
            if ((d = parse_number(v)) <= 0) {
                cli_error("analyse: --peak-tflops needs a positive number, not '%s'", v);
                return analyse_bad_usage();
            }
            o->peak_flops = d * 1e12;
            break;
        case OPT_FP:
            o->fp_start_op = v;
            a->rank_only = 1;
            break;
        case OPT_JOBS:
            if ((d = parse_number(v)) < 1 || d > 64 || d != floor(d)) {
                cli_error("analyse: --jobs needs a whole number from 1 to 64, not '%s'", v);
                return analyse_bad_usage();
            }
            a->threads = (int)d;
            break;
        case OPT_MERGE:
            a->merge_only = 1;
            break;
        case OPT_JSON:
            a->json = 1;
            break;
        case OPT_SQLITE_ONLY:
            o->sqlite_only = 1;
            break;
        case OPT_RANK:
            if ((d = parse_number(v)) < 0 || d > INT32_MAX || d != floor(d)) {
                cli_error("analyse: --rank needs a rank number, not '%s'", v);
                return analyse_bad_usage();
            }
            a->rank = (long)d;
            break;
        case OPT_SCHEDULER:
            if (!*v) {
                cli_error("analyse: --scheduler needs an address (tcp://HOST:PORT)");
                return analyse_bad_usage();
            }
            a->scheduler = v;
            break;
        case OPT_TASK_TIMEOUT:
            if ((d = parse_number(v)) <= 0) {
                cli_error("analyse: --task-timeout needs a positive number of seconds, not '%s'",
                          v);
                return analyse_bad_usage();
            }
            a->task_timeout = d;
            break;
        case OPT_LEAN:
            o->lean = 1;
            break;
        case OPT_STEPS:
            if (parse_steps(v, &o->steps_first, &o->steps_last) < 0) {
                cli_error("analyse: --steps needs A-B, step numbers with 1 <= A <= B, not '%s'", v);
                return analyse_bad_usage();
            }
            break;
        case OPT_BP:
            o->bp_end_op = v;
            a->rank_only = 1;
            break;
        default:
            return analyse_bad_usage();
        }
    }
    if (optind < argc)
        a->path = argv[optind];
    if (optind + 1 < argc) {
        cli_error("analyse: one recording at a time ('%s', then '%s')", a->path, argv[optind + 1]);
        return analyse_bad_usage();
    }
    if (!a->path) {
        cli_error("analyse: which recording?");
        return analyse_bad_usage();
    }
    if (a->json && !a->op) {
        cli_error("analyse: --json goes with --op (the report folder has summary.json)");
        return analyse_bad_usage();
    }
    if (a->op && o->out_dir) {
        cli_error("analyse: --op prints and writes nothing, so -o has no use with it");
        return analyse_bad_usage();
    }
    if (a->op)
        o->write = 0;
    return 0;
}

/* ---- A folder that holds run folders --------------------------------------------------- */

typedef struct found_run {
    char name[256];
    int job; /* a job folder, else a run folder */
    time_t when;
} found_run;

static int newest_first(const void *a, const void *b)
{
    const found_run *x = a, *y = b;
    return x->when < y->when ? 1 : x->when > y->when ? -1 : strcmp(x->name, y->name);
}

/* What to analyse in path when it is no run folder itself (an output folder): its run folders
 * and job folders, the newest first, as commands to copy. Says nothing when it holds none. */
/* Appends one entry to the list (grown as needed). Returns 0, or -1 without memory. */
static int found_add(found_run **list, size_t *n, size_t *cap, const char *name, int job,
                     time_t when)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 16;
        found_run *grown = realloc(*list, c * sizeof *grown);
        if (!grown)
            return -1;
        *list = grown;
        *cap = c;
    }
    snprintf((*list)[*n].name, sizeof(*list)[*n].name, "%s", name);
    (*list)[*n].job = job;
    (*list)[*n].when = when;
    (*n)++;
    return 0;
}

static void suggest_runs(const char *path)
{
    found_run *list = NULL;
    size_t n = 0, cap = 0;
    /* The run folders under it, as a job's ranks are found (job.c), each by when it last
     * recorded. */
    char **folders = NULL;
    int nfolders = job_rank_folders(path, &folders, NULL);
    for (int i = 0; i < nfolders; i++) {
        char file[4200];
        snprintf(file, sizeof file, "%s/%s/%s", folders[i], TS_RECORDING_DIR, TS_RECORDING_FILE);
        struct stat st;
        const char *name = strrchr(folders[i], '/') + 1;
        if (strlen(name) < sizeof list->name &&
            (stat(file, &st) == 0 || stat(folders[i], &st) == 0) &&
            found_add(&list, &n, &cap, name, 0, st.st_mtime) != 0)
            break;
    }
    job_folders_free(folders, nfolders > 0 ? nfolders : 0);
    /* And the job folders. */
    DIR *d = opendir(path);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof list->name)
            continue;
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        struct stat st;
        if (job_is_folder(sub) && stat(sub, &st) == 0 &&
            found_add(&list, &n, &cap, e->d_name, 1, st.st_mtime) != 0)
            break;
    }
    if (d)
        closedir(d);
    if (n) {
        qsort(list, n, sizeof *list, newest_first);
        size_t runs = 0;
        for (size_t i = 0; i < n; i++)
            runs += !list[i].job;
        fprintf(stderr,
                "%s holds %zu run folder%s and %zu job folder%s; analyse one of them (the "
                "newest first):\n",
                path, runs, runs == 1 ? "" : "s", n - runs, n - runs == 1 ? "" : "s");
        const char *sep = path[0] && path[strlen(path) - 1] == '/' ? "" : "/";
        for (size_t i = 0; i < n && i < 10; i++) {
            char when[32] = "";
            struct tm tm;
            if (localtime_r(&list[i].when, &tm))
                strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm);
            fprintf(stderr, "  termsight analyse %s%s%s   (%s, %s)\n", path, sep, list[i].name,
                    list[i].job ? "job" : "run", when);
        }
        if (n > 10)
            fprintf(stderr, "  ... and %zu older\n", n - 10);
    }
    free(list);
}

/* The run folder of rank `rank` in a job folder (malloc'd; of several, the one recorded last),
 * or NULL after saying why. */
static char *rank_folder(const char *job, long rank)
{
    char **folders = NULL, *cause = NULL, *best = NULL;
    int n = job_rank_folders(job, &folders, &cause);
    if (n < 0) {
        cli_error("analyse: %s", cause ? cause : "cannot read the job folder");
        free(cause);
        return NULL;
    }
    time_t newest = 0;
    for (int i = 0; i < n; i++) {
        const char *b = strrchr(folders[i], '/') + 1;
        char *end;
        if (strncmp(b, "rank", 4) || b[4] < '0' || b[4] > '9' || strtol(b + 4, &end, 10) != rank ||
            *end != '-')
            continue;
        char file[4200];
        snprintf(file, sizeof file, "%.4000s/%s/%s", folders[i], TS_RECORDING_DIR,
                 TS_RECORDING_FILE);
        struct stat st;
        time_t when = stat(file, &st) == 0 ? st.st_mtime : 0;
        if (!best || when >= newest) {
            free(best);
            best = strdup(folders[i]);
            newest = when;
        }
    }
    job_folders_free(folders, n);
    if (!best)
        cli_error("analyse: %s holds no run folder of rank %ld (rank%ld-...)", job, rank, rank);
    return best;
}

static int analyse_one(const char *path, report_options o, const char *op, int json);

/* Analyses a->path (a run folder, a recording or a job folder) as a asks. */
static int analyse_exec(const analyse_opts *a)
{
    report_options o = a->report;
    const char *path = a->path, *op = a->op;
    int threads = a->threads;
    if (a->rank >= 0 && (!job_is_folder(path) || a->merge_only || threads)) {
        cli_error("analyse: --rank is for a job folder, without --merge-only or --jobs");
        return analyse_bad_usage();
    }
    if (o.steps_last && (a->rank >= 0 || (!job_is_folder(path) && !o.lean))) {
        cli_error("analyse: --steps is for a job folder's timeline (or a run folder's with "
                  "--lean), not for a full report");
        return analyse_bad_usage();
    }
    if (a->rank >= 0) {
        char *folder = rank_folder(path, a->rank);
        if (!folder)
            return 1;
        int rc = analyse_one(folder, o, op, a->json);
        free(folder);
        return rc;
    }
    if (job_is_folder(path)) {
        if (op || o.peak_flops > 0) {
            cli_error("analyse: %s is a job folder: --op and --peak-tflops are for one run "
                      "folder (analyse a rank's folder for them)",
                      path);
            return analyse_bad_usage();
        }
        if (o.sqlite_only) {
            cli_error("analyse: %s is a job folder: --sqlite-only is for one run folder (the "
                      "job report reads its ranks' CSV files; it has report.sqlite too)",
                      path);
            return analyse_bad_usage();
        }
        if (a->merge_only && a->rank_only) {
            cli_error("analyse: --merge-only analyses no rank, so --fp-start and --bp-end have "
                      "no use with it");
            return analyse_bad_usage();
        }
        if (!threads) {
            long cpus = sysconf(_SC_NPROCESSORS_ONLN);
            threads = cpus < 1 ? 1 : cpus > 8 ? 8 : (int)cpus;
        }
        const char *sched = a->scheduler ? a->scheduler : getenv("TERMSIGHT_SCHEDULER");
        if (sched && !*sched)
            sched = NULL;
        if (a->scheduler && (a->merge_only || a->threads)) {
            cli_error("analyse: --scheduler analyses the ranks on the cluster: no use with "
                      "--merge-only or --jobs");
            return analyse_bad_usage();
        }
        return analyse_job(path, &o, threads, a->merge_only, sched, a->task_timeout);
    }
    if (threads || a->merge_only || a->scheduler || a->task_timeout > 0) {
        cli_error("analyse: --jobs, --merge-only, --scheduler and --task-timeout are for a job "
                  "folder, and %s is none",
                  path);
        return analyse_bad_usage();
    }
    return analyse_one(path, o, op, a->json);
}

/* One run folder or recording: its report folder, or with op that op's statistics. */
static int analyse_one(const char *path, report_options o, const char *op, int json)
{
    int last = -1;
    if (isatty(STDERR_FILENO)) {
        o.progress = progress;
        o.progress_ctx = &last;
    }

    report *r = NULL;
    char *cause = NULL;
    if (report_run(path, &o, &r, &cause) < 0) {
        if (last >= 0)
            fputs("\r                \r", stderr);
        cli_error("%s", cause ? cause : "analyse failed");
        free(cause);
        suggest_runs(path);
        return 1;
    }
    const report_info *info = report_info_of(r);
    int rc = 0;
    if (op)
        rc = print_op(report_analysis(r), op, json);
    else
        report_print(r, stdout, 1);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error("analyse: cannot write the output: %s", strerror(errno));
        rc = 1;
    }
    if (info->skipped_bytes || info->bad_chunks)
        cli_error("warning: %s: %" PRIu64 " bytes skipped in %" PRIu64
                  " damaged chunks; the rest was analysed (%" PRIu64 " events recovered)",
                  path, info->skipped_bytes, info->bad_chunks, info->events);
    if (info->grown_bytes)
        cli_error("warning: %s: the recording was still being written: read its first %" PRIu64
                  " bytes, its size when the analysis began (%" PRIu64 " more by its end)",
                  path, info->read_bytes, info->grown_bytes);
    report_free(r);
    return rc;
}

static int analyse_run(int argc, char **argv, int check)
{
    analyse_opts a;
    int rc = analyse_parse(argc, argv, &a);
    if (rc || check) /* check: parsed and checked, all the option-parsing fuzz target asks for */
        return rc;
    return analyse_exec(&a);
}

const cli_command cli_cmd_analyse = {
    .name = "analyse",
    .summary = "write a recording's report folder and print a summary",
    .run = analyse_run,
    .usage = analyse_usage,
};
