/* report: reads a recording once and writes the report folder.
 *
 * One pass: each batch of events goes to the analysis (whose sink streams steps, queue buckets,
 * CPU and memory samples to CSV files as they complete) and to the timeline writer. At the end
 * the tables (operators, kernels, queues, threads, allocations, FLOPs), summary.json and
 * report.txt are written from the analysis.
 *
 * Everything goes to a fresh folder beside the target, "<target>.tmp-<pid>-<n>", whose files
 * are created with O_EXCL | O_NOFOLLOW and synced; the folder then takes the target's place in
 * one renameat2(RENAME_EXCHANGE) (or, where the file system has no exchange, rename the old one
 * aside, rename the new one in), and the old report is removed. An existing target is replaced
 * only when it is a directory holding nothing but report files; a symbolic link there is
 * refused, never followed. On any failure the temporary folder is removed.
 *
 * Text rules (README "The report folder"): names pass through text_clean, so files stay
 * valid UTF-8; CSV fields holding a comma, a quote, CR or LF are quoted with quotes doubled
 * (RFC 4180), lines end with LF; times are microseconds with three decimals, rebased to the
 * run's origin (the recording's start, see summary.json "time"). */
#include "analysis_internal.h"
#include "report.h"

#include <cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TOP_OPS    10 /* rows of operators, types and kernels in summary.json and report.txt */
#define MAX_ADVICE 16
#define MAX_FIND   64

/* The files a report folder holds (timeline-N.json aside). */
static const char *const report_files[] = {
    "op_statistics.csv",
    "op_type_statistics.csv",
    "kernel_statistics.csv",
    "step_trace.csv",
    "overlap.csv",
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
    "timeline.json",
    /* a job report's (job.c) */
    "ranks.csv",
    "job_steps.csv",
    "job_step_trace.csv",
};
#define N_REPORT_FILES (sizeof report_files / sizeof report_files[0])

/* ---- Names -------------------------------------------------------------------------------- */

static const char *lost_reason_name(uint32_t r)
{
    static const char *const n[] = {"unknown", "lane_full", "no_lane", "write", "device"};
    return r < 5 ? n[r] : "unknown";
}

void report_options_init(report_options *o)
{
    memset(o, 0, sizeof *o);
    o->write = 1;
    o->timeline_limit_mb = -1;
}

/* ---- Text --------------------------------------------------------------------------------- */

/* A malloc'd one-line clean copy of text; NULL for NULL (or no memory). */
static char *clean_dup(const char *text)
{
    size_t len = text ? strlen(text) : 0;
    char *out = text ? malloc(4 * len + 1) : NULL;
    if (out)
        text_clean(text, len, out, 0);
    return out;
}

/* A cleaned, NUL-terminated copy of an id's bytes in a reusable buffer. */
typedef struct scratch {
    char *p;
    size_t cap;
} scratch;

static const char *clean_id(scratch *sc, const analysis *a, uint32_t id, int keep_lines)
{
    uint32_t len = 0;
    const char *s = analysis_name(a, id, &len);
    if (!s)
        len = 0;
    size_t need = 4 * (size_t)len + 1;
    if (need > sc->cap) {
        char *n = realloc(sc->p, need);
        if (!n)
            return "";
        sc->p = n;
        sc->cap = need;
    }
    text_clean(s ? s : "", len, sc->p, keep_lines);
    return sc->p;
}

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

static char *join(const char *a, const char *b)
{
    char *s;
    return asprintf(&s, "%s/%s", a, b) < 0 ? NULL : s;
}

/* The recording file a path names (as recording_reader_open finds it), malloc'd, or NULL. */
static char *locate(const char *path)
{
    if (!is_dir(path))
        return strdup(path);
    char *f = join(path, TS_RECORDING_FILE);
    if (f && is_file(f))
        return f;
    free(f);
    f = join(path, TS_RECORDING_DIR "/" TS_RECORDING_FILE);
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
    char *file = locate(path);
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

/* Removes a folder we wrote (regular files, no subfolders), never following links. */
static void remove_tree(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        unlink(dir); /* a link swapped in: remove the link itself */
        return;
    }
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (unlinkat(fd, de->d_name, 0) < 0 && errno == EISDIR)
            unlinkat(fd, de->d_name, AT_REMOVEDIR);
    }
    closedir(d);
    rmdir(dir);
}

/* Whether an existing target may be replaced: 1 absent, 2 a report folder (or empty), else -1
 * with a message. */
static int check_target(const char *target, char **cause)
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

/* ---- CSV ---------------------------------------------------------------------------------- */

typedef struct csv {
    FILE *f;
    int col;
    scratch sc;
} csv;

static void csv_sep(csv *c)
{
    if (c->col++)
        putc_unlocked(',', c->f);
}

void report_csv_field(FILE *f, const char *s)
{
    if (!s[strcspn(s, ",\"\r\n")]) {
        fputs(s, f);
        return;
    }
    putc_unlocked('"', f);
    for (; *s; s++) {
        if (*s == '"')
            putc_unlocked('"', f);
        putc_unlocked(*s, f);
    }
    putc_unlocked('"', f);
}

/* A field of text already cleaned: quoted when it holds a comma, a quote, CR or LF. */
static void csv_put(csv *c, const char *s)
{
    csv_sep(c);
    report_csv_field(c->f, s);
}

static void csv_name(csv *c, const analysis *a, uint32_t id)
{
    csv_put(c, clean_id(&c->sc, a, id, 1));
}

static void csv_u64(csv *c, uint64_t v)
{
    csv_sep(c);
    fprintf(c->f, "%" PRIu64, v);
}

/* Nanoseconds as microseconds with three decimals, exactly. */
static void csv_us(csv *c, int64_t ns)
{
    csv_sep(c);
    uint64_t u = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    fprintf(c->f, "%s%" PRIu64 ".%03u", ns < 0 ? "-" : "", u / 1000, (unsigned)(u % 1000));
}

static void csv_usd(csv *c, double ns)
{
    csv_sep(c);
    fprintf(c->f, "%.3f", ns == ns ? ns / 1000.0 : 0.0);
}

static void csv_num(csv *c, double v, int decimals)
{
    csv_sep(c);
    fprintf(c->f, "%.*f", decimals, v == v ? v : 0.0);
}

static void csv_end(csv *c)
{
    putc_unlocked('\n', c->f);
    c->col = 0;
}

/* ---- The report --------------------------------------------------------------------------- */

struct report {
    report_options opt;
    recording_reader *rd;
    analysis *a;
    report_info info;
    recording_meta meta;
    int have_meta;
    char *run_folder;

    /* Writing. */
    char *target, *tmp;
    int dirfd;
    int started;
    uint64_t origin;
    timeline *tl;
    int limit_set; /* the timeline limit is final (option or recording) */
    csv steps, overlap, qusage, cpu, mem;
    uint32_t *qnames;
    size_t nq;
    char **files;
    size_t nfiles;
    int werr; /* first write error (errno) */
    char *werr_file;
};

const analysis *report_analysis(const report *r)
{
    return r->a;
}

const report_info *report_info_of(const report *r)
{
    return &r->info;
}

const recording_meta *report_meta(const report *r)
{
    return r->have_meta ? &r->meta : NULL;
}

static void note_error(report *r, const char *file, int err)
{
    if (r->werr)
        return;
    r->werr = err ? err : EIO;
    r->werr_file = strdup(file);
}

static void add_file(report *r, const char *name)
{
    char **n = realloc(r->files, (r->nfiles + 1) * sizeof *n);
    if (!n)
        return;
    r->files = n;
    if ((r->files[r->nfiles] = strdup(name)))
        r->nfiles++;
}

