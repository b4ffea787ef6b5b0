/* tui: termsight top's entry point and loop. It finds the session (a pid, a process name, or the
 * newest live one; it waits for one to appear, and offers a chooser when several match), then
 * observes, draws and answers keys until q. Commands to the collector go through the mailbox and
 * their answers are awaited without blocking the display; 'a' runs the report writer on a thread of
 * its own with a progress bar. */
#include "report.h"
#include "tui_internal.h"

#include <errno.h>
#include <locale.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define COMMAND_TIMEOUT_NS 5000000000ull /* the collector answers within milliseconds */
#define WAIT_POLL_MS       500           /* looking for a session to appear */
#define KEY_WAIT_MAX_MS    250           /* quit signals are seen at least this often */
#define BUSY_WAIT_MS       100           /* while a command or the analysis is under way */
#define TOP_ADVICE         3

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- Finding the session ---------------------------------------------------------------- */

typedef struct target {
    pid_t pid;        /* > 0: this pid */
    const char *name; /* else, when not NULL: sessions of this process name */
} target;

static int parse_target(const char *text, target *t, char **cause)
{
    memset(t, 0, sizeof *t);
    if (!text || !*text)
        return 0;
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (!*end && end != text) {
        if (errno || v <= 0 || v > 0x7fffffff)
            return cause_set(cause, "top: '%s' is not a valid pid", text);
        t->pid = (pid_t)v;
        return 0;
    }
    t->name = text;
    return 0;
}

/* The live sessions the target matches, oldest first: a process name matches exactly, or, when
 * no session has it exactly, as a prefix. */
static int candidates(const target *t, segment_info **out, char **cause)
{
    int n = source_list_live(out, cause);
    if (n <= 0 || (!t->name && !t->pid))
        return n;
    int k = 0;
    if (t->pid) {
        for (int i = 0; i < n; i++)
            if ((*out)[i].pid == t->pid)
                (*out)[k++] = (*out)[i];
        return k;
    }
    for (int i = 0; i < n; i++)
        if (!strcmp((*out)[i].process, t->name))
            (*out)[k++] = (*out)[i];
    if (k)
        return k;
    size_t len = strlen(t->name);
    for (int i = 0; i < n; i++)
        if (!strncmp((*out)[i].process, t->name, len))
            (*out)[k++] = (*out)[i];
    return k;
}

static int newest(const segment_info *list, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (list[i].start_realtime_ns >= list[best].start_realtime_ns)
            best = i;
    return best;
}

/* ---- The attached monitor ---------------------------------------------------------------- */

enum pending { PENDING_NONE, PENDING_STARTSTOP, PENDING_FLUSH };

typedef struct app {
    const glyphs *g;
    uint64_t refresh_ns;
    canvas cv;
    layout L;
    view v;
    source *src;
    panel_ctx pc;
    int all; /* paint every row next time */

    enum pending pending;
    uint32_t cmd;
    uint64_t seq, deadline;
    char last_command[320];
    int last_failed;

    char message[640];
    int message_role;

    /* The analysis thread. */
    int analysing;
    pthread_t thread;
    char *run_folder;
    _Atomic uint32_t permille;
    _Atomic int done;
    int rc;
    char *why;
    report *rep;
    char notice[4096];
} app;

static void say(app *a, int role, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(app *a, int role, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->message, sizeof a->message, fmt, ap);
    va_end(ap);
    a->message_role = role;
}

static void send_command(app *a, uint32_t cmd, enum pending why)
{
    if (a->pending != PENDING_NONE) {
        say(a, ROLE_WARN, "the collector has not answered the last command yet");
        return;
    }
    char *cause = NULL;
    if (source_send(a->src, cmd, &a->seq, &cause) != 0) {
        snprintf(a->last_command, sizeof a->last_command, "%s: error: %s", mailbox_cmd_name(cmd),
                 cause ? cause : "cannot send");
        a->last_failed = 1;
        say(a, ROLE_ERROR, "%s", a->last_command);
        free(cause);
        return;
    }
    a->pending = why;
    a->cmd = cmd;
    a->deadline = mono_ns() + COMMAND_TIMEOUT_NS;
    say(a, ROLE_NORMAL, "%s: waiting for the collector", mailbox_cmd_name(cmd));
}

static void on_progress(void *ctx, double fraction)
{
    app *a = ctx;
    uint32_t pm = (uint32_t)(fraction * 1000);
    atomic_store_explicit(&a->permille, pm > 1000 ? 1000 : pm, memory_order_relaxed);
}

