/* fork_nvtx: a test program for `termsight run`.
 * No argument: the parent pushes NVTX range "parent", forks a child that pushes "child" (and does
 * not exec), waits for it, then pops. The child's range must not reach the parent's recording.
 * "term": records a range "before term", sends itself SIGTERM and waits to be ended by it. */
#include <nvtx3/nvToolsExt.h>

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "term")) {
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
