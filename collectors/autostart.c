/* autostart: the session of an unmodified program, created from the environment.
 *
 * `termsight run` preloads libtermsight.so (LD_PRELOAD, and NVTX_INJECTION64_PATH for NVTX) and
 * sets TERMSIGHT_AUTOSTART=1 with the options in TERMSIGHT_* variables. The library's constructor
 * then creates the session before main; the NVTX injection entry calls autostart_ensure too, for a
 * library loaded only as an injection. Every process that starts with that environment is profiled
 * on its own, with its own run folder (a program that execs, or runs subprocesses, gets one run
 * folder per process); a forked child that does not exec gets no session (session.c's atfork
 * hook).
 *
 * Collection windows without code: TERMSIGHT_STEPS=A-B collects from step A's begin through step
 * B's end (steps counted from the API or NVTX step ranges); TERMSIGHT_DELAY_S and
 * TERMSIGHT_DURATION_S start after a delay and stop after a duration, from a timer thread.
 *
 * Signals: none is handled. A handler installed in someone else's process is visible to it (a
 * Python program's signal.getsignal() returns None for a C handler, and its multiprocessing
 * forkserver workers then die restoring it) and changes what Ctrl-C does to it. A process that a
 * signal ends loses nothing the recorder had drained, which it does every millisecond at most;
 * what its lanes still held stays in its shared-memory segment, from which `termsight run` (and
 * `termsight ls --clean`) copy it into the recording after the process is gone (see
 * model/salvage.c). */
#include "collectors.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t auto_lock = PTHREAD_MUTEX_INITIALIZER;
static int auto_done;

/* ---- Timed window ---------------------------------------------------------------------- */

static uint32_t delay_s, duration_s;

static void sleep_s(uint32_t s)
{
    struct timespec ts = {.tv_sec = s};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void *timer_thread(void *arg)
{
    (void)arg;
    sleep_s(delay_s);
    termsight_session *s = atomic_load(&ts_session);
    if (!s || termsight_start(s) != TERMSIGHT_OK || !duration_s)
        return NULL;
    sleep_s(duration_s);
    s = atomic_load(&ts_session);
    if (s)
        termsight_stop(s);
    return NULL;
}

static int start_timer(void)
{
    pthread_t t;
    return util_thread_start(&t, 1, timer_thread, NULL, "termsight-tmr");
}

/* ---- Step window ----------------------------------------------------------------------- */

void autostart_step_begin(termsight_session *s, uint64_t step)
{
    int expect = 0;
    if (step >= s->steps_from && step <= s->steps_to &&
        atomic_compare_exchange_strong(&s->steps_state, &expect, 1))
        termsight_start(s);
}

void autostart_step_end(termsight_session *s, uint64_t step)
{
    int expect = 1;
    if (step >= s->steps_to && atomic_compare_exchange_strong(&s->steps_state, &expect, 2))
        termsight_stop(s);
}

/* ---- Creation -------------------------------------------------------------------------- */

static void say_off(const char *fmt, const char *arg)
{
    fputs("termsight: profiling is off: ", stderr);
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
}

static int env_seconds(const char *name, uint32_t *out)
{
    const char *v = getenv(name);
    *out = 0;
    if (!v || !*v)
        return 0;
    if (options_parse_u32(v, 0, TS_SECONDS_MAX, out) != 0) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s=%.64s is not a number of seconds", name, v);
        say_off("%s", msg);
        return -1;
    }
    return 0;
}

void autostart_ensure(void)
{
    const char *v = getenv("TERMSIGHT_AUTOSTART");
    if (!v || strcmp(v, "1") != 0)
        return;
    pthread_mutex_lock(&auto_lock);
    if (auto_done || atomic_load(&ts_session)) {
        auto_done = 1;
        pthread_mutex_unlock(&auto_lock);
        return;
    }
    auto_done = 1;

    termsight_options opts;
    termsight_options_init(&opts);
    uint64_t from = 0, to = 0;
    const char *steps = getenv("TERMSIGHT_STEPS");
    if (steps && *steps && options_parse_steps(steps, &from, &to) != 0) {
        say_off("TERMSIGHT_STEPS=%s is not A-B with 1 <= A <= B", steps);
        pthread_mutex_unlock(&auto_lock);
        return;
    }
    if (env_seconds("TERMSIGHT_DELAY_S", &delay_s) ||
        env_seconds("TERMSIGHT_DURATION_S", &duration_s)) {
        pthread_mutex_unlock(&auto_lock);
        return;
    }
    const char *why = NULL;
    if (nvtx_step_pattern_init(&why) != 0) {
        say_off("%s", why);
        pthread_mutex_unlock(&auto_lock);
        return;
    }
    int timed = getenv("TERMSIGHT_DELAY_S") || getenv("TERMSIGHT_DURATION_S");
    if (to || timed)
        opts.start_collecting = 0;

    termsight_session *s = NULL;
    int rc = termsight_session_create(&opts, &s);
    if (rc != TERMSIGHT_OK) {
        say_off("%s", termsight_last_error());
        pthread_mutex_unlock(&auto_lock);
        return;
    }
    s->autostarted = 1;
    s->steps_from = from;
    s->steps_to = to;
    if (!to && timed && start_timer() != 0)
        fputs("termsight: cannot start the timer thread of TERMSIGHT_DELAY_S/DURATION_S: "
              "waiting for a start command instead\n",
              stderr);
    pthread_mutex_unlock(&auto_lock);
}
