/* termsight diff: two runs or two jobs compared from their reports, with the noise of each
 * change (analysis/diff.h). This file parses the command line, writes the reports that are
 * missing (report_write, as termsight analyse does), prints the comparison and maps the result to
 * an exit status. */
#include "cli.h"
#include "diff.h"
#include "job.h"
#include "report.h"

#include <cJSON.h>

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void diff_usage(FILE *out)
{
    fputs("usage: termsight diff [options] A B\n"
          "\n"
          "Compares two run folders, or two job folders, from their reports: for each phase of\n"
          "the step (interval, compute, comm_wait, tail, eval) and the whole step, each of the\n"
          "largest op types and operators and, for jobs, each rank, the median time per step\n"
          "in A and in B, the change in percent with a bootstrap interval, the Mann-Whitney\n"
          "p-value (Holm-corrected over every row) and a verdict: slower, faster or no\n"
          "significant change. A change is significant only when its corrected p-value is\n"
          "below --alpha and it is at least --threshold percent, so two runs of one program\n"
          "show none. A run folder (or a rank of a job) that has a recording but no report is\n"
          "analysed first, as termsight analyse would.\n"
          "\n"
          "  --json              print the comparison as JSON\n"
          "  --html FILE         also write it as one HTML page that stands alone\n"
          "  --fail-above PCT    exit 1 when a phase or the step got slower by more than PCT\n"
          "                      percent, significantly (for CI)\n"
          "  --alpha A           family-wise significance level (default 0.01)\n"
          "  --threshold PCT     smallest change called significant (default 5)\n"
          "  --top N             op types and operators compared, the largest (default 20)\n"
          "  --skip-steps N      leave each run's first N steps out (warm-up; default 0)\n"
          "\n"
          "Exit status: 0, 1 on failure or when --fail-above is passed, 2 on bad usage.\n",
          out);
}

static int diff_bad_usage(void)
{
    fputs("usage: termsight diff [--json] [--html FILE] [--fail-above PCT] [--alpha A]\n"
          "                      [--threshold PCT] [--top N] [--skip-steps N] A B\n",
          stderr);
    return 2;
}

enum { OPT_JSON = 256, OPT_HTML, OPT_FAIL, OPT_ALPHA, OPT_THRESHOLD, OPT_TOP, OPT_SKIP };

static const struct option diff_longs[] = {
    {"json", no_argument, NULL, OPT_JSON},
    {"html", required_argument, NULL, OPT_HTML},
    {"fail-above", required_argument, NULL, OPT_FAIL},
    {"alpha", required_argument, NULL, OPT_ALPHA},
    {"threshold", required_argument, NULL, OPT_THRESHOLD},
    {"top", required_argument, NULL, OPT_TOP},
    {"skip-steps", required_argument, NULL, OPT_SKIP},
    {NULL, 0, NULL, 0},
};

typedef struct diff_opts {
    diff_options d;
    const char *a, *b, *html;
    double fail_above; /* < 0: not asked */
    int json;
} diff_opts;

/* v as a number within [lo, hi] (whole when whole), else NAN. */
static double parse_in(const char *v, double lo, double hi, int whole)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (end == v || *end || errno || !isfinite(d) || d < lo || d > hi || (whole && d != floor(d)))
        return NAN;
    return d;
}

static int diff_parse(int argc, char **argv, diff_opts *o)
{
    memset(o, 0, sizeof *o);
    diff_options_init(&o->d);
    o->fail_above = -1;
    int c, first = 1;
    while ((c = cli_getopt("diff", argc, argv, "", diff_longs, 0, &first)) != -1) {
        const char *v = optarg;
        double d = 0;
        switch (c) {
        case OPT_JSON:
            o->json = 1;
            break;
        case OPT_HTML:
            if (!*v) {
                cli_error("diff: --html needs a file");
                return diff_bad_usage();
            }
            o->html = v;
            break;
        case OPT_FAIL:
            if (isnan(d = parse_in(v, 0, 1e6, 0))) {
                cli_error("diff: --fail-above needs a percentage of at least 0, not '%s'", v);
                return diff_bad_usage();
            }
            o->fail_above = d;
            break;
        case OPT_ALPHA:
            if (isnan(d = parse_in(v, 0, 1, 0)) || d <= 0 || d >= 1) {
                cli_error("diff: --alpha needs a level between 0 and 1, not '%s'", v);
                return diff_bad_usage();
            }
            o->d.alpha = d;
            break;
        case OPT_THRESHOLD:
            if (isnan(d = parse_in(v, 0, 1e6, 0))) {
                cli_error("diff: --threshold needs a percentage of at least 0, not '%s'", v);
                return diff_bad_usage();
            }
            o->d.threshold_pct = d;
            break;
        case OPT_TOP:
            if (isnan(d = parse_in(v, 1, 10000, 1))) {
                cli_error("diff: --top needs a whole number from 1 to 10000, not '%s'", v);
                return diff_bad_usage();
            }
            o->d.top = (size_t)d;
            break;
        case OPT_SKIP:
            if (isnan(d = parse_in(v, 0, 1e9, 1))) {
                cli_error("diff: --skip-steps needs a whole number of at least 0, not '%s'", v);
                return diff_bad_usage();
            }
            o->d.skip_steps = (size_t)d;
            break;
        default:
            return diff_bad_usage();
        }
    }
    if (argc - optind != 2) {
        cli_error("diff: two folders to compare, A and B (%d given)", argc - optind);
        return diff_bad_usage();
    }
    o->a = argv[optind];
    o->b = argv[optind + 1];
    return 0;
}

static int exists(const char *folder, const char *sub, const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s/%s", folder, sub, name);
    struct stat st;
    return stat(path, &st) == 0;
}

