/*
 * app: termsight top while it runs, shared by the files that make it: tui.c (the entry point and
 * the loop), attach.c (finding and choosing the session), commands.c (the commands to the
 * collectors and their answers) and analyse.c (the report written in the background). Only
 * these include it.
 */
#ifndef TERMSIGHT_TUI_APP_H
#define TERMSIGHT_TUI_APP_H

#include "report.h"
#include "tui_internal.h"

#include <pthread.h>
#include <stdatomic.h>

/* ---- Finding the session (attach.c) ------------------------------------------------------ */

typedef struct target {
    pid_t pid;        /* > 0: this pid */
    const char *name; /* else, when not NULL: sessions of this process name */
    const char *job;  /* else, when not NULL: sessions of this job */
} target;

/* Reads top's PID-or-NAME argument and --job into t. Returns 0, or -1 with *cause set. */
int attach_parse_target(const char *text, const char *job, target *t, char **cause);
/* The live sessions the target matches, oldest first, in *out (freed by the caller): a process
 * name matches exactly, or, when no session has it exactly, as a prefix. Returns how many, or -1
 * with *cause set. */
int attach_candidates(const target *t, segment_info **out, char **cause);
/* Of a job's sessions, the index of the lowest rank (the one top shows first). */
int attach_lowest_rank(const segment_info *list, int n);
/* The index of the session started last. */
int attach_newest(const segment_info *list, int n);
/* Waits for a session of t to appear, drawing on cv, and offers a chooser when several match.
 * Returns the pid to attach to, 0 when the user quit, -1 on error (*cause set). */
pid_t attach_choose(canvas *cv, const target *t, char **cause);
/* ranks_open, with the pid and a hint in its message. Returns 0, or -1 with *cause set. */
int attach_open(pid_t pid, ranks **out, char **cause);

/* ---- The attached monitor (app.c) -------------------------------------------------------- */

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

/* Says something in the header line, with a role (ROLE_NORMAL, ROLE_GOOD, ROLE_WARN, ...). */
void app_say(app *a, int role, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Records a command that failed, and says it as an error. */
void app_fail(app *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The message to show at now, or NULL once it is no longer news. */
const char *app_message_now(const app *a, uint64_t now);
/* Whether the session is a rank of a job. */
int app_is_job(const app *a);

/* ---- Commands to the collectors (commands.c) --------------------------------------------- */

/* Collects the answers to the command under way; concludes it when every rank has answered or
 * the time is up. */
void commands_check(app *a, uint64_t now);
/* F5: stop where collecting, else start (a job: as the rank shown, else as any rank). */
void commands_startstop(app *a);
/* F7: a flight recorder's snapshot. */
void commands_snapshot(app *a);
/* F6: flushes the recording(s), then starts the analysis; a session that ended is analysed at
 * once. */
void commands_analyse(app *a);

/* ---- The analysis in the background (analyse.c) ------------------------------------------ */

/* Forgets the folders to analyse, and the job folder. */
void analyse_clear_folders(app *a);
/* Adds the run folder of st to those to analyse: 0, 1 when it is not known (said), -1 when out
 * of memory. */
int analyse_add_folder(app *a, const source_status *st);
/* Starts the analysis of the folders added, on a thread of its own (an error is said). */
void analyse_start(app *a);
/* Joins the thread that is done: the report's path and the advisor's top suggestions, or the
 * job's notice, as a notice page. */
void analyse_finish(app *a);
/* At top's end, the terminal restored: waits for the report being written and says on stderr
 * what came of it; frees the folders. */
void analyse_end(app *a);

#endif
