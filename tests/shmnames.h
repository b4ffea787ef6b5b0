/* shmnames: the names termsight gives a process's segment in /dev/shm, for tests that look for
 * them, remove them, or plant something there: "termsight-<pid>-<16 hex digits>" (a random part,
 * so that no one can take a name first; older versions: "termsight-<pid>", still listed). */
#ifndef TERMSIGHT_SHMNAMES_H
#define TERMSIGHT_SHMNAMES_H

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define SHM_NAMES_MAX 16

/* The /dev/shm paths of pid's segments (up to max into out): their count. */
static inline int shm_paths_of_pid(pid_t pid, char (*out)[96], int max)
{
    char with_suffix[48], exact[48];
    snprintf(with_suffix, sizeof with_suffix, "termsight-%d-", (int)pid);
    snprintf(exact, sizeof exact, "termsight-%d", (int)pid);
    DIR *d = opendir("/dev/shm");
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while (n < max && (e = readdir(d))) {
        if (!strcmp(e->d_name, exact) || (!strncmp(e->d_name, with_suffix, strlen(with_suffix)) &&
                                          strlen(e->d_name) == strlen(with_suffix) + 16))
            snprintf(out[n++], 96, "/dev/shm/%.80s", e->d_name);
    }
    closedir(d);
    return n;
}

static inline int shm_exists_pid(pid_t pid)
{
    char paths[SHM_NAMES_MAX][96];
    return shm_paths_of_pid(pid, paths, SHM_NAMES_MAX) > 0;
}

/* The path of pid's one segment ("" when none or several). */
static inline void shm_path_of_pid(pid_t pid, char *out, size_t cap)
{
    char paths[SHM_NAMES_MAX][96];
    int n = shm_paths_of_pid(pid, paths, SHM_NAMES_MAX);
    snprintf(out, cap, "%s", n == 1 ? paths[0] : "");
}

/* Removes pid's segments and their control objects ("<segment>-ctl"). */
static inline void shm_unlink_pid(pid_t pid)
{
    char paths[SHM_NAMES_MAX][96];
    int n = shm_paths_of_pid(pid, paths, SHM_NAMES_MAX);
    for (int i = 0; i < n; i++) {
        char ctl[104];
        snprintf(ctl, sizeof ctl, "%.90s-ctl", paths[i]);
        unlink(ctl);
        unlink(paths[i]);
    }
}

/* A path of the form termsight gives pid's segments, for planting an object there. */
static inline void shm_plant_path(pid_t pid, char *out, size_t cap)
{
    snprintf(out, cap, "/dev/shm/termsight-%d-0123456789abcdef", (int)pid);
}

#endif
