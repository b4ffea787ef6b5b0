/* session_commands: the session's commands (start, stop, flush, mark, snapshot, end), run on the
 * recorder thread under the control lock, and the API calls that ask for them. */
#include "collectors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- Commands -------------------------------------------------------------------------- */

uint32_t session_state(const termsight_session *s)
{
    return atomic_load(&((termsight_session *)s)->state);
}

/* The state changes under the control lock; monitors read its mirror in the header. */
void session_set_state(termsight_session *s, uint32_t state)
{
    atomic_store(&s->state, state);
    atomic_store(&segment_header(s->seg)->state, state);
}

/* Options and registered names at the head of every window, so any window reads alone. */
void session_window_metadata(termsight_session *s, void (*put)(void *ctx, const ts_event *ev),
                             void *ctx)
{
    const struct {
        const char *key, *value;
    } config[] = {
        {"process", s->process},     {"fp_start_op", s->fp_start_op},
        {"bp_end_op", s->bp_end_op}, {"clock", tsclock_name(&ts_clock)},
        {"cuda", cupti_status()},
    };
    for (size_t i = 0; i < sizeof config / sizeof config[0]; i++) {
        if (!config[i].value)
            continue;
        ts_event ev = session_marker(TS_KIND_CONFIG, session_intern(s, config[i].key),
                                     session_intern(s, config[i].value), 0);
        put(ctx, &ev);
    }
    if (s->job.parent_pid > 0) {
        char v[16];
        snprintf(v, sizeof v, "%d", (int)s->job.parent_pid);
        ts_event ev = session_marker(TS_KIND_CONFIG, session_intern(s, "parent_pid"),
                                     session_intern(s, v), 0);
        put(ctx, &ev);
    }
    if (s->job.id[0]) {
        const struct {
            const char *key;
            int32_t value;
        } ranks[] = {{"rank", s->job.rank},
                     {"local_rank", s->job.local_rank},
                     {"world_size", s->job.world_size}};
        const char *texts[][2] = {
            {"job", s->job.id}, {"job_source", s->job.source}, {"host", s->job.host}};
        for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
            ts_event ev = session_marker(TS_KIND_CONFIG, session_intern(s, texts[i][0]),
                                         session_intern(s, texts[i][1]), 0);
            put(ctx, &ev);
        }
        for (size_t i = 0; i < sizeof ranks / sizeof ranks[0]; i++) {
            char v[16];
            if (ranks[i].value < 0)
                continue;
            snprintf(v, sizeof v, "%d", (int)ranks[i].value);
            ts_event ev = session_marker(TS_KIND_CONFIG, session_intern(s, ranks[i].key),
                                         session_intern(s, v), 0);
            put(ctx, &ev);
        }
    }
    char num[32];
    snprintf(num, sizeof num, "%u", s->opts.timeline_limit_mb);
    ts_event tl = session_marker(TS_KIND_CONFIG, session_intern(s, "timeline_limit_mb"),
                                 session_intern(s, num), 0);
    put(ctx, &tl);
    snprintf(num, sizeof num, "%u", s->opts.sample_interval_ms);
    ts_event si = session_marker(TS_KIND_CONFIG, session_intern(s, "sample_interval_ms"),
                                 session_intern(s, num), 0);
    put(ctx, &si);

    pthread_mutex_lock(&s->meta);
    for (uint32_t i = 0; i < s->thread_count; i++) {
        ts_event ev = session_marker(TS_KIND_THREAD_NAME, s->threads[i].name, 0, 0);
        ev.tid = s->threads[i].tid;
        put(ctx, &ev);
    }
    uint32_t nq = atomic_load(&s->queue_count);
    for (uint32_t i = 0; i < nq; i++) {
        const queue_slot *q = &s->queues[i];
        ts_event ev = session_marker(TS_KIND_QUEUE_INFO, q->name, 0, q->capacity);
        ev.aux = q->role;
        ev.v1 = (uint64_t)q->producer << 32 | q->consumer;
        put(ctx, &ev);
    }
    pthread_mutex_unlock(&s->meta);
}

static void append_one(void *ctx, const ts_event *ev)
{
    recorder_append_locked(ctx, ev, 1);
}

/* Opens window s->window + 1 with its start marker at begin_ns. thread_opened: a training thread
 * already turned collection on and moved the threads' window (the step window, window.c), so
 * only the recording's side is left to do. */
