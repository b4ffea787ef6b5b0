/* termsight export --prometheus: the live sessions of this user on this machine as Prometheus
 * metrics, served over HTTP by libmicrohttpd.
 *
 * Each scrape lists the sessions as `termsight ls` does (segment_list), attaches read-only to the
 * new ones, lets go of the ones that ended, and reads each one's header (state, events, drops,
 * job, rank, host), its step board (board_get_totals, board_get_steps: the steps, their sums and
 * the last TS_BOARD_STEPS steps' quantiles), the newest events of its lanes (lane_observe, which
 * never writes: the data-queue samples) and /proc (CPU time, RSS). The straggler verdict of each
 * job is the job rule (analysis/job.h) over its ranks here. Nothing is written to a segment.
 *
 * One thread serves (MHD's internal polling thread): connections are non-blocking, a connection
 * idle past EXPORT_TIMEOUT_S is closed, at most EXPORT_MAX_CONN are open (a client gets
 * EXPORT_PER_CLIENT, and more while EXPORT_RESERVE stay free), a request past EXPORT_DEADLINE_S
 * is cut (export_guard.c), a request's memory is
 * bounded, and a page rendered within EXPORT_CACHE_NS is served again, so many scrapers at once
 * cost one render. */
#include "cli.h"
#include "export_guard.h"
#include "analysis.h"
#include "job.h"
#include "model.h"

#include <microhttpd.h>

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define EXPORT_DEFAULT_LISTEN "127.0.0.1:9464"
#define EXPORT_TIMEOUT_S      5            /* a connection idle this long is closed */
#define EXPORT_MAX_CONN       256          /* connections open at once */
#define EXPORT_PER_CLIENT     16           /* of them a client always gets (export_guard.c) */
#define EXPORT_RESERVE        64           /* kept for the clients within that share */
#define EXPORT_DEADLINE_S     10           /* a request whole and answered within */
#define EXPORT_CONN_MEMORY    (32 * 1024)  /* a request's buffer: headers beyond it are refused */
#define EXPORT_CACHE_NS       250000000ull /* a page this recent is served again */
#define EXPORT_SESSIONS       256          /* sessions exported at most */
#define EXPORT_QUEUES         32           /* data queues a session's metrics name at most */
#define EXPORT_OBSERVE        1024         /* events copied per lane_observe call */
#define EXPORT_LANE_TAIL      8192         /* per lane and scrape, the newest events read at most */

static void export_usage(FILE *out)
{
    fputs("usage: termsight export --prometheus [--listen ADDRESS:PORT]\n"
          "\n"
          "Serves the live profiler sessions of this user on this machine as Prometheus\n"
          "metrics at http://ADDRESS:PORT/metrics (text exposition format), labelled job,\n"
          "rank, host, pid and process: steps, step time and its split (interval, compute,\n"
          "comm_wait, tail, eval) as summaries over the last 512 steps, data-queue usage and\n"
          "empty share, events per second, drops and losses, process CPU and RSS, the\n"
          "straggler verdict of each job's ranks here, and whether each is collecting. A\n"
          "session that ends leaves the metrics. It reads the sessions' shared memory and\n"
          "never writes to it. Runs until interrupted (SIGINT, SIGTERM).\n"
          "\n"
          "  --prometheus          the format (the only one)\n"
          "  --listen ADDRESS:PORT where to listen (default " EXPORT_DEFAULT_LISTEN
          ", loopback only:\n"
          "                        other machines cannot scrape it); an IPv4 address or\n"
          "                        [IPv6]; port 0 takes a free one (printed on start)\n"
          "\n"
          "Any path but exactly /metrics gets 404, other methods than GET and HEAD 405. At\n"
          "most 256 connections are served at once; a client (on loopback the local user\n"
          "that opened the connection, else its address) always gets 16, and more only while\n"
          "64 stay free for the others. A client idle for 5 s is disconnected, and so is one\n"
          "whose request is not whole and answered within 10 s of its connection or previous\n"
          "answer. Exit status: 0 after a signal, 1 when it cannot listen, 2 on bad usage.\n",
          out);
}

/* ---- Label values and the page ------------------------------------------------------------ */

typedef struct page {
    char *p;
    size_t len, cap;
    int failed;
} page;

static void page_grow(page *pg, size_t more)
{
    if (pg->failed || pg->len + more + 1 <= pg->cap)
        return;
    size_t cap = pg->cap ? pg->cap : 65536;
    while (cap < pg->len + more + 1)
        cap *= 2;
    char *p = realloc(pg->p, cap);
    if (!p) {
        pg->failed = 1;
        return;
    }
    pg->p = p;
    pg->cap = cap;
}

