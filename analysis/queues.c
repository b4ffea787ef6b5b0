/* queues: data-queue usage, usage over time in buckets, and the bottleneck verdicts
 * (data_queues.csv and summary.json "queue_findings", docs/report-format.md).
 *
 * Per queue (keyed by its name id) the totals are integer sums, so they do not depend on the
 * order samples arrive in. Usage per sample is size / capacity in parts per billion: summing
 * integers keeps averages exact whatever the order, where summing doubles would not.
 *
 * Buckets are aligned on multiples of bucket_ns of the clock, not on the first sample, so the
 * same sample always lands in the same bucket. Samples arrive out of order by up to a drain
 * interval, so each queue keeps a window of W open buckets (W covers at least 1 s and 4
 * buckets, at most 64): bucket k completes when a sample of bucket k + W or later arrives, or
 * at finish, and goes to the sink then, once, in time order per queue. A sample older than what
 * was already completed still counts in the totals but in no bucket (counted as late). A bucket
 * without samples is not emitted. */
#include "analysis_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define Q_MAX         1024 /* distinct queues kept; samples of further queues are counted only */
#define Q_MIN_SAMPLES 10   /* fewer samples than this: QUEUE_VERDICT_NONE */
#define Q_HIGH        0.70 /* average usage at or above: "high" / filled */
#define Q_LOW         0.30 /* average usage at or below: "low" */
#define Q_MOSTLY      0.50 /* share of samples empty (or full) for "mostly empty" ("often full") */
#define PPB           1000000000ull

/* Lateness tolerated for buckets: at least this much event time, at least 4 buckets, at most
 * QB_WINDOW_MAX buckets (very short buckets then tolerate less). */
#define QB_LATE_NS    1000000000ull
#define QB_WINDOW_MIN 4u
#define QB_WINDOW_MAX 64u
#define QB_K_MAX      (UINT64_MAX / 2)

typedef struct qstats {
    uint64_t n, empty, full;
    uint64_t size_sum;   /* sizes, each clamped to 2^32-1 */
    uint64_t usage_ppb;  /* sum of size / capacity, in parts per billion, over samples with one */
    uint64_t nocap_n;    /* samples without a capacity: their usage comes from the queue's */
    uint64_t nocap_size; /* capacity when read */
} qstats;

typedef struct qopen {
    uint64_t k; /* bucket index: begin = k * bucket_ns */
    qstats s;   /* s.n == 0: free slot */
} qopen;

typedef struct queue {
    uint32_t name, producer, consumer, role;
    int has_info;
    uint64_t info_cap;
    uint64_t sample_cap, sample_cap_t; /* capacity of the latest sample that had one */
    qstats tot;

    int started;
    uint64_t newest;    /* newest bucket index seen */
    uint64_t done_next; /* buckets below this are completed */
    uint64_t cur_begin; /* begin of bucket `newest`, for the fast path */
    uint64_t late;      /* samples older than the completed buckets */
    qopen *open;        /* window slots, by k % window */
    queue_bucket *recent;
    uint32_t recent_head, recent_n;
} queue;

typedef struct queues_state {
    queue *q;
    uint32_t n, cap;
    index_map by_name;
    uint32_t last_name, last_index; /* one-entry cache: samples of one queue come in runs */
    uint64_t bucket_ns;
    uint32_t window, recent_max;
    uint64_t dropped; /* samples of queues beyond Q_MAX or lost to out of memory */
} queues_state;

static void *queues_create(analysis *a)
{
    queues_state *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    const analysis_config *cfg = analysis_cfg(a);
    s->bucket_ns = cfg->bucket_ns ? cfg->bucket_ns : 1000000000ull;
    uint64_t w = (QB_LATE_NS + s->bucket_ns - 1) / s->bucket_ns + 2;
    s->window = w < QB_WINDOW_MIN ? QB_WINDOW_MIN : w > QB_WINDOW_MAX ? QB_WINDOW_MAX : (uint32_t)w;
    s->recent_max = cfg->recent_buckets ? cfg->recent_buckets : 120;
    s->last_index = UINT32_MAX;
    return s;
}

static void queues_destroy(void *state)
{
    queues_state *s = state;
    for (uint32_t i = 0; i < s->n; i++) {
        free(s->q[i].open);
        free(s->q[i].recent);
    }
    free(s->q);
    index_map_free(&s->by_name);
    free(s);
}

