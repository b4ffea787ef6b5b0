/* loop: the session's background thread ("termsight-rec"). Each turn it drains the lanes through
 * the recorder (recorder.c) after serving what the windows ask for (window.c), serves a command
 * from the mailbox (a monitor's) and a request handed over by session_request (the program's API
 * calls on other threads), keeps the header's heartbeat, reaps the segments of forked children that
 * ended with _exit, and refines the clock; then sleeps a little, less when lanes are filling. The
 * session's commands run here, so the recording is only ever written from this thread. */
#include "collectors.h"

#include <errno.h>
#include <stdio.h>
#include <time.h>

#define IDLE_SLEEP_NS    1000000L     /* 1 ms between drains when lanes are quiet */
#define FILLING_SLEEP_NS 100000L      /* 0.1 ms when a drain found some events */
#define REAP_GAP_NS      100000000ull /* 100 ms between looks for ended forked children */

/* Runs a request handed over by session_request, if one waits. */
static void serve_request(termsight_session *s)
{
    pthread_mutex_lock(&s->wake_lock);
    int pending = s->req.pending == 1;
    uint32_t cmd = s->req.cmd;
    const char *arg = s->req.arg;
    pthread_mutex_unlock(&s->wake_lock);
    if (!pending)
        return;
    int rc = session_command(s, cmd, arg);
    pthread_mutex_lock(&s->wake_lock);
    s->req.rc = rc;
    snprintf(s->req.msg, sizeof s->req.msg, "%s", rc ? termsight_last_error() : "");
    s->req.pending = 0;
    pthread_cond_broadcast(&s->done);
    pthread_mutex_unlock(&s->wake_lock);
}

/* Sleeps ns, or until woken for a request or a quit. */
static void sleep_for(termsight_session *s, long ns)
{
    uint64_t deadline = tsclock_monotonic_ns() + (uint64_t)ns;
    struct timespec ts = {(time_t)(deadline / 1000000000ull), (long)(deadline % 1000000000ull)};
    pthread_mutex_lock(&s->wake_lock);
    while (!s->req.pending && !atomic_load_explicit(&s->recorder_quit, memory_order_relaxed))
        if (pthread_cond_timedwait(&s->wake, &s->wake_lock, &ts) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&s->wake_lock);
}

void loop_wake(termsight_session *s)
{
    pthread_mutex_lock(&s->wake_lock);
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->wake_lock);
}

/* The step count for monitors, who see the steps' events only while collecting (and may miss
 * some): the training's own count, a load and a store a turn, none on the training thread. */
static void mirror_steps(termsight_session *s, ts_segment_header *h)
{
    uint64_t step = atomic_load_explicit(&s->step, memory_order_relaxed);
    atomic_store_explicit(&h->steps, step > UINT32_MAX ? UINT32_MAX : (uint32_t)step,
                          memory_order_relaxed);
}

static void *loop_main(void *arg)
{
    termsight_session *s = arg;
    s->private_fds = util_private_fds();
    ts_segment_header *h = segment_header(s->seg);
    uint32_t lane_events = segment_geometry_of(s->seg)->lane_events;
    uint64_t next_refine = tsclock_now(&ts_clock) + 1000000000ull, refine_gap = 1000000000ull;
    uint64_t next_reap = 0;
    while (!atomic_load_explicit(&s->recorder_quit, memory_order_acquire)) {
        /* The windows' requests before the drain: a step window's start marker goes before its
         * events (the recorder holds them while a start waits). */
        pthread_mutex_lock(&s->control);
        window_serve_locked(s);
        pthread_mutex_unlock(&s->control);
        size_t n = recorder_drain(s);

        uint64_t seq;
        uint32_t cmd;
        char arg_text[TS_MAILBOX_ARG];
        if (mailbox_take(s->seg, &s->mailbox, &seq, &cmd, arg_text, sizeof arg_text)) {
            /* Only the commands a monitor may send: the end of a session is the program's. */
            int rc = mailbox_cmd_name(cmd)
                         ? session_command(s, cmd, arg_text)
                         : session_fail(TERMSIGHT_E_INVALID, "unknown command %u", cmd);
            mailbox_answer(s->seg, seq, rc,
                           rc                       ? termsight_last_error()
                           : cmd == TS_CMD_SNAPSHOT ? s->snapshot_folder
                                                    : "ok");
        }
        serve_request(s);
        flight_watch(s, tsclock_now(&ts_clock));

        uint64_t now = tsclock_now(&ts_clock);
        atomic_store_explicit(&h->heartbeat_ns, now, memory_order_relaxed);
        mirror_steps(s, h);
        if (atomic_load_explicit(&ts_forked, memory_order_relaxed)) {
            /* Forked children that ended with _exit (a DataLoader worker does) left their
             * segments: their last events into their recordings, the segments removed. First
             * a gap after the first fork: forks come in bursts (a loader's workers), and a look
             * allocates, which a sanitizer's allocator may not survive beside a fork. */
            if (!next_reap)
                next_reap = now + REAP_GAP_NS;
            else if (now >= next_reap) {
                session_reap_children(s);
                next_reap = now + REAP_GAP_NS;
            }
        }
        if (now >= next_refine) {
            /* Longer windows give a better rate: 1 s, 4 s, 16 s ... then every 17 minutes. */
            tsclock_refine(&ts_clock);
            if (refine_gap < 1024000000000ull)
                refine_gap *= 4;
            next_refine = now + refine_gap;
        }
        /* Busy lanes are drained again at once, filling ones soon, quiet ones after a
         * millisecond: a burst finds the recorder awake without a trickle keeping it spinning. */
        if (n < lane_events / 8 && !window_opening(s))
            sleep_for(s, n ? FILLING_SLEEP_NS : IDLE_SLEEP_NS);
    }
    recorder_drain(s);
    mirror_steps(s, h);
    if (atomic_load_explicit(&ts_forked, memory_order_relaxed))
        session_reap_children(s);
    return NULL;
}

int loop_start(termsight_session *s)
{
    if (recorder_init(s) != 0)
        return -1;
    atomic_store(&s->recorder_quit, 0);
    if (util_thread_start(&s->recorder, 0, loop_main, s, "termsight-rec") != 0)
        return -1;
    s->recorder_running = 1;
    return 0;
}

void loop_stop(termsight_session *s)
{
    if (!s->recorder_running)
        return;
    atomic_store_explicit(&s->recorder_quit, 1, memory_order_release);
    loop_wake(s);
    pthread_join(s->recorder, NULL);
    s->recorder_running = 0;
}
