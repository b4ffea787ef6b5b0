/* termsight run: unmodified programs under the collector, their recordings read event by event.
 *
 * Runs $TERMSIGHT_BIN run -- PROGRAM and reads the run folder it prints. Programs: the NVTX
 * example ($NVTX_EXAMPLE), a forking NVTX program ($FORK_NVTX), mlp_train ($MLP_TRAIN) and sh.
 * In an ASan build CMake preloads the ASan runtime (termsight run keeps it first), so these run
 * there too; under other sanitizers (TERMSIGHT_SANITIZED set by CMake: TSan) they skip. */
#include "model.h"

#define TESTUTIL_TAG "run"
#include "testutil.h"
#include "shmnames.h"
#include "eventlist.h"
#include "cliutil.h"

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct run_result {
    int status;        /* termsight run's exit status */
    char folder[4096]; /* the printed run folder, "" when none */
    pid_t pid;         /* the profiled process, from the folder name */
} run_result;

/* $TERMSIGHT_BIN run -o <tmp>/out [opts...] -- cmd... ; stderr parsed for the run folder. */
static void run(const char *tmp, const char *const *argv, run_result *r)
{
    char *err_path = path_join(tmp, "stderr");
    char *out_dir = path_join(tmp, "out");
    const char *bin = getenv("TERMSIGHT_BIN");
    ck_assert_msg(bin && *bin, "TERMSIGHT_BIN is not set");
    const char *args[32] = {bin, "run", "-o", out_dir};
    size_t n = 4;
    for (size_t i = 0; argv[i]; i++)
        args[n++] = argv[i];
    args[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int null = open("/dev/null", O_WRONLY);
        if (fd < 0 || dup2(fd, 2) < 0 || dup2(null, 1) < 0)
            _exit(126);
        execv(bin, (char *const *)args);
        _exit(127);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    r->status = WEXITSTATUS(status);
    r->folder[0] = 0;
    r->pid = 0;
    FILE *f = fopen(err_path, "r");
    ck_assert_ptr_nonnull(f);
    char line[4000];
    while (fgets(line, sizeof line, f)) {
        const char *key = "termsight: run folder ";
        if (!strncmp(line, key, strlen(key))) {
            snprintf(r->folder, sizeof r->folder, "%s", line + strlen(key));
            r->folder[strcspn(r->folder, "\n")] = 0;
        } else {
            fprintf(stderr, "[program stderr] %s", line);
        }
    }
    fclose(f);
    if (r->folder[0]) {
        /* "<process>-<pid>-<YYYYmmdd-HHMMSS>-<8 hex digits>" */
        const char *end = r->folder + strlen(r->folder) - 16 - 9;
        const char *p = end;
        while (p > r->folder && p[-1] != '-')
            p--;
        r->pid = (pid_t)atoi(p);
    }
    free(err_path);
    free(out_dir);
}

static int segment_exists(pid_t pid)
{
    return shm_exists_pid(pid);
}

static int skip_sanitized(void)
{
    if (getenv("TERMSIGHT_SANITIZED")) {
        fputs("test_run: skipped under this sanitizer: its runtime cannot be preloaded into "
              "programs built without it (sh)\n",
              stderr);
        return 1;
    }
    return 0;
}

static const char *need_env(const char *name)
{
    const char *v = getenv(name);
    ck_assert_msg(v && *v, "%s is not set", name);
    return v;
}

/* run, which must succeed and print its run folder; its recording read into l. */
static void run_read(const char *tmp, const char *const *argv, run_result *r, event_list *l)
{
    run(tmp, argv, r);
    ck_assert_int_eq(r->status, 0);
    ck_assert_msg(r->folder[0], "no run folder printed");
    read_all(r->folder, l);
}

/* dir holds nothing (ls --clean must not write relative to its own folder). */
static void folder_expect_empty(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    while ((e = readdir(d)))
        ck_assert_msg(e->d_name[0] == '.', "ls --clean made %s in its own folder", e->d_name);
    closedir(d);
}

/* Lines of the file at path (0 when it cannot be read). */
static size_t lines_of(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = 0;
    int c;
    while ((c = fgetc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

/* A program that lives 15 ms, far shorter than the sampling interval (100 ms), and ends its
 * session at exit without a stop: its CPU and memory have a sample all the same, with figures. */
START_TEST(short_program_sampled)
{
    if (skip_sanitized())
        return;
    char *tmp = tmp_make();
    const char *argv[] = {"--", "sleep", "0.015", NULL};
    run_result r;
    event_list l;
    run_read(tmp, argv, &r, &l);
    ck_assert_uint_ge(count(&l, TS_KIND_CPU_PROCESS, NULL), 1);
    uint64_t rss = 0; /* the resident bytes of its memory samples */
    for (size_t i = 0; i < l.n; i++)
        if (l.ev[i].kind == TS_KIND_HOST_MEMORY && l.ev[i].v0 > rss)
            rss = l.ev[i].v0;
    ck_assert_uint_gt(rss, 0);
    list_free(&l);

    cli_result a;
    cli_run(tmp, (const char *const[]){"analyse", r.folder, NULL}, &a);
    ck_assert_msg(a.status == 0, "analyse: %s", a.err);
    cli_result_free(&a);
    char *report = path_join(r.folder, "report");
    char *cpu = path_join(report, "cpu_utilization.csv");
    char *memory = path_join(report, "memory.csv");
    ck_assert_uint_ge(lines_of(cpu), 2); /* the header and a row */
    ck_assert_uint_ge(lines_of(memory), 2);
    free(cpu);
    free(memory);
    free(report);
    tmp_remove(tmp);
}
END_TEST

/* The run folders under dir (depth 1), counted. */
static int folders_under(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* A launcher's shim, as pyenv's: a shell script that runs readlink, basename and env, then execs
 * the real program (an NVTX program). The shell and its helpers record nothing of their own: one
 * run folder, the program's, is left and printed, and no segment. And a shell loop of env and nice
 * leaves the shell's own folder only. */
START_TEST(shim_leaves_the_program_only)
{
    if (skip_sanitized())
        return;
    char *tmp = tmp_make();
    char *shim = path_join(tmp, "shim.sh");
    char text[4200];
    snprintf(text, sizeof text,
             "readlink -f /proc/self/exe >/dev/null\nbasename /a/b >/dev/null\nenv true\n"
             "exec '%s'\n",
             need_env("NVTX_EXAMPLE"));
    file_write(shim, text, strlen(text));
    const char *argv[] = {"--", "sh", shim, NULL};
    run_result r;
    event_list l;
    run_read(tmp, argv, &r, &l);
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(find(&l, TS_KIND_THREAD_NAME, "nvtx-main"), "%s is not the program's", r.folder);
    list_free(&l);
    char *out = path_join(tmp, "out");
    ck_assert_int_eq(folders_under(out), 1);
    ck_assert(!segment_exists(r.pid));
    tmp_remove(out);

    const char *loop[] = {"--", "sh", "-c",
                          "for i in 1 2 3 4 5 6 7 8 9 10; do env true; nice true; done", NULL};
    run(tmp, loop, &r);
    ck_assert_int_eq(r.status, 0);
    out = path_join(tmp, "out");
    ck_assert_int_eq(folders_under(out), 1); /* the shell's: run profiles what it started */
    ck_assert(!segment_exists(r.pid));
    free(out);
    free(shim);
    tmp_remove(tmp);
}
END_TEST

static void chdir_to(void *dir)
{
    if (chdir(dir) != 0)
        _exit(126);
}

/* A program whose output folder is relative (TERMSIGHT_OUTPUT=./rel, started in folder A) and
 * that is SIGKILLed: its segment holds the run folder as an absolute path, and `termsight ls
 * --clean` started in folder B adds what was left to A's recording and creates nothing in B. */
START_TEST(relative_output_cleaned_from_elsewhere)
{
    if (skip_sanitized())
        return;
    char *tmp = tmp_make();
    char *a_dir = path_join(tmp, "A"), *b_dir = path_join(tmp, "B");
    ck_assert_int_eq(mkdir(a_dir, 0700), 0);
    ck_assert_int_eq(mkdir(b_dir, 0700), 0);
    const char *lib = need_env("TERMSIGHT_LIB");
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* As termsight run starts its command: the root process, sampled from its start. */
        char root[16];
        snprintf(root, sizeof root, "%d", (int)getpid());
        /* After a preload already set (a sanitizer's runtime stays first), as run does. */
        const char *pre = getenv("LD_PRELOAD");
        char preload[8192];
        snprintf(preload, sizeof preload, "%s%s%s", pre && *pre ? pre : "", pre && *pre ? ":" : "",
                 lib);
        if (chdir(a_dir) != 0 || setenv("LD_PRELOAD", preload, 1) != 0 ||
            setenv("TERMSIGHT_AUTOSTART", "1", 1) != 0 ||
            setenv("TERMSIGHT_ROOT_PID", root, 1) != 0 ||
            setenv("TERMSIGHT_OUTPUT", "./rel", 1) != 0)
            _exit(126);
        execlp("sleep", "sleep", "30", (char *)NULL);
        _exit(127);
    }
    /* Its segment, collecting (bounded: 5 s). */
    segment *seg = NULL;
    char *cause = NULL;
    for (int i = 0; i < 500; i++) {
        if (segment_attach(pid, 0, &seg, &cause) == 0 &&
            atomic_load(&segment_header(seg)->state) == TS_STATE_COLLECTING)
            break;
        segment_close(seg, 0);
        seg = NULL;
        free(cause);
        cause = NULL;
        usleep(10 * 1000);
    }
    if (!seg)
        kill(pid, SIGKILL);
    ck_assert_msg(seg, "pid %d: no collecting segment: %s", (int)pid, cause ? cause : "?");
    char run_folder[1024];
    snprintf(run_folder, sizeof run_folder, "%s", segment_header(seg)->run_folder);
    segment_close(seg, 0);
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFSIGNALED(st));
    char *rel = path_join(a_dir, "rel");
    size_t rl = strlen(rel);
    ck_assert_msg(!strncmp(run_folder, rel, rl) && run_folder[rl] == '/',
                  "run folder %s is not under %s", run_folder, rel);
    ck_assert(segment_exists(pid));

    /* Only this pid's: a --clean of all would take other tests' stale sessions too. */
    cli_result r;
    char pid_text[16];
    snprintf(pid_text, sizeof pid_text, "%d", (int)pid);
    cli_run_with(tmp, (const char *const[]){"ls", "--clean", pid_text, NULL}, &r, chdir_to, b_dir);
    ck_assert_msg(!segment_exists(pid), "ls --clean left it: %s", r.err);
    cli_result_free(&r);
    folder_expect_empty(b_dir);

    event_list l;
    read_all(run_folder, &l);
    const ts_event *ended = find(&l, TS_KIND_CONFIG, "ended");
    ck_assert_msg(ended, "the recording in %s was not finished", run_folder);
    ck_assert_uint_eq(count(&l, TS_KIND_COLLECT_STOP, NULL), 1);
    list_free(&l);
    free(rel);
    free(a_dir);
    free(b_dir);
    tmp_remove(tmp);
}
END_TEST

/* A segment as older collectors made them, its run folder relative ("rel/run"): resolved against
 * the working directory of its process while that lives (here, this one), and, its process gone,
 * refused by `ls --clean` with a message, never written relative to the cleaner's folder. */
START_TEST(old_relative_segment_resolved_or_refused)
{
    char *tmp = tmp_make();
    char *b_dir = path_join(tmp, "B");
    ck_assert_int_eq(mkdir(b_dir, 0700), 0);
    segment_config cfg = {.process = "old",
                          .run_folder = "rel/run",
                          .clock = "monotonic",
                          .lane_count = 1,
                          .lane_events = 64,
                          .string_max = 16,
                          .string_arena = 4096};
    segment *mine = NULL;
    char *cause = NULL;
    ck_assert_msg(segment_create(&cfg, &mine, &cause) == 0, "%s", cause);
    char cwd[4096], want[4200], got[1024];
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    snprintf(want, sizeof want, "%s/rel/run", cwd);
    ck_assert_msg(segment_run_folder(mine, got, sizeof got, &cause) == 0, "%s", cause);
    ck_assert_str_eq(got, want);
    segment_close(mine, 1);

    pid_t dead = fork(); /* a pid whose process is gone */
    ck_assert_int_ge(dead, 0);
    if (dead == 0)
        _exit(0);
    ck_assert_int_eq(waitpid(dead, NULL, 0), dead);
    cfg.pid = dead;
    segment *old = NULL;
    ck_assert_msg(segment_create(&cfg, &old, &cause) == 0, "%s", cause);
    ck_assert_int_eq(segment_run_folder(old, got, sizeof got, &cause), -1);
    ck_assert_msg(strstr(cause, "is relative"), "%s", cause);
    free(cause);
    segment_close(old, 0);
    ck_assert(segment_exists(dead));

    cli_result r;
    char pid_text[16];
    snprintf(pid_text, sizeof pid_text, "%d", (int)dead);
    cli_run_with(tmp, (const char *const[]){"ls", "--clean", pid_text, NULL}, &r, chdir_to, b_dir);
    ck_assert_msg(strstr(r.err, "its run folder 'rel/run' is relative"), "%s", r.err);
    cli_result_free(&r);
    ck_assert(!segment_exists(dead));
    folder_expect_empty(b_dir);
    free(b_dir);
    tmp_remove(tmp);
}
END_TEST

START_TEST(nvtx_example_recorded)
{
    if (skip_sanitized())
        return;
    char *tmp = tmp_make();
    const char *argv[] = {"--", need_env("NVTX_EXAMPLE"), NULL};
    run_result r;
    run(tmp, argv, &r);
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(r.folder[0], "no run folder printed");
    ck_assert(!segment_exists(r.pid));
    event_list l;
    read_all(r.folder, &l);

    /* Thread names, and which thread is which. */
    const ts_event *main_name = find(&l, TS_KIND_THREAD_NAME, "nvtx-main");
    const ts_event *worker_name = find(&l, TS_KIND_THREAD_NAME, "nvtx-worker");
    ck_assert_ptr_nonnull(main_name);
    ck_assert_ptr_nonnull(worker_name);
    uint32_t main_tid = main_name->tid, worker_tid = worker_name->tid;
    ck_assert_uint_eq(main_tid, (uint32_t)r.pid);
    ck_assert_uint_ne(worker_tid, main_tid);

    /* Steps: five begin/end pairs, numbered 1..5, and "step" is not an operator. */
    ck_assert_uint_eq(count(&l, TS_KIND_STEP_BEGIN, NULL), 5);
    ck_assert_uint_eq(count(&l, TS_KIND_STEP_END, NULL), 5);
    ck_assert_uint_eq(count(&l, TS_KIND_OP_RANGE, "step"), 0);
    uint64_t next = 1;
    for (size_t i = 0; i < l.n; i++)
        if (l.ev[i].kind == TS_KIND_STEP_BEGIN)
            ck_assert_uint_eq(l.ev[i].v0, next++);

    /* Nesting: forward (depth 0) holds matmul and relu (depth 1); backward at depth 0. */
    const char *ops[] = {"forward", "matmul", "relu", "backward"};
    const uint32_t depth[] = {0, 1, 1, 0};
    for (size_t k = 0; k < 4; k++) {
        ck_assert_uint_eq(count(&l, TS_KIND_OP_RANGE, ops[k]), 5);
        for (size_t i = 0; i < l.n; i++) {
            const ts_event *e = &l.ev[i];
            if (e->kind != TS_KIND_OP_RANGE || strcmp(name_of(&l, e->name), ops[k]))
                continue;
            ck_assert_uint_eq(e->aux, depth[k]);
            ck_assert_uint_eq(e->tid, main_tid);
            ck_assert(!(e->flags & TS_EF_CROSS_THREAD));
            ck_assert_uint_le(e->begin_ns, e->end_ns);
        }
    }
    /* matmul lies inside a forward. */
    const ts_event *mm = find(&l, TS_KIND_OP_RANGE, "matmul");
    const ts_event *fw = find(&l, TS_KIND_OP_RANGE, "forward");
    ck_assert_uint_ge(mm->begin_ns, fw->begin_ns);
    ck_assert_uint_le(mm->end_ns, fw->end_ns);

    /* The worker's own ranges. */
    ck_assert_uint_eq(count(&l, TS_KIND_OP_RANGE, "load"), 3);
    ck_assert_uint_eq(find(&l, TS_KIND_OP_RANGE, "load")->tid, worker_tid);

    /* The range started on main and ended on the worker. */
    ck_assert_uint_eq(count(&l, TS_KIND_OP_RANGE, "handoff"), 1);
    const ts_event *h = find(&l, TS_KIND_OP_RANGE, "handoff");
    ck_assert(h->flags & TS_EF_CROSS_THREAD);
    ck_assert_uint_eq(h->tid, main_tid);
    ck_assert_uint_eq(h->v1, worker_tid);

    /* Marks, and the domain's range (registered string) and mark. */
    ck_assert_uint_eq(count(&l, TS_KIND_NVTX_MARK, "step done"), 5);
    const ts_event *io = find(&l, TS_KIND_OP_RANGE, "io");
    ck_assert_ptr_nonnull(io);
    ck_assert_str_eq(name_of(&l, io->corr), "example-domain");
    const ts_event *dm = find(&l, TS_KIND_NVTX_MARK, "domain mark");
    ck_assert_ptr_nonnull(dm);
    ck_assert_uint_eq(dm->corr, io->corr);
    list_free(&l);
    tmp_remove(tmp);
}
END_TEST

START_TEST(step_pattern_option)
{
    if (skip_sanitized())
        return;
    char *tmp = tmp_make();
    /* "matmul" as the step pattern: five steps from it, "step" an operator again. */
    const char *argv[] = {"--step-pattern", "^matmul$", "--", need_env("NVTX_EXAMPLE"), NULL};
    run_result r;
    event_list l;
    run_read(tmp, argv, &r, &l);
    ck_assert_uint_eq(count(&l, TS_KIND_STEP_BEGIN, NULL), 5);
    ck_assert_uint_eq(count(&l, TS_KIND_OP_RANGE, "step"), 5);
    ck_assert_uint_eq(count(&l, TS_KIND_OP_RANGE, "matmul"), 0);
    list_free(&l);
    tmp_remove(tmp);
}
END_TEST

START_TEST(steps_window)
{
    if (skip_sanitized())
        return;
    char *tmp = tmp_make();
    const char *argv[] = {"--steps", "2-3", "--", need_env("NVTX_EXAMPLE"), NULL};
    run_result r;
    event_list l;
    run_read(tmp, argv, &r, &l);
    ck_assert_uint_eq(count(&l, TS_KIND_STEP_BEGIN, NULL), 2);
    ck_assert_uint_eq(count(&l, TS_KIND_STEP_END, NULL), 2);
    ck_assert_uint_eq(count(&l, TS_KIND_OP_RANGE, "matmul"), 2);
    ck_assert_uint_eq(count(&l, TS_KIND_COLLECT_START, NULL), 1);
    for (size_t i = 0; i < l.n; i++)
        if (l.ev[i].kind == TS_KIND_STEP_BEGIN)
            ck_assert(l.ev[i].v0 == 2 || l.ev[i].v0 == 3);
    list_free(&l);
    tmp_remove(tmp);
}
END_TEST

START_TEST(api_program_adopts_session)
{
    if (skip_sanitized())
        return;
    char *tmp = tmp_make();
    const char *argv[] = {"--", need_env("MLP_TRAIN"), "--steps", "20", NULL};
    run_result r;
    event_list l;
    run_read(tmp, argv, &r, &l);
    ck_assert_uint_eq(count(&l, TS_KIND_STEP_BEGIN, NULL), 20);
    ck_assert_uint_gt(count(&l, TS_KIND_OP_RANGE, NULL), 20);
    ck_assert(!segment_exists(r.pid));
    list_free(&l);
    tmp_remove(tmp);
}
END_TEST

/* A rank of a job: termsight run reports its run folder in the job folder. */
START_TEST(rank_of_a_job)
{
    if (skip_sanitized())
        return;
    char *tmp = tmp_make();
    setenv("TERMSIGHT_JOB", "tj", 1);
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    const char *argv[] = {"--", need_env("MLP_TRAIN"), "--steps", "5", NULL};
    run_result r;
    run(tmp, argv, &r);
    unsetenv("TERMSIGHT_JOB");
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    ck_assert_int_eq(r.status, 0);
    char want[4096];
    snprintf(want, sizeof want, "%s/out/tj/rank1-", tmp);
    ck_assert_msg(!strncmp(r.folder, want, strlen(want)), "run folder %s", r.folder);
    event_list l;
    read_all(r.folder, &l);
    ck_assert_uint_eq(count(&l, TS_KIND_STEP_BEGIN, NULL), 5);
    ck_assert(!segment_exists(r.pid));
    list_free(&l);
    tmp_remove(tmp);
}
END_TEST

START_TEST(exit_status_passthrough)
{
    if (skip_sanitized())
        return;
    char *tmp = tmp_make();
    const char *argv[] = {"--", "sh", "-c", "exit 7", NULL};
    run_result r;
    run(tmp, argv, &r);
    ck_assert_int_eq(r.status, 7);
    ck_assert_msg(r.folder[0], "no run folder printed");
    /* dash ends through _exit, past our atexit flush: run removes the segment it left. */
    ck_assert(!segment_exists(r.pid));
    const char *missing[] = {"--", "/nonexistent/program", NULL};
    run(tmp, missing, &r);
    ck_assert_int_eq(r.status, 127);
    tmp_remove(tmp);
}
END_TEST

/* The program's SIGTERM and SIGINT keep their default disposition (fork_nvtx exits 3 when not),
 * so SIGTERM ends it at once; run then adds to the recording what the lanes still held, from the
 * segment left behind, with a stop marker and a note of how the process ended. */
START_TEST(sigterm_recovered)
{
    if (skip_sanitized())
        return;
    char *tmp = tmp_make();
    const char *argv[] = {"--", need_env("FORK_NVTX"), "term", NULL};
    run_result r;
    run(tmp, argv, &r);
    ck_assert_int_eq(r.status, 128 + SIGTERM);
    ck_assert_msg(r.folder[0], "no run folder printed");
    ck_assert(!segment_exists(r.pid));
    event_list l;
    read_all(r.folder, &l);
    ck_assert_uint_eq(count(&l, TS_KIND_COLLECT_START, NULL), 1);
    ck_assert_uint_eq(count(&l, TS_KIND_COLLECT_STOP, NULL), 1);
    ck_assert_uint_eq(count(&l, TS_KIND_OP_RANGE, "before term"), 1);
    const ts_event *ended = find(&l, TS_KIND_CONFIG, "ended");
    ck_assert_ptr_nonnull(ended);
    ck_assert_str_eq(name_of(&l, ended->type), "killed by signal 15 (Terminated)");
    list_free(&l);
    tmp_remove(tmp);
}
END_TEST

/* A forked child's ranges are not the parent's: it records them in a session of its own, in a
 * run folder beside the parent's. */
START_TEST(fork_child_recorded_apart)
{
    if (skip_sanitized())
        return;
    char *tmp = tmp_make();
    const char *argv[] = {"--", need_env("FORK_NVTX"), NULL};
    run_result r;
    event_list l;
    run_read(tmp, argv, &r, &l);
    ck_assert_uint_eq(count(&l, TS_KIND_OP_RANGE, "parent"), 1);
    ck_assert_uint_eq(count(&l, TS_KIND_OP_RANGE, "child"), 0);
    ck_assert_uint_eq(count(&l, TS_KIND_NVTX_MARK, "child mark"), 0);
    list_free(&l);
    /* The other run folder under out/ is the child's. */
    char *out = path_join(tmp, "out");
    DIR *d = opendir(out);
    ck_assert_ptr_nonnull(d);
    char child[4200] = "";
    int folders = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        folders++;
        char *p = path_join(out, e->d_name);
        if (strcmp(p, r.folder))
            snprintf(child, sizeof child, "%s", p);
        free(p);
    }
    closedir(d);
    ck_assert_int_eq(folders, 2);
    read_all(child, &l);
    ck_assert_uint_eq(count(&l, TS_KIND_OP_RANGE, "child"), 1);
    ck_assert_uint_eq(count(&l, TS_KIND_NVTX_MARK, "child mark"), 1);
    ck_assert_uint_eq(count(&l, TS_KIND_OP_RANGE, "parent"), 0);
    list_free(&l);
    free(out);
    tmp_remove(tmp);
}
END_TEST

/* Two forked children (no exec: no session of their own) burn 300 ms each: the parent's sampler
 * follows them, and `termsight analyse` lists both in cpu_processes.csv with their CPU time and
 * RSS. They exit as soon as they are done, so up to one interval of their time may be missed. */
START_TEST(children_sampled)
{
    if (skip_sanitized())
        return;
    char *tmp = tmp_make();
    char *pids_file = path_join(tmp, "pids");
    const char *argv[] = {"--sample-ms", "10",      "--", need_env("FORK_NVTX"),
                          "burn",        pids_file, NULL};
    run_result r;
    run(tmp, argv, &r);
    ck_assert_int_eq(r.status, 0);
    int pid[2] = {0, 0};
    FILE *f = fopen(pids_file, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fscanf(f, "%d %d", &pid[0], &pid[1]), 2);
    fclose(f);

    const char *bin = getenv("TERMSIGHT_BIN");
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "'%s' analyse '%s' >/dev/null", bin, r.folder);
    ck_assert_int_eq(system(cmd), 0);
    char *report = path_join(r.folder, "report");
    char *csv = path_join(report, "cpu_processes.csv");
    f = fopen(csv, "r");
    ck_assert_ptr_nonnull(f);
    char line[1024];
    int rows = 0, found[2] = {0, 0};
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f)); /* the header */
    while (fgets(line, sizeof line, f)) {
        rows++;
        int p = 0, ppid = 0;
        double cpu_us = 0;
        unsigned long long peak_rss = 0;
        /* pid,ppid,process,samples,avg_user_pct,avg_system_pct,avg_cpu_pct,peak_cpu_pct,cpu_us,
         * last_rss_bytes,peak_rss_bytes,... (the process name holds no comma here) */
        ck_assert_int_eq(sscanf(line, "%d,%d,%*[^,],%*d,%*f,%*f,%*f,%*f,%lf,%*u,%llu", &p, &ppid,
                                &cpu_us, &peak_rss),
                         4);
        for (int i = 0; i < 2; i++) {
            if (p != pid[i])
                continue;
            found[i] = 1;
            ck_assert_int_eq(ppid, r.pid);
            ck_assert_msg(cpu_us >= 150000 && cpu_us <= 450000, "%s", line);
            ck_assert_msg(peak_rss >= 32ull << 20, "%s", line);
        }
    }
    fclose(f);
    ck_assert_int_eq(rows, 2);
    ck_assert(found[0] && found[1]);
    free(csv);
    free(report);
    free(pids_file);
    tmp_remove(tmp);
}
END_TEST

