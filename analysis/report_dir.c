/* report_dir: the report folder's files and their swap into place (see report.c's header for
 * the rules): the target checked, a temporary folder beside it, files created in it without
 * following links, synced, and the folder exchanged with the target in one rename; the public
 * report_dir API gives the same to other writers (the job report). */
#include "report_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The files a report folder holds (timeline-N.json aside). */
static const char *const report_files[] = {
    "op_statistics.csv",
    "op_type_statistics.csv",
    "kernel_statistics.csv",
    "step_trace.csv",
    "overlap.csv",
    REPORT_STEP_OPS_CSV,
    "data_queues.csv",
    "data_queue_usage.csv",
    "cpu_utilization.csv",
    "cpu_threads.csv",
    "cpu_processes.csv",
    "memory.csv",
    "memory_allocations.csv",
    "flops.csv",
    "summary.json",
    "report.txt",
    "report.html",
    "timeline.json",
    /* a job report's (job.c) */
    "ranks.csv",
    "job_steps.csv",
    "job_step_trace.csv",
    REPORT_SQLITE,
};
#define N_REPORT_FILES (sizeof report_files / sizeof report_files[0])

/* ---- Paths -------------------------------------------------------------------------------- */

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && !S_ISDIR(st.st_mode);
}

char *report_join(const char *a, const char *b)
{
    char *s;
    return asprintf(&s, "%s/%s", a, b) < 0 ? NULL : s;
}

/* The recording file a path names (as recording_reader_open finds it), malloc'd, or NULL. */
char *report_locate(const char *path)
{
    if (!is_dir(path))
        return strdup(path);
    char *f = report_join(path, TS_RECORDING_FILE);
    if (f && is_file(f))
        return f;
    free(f);
    f = report_join(path, TS_RECORDING_DIR "/" TS_RECORDING_FILE);
    if (f && is_file(f))
        return f;
    free(f);
    return NULL;
}

static char *parent_of(const char *p)
{
    char *d = strdup(p);
    if (!d)
        return NULL;
    char *slash = strrchr(d, '/');
    if (!slash)
        strcpy(d, ".");
    else if (slash == d)
        d[1] = 0;
    else
        *slash = 0;
    return d;
}

static int base_is(const char *p, const char *name)
{
    const char *slash = strrchr(p, '/');
    return !strcmp(slash ? slash + 1 : p, name);
}

char *report_run_folder(const char *path)
{
    char *file = report_locate(path);
    if (!file) {
        char *real = realpath(path, NULL);
        return real ? real : strdup(path);
    }
    char *real = realpath(file, NULL);
    free(file);
    if (!real)
        return strdup(path);
    char *dir = parent_of(real);
    free(real);
    if (dir && base_is(dir, TS_RECORDING_DIR) && strcmp(dir, "/" TS_RECORDING_DIR)) {
        char *up = parent_of(dir);
        free(dir);
        return up;
    }
    return dir;
}

static int report_file_name(const char *n)
{
    for (size_t i = 0; i < N_REPORT_FILES; i++)
        if (!strcmp(n, report_files[i]))
            return 1;
    unsigned k;
    int end = 0;
    if (sscanf(n, "timeline-%u.json%n", &k, &end) == 1 && (size_t)end == strlen(n))
        return 1;
    return n[0] == '.' && !strncmp(n, ".timeline", 9) && strstr(n, ".tmp");
}

/* Removes what the folder open as fd holds, never following a link (a link is removed, not its
 * target), down to MAX_STALE_DEPTH levels. Returns 0 when the folder is empty after. */
#define MAX_STALE_DEPTH 4
static int empty_folder(int fd, int depth)
{
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (unlinkat(dirfd(d), e->d_name, 0) == 0)
            continue;
        int sub = depth < MAX_STALE_DEPTH
                      ? openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                      : -1;
        if (sub < 0 || empty_folder(sub, depth + 1) != 0 ||
            unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR) != 0)
            rc = -1;
    }
    closedir(d);
    return rc;
}

/* Removes a folder the writer made, never following a link (a link there is removed itself),
 * through empty_folder: the one tree removal here. */
void report_remove_tree(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        unlink(dir); /* a link swapped in: remove the link itself */
        return;
    }
    if (empty_folder(fd, 1) == 0)
        rmdir(dir);
}

/* Whether an existing target may be replaced: 1 absent, 2 a report folder (or empty), else -1
 * with a message. */
