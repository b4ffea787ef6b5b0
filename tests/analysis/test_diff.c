/* Tests of termsight diff's statistics (analysis/diffstat.c) on samples small enough to work out
 * by hand, of each step's operator totals (analysis/stepops.c), and of the comparison of two
 * reports (analysis/diff.c) written here with known per-step times. */
#define TESTUTIL_TAG "diff"
#include "analysis_internal.h"
#include "diff.h"
#include "report.h"
#include "testutil.h"

#include <cJSON.h>
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- Statistics ------------------------------------------------------------------------------ */

START_TEST(test_median)
{
    ck_assert_double_eq(diffstat_median((double[]){3, 1, 2}, 3), 2);
    ck_assert_double_eq(diffstat_median((double[]){4, 1, 3, 2}, 4), 2.5);
    ck_assert_double_eq(diffstat_median((double[]){5, 5, 1, 5, 9, 5}, 6), 5);
    ck_assert(isnan(diffstat_median(NULL, 0)));
}
END_TEST

START_TEST(test_mann_whitney_separated)
{
    /* No a above any b: U = 0, mean 4.5, variance 9/12 * 7 = 5.25, z = (0 - 4.5 + 0.5) /
     * sqrt(5.25) = -1.7457, p = erfc(1.7457 / sqrt 2) = 0.0809 (scipy's mannwhitneyu, asymptotic
     * with continuity, gives the same). */
    diffstat_mw mw;
    ck_assert_int_eq(diffstat_mann_whitney((double[]){1, 2, 3}, 3, (double[]){4, 5, 6}, 3, &mw), 0);
    ck_assert_double_eq(mw.u, 0);
    ck_assert_double_eq_tol(mw.z, -4 / sqrt(5.25), 1e-12);
    ck_assert_double_eq_tol(mw.p, 0.080856, 1e-6);
    /* The other way round: U = 9, the same p. */
    ck_assert_int_eq(diffstat_mann_whitney((double[]){4, 5, 6}, 3, (double[]){1, 2, 3}, 3, &mw), 0);
    ck_assert_double_eq(mw.u, 9);
    ck_assert_double_eq_tol(mw.p, 0.080856, 1e-6);
}
END_TEST

START_TEST(test_mann_whitney_ties)
{
    /* 1(a) 2(a) 2(a) 2(b) 3(b) 3(b): ranks 1, 3, 3, 3, 5.5, 5.5; R_a = 7, U = 7 - 6 = 1. Ties of 3
     * and 2: sum(t^3 - t) = 24 + 6 = 30; variance 9/12 * (7 - 30/30) = 4.5; z = (1 - 4.5 + 0.5) /
     * sqrt(4.5) = -sqrt(2), p = erfc(1) = 0.157299. */
    diffstat_mw mw;
    ck_assert_int_eq(diffstat_mann_whitney((double[]){1, 2, 2}, 3, (double[]){2, 3, 3}, 3, &mw), 0);
    ck_assert_double_eq(mw.u, 1);
    ck_assert_double_eq_tol(mw.z, -sqrt(2), 1e-12);
    ck_assert_double_eq_tol(mw.p, erfc(1), 1e-12);
}
END_TEST

