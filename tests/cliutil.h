/* cliutil: runs the termsight command ($TERMSIGHT_BIN) as a real program, its output captured.
 *
 * Include testutil.h first (path_join). */
#ifndef TERMSIGHT_CLIUTIL_H
#define TERMSIGHT_CLIUTIL_H

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
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
} cli_result;

static inline void cli_result_free(cli_result *r)
{
    free(r->out);
    free(r->err);
}

/* Runs "$TERMSIGHT_BIN args..." (args NULL-terminated) with stdout and stderr captured in files
 * under tmp. before_exec, when not NULL, runs in the child first (which keeps its pid through
 * the exec). A death by a signal fails the test, naming the command. */
static inline void cli_run_with(const char *tmp, const char *const *args, cli_result *res,
                                void (*before_exec)(void *), void *ctx)
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

    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (dup2(out, 1) < 0 || dup2(err, 2) < 0)
            _exit(126);
        if (before_exec)
            before_exec(ctx);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st), "termsight %s %s did not exit normally (signal %d)",
                  n ? args[0] : "", n > 1 ? args[1] : "", WIFSIGNALED(st) ? WTERMSIG(st) : 0);
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

static inline void cli_run(const char *tmp, const char *const *args, cli_result *res)
{
    cli_run_with(tmp, args, res, NULL, NULL);
}

static inline void err_expect(const cli_result *res, const char *part)
{
    ck_assert_msg(strstr(res->err, part), "stderr lacks '%s':\n%s", part, res->err);
}

#endif