START_TEST(bad_arguments)
{
    char *tmp = tmp_make();
    run_result r;
    const char *none[] = {NULL};
    run(tmp, none, &r);
    ck_assert_int_eq(r.status, 2);
    const char *re[] = {"--step-pattern", "(", "--", "true", NULL};
    run(tmp, re, &r);
    ck_assert_int_eq(r.status, 2);
    const char *steps[] = {"--steps", "3-1", "--", "true", NULL};
    run(tmp, steps, &r);
    ck_assert_int_eq(r.status, 2);
    tmp_remove(tmp);
}
END_TEST

/* The collector clock's time of the event of kind (the first one), 0 when none. */
static uint64_t time_of(const event_list *l, uint16_t kind)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->ev[i].kind == kind)
            return l->ev[i].begin_ns;
    return 0;
}

START_TEST(delay_and_duration)
{
    if (skip_sanitized())
        return;
    char *tmp = tmp_make();
    /* sh lives 3 s (the sleep is not its last command, so sh does not exec it). */
    const char *argv[] = {"--delay", "1",  "--duration",    "1", "--",
                          "sh",      "-c", "sleep 3; true", NULL};
    run_result r;
    event_list l;
    run_read(tmp, argv, &r, &l);
    ck_assert_uint_eq(count(&l, TS_KIND_COLLECT_START, NULL), 1);
    ck_assert_uint_eq(count(&l, TS_KIND_COLLECT_STOP, NULL), 1);
    /* The session starts with the process (the library's constructor): the window opens a
     * second later and closes a second after that, well before the process ends. Generous
     * bounds: a loaded machine or a sanitizer may be late by a few hundred ms. */
    uint64_t created = recording_reader_meta(l.reader)->start_ns;
    uint64_t start = time_of(&l, TS_KIND_COLLECT_START);
    uint64_t stop = time_of(&l, TS_KIND_COLLECT_STOP);
    ck_assert_uint_ge(start, created + 1000000000ull);
    ck_assert_uint_le(start, created + 2000000000ull);
    ck_assert_uint_ge(stop - start, 900000000ull);
    ck_assert_uint_le(stop - start, 1800000000ull);
    /* Samples (100 ms) only inside the window. */
    size_t samples = 0;
    for (size_t i = 0; i < l.n; i++) {
        if (l.ev[i].kind != TS_KIND_CPU_MACHINE)
            continue;
        samples++;
        ck_assert_uint_ge(l.ev[i].begin_ns, start);
        ck_assert_uint_le(l.ev[i].end_ns, stop);
    }
    ck_assert_uint_ge(samples, 3);
    list_free(&l);
    tmp_remove(tmp);
}
END_TEST