static void *analyse_main(void *arg)
{
    app *a = arg;
    report_options o;
    report_options_init(&o);
    o.progress = on_progress;
    o.progress_ctx = a;
    a->rc = report_run(a->run_folder, &o, &a->rep, &a->why);
    atomic_store_explicit(&a->done, 1, memory_order_release);
    return NULL;
}

static void start_analysis(app *a)
{
    const source_status *st = source_status_of(a->src);
    free(a->run_folder);
    a->run_folder = strdup(st->run_folder);
    atomic_store(&a->permille, 0);
    atomic_store(&a->done, 0);
    a->rep = NULL;
    a->why = NULL;
    if (!a->run_folder || pthread_create(&a->thread, NULL, analyse_main, a) != 0) {
        say(a, ROLE_ERROR, "analyse: cannot start the analysis thread");
        return;
    }
    a->analysing = 1;
    say(a, ROLE_NORMAL, "analysing %s", a->run_folder);
}

/* The report is written: its path and the advisor's top suggestions, as a notice page. */
static void finish_analysis(app *a)
{
    pthread_join(a->thread, NULL);
    a->analysing = 0;
    if (a->rc != 0) {
        snprintf(a->last_command, sizeof a->last_command, "analyse: error: %s",
                 a->why ? a->why : "failed");
        a->last_failed = 1;
        say(a, ROLE_ERROR, "%s", a->last_command);
        free(a->why);
        a->why = NULL;
        return;
    }
    const report_info *info = report_info_of(a->rep);
    const char *dir = info->dir ? info->dir : "(not written)";
    snprintf(a->last_command, sizeof a->last_command, "analyse: ok");
    a->last_failed = 0;
    say(a, ROLE_GOOD, "report written: %s", dir);
    advice adv[TOP_ADVICE];
    size_t n = analysis_advise(report_analysis(a->rep), adv, TOP_ADVICE);
    char skipped[160] = "";
    if (info->bad_chunks)
        snprintf(skipped, sizeof skipped,
                 "; %llu chunks skipped (cut short or damaged: a recording still being written "
                 "can end in one)",
                 (unsigned long long)info->bad_chunks);
    int k = snprintf(a->notice, sizeof a->notice, "Report folder: %s\nEvents analysed: %llu%s\n\n",
                     dir, (unsigned long long)info->events, skipped);
    if (!n && k > 0 && (size_t)k < sizeof a->notice)
        k += snprintf(a->notice + k, sizeof a->notice - (size_t)k,
                      "The advisor has no suggestion for this run.\n");
    for (size_t i = 0; i < n && k > 0 && (size_t)k < sizeof a->notice; i++)
        k += snprintf(a->notice + k, sizeof a->notice - (size_t)k, "%zu. %s\n%s\n\n", i + 1,
                      adv[i].title, adv[i].text);
    a->v.notice = 1;
    report_free(a->rep);
    a->rep = NULL;
}

static void check_pending(app *a, uint64_t now)
{
    if (a->pending == PENDING_NONE)
        return;
    int32_t status = 0;
    char msg[TS_MAILBOX_MSG];
    const char *name = mailbox_cmd_name(a->cmd);
    if (source_reply(a->src, a->seq, &status, msg, sizeof msg)) {
        enum pending was = a->pending;
        a->pending = PENDING_NONE;
        if (status != 0) {
            snprintf(a->last_command, sizeof a->last_command, "%s: error: %s", name, msg);
            a->last_failed = 1;
            say(a, ROLE_ERROR, "%s", a->last_command);
            return;
        }
        snprintf(a->last_command, sizeof a->last_command, "%s: ok", name);
        a->last_failed = 0;
        say(a, ROLE_GOOD, "%s", a->last_command);
        if (was == PENDING_FLUSH)
            start_analysis(a);
        return;
    }
    if (now > a->deadline) {
        a->pending = PENDING_NONE;
        snprintf(a->last_command, sizeof a->last_command,
                 "%s: no answer from the collector within 5 s", name);
        a->last_failed = 1;
        say(a, ROLE_ERROR, "%s", a->last_command);
    }
}

static void on_startstop(app *a)
{
    const source_status *st = source_status_of(a->src);
    if (st->gone) {
        say(a, ROLE_ERROR, "the process has ended: nothing to start or stop");
        return;
    }
    send_command(a, st->state == TS_STATE_COLLECTING ? TS_CMD_STOP : TS_CMD_START,
                 PENDING_STARTSTOP);
}

