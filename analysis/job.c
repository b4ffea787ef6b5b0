/* job: the job report, merged from the ranks' reports (job.h).
 *
 * Three passes over what the ranks' analyses wrote, none over events:
 * - each rank's summary.json (small): who it is (job, rank, host, pid), its clock, its damage;
 *   the ranks that can be used are chosen (one job, one folder per rank, the newest of a rank's
 *   duplicates) and sorted by rank;
 * - each rank's step_trace.csv, streamed: its per-step rows go to job_step_trace.csv in rank
 *   order, its averages are summed, and per step number the slowest and fastest rank are kept
 *   (arrays indexed by step number, not by rank: memory grows with the steps, not the ranks),
 *   and its steps' spans;
 * - each rank's timeline files, streamed line by line into one Chrome trace: each rank's
 *   processes renumbered (rank R's pid p becomes (R + 1) * 1000 + p) and renamed ("rank R:
 *   ..."), its times moved onto one clock (each rank's wall clock at its start), within its
 *   share of the limit, chosen by its steps (timeline_pick: the slowest whole first) when it may
 *   not all fit: a pass to weigh, then one to write.
 *
 * A rank's "busy" time in a step is the step minus the time it waited in communication: what it
 * spent on its own work (data, compute, tail). The ranks of a synchronous job have the same step
 * times (each waits for the slowest in its collectives), so the slowest rank is the one with the
 * most busy time, and the others' waiting is where the job loses time. */
#include "job.h"

#include "index_map.h"
#include "model.h"
#include "report.h"
#include "timeline.h"

#include <cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* What a rank's report files may hold (README "The job report"): a file past its size is
 * refused, a line past REPORT_MAX_LINE_BYTES skipped; summary.json is kilobytes, a step row about
 * 200 bytes, and report_run writes at most --timeline-limit MiB of timeline (500 by default). */
#define MAX_SUMMARY_BYTES    (64ull << 20)
#define MAX_STEP_TRACE_BYTES (1ull << 30)
#define MAX_TIMELINE_BYTES   (4ull << 30)
#define MAX_ALIGNED_STEPS    (1u << 22) /* step numbers aligned; rows past them are counted */
#define MAX_WARNINGS         64         /* kept one by one; the rest counted */
#define PID_STRIDE           1000       /* rank R's trace pid p becomes (R + 1) * PID_STRIDE + p */

void job_options_init(job_options *o)
{
    memset(o, 0, sizeof *o);
    o->timeline_limit_mb = -1;
}

/* The merge writes a rank's events a few bytes longer (a pid of up to 7 digits, a time from the
 * job's origin, "rank R: " before a process's name): a rank writes this much of its share. */
#define SHARE_SLACK 0.9

double job_timeline_share_mb(double limit_mb, int ranks)
{
    if (limit_mb < 0)
        limit_mb = REPORT_TIMELINE_LIMIT_MB;
    return ranks > 0 ? limit_mb / ranks * SHARE_SLACK : 0;
}

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

typedef struct rank_in {
    char *folder;
    char job[64], host[64], process[64];
    long rank, local_rank, world_size;
    long pid, parent_pid;  /* parent_pid: a forked child's session (a worker), else 0 */
    int worker;            /* such a child's session: counted with its rank, never merged */
    uint32_t workers;      /* forked children of this rank with sessions of their own */
    double origin_wall_us; /* the rank's time origin on the wall clock, microseconds */
    double lost, bytes_skipped, chunks_skipped;
    double avg_comm_us; /* communication in flight per step, waited for or not (its summary) */
    int use;            /* merged; 0: left out (a warning says why) */
    /* How its recording ended: "finished" (its session closed), "unfinished" (a collection
     * window with no stop: still running, or killed before it could stop), or "ended" (the
     * process died without closing its session: ended_why, as its recovery noted it). */
    const char *state;
    char ended_why[4 * 63 + 1]; /* clean text */

    /* From step_trace.csv. */
    uint64_t steps, last_step;
    double sum_total, sum_interval, sum_fpbp, sum_tail, sum_compute, sum_wait, sum_eval;
    /* Its communication wait was measured: the report has the column and the rank recorded
     * communication (without it a wait cannot be seen, and 0 means nothing). */
    int have_wait;

    /* Its timeline: events merged, and left out (by its own analysis's limit, from its summary,
     * and by its share of the job's). */
    uint64_t tl_events, tl_left_out;
    /* Its steps' spans on its own clock (step_trace.csv's begin_us, end_us): which of its
     * timeline's events each step holds (timeline_pick). */
    step_span *spans;
    size_t nspans, cap_spans;
} rank_in;

struct job_report {
    char *folder, *dir;
    rank_in *r;
    size_t n;
    char **warn;
    size_t nwarn, warn_dropped;
    long world_size;
    uint64_t aligned_steps; /* steps that two ranks or more have */
    double sum_skew, max_skew;
    uint64_t max_skew_step;
    job_straggler *strag;
    size_t nstrag;
    int no_wait; /* ranks of a job of several whose communication wait was not measured */
    uint64_t timeline_events, timeline_left_out, timeline_bytes;
    uint32_t timeline_ranks;
    uint64_t steps_first, steps_last; /* the timeline's step window; steps_last 0: none */
    uint32_t workers;                 /* the ranks' forked children with sessions */
    uint64_t long_lines; /* lines of the ranks' files past REPORT_MAX_LINE_BYTES, passed over */
};