START_TEST(test_mann_whitney_identical)
{
    double x[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    diffstat_mw mw;
    ck_assert_int_eq(diffstat_mann_whitney(x, 10, x, 10, &mw), 0);
    ck_assert_double_eq(mw.u, 50);
    ck_assert_double_eq(mw.p, 1);
    double same[4] = {7, 7, 7, 7};
    ck_assert_int_eq(diffstat_mann_whitney(same, 4, same, 3, &mw), 0);
    ck_assert_double_eq(mw.p, 1); /* no variance at all: no evidence */
    ck_assert_int_eq(diffstat_mann_whitney(same, 4, NULL, 0, &mw), 0);
    ck_assert_double_eq(mw.p, 1);
}
END_TEST

START_TEST(test_holm)
{
    /* Sorted: 0.005 * 4 = 0.02, 0.01 * 3 = 0.03, 0.03 * 2 = 0.06, 0.04 * 1 = 0.04 -> 0.06 (never
     * below the one before). */
    double p[4] = {0.01, 0.04, 0.03, 0.005}, adj[4];
    ck_assert_int_eq(diffstat_holm(p, 4, adj), 0);
    ck_assert_double_eq_tol(adj[0], 0.03, 1e-15);
    ck_assert_double_eq_tol(adj[1], 0.06, 1e-15);
    ck_assert_double_eq_tol(adj[2], 0.06, 1e-15);
    ck_assert_double_eq_tol(adj[3], 0.02, 1e-15);
    double big[2] = {0.7, 0.9};
    ck_assert_int_eq(diffstat_holm(big, 2, adj), 0);
    ck_assert_double_eq(adj[0], 1);
    ck_assert_double_eq(adj[1], 1);
}
END_TEST

START_TEST(test_bootstrap)
{
    double a[200], b[200];
    for (int i = 0; i < 200; i++) {
        a[i] = 1000 + (i * 37 % 101);         /* 1000 .. 1100, spread over the run */
        b[i] = 1.1 * (1000 + (i * 53 % 101)); /* 10 % slower, the same spread */
    }
    double lo, hi, lo2, hi2;
    ck_assert_int_eq(diffstat_bootstrap(a, 200, b, 200, 1000, 42, 0.99, &lo, &hi), 0);
    ck_assert_msg(lo > 5 && lo < 10 && hi > 10 && hi < 15, "interval [%g, %g]", lo, hi);
    ck_assert_int_eq(diffstat_bootstrap(a, 200, b, 200, 1000, 42, 0.99, &lo2, &hi2), 0);
    ck_assert_double_eq(lo, lo2); /* a fixed seed: the same interval */
    ck_assert_double_eq(hi, hi2);
    ck_assert_int_eq(diffstat_bootstrap(a, 200, a, 200, 1000, 42, 0.99, &lo, &hi), 0);
    ck_assert_msg(lo <= 0 && hi >= 0, "identical samples: [%g, %g]", lo, hi);
    ck_assert_int_eq(diffstat_bootstrap(a, 0, a, 200, 1000, 42, 0.99, &lo, &hi), 0);
    ck_assert(isnan(lo) && isnan(hi));
}
END_TEST

/* diffstat_compare, one sort of each sample, gives the figures of the three functions: to the bit
 * up to DIFFSTAT_RESAMPLE_MAX samples; past it the medians and the test to the bit and an interval
 * drawn from the bootstrap's distribution, which agrees with resampling's. */
START_TEST(test_compare)
{
    enum { N = 20000 };
    double *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    ck_assert(a && b);
    for (int i = 0; i < N; i++) {
        a[i] = 1000 + (i * 37 % 101); /* ties aplenty */
        b[i] = 1030 + (i * 53 % 107);
    }
    size_t sizes[] = {1, 2, 3, 200, 201, N};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t n = sizes[k];
        diffstat_row r;
        diffstat_mw mw;
        double lo, hi;
        unsigned iters = n == N ? 200 : 1000;
        ck_assert_int_eq(diffstat_compare(a, n, b, n, iters, 42, 0.99, &r), 0);
        ck_assert_int_eq(diffstat_mann_whitney(a, n, b, n, &mw), 0);
        ck_assert_int_eq(diffstat_bootstrap(a, n, b, n, iters, 42, 0.99, &lo, &hi), 0);
        ck_assert_double_eq(r.median_a, diffstat_median(a, n));
        ck_assert_double_eq(r.median_b, diffstat_median(b, n));
        ck_assert(r.mw.u == mw.u && r.mw.z == mw.z && r.mw.p == mw.p);
        if (2 * n <= DIFFSTAT_RESAMPLE_MAX) {
            ck_assert(r.lo == lo && r.hi == hi);
        } else {
            ck_assert_msg(fabs(r.lo - lo) < 0.5 && fabs(r.hi - hi) < 0.5,
                          "drawn [%g, %g], resampled [%g, %g]", r.lo, r.hi, lo, hi);
        }
    }
    free(a);
    free(b);
}
END_TEST

