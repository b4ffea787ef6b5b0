/* cpu: CPU utilization of the machine, the process, each thread and each descendant process
 * (docs/report-format.md, "CPU").
 *
 * The sampler writes, for one interval, a machine sample and a process sample. They are paired
 * into one cpu_row by the end of their intervals: two samples pair when their ends lie within
 * half the shorter interval (at least 1 ms) of each other. Either half may come first, so each
 * waits in a small pending list; a half that finds no partner before CPU_PENDING newer halves of
 * its kind arrived, or before analysis_finish, becomes a row of its own with zeros in the other
 * half's fields.
 *
 * Averages are weighted by interval length and summed in integers, so they do not depend on the
 * order samples arrive in: a machine share is the mean over time, a process or thread share is
 * its CPU time over the time sampled. Threads and descendant processes are followed the same
 * way (task_list), descendants with their RSS besides. */
#include "analysis_internal.h"

#include <stdlib.h>
#include <string.h>

#define CPU_PENDING     8
#define CPU_PAIR_MIN_NS 1000000ull

typedef struct machine_half {
    uint64_t begin, end;
    uint16_t share[TS_CPU__COUNT];
    uint64_t cs;
    uint32_t running, blocked;
} machine_half;

typedef struct process_half {
    uint64_t begin, end;
    uint64_t user_ns, system_ns;
    uint32_t cpus;
} process_half;

/* A thread, or a descendant process. */
typedef struct task_acc {
    uint32_t id, name;
    uint32_t ppid;   /* processes: the parent of the latest sample */
    uint64_t name_t; /* end of the sample the name came from */
    uint64_t samples;
    uint64_t user_ns, system_ns, dur_ns;
    uint64_t first_begin, last_end;
    double last_total, peak_total;
    uint64_t last_rss, peak_rss; /* processes, while they ran */
    uint64_t rss_t;              /* end of the sample last_rss came from */
    int exited;                  /* processes: the latest sample found it exited */
} task_acc;

typedef struct task_list {
    index_map by_id;
    task_acc *rows;
    uint32_t n, cap;
} task_list;

typedef struct cpu_state {
    /* Machine totals. */
    uint64_t m_samples;
    unsigned __int128 m_share_dur[TS_CPU__COUNT]; /* share (0.01 %) x interval ns */
    uint64_t m_share[TS_CPU__COUNT];              /* plain sums, when every interval is 0 */
    uint64_t m_dur;
    uint64_t m_cs;
    unsigned __int128 m_running_dur, m_blocked_dur;
    uint64_t m_running, m_blocked;
    /* Process totals. */
    uint64_t p_samples;
    uint64_t p_user, p_system, p_dur;
    uint32_t cpus;
    uint64_t cpus_t;
    uint64_t p_last_end;    /* end of the latest process sample */
    uint32_t children_left; /* most descendants left out of one sample */

    machine_half pend_m[CPU_PENDING];
    process_half pend_p[CPU_PENDING];
    uint32_t npend_m, npend_p;

    cpu_row *recent;
    uint32_t recent_max, recent_head, recent_n;

    task_list threads, children;
} cpu_state;

static void *cpu_create(analysis *a)
{
    cpu_state *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->recent_max = analysis_cfg(a)->recent_buckets ? analysis_cfg(a)->recent_buckets : 120;
    s->recent = calloc(s->recent_max, sizeof *s->recent);
    if (!s->recent) {
        free(s);
        return NULL;
    }
    return s;
}

static void cpu_destroy(void *state)
{
    cpu_state *s = state;
    index_map_free(&s->threads.by_id);
    free(s->threads.rows);
    index_map_free(&s->children.by_id);
    free(s->children.rows);
    free(s->recent);
    free(s);
}

static double percent_of(uint64_t part, uint64_t whole)
{
    return whole ? (double)part * 100.0 / (double)whole : 0.0;
}