static void warn(job_report *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(job_report *j, const char *fmt, ...)
{
    if (j->nwarn >= MAX_WARNINGS) {
        j->warn_dropped++;
        return;
    }
    char **w = realloc(j->warn, (j->nwarn + 1) * sizeof *w);
    if (!w)
        return;
    j->warn = w;
    va_list ap;
    va_start(ap, fmt);
    char *line = NULL;
    int len = vasprintf(&line, fmt, ap);
    va_end(ap);
    if (len < 0)
        return;
    /* Warnings name folders and say what ranks recorded: one clean line wherever they go. */
    char *clean = report_clean_dup(line);
    if (clean)
        j->warn[j->nwarn++] = clean;
    free(line);
}

/* Reads the rank's summary.json: 0, or -1 with why. */
static int load_summary(rank_in *r, char *why, size_t cap)
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
static void warn_unfinished(job_report *j, size_t used)
{
    for (size_t i = 0; i < used; i++) {
        const rank_in *r = &j->r[i];
        char last[40] = "no step";
        if (r->steps)
            snprintf(last, sizeof last, "its last step %" PRIu64, r->last_step);
        if (!strcmp(r->state, "ended"))
            warn(j,
                 "rank %ld (pid %ld) died without closing its session (%s), %s: its last events "
                 "are what its shared memory held",
                 r->rank, r->pid, r->ended_why, last);
        else if (!strcmp(r->state, "unfinished"))
            warn(j,
                 "rank %ld (pid %ld) did not finish: its recording ends inside a collection "
                 "window, %s (killed, or still running)",
                 r->rank, r->pid, last);
    }
}

/* ---- CSV ------------------------------------------------------------------------------------ */

/* text (at most cap bytes, NUL-terminated or not) as one CSV field, made clean text first. */
static void csv_text(FILE *f, const char *text, size_t cap)
{
    size_t len = strnlen(text, cap);
    char *c = malloc(4 * len + 1);
    if (!c)
        return;
    text_clean(text, len, c, 1);
    report_csv_field(f, c);
    free(c);
}

/* Per step number: the slowest and fastest rank by busy time. */
typedef struct step_agg {
    uint64_t step;
    uint32_t ranks;
    uint32_t slowest, fastest; /* rank numbers */
    double max_busy, min_busy, max_total;
} step_agg;

/* The per-step aggregates in the order their step numbers first came, found through a map: the
 * memory grows with the rows read, whatever numbers they carry. */
typedef struct merge {
    job_report *j;
    FILE *trace;     /* job_step_trace.csv */
    index_map steps; /* step number -> index in agg */
    step_agg *agg;
    size_t nagg, cap;
    uint64_t unaligned; /* rows past MAX_ALIGNED_STEPS step numbers */
} merge;

static step_agg *agg_at(merge *m, uint64_t step)
{
    uint32_t i = index_map_find(&m->steps, step);
    if (i != UINT32_MAX)
        return &m->agg[i];
    if (m->nagg >= MAX_ALIGNED_STEPS) {
        m->unaligned++;
        return NULL;
    }
    if (m->nagg == m->cap) {
        size_t want = m->cap ? 2 * m->cap : 1024;
        step_agg *a = realloc(m->agg, want * sizeof *a);
        if (!a)
            return NULL;
        m->agg = a;
        m->cap = want;
    }
    if (index_map_get(&m->steps, step, (uint32_t)m->nagg, NULL) == UINT32_MAX)
        return NULL;
    step_agg *a = &m->agg[m->nagg++];
    memset(a, 0, sizeof *a);
    a->step = step;
    return a;
}

static void merge_free(merge *m)
{
    index_map_free(&m->steps);
    free(m->agg);
}

/* Streams the rank's step_trace.csv: its rows into job_step_trace.csv, its sums, the per-step
 * aggregates. 0, or -1 with why. */
static int load_steps(merge *m, rank_in *r, char *why, size_t cap)
{
    report_step_reader sr;
    if (report_step_trace_open(&sr, r->folder, MAX_STEP_TRACE_BYTES, &m->j->long_lines, why, cap) <
        0)
        return -1;
    const int *col = sr.col;
    r->have_wait = col[STEP_COL_COMM_WAIT] >= 0 && r->avg_comm_us > 0;
    double v[STEP_COL__COUNT];
    while (report_step_trace_next(&sr, v)) {
        /* A value that is not a number is 0 (the reader skips rows whose step or total is not). */
        for (int k = 0; k < STEP_COL__COUNT; k++)
            v[k] = fmax(v[k], 0);
        double wait = v[STEP_COL_COMM_WAIT], total = v[STEP_COL_TOTAL];
        double compute =
            col[STEP_COL_COMPUTE] >= 0 ? v[STEP_COL_COMPUTE] : fmax(0, v[STEP_COL_FPBP] - wait);
        double busy = fmax(0, total - wait);
        uint64_t step = (uint64_t)v[STEP_COL_STEP];
        r->steps++;
        if (step > r->last_step)
            r->last_step = step;
        r->sum_total += total;
        r->sum_interval += v[STEP_COL_INTERVAL];
        r->sum_fpbp += v[STEP_COL_FPBP];
        r->sum_tail += v[STEP_COL_TAIL];
        r->sum_compute += compute;
        r->sum_wait += wait;
        r->sum_eval += v[STEP_COL_EVAL];
        if (col[STEP_COL_BEGIN] >= 0 && col[STEP_COL_END] >= 0)
            step_spans_add(&r->spans, &r->nspans, &r->cap_spans,
                           (step_span){step, llround(v[STEP_COL_BEGIN] * 1000),
                                       llround(v[STEP_COL_END] * 1000)});
        if (m->trace)
            fprintf(m->trace, "%.0f,%ld,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f\n",
                    v[STEP_COL_STEP], r->rank, total, v[STEP_COL_INTERVAL], v[STEP_COL_FPBP],
                    compute, wait, v[STEP_COL_TAIL], v[STEP_COL_EVAL], busy);
        step_agg *a = agg_at(m, step);
        if (!a)
            continue;
        if (!a->ranks || busy > a->max_busy)
            a->max_busy = busy, a->slowest = (uint32_t)r->rank;
        if (!a->ranks || busy < a->min_busy)
            a->min_busy = busy, a->fastest = (uint32_t)r->rank;
        if (total > a->max_total)
            a->max_total = total;
        a->ranks++;
    }
    report_step_trace_close(&sr);
    return 0;
}

/* ---- Choosing the ranks ------------------------------------------------------------------- */

static int by_rank(const void *a, const void *b)
{
    const rank_in *x = a, *y = b;
    if (x->use != y->use)
        return y->use - x->use; /* used first */
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return strcmp(x->folder, y->folder);
}

static const char *base_name(const char *path)
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
        if (k > best_n || (k == best_n && best && !strcmp(j->r[i].job, base_name(j->folder))))
            best = j->r[i].job, best_n = k;
    }
    return best;
}

static void choose_ranks(job_report *j)
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
            warn(j, "%s: not a rank of a job (no job or rank recorded): left out",
                 base_name(r->folder));
            r->use = 0;
        } else if (job && strcmp(r->job, job) != 0) {
            warn(j, "%s: rank %ld of another job (%s, not %s): left out", base_name(r->folder),
                 r->rank, r->job, job);
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
            warn(j,
                 "%s: a second folder of rank %ld (%s started later): left out, as an earlier "
                 "run of the job",
                 base_name(old->folder), old->rank, base_name(keep->folder));
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
            warn(j, "rank %ld of %ld is missing: no run folder of it here", first, j->world_size);
        else if (missing > 1)
            warn(j,
                 "%ld of %ld ranks are missing (the first: rank %ld): no run folders of them "
                 "here",
                 missing, j->world_size, first);
    }
}

/* ---- The verdict ---------------------------------------------------------------------------- */

static double avg(double sum, uint64_t n)
{
    return n ? sum / (double)n : 0;
}

static double busy_of(const rank_in *r)
{
    return avg(r->sum_total - r->sum_wait, r->steps);
}

static int by_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double avg_busy(const job_rank_avg *r)
{
    return fmax(0, r->total_us - r->wait_us);
}

/* The typical rank is the lower median of the busy times (the fastest of two, the middle of
 * three), so that one slow rank never moves it; the rank nearest to it is the base that a
 * straggler's parts are compared with, to name the part that grew. */