int report_check_target(const char *target, char **cause)
{
    struct stat st;
    if (lstat(target, &st) < 0) {
        if (errno == ENOENT)
            return 1;
        return cause_set(cause, "cannot use %s: %s", target, strerror(errno));
    }
    if (S_ISLNK(st.st_mode))
        return cause_set(cause, "%s is a symbolic link: not writing a report through it", target);
    if (!S_ISDIR(st.st_mode))
        return cause_set(cause, "%s exists and is not a folder", target);
    DIR *d = opendir(target);
    if (!d)
        return cause_set(cause, "cannot read %s: %s", target, strerror(errno));
    struct dirent *de;
    int rc = 2;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        struct stat fs;
        if (!report_file_name(de->d_name) ||
            fstatat(dirfd(d), de->d_name, &fs, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(fs.st_mode)) {
            rc = cause_set(cause,
                           "%s holds '%s', which is not a report file: not replacing that "
                           "folder (choose another with -o)",
                           target, de->d_name);
            break;
        }
    }
    closedir(d);
    return rc;
}

/* mkdir -p of a folder's parents. */
static void sync_dir_files(int dirfd)
{
    int fd = dup(dirfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        int f = openat(dirfd, de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (f >= 0) {
            fdatasync(f);
            close(f);
        }
    }
    closedir(d);
    fsync(dirfd);
}

static atomic_uint tmp_seq;

/* Temporary folders beside the target that an analyse killed mid-write left behind:
 * "<target name>.tmp-<pid>-<n>" folders of this user whose process is gone are removed (a live
 * one is another analyse at work). Anything else with such a name is left alone. */
static void remove_stale_tmps(const char *target)
{
    char *parent = strdup(target);
    if (!parent)
        return;
    char *slash = strrchr(parent, '/');
    const char *name = slash ? slash + 1 : parent;
    const char *dir = slash ? (slash == parent ? "/" : parent) : ".";
    if (slash)
        *slash = 0;
    size_t nl = strlen(name);
    int pfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = pfd < 0 ? NULL : fdopendir(pfd);
    if (!d) {
        if (pfd >= 0)
            close(pfd);
        free(parent);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *p = e->d_name;
        if (strncmp(p, name, nl) || strncmp(p + nl, ".tmp-", 5))
            continue;
        char *end;
        errno = 0;
        long pid = strtol(p + nl + 5, &end, 10);
        if (errno || end == p + nl + 5 || *end != '-' || pid <= 0 || pid > INT32_MAX)
            continue;
        const char *seq = end + 1;
        strtoul(seq, &end, 10);
        if (end == seq || *end || *seq == '-' || *seq == '+')
            continue;
        struct stat st;
        if (fstatat(dirfd(d), p, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) ||
            st.st_uid != geteuid())
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; /* alive (or not ours to probe): maybe another analyse */
        int fd = openat(dirfd(d), p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0 && empty_folder(fd, 1) == 0)
            unlinkat(dirfd(d), p, AT_REMOVEDIR);
    }
    closedir(d);
    free(parent);
}

/* Creates the temporary folder beside the target, after removing stale ones. */
int report_make_tmp(report *r, char **cause)
{
    if (path_mkdirs(r->target, 0, 0777, cause) < 0)
        return -1;
    remove_stale_tmps(r->target);
    for (int tries = 0; tries < 100; tries++) {
        unsigned n = atomic_fetch_add(&tmp_seq, 1);
        if (asprintf(&r->tmp, "%s.tmp-%ld-%u", r->target, (long)getpid(), n) < 0) {
            r->tmp = NULL;
            return cause_set(cause, "out of memory");
        }
        /* 0755: the report is for reading; never writable by others, whatever the umask. */
        if (mkdir(r->tmp, 0755) == 0)
            break;
        int e = errno;
        free(r->tmp);
        r->tmp = NULL;
        if (e != EEXIST)
            return cause_set(cause, "cannot create a folder beside %s: %s", r->target, strerror(e));
    }
    /* Every name tried is taken: someone else's, never to be written into. */
    if (!r->tmp)
        return cause_set(cause, "cannot create a temporary folder beside %s: 100 names taken",
                         r->target);
    r->dirfd = open(r->tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (r->dirfd < 0) {
        int e = errno;
        rmdir(r->tmp);
        free(r->tmp);
        r->tmp = NULL;
        return cause_set(cause, "cannot open %s: %s", r->target, strerror(e));
    }
    return 0;
}

void report_note_error(report *r, const char *file, int err)
{
    if (r->werr)
        return;
    r->werr = err ? err : EIO;
    r->werr_file = strdup(file);
}

void report_file_list(report *r, const char *name)
{
    char **n = realloc(r->files, (r->nfiles + 1) * sizeof *n);
    if (!n)
        return;
    r->files = n;
    if ((r->files[r->nfiles] = strdup(name)))
        r->nfiles++;
}

FILE *report_file_create(report *r, const char *name)
{
    int fd = openat(r->dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        report_note_error(r, name, errno);
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    report_file_list(r, name);
    return f;
}

int report_file_close(report *r, FILE *f, const char *name)
{
    if (!f)
        return -1;
    int bad = ferror(f);
    int e = errno;
    if (fclose(f) != 0 || bad) {
        report_note_error(r, name, bad ? e : errno);
        return -1;
    }
    return 0;
}

static int swap_in(report *r, int existed, char **cause)
{
    if (existed) {
        if (renameat2(AT_FDCWD, r->tmp, AT_FDCWD, r->target, RENAME_EXCHANGE) == 0) {
            report_remove_tree(r->tmp); /* now the old report */
            return 0;
        }
        if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
            return cause_set(cause, "cannot replace %s: %s", r->target, strerror(errno));
        /* No exchange on this file system: aside, in, remove. */
        char *old;
        if (asprintf(&old, "%s.old", r->tmp) < 0)
            return cause_set(cause, "out of memory");
        if (rename(r->target, old) < 0) {
            int e = errno;
            free(old);
            return cause_set(cause, "cannot replace %s: %s", r->target, strerror(e));
        }
        if (rename(r->tmp, r->target) < 0) {
            int e = errno;
            rename(old, r->target);
            free(old);
            return cause_set(cause, "cannot replace %s: %s", r->target, strerror(e));
        }
        report_remove_tree(old);
        free(old);
        return 0;
    }
    if (renameat2(AT_FDCWD, r->tmp, AT_FDCWD, r->target, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP) {
        if (rename(r->tmp, r->target) == 0)
            return 0;
    }
    return cause_set(cause, "cannot create %s: %s", r->target, strerror(errno));
}

/* The temporary folder, its files written, takes the target's place. */
int report_commit(report *r, int existed, char **cause)
{
    if (r->werr)
        return cause_set(cause, "cannot write %s/%s: %s", r->target,
                         r->werr_file ? r->werr_file : "?", strerror(r->werr));
    if (!r->opt.lean)
        sync_dir_files(r->dirfd);
    if (swap_in(r, existed, cause) < 0)
        return -1;
    char *parent = r->opt.lean ? NULL : parent_of(r->target);
    int pfd = parent ? open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (pfd >= 0) {
        fsync(pfd);
        close(pfd);
    }
    free(parent);
    return 0;
}

/* ---- A report folder for other writers (the job report) ----------------------------------- */

struct report_dir {
    report *r; /* only its folder part: target, tmp, dirfd, files, write error */
    int existed;
};

int report_dir_open(const char *target, report_dir **out, char **cause)
{
    *out = NULL;
    int ex = report_check_target(target, cause);
    if (ex < 0)
        return -1;
    report_dir *d = calloc(1, sizeof *d);
    report *r = calloc(1, sizeof *r);
    if (!d || !r || !(r->target = strdup(target))) {
        free(d);
        if (r)
            free(r->target);
        free(r);
        return cause_set(cause, "out of memory");
    }
    r->dirfd = -1;
    d->r = r;
    d->existed = ex == 2;
    if (report_make_tmp(r, cause) < 0) {
        report_dir_abort(d);
        return -1;
    }
    *out = d;
    return 0;
}

FILE *report_dir_file(report_dir *d, const char *name)
{
    return report_file_create(d->r, name);
}

int report_dir_close_file(report_dir *d, FILE *f, const char *name)
{
    return report_file_close(d->r, f, name);
}

int report_dir_fd(const report_dir *d)
{
    return d->r->dirfd;
}

int report_dir_commit(report_dir *d, char **cause)
{
    report_sqlite_write(d->r, 0);
    int rc = report_commit(d->r, d->existed, cause);
    if (rc == 0) {
        free(d->r->tmp); /* swapped in: nothing to remove */
        d->r->tmp = NULL;
    }
    report_dir_abort(d);
    return rc;
}

void report_dir_abort(report_dir *d)
{
    if (!d)
        return;
    report_free(d->r);
    free(d);
}
