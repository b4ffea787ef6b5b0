/* termsight top: the live monitor. This file parses the command line; the monitor is the tui
 * room's (tui/tui.h). */
#include "cli.h"
#include "tui.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void top_usage(FILE *out)
{
    fprintf(out,
            "usage: termsight top [PID | NAME | --job ID] [--refresh-ms N] [--once [--json]]\n"
            "\n"
            "Watches a training process's profiler session live: step trace, operators, data\n"
            "queues, CPU and memory, timeline, and the ranks of its job on this machine. Keys\n"
            "(the bottom line shows the screen's): F5 or c start/stop collecting, F6 or r\n"
            "analyse (write the report folder; both ask before a stop or an analysis), Tab and\n"
            "1-7 switch screens, w/a/s/d move the timeline (either case), space freezes, F1 or ?\n"
            "lists every key, F10 or q quits (the training goes on). Of a job, F5 and F6 act on\n"
            "every rank.\n"
            "\n"
            "PID or NAME picks the session (NAME: the process name, or a prefix of it); with\n"
            "neither, the newest live session. When none is live yet, top waits for one to\n"
            "appear; when several match, it offers a chooser. A session that is a rank of a job\n"
            "brings the job's other ranks on this machine along (screen 7, Ranks).\n"
            "\n"
            "  --job ID         the ranks of job ID on this machine (the lowest rank shown first)\n"
            "  --refresh-ms N   display refresh in milliseconds (%d to %d, default %d)\n"
            "  --once           print one snapshot of the views without curses, then exit\n"
            "                   (observes for one refresh interval first)\n"
            "  --json           with --once: the snapshot as JSON\n"
            "\n"
            "Environment: NO_COLOR for monochrome; LANG=C (or any non-UTF-8 locale) for ASCII\n"
            "glyphs. Exit status: 0, 1 on failure, 2 on bad usage.\n",
            TUI_REFRESH_MS_MIN, TUI_REFRESH_MS_MAX, TUI_REFRESH_MS_DEFAULT);
}

static int top_short_usage(void)
{
    fputs("usage: termsight top [PID | NAME | --job ID] [--refresh-ms N] [--once [--json]]\n",
          stderr);
    return 2;
}

static int top_bad_usage(const char *fmt, const char *arg)
{
    char msg[256];
    snprintf(msg, sizeof msg, fmt, arg);
    cli_error("top: %s", msg);
    return top_short_usage();
}

/* Parses and checks argv into o: 0, or 2 after saying what is wrong. */
static int top_parse(int argc, char **argv, tui_options *o)
{
    *o = (tui_options){0};
    enum { O_ONCE = 256, O_JSON, O_JOB, O_REFRESH };
    static const struct option longs[] = {
        {"once", no_argument, NULL, O_ONCE},
        {"json", no_argument, NULL, O_JSON},
        {"job", required_argument, NULL, O_JOB},
        {"refresh-ms", required_argument, NULL, O_REFRESH},
        {NULL, 0, NULL, 0},
    };
    int c, first = 1;
    while ((c = cli_getopt("top", argc, argv, "", longs, 0, &first)) != -1) {
        const char *v = optarg;
        switch (c) {
        case O_ONCE:
            o->once = 1;
            break;
        case O_JSON:
            o->json = 1;
            break;
        case O_JOB:
            if (!*v)
                return top_bad_usage("--job needs a job id%s", "");
            o->job = v;
            break;
        case O_REFRESH: {
            char *end;
            errno = 0;
            long ms = strtol(v, &end, 10);
            if (end == v || *end || errno || ms < TUI_REFRESH_MS_MIN || ms > TUI_REFRESH_MS_MAX)
                return top_bad_usage("--refresh-ms: '%s' is not a number of milliseconds "
                                     "between 50 and 60000",
                                     v);
            o->refresh_ms = (unsigned)ms;
            break;
        }
        default:
            return top_short_usage();
        }
    }
    if (optind < argc)
        o->target = argv[optind];
    if (optind + 1 < argc)
        return top_bad_usage("unexpected argument '%s' (one PID or NAME)", argv[optind + 1]);
    if (o->job && o->target)
        return top_bad_usage("--job goes without a PID or NAME ('%s')", o->target);
    if (o->json && !o->once)
        return top_bad_usage("--json goes with --once%s", "");
    return 0;
}

static int top_run(int argc, char **argv, int check)
{
    tui_options o;
    int prc = top_parse(argc, argv, &o);
    if (prc || check) /* check: parsed and checked, all the option-parsing fuzz target asks for */
        return prc;
    char *cause = NULL;
    int rc = tui_main(&o, &cause);
    if (cause) {
        cli_error("%s", cause);
        free(cause);
    }
    return rc;
}

const cli_command cli_cmd_top = {
    .name = "top",
    .summary = "watch a training process live (ncurses)",
    .run = top_run,
    .usage = top_usage,
};