/* Hands a row to the sink and the recent ring; m or p may be NULL. */
static void emit_row(cpu_state *s, analysis *a, const machine_half *m, const process_half *p)
{
    cpu_row r;
    memset(&r, 0, sizeof r);
    if (m) {
        r.begin_ns = m->begin;
        r.end_ns = m->end;
        for (int f = 0; f < TS_CPU__COUNT; f++)
            r.machine[f] = m->share[f] / 100.0;
        r.context_switches = m->cs;
        r.running = m->running;
        r.blocked = m->blocked;
    }
    if (p) {
        if (!m) {
            r.begin_ns = p->begin;
            r.end_ns = p->end;
        }
        r.process_user = percent_of(p->user_ns, p->end - p->begin);
        r.process_system = percent_of(p->system_ns, p->end - p->begin);
        r.cpus = p->cpus;
    }
    s->recent[s->recent_head] = r;
    s->recent_head = (s->recent_head + 1) % s->recent_max;
    if (s->recent_n < s->recent_max)
        s->recent_n++;
    const analysis_sink *sink = analysis_cfg(a)->sink;
    if (sink && sink->cpu)
        sink->cpu(sink->ctx, &r);
}

static int halves_pair(uint64_t b1, uint64_t e1, uint64_t b2, uint64_t e2)
{
    uint64_t d1 = e1 - b1, d2 = e2 - b2;
    uint64_t tol = (d1 < d2 ? d1 : d2) / 2;
    if (tol < CPU_PAIR_MIN_NS)
        tol = CPU_PAIR_MIN_NS;
    uint64_t gap = e1 > e2 ? e1 - e2 : e2 - e1;
    return gap <= tol;
}

/* Index of the pending half whose end is closest to end among those that pair, or -1. */
static int find_partner(const uint64_t *begins, const uint64_t *ends, uint32_t n, uint64_t begin,
                        uint64_t end)
{
    int best = -1;
    uint64_t best_gap = UINT64_MAX;
    for (uint32_t i = 0; i < n; i++) {
        if (!halves_pair(begins[i], ends[i], begin, end))
            continue;
        uint64_t gap = ends[i] > end ? ends[i] - end : end - ends[i];
        if (gap < best_gap) {
            best_gap = gap;
            best = (int)i;
        }
    }
    return best;
}

static void feed_machine(cpu_state *s, analysis *a, const ts_event *ev)
{
    machine_half m = {.begin = ev->begin_ns,
                      .end = ev->end_ns >= ev->begin_ns ? ev->end_ns : ev->begin_ns,
                      .cs = ev->corr,
                      .running = ev->aux >> 16,
                      .blocked = ev->aux & 0xffff};
    uint64_t dur = m.end - m.begin;
    s->m_samples++;
    s->m_dur += dur;
    for (int f = 0; f < TS_CPU__COUNT; f++) {
        m.share[f] = ts_cpu_share(ev, (enum ts_cpu_field)f);
        s->m_share[f] += m.share[f];
        s->m_share_dur[f] += (unsigned __int128)m.share[f] * dur;
    }
    s->m_cs += m.cs;
    s->m_running += m.running;
    s->m_blocked += m.blocked;
    s->m_running_dur += (unsigned __int128)m.running * dur;
    s->m_blocked_dur += (unsigned __int128)m.blocked * dur;

    uint64_t b[CPU_PENDING], e[CPU_PENDING];
    for (uint32_t i = 0; i < s->npend_p; i++) {
        b[i] = s->pend_p[i].begin;
        e[i] = s->pend_p[i].end;
    }
    int j = find_partner(b, e, s->npend_p, m.begin, m.end);
    if (j >= 0) {
        process_half p = s->pend_p[j];
        s->pend_p[j] = s->pend_p[--s->npend_p];
        emit_row(s, a, &m, &p);
        return;
    }
    if (s->npend_m == CPU_PENDING) {
        /* The oldest waited long enough: it goes alone. */
        uint32_t old = 0;
        for (uint32_t i = 1; i < s->npend_m; i++)
            if (s->pend_m[i].end < s->pend_m[old].end)
                old = i;
        machine_half o = s->pend_m[old];
        s->pend_m[old] = s->pend_m[--s->npend_m];
        emit_row(s, a, &o, NULL);
    }
    s->pend_m[s->npend_m++] = m;
}

