/* source: the live side of the monitor. It maps a session's segment read-only and feeds an
 * analysis and the timeline ring from it, never writing to it, never blocking a writer:
 *
 * - steps and operator statistics from the collector's boards (model.h), which its recorder
 *   keeps of everything it writes: exact at any event rate, whenever the monitor looks;
 * - the rest (queues, counters, CPU, memory, the timeline's recent ops) from what the lanes
 *   hold, copied with lane_observe. A lane that has more than LIVE_READ_MAX events new since the
 *   last poll is read from its newest LIVE_TAIL on: what is skipped, or lapped by the writer, is
 *   counted as missed, and the views built from lanes say "sampled" while it happens.
 *
 * The analysis and the ring are bounded, so memory stays flat over a run of days.
 *
 * Commands go through the mailbox of a second, writable mapping opened on the first command. */
#include "job.h"
#include "tui_internal.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define OBSERVE_BATCH  4096  /* events copied per lane_observe call */
#define TIMELINE_KEEP  32768 /* events the timeline ring holds (2 MiB) */
#define RATE_WINDOW_NS 1000000000ull
#define LIVE_READ_MAX  (1u << 18)    /* new events of a lane read whole per poll ... */
#define LIVE_TAIL      TIMELINE_KEEP /* ... past that, its newest ones */
#define SAMPLED_NS     5000000000ull /* "sampled" stays this long after a miss */
#define LIVE_STEPS     256           /* the steps a live view shows (the analysis keeps) */
#define BOARD_TRIES    16            /* reads of the step board per poll, at most */

struct source {
    segment *seg; /* read-only: the data */
    segment *cmd; /* writable: the mailbox; NULL until the first command */
    pid_t pid;
    uint32_t lanes;   /* lane_count of the header */
    uint64_t *cursor; /* per lane, the next index to read */
    ts_event *buf;
    analysis *an;
    tlring tl;
    source_status st;
    uint64_t rate_ns;      /* start of the events/s window */
    uint64_t rate_written; /* sum of lane heads then */
    int rate_known;
    uint64_t end_realtime_ns; /* when the process was seen gone, 0 while alive */
    int finished;             /* analysis_finish was called: the run is over */
    uint64_t last_miss_ns;    /* CLOCK_MONOTONIC of the last poll that missed events */
    op_totals *ops_seen;      /* per op record of the board, what was handed to the analysis */
    uint64_t names_seen[TS_BOARD_NAMES]; /* per names record, what was handed to it */
    step_row *rows;                      /* scratch: the step board's rows */
};

static uint64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t lane_head(const source *s, uint32_t i)
{
    ts_lane *l = segment_lane(s->seg, i);
    return l ? atomic_load_explicit(&l->head, memory_order_acquire) : 0;
}

/* The oldest index of lane i that a copy can still get whole: the slot of head - cap is the one
 * the writer fills next (cap: the ring it writes now; lanes grow). */
static uint64_t oldest_intact(const source *s, uint32_t i)
{
    uint64_t head = lane_head(s, i);
    uint64_t cap = lane_capacity(s->seg, i);
    return head >= cap ? head - cap + 1 : 0;
}

static uint32_t lanes_used(const source *s)
{
    uint32_t used = atomic_load_explicit(&segment_header(s->seg)->lanes_used, memory_order_acquire);
    return used > s->lanes ? s->lanes : used;
}

/* What the process is inside now, and whether it has stalled (no step end for a while). */
static void read_inside(source *s)
{
    source_status *st = &s->st;
    if (st->gone) {
        st->inside[0] = 0;
        st->comm_s = -1;
        st->stalled = 0;
        return;
    }
    inflight_summary in;
    uint64_t now = tsclock_monotonic_ns();
    inflight_read(s->seg, now, &in);
    double inside_s = job_inside_text(s->seg, &in, now, st->inside, sizeof st->inside);
    st->comm_s = in.ncomms ? (inside_s < 0 ? 0 : inside_s) : -1;
    uint64_t from = in.last_step_end_ns ? in.last_step_end_ns : segment_header(s->seg)->start_ns;
    st->since_s = now > from ? (double)(now - from) / 1e9 : 0;
    st->stalled = st->inside[0] && job_stalled(st->since_s, (double)in.typical_step_ns / 1e9);
}