size_t job_stragglers(const job_rank_avg *r, size_t n, job_straggler *out)
{
    size_t with = 0;
    for (size_t i = 0; i < n; i++)
        with += r[i].steps > 0;
    if (with < 2)
        return 0;
    double *busy = malloc(with * sizeof *busy);
    if (!busy)
        return 0;
    for (size_t i = 0, k = 0; i < n; i++)
        if (r[i].steps)
            busy[k++] = avg_busy(&r[i]);
    qsort(busy, with, sizeof *busy, by_double);
    double typical = busy[(with - 1) / 2];
    free(busy);
    const job_rank_avg *base = NULL;
    for (size_t i = 0; i < n; i++)
        if (r[i].steps &&
            (!base || fabs(avg_busy(&r[i]) - typical) < fabs(avg_busy(base) - typical)))
            base = &r[i];
    double typical_step = base->total_us;
    size_t found = 0;
    for (size_t i = 0; i < n; i++) {
        double excess = avg_busy(&r[i]) - typical;
        if (!r[i].steps || excess < JOB_STRAGGLER_MIN_US ||
            excess < JOB_STRAGGLER_SHARE * fmax(typical_step, typical))
            continue;
        double d_interval = r[i].interval_us - base->interval_us;
        double d_compute = r[i].compute_us - base->compute_us;
        double d_tail = r[i].tail_us - base->tail_us;
        const char *cause = "compute";
        if (d_interval >= d_compute && d_interval >= d_tail)
            cause = "data";
        else if (d_tail > d_compute)
            cause = "tail";
        double others = 0;
        for (size_t k = 0; k < n; k++)
            if (k != i && r[k].steps)
                others += r[k].wait_us;
        out[found++] = (job_straggler){.idx = i,
                                       .cause = cause,
                                       .excess_us = excess,
                                       .others_wait_us = others / (double)(with - 1)};
    }
    return found;
}

void job_unknown_verdict(char *buf, size_t cap, size_t unmeasured)
{
    snprintf(buf, cap,
             "stragglers: unknown: %zu rank%s recorded no communication, so waiting for another "
             "rank cannot be told from work",
             unmeasured, unmeasured == 1 ? "" : "s");
}

/* Stragglers among the merged ranks, by job_stragglers over their averages. */
static void find_stragglers(job_report *j, size_t used)
{
    job_rank_avg *v = calloc(used ? used : 1, sizeof *v);
    j->strag = calloc(used ? used : 1, sizeof *j->strag);
    if (!v || !j->strag) {
        free(v);
        return;
    }
    for (size_t i = 0; i < used; i++) {
        const rank_in *r = &j->r[i];
        v[i] = (job_rank_avg){.steps = r->steps,
                              .total_us = avg(r->sum_total, r->steps),
                              .interval_us = avg(r->sum_interval, r->steps),
                              .compute_us = avg(r->sum_compute, r->steps),
                              .wait_us = avg(r->sum_wait, r->steps),
                              .tail_us = avg(r->sum_tail, r->steps)};
    }
    j->nstrag = job_stragglers(v, used, j->strag);
    free(v);
}

/* ---- The merged timeline ------------------------------------------------------------------- */

/* The first top-level key `key` (",\"ts\":") of an event line the timeline writer wrote,
 * before its "args": the text after the key, or NULL. A key's quotes cannot be in a string
 * (there a quote is escaped), and the writer puts "ts" and "pid" before "args". */
static const char *key_at(const char *line, size_t len, const char *key)
{
    size_t kl = strlen(key);
    const char *end = line + len;
    for (const char *p = line; (p = memchr(p, ',', (size_t)(end - p))); p++) {
        size_t left = (size_t)(end - p);
        if (left < 2 || p[1] != '"')
            continue;
        if (left >= 8 && !memcmp(p, ",\"args\":", 8))
            return NULL;
        if (left >= kl && !memcmp(p, key, kl))
            return p + kl;
    }
    return NULL;
}

/* Writes v (thousandths) as "[-]units.ddd" at o: the end. */
static char *put_thousandths(char *o, int64_t v)
{
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    if (v < 0)
        *o++ = '-';
    o = timeline_put_u64(o, u / 1000);
    *o++ = '.';
    *o++ = (char)('0' + u / 100 % 10);
    *o++ = (char)('0' + u / 10 % 10);
    *o++ = (char)('0' + u % 10);
    return o;
}

/* move_event for the lines that are most of a timeline, as its writer prints them: an event with
 * a "ts" of three decimals and a whole "pid", both before its "args", no process name (a line
 * that may name one, beginning {"name":"process_name", is left to the parse). Rewrites them as
 * text into out (room for len + 64 bytes): the length, or 0 for any other line. */
static size_t move_event_fast(const char *line, size_t len, const rank_in *r, int64_t shift_ms3,
                              char *out)
{
    static const char pname[] = "{\"name\":\"process_name\"";
    const char *end = line + len;
    if (len >= sizeof pname - 1 && !memcmp(line, pname, sizeof pname - 1))
        return 0;
    const char *ts = key_at(line, len, ",\"ts\":"), *pid = key_at(line, len, ",\"pid\":");
    if (!ts || !pid || ts > pid)
        return 0;
    int64_t t, p;
    const char *ts_end = timeline_thousandths(ts, end, &t),
               *pid_end = timeline_thousandths(pid, end, &p);
    if (!ts_end || !pid_end || memchr(pid, '.', (size_t)(pid_end - pid)) || ts_end > pid)
        return 0;
    t += shift_ms3;
    p = p / 1000 + (int64_t)(r->rank + 1) * PID_STRIDE;
    char *o = out;
    memcpy(o, line, (size_t)(ts - line));
    o = put_thousandths(o + (ts - line), t);
    memcpy(o, ts_end, (size_t)(pid - ts_end));
    o = timeline_put_u64(o + (pid - ts_end), (uint64_t)p);
    memcpy(o, pid_end, (size_t)(end - pid_end));
    return (size_t)(o - out) + (size_t)(end - pid_end);
}

/* Moves one trace event line of rank r into the job's trace: its pid renumbered, a process's
 * name prefixed with the rank, its time moved by shift_us. Returns the text to write, in *buf
 * (grown as needed, *cap its size) or malloc'd in *owned, with its length; NULL for a line that
 * is no event. */