static void page_put(page *pg, const char *s, size_t n)
{
    page_grow(pg, n);
    if (pg->failed)
        return;
    memcpy(pg->p + pg->len, s, n);
    pg->len += n;
    pg->p[pg->len] = 0;
}

__attribute__((format(printf, 2, 3))) static void page_printf(page *pg, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char small[512];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        page_put(pg, small, (size_t)n);
        return;
    }
    page_grow(pg, (size_t)n);
    if (pg->failed)
        return;
    va_start(ap, fmt);
    vsnprintf(pg->p + pg->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    pg->len += (size_t)n;
}

/* n bytes (any) as a label value of the exposition format: cleaned as every name the program
 * prints is (text_clean: valid UTF-8, control characters and bytes that are not UTF-8 as \xNN),
 * then backslash and double quote escaped. A label can hold no NUL, line feed or invalid UTF-8,
 * so no session's names can end a label early or spoil the page. */
static void export_label_value(page *pg, const char *s, size_t n)
{
    char small[256], *clean = 4 * n + 1 <= sizeof small ? small : malloc(4 * n + 1);
    if (!clean) {
        pg->failed = 1;
        return;
    }
    size_t len = text_clean(s, n, clean, 0);
    for (size_t i = 0; i < len; i++) {
        if (clean[i] == '\\')
            page_put(pg, "\\\\", 2);
        else if (clean[i] == '"')
            page_put(pg, "\\\"", 2);
        else
            page_put(pg, clean + i, 1);
    }
    if (clean != small)
        free(clean);
}

/* ---- Sessions ----------------------------------------------------------------------------- */

typedef struct queue_seen {
    uint32_t name;
    uint64_t size, capacity;
    uint64_t samples, empty;           /* all seen */
    uint64_t last_samples, last_empty; /* at the previous scrape */
    double empty_share;                /* of the samples seen between the last two scrapes */
    int share_known;
} queue_seen;

typedef struct session {
    segment *seg;
    pid_t pid;
    char shm_name[64];
    char job[64], host[64], process[64];
    int32_t rank;
    int mark; /* seen by this scrape's listing */
    uint32_t lanes;
    uint64_t *cursor;
    queue_seen q[EXPORT_QUEUES];
    size_t nq;
    uint64_t rate_ns, rate_events; /* the previous scrape's clock and events written */
    double events_per_s;
    int rate_known;
    /* This scrape's figures. */
    step_totals tot;
    int have_tot;
    int straggler;
    const char *cause;
    double cpu_s, rss; /* /proc: CPU seconds and RSS bytes; < 0 unknown */
} session;

typedef struct exporter {
    session *s[EXPORT_SESSIONS];
    size_t n;
    ts_event buf[EXPORT_OBSERVE];
    step_row rows[TS_BOARD_STEPS];
    double part[TS_BOARD_STEPS];
    page pg;
    size_t unreadable; /* this scrape's live sessions left out: their memory could not be read */
    uint64_t rendered_ns;
    uint64_t scrapes, renders;
    long ticks;
    long pagesize;
} exporter;

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void session_free(session *s)
{
    if (!s)
        return;
    if (s->seg)
        segment_close(s->seg, 0);
    free(s->cursor);
    free(s);
}

/* A new session of the list, attached read-only; NULL when it cannot be (gone meanwhile). */
static session *session_open(const segment_info *info)
{
    session *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    char *cause = NULL;
    if (segment_attach_name(info->shm_name, 0, &s->seg, &cause) < 0) {
        free(cause);
        free(s);
        return NULL;
    }
    ts_segment_header *h = segment_header(s->seg);
    s->pid = info->pid;
    segment_copy_field(s->shm_name, sizeof s->shm_name, info->shm_name, sizeof info->shm_name);
    segment_copy_field(s->process, sizeof s->process, h->process, sizeof h->process);
    segment_copy_field(s->job, sizeof s->job, h->job, sizeof h->job);
    segment_copy_field(s->host, sizeof s->host, h->host, sizeof h->host);
    s->rank = s->job[0] && h->rank >= 0 ? h->rank : -1;
    s->lanes = h->lane_count;
    s->cursor = calloc(s->lanes ? s->lanes : 1, sizeof *s->cursor);
    if (!s->cursor) {
        session_free(s);
        return NULL;
    }
    /* Queue samples from now on: the lanes' older events are not this exporter's to count. */
    for (uint32_t i = 0; i < s->lanes; i++) {
        ts_lane *l = segment_lane(s->seg, i);
        s->cursor[i] = l ? atomic_load_explicit(&l->head, memory_order_acquire) : 0;
    }
    return s;
}

