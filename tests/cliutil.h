/* cliutil: runs the termsight command ($TERMSIGHT_BIN) as a real program, its output captured.
 *
 * Include testutil.h first (path_join). */
#ifndef TERMSIGHT_CLIUTIL_H
#define TERMSIGHT_CLIUTIL_H

#include <check.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The whole of fd from its start, NUL-terminated; *len without the NUL. */
static inline char *file_slurp(int fd, size_t *len)
{
    ck_assert_int_eq(lseek(fd, 0, SEEK_SET), 0);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    ck_assert_ptr_nonnull(buf);
    for (;;) {
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
            ck_assert_ptr_nonnull(buf);
        }
        ssize_t got = read(fd, buf + n, cap - n);
        ck_assert_int_ge(got, 0);
        if (!got)
            break;
        n += (size_t)got;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* What one run of the command did. */
typedef struct cli_result {
    int status; /* exit status */
    char *out, *err;
    size_t out_len, err_len;
    struct rusage usage; /* its resource usage: ru_maxrss its peak resident memory, KiB */
    uint64_t read_chars; /* bytes it read (rchar of /proc/<pid>/io), UINT64_MAX unknown */
} cli_result;

static inline void cli_result_free(cli_result *r)
{
    free(r->out);
    free(r->err);
}

/* rchar of /proc/<pid>/io: the bytes process pid read, UINT64_MAX when it cannot be read. */
static inline uint64_t cli_read_chars(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/io", (int)pid);
    FILE *f = fopen(path, "r");
    unsigned long long v = 0;
    int ok = f && fscanf(f, "rchar: %llu", &v) == 1;
    if (f)
        fclose(f);
    return ok ? (uint64_t)v : UINT64_MAX;
}

/* Waits for child pid to end, for at most timeout_s seconds (0: no limit): past it the child is
 * killed and the test fails, saying that `what` did not end. Its status, resource usage and bytes
 * read (read while it is a zombie, before it is reaped) go to res. SIGCHLD must be blocked. */
static inline int cli_wait_bounded(pid_t pid, double timeout_s, const char *what, cli_result *res)
{
    struct timespec end;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += (time_t)timeout_s;
    end.tv_nsec += (long)((timeout_s - (double)(time_t)timeout_s) * 1e9);
    if (end.tv_nsec >= 1000000000L)
        end.tv_sec++, end.tv_nsec -= 1000000000L;
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    siginfo_t si;
    for (;;) {
        memset(&si, 0, sizeof si);
        ck_assert_int_eq(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT), 0);
        if (si.si_pid == pid)
            break;
        struct timespec now, left;
        clock_gettime(CLOCK_MONOTONIC, &now);
        left.tv_sec = end.tv_sec - now.tv_sec;
        left.tv_nsec = end.tv_nsec - now.tv_nsec;
        if (left.tv_nsec < 0)
            left.tv_sec--, left.tv_nsec += 1000000000L;
        if (timeout_s > 0 && left.tv_sec < 0) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            ck_abort_msg("%s did not end within %.0f s: killed", what, timeout_s);
        }
        /* Woken by the child's end (SIGCHLD stays pending while blocked) or the deadline. */
        sigtimedwait(&chld, NULL, timeout_s > 0 ? &left : NULL);
    }
    res->read_chars = cli_read_chars(pid);
    int st;
    ck_assert_int_eq(wait4(pid, &st, 0, &res->usage), pid);
    return st;
}

/* Runs "$TERMSIGHT_BIN args..." (args NULL-terminated) with stdout and stderr captured in files
 * under tmp. before_exec, when not NULL, runs in the child first (which keeps its pid through
 * the exec). timeout_s > 0: a command still running after that many seconds is killed and fails
 * the test. A death by a signal fails the test, naming the command. */
static inline void cli_run_bounded(const char *tmp, const char *const *args, cli_result *res,
                                   void (*before_exec)(void *), void *ctx, double timeout_s)
{
    const char *bin = getenv("TERMSIGHT_BIN");
    ck_assert_msg(bin && *bin, "TERMSIGHT_BIN is not set");
    char *out_path = path_join(tmp, "stdout-XXXXXX");
    char *err_path = path_join(tmp, "stderr-XXXXXX");
    int out = mkstemp(out_path), err = mkstemp(err_path);
    ck_assert_int_ge(out, 0);
    ck_assert_int_ge(err, 0);
    size_t n = 0;
    while (args[n])
        n++;
    const char **argv = calloc(n + 2, sizeof(*argv));
    ck_assert_ptr_nonnull(argv);
    argv[0] = bin;
    memcpy(argv + 1, args, n * sizeof(*argv));

    sigset_t chld, old;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    ck_assert_int_eq(sigprocmask(SIG_BLOCK, &chld, &old), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        if (dup2(out, 1) < 0 || dup2(err, 2) < 0)
            _exit(126);
        if (before_exec)
            before_exec(ctx);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    char what[256];
    snprintf(what, sizeof what, "termsight %.100s %.100s", n ? args[0] : "", n > 1 ? args[1] : "");
    int st = cli_wait_bounded(pid, timeout_s, what, res);
    sigprocmask(SIG_SETMASK, &old, NULL);
    ck_assert_msg(WIFEXITED(st), "%s did not exit normally (signal %d)", what,
                  WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    ck_assert_msg(WEXITSTATUS(st) != 127, "cannot run %s", bin);
    res->status = WEXITSTATUS(st);
    res->out = file_slurp(out, &res->out_len);
    res->err = file_slurp(err, &res->err_len);
    close(out);
    close(err);
    unlink(out_path);
    unlink(err_path);
    free(out_path);
    free(err_path);
    free(argv);
}

static inline void cli_run_with(const char *tmp, const char *const *args, cli_result *res,
                                void (*before_exec)(void *), void *ctx)
{
    cli_run_bounded(tmp, args, res, before_exec, ctx, 0);
}

static inline void cli_run(const char *tmp, const char *const *args, cli_result *res)
{
    cli_run_with(tmp, args, res, NULL, NULL);
}

static inline void err_expect(const cli_result *res, const char *part)
{
    ck_assert_msg(strstr(res->err, part), "stderr lacks '%s':\n%s", part, res->err);
}

/* Compares output with expected lines, one by one, for a readable failure. */
static inline void lines_expect(const cli_result *res, const char *const *want, size_t n)
{
    const char *p = res->out;
    for (size_t i = 0; i < n; i++) {
        const char *nl = strchr(p, '\n');
        ck_assert_msg(nl != NULL, "line %zu missing; want: %s", i, want[i]);
        ck_assert_msg((size_t)(nl - p) == strlen(want[i]) && !memcmp(p, want[i], strlen(want[i])),
                      "line %zu:\n got: %.*s\nwant: %s", i, (int)(nl - p), p, want[i]);
        p = nl + 1;
    }
    ck_assert_msg(*p == '\0', "extra output: %s", p);
    ck_assert_uint_eq(strlen(res->out), res->out_len); /* no stray NUL byte */
}

#endif