static int window_open(termsight_session *s, uint64_t begin_ns, int thread_opened)
{
    ts_segment_header *h = segment_header(s->seg);
    if (session_state(s) == TS_STATE_COLLECTING)
        return session_fail(TERMSIGHT_E_ALREADY_COLLECTING,
                            "start: the profiler is already collecting (window %u)", s->window);
    if (atomic_load(&s->record_error))
        return session_fail(TERMSIGHT_E_RECORDING, "start: recording stopped earlier: %s",
                            s->record_notice);
    pthread_mutex_lock(&s->drain);
    int rc = s->flight ? 0 : recorder_open_locked(s); /* flight mode: snapshots record */
    if (rc == 0) {
        s->window++;
        s->window_begin_ns = begin_ns;
        ts_event ev = session_marker(TS_KIND_COLLECT_START, 0, 0, s->window);
        ev.begin_ns = ev.end_ns = begin_ns;
        recorder_append_locked(s, &ev, 1);
        session_window_metadata(s, append_one, s);
        recorder_commit_locked(s);
        atomic_store(&s->sample_window, s->window);
        atomic_store(&h->window, s->window);
        session_set_state(s, TS_STATE_COLLECTING);
        if (!thread_opened) {
            atomic_fetch_add(&ts_window, 1);
            collecting_set(1);
        }
    }
    pthread_mutex_unlock(&s->drain);
    if (rc == 0)
        sampler_sample_now(s, 1); /* the window's baseline, now rather than an interval later */
    return rc;
}

static int cmd_start(termsight_session *s)
{
    return window_open(s, tsclock_now(&ts_clock), 0);
}

int session_window_open_locked(termsight_session *s, uint64_t begin_ns, int thread_opened)
{
    return window_open(s, begin_ns, thread_opened);
}

static int cmd_stop(termsight_session *s)
{
    if (session_state(s) != TS_STATE_COLLECTING)
        return session_fail(TERMSIGHT_E_NOT_COLLECTING,
                            "stop: the profiler is not collecting (state %s)",
                            state_name(session_state(s)));
    collecting_set(0);
    /* Forced: a plain flush hands over full buffers only, and the window's last kernels would
     * arrive after the stop marker. */
    cupti_flush(s, 1);
    recorder_drain(s);
    sampler_sample_now(s, 1); /* the window's last figures, however short it was */
    pthread_mutex_lock(&s->drain);
    atomic_store(&s->sample_window, 0); /* no sample after the stop marker */
    ts_event ev = session_marker(TS_KIND_COLLECT_STOP, 0, 0, s->window);
    recorder_append_locked(s, &ev, 1);
    recorder_commit_locked(s);
    pthread_mutex_unlock(&s->drain);
    session_set_state(s, TS_STATE_STOPPED);
    return 0;
}

int session_window_close_locked(termsight_session *s)
{
    return cmd_stop(s);
}

int session_recording_open_locked(termsight_session *s)
{
    if (s->flight)
        return TERMSIGHT_OK; /* snapshots record, when they come */
    if (atomic_load(&s->record_error))
        return session_fail(TERMSIGHT_E_RECORDING, "recording stopped earlier: %s",
                            s->record_notice);
    pthread_mutex_lock(&s->drain);
    int rc = recorder_open_locked(s);
    pthread_mutex_unlock(&s->drain);
    return rc;
}

static int cmd_flush(termsight_session *s)
{
    cupti_flush(s, 0);
    recorder_drain(s);
    pthread_mutex_lock(&s->drain);
    int rc = recorder_sync_locked(s);
    if (!rc && atomic_load(&s->record_error))
        rc = session_fail(TERMSIGHT_E_RECORDING, "flush: recording stopped earlier: %s",
                          s->record_notice);
    pthread_mutex_unlock(&s->drain);
    return rc;
}

static int cmd_mark(termsight_session *s, const char *text)
{
    if (session_state(s) != TS_STATE_COLLECTING)
        return session_fail(TERMSIGHT_E_NOT_COLLECTING, "mark: the profiler is not collecting");
    pthread_mutex_lock(&s->drain);
    ts_event ev = session_marker(TS_KIND_MARK, session_intern(s, text), 0, 0);
    recorder_append_locked(s, &ev, 1);
    recorder_commit_locked(s);
    pthread_mutex_unlock(&s->drain);
    return 0;
}

/* A flight-recorder snapshot of what the session kept: the device records CUDA has, the lanes
 * drained, then written; the answer is the snapshot's folder. */
static int cmd_snapshot(termsight_session *s, const char *why)
{
    cupti_flush(s, 0);
    recorder_drain(s);
    char folder[1400];
    pthread_mutex_lock(&s->drain);
    int rc = flight_snapshot_locked(s, "request", 0, why && *why ? why : "asked for", folder,
                                    sizeof folder);
    pthread_mutex_unlock(&s->drain);
    if (rc == TERMSIGHT_OK)
        snprintf(s->snapshot_folder, sizeof s->snapshot_folder, "%s", folder);
    return rc;
}

/* The end of the session, on the recorder thread: the window closed, the device records
 * flushed, the threads cut off, every lane drained, the recording synced and closed. */
static int cmd_end(termsight_session *s)
{
    /* No window opens any more: a step window not yet begun, a timed one not yet due. */
    atomic_store(&s->windows.steps_state, 2);
    s->windows.timed = 0;
    s->windows.stop_at_ns = 0;
    if (session_state(s) == TS_STATE_COLLECTING)
        cmd_stop(s);
    cupti_stop(s); /* the forced flush at exit: device records still in CUPTI's buffers */
    atomic_store(&ts_session, NULL);
    atomic_fetch_add(&ts_generation, 1);
    /* A drain leaves loss notices for the next one: drain until one has nothing to do (the
     * producers have stopped, so that comes). */
    while (recorder_drain(s))
        ;
    pthread_mutex_lock(&s->drain);
    int rc = recorder_close_locked(s, s->window != 0);
    pthread_mutex_unlock(&s->drain);
    session_set_state(s, TS_STATE_ENDED);
    atomic_store(&s->recorder_quit, 1);
    return rc;
}