static uint32_t queue_lookup(queues_state *s, uint32_t name)
{
    if (name == s->last_name && s->last_index != UINT32_MAX)
        return s->last_index;
    uint32_t i = index_map_find(&s->by_name, name);
    if (i == UINT32_MAX) {
        if (s->n >= Q_MAX)
            return UINT32_MAX;
        if (s->n == s->cap) {
            uint32_t nc = s->cap ? s->cap * 2 : 8;
            queue *nq = realloc(s->q, nc * sizeof *nq);
            if (!nq)
                return UINT32_MAX;
            s->q = nq;
            s->cap = nc;
        }
        queue *q = &s->q[s->n];
        memset(q, 0, sizeof *q);
        q->name = name;
        q->open = calloc(s->window, sizeof *q->open);
        q->recent = calloc(s->recent_max, sizeof *q->recent);
        if (!q->open || !q->recent || index_map_get(&s->by_name, name, s->n, NULL) == UINT32_MAX) {
            free(q->open);
            free(q->recent);
            return UINT32_MAX;
        }
        i = s->n++;
    }
    s->last_name = name;
    s->last_index = i;
    return i;
}

static uint32_t clean_role(uint32_t aux)
{
    return aux <= TS_QUEUE_DEVICE ? aux : TS_QUEUE_PIPELINE;
}

/* The capacity usage is measured against: the samples' own when they carry one (it wins over
 * QUEUE_INFO's), else the registered one; 0 when unknown. */
static uint64_t queue_capacity(const queue *q)
{
    return q->sample_cap ? q->sample_cap : q->info_cap;
}

/* One sample, measured once and added to the totals and to its bucket. */
typedef struct qsample {
    uint64_t size; /* clamped to 2^32-1 */
    uint64_t usage_ppb;
    int empty, full, nocap;
} qsample;

static qsample qsample_of(uint64_t size, uint64_t cap)
{
    qsample x = {.size = size > UINT32_MAX ? UINT32_MAX : size, .empty = size == 0};
    if (!cap) {
        x.nocap = 1;
    } else if (size >= cap) {
        x.full = 1;
        x.usage_ppb = PPB;
    } else if (size <= UINT64_MAX / PPB) {
        x.usage_ppb = size * PPB / cap;
    } else {
        x.usage_ppb = (uint64_t)((double)size / (double)cap * (double)PPB);
    }
    return x;
}

static void qstats_add(qstats *s, const qsample *x)
{
    s->n++;
    s->size_sum += x->size;
    s->empty += (uint64_t)x->empty;
    s->full += (uint64_t)x->full;
    s->usage_ppb += x->usage_ppb;
    if (x->nocap) {
        s->nocap_n++;
        s->nocap_size += x->size;
    }
}

static double qstats_usage(const qstats *s, uint64_t cap)
{
    if (!s->n)
        return 0;
    double used = (double)s->usage_ppb / (double)PPB;
    if (s->nocap_n && cap) {
        double extra = (double)s->nocap_size / (double)cap;
        used += extra < (double)s->nocap_n ? extra : (double)s->nocap_n;
    }
    return used / (double)s->n;
}

static void complete_bucket(queues_state *s, analysis *a, uint32_t qi, qopen *o)
{
    queue *q = &s->q[qi];
    uint64_t begin = o->k * s->bucket_ns;
    uint64_t end = begin + s->bucket_ns < begin ? UINT64_MAX : begin + s->bucket_ns;
    queue_bucket b = {
        .queue = qi,
        .begin_ns = begin,
        .end_ns = end,
        .samples = o->s.n,
        .avg_usage = qstats_usage(&o->s, queue_capacity(q)),
        .empty_share = (double)o->s.empty / (double)o->s.n,
        .full_share = (double)o->s.full / (double)o->s.n,
    };
    q->recent[q->recent_head] = b;
    q->recent_head = (q->recent_head + 1) % s->recent_max;
    if (q->recent_n < s->recent_max)
        q->recent_n++;
    memset(o, 0, sizeof *o);
    const analysis_sink *sink = analysis_cfg(a)->sink;
    if (sink && sink->queue_bucket)
        sink->queue_bucket(sink->ctx, &b);
}

/* Completes the open buckets below limit, oldest first. */
static void complete_below(queues_state *s, analysis *a, uint32_t qi, uint64_t limit)
{
    queue *q = &s->q[qi];
    if (limit <= q->done_next)
        return;
    uint64_t stop = limit - q->done_next > s->window ? q->done_next + s->window : limit;
    for (uint64_t k = q->done_next; k < stop; k++) {
        qopen *o = &q->open[k % s->window];
        if (o->s.n && o->k == k)
            complete_bucket(s, a, qi, o);
    }
    q->done_next = limit;
}