static void read_header(source *s)
{
    ts_segment_header *h = segment_header(s->seg);
    source_status *st = &s->st;
    st->pid = h->pid;
    segment_copy_field(st->process, sizeof st->process, h->process, sizeof h->process);
    segment_copy_field(st->job, sizeof st->job, h->job, sizeof h->job);
    segment_copy_field(st->host, sizeof st->host, h->host, sizeof h->host);
    st->rank = st->job[0] && h->rank >= 0 ? h->rank : -1;
    st->local_rank = st->job[0] && h->local_rank >= 0 ? h->local_rank : -1;
    st->world_size = st->job[0] && h->world_size > 0 ? h->world_size : -1;
    st->state = atomic_load_explicit(&h->state, memory_order_acquire);
    st->drops = atomic_load_explicit(&h->drops, memory_order_relaxed);
    st->lost_threads = segment_lane_losses(s->seg, &st->worst, 1);
    st->window = atomic_load_explicit(&h->window, memory_order_relaxed);
    st->flight_mb = h->minor >= 2 ? h->flight_mb : 0;
    st->steps = atomic_load_explicit(&h->steps, memory_order_relaxed);
    st->record_error = atomic_load_explicit(&h->record_error, memory_order_acquire);
    if (st->record_error)
        segment_copy_field(st->record_notice, sizeof st->record_notice, h->record_notice,
                           sizeof h->record_notice);
    if (!st->gone && (st->state == TS_STATE_ENDED || (kill(s->pid, 0) != 0 && errno == ESRCH))) {
        st->gone = 1;
        s->end_realtime_ns = realtime_ns();
    }
    uint64_t now = s->end_realtime_ns ? s->end_realtime_ns : realtime_ns();
    st->elapsed_s = now > h->start_realtime_ns ? (double)(now - h->start_realtime_ns) / 1e9 : 0;
    read_inside(s);
}

int source_open(pid_t pid, source **out, char **cause)
{
    *out = NULL;
    source *s = calloc(1, sizeof *s);
    if (!s)
        return cause_set(cause, "out of memory");
    s->pid = pid;
    if (segment_attach(pid, 0, &s->seg, cause) != 0) {
        free(s);
        return -1;
    }
    ts_segment_header *h = segment_header(s->seg);
    /* Once: the header's run folder never changes, and a relative one (older collectors) can
     * only be resolved while its process lives. */
    char *why = NULL;
    if (segment_run_folder(s->seg, s->st.run_folder, sizeof s->st.run_folder, &why) != 0) {
        segment_copy_field(s->st.run_folder, sizeof s->st.run_folder, h->run_folder,
                           sizeof h->run_folder);
        snprintf(s->st.folder_why, sizeof s->st.folder_why, "%s", why ? why : "unknown");
    }
    free(why);
    snprintf(s->st.note, sizeof s->st.note, "%s", segment_note(s->seg));
    s->lanes = h->lane_count;
    s->cursor = calloc(s->lanes ? s->lanes : 1, sizeof *s->cursor);
    s->buf = malloc(OBSERVE_BATCH * sizeof *s->buf);
    analysis_config cfg;
    analysis_config_init(&cfg);
    cfg.board = 1;
    s->an = analysis_create(&cfg, analysis_names_segment, s->seg);
    s->ops_seen = calloc(TS_BOARD_OPS, sizeof *s->ops_seen);
    s->rows = malloc(LIVE_STEPS * sizeof *s->rows);
    if (!s->cursor || !s->buf || !s->an || !s->ops_seen || !s->rows ||
        tlring_init(&s->tl, TIMELINE_KEEP) != 0) {
        source_close(s);
        return cause_set(cause, "out of memory");
    }
    /* What the rings hold now is recent history: start from it (its newest LIVE_READ_MAX). What
     * was overwritten before we came is not missed. */
    for (uint32_t i = 0; i < s->lanes; i++) {
        uint64_t head = lane_head(s, i), oldest = oldest_intact(s, i);
        s->cursor[i] =
            head > LIVE_READ_MAX && head - LIVE_READ_MAX > oldest ? head - LIVE_READ_MAX : oldest;
    }
    read_header(s);
    *out = s;
    return 0;
}

