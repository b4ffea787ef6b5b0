/* The resource limits a program may run under (docs/reliability.md): a file-size limit
 * (RLIMIT_FSIZE, `ulimit -f`), an address-space limit (RLIMIT_AS, `ulimit -v`). A program that
 * runs under one without termsight runs under it with termsight: the segment and the flight ring
 * are sized to what the limits leave, and the recording stops short of the file-size limit with a
 * reason, never with SIGXFSZ or an allocation failure for the program. Each limit is set in a
 * child before it execs (or creates its session). */
#define TESTUTIL_TAG "rlimits"
#include "testutil.h"
#include "cliutil.h"

#include "collectors.h"
#include "eventlist.h"
#include "faults.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define ALLOC_MB 300 /* what the program allocates under the address-space limit */

typedef struct limit_set {
    int resource;
    rlim_t bytes;
    const char *budget_mb; /* TERMSIGHT_SHM_BUDGET_MB, or NULL */
} limit_set;

/* In the child, before it execs: the limit (soft and hard), and the budget. */
static void limit_apply(void *ctx)
{
    const limit_set *l = ctx;
    struct rlimit r = {.rlim_cur = l->bytes, .rlim_max = l->bytes};
    if (setrlimit(l->resource, &r) != 0)
        _exit(125);
    if (l->budget_mb)
        setenv("TERMSIGHT_SHM_BUDGET_MB", l->budget_mb, 1);
}

static char *self_path(void)
{
    static char path[4096];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    ck_assert_int_gt(n, 0);
    path[n] = 0;
    return path;
}

/* `termsight run [--flight] -- this program alloc` or `-- /bin/echo hi` under l: exit 0. */
static void run_under(const limit_set *l, int flight, int alloc)
{
    char *tmp = tmp_make();
    char *out = path_join(tmp, "out");
    const char *args[8];
    int n = 0;
    args[n++] = "run";
    args[n++] = "-o";
    args[n++] = out;
    if (flight)
        args[n++] = "--flight";
    args[n++] = "--";
    args[n++] = alloc ? self_path() : "/bin/echo";
    args[n++] = alloc ? "alloc" : "hi";
    args[n] = NULL;
    cli_result r;
    cli_run_bounded(tmp, args, &r, limit_apply, (void *)l, 60);
    ck_assert_msg(r.status == 0, "exit %d under the limit:\n%s", r.status, r.err);
    ck_assert_msg(!strstr(r.err, "profiling is off"), "ran unprofiled:\n%s", r.err);
    cli_result_free(&r);
    free(out);
    tmp_remove(tmp);
}

/* A batch system's file-size limit of about 550 MB, a 16 MiB budget (a 64 MB /dev/shm): before,
 * the segment was sized (sparse) to 533 MiB whatever the budget, and `termsight run -- echo`
 * died of SIGXFSZ at start (exit 153). */
START_TEST(fsize_run)
{
    limit_set l = {RLIMIT_FSIZE, 540000ull << 10, "16"};
    run_under(&l, 0, 0);
    l.budget_mb = NULL; /* the budget of a roomy /dev/shm: the segment made smaller */
    run_under(&l, 0, 0);
}
END_TEST

/* 1 GB of address space: a program that allocates 300 MiB runs under termsight as without it
 * (before: the segment's mapping took 533 MiB of it, and the allocation failed), with the
 * flight recorder's ring too. */
START_TEST(as_run)
{
#if FAULTS_SLOW
    /* A sanitizer's shadow memory is terabytes of address space: no program of a sanitized build
     * starts under 1 GB (the normal build runs this case). */
    fprintf(stderr, "rlimits: as_run skipped under a sanitizer\n");
#else
    limit_set l = {RLIMIT_AS, 1000000ull << 10, NULL};
    run_under(&l, 0, 1);
    run_under(&l, 1, 1);
    l.budget_mb = "16";
    run_under(&l, 0, 1);
#endif
}
END_TEST

/* A session in a child under a 4 MiB file-size limit records more than fits: the recording
 * stops short of the limit, says why once, and the child ends normally; a grandchild it forks
 * after lowering the limit below any segment runs on unprofiled. */