static void bucket_add(queues_state *s, analysis *a, uint32_t qi, uint64_t t, const qsample *x)
{
    queue *q = &s->q[qi];
    uint64_t k;
    if (q->started && t >= q->cur_begin && t - q->cur_begin < s->bucket_ns) {
        k = q->newest;
    } else {
        k = t / s->bucket_ns;
        /* A wild timestamp must not make newest + window overflow. */
        if (k > QB_K_MAX)
            k = QB_K_MAX;
        if (!q->started) {
            q->started = 1;
            q->newest = k;
            q->done_next = k >= s->window - 1 ? k - (s->window - 1) : 0;
            q->cur_begin = k * s->bucket_ns;
        } else if (k > q->newest) {
            if (k >= s->window - 1)
                complete_below(s, a, qi, k - (s->window - 1));
            q->newest = k;
            q->cur_begin = k * s->bucket_ns;
        }
    }
    if (k < q->done_next) {
        q->late++;
        return;
    }
    qopen *o = &q->open[k % s->window];
    o->k = k;
    qstats_add(&o->s, x);
}

static void queues_feed(void *state, analysis *a, const ts_event *ev)
{
    queues_state *s = state;
    uint32_t qi = queue_lookup(s, ev->name);
    if (qi == UINT32_MAX) {
        s->dropped++;
        return;
    }
    queue *q = &s->q[qi];
    if (ev->kind == TS_KIND_QUEUE_INFO) {
        q->has_info = 1;
        q->role = clean_role(ev->aux);
        q->info_cap = ev->v0;
        q->producer = (uint32_t)(ev->v1 >> 32);
        q->consumer = (uint32_t)ev->v1;
        return;
    }
    /* The collector repeats the role in each sample; QUEUE_INFO's wins when there is one. */
    if (!q->has_info)
        q->role = clean_role(ev->aux);
    uint64_t t = ev->begin_ns, size = ev->v0, cap = ev->v1;
    if (cap &&
        (t > q->sample_cap_t || (t == q->sample_cap_t && cap > q->sample_cap) || !q->sample_cap)) {
        q->sample_cap = cap;
        q->sample_cap_t = t;
    }
    qsample x = qsample_of(size, cap);
    qstats_add(&q->tot, &x);
    bucket_add(s, a, qi, t, &x);
}

static void queues_finish(void *state, analysis *a)
{
    queues_state *s = state;
    for (uint32_t i = 0; i < s->n; i++)
        if (s->q[i].started)
            complete_below(s, a, i, s->q[i].newest + 1);
}

const analysis_module queues_module = {
    .name = "queues",
    .kinds = KIND_BIT(TS_KIND_QUEUE_INFO) | KIND_BIT(TS_KIND_QUEUE_SAMPLE),
    .create = queues_create,
    .feed = queues_feed,
    .finish = queues_finish,
    .destroy = queues_destroy,
};

/* ---- Accessors ------------------------------------------------------------------------- */

static queue_stat stat_of(const queue *q)
{
    uint64_t cap = queue_capacity(q);
    queue_stat st = {
        .name = q->name,
        .producer = q->producer,
        .consumer = q->consumer,
        .role = q->role,
        .capacity = cap,
        .samples = q->tot.n,
    };
    if (q->tot.n) {
        st.avg_size = (double)q->tot.size_sum / (double)q->tot.n;
        st.avg_usage = qstats_usage(&q->tot, cap);
        st.empty_share = (double)q->tot.empty / (double)q->tot.n;
        st.full_share = (double)q->tot.full / (double)q->tot.n;
    }
    return st;
}

size_t analysis_queues(const analysis *a, queue_stat **rows)
{
    const queues_state *s = analysis_state(a, &queues_module);
    *rows = NULL;
    if (!s || !s->n)
        return 0;
    *rows = malloc(s->n * sizeof **rows);
    if (!*rows)
        return 0;
    for (uint32_t i = 0; i < s->n; i++)
        (*rows)[i] = stat_of(&s->q[i]);
    return s->n;
}

/* Completed buckets, then the still open ones (the newest may still be filling), so that a live
 * view is current without calling analysis_finish. */
