/* diff: two runs or two jobs compared from their reports (diff.h).
 *
 * Each side is read in two passes over what termsight analyse wrote, never over events: first
 * every run folder's step_trace.csv (the phases of each step; the steps numbered into one sample
 * index, rank after rank), then every step_ops.csv, whose rows add each operator's time in a
 * step to its series and its type's at that step's index. An operator that did not run in a step
 * counts 0 there, as it took no time. Rows are then compared sample against sample; the
 * statistics are diffstat.c's. */
#include "diff.h"

#include "index_map.h"
#include "job.h"
#include "report.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TRACE_BYTES (1ull << 30) /* step_trace.csv, as the job report reads it */
#define MAX_OPS_BYTES   (4ull << 30) /* step_ops.csv: a row per operator per step */
#define MAX_WARNINGS    32
#define BOOT_SEED       0x7465726d73696768ull /* any fixed value: intervals reproduce */

enum { PH_STEP, PH_INTERVAL, PH_COMPUTE, PH_WAIT, PH_TAIL, PH_EVAL, N_PHASES };
static const char *const phase_name[N_PHASES] = {"step",      "interval", "compute",
                                                 "comm_wait", "tail",     "eval"};
/* Each phase's column of step_trace.csv. */
static const int phase_col[N_PHASES] = {STEP_COL_TOTAL,     STEP_COL_INTERVAL, STEP_COL_COMPUTE,
                                        STEP_COL_COMM_WAIT, STEP_COL_TAIL,     STEP_COL_EVAL};

typedef struct series {
    char *name, *type; /* type: operators only */
    double *v;         /* per sample, microseconds */
    size_t n;
    double total;
} series;

typedef struct table {
    series *s;
    size_t n, cap;
    index_map map; /* hash of (name, type) -> index */
} table;

typedef struct rank_steps {
    char *folder;
    long rank;         /* -1 for a run */
    size_t base, n;    /* its samples: [base, base + n) */
    index_map by_step; /* step number -> sample index - base */
} rank_steps;

typedef struct side {
    diff_side info;
    const diff_options *opt;
    const char *label; /* "A" or "B" */
    rank_steps *runs;
    size_t nruns;
    series phase[N_PHASES];
    table types, ops;
} side;

typedef struct ranked {
    const series *s;
    double total; /* the larger of its two sides' mean time per step */
} ranked;

struct diff_result {
    diff_options opt;
    side s[2];
    ranked *chosen[2]; /* the op types, then the operators, compared */
    long nchosen[2];
    diff_row *rows;
    size_t nrows, caprows;
    char *warnings[MAX_WARNINGS];
    size_t nwarnings;
};

static int fail(char **cause, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(char **cause, const char *fmt, ...)
{
    if (cause) {
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(cause, fmt, ap) < 0)
            *cause = NULL;
        va_end(ap);
    }
    return -1;
}