static FILE *create_file(report *r, const char *name)
{
    int fd = openat(r->dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        note_error(r, name, errno);
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    add_file(r, name);
    return f;
}

static int close_file(report *r, FILE *f, const char *name)
{
    if (!f)
        return -1;
    int bad = ferror(f);
    int e = errno;
    if (fclose(f) != 0 || bad) {
        note_error(r, name, bad ? e : errno);
        return -1;
    }
    return 0;
}

static int csv_open(report *r, csv *c, const char *name, const char *header)
{
    c->col = 0;
    c->f = create_file(r, name);
    if (!c->f)
        return -1;
    fputs(header, c->f);
    putc('\n', c->f);
    return 0;
}

static void csv_close(report *r, csv *c, const char *name)
{
    if (c->f)
        close_file(r, c->f, name);
    c->f = NULL;
    free(c->sc.p);
    c->sc = (scratch){0};
}

/* ---- Rows streamed from the analysis sink ------------------------------------------------- */

static int64_t rebase(const report *r, uint64_t ns)
{
    return (int64_t)(ns - r->origin);
}

static void sink_step(void *ctx, const step_row *s)
{
    report *r = ctx;
    if (r->steps.f) {
        csv *c = &r->steps;
        csv_u64(c, s->step);
        csv_us(c, rebase(r, s->begin_ns));
        csv_us(c, rebase(r, s->end_ns));
        if (s->source == STEP_SOURCE_NONE) {
            csv_put(c, "");
            csv_put(c, "");
        } else {
            csv_us(c, rebase(r, s->fp_start_ns));
            csv_us(c, rebase(r, s->bp_end_ns));
        }
        csv_us(c, (int64_t)s->interval_ns);
        csv_us(c, (int64_t)s->fpbp_ns);
        csv_us(c, (int64_t)s->tail_ns);
        csv_us(c, (int64_t)s->total_ns);
        csv_name(c, r->a, s->fp_op);
        csv_name(c, r->a, s->bp_op);
        csv_put(c, steps_source_name(s->source));
        csv_us(c, (int64_t)s->compute_ns);
        csv_us(c, (int64_t)s->comm_wait_ns);
        csv_end(c);
    }
    if (r->overlap.f) {
        csv *c = &r->overlap;
        csv_u64(c, s->step);
        csv_us(c, rebase(r, s->begin_ns));
        csv_us(c, rebase(r, s->end_ns));
        csv_us(c, (int64_t)s->total_ns);
        csv_us(c, (int64_t)s->compute_ns);
        csv_us(c, (int64_t)s->comm_ns);
        csv_us(c, (int64_t)s->pure_comm_ns);
        csv_us(c, (int64_t)s->free_ns);
        csv_us(c, (int64_t)s->gap_ns);
        csv_end(c);
    }
    if (r->tl)
        timeline_step(r->tl, s);
}

/* The name id of queue index q (cached; refreshed when a new queue shows up). */
static uint32_t queue_name(report *r, uint32_t q)
{
    if (q >= r->nq) {
        queue_stat *rows = NULL;
        size_t n = analysis_queues(r->a, &rows);
        uint32_t *names = n ? realloc(r->qnames, n * sizeof *names) : NULL;
        if (names) {
            for (size_t i = 0; i < n; i++)
                names[i] = rows[i].name;
            r->qnames = names;
            r->nq = n;
        }
        free(rows);
    }
    return q < r->nq ? r->qnames[q] : TS_STR_NONE;
}

static void sink_bucket(void *ctx, const queue_bucket *b)
{
    report *r = ctx;
    csv *c = &r->qusage;
    if (!c->f)
        return;
    csv_name(c, r->a, queue_name(r, b->queue));
    /* Buckets are aligned on the clock; the first may begin before the run: it begins with it. */
    csv_us(c,
           rebase(r, b->begin_ns < r->origin && b->end_ns > r->origin ? r->origin : b->begin_ns));
    csv_us(c, rebase(r, b->end_ns));
    csv_u64(c, b->samples);
    csv_num(c, 100 * b->avg_usage, 3);
    csv_num(c, 100 * b->empty_share, 3);
    csv_num(c, 100 * b->full_share, 3);
    csv_end(c);
}

static void sink_cpu(void *ctx, const cpu_row *row)
{
    report *r = ctx;
    csv *c = &r->cpu;
    if (c->f) {
        csv_us(c, rebase(r, row->begin_ns));
        csv_us(c, rebase(r, row->end_ns));
        for (int f = 0; f < TS_CPU__COUNT; f++)
            csv_num(c, row->machine[f], 2);
        csv_u64(c, row->context_switches);
        csv_u64(c, row->running);
        csv_u64(c, row->blocked);
        csv_num(c, row->process_user, 2);
        csv_num(c, row->process_system, 2);
        csv_u64(c, row->cpus);
        csv_end(c);
    }
    if (r->tl)
        timeline_cpu(r->tl, row);
}

static void sink_memory(void *ctx, const memory_row *row)
{
    report *r = ctx;
    csv *c = &r->mem;
    if (c->f) {
        csv_us(c, rebase(r, row->t_ns));
        if (row->device == TS_DEVICE_HOST)
            csv_put(c, "host");
        else
            csv_u64(c, row->device);
        csv_u64(c, row->bytes);
        csv_u64(c, row->peak_bytes);
        csv_end(c);
    }
    if (r->tl)
        timeline_memory(r->tl, row);
}

/* ---- Start: the folder, the streams, the timeline ---------------------------------------- */

static const char step_header[] =
    "step,begin_us,end_us,fp_start_us,bp_end_us,interval_us,fpbp_us,tail_us,total_us,fp_op,"
    "bp_op,source,compute_us,comm_wait_us";
static const char overlap_header[] =
    "step,begin_us,end_us,total_us,compute_us,comm_us,pure_comm_us,free_us,gap_us";
static const char qusage_header[] =
    "queue,begin_us,end_us,samples,avg_usage_pct,empty_pct,full_pct";
static const char cpu_header[] =
    "begin_us,end_us,user_pct,nice_pct,system_pct,idle_pct,iowait_pct,irq_pct,softirq_pct,"
    "steal_pct,context_switches,running,blocked,process_user_pct,process_system_pct,cpus";
static const char mem_header[] = "t_us,device,bytes,peak_bytes";

static atomic_uint tmp_seq;

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
static int make_tmp(report *r, char **cause)
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

/* The run's origin: the recording's start, unless the first events lie before it. */
static uint64_t pick_origin(const report *r, const ts_event *ev, size_t n)
{
    uint64_t lo = UINT64_MAX;
    for (size_t i = 0; i < n; i++)
        if (ev[i].kind != TS_KIND_NONE && ev[i].begin_ns < lo)
            lo = ev[i].begin_ns;
    if (r->have_meta && r->meta.start_ns && r->meta.start_ns <= lo)
        return r->meta.start_ns;
    if (r->have_meta && !r->meta.start_ns)
        return 0;
    return lo == UINT64_MAX ? 0 : lo;
}

static uint64_t limit_bytes(double mb)
{
    if (!(mb >= 0))
        mb = REPORT_TIMELINE_LIMIT_MB;
    double b = mb * 1024 * 1024;
    return b >= 1.8e19 ? UINT64_MAX : (uint64_t)b;
}

static int start(report *r, const ts_event *ev, size_t n, char **cause)
{
    r->started = 1;
    const recording_meta *m = recording_reader_meta(r->rd);
    if (m) {
        r->meta = *m;
        r->have_meta = 1;
    }
    r->origin = pick_origin(r, ev, n);
    if (!r->opt.write)
        return 0;
    if (csv_open(r, &r->steps, "step_trace.csv", step_header) < 0 ||
        csv_open(r, &r->overlap, "overlap.csv", overlap_header) < 0 ||
        csv_open(r, &r->qusage, "data_queue_usage.csv", qusage_header) < 0 ||
        csv_open(r, &r->cpu, "cpu_utilization.csv", cpu_header) < 0 ||
        csv_open(r, &r->mem, "memory.csv", mem_header) < 0)
        return cause_set(cause, "cannot create %s/%s: %s", r->target,
                         r->werr_file ? r->werr_file : "?", strerror(r->werr));
    char proc[sizeof r->meta.process + 1] = "";
    if (r->have_meta) {
        memcpy(proc, r->meta.process, sizeof r->meta.process);
        proc[sizeof r->meta.process] = 0;
    }
    timeline_config tc = {
        .dirfd = r->dirfd,
        .limit_bytes = limit_bytes(r->opt.timeline_limit_mb),
        .split_bytes = r->opt.timeline_split_bytes,
        .pretty = r->opt.pretty,
        .origin_ns = r->origin,
        .process = proc[0] ? proc : NULL,
        .os_pid = r->have_meta ? r->meta.pid : 0,
    };
    r->limit_set = r->opt.timeline_limit_mb >= 0;
    r->tl = timeline_create(&tc, r->a);
    if (!r->tl)
        return cause_set(cause, "out of memory");
    return 0;
}

/* The recording's timeline_limit_mb option, once the analysis has seen it. */
static void check_limit(report *r)
{
    if (r->limit_set || !r->tl)
        return;
    const char *v = analysis_config_value(r->a, "timeline_limit_mb");
    if (!v || !*v)
        return;
    char *end;
    double mb = strtod(v, &end);
    if (*end || !(mb >= 0))
        return;
    timeline_set_limit(r->tl, limit_bytes(mb));
    r->limit_set = 1;
}

/* ---- Tables written at the end ------------------------------------------------------------ */

static void write_ops(report *r, int by_type)
{
    const char *name = by_type ? "op_type_statistics.csv" : "op_statistics.csv";
    csv c = {0};
    if (csv_open(r, &c, name,
                 by_type
                     ? "type,count,total_us,self_us,avg_us,min_us,max_us,share_pct,flops"
                     : "op,type,count,total_us,self_us,avg_us,min_us,max_us,share_pct,flops") < 0)
        return;
    op_query q = {.by_type = by_type, .sort = OP_SORT_TOTAL};
    op_stat *rows = NULL;
    size_t n = analysis_ops(r->a, &q, &rows);
    for (size_t i = 0; i < n; i++) {
        const op_stat *s = &rows[i];
        csv_name(&c, r->a, s->name);
        if (!by_type)
            csv_name(&c, r->a, s->type);
        csv_u64(&c, s->count);
        csv_us(&c, (int64_t)s->total_ns);
        csv_us(&c, (int64_t)s->self_ns);
        csv_usd(&c, s->count ? (double)s->total_ns / (double)s->count : 0);
        csv_us(&c, (int64_t)s->min_ns);
        csv_us(&c, (int64_t)s->max_ns);
        csv_num(&c, 100 * s->share, 3);
        csv_u64(&c, s->flops);
        csv_end(&c);
    }
    free(rows);
    csv_close(r, &c, name);
}

static void write_kernels(report *r)
{
    csv c = {0};
    if (csv_open(r, &c, "kernel_statistics.csv",
                 "kernel,op,count,total_us,avg_us,min_us,max_us,communication") < 0)
        return;
    kernel_stat *rows = NULL;
    size_t n = analysis_kernels(r->a, 0, &rows);
    for (size_t i = 0; i < n; i++) {
        const kernel_stat *k = &rows[i];
        csv_name(&c, r->a, k->name);
        csv_name(&c, r->a, k->op);
        csv_u64(&c, k->count);
        csv_us(&c, (int64_t)k->total_ns);
        csv_usd(&c, k->count ? (double)k->total_ns / (double)k->count : 0);
        csv_us(&c, (int64_t)k->min_ns);
        csv_us(&c, (int64_t)k->max_ns);
        csv_u64(&c, k->comm ? 1 : 0);
        csv_end(&c);
    }
    free(rows);
    csv_close(r, &c, "kernel_statistics.csv");
}

/* The most severe finding per queue index (findings come most severe first). */
static const queue_finding *finding_of(const queue_finding *f, size_t nf, uint32_t q)
{
    for (size_t i = 0; i < nf; i++)
        if (f[i].queue == q)
            return &f[i];
    return NULL;
}

static void write_queues(report *r, const queue_finding *f, size_t nf)
{
    csv c = {0};
    if (csv_open(r, &c, "data_queues.csv",
                 "queue,role,producer,consumer,capacity,samples,avg_size,avg_usage_pct,"
                 "empty_pct,full_pct,verdict,bottleneck_op,finding,suggestion") < 0)
        return;
    queue_stat *rows = NULL;
    size_t n = analysis_queues(r->a, &rows);
    for (size_t i = 0; i < n; i++) {
        const queue_stat *q = &rows[i];
        const queue_finding *qf = finding_of(f, nf, (uint32_t)i);
        csv_name(&c, r->a, q->name);
        csv_put(&c, queues_role_name(q->role));
        csv_name(&c, r->a, q->producer);
        csv_name(&c, r->a, q->consumer);
        csv_u64(&c, q->capacity);
        csv_u64(&c, q->samples);
        csv_num(&c, q->avg_size, 3);
        csv_num(&c, 100 * q->avg_usage, 3);
        csv_num(&c, 100 * q->empty_share, 3);
        csv_num(&c, 100 * q->full_share, 3);
        csv_put(&c, queues_verdict_name(qf ? qf->verdict : QUEUE_VERDICT_NONE));
        csv_name(&c, r->a, qf ? qf->op : 0);
        char buf[4 * sizeof qf->text + 1];
        text_clean(qf ? qf->text : "", qf ? strnlen(qf->text, sizeof qf->text) : 0, buf, 1);
        csv_put(&c, buf);
        text_clean(qf ? qf->suggestion : "",
                   qf ? strnlen(qf->suggestion, sizeof qf->suggestion) : 0, buf, 1);
        csv_put(&c, buf);
        csv_end(&c);
    }
    free(rows);
    csv_close(r, &c, "data_queues.csv");
}

static void write_threads(report *r)
{
    csv c = {0};
    if (csv_open(r, &c, "cpu_threads.csv",
                 "tid,thread,samples,avg_user_pct,avg_system_pct,last_total_pct") < 0)
        return;
    cpu_thread *rows = NULL;
    size_t n = analysis_cpu_threads(r->a, &rows);
    for (size_t i = 0; i < n; i++) {
        csv_u64(&c, rows[i].tid);
        csv_name(&c, r->a, rows[i].name);
        csv_u64(&c, rows[i].samples);
        csv_num(&c, rows[i].avg_user, 2);
        csv_num(&c, rows[i].avg_system, 2);
        csv_num(&c, rows[i].last_total, 2);
        csv_end(&c);
    }
    free(rows);
    csv_close(r, &c, "cpu_threads.csv");
}

static void write_children(report *r)
{
    csv c = {0};
    if (csv_open(r, &c, "cpu_processes.csv",
                 "pid,ppid,process,samples,avg_user_pct,avg_system_pct,avg_cpu_pct,peak_cpu_pct,"
                 "cpu_us,last_rss_bytes,peak_rss_bytes,first_us,last_us,ended") < 0)
        return;
    cpu_child *rows = NULL;
    size_t n = analysis_cpu_children(r->a, &rows);
    for (size_t i = 0; i < n; i++) {
        const cpu_child *p = &rows[i];
        csv_u64(&c, p->pid);
        csv_u64(&c, p->ppid);
        csv_name(&c, r->a, p->name);
        csv_u64(&c, p->samples);
        csv_num(&c, p->avg_user, 2);
        csv_num(&c, p->avg_system, 2);
        csv_num(&c, p->avg_user + p->avg_system, 2);
        csv_num(&c, p->peak_total, 2);
        csv_us(&c, (int64_t)p->cpu_ns);
        csv_u64(&c, p->last_rss);
        csv_u64(&c, p->peak_rss);
        csv_us(&c, rebase(r, p->first_ns));
        csv_us(&c, rebase(r, p->last_ns));
        csv_u64(&c, (uint64_t)p->ended);
        csv_end(&c);
    }
    free(rows);
    csv_close(r, &c, "cpu_processes.csv");
}

static void write_allocations(report *r)
{
    csv c = {0};
    if (csv_open(r, &c, "memory_allocations.csv",
                 "name,device,count,bytes_total,live_bytes,peak_live_bytes") < 0)
        return;
    alloc_stat *rows = NULL;
    size_t n = analysis_allocations(r->a, &rows);
    for (size_t i = 0; i < n; i++) {
        csv_name(&c, r->a, rows[i].name);
        if (rows[i].device == TS_DEVICE_HOST)
            csv_put(&c, "host");
        else
            csv_u64(&c, rows[i].device);
        csv_u64(&c, rows[i].count);
        csv_u64(&c, rows[i].bytes_total);
        csv_u64(&c, rows[i].live_bytes);
        csv_u64(&c, rows[i].peak_live_bytes);
        csv_end(&c);
    }
    free(rows);
    csv_close(r, &c, "memory_allocations.csv");
}

static void write_flops(report *r)
{
    csv c = {0};
    if (csv_open(r, &c, "flops.csv", "scope,level,flops,time_us,gflops_per_s") < 0)
        return;
    flops_scope *rows = NULL;
    size_t n = analysis_flops_scopes(r->a, &rows);
    for (size_t i = 0; i < n; i++) {
        csv_name(&c, r->a, rows[i].scope);
        csv_u64(&c, rows[i].level);
        csv_u64(&c, rows[i].flops);
        csv_us(&c, (int64_t)rows[i].time_ns);
        csv_num(&c, rows[i].time_ns ? (double)rows[i].flops / (double)rows[i].time_ns : 0, 3);
        csv_end(&c);
    }
    free(rows);
    csv_close(r, &c, "flops.csv");
}

/* ---- summary.json ---------------------------------------------------------------------- */

static double us_of(double ns)
{
    return ns / 1000.0;
}

/* cJSON wants C strings: names are cleaned (valid UTF-8, no NUL) first. */
static void j_name(cJSON *o, const char *key, scratch *sc, const analysis *a, uint32_t id)
{
    cJSON_AddStringToObject(o, key, clean_id(sc, a, id, 1));
}

int report_job_of(const analysis *a, report_job *job)
{
    memset(job, 0, sizeof *job);
    const char *id = analysis_config_value(a, "job");
    if (!id || !*id)
        return 0;
    const struct {
        const char *key;
        char *out;
    } texts[] = {{"job", job->id}, {"job_source", job->source}, {"host", job->host}};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        const char *v = analysis_config_value(a, texts[i].key);
        snprintf(texts[i].out, sizeof job->id, "%s", v ? v : "");
    }
    const struct {
        const char *key;
        long *out;
    } nums[] = {
        {"rank", &job->rank}, {"local_rank", &job->local_rank}, {"world_size", &job->world_size}};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        const char *v = analysis_config_value(a, nums[i].key);
        char *end;
        long n = v && *v ? strtol(v, &end, 10) : -1;
        *nums[i].out = v && *v && !*end && n >= 0 && n <= INT32_MAX ? n : -1;
    }
    return 1;
}

