/* commands: the commands termsight top sends to the collectors (start, stop, flush, snapshot)
 * through their mailboxes, to the session or to every rank of its job; the answers are awaited
 * without blocking the display, and a flush for the report starts the analysis (analyse.c). */
#include "app.h"

#include <stdlib.h>
#include <string.h>

#define COMMAND_TIMEOUT_NS 5000000000ull /* the collector answers within milliseconds */

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
        app_say(a, ROLE_WARN, "the collector has not answered the last command yet");
        return 0;
    }
    a->nsent = 0;
    const ranks_table *t = ranks_table_of(a->rk);
    size_t n = app_is_job(a) ? t->n : 1;
    for (size_t i = 0; i < n; i++) {
        source *s = app_is_job(a) ? ranks_source(a->rk, i) : a->src;
        const source_status *st = source_status_of(s);
        if (app_is_job(a) && !wants_command(st, cmd))
            continue;
        sent *e = &a->sent[a->nsent];
        memset(e, 0, sizeof *e);
        e->src = s;
        e->rank = st->rank;
        char *cause = NULL;
        if (source_send(s, cmd, &e->seq, &cause) != 0) {
            if (!app_is_job(a)) {
                app_fail(a, "%s: error: %s", mailbox_cmd_name(cmd), cause ? cause : "cannot send");
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
    if (app_is_job(a))
        app_say(a, ROLE_NORMAL, "%s: waiting for %zu rank%s", mailbox_cmd_name(cmd), a->nsent,
                a->nsent == 1 ? "" : "s");
    else
        app_say(a, ROLE_NORMAL, "%s: waiting for the collector", mailbox_cmd_name(cmd));
    return a->nsent;
}

/* Every rank has answered, or the time is up: what came of the command, in one line. */
static void conclude(app *a)
{
    const char *name = mailbox_cmd_name(a->cmd);
    enum pending was = a->pending;
    a->pending = PENDING_NONE;
    if (!app_is_job(a)) {
        sent *e = &a->sent[0];
        if (!e->answered)
            app_fail(a, "%s: no answer from the collector within 5 s", name);
        else if (e->status != 0)
            app_fail(a, "%s: error: %s", name, e->msg);
        if (!e->answered || e->status != 0)
            return;
        /* A snapshot answers with its folder. */
        snprintf(a->last_command, sizeof a->last_command, "%s: %s", name,
                 was == PENDING_SNAPSHOT ? e->msg : "ok");
        a->last_failed = 0;
        app_say(a, ROLE_GOOD, "%s", a->last_command);
        if (was == PENDING_FLUSH) {
            analyse_clear_folders(a);
            if (analyse_add_folder(a, source_status_of(a->src)) == 0)
                analyse_start(a);
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
        app_say(a, bad ? ROLE_ERROR : ROLE_GOOD, "%s", a->last_command);
    }
    if (was != PENDING_FLUSH)
        return;
    /* The ranks that flushed, and those that ended with a recording (nothing to flush). */
    analyse_clear_folders(a);
    const ranks_table *t = ranks_table_of(a->rk);
    for (size_t i = 0; i < t->n; i++) {
        source *s = ranks_source(a->rk, i);
        const source_status *st = source_status_of(s);
        int flushed = 0;
        for (size_t j = 0; j < a->nsent; j++)
            flushed |= a->sent[j].src == s && a->sent[j].answered && a->sent[j].status == 0;
        if ((flushed || (st->gone && st->window && !st->flight_mb)) &&
            analyse_add_folder(a, st) < 0)
            break;
    }
    if (!a->nfolders)
        return;
    analyse_start(a);
}

void commands_check(app *a, uint64_t now)
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

void commands_startstop(app *a)
{
    const source_status *st = source_status_of(a->src);
    if (!app_is_job(a)) {
        if (st->gone) {
            app_say(a, ROLE_ERROR, "the process has ended: nothing to start or stop");
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
        app_say(a, ROLE_ERROR, "every rank has ended: nothing to start or stop");
        return;
    }
    uint32_t cmd = collecting ? TS_CMD_STOP : TS_CMD_START;
    if (!send_command(a, cmd, PENDING_STARTSTOP) && a->pending == PENDING_NONE &&
        a->message_role != ROLE_WARN)
        app_say(a, ROLE_WARN, "%s: no rank to send it to", mailbox_cmd_name(cmd));
}

void commands_snapshot(app *a)
{
    if (!app_is_job(a) && source_status_of(a->src)->gone) {
        app_say(a, ROLE_ERROR, "the process has ended: its flight recorder is gone");
        return;
    }
    if (!send_command(a, TS_CMD_SNAPSHOT, PENDING_SNAPSHOT) && a->pending == PENDING_NONE &&
        a->message_role != ROLE_WARN)
        app_say(a, ROLE_WARN, "snapshot: no live rank to send it to");
}

void commands_analyse(app *a)
{
    const source_status *st = source_status_of(a->src);
    if (a->analysing) {
        app_say(a, ROLE_WARN, "the analysis is already running");
        return;
    }
    if (!app_is_job(a)) {
        if (st->flight_mb) {
            app_say(a, ROLE_WARN,
                    "analyse: a flight recorder writes no recording: p takes a snapshot, which "
                    "termsight analyse reads");
            return;
        }
        if (!st->window) {
            app_say(a, ROLE_ERROR,
                    "analyse: nothing recorded yet: press F5 (or c) to start collecting");
            return;
        }
        if (st->gone) { /* nothing left to flush: the session wrote everything when it ended */
            analyse_clear_folders(a);
            if (analyse_add_folder(a, st) == 0)
                analyse_start(a);
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
        app_say(a, ROLE_WARN,
                "analyse: the ranks keep flight recorders and write no recordings: p takes a "
                "snapshot of every rank, which termsight analyse reads");
        return;
    }
    if (!recorded) {
        app_say(a, ROLE_ERROR,
                "analyse: no rank has recorded anything yet: press F5 (or c) to start");
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