static int live(const segment_info *i)
{
    return i->alive && i->readable && i->state != TS_STATE_ENDED;
}

/* The sessions as the listing has them: new ones attached, ended ones let go. */
static void sessions_refresh(exporter *e)
{
    segment_info *list = NULL;
    char *cause = NULL;
    int n = segment_list(&list, &cause);
    free(cause);
    for (size_t k = 0; k < e->n; k++)
        e->s[k]->mark = 0;
    e->unreadable = 0;
    for (int i = 0; i < n; i++) {
        if (list[i].alive && !list[i].readable)
            e->unreadable++; /* damaged: the listing could not read its header */
        if (!live(&list[i]))
            continue;
        size_t k = 0;
        while (k < e->n && (e->s[k]->pid != list[i].pid ||
                            strncmp(e->s[k]->shm_name, list[i].shm_name, sizeof list[i].shm_name)))
            k++;
        if (k == e->n) {
            if (e->n == EXPORT_SESSIONS)
                continue;
            session *s = session_open(&list[i]);
            if (!s) {
                e->unreadable++;
                continue;
            }
            e->s[e->n++] = s;
        }
        e->s[k]->mark = 1;
    }
    free(list);
    size_t kept = 0;
    for (size_t k = 0; k < e->n; k++) {
        /* A session whose header no longer holds (damaged since it was attached) is let go and
         * left out of the page rather than read: counted, attached afresh next time if it can. */
        if (e->s[k]->mark &&
            segment_validate(segment_header(e->s[k]->seg), segment_size(e->s[k]->seg), NULL) < 0) {
            e->s[k]->mark = 0;
            e->unreadable++;
        }
        if (e->s[k]->mark)
            e->s[kept++] = e->s[k];
        else
            session_free(e->s[k]);
    }
    e->n = kept;
}

static queue_seen *queue_of(session *s, uint32_t name)
{
    for (size_t i = 0; i < s->nq; i++)
        if (s->q[i].name == name)
            return &s->q[i];
    if (s->nq == EXPORT_QUEUES)
        return NULL;
    queue_seen *q = &s->q[s->nq++];
    *q = (queue_seen){.name = name};
    return q;
}

/* Lanes ever claimed, as far as this mapping has them. */
static uint32_t lanes_in_use(const session *s)
{
    uint32_t used = atomic_load_explicit(&segment_header(s->seg)->lanes_used, memory_order_acquire);
    return used > s->lanes ? s->lanes : used;
}

/* Events the process wrote into its lanes (their heads: indexes only grow), as top counts them:
 * a session in flight mode records nothing, yet writes. */
static uint64_t lanes_written(const session *s)
{
    uint64_t sum = 0;
    for (uint32_t i = 0, used = lanes_in_use(s); i < used; i++) {
        ts_lane *l = segment_lane(s->seg, i);
        sum += l ? atomic_load_explicit(&l->head, memory_order_acquire) : 0;
    }
    return sum;
}

/* The queue samples among the lanes' newest events (at most EXPORT_LANE_TAIL a lane). */
static void read_queues(exporter *e, session *s)
{
    uint32_t used = lanes_in_use(s);
    for (uint32_t i = 0; i < used; i++) {
        ts_lane *l = segment_lane(s->seg, i);
        if (!l)
            continue;
        uint64_t head = atomic_load_explicit(&l->head, memory_order_acquire), missed = 0;
        if (head > s->cursor[i] + EXPORT_LANE_TAIL)
            s->cursor[i] = head - EXPORT_LANE_TAIL;
        for (size_t budget = EXPORT_LANE_TAIL; budget > 0;) {
            size_t max = budget < EXPORT_OBSERVE ? budget : EXPORT_OBSERVE;
            size_t n = lane_observe(s->seg, i, &s->cursor[i], e->buf, max, &missed);
            for (size_t k = 0; k < n; k++) {
                const ts_event *ev = &e->buf[k];
                if (ev->kind != TS_KIND_QUEUE_SAMPLE)
                    continue;
                queue_seen *q = queue_of(s, ev->name);
                if (!q)
                    continue;
                q->size = ev->v0;
                q->capacity = ev->v1;
                q->samples++;
                q->empty += ev->v0 == 0;
            }
            budget -= n;
            if (n < max)
                break;
        }
    }
    for (size_t k = 0; k < s->nq; k++) {
        queue_seen *q = &s->q[k];
        uint64_t d = q->samples - q->last_samples;
        q->share_known = d > 0;
        if (d)
            q->empty_share = (double)(q->empty - q->last_empty) / (double)d;
        q->last_samples = q->samples;
        q->last_empty = q->empty;
    }
}