static void on_analyse(app *a)
{
    const source_status *st = source_status_of(a->src);
    if (a->analysing) {
        say(a, ROLE_WARN, "the analysis is already running");
        return;
    }
    if (!st->window) {
        say(a, ROLE_ERROR, "analyse: nothing recorded yet: press s to start collecting");
        return;
    }
    if (st->gone) /* nothing left to flush: the session wrote everything when it ended */
        start_analysis(a);
    else
        send_command(a, TS_CMD_FLUSH, PENDING_FLUSH);
}

static void draw(app *a)
{
    canvas *c = &a->cv;
    if (a->L.too_small) {
        frame_too_small(c, a->L.rows, a->L.cols);
        return;
    }
    frame_draw(c, &a->L, &a->v, &a->pc, a->last_command, a->last_failed);
    if (a->v.notice && !a->v.help)
        frame_notice(c, a->L.body, "Analysis", a->notice);
    double progress =
        a->analysing ? atomic_load_explicit(&a->permille, memory_order_relaxed) / 1000.0 : -1;
    frame_status(c, a->L.status, a->message[0] ? a->message : NULL, a->message_role, progress,
                 a->v.frozen);
}

static int relayout(app *a)
{
    int rows, cols;
    screen_size(&rows, &cols);
    if (rows != a->cv.rows || cols != a->cv.cols) {
        if (canvas_resize(&a->cv, rows, cols) != 0)
            return -1;
        a->all = 1;
    }
    layout_compute(rows, cols, a->v.screen, &a->L);
    return 0;
}

static int monitor(app *a, char **cause)
{
    uint64_t next_poll = 0;
    int dirty = 1;
    uint32_t last_pm = 0;
    for (;;) {
        if (screen_quit_signal())
            break;
        uint64_t now = mono_ns();
        if (!a->v.frozen && now >= next_poll) {
            int was_gone = source_status_of(a->src)->gone;
            source_poll(a->src, now);
            next_poll = now + a->refresh_ns;
            dirty = 1;
            if (!was_gone && source_status_of(a->src)->gone)
                say(a, ROLE_WARN, "the process has ended; its last data stays on the screen");
        }
        if (a->pending != PENDING_NONE) {
            check_pending(a, now);
            dirty |= a->pending == PENDING_NONE;
        }
        if (a->analysing) {
            uint32_t pm = atomic_load_explicit(&a->permille, memory_order_relaxed);
            dirty |= pm / 10 != last_pm / 10;
            last_pm = pm;
            if (atomic_load_explicit(&a->done, memory_order_acquire)) {
                finish_analysis(a);
                dirty = 1;
            }
        }
        if (dirty) {
            if (relayout(a) != 0)
                return cause_set(cause, "out of memory");
            draw(a);
            screen_paint(&a->cv, a->all);
            a->all = 0;
            dirty = 0;
        }
        now = mono_ns();
        int wait = KEY_WAIT_MAX_MS;
        if (!a->v.frozen && next_poll > now && (next_poll - now) / 1000000 < (uint64_t)wait)
            wait = (int)((next_poll - now) / 1000000) + 1;
        else if (!a->v.frozen && next_poll <= now)
            wait = 0;
        if ((a->pending != PENDING_NONE || a->analysing) && wait > BUSY_WAIT_MS)
            wait = BUSY_WAIT_MS;
        int key = screen_key(wait);
        if (key < 0)
            continue;
        if (key == VK_RESIZE) {
            a->all = 1;
            dirty = 1;
            continue;
        }
        switch (view_key(&a->v, key, &a->pc)) {
        case VA_QUIT:
            return 0;
        case VA_STARTSTOP:
            on_startstop(a);
            break;
        case VA_ANALYSE:
            on_analyse(a);
            break;
        case VA_FREEZE:
            if (!a->v.frozen) {
                source_resync(a->src);
                next_poll = 0;
            }
            break;
        case VA_REPAINT:
            screen_invalidate();
            a->all = 1;
            break;
        default:
            break;
        }
        dirty = 1;
    }
    return 0;
}

/* ---- Before attaching: waiting and choosing --------------------------------------------- */

