/* A program that closes every descriptor it did not open (daemons, some launchers and shells do)
 * and then opens its own files under the same numbers, run under `termsight run`: the collector
 * must never act on a descriptor it no longer owns. Reproduced before: the recorder's chunks went
 * into the program's files, the sampler rewound them, and SIGTERM's byte went into a user file
 * while the program ran on.
 *
 * The collector's threads keep their descriptors in a table of their own (unshare(CLONE_FILES)),
 * so recording goes on untouched; where a seccomp filter refuses that (container runtimes' default
 * filters do), the recorder notices before its next write that its descriptor is no longer its
 * file and stops recording with one message. */
#define TESTUTIL_TAG "hfds"
#include "testutil.h"

#include "cliutil.h"
#include "eventlist.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

static const char *closefds(void)
{
    const char *bin = getenv("CLOSEFDS");
    ck_assert_msg(bin && *bin, "CLOSEFDS is not set");
    return bin;
}

/* before_exec: unshare(2) fails with EPERM in termsight run and everything it starts. */
static void deny_unshare(void *ctx)
{
    (void)ctx;
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_unshare, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof filter / sizeof filter[0], .filter = filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
        _exit(125);
}

/* The run folder `termsight run` printed. */
static void run_folder(const cli_result *r, char *out, size_t cap)
{
    const char *key = "termsight: run folder ";
    const char *p = strstr(r->err, key);
    ck_assert_msg(p, "no run folder in:\n%s", r->err);
    p += strlen(key);
    snprintf(out, cap, "%.*s", (int)strcspn(p, "\n"), p);
}

static size_t occurrences(const char *text, const char *what)
{
    size_t n = 0;
    for (const char *p = text; (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}

/* The program's files stay its own, and recording goes on after the close. */
START_TEST(closed_descriptors_private_table)
{
    char *tmp = tmp_make();
    char *files = path_join(tmp, "files"), *out = path_join(tmp, "out");
    ck_assert_int_eq(mkdir(files, 0700), 0);
    const char *args[] = {"run",      "-o",    out,   "--sample-ms", "5", "--",
                          closefds(), "write", files, "1",           NULL};
    cli_result r;
    cli_run(tmp, args, &r);
    ck_assert_msg(r.status == 0, "closefds write: status %d\n%s", r.status, r.err);
    ck_assert_ptr_null(strstr(r.err, "recording stopped"));
    char folder[4096];
    run_folder(&r, folder, sizeof folder);
    event_list l;
    read_all(folder, &l);
    /* A second at 5 ms: the sampler's samples went on after the program closed everything. */
    ck_assert_uint_gt(count(&l, TS_KIND_HOST_MEMORY, NULL), 50);
    ck_assert_uint_eq(count(&l, TS_KIND_COLLECT_STOP, NULL), 1);
    list_free(&l);
    cli_result_free(&r);
    free(files);
    free(out);
    tmp_remove(tmp);
}
END_TEST

/* Without a table of its own, the recorder stops at its next write, says so once, and the
 * program's files stay its own. */
START_TEST(closed_descriptors_shared_table)
{
    char *tmp = tmp_make();
    char *files = path_join(tmp, "files"), *out = path_join(tmp, "out");
    ck_assert_int_eq(mkdir(files, 0700), 0);
    const char *args[] = {"run", "-o", out, "--", closefds(), "write", files, "1", NULL};
    cli_result r;
    cli_run_with(tmp, args, &r, deny_unshare, NULL);
    ck_assert_msg(r.status == 0, "closefds write: status %d\n%s", r.status, r.err);
    ck_assert_msg(occurrences(r.err, "termsight: recording stopped: ") == 1, "stderr:\n%s", r.err);
    ck_assert_msg(strstr(r.err, "closed or reused by the program"), "stderr:\n%s", r.err);
    char folder[4096];
    run_folder(&r, folder, sizeof folder);
    event_list l;
    read_all(folder, &l); /* what was written before the close reads back */
    ck_assert_uint_eq(count(&l, TS_KIND_COLLECT_START, NULL), 1);
    list_free(&l);
    cli_result_free(&r);
    free(files);
    free(out);
    tmp_remove(tmp);
}
END_TEST

/* SIGTERM ends the program as it would without termsight. */
START_TEST(closed_descriptors_then_sigterm)
{
    char *tmp = tmp_make();
    char *files = path_join(tmp, "files"), *out = path_join(tmp, "out");
    ck_assert_int_eq(mkdir(files, 0700), 0);
    const char *args[] = {"run", "-o", out, "--", closefds(), "term", files, NULL};
    cli_result r;
    cli_run(tmp, args, &r);
    ck_assert_msg(r.status == 128 + SIGTERM, "closefds term: status %d\n%s", r.status, r.err);
    cli_result_free(&r);
    free(files);
    free(out);
    tmp_remove(tmp);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hostile_fds");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, closed_descriptors_private_table);
    tcase_add_test(tc, closed_descriptors_shared_table);
    tcase_add_test(tc, closed_descriptors_then_sigterm);
    suite_add_tcase(s, tc);
    return tests_run(s);
}
