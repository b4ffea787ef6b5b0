/* termsight ls: the live profiler sessions of this user, and cleaning of stale ones. */
#include "cli.h"
#include "model.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void ls_usage(FILE *out)
{
    fputs("usage: termsight ls [--clean [PID...]]\n"
          "\n"
          "Lists the profiler sessions of this user: pid, process, rank, state (idle,\n"
          "collecting, flight: collecting into its flight recorder, stopped), events recorded,\n"
          "events dropped, start time and run folder,\n"
          "grouped by training job (the ranks of a job in rank order, under a line naming the\n"
          "job; a forked child's session, such as a DataLoader worker's, has a \"w\" after its\n"
          "rank). A session whose process is gone is marked stale.\n"
          "\n"
          "  --clean   remove the shared memory of stale sessions (their processes ended\n"
          "            without closing them), after adding what their lanes still held to\n"
          "            their recordings; with PIDs, only those processes' sessions (and the\n"
          "            leftovers of other runs stay)\n",
          out);
}

static void start_text(uint64_t realtime_ns, char *out, size_t cap)
{
    time_t t = (time_t)(realtime_ns / 1000000000ull);
    struct tm tm;
    if (!realtime_ns || !localtime_r(&t, &tm) || !strftime(out, cap, "%Y-%m-%d %H:%M:%S", &tm))
        snprintf(out, cap, "-");
}

/* Sessions of no job first, then job by job, ranks in order. */
static int by_job(const void *a, const void *b)
{
    const segment_info *x = a, *y = b;
    int c = strcmp(x->job, y->job);
    if (c)
        return c;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return (x->pid > y->pid) - (x->pid < y->pid);
}

/* "job <id>: N sessions of W ranks here" before the first session of each job. */
static void job_line(const segment_info *list, int n, int i)
{
    const segment_info *s = &list[i];
    if (!s->readable || !s->job[0] ||
        (i > 0 && list[i - 1].readable && !strcmp(list[i - 1].job, s->job)))
        return;
    int count = 0;
    for (int k = i; k < n && list[k].readable && !strcmp(list[k].job, s->job); k++)
        count++;
    char job[4 * sizeof s->job + 1];
    printf("job %s: %d session%s", cli_clean(s->job, job, sizeof job), count,
           count == 1 ? "" : "s");
    if (s->world_size > 0)
        printf(" of %d rank%s", (int)s->world_size, s->world_size == 1 ? "" : "s");
    puts(" on this machine");
}

/* What the command line asks for. */
#define LS_PIDS 64 /* process ids --clean takes */

typedef struct ls_opts {
    int clean;         /* salvage and remove the stale sessions */
    int pids[LS_PIDS]; /* with clean: only these processes' (npids), else every stale one */
    int npids;
} ls_opts;

/* Parses argv: 0 and o, or 2 after saying what is wrong. */
static int ls_parse(int argc, char **argv, ls_opts *o)
{
    int c, first = 1;
    static const struct option longs[] = {{"clean", no_argument, NULL, 'c'}, {NULL, 0, NULL, 0}};
    o->clean = 0;
    o->npids = 0;
    while ((c = cli_getopt("ls", argc, argv, "", longs, 0, &first)) != -1) {
        if (c != 'c') {
            ls_usage(stderr);
            return 2;
        }
        o->clean = 1;
    }
    if (optind < argc && !o->clean) {
        cli_error("ls: unknown argument '%s'", argv[optind]);
        ls_usage(stderr);
        return 2;
    }
    o->npids = argc - optind;
    if (o->npids > LS_PIDS) {
        cli_error("ls: --clean takes at most %d process ids", LS_PIDS);
        return 2;
    }
    for (int i = 0; i < o->npids; i++) {
        char *end;
        errno = 0;
        long v = strtol(argv[optind + i], &end, 10);
        if (errno || end == argv[optind + i] || *end || v < 1 || v > INT32_MAX) {
            cli_error("ls: --clean takes process ids, not '%s'", argv[optind + i]);
            return 2;
        }
        o->pids[i] = (int)v;
    }
    return 0;
}

/* Whether --clean takes the session of pid: every stale one, or those of the pids given. */
static int clean_wanted(const ls_opts *o, int pid)
{
    if (!o->npids)
        return 1;
    for (int i = 0; i < o->npids; i++)
        if (o->pids[i] == pid)
            return 1;
    return 0;
}

/* The threads that lost events in the session's window under way, as LTTng-UST says what it
 * discarded: how many, since when, and the rate the thread offered then. */
