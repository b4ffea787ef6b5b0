/* termsight run: profile an unmodified program.
 *
 * CMD starts with libtermsight.so preloaded (LD_PRELOAD, after any preload already set) and named
 * as the NVTX and CUDA injection (NVTX_INJECTION64_PATH, CUDA_INJECTION64_PATH), with
 * TERMSIGHT_AUTOSTART=1 and the options in TERMSIGHT_* variables: the library's constructor creates
 * the session (collectors/autostart.c). The library is found, in order, at $TERMSIGHT_LIB, next to
 * the build tree's binary
 * (<dir of termsight>/../collectors/libtermsight.so) and in an installed tree
 * (<dir of termsight>/../lib/libtermsight.so).
 *
 * While CMD runs, SIGINT is ignored here (Ctrl-C reaches CMD through the terminal's process
 * group) and SIGTERM is passed on to CMD; either way run waits for CMD. A CMD that a signal ended,
 * or that ended through _exit, could not close its session: what its lanes still held is added to
 * its recording from the segment it left, and the segment removed (cli_stale_session). Then run
 * prints the run folder and returns CMD's exit status (128 + the signal when a signal ended it). */
#include "cli.h"
#include "model.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <regex.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void run_usage(FILE *out)
{
    fputs("usage: termsight run [OPTIONS] -- CMD [ARGS...]\n"
          "\n"
          "Runs CMD with the collector loaded (LD_PRELOAD, NVTX_INJECTION64_PATH and\n"
          "CUDA_INJECTION64_PATH), so that an unmodified program is profiled: CPU and memory\n"
          "samples, NVTX ranges and marks, CUDA activity where CUPTI and a GPU are there, and the\n"
          "API's events when it calls them. Returns CMD's exit status (128 + signal when a signal\n"
          "ended it) and prints the run folder of CMD's process on stderr. Every other process\n"
          "started with this environment (what CMD execs, runs or forks) gets a run folder of its\n"
          "own when it records something (a shell, env or a shim leave none). The tree's segments\n"
          "share one shared-memory budget: a quarter of /dev/shm's free space, at most 2 GiB\n"
          "(TERMSIGHT_SHM_BUDGET_MB sets it).\n"
          "\n"
          "  -o DIR             parent of run folders (default " TS_OUTPUT_DEFAULT ")\n"
          "  --no-start         wait for a start command from 'termsight top'\n"
          "  --sample-ms N      CPU and memory sampling interval, ms (default 100)\n"
          "  --step-pattern RE  NVTX ranges whose name matches this POSIX extended regular\n"
          "                     expression are steps (default '" TS_STEP_PATTERN_DEFAULT "')\n"
          "  --steps A-B        collect from step A through step B (steps from the API or NVTX)\n"
          "  --delay S          start collecting after S seconds\n"
          "  --duration S       stop collecting S seconds after the start\n"
          "  --no-python        do not profile Python programs' PyTorch loops\n"
          "  --flight           flight recorder: keep the last events in memory instead of\n"
          "                     writing a recording; a snapshot writes them (a step much\n"
          "                     slower than the ones before it, a hang, 'termsight snapshot',\n"
          "                     SIGUSR2) under the run folder's snapshots/ (TERMSIGHT_FLIGHT_MB:\n"
          "                     its memory, default 64 MiB a process)\n"
          "\n"
          "A Python program that imports torch is profiled as termsight.torch.auto() does:\n"
          "each optimizer step a step (its DataLoader batches trained with gradients), the\n"
          "waits for them (TERMSIGHT_TORCH_STEP=batch: a step per batch), the loader's\n"
          "prefetch queue and workers, and every operator with its module (the termsight\n"
          "package's sitecustomize goes first on PYTHONPATH; TERMSIGHT_PYTHON_BOOT names its\n"
          "folder).\n",
          out);
}

/* Where the termsight package's sitecustomize (python/termsight/_boot) is looked for, relative
 * to the command's folder: the build tree's copy (<build>/python, any build folder), the source
 * tree's (a build folder inside it), then as installed. */
