/* autostart: the session of an unmodified program, created from the environment.
 *
 * `termsight run` preloads libtermsight.so (LD_PRELOAD, and NVTX_INJECTION64_PATH for NVTX) and
 * sets TERMSIGHT_AUTOSTART=1 with the options in TERMSIGHT_* variables. The library's constructor
 * then checks them and makes the session due (autostart_ensure); the NVTX injection entry does the
 * same, for a library loaded only as an injection. The session is made on the process's first
 * event (an API call, an NVTX range, the Python part, CUDA's initialization), so that a process
 * that records nothing of its own (a shell, env, a launcher's shim, readlink) has no segment and
 * no run folder: a program that execs, or runs subprocesses, gets one run folder per process that
 * records. The process `termsight run` started itself (TERMSIGHT_ROOT_PID) gets its session at
 * once all the same, so that an unmodified program is sampled from its start; when it execs (a
 * shim execs the real program), the next program's session reaps what the earlier one left. A
 * forked child of a collecting process gets a session of its own on its first event
 * (session.c).
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
static int auto_checked; /* the environment was read: the session is due, or off */
static termsight_options auto_opts;
static uint64_t auto_from, auto_to;
static uint32_t auto_delay_s, auto_duration_s;
static int auto_timed;

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

/* The environment's windows and pattern: 0, or -1 after saying why profiling is off. */
static int read_environment(void)
{
    termsight_options_init(&auto_opts);
    const char *steps = getenv("TERMSIGHT_STEPS");
    if (steps && *steps && options_parse_steps(steps, &auto_from, &auto_to) != 0) {
        say_off("TERMSIGHT_STEPS=%s is not A-B with 1 <= A <= B", steps);
        return -1;
    }
    if (env_seconds("TERMSIGHT_DELAY_S", &auto_delay_s) ||
        env_seconds("TERMSIGHT_DURATION_S", &auto_duration_s))
        return -1;
    const char *why = NULL;
    if (nvtx_step_pattern_init(&why) != 0) {
        say_off("%s", why);
        return -1;
    }
    auto_timed = getenv("TERMSIGHT_DELAY_S") || getenv("TERMSIGHT_DURATION_S");
    if (auto_to || auto_timed)
        auto_opts.start_collecting = 0;
    return 0;
}

/* Whether this is the process `termsight run` started, in the first program it runs: the
 * variable goes from the environment then (before main reads it), so that what it execs (the
 * program a shim stands for) is profiled as any other process, on its first event. */
static int is_root_process(void)
{
    const char *v = getenv("TERMSIGHT_ROOT_PID");
    uint32_t pid;
    int root = v && options_parse_u32(v, 1, INT32_MAX, &pid) == 0 && (pid_t)pid == getpid();
    if (root)
        unsetenv("TERMSIGHT_ROOT_PID");
    return root;
}

/* At exit, a session still due is not made any more (by the started process's timer). */
static void cancel_at_exit(void)
{
    int expect = SESSION_PENDING_AUTO;
    atomic_compare_exchange_strong(&ts_session_pending, &expect, SESSION_PENDING_NONE);
}

void autostart_ensure(void)
{
    const char *v = getenv("TERMSIGHT_AUTOSTART");
    if (!v || strcmp(v, "1") != 0)
        return;
    pthread_mutex_lock(&auto_lock);
    if (auto_checked || atomic_load(&ts_session)) {
        auto_checked = 1;
        pthread_mutex_unlock(&auto_lock);
        return;
    }
    auto_checked = 1;
    if (read_environment() == 0) {
        atomic_store(&ts_session_pending, SESSION_PENDING_AUTO);
        atexit(cancel_at_exit);
        collecting_set(1); /* the first event call comes this far, and makes the session */
    }
    pthread_mutex_unlock(&auto_lock);
    if (is_root_process())
        autostart_now(); /* the program run was asked to profile: sampled from its start */
}

termsight_session *autostart_now(void)
{
    pthread_mutex_lock(&auto_lock);
    termsight_session *s = atomic_load(&ts_session);
    int expect = SESSION_PENDING_AUTO;
    if (s || !atomic_compare_exchange_strong(&ts_session_pending, &expect, SESSION_PENDING_NONE)) {
        pthread_mutex_unlock(&auto_lock);
        return s;
    }
    termsight_options opts = auto_opts;
    int rc = termsight_session_create(&opts, &s);
    if (rc != TERMSIGHT_OK) {
        say_off("%s", termsight_last_error());
        collecting_set(0);
        pthread_mutex_unlock(&auto_lock);
        return NULL;
    }
    s->autostarted = 1;
    session_reap_earlier_images(s);
    if (session_state(s) != TS_STATE_COLLECTING)
        collecting_set(0); /* set while the session was due; a window turns it on */
    if (auto_to)
        window_set_steps(s, auto_from, auto_to);
    else if (auto_timed)
        window_set_timed(s, auto_delay_s, auto_duration_s);
    pthread_mutex_unlock(&auto_lock);
    return s;
}
