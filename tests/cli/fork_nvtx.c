/* fork_nvtx: a test program for `termsight run`.
 * No argument: the parent pushes NVTX range "parent", forks a child that pushes "child" (and does
 * not exec), waits for it, then pops. The child's range must not reach the parent's recording:
 * it goes into the child's own session.
 * "term": checks that SIGTERM and SIGINT have their default disposition (else exits 3), records a
 * range "before term", sends itself SIGTERM and waits to be ended by it. */
#include <nvtx3/nvToolsExt.h>

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "term")) {
        /* The profiler must leave the program's signals as they were. */
        const int sigs[] = {SIGTERM, SIGINT};
        for (int i = 0; i < 2; i++) {
            struct sigaction sa;
            if (sigaction(sigs[i], NULL, &sa) != 0 || (sa.sa_flags & SA_SIGINFO) ||
                sa.sa_handler != SIG_DFL)
                return 3;
        }
        nvtxRangePushA("before term");
        nvtxRangePop();
        kill(getpid(), SIGTERM);
        for (;;)
            pause();
    }
    nvtxRangePushA("parent");
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        nvtxRangePushA("child");
        nvtxMarkA("child mark");
        nvtxRangePop();
        exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    nvtxRangePop();
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