static const char *move_event(const char *line, size_t len, const rank_in *r, double shift_us,
                              char **buf, size_t *cap, char **owned, size_t *out_len)
{
    *owned = NULL;
    while (len && (line[len - 1] == '\n' || line[len - 1] == ',' || line[len - 1] == '\r'))
        len--;
    if (!len || line[0] != '{')
        return NULL;
    if (*cap < len + 64) {
        char *b = realloc(*buf, len + 64);
        if (b) {
            *buf = b;
            *cap = len + 64;
        }
    }
    if (*cap >= len + 64 &&
        (*out_len = move_event_fast(line, len, r, llround(shift_us * 1000), *buf)))
        return *buf;
    cJSON *ev = cJSON_ParseWithLength(line, len);
    if (!cJSON_IsObject(ev)) {
        cJSON_Delete(ev);
        return NULL;
    }
    cJSON *pid = cJSON_GetObjectItemCaseSensitive(ev, "pid");
    if (cJSON_IsNumber(pid))
        cJSON_SetNumberValue(pid, (double)(r->rank + 1) * PID_STRIDE + pid->valuedouble);
    cJSON *ts = cJSON_GetObjectItemCaseSensitive(ev, "ts");
    if (cJSON_IsNumber(ts)) {
        /* Three decimals, as the ranks' own files: a microsecond time with nanoseconds. */
        char t[64];
        snprintf(t, sizeof t, "%.3f", ts->valuedouble + shift_us);
        cJSON_ReplaceItemInObjectCaseSensitive(ev, "ts", cJSON_CreateRaw(t));
    }
    const cJSON *ph = cJSON_GetObjectItemCaseSensitive(ev, "ph");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(ev, "name");
    cJSON *args = cJSON_GetObjectItemCaseSensitive(ev, "args");
    if (cJSON_IsString(ph) && !strcmp(ph->valuestring, "M") && cJSON_IsString(name) &&
        !strcmp(name->valuestring, "process_name") && cJSON_IsObject(args)) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(args, "name");
        char *renamed = NULL;
        if (asprintf(&renamed, "rank %ld: %s", r->rank, cJSON_IsString(n) ? n->valuestring : "") >=
            0) {
            cJSON_ReplaceItemInObjectCaseSensitive(args, "name", cJSON_CreateString(renamed));
            free(renamed);
        }
    }
    *owned = cJSON_PrintUnformatted(ev);
    cJSON_Delete(ev);
    *out_len = *owned ? strlen(*owned) : 0;
    return *owned;
}

/* The rank's timeline files in order: timeline.json, timeline-1.json, ... NULL after the last
 * one, and for one that cannot be read (a warning says why, when say). */
static FILE *open_timeline(job_report *j, const rank_in *r, unsigned k, int say)
{
    char name[64], why[512];
    timeline_file_name(k, name, sizeof name);
    uint64_t size;
    FILE *f = report_file_read(r->folder, name, MAX_TIMELINE_BYTES, &size, why, sizeof why);
    if (!f && errno != ENOENT && say)
        warn(j, "rank %ld (%s): %s: its timeline is merged up to there", r->rank,
             base_name(r->folder), why);
    return f;
}

/* Bytes a moved event may grow by (its pid renumbered, its ts from the job's origin): the
 * choice of a rank's events weighs each this much longer than the rank wrote it. */
#define MOVE_GROWTH 24

typedef int (*event_fn)(void *ctx, const char *ev, size_t len);

/* Each line of one timeline file to fn (ev NULL once fn has said stop: counted, past the end).
 * The file is read mapped, or else line by line. */
static void each_file_event(FILE *f, uint64_t size, event_fn fn, void *ctx, int *go,
                            uint64_t *long_lines, char **line, size_t *lcap)
{
    void *map = size ? mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fileno(f), 0) : MAP_FAILED;
    const char *at = map == MAP_FAILED ? NULL : map, *end = at ? at + size : NULL, *text;
    ssize_t len;
    while ((len = at ? report_next_line(&at, end, &text, long_lines)
                     : report_read_line(f, line, lcap, long_lines)) > 0) {
        if (!at)
            text = *line;
        size_t el = timeline_event_text(text, (size_t)len);
        if (el && *go)
            *go = fn(ctx, text, el);
        else if (el)
            fn(ctx, NULL, el);
    }
    if (map != MAP_FAILED)
        munmap(map, (size_t)size);
}

/* One pass over rank r's timeline files: each event line (its text, length) to fn, which
 * returns 0 to stop. The files' size in all. */
static uint64_t each_rank_event(job_report *j, rank_in *r, int say, event_fn fn, void *ctx,
                                char **line, size_t *lcap)
{
    uint64_t size = 0, quiet_long = 0;
    int go = 1;
    for (unsigned k = 0;; k++) {
        FILE *f = open_timeline(j, r, k, say);
        if (!f)
            break;
        struct stat st;
        uint64_t fsize = fstat(fileno(f), &st) == 0 ? (uint64_t)st.st_size : 0;
        size += fsize;
        if (fn)
            each_file_event(f, fsize, fn, ctx, &go, say ? &j->long_lines : &quiet_long, line, lcap);
        fclose(f);
    }
    return size;
}

typedef struct rank_merge {
    job_report *j;
    rank_in *r;
    timeline_pick *pick;
    FILE *out;
    uint64_t budget, bytes;
    double shift_us;
    int *first, any;
    char *buf; /* a moved event's text */
    size_t cap;
} rank_merge;

static int weigh_event(void *ctx, const char *ev, size_t len)
{
    timeline_pick_weigh(((rank_merge *)ctx)->pick, ev, len, MOVE_GROWTH);
    return 1;
}

/* Moves one event into the job's timeline when the choice takes it and it fits; past the
 * budget (ev NULL) the rest are counted as left out. */
static int merge_event(void *ctx, const char *ev, size_t len)
{
    rank_merge *m = ctx;
    m->any = 1;
    if (!ev || (m->pick && !timeline_pick_take(m->pick, ev, len, MOVE_GROWTH))) {
        m->r->tl_left_out++;
        return 1;
    }
    char *owned;
    size_t ml;
    const char *moved = move_event(ev, len, m->r, m->shift_us, &m->buf, &m->cap, &owned, &ml);
    if (!moved)
        return 1;
    size_t el = ml + 2;
    int fits = m->bytes + el <= m->budget;
    if (fits) {
        fwrite_unlocked(*m->first ? "\n" : ",\n", 1, *m->first ? 1 : 2, m->out);
        fwrite_unlocked(moved, 1, ml, m->out);
        m->bytes += el;
        *m->first = 0;
        m->r->tl_events++;
    } else {
        m->r->tl_left_out++;
    }
    free(owned);
    return fits;
}

/* Rank r's timeline files into out, up to budget bytes (lines with their separators), chosen by
 * steps (timeline_pick: its slowest steps whole first) when they may not all fit or a step
 * window is given; what is not taken is counted as left out. Returns the bytes written. */
static uint64_t merge_rank_timeline(job_report *j, rank_in *r, FILE *out, uint64_t budget,
                                    double shift_us, const job_options *o, int *first, char **line,
                                    size_t *lcap)
{
    rank_merge m = {
        .j = j, .r = r, .out = out, .budget = budget, .shift_us = shift_us, .first = first};
    int windowed = o->steps_last > 0;
    uint64_t size = each_rank_event(j, r, 0, NULL, NULL, line, lcap);
    /* A rank's own analysis wrote its share within SHARE_SLACK of it, chosen the same way:
     * taken as it is. Larger files (a full report, a share made for another limit) are chosen
     * from. */
    if (windowed || (double)size > SHARE_SLACK * (double)budget) {
        m.pick = timeline_pick_create(r->spans, r->nspans, o->steps_first,
                                      windowed ? o->steps_last : UINT64_MAX);
        if (m.pick) {
            each_rank_event(j, r, 0, weigh_event, &m, line, lcap);
            timeline_pick_plan(m.pick, budget);
        }
    }
    each_rank_event(j, r, 1, merge_event, &m, line, lcap);
    timeline_pick_free(m.pick);
    free(m.buf);
    j->timeline_ranks += m.any || size > 0;
    return m.bytes;
}