static void j_text(cJSON *o, const char *key, const char *bytes, size_t len)
{
    char *buf = malloc(4 * len + 1);
    if (!buf)
        return;
    text_clean(bytes, len, buf, 1);
    cJSON_AddStringToObject(o, key, buf);
    free(buf);
}

static cJSON *summary_json(report *r, const queue_finding *qf, size_t nqf, const advice *adv,
                           size_t nadv)
{
    const analysis *a = r->a;
    const analysis_totals *t = analysis_totals_of(a);
    scratch sc = {0};
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return NULL;

    cJSON *ver = cJSON_AddObjectToObject(root, "termsight");
    cJSON_AddStringToObject(ver, "version", TERMSIGHT_VERSION);
    cJSON_AddNumberToObject(ver, "report_format", REPORT_FORMAT);

    cJSON *rec = cJSON_AddObjectToObject(root, "recording");
    j_text(rec, "path", r->info.recording, strlen(r->info.recording));
    j_text(rec, "run_folder", r->run_folder, strlen(r->run_folder));
    if (r->have_meta) {
        char v[32];
        snprintf(v, sizeof v, "%" PRIu32 ".%" PRIu32, r->meta.major, r->meta.minor);
        cJSON_AddStringToObject(rec, "format", v);
        j_text(rec, "process", r->meta.process, strnlen(r->meta.process, sizeof r->meta.process));
        cJSON_AddNumberToObject(rec, "pid", r->meta.pid);
        j_text(rec, "host", r->meta.host, strnlen(r->meta.host, sizeof r->meta.host));
        j_text(rec, "clock", r->meta.clock, strnlen(r->meta.clock, sizeof r->meta.clock));
        report_json_u64(rec, "start_realtime_ns", r->meta.start_realtime_ns);
        report_json_u64(rec, "start_ns", r->meta.start_ns);
        /* A forked child's session: the process it was forked from. */
        const char *pp = analysis_config_value(a, "parent_pid");
        long ppid = pp ? strtol(pp, NULL, 10) : 0;
        if (ppid > 0 && ppid <= INT32_MAX)
            cJSON_AddNumberToObject(rec, "parent_pid", (double)ppid);
        else
            cJSON_AddNullToObject(rec, "parent_pid");
    } else {
        cJSON_AddNullToObject(rec, "format");
    }
    report_json_u64(rec, "bytes_skipped", r->info.skipped_bytes);
    report_json_u64(rec, "chunks_skipped", r->info.bad_chunks);

    /* The job this process was a rank of, as its session recorded it; null when none. */
    report_job job;
    if (report_job_of(a, &job)) {
        cJSON *jo = cJSON_AddObjectToObject(root, "job");
        j_text(jo, "id", job.id, strlen(job.id));
        j_text(jo, "source", job.source, strlen(job.source));
        j_text(jo, "host", job.host, strlen(job.host));
        const struct {
            const char *key;
            long value;
        } ranks[] = {
            {"rank", job.rank}, {"local_rank", job.local_rank}, {"world_size", job.world_size}};
        for (size_t i = 0; i < sizeof ranks / sizeof ranks[0]; i++) {
            if (ranks[i].value >= 0)
                cJSON_AddNumberToObject(jo, ranks[i].key, (double)ranks[i].value);
            else
                cJSON_AddNullToObject(jo, ranks[i].key);
        }
    } else {
        cJSON_AddNullToObject(root, "job");
    }

    cJSON *tm = cJSON_AddObjectToObject(root, "time");
    int any = t->first_ns != UINT64_MAX;
    report_json_u64(tm, "origin_ns", r->origin);
    cJSON_AddNumberToObject(tm, "first_us", any ? us_of((double)rebase(r, t->first_ns)) : 0);
    cJSON_AddNumberToObject(tm, "last_us", any ? us_of((double)rebase(r, t->last_ns)) : 0);
    cJSON_AddNumberToObject(
        tm, "duration_us",
        any && t->last_ns > t->first_ns ? us_of((double)(t->last_ns - t->first_ns)) : 0);

    cJSON *evs = cJSON_AddObjectToObject(root, "events");
    report_json_u64(evs, "total", t->events);
    cJSON *bk = cJSON_AddObjectToObject(evs, "by_kind");
    for (uint32_t k = 0; k < TS_KIND__COUNT; k++)
        report_json_u64(bk, k ? event_kind_name(k) : "unknown", t->by_kind[k]);
    report_json_u64(evs, "lost", t->lost);
    cJSON *lr = cJSON_AddObjectToObject(evs, "lost_by_reason");
    for (uint32_t k = 1; k < 5; k++)
        report_json_u64(lr, lost_reason_name(k), t->lost_by_reason[k]);
    cJSON_AddNumberToObject(evs, "windows", t->windows);
    cJSON_AddNumberToObject(evs, "threads", t->threads);
    /* How the recording ended when it did not end as it should: null when it did. */
    const char *ended = analysis_config_value(a, "ended");
    const char *record_error = analysis_config_value(a, "record_error");
    cJSON_AddItemToObject(evs, "ended", ended ? cJSON_CreateString(ended) : cJSON_CreateNull());
    cJSON_AddItemToObject(evs, "record_error",
                          record_error ? cJSON_CreateString(record_error) : cJSON_CreateNull());

    cJSON_AddItemToObject(root, "steps", report_json_steps(a));

    cJSON *ops = cJSON_AddObjectToObject(root, "ops");
    cJSON_AddNumberToObject(ops, "self_us", us_of((double)analysis_ops_self_ns(a)));
    cJSON_AddItemToObject(ops, "top_types", report_json_ops(a, 1, 0, TOP_OPS));
    cJSON_AddItemToObject(ops, "top_ops", report_json_ops(a, 0, 0, TOP_OPS));

    kernel_stat *ks = NULL;
    size_t nk = analysis_kernels(a, TOP_OPS, &ks);
    cJSON *kt = cJSON_AddArrayToObject(root, "top_kernels");
    for (size_t i = 0; i < nk; i++) {
        cJSON *o = cJSON_CreateObject();
        j_name(o, "kernel", &sc, a, ks[i].name);
        j_name(o, "op", &sc, a, ks[i].op);
        report_json_u64(o, "count", ks[i].count);
        cJSON_AddNumberToObject(o, "total_us", us_of((double)ks[i].total_ns));
        cJSON_AddBoolToObject(o, "communication", ks[i].comm);
        cJSON_AddItemToArray(kt, o);
    }
    free(ks);

    queue_stat *qs = NULL;
    size_t nq = analysis_queues(a, &qs);
    cJSON *qa = cJSON_AddArrayToObject(root, "queues");
    for (size_t i = 0; i < nq; i++) {
        const queue_finding *f = finding_of(qf, nqf, (uint32_t)i);
        cJSON *o = cJSON_CreateObject();
        j_name(o, "queue", &sc, a, qs[i].name);
        cJSON_AddStringToObject(o, "role", queues_role_name(qs[i].role));
        report_json_u64(o, "samples", qs[i].samples);
        cJSON_AddNumberToObject(o, "avg_usage_pct", 100 * qs[i].avg_usage);
        cJSON_AddNumberToObject(o, "empty_pct", 100 * qs[i].empty_share);
        cJSON_AddNumberToObject(o, "full_pct", 100 * qs[i].full_share);
        cJSON_AddStringToObject(o, "verdict",
                                queues_verdict_name(f ? f->verdict : QUEUE_VERDICT_NONE));
        cJSON_AddItemToArray(qa, o);
    }
    free(qs);
    cJSON *fa = cJSON_AddArrayToObject(root, "queue_findings");
    for (size_t i = 0; i < nqf; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "verdict", queues_verdict_name(qf[i].verdict));
        cJSON_AddNumberToObject(o, "queue", qf[i].queue);
        j_name(o, "bottleneck_op", &sc, a, qf[i].op);
        j_text(o, "text", qf[i].text, strnlen(qf[i].text, sizeof qf[i].text));
        j_text(o, "suggestion", qf[i].suggestion,
               strnlen(qf[i].suggestion, sizeof qf[i].suggestion));
        cJSON_AddItemToArray(fa, o);
    }

    cpu_summary cs = analysis_cpu(a);
    cJSON *cpu = cJSON_AddObjectToObject(root, "cpu");
    report_json_u64(cpu, "samples", cs.samples);
    static const char *const fields[TS_CPU__COUNT] = {"user_pct",    "nice_pct",   "system_pct",
                                                      "idle_pct",    "iowait_pct", "irq_pct",
                                                      "softirq_pct", "steal_pct"};
    for (int f = 0; f < TS_CPU__COUNT; f++)
        cJSON_AddNumberToObject(cpu, fields[f], cs.machine[f]);
    cJSON_AddNumberToObject(cpu, "context_switches_per_s", cs.context_switches_per_s);
    cJSON_AddNumberToObject(cpu, "avg_running", cs.avg_running);
    cJSON_AddNumberToObject(cpu, "avg_blocked", cs.avg_blocked);
    cJSON_AddNumberToObject(cpu, "process_user_pct", cs.process_user);
    cJSON_AddNumberToObject(cpu, "process_system_pct", cs.process_system);
    cJSON_AddNumberToObject(cpu, "cpus", cs.cpus);
    cJSON_AddNumberToObject(cpu, "processes_left_out", cs.processes_left_out);
    cJSON *procs = cJSON_AddArrayToObject(cpu, "processes");
    cpu_child *kids = NULL;
    size_t nkids = analysis_cpu_children(a, &kids);
    for (size_t i = 0; i < nkids; i++) {
        const cpu_child *p = &kids[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "pid", p->pid);
        cJSON_AddNumberToObject(o, "ppid", p->ppid);
        j_name(o, "name", &sc, a, p->name);
        report_json_u64(o, "samples", p->samples);
        cJSON_AddNumberToObject(o, "avg_user_pct", p->avg_user);
        cJSON_AddNumberToObject(o, "avg_system_pct", p->avg_system);
        cJSON_AddNumberToObject(o, "avg_cpu_pct", p->avg_user + p->avg_system);
        cJSON_AddNumberToObject(o, "peak_cpu_pct", p->peak_total);
        cJSON_AddNumberToObject(o, "cpu_us", us_of((double)p->cpu_ns));
        report_json_u64(o, "last_rss_bytes", p->last_rss);
        report_json_u64(o, "peak_rss_bytes", p->peak_rss);
        cJSON_AddNumberToObject(o, "first_us", us_of((double)rebase(r, p->first_ns)));
        cJSON_AddNumberToObject(o, "last_us", us_of((double)rebase(r, p->last_ns)));
        cJSON_AddBoolToObject(o, "ended", p->ended);
        cJSON_AddItemToArray(procs, o);
    }
    free(kids);

    memory_summary ms = analysis_memory(a);
    cJSON *mem = cJSON_AddObjectToObject(root, "memory");
    report_json_u64(mem, "host_samples", ms.host_samples);
    report_json_u64(mem, "host_rss_bytes", ms.host_rss);
    report_json_u64(mem, "host_peak_rss_bytes", ms.host_peak_rss);
    cJSON *devs = cJSON_AddArrayToObject(mem, "devices");
    for (uint32_t d = 0; d < 8; d++) {
        if (!ms.device_bytes[d] && !ms.device_peak[d])
            continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "device", d);
        report_json_u64(o, "bytes", ms.device_bytes[d]);
        report_json_u64(o, "peak_bytes", ms.device_peak[d]);
        cJSON_AddItemToArray(devs, o);
    }

    flops_summary fs = analysis_flops(a);
    cJSON *fl = cJSON_AddObjectToObject(root, "flops");
    report_json_u64(fl, "flops", fs.flops);
    cJSON_AddNumberToObject(fl, "time_us", us_of((double)fs.time_ns));
    cJSON_AddNumberToObject(fl, "flops_per_s",
                            fs.flops_per_s == fs.flops_per_s ? fs.flops_per_s : 0);
    if (fs.utilization >= 0)
        cJSON_AddNumberToObject(fl, "utilization", fs.utilization);
    else
        cJSON_AddNullToObject(fl, "utilization");
    cJSON_AddNumberToObject(fl, "peak_flops_per_s", r->opt.peak_flops);

    op_gap gaps[5];
    size_t ng = analysis_gaps(a, gaps, 5);
    cJSON *ga = cJSON_AddArrayToObject(root, "largest_gaps");
    for (size_t i = 0; i < ng; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "gap_us", us_of((double)gaps[i].gap_ns));
        cJSON_AddNumberToObject(o, "at_us", us_of((double)rebase(r, gaps[i].at_ns)));
        report_json_u64(o, "step", gaps[i].step);
        cJSON_AddNumberToObject(o, "tid", gaps[i].tid);
        j_name(o, "before", &sc, a, gaps[i].before);
        j_name(o, "after", &sc, a, gaps[i].after);
        cJSON_AddItemToArray(ga, o);
    }

    cJSON *ad = cJSON_AddArrayToObject(root, "advice");
    for (size_t i = 0; i < nadv; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "kind", advisor_kind_name(adv[i].kind));
        cJSON_AddNumberToObject(o, "weight", adv[i].weight);
        j_text(o, "title", adv[i].title, strnlen(adv[i].title, sizeof adv[i].title));
        j_text(o, "text", adv[i].text, strnlen(adv[i].text, sizeof adv[i].text));
        cJSON_AddItemToArray(ad, o);
    }

    cJSON *tl = cJSON_AddObjectToObject(root, "timeline");
    report_json_u64(tl, "limit_bytes", r->info.timeline_limit_bytes);
    cJSON_AddNumberToObject(tl, "files", r->info.timeline_files);
    report_json_u64(tl, "events", r->info.timeline_events);
    report_json_u64(tl, "left_out", r->info.timeline_left_out);
    report_json_u64(tl, "moved_to_overlap_tracks", r->info.timeline_moved);
    report_json_u64(tl, "dropped_overlapping", r->info.timeline_dropped);
    report_json_u64(tl, "bytes", r->info.timeline_bytes);

    cJSON *files = cJSON_AddArrayToObject(root, "files");
    for (size_t i = 0; i < r->nfiles; i++)
        cJSON_AddItemToArray(files, cJSON_CreateString(r->files[i]));
    cJSON_AddItemToArray(files, cJSON_CreateString("summary.json"));
    cJSON_AddItemToArray(files, cJSON_CreateString("report.txt"));

    free(sc.p);
    return root;
}