START_TEST(test_verdict)
{
    ck_assert_int_eq(diffstat_verdict(0.001, 0.01, 10, 8, 12, 2), DIFF_SLOWER);
    ck_assert_int_eq(diffstat_verdict(0.001, 0.01, -10, -12, -8, 2), DIFF_FASTER);
    ck_assert_int_eq(diffstat_verdict(0.02, 0.01, 10, 8, 12, 2), DIFF_SAME);   /* p */
    ck_assert_int_eq(diffstat_verdict(0.001, 0.01, 1.5, 1, 2, 2), DIFF_SAME);  /* small */
    ck_assert_int_eq(diffstat_verdict(0.001, 0.01, 3, 1, 5, 2), DIFF_SAME);    /* interval */
    ck_assert_int_eq(diffstat_verdict(0.001, 0.01, -3, -5, -1, 2), DIFF_SAME); /* interval */
    ck_assert_int_eq(diffstat_verdict(0.001, 0.01, INFINITY, NAN, NAN, 2), DIFF_SLOWER);
    ck_assert_double_eq_tol(diffstat_change_pct(100, 110), 10, 1e-9);
    ck_assert(isinf(diffstat_change_pct(0, 1)));
    ck_assert_double_eq(diffstat_change_pct(0, 0), 0);
}
END_TEST

/* ---- Each step's operator totals ------------------------------------------------------------ */

static const char *const op_names[] = {"", "Default/fc1/MatMul-op1", "aten::add, seq = 4",
                                       "aten::add, seq = 9", "MatMul"};

static const char *names(void *ctx, uint32_t id, uint32_t *len)
{
    (void)ctx;
    if (id >= sizeof op_names / sizeof *op_names)
        return NULL;
    *len = (uint32_t)strlen(op_names[id]);
    return op_names[id];
}

static ts_event op(uint64_t begin, uint64_t dur, uint32_t name)
{
    return (ts_event){
        .kind = TS_KIND_OP_RANGE, .begin_ns = begin, .end_ns = begin + dur, .name = name, .tid = 1};
}

static ts_event step_end(uint64_t number, uint64_t t)
{
    return (ts_event){.kind = TS_KIND_STEP_END, .begin_ns = t, .end_ns = t, .v0 = number, .tid = 1};
}

START_TEST(test_stepops)
{
    analysis *a = analysis_create(NULL, names, NULL);
    stepops *s = stepops_create();
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(s);
    /* Before the first step, in step 1 (two PyTorch names of one op, two ranges of MatMul; one
     * arriving after step 1's end, as another thread's do), in step 2 (before step 1's row, as
     * a later step's ranges do). */
    ts_event ev[] = {op(50, 10, 1),  op(100, 30, 1),   op(150, 5, 2),
                     op(160, 7, 3),  step_end(1, 200), op(140, 20, 1),
                     op(210, 40, 1), step_end(2, 300), step_end(3, 400)};
    stepops_feed(s, ev, sizeof ev / sizeof *ev);
    step_row r1 = {.step = 1, .begin_ns = 100, .end_ns = 200};
    const stepops_row *rows;
    size_t n = stepops_step(s, a, &r1, &rows);
    ck_assert_uint_eq(n, 2);
    uint32_t len;
    const char *t = analysis_name(a, rows[0].op, &len);
    ck_assert_int_eq((int)len, (int)strlen("Default/fc1/MatMul-op1"));
    ck_assert(!memcmp(t, "Default/fc1/MatMul-op1", len));
    t = analysis_name(a, rows[0].type, &len);
    ck_assert(len == 6 && !memcmp(t, "MatMul", 6));
    ck_assert_uint_eq(rows[0].count, 2);
    ck_assert_uint_eq(rows[0].total_ns, 50);
    t = analysis_name(a, rows[1].op, &len);
    ck_assert(len == 9 && !memcmp(t, "aten::add", 9)); /* seq = N dropped: one row */
    ck_assert_uint_eq(rows[1].count, 2);
    ck_assert_uint_eq(rows[1].total_ns, 12);
    step_row r2 = {.step = 2, .begin_ns = 200, .end_ns = 300};
    n = stepops_step(s, a, &r2, &rows);
    ck_assert_uint_eq(n, 1);
    ck_assert_uint_eq(rows[0].total_ns, 40);
    /* A range of step 2 that comes after its row is in no row. */
    ts_event late = op(250, 9, 1);
    stepops_feed(s, &late, 1);
    step_row r3 = {.step = 3, .begin_ns = 300, .end_ns = 400};
    ck_assert_uint_eq(stepops_step(s, a, &r3, &rows), 0);
    ck_assert_uint_eq(stepops_dropped(s), 0); /* late, not lost: in no row */
    stepops_destroy(s);
    analysis_destroy(a);
}
END_TEST