static void warn(diff_result *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(diff_result *d, const char *fmt, ...)
{
    if (d->nwarnings >= MAX_WARNINGS)
        return;
    va_list ap;
    va_start(ap, fmt);
    char *w = NULL;
    if (vasprintf(&w, fmt, ap) >= 0)
        d->warnings[d->nwarnings++] = w;
    va_end(ap);
}

void diff_options_init(diff_options *o)
{
    *o = (diff_options){.alpha = 0.01,
                        .threshold_pct = 5,
                        .floor_pct = 0.2,
                        .top = 20,
                        .skip_steps = 0,
                        .bootstrap = 1000,
                        .level = 0.99};
}

const char *diff_kind_name(enum diff_kind k)
{
    static const char *const n[] = {"phase", "rank", "type", "op"};
    return (unsigned)k < 4 ? n[k] : "unknown";
}

const char *diff_verdict_name(enum diff_verdict v)
{
    static const char *const n[] = {"same", "slower", "faster"};
    return (unsigned)v < 3 ? n[v] : "unknown";
}

/* ---- Reading a side ---------------------------------------------------------------------- */

#define PROGRESS_EVERY 65536 /* rows read between two calls of the progress callback */

static void progress(const diff_options *o, const char *what, size_t done)
{
    if (o->progress)
        o->progress(o->progress_arg, what, done);
}

static void side_progress(const side *s, const char *what, size_t done)
{
    if (!s->opt->progress || done % PROGRESS_EVERY)
        return;
    char line[64];
    snprintf(line, sizeof line, "reading %s's %s", s->label, what);
    progress(s->opt, line, done);
}

static int series_push(series *s, size_t *cap, double v)
{
    if (s->n == *cap) {
        size_t want = *cap ? 2 * *cap : 256;
        double *p = realloc(s->v, want * sizeof *p);
        if (!p)
            return -1;
        s->v = p;
        *cap = want;
    }
    s->v[s->n++] = v;
    s->total += v;
    return 0;
}

/* The index of a CSV header's column named name, or -1. */
static int column(char **field, size_t nf, const char *name)
{
    for (size_t i = 0; i < nf; i++)
        if (!strcmp(field[i], name))
            return (int)i;
    return -1;
}

/* A field as a finite number of at least 0, else -1. */
static double number(char **field, size_t nf, int col)
{
    if (col < 0 || (size_t)col >= nf)
        return -1;
    char *end;
    double v = strtod(field[col], &end);
    return end != field[col] && !*end && v >= 0 && v <= 1e15 ? v : -1;
}

/* One run folder's step_trace.csv: its steps after the first skip, into the phases. */
static int load_trace(side *s, rank_steps *r, size_t *caps, size_t skip, char **cause)
{
    char why[512];
    uint64_t long_lines = 0;
    report_step_reader sr;
    if (report_step_trace_open(&sr, r->folder, MAX_TRACE_BYTES, &long_lines, why, sizeof why) < 0)
        return fail(cause, "%s: %s%s", r->folder, why,
                    errno == ENOENT ? " (run termsight analyse on it first)" : "");
    size_t seen = 0;
    int rc = 0;
    if (index_map_init(&r->by_step, 1024) < 0) {
        rc = fail(cause, "out of memory");
        goto done;
    }
    r->base = s->info.samples;
    double v[STEP_COL__COUNT];
    while (report_step_trace_next(&sr, v)) {
        if (seen++ < skip)
            continue;
        int inserted = 0;
        if (index_map_get(&r->by_step, (uint64_t)v[STEP_COL_STEP], (uint32_t)r->n, &inserted) ==
            UINT32_MAX) {
            rc = fail(cause, "out of memory");
            goto done;
        }
        if (!inserted)
            continue; /* a step number twice: the first row counts */
        for (int k = 0; k < N_PHASES; k++) {
            double x = v[phase_col[k]];
            if (series_push(&s->phase[k], &caps[k], x < 0 ? 0 : x) < 0) {
                rc = fail(cause, "out of memory");
                goto done;
            }
        }
        r->n++;
        s->info.samples++;
        side_progress(s, "steps", s->info.samples);
    }
done:
    report_step_trace_close(&sr);
    return rc;
}

static uint64_t name_hash(const char *name, const char *type)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull; /* a byte no clean text holds between the two */
    for (const char *p = type ? type : ""; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return h;
}

/* The series of (name, type) in t, new (its total only, over n samples) when absent; NULL without
 * memory. */
static series *table_at(table *t, const char *name, const char *type, size_t n)
{
    int inserted = 0;
    uint32_t i = index_map_get(&t->map, name_hash(name, type), (uint32_t)t->n, &inserted);
    if (i == UINT32_MAX)
        return NULL;
    if (!inserted)
        return &t->s[i];
    if (t->n == t->cap) {
        size_t want = t->cap ? 2 * t->cap : 64;
        series *g = realloc(t->s, want * sizeof *g);
        if (!g)
            return NULL;
        t->s = g;
        t->cap = want;
    }
    series *s = &t->s[t->n];
    memset(s, 0, sizeof *s);
    s->name = strdup(name);
    s->type = type ? strdup(type) : NULL;
    s->n = n;
    if (!s->name || (type && !s->type)) {
        free(s->name);
        free(s->type);
        return NULL;
    }
    t->n++;
    return s;
}

/* The series of (name, type) in t, or NULL. */
static series *find(const table *t, const char *name, const char *type)
{
    uint32_t i = index_map_find(&t->map, name_hash(name, type));
    return i == UINT32_MAX ? NULL : &t->s[i];
}

/* One run folder's step_ops.csv, read twice so that memory holds per-step samples only of the
 * rows compared: first (fill 0) each row's time is added to its operator's and its type's total,
 * then (fill 1) to the samples of those chosen (their v allocated). 1 when read, 0 when the
 * report has none, -1 on an error. */
static int load_ops(side *s, rank_steps *r, int fill, char **cause)
{
    char why[512];
    uint64_t size, long_lines = 0;
    FILE *f =
        report_file_read(r->folder, REPORT_STEP_OPS_CSV, MAX_OPS_BYTES, &size, why, sizeof why);
    if (!f && errno == ENOENT)
        return 0;
    if (!f)
        return fail(cause, "%s: %s", r->folder, why);
    char *line = NULL, *field[16];
    size_t lcap = 0, nf = 0;
    int rc = 1;
    size_t lines = 0;
    if (report_read_line(f, &line, &lcap, &long_lines) > 0)
        nf = report_csv_split(line, field, 16);
    int cs = column(field, nf, "step"), co = column(field, nf, "op");
    int ct = column(field, nf, "type"), cv = column(field, nf, "total_us");
    if (cs < 0 || co < 0 || ct < 0 || cv < 0) {
        rc = fail(cause, "%s: its %s/%s lacks the columns %s", r->folder, REPORT_DIR,
                  REPORT_STEP_OPS_CSV, REPORT_STEP_OPS_HEADER);
        goto done;
    }
    while (report_read_line(f, &line, &lcap, &long_lines) > 0) {
        side_progress(s, "operators", ++lines);
        nf = report_csv_split(line, field, 16);
        double step = number(field, nf, cs), v = number(field, nf, cv);
        if (step < 0 || v < 0 || (size_t)co >= nf || (size_t)ct >= nf)
            continue;
        uint32_t i = index_map_find(&r->by_step, (uint64_t)step);
        if (i == UINT32_MAX)
            continue; /* a step skipped, or not in the step trace */
        if (fill) {
            series *op = find(&s->ops, field[co], field[ct]);
            series *ty = find(&s->types, field[ct], NULL);
            if (op && op->v)
                op->v[r->base + i] += v;
            if (ty && ty->v)
                ty->v[r->base + i] += v;
            continue;
        }
        series *op = table_at(&s->ops, field[co], field[ct], s->info.samples);
        series *ty = table_at(&s->types, field[ct], NULL, s->info.samples);
        if (!op || !ty) {
            rc = fail(cause, "out of memory");
            goto done;
        }
        op->total += v;
        ty->total += v;
    }
done:
    free(line);
    fclose(f);
    return rc;
}

/* The rank of a job's run folder, from its name ("rank<R>-..."); -1 when it has none. */
static long rank_of(const char *folder)
{
    const char *b = strrchr(folder, '/');
    b = b ? b + 1 : folder;
    if (strncmp(b, "rank", 4))
        return -1;
    char *end;
    errno = 0;
    long r = strtol(b + 4, &end, 10);
    return !errno && end != b + 4 && *end == '-' && r >= 0 ? r : -1;
}

static int load_side(diff_result *d, side *s, const char *path, char **cause)
{
    s->opt = &d->opt;
    s->label = s == &d->s[0] ? "A" : "B";
    s->info.path = strdup(path);
    if (!s->info.path)
        return fail(cause, "out of memory");
    s->info.job = job_is_folder(path);
    char **folders = NULL;
    int n = 1;
    if (s->info.job) {
        n = job_rank_folders(path, &folders, cause);
        if (n <= 0)
            return n < 0 ? -1 : fail(cause, "%s: a job folder without run folders", path);
    }
    s->runs = calloc((size_t)n, sizeof *s->runs);
    if (!s->runs) {
        job_folders_free(folders, n);
        return fail(cause, "out of memory");
    }
    s->nruns = (size_t)n;
    for (int i = 0; i < n; i++) {
        s->runs[i].folder = s->info.job ? folders[i] : strdup(path);
        s->runs[i].rank = s->info.job ? rank_of(folders[i]) : -1;
        if (!s->runs[i].folder)
            return fail(cause, "out of memory");
    }
    free(folders);
    size_t caps[N_PHASES] = {0};
    for (size_t i = 0; i < s->nruns; i++)
        if (load_trace(s, &s->runs[i], caps, d->opt.skip_steps, cause) < 0)
            return -1;
    s->info.ranks = s->nruns;
    if (!s->info.samples)
        return fail(cause, "%s: no step%s in its report%s", path,
                    d->opt.skip_steps ? " past those skipped" : "", s->info.job ? "s" : "");
    if (index_map_init(&s->ops.map, 256) < 0 || index_map_init(&s->types.map, 64) < 0)
        return fail(cause, "out of memory");
    s->info.have_ops = 1;
    for (size_t i = 0; i < s->nruns; i++) {
        int got = load_ops(s, &s->runs[i], 0, cause);
        if (got < 0)
            return -1;
        if (!got) {
            s->info.have_ops = 0;
            warn(d,
                 "%s has no %s/%s (a report written before it existed): its operators are "
                 "not compared; analyse it again",
                 s->runs[i].folder, REPORT_DIR, REPORT_STEP_OPS_CSV);
        }
    }
    return 0;
}

static void side_free(side *s)
{
    for (size_t i = 0; i < s->nruns; i++) {
        free(s->runs[i].folder);
        index_map_free(&s->runs[i].by_step);
    }
    free(s->runs);
    for (int k = 0; k < N_PHASES; k++)
        free(s->phase[k].v);
    table *t[2] = {&s->types, &s->ops};
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; i < t[k]->n; i++) {
            free(t[k]->s[i].name);
            free(t[k]->s[i].type);
            free(t[k]->s[i].v);
        }
        free(t[k]->s);
        index_map_free(&t[k]->map);
    }
    free(s->info.path);
}

