/* Helpers shared by the libFuzzer targets: a failed promise aborts (libFuzzer reports it as a
 * crash with the input that broke it), and bytes go into an in-memory file for the readers that
 * take a path. */
#ifndef TERMSIGHT_FUZZ_H
#define TERMSIGHT_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A promise of the code under test that the input broke. */
#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: promise broken: %s\n", __FILE__, __LINE__, #cond);             \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* A failing call returns -1 and says why. */
#define FUZZ_CHECK_CAUSE(rc, cause) FUZZ_CHECK((rc) == 0 || ((cause) && (cause)[0]))

/* Where bytes are read into, so that reading them is not optimized away. */
static volatile unsigned char fuzz_sink;

/* Whether a step pattern is worth handing to regcomp: glibc's takes seconds over long patterns,
 * repeated bounds or runs of repetition operators ("s" and 100 '*'), which is the pattern
 * writer's cost, not a fault of ours to find. */
static inline int fuzz_pattern_testable(const char *p)
{
    if (strlen(p) > 64 || strchr(p, '{'))
        return 0;
    for (; *p; p++)
        if (strchr("*+?", p[0]) && p[1] && strchr("*+?", p[1]))
            return 0;
    return 1;
}

/* Replaces the content of fd (a memfd or a shm object) with size bytes of data. */
static inline void fuzz_fd_fill(int fd, const void *data, size_t size)
{
    if (ftruncate(fd, 0) != 0 || ftruncate(fd, (off_t)size) != 0 ||
        (size && pwrite(fd, data, size, 0) != (ssize_t)size)) {
        perror("fuzz: cannot fill the input file");
        abort();
    }
}

/* A memfd for the target's inputs, created once; abort when it cannot be had. */
static inline int fuzz_memfd(const char *name)
{
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0) {
        perror("fuzz: memfd_create");
        abort();
    }
    return fd;
}

#endif