static void feed_process(cpu_state *s, analysis *a, const ts_event *ev)
{
    process_half p = {.begin = ev->begin_ns,
                      .end = ev->end_ns >= ev->begin_ns ? ev->end_ns : ev->begin_ns,
                      .user_ns = ev->v0,
                      .system_ns = ev->v1,
                      .cpus = (uint32_t)ev->corr};
    s->p_samples++;
    s->p_user += p.user_ns;
    s->p_system += p.system_ns;
    s->p_dur += p.end - p.begin;
    if (p.end > s->p_last_end)
        s->p_last_end = p.end;
    if ((uint32_t)(ev->corr >> 32) > s->children_left)
        s->children_left = (uint32_t)(ev->corr >> 32);
    if (p.cpus && (p.end > s->cpus_t || !s->cpus || (p.end == s->cpus_t && p.cpus > s->cpus))) {
        s->cpus = p.cpus;
        s->cpus_t = p.end;
    }

    uint64_t b[CPU_PENDING], e[CPU_PENDING];
    for (uint32_t i = 0; i < s->npend_m; i++) {
        b[i] = s->pend_m[i].begin;
        e[i] = s->pend_m[i].end;
    }
    int j = find_partner(b, e, s->npend_m, p.begin, p.end);
    if (j >= 0) {
        machine_half m = s->pend_m[j];
        s->pend_m[j] = s->pend_m[--s->npend_m];
        emit_row(s, a, &m, &p);
        return;
    }
    if (s->npend_p == CPU_PENDING) {
        uint32_t old = 0;
        for (uint32_t i = 1; i < s->npend_p; i++)
            if (s->pend_p[i].end < s->pend_p[old].end)
                old = i;
        process_half o = s->pend_p[old];
        s->pend_p[old] = s->pend_p[--s->npend_p];
        emit_row(s, a, NULL, &o);
    }
    s->pend_p[s->npend_p++] = p;
}

/* Adds one interval of a thread or process to its row; the row, or NULL without memory. */
static task_acc *feed_task(task_list *l, const ts_event *ev)
{
    uint32_t i = index_map_find(&l->by_id, ev->tid);
    if (i == UINT32_MAX) {
        if (l->n == l->cap) {
            uint32_t n = l->cap ? l->cap * 2 : 16;
            task_acc *nt = realloc(l->rows, n * sizeof *nt);
            if (!nt)
                return NULL;
            l->rows = nt;
            l->cap = n;
        }
        if (index_map_get(&l->by_id, ev->tid, l->n, NULL) == UINT32_MAX)
            return NULL;
        i = l->n++;
        memset(&l->rows[i], 0, sizeof l->rows[i]);
        l->rows[i].id = ev->tid;
    }
    task_acc *t = &l->rows[i];
    uint64_t end = ev->end_ns >= ev->begin_ns ? ev->end_ns : ev->begin_ns;
    uint64_t dur = end - ev->begin_ns;
    t->samples++;
    t->user_ns += ev->v0;
    t->system_ns += ev->v1;
    t->dur_ns += dur;
    double total = percent_of(ev->v0 + ev->v1, dur);
    if (t->samples == 1 || ev->begin_ns < t->first_begin)
        t->first_begin = ev->begin_ns;
    if (total > t->peak_total)
        t->peak_total = total;
    /* The latest sample by time (ties: the larger), so the order of arrival does not matter. */
    if (t->samples == 1 || end > t->last_end || (end == t->last_end && total > t->last_total)) {
        t->last_end = end;
        t->last_total = total;
        if (ev->kind == TS_KIND_CPU_CHILD) {
            t->exited = (ev->flags & TS_EF_EXITED) != 0;
            t->ppid = ev->aux;
        }
    }
    /* RSS while it ran (an exited process has none): the latest, and the peak. */
    if (ev->kind == TS_KIND_CPU_CHILD && !(ev->flags & TS_EF_EXITED)) {
        if (end >= t->rss_t) {
            t->last_rss = ev->corr;
            t->rss_t = end;
        }
        if (ev->corr > t->peak_rss)
            t->peak_rss = ev->corr;
    }
    /* A thread may rename itself, a process exec another program: the name of the latest
     * sample that had one. */
    if (ev->name != TS_STR_NONE &&
        (!t->name || end > t->name_t || (end == t->name_t && ev->name > t->name))) {
        t->name = ev->name;
        t->name_t = end;
    }
    return t;
}