/* ---- Two reports compared ------------------------------------------------------------------- */

/* A run folder RUN (root/name) and RUN/report, with step_trace.csv (its header trace_header) and
 * step_ops.csv opened into *t and *o, their headers written. */
static char *open_report(const char *root, const char *name, const char *trace_header, FILE **t,
                         FILE **o)
{
    char *run = path_join(root, name), *rep = path_join(run, REPORT_DIR);
    ck_assert_int_eq(mkdir(run, 0755), 0);
    ck_assert_int_eq(mkdir(rep, 0755), 0);
    char *tp = path_join(rep, "step_trace.csv"), *op = path_join(rep, REPORT_STEP_OPS_CSV);
    *t = fopen(tp, "w");
    *o = fopen(op, "w");
    ck_assert(*t && *o);
    fprintf(*t, "%s\n", trace_header);
    fputs(REPORT_STEP_OPS_HEADER "\n", *o);
    free(tp);
    free(op);
    free(rep);
    return run;
}

/* A run folder with a report of steps steps: each step 100 us interval, compute made of op
 * "Default/a/MatMul-op1" (mm us) and "Default/b/ReLU-op2" (relu us), 50 us tail; jitter of up to
 * 3 % step by step, seeded, so that two folders of one spec differ only by noise. */
static char *make_run(const char *root, const char *name, int steps, double mm, double relu,
                      unsigned seed)
{
    FILE *t, *o;
    char *run = open_report(
        root, name, "step,total_us,interval_us,compute_us,comm_wait_us,tail_us,eval_us", &t, &o);
    srand(seed);
    for (int i = 1; i <= steps; i++) {
        double j1 = 1 + 0.03 * rand() / RAND_MAX, j2 = 1 + 0.03 * rand() / RAND_MAX;
        double a = mm * j1, b = relu * j2, compute = a + b;
        fprintf(t, "%d,%.3f,100.000,%.3f,0.000,50.000,0.000\n", i, 150 + compute, compute);
        fprintf(o, "%d,Default/a/MatMul-op1,MatMul,1,%.3f\n", i, a);
        fprintf(o, "%d,\"Default/b/ReLU-op2, odd\",ReLU,1,%.3f\n", i, b);
    }
    fclose(t);
    fclose(o);
    return run;
}

static const diff_row *row_named(const diff_result *d, enum diff_kind kind, const char *name)
{
    const diff_row *rows;
    size_t n = diff_rows(d, &rows);
    for (size_t i = 0; i < n; i++)
        if (rows[i].kind == kind && !strcmp(rows[i].name, name))
            return &rows[i];
    return NULL;
}

