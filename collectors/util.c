/* util: small helpers for naming the run and parsing options. */
#include "collectors.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define FD_SCAN_MAX 65536 /* descriptors closed one by one where neither close_range nor /proc */

void util_cond_init_monotonic(pthread_cond_t *c)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(c, &ca);
    pthread_condattr_destroy(&ca);
}

int util_thread_start(pthread_t *t, int detached, void *(*fn)(void *), void *arg, const char *name)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (detached)
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    /* The thread starts with every signal blocked, so that none meant for the program is ever
     * handled on it (a handler of the program's running on our thread, our calls cut short). */
    sigset_t all, prev;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &prev);
    int rc = pthread_create(t, &attr, fn, arg);
    pthread_sigmask(SIG_SETMASK, &prev, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0)
        return -1;
    pthread_setname_np(*t, name);
    return 0;
}

int util_private_fds(void)
{
#if defined(__SANITIZE_THREAD__)
    /* ThreadSanitizer models one descriptor table per process: in tables of their own, the
     * recorder's descriptor 3 and the sampler's descriptor 3 are different files, but to it the
     * same object written by two threads, a race that is not there. Under TSan the threads
     * share the program's table, the case the writer's descriptor check covers. */
    return 0;
#endif
    if (unshare(CLONE_FILES) != 0)
        return 0;
    /* The new table is a copy of the program's: every descriptor it had open is open here too,
     * and would keep its files, pipes and sockets alive after it closes them (a peer would never
     * see the end of a pipe). Only the standard streams stay, for messages. */
    if (syscall(SYS_close_range, 3u, ~0u, 0u) == 0)
        return 1;
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        int own = dirfd(d);
        struct dirent *e;
        while ((e = readdir(d))) {
            uint32_t fd;
            if (options_parse_u32(e->d_name, 3, INT32_MAX, &fd) == 0 && (int)fd != own)
                close((int)fd);
        }
        closedir(d);
        return 1;
    }
    for (int fd = 3; fd < FD_SCAN_MAX; fd++)
        close(fd);
    return 1;
}

void util_process_name(char *out, size_t cap)
{
    FILE *f = fopen("/proc/self/comm", "re");
    size_t n = 0;
    if (f) {
        n = fread(out, 1, cap - 1, f);
        fclose(f);
    }
    while (n && (out[n - 1] == '\n' || out[n - 1] == 0))
        n--;
    if (!n) {
        snprintf(out, cap, "process");
        return;
    }
    out[n] = 0;
}

void util_path_component(const char *name, char *out, size_t cap)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)name; *p && n + 1 < cap; p++) {
        int bad = *p == '/' || *p < 0x20 || *p == 0x7f || (n == 0 && *p == '.');
        out[n++] = bad ? '_' : (char)*p;
    }
    if (!n)
        out[n++] = '_';
    out[n] = 0;
}

char *util_absolute_path(const char *path)
{
    char cwd[4096];
    if (path[0] == '/' || !getcwd(cwd, sizeof cwd))
        return strdup(path);
    while (path[0] == '.' && (path[1] == '/' || !path[1]))
        path += path[1] ? 2 : 1;
    while (path[0] == '/')
        path++;
    size_t cl = strlen(cwd), pl = strlen(path);
    char *out = malloc(cl + 1 + pl + 1);
    if (out)
        snprintf(out, cl + 1 + pl + 1, "%s%s%s", cwd, pl && cwd[cl - 1] != '/' ? "/" : "", path);
    return out;
}

int util_run_folder(const char *output, const char *process, const ts_job *job, int pid, char *out,
                    size_t cap)
{
    char safe[64];
    util_path_component(process, safe, sizeof safe);
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    /* A random part: nobody can plant something at the name before the collector makes it. */
    uint32_t r;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
        r = (uint32_t)(now ^ ((uint64_t)pid << 16) ^ (uint64_t)(uintptr_t)out);
    int n;
    if (!job || !job->id[0])
        n = snprintf(out, cap, "%s/%s-%d-%s-%08x", output, safe, pid, stamp, r);
    else if (job->rank >= 0)
        n = snprintf(out, cap, "%s/%s/rank%d-%s%s-%d-%s-%08x", output, job->id, (int)job->rank,
                     job->parent_pid > 0 ? "worker-" : "", job->host, pid, stamp, r);
    else
        n = snprintf(out, cap, "%s/%s/%s-%s-%d-%s-%08x", output, job->id, safe, job->host, pid,
                     stamp, r);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* Opens the folder at path (O_DIRECTORY): a last component that is a symbolic link is followed
 * only when the link is the user's own or root's (the rule of the kernel's protected_symlinks,
 * which covers the other components where it is on: a link another user planted in a shared
 * folder such as /tmp may lead anywhere). Returns the descriptor, or -1 with why. */
static int open_folder(const char *path, const char *what, char *why, size_t cap)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && (errno == ELOOP || errno == ENOTDIR)) {
        struct stat lst;
        if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) {
            if (lst.st_uid != geteuid() && lst.st_uid != 0) {
                snprintf(why, cap,
                         "the %s %s is a symbolic link of uid %u, which is not followed "
                         "(only your own links or root's are)",
                         what, path, (unsigned)lst.st_uid);
                errno = EPERM;
                return -1;
            }
            fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        } else {
            errno = ENOTDIR;
        }
    }
    if (fd < 0)
        snprintf(why, cap, "cannot open the %s %s: %s", what, path, strerror(errno));
    return fd;
}