size_t analysis_queue_recent(const analysis *a, uint32_t queue_index, queue_bucket *out, size_t max)
{
    const queues_state *s = analysis_state(a, &queues_module);
    if (!s || queue_index >= s->n || !max)
        return 0;
    const queue *q = &s->q[queue_index];
    queue_bucket open[QB_WINDOW_MAX];
    size_t nopen = 0;
    if (q->started) {
        for (uint64_t k = q->done_next; k <= q->newest && nopen < s->window; k++) {
            const qopen *o = &q->open[k % s->window];
            if (!o->s.n || o->k != k)
                continue;
            uint64_t begin = k * s->bucket_ns;
            open[nopen++] = (queue_bucket){
                .queue = queue_index,
                .begin_ns = begin,
                .end_ns = begin + s->bucket_ns < begin ? UINT64_MAX : begin + s->bucket_ns,
                .samples = o->s.n,
                .avg_usage = qstats_usage(&o->s, queue_capacity(q)),
                .empty_share = (double)o->s.empty / (double)o->s.n,
                .full_share = (double)o->s.full / (double)o->s.n,
            };
        }
    }
    size_t total = q->recent_n + nopen;
    size_t skip = total > max ? total - max : 0;
    size_t n = 0;
    uint32_t first = (q->recent_head + s->recent_max - q->recent_n) % s->recent_max;
    for (size_t i = 0; i < q->recent_n; i++) {
        if (i < skip)
            continue;
        out[n++] = q->recent[(first + i) % s->recent_max];
    }
    for (size_t i = 0; i < nopen; i++) {
        if (q->recent_n + i < skip)
            continue;
        out[n++] = open[i];
    }
    return n;
}

/* ---- Verdicts ---------------------------------------------------------------------------- */

#define NAME_MAX_TEXT 40

/* A name fit for a one-line text: printable ASCII and valid UTF-8 kept, any other byte '?',
 * quotes turned into apostrophes (the text quotes names), cut at a character boundary with
 * "..." after NAME_MAX_TEXT bytes. "?" for an empty name. */