void source_close(source *s)
{
    if (!s)
        return;
    segment_close(s->seg, 0);
    segment_close(s->cmd, 0);
    analysis_destroy(s->an);
    tlring_free(&s->tl);
    free(s->cursor);
    free(s->buf);
    free(s->ops_seen);
    free(s->rows);
    free(s);
}

/* The step board's rows with the totals they were counted in, so that the averages are those of
 * the steps shown; the step begun last and what went unattributed from the totals record, which
 * is newer. A writer that publishes a burst of steps while the rows are copied costs the oldest
 * of them: again, then, until the recent steps are whole (a few tries). */
static void read_steps(source *s)
{
    step_totals t, now;
    for (int tries = 0; tries < BOARD_TRIES; tries++) {
        uint64_t next;
        size_t n = board_get_steps(s->seg, 0, s->rows, LIVE_STEPS, &next, &t);
        if (n < (next < LIVE_STEPS ? next : LIVE_STEPS))
            continue;
        if (!n)
            memset(&t, 0, sizeof t);
        if (board_get_totals(s->seg, &now) == 0 && now.steps >= t.steps) {
            t.current_step = now.current_step;
            t.late = now.late;
            t.outside = now.outside;
            t.dropped = now.dropped;
            t.incomplete = now.incomplete;
        }
        analysis_steps_load(s->an, &t, s->rows, n);
        return;
    }
}

/* What each op record gained since the last poll, added to the analysis (a record that went
 * back, which only damage does, is passed over). */
static void read_ops(source *s)
{
    uint32_t used = board_ops_used(s->seg);
    for (uint32_t i = 0; i < used; i++) {
        ts_op_record r;
        op_totals *seen = &s->ops_seen[i];
        if (board_get_op(s->seg, i, &r) != 0 || r.t.count <= seen->count ||
            r.t.total_ns < seen->total_ns || r.t.self_ns < seen->self_ns ||
            r.t.flops < seen->flops || r.t.flops_ns < seen->flops_ns ||
            r.t.flops_self_ns < seen->flops_self_ns)
            continue;
        op_totals d = {.count = r.t.count - seen->count,
                       .total_ns = r.t.total_ns - seen->total_ns,
                       .self_ns = r.t.self_ns - seen->self_ns,
                       .min_ns = r.t.min_ns,
                       .max_ns = r.t.max_ns,
                       .flops = r.t.flops - seen->flops,
                       .flops_ns = r.t.flops_ns - seen->flops_ns,
                       .flops_self_ns = r.t.flops_self_ns - seen->flops_self_ns};
        analysis_ops_add(s->an, r.kind, r.name, r.type, r.flags, &d);
        *seen = r.t;
    }
}

/* The names the program gave its threads and processes, whenever it gave them (the lanes'
 * events that said so are long gone for a monitor that came later). */
static void read_names(source *s)
{
    uint32_t names = board_names_used(s->seg);
    for (uint32_t i = 0; i < names; i++) {
        uint32_t tid, name;
        if (board_get_name(s->seg, i, &tid, &name) == 0 &&
            s->names_seen[i] != ((uint64_t)tid << 32 | name)) {
            s->names_seen[i] = (uint64_t)tid << 32 | name;
            analysis_name_thread(s->an, tid, name);
        }
    }
}

static void read_boards(source *s)
{
    read_steps(s);
    read_ops(s);
    read_names(s);
    s->st.ops_lost = board_ops_lost(s->seg);
    s->st.board_ns = board_published_ns(s->seg);
}

