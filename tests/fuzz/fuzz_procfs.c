/* libFuzzer target for the /proc parsers the sampler feeds (collectors/procfs.c): /proc/stat,
 * /proc/<pid>/stat and task stat lines, /proc/<pid>/status, comm. Every parser gets the input as
 * it is, in a buffer of exactly its size and not NUL-terminated (as the sampler's reads are), and
 * must either refuse it or return values the text really holds. */
#include "collectors.h"
#include "fuzz.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size ? size : 1);
    if (!text)
        return 0;
    memcpy(text, data, size);

    procfs_machine m;
    if (procfs_parse_stat(text, size, &m) == 0)
        FUZZ_CHECK(memmem(text, size, "cpu ", 4) && memmem(text, size, "ctxt ", 5));

    procfs_task t;
    if (procfs_parse_task_stat(text, size, &t) == 0)
        FUZZ_CHECK(memchr(text, '(', size) && memchr(text, ')', size));

    uint64_t rss = 0, hwm = 0;
    if (procfs_parse_status(text, size, &rss, &hwm) == 0)
        FUZZ_CHECK(rss % 1024 == 0 && hwm % 1024 == 0 && memmem(text, size, "VmRSS:", 6) &&
                   memmem(text, size, "VmHWM:", 6));

    uint64_t run = 0;
    if (procfs_parse_schedstat(text, size, &run) == 0)
        FUZZ_CHECK(size >= 3); /* two numbers and a blank at least */

    /* comm: the text without one trailing newline, exactly, or a refusal. The first byte
     * chooses the room given (1 .. 16 bytes). */
    char comm[16];
    size_t cap = size ? (size_t)data[0] % sizeof comm + 1 : sizeof comm;
    if (procfs_parse_comm(text, size, comm, cap) == 0) {
        size_t n = size && text[size - 1] == '\n' ? size - 1 : size;
        FUZZ_CHECK(n < cap && strlen(comm) == n && !memcmp(comm, text, n));
    }
    free(text);
    return 0;
}