static const char *const boot_rel[] = {"../python/termsight/_boot", "../../python/termsight/_boot",
                                       TERMSIGHT_REL_LIBDIR
                                       "/../python3/dist-packages/termsight/_boot",
                                       "../lib/python3/dist-packages/termsight/_boot"};

/* The folder of the termsight package's sitecustomize: 0 and its path in out, or -1 where there
 * is none (a build without the Python package: Python programs run without it, as with
 * --no-python). */
static int find_python_boot(char out[static PATH_MAX])
{
    const char *env = getenv("TERMSIGHT_PYTHON_BOOT");
    if (env && *env)
        return realpath(env, out) ? 0 : -1;
    char exe[PATH_MAX];
    if (cli_exe_dir(exe, sizeof exe) != 0)
        return -1;
    for (size_t i = 0; i < sizeof boot_rel / sizeof boot_rel[0]; i++) {
        char cand[PATH_MAX + 64], site[PATH_MAX + 96];
        snprintf(cand, sizeof cand, "%s/%s", exe, boot_rel[i]);
        snprintf(site, sizeof site, "%s/sitecustomize.py", cand);
        if (access(site, R_OK) == 0 && realpath(cand, out))
            return 0;
    }
    return -1;
}

/* The file execvp runs for a command without a slash: the first executable one of its name in
 * PATH. 0 and its path, or -1. */
static int find_in_path(const char *cmd, char *out, size_t cap)
{
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, ":");
        int w = snprintf(out, cap, "%.*s/%s", (int)n, n ? p : ".", cmd);
        if (w > 0 && (size_t)w < cap && access(out, X_OK) == 0)
            return 0;
        p += n + (p[n] == ':');
    }
    return -1;
}

/* 1 when cmd runs Python: its name is python..., or it is a script (found as execvp finds it)
 * whose first line names python. */
static int runs_python(const char *cmd)
{
    const char *base = strrchr(cmd, '/');
    if (!strncmp(base ? base + 1 : cmd, "python", 6))
        return 1;
    char path[PATH_MAX];
    if (strchr(cmd, '/'))
        snprintf(path, sizeof path, "%s", cmd);
    else if (find_in_path(cmd, path, sizeof path) != 0)
        return 0;
    FILE *f = fopen(path, "re");
    char line[256] = "";
    if (f) {
        if (!fgets(line, sizeof line, f))
            line[0] = 0;
        fclose(f);
    }
    return line[0] == '#' && line[1] == '!' && strstr(line, "python");
}

/* Says once, for a Python program, that its PyTorch loops will not be profiled, and where the
 * command looked for its Python part. */
static void say_no_python(const char *cmd)
{
    if (!runs_python(cmd))
        return;
    char exe[PATH_MAX] = "?";
    cli_exe_dir(exe, sizeof exe);
    fprintf(stderr,
            "termsight: run: %s is a Python program, but termsight's Python part was not found "
            "beside the command (%s/%s, nor where it is installed; TERMSIGHT_PYTHON_BOOT names "
            "it): its PyTorch loops are not profiled, only the process (CPU, memory, threads)\n",
            cmd, exe, boot_rel[0]);
}

/* PYTHONPATH for CMD: the sitecustomize's folder, then the folder holding the termsight package
 * (two levels up), then what was there. */
static void set_python_path(const char *boot)
{
    char pkg[PATH_MAX];
    snprintf(pkg, sizeof pkg, "%s", boot);
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(pkg, '/');
        if (slash && slash != pkg)
            *slash = 0;
    }
    const char *old = getenv("PYTHONPATH");
    char *v = NULL;
    if (asprintf(&v, "%s:%s%s%s", boot, pkg, old && *old ? ":" : "", old && *old ? old : "") < 0)
        return;
    setenv("PYTHONPATH", v, 1);
    free(v);
}