/* A run folder's report, written when it has a recording and no report yet. 0, or 1 after
 * saying why it cannot be had. */
static int ensure_report(const char *folder)
{
    if (exists(folder, REPORT_DIR, "step_trace.csv"))
        return 0;
    if (!exists(folder, TS_RECORDING_DIR, TS_RECORDING_FILE)) {
        char *clean = report_clean_dup(folder);
        cli_error("diff: %s has no report and no recording: give a run folder or a job folder "
                  "(termsight analyse writes the report)",
                  clean ? clean : "?");
        free(clean);
        return 1;
    }
    char *clean = report_clean_dup(folder);
    fprintf(stderr, "termsight: diff: %s has no report yet: analysing it\n", clean ? clean : "?");
    free(clean);
    report_options ro;
    report_options_init(&ro);
    char *cause = NULL;
    if (report_write(folder, &ro, &cause) < 0) {
        cli_error("diff: %s", cause ? cause : "analyse failed");
        free(cause);
        return 1;
    }
    free(cause);
    return 0;
}

/* Every report a side needs: the run's, or each rank's of a job. */
static int ensure_side(const char *path)
{
    if (!job_is_folder(path))
        return ensure_report(path);
    char **folders = NULL, *cause = NULL;
    int n = job_rank_folders(path, &folders, &cause);
    if (n <= 0) {
        cli_error("diff: %s", cause ? cause : "a job folder without run folders");
        free(cause);
        return 1;
    }
    int rc = 0;
    for (int i = 0; i < n && !rc; i++)
        rc = ensure_report(folders[i]);
    job_folders_free(folders, n);
    return rc;
}

static int write_html(const diff_result *d, const char *file)
{
    FILE *f = fopen(file, "w");
    if (!f || diff_write_html(d, f) < 0) {
        int err = errno;
        if (f)
            fclose(f);
        cli_error("diff: cannot write %s: %s", file, strerror(err));
        return 1;
    }
    if (fclose(f) != 0) {
        cli_error("diff: cannot write %s: %s", file, strerror(errno));
        return 1;
    }
    return 0;
}

/* A progress line on stderr, rewritten in place (stderr is a terminal). */
static void diff_progress(void *arg, const char *what, size_t done)
{
    (void)arg;
    fprintf(stderr, "\r\033[Ktermsight: diff: %s: %zu", what, done);
}

/* The reports of a and b (written first where missing) compared and printed as o asks. */
static int diff_compare(const diff_opts *o, const char *path_a, const char *path_b)
{
    if (ensure_side(path_a) || ensure_side(path_b))
        return 1;
    diff_result *d = NULL;
    char *cause = NULL;
    diff_options dopt = o->d;
    if (isatty(STDERR_FILENO))
        dopt.progress = diff_progress;
    int got = diff_run(path_a, path_b, &dopt, &d, &cause);
    if (dopt.progress)
        fputs("\r\033[K", stderr);
    if (got < 0) {
        cli_error("diff: %s", cause ? cause : "cannot compare");
        free(cause);
        return 1;
    }
    int rc = 0;
    if (o->json) {
        cJSON *j = diff_json(d);
        char *text = j ? cJSON_Print(j) : NULL;
        cJSON_Delete(j);
        if (!text) {
            cli_error("diff: out of memory");
            rc = 1;
        } else {
            puts(text);
            cJSON_free(text);
        }
    } else {
        diff_print(d, stdout);
    }
    if (o->html && write_html(d, o->html))
        rc = 1;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error("diff: cannot write the output: %s", strerror(errno));
        rc = 1;
    }
    if (!rc && o->fail_above >= 0 && diff_slower_than(d, o->fail_above)) {
        cli_error("diff: B is slower than A by more than %g %% in a phase of the step",
                  o->fail_above);
        rc = 1;
    }
    diff_free(d);
    return rc;
}

/* What was given names a folder or a recording file; else 1 after saying what it is. */
static int diff_check_arg(const char *given)
{
    struct stat st;
    const char *base = strrchr(given, '/');
    base = base ? base + 1 : given;
    const char *wrong = NULL;
    if (stat(given, &st) < 0)
        wrong = errno == ENOENT ? "no such file or folder, so no report and no recording: give a "
                                  "run folder or a job folder"
                                : strerror(errno);
    else if (S_ISREG(st.st_mode) && strcmp(base, TS_RECORDING_FILE))
        wrong = "a file, not a run folder, a job folder or a recording (" TS_RECORDING_FILE ")";
    else if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
        wrong = "neither a folder nor a file";
    if (!wrong)
        return 0;
    char *clean = report_clean_dup(given);
    cli_error("diff: %s: %s", clean ? clean : "?", wrong);
    free(clean);
    return 1;
}

static int diff_exec(const diff_opts *o)
{
    if (diff_check_arg(o->a) || diff_check_arg(o->b))
        return 1;
    /* A run's recording/ folder or events.tsr names its run folder, as for analyse. */
    char *a = job_is_folder(o->a) ? strdup(o->a) : report_run_folder(o->a);
    char *b = job_is_folder(o->b) ? strdup(o->b) : report_run_folder(o->b);
    int rc = 1;
    if (!a || !b)
        cli_error("diff: out of memory");
    else
        rc = diff_compare(o, a, b);
    free(a);
    free(b);
    return rc;
}

static int diff_main(int argc, char **argv, int check)
{
    diff_opts o;
    int rc = diff_parse(argc, argv, &o);
    if (rc || check)
        return rc;
    return diff_exec(&o);
}

const cli_command cli_cmd_diff = {
    .name = "diff",
    .summary = "compare two runs or jobs: what got slower or faster, beyond the noise",
    .run = diff_main,
    .usage = diff_usage,
};
