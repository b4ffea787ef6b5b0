/* job_ranks: the job report's ranks (job_internal.h): finding the run folders of a job, reading
 * each rank's summary.json, and choosing the ranks that are merged (one job, one folder per
 * rank, the newest of a rank's duplicates), sorted by rank. */
#include "job_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- Finding the ranks --------------------------------------------------------------------- */

static int has_recording(int dirfd, const char *name)
{
    char p[600];
    snprintf(p, sizeof p, "%s/" TS_RECORDING_DIR, name);
    struct stat st;
    return fstatat(dirfd, p, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int job_rank_folders(const char *job_folder, char ***out, char **cause)
{
    *out = NULL;
    DIR *d = opendir(job_folder);
    if (!d)
        return cause_set(cause, "cannot read %s: %s", job_folder, strerror(errno));
    char **list = NULL;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        struct stat st;
        if (e->d_name[0] == '.' || strlen(e->d_name) > 255 ||
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) ||
            !has_recording(dirfd(d), e->d_name))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **l = realloc(list, (size_t)cap * sizeof *l);
            if (!l)
                break;
            list = l;
        }
        if (asprintf(&list[n], "%s/%s", job_folder, e->d_name) < 0)
            break;
        n++;
    }
    closedir(d);
    if (n)
        qsort(list, (size_t)n, sizeof *list, by_name);
    *out = list;
    return n;
}

void job_folders_free(char **folders, int n)
{
    for (int i = 0; i < n; i++)
        free(folders[i]);
    free(folders);
}

int job_is_folder(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    int own = fstatat(fd, TS_RECORDING_DIR, &st, 0) == 0;
    close(fd);
    if (own)
        return 0;
    char **f;
    int n = job_rank_folders(path, &f, NULL);
    /* A folder of unrelated run folders (the output folder itself) is none: a rank's folder
     * must be among them. */
    int ranks = 0;
    for (int i = 0; i < n && !ranks; i++) {
        const char *b = strrchr(f[i], '/') + 1;
        ranks = !strncmp(b, "rank", 4) && b[4] >= '0' && b[4] <= '9';
    }
    job_folders_free(f, n > 0 ? n : 0);
    return ranks;
}

/* ---- One rank, from its report ------------------------------------------------------------ */

/* Reads the rank's summary.json: 0, or -1 with why. */
int job_load_summary(rank_in *r, char *why, size_t cap)
{
    r->state = "unknown";
    report_summary s;
    if (report_summary_read(r->folder, MAX_SUMMARY_BYTES, &s, why, cap) < 0)
        return -1;
    memcpy(r->job, s.job, sizeof r->job);
    memcpy(r->host, s.host, sizeof r->host);
    memcpy(r->process, s.process, sizeof r->process);
    r->rank = s.rank;
    r->local_rank = s.local_rank;
    r->world_size = s.world_size;
    r->pid = s.pid;
    r->parent_pid = s.parent_pid;
    r->origin_wall_us = s.origin_wall_us;
    r->bytes_skipped = s.bytes_skipped;
    r->chunks_skipped = s.chunks_skipped;
    r->lost = s.lost;
    r->avg_comm_us = s.avg_comm_us;
    r->tl_left_out = s.timeline_left_out;
    text_clean(s.ended, strlen(s.ended), r->ended_why, 0);
    r->state = r->ended_why[0] ? "ended" : s.unfinished ? "unfinished" : "finished";
    return 0;
}

/* Says which ranks did not finish: how their recordings end, at which step. */
void job_warn_unfinished(job_report *j, size_t used)
{
    for (size_t i = 0; i < used; i++) {
        const rank_in *r = &j->r[i];
        char last[40] = "no step";
        if (r->steps)
            snprintf(last, sizeof last, "its last step %" PRIu64, r->last_step);
        if (!strcmp(r->state, "ended"))
            job_warn(
                j,
                "rank %ld (pid %ld) died without closing its session (%s), %s: its last events "
                "are what its shared memory held",
                r->rank, r->pid, r->ended_why, last);
        else if (!strcmp(r->state, "unfinished"))
            job_warn(j,
                     "rank %ld (pid %ld) did not finish: its recording ends inside a collection "
                     "window, %s (killed, or still running)",
                     r->rank, r->pid, last);
    }
}