/* A straggler's share of the job's timeline is this many times another rank's. */
#define STRAGGLER_SHARE 2

static int is_straggler(const job_report *j, size_t i)
{
    for (size_t k = 0; k < j->nstrag; k++)
        if (j->strag[k].idx == i)
            return 1;
    return 0;
}

/* The job's timeline: each rank's, in rank order, within its share of the limit: the limit left
 * shared by the ranks still to come, a straggler's share STRAGGLER_SHARE times the others' (so
 * what a rank leaves unused goes to the ranks after it, the straggler's weight the larger). */
static int write_timeline(job_report *j, report_dir *d, size_t used, uint64_t limit,
                          const job_options *o)
{
    FILE *out = report_dir_file(d, "timeline.json");
    if (!out)
        return -1;
    double origin = 0;
    uint64_t weights = 0;
    for (size_t i = 0; i < used; i++) {
        if (!i || j->r[i].origin_wall_us < origin)
            origin = j->r[i].origin_wall_us;
        weights += is_straggler(j, i) ? STRAGGLER_SHARE : 1;
    }
    static const char head[] = "{\"traceEvents\":[", tail[] = "\n]}\n";
    uint64_t bytes = sizeof head - 1 + sizeof tail - 1;
    fputs(head, out);
    int first = 1;
    char *line = NULL;
    size_t lcap = 0;
    for (size_t i = 0; i < used; i++) {
        rank_in *r = &j->r[i];
        uint64_t left = limit > bytes ? limit - bytes : 0,
                 w = is_straggler(j, i) ? STRAGGLER_SHARE : 1;
        bytes +=
            merge_rank_timeline(j, r, out, (uint64_t)((double)left * (double)w / (double)weights),
                                r->origin_wall_us - origin, o, &first, &line, &lcap);
        weights -= w;
        j->timeline_events += r->tl_events;
        j->timeline_left_out += r->tl_left_out;
    }
    free(line);
    fputs(tail, out);
    j->timeline_bytes = bytes;
    return report_dir_close_file(d, out, "timeline.json");
}

/* Names the ranks whose timelines lost events to the limit, in one warning. */
static void warn_timeline_cut(job_report *j, size_t used, double mb, const job_options *o)
{
    size_t cut = 0;
    char names[160] = "";
    size_t nl = 0;
    for (size_t i = 0; i < used; i++) {
        if (!j->r[i].tl_left_out)
            continue;
        if (nl < sizeof names - 24) {
            int w = snprintf(names + nl, sizeof names - nl, "%s%ld", cut ? ", " : "", j->r[i].rank);
            nl += w > 0 ? (size_t)w : 0;
        } else if (!strstr(names, "...")) {
            snprintf(names + nl, sizeof names - nl, ", ...");
        }
        cut++;
    }
    char window[80] = "";
    if (o->steps_last)
        snprintf(window, sizeof window, " and the step window (--steps %" PRIu64 "-%" PRIu64 ")",
                 o->steps_first, o->steps_last);
    if (cut)
        warn(j,
             "the timeline limit (%.6g MiB, shared by %zu ranks)%s left out %" PRIu64
             " events of %zu rank%s (%s; each rank's count is ranks[].timeline_left_out in "
             "summary.json): %s",
             mb, used, window, j->timeline_left_out, cut, cut == 1 ? "" : "s", names,
             o->steps_last ? "a larger --timeline-limit or a wider --steps keeps more"
                           : "a larger --timeline-limit keeps more");
}

/* ---- Files --------------------------------------------------------------------------------- */

static void write_ranks_csv(job_report *j, report_dir *d, size_t used)
{
    FILE *f = report_dir_file(d, "ranks.csv");
    if (!f)
        return;
    fputs("rank,local_rank,host,pid,steps,avg_step_us,avg_interval_us,avg_fpbp_us,avg_compute_us,"
          "avg_comm_wait_us,avg_tail_us,avg_eval_us,avg_busy_us,events_lost,bytes_skipped,"
          "straggler,"
          "workers,run_folder,state,last_step\n",
          f);
    for (size_t i = 0; i < used; i++) {
        const rank_in *r = &j->r[i];
        const char *cause = "";
        for (size_t k = 0; k < j->nstrag; k++)
            if (j->strag[k].idx == i)
                cause = j->strag[k].cause;
        fprintf(f, "%ld,%ld,", r->rank, r->local_rank);
        csv_text(f, r->host, sizeof r->host);
        fprintf(f, ",%ld,%" PRIu64 ",%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.0f,%.0f,%s,", r->pid,
                r->steps, avg(r->sum_total, r->steps), avg(r->sum_interval, r->steps),
                avg(r->sum_fpbp, r->steps), avg(r->sum_compute, r->steps),
                avg(r->sum_wait, r->steps), avg(r->sum_tail, r->steps), avg(r->sum_eval, r->steps),
                busy_of(r), r->lost, r->bytes_skipped, cause);
        fprintf(f, "%u,", r->workers);
        csv_text(f, base_name(r->folder), 4096);
        fprintf(f, ",%s,%" PRIu64 "\n", r->state, r->last_step);
    }
    report_dir_close_file(d, f, "ranks.csv");
}

static int by_step(const void *a, const void *b)
{
    const step_agg *x = a, *y = b;
    return (x->step > y->step) - (x->step < y->step);
}

/* job_steps.csv, by step number (the aggregates are sorted: the map is of no use after). */
static void write_steps_csv(job_report *j, report_dir *d, merge *m)
{
    FILE *f = report_dir_file(d, "job_steps.csv");
    if (!f)
        return;
    fputs("step,ranks,slowest_rank,slowest_busy_us,fastest_rank,fastest_busy_us,skew_us,"
          "max_step_us\n",
          f);
    if (m->nagg)
        qsort(m->agg, m->nagg, sizeof *m->agg, by_step);
    for (size_t s = 0; s < m->nagg; s++) {
        const step_agg *a = &m->agg[s];
        double skew = a->max_busy - a->min_busy;
        fprintf(f, "%" PRIu64 ",%u,%u,%.3f,%u,%.3f,%.3f,%.3f\n", a->step, a->ranks, a->slowest,
                a->max_busy, a->fastest, a->min_busy, skew, a->max_total);
        if (a->ranks < 2)
            continue;
        j->aligned_steps++;
        j->sum_skew += skew;
        if (skew > j->max_skew)
            j->max_skew = skew, j->max_skew_step = a->step;
    }
    report_dir_close_file(d, f, "job_steps.csv");
}

static const char *cause_text(const char *cause)
{
    if (!strcmp(cause, "data"))
        return "its step interval is longer: it waits for data (its input pipeline or "
               "DataLoader is slower)";
    if (!strcmp(cause, "tail"))
        return "its step tail is longer: work after the backward pass (optimizer, logging, "
               "checkpoints) takes longer on it";
    return "its computation is longer: its operators take longer (a slower device, more work, "
           "or CPU contention)";
}