/* The process's CPU time (seconds) and RSS (bytes) from /proc; -1 each when unknown. */
static void proc_usage(const exporter *e, pid_t pid, double *cpu_s, double *rss)
{
    *cpu_s = *rss = -1;
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (f) {
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = 0;
        fclose(f);
        /* After the name's closing parenthesis: state (3) ... utime (14), stime (15). */
        char *p = strrchr(buf, ')');
        unsigned long long ut, st;
        if (p &&
            sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) ==
                2 &&
            e->ticks > 0)
            *cpu_s = (double)(ut + st) / (double)e->ticks;
    }
    snprintf(path, sizeof path, "/proc/%d/statm", (int)pid);
    f = fopen(path, "re");
    if (f) {
        unsigned long long size, res;
        if (fscanf(f, "%llu %llu", &size, &res) == 2)
            *rss = (double)res * (double)e->pagesize;
        fclose(f);
    }
}

/* ---- Metrics ------------------------------------------------------------------------------ */

static void labels(page *pg, const session *s)
{
    page_put(pg, "job=\"", 5);
    export_label_value(pg, s->job, strlen(s->job));
    page_put(pg, "\",rank=\"", 8);
    if (s->rank >= 0)
        page_printf(pg, "%d", (int)s->rank);
    page_put(pg, "\",host=\"", 8);
    export_label_value(pg, s->host, strlen(s->host));
    page_printf(pg, "\",pid=\"%d\",process=\"", (int)s->pid);
    export_label_value(pg, s->process, strlen(s->process));
    page_put(pg, "\"", 1);
}

/* One sample: name{labels[,extra]} value. */
static void sample(page *pg, const char *name, const session *s, const char *extra, double v)
{
    page_printf(pg, "%s{", name);
    labels(pg, s);
    if (extra)
        page_printf(pg, ",%s", extra);
    if (v == floor(v) && fabs(v) < 1e15)
        page_printf(pg, "} %.0f\n", v);
    else
        page_printf(pg, "} %.9g\n", v);
}