/* ---- Comparing ----------------------------------------------------------------------------- */

/* One row: the two samples compared (an absent series is one sample of 0 per step). */
static int add_row(diff_result *d, enum diff_kind kind, const char *name, const char *type,
                   const double *a, size_t na, const double *b, size_t nb)
{
    if (d->nrows == d->caprows) {
        size_t want = d->caprows ? 2 * d->caprows : 64;
        diff_row *g = realloc(d->rows, want * sizeof *g);
        if (!g)
            return -1;
        d->rows = g;
        d->caprows = want;
    }
    progress(&d->opt, "comparing rows", d->nrows);
    diff_row *r = &d->rows[d->nrows];
    memset(r, 0, sizeof *r);
    r->kind = kind;
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->type, sizeof r->type, "%s", type ? type : "");
    r->n_a = na;
    r->n_b = nb;
    diffstat_row st;
    if (diffstat_compare(a, na, b, nb, d->opt.bootstrap, BOOT_SEED + d->nrows, d->opt.level, &st) <
        0)
        return -1;
    r->median_a_us = st.median_a;
    r->median_b_us = st.median_b;
    r->change_pct = diffstat_change_pct(r->median_a_us, r->median_b_us);
    r->lo_pct = st.lo;
    r->hi_pct = st.hi;
    r->p = st.mw.p;
    d->nrows++;
    return 0;
}

