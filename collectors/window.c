/* window: the collection windows a session opens by itself, without a call from the program.
 *
 * TERMSIGHT_STEPS=A-B collects from step A's begin through step B's end (steps counted from the
 * API or NVTX step ranges). The step calls run on the training thread, so the window's edges
 * cost it what an event costs: at step A's begin it turns collection on and leaves a request
 * with the moment; the session's loop (loop.c) then writes the start marker, dated that moment,
 * the window's options and names; at step B's end the thread turns collection off and the loop
 * closes the window. The recording is opened ahead, at the loop's first turn, so the window's
 * first events have somewhere to go, and the recorder writes nothing while a start waits, so
 * none of them comes before its marker.
 *
 * TERMSIGHT_DELAY_S and TERMSIGHT_DURATION_S open a window after a delay and close it after a
 * duration: the loop looks at the time each turn. */
#include "collectors.h"

#include <stdio.h>

void window_set_steps(termsight_session *s, uint64_t from, uint64_t to)
{
    pthread_mutex_lock(&s->control);
    s->windows.steps_from = from;
    s->windows.steps_to = to;
    atomic_store(&s->windows.steps_state, 0);
    pthread_mutex_unlock(&s->control);
}

void window_set_timed(termsight_session *s, uint32_t delay_s, uint32_t duration_s)
{
    pthread_mutex_lock(&s->control);
    s->windows.timed = 1;
    s->windows.start_at_ns = tsclock_monotonic_ns() + (uint64_t)delay_s * 1000000000ull;
    s->windows.duration_ns = (uint64_t)duration_s * 1000000000ull;
    s->windows.stop_at_ns = 0;
    pthread_mutex_unlock(&s->control);
}

void window_step_begin(termsight_session *s, uint64_t step)
{
    auto_window *w = &s->windows;
    int expect = 0;
    if (step < w->steps_from || step > w->steps_to ||
        !atomic_compare_exchange_strong(&w->steps_state, &expect, 1))
        return;
    /* A window already open (a monitor started one) is kept, and closed at step B's end; a
     * recording that failed takes no window. */
    if (atomic_load_explicit(&s->state, memory_order_relaxed) == TS_STATE_COLLECTING ||
        atomic_load_explicit(&s->record_error, memory_order_relaxed))
        return;
    atomic_store_explicit(&w->open_ns, tsclock_now(&ts_clock), memory_order_relaxed);
    atomic_fetch_add(&ts_window, 1); /* ranges from here pair up in the new window */
    /* The request before the flag: a drain that sees an event of the window sees the request. */
    atomic_fetch_or_explicit(&w->req, WINDOW_REQ_OPEN, memory_order_release);
    collecting_set(1);
}

void window_step_end(termsight_session *s, uint64_t step)
{
    auto_window *w = &s->windows;
    int expect = 1;
    if (step < w->steps_to || !atomic_compare_exchange_strong(&w->steps_state, &expect, 2))
        return;
    collecting_set(0);
    atomic_fetch_or_explicit(&w->req, WINDOW_REQ_CLOSE, memory_order_release);
}

static void say(const char *what, const char *why)
{
    fprintf(stderr, "termsight: %s: not collecting: %s\n", what, why);
}

void window_serve_locked(termsight_session *s)
{
    auto_window *w = &s->windows;
    if (w->steps_to && !w->prepared) {
        w->prepared = 1;
        int expect = 0;
        if (session_recording_open_locked(s) != TERMSIGHT_OK &&
            atomic_compare_exchange_strong(&w->steps_state, &expect, 2))
            say("TERMSIGHT_STEPS", termsight_last_error());
    }
    uint32_t req = atomic_exchange_explicit(&w->req, 0, memory_order_acquire);
    if (req & WINDOW_REQ_OPEN) {
        int rc = session_window_open_locked(s, atomic_load(&w->open_ns), 1);
        if (rc != TERMSIGHT_OK && rc != TERMSIGHT_E_ALREADY_COLLECTING) {
            collecting_set(0); /* the events would have nowhere to go */
            say("TERMSIGHT_STEPS", termsight_last_error());
        }
    }
    if ((req & WINDOW_REQ_CLOSE) && session_state(s) == TS_STATE_COLLECTING)
        session_window_close_locked(s);

    if (!w->timed && !w->stop_at_ns)
        return;
    uint64_t now = tsclock_monotonic_ns();
    if (w->timed && now >= w->start_at_ns) {
        w->timed = 0;
        if (session_window_open_locked(s, tsclock_now(&ts_clock), 0) != TERMSIGHT_OK)
            say("TERMSIGHT_DELAY_S", termsight_last_error());
        else if (w->duration_ns)
            w->stop_at_ns = now + w->duration_ns;
    }
    if (w->stop_at_ns && now >= w->stop_at_ns) {
        w->stop_at_ns = 0;
        if (session_state(s) == TS_STATE_COLLECTING)
            session_window_close_locked(s);
    }
}
