/*
 * diff: two runs (or two jobs) compared from their reports, step against step, so that a change
 * is told from noise: per phase of the step (interval, compute, communication wait, tail,
 * evaluation and the whole step, from step_trace.csv), per op type and per operator (the largest
 * by time, from step_ops.csv) and, for jobs, per rank. Each row holds the medians of the per-step
 * samples, the change of the median in percent with a bootstrap interval, the Mann-Whitney
 * p-value corrected for the number of rows (Holm), and a verdict: a change is significant only
 * when the corrected p-value is below alpha and the change, and its whole interval, pass a
 * practical threshold (two runs of one program differ by a few percent with the machine's load,
 * which a test over hundreds of steps would otherwise call significant).
 * docs/usage.md, "Comparing two runs", documents the rows, the rule and the outputs.
 *
 * Errors follow model.h: -1 with *cause set to a malloc'd message (cause may be NULL).
 */
#ifndef TERMSIGHT_DIFF_H
#define TERMSIGHT_DIFF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum diff_verdict { DIFF_SAME = 0, DIFF_SLOWER = 1, DIFF_FASTER = 2 };

/* ---- Statistics (diffstat.c): pure functions ------------------------------------------------ */

/* The median of x[0..n) (the mean of the middle two for even n); NAN for n 0 or no memory. */
double diffstat_median(const double *x, size_t n);

typedef struct diffstat_mw {
    double u; /* U of the first sample: pairs (a, b) with a > b, ties counting one half */
    double z; /* standardized, with the continuity correction */
    double p; /* two-sided; 1 when a sample is empty or every value is the same */
} diffstat_mw;

/* The Mann-Whitney U test of a against b: the normal approximation with the tie correction of
 * the variance and a continuity correction. 0, or -1 out of memory. */
int diffstat_mann_whitney(const double *a, size_t na, const double *b, size_t nb, diffstat_mw *out);

/* Holm's step-down adjusted p-values of n tests into adjusted (may not alias p): the k-th
 * smallest p times (n - k + 1), never decreasing along that order, at most 1. 0, or -1 out of
 * memory. */
int diffstat_holm(const double *p, size_t n, double *adjusted);

/* A percentile bootstrap interval (level, e.g. 0.99) of the change of the median from a to b in
 * percent, over iters resamples of each drawn with a fixed generator from seed: the same inputs
 * give the same interval. *lo and *hi NAN when a sample is empty. 0, or -1 out of memory. */
int diffstat_bootstrap(const double *a, size_t na, const double *b, size_t nb, unsigned iters,
                       uint64_t seed, double level, double *lo, double *hi);

/* Up to this many samples in all, diffstat_compare's interval is diffstat_bootstrap's, to the
 * bit; past it each resample's median is drawn from the sorted sample (its distribution, in a few
 * draws instead of a resample: a million steps in seconds, not hours). */
#define DIFFSTAT_RESAMPLE_MAX 4096

typedef struct diffstat_row {
    double median_a, median_b; /* NAN for an empty sample */
    diffstat_mw mw;
    double lo, hi; /* diffstat_bootstrap's interval; NAN when none */
} diffstat_row;

/* One row's statistics from one sort of each sample: both medians, the Mann-Whitney test and the
 * bootstrap interval, the same figures as diffstat_median, diffstat_mann_whitney and
 * diffstat_bootstrap give (the interval past DIFFSTAT_RESAMPLE_MAX samples from the same
 * distribution, drawn otherwise). 0, or -1 out of memory. */
int diffstat_compare(const double *a, size_t na, const double *b, size_t nb, unsigned iters,
                     uint64_t seed, double level, diffstat_row *out);

/* (median_b / median_a - 1) * 100; INFINITY when only b is above 0; 0 when both are 0. */
double diffstat_change_pct(double median_a, double median_b);

/* DIFF_SLOWER or DIFF_FASTER when p_adjusted < alpha, |change_pct| >= threshold_pct and the
 * interval [lo_pct, hi_pct] of the change lies beyond the threshold on the change's side (not
 * checked when NAN); else DIFF_SAME. */
