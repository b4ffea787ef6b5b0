/* closefds: a program that closes every descriptor it did not open itself, as daemons, some
 * launchers and shells do, then opens its own files under the numbers it freed. For
 * test_hostile_fds, run under `termsight run`.
 *
 *   closefds write DIR SECONDS   close fds 3 and up, open 8 files in DIR, append numbered lines
 *                                to each for SECONDS, then check that each holds exactly its
 *                                lines: exit 0, 4 when a file holds anything else
 *   closefds term DIR            close fds 3 and up, open a file in DIR, send itself SIGTERM:
 *                                ended by it, or exit 6 when still running 5 s later
 *
 * Exit 5: could not set itself up. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define FILES 8

static void close_inherited(void)
{
    for (int fd = 3; fd < 1024; fd++)
        close(fd);
    syscall(SYS_close_range, 1024u, ~0u, 0u);
}

static int open_file(const char *dir, int k)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/file%d", dir, k);
    return open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int write_and_check(const char *dir, double seconds)
{
    close_inherited();
    int fd[FILES];
    for (int k = 0; k < FILES; k++)
        if ((fd[k] = open_file(dir, k)) < 0)
            return 5;
    unsigned lines = 0;
    double end = now_s() + seconds;
    while (now_s() < end) {
        char line[64];
        int n = snprintf(line, sizeof line, "line %u\n", lines);
        for (int k = 0; k < FILES; k++)
            if (write(fd[k], line, (size_t)n) != n)
                return 4;
        lines++;
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
    for (int k = 0; k < FILES; k++) {
        off_t size = lseek(fd[k], 0, SEEK_END);
        char *got = malloc((size_t)size + 1);
        if (!got || pread(fd[k], got, (size_t)size, 0) != size)
            return 5;
        got[size] = 0;
        size_t at = 0;
        for (unsigned i = 0; i < lines; i++) {
            char line[64];
            int n = snprintf(line, sizeof line, "line %u\n", i);
            if (at + (size_t)n > (size_t)size || memcmp(got + at, line, (size_t)n) != 0) {
                fprintf(stderr, "closefds: file%d differs at byte %zu\n", k, at);
                return 4;
            }
            at += (size_t)n;
        }
        if (at != (size_t)size) {
            fprintf(stderr, "closefds: file%d has %lld bytes more than was written\n", k,
                    (long long)size - (long long)at);
            return 4;
        }
        free(got);
    }
    printf("closefds: %u lines in each of %d files, as written\n", lines, FILES);
    return 0;
}

static int term(const char *dir)
{
    close_inherited();
    if (open_file(dir, 0) < 0)
        return 5;
    kill(getpid(), SIGTERM);
    double end = now_s() + 5;
    while (now_s() < end) {
        struct timespec pause = {0, 10000000};
        nanosleep(&pause, NULL);
    }
    return 6;
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "write"))
        return write_and_check(argv[2], atof(argv[3]));
    if (argc == 3 && !strcmp(argv[1], "term"))
        return term(argv[2]);
    fputs("usage: closefds write DIR SECONDS | term DIR\n", stderr);
    return 5;
}
