/* ranks: the job on this machine, as termsight top watches it. One live source per rank (the
 * session attached to, and the other live sessions that segment_list finds with the same job
 * id), at most RANKS_MAX; the table the Ranks screen draws is refreshed from their analyses
 * after each poll, and the straggler verdict is the job rule's (analysis/job.h), the same that
 * the offline job report applies. */
#include "job.h"
#include "tui_internal.h"

#include <stdlib.h>
#include <string.h>

#define DISCOVER_NS 2000000000ull /* a job starting up: new ranks are looked for this often */

struct ranks {
    char job[64];
    source *src[RANKS_MAX]; /* by rank, as the table */
    size_t n;
    size_t hidden;
    source *selected;
    uint64_t discovered_ns;
    ranks_table t;
};

void ranks_row_fill(rank_row *row, const source_status *st, const analysis *a)
{
    memset(row, 0, sizeof *row);
    row->pid = st->pid;
    row->rank = st->rank;
    row->local_rank = st->local_rank;
    memcpy(row->host, st->host, sizeof row->host);
    row->state = st->state;
    row->gone = st->gone;
    row->events_per_s = st->events_per_s;
    row->drops = st->drops;
    step_summary ss = analysis_steps(a);
    row->step = source_step_now(st, a);
    row->steps = ss.steps;
    row->avg_total_ns = ss.avg_total_ns;
    row->avg_interval_ns = ss.avg_interval_ns;
    row->avg_compute_ns = ss.avg_compute_ns;
    row->avg_wait_ns = ss.avg_comm_wait_ns;
    row->avg_tail_ns = ss.avg_tail_ns;
    row->avg_eval_ns = ss.avg_eval_ns;
    row->avg_comm_ns = ss.avg_comm_ns;
    step_row last;
    if (analysis_recent_steps(a, &last, 1) == 1) {
        row->have_last = 1;
        row->last_total_ns = (double)last.total_ns;
        row->last_interval_ns = (double)last.interval_ns;
        row->last_compute_ns = (double)last.compute_ns;
        row->last_wait_ns = (double)last.comm_wait_ns;
        row->last_tail_ns = (double)last.tail_ns;
        row->last_eval_ns = (double)last.eval_ns;
    }
    cpu_row c;
    row->cpu = analysis_cpu_recent(a, &c, 1) == 1 ? c.process_user + c.process_system : -1;
    memcpy(row->inside, st->inside, sizeof row->inside);
    row->comm_s = st->comm_s;
    row->since_s = st->since_s;
    row->stalled = st->stalled;
}

/* The hang rule over the rows: the ranks the others wait for, and the verdict in words. */
static void hang_verdict(ranks_table *t, size_t n)
{
    job_rank_wait w[RANKS_MAX];
    size_t idx[RANKS_MAX];
    t->stalled = 0;
    for (size_t i = 0; i < n; i++) {
        const rank_row *r = &t->row[i];
        w[i] = (job_rank_wait){.live = !r->gone,
                               .rank = r->rank,
                               .pid = r->pid,
                               .comm_s = r->comm_s,
                               .since_s = r->since_s};
        t->row[i].waited_for = 0;
        t->stalled += r->stalled && !r->gone;
    }
    t->waited_for = job_waited_for(w, n, idx, NULL);
    for (size_t k = 0; k < t->waited_for; k++)
        t->row[idx[k]].waited_for = 1;
    job_hang_verdict(t->hang_verdict, sizeof t->hang_verdict, w, n);
}

void ranks_verdict(ranks_table *t)
{
    job_rank_avg avg[RANKS_MAX] = {{0}}; /* gcc cannot tell the loop below fills the n used */
    job_straggler out[RANKS_MAX];
    size_t n = t->n < RANKS_MAX ? t->n : RANKS_MAX;
    for (size_t i = 0; i < n; i++) {
        const rank_row *r = &t->row[i];
        avg[i] = (job_rank_avg){.steps = r->steps,
                                .total_us = r->avg_total_ns / 1e3,
                                .interval_us = r->avg_interval_ns / 1e3,
                                .compute_us = r->avg_compute_ns / 1e3,
                                .wait_us = r->avg_wait_ns / 1e3,
                                .tail_us = r->avg_tail_ns / 1e3};
        t->row[i].straggler = 0;
        t->row[i].cause = NULL;
    }
    t->unmeasured = 0;
    for (size_t i = 0; i < n; i++)
        t->unmeasured += t->row[i].steps > 0 && !(t->row[i].avg_comm_ns > 0);
    t->stragglers = job_stragglers(avg, n, out);
    hang_verdict(t, n);
    for (size_t k = 0; k < t->stragglers; k++) {
        rank_row *r = &t->row[out[k].idx];
        r->straggler = 1;
        r->cause = out[k].cause;
        r->excess_ns = out[k].excess_us * 1e3;
        r->others_wait_ns = out[k].others_wait_us * 1e3;
    }
}