static void text_name(const analysis *a, uint32_t id, char *dst)
{
    uint32_t len = 0;
    const unsigned char *p = (const unsigned char *)analysis_name(a, id, &len);
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t l = p[i] >= 0x80 ? utf8_len(p + i, len - i) : 1;
        if (o + (l ? l : 1) > NAME_MAX_TEXT) {
            memcpy(dst + o, "...", 3);
            o += 3;
            break;
        }
        if (l > 1) {
            memcpy(dst + o, p + i, l);
            o += l;
            i += l;
            continue;
        }
        unsigned char c = p[i++];
        dst[o++] = c == '"' ? '\'' : (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    if (!o)
        dst[o++] = '?';
    dst[o] = 0;
}

/* snprintf that never leaves a cut UTF-8 sequence at the end of a truncated text. */
static void textf(char *dst, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void textf(char *dst, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(dst, cap, fmt, ap);
    va_end(ap);
    if (n < 0) {
        dst[0] = 0;
        return;
    }
    if ((size_t)n < cap)
        return;
    size_t end = cap - 1;
    size_t lead = end;
    while (lead > 0 && ((unsigned char)dst[lead - 1] & 0xc0) == 0x80)
        lead--;
    if (lead > 0 && (unsigned char)dst[lead - 1] >= 0xc0 &&
        utf8_len((const unsigned char *)dst + lead - 1, end - (lead - 1)) == 0)
        dst[lead - 1] = 0;
}

/* The suggestion for a pipeline stage, chosen by keywords in its name. */
static void stage_suggestion(const analysis *a, uint32_t stage, char *out, size_t cap)
{
    char nm[NAME_MAX_TEXT + 4];
    text_name(a, stage, nm);
    uint32_t len = 0;
    const char *p = analysis_name(a, stage, &len);
    if (!stage) {
        textf(out, cap,
              "speed up data processing: increase num_parallel_workers (DataLoader "
              "num_workers) of the slowest pipeline stage");
    } else if (names_contains(p, len, "generator")) {
        textf(out, cap,
              "increase num_parallel_workers of \"%s\" and replace the Python generator with a "
              "faster reader (a pre-converted record format)",
              nm);
    } else if (names_contains(p, len, "batch")) {
        textf(out, cap, "adjust prefetch_size of \"%s\" (prefetch more batches)", nm);
    } else if (names_contains(p, len, "map") || names_contains(p, len, "augment") ||
               names_contains(p, len, "transform")) {
        textf(out, cap,
              "increase num_parallel_workers of \"%s\"; if it runs a Python function, optimize "
              "that function",
              nm);
    } else if (names_contains(p, len, "dataset") || names_contains(p, len, "source") ||
               names_contains(p, len, "loader") || names_contains(p, len, "reader")) {
        textf(out, cap, "increase num_parallel_workers (DataLoader num_workers) of \"%s\"", nm);
    } else {
        textf(out, cap, "give stage \"%s\" more workers (num_parallel_workers)", nm);
    }
}

typedef struct qview {
    queue_stat st;
    int enough;
    int starved; /* empty in at least Q_MOSTLY of samples */
    int filled;  /* average usage >= Q_HIGH or full in at least Q_MOSTLY of samples */
    int high, low;
} qview;

typedef struct finding_sort {
    queue_finding f;
    int rank;
    double score;
    const char *name; /* for ties: by name, which does not depend on the order of arrival */
    uint32_t name_len;
} finding_sort;

static int verdict_rank(uint32_t v)
{
    switch (v) {
    case QUEUE_VERDICT_DATA_PROCESSING:
    case QUEUE_VERDICT_TRANSFER:
    case QUEUE_VERDICT_OPERATOR:
        return 3;
    case QUEUE_VERDICT_TRAINING:
        return 2;
    case QUEUE_VERDICT_OK:
        return 1;
    default:
        return 0;
    }
}

static int finding_cmp(const void *x, const void *y)
{
    const finding_sort *a = x, *b = y;
    if (a->rank != b->rank)
        return b->rank - a->rank;
    if (a->score != b->score)
        return a->score < b->score ? 1 : -1;
    uint32_t n = a->name_len < b->name_len ? a->name_len : b->name_len;
    int c = n ? memcmp(a->name, b->name, n) : 0;
    if (c || a->name_len != b->name_len)
        return c ? c : a->name_len < b->name_len ? -1 : 1;
    return a->f.queue < b->f.queue ? -1 : a->f.queue > b->f.queue;
}

#define PCT(x) ((x)*100.0)

/* What the host/device rules found about one queue: the case, which names the sentence that
 * says it, and its numbers. */
enum host_device_case {
    HD_DEVICE_FED,       /* a device queue that held data */
    HD_DEVICE_TRANSFER,  /* a starved device queue beside a filled host queue */
    HD_DEVICE_HOST_SLOW, /* a starved device queue beside a host queue not filled */
    HD_DEVICE_STARVED,   /* a starved device queue and no host queue */
    HD_HOST_DEVICE_FED,  /* a host queue beside a device queue that held data */
    HD_HOST_TRANSFER,    /* a filled host queue beside a starved device queue */
    HD_HOST_STARVED,     /* a host queue mostly empty (or not filled beside a starved device) */
    HD_HOST_FILLED,      /* a filled host queue and no device queue */
    HD_HOST_OK,          /* neither */
};

typedef struct host_device_verdict {
    enum host_device_case why;
    uint32_t verdict; /* QUEUE_VERDICT_* */
    uint32_t op;      /* the stage it blames (a producer) or the slower consumer, 0: none */
    double score;     /* the strength of the evidence, for the order of findings */
    int other;        /* the host or device queue it compares with (an index), -1: none */
} host_device_verdict;

/* Host and device queues: device queue non-empty -> data preparation is
 * not the bottleneck; host queue mostly empty -> data processing; host queue filled and device
 * queue mostly empty -> transfer. */
static host_device_verdict host_device_judge(const qview *v, uint32_t n, uint32_t i)
{
    const qview *me = &v[i];
    /* The device queue that says most (the emptiest), and the fullest host queue. */
    int dev = -1, host = -1;
    for (uint32_t j = 0; j < n; j++) {
        if (!v[j].enough)
            continue;
        if (v[j].st.role == TS_QUEUE_DEVICE &&
            (dev < 0 || v[j].st.empty_share > v[dev].st.empty_share))
            dev = (int)j;
        if (v[j].st.role == TS_QUEUE_HOST && (host < 0 || v[j].st.avg_usage > v[host].st.avg_usage))
            host = (int)j;
    }
    uint32_t fed = me->filled ? QUEUE_VERDICT_TRAINING : QUEUE_VERDICT_OK;
    if (me->st.role == TS_QUEUE_DEVICE) {
        if (!me->starved)
            return (host_device_verdict){HD_DEVICE_FED, fed, 0, me->st.avg_usage, -1};
        if (host >= 0 && v[host].filled)
            return (host_device_verdict){HD_DEVICE_TRANSFER, QUEUE_VERDICT_TRANSFER, 0,
                                         me->st.empty_share, host};
        uint32_t op = host >= 0 && v[host].st.producer ? v[host].st.producer : me->st.producer;
        return (host_device_verdict){host >= 0 ? HD_DEVICE_HOST_SLOW : HD_DEVICE_STARVED,
                                     QUEUE_VERDICT_DATA_PROCESSING, op, me->st.empty_share, host};
    }
    if (dev >= 0 && !v[dev].starved)
        return (host_device_verdict){HD_HOST_DEVICE_FED, fed, 0, me->st.avg_usage, dev};
    if (dev >= 0 && me->filled)
        return (host_device_verdict){HD_HOST_TRANSFER, QUEUE_VERDICT_TRANSFER, 0, me->st.avg_usage,
                                     dev};
    /* Mostly empty; or (with a starved device queue) not filled enough to blame transfer. */
    if (me->starved || dev >= 0)
        return (host_device_verdict){HD_HOST_STARVED, QUEUE_VERDICT_DATA_PROCESSING,
                                     me->st.producer, me->st.empty_share, -1};
    if (me->filled)
        return (host_device_verdict){HD_HOST_FILLED, QUEUE_VERDICT_TRAINING, me->st.consumer,
                                     me->st.avg_usage, -1};
    return (host_device_verdict){HD_HOST_OK, QUEUE_VERDICT_OK, 0, me->st.avg_usage, -1};
}

/* The sentence that says a host/device verdict about queue me (other: the queue it compares
 * with, when any), into f->text. */
static void host_device_text(const analysis *a, const qview *me, const qview *other,
                             const host_device_verdict *d, queue_finding *f)
{
    char qn[NAME_MAX_TEXT + 4], on[NAME_MAX_TEXT + 4] = "";
    text_name(a, me->st.name, qn);
    if (other)
        text_name(a, other->st.name, on);
    else if (d->why == HD_HOST_STARVED && me->st.producer)
        text_name(a, me->st.producer, on);
    const queue_stat *q = &me->st;
    unsigned long long samples = (unsigned long long)q->samples;
    switch (d->why) {
    case HD_DEVICE_FED:
        textf(f->text, sizeof f->text,
              "device queue \"%s\" held data in %.1f%% of %llu samples (average usage "
              "%.1f%%): data preparation is not the bottleneck",
              qn, PCT(1.0 - q->empty_share), samples, PCT(q->avg_usage));
        break;
    case HD_DEVICE_TRANSFER:
        textf(f->text, sizeof f->text,
              "device queue \"%s\" was empty in %.1f%% of %llu samples while host queue "
              "\"%s\" was %.1f%% used (full in %.1f%%): the host-to-device transfer is the "
              "bottleneck",
              qn, PCT(q->empty_share), samples, on, PCT(other->st.avg_usage),
              PCT(other->st.full_share));
        break;
    case HD_DEVICE_HOST_SLOW:
        textf(f->text, sizeof f->text,
              "device queue \"%s\" was empty in %.1f%% of %llu samples and host queue "
              "\"%s\" was only %.1f%% used (empty in %.1f%%): data processing is the "
              "bottleneck",
              qn, PCT(q->empty_share), samples, on, PCT(other->st.avg_usage),
              PCT(other->st.empty_share));
        break;
    case HD_DEVICE_STARVED:
        textf(f->text, sizeof f->text,
              "device queue \"%s\" was empty in %.1f%% of %llu samples (average usage "
              "%.1f%%): data preparation is the bottleneck",
              qn, PCT(q->empty_share), samples, PCT(q->avg_usage));
        break;
    case HD_HOST_DEVICE_FED:
        textf(f->text, sizeof f->text,
              "host queue \"%s\" was %.1f%% used (empty in %.1f%% of %llu samples) and device "
              "queue \"%s\" held data in %.1f%% of samples: data preparation is not the "
              "bottleneck",
              qn, PCT(q->avg_usage), PCT(q->empty_share), samples, on,
              PCT(1.0 - other->st.empty_share));
        break;
    case HD_HOST_TRANSFER:
        textf(f->text, sizeof f->text,
              "host queue \"%s\" was %.1f%% used (full in %.1f%% of %llu samples) while device "
              "queue \"%s\" was empty in %.1f%%: the host-to-device transfer is the bottleneck",
              qn, PCT(q->avg_usage), PCT(q->full_share), samples, on, PCT(other->st.empty_share));
        break;
    case HD_HOST_STARVED:
        textf(f->text, sizeof f->text,
              "host queue \"%s\" was empty in %.1f%% of %llu samples (average usage "
              "%.1f%%): data processing is the bottleneck%s%s%s",
              qn, PCT(q->empty_share), samples, PCT(q->avg_usage),
              q->producer ? ", its producer \"" : "", on, q->producer ? "\" is too slow" : "");
        break;
    case HD_HOST_FILLED:
        textf(f->text, sizeof f->text,
              "host queue \"%s\" was %.1f%% used (full in %.1f%% of %llu samples): the data "
              "pipeline keeps up, training is the slower side",
              qn, PCT(q->avg_usage), PCT(q->full_share), samples);
        break;
    case HD_HOST_OK:
        textf(f->text, sizeof f->text,
              "host queue \"%s\" was %.1f%% used (empty in %.1f%%, full in %.1f%% of %llu "
              "samples): no bottleneck at this queue",
              qn, PCT(q->avg_usage), PCT(q->empty_share), PCT(q->full_share), samples);
        break;
    }
}

/* The suggestion that goes with a verdict: the training step, the transfer, or the stage that
 * feeds the queue. */
static void verdict_suggestion(const analysis *a, const queue_finding *f, char *out, size_t cap)
{
    if (f->verdict == QUEUE_VERDICT_TRAINING)
        textf(out, cap, "look at the training step (forward/backward operators) instead");
    else if (f->verdict == QUEUE_VERDICT_TRANSFER)
        textf(out, cap,
              "speed up the transfer: pinned host memory and non-blocking copies, prefetch "
              "batches to the device, a larger device queue");
    else if (f->verdict == QUEUE_VERDICT_DATA_PROCESSING)
        stage_suggestion(a, f->op, out, cap);
}

static void judge_host_device(const analysis *a, const qview *v, uint32_t n, uint32_t i,
                              finding_sort *fs)
{
    host_device_verdict d = host_device_judge(v, n, i);
    queue_finding *f = &fs->f;
    f->verdict = d.verdict;
    f->op = d.op;
    fs->score = d.score;
    host_device_text(a, &v[i], d.other >= 0 ? &v[d.other] : NULL, &d, f);
    verdict_suggestion(a, f, f->suggestion, sizeof f->suggestion);
}

/* What the stage rules (judge_stage) found about a stage of a pipeline. */
enum { STAGE_NONE, STAGE_BOTTLENECK, STAGE_TRAINING, STAGE_UNKNOWN };

/* Judges stage id: all adjacent queues (any role) must have enough samples. A middle stage with
 * every input high and every output low, a leftmost stage (no input) with every output low: the
 * stage may be the bottleneck. A rightmost stage (no output, e.g. the training loop) with every
 * input high: the pipeline keeps up. */
static int judge_stage(const qview *v, uint32_t n, uint32_t stage)
{
    uint32_t in = 0, out = 0;
    int in_high = 1, out_low = 1;
    for (uint32_t j = 0; j < n; j++) {
        int is_in = v[j].st.consumer == stage, is_out = v[j].st.producer == stage;
        if (!is_in && !is_out)
            continue;
        if (!v[j].enough)
            return STAGE_UNKNOWN;
        if (is_in) {
            in++;
            in_high &= v[j].high;
        }
        if (is_out) {
            out++;
            out_low &= v[j].low;
        }
    }
    if (out && out_low && (!in || in_high))
        return STAGE_BOTTLENECK;
    if (in && !out && in_high)
        return STAGE_TRAINING;
    return STAGE_NONE;
}

static void judge_pipeline(const analysis *a, const qview *v, uint32_t n, uint32_t i,
                           finding_sort *fs)
{
    const qview *me = &v[i];
    queue_finding *f = &fs->f;
    char qn[NAME_MAX_TEXT + 4], on[NAME_MAX_TEXT + 4];
    text_name(a, me->st.name, qn);
    if (me->st.producer && judge_stage(v, n, me->st.producer) == STAGE_BOTTLENECK) {
        /* Its producer starves it: the producer is the bottleneck (its inputs, if any, are
         * high). */
        uint32_t in_n = 0;
        double in_min = 1.0;
        for (uint32_t j = 0; j < n; j++) {
            if (v[j].st.consumer == me->st.producer) {
                in_n++;
                if (v[j].st.avg_usage < in_min)
                    in_min = v[j].st.avg_usage;
            }
        }
        f->verdict = QUEUE_VERDICT_OPERATOR;
        f->op = me->st.producer;
        fs->score = in_n ? in_min - me->st.avg_usage : 1.0 - me->st.avg_usage;
        text_name(a, me->st.producer, on);
        if (in_n)
            textf(f->text, sizeof f->text,
                  "stage \"%s\" may be the bottleneck: its input queues are at least %.1f%% "
                  "used but its output queue \"%s\" only %.1f%% (%llu samples)",
                  on, PCT(in_min), qn, PCT(me->st.avg_usage), (unsigned long long)me->st.samples);
        else
            textf(f->text, sizeof f->text,
                  "first stage \"%s\" may be the bottleneck: its output queue \"%s\" is only "
                  "%.1f%% used (%llu samples)",
                  on, qn, PCT(me->st.avg_usage), (unsigned long long)me->st.samples);
        stage_suggestion(a, f->op, f->suggestion, sizeof f->suggestion);
        return;
    }
    if (me->st.consumer && judge_stage(v, n, me->st.consumer) == STAGE_TRAINING) {
        f->verdict = QUEUE_VERDICT_TRAINING;
        f->op = me->st.consumer;
        fs->score = me->st.avg_usage;
        text_name(a, me->st.consumer, on);
        textf(f->text, sizeof f->text,
              "queue \"%s\" into the last stage \"%s\" is %.1f%% used (%llu samples), as are all "
              "its inputs: the pipeline keeps up, \"%s\" is the slower side",
              qn, on, PCT(me->st.avg_usage), (unsigned long long)me->st.samples, on);
        textf(f->suggestion, sizeof f->suggestion,
              "look at the training step (forward/backward operators) instead");
        return;
    }
    f->verdict = QUEUE_VERDICT_OK;
    fs->score = me->st.avg_usage;
    if (me->st.consumer && judge_stage(v, n, me->st.consumer) == STAGE_BOTTLENECK) {
        text_name(a, me->st.consumer, on);
        textf(f->text, sizeof f->text,
              "queue \"%s\" is %.1f%% used (%llu samples): its consumer \"%s\" is slower than "
              "its producer",
              qn, PCT(me->st.avg_usage), (unsigned long long)me->st.samples, on);
        return;
    }
    textf(f->text, sizeof f->text,
          "queue \"%s\" is %.1f%% used (empty in %.1f%%, full in %.1f%% of %llu samples): no "
          "bottleneck next to it",
          qn, PCT(me->st.avg_usage), PCT(me->st.empty_share), PCT(me->st.full_share),
          (unsigned long long)me->st.samples);
}

/* One finding per queue: the host/device rules for host and device queues, the stage rules
 * for pipeline queues; NONE below Q_MIN_SAMPLES. Most severe first: bottlenecks, then
 * TRAINING, OK, NONE; within a verdict the strongest evidence first, then by name. */
size_t analysis_queue_findings(const analysis *a, queue_finding *out, size_t max)
{
    const queues_state *s = analysis_state(a, &queues_module);
    if (!s || !s->n || !max)
        return 0;
    qview *v = calloc(s->n, sizeof *v);
    finding_sort *fs = calloc(s->n, sizeof *fs);
    if (!v || !fs) {
        free(v);
        free(fs);
        return 0;
    }
    for (uint32_t i = 0; i < s->n; i++) {
        qview *x = &v[i];
        x->st = stat_of(&s->q[i]);
        x->enough = x->st.samples >= Q_MIN_SAMPLES;
        x->starved = x->st.empty_share >= Q_MOSTLY;
        x->filled = x->st.avg_usage >= Q_HIGH || x->st.full_share >= Q_MOSTLY;
        x->high = x->st.avg_usage >= Q_HIGH;
        x->low = x->st.avg_usage <= Q_LOW;
    }
    for (uint32_t i = 0; i < s->n; i++) {
        finding_sort *f = &fs[i];
        f->f.queue = i;
        f->name = analysis_name(a, v[i].st.name, &f->name_len);
        if (!v[i].enough) {
            char qn[NAME_MAX_TEXT + 4];
            text_name(a, v[i].st.name, qn);
            f->f.verdict = QUEUE_VERDICT_NONE;
            textf(f->f.text, sizeof f->f.text,
                  "queue \"%s\": %llu samples, too few for a verdict (at least %d needed)", qn,
                  (unsigned long long)v[i].st.samples, Q_MIN_SAMPLES);
        } else if (v[i].st.role == TS_QUEUE_PIPELINE) {
            judge_pipeline(a, v, s->n, i, f);
        } else {
            judge_host_device(a, v, s->n, i, f);
        }
        f->rank = verdict_rank(f->f.verdict);
    }
    qsort(fs, s->n, sizeof *fs, finding_cmp);
    size_t n = s->n < max ? s->n : max;
    for (size_t i = 0; i < n; i++)
        out[i] = fs[i].f;
    free(v);
    free(fs);
    return n;
}

const char *queues_verdict_name(uint32_t verdict)
{
    static const char *const n[] = {"none",     "ok",       "data_processing",
                                    "transfer", "operator", "training"};
    return verdict < 6 ? n[verdict] : "unknown";
}

const char *queues_role_name(uint32_t role)
{
    static const char *const n[] = {"pipeline", "host", "device"};
    return role < 3 ? n[role] : "unknown";
}