/* ---- report.txt and the short summary ------------------------------------------------------ */

static void print_ms(FILE *out, double ns)
{
    fprintf(out, "%.3f ms", ns == ns ? ns / 1e6 : 0.0);
}

static void print_meta_line(const report *r, FILE *out)
{
    char proc[4 * sizeof r->meta.process + 1], host[4 * sizeof r->meta.host + 1];
    if (r->have_meta) {
        text_clean(r->meta.process, strnlen(r->meta.process, sizeof r->meta.process), proc, 0);
        text_clean(r->meta.host, strnlen(r->meta.host, sizeof r->meta.host), host, 0);
        const char *pp = analysis_config_value(r->a, "parent_pid");
        long ppid = pp ? strtol(pp, NULL, 10) : 0;
        char forked[48] = "";
        if (ppid > 0 && ppid <= INT32_MAX)
            snprintf(forked, sizeof forked, ", forked from pid %ld", ppid);
        fprintf(out,
                "run:        %s (pid %" PRId32 "%s)%s%s, recording format %" PRIu32 ".%" PRIu32
                "\n",
                proc[0] ? proc : "?", r->meta.pid, forked, host[0] ? " on " : "", host,
                r->meta.major, r->meta.minor);
    } else {
        fputs("run:        (the recording has no description)\n", out);
    }
    report_job job;
    if (report_job_of(r->a, &job)) {
        char id[4 * sizeof job.id + 1];
        text_clean(job.id, strlen(job.id), id, 0);
        fprintf(out, "job:        %s", id);
        if (job.rank >= 0)
            fprintf(out, ", rank %ld", job.rank);
        if (job.world_size > 0)
            fprintf(out, " of %ld", job.world_size);
        if (job.local_rank >= 0)
            fprintf(out, " (local rank %ld)", job.local_rank);
        fputc('\n', out);
    }
    size_t len = strlen(r->info.recording);
    char *rec = malloc(4 * len + 1);
    if (rec) {
        text_clean(r->info.recording, len, rec, 0);
        fprintf(out, "recording:  %s\n", rec);
        free(rec);
    }
}