static void family(page *pg, const char *name, const char *type, const char *help)
{
    page_printf(pg, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static int by_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static const double quantiles[] = {0.5, 0.9, 0.99};
enum { PART_TOTAL, PART_INTERVAL, PART_COMPUTE, PART_WAIT, PART_TAIL, PART_EVAL, PARTS };
static const char *const part_names[PARTS] = {"total",     "interval", "compute",
                                              "comm_wait", "tail",     "eval"};

static double row_part(const step_row *r, int part)
{
    switch (part) {
    case PART_TOTAL:
        return (double)r->total_ns;
    case PART_INTERVAL:
        return (double)r->interval_ns;
    case PART_COMPUTE:
        return (double)r->compute_ns;
    case PART_WAIT:
        return (double)r->comm_wait_ns;
    case PART_TAIL:
        return (double)r->tail_ns;
    default:
        return (double)r->eval_ns;
    }
}

static double tot_part(const step_totals *t, int part)
{
    switch (part) {
    case PART_TOTAL:
        return (double)t->total_ns;
    case PART_INTERVAL:
        return (double)t->interval_ns;
    case PART_COMPUTE:
        return (double)t->compute_ns;
    case PART_WAIT:
        return (double)t->comm_wait_ns;
    case PART_TAIL:
        return (double)t->tail_ns;
    default:
        return (double)t->eval_ns;
    }
}

/* termsight_step_seconds: per part, the quantiles of the last steps on the board, and the sum
 * and count of all steps. */
static void export_step_summary(exporter *e, page *pg, session *s)
{
    uint64_t written = board_steps_written(s->seg), next = 0;
    uint64_t from = written > TS_BOARD_STEPS ? written - TS_BOARD_STEPS : 0;
    step_totals tot;
    size_t n = board_get_steps(s->seg, from, e->rows, TS_BOARD_STEPS, &next, &tot);
    for (int part = 0; part < PARTS; part++) {
        char extra[96];
        for (size_t i = 0; i < n; i++)
            e->part[i] = row_part(&e->rows[i], part) / 1e9;
        if (n) {
            qsort(e->part, n, sizeof *e->part, by_double);
            for (size_t k = 0; k < sizeof quantiles / sizeof quantiles[0]; k++) {
                /* The nearest rank. */
                size_t at = (size_t)ceil(quantiles[k] * (double)n);
                at = at ? at - 1 : 0;
                snprintf(extra, sizeof extra, "part=\"%s\",quantile=\"%g\"", part_names[part],
                         quantiles[k]);
                sample(pg, "termsight_step_seconds", s, extra, e->part[at < n ? at : n - 1]);
            }
        }
        snprintf(extra, sizeof extra, "part=\"%s\"", part_names[part]);
        sample(pg, "termsight_step_seconds_sum", s, extra, tot_part(&s->tot, part) / 1e9);
        sample(pg, "termsight_step_seconds_count", s, extra, (double)s->tot.steps);
    }
}

/* termsight_gpu_step_seconds_total: the step on the device summed over the steps with device
 * work, by part; and termsight_gpu_steps_total, their count. Sessions with device work only. */
static void export_gpu_steps(page *pg, const exporter *e)
{
    family(pg, "termsight_gpu_steps_total", "counter",
           "Training steps finished with device work (kernels, copies), the steps the device "
           "split is over.");
    for (size_t k = 0; k < e->n; k++)
        if (e->s[k]->have_tot && e->s[k]->tot.gpu_steps)
            sample(pg, "termsight_gpu_steps_total", e->s[k], NULL, (double)e->s[k]->tot.gpu_steps);
    family(pg, "termsight_gpu_step_seconds_total", "counter",
           "The steps with device work on their device (part: busy, and idle by cause: "
           "idle_data, idle_host, idle_sync, idle_other), summed; the parts add up to the "
           "steps' time.");
    for (size_t k = 0; k < e->n; k++) {
        const session *s = e->s[k];
        if (!s->have_tot || !s->tot.gpu_steps)
            continue;
        const struct {
            const char *part;
            uint64_t ns;
        } parts[] = {{"busy", s->tot.gpu_busy_ns},
                     {"idle_data", s->tot.gpu_idle_data_ns},
                     {"idle_host", s->tot.gpu_idle_host_ns},
                     {"idle_sync", s->tot.gpu_idle_sync_ns},
                     {"idle_other", s->tot.gpu_idle_other_ns}};
        for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
            char extra[48];
            snprintf(extra, sizeof extra, "part=\"%s\"", parts[i].part);
            sample(pg, "termsight_gpu_step_seconds_total", s, extra, (double)parts[i].ns / 1e9);
        }
    }
}

/* The straggler rule over the ranks of each job here. */
static void verdicts(exporter *e)
{
    job_rank_avg avg[EXPORT_SESSIONS];
    job_straggler out[EXPORT_SESSIONS];
    size_t idx[EXPORT_SESSIONS];
    for (size_t k = 0; k < e->n; k++)
        e->s[k]->straggler = 0, e->s[k]->cause = NULL;
    for (size_t k = 0; k < e->n; k++) {
        session *first = e->s[k];
        if (!first->job[0])
            continue;
        int done = 0;
        for (size_t j = 0; j < k && !done; j++)
            done = !strcmp(e->s[j]->job, first->job);
        if (done)
            continue;
        size_t m = 0;
        for (size_t j = k; j < e->n; j++) {
            const session *s = e->s[j];
            if (strcmp(s->job, first->job) || s->rank < 0 || !s->have_tot)
                continue;
            double c = s->tot.steps ? 1e3 * (double)s->tot.steps : 1;
            avg[m] = (job_rank_avg){.steps = s->tot.steps,
                                    .total_us = (double)s->tot.total_ns / c,
                                    .interval_us = (double)s->tot.interval_ns / c,
                                    .compute_us = (double)s->tot.compute_ns / c,
                                    .wait_us = (double)s->tot.comm_wait_ns / c,
                                    .tail_us = (double)s->tot.tail_ns / c};
            idx[m++] = j;
        }
        size_t found = job_stragglers(avg, m, out);
        for (size_t g = 0; g < found; g++) {
            session *s = e->s[idx[out[g].idx]];
            s->straggler = 1;
            s->cause = out[g].cause;
        }
    }
}

/* The figures of one session a family reads: NAN when it has none (no sample is written). */
static double m_collecting(const session *s)
{
    return atomic_load_explicit(&segment_header(s->seg)->state, memory_order_acquire) ==
           TS_STATE_COLLECTING;
}
static double m_steps(const session *s)
{
    return (double)s->tot.steps;
}
static double m_events(const session *s)
{
    return (double)s->rate_events;
}
static double m_recorded(const session *s)
{
    return (double)atomic_load_explicit(&segment_header(s->seg)->events_recorded,
                                        memory_order_relaxed);
}
static double m_events_per_s(const session *s)
{
    return s->rate_known ? s->events_per_s : NAN;
}
static double m_drops(const session *s)
{
    return (double)atomic_load_explicit(&segment_header(s->seg)->drops, memory_order_relaxed);
}
static double m_lossy(const session *s)
{
    lane_loss worst;
    return (double)segment_lane_losses(s->seg, &worst, 1);
}
static double m_ops_lost(const session *s)
{
    return (double)board_ops_lost(s->seg);
}
static double m_cpu(const session *s)
{
    return s->cpu_s >= 0 ? s->cpu_s : NAN;
}
static double m_rss(const session *s)
{
    return s->rss >= 0 ? s->rss : NAN;
}

typedef struct metric {
    const char *name, *type, *help;
    double (*value)(const session *s);
} metric;

/* The families of one sample a session, in the page's order (the step summary, the queues and
 * the straggler have labels of their own and are written apart). */
static const metric session_metrics[] = {
    {"termsight_events_total", "counter",
     "Events the process wrote into its lanes (what was dropped included).", m_events},
    {"termsight_recorded_events_total", "counter",
     "Events the session's recorder took (into the recording or the flight recorder).", m_recorded},
    {"termsight_events_per_second", "gauge", "Events written per second since the previous scrape.",
     m_events_per_s},
    {"termsight_dropped_events_total", "counter",
     "Events lost for any reason (full lanes, recording write errors).", m_drops},
    {"termsight_lossy_threads", "gauge",
     "Threads that lost events in the collection window under way.", m_lossy},
    {"termsight_operators_lost_total", "counter",
     "Operator events the operator board had no room for.", m_ops_lost},
    {"termsight_process_cpu_seconds_total", "counter", "CPU time (user and system) of the process.",
     m_cpu},
    {"termsight_process_resident_memory_bytes", "gauge", "Resident memory of the process.", m_rss},
};

static void write_metric(exporter *e, const metric *m)
{
    family(&e->pg, m->name, m->type, m->help);
    for (size_t k = 0; k < e->n; k++) {
        double v = m->value(e->s[k]);
        if (!isnan(v))
            sample(&e->pg, m->name, e->s[k], NULL, v);
    }
}

static double q_usage(const queue_seen *q)
{
    return q->capacity ? (double)q->size / (double)q->capacity : NAN;
}
static double q_empty(const queue_seen *q)
{
    return q->share_known ? q->empty_share : NAN;
}

/* A family of one sample a queue, labelled queue too. */
static void write_queue_metric(exporter *e, const char *name, const char *help,
                               double (*value)(const queue_seen *q))
{
    family(&e->pg, name, "gauge", help);
    for (size_t k = 0; k < e->n; k++)
        for (size_t i = 0; i < e->s[k]->nq; i++) {
            const queue_seen *q = &e->s[k]->q[i];
            double v = value(q);
            if (isnan(v))
                continue;
            page pq = {0};
            uint32_t len = 0;
            const char *qname = strtab_get(e->s[k]->seg, q->name, &len);
            page_put(&pq, "queue=\"", 7);
            export_label_value(&pq, qname ? qname : "", qname ? len : 0);
            page_put(&pq, "\"", 1);
            if (!pq.failed)
                sample(&e->pg, name, e->s[k], pq.p, v);
            free(pq.p);
        }
}

/* Every family for every session into e->pg. */
static void render(exporter *e)
{
    page *pg = &e->pg;
    pg->len = 0;
    pg->failed = 0;
    sessions_refresh(e);
    uint64_t now = mono_ns();
    for (size_t k = 0; k < e->n; k++) {
        session *s = e->s[k];
        s->have_tot = board_get_totals(s->seg, &s->tot) == 0;
        if (!s->have_tot)
            memset(&s->tot, 0, sizeof s->tot);
        uint64_t events = lanes_written(s);
        if (s->rate_ns && now > s->rate_ns) {
            s->events_per_s = (double)(events >= s->rate_events ? events - s->rate_events : 0) /
                              ((double)(now - s->rate_ns) / 1e9);
            s->rate_known = 1;
        }
        s->rate_ns = now;
        s->rate_events = events;
        read_queues(e, s);
        proc_usage(e, s->pid, &s->cpu_s, &s->rss);
    }
    verdicts(e);

    family(pg, "termsight_sessions", "gauge", "Live profiler sessions exported.");
    page_printf(pg, "termsight_sessions %zu\n", e->n);
    family(pg, "termsight_sessions_unreadable", "gauge",
           "Live sessions left out of this page: their shared memory could not be read "
           "(damaged, or gone while being attached).");
    page_printf(pg, "termsight_sessions_unreadable %zu\n", e->unreadable);
    write_metric(e, &(const metric){"termsight_collecting", "gauge",
                                    "1 while the session collects (into its recording or "
                                    "flight recorder), else 0.",
                                    m_collecting});
    write_metric(e, &(const metric){"termsight_steps_total", "counter", "Training steps finished.",
                                    m_steps});
    family(pg, "termsight_step_seconds", "summary",
           "Step time and its split (part: total, interval, compute, comm_wait, tail, eval); "
           "quantiles over the last 512 steps, sum and count over all.");
    for (size_t k = 0; k < e->n; k++)
        export_step_summary(e, pg, e->s[k]);
    export_gpu_steps(pg, e);
    write_queue_metric(e, "termsight_queue_usage_ratio",
                       "A data queue's size over its capacity at its latest sample.", q_usage);
    write_queue_metric(e, "termsight_queue_empty_ratio",
                       "The share of a data queue's samples since the previous scrape that "
                       "found it empty.",
                       q_empty);
    for (size_t i = 0; i < sizeof session_metrics / sizeof session_metrics[0]; i++)
        write_metric(e, &session_metrics[i]);
    family(pg, "termsight_straggler", "gauge",
           "1 for the rank the job rule names the straggler among its job's ranks on this "
           "machine (cause: data, compute or tail), else 0; sessions of a job only.");
    for (size_t k = 0; k < e->n; k++) {
        const session *s = e->s[k];
        if (!s->job[0])
            continue;
        char extra[64];
        snprintf(extra, sizeof extra, "cause=\"%s\"", s->cause ? s->cause : "");
        sample(pg, "termsight_straggler", s, extra, s->straggler);
    }
    family(pg, "termsight_exporter_scrapes_total", "counter", "Requests for /metrics served.");
    page_printf(pg, "termsight_exporter_scrapes_total %" PRIu64 "\n", e->scrapes);
    e->renders++;
}

/* ---- HTTP --------------------------------------------------------------------------------- */

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *text,
                             const char *allow)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
    if (allow)
        MHD_add_response_header(r, "Allow", allow);
    enum MHD_Result ok = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ok;
}