static void cpu_feed(void *state, analysis *a, const ts_event *ev)
{
    cpu_state *s = state;
    switch (ev->kind) {
    case TS_KIND_CPU_MACHINE:
        feed_machine(s, a, ev);
        break;
    case TS_KIND_CPU_PROCESS:
        feed_process(s, a, ev);
        break;
    case TS_KIND_CPU_THREAD:
        feed_task(&s->threads, ev);
        break;
    case TS_KIND_CPU_CHILD:
        feed_task(&s->children, ev);
        break;
    default:
        break;
    }
}

/* Rows still waiting for their other half go alone, oldest first. */
static void cpu_finish(void *state, analysis *a)
{
    cpu_state *s = state;
    while (s->npend_m || s->npend_p) {
        int take_m = -1, take_p = -1;
        for (uint32_t i = 0; i < s->npend_m; i++)
            if (take_m < 0 || s->pend_m[i].end < s->pend_m[take_m].end)
                take_m = (int)i;
        for (uint32_t i = 0; i < s->npend_p; i++)
            if (take_p < 0 || s->pend_p[i].end < s->pend_p[take_p].end)
                take_p = (int)i;
        if (take_m >= 0 && (take_p < 0 || s->pend_m[take_m].end <= s->pend_p[take_p].end)) {
            machine_half m = s->pend_m[take_m];
            s->pend_m[take_m] = s->pend_m[--s->npend_m];
            emit_row(s, a, &m, NULL);
        } else {
            process_half p = s->pend_p[take_p];
            s->pend_p[take_p] = s->pend_p[--s->npend_p];
            emit_row(s, a, NULL, &p);
        }
    }
}

const analysis_module cpu_module = {
    .name = "cpu",
    .kinds = KIND_BIT(TS_KIND_CPU_MACHINE) | KIND_BIT(TS_KIND_CPU_PROCESS) |
             KIND_BIT(TS_KIND_CPU_THREAD) | KIND_BIT(TS_KIND_CPU_CHILD),
    .create = cpu_create,
    .feed = cpu_feed,
    .finish = cpu_finish,
    .destroy = cpu_destroy,
};

/* ---- Accessors ------------------------------------------------------------------------- */

/* samples counts machine samples (process samples when there are none). Machine averages are
 * weighted by interval length (plain means when every interval is empty). */
cpu_summary analysis_cpu(const analysis *a)
{
    cpu_summary r;
    memset(&r, 0, sizeof r);
    const cpu_state *s = analysis_state(a, &cpu_module);
    if (!s)
        return r;
    r.samples = s->m_samples ? s->m_samples : s->p_samples;
    if (s->m_samples) {
        for (int f = 0; f < TS_CPU__COUNT; f++)
            r.machine[f] = s->m_dur ? (double)s->m_share_dur[f] / (double)s->m_dur / 100.0
                                    : (double)s->m_share[f] / (double)s->m_samples / 100.0;
        r.avg_running = s->m_dur ? (double)s->m_running_dur / (double)s->m_dur
                                 : (double)s->m_running / (double)s->m_samples;
        r.avg_blocked = s->m_dur ? (double)s->m_blocked_dur / (double)s->m_dur
                                 : (double)s->m_blocked / (double)s->m_samples;
        r.context_switches_per_s = s->m_dur ? (double)s->m_cs * 1e9 / (double)s->m_dur : 0;
    }
    r.process_user = percent_of(s->p_user, s->p_dur);
    r.process_system = percent_of(s->p_system, s->p_dur);
    r.cpus = s->cpus;
    r.processes = s->children.n;
    r.processes_left_out = s->children_left;
    return r;
}

/* Oldest first by interval begin (rows are emitted as their halves pair, which may be slightly
 * out of time order). */
