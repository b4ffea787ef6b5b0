/* model: the error convention, making folders, and word-by-word copies of shared memory. */
#ifndef TERMSIGHT_MODEL_BASE_H
#define TERMSIGHT_MODEL_BASE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Sets *cause (when cause is not NULL) to a malloc'd formatted message and returns -1, so that
 * failures read `return cause_set(cause, "...", ...);`. */
int cause_set(char **cause, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Creates the folders on path that do not exist yet, with mode (less the umask): its parents,
 * and path itself when with_last. Existing ones are left as they are. Returns 0, or -1 with
 * *cause naming the folder that could not be made. */
int path_mkdirs(const char *path, int with_last, mode_t mode, char **cause);

/* Whether the folder open at fd (named path in the message) may hold this user's run folders:
 * it must belong to the user or to root, and not be writable by others unless sticky (/tmp is),
 * else another user could rename a run folder away and put their own in its place. Returns 0, or
 * -1 (errno EPERM) with *cause saying why. */
int path_trusted(int fd, const char *path, char **cause);

/* Copies bytes (a multiple of 8) of shared memory word by word with relaxed atomic loads, or
 * stores: what a reader copies while a writer may be rewriting it (checked afterwards by the
 * caller's protocol: a lane's head, a record's sequence word), and what such a writer stores. */
static inline void words_load(void *dst, const void *src, size_t bytes)
{
    uint64_t *to = dst;
    const uint64_t *from = src;
    for (size_t k = 0; k < bytes / 8; k++)
        to[k] = __atomic_load_n(&from[k], __ATOMIC_RELAXED);
}

static inline void words_store(void *dst, const void *src, size_t bytes)
{
    uint64_t *to = dst;
    const uint64_t *from = src;
    for (size_t k = 0; k < bytes / 8; k++)
        __atomic_store_n(&to[k], from[k], __ATOMIC_RELAXED);
}

#endif