/* The library to preload: 0 and its absolute path in out, or -1. */
static int find_library(char out[static PATH_MAX])
{
    /* The build tree's, then an installed tree's (by its SONAME: the runtime package has no
     * unversioned link). */
    static const char *const rel[] = {"../collectors/libtermsight.so",
                                      TERMSIGHT_REL_LIBDIR "/libtermsight.so.0"};
    return cli_find_beside("run", "TERMSIGHT_LIB", rel, sizeof rel / sizeof rel[0], R_OK,
                           "libtermsight.so not found", out, PATH_MAX);
}

static int check_seconds(const char *opt, const char *v)
{
    uint32_t s;
    if (options_parse_u32(v, 0, TS_SECONDS_MAX, &s) != 0) {
        cli_error("run: %s wants whole seconds, got '%s'", opt, v);
        return -1;
    }
    return 0;
}

static int check_steps(const char *v)
{
    uint64_t a, b;
    if (options_parse_steps(v, &a, &b) != 0) {
        cli_error("run: --steps wants A-B with 1 <= A <= B, got '%s'", v);
        return -1;
    }
    return 0;
}

static pid_t child_pid;

/* The processes CMD starts share one shared-memory ledger (model/budget.c), named to them in
 * TERMSIGHT_SHM_BUDGET: what their segments have of /dev/shm together stays within its limit. */
static ts_shm_budget *ledger;
static char ledger_name[96];

/* The segments of processes of the tree that ended without closing their sessions (a signal,
 * _exit): what their lanes held into their recordings, the segments removed and given back to the
 * ledger; but CMD's own (cmd > 0), which run reaps once it has waited for it, saying how it
 * ended. The events recovered. */
static uint64_t reap_ended(pid_t cmd)
{
    segment_info *list;
    int n = ledger ? segment_list_ended(ledger->id, 0, &list, NULL) : 0;
    if (n <= 0)
        return 0;
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        uint64_t events = 0;
        char *cause = NULL;
        if (list[i].pid == cmd)
            continue;
        if (segment_reap(&list[i], "it ended before it closed its session; reaped by termsight run",
                         NULL, ledger, &events, &cause) != 0)
            cli_error("run: %s", cause ? cause : "cannot reap a session");
        free(cause);
        total += events;
    }
    free(list);
    return total;
}

#define REAP_EVERY_NS 50000000L /* while CMD runs: ended processes' segments go within 50 ms */

/* Waits for pid, reaping what ended processes of the tree leave meanwhile. */
static pid_t wait_reaping(pid_t pid, int *status)
{
    for (;;) {
        pid_t got = waitpid(pid, status, WNOHANG);
        if (got != 0 && !(got < 0 && errno == EINTR))
            return got;
        reap_ended(pid);
        struct timespec ts = {0, REAP_EVERY_NS};
        nanosleep(&ts, NULL); /* a signal (SIGTERM passed on, SIGCHLD) ends it early */
    }
}

static void forward(int sig)
{
    if (child_pid > 0)
        kill(child_pid, sig);
}

/* Whether name is the run folder of a process with key "-<pid>-" in it: "...-<pid>-<YYYYmmdd-
 * HHMMSS>-<8 hex digits>". */
enum { STAMP = 15, SUFFIX = STAMP + 1 + 8 }; /* after the pid: stamp, '-', random part */
static int run_folder_of(const char *n, const char *key, size_t klen)
{
    size_t len = strlen(n);
    return len >= klen + SUFFIX && strncmp(n + len - SUFFIX - klen, key, klen) == 0 &&
           n[len - 9] == '-' && strspn(n + len - 8, "0123456789abcdef") == 8;
}

static int own_folder(int dirfd, const char *name)
{
    struct stat st;
    return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
           st.st_uid == geteuid();
}

/* Every run folder under the folder at fd (closed here), "<prefix><name>" for each, with the job
 * folders under it at depth 1: added to *names (n of them). */