size_t analysis_cpu_recent(const analysis *a, cpu_row *out, size_t max)
{
    const cpu_state *s = analysis_state(a, &cpu_module);
    if (!s || !max)
        return 0;
    size_t n = s->recent_n < max ? s->recent_n : max;
    uint32_t first = (s->recent_head + s->recent_max - (uint32_t)n) % s->recent_max;
    for (size_t i = 0; i < n; i++) {
        cpu_row r = s->recent[(first + i) % s->recent_max];
        size_t j = i;
        while (j > 0 && out[j - 1].begin_ns > r.begin_ns) {
            out[j] = out[j - 1];
            j--;
        }
        out[j] = r;
    }
    return n;
}

static int thread_cmp(const void *x, const void *y)
{
    const cpu_thread *a = x, *b = y;
    double ta = a->avg_user + a->avg_system, tb = b->avg_user + b->avg_system;
    if (ta != tb)
        return ta < tb ? 1 : -1;
    return a->tid < b->tid ? -1 : a->tid > b->tid;
}

uint32_t analysis_thread_label(const analysis *a, uint32_t tid)
{
    uint32_t given = analysis_thread_name(a, tid);
    if (given != TS_STR_NONE)
        return given;
    const cpu_state *s = analysis_state(a, &cpu_module);
    uint32_t i = s ? index_map_find(&s->threads.by_id, tid) : UINT32_MAX;
    return i == UINT32_MAX ? TS_STR_NONE : s->threads.rows[i].name;
}

size_t analysis_cpu_threads(const analysis *a, cpu_thread **rows)
{
    const cpu_state *s = analysis_state(a, &cpu_module);
    *rows = NULL;
    if (!s || !s->threads.n)
        return 0;
    cpu_thread *r = malloc(s->threads.n * sizeof *r);
    if (!r)
        return 0;
    for (uint32_t i = 0; i < s->threads.n; i++) {
        const task_acc *t = &s->threads.rows[i];
        r[i] = (cpu_thread){
            .tid = t->id,
            /* The name the program gave the thread wins over the OS name the samples carry
             * (a trainer names its threads "train", "data-loader"; /proc says the binary). */
            .name = analysis_thread_name(a, t->id) ? analysis_thread_name(a, t->id) : t->name,
            .samples = t->samples,
            .avg_user = percent_of(t->user_ns, t->dur_ns),
            .avg_system = percent_of(t->system_ns, t->dur_ns),
            .last_total = t->last_total,
        };
    }
    qsort(r, s->threads.n, sizeof *r, thread_cmp);
    *rows = r;
    return s->threads.n;
}

static int child_cmp(const void *x, const void *y)
{
    const cpu_child *a = x, *b = y;
    if (a->ended != b->ended)
        return a->ended ? 1 : -1;
    double ta = a->avg_user + a->avg_system, tb = b->avg_user + b->avg_system;
    if (ta != tb)
        return ta < tb ? 1 : -1;
    return a->pid < b->pid ? -1 : a->pid > b->pid;
}

size_t analysis_cpu_children(const analysis *a, cpu_child **rows)
{
    const cpu_state *s = analysis_state(a, &cpu_module);
    *rows = NULL;
    if (!s || !s->children.n)
        return 0;
    cpu_child *r = malloc(s->children.n * sizeof *r);
    if (!r)
        return 0;
    for (uint32_t i = 0; i < s->children.n; i++) {
        const task_acc *t = &s->children.rows[i];
        r[i] = (cpu_child){
            .pid = t->id,
            .ppid = t->ppid,
            /* A name the program gave it (termsight_process_name), else its command name. */
            .name = analysis_thread_name(a, t->id) ? analysis_thread_name(a, t->id) : t->name,
            .samples = t->samples,
            .avg_user = percent_of(t->user_ns, t->dur_ns),
            .avg_system = percent_of(t->system_ns, t->dur_ns),
            .peak_total = t->peak_total,
            .last_total = t->last_total,
            .cpu_ns = t->user_ns + t->system_ns,
            .last_rss = t->last_rss,
            .peak_rss = t->peak_rss,
            .first_ns = t->first_begin,
            .last_ns = t->last_end,
            /* Every descendant alive is in the latest sample, which ends with the process's;
             * one that exited may stay listed until its parent waits for it. */
            .ended = t->exited || t->last_end < s->p_last_end,
        };
    }
    qsort(r, s->children.n, sizeof *r, child_cmp);
    *rows = r;
    return s->children.n;
}
