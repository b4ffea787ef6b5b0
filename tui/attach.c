/* attach: finding the session termsight top watches (a pid, a process name, a job id, or the
 * newest live one), waiting for one to appear, offering a chooser when several match, and
 * opening it with the job's other ranks on this machine (ranks.c). */
#include "app.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WAIT_POLL_MS 500 /* looking for a session to appear */

int attach_parse_target(const char *text, const char *job, target *t, char **cause)
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
int attach_candidates(const target *t, segment_info **out, char **cause)
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
int attach_lowest_rank(const segment_info *list, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if ((uint32_t)list[i].rank < (uint32_t)list[best].rank) /* -1 (unknown) last */
            best = i;
    return best;
}

int attach_newest(const segment_info *list, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (list[i].start_realtime_ns >= list[best].start_realtime_ns)
            best = i;
    return best;
}

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
pid_t attach_choose(canvas *cv, const target *t, char **cause)
{
    uint64_t since = tsclock_monotonic_ns();
    int sel = -1;
    pid_t chosen_pid = 0;
    for (;;) {
        if (screen_quit_signal())
            return 0;
        segment_info *list = NULL;
        int n = attach_candidates(t, &list, cause);
        if (n < 0)
            return -1;
        if (n == 1 || (n > 1 && t->job)) { /* a job: its lowest rank first, the others along */
            pid_t pid = list[t->job ? attach_lowest_rank(list, n) : 0].pid;
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
                sel = attach_newest(list, n);
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
int attach_open(pid_t pid, ranks **out, char **cause)
{
    char *why = NULL;
    if (ranks_open(pid, out, &why) == 0)
        return 0;
    cause_set(cause, "top: cannot watch pid %d: %s (termsight ls lists the sessions)", (int)pid,
              why ? why : "?");
    free(why);
    return -1;
}