static void draw_waiting(canvas *c, const target *t, double waited_s)
{
    canvas_clear(c);
    rect all = {0, 0, c->rows, c->cols};
    frame_title(c, (rect){0, 0, 1, c->cols}, "termsight top", "waiting");
    char what[160], el[32];
    if (t->pid)
        snprintf(what, sizeof what, "Waiting for process %d to start its profiler session",
                 (int)t->pid);
    else if (t->name)
        snprintf(what, sizeof what, "Waiting for a profiler session of '%s' to appear", t->name);
    else
        snprintf(what, sizeof what, "Waiting for a profiler session to appear");
    format_elapsed(waited_s, el, sizeof el);
    frame_wrap(c, (rect){2, 2, c->rows - 3, c->cols - 4}, 0, 0, ROLE_NORMAL, what);
    frame_wrap(c, (rect){4, 2, c->rows - 5, c->cols - 4}, 0, 0, ROLE_DIM,
               "Start the training with libtermsight (termsight run, or a program linked with "
               "it); the monitor attaches as soon as its session exists.");
    canvas_printf(c, all, 7, 2, ROLE_DIM, "waited %s", el);
    canvas_str(c, all, c->rows - 1, c->cols - 9, ROLE_DIM, "q quits");
}

static void draw_chooser(canvas *c, const segment_info *list, int n, int sel)
{
    canvas_clear(c);
    rect all = {0, 0, c->rows, c->cols};
    frame_title(c, (rect){0, 0, 1, c->cols}, "termsight top",
                "several live sessions: choose one with Up/Down and Enter");
    rect head = {2, 0, 1, c->cols};
    canvas_fill(c, head, ' ', ROLE_LABEL);
    canvas_printf(c, head, 0, 2, ROLE_LABEL, "%-8s %-20s %-11s %-19s %s", "PID", "PROCESS", "STATE",
                  "STARTED", "RUN FOLDER");
    for (int i = 0; i < n && 3 + i < c->rows - 1; i++) {
        char started[32] = "-";
        time_t t = (time_t)(list[i].start_realtime_ns / 1000000000ull);
        struct tm tm;
        if (list[i].start_realtime_ns && localtime_r(&t, &tm))
            strftime(started, sizeof started, "%Y-%m-%d %H:%M:%S", &tm);
        int role = i == sel ? ROLE_SELECTED : ROLE_NORMAL;
        if (i == sel)
            canvas_fill(c, (rect){3 + i, 0, 1, c->cols}, ' ', ROLE_SELECTED);
        int x = 2;
        x += canvas_printf(c, all, 3 + i, x, role, "%-8d ", (int)list[i].pid);
        canvas_text_fit(c, all, 3 + i, x, 20, role, list[i].process, strlen(list[i].process), 0);
        x += 21;
        x += canvas_printf(c, all, 3 + i, x, role, "%-11s %-19s ", state_name(list[i].state),
                           started);
        canvas_text_fit(c, all, 3 + i, x, c->cols - x - 1, role, list[i].run_folder,
                        strlen(list[i].run_folder), 1);
    }
    canvas_str(c, all, c->rows - 1, c->cols - 9, ROLE_DIM, "q quits");
}

/* Returns the pid to attach to, 0 when the user quit, -1 on error. */
static pid_t choose(canvas *cv, const target *t, char **cause)
{
    uint64_t since = mono_ns();
    int sel = -1;
    pid_t chosen_pid = 0;
    for (;;) {
        if (screen_quit_signal())
            return 0;
        segment_info *list = NULL;
        int n = candidates(t, &list, cause);
        if (n < 0)
            return -1;
        if (n == 1) {
            pid_t pid = list[0].pid;
            free(list);
            return pid;
        }
        /* A given pid is waited for only while that process lives. */
        if (n == 0 && t->pid && kill(t->pid, 0) != 0 && errno == ESRCH) {
            free(list);
            return cause_set(cause,
                             "top: process %d is not running (termsight ls lists the "
                             "sessions)",
                             (int)t->pid);
        }
        int rows, cols;
        screen_size(&rows, &cols);
        if ((rows != cv->rows || cols != cv->cols) && canvas_resize(cv, rows, cols) != 0) {
            free(list);
            return cause_set(cause, "out of memory");
        }
        if (n == 0) {
            draw_waiting(cv, t, (double)(mono_ns() - since) / 1e9);
        } else {
            if (sel < 0)
                sel = newest(list, n);
            for (int i = 0; i < n && chosen_pid; i++) /* keep the choice when the list moves */
                if (list[i].pid == chosen_pid)
                    sel = i;
            sel = sel >= n ? n - 1 : sel;
            chosen_pid = list[sel].pid;
            draw_chooser(cv, list, n, sel);
        }
        screen_paint(cv, 0);
        int key = screen_key(WAIT_POLL_MS);
        if (key == 'q' || key == VK_F10) {
            free(list);
            return 0;
        }
        if (n > 1) {
            if (key == VK_UP && sel > 0)
                chosen_pid = list[--sel].pid;
            else if (key == VK_DOWN && sel + 1 < n)
                chosen_pid = list[++sel].pid;
            else if (key == VK_ENTER || key == '\r' || key == VK_ENTER_KP) {
                pid_t pid = list[sel].pid;
                free(list);
                return pid;
            }
        }
        free(list);
    }
}