START_TEST(test_diff_reports)
{
    char *root = tmp_make();
    char *a = make_run(root, "a", 200, 1000, 500, 1);
    char *b = make_run(root, "b", 200, 1000, 500, 2);
    char *c = make_run(root, "c", 200, 1100, 650, 3); /* MatMul +10 %, ReLU +30 % */
    diff_result *d = NULL;
    char *cause = NULL;
    ck_assert_msg(diff_run(a, b, NULL, &d, &cause) == 0, "%s", cause ? cause : "");
    const diff_row *rows;
    size_t n = diff_rows(d, &rows);
    ck_assert_uint_eq(n, 4 + 2 + 2); /* step, interval, compute, tail (no eval, no wait) */
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(rows[i].verdict == DIFF_SAME, "%s %s: %s", diff_kind_name(rows[i].kind),
                      rows[i].name, diff_verdict_name(rows[i].verdict));
    ck_assert(!diff_slower_than(d, 0));
    diff_free(d);

    ck_assert_int_eq(diff_run(a, c, NULL, &d, &cause), 0);
    const diff_row *mm = row_named(d, DIFF_OP, "Default/a/MatMul-op1");
    const diff_row *relu = row_named(d, DIFF_OP, "Default/b/ReLU-op2, odd");
    const diff_row *step = row_named(d, DIFF_PHASE, "step");
    ck_assert(mm && relu && step);
    ck_assert_int_eq(mm->verdict, DIFF_SLOWER);
    ck_assert_double_eq_tol(mm->change_pct, 10, 1.5);
    ck_assert_int_eq(relu->verdict, DIFF_SLOWER);
    ck_assert_double_eq_tol(relu->change_pct, 30, 2);
    ck_assert_str_eq(relu->type, "ReLU");
    ck_assert_int_eq(row_named(d, DIFF_PHASE, "interval")->verdict, DIFF_SAME);
    ck_assert(diff_slower_than(d, 5));
    ck_assert(!diff_slower_than(d, 50));
    cJSON *j = diff_json(d);
    ck_assert_ptr_nonnull(j);
    /* step, compute, both types, both ops */
    ck_assert_int_eq((int)cJSON_GetObjectItem(j, "slower")->valuedouble, 6);
    cJSON_Delete(j);
    diff_free(d);

    /* A run against a job, and a folder with no report. */
    ck_assert_int_eq(diff_run(a, root, NULL, &d, &cause), -1);
    ck_assert_ptr_nonnull(strstr(cause, "step_trace.csv"));
    free(cause);
    free(a);
    free(b);
    free(c);
    tmp_remove(root);
}
END_TEST

/* A job folder of two ranks made by make_run, each with an (empty) recording folder; rank 1's
 * MatMul takes rank1_mm us. */
static char *make_job(const char *root, const char *name, double rank1_mm, unsigned seed)
{
    char *job = path_join(root, name);
    ck_assert_int_eq(mkdir(job, 0755), 0);
    for (int r = 0; r < 2; r++) {
        char rank[64];
        snprintf(rank, sizeof rank, "rank%d-host-%d-20260101-000000-0000000%d", r, 100 + r, r);
        char *run = make_run(job, rank, 150, r ? rank1_mm : 1000, 500, seed + (unsigned)r);
        char *rec = path_join(run, TS_RECORDING_DIR);
        ck_assert_int_eq(mkdir(rec, 0755), 0);
        free(rec);
        free(run);
    }
    return job;
}