/* ---- The ranks merged ------------------------------------------------------------------------ */

static int by_rank(const void *a, const void *b)
{
    const rank_in *x = a, *y = b;
    if (x->use != y->use)
        return y->use - x->use; /* used first */
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return strcmp(x->folder, y->folder);
}

const char *job_base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* The job id most ranks carry (the folder's name breaks a tie). */
static const char *majority_job(const job_report *j)
{
    const char *best = NULL;
    size_t best_n = 0;
    for (size_t i = 0; i < j->n; i++) {
        if (!j->r[i].use || !j->r[i].job[0])
            continue;
        size_t k = 0;
        for (size_t m = 0; m < j->n; m++)
            k += j->r[m].use && !strcmp(j->r[m].job, j->r[i].job);
        if (k > best_n || (k == best_n && best && !strcmp(j->r[i].job, job_base_name(j->folder))))
            best = j->r[i].job, best_n = k;
    }
    return best;
}

void job_choose_ranks(job_report *j)
{
    /* Forked children of ranks (DataLoader workers) are no ranks: counted with their rank. */
    for (size_t i = 0; i < j->n; i++) {
        if (j->r[i].use && j->r[i].parent_pid > 0) {
            j->r[i].use = 0;
            j->r[i].worker = 1; /* counted below */
        }
    }
    const char *job = majority_job(j);
    for (size_t i = 0; i < j->n; i++) {
        rank_in *r = &j->r[i];
        if (!r->use)
            continue;
        if (!r->job[0] || r->rank < 0) {
            job_warn(j, "%s: not a rank of a job (no job or rank recorded): left out",
                     job_base_name(r->folder));
            r->use = 0;
        } else if (job && strcmp(r->job, job) != 0) {
            job_warn(j, "%s: rank %ld of another job (%s, not %s): left out",
                     job_base_name(r->folder), r->rank, r->job, job);
            r->use = 0;
        }
    }
    /* One folder per rank: the one that started last (an earlier run of the job under the same
     * name left the others). */
    for (size_t i = 0; i < j->n; i++) {
        for (size_t k = 0; k < j->n; k++) {
            rank_in *a = &j->r[i], *b = &j->r[k];
            if (i == k || !a->use || !b->use || a->rank != b->rank)
                continue;
            rank_in *old = a->origin_wall_us < b->origin_wall_us ? a : b;
            rank_in *keep = old == a ? b : a;
            job_warn(j,
                     "%s: a second folder of rank %ld (%s started later): left out, as an earlier "
                     "run of the job",
                     job_base_name(old->folder), old->rank, job_base_name(keep->folder));
            old->use = 0;
        }
    }
    qsort(j->r, j->n, sizeof *j->r, by_rank);
    for (size_t i = 0; i < j->n && j->r[i].use; i++)
        if (j->r[i].world_size > j->world_size)
            j->world_size = j->r[i].world_size;
    for (size_t w = 0; w < j->n; w++) {
        if (!j->r[w].worker)
            continue;
        for (size_t i = 0; i < j->n && j->r[i].use; i++)
            if (j->r[i].pid == j->r[w].parent_pid)
                j->r[i].workers++, j->workers++;
    }
    /* Ranks the world size promises that no folder holds. */
    if (j->world_size > 0) {
        size_t i = 0;
        long missing = 0, first = -1;
        for (long want = 0; want < j->world_size; want++) {
            while (i < j->n && j->r[i].use && j->r[i].rank < want)
                i++;
            if (!(i < j->n && j->r[i].use && j->r[i].rank == want)) {
                if (!missing++)
                    first = want;
            }
        }
        if (missing == 1)
            job_warn(j, "rank %ld of %ld is missing: no run folder of it here", first,
                     j->world_size);
        else if (missing > 1)
            job_warn(j,
                     "%ld of %ld ranks are missing (the first: rank %ld): no run folders of them "
                     "here",
                     missing, j->world_size, first);
    }
}

/* ---- The verdict ---------------------------------------------------------------------------- */