static void list_run_folders(int fd, const char *prefix, int depth, char ***names, size_t *n)
{
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *nm = e->d_name;
        if (nm[0] == '.' || !own_folder(dirfd(d), nm))
            continue;
        if (run_folder_of(nm, "-", 1)) {
            char **grown = realloc(*names, (*n + 1) * sizeof **names);
            if (!grown)
                break;
            *names = grown;
            if (asprintf(&grown[*n], "%s%s", prefix, nm) >= 0)
                (*n)++;
        } else if (depth > 0) {
            int sub = openat(dirfd(d), nm, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            char p[512];
            snprintf(p, sizeof p, "%s/", nm);
            if (sub >= 0)
                list_run_folders(sub, p, depth - 1, names, n);
        }
    }
    closedir(d);
}

typedef struct folder_set {
    char **names;
    size_t n;
} folder_set;

static void folders_of(const char *dir, folder_set *set)
{
    *set = (folder_set){0};
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0)
        list_run_folders(fd, "", 1, &set->names, &set->n);
}

static void folders_free(folder_set *set)
{
    for (size_t i = 0; i < set->n; i++)
        free(set->names[i]);
    free(set->names);
}

/* The run folders under dir that were not in before: the oldest (by its time stamp) into out,
 * and their count. */
static size_t new_folders(const char *dir, const folder_set *before, char *out, size_t cap)
{
    folder_set now;
    folders_of(dir, &now);
    size_t count = 0;
    const char *oldest = NULL;
    for (size_t i = 0; i < now.n; i++) {
        int seen = 0;
        for (size_t k = 0; k < before->n && !seen; k++)
            seen = !strcmp(now.names[i], before->names[k]);
        if (seen)
            continue;
        count++;
        size_t a = strlen(now.names[i]), b = oldest ? strlen(oldest) : 0;
        if (!oldest || strncmp(now.names[i] + a - SUFFIX, oldest + b - SUFFIX, STAMP) < 0)
            oldest = now.names[i];
    }
    if (oldest)
        snprintf(out, cap, "%s/%s", dir, oldest);
    folders_free(&now);
    return count;
}

/* The run folder of pid under dir: "<process>-<pid>-<YYYYmmdd-HHMMSS>-<8 hex digits>", or in a
 * job folder "<job>/rank<R>-<host>-<pid>-<stamp>-<hex>": the newest of those that are real
 * folders of this user (something planted under such a name, a link above all, is never
 * reported). */
static int find_run_folder(const char *dir, pid_t pid, char *out, size_t cap)
{
    char key[32];
    snprintf(key, sizeof key, "-%d-", (int)pid);
    size_t klen = strlen(key);
    folder_set all;
    folders_of(dir, &all);
    const char *best = NULL;
    for (size_t i = 0; i < all.n; i++) {
        const char *n = all.names[i];
        size_t len = strlen(n), bl = best ? strlen(best) : 0;
        /* Newest by its time stamp (the random part after it is no order). */
        if (run_folder_of(n, key, klen) &&
            (!best || strncmp(n + len - SUFFIX, best + bl - SUFFIX, STAMP) > 0))
            best = n;
    }
    if (best)
        snprintf(out, cap, "%s/%s", dir, best);
    folders_free(&all);
    return best ? 0 : -1;
}

/* What the command line asks for. */
typedef struct run_opts {
    const char *output, *sample, *pattern, *steps, *delay, *duration;
    int no_start, no_python, flight;
    char **cmd; /* the program and its arguments, NULL-terminated */
} run_opts;

