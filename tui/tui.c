/* tui: termsight top's entry point and loop. It finds the session (a pid, a process name, a job
 * id, or the newest live one; it waits for one to appear, and offers a chooser when several
 * match), then observes, draws and answers keys until q. A session that is a rank of a job brings
 * the job's other ranks on this machine along (ranks.c): the screens show one rank, the Ranks
 * screen all of them, and commands go to every rank. Commands to the collectors go through their
 * mailboxes and the answers are awaited without blocking the display; F6 (or r, confirmed) runs the
 * report writer (of a job: each rank's, then the job report's merge) on a thread of its own with a
 * progress bar. */
#include "job.h"
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

/* ---- Finding the session ---------------------------------------------------------------- */

typedef struct target {
    pid_t pid;        /* > 0: this pid */
    const char *name; /* else, when not NULL: sessions of this process name */
    const char *job;  /* else, when not NULL: sessions of this job */
} target;

static int parse_target(const char *text, const char *job, target *t, char **cause)
{
    memset(t, 0, sizeof *t);
    if (job) {
        if (text)
            return cause_set(cause, "top: --job goes without a PID or NAME");
        if (!*job)
            return cause_set(cause, "top: --job needs a job id");
        t->job = job;
        return 0;
    }
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
    if (n <= 0 || (!t->name && !t->pid && !t->job))
        return n;
    int k = 0;
    if (t->job) {
        for (int i = 0; i < n; i++)
            if (!strcmp((*out)[i].job, t->job))
                (*out)[k++] = (*out)[i];
        return k;
    }
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

/* Of a job's sessions, the lowest rank (the one top shows first). */
static int lowest_rank(const segment_info *list, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if ((uint32_t)list[i].rank < (uint32_t)list[best].rank) /* -1 (unknown) last */
            best = i;
    return best;
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

enum pending { PENDING_NONE, PENDING_STARTSTOP, PENDING_FLUSH, PENDING_SNAPSHOT };

/* A command sent to one rank, and its answer. */
typedef struct sent {
    source *src;
    int32_t rank;
    uint64_t seq;
    int answered;
    int32_t status;
    char msg[TS_MAILBOX_MSG];
} sent;

/* A run folder to analyse. */
typedef struct folder {
    char *path;
    int32_t rank;
} folder;

typedef struct app {
    const glyphs *g;
    uint64_t refresh_ns;
    canvas cv;
    layout L;
    view v;
    ranks *rk;
    source *src; /* the rank the screens show */
    panel_ctx pc;
    int all; /* paint every row next time */

    enum pending pending;
    uint32_t cmd;
    uint64_t deadline;
    sent sent[RANKS_MAX];
    size_t nsent;
    char last_command[320];
    int last_failed;

    char message[640];
    int message_role;
    uint64_t message_ns; /* when it was said: shown while it is news */

    /* The analysis thread: one run folder, or a job's (then the job report's merge). */
    int analysing;
    pthread_t thread;
    folder folders[RANKS_MAX];
    size_t nfolders;
    char *job_folder; /* NULL: a single session */
    size_t part;      /* the folder being analysed, for the progress */
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
    a->message_ns = tsclock_monotonic_ns();
}

/* How long a message stays in the header (an error longer), before the run folder is back. */
#define MESSAGE_NEWS_NS  20000000000ull
#define MESSAGE_ERROR_NS 60000000000ull

static const char *message_now(const app *a, uint64_t now)
{
    uint64_t keep = a->message_role == ROLE_ERROR ? MESSAGE_ERROR_NS : MESSAGE_NEWS_NS;
    return a->message[0] && now - a->message_ns < keep ? a->message : NULL;
}

static int is_job(const app *a)
{
    return ranks_table_of(a->rk)->job[0] != 0;
}

static void fail(app *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(app *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->last_command, sizeof a->last_command, fmt, ap);
    va_end(ap);
    a->last_failed = 1;
    say(a, ROLE_ERROR, "%s", a->last_command);
}

/* Whether a rank of the job takes cmd: start where not collecting, stop where collecting,
 * flush where something was recorded; never an ended one. */
static int wants_command(const source_status *st, uint32_t cmd)
{
    if (st->gone)
        return 0;
    switch (cmd) {
    case TS_CMD_START:
        return st->state != TS_STATE_COLLECTING;
    case TS_CMD_STOP:
        return st->state == TS_STATE_COLLECTING;
    case TS_CMD_SNAPSHOT: /* every live rank: one not in flight mode says so */
        return 1;
    default: /* flush: ranks that recorded something (a flight recorder records nothing) */
        return st->window != 0 && !st->flight_mb;
    }
}

/* Sends cmd to the session, or to every rank of the job that wants it. Returns how many it went
 * to (0: an error was said). */
static size_t send_command(app *a, uint32_t cmd, enum pending why)
{
    if (a->pending != PENDING_NONE) {
        say(a, ROLE_WARN, "the collector has not answered the last command yet");
        return 0;
    }
    a->nsent = 0;
    const ranks_table *t = ranks_table_of(a->rk);
    size_t n = is_job(a) ? t->n : 1;
    for (size_t i = 0; i < n; i++) {
        source *s = is_job(a) ? ranks_source(a->rk, i) : a->src;
        const source_status *st = source_status_of(s);
        if (is_job(a) && !wants_command(st, cmd))
            continue;
        sent *e = &a->sent[a->nsent];
        memset(e, 0, sizeof *e);
        e->src = s;
        e->rank = st->rank;
        char *cause = NULL;
        if (source_send(s, cmd, &e->seq, &cause) != 0) {
            if (!is_job(a)) {
                fail(a, "%s: error: %s", mailbox_cmd_name(cmd), cause ? cause : "cannot send");
                free(cause);
                return 0;
            }
            e->answered = 1;
            e->status = -1;
            snprintf(e->msg, sizeof e->msg, "%s", cause ? cause : "cannot send");
            free(cause);
        }
        a->nsent++;
    }
    if (!a->nsent)
        return 0;
    a->pending = why;
    a->cmd = cmd;
    a->deadline = tsclock_monotonic_ns() + COMMAND_TIMEOUT_NS;
    if (is_job(a))
        say(a, ROLE_NORMAL, "%s: waiting for %zu rank%s", mailbox_cmd_name(cmd), a->nsent,
            a->nsent == 1 ? "" : "s");
    else
        say(a, ROLE_NORMAL, "%s: waiting for the collector", mailbox_cmd_name(cmd));
    return a->nsent;
}

static void on_progress(void *ctx, double fraction)
{
    app *a = ctx;
    double whole = ((double)a->part + fraction) / (double)(a->nfolders ? a->nfolders : 1);
    uint32_t pm = (uint32_t)(whole * 1000);
    atomic_store_explicit(&a->permille, pm > 1000 ? 1000 : pm, memory_order_relaxed);
}

/* printf into the notice, at its end. */
static void note(app *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(app *a, const char *fmt, ...)
{
    size_t len = strlen(a->notice);
    if (len + 1 >= sizeof a->notice)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->notice + len, sizeof a->notice - len, fmt, ap);
    va_end(ap);
}

/* A job: each rank's report, then the job report merged from them. The notice says what came of
 * each; rc is 0 when one rank's report at least was written. */
static void analyse_job(app *a)
{
    a->notice[0] = 0;
    size_t ok = 0;
    for (size_t i = 0; i < a->nfolders; i++) {
        a->part = i;
        report_options o;
        report_options_init(&o);
        o.progress = on_progress;
        o.progress_ctx = a;
        report *rep = NULL;
        char *why = NULL;
        if (report_run(a->folders[i].path, &o, &rep, &why) == 0) {
            const report_info *info = report_info_of(rep);
            note(a, "rank %d: report written: %s (%llu events)\n", (int)a->folders[i].rank,
                 info->dir ? info->dir : "-", (unsigned long long)info->events);
            ok++;
        } else {
            note(a, "rank %d: error: %s\n", (int)a->folders[i].rank, why ? why : "failed");
        }
        report_free(rep);
        free(why);
    }
    a->rc = ok ? 0 : -1;
    if (!ok) {
        a->why = strdup("no rank's report could be written");
        return;
    }
    if (!a->job_folder[0] || !job_is_folder(a->job_folder)) {
        note(a, "\nThe ranks' run folders share no job folder: no job report.\n");
        return;
    }
    job_options jo;
    job_options_init(&jo);
    job_report *j = NULL;
    char *why = NULL;
    if (job_report_run(a->job_folder, &jo, &j, &why) != 0) {
        note(a, "\njob report: error: %s\n", why ? why : "failed");
        free(why);
        return;
    }
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f) {
        job_report_print(j, f);
        fclose(f);
    }
    note(a, "\nJob report: %s\n%s", job_report_dir(j) ? job_report_dir(j) : "-", text ? text : "");
    free(text);
    job_report_free(j);
}

static void *analyse_main(void *arg)
{
    app *a = arg;
    if (a->job_folder) {
        analyse_job(a);
    } else {
        report_options o;
        report_options_init(&o);
        o.progress = on_progress;
        o.progress_ctx = a;
        a->rc = report_run(a->folders[0].path, &o, &a->rep, &a->why);
    }
    atomic_store_explicit(&a->done, 1, memory_order_release);
    return NULL;
}

static void clear_folders(app *a)
{
    for (size_t i = 0; i < a->nfolders; i++)
        free(a->folders[i].path);
    a->nfolders = 0;
    free(a->job_folder);
    a->job_folder = NULL;
}

/* The run folder of st to analyse: 0, 1 when it is not known (said), -1 when out of memory. */
static int add_folder(app *a, const source_status *st)
{
    if (a->nfolders >= RANKS_MAX)
        return 0;
    if (st->folder_why[0]) {
        say(a, ROLE_ERROR, "analyse pid %d: %s", (int)st->pid, st->folder_why);
        return 1;
    }
    char *path = strdup(st->run_folder);
    if (!path)
        return -1;
    a->folders[a->nfolders++] = (folder){.path = path, .rank = st->rank};
    return 0;
}

/* The job folder: the parent that every rank's run folder shares, "" when they share none. */
static char *common_parent(const app *a)
{
    char *parent = NULL;
    for (size_t i = 0; i < a->nfolders; i++) {
        const char *p = a->folders[i].path;
        const char *slash = strrchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : 0;
        if (!parent) {
            parent = strndup(p, len);
            if (!parent)
                return NULL;
        } else if (strlen(parent) != len || strncmp(parent, p, len) != 0) {
            parent[0] = 0;
        }
    }
    return parent ? parent : strdup("");
}

static void start_analysis(app *a)
{
    atomic_store(&a->permille, 0);
    atomic_store(&a->done, 0);
    a->rep = NULL;
    a->why = NULL;
    a->part = 0;
    if (is_job(a) && !(a->job_folder = common_parent(a))) {
        say(a, ROLE_ERROR, "analyse: out of memory");
        return;
    }
    if (!a->nfolders || pthread_create(&a->thread, NULL, analyse_main, a) != 0) {
        say(a, ROLE_ERROR, "analyse: cannot start the analysis thread");
        return;
    }
    a->analysing = 1;
    if (a->job_folder)
        say(a, ROLE_NORMAL, "analysing %zu rank%s of job %s", a->nfolders,
            a->nfolders == 1 ? "" : "s", ranks_table_of(a->rk)->job);
    else
        say(a, ROLE_NORMAL, "analysing %s", a->folders[0].path);
}

/* The report is written: its path and the advisor's top suggestions, as a notice page. */
static void finish_analysis(app *a)
{
    pthread_join(a->thread, NULL);
    a->analysing = 0;
    if (a->rc != 0) {
        fail(a, "analyse: error: %s", a->why ? a->why : "failed");
        free(a->why);
        a->why = NULL;
        if (a->job_folder)
            a->v.notice = 1;
        return;
    }
    if (a->job_folder) {
        snprintf(a->last_command, sizeof a->last_command, "analyse: ok");
        a->last_failed = 0;
        say(a, ROLE_GOOD, "%zu rank%s analysed; the job report follows them", a->nfolders,
            a->nfolders == 1 ? "" : "s");
        a->v.notice = 1;
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

/* Every rank has answered, or the time is up: what came of the command, in one line. */
static void conclude(app *a)
{
    const char *name = mailbox_cmd_name(a->cmd);
    enum pending was = a->pending;
    a->pending = PENDING_NONE;
    if (!is_job(a)) {
        sent *e = &a->sent[0];
        if (!e->answered)
            fail(a, "%s: no answer from the collector within 5 s", name);
        else if (e->status != 0)
            fail(a, "%s: error: %s", name, e->msg);
        if (!e->answered || e->status != 0)
            return;
        /* A snapshot answers with its folder. */
        snprintf(a->last_command, sizeof a->last_command, "%s: %s", name,
                 was == PENDING_SNAPSHOT ? e->msg : "ok");
        a->last_failed = 0;
        say(a, ROLE_GOOD, "%s", a->last_command);
        if (was == PENDING_FLUSH) {
            clear_folders(a);
            if (add_folder(a, source_status_of(a->src)) == 0)
                start_analysis(a);
        }
        return;
    }
    size_t ok = 0;
    const sent *bad = NULL;
    for (size_t i = 0; i < a->nsent; i++) {
        if (a->sent[i].answered && a->sent[i].status == 0)
            ok++;
        else if (!bad)
            bad = &a->sent[i];
    }
    if (a->nsent) {
        int k = snprintf(a->last_command, sizeof a->last_command,
                         "%s: %zu of %zu ranks acknowledged", name, ok, a->nsent);
        if (bad && k > 0 && (size_t)k < sizeof a->last_command)
            snprintf(a->last_command + k, sizeof a->last_command - (size_t)k, "; rank %d: %s",
                     (int)bad->rank, bad->answered ? bad->msg : "no answer within 5 s");
        a->last_failed = bad != NULL;
        say(a, bad ? ROLE_ERROR : ROLE_GOOD, "%s", a->last_command);
    }
    if (was != PENDING_FLUSH)
        return;
    /* The ranks that flushed, and those that ended with a recording (nothing to flush). */
    clear_folders(a);
    const ranks_table *t = ranks_table_of(a->rk);
    for (size_t i = 0; i < t->n; i++) {
        source *s = ranks_source(a->rk, i);
        const source_status *st = source_status_of(s);
        int flushed = 0;
        for (size_t j = 0; j < a->nsent; j++)
            flushed |= a->sent[j].src == s && a->sent[j].answered && a->sent[j].status == 0;
        if ((flushed || (st->gone && st->window && !st->flight_mb)) && add_folder(a, st) < 0)
            break;
    }
    if (!a->nfolders)
        return;
    start_analysis(a);
}

static void check_pending(app *a, uint64_t now)
{
    if (a->pending == PENDING_NONE)
        return;
    size_t open = 0;
    for (size_t i = 0; i < a->nsent; i++) {
        sent *e = &a->sent[i];
        if (!e->answered && source_reply(e->src, e->seq, &e->status, e->msg, sizeof e->msg))
            e->answered = 1;
        open += !e->answered;
    }
    if (!open || now > a->deadline)
        conclude(a);
}

static void on_startstop(app *a)
{
    const source_status *st = source_status_of(a->src);
    if (!is_job(a)) {
        if (st->gone) {
            say(a, ROLE_ERROR, "the process has ended: nothing to start or stop");
            return;
        }
        send_command(a, st->state == TS_STATE_COLLECTING ? TS_CMD_STOP : TS_CMD_START,
                     PENDING_STARTSTOP);
        return;
    }
    /* The rank shown decides; when it has ended, any rank collecting. */
    const ranks_table *t = ranks_table_of(a->rk);
    int collecting = !st->gone && st->state == TS_STATE_COLLECTING, live = 0;
    for (size_t i = 0; i < t->n; i++) {
        live |= !t->row[i].gone;
        if (st->gone && !t->row[i].gone && t->row[i].state == TS_STATE_COLLECTING)
            collecting = 1;
    }
    if (!live) {
        say(a, ROLE_ERROR, "every rank has ended: nothing to start or stop");
        return;
    }
    uint32_t cmd = collecting ? TS_CMD_STOP : TS_CMD_START;
    if (!send_command(a, cmd, PENDING_STARTSTOP) && a->pending == PENDING_NONE &&
        a->message_role != ROLE_WARN)
        say(a, ROLE_WARN, "%s: no rank to send it to", mailbox_cmd_name(cmd));
}

static void on_snapshot(app *a)
{
    if (!is_job(a) && source_status_of(a->src)->gone) {
        say(a, ROLE_ERROR, "the process has ended: its flight recorder is gone");
        return;
    }
    if (!send_command(a, TS_CMD_SNAPSHOT, PENDING_SNAPSHOT) && a->pending == PENDING_NONE &&
        a->message_role != ROLE_WARN)
        say(a, ROLE_WARN, "snapshot: no live rank to send it to");
}

static void on_analyse(app *a)
{
    const source_status *st = source_status_of(a->src);
    if (a->analysing) {
        say(a, ROLE_WARN, "the analysis is already running");
        return;
    }
    if (!is_job(a)) {
        if (st->flight_mb) {
            say(a, ROLE_WARN,
                "analyse: a flight recorder writes no recording: p takes a snapshot, which "
                "termsight analyse reads");
            return;
        }
        if (!st->window) {
            say(a, ROLE_ERROR,
                "analyse: nothing recorded yet: press F5 (or c) to start collecting");
            return;
        }
        if (st->gone) { /* nothing left to flush: the session wrote everything when it ended */
            clear_folders(a);
            if (add_folder(a, st) == 0)
                start_analysis(a);
        } else {
            send_command(a, TS_CMD_FLUSH, PENDING_FLUSH);
        }
        return;
    }
    const ranks_table *t = ranks_table_of(a->rk);
    size_t recorded = 0, live = 0, flight = 0;
    for (size_t i = 0; i < t->n; i++) {
        const source_status *s = source_status_of(ranks_source(a->rk, i));
        flight += s->flight_mb != 0;
        recorded += s->window != 0 && !s->flight_mb;
        live += s->window && !s->flight_mb && !s->gone;
    }
    if (!recorded && flight) {
        say(a, ROLE_WARN,
            "analyse: the ranks keep flight recorders and write no recordings: p takes a "
            "snapshot of every rank, which termsight analyse reads");
        return;
    }
    if (!recorded) {
        say(a, ROLE_ERROR, "analyse: no rank has recorded anything yet: press F5 (or c) to start");
        return;
    }
    if (live) {
        send_command(a, TS_CMD_FLUSH, PENDING_FLUSH);
        return;
    }
    a->nsent = 0; /* every rank has ended: its recording is whole */
    a->pending = PENDING_FLUSH;
    a->cmd = TS_CMD_FLUSH;
    conclude(a);
}

/* Enter on the Ranks screen: that rank on every screen, from the overview. */
static void on_rank(app *a)
{
    ranks_select(a->rk, (size_t)a->v.ranks_sel);
    a->src = ranks_selected(a->rk);
    a->pc.a = source_analysis(a->src);
    a->pc.tl = source_timeline(a->src);
    a->pc.st = source_status_of(a->src);
    view was = a->v;
    view_init(&a->v);
    a->v.frozen = was.frozen;
    a->v.ranks_sel = was.ranks_sel;
    a->v.ranks_top = was.ranks_top;
    const source_status *st = a->pc.st;
    say(a, ROLE_NORMAL, "showing rank %d, pid %d", (int)st->rank, (int)st->pid);
}

static void draw(app *a)
{
    canvas *c = &a->cv;
    if (a->L.too_small) {
        frame_too_small(c, a->L.rows, a->L.cols);
        return;
    }
    double progress =
        a->analysing ? atomic_load_explicit(&a->permille, memory_order_relaxed) / 1000.0 : -1;
    frame_draw(c, &a->L, &a->v, &a->pc, message_now(a, tsclock_monotonic_ns()), a->message_role,
               progress);
    if (a->v.notice && !a->v.help)
        frame_notice(c, a->L.body, "Analysis", a->notice);
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
        uint64_t now = tsclock_monotonic_ns();
        if (!a->v.frozen && now >= next_poll) {
            const ranks_table *t = ranks_table_of(a->rk);
            size_t was_n = t->n, was_gone = 0, gone = 0;
            for (size_t i = 0; i < t->n; i++)
                was_gone += t->row[i].gone;
            ranks_poll(a->rk, now);
            next_poll = now + a->refresh_ns;
            dirty = 1;
            for (size_t i = 0; i < t->n; i++)
                gone += t->row[i].gone;
            if (!is_job(a) && gone > was_gone)
                say(a, ROLE_WARN, "the process has ended; its last data stays on the screen");
            else if (gone > was_gone)
                say(a, ROLE_WARN,
                    "%zu of %zu ranks have ended; their last figures stay on the "
                    "screens",
                    gone, t->n);
            else if (t->n > was_n)
                say(a, ROLE_NORMAL, "%zu ranks of job %s on this machine", t->n, t->job);
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
        now = tsclock_monotonic_ns();
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
        int action;
        if (key == VK_MOUSE) {
            int my = 0, mx = 0, kind = screen_mouse(&my, &mx);
            action = view_mouse(&a->v, &a->L, &a->pc, kind, my, mx);
        } else {
            action = view_key(&a->v, key, &a->pc);
        }
        switch (action) {
        case VA_QUIT:
            return 0;
        case VA_STARTSTOP:
            on_startstop(a);
            break;
        case VA_ANALYSE:
            on_analyse(a);
            break;
        case VA_RANK:
            on_rank(a);
            break;
        case VA_SNAPSHOT:
            on_snapshot(a);
            break;
        case VA_FREEZE:
            if (!a->v.frozen) {
                ranks_resync(a->rk);
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
    else if (t->job)
        snprintf(what, sizeof what, "Waiting for a session of job '%s' to appear on this machine",
                 t->job);
    else
        snprintf(what, sizeof what, "Waiting for a profiler session to appear");
    format_elapsed(waited_s, el, sizeof el);
    frame_wrap(c, (rect){2, 2, c->rows - 3, c->cols - 4}, 0, 0, ROLE_NORMAL, what);
    int rows = frame_wrap(
        c, (rect){4, 2, c->rows - 5, c->cols - 4}, 0, 0, ROLE_DIM,
        "Start the training with termsight: `termsight run -- python3 train.py` (a "
        "PyTorch script is profiled unchanged), `termsight run -- ./program`, a Python "
        "program that makes a termsight.Profiler, or a program linked with libtermsight. "
        "The monitor attaches as soon as its session exists.");
    canvas_printf(c, all, 5 + rows, 2, ROLE_DIM, "waited %s", el);
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
    canvas_printf(c, head, 0, 2, ROLE_LABEL, "%-8s %-20s %-12s %5s %-11s %-19s %s", "PID",
                  "PROCESS", "JOB", "RANK", "STATE", "STARTED", "RUN FOLDER");
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
        const char *job = list[i].job[0] ? list[i].job : "-";
        canvas_text_fit(c, all, 3 + i, x, 12, role, job, strlen(job), 0);
        x += 13;
        char rank[16] = "-";
        if (list[i].job[0] && list[i].rank >= 0)
            snprintf(rank, sizeof rank, "%d", (int)list[i].rank);
        x += canvas_printf(c, all, 3 + i, x, role, "%5s %-11s %-19s ", rank,
                           state_name(list[i].state), started);
        canvas_text_fit(c, all, 3 + i, x, c->cols - x - 1, role, list[i].run_folder,
                        strlen(list[i].run_folder), 1);
    }
    canvas_str(c, all, c->rows - 1, c->cols - 9, ROLE_DIM, "q quits");
}

/* Returns the pid to attach to, 0 when the user quit, -1 on error. */
static pid_t choose(canvas *cv, const target *t, char **cause)
{
    uint64_t since = tsclock_monotonic_ns();
    int sel = -1;
    pid_t chosen_pid = 0;
    for (;;) {
        if (screen_quit_signal())
            return 0;
        segment_info *list = NULL;
        int n = candidates(t, &list, cause);
        if (n < 0)
            return -1;
        if (n == 1 || (n > 1 && t->job)) { /* a job: its lowest rank first, the others along */
            pid_t pid = list[t->job ? lowest_rank(list, n) : 0].pid;
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
            draw_waiting(cv, t, (double)(tsclock_monotonic_ns() - since) / 1e9);
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

/* ranks_open, with the pid and a hint in its message. */
static int attach(pid_t pid, ranks **out, char **cause)
{
    char *why = NULL;
    if (ranks_open(pid, out, &why) == 0)
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
    if (attach(pid, &a->rk, cause) != 0)
        goto out;
    a->src = ranks_selected(a->rk);
    a->pc = (panel_ctx){.a = source_analysis(a->src),
                        .tl = source_timeline(a->src),
                        .st = source_status_of(a->src),
                        .rk = ranks_table_of(a->rk)};
    a->v.ranks_sel = a->pc.rk->selected; /* the Ranks screen opens on the rank shown */
    if (a->pc.st->note[0])
        say(a, ROLE_WARN, "%s", a->pc.st->note);
    else if (is_job(a)) /* the job's ranks are a key away */
        say(a, ROLE_NORMAL, "rank %d of job %s, %zu rank%s on this machine: 7 shows them",
            (int)a->pc.st->rank, a->pc.rk->job, a->pc.rk->n, a->pc.rk->n == 1 ? "" : "s");
    a->all = 1;
    rc = monitor(a, cause);
out:
    screen_end();
    if (a->analysing) {
        fputs("termsight top: waiting for the report being written to finish\n", stderr);
        pthread_join(a->thread, NULL);
        if (a->rc == 0 && a->job_folder)
            fprintf(stderr, "termsight top: %s", a->notice);
        else if (a->rc == 0)
            fprintf(stderr, "termsight top: report written: %s\n",
                    report_info_of(a->rep)->dir ? report_info_of(a->rep)->dir : "-");
        report_free(a->rep);
        free(a->why);
    }
    ranks_close(a->rk);
    canvas_free(&a->cv);
    clear_folders(a);
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
            if (t->job)
                cause_set(cause, "top: no sessions of job %s on this machine", t->job);
            else if (t->name)
                cause_set(cause, "top: no live profiler session of '%s'", t->name);
            else
                cause_set(cause, "top: no live profiler session (termsight ls lists them)");
            return 1;
        }
        int k = t->job ? lowest_rank(list, n) : newest(list, n);
        pid = list[k].pid;
        if (n > 1 && !t->job)
            fprintf(stderr, "termsight: top: %d live sessions; showing the newest, pid %d\n", n,
                    (int)pid);
        free(list);
    }
    ranks *rk;
    if (attach(pid, &rk, cause) != 0)
        return 1;
    /* Two looks one refresh apart: rates need an interval, and the rings fill meanwhile. */
    ranks_poll(rk, tsclock_monotonic_ns());
    struct timespec ts = {(time_t)(o->refresh_ms / 1000), (long)(o->refresh_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    ranks_poll(rk, tsclock_monotonic_ns());
    source *src = ranks_selected(rk);
    if (source_status_of(src)->note[0])
        fprintf(stderr, "termsight: top: %s\n", source_status_of(src)->note);
    panel_ctx pc = {.a = source_analysis(src),
                    .tl = source_timeline(src),
                    .st = source_status_of(src),
                    .rk = ranks_table_of(rk)};
    int rc = 0;
    if (o->json) {
        if (snapshot_json(stdout, &pc) != 0)
            rc = cause_set(cause, "top: out of memory");
    } else {
        snapshot_text(stdout, &pc, g, terminal_cols());
    }
    if (fflush(stdout) != 0 && !rc)
        rc = cause_set(cause, "top: cannot write the snapshot: %s", strerror(errno));
    ranks_close(rk);
    return rc ? 1 : 0;
}

int tui_main(const tui_options *o, char **cause)
{
    setlocale(LC_ALL, "");
    tui_options opt = *o;
    if (!opt.refresh_ms)
        opt.refresh_ms = TUI_REFRESH_MS_DEFAULT;
    target t;
    if (parse_target(opt.target, opt.job, &t, cause) != 0)
        return 1;
    const glyphs *g = glyphs_for_locale();
    return opt.once ? run_once(&opt, g, &t, cause) : run_interactive(&opt, g, &t, cause);
}
