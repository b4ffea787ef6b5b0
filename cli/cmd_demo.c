/* termsight demo: the main job out of the box. Starts the demo trainer (examples/demo_train.c, a
 * real CPU training run with a threaded data pipeline) in its own session and either watches it
 * with the live monitor (tui_main, as `termsight top PID`) or, headless, lets it train for a
 * while, analyses the recording (report_run, as `termsight analyse`) and prints the summary.
 *
 * The trainer is found at $TERMSIGHT_DEMO, else next to the build tree's binary
 * (<dir of termsight>/../examples/demo_train), else in an installed tree
 * (<dir of termsight>/../libexec/termsight/demo_train). It creates its own profiler session and
 * ends cleanly on SIGTERM (finishing its step, completing the recording), which is how the demo
 * stops it when the monitor quits, and what SIGINT and SIGTERM sent to the demo are turned into. */
#include "cli.h"
#include "report.h"
#include "tui.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEMO_HEADLESS_S      10
#define DEMO_LIVE_S          86400 /* under the monitor: until the monitor quits */
#define DEMO_RUN_FOLDER_LINE "run folder: "

static void demo_usage(FILE *out)
{
    fprintf(out,
            "usage: termsight demo [--headless] [--seconds N] [--slow-map] [--workers N]\n"
            "                      [-o DIR]\n"
            "\n"
            "Trains a small network on the CPU (a real MLP with SGD, fed by a threaded data\n"
            "pipeline: generator -> map -> batch -> prefetch) while termsight records it, and\n"
            "opens the live monitor on it. Quitting the monitor (q) stops the training and\n"
            "prints the run folder.\n"
            "\n"
            "  --headless     do not draw: train for --seconds, analyse the recording (as\n"
            "                 'termsight analyse') and print the report summary; the default\n"
            "                 when stdout is not a terminal\n"
            "  --seconds N    train for N seconds (headless default %d; under the monitor,\n"
            "                 until it quits)\n"
            "  --slow-map     make the map (augmentation) stage the pipeline's bottleneck\n"
            "  --workers N    map worker threads (default 2)\n"
            "  -o, --output DIR  parent of the run folder (default %s)\n"
            "\n"
            "The trainer is $TERMSIGHT_DEMO, else demo_train next to this program's build tree.\n"
            "Exit status: 0, 1 when the trainer or the analysis fails, 2 on bad usage.\n",
            DEMO_HEADLESS_S, TS_OUTPUT_DEFAULT);
}

static int demo_short_usage(void)
{
    fputs("usage: termsight demo [--headless] [--seconds N] [--slow-map] [--workers N] "
          "[-o DIR]\n",
          stderr);
    return 2;
}

static int demo_bad_usage(const char *fmt, const char *arg)
{
    char msg[256];
    snprintf(msg, sizeof msg, fmt, arg);
    cli_error("demo: %s", msg);
    return demo_short_usage();
}

/* The trainer's path: 0 and its absolute path in out, or -1 with a message printed. */
static int find_trainer(char out[static PATH_MAX])
{
    static const char *const rel[] = {"../examples/demo_train",
                                      TERMSIGHT_REL_LIBEXECDIR "/demo_train"};
    return cli_find_beside("demo", "TERMSIGHT_DEMO", rel, sizeof rel / sizeof rel[0], X_OK,
                           "demo_train not found (build it: cmake --build)", out, PATH_MAX);
}

/* A whole number from 1 to max, or -1. */
static long parse_count(const char *v, long max)
{
    char *end;
    errno = 0;
    long n = v ? strtol(v, &end, 10) : 0;
    if (!v || errno || end == v || *end || n < 1 || n > max)
        return -1;
    return n;
}

static volatile pid_t trainer_pid;

/* SIGINT and SIGTERM to the demo become a stop request to the trainer, which then finishes its
 * recording; the demo goes on to its end (the analysis, or the run folder). */