size_t source_poll(source *s, uint64_t now_ns)
{
    read_header(s);
    read_boards(s);
    uint32_t used = lanes_used(s);
    size_t total = 0;
    uint64_t written = 0, missed = s->st.missed;
    for (uint32_t i = 0; i < used; i++) {
        /* A lane far ahead is read from its newest events: the boards have its steps and
         * operators, the timeline wants what is recent. */
        uint64_t head = lane_head(s, i);
        if (head > s->cursor[i] && head - s->cursor[i] > LIVE_READ_MAX) {
            s->st.missed += head - LIVE_TAIL - s->cursor[i];
            s->cursor[i] = head - LIVE_TAIL;
        }
        /* At most one ring per lane and poll: a lane that laps us is read from its oldest
         * intact event on, never chased. */
        for (uint64_t budget = lane_capacity(s->seg, i); budget > 0;) {
            size_t max = budget < OBSERVE_BATCH ? (size_t)budget : OBSERVE_BATCH;
            size_t n = lane_observe(s->seg, i, &s->cursor[i], s->buf, max, &s->st.missed);
            if (!n)
                break;
            analysis_feed(s->an, s->buf, n);
            tlring_feed(&s->tl, s->buf, n);
            total += n;
            budget -= n;
            if (n < max)
                break;
        }
        written += lane_head(s, i);
    }
    /* Finishing closes the open queue buckets and steps, which a live view reads as they
     * are (analysis_queue_recent includes open buckets); only a run that is over is finished. */
    if (s->st.gone && !s->finished) {
        analysis_finish(s->an);
        s->finished = 1;
    }
    s->st.observed += total;
    if (s->st.missed != missed)
        s->last_miss_ns = now_ns;
    s->st.sampled = s->last_miss_ns && now_ns - s->last_miss_ns < SAMPLED_NS;
    /* The rate over at least a second (the first one over what there is): steadier to read,
     * and the header does not change at every refresh of a fast display. */
    if (!s->rate_ns) {
        s->rate_ns = now_ns;
        s->rate_written = written;
    } else if (now_ns > s->rate_ns && (now_ns - s->rate_ns >= RATE_WINDOW_NS || !s->rate_known)) {
        double dt = (double)(now_ns - s->rate_ns) / 1e9;
        uint64_t d = written >= s->rate_written ? written - s->rate_written : 0;
        s->st.events_per_s = (double)d / dt;
        s->rate_known = 1;
        s->rate_ns = now_ns;
        s->rate_written = written;
    }
    if (s->st.gone)
        s->st.events_per_s = 0;
    return total;
}

void source_resync(source *s)
{
    uint32_t used = lanes_used(s);
    for (uint32_t i = 0; i < used; i++) {
        uint64_t oldest = oldest_intact(s, i);
        if (s->cursor[i] < oldest)
            s->cursor[i] = oldest;
    }
}

uint64_t source_step_now(const source_status *st, const analysis *a)
{
    uint64_t seen = analysis_steps(a).current_step;
    return st && st->steps > seen ? st->steps : seen;
}

analysis *source_analysis(const source *s)
{
    return s->an;
}

const tlring *source_timeline(const source *s)
{
    return &s->tl;
}

const source_status *source_status_of(const source *s)
{
    return &s->st;
}

int source_send(source *s, uint32_t cmd, uint64_t *seq, char **cause)
{
    if (s->st.gone)
        return cause_set(cause, "the process has ended");
    /* The segment shown, by its name: the pid's other names may be anyone's. */
    if (!s->cmd && segment_attach_name(segment_shm_name(s->seg), 1, &s->cmd, cause) != 0)
        return -1;
    return mailbox_send(s->cmd, cmd, NULL, seq, cause);
}

int source_reply(source *s, uint64_t seq, int32_t *status, char *msg, size_t len)
{
    return s->cmd ? mailbox_reply(s->cmd, seq, status, msg, len) : 0;
}

static int live(const segment_info *i)
{
    return i->alive && i->readable && i->state != TS_STATE_ENDED;
}

int source_list_live(segment_info **out, char **cause)
{
    int n = segment_list(out, cause);
    if (n < 0)
        return -1;
    int k = 0;
    for (int i = 0; i < n; i++)
        if (live(&(*out)[i]))
            (*out)[k++] = (*out)[i];
    return k;
}