/* The descendant processes in report.txt's CPU section, the busiest TOP_OPS. */
static void print_children(const analysis *a, FILE *out, scratch *sc)
{
    cpu_child *rows = NULL;
    size_t n = analysis_cpu_children(a, &rows);
    cpu_summary cs = analysis_cpu(a);
    if (n)
        fprintf(out, "  child processes: %zu (cpu_processes.csv)\n", n);
    for (size_t i = 0; i < n && i < TOP_OPS; i++) {
        const cpu_child *p = &rows[i];
        fprintf(out,
                "    %-20s pid %-7" PRIu32 " CPU avg %5.1f %%, peak %5.1f %%; RSS %.1f MiB, peak "
                "%.1f MiB%s\n",
                clean_id(sc, a, p->name, 0), p->pid, p->avg_user + p->avg_system, p->peak_total,
                (double)p->last_rss / 1048576.0, (double)p->peak_rss / 1048576.0,
                p->ended ? " (ended)" : "");
    }
    if (n > TOP_OPS)
        fprintf(out, "    ... and %zu more\n", n - TOP_OPS);
    if (cs.processes_left_out)
        fprintf(out, "  %" PRIu32 " more descendant processes were not followed (limit 256)\n",
                cs.processes_left_out);
    free(rows);
}

void report_print(const report *r, FILE *out, int brief)
{
    const analysis *a = r->a;
    const analysis_totals *t = analysis_totals_of(a);
    scratch sc = {0};

    if (!brief)
        fputs("termsight report\n================\n\n", out);
    print_meta_line(r, out);
    double span = t->first_ns != UINT64_MAX && t->last_ns > t->first_ns
                      ? (double)(t->last_ns - t->first_ns) / 1e9
                      : 0;
    fprintf(out,
            "events:     %" PRIu64 " over %.3f s, %" PRIu32 " thread%s, %" PRIu32
            " collection window%s\n",
            t->events, span, t->threads, t->threads == 1 ? "" : "s", t->windows,
            t->windows == 1 ? "" : "s");
    if (t->lost)
        fprintf(out,
                "lost:       %" PRIu64 " events were lost by the profiler: results are partial\n",
                t->lost);
    char *record_error = clean_dup(analysis_config_value(a, "record_error"));
    if (record_error)
        fprintf(out,
                "stopped:    recording stopped early (%s): the %" PRIu64
                " events emitted after that are not here\n",
                record_error, t->lost_by_reason[TS_LOST_WRITE]);
    free(record_error);
    char *ended = clean_dup(analysis_config_value(a, "ended"));
    if (ended)
        fprintf(out,
                "ended:      the process ended (%s) before it closed its session; what its "
                "lanes still held was recovered from its shared memory\n",
                ended);
    if (ended)
        free(ended);
    else if (t->by_kind[TS_KIND_COLLECT_START] > t->by_kind[TS_KIND_COLLECT_STOP])
        fprintf(out,
                "unfinished: collection window %" PRIu32
                " has no stop: the process was still collecting or ended without stopping "
                "(killed?); what it emitted after the recorder's last drain is not here\n",
                t->windows);
    if (r->info.skipped_bytes || r->info.bad_chunks)
        fprintf(out,
                "damaged:    %" PRIu64 " bytes skipped in %" PRIu64
                " damaged chunks; everything else was analysed\n",
                r->info.skipped_bytes, r->info.bad_chunks);

    step_summary ss = analysis_steps(a);
    fputs(brief ? "steps:      " : "\nSteps\n-----\n", out);
    if (ss.steps) {
        fprintf(out, "%" PRIu64 " steps, average ", ss.steps);
        print_ms(out, ss.avg_total_ns);
        fputs(" = interval ", out);
        print_ms(out, ss.avg_interval_ns);
        fputs(" + forward/backward ", out);
        print_ms(out, ss.avg_fpbp_ns);
        fputs(" + tail ", out);
        print_ms(out, ss.avg_tail_ns);
        fprintf(out, " (FP/BP from %s)\n", steps_source_name(ss.source));
        if (!brief) {
            fputs("overlap per step: computation ", out);
            print_ms(out, ss.avg_compute_ns);
            fputs(", communication ", out);
            print_ms(out, ss.avg_comm_ns);
            fputs(", pure communication ", out);
            print_ms(out, ss.avg_pure_comm_ns);
            fputs(", free ", out);
            print_ms(out, ss.avg_free_ns);
            fputs(", gaps between ops ", out);
            print_ms(out, ss.avg_gap_ns);
            fputs(", waiting for communication ", out);
            print_ms(out, ss.avg_comm_wait_ns);
            fputs("\nslowest steps:", out);
            for (int i = 0; i < 5 && ss.slowest_ns[i]; i++) {
                fprintf(out, "%s %" PRIu64 " (", i ? "," : "", ss.slowest[i]);
                print_ms(out, (double)ss.slowest_ns[i]);
                fputc(')', out);
            }
            fputc('\n', out);
        }
    } else {
        fputs("none recorded\n", out);
    }

    for (int by_type = 1; by_type >= (brief ? 1 : 0); by_type--) {
        op_query q = {.by_type = by_type, .sort = OP_SORT_TOTAL, .limit = brief ? 5 : TOP_OPS};
        op_stat *rows = NULL;
        size_t n = analysis_ops(a, &q, &rows);
        if (brief)
            fputs("top op types by total time:\n", out);
        else
            fprintf(out, "\n%s\n%s\n",
                    by_type ? "Operator types (top 10 by total time)"
                            : "Operators (top 10 by total time)",
                    by_type ? "-------------------------------------"
                            : "--------------------------------");
        if (!n)
            fputs("  none recorded\n", out);
        for (size_t i = 0; i < n; i++) {
            fprintf(out, "  %2zu. %10.3f ms %5.1f %%  x%-7" PRIu64 " avg %8.3f ms", i + 1,
                    (double)rows[i].total_ns / 1e6, 100 * rows[i].share, rows[i].count,
                    rows[i].count ? (double)rows[i].total_ns / (double)rows[i].count / 1e6 : 0.0);
            fprintf(out, "  %s", clean_id(&sc, a, rows[i].name, 0));
            if (!by_type)
                fprintf(out, " [%s]", clean_id(&sc, a, rows[i].type, 0));
            fputc('\n', out);
        }
        free(rows);
    }

    if (!brief) {
        kernel_stat *ks = NULL;
        size_t nk = analysis_kernels(a, TOP_OPS, &ks);
        fputs("\nKernels (top 10 by total time)\n------------------------------\n", out);
        if (!nk)
            fputs("  none recorded\n", out);
        for (size_t i = 0; i < nk; i++) {
            fprintf(out, "  %2zu. %10.3f ms  x%-7" PRIu64 " %s", i + 1,
                    (double)ks[i].total_ns / 1e6, ks[i].count, clean_id(&sc, a, ks[i].name, 0));
            fprintf(out, " under %s%s\n", ks[i].op ? clean_id(&sc, a, ks[i].op, 0) : "(unknown op)",
                    ks[i].comm ? " (communication)" : "");
        }
        free(ks);
    }

    queue_finding qf[MAX_FIND];
    size_t nqf = analysis_queue_findings(a, qf, MAX_FIND);
    queue_stat *qs = NULL;
    size_t nq = analysis_queues(a, &qs);
    fputs(brief ? "data queues:" : "\nData queues\n-----------\n", out);
    if (!nq)
        fputs(brief ? " none recorded\n" : "  none recorded\n", out);
    else if (brief)
        fputc('\n', out);
    for (size_t i = 0; i < nq; i++) {
        const queue_finding *f = finding_of(qf, nqf, (uint32_t)i);
        fprintf(out, "  %s (%s): %s, average usage %.1f %%, empty %.1f %%, full %.1f %%\n",
                clean_id(&sc, a, qs[i].name, 0), queues_role_name(qs[i].role),
                queues_verdict_name(f ? f->verdict : QUEUE_VERDICT_NONE), 100 * qs[i].avg_usage,
                100 * qs[i].empty_share, 100 * qs[i].full_share);
    }
    free(qs);
    if (!brief) {
        for (size_t i = 0; i < nqf; i++) {
            char text[4 * sizeof qf[i].text + 1], sug[4 * sizeof qf[i].suggestion + 1];
            text_clean(qf[i].text, strnlen(qf[i].text, sizeof qf[i].text), text, 1);
            text_clean(qf[i].suggestion, strnlen(qf[i].suggestion, sizeof qf[i].suggestion), sug,
                       1);
            fprintf(out, "  - %s: %s%s%s\n", queues_verdict_name(qf[i].verdict), text,
                    sug[0] ? "; " : "", sug);
        }

        cpu_summary cs = analysis_cpu(a);
        fputs("\nCPU\n---\n", out);
        if (cs.samples)
            fprintf(out,
                    "  machine: user %.1f %%, system %.1f %%, iowait %.1f %%, idle %.1f %%, "
                    "%.0f context switches/s, %.1f running, %.1f blocked\n"
                    "  process: user %.1f %%, system %.1f %% of one CPU (%" PRIu32 " CPUs)\n",
                    cs.machine[TS_CPU_USER], cs.machine[TS_CPU_SYSTEM], cs.machine[TS_CPU_IOWAIT],
                    cs.machine[TS_CPU_IDLE], cs.context_switches_per_s, cs.avg_running,
                    cs.avg_blocked, cs.process_user, cs.process_system, cs.cpus);
        else
            fputs("  no samples\n", out);
        print_children(a, out, &sc);

        memory_summary ms = analysis_memory(a);
        fputs("\nMemory\n------\n", out);
        if (ms.host_samples)
            fprintf(out, "  host RSS: %.1f MiB at the end, peak %.1f MiB\n",
                    (double)ms.host_rss / 1048576.0, (double)ms.host_peak_rss / 1048576.0);
        else
            fputs("  host RSS: no samples\n", out);
        for (uint32_t d = 0; d < 8; d++)
            if (ms.device_bytes[d] || ms.device_peak[d])
                fprintf(out, "  device %" PRIu32 ": %.1f MiB allocated at the end, peak %.1f MiB\n",
                        d, (double)ms.device_bytes[d] / 1048576.0,
                        (double)ms.device_peak[d] / 1048576.0);

        flops_summary fs = analysis_flops(a);
        fputs("\nCalculation quantity\n--------------------\n", out);
        if (fs.flops) {
            fprintf(out, "  %.3f MFLOPs in ", (double)fs.flops / 1e6);
            print_ms(out, (double)fs.time_ns);
            fprintf(out, ": %.3f GFLOPS", fs.flops_per_s / 1e9);
            if (fs.utilization >= 0)
                fprintf(out, ", %.1f %% of the peak", 100 * fs.utilization);
            fputc('\n', out);
        } else {
            fputs("  no operator carried FLOPs\n", out);
        }

        op_gap gaps[5];
        size_t ng = analysis_gaps(a, gaps, 5);
        if (ng) {
            fputs("\nLargest gaps between operators\n------------------------------\n", out);
            for (size_t i = 0; i < ng; i++) {
                fputs("  ", out);
                print_ms(out, (double)gaps[i].gap_ns);
                fprintf(out, " in step %" PRIu64 " on thread %" PRIu32 ", after %s", gaps[i].step,
                        gaps[i].tid, clean_id(&sc, a, gaps[i].before, 0));
                fprintf(out, ", before %s\n", clean_id(&sc, a, gaps[i].after, 0));
            }
        }
    }

    advice adv[MAX_ADVICE];
    size_t nadv = analysis_advise(a, adv, brief ? 3 : MAX_ADVICE);
    fputs(brief ? "suggestions:" : "\nSuggestions\n-----------\n", out);
    if (!nadv)
        fputs(brief ? " none\n" : "  none: nothing stands out\n", out);
    else if (brief)
        fputc('\n', out);
    for (size_t i = 0; i < nadv; i++) {
        char title[4 * sizeof adv[i].title + 1], text[4 * sizeof adv[i].text + 1];
        text_clean(adv[i].title, strnlen(adv[i].title, sizeof adv[i].title), title, 0);
        text_clean(adv[i].text, strnlen(adv[i].text, sizeof adv[i].text), text, 1);
        fprintf(out, "  %zu. %s\n", i + 1, title);
        if (!brief || text[0])
            fprintf(out, "     %s\n", text);
    }

    if (!brief) {
        fputs("\nTimeline\n--------\n", out);
        fprintf(out, "  %" PRIu32 " file%s, %" PRIu64 " trace events, %.1f MiB (limit %.0f MiB)\n",
                r->info.timeline_files, r->info.timeline_files == 1 ? "" : "s",
                r->info.timeline_events, (double)r->info.timeline_bytes / 1048576.0,
                (double)r->info.timeline_limit_bytes / 1048576.0);
        if (r->info.timeline_left_out)
            fprintf(out, "  %" PRIu64 " events left out by the size limit\n",
                    r->info.timeline_left_out);
        if (r->info.timeline_moved || r->info.timeline_dropped)
            fprintf(out,
                    "  %" PRIu64 " overlapping events moved to overlap tracks, %" PRIu64
                    " dropped\n",
                    r->info.timeline_moved, r->info.timeline_dropped);
        fputs("\nFiles\n-----\n", out);
        for (size_t i = 0; i < r->nfiles; i++)
            if (strcmp(r->files[i], "summary.json") && strcmp(r->files[i], "report.txt"))
                fprintf(out, "  %s\n", r->files[i]);
        fputs("  summary.json\n  report.txt\n", out);
    } else if (r->info.dir) {
        size_t len = strlen(r->info.dir);
        char *dir = malloc(4 * len + 1);
        if (dir) {
            text_clean(r->info.dir, len, dir, 0);
            fprintf(out, "report:     %s\n", dir);
            free(dir);
        }
    }
    free(sc.p);
}

