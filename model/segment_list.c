/* segment_list: the segments found in SHM_DIR, by name: listing them (termsight ls, the reapers),
 * removing stale ones and the control objects they leave, and claiming one for a reaper. */
#include "segment_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Alive means the process exists and still maps this very object (not a deleted one, not a pid
 * reused by an unrelated process). */
int segment_alive(pid_t pid, const char *shm_name)
{
    if (kill(pid, 0) != 0 && errno != EPERM)
        return 0;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 1; /* exists, cannot tell more */
    char want[96];
    if (segment_join2(want, sizeof want, SHM_DIR, shm_name) != 0) {
        fclose(f);
        return 1; /* cannot tell more */
    }
    size_t wl = strlen(want);
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        char *p = strstr(line, want);
        if (p && (p[wl] == '\n' || p[wl] == 0))
            found = 1;
    }
    fclose(f);
    return found;
}

static int by_pid(const void *a, const void *b)
{
    const segment_info *x = a, *y = b;
    return (x->pid > y->pid) - (x->pid < y->pid);
}

static void info_fill(segment_info *info, const char *entry, pid_t pid);

/* A new last entry of *list (n of cap), or NULL (the list freed) when memory is out. */
static segment_info *list_push(segment_info **list, size_t *n, size_t *cap)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 8;
        segment_info *nl = realloc(*list, c * sizeof *nl);
        if (!nl) {
            free(*list);
            *list = NULL;
            return NULL;
        }
        *list = nl;
        *cap = c;
    }
    return &(*list)[(*n)++];
}

/* What segment_list says of the segment at entry (of pid), but whether it is alive. */
static void info_fill(segment_info *info, const char *entry, pid_t pid)
{
    memset(info, 0, sizeof *info);
    info->pid = pid;
    snprintf(info->shm_name, sizeof info->shm_name, "/%.62s", entry);
    segment *s = NULL;
    char *why = NULL;
    if (segment_attach_name(info->shm_name, 0, &s, &why) == 0) {
        ts_segment_header *h = segment_header(s);
        info->readable = 1;
        segment_copy_str(info->process, sizeof info->process, h->process);
        if (segment_run_folder(s, info->run_folder, sizeof info->run_folder, NULL) != 0)
            segment_copy_str(info->run_folder, sizeof info->run_folder, h->run_folder);
        segment_copy_str(info->job, sizeof info->job, h->job);
        info->rank = h->rank;
        info->world_size = h->world_size;
        info->parent_pid = h->parent_pid;
        info->state = atomic_load_explicit(&h->state, memory_order_acquire);
        info->events_recorded = atomic_load_explicit(&h->events_recorded, memory_order_relaxed);
        info->drops = atomic_load_explicit(&h->drops, memory_order_relaxed);
        info->window = atomic_load_explicit(&h->window, memory_order_relaxed);
        info->start_ns = h->start_ns;
        info->lost_threads = segment_lane_losses(s, info->lost, SEGMENT_INFO_LOST);
        info->start_realtime_ns = h->start_realtime_ns;
        info->budget_id = h->budget_id;
        info->program_events = atomic_load_explicit(&h->program_events, memory_order_relaxed);
        info->flight_mb = h->minor >= 2 ? h->flight_mb : 0;
        info->budget_charged = atomic_load_explicit(&h->budget_charged, memory_order_relaxed);
        segment_close(s, 0);
    } else {
        segment_copy_str(info->error, sizeof info->error, why ? why : "unreadable");
        free(why);
    }
}

char segment_proc_state(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')'); /* after the command's name, which may hold anything */
    return p && p[1] == ' ' ? p[2] : 0;
}

/* Whether pid has ended: no such process, or a zombie its parent has not waited for yet. */
static int process_ended(pid_t pid)
{
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return 1;
    char state = segment_proc_state(pid);
    return state == 'Z' || state == 'X';
}

/* Which segments a listing keeps: NULL, every one of this user's; else only those whose process
 * has ended, that are regular files and readable, and whose header names budget_id as its ledger
 * (when not 0) or parent as its parent (when > 0). */
typedef struct list_filter {
    uint64_t budget_id;
    pid_t parent;
} list_filter;

static int list_segments(const list_filter *f, segment_info **out, char **cause)
{
    *out = NULL;
    DIR *d = opendir(SHM_DIR);
    if (!d)
        return cause_set(cause, "cannot read " SHM_DIR ": %s", strerror(errno));
    segment_info *list = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        pid_t pid;
        struct stat st;
        /* A filtered look costs no attach for a process that is still there. */
        if (!segment_parse_pid(e->d_name, &pid) || (f && !process_ended(pid)) ||
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_uid != geteuid() ||
            (f && !S_ISREG(st.st_mode)))
            continue;
        segment_info info;
        info_fill(&info, e->d_name, pid);
        if (f && (!info.readable || (f->budget_id && info.budget_id != f->budget_id) ||
                  (f->parent > 0 && info.parent_pid != f->parent)))
            continue;
        info.alive = f ? 0 : segment_alive(pid, info.shm_name);
        segment_info *slot = list_push(&list, &n, &cap);
        if (!slot) {
            closedir(d);
            return cause_set(cause, "out of memory");
        }
        *slot = info;
    }
    closedir(d);
    if (n)
        qsort(list, n, sizeof *list, by_pid);
    *out = list;
    return (int)n;
}