/* source_open, with the pid and a hint in its message. */
static int attach(pid_t pid, source **out, char **cause)
{
    char *why = NULL;
    if (source_open(pid, out, &why) == 0)
        return 0;
    cause_set(cause, "top: cannot watch pid %d: %s (termsight ls lists the sessions)", (int)pid,
              why ? why : "?");
    free(why);
    return -1;
}

static int run_interactive(const tui_options *o, const glyphs *g, const target *t, char **cause)
{
    app *a = calloc(1, sizeof *a);
    if (!a)
        return cause_set(cause, "out of memory");
    a->g = g;
    a->refresh_ns = (uint64_t)o->refresh_ms * 1000000ull;
    view_init(&a->v);
    int rc = -1;
    if (canvas_init(&a->cv, 24, 80, g) != 0) {
        cause_set(cause, "out of memory");
        goto out;
    }
    if (screen_init(cause) != 0)
        goto out;
    /* A pid that has no session yet (a training just launched) is waited for, like a name. */
    pid_t pid = choose(&a->cv, t, cause);
    if (pid <= 0) {
        rc = pid == 0 ? 0 : -1;
        goto out;
    }
    if (attach(pid, &a->src, cause) != 0)
        goto out;
    a->pc = (panel_ctx){.a = source_analysis(a->src),
                        .tl = source_timeline(a->src),
                        .st = source_status_of(a->src)};
    a->all = 1;
    rc = monitor(a, cause);
out:
    screen_end();
    if (a->analysing) {
        fputs("termsight top: waiting for the report being written to finish\n", stderr);
        pthread_join(a->thread, NULL);
        if (a->rc == 0)
            fprintf(stderr, "termsight top: report written: %s\n",
                    report_info_of(a->rep)->dir ? report_info_of(a->rep)->dir : "-");
        report_free(a->rep);
        free(a->why);
    }
    source_close(a->src);
    canvas_free(&a->cv);
    free(a->run_folder);
    free(a);
    int sig = screen_quit_signal();
    if (rc == 0 && sig)
        return 128 + sig;
    return rc == 0 ? 0 : 1;
}

/* ---- --once ------------------------------------------------------------------------------ */

static int terminal_cols(void)
{
    struct winsize ws;
    if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40)
        return ws.ws_col;
    return 120;
}

static int run_once(const tui_options *o, const glyphs *g, const target *t, char **cause)
{
    pid_t pid = t->pid;
    if (!pid) {
        segment_info *list = NULL;
        int n = candidates(t, &list, cause);
        if (n < 0)
            return 1;
        if (n == 0) {
            free(list);
            if (t->name)
                cause_set(cause, "top: no live profiler session of '%s'", t->name);
            else
                cause_set(cause, "top: no live profiler session (termsight ls lists them)");
            return 1;
        }
        int k = newest(list, n);
        pid = list[k].pid;
        if (n > 1)
            fprintf(stderr, "termsight: top: %d live sessions; showing the newest, pid %d\n", n,
                    (int)pid);
        free(list);
    }
    source *src;
    if (attach(pid, &src, cause) != 0)
        return 1;
    /* Two looks one refresh apart: rates need an interval, and the rings fill meanwhile. */
    source_poll(src, mono_ns());
    struct timespec ts = {(time_t)(o->refresh_ms / 1000), (long)(o->refresh_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    source_poll(src, mono_ns());
    panel_ctx pc = {
        .a = source_analysis(src), .tl = source_timeline(src), .st = source_status_of(src)};
    int rc = 0;
    if (o->json) {
        if (snapshot_json(stdout, &pc) != 0)
            rc = cause_set(cause, "top: out of memory");
    } else {
        snapshot_text(stdout, &pc, g, terminal_cols());
    }
    if (fflush(stdout) != 0 && !rc)
        rc = cause_set(cause, "top: cannot write the snapshot: %s", strerror(errno));
    source_close(src);
    return rc ? 1 : 0;
}

int tui_main(const tui_options *o, char **cause)
{
    setlocale(LC_ALL, "");
    tui_options opt = *o;
    if (!opt.refresh_ms)
        opt.refresh_ms = TUI_REFRESH_MS_DEFAULT;
    target t;
    if (parse_target(opt.target, &t, cause) != 0)
        return 1;
    const glyphs *g = glyphs_for_locale();
    return opt.once ? run_once(&opt, g, &t, cause) : run_interactive(&opt, g, &t, cause);
}