static int by_total(const void *x, const void *y)
{
    const ranked *a = x, *b = y;
    if (a->total != b->total)
        return a->total < b->total ? 1 : -1;
    int c = strcmp(a->s->name, b->s->name);
    return c ? c : strcmp(a->s->type ? a->s->type : "", b->s->type ? b->s->type : "");
}

/* The series of either side's table, the largest by time per step in either run first, the
 * first opt.top of them: *out malloc'd, their count returned; -1 without memory. */
static long rank_table(const diff_result *d, const table *ta, const table *tb, ranked **out)
{
    size_t n = ta->n + tb->n, m = 0;
    ranked *r = malloc((n ? n : 1) * sizeof *r);
    if (!r)
        return -1;
    for (int k = 0; k < 2; k++) {
        const table *t = k ? tb : ta, *other = k ? ta : tb;
        for (size_t i = 0; i < t->n; i++) {
            const series *o = find(other, t->s[i].name, t->s[i].type);
            if (k && o)
                continue; /* listed from A's side */
            double mine = t->s[i].total / (double)d->s[k].info.samples;
            double theirs = o ? o->total / (double)d->s[!k].info.samples : 0;
            r[m++] = (ranked){&t->s[i], mine > theirs ? mine : theirs};
        }
    }
    qsort(r, m, sizeof *r, by_total);
    *out = r;
    return (long)(m < d->opt.top ? m : d->opt.top);
}

