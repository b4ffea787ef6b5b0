/* termsight snapshot: asks flight-recorder sessions (termsight run --flight, TERMSIGHT_FLIGHT)
 * to write the events they keep, one process or every rank of a job at once. */
#include "cli.h"
#include "model.h"

#include <stdlib.h>
#include <string.h>

#define WAIT_MS_DEFAULT 30000

static void snapshot_usage(FILE *out)
{
    fputs("usage: termsight snapshot [--why TEXT] [--wait S] PID...\n"
          "       termsight snapshot [--why TEXT] [--wait S] --job ID\n"
          "\n"
          "Asks each process, or every rank of job ID on this machine, whose session keeps a\n"
          "flight recorder (TERMSIGHT_FLIGHT=1, as termsight run's flight option sets) to write\n"
          "the events it keeps: from the first whole step they hold to now, as a recording\n"
          "under its run folder, snapshots/NN-request/, which 'termsight analyse' reads like any\n"
          "run folder. Prints each process's snapshot folder.\n"
          "\n"
          "  --job ID     every rank of job ID (termsight ls shows the jobs)\n"
          "  --why TEXT   why, kept in the snapshot's metadata (default 'asked for')\n"
          "  --wait S     seconds to wait for the answers (default 30)\n"
          "\n"
          "Exit status: 0 when every process wrote its snapshot, 1 when one could not (said\n"
          "why: not in flight mode, gone, no answer), 2 on bad usage.\n",
          out);
}

/* The targets: the live sessions of the pids given, or of job's ranks. */
static size_t pick(const segment_info *all, size_t n, char **pids, int npids, const char *job,
                   segment_info *out, int *missing)
{
    size_t k = 0;
    *missing = 0;
    if (job) {
        for (size_t i = 0; i < n; i++)
            if (all[i].alive && all[i].readable && !strcmp(all[i].job, job) && !all[i].parent_pid)
                out[k++] = all[i];
        return k;
    }
    for (int p = 0; p < npids; p++) {
        pid_t pid = (pid_t)atoi(pids[p]);
        size_t found = n;
        for (size_t i = 0; i < n; i++) /* the newest segment of that pid */
            if (all[i].pid == pid && all[i].alive && all[i].readable)
                found = i;
        if (found == n) {
            cli_error("snapshot: no running termsight session of pid %s (termsight ls lists them)",
                      pids[p]);
            (*missing)++;
        } else {
            out[k++] = all[found];
        }
    }
    return k;
}

static int snapshot_run(int argc, char **argv, int check)
{
    const char *job = NULL, *why = "asked for";
    int wait_ms = WAIT_MS_DEFAULT;
    enum { O_JOB = 256, O_WHY, O_WAIT };
    static const struct option longs[] = {
        {"job", required_argument, NULL, O_JOB},
        {"why", required_argument, NULL, O_WHY},
        {"wait", required_argument, NULL, O_WAIT},
        {NULL, 0, NULL, 0},
    };
    int c, first = 1;
    while ((c = cli_getopt("snapshot", argc, argv, "", longs, 0, &first)) != -1) {
        uint32_t v;
        switch (c) {
        case O_JOB:
            job = optarg;
            break;
        case O_WHY:
            why = optarg;
            break;
        case O_WAIT:
            if (options_parse_u32(optarg, 1, 3600, &v) != 0) {
                cli_error("snapshot: --wait wants 1 to 3600 seconds, got '%s'", optarg);
                return 2;
            }
            wait_ms = (int)v * 1000;
            break;
        default:
            snapshot_usage(stderr);
            return 2;
        }
    }
    int npids = argc - optind;
    if ((job && npids) || (!job && !npids)) {
        cli_error("snapshot: give PIDs or --job ID");
        snapshot_usage(stderr);
        return 2;
    }
    for (int i = optind; i < argc; i++) {
        uint32_t v;
        if (options_parse_u32(argv[i], 1, INT32_MAX, &v) != 0) {
            cli_error("snapshot: '%s' is not a pid", argv[i]);
            return 2;
        }
    }
    if (strlen(why) >= TS_MAILBOX_ARG) {
        cli_error("snapshot: --why is longer than %d bytes", TS_MAILBOX_ARG - 1);
        return 2;
    }
    if (check)
        return 0;

    segment_info *all = NULL;
    char *cause = NULL;
    int n = segment_list(&all, &cause);
    if (n < 0) {
        cli_error("snapshot: cannot list sessions: %s", cause ? cause : "?");
        free(cause);
        return 1;
    }
    segment_info *targets = calloc((size_t)n + 1, sizeof *targets);
    cli_answer *answers = calloc((size_t)n + 1, sizeof *answers);
    int missing = 0, rc = 0;
    size_t k =
        targets && answers ? pick(all, (size_t)n, argv + optind, npids, job, targets, &missing) : 0;
    if (job && !k) {
        cli_error("snapshot: no running rank of job %s on this machine (termsight ls lists them)",
                  job);
        rc = 1;
    }
    cli_ask(targets, k, TS_CMD_SNAPSHOT, why, wait_ms, answers);
    for (size_t i = 0; i < k; i++) {
        const cli_answer *a = &answers[i];
        char who[96];
        if (targets[i].rank >= 0)
            snprintf(who, sizeof who, "pid %d (rank %d)", (int)a->pid, (int)targets[i].rank);
        else
            snprintf(who, sizeof who, "pid %d", (int)a->pid);
        if (a->answered && a->status == 0) {
            printf("%s: %s\n", who, a->msg);
        } else {
            cli_error("snapshot: %s: %s", who, a->answered ? a->msg : a->error);
            rc = 1;
        }
    }
    free(all);
    free(targets);
    free(answers);
    return rc || missing ? 1 : 0;
}

const cli_command cli_cmd_snapshot = {
    .name = "snapshot",
    .summary = "write what flight-recorder sessions keep (a process, or a job's ranks)",
    .run = snapshot_run,
    .usage = snapshot_usage,
};