static void demo_forward(int sig)
{
    (void)sig;
    if (trainer_pid > 0)
        kill(trainer_pid, SIGTERM);
}

/* Starts the trainer with stdout and stderr on out_fd, in its own session (the terminal's
 * Ctrl-C and the monitor's keys are not its business). Returns its pid, or -1. */
static pid_t start_trainer(char *const *argv, int out_fd)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        cli_error("demo: fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        setsid();
        if (dup2(out_fd, STDOUT_FILENO) < 0 || dup2(out_fd, STDERR_FILENO) < 0)
            _exit(126);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        execv(argv[0], argv);
        cli_error("demo: cannot run %s: %s", argv[0], strerror(errno));
        _exit(127);
    }
    return pid;
}

/* Waits for the trainer; its exit status, 128 + signal, or -1. */
static int wait_trainer(pid_t pid)
{
    int status;
    pid_t got;
    while ((got = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
        ;
    trainer_pid = 0;
    if (got < 0)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Copies the trainer's output from in to stdout, keeping its run folder line's path in folder. */
static void copy_output(FILE *in, char *folder, size_t cap)
{
    char *line = NULL;
    size_t len = 0;
    ssize_t n;
    while ((n = getline(&line, &len, in)) >= 0) {
        fputs(line, stdout);
        fflush(stdout);
        size_t k = strlen(DEMO_RUN_FOLDER_LINE);
        if (!strncmp(line, DEMO_RUN_FOLDER_LINE, k) && line[k] == '/') {
            line[strcspn(line, "\n")] = 0;
            char *note = strstr(line + k, " (not created");
            if (note)
                *note = 0;
            snprintf(folder, cap, "%s", line + k);
        }
    }
    free(line);
}

static int demo_analyse(const char *folder)
{
    report_options o;
    report_options_init(&o);
    report *r = NULL;
    char *cause = NULL;
    if (report_run(folder, &o, &r, &cause) < 0) {
        cli_error("demo: %s", cause ? cause : "analyse failed");
        free(cause);
        return 1;
    }
    putchar('\n');
    report_print(r, stdout, 1);
    report_free(r);
    return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
}

/* Headless: the trainer's output goes through a pipe to stdout as it comes. */
static int demo_headless(char *const *argv)
{
    int fds[2];
    if (pipe(fds) != 0) {
        cli_error("demo: pipe: %s", strerror(errno));
        return 1;
    }
    pid_t pid = start_trainer(argv, fds[1]);
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        return 1;
    }
    trainer_pid = pid;
    FILE *in = fdopen(fds[0], "r");
    char folder[PATH_MAX + 64] = "";
    if (in) {
        copy_output(in, folder, sizeof folder);
        fclose(in);
    } else {
        close(fds[0]);
    }
    int rc = wait_trainer(pid);
    if (rc != 0) {
        cli_error("demo: the trainer failed (status %d)", rc);
        return 1;
    }
    if (!folder[0] || access(folder, F_OK) != 0) {
        cli_error("demo: the trainer reported no run folder");
        return 1;
    }
    return demo_analyse(folder);
}

/* Under the monitor: the trainer's output goes to a temporary file, shown once the monitor has
 * given the terminal back. */
static int demo_live(char *const *argv)
{
    FILE *log = tmpfile();
    if (!log) {
        cli_error("demo: cannot create a temporary file: %s", strerror(errno));
        return 1;
    }
    pid_t pid = start_trainer(argv, fileno(log));
    if (pid < 0) {
        fclose(log);
        return 1;
    }
    trainer_pid = pid;
    char target[32];
    snprintf(target, sizeof target, "%d", (int)pid);
    tui_options o = {.target = target};
    char *cause = NULL;
    int tui_rc = tui_main(&o, &cause);
    if (cause) {
        cli_error("%s", cause);
        free(cause);
    }
    kill(pid, SIGTERM);
    int rc = wait_trainer(pid);
    char folder[PATH_MAX + 64] = "";
    rewind(log);
    copy_output(log, folder, sizeof folder);
    fclose(log);
    if (rc != 0) {
        cli_error("demo: the trainer failed (status %d)", rc);
        return 1;
    }
    if (folder[0])
        printf("\nanalyse it with: termsight analyse %s\n", folder);
    return tui_rc;
}

/* What the command line asks for. */
typedef struct demo_opts {
    const char *output, *workers;
    long seconds;
    int headless, slow_map;
} demo_opts;

/* Parses and checks argv into o: 0, or 2 after saying what is wrong. */
static int demo_parse(int argc, char **argv, demo_opts *o)
{
    *o = (demo_opts){.output = TS_OUTPUT_DEFAULT};
    int c, first = 1;
    enum { O_HEADLESS = 256, O_SLOW_MAP, O_SECONDS, O_WORKERS };
    static const struct option longs[] = {
        {"headless", no_argument, NULL, O_HEADLESS},
        {"slow-map", no_argument, NULL, O_SLOW_MAP},
        {"seconds", required_argument, NULL, O_SECONDS},
        {"workers", required_argument, NULL, O_WORKERS},
        {"output", required_argument, NULL, 'o'},
        {NULL, 0, NULL, 0},
    };
    while ((c = cli_getopt("demo", argc, argv, "o:", longs, 0, &first)) != -1) {
        const char *v = optarg;
        switch (c) {
        case O_HEADLESS:
            o->headless = 1;
            break;
        case O_SLOW_MAP:
            o->slow_map = 1;
            break;
        case O_SECONDS:
            if ((o->seconds = parse_count(v, TS_SECONDS_MAX)) < 0)
                return demo_bad_usage("--seconds wants a whole number of seconds, not '%s'", v);
            break;
        case O_WORKERS:
            if (parse_count(v, 64) < 0)
                return demo_bad_usage("--workers wants 1 to 64, not '%s'", v);
            o->workers = v;
            break;
        case 'o':
            if (!*v)
                return demo_bad_usage("%s needs a folder", "-o");
            o->output = v;
            break;
        default:
            return demo_short_usage();
        }
    }
    if (optind < argc)
        return demo_bad_usage("unknown argument '%s'", argv[optind]);
    return 0;
}

/* Runs the demo trainer as o asks, under the live monitor unless headless. */
static int demo_exec(const demo_opts *o)
{
    const char *output = o->output, *workers = o->workers;
    long seconds = o->seconds;
    int headless = o->headless || !isatty(STDOUT_FILENO), slow_map = o->slow_map;

    char trainer[PATH_MAX];
    if (find_trainer(trainer) != 0)
        return 1;
    char out_abs[PATH_MAX];
    if (cli_output_folder("demo", output, out_abs) != 0)
        return 1;
    char secs[24];
    snprintf(secs, sizeof secs, "%ld",
             seconds    ? seconds
             : headless ? DEMO_HEADLESS_S
                        : DEMO_LIVE_S);
    char *targv[10];
    int n = 0;
    targv[n++] = trainer;
    targv[n++] = "--output";
    targv[n++] = out_abs;
    targv[n++] = "--seconds";
    targv[n++] = secs;
    if (slow_map)
        targv[n++] = "--slow-map";
    if (workers) {
        targv[n++] = "--workers";
        targv[n++] = (char *)workers;
    }
    targv[n] = NULL;

    struct sigaction fwd = {.sa_handler = demo_forward, .sa_flags = SA_RESTART}, old_int, old_term;
    sigemptyset(&fwd.sa_mask);
    sigaction(SIGINT, &fwd, &old_int);
    sigaction(SIGTERM, &fwd, &old_term);
    int rc = headless ? demo_headless(targv) : demo_live(targv);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    return rc;
}

CLI_PARSE_EXEC(demo_run, demo_opts, demo_parse, demo_exec)

const cli_command cli_cmd_demo = {
    .name = "demo",
    .summary = "train a small network under the live monitor (the main job)",
    .run = demo_run,
    .usage = demo_usage,
};
