/* path: creating the folders on a path (mkdir -p), and whether one may hold run folders, one way
 * for every room. */
#include "model.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

int path_trusted(int fd, const char *path, char **cause)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return cause_set(cause, "cannot use folder %s: %s", path, strerror(errno));
    errno = EPERM;
    if (st.st_uid != geteuid() && st.st_uid != 0)
        return cause_set(cause,
                         "the folder %s belongs to uid %u, not to you: another user could put "
                         "their own run folders in place of yours (choose a folder of yours)",
                         path, (unsigned)st.st_uid);
    if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))
        return cause_set(cause,
                         "the folder %s is writable by every user without the sticky bit: "
                         "another user could put their own run folders in place of yours "
                         "(chmod o-w or +t it, or choose another)",
                         path);
    return 0;
}
