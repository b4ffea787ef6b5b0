/* The end of a program while its threads still record (exit_handler, collectors/session.c): eight
 * threads call termsight_range_begin and termsight_counter with names (each a name-table lookup)
 * while main returns without joining them, as most programs end; the exit handler ends the session
 * meanwhile. Every other run, main ends the session itself first (termsight_session_destroy) while
 * they go on. Both once freed the name table under a thread in strtab_intern: SIGSEGV in 1 run of
 * 40 to 400 at exit, and in 5 of 100 of the explicit destroys here. 150 runs in the default set,
 * 1,000 in the long variant, each to a clean exit (EXIT_RACE_RUNS overrides: 150 under ASan and
 * under TSan in CI, where a run takes up to 20 times as long). Lanes of 64 events keep the
 * recordings small (most events drop, counted), and each run's folder is removed after it. */
#define TESTUTIL_TAG "exitrace"
#include "testutil.h"

#include "faults.h"

#include <fcntl.h>
#include <sys/wait.h>

START_TEST(threads_recording_at_exit)
{
    const char *prog = getenv("SHM_TREE"), *runs_text = getenv("EXIT_RACE_RUNS");
    ck_assert_msg(prog && *prog, "SHM_TREE is not set");
    int runs = runs_text && atoi(runs_text) > 0 ? atoi(runs_text) : (int)test_scale(150, 1000);
    char *dir = tmp_make();
    char *out = path_join(dir, "out");
    int crashed = 0, failed = 0;
    for (int i = 0; i < runs; i++) {
        fflush(NULL);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            int null = open("/dev/null", O_WRONLY);
            if (null < 0 || dup2(null, 1) < 0)
                _exit(126);
            setenv("SHM_TREE_OUT", out, 1);
            setenv("TERMSIGHT_LANE_EVENTS", "64", 1);
            execl(prog, prog, "race", "8", i % 2 ? "destroy" : "exit", (char *)NULL);
            _exit(127);
        }
        int st;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        if (WIFSIGNALED(st)) {
            crashed++;
            fprintf(stderr, "run %d: killed by signal %d (%s)\n", i, WTERMSIG(st),
                    strsignal(WTERMSIG(st)));
        } else if (WEXITSTATUS(st) != 0) {
            failed++;
            fprintf(stderr, "run %d: exit status %d\n", i, WEXITSTATUS(st));
        }
        nftw(out, tmp_unlink, 16, FTW_DEPTH | FTW_PHYS);
    }
    printf("exit race: %d runs, %d crashed, %d failed\n", runs, crashed, failed);
    ck_assert_int_eq(crashed, 0);
    ck_assert_int_eq(failed, 0);
    free(out);
    tmp_remove(dir);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {threads_recording_at_exit, NULL};
    return faults_main("exit_race", 1800, tests);
}
