/* test_queues: data-queue statistics, time buckets and the bottleneck verdicts
 * (queues.c). Thresholds under test: high >= 70 % usage, low <= 30 %, mostly empty = empty in
 * >= 50 % of samples, filled = high or full in >= 50 %, at least 10 samples for a verdict. */
#include "analysis_internal.h"
#include "golden.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EPS 1e-9

/* ---- Feeding in other orders ------------------------------------------------------------ */

enum order { ORDER_AS_PUSHED, ORDER_REVERSED, ORDER_SHUFFLED, ORDER__COUNT };

static uint64_t rng_next(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* Feeds g's events permuted by order, in batches of batch (0: all), and finishes. */
static analysis *feed_order(golden *g, const analysis_config *cfg, enum order order, size_t batch)
{
    ts_event *ev = malloc((g->nev ? g->nev : 1) * sizeof *ev);
    ck_assert_ptr_nonnull(ev);
    memcpy(ev, g->ev, g->nev * sizeof *ev);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < g->nev; i++) {
        if (order == ORDER_REVERSED) {
            ev[i] = g->ev[g->nev - 1 - i];
        } else if (order == ORDER_SHUFFLED && i > 0) {
            size_t j = rng_next(&x) % (i + 1);
            ts_event t = ev[i];
            ev[i] = ev[j];
            ev[j] = t;
        }
    }
    analysis *a = analysis_create(cfg, golden_names, g);
    ck_assert_ptr_nonnull(a);
    if (!batch)
        batch = g->nev ? g->nev : 1;
    for (size_t i = 0; i < g->nev; i += batch)
        analysis_feed(a, ev + i, g->nev - i < batch ? g->nev - i : batch);
    analysis_finish(a);
    free(ev);
    return a;
}

/* The queue named name in rows, or NULL. */
static const queue_stat *find_queue(const analysis *a, const queue_stat *rows, size_t n,
                                    const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(golden_str(a, rows[i].name), name))
            return &rows[i];
    return NULL;
}

static const queue_finding *finding_of(const analysis *a, const queue_finding *f, size_t n,
                                       const char *queue)
{
    queue_stat *rows;
    size_t nq = analysis_queues(a, &rows);
    const queue_finding *r = NULL;
    for (size_t i = 0; i < n && !r; i++)
        if (f[i].queue < nq && !strcmp(golden_str(a, rows[f[i].queue].name), queue))
            r = &f[i];
    free(rows);
    return r;
}

/* Pushes n samples of queue, one per 10 ms from t0_us, cycling through pattern. */
static void push_samples(golden *g, const char *queue, enum ts_queue_role role, uint64_t cap,
                         const uint64_t *pattern, size_t plen, size_t n, uint64_t t0_us)
{
    for (size_t i = 0; i < n; i++)
        golden_queue(g, queue, role, t0_us + i * 10000, pattern[i % plen], cap);
}

/* ---- Statistics ------------------------------------------------------------------------- */

START_TEST(test_stats_arithmetic)
{
    golden g;
    golden_init(&g);
    /* Registered with capacity 8, sampled with capacity 4: the samples' capacity wins. */
    golden_queue_info(&g, "prefetch", TS_QUEUE_PIPELINE, 8, "reader", "decode");
    static const uint64_t sizes[] = {0, 0, 1, 2, 4, 4, 3, 0, 2, 4};
    push_samples(&g, "prefetch", TS_QUEUE_PIPELINE, 4, sizes, 10, 10, 1000);
    /* A queue seen only in samples still counts, with the samples' role. */
    static const uint64_t only[] = {1, 3};
    push_samples(&g, "orphan", TS_QUEUE_HOST, 6, only, 2, 4, 1000);
    /* Samples without a role (aux 0): QUEUE_INFO's role wins, whenever it comes. */
    golden_queue_info(&g, "dev", TS_QUEUE_DEVICE, 2, "copy", "train");
    push_samples(&g, "dev", TS_QUEUE_PIPELINE, 2, only, 1, 3, 1000);

    for (int order = 0; order < ORDER__COUNT; order++) {
        for (size_t batch = 0; batch <= 3; batch += 3) {
            analysis *a = feed_order(&g, NULL, (enum order)order, batch);
            queue_stat *rows;
            size_t n = analysis_queues(a, &rows);
            ck_assert_uint_eq(n, 3);
            const queue_stat *d = find_queue(a, rows, n, "dev");
            ck_assert_ptr_nonnull(d);
            ck_assert_uint_eq(d->role, TS_QUEUE_DEVICE);
            ck_assert_double_eq_tol(d->avg_usage, 0.5, EPS); /* 1 of 2, three times */
            const queue_stat *q = find_queue(a, rows, n, "prefetch");
            ck_assert_ptr_nonnull(q);
            ck_assert_str_eq(golden_str(a, q->producer), "reader");
            ck_assert_str_eq(golden_str(a, q->consumer), "decode");
            ck_assert_uint_eq(q->role, TS_QUEUE_PIPELINE);
            ck_assert_uint_eq(q->capacity, 4);
            ck_assert_uint_eq(q->samples, 10);
            /* sizes sum 0+0+1+2+4+4+3+0+2+4 = 20 over 10 samples: 2.0, of 4: 0.5 */
            ck_assert_double_eq_tol(q->avg_size, 2.0, EPS);
            ck_assert_double_eq_tol(q->avg_usage, 0.5, EPS);
            /* empty: three 0s of 10; full: three 4s of 10 */
            ck_assert_double_eq_tol(q->empty_share, 0.3, EPS);
            ck_assert_double_eq_tol(q->full_share, 0.3, EPS);

            const queue_stat *o = find_queue(a, rows, n, "orphan");
            ck_assert_ptr_nonnull(o);
            ck_assert_uint_eq(o->role, TS_QUEUE_HOST);
            ck_assert_uint_eq(o->producer, 0);
            ck_assert_uint_eq(o->capacity, 6);
            ck_assert_uint_eq(o->samples, 4);
            /* sizes 1,3,1,3: average 2, usage 2/6 */
            ck_assert_double_eq_tol(o->avg_size, 2.0, EPS);
            ck_assert_double_eq_tol(o->avg_usage, 2.0 / 6.0, EPS);
            ck_assert_double_eq_tol(o->empty_share, 0.0, EPS);
            ck_assert_double_eq_tol(o->full_share, 0.0, EPS);
            free(rows);
            analysis_destroy(a);
        }
    }
    golden_free(&g);
}
END_TEST