enum diff_verdict diffstat_verdict(double p_adjusted, double alpha, double change_pct,
                                   double lo_pct, double hi_pct, double threshold_pct);

/* ---- Comparing two reports (diff.c) --------------------------------------------------------- */

enum diff_kind { DIFF_PHASE = 0, DIFF_RANK = 1, DIFF_TYPE = 2, DIFF_OP = 3 };

typedef struct diff_options {
    double alpha;         /* family-wise error rate, Holm-corrected over the rows; 0.01 */
    double threshold_pct; /* smallest change called significant; 5: two runs of one program on
                             one machine differ by up to about 5 % in an operator of a
                             millisecond (timer slack, CPU placement, the machine's load) */
    double floor_pct;     /* ...and its smallest size, in percent of A's median step: a row of a
                             few microseconds in a step of milliseconds varies by more than
                             threshold_pct and matters to no one; 0.2 */
    size_t top;           /* op types and operators compared, the largest by time; 20 */
    size_t skip_steps;    /* each run's (each rank's) first steps left out; 0 */
    unsigned bootstrap;   /* resamples for the interval; 1000 */
    double level;         /* the interval's level; 0.99 */
    /* Called now and then while a comparison runs (NULL: never): what it does ("reading A's
     * steps", "comparing rows") and how far it got; for a progress line. */
    void (*progress)(void *arg, const char *what, size_t done);
    void *progress_arg;
} diff_options;

void diff_options_init(diff_options *o);

typedef struct diff_row {
    enum diff_kind kind;
    char name[256]; /* phase, op type, operator or "rank N" (clean text, as the report has it) */
    char type[256]; /* an operator's type, else "" */
    size_t n_a, n_b;
    double median_a_us, median_b_us;
    double change_pct;     /* diffstat_change_pct */
    double lo_pct, hi_pct; /* the bootstrap interval of the change; NAN when none */
    double p, p_adjusted;  /* Mann-Whitney, and Holm-adjusted over every row */
    enum diff_verdict verdict;
} diff_row;

typedef struct diff_side {
    char *path;
    int job;        /* a job folder */
    size_t ranks;   /* run folders read (1 for a run) */
    size_t samples; /* steps read (of every rank), after skip_steps */
    int have_ops;   /* every report read had step_ops.csv */
} diff_side;

typedef struct diff_result diff_result;

/* Compares the reports of a and b: two run folders (each RUN/report/ written by termsight
 * analyse) or two job folders (each rank's report/). Fails when a folder is neither, one is a job
 * and the other not, a report is missing or unreadable, or a side has no step. */
int diff_run(const char *a, const char *b, const diff_options *o, diff_result **out, char **cause);

/* The rows: phases, ranks, op types, operators, each group by time. */
size_t diff_rows(const diff_result *d, const diff_row **rows);
/* Side 0 (A) or 1 (B). */
const diff_side *diff_side_of(const diff_result *d, int which);
const diff_options *diff_options_of(const diff_result *d);
/* Warnings, each one line (a report without step_ops.csv, ranks on one side only). */
size_t diff_warnings(const diff_result *d, const char *const **lines);
void diff_free(diff_result *d);

const char *diff_kind_name(enum diff_kind k);       /* phase, rank, type, op */
const char *diff_verdict_name(enum diff_verdict v); /* same, slower, faster */

/* Whether a phase (or the step) got slower by more than pct with significance: --fail-above. */
int diff_slower_than(const diff_result *d, double pct);

/* ---- Outputs (diff_write.c) ----------------------------------------------------------------- */

/* The comparison as text for people: the two sides, the rule, one line per row, then the
 * significant changes in words. */
void diff_print(const diff_result *d, FILE *out);
/* As one JSON object (a cJSON *, NULL out of memory): "a", "b", "rule", "rows", "slower",
 * "faster", "warnings". */
void *diff_json(const diff_result *d);
/* As one HTML page that stands alone (inline CSS, no script, nothing from a network). 0, or -1
 * on a write error (errno). */
int diff_write_html(const diff_result *d, FILE *out);

#endif