/* MHD's unescaper, which leaves the URI as it came: the one path served has no escape, and a
 * "%00" or "%6d" is refused as another path rather than decoded into one. */
static size_t no_unescape(void *cls, struct MHD_Connection *c, char *s)
{
    (void)cls;
    (void)c;
    return strlen(s);
}

/* Whether the request line's target is exactly /metrics. url ends at a NUL the client sent or at
 * the '?' of a query (MHD ends it there), so the request line's own span is checked too: MHD
 * parses it in place, the version right after the target and one space. Where a libmicrohttpd
 * keeps the version elsewhere, the span cannot be seen and the name alone decides. */
static int exact_path(const char *url, const char *version)
{
    static const char want[] = "/metrics";
    if (strcmp(url, want))
        return 0;
    uintptr_t u = (uintptr_t)url, v = (uintptr_t)version;
    if (v <= u || v - u > EXPORT_CONN_MEMORY)
        return 1;
    return v - u == sizeof want;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *data,
                              size_t *data_size, void **state)
{
    (void)data;
    exporter *e = cls;
    /* A body is never wanted: a request that sends one is answered once it is in (bounded by
     * the connection's memory). */
    if (*data_size) {
        *data_size = 0;
        return MHD_YES;
    }
    if (!*state) {
        *state = e; /* the headers are in; answer at the next call */
        return MHD_YES;
    }
    if (!exact_path(url, version))
        return reply(c, MHD_HTTP_NOT_FOUND, "not found: the metrics are at /metrics\n", NULL);
    if (strcmp(method, "GET") && strcmp(method, "HEAD"))
        return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed: GET or HEAD\n",
                     "GET, HEAD");
    e->scrapes++;
    uint64_t now = mono_ns();
    if (!e->rendered_ns || now - e->rendered_ns >= EXPORT_CACHE_NS || !e->pg.p) {
        render(e);
        e->rendered_ns = now;
    }
    if (e->pg.failed || !e->pg.p)
        return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n", NULL);
    struct MHD_Response *r =
        MHD_create_response_from_buffer(e->pg.len, e->pg.p, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
}