/* ---- The cluster advisor ------------------------------------------------------------------ */

enum { MAX_JOB_ADVICE = 8 };

typedef struct job_advice {
    const char *kind;
    double weight; /* share of the typical step at stake, 0..1: most important first */
    char title[160];
    char text[640];
} job_advice;

static int by_weight(const void *a, const void *b)
{
    const job_advice *x = a, *y = b;
    return (x->weight < y->weight) - (x->weight > y->weight);
}

/* The job's suggestions, most important first: each straggler (what to look at on that rank),
 * communication that every rank waits for (no straggler to blame), and the ranks that could not
 * be merged. */
static size_t job_advise(const job_report *j, size_t used, job_advice *adv)
{
    size_t n = 0;
    double steps = 0, waits = 0;
    for (size_t i = 0; i < used; i++) {
        steps += avg(j->r[i].sum_total, j->r[i].steps);
        waits += avg(j->r[i].sum_wait, j->r[i].steps);
    }
    double step = used ? steps / (double)used : 0, wait = used ? waits / (double)used : 0;
    for (size_t k = 0; k < j->nstrag && n < MAX_JOB_ADVICE; k++) {
        const job_straggler *g = &j->strag[k];
        const rank_in *r = &j->r[g->idx];
        job_advice *a = &adv[n++];
        a->kind = "straggler";
        a->weight = step > 0 ? fmin(1, g->excess_us / step) : 0;
        snprintf(a->title, sizeof a->title,
                 "Rank %ld is the straggler (%s): the others wait for it", r->rank, g->cause);
        const char *what =
            !strcmp(g->cause, "data")
                ? "its input arrives late: give its DataLoader more workers or prefetching, check "
                  "its host's disk and CPU (termsight analyse its run folder: data queues and CPU)"
            : !strcmp(g->cause, "tail")
                ? "it spends longer after the backward pass: look for rank-specific work there "
                  "(logging, checkpoints, evaluation on one rank) and move or spread it"
                : "its operators take longer: compare its operator table with another rank's "
                  "(a slower or busier device, CPU contention on its host, uneven work)";
        snprintf(a->text, sizeof a->text,
                 "Rank %ld (%s, pid %ld) works %.3f ms more per step than the typical rank, and "
                 "the others wait %.3f ms per step for it in communication: %s.",
                 r->rank, r->host, r->pid, g->excess_us / 1000, g->others_wait_us / 1000, what);
    }
    if (!j->nstrag && used >= 2 && step > 0 && wait > 0.2 * step && n < MAX_JOB_ADVICE) {
        job_advice *a = &adv[n++];
        a->kind = "communication";
        a->weight = wait / step;
        snprintf(a->title, sizeof a->title,
                 "Every rank waits in communication (%.0f %% of the step), none is a straggler",
                 100 * wait / step);
        snprintf(a->text, sizeof a->text,
                 "The ranks are balanced, yet each waits %.3f ms of its %.3f ms step with "
                 "communication in flight and nothing computing: the collectives themselves are "
                 "slow. Overlap them with computation (DDP buckets: bucket_cap_mb, "
                 "gradient_as_bucket_view), send less (mixed precision, gradient compression "
                 "hooks), or check the network between the hosts.",
                 wait / 1000, step / 1000);
    }
    if (j->nwarn && n < MAX_JOB_ADVICE) {
        job_advice *a = &adv[n++];
        a->kind = "incomplete";
        a->weight = 0;
        snprintf(a->title, sizeof a->title, "The job report is incomplete: %zu warning%s",
                 j->nwarn + j->warn_dropped, j->nwarn + j->warn_dropped == 1 ? "" : "s");
        snprintf(a->text, sizeof a->text,
                 "Ranks were left out or merged from partial data (see the warnings); a "
                 "straggler among the missing ranks cannot be seen.");
    }
    qsort(adv, n, sizeof *adv, by_weight);
    return n;
}

/* key: text from outside (a folder's name, what a rank recorded) in valid UTF-8 (report_json_text),
 * as the run's summary.json has it. */
static void json_text(cJSON *o, const char *key, const char *text)
{
    report_json_text(o, key, text, strlen(text));
}