/* Parses and checks argv into o: 0, or 2 after saying what is wrong. */
static int run_parse(int argc, char **argv, run_opts *o)
{
    *o = (run_opts){.output = TS_OUTPUT_DEFAULT};
    int c, first = 1;
    enum {
        O_SAMPLE = 256,
        O_PATTERN,
        O_STEPS,
        O_DELAY,
        O_DURATION,
        O_NO_START,
        O_NO_PYTHON,
        O_FLIGHT
    };
    static const struct option longs[] = {
        {"output", required_argument, NULL, 'o'},
        {"sample-ms", required_argument, NULL, O_SAMPLE},
        {"step-pattern", required_argument, NULL, O_PATTERN},
        {"steps", required_argument, NULL, O_STEPS},
        {"delay", required_argument, NULL, O_DELAY},
        {"duration", required_argument, NULL, O_DURATION},
        {"no-start", no_argument, NULL, O_NO_START},
        {"no-python", no_argument, NULL, O_NO_PYTHON},
        {"flight", no_argument, NULL, O_FLIGHT},
        {NULL, 0, NULL, 0},
    };
    while ((c = cli_getopt("run", argc, argv, "o:", longs, 1, &first)) != -1) {
        switch (c) {
        case 'o':
            o->output = optarg;
            break;
        case O_SAMPLE:
            o->sample = optarg;
            break;
        case O_PATTERN:
            o->pattern = optarg;
            break;
        case O_STEPS:
            o->steps = optarg;
            break;
        case O_DELAY:
            o->delay = optarg;
            break;
        case O_DURATION:
            o->duration = optarg;
            break;
        case O_NO_START:
            o->no_start = 1;
            break;
        case O_NO_PYTHON:
            o->no_python = 1;
            break;
        case O_FLIGHT:
            o->flight = 1;
            break;
        default:
            run_usage(stderr);
            return 2;
        }
    }
    if (optind >= argc) {
        cli_error("run: no command given (termsight run [OPTIONS] -- CMD [ARGS...])");
        run_usage(stderr);
        return 2;
    }
    o->cmd = argv + optind;
    const char *sample = o->sample, *pattern = o->pattern, *steps = o->steps;
    const char *delay = o->delay, *duration = o->duration;

    uint32_t ms;
    if (sample && options_parse_u32(sample, TS_SAMPLE_MS_MIN, TS_SAMPLE_MS_MAX, &ms) != 0) {
        cli_error("run: --sample-ms wants %u to %u, got '%s'", TS_SAMPLE_MS_MIN, TS_SAMPLE_MS_MAX,
                  sample);
        return 2;
    }
    if (pattern) {
        regex_t re;
        int rc = regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB);
        if (rc) {
            char why[128];
            regerror(rc, &re, why, sizeof why);
            cli_error("run: --step-pattern '%s': %s", pattern, why);
            return 2;
        }
        regfree(&re);
    }
    if ((steps && check_steps(steps)) || (delay && check_seconds("--delay", delay)) ||
        (duration && check_seconds("--duration", duration)))
        return 2;
    if (steps && (delay || duration)) {
        cli_error("run: --steps and --delay/--duration are two ways to choose the window: "
                  "give one");
        return 2;
    }
    return 0;
}

/* The flight recorder's snapshots in run folder run, one line each. */
static void say_snapshots(const char *run)
{
    char path[PATH_MAX + 300];
    snprintf(path, sizeof path, "%s/" TS_SNAPSHOT_DIR, run);
    struct dirent **names = NULL;
    int n = scandir(path, &names, NULL, alphasort);
    int said = 0;
    for (int i = 0; i < n; i++) {
        if (names[i]->d_name[0] != '.') {
            fprintf(stderr, "termsight: flight recorder snapshot %s/%s\n", path, names[i]->d_name);
            said++;
        }
        free(names[i]);
    }
    free(names);
    if (!said)
        fprintf(stderr, "termsight: flight recorder: no snapshot was taken\n");
}