int session_command(termsight_session *s, uint32_t cmd, const char *arg)
{
    pthread_mutex_lock(&s->control);
    window_serve_locked(s); /* a step window's start or stop first: the command comes after */
    int rc;
    switch (cmd) {
    case TS_CMD_START:
        rc = cmd_start(s);
        break;
    case TS_CMD_STOP:
        rc = cmd_stop(s);
        break;
    case TS_CMD_FLUSH:
        rc = cmd_flush(s);
        break;
    case TS_CMD_MARK:
        rc = cmd_mark(s, arg ? arg : "");
        break;
    case TS_CMD_SNAPSHOT:
        rc = cmd_snapshot(s, arg);
        break;
    case SESSION_CMD_END:
        rc = cmd_end(s);
        break;
    default:
        rc = session_fail(TERMSIGHT_E_INVALID, "unknown command %u", cmd);
        break;
    }
    pthread_mutex_unlock(&s->control);
    return rc ? rc : session_ok();
}

int session_request(termsight_session *s, uint32_t cmd, const char *arg)
{
    if (pthread_equal(pthread_self(), s->recorder))
        return session_command(s, cmd, arg);
    pthread_mutex_lock(&s->req_lock);
    pthread_mutex_lock(&s->wake_lock);
    if (atomic_load(&s->recorder_quit)) {
        /* The session ended meanwhile (a destroy on another thread): nobody would answer. */
        pthread_mutex_unlock(&s->wake_lock);
        pthread_mutex_unlock(&s->req_lock);
        return session_fail(TERMSIGHT_E_NO_SESSION, "the session has ended");
    }
    s->req.cmd = cmd;
    s->req.arg = arg;
    s->req.pending = 1;
    pthread_cond_broadcast(&s->wake);
    while (s->req.pending)
        pthread_cond_wait(&s->done, &s->wake_lock);
    int rc = s->req.rc;
    if (rc)
        session_fail(rc, "%s", s->req.msg);
    pthread_mutex_unlock(&s->wake_lock);
    pthread_mutex_unlock(&s->req_lock);
    return rc ? rc : session_ok();
}

static int with_session(termsight_session *s, uint32_t cmd, const char *arg)
{
    if (!s)
        return session_fail(TERMSIGHT_E_NO_SESSION, "no profiler session");
    /* A forked child keeps the pointer but not the session (fork_child): the fork may have
     * copied its locks held by threads the child lacks, and its lanes are the parent's. */
    if (s != atomic_load(&ts_session))
        return session_fail(TERMSIGHT_E_NO_SESSION,
                            "not this process's session (a forked child has none)");
    return session_request(s, cmd, arg);
}

int termsight_start(termsight_session *s)
{
    return with_session(s, TS_CMD_START, NULL);
}

int termsight_stop(termsight_session *s)
{
    return with_session(s, TS_CMD_STOP, NULL);
}

int termsight_flush(termsight_session *s)
{
    return with_session(s, TS_CMD_FLUSH, NULL);
}

int termsight_snapshot(termsight_session *s, const char *why)
{
    return with_session(s, TS_CMD_SNAPSHOT, why);
}

int termsight_cuda_lend(int lent)
{
    if (cupti_lend(atomic_load(&ts_session), lent) == 0)
        return TERMSIGHT_OK;
    return session_fail(TERMSIGHT_E_SYSTEM, "CUDA collection: %s", cupti_status());
}

const char *termsight_state(const termsight_session *s)
{
    return s ? state_name(session_state(s)) : "none";
}

const char *termsight_run_folder(const termsight_session *s)
{
    return s ? s->run_folder : "";
}

int termsight_stacks_file(termsight_session *s)
{
    if (!s) {
        session_fail(TERMSIGHT_E_NO_SESSION, "stacks file: no session");
        return -1;
    }
    char why[512];
    int dir =
        util_open_run_folder(s->output_path, s->run_folder, s->flight != NULL, why, sizeof why);
    if (dir < 0) {
        session_fail(TERMSIGHT_E_RECORDING, "stacks file: %s", why);
        return -1;
    }
    int fd =
        openat(dir, TS_STACKS_FILE, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    int err = errno;
    close(dir);
    if (fd < 0)
        session_fail(TERMSIGHT_E_RECORDING, "stacks file %s/%s: %s", s->run_folder, TS_STACKS_FILE,
                     strerror(err));
    return fd;
}

int termsight_flight(const termsight_session *s)
{
    return s && s->flight;
}

uint64_t termsight_events_recorded(const termsight_session *s)
{
    return s ? atomic_load(&((termsight_session *)s)->events_recorded) : 0;
}

uint64_t termsight_events_dropped(const termsight_session *s)
{
    return s ? atomic_load(&((termsight_session *)s)->drops) : 0;
}