static cJSON *summary_json(const job_report *j, size_t used)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *ver = cJSON_AddObjectToObject(root, "termsight");
    cJSON_AddStringToObject(ver, "version", TERMSIGHT_VERSION);
    cJSON_AddNumberToObject(ver, "report_format", REPORT_FORMAT);
    cJSON *job = cJSON_AddObjectToObject(root, "job");
    json_text(job, "id", used ? j->r[0].job : "");
    json_text(job, "folder", j->folder);
    if (j->world_size > 0)
        cJSON_AddNumberToObject(job, "world_size", (double)j->world_size);
    else
        cJSON_AddNullToObject(job, "world_size");
    cJSON_AddNumberToObject(job, "ranks_found", (double)used);

    cJSON *ranks = cJSON_AddArrayToObject(root, "ranks");
    for (size_t i = 0; i < used; i++) {
        const rank_in *r = &j->r[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "rank", (double)r->rank);
        if (r->local_rank >= 0)
            cJSON_AddNumberToObject(o, "local_rank", (double)r->local_rank);
        else
            cJSON_AddNullToObject(o, "local_rank");
        json_text(o, "host", r->host);
        cJSON_AddNumberToObject(o, "pid", (double)r->pid);
        json_text(o, "run_folder", r->folder);
        report_json_u64(o, "steps", r->steps);
        cJSON_AddNumberToObject(o, "avg_step_us", avg(r->sum_total, r->steps));
        cJSON_AddNumberToObject(o, "avg_interval_us", avg(r->sum_interval, r->steps));
        cJSON_AddNumberToObject(o, "avg_fpbp_us", avg(r->sum_fpbp, r->steps));
        cJSON_AddNumberToObject(o, "avg_compute_us", avg(r->sum_compute, r->steps));
        cJSON_AddNumberToObject(o, "avg_comm_wait_us", avg(r->sum_wait, r->steps));
        cJSON_AddNumberToObject(o, "avg_comm_us", r->avg_comm_us);
        cJSON_AddNumberToObject(o, "avg_tail_us", avg(r->sum_tail, r->steps));
        cJSON_AddNumberToObject(o, "avg_eval_us", avg(r->sum_eval, r->steps));
        cJSON_AddNumberToObject(o, "avg_busy_us", busy_of(r));
        cJSON_AddBoolToObject(o, "comm_wait_measured", r->have_wait);
        report_json_u64(o, "events_lost", (uint64_t)r->lost);
        report_json_u64(o, "bytes_skipped", (uint64_t)r->bytes_skipped);
        cJSON_AddNumberToObject(o, "workers", r->workers);
        cJSON_AddStringToObject(o, "state", r->state);
        report_json_u64(o, "last_step", r->last_step);
        report_json_u64(o, "timeline_events", r->tl_events);
        report_json_u64(o, "timeline_left_out", r->tl_left_out);
        if (r->ended_why[0])
            cJSON_AddStringToObject(o, "ended", r->ended_why);
        else
            cJSON_AddNullToObject(o, "ended");
        cJSON_AddItemToArray(ranks, o);
    }

    cJSON *st = cJSON_AddObjectToObject(root, "steps");
    report_json_u64(st, "aligned", j->aligned_steps);
    cJSON_AddNumberToObject(st, "avg_skew_us", avg(j->sum_skew, j->aligned_steps));
    cJSON_AddNumberToObject(st, "max_skew_us", j->max_skew);
    report_json_u64(st, "max_skew_step", j->max_skew_step);

    cJSON *sg = cJSON_AddArrayToObject(root, "stragglers");
    for (size_t k = 0; k < j->nstrag; k++) {
        const rank_in *r = &j->r[j->strag[k].idx];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "rank", (double)r->rank);
        json_text(o, "host", r->host);
        cJSON_AddStringToObject(o, "cause", j->strag[k].cause);
        cJSON_AddNumberToObject(o, "excess_us", j->strag[k].excess_us);
        cJSON_AddNumberToObject(o, "others_comm_wait_us", j->strag[k].others_wait_us);
        cJSON_AddStringToObject(o, "text", cause_text(j->strag[k].cause));
        cJSON_AddItemToArray(sg, o);
    }
    job_advice adv[MAX_JOB_ADVICE];
    size_t nadv = job_advise(j, used, adv);
    cJSON *ad = cJSON_AddArrayToObject(root, "advice");
    for (size_t k = 0; k < nadv; k++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "kind", adv[k].kind);
        cJSON_AddNumberToObject(o, "weight", adv[k].weight);
        json_text(o, "title", adv[k].title);
        json_text(o, "text", adv[k].text);
        cJSON_AddItemToArray(ad, o);
    }
    cJSON *tl = cJSON_AddObjectToObject(root, "timeline");
    report_json_u64(tl, "events", j->timeline_events);
    report_json_u64(tl, "left_out", j->timeline_left_out);
    report_json_u64(tl, "bytes", j->timeline_bytes);
    cJSON_AddNumberToObject(tl, "ranks", j->timeline_ranks);
    if (j->steps_last) {
        cJSON *w = cJSON_AddObjectToObject(tl, "steps");
        report_json_u64(w, "first", j->steps_first);
        report_json_u64(w, "last", j->steps_last);
    } else {
        cJSON_AddNullToObject(tl, "steps");
    }
    cJSON *w = cJSON_AddArrayToObject(root, "warnings");
    for (size_t i = 0; i < j->nwarn; i++)
        cJSON_AddItemToArray(w, cJSON_CreateString(j->warn[i]));
    report_json_u64(root, "warnings_left_out", j->warn_dropped);
    return root;
}

static void print_ms(FILE *out, double us)
{
    fprintf(out, "%.3f ms", us / 1000.0);
}

static void print_report(const job_report *j, FILE *out, int brief)
{
    size_t used = 0;
    while (used < j->n && j->r[used].use)
        used++;
    if (!brief)
        fputs("termsight job report\n====================\n\n", out);
    char id[4 * 64 + 1];
    text_clean(used ? j->r[0].job : "", used ? strlen(j->r[0].job) : 0, id, 1);
    fprintf(out, "job:        %s, %zu rank%s", id, used, used == 1 ? "" : "s");
    if (j->world_size > 0)
        fprintf(out, " of %ld", j->world_size);
    fputc('\n', out);
    if (j->workers)
        fprintf(out,
                "workers:    %u forked children of the ranks (DataLoader workers) recorded "
                "sessions of their own, in their run folders here\n",
                j->workers);
    for (size_t i = 0; i < j->nwarn; i++)
        fprintf(out, "warning:    %s\n", j->warn[i]);
    if (j->warn_dropped)
        fprintf(out, "warning:    and %zu more\n", j->warn_dropped);
    if (!brief) {
        fputs("\nRanks (averages per step)\n-------------------------\n", out);
        fprintf(out, "%6s %-16s %8s %6s %12s %12s %12s %12s %12s %12s  %s\n", "RANK", "HOST", "PID",
                "STEPS", "STEP ms", "INTERVAL ms", "COMPUTE ms", "COMM WAIT ms", "TAIL ms",
                "EVAL ms", "STATE");
        for (size_t i = 0; i < used; i++) {
            const rank_in *r = &j->r[i];
            char host[4 * sizeof r->host + 1];
            text_clean(r->host, strlen(r->host), host, 1);
            fprintf(out,
                    "%6ld %-16.16s %8ld %6" PRIu64
                    " %12.3f %12.3f %12.3f %12.3f %12.3f %12.3f  %s\n",
                    r->rank, host, r->pid, r->steps, avg(r->sum_total, r->steps) / 1000,
                    avg(r->sum_interval, r->steps) / 1000, avg(r->sum_compute, r->steps) / 1000,
                    avg(r->sum_wait, r->steps) / 1000, avg(r->sum_tail, r->steps) / 1000,
                    avg(r->sum_eval, r->steps) / 1000, r->state);
        }
        fputc('\n', out);
    }
    if (j->aligned_steps) {
        fprintf(out, "skew:       %" PRIu64 " steps aligned by number, average ", j->aligned_steps);
        print_ms(out, avg(j->sum_skew, j->aligned_steps));
        fputs(", largest ", out);
        print_ms(out, j->max_skew);
        fprintf(out, " (step %" PRIu64 ")\n", j->max_skew_step);
    }
    if (!j->nstrag && j->no_wait) {
        char verdict[160];
        job_unknown_verdict(verdict, sizeof verdict, (size_t)j->no_wait);
        fprintf(out, "%s\n", verdict);
    } else if (!j->nstrag) {
        fputs("stragglers: none: the ranks are balanced\n", out);
    }
    for (size_t k = 0; k < j->nstrag; k++) {
        const rank_in *r = &j->r[j->strag[k].idx];
        fprintf(out, "straggler:  rank %ld (%s): ", r->rank, j->strag[k].cause);
        print_ms(out, j->strag[k].excess_us);
        fprintf(out, " more work per step than the typical rank; %s",
                cause_text(j->strag[k].cause));
        if (j->strag[k].others_wait_us > 0) {
            fputs(". The other ranks wait for it in communication: ", out);
            print_ms(out, j->strag[k].others_wait_us);
            fputs(" per step on average", out);
        }
        fputs("\n", out);
    }
    if (!brief) {
        job_advice adv[MAX_JOB_ADVICE];
        size_t nadv = job_advise(j, used, adv);
        fputs("\nSuggestions\n-----------\n", out);
        if (!nadv)
            fputs("none: the ranks are balanced and wait little for each other\n", out);
        for (size_t k = 0; k < nadv; k++) {
            char title[4 * sizeof adv[k].title + 1], text[4 * sizeof adv[k].text + 1];
            text_clean(adv[k].title, strlen(adv[k].title), title, 1);
            text_clean(adv[k].text, strlen(adv[k].text), text, 1);
            fprintf(out, "%zu. %s\n   %s\n", k + 1, title, text);
        }
    }
    if (j->dir && brief) {
        char dir[4 * 4096 + 1];
        text_clean(j->dir, strnlen(j->dir, 4096), dir, 1);
        fprintf(out, "report:     %s\n", dir);
    }
}