/* By rank; ranks unknown last, by pid. */
static int by_rank(const void *x, const void *y)
{
    const source_status *a = source_status_of(*(source *const *)x);
    const source_status *b = source_status_of(*(source *const *)y);
    int64_t ra = a->rank < 0 ? INT64_MAX : a->rank, rb = b->rank < 0 ? INT64_MAX : b->rank;
    if (ra != rb)
        return (ra > rb) - (ra < rb);
    return (a->pid > b->pid) - (a->pid < b->pid);
}

static void refresh(ranks *r)
{
    ranks_table *t = &r->t;
    t->n = r->n;
    t->hidden = r->hidden;
    t->world_size = -1;
    for (size_t i = 0; i < r->n; i++) {
        const source_status *st = source_status_of(r->src[i]);
        ranks_row_fill(&t->row[i], st, source_analysis(r->src[i]));
        if (st->world_size > t->world_size)
            t->world_size = st->world_size;
        if (r->src[i] == r->selected)
            t->selected = (int)i;
    }
    ranks_verdict(t);
}

/* Whether pid has a session watched that has not ended (an ended one's pid may come back with
 * a new session, a rank restarted). */
static int watched(const ranks *r, pid_t pid)
{
    for (size_t i = 0; i < r->n; i++)
        if (source_status_of(r->src[i])->pid == pid && !source_status_of(r->src[i])->gone)
            return 1;
    return 0;
}

int ranks_discover(ranks *r)
{
    if (!r->job[0])
        return 0;
    segment_info *list = NULL;
    int n = source_list_live(&list, NULL);
    if (n < 0)
        return 0;
    int added = 0;
    size_t hidden = 0;
    for (int i = 0; i < n; i++) {
        if (strncmp(list[i].job, r->job, sizeof r->job) != 0 || watched(r, list[i].pid))
            continue;
        if (r->n >= RANKS_MAX) {
            hidden++;
            continue;
        }
        source *s;
        if (source_open(list[i].pid, &s, NULL) != 0) /* gone meanwhile, or not ours: later */
            continue;
        if (strcmp(source_status_of(s)->job, r->job) != 0) {
            source_close(s);
            continue;
        }
        r->src[r->n++] = s;
        added++;
    }
    free(list);
    r->hidden = hidden;
    if (added)
        qsort(r->src, r->n, sizeof *r->src, by_rank);
    refresh(r);
    return added;
}

int ranks_open(pid_t pid, ranks **out, char **cause)
{
    *out = NULL;
    ranks *r = calloc(1, sizeof *r);
    if (!r)
        return cause_set(cause, "out of memory");
    if (source_open(pid, &r->src[0], cause) != 0) {
        free(r);
        return -1;
    }
    r->n = 1;
    r->selected = r->src[0];
    const source_status *st = source_status_of(r->src[0]);
    memcpy(r->job, st->job, sizeof r->job);
    memcpy(r->t.job, st->job, sizeof r->t.job);
    refresh(r);
    ranks_discover(r);
    *out = r;
    return 0;
}

void ranks_close(ranks *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        source_close(r->src[i]);
    free(r);
}

void ranks_poll(ranks *r, uint64_t now_ns)
{
    for (size_t i = 0; i < r->n; i++)
        source_poll(r->src[i], now_ns);
    if (r->job[0] && now_ns - r->discovered_ns >= DISCOVER_NS) {
        r->discovered_ns = now_ns;
        ranks_discover(r); /* refreshes */
        return;
    }
    refresh(r);
}

void ranks_resync(ranks *r)
{
    for (size_t i = 0; i < r->n; i++)
        source_resync(r->src[i]);
}

const ranks_table *ranks_table_of(const ranks *r)
{
    return &r->t;
}

source *ranks_source(const ranks *r, size_t i)
{
    return i < r->n ? r->src[i] : NULL;
}

source *ranks_selected(const ranks *r)
{
    return r->selected;
}

void ranks_select(ranks *r, size_t i)
{
    if (i >= r->n)
        return;
    r->selected = r->src[i];
    r->t.selected = (int)i;
}