/* fd when the folder it holds may hold run folders (path_trusted), else -1 with why, fd closed. */
static int trusted_or_close(int fd, const char *path, char *why, size_t cap)
{
    char *cause = NULL;
    if (path_trusted(fd, path, &cause) == 0)
        return fd;
    snprintf(why, cap, "%s", cause ? cause : "cannot use folder");
    free(cause);
    close(fd);
    errno = EPERM;
    return -1;
}

/* Makes name in the folder at dirfd (mode 0700, exclusively) and opens it, never through a
 * link; it must be a folder of this user. Returns its descriptor, or -1 with why. */
static int make_own_folder(int dirfd, const char *name, const char *path, char *why, size_t cap)
{
    if (mkdirat(dirfd, name, 0700) != 0) {
        snprintf(why, cap, "cannot create folder %s: %s", path,
                 errno == EEXIST ? "it exists already (not made by this session)"
                                 : strerror(errno));
        return -1;
    }
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
        snprintf(why, cap, "cannot use folder %s: %s", path,
                 fd < 0 ? strerror(errno) : "not the folder just made");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* Makes name in the folder at dirfd unless it is there, and opens it, never through a link: a
 * folder that ranks of one job share, so it must be one of this user's. Returns its descriptor,
 * or -1 with why. */
static int open_shared_folder(int dirfd, const char *name, const char *path, char *why, size_t cap)
{
    if (mkdirat(dirfd, name, 0700) != 0 && errno != EEXIST) {
        snprintf(why, cap, "cannot create folder %s: %s", path, strerror(errno));
        return -1;
    }
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, cap, "cannot use folder %s: %s", path,
                 errno == ELOOP || errno == ENOTDIR ? "not a folder (a link?)" : strerror(errno));
        return -1;
    }
    return trusted_or_close(fd, path, why, cap);
}

/* Opens run_folder (under output) through folder descriptors: the output folder made when missing,
 * a job folder opened or made (it must be this user's), the run folder made exclusively (own) or
 * opened or made like the job folder. Returns its descriptor, or -1 with why. */
static int open_run_folder(const char *output, const char *run_folder, int own, char *why,
                           size_t cap)
{
    size_t ol = strlen(output);
    if (strncmp(run_folder, output, ol) != 0 || run_folder[ol] != '/' || !run_folder[ol + 1]) {
        snprintf(why, cap, "run folder %s is not in the output folder %s", run_folder, output);
        return -1;
    }
    char *cause = NULL;
    if (path_mkdirs(output, 1, 0700, &cause) != 0) {
        snprintf(why, cap, "%s", cause ? cause : "cannot create the output folder");
        free(cause);
        return -1;
    }
    int dir = open_folder(output, "output folder", why, cap);
    if (dir >= 0 && trusted_or_close(dir, output, why, cap) < 0)
        return -1;
    /* What follows the output folder: "<run>" or "<job>/<run>", each component one folder. */
    char path[4096];
    snprintf(path, sizeof path, "%s", output);
    const char *rest = run_folder + ol + 1;
    while (dir >= 0) {
        const char *slash = strchr(rest, '/');
        size_t len = slash ? (size_t)(slash - rest) : strlen(rest);
        char name[256];
        if (!len || len >= sizeof name) {
            snprintf(why, cap, "bad run folder name %s", run_folder);
            close(dir);
            return -1;
        }
        memcpy(name, rest, len);
        name[len] = 0;
        size_t pl = strlen(path);
        snprintf(path + pl, sizeof path - pl, "/%s", name);
        int next = slash || !own ? open_shared_folder(dir, name, path, why, cap)
                                 : make_own_folder(dir, name, path, why, cap);
        close(dir);
        dir = next;
        if (!slash)
            break;
        rest = slash + 1;
    }
    return dir;
}

/* Makes folder/recording/ in folder (dir, closed here): its descriptor, or -1 with why. */
static int make_recording_in(int dir, const char *folder, char *why, size_t cap)
{
    if (dir < 0)
        return -1;
    char path[4200];
    snprintf(path, sizeof path, "%s/" TS_RECORDING_DIR, folder);
    int rec = make_own_folder(dir, TS_RECORDING_DIR, path, why, cap);
    close(dir);
    return rec;
}

int util_make_recording_dir(const char *output, const char *run_folder, char *why, size_t cap)
{
    return make_recording_in(open_run_folder(output, run_folder, 1, why, cap), run_folder, why,
                             cap);
}

int util_open_run_folder(const char *output, const char *run_folder, int make, char *why,
                         size_t cap)
{
    if (!make) {
        struct stat st;
        if (lstat(run_folder, &st) != 0) {
            snprintf(why, cap, "run folder %s: %s", run_folder, strerror(errno));
            return -1;
        }
    }
    return open_run_folder(output, run_folder, 0, why, cap);
}

int util_make_snapshot_dir(const char *output, const char *run_folder, const char *name,
                           char *folder, size_t folder_cap, char *why, size_t cap)
{
    int dir = open_run_folder(output, run_folder, 0, why, cap);
    if (dir < 0)
        return -1;
    char path[4200];
    snprintf(path, sizeof path, "%s/" TS_SNAPSHOT_DIR, run_folder);
    int snaps = open_shared_folder(dir, TS_SNAPSHOT_DIR, path, why, cap);
    close(dir);
    if (snaps < 0)
        return -1;
    snprintf(folder, folder_cap, "%s/" TS_SNAPSHOT_DIR "/%s", run_folder, name);
    int own = make_own_folder(snaps, name, folder, why, cap);
    int rec = make_recording_in(own, folder, why, cap);
    if (own >= 0 && rec < 0) /* made here, empty: never left behind */
        unlinkat(snaps, name, AT_REMOVEDIR);
    close(snaps);
    return rec;
}