/* The series compared (rank_table's) into *chosen, their samples allocated (zeros) on each side
 * that has them, for load_ops's second pass to fill. The count, or -1 without memory. */
static long choose(diff_result *d, table *ta, table *tb, ranked **chosen)
{
    long m = rank_table(d, ta, tb, chosen);
    for (long i = 0; i < m; i++) {
        for (int k = 0; k < 2; k++) {
            series *s = find(k ? tb : ta, (*chosen)[i].s->name, (*chosen)[i].s->type);
            if (s && !s->v && !(s->v = calloc(s->n ? s->n : 1, sizeof *s->v)))
                return -1;
        }
    }
    return m;
}

/* The chosen series of a table compared, in order. */
static int compare_table(diff_result *d, enum diff_kind kind, const table *ta, const table *tb,
                         const ranked *chosen, long m)
{
    const side *A = &d->s[0], *B = &d->s[1];
    int rc = 0;
    for (long i = 0; i < m && rc == 0; i++) {
        const series *a = find(ta, chosen[i].s->name, chosen[i].s->type);
        const series *b = find(tb, chosen[i].s->name, chosen[i].s->type);
        /* Absent on a side: zeros over its steps (the operator took no time there). */
        double *za = a ? NULL : calloc(A->info.samples, sizeof *za);
        double *zb = b ? NULL : calloc(B->info.samples, sizeof *zb);
        if ((!a && !za) || (!b && !zb))
            rc = -1;
        else
            rc = add_row(d, kind, chosen[i].s->name, chosen[i].s->type, a ? a->v : za,
                         A->info.samples, b ? b->v : zb, B->info.samples);
        free(za);
        free(zb);
    }
    return rc;
}

/* Per rank of two jobs: the step of each rank both have. */
static int compare_ranks(diff_result *d)
{
    const side *A = &d->s[0], *B = &d->s[1];
    for (size_t i = 0; i < A->nruns; i++) {
        const rank_steps *ra = &A->runs[i], *rb = NULL;
        for (size_t j = 0; j < B->nruns && !rb; j++)
            if (B->runs[j].rank == ra->rank && ra->rank >= 0)
                rb = &B->runs[j];
        if (!rb) {
            warn(d, "rank %ld (%s) is in A only", ra->rank, ra->folder);
            continue;
        }
        char name[64];
        snprintf(name, sizeof name, "rank %ld", ra->rank);
        if (add_row(d, DIFF_RANK, name, NULL, A->phase[PH_STEP].v + ra->base, ra->n,
                    B->phase[PH_STEP].v + rb->base, rb->n) < 0)
            return -1;
    }
    for (size_t j = 0; j < B->nruns; j++) {
        int found = 0;
        for (size_t i = 0; i < A->nruns; i++)
            found |= A->runs[i].rank == B->runs[j].rank && B->runs[j].rank >= 0;
        if (!found)
            warn(d, "rank %ld (%s) is in B only", B->runs[j].rank, B->runs[j].folder);
    }
    return 0;
}

static int all_zero(const series *s)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i] != 0)
            return 0;
    return 1;
}