/* ---- The command -------------------------------------------------------------------------- */

/* ADDRESS:PORT (IPv4, or [IPv6]) into addr: 0, or -1. */
static int parse_listen(const char *v, struct sockaddr_storage *addr, socklen_t *len, int *loopback)
{
    const char *colon = strrchr(v, ':');
    if (!colon || colon == v)
        return -1;
    char host[64];
    size_t hl = (size_t)(colon - v);
    if (v[0] == '[') {
        if (hl < 2 || v[hl - 1] != ']')
            return -1;
        v++;
        hl -= 2;
    }
    if (hl >= sizeof host)
        return -1;
    memcpy(host, v, hl);
    host[hl] = 0;
    char *end;
    errno = 0;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (errno || end == colon + 1 || *end || port > 65535 || colon[1] == '-' || colon[1] == '+')
        return -1;
    memset(addr, 0, sizeof *addr);
    struct sockaddr_in *a4 = (struct sockaddr_in *)addr;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)addr;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        *len = sizeof *a4;
        *loopback = (ntohl(a4->sin_addr.s_addr) >> 24) == 127;
        return 0;
    }
    if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        *len = sizeof *a6;
        *loopback = IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr);
        return 0;
    }
    return -1;
}

static int export_bad_usage(void)
{
    fputs("usage: termsight export --prometheus [--listen ADDRESS:PORT]\n", stderr);
    return 2;
}