START_TEST(test_diff_jobs)
{
    char *root = tmp_make();
    char *a = make_job(root, "ja", 1000, 10), *b = make_job(root, "jb", 1200, 20);
    char *run = make_run(root, "run", 150, 1000, 500, 30);
    diff_result *d = NULL;
    char *cause = NULL;
    ck_assert_msg(diff_run(a, b, NULL, &d, &cause) == 0, "%s", cause ? cause : "");
    ck_assert(diff_side_of(d, 0)->job && diff_side_of(d, 0)->ranks == 2);
    ck_assert_uint_eq(diff_side_of(d, 1)->samples, 300);
    const diff_row *r0 = row_named(d, DIFF_RANK, "rank 0"), *r1 = row_named(d, DIFF_RANK, "rank 1");
    ck_assert(r0 && r1);
    ck_assert_int_eq(r0->verdict, DIFF_SAME);
    ck_assert_int_eq(r1->verdict, DIFF_SLOWER); /* 1650 us to 1850 us: +12 % */
    ck_assert_double_eq_tol(r1->change_pct, 12, 2);
    diff_free(d);
    /* A job against a run is refused. */
    ck_assert_int_eq(diff_run(a, run, NULL, &d, &cause), -1);
    ck_assert_ptr_nonnull(strstr(cause, "two runs or two jobs"));
    free(cause);
    free(a);
    free(b);
    free(run);
    tmp_remove(root);
}
END_TEST

/* Reports that are damaged or hostile: lines that do not parse are passed over, a FIFO or a link
 * where a report file should be is refused (never waited on, never followed). */
START_TEST(test_diff_hostile)
{
    char *root = tmp_make();
    char *a = make_run(root, "a", 50, 1000, 500, 1);
    char *b = make_run(root, "b", 50, 1000, 500, 2);
    char *ops = path_join(b, REPORT_DIR "/" REPORT_STEP_OPS_CSV);
    FILE *f = fopen(ops, "a");
    ck_assert_ptr_nonnull(f);
    fputs("x,Default/a/MatMul-op1,MatMul,1,5\n" /* a step that is no number */
          "999999999999999999999,a,b,1,1\n"     /* one past any step */
          "7,\"unterminated,MatMul,1,1e300\n"   /* a time out of range */
          "3\n,,,,\n\xff\xfe,\x01,\n"
          "4,Default/a/MatMul-op1,MatMul,1,-5\n",
          f);
    fclose(f);
    diff_result *d = NULL;
    char *cause = NULL;
    ck_assert_msg(diff_run(a, b, NULL, &d, &cause) == 0, "%s", cause ? cause : "");
    const diff_row *mm = row_named(d, DIFF_OP, "Default/a/MatMul-op1");
    ck_assert(mm && mm->verdict == DIFF_SAME && mm->n_b == 50);
    diff_free(d);

    char *trace = path_join(b, REPORT_DIR "/step_trace.csv");
    ck_assert_int_eq(unlink(trace), 0);
    ck_assert_int_eq(mkfifo(trace, 0600), 0);
    ck_assert_int_eq(diff_run(a, b, NULL, &d, &cause), -1);
    ck_assert_msg(strstr(cause, "FIFO") != NULL, "%s", cause);
    free(cause);
    ck_assert_int_eq(unlink(trace), 0);
    char *target = path_join(a, REPORT_DIR "/step_trace.csv");
    ck_assert_int_eq(symlink(target, trace), 0);
    ck_assert_int_eq(diff_run(a, b, NULL, &d, &cause), -1);
    ck_assert_msg(strstr(cause, "symbolic link") != NULL, "%s", cause);
    free(cause);
    free(target);
    free(trace);
    free(ops);
    free(a);
    free(b);
    tmp_remove(root);
}
END_TEST

/* The median of value(i) for i from 1 to n (n even), counted, not sorted: each value is a whole
 * number from value(0) to value(0) + 511. */
static double counted_median(long n, int (*value)(long i))
{
    long count[512] = {0}, seen = 0;
    int base = value(0), lo = -1;
    for (long i = 1; i <= n; i++)
        count[value(i) - base]++;
    for (int v = 0; v < 512; v++) {
        seen += count[v];
        if (lo < 0 && seen >= n / 2)
            lo = v;
        if (seen >= n / 2 + 1)
            return (lo + v) / 2.0 + base;
    }
    return NAN;
}