int segment_list(segment_info **out, char **cause)
{
    return list_segments(NULL, out, cause);
}

int segment_list_ended(uint64_t budget_id, pid_t parent, segment_info **out, char **cause)
{
    list_filter f = {.budget_id = budget_id, .parent = parent};
    return list_segments(&f, out, cause);
}

int segment_remove_stale_name(const char *name, pid_t pid, char **cause)
{
    /* Judged by lstat, never opened: a link or a FIFO of ours under such a name is junk to
     * remove, not something to follow or to block on. /dev/shm is sticky: only we can remove or
     * replace an entry of ours between the look and the unlink. */
    char path[96];
    if (segment_join2(path, sizeof path, SHM_DIR, name) != 0)
        return cause_set(cause, "%s: name too long", name);
    struct stat st;
    if (lstat(path, &st) != 0)
        return cause_set(cause, "%s: %s", name, strerror(errno));
    if (st.st_uid != geteuid())
        return cause_set(cause, "%s belongs to uid %u", name, (unsigned)st.st_uid);
    if (S_ISREG(st.st_mode) && segment_alive(pid, name))
        return cause_set(cause, "%s: process %d is alive", name, (int)pid);
    if (unlink(path) != 0)
        return cause_set(cause, "%s: %s", name, strerror(errno));
    /* Its control object, when it is ours too. */
    char ctl[128];
    if (segment_join2(ctl, sizeof ctl, path, CTL_SUFFIX) == 0 && lstat(ctl, &st) == 0 &&
        st.st_uid == geteuid())
        unlink(ctl);
    return 0;
}

int segment_claim(const char *name, pid_t pid, char *claimed, size_t cap, char **cause)
{
    char from[96];
    if (segment_join2(from, sizeof from, SHM_DIR, name) != 0 ||
        segment_join2(claimed, cap, from, REAP_SUFFIX) != 0)
        return cause_set(cause, "%s: name too long", name);
    struct stat st;
    if (lstat(from, &st) != 0)
        return errno == ENOENT ? 0 : cause_set(cause, "%s: %s", name, strerror(errno));
    if (st.st_uid != geteuid())
        return cause_set(cause, "%s belongs to uid %u", name, (unsigned)st.st_uid);
    if (!S_ISREG(st.st_mode)) {
        /* A link or a FIFO of ours under such a name: junk, removed, never followed. */
        segment_remove_claimed(name, from);
        return 0;
    }
    if (segment_alive(pid, name))
        return cause_set(cause, "%s: process %d is alive", name, (int)pid);
    /* /dev/shm is sticky: only we can rename an entry of ours, and of two reapers one wins. */
    if (rename(from, claimed) != 0)
        return errno == ENOENT ? 0 : cause_set(cause, "%s: %s", name, strerror(errno));
    return 1;
}

void segment_remove_claimed(const char *name, const char *claimed)
{
    unlink(claimed);
    char ctl[128];
    struct stat st;
    if (segment_join2(ctl, sizeof ctl, SHM_DIR, name) == 0 &&
        strlen(ctl) + strlen(CTL_SUFFIX) < sizeof ctl) {
        strcat(ctl, CTL_SUFFIX);
        if (lstat(ctl, &st) == 0 && st.st_uid == geteuid())
            unlink(ctl);
    }
}

int segment_remove_orphan_ctls(void)
{
    DIR *d = opendir(SHM_DIR);
    if (!d)
        return 0;
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        /* A control object, or a segment a reaper took and did not remove (it died). */
        size_t len = strlen(e->d_name), sl = strlen(CTL_SUFFIX);
        if (len > strlen(REAP_SUFFIX) &&
            !strcmp(e->d_name + len - strlen(REAP_SUFFIX), REAP_SUFFIX))
            sl = strlen(REAP_SUFFIX);
        else if (len <= sl || strcmp(e->d_name + len - sl, CTL_SUFFIX))
            continue;
        char seg[256];
        pid_t pid;
        if (len - sl >= sizeof seg)
            continue;
        memcpy(seg, e->d_name, len - sl);
        seg[len - sl] = 0;
        struct stat st;
        if (!segment_parse_pid(seg, &pid) ||
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_uid != geteuid() ||
            fstatat(dirfd(d), seg, &st, AT_SYMLINK_NOFOLLOW) == 0 ||
            (kill(pid, 0) == 0 || errno == EPERM))
            continue; /* its segment is there, or its process lives: not an orphan */
        removed += unlinkat(dirfd(d), e->d_name, 0) == 0;
    }
    closedir(d);
    return removed;
}

int segment_remove_stale(pid_t pid, char **cause)
{
    pid_names pn;
    if (segment_names_of_pid(pid, &pn, cause) != 0)
        return -1;
    if (!pn.n)
        return segment_no_own_name(pid, &pn, cause);
    int removed = 0;
    char *first_cause = NULL;
    for (int i = 0; i < pn.n; i++) {
        char *why = NULL;
        if (segment_remove_stale_name(pn.own[i], pid, &why) == 0)
            removed++;
        else if (!first_cause)
            first_cause = why;
        else
            free(why);
    }
    free(pn.own);
    if (removed) {
        free(first_cause);
        return removed;
    }
    int r = cause_set(cause, "%s", first_cause ? first_cause : "nothing removed");
    free(first_cause);
    return r;
}