int cli_output_folder(const char *cmd, const char *output, char *out_abs)
{
    char *cause = NULL;
    if (path_mkdirs(output, 1, 0755, &cause) != 0) {
        cli_error("%s: %s", cmd, cause ? cause : output);
        free(cause);
        return 1;
    }
    struct stat lst;
    if (lstat(output, &lst) == 0 && S_ISLNK(lst.st_mode) && lst.st_uid != geteuid() &&
        lst.st_uid != 0) {
        cli_error("%s: the output folder %s is a symbolic link of uid %u, which is not followed "
                  "(only your own links or root's are)",
                  cmd, output, (unsigned)lst.st_uid);
        return 1;
    }
    if (!realpath(output, out_abs)) {
        cli_error("%s: %s: %s", cmd, output, strerror(errno));
        return 1;
    }
    int fd = open(out_abs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = fd < 0 ? cause_set(&cause, "%s: %s", output, strerror(errno))
                    : path_trusted(fd, output, &cause);
    if (fd >= 0)
        close(fd);
    if (rc != 0) {
        cli_error("%s: %s", cmd, cause ? cause : output);
        free(cause);
        return 1;
    }
    return 0;
}

/* The shared-memory ledger of the process tree: 0 (without one when it cannot be made: each
 * process then keeps its own), or 2 when TERMSIGHT_SHM_BUDGET_MB is wrong. */
static int ledger_open(void)
{
    uint64_t limit;
    char *why = NULL;
    if (budget_limit_for(segment_shm_available(), getenv("TERMSIGHT_SHM_BUDGET_MB"), &limit,
                         &why) != 0) {
        cli_error("run: %s", why);
        free(why);
        return 2;
    }
    if (budget_create_named(limit, ledger_name, sizeof ledger_name, &ledger, &why) != 0) {
        cli_error("run: %s: each process keeps a budget of its own", why);
        free(why);
    }
    return 0;
}

/* The ledger's peak said, and the ledger removed. */
static void ledger_close(void)
{
    if (!ledger)
        return;
    uint64_t refused = atomic_load(&ledger->refused);
    fprintf(stderr, "termsight: shared memory: peak %.1f MiB of a %.1f MiB budget%s\n",
            atomic_load(&ledger->peak) / 1048576.0, ledger->limit / 1048576.0,
            refused ? " (it refused some: events were dropped and counted; "
                      "TERMSIGHT_SHM_BUDGET_MB sets it)"
                    : "");
    shm_unlink(ledger_name);
    budget_close(ledger);
    ledger = NULL;
}

/* In the forked child: the collector's environment set (lib preloaded and injected, boot on the
 * Python path unless NULL), then o->cmd executed; never returns. */
static void child_exec(const run_opts *o, const char *lib, const char *boot, const char *out_abs)
{
    const char *pre = getenv("LD_PRELOAD");
    char *preload = NULL;
    if (pre && *pre) {
        /* after the preloads already set: a sanitizer runtime must stay first */
        if (asprintf(&preload, "%s:%s", pre, lib) < 0)
            _exit(127);
    }
    setenv("LD_PRELOAD", preload ? preload : lib, 1);
    setenv("NVTX_INJECTION64_PATH", lib, 1);
    setenv("CUDA_INJECTION64_PATH", lib, 1);
    setenv("TERMSIGHT_AUTOSTART", "1", 1);
    char root[16];
    snprintf(root, sizeof root, "%d", (int)getpid());
    setenv("TERMSIGHT_ROOT_PID", root, 1);
    if (ledger)
        setenv("TERMSIGHT_SHM_BUDGET", ledger_name, 1);
    else
        unsetenv("TERMSIGHT_SHM_BUDGET");
    setenv("TERMSIGHT_OUTPUT", out_abs, 1);
    setenv("TERMSIGHT_START", o->no_start ? "0" : "1", 1);
    if (o->flight)
        setenv("TERMSIGHT_FLIGHT", "1", 1);
    if (boot)
        set_python_path(boot);
    const struct {
        const char *name, *value;
    } opt[] = {{"TERMSIGHT_SAMPLE_MS", o->sample},
               {"TERMSIGHT_STEP_PATTERN", o->pattern},
               {"TERMSIGHT_STEPS", o->steps},
               {"TERMSIGHT_DELAY_S", o->delay},
               {"TERMSIGHT_DURATION_S", o->duration}};
    for (size_t k = 0; k < sizeof opt / sizeof opt[0]; k++)
        if (opt[k].value)
            setenv(opt[k].name, opt[k].value, 1);
    execvp(o->cmd[0], o->cmd);
    cli_error("run: cannot run %s: %s", o->cmd[0], strerror(errno));
    _exit(127);
}

/* A program that a signal ends, or that ends through _exit, leaves its segment: what its lanes
 * held past the recorder's last drain goes into its recording, and the segment goes; so for
 * every process CMD started that did the same. */
static void reap_left_sessions(pid_t pid, int status)
{
    char how[128], recovered[128];
    if (WIFSIGNALED(status))
        snprintf(how, sizeof how, "killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(how, sizeof how, "exit status %d, through _exit",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    cli_stale_session(pid, how, recovered, sizeof recovered);
    if (recovered[0])
        fprintf(stderr, "termsight: pid %d ended (%s) before it closed its session: %s\n", (int)pid,
                how, recovered);
    uint64_t late = reap_ended(0);
    if (late)
        fprintf(stderr,
                "termsight: processes CMD started ended before they closed their sessions: %llu "
                "events their lanes still held were added to their recordings\n",
                (unsigned long long)late);
}

/* Says the run folder of CMD's process; else of the first process it started that recorded (a
 * launcher, a shell, a shim records nothing of its own); with the flight recorder, its
 * snapshots. */
static void say_run_folder(const run_opts *o, const char *out_abs, const folder_set *before,
                           pid_t pid, int status)
{
    char folder[PATH_MAX + 256], first[PATH_MAX + 256] = "";
    size_t made = new_folders(out_abs, before, first, sizeof first);
    int own = find_run_folder(out_abs, pid, folder, sizeof folder) == 0;
    if (own || first[0]) {
        fprintf(stderr, "termsight: run folder %s\n", own ? folder : first);
        if (o->flight)
            say_snapshots(own ? folder : first);
        if (made > 1)
            fprintf(stderr, "termsight: %zu processes recorded: their run folders are under %s\n",
                    made, out_abs);
    } else if (o->flight) {
        fprintf(stderr, "termsight: flight recorder: no snapshot was taken (no step much slower "
                        "than the ones before it, no hang, none asked for)\n");
    } else if (!(WIFEXITED(status) && WEXITSTATUS(status) == 127)) {
        fprintf(stderr, "termsight: no run folder under %s: no process recorded anything\n",
                out_abs);
    }
}

/* Runs o->cmd with the collector loaded and waits for it: its exit status (128 + a signal). */
static int run_exec(const run_opts *o)
{
    char lib[PATH_MAX], boot[PATH_MAX], out_abs[PATH_MAX];
    if (find_library(lib) != 0)
        return 1;
    int have_boot = !o->no_python && find_python_boot(boot) == 0;
    if (!o->no_python && !have_boot)
        say_no_python(o->cmd[0]);
    if (cli_output_folder("run", o->output, out_abs) != 0)
        return 1;
    int rc = ledger_open();
    if (rc)
        return rc;
    folder_set before;
    folders_of(out_abs, &before);

    struct sigaction ign = {.sa_handler = SIG_IGN}, fwd = {.sa_handler = forward}, old_int,
                     old_term;
    sigemptyset(&ign.sa_mask);
    sigemptyset(&fwd.sa_mask);
    sigaction(SIGINT, &ign, &old_int);
    sigaction(SIGTERM, &fwd, &old_term);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        cli_error("run: fork: %s", strerror(errno));
        return 1;
    }
    if (pid == 0) {
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
        child_exec(o, lib, have_boot ? boot : NULL, out_abs);
    }
    child_pid = pid;
    int status;
    pid_t got = wait_reaping(pid, &status);
    child_pid = 0;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (got < 0) {
        cli_error("run: waitpid: %s", strerror(errno));
        return 1;
    }
    rc = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
    reap_left_sessions(pid, status);
    say_run_folder(o, out_abs, &before, pid, status);
    folders_free(&before);
    ledger_close();
    return rc;
}

CLI_PARSE_EXEC(run_run, run_opts, run_parse, run_exec)

const cli_command cli_cmd_run = {
    .name = "run",
    .summary = "run a program with the profiler loaded",
    .run = run_run,
    .usage = run_usage,
};
