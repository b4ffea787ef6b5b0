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
 * SIGINT and SIGTERM, when their disposition is the default at start-up: the handler only writes
 * the signal number into a pipe (async-signal-safe); a thread "termsight-sig" reads it, ends the
 * session (stop, flush, segment removed), restores the default disposition and raises the signal
 * again, so the process ends as the signal would have ended it. The trade-off: the program goes on
 * running for the few milliseconds the flush takes, and a process whose signal thread could not
 * start ends at once without the flush. A handler the program installs later replaces ours (its
 * exit then goes through atexit, which flushes too). */
#include "collectors.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_SECONDS 31536000u /* a year */

static pthread_mutex_t auto_lock = PTHREAD_MUTEX_INITIALIZER;
static int auto_done;

/* ---- Signals --------------------------------------------------------------------------- */

static int sig_pipe[2] = {-1, -1};
static pid_t sig_pid;

static void sig_handler(int sig)
{
    int saved = errno;
    unsigned char c = (unsigned char)sig;
    /* A forked child inherits the handler but not the thread, and the pipe leads to the parent. */
    if (getpid() != sig_pid || sig_pipe[1] < 0 || write(sig_pipe[1], &c, 1) != 1) {
        signal(sig, SIG_DFL);
        raise(sig);
    }
    errno = saved;
}

static void *sig_thread(void *arg)
{
    (void)arg;
    unsigned char c;
    for (;;) {
        ssize_t n = read(sig_pipe[0], &c, 1);
        if (n == 1)
            break;
        if (n < 0 && errno == EINTR)
            continue;
        return NULL;
    }
    termsight_session *s = atomic_load(&ts_session);
    if (s)
        termsight_session_destroy(s);
    signal(c, SIG_DFL);
    /* To the process, not raise(): this thread blocks every signal. */
    kill(getpid(), c);
    return NULL;
}

static void install_signals(void)
{
    struct sigaction old;
    int want[2] = {SIGINT, SIGTERM};
    int any = 0;
    for (int i = 0; i < 2; i++)
        if (sigaction(want[i], NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
            old.sa_handler == SIG_DFL)
            any = 1;
    if (!any || pipe2(sig_pipe, O_CLOEXEC) != 0)
        return;
    sig_pid = getpid();
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    /* The thread must not take the program's signals: it starts with them all blocked. */
    sigset_t all, prev;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &prev);
    int rc = pthread_create(&t, &attr, sig_thread, NULL);
    pthread_sigmask(SIG_SETMASK, &prev, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        close(sig_pipe[0]);
        close(sig_pipe[1]);
        sig_pipe[0] = sig_pipe[1] = -1;
        return;
    }
    pthread_setname_np(t, "termsight-sig");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = sig_handler;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 2; i++)
        if (sigaction(want[i], NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
            old.sa_handler == SIG_DFL)
            sigaction(want[i], &sa, NULL);
}

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
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    sigset_t all, prev;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &prev);
    int rc = pthread_create(&t, &attr, timer_thread, NULL);
    pthread_sigmask(SIG_SETMASK, &prev, NULL);
    pthread_attr_destroy(&attr);
    if (rc == 0)
        pthread_setname_np(t, "termsight-tmr");
    return rc == 0 ? 0 : -1;
}

/* ---- Step window ----------------------------------------------------------------------- */

int autostart_parse_steps(const char *v, uint64_t *from, uint64_t *to)
{
    char *end;
    errno = 0;
    unsigned long long a = strtoull(v, &end, 10);
    if (errno || end == v || *end != '-' || v[0] == '-')
        return -1;
    const char *b_text = end + 1;
    unsigned long long b = strtoull(b_text, &end, 10);
    if (errno || end == b_text || *end || *b_text == '-' || a < 1 || b < a)
        return -1;
    *from = a;
    *to = b;
    return 0;
}

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
    if (util_parse_u32(v, 0, MAX_SECONDS, out) != 0) {
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
    if (steps && *steps && autostart_parse_steps(steps, &from, &to) != 0) {
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
    install_signals();
    pthread_mutex_unlock(&auto_lock);
}

__attribute__((constructor)) static void autostart_constructor(void)
{
    autostart_ensure();
}