START_TEST(test_first_seen_order)
{
    golden g;
    golden_init(&g);
    golden_queue(&g, "b", TS_QUEUE_PIPELINE, 10, 1, 2);
    golden_queue(&g, "a", TS_QUEUE_PIPELINE, 20, 1, 2);
    golden_queue(&g, "b", TS_QUEUE_PIPELINE, 30, 2, 2);
    analysis *a = golden_analyse(&g, NULL, 0);
    queue_stat *rows;
    ck_assert_uint_eq(analysis_queues(a, &rows), 2);
    ck_assert_str_eq(golden_str(a, rows[0].name), "b");
    ck_assert_str_eq(golden_str(a, rows[1].name), "a");
    /* b: 1 of 2, then 2 of 2 (full): usage (0.5 + 1) / 2 */
    ck_assert_double_eq_tol(rows[0].avg_usage, 0.75, EPS);
    ck_assert_double_eq_tol(rows[0].full_share, 0.5, EPS);
    free(rows);
    analysis_destroy(a);

    /* No queues: no rows, no findings. */
    golden_free(&g);
    golden_init(&g);
    golden_step(&g, 1, 1, 0, 10);
    a = golden_analyse(&g, NULL, 0);
    ck_assert_uint_eq(analysis_queues(a, &rows), 0);
    ck_assert_ptr_null(rows);
    queue_finding f[2];
    ck_assert_uint_eq(analysis_queue_findings(a, f, 2), 0);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

/* ---- Verdicts, table-driven ------------------------------------------------------------- */

typedef struct qin {
    const char *name;
    enum ts_queue_role role;
    uint64_t cap;
    const char *producer, *consumer;
    uint64_t pattern[4]; /* sizes, cycled: each share is a count out of 4 */
    size_t n;            /* samples */
} qin;

typedef struct qwant {
    uint32_t verdict;
    const char *op; /* NULL: 0 */
    double usage, empty, full;
    const char *has[2]; /* substrings the suggestion must hold */
} qwant;

typedef struct qspec {
    qin in;
    qwant want;
} qspec;

typedef struct verdict_case {
    const char *what;
    qspec q[4];
    const char *first; /* queue of the most severe finding */
} verdict_case;

#define IN(name, role, cap, prod, cons, s0, s1, s2, s3, n)                                         \
    {                                                                                              \
        name, TS_QUEUE_##role, cap, prod, cons, {s0, s1, s2, s3}, n                                \
    }
#define WANT(v, op, usage, empty, full, has0, has1)                                                \
    {                                                                                              \
        QUEUE_VERDICT_##v, op, usage, empty, full,                                                 \
        {                                                                                          \
            has0, has1                                                                             \
        }                                                                                          \
    }

static const verdict_case verdict_cases[] = {
    {"lone host queue mostly empty: data processing, naming its producer",
     /* sizes 0,0,0,2: average 0.5 of 10 = 0.05; empty 3 of 4 */
     {{IN("host", HOST, 10, "GeneratorOp", "train", 0, 0, 0, 2, 20),
       WANT(DATA_PROCESSING, "GeneratorOp", 0.05, 0.75, 0, "num_parallel_workers",
            "faster reader")}},
     "host"},
    {"lone host queue mostly full: training is the slower side",
     /* average (10+10+9+10)/4 = 9.75 of 10; full 3 of 4 */
     {{IN("host", HOST, 10, "loader", "train", 10, 10, 9, 10, 20),
       WANT(TRAINING, "train", 0.975, 0, 0.75, "training step", NULL)}},
     "host"},
    {"lone host queue in between: no bottleneck",
     /* average 5 of 10 */
     {{IN("host", HOST, 10, "loader", "train", 4, 5, 6, 5, 20),
       WANT(OK, NULL, 0.5, 0, 0, NULL, NULL)}},
     "host"},
    {"host often full, device mostly empty: transfer",
     /* host: average 30/4 = 7.5 of 8 = 0.9375, full 3 of 4; device: 0.25 of 4, empty 3 of 4 */
     {{IN("host", HOST, 8, "loader", "copy", 8, 8, 8, 6, 20),
       WANT(TRANSFER, NULL, 0.9375, 0, 0.75, "pinned", NULL)},
      {IN("device", DEVICE, 4, "copy", "train", 0, 0, 0, 1, 20),
       WANT(TRANSFER, NULL, 0.0625, 0.75, 0, "prefetch", NULL)}},
     /* both bottlenecks; the host's evidence (93.75 % used) outweighs 75 % empty */
     "host"},
    {"device queue holds data: data preparation is not the bottleneck, host empty or not",
     /* host: 0.25 of 8, empty 3 of 4; device: 2 of 4, never empty or full */
     {{IN("host", HOST, 8, "loader", "copy", 0, 0, 0, 1, 20),
       WANT(OK, NULL, 0.03125, 0.75, 0, NULL, NULL)},
      {IN("device", DEVICE, 4, "copy", "train", 2, 3, 1, 2, 20),
       WANT(OK, NULL, 0.5, 0, 0, NULL, NULL)}},
     "device"},
    {"device and host both mostly empty: data processing, naming the host queue's producer",
     /* host: 0.5 of 8, empty 3 of 4; device: 0.25 of 4, empty 3 of 4 */
     {{IN("host", HOST, 8, "ImageFolderDataset", "copy", 0, 0, 2, 0, 20),
       WANT(DATA_PROCESSING, "ImageFolderDataset", 0.0625, 0.75, 0, "num_parallel_workers", NULL)},
      {IN("device", DEVICE, 4, "copy", "train", 0, 1, 0, 0, 20),
       WANT(DATA_PROCESSING, "ImageFolderDataset", 0.0625, 0.75, 0, "num_workers", NULL)}},
     /* equal evidence (75 % empty each): by name */
     "device"},
    {"pipeline of three stages, the middle one (a map) is the bottleneck",
     /* q1: 36/4 = 9 of 10, full 1 of 4; q2: 1 of 10, empty 1 of 4 */
     {{IN("q1", PIPELINE, 10, "TFRecordDataset", "MapOp", 9, 9, 8, 10, 20),
       WANT(OK, NULL, 0.9, 0, 0.25, NULL, NULL)},
      {IN("q2", PIPELINE, 10, "MapOp", "BatchOp", 1, 0, 2, 1, 20),
       WANT(OPERATOR, "MapOp", 0.1, 0.25, 0, "num_parallel_workers", "Python function")}},
     "q2"},
    {"pipeline with a slow batch stage in the middle: prefetch_size",
     /* q2: 0.5 of 10, empty 2 of 4 */
     {{IN("q1", PIPELINE, 10, "MapOp", "BatchOp", 8, 8, 8, 8, 20),
       WANT(OK, NULL, 0.8, 0, 0, NULL, NULL)},
      {IN("q2", PIPELINE, 10, "BatchOp", "train", 0, 1, 0, 1, 20),
       WANT(OPERATOR, "BatchOp", 0.05, 0.5, 0, "prefetch_size", NULL)}},
     "q2"},
    {"leftmost stage with every output low is the bottleneck",
     /* ShuffleOp's input is low: not the middle rule; sink's input is low: not the rightmost */
     {{IN("q1", PIPELINE, 10, "source", "ShuffleOp", 2, 2, 2, 2, 20),
       WANT(OPERATOR, "source", 0.2, 0, 0, "num_parallel_workers", NULL)},
      {IN("q2", PIPELINE, 10, "ShuffleOp", "sink", 1, 1, 1, 1, 20),
       WANT(OK, NULL, 0.1, 0, 0, NULL, NULL)}},
     "q1"},
    {"rightmost stage (the training loop) with every input high: the pipeline keeps up",
     /* q2: 36/4 = 9 of 10, full 2 of 4; q3: 7 of 10, exactly the threshold */
     {{IN("q1", PIPELINE, 10, "source", "map", 8, 8, 8, 8, 20),
       WANT(OK, NULL, 0.8, 0, 0, NULL, NULL)},
      {IN("q2", PIPELINE, 10, "map", "train", 10, 9, 10, 7, 20),
       WANT(TRAINING, "train", 0.9, 0, 0.5, "training step", NULL)},
      {IN("q3", PIPELINE, 10, "labels", "train", 7, 7, 7, 7, 20),
       WANT(TRAINING, "train", 0.7, 0, 0, "training step", NULL)}},
     "q2"},
    {"rightmost stage with one input below high: no verdict on it",
     {{IN("q2", PIPELINE, 10, "map", "train", 10, 9, 10, 7, 20),
       WANT(OK, NULL, 0.9, 0, 0.5, NULL, NULL)},
      {IN("q3", PIPELINE, 10, "labels", "train", 6, 6, 6, 6, 20),
       WANT(OK, NULL, 0.6, 0, 0, NULL, NULL)}},
     "q2"},
    {"nine samples are too few: NONE; ten give a verdict",
     {{IN("few", HOST, 10, "loader", "train", 0, 0, 0, 0, 9),
       WANT(NONE, NULL, 0, 1, 0, NULL, NULL)},
      {IN("enough", HOST, 10, "loader2", "train", 0, 0, 0, 0, 10),
       WANT(DATA_PROCESSING, "loader2", 0, 1, 0, "num_workers", NULL)}},
     "enough"},
    {"a stage next to a queue with too few samples is not judged",
     {{IN("q1", PIPELINE, 10, "source", "map", 9, 9, 9, 9, 20),
       WANT(OK, NULL, 0.9, 0, 0, NULL, NULL)},
      {IN("q2", PIPELINE, 10, "map", "batch", 0, 0, 0, 0, 5),
       WANT(NONE, NULL, 0, 1, 0, NULL, NULL)}},
     "q1"},
};

#undef IN
#undef WANT

static void check_verdict_case(const verdict_case *c, enum order order, size_t batch)
{
    golden g;
    golden_init(&g);
    size_t nq = 0;
    for (; nq < 4 && c->q[nq].in.name; nq++) {
        const qin *in = &c->q[nq].in;
        golden_queue_info(&g, in->name, in->role, in->cap, in->producer, in->consumer);
        push_samples(&g, in->name, in->role, in->cap, in->pattern, 4, in->n, 1000 + nq * 3);
    }
    analysis *a = feed_order(&g, NULL, order, batch);
    queue_stat *rows;
    ck_assert_uint_eq(analysis_queues(a, &rows), nq);
    queue_finding f[8];
    size_t nf = analysis_queue_findings(a, f, 8);
    ck_assert_msg(nf == nq, "%s: %zu findings", c->what, nf);
    for (size_t i = 0; i < nq; i++) {
        const qin *in = &c->q[i].in;
        const qwant *q = &c->q[i].want;
        const queue_stat *st = find_queue(a, rows, nq, in->name);
        ck_assert_ptr_nonnull(st);
        ck_assert_msg(fabs(st->avg_usage - q->usage) < EPS, "%s: %s usage %f", c->what, in->name,
                      st->avg_usage);
        ck_assert_msg(fabs(st->empty_share - q->empty) < EPS, "%s: %s empty %f", c->what, in->name,
                      st->empty_share);
        ck_assert_msg(fabs(st->full_share - q->full) < EPS, "%s: %s full %f", c->what, in->name,
                      st->full_share);
        const queue_finding *qf = finding_of(a, f, nf, in->name);
        ck_assert_ptr_nonnull(qf);
        ck_assert_msg(qf->verdict == q->verdict, "%s: %s verdict %u, want %u (%s)", c->what,
                      in->name, qf->verdict, q->verdict, qf->text);
        ck_assert_msg(!strcmp(golden_str(a, qf->op), q->op ? q->op : ""), "%s: %s op '%s'", c->what,
                      in->name, golden_str(a, qf->op));
        ck_assert_msg(strstr(qf->text, in->name) != NULL, "%s: text '%s' names no queue", c->what,
                      qf->text);
        for (int k = 0; k < 2; k++)
            if (q->has[k])
                ck_assert_msg(strstr(qf->suggestion, q->has[k]) != NULL,
                              "%s: %s suggestion '%s' lacks '%s'", c->what, in->name,
                              qf->suggestion, q->has[k]);
        if (q->verdict == QUEUE_VERDICT_OK || q->verdict == QUEUE_VERDICT_NONE)
            ck_assert_str_eq(qf->suggestion, "");
    }
    /* Most severe first. */
    ck_assert_str_eq(golden_str(a, rows[f[0].queue].name), c->first);
    static const int rank[] = {0, 1, 3, 3, 3, 2};
    for (size_t i = 1; i < nf; i++)
        ck_assert_int_ge(rank[f[i - 1].verdict], rank[f[i].verdict]);
    free(rows);
    analysis_destroy(a);
    golden_free(&g);
}

START_TEST(test_verdicts)
{
    const verdict_case *c = &verdict_cases[_i];
    for (int order = 0; order < ORDER__COUNT; order++)
        for (size_t batch = 0; batch <= 5; batch += 5)
            check_verdict_case(c, (enum order)order, batch);
}
END_TEST

/* The texts cite the numbers. */
START_TEST(test_verdict_texts)
{
    golden g;
    golden_init(&g);
    golden_queue_info(&g, "host", TS_QUEUE_HOST, 10, "GeneratorOp", "train");
    static const uint64_t p[] = {0, 0, 0, 2};
    push_samples(&g, "host", TS_QUEUE_HOST, 10, p, 4, 20, 0);
    analysis *a = golden_analyse(&g, NULL, 0);
    queue_finding f;
    ck_assert_uint_eq(analysis_queue_findings(a, &f, 1), 1);
    /* empty 15 of 20 = 75.0 %, usage 0.5 / 10 = 5.0 % */
    ck_assert_msg(strstr(f.text, "75.0%") && strstr(f.text, "20 samples") && strstr(f.text, "5.0%"),
                  "text: %s", f.text);
    ck_assert_ptr_nonnull(strstr(f.text, "GeneratorOp"));
    ck_assert_ptr_nonnull(strstr(f.suggestion, "GeneratorOp"));
    /* max 0: nothing written */
    ck_assert_uint_eq(analysis_queue_findings(a, &f, 0), 0);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

/* Valid UTF-8 without control characters. */
static int clean_text(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        if (*p < 0x20 || *p == 0x7f)
            return 0;
        if (*p < 0x80) {
            p++;
            continue;
        }
        int n = (*p & 0xe0) == 0xc0 ? 1 : (*p & 0xf0) == 0xe0 ? 2 : (*p & 0xf8) == 0xf0 ? 3 : -1;
        if (n < 0 || *p == 0xc0 || *p == 0xc1 || *p > 0xf4)
            return 0;
        for (int k = 1; k <= n; k++)
            if ((p[k] & 0xc0) != 0x80)
                return 0;
        p += n + 1;
    }
    return 1;
}

START_TEST(test_odd_names)
{
#define NB(s)                                                                                      \
    {                                                                                              \
        s, sizeof(s) - 1                                                                           \
    }
    static const struct {
        const char *bytes;
        uint32_t len;
    } names[] = {
        NB("a,b"),
        NB("say \"hi\""),
        NB("two\nlines\r"),
        NB("bad \xff\xfe utf8 \xc3"),
        NB("caf\xc3\xa9 \xe2\x82\xac"),
        NB("nul\0inside"),
        NB("a very long queue name that goes on and on well past the forty bytes kept "
           "\xe2\x82\xac"),
        NB("\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac"
           "\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac"),
    };
#undef NB
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        golden g;
        golden_init(&g);
        uint32_t id = golden_name_n(&g, names[i].bytes, names[i].len);
        uint32_t prod = golden_name_n(&g, names[i].bytes, names[i].len - 1);
        for (int k = 0; k < 12; k++) {
            ts_event *e = golden_instant(&g, TS_KIND_QUEUE_SAMPLE, 1, 100 + k);
            e->name = id;
            e->aux = TS_QUEUE_HOST;
            e->v0 = 0;
            e->v1 = 4;
        }
        ts_event *info = golden_instant(&g, TS_KIND_QUEUE_INFO, 1, 0);
        info->name = id;
        info->aux = TS_QUEUE_HOST;
        info->v0 = 4;
        info->v1 = (uint64_t)prod << 32;
        analysis *a = golden_analyse(&g, NULL, 0);
        queue_stat *rows;
        ck_assert_uint_eq(analysis_queues(a, &rows), 1);
        uint32_t len;
        const char *got = analysis_name(a, rows[0].name, &len);
        ck_assert_uint_eq(len, names[i].len);
        ck_assert_mem_eq(got, names[i].bytes, len);
        queue_finding f;
        ck_assert_uint_eq(analysis_queue_findings(a, &f, 1), 1);
        ck_assert_uint_eq(f.verdict, QUEUE_VERDICT_DATA_PROCESSING);
        ck_assert_msg(clean_text(f.text), "case %zu text: %s", i, f.text);
        ck_assert_msg(clean_text(f.suggestion), "case %zu suggestion: %s", i, f.suggestion);
        ck_assert_uint_lt(strlen(f.text), sizeof f.text);
        free(rows);
        analysis_destroy(a);
        golden_free(&g);
    }
}
END_TEST