void job_report_print(const job_report *j, FILE *out)
{
    print_report(j, out, 1);
}

/* ---- The run -------------------------------------------------------------------------------- */

void job_report_free(job_report *j)
{
    if (!j)
        return;
    for (size_t i = 0; i < j->n; i++) {
        free(j->r[i].folder);
        free(j->r[i].spans);
    }
    free(j->r);
    for (size_t i = 0; i < j->nwarn; i++)
        free(j->warn[i]);
    free(j->warn);
    free(j->strag);
    free(j->folder);
    free(j->dir);
    free(j);
}

size_t job_report_warnings(const job_report *j, const char *const **lines)
{
    *lines = (const char *const *)j->warn;
    return j->nwarn;
}

const char *job_report_dir(const job_report *j)
{
    return j->dir;
}

int job_report_run(const char *job_folder, const job_options *o, job_report **out, char **cause)
{
    *out = NULL;
    job_options dflt;
    if (!o) {
        job_options_init(&dflt);
        o = &dflt;
    }
    job_report *j = calloc(1, sizeof *j);
    if (!j || !(j->folder = strdup(job_folder))) {
        free(j);
        return cause_set(cause, "out of memory");
    }
    size_t fl = strlen(j->folder);
    while (fl > 1 && j->folder[fl - 1] == '/')
        j->folder[--fl] = 0;
    char **folders;
    int n = job_rank_folders(j->folder, &folders, cause);
    if (n < 0) {
        job_report_free(j);
        return -1;
    }
    if (n == 0) {
        job_report_free(j);
        return cause_set(cause, "%s holds no run folder (folders with recording/ in them)",
                         job_folder);
    }
    j->r = calloc((size_t)n, sizeof *j->r);
    if (!j->r) {
        job_folders_free(folders, n);
        job_report_free(j);
        return cause_set(cause, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        rank_in *r = &j->r[j->n++];
        r->folder = folders[i];
        char why[512];
        errno = 0;
        r->use = load_summary(r, why, sizeof why) == 0;
        if (!r->use)
            warn(j, "%s: %s: left out", base_name(r->folder), why);
    }
    free(folders);
    choose_ranks(j);
    size_t used = 0;
    while (used < j->n && j->r[used].use)
        used++;
    if (!used) {
        job_report_free(j);
        return cause_set(cause,
                         "%s: no rank of a job could be used (each run folder needs its "
                         "report, made by termsight analyse RUN_FOLDER, and a recorded "
                         "job and rank)",
                         job_folder);
    }

    char *target = NULL;
    if (o->out_dir ? !(target = strdup(o->out_dir))
                   : asprintf(&target, "%s/" REPORT_DIR, j->folder) < 0) {
        job_report_free(j);
        return cause_set(cause, "out of memory");
    }
    report_dir *d;
    if (report_dir_open(target, &d, cause) < 0) {
        free(target);
        job_report_free(j);
        return -1;
    }
    merge m = {.j = j, .trace = report_dir_file(d, "job_step_trace.csv")};
    if (m.trace)
        fputs("step,rank,total_us,interval_us,fpbp_us,compute_us,comm_wait_us,tail_us,eval_us,"
              "busy_us\n",
              m.trace);
    uint64_t min_steps = UINT64_MAX, max_steps = 0;
    int no_wait = 0;
    for (size_t i = 0; i < used; i++) {
        rank_in *r = &j->r[i];
        char why[512];
        if (load_steps(&m, r, why, sizeof why) != 0)
            warn(j, "rank %ld (%s): %s: its steps are not merged", r->rank, base_name(r->folder),
                 why);
        if (r->bytes_skipped > 0 || r->chunks_skipped > 0)
            warn(j,
                 "rank %ld (%s): its recording is damaged (%.0f bytes skipped in %.0f chunks): "
                 "merged from what its analysis could read",
                 r->rank, base_name(r->folder), r->bytes_skipped, r->chunks_skipped);
        if (r->steps < min_steps)
            min_steps = r->steps;
        if (r->steps > max_steps)
            max_steps = r->steps;
        no_wait += !r->have_wait;
    }
    if (m.trace)
        report_dir_close_file(d, m.trace, "job_step_trace.csv");
    warn_unfinished(j, used);
    if (min_steps != max_steps)
        warn(j,
             "the ranks recorded different numbers of steps (%" PRIu64 " to %" PRIu64
             "): steps are aligned by their numbers",
             min_steps, max_steps);
    if (m.unaligned)
        warn(j,
             "%" PRIu64 " step rows past the first %u step numbers are not aligned (their steps "
             "are in job_step_trace.csv)",
             m.unaligned, MAX_ALIGNED_STEPS);
    j->no_wait = used > 1 ? no_wait : 0;
    if (j->no_wait)
        warn(j,
             "%d rank%s of the job recorded no communication (its collectives were not "
             "instrumented): the split cannot see %s waits for the others, taken as 0, and the "
             "straggler verdict is unreliable",
             no_wait, no_wait == 1 ? "" : "s", no_wait == 1 ? "its" : "their");
    write_steps_csv(j, d, &m);
    merge_free(&m);
    find_stragglers(j, used);
    write_ranks_csv(j, d, used);

    double mb = o->timeline_limit_mb < 0 ? REPORT_TIMELINE_LIMIT_MB : o->timeline_limit_mb;
    j->steps_first = o->steps_first;
    j->steps_last = o->steps_last;
    if (mb > 0) {
        write_timeline(j, d, used, (uint64_t)(mb * 1024 * 1024), o);
        warn_timeline_cut(j, used, mb, o);
    }
    if (j->long_lines)
        warn(j, "%" PRIu64 " lines of the ranks' reports longer than %u bytes were passed over",
             j->long_lines, REPORT_MAX_LINE_BYTES);

    cJSON *root = summary_json(j, used);
    char *js = root ? (o->pretty ? cJSON_Print(root) : cJSON_PrintUnformatted(root)) : NULL;
    cJSON_Delete(root);
    FILE *f = js ? report_dir_file(d, "summary.json") : NULL;
    if (f) {
        fputs(js, f);
        fputc('\n', f);
        report_dir_close_file(d, f, "summary.json");
    }
    free(js);
    f = report_dir_file(d, "report.txt");
    if (f) {
        print_report(j, f, 0);
        report_dir_close_file(d, f, "report.txt");
    }
    if (report_dir_commit(d, cause) < 0) {
        free(target);
        job_report_free(j);
        return -1;
    }
    j->dir = target;
    *out = j;
    return 0;
}