static void loss_lines(const segment_info *s)
{
    uint32_t shown = s->lost_threads < SEGMENT_INFO_LOST ? s->lost_threads : SEGMENT_INFO_LOST;
    for (uint32_t k = 0; k < shown; k++) {
        const lane_loss *l = &s->lost[k];
        double since = l->first_ns > s->start_ns ? (double)(l->first_ns - s->start_ns) / 1e9 : 0;
        printf("%8s window %u: thread %u lost %llu events from %.1f s", "", s->window, l->tid,
               (unsigned long long)l->lost, since);
        if (l->rate)
            printf(", when it offered %.3g M events/s", (double)l->rate / 1e6);
        putchar('\n');
    }
    if (s->lost_threads > shown)
        printf("%8s and %u more threads\n", "", s->lost_threads - shown);
}

/* Lists the sessions (and with o->clean, salvages and removes the stale ones). */
static int ls_exec(const ls_opts *o)
{
    segment_info *list;
    char *why = NULL;
    int n = segment_list(&list, &why);
    if (n < 0) {
        cli_error("ls: %s", why ? why : "cannot list sessions");
        free(why);
        return 1;
    }
    int status = 0;
    if (o->clean) {
        int removed = 0;
        for (int i = 0; i < n; i++) {
            if (!clean_wanted(o, (int)list[i].pid))
                continue;
            if (list[i].alive) {
                if (o->npids) {
                    cli_error("ls: pid %d is running: its session is not stale", (int)list[i].pid);
                    status = 1;
                }
                continue;
            }
            char recovered[128];
            if (cli_stale_segment(&list[i], "found gone by termsight ls --clean", recovered,
                                  sizeof recovered) == 0) {
                printf("removed %s (pid %d, process gone)%s%s\n", list[i].shm_name,
                       (int)list[i].pid, recovered[0] ? ": " : "", recovered);
                removed++;
            } else {
                status = 1;
            }
        }
        printf("%d stale session%s removed\n", removed, removed == 1 ? "" : "s");
        if (o->npids) { /* the leftovers of other runs are left to a --clean of all */
            free(list);
            return status;
        }
        int orphans = segment_remove_orphan_ctls() + budget_remove_orphans();
        if (orphans)
            printf("%d leftover%s of sessions and runs already gone removed (control objects, "
                   "shared-memory ledgers)\n",
                   orphans, orphans == 1 ? "" : "s");
        free(list);
        return status;
    }
    if (n == 0) {
        puts("no profiler sessions");
        free(list);
        return 0;
    }
    /* Unreadable ones (no job known) first, then by job. */
    for (int i = 0; i < n; i++)
        if (!list[i].readable)
            list[i].job[0] = 0, list[i].rank = -1;
    qsort(list, (size_t)n, sizeof *list, by_job);
    printf("%-8s %-16s %-6s %-11s %12s %10s %-19s %s\n", "PID", "PROCESS", "RANK", "STATE",
           "EVENTS", "DROPS", "STARTED", "RUN FOLDER");
    for (int i = 0; i < n; i++) {
        const segment_info *s = &list[i];
        job_line(list, n, i);
        if (!s->readable) {
            char error[4 * sizeof s->error + 1];
            printf("%-8d %-16s %-6s %-11s %s%s\n", (int)s->pid, "?", "-", "unreadable",
                   cli_clean(s->error, error, sizeof error),
                   s->alive ? "" : " (stale: process gone)");
            continue;
        }
        char started[32];
        start_text(s->start_realtime_ns, started, sizeof started);
        /* A forked child's session (a DataLoader worker) shows its rank with "w". */
        char rank[16] = "-";
        if (s->job[0] && s->rank >= 0)
            snprintf(rank, sizeof rank, "%d%s", (int)s->rank, s->parent_pid > 0 ? "w" : "");
        else if (s->parent_pid > 0)
            snprintf(rank, sizeof rank, "w");
        char process[4 * sizeof s->process + 1], folder[4 * sizeof s->run_folder + 1];
        printf("%-8d %-16.16s %-6s %-11s %12llu %10llu %-19s %s%s\n", (int)s->pid,
               cli_clean(s->process, process, sizeof process), rank,
               s->flight_mb && s->state == TS_STATE_COLLECTING ? "flight" : state_name(s->state),
               (unsigned long long)s->events_recorded, (unsigned long long)s->drops, started,
               cli_clean(s->run_folder, folder, sizeof folder),
               s->alive ? "" : " (stale: process gone; termsight ls --clean removes it)");
        loss_lines(s);
    }
    free(list);
    return 0;
}

CLI_PARSE_EXEC(ls_run, ls_opts, ls_parse, ls_exec)

const cli_command cli_cmd_ls = {
    .name = "ls",
    .summary = "list the profiler sessions of this user",
    .run = ls_run,
    .usage = ls_usage,
};