START_TEST(no_start_collects_nothing)
{
    if (skip_sanitized())
        return;
    char *tmp = tmp_make();
    const char *argv[] = {"--no-start", "--", "sh", "-c", "sleep 1; true", NULL};
    run_result r;
    run(tmp, argv, &r);
    ck_assert_int_eq(r.status, 0);
    /* No window, no recording: run says so instead of printing a folder. */
    ck_assert_str_eq(r.folder, "");
    ck_assert(!segment_exists(r.pid));
    tmp_remove(tmp);
}
END_TEST

/* termsight run --no-start under a program that writes its pid to a file and lives 3 s; a start
 * command sent through its mailbox after 0.5 s opens the only window. */
START_TEST(no_start_then_start_command)
{
    if (skip_sanitized())
        return;
    char *tmp = tmp_make();
    char *pid_file = path_join(tmp, "pid");
    char *out_dir = path_join(tmp, "out");
    char *err_path = path_join(tmp, "stderr");
    const char *bin = need_env("TERMSIGHT_BIN");
    const char *args[] = {bin,      "run",        "-o",
                          out_dir,  "--no-start", "--",
                          "sh",     "-c",         "echo $$ > \"$0\"; sleep 3; true",
                          pid_file, NULL};
    fflush(NULL);
    pid_t run_pid = fork();
    ck_assert_int_ge(run_pid, 0);
    if (run_pid == 0) {
        int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || dup2(fd, 2) < 0)
            _exit(126);
        execv(bin, (char *const *)args);
        _exit(127);
    }
    /* The profiled process's pid, then its segment. */
    pid_t pid = 0;
    segment *seg = NULL;
    char *cause = NULL;
    for (int i = 0; i < 200 && !seg; i++) {
        usleep(10 * 1000);
        if (!pid) {
            FILE *f = fopen(pid_file, "r");
            int v = 0;
            if (f && fscanf(f, "%d", &v) == 1)
                pid = (pid_t)v;
            if (f)
                fclose(f);
        }
        if (pid && segment_attach(pid, 1, &seg, &cause) != 0) {
            free(cause);
            cause = NULL;
            seg = NULL;
        }
    }
    ck_assert_msg(seg, "no segment for pid %d", (int)pid);
    usleep(500 * 1000); /* not collecting meanwhile */
    uint64_t seq;
    ck_assert_msg(mailbox_send(seg, TS_CMD_START, NULL, &seq, &cause) == 0, "send: %s", cause);
    int32_t status = 1;
    char msg[TS_MAILBOX_MSG];
    int answered = 0;
    for (int i = 0; i < 300 && !answered; i++) {
        answered = mailbox_reply(seg, seq, &status, msg, sizeof msg);
        if (!answered)
            usleep(10 * 1000);
    }
    ck_assert_msg(answered, "the start command was not answered");
    ck_assert_msg(status == 0, "start: %d %s", status, msg);
    segment_close(seg, 0);

    int st;
    ck_assert_int_eq(waitpid(run_pid, &st, 0), run_pid);
    ck_assert(WIFEXITED(st));
    ck_assert_int_eq(WEXITSTATUS(st), 0);
    ck_assert(!segment_exists(pid));

    /* The run folder of pid, from the stderr of run. */
    char folder[4096] = "";
    FILE *f = fopen(err_path, "r");
    ck_assert_ptr_nonnull(f);
    char line[4000];
    const char *key = "termsight: run folder ";
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, strlen(key)))
            snprintf(folder, sizeof folder, "%s", line + strlen(key));
    fclose(f);
    folder[strcspn(folder, "\n")] = 0;
    ck_assert_msg(folder[0], "no run folder printed");

    event_list l;
    read_all(folder, &l);
    ck_assert_int_eq(recording_reader_meta(l.reader)->pid, pid);
    /* One window, from the command on; no stop marker: dash ends through _exit, past the
     * atexit flush (what the recorder wrote before stays). */
    ck_assert_uint_eq(count(&l, TS_KIND_COLLECT_START, NULL), 1);
    uint64_t created = recording_reader_meta(l.reader)->start_ns;
    uint64_t start = time_of(&l, TS_KIND_COLLECT_START);
    ck_assert_uint_ge(start, created + 500000000ull); /* not before the command */
    /* Events arrive after the command: the sampler's, with the process still running. */
    ck_assert_uint_ge(count(&l, TS_KIND_CPU_MACHINE, NULL), 3);
    for (size_t i = 0; i < l.n; i++)
        ck_assert_uint_ge(l.ev[i].begin_ns, start);
    list_free(&l);
    free(pid_file);
    free(out_dir);
    free(err_path);
    tmp_remove(tmp);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("run");
    TCase *tc = tcase_create("run");
    tcase_add_test(tc, nvtx_example_recorded);
    tcase_add_test(tc, step_pattern_option);
    tcase_add_test(tc, steps_window);
    tcase_add_test(tc, api_program_adopts_session);
    tcase_add_test(tc, rank_of_a_job);
    tcase_add_test(tc, exit_status_passthrough);
    tcase_add_test(tc, sigterm_recovered);
    tcase_add_test(tc, fork_child_recorded_apart);
    tcase_add_test(tc, children_sampled);
    tcase_add_test(tc, bad_arguments);
    tcase_add_test(tc, delay_and_duration);
    tcase_add_test(tc, no_start_collects_nothing);
    tcase_add_test(tc, no_start_then_start_command);
    tcase_add_test(tc, short_program_sampled);
    tcase_add_test(tc, shim_leaves_the_program_only);
    tcase_add_test(tc, relative_output_cleaned_from_elsewhere);
    tcase_add_test(tc, old_relative_segment_resolved_or_refused);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