static int compare(diff_result *d)
{
    const side *A = &d->s[0], *B = &d->s[1];
    for (int k = 0; k < N_PHASES; k++) {
        if (k != PH_STEP && all_zero(&A->phase[k]) && all_zero(&B->phase[k]))
            continue; /* a part neither run has (no evaluation, no communication) */
        if (add_row(d, DIFF_PHASE, phase_name[k], NULL, A->phase[k].v, A->phase[k].n, B->phase[k].v,
                    B->phase[k].n) < 0)
            return -1;
    }
    if (A->info.job && compare_ranks(d) < 0)
        return -1;
    if (compare_table(d, DIFF_TYPE, &A->types, &B->types, d->chosen[0], d->nchosen[0]) < 0 ||
        compare_table(d, DIFF_OP, &A->ops, &B->ops, d->chosen[1], d->nchosen[1]) < 0)
        return -1;
    double *p = malloc((d->nrows ? d->nrows : 1) * sizeof *p);
    double *adj = malloc((d->nrows ? d->nrows : 1) * sizeof *adj);
    if (!p || !adj) {
        free(p);
        free(adj);
        return -1;
    }
    for (size_t i = 0; i < d->nrows; i++)
        p[i] = d->rows[i].p;
    int rc = diffstat_holm(p, d->nrows, adj);
    double floor_us = d->opt.floor_pct / 100 * d->rows[0].median_a_us; /* rows[0]: the step */
    for (size_t i = 0; rc == 0 && i < d->nrows; i++) {
        diff_row *r = &d->rows[i];
        r->p_adjusted = adj[i];
        if (!(fabs(r->median_b_us - r->median_a_us) >= floor_us))
            continue; /* DIFF_SAME */
        r->verdict = diffstat_verdict(adj[i], d->opt.alpha, r->change_pct, r->lo_pct, r->hi_pct,
                                      d->opt.threshold_pct);
    }
    free(p);
    free(adj);
    return rc;
}

int diff_run(const char *a, const char *b, const diff_options *o, diff_result **out, char **cause)
{
    *out = NULL;
    diff_result *d = calloc(1, sizeof *d);
    if (!d)
        return fail(cause, "out of memory");
    if (o)
        d->opt = *o;
    else
        diff_options_init(&d->opt);
    if (load_side(d, &d->s[0], a, cause) < 0 || load_side(d, &d->s[1], b, cause) < 0)
        goto failed;
    if (d->s[0].info.job != d->s[1].info.job) {
        fail(cause, "%s is a %s folder and %s a %s folder: compare two runs or two jobs", a,
             d->s[0].info.job ? "job" : "run", b, d->s[1].info.job ? "job" : "run");
        goto failed;
    }
    if (d->s[0].info.have_ops && d->s[1].info.have_ops) {
        d->nchosen[0] = choose(d, &d->s[0].types, &d->s[1].types, &d->chosen[0]);
        d->nchosen[1] = choose(d, &d->s[0].ops, &d->s[1].ops, &d->chosen[1]);
        if (d->nchosen[0] < 0 || d->nchosen[1] < 0) {
            fail(cause, "out of memory");
            goto failed;
        }
        for (int k = 0; k < 2; k++)
            for (size_t i = 0; i < d->s[k].nruns; i++)
                if (load_ops(&d->s[k], &d->s[k].runs[i], 1, cause) < 0)
                    goto failed;
    }
    if (compare(d) < 0) {
        fail(cause, "out of memory");
        goto failed;
    }
    *out = d;
    return 0;
failed:
    diff_free(d);
    return -1;
}

size_t diff_rows(const diff_result *d, const diff_row **rows)
{
    *rows = d->rows;
    return d->nrows;
}

const diff_side *diff_side_of(const diff_result *d, int which)
{
    return &d->s[which ? 1 : 0].info;
}

const diff_options *diff_options_of(const diff_result *d)
{
    return &d->opt;
}

size_t diff_warnings(const diff_result *d, const char *const **lines)
{
    *lines = (const char *const *)d->warnings;
    return d->nwarnings;
}

int diff_slower_than(const diff_result *d, double pct)
{
    for (size_t i = 0; i < d->nrows; i++)
        if (d->rows[i].kind == DIFF_PHASE && d->rows[i].verdict == DIFF_SLOWER &&
            d->rows[i].change_pct > pct)
            return 1;
    return 0;
}

void diff_free(diff_result *d)
{
    if (!d)
        return;
    side_free(&d->s[0]);
    side_free(&d->s[1]);
    free(d->chosen[0]);
    free(d->chosen[1]);
    free(d->rows);
    for (size_t i = 0; i < d->nwarnings; i++)
        free(d->warnings[i]);
    free(d);
}