static int export_run(int argc, char **argv, int check)
{
    enum { O_PROM = 256, O_LISTEN };
    static const struct option longs[] = {{"prometheus", no_argument, NULL, O_PROM},
                                          {"listen", required_argument, NULL, O_LISTEN},
                                          {NULL, 0, NULL, 0}};
    int c, first = 1, prom = 0;
    const char *listen_at = EXPORT_DEFAULT_LISTEN;
    while ((c = cli_getopt("export", argc, argv, "", longs, 0, &first)) != -1) {
        if (c == O_PROM)
            prom = 1;
        else if (c == O_LISTEN)
            listen_at = optarg;
        else
            return export_bad_usage();
    }
    if (optind < argc) {
        cli_error("export: unknown argument '%s'", argv[optind]);
        return export_bad_usage();
    }
    if (!prom) {
        cli_error("export: say the format: --prometheus");
        return export_bad_usage();
    }
    struct sockaddr_storage addr;
    socklen_t alen = 0;
    int loopback = 0;
    if (parse_listen(listen_at, &addr, &alen, &loopback) < 0) {
        cli_error("export: --listen needs ADDRESS:PORT (127.0.0.1:9464, [::1]:9464), not '%s'",
                  listen_at);
        return export_bad_usage();
    }
    if (check)
        return 0;

    exporter *e = calloc(1, sizeof *e);
    if (!e) {
        cli_error("export: out of memory");
        return 1;
    }
    e->ticks = sysconf(_SC_CLK_TCK);
    e->pagesize = sysconf(_SC_PAGESIZE);
    /* The signals that end it are waited for, never delivered. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* No MHD_USE_ERROR_LOG: a failure to listen is said below; the rest (a client gone, the
     * connection limit reached) is no news for the log of a service. */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO;
    if (addr.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    export_guard *g =
        export_guard_new(EXPORT_MAX_CONN, EXPORT_PER_CLIENT, EXPORT_RESERVE, EXPORT_DEADLINE_S);
    if (!g) {
        cli_error("export: out of memory");
        free(e);
        return 1;
    }
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, 0, NULL, NULL, handle, e, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)EXPORT_TIMEOUT_S, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)EXPORT_MAX_CONN, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)EXPORT_CONN_MEMORY,
        MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)EXPORT_MAX_CONN, MHD_OPTION_UNESCAPE_CALLBACK,
        no_unescape, NULL, MHD_OPTION_NOTIFY_CONNECTION, export_guard_notify, g,
        MHD_OPTION_NOTIFY_COMPLETED, export_guard_completed, g, MHD_OPTION_END);
    if (!d) {
        cli_error("export: cannot listen on %s: %s", listen_at, strerror(errno));
        export_guard_free(g);
        free(e);
        return 1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    unsigned port = info ? info->port : 0;
    char host[64];
    size_t hl = (size_t)(strrchr(listen_at, ':') - listen_at);
    snprintf(host, sizeof host, "%.*s", (int)(hl < sizeof host ? hl : sizeof host - 1), listen_at);
    printf("termsight export: Prometheus metrics at http://%s:%u/metrics (%s)\n", host, port,
           loopback ? "loopback only: other machines cannot scrape it"
                    : "NOT loopback: reachable from other machines, without authentication");
    fflush(stdout);
    /* Until a signal, and once a second the requests past their deadline cut. */
    struct timespec tick = {1, 0};
    while (sigtimedwait(&stop, NULL, &tick) < 0)
        export_guard_sweep(g);
    MHD_stop_daemon(d);
    export_guard_free(g);
    for (size_t k = 0; k < e->n; k++)
        session_free(e->s[k]);
    free(e->pg.p);
    free(e);
    return 0;
}

const cli_command cli_cmd_export = {
    .name = "export",
    .summary = "serve the live sessions as Prometheus metrics (HTTP /metrics)",
    .run = export_run,
    .usage = export_usage,
};
