/* path: creating the folders on a path (mkdir -p), one way for every room. */
#include "model.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int path_mkdirs(const char *path, int with_last, mode_t mode, char **cause)
{
    char *p = strdup(path);
    if (!p)
        return cause_set(cause, "out of memory");
    size_t len = strlen(p);
    while (len > 1 && p[len - 1] == '/')
        p[--len] = '\0';
    for (char *s = p + 1;; s++) {
        if (*s && *s != '/')
            continue;
        if (!*s && !with_last)
            break;
        char c = *s;
        *s = '\0';
        if (mkdir(p, mode) < 0 && errno != EEXIST) {
            int e = errno;
            cause_set(cause, "cannot create folder %s: %s", p, strerror(e));
            free(p);
            return -1;
        }
        *s = c;
        if (!c)
            break;
    }
    free(p);
    return 0;
}