/* ---- Buckets ------------------------------------------------------------------------------ */

typedef struct bucket_log {
    queue_bucket b[512];
    size_t n;
} bucket_log;

static void log_bucket(void *ctx, const queue_bucket *b)
{
    bucket_log *l = ctx;
    ck_assert_uint_lt(l->n, 512);
    l->b[l->n++] = *b;
}

#define SEC 1000000ull /* us */

/* Replaces each logged bucket's queue index by the queue's name id. */
static void log_names(const analysis *a, bucket_log *l)
{
    queue_stat *rows;
    size_t n = analysis_queues(a, &rows);
    for (size_t i = 0; i < l->n; i++) {
        ck_assert_uint_lt(l->b[i].queue, n);
        l->b[i].queue = rows[l->b[i].queue].name;
    }
    free(rows);
}

START_TEST(test_buckets_arithmetic)
{
    golden g;
    golden_init(&g);
    /* 10 ms buckets; times in us. Capacity 4. */
    golden_queue(&g, "q", TS_QUEUE_PIPELINE, 1000, 0, 4);  /* [0,10ms) */
    golden_queue(&g, "q", TS_QUEUE_PIPELINE, 5000, 4, 4);  /* [0,10ms) */
    golden_queue(&g, "q", TS_QUEUE_PIPELINE, 12000, 2, 4); /* [10,20ms) */
    golden_queue(&g, "q", TS_QUEUE_PIPELINE, 19999, 3, 4); /* [10,20ms) */
    golden_queue(&g, "q", TS_QUEUE_PIPELINE, 20000, 1, 4); /* [20,30ms) */
    golden_queue(&g, "r", TS_QUEUE_HOST, 15000, 5, 5);     /* another queue, index 1 */
    bucket_log log = {.n = 0};
    analysis_sink sink = {.ctx = &log, .queue_bucket = log_bucket};
    analysis_config cfg;
    analysis_config_init(&cfg);
    cfg.bucket_ns = 10 * MS;
    cfg.sink = &sink;
    analysis *a = golden_analyse(&g, &cfg, 0);
    ck_assert_uint_eq(log.n, 4);
    /* Per queue, ascending; queue 0 first since finish walks queues in order. */
    const struct {
        uint32_t queue;
        uint64_t begin_ms;
        uint64_t samples;
        double usage, empty, full;
    } want[] = {
        {0, 0, 2, 0.5, 0.5, 0.5},    /* (0/4 + 4/4) / 2; one empty, one full */
        {0, 10, 2, 0.625, 0.0, 0.0}, /* (2/4 + 3/4) / 2 */
        {0, 20, 1, 0.25, 0.0, 0.0},  /* 1/4 */
        {1, 10, 1, 1.0, 0.0, 1.0},   /* 5/5 */
    };
    for (size_t i = 0; i < 4; i++) {
        ck_assert_uint_eq(log.b[i].queue, want[i].queue);
        ck_assert_uint_eq(log.b[i].begin_ns, want[i].begin_ms * MS);
        ck_assert_uint_eq(log.b[i].end_ns, want[i].begin_ms * MS + 10 * MS);
        ck_assert_uint_eq(log.b[i].samples, want[i].samples);
        ck_assert_double_eq_tol(log.b[i].avg_usage, want[i].usage, EPS);
        ck_assert_double_eq_tol(log.b[i].empty_share, want[i].empty, EPS);
        ck_assert_double_eq_tol(log.b[i].full_share, want[i].full, EPS);
    }
    /* The recent ring holds the same, oldest first. */
    queue_bucket r[8];
    ck_assert_uint_eq(analysis_queue_recent(a, 0, r, 8), 3);
    ck_assert_uint_eq(r[0].begin_ns, 0);
    ck_assert_uint_eq(r[2].begin_ns, 20 * MS);
    ck_assert_uint_eq(analysis_queue_recent(a, 0, r, 2), 2);
    ck_assert_uint_eq(r[0].begin_ns, 10 * MS);
    ck_assert_uint_eq(analysis_queue_recent(a, 1, r, 8), 1);
    ck_assert_uint_eq(analysis_queue_recent(a, 2, r, 8), 0);
    /* Finishing again hands nothing twice. */
    analysis_finish(a);
    ck_assert_uint_eq(log.n, 4);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

/* 1 s buckets keep a window of 4 open buckets: bucket k completes when a sample of bucket k + 4
 * or later arrives; a sample older than the completed buckets counts only in the totals. */
START_TEST(test_buckets_completion)
{
    bucket_log log = {.n = 0};
    analysis_sink sink = {.ctx = &log, .queue_bucket = log_bucket};
    analysis_config cfg;
    analysis_config_init(&cfg);
    cfg.sink = &sink;
    golden g;
    golden_init(&g);
    analysis *a = analysis_create(&cfg, golden_names, &g);
    uint32_t q = golden_name(&g, "q");
    const struct {
        uint64_t t_us, size;
        size_t sink_after; /* buckets handed to the sink after this sample */
    } steps[] = {
        {SEC / 2, 1, 0},                /* b0 */
        {SEC + SEC / 2, 2, 0},          /* b1 */
        {SEC * 7 / 10, 3, 0},           /* b0, out of order */
        {2 * SEC + SEC / 5, 4, 0},      /* b2 */
        {3 * SEC + 9 * SEC / 10, 4, 0}, /* b3 */
        {4 * SEC + SEC / 10, 0, 1},     /* b4: b0 completes */
        {SEC * 9 / 10, 4, 1},           /* b0 again: late, totals only */
        {SEC + SEC / 5, 0, 1},          /* b1, still open */
        {6 * SEC, 2, 3},                /* b6: b1 and b2 complete */
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        ts_event e = {.kind = TS_KIND_QUEUE_SAMPLE,
                      .tid = 1,
                      .device = TS_DEVICE_HOST,
                      .name = q,
                      .begin_ns = steps[i].t_us * US,
                      .end_ns = steps[i].t_us * US,
                      .v0 = steps[i].size,
                      .v1 = 4};
        analysis_feed(a, &e, 1);
        ck_assert_msg(log.n == steps[i].sink_after, "after sample %zu: %zu buckets", i, log.n);
    }
    /* Before finish, the live view shows completed and open buckets: b0 b1 b2 | b3 b4 b6. */
    queue_bucket r[8];
    ck_assert_uint_eq(analysis_queue_recent(a, 0, r, 8), 6);
    ck_assert_uint_eq(r[3].begin_ns, 3 * SEC * US);
    ck_assert_uint_eq(r[5].begin_ns, 6 * SEC * US);
    analysis_finish(a);
    ck_assert_uint_eq(log.n, 6);
    const struct {
        uint64_t begin_s, samples;
        double usage;
    } want[] = {
        {0, 2, 0.5},  /* sizes 1, 3 of 4: (0.25 + 0.75) / 2; the late 4 is not in it */
        {1, 2, 0.25}, /* 2, 0: (0.5 + 0) / 2 */
        {2, 1, 1.0},  /* 4 */
        {3, 1, 1.0},  /* 4 */
        {4, 1, 0.0},  /* 0 */
        {6, 1, 0.5},  /* 2 */
    };
    for (size_t i = 0; i < 6; i++) {
        ck_assert_uint_eq(log.b[i].begin_ns, want[i].begin_s * SEC * US);
        ck_assert_uint_eq(log.b[i].samples, want[i].samples);
        ck_assert_double_eq_tol(log.b[i].avg_usage, want[i].usage, EPS);
    }
    /* The totals count every sample, the late one too: 9 samples, sizes sum 20. */
    queue_stat *rows;
    ck_assert_uint_eq(analysis_queues(a, &rows), 1);
    ck_assert_uint_eq(rows[0].samples, 9);
    ck_assert_double_eq_tol(rows[0].avg_size, 20.0 / 9.0, EPS);
    free(rows);
    /* Feeding after finish: an older bucket is late, a newer one opens; each bucket once. */
    ts_event e = {.kind = TS_KIND_QUEUE_SAMPLE, .name = q, .v0 = 1, .v1 = 4};
    e.begin_ns = e.end_ns = 6 * SEC * US + 1;
    analysis_feed(a, &e, 1);
    e.begin_ns = e.end_ns = 8 * SEC * US;
    analysis_feed(a, &e, 1);
    analysis_finish(a);
    ck_assert_uint_eq(log.n, 7);
    ck_assert_uint_eq(log.b[6].begin_ns, 8 * SEC * US);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

/* Samples out of order within a drain interval (here up to 0.5 s) give the same buckets as in
 * time order, and every bucket reaches the sink exactly once, in time order per queue. */
START_TEST(test_buckets_out_of_order)
{
    golden g;
    golden_init(&g);
    static const uint64_t pa[] = {0, 1, 2, 3, 4, 4, 4};
    static const uint64_t pb[] = {5, 0, 0};
    for (size_t i = 0; i < 200; i++) {
        golden_queue(&g, "a", TS_QUEUE_HOST, i * 100000 + 7, pa[i % 7], 4);
        golden_queue(&g, "b", TS_QUEUE_DEVICE, i * 100000 + 50000, pb[i % 3], 5);
    }
    bucket_log sorted = {.n = 0}, mixed = {.n = 0};
    analysis_sink sink = {.ctx = &sorted, .queue_bucket = log_bucket};
    analysis_config cfg;
    analysis_config_init(&cfg);
    cfg.sink = &sink;
    analysis *a = golden_analyse(&g, &cfg, 0);
    ck_assert_uint_eq(sorted.b[0].queue, 0); /* "a", seen first */
    log_names(a, &sorted);
    analysis_destroy(a);
    /* 200 samples of each queue 0.1 s apart: 20 one-second buckets each. */
    ck_assert_uint_eq(sorted.n, 40);

    /* Reverse blocks of 10 events (5 samples of each queue, 0.5 s): a drain's worth. */
    for (size_t i = 0; i + 10 <= g.nev; i += 10)
        for (size_t j = 0; j < 5; j++) {
            ts_event t = g.ev[i + j];
            g.ev[i + j] = g.ev[i + 9 - j];
            g.ev[i + 9 - j] = t;
        }
    sink.ctx = &mixed;
    a = golden_analyse(&g, &cfg, 7);
    /* Here "b" comes first: compare buckets by queue name, not index. */
    log_names(a, &mixed);
    ck_assert_uint_eq(mixed.n, 40);
    for (uint32_t q = golden_name(&g, "a"); q <= golden_name(&g, "b"); q++) {
        size_t k = 0;
        uint64_t last = 0;
        for (size_t i = 0; i < mixed.n; i++) {
            if (mixed.b[i].queue != q)
                continue;
            ck_assert(k == 0 || mixed.b[i].begin_ns > last);
            last = mixed.b[i].begin_ns;
            k++;
        }
        ck_assert_uint_eq(k, 20);
    }
    for (size_t i = 0; i < sorted.n; i++) {
        const queue_bucket *s = &sorted.b[i];
        int found = 0;
        for (size_t j = 0; j < mixed.n; j++) {
            const queue_bucket *m = &mixed.b[j];
            if (m->queue == s->queue && m->begin_ns == s->begin_ns) {
                ck_assert_uint_eq(m->samples, s->samples);
                ck_assert_double_eq(m->avg_usage, s->avg_usage);
                ck_assert_double_eq(m->empty_share, s->empty_share);
                ck_assert_double_eq(m->full_share, s->full_share);
                found++;
            }
        }
        ck_assert_int_eq(found, 1);
        ck_assert_uint_eq(s->samples, 10);
    }
    /* Queue a, first second: sizes 0,1,2,3,4,4,4,0,1,2 of 4: usage 21/40, two 0s, three 4s. */
    ck_assert_uint_eq(sorted.b[0].queue, golden_name(&g, "a"));
    ck_assert_double_eq_tol(sorted.b[0].avg_usage, 21.0 / 40.0, EPS);
    ck_assert_double_eq_tol(sorted.b[0].empty_share, 0.2, EPS);
    ck_assert_double_eq_tol(sorted.b[0].full_share, 0.3, EPS);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

START_TEST(test_recent_ring_bound)
{
    golden g;
    golden_init(&g);
    for (uint64_t s = 0; s < 10; s++)
        golden_queue(&g, "q", TS_QUEUE_PIPELINE, s * SEC + 1, s % 5, 4);
    analysis_config cfg;
    analysis_config_init(&cfg);
    cfg.recent_buckets = 3;
    analysis *a = golden_analyse(&g, &cfg, 0);
    queue_bucket r[10];
    ck_assert_uint_eq(analysis_queue_recent(a, 0, r, 10), 3);
    /* The last three seconds, 7 8 9, with sizes 2 3 4 of 4. */
    for (int i = 0; i < 3; i++) {
        ck_assert_uint_eq(r[i].begin_ns, (uint64_t)(7 + i) * SEC * US);
        ck_assert_double_eq_tol(r[i].avg_usage, (2 + i) / 4.0, EPS);
    }
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

/* Timestamps at the ends of the clock, with 1 ns buckets: no overflow, no endless loop, each
 * bucket once. */
START_TEST(test_buckets_wild_times)
{
    bucket_log log = {.n = 0};
    analysis_sink sink = {.ctx = &log, .queue_bucket = log_bucket};
    analysis_config cfg;
    analysis_config_init(&cfg);
    cfg.bucket_ns = 1;
    cfg.sink = &sink;
    golden g;
    golden_init(&g);
    uint32_t q = golden_name(&g, "q");
    analysis *a = analysis_create(&cfg, golden_names, &g);
    static const uint64_t t[] = {UINT64_MAX, 0, UINT64_MAX - 1, 5, UINT64_MAX};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        ts_event e = {.kind = TS_KIND_QUEUE_SAMPLE,
                      .name = q,
                      .begin_ns = t[i],
                      .end_ns = t[i],
                      .v0 = 1,
                      .v1 = 2};
        analysis_feed(a, &e, 1);
    }
    queue_bucket r[8];
    ck_assert_uint_le(analysis_queue_recent(a, 0, r, 8), 3);
    analysis_finish(a);
    analysis_finish(a);
    /* The first sample opens the far bucket; 0 and 5 are then far too late. */
    ck_assert_uint_eq(log.n, 1);
    ck_assert_uint_eq(log.b[0].samples, 3);
    queue_stat *rows;
    ck_assert_uint_eq(analysis_queues(a, &rows), 1);
    ck_assert_uint_eq(rows[0].samples, 5);
    free(rows);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("queues");
    TCase *tc = tcase_create("stats");
    tcase_add_test(tc, test_stats_arithmetic);
    tcase_add_test(tc, test_first_seen_order);
    suite_add_tcase(s, tc);
    tc = tcase_create("verdicts");
    tcase_add_loop_test(tc, test_verdicts, 0,
                        (int)(sizeof verdict_cases / sizeof verdict_cases[0]));
    tcase_add_test(tc, test_verdict_texts);
    tcase_add_test(tc, test_odd_names);
    suite_add_tcase(s, tc);
    tc = tcase_create("buckets");
    tcase_add_test(tc, test_buckets_arithmetic);
    tcase_add_test(tc, test_buckets_completion);
    tcase_add_test(tc, test_buckets_out_of_order);
    tcase_add_test(tc, test_recent_ring_bound);
    tcase_add_test(tc, test_buckets_wild_times);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
