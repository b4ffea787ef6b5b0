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
 * B's end; TERMSIGHT_DELAY_S and TERMSIGHT_DURATION_S start after a delay and stop after a
 * duration. The session's loop opens and closes them (window.c).
 *
 * Signals: none is handled. A handler installed in someone else's process is visible to it (a
 * Python program's signal.getsignal() returns None for a C handler, and its multiprocessing
 * forkserver workers then die restoring it) and changes what Ctrl-C does to it. A process that a
 * signal ends loses nothing the recorder had drained, which it does every millisecond at most;
 * what its lanes still held stays in its shared-memory segment, from which `termsight run` (and
 * `termsight ls --clean`) copy it into the recording after the process is gone (see
 * model/salvage.c). */
#include "collectors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t auto_lock = PTHREAD_MUTEX_INITIALIZER;
static int auto_done;

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
    uint32_t delay_s, duration_s;
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
    if (to)
        window_set_steps(s, from, to);
    else if (timed)
        window_set_timed(s, delay_s, duration_s);
    pthread_mutex_unlock(&auto_lock);
}