START_TEST(fsize_recording)
{
    char *tmp = tmp_make();
    char *err_path = path_join(tmp, "stderr");
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        limit_set l = {RLIMIT_FSIZE, 4u << 20, NULL};
        if (fd < 0 || dup2(fd, 2) < 0)
            _exit(120);
        limit_apply(&l);
        termsight_options o;
        termsight_options_init(&o);
        o.output_path = tmp;
        o.sample_interval_ms = 3600000;
        termsight_session *s = NULL;
        if (termsight_session_create(&o, &s) != 0)
            _exit(121);
        /* 6 MiB of events, 48 at a time (the lanes here are 64 events and may not grow) with a
         * flush after each, so that they reach the recording whatever the machine's load rather
         * than drop in a full lane. */
        for (int i = 0; i < 100000; i++) {
            termsight_range_begin("op", "Op");
            termsight_range_end();
            if (i % 48 == 47)
                termsight_flush(s);
        }
        termsight_flush(s);
        struct rlimit r = {.rlim_cur = 64u << 10, .rlim_max = 64u << 10};
        setrlimit(RLIMIT_FSIZE, &r);
        pid_t child = fork();
        if (child == 0) {
            termsight_range_begin("child", "Op");
            termsight_range_end();
            _exit(0);
        }
        int cst;
        if (child < 0 || waitpid(child, &cst, 0) != child || !WIFEXITED(cst) || WEXITSTATUS(cst))
            _exit(122);
        termsight_session_destroy(s);
        _exit(0);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    int fd = open(err_path, O_RDONLY);
    size_t len;
    char *err = file_slurp(fd, &len);
    close(fd);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x (signal %d):\n%s", st,
                  WIFSIGNALED(st) ? WTERMSIG(st) : 0, err);
    ck_assert_msg(strstr(err, "recording stopped") && strstr(err, "file-size limit"),
                  "the reason is not said:\n%s", err);
    free(err);
    free(err_path);
    tmp_remove(tmp);
}
END_TEST

/* A memory cgroup's room, from fixtures of /proc/self/cgroup and /sys/fs/cgroup (v2 with an
 * ancestor that limits more, v1): the least of limit less use on the way up. The budget of a new
 * tree is a TS_RLIMITS_SHARE-th of it. */
START_TEST(cgroup_room)
{
    char *tmp = tmp_make();
    static const struct {
        const char *proc, *files[4][2];
        uint64_t free;
    } cases[] = {
        {"0::/a/b\n",
         {{"a/b/memory.max", "8388608\n"},
          {"a/b/memory.current", "1048576\n"},
          {"a/memory.max", "4194304\n"},
          {"a/memory.current", "3145728\n"}},
         1048576},
        {"0::/a\n", {{"a/memory.max", "max\n"}, {"a/memory.current", "5\n"}}, UINT64_MAX},
        {"5:cpu:/\n4:memory:/x\n",
         {{"memory/x/memory.limit_in_bytes", "2097152\n"},
          {"memory/x/memory.usage_in_bytes", "1048576\n"},
          {"memory/memory.limit_in_bytes", "9223372036854771712\n"}},
         1048576},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char root[512], path[1024], cmd[1200];
        snprintf(root, sizeof root, "%s/c%zu", tmp, i);
        for (int k = 0; k < 4 && cases[i].files[k][0]; k++) {
            snprintf(path, sizeof path, "%s/%s", root, cases[i].files[k][0]);
            snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", path);
            ck_assert_int_eq(system(cmd), 0);
            file_write(path, cases[i].files[k][1], strlen(cases[i].files[k][1]));
        }
        snprintf(path, sizeof path, "%s/cgroup", root);
        file_write(path, cases[i].proc, strlen(cases[i].proc));
        ts_rlimits l;
        rlimits_read_at(&l, path, root);
        ck_assert_msg(l.mem_free == cases[i].free, "case %zu: %llu", i,
                      (unsigned long long)l.mem_free);
        ck_assert_uint_eq(rlimits_shm_max(&l), cases[i].free == UINT64_MAX
                                                   ? UINT64_MAX
                                                   : cases[i].free / TS_RLIMITS_SHARE);
    }
    tmp_remove(tmp);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "alloc")) { /* the program run under the limits */
        char *p = malloc((size_t)ALLOC_MB << 20);
        if (!p)
            return 3;
        memset(p, 1, (size_t)ALLOC_MB << 20);
        free(p);
        return 0;
    }
    const TTest *const tests[] = {fsize_run, as_run, fsize_recording, cgroup_room, NULL};
    return faults_main("rlimits", 120, tests);
}