/* ---- Finishing and swapping in --------------------------------------------------------- */

static int write_summary(report *r, const queue_finding *qf, size_t nqf, const advice *adv,
                         size_t nadv)
{
    cJSON *root = summary_json(r, qf, nqf, adv, nadv);
    char *text = root ? (r->opt.pretty ? cJSON_Print(root) : cJSON_PrintUnformatted(root)) : NULL;
    cJSON_Delete(root);
    if (!text) {
        note_error(r, "summary.json", ENOMEM);
        return -1;
    }
    FILE *f = create_file(r, "summary.json");
    if (f) {
        fputs(text, f);
        putc('\n', f);
        close_file(r, f, "summary.json");
    }
    free(text);
    return 0;
}

static int swap_in(report *r, int existed, char **cause)
{
    if (existed) {
        if (renameat2(AT_FDCWD, r->tmp, AT_FDCWD, r->target, RENAME_EXCHANGE) == 0) {
            remove_tree(r->tmp); /* now the old report */
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
        remove_tree(old);
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

static int commit(report *r, int existed, char **cause);

static int finish_files(report *r, int existed, char **cause)
{
    csv_close(r, &r->steps, "step_trace.csv");
    csv_close(r, &r->overlap, "overlap.csv");
    csv_close(r, &r->qusage, "data_queue_usage.csv");
    csv_close(r, &r->cpu, "cpu_utilization.csv");
    csv_close(r, &r->mem, "memory.csv");
    write_ops(r, 0);
    write_ops(r, 1);
    write_kernels(r);

    queue_finding *qf = calloc(MAX_FIND, sizeof *qf);
    advice *adv = calloc(MAX_ADVICE, sizeof *adv);
    if (!qf || !adv) {
        free(qf);
        free(adv);
        return cause_set(cause, "out of memory");
    }
    size_t nqf = analysis_queue_findings(r->a, qf, MAX_FIND);
    size_t nadv = analysis_advise(r->a, adv, MAX_ADVICE);
    write_queues(r, qf, nqf);
    write_threads(r);
    write_children(r);
    write_allocations(r);
    write_flops(r);

    char *tcause = NULL;
    if (timeline_finish(r->tl, &tcause) < 0) {
        free(qf);
        free(adv);
        int rc = cause_set(cause, "%s: %s", r->target, tcause ? tcause : "timeline");
        free(tcause);
        return rc;
    }
    timeline_stats ts;
    timeline_stats_of(r->tl, &ts);
    r->info.timeline_files = ts.files;
    r->info.timeline_events = ts.events;
    r->info.timeline_left_out = ts.left_out;
    r->info.timeline_moved = ts.moved;
    r->info.timeline_dropped = ts.dropped;
    r->info.timeline_bytes = ts.bytes;
    r->info.timeline_limit_bytes = ts.limit_bytes;
    for (uint32_t i = 0; i < ts.files; i++) {
        char n[64];
        timeline_file_name(i, n, sizeof n);
        add_file(r, n);
    }

    write_summary(r, qf, nqf, adv, nadv);
    FILE *f = create_file(r, "report.txt");
    if (f) {
        report_print(r, f, 0);
        close_file(r, f, "report.txt");
    }
    free(qf);
    free(adv);
    return commit(r, existed, cause);
}

/* The temporary folder, its files written, takes the target's place. */
static int commit(report *r, int existed, char **cause)
{
    if (r->werr)
        return cause_set(cause, "cannot write %s/%s: %s", r->target,
                         r->werr_file ? r->werr_file : "?", strerror(r->werr));
    sync_dir_files(r->dirfd);
    if (swap_in(r, existed, cause) < 0)
        return -1;
    char *parent = parent_of(r->target);
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
    int ex = check_target(target, cause);
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
    if (make_tmp(r, cause) < 0) {
        report_dir_abort(d);
        return -1;
    }
    *out = d;
    return 0;
}

FILE *report_dir_file(report_dir *d, const char *name)
{
    return create_file(d->r, name);
}

int report_dir_close_file(report_dir *d, FILE *f, const char *name)
{
    return close_file(d->r, f, name);
}

int report_dir_fd(const report_dir *d)
{
    return d->r->dirfd;
}

int report_dir_commit(report_dir *d, char **cause)
{
    int rc = commit(d->r, d->existed, cause);
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

/* ---- The run -------------------------------------------------------------------------------- */

void report_free(report *r)
{
    if (!r)
        return;
    timeline_destroy(r->tl);
    csv_close(r, &r->steps, "step_trace.csv");
    csv_close(r, &r->overlap, "overlap.csv");
    csv_close(r, &r->qusage, "data_queue_usage.csv");
    csv_close(r, &r->cpu, "cpu_utilization.csv");
    csv_close(r, &r->mem, "memory.csv");
    if (r->dirfd >= 0)
        close(r->dirfd);
    if (r->tmp)
        remove_tree(r->tmp);
    analysis_destroy(r->a);
    recording_reader_close(r->rd);
    for (size_t i = 0; i < r->nfiles; i++)
        free(r->files[i]);
    free(r->files);
    free(r->qnames);
    free(r->info.recording);
    free(r->info.dir);
    free(r->run_folder);
    free(r->target);
    free(r->tmp);
    free(r->werr_file);
    free(r);
}

int report_run(const char *path, const report_options *opt, report **out, char **cause)
{
    if (out)
        *out = NULL;
    report *r = calloc(1, sizeof *r);
    if (!r)
        return cause_set(cause, "out of memory");
    r->dirfd = -1;
    if (opt)
        r->opt = *opt;
    else
        report_options_init(&r->opt);
    /* Strings in opt belong to the caller: analysis_create copies the op names; the rest is
     * used before report_run returns. */

    if (recording_reader_open(path, &r->rd, cause) < 0)
        goto fail;
    char *file = locate(path);
    r->info.recording = file ? realpath(file, NULL) : NULL;
    if (!r->info.recording)
        r->info.recording = file;
    else
        free(file);
    r->run_folder = report_run_folder(path);
    if (!r->info.recording || !r->run_folder) {
        cause_set(cause, "out of memory");
        goto fail;
    }

    int existed = 0;
    if (r->opt.write) {
        r->target = r->opt.out_dir ? strdup(r->opt.out_dir) : join(r->run_folder, REPORT_DIR);
        if (!r->target) {
            cause_set(cause, "out of memory");
            goto fail;
        }
        size_t tl = strlen(r->target);
        while (tl > 1 && r->target[tl - 1] == '/')
            r->target[--tl] = 0;
        int ck = check_target(r->target, cause);
        if (ck < 0)
            goto fail;
        existed = ck == 2;
        if (make_tmp(r, cause) < 0)
            goto fail;
    }

    analysis_config cfg;
    analysis_config_init(&cfg);
    cfg.fp_start_op = r->opt.fp_start_op;
    cfg.bp_end_op = r->opt.bp_end_op;
    cfg.peak_flops = r->opt.peak_flops;
    analysis_sink sink = {.ctx = r,
                          .step = sink_step,
                          .queue_bucket = sink_bucket,
                          .cpu = sink_cpu,
                          .memory = sink_memory};
    cfg.sink = r->opt.write ? &sink : NULL;
    r->a = analysis_create(&cfg, analysis_names_recording, r->rd);
    if (!r->a) {
        cause_set(cause, "out of memory");
        goto fail;
    }

    struct stat st;
    double size = stat(r->info.recording, &st) == 0 && st.st_size > 0 ? (double)st.st_size : 0;
    double done = 0;
    for (;;) {
        const ts_event *ev;
        size_t n;
        int got = recording_reader_next(r->rd, &ev, &n, cause);
        if (got < 0)
            goto fail;
        if (got == 0)
            break;
        if (!r->started && start(r, ev, n, cause) < 0)
            goto fail;
        r->info.events += n;
        analysis_feed(r->a, ev, n);
        if (r->tl) {
            check_limit(r);
            timeline_feed(r->tl, ev, n);
        }
        if (r->opt.progress && size > 0) {
            /* The reader does not tell its offset: events and chunk headers read so far. */
            done += (double)n * sizeof(ts_event) + 24;
            r->opt.progress(r->opt.progress_ctx, done < size ? done / size : 0.999);
        }
    }
    if (!r->started && start(r, NULL, 0, cause) < 0)
        goto fail;
    analysis_finish(r->a);
    r->info.skipped_bytes = recording_reader_skipped_bytes(r->rd);
    r->info.bad_chunks = recording_reader_bad_chunks(r->rd);
    /* Damage and not one whole chunk (no description, no event): an empty report would pass
     * for a run that recorded nothing. */
    if (r->info.bad_chunks && !r->info.events && !recording_reader_meta(r->rd)) {
        cause_set(cause,
                  "%s: no whole chunk could be read (%" PRIu64 " bytes damaged): nothing to "
                  "analyse",
                  r->info.recording, r->info.skipped_bytes);
        goto fail;
    }

    if (r->opt.write) {
        if (finish_files(r, existed, cause) < 0)
            goto fail;
        r->info.dir = r->target;
        r->target = NULL;
        free(r->tmp);
        r->tmp = NULL;
        close(r->dirfd);
        r->dirfd = -1;
    }
    if (r->opt.progress)
        r->opt.progress(r->opt.progress_ctx, 1.0);
    if (out)
        *out = r;
    else
        report_free(r);
    return 0;

fail:
    report_free(r);
    return -1;
}

int report_write(const char *path, const report_options *opt, char **cause)
{
    return report_run(path, opt, NULL, cause);
}
