/* fork_nvtx: a test program for `termsight run`.
 * No argument: the parent pushes NVTX range "parent", forks a child that pushes "child" (and does
 * not exec), waits for it, then pops. The child's range must not reach the parent's recording:
 * it goes into the child's own session.
 * "term": checks that SIGTERM and SIGINT have their default disposition (else exits 3), records a
 * range "before term", sends itself SIGTERM and waits to be ended by it.
 * "burn FILE": forks two children that touch 32 MB each, burn 300 ms of their CPU time (at most
 * 20 s of wall time) and exit; waits for both and writes their pids to FILE, one a line. */
#include <nvtx3/nvToolsExt.h>

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void burn(void)
{
    size_t bytes = 32u << 20;
    volatile char *mem = malloc(bytes);
    if (!mem)
        _exit(2);
    memset((char *)mem, 1, bytes);
    struct timespec cpu, wall0, wall;
    clock_gettime(CLOCK_MONOTONIC, &wall0);
    volatile uint64_t x = 0;
    do {
        for (int i = 0; i < 100000; i++)
            x += (uint64_t)i * i;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
        clock_gettime(CLOCK_MONOTONIC, &wall);
    } while (cpu.tv_sec * 1000000000L + cpu.tv_nsec < 300000000L &&
             wall.tv_sec - wall0.tv_sec < 20);
    (void)x;
    _exit(mem[bytes - 1] == 1 ? 0 : 3);
}

static int burners(const char *file)
{
    pid_t pids[2];
    for (int i = 0; i < 2; i++) {
        pids[i] = fork();
        if (pids[i] < 0)
            return 1;
        if (pids[i] == 0)
            burn();
    }
    int ok = 1;
    for (int i = 0; i < 2; i++) {
        int status;
        ok &= waitpid(pids[i], &status, 0) == pids[i] && WIFEXITED(status) &&
              WEXITSTATUS(status) == 0;
    }
    FILE *f = fopen(file, "w");
    if (!f || fprintf(f, "%d\n%d\n", (int)pids[0], (int)pids[1]) < 0 || fclose(f) != 0)
        return 1;
    return ok ? 0 : 1;
}

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
    if (argc > 2 && !strcmp(argv[1], "burn"))
        return burners(argv[2]);
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