enum { BIG = 1000000 };
static int mm_a(long i)
{
    return 1000 + (int)(i % 101);
}
static int mm_b(long i)
{
    return 1100 + (int)(i % 101);
}
static int relu(long i)
{
    return 500 + (int)(i * 7 % 51);
}
static int step_a(long i)
{
    return 150 + mm_a(i) + relu(i);
}
static int step_b(long i)
{
    return 150 + mm_b(i) + relu(i);
}

/* A run folder of BIG steps: MatMul mm(i) and ReLU relu(i) us, the step 150 us more. */
static char *make_big_run(const char *root, const char *name, int (*mm)(long))
{
    FILE *t, *o;
    char *run = open_report(root, name, "step,total_us,interval_us,compute_us,tail_us", &t, &o);
    for (long i = 1; i <= BIG; i++) {
        fprintf(t, "%ld,%d,100,%d,50\n", i, 150 + mm(i) + relu(i), mm(i) + relu(i));
        fprintf(o, "%ld,m,MatMul,1,%d\n%ld,r,ReLU,1,%d\n", i, mm(i), i, relu(i));
    }
    ck_assert(fclose(t) == 0 && fclose(o) == 0);
    return run;
}

/* Two reports of a million steps compared (in seconds: the bootstrap once took minutes), with
 * medians counted here: MatMul and the step slower, ReLU the same. */
START_TEST(test_diff_million)
{
    char *root = tmp_make();
    char *a = make_big_run(root, "a", mm_a), *b = make_big_run(root, "b", mm_b);
    diff_result *d = NULL;
    char *cause = NULL;
    ck_assert_msg(diff_run(a, b, NULL, &d, &cause) == 0, "%s", cause ? cause : "");
    struct {
        enum diff_kind kind;
        const char *name;
        int (*fa)(long), (*fb)(long);
        enum diff_verdict verdict;
    } want[] = {{DIFF_PHASE, "step", step_a, step_b, DIFF_SLOWER},
                {DIFF_OP, "m", mm_a, mm_b, DIFF_SLOWER},
                {DIFF_OP, "r", relu, relu, DIFF_SAME}};
    for (size_t k = 0; k < sizeof want / sizeof *want; k++) {
        const diff_row *r = row_named(d, want[k].kind, want[k].name);
        ck_assert_ptr_nonnull(r);
        double ma = counted_median(BIG, want[k].fa), mb = counted_median(BIG, want[k].fb);
        ck_assert_uint_eq(r->n_a, BIG);
        ck_assert_uint_eq(r->n_b, BIG);
        ck_assert_double_eq(r->median_a_us, ma);
        ck_assert_double_eq(r->median_b_us, mb);
        double change = (mb / ma - 1) * 100;
        ck_assert_msg(r->lo_pct <= change + 0.1 && r->hi_pct >= change - 0.1,
                      "%s: %g %% outside [%g, %g]", r->name, change, r->lo_pct, r->hi_pct);
        ck_assert_int_eq(r->verdict, want[k].verdict);
    }
    ck_assert_double_eq(row_named(d, DIFF_OP, "r")->p, 1); /* the same samples */
    diff_free(d);
    free(a);
    free(b);
    tmp_remove(root);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("diff");
    TCase *tc = tcase_create("diff");
    tcase_add_test(tc, test_median);
    tcase_add_test(tc, test_mann_whitney_separated);
    tcase_add_test(tc, test_mann_whitney_ties);
    tcase_add_test(tc, test_mann_whitney_identical);
    tcase_add_test(tc, test_holm);
    tcase_add_test(tc, test_bootstrap);
    tcase_add_test(tc, test_verdict);
    tcase_add_test(tc, test_stepops);
    tcase_add_test(tc, test_diff_reports);
    tcase_add_test(tc, test_diff_jobs);
    tcase_add_test(tc, test_diff_hostile);
    tcase_add_test(tc, test_compare);
    suite_add_tcase(s, tc);
    TCase *big = tcase_create("million");
    tcase_set_timeout(big, 120); /* seconds, on a loaded machine; minutes before */
    tcase_add_test(big, test_diff_million);
    suite_add_tcase(s, big);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
