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
 * Text rules (docs/report-format.md): names pass through text_clean, so files stay
 * valid UTF-8; CSV fields holding a comma, a quote, CR or LF are quoted with quotes doubled
 * (RFC 4180), lines end with LF; times are microseconds with three decimals, rebased to the
 * run's origin (the recording's start, see summary.json "time"). */

#include "report_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- Names -------------------------------------------------------------------------------- */

const char *report_lost_reason_name(uint32_t r)
{
    static const char *const n[] = {"unknown", "lane_full", "no_lane", "write", "device"};
    return r < 5 ? n[r] : "unknown";
}

static int by_lost(const void *x, const void *y)
{
    const analysis_loss *a = x, *b = y;
    return a->lost < b->lost ? 1 : a->lost > b->lost ? -1 : 0;
}

/* The analysis's loss rows, most lost first: malloc'd (NULL when none), *n of them. */
static analysis_loss *losses_by_size(const analysis *a, size_t *n)
{
    const analysis_loss *rows;
    *n = analysis_losses(a, &rows);
    analysis_loss *c = *n ? malloc(*n * sizeof *c) : NULL;
    if (!c) {
        *n = 0;
        return NULL;
    }
    memcpy(c, rows, *n * sizeof *c);
    qsort(c, *n, sizeof *c, by_lost);
    return c;
}

/* One loss row as a sentence ("window 1, thread 812 (worker): 1234 events lost ..."), its
 * names cleaned, into buf. */
static void loss_text(const report *r, const analysis_loss *l, char *buf, size_t cap)
{
    static const char *const why[] = {"for a reason not known", "its lane was full",
                                      "no lane was free", "the recording could not be written",
                                      "device records were lost"};
    char who[160] = "no one thread";
    if (l->tid) {
        scratch sc = {0};
        uint32_t name = analysis_thread_name(r->a, l->tid);
        const char *text = name ? report_clean_id(&sc, r->a, name, 0) : "";
        snprintf(who, sizeof who, text && *text ? "thread %u (%.100s)" : "thread %u", l->tid,
                 text ? text : "");
        free(sc.p);
    }
    char rate[64] = "";
    if (l->rate)
        snprintf(rate, sizeof rate, ", when it offered %.3g M events/s", (double)l->rate / 1e6);
    snprintf(buf, cap, "window %u, %s: %llu events lost (%s), from %.3f s%s", l->window, who,
             (unsigned long long)l->lost, why[l->reason < 5 ? l->reason : 0],
             (double)report_rebase(r, l->first_ns) / 1e9, rate);
}

size_t report_loss_lines(const report *r, void (*line)(void *ctx, const char *text), void *ctx)
{
    size_t nl;
    analysis_loss *rows = losses_by_size(r->a, &nl);
    char text[512];
    for (size_t i = 0; i < nl && i < REPORT_LOSSES_SHOWN; i++) {
        loss_text(r, &rows[i], text, sizeof text);
        line(ctx, text);
    }
    if (nl > REPORT_LOSSES_SHOWN) {
        snprintf(text, sizeof text, "and %zu more (summary.json lists them all)",
                 nl - REPORT_LOSSES_SHOWN);
        line(ctx, text);
    }
    free(rows);
    return nl;
}

void report_options_init(report_options *o)
{
    memset(o, 0, sizeof *o);
    o->write = 1;
    o->timeline_limit_mb = -1;
}

/* ---- Text --------------------------------------------------------------------------------- */

/* A malloc'd one-line clean copy of text; NULL for NULL (or no memory). */
char *report_clean_dup(const char *text)
{
    size_t len = text ? strlen(text) : 0;
    char *out = text ? malloc(4 * len + 1) : NULL;
    if (out)
        text_clean(text, len, out, 0);
    return out;
}

const char *report_clean_id(scratch *sc, const analysis *a, uint32_t id, int keep_lines)
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

int64_t report_rebase(const report *r, uint64_t ns)
{
    return (int64_t)(ns - r->origin);
}

long report_parent_pid(const analysis *a)
{
    const char *pp = analysis_config_value(a, "parent_pid");
    long ppid = pp ? strtol(pp, NULL, 10) : 0;
    return ppid > 0 && ppid <= INT32_MAX ? ppid : 0;
}

/* The most severe finding per queue index (findings come most severe first). */
const queue_finding *report_finding_of(const queue_finding *f, size_t nf, uint32_t q)
{
    for (size_t i = 0; i < nf; i++)
        if (f[i].queue == q)
            return &f[i];
    return NULL;
}

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

/* A lean report given its share of a job's timeline, or a step window: its timeline is kept by
 * steps (timeline_config.keep; a pretty-printed one, whose events span lines, is cut at its
 * share as it is written). */
static int lean_share(const report *r)
{
    return r->opt.lean && !r->opt.pretty && (r->opt.timeline_limit_mb >= 0 || r->opt.steps_last);
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
    if ((r->opt.sqlite_only && report_sqlite_begin(r) < 0) || report_csv_open_streams(r) < 0)
        return cause_set(cause, "cannot create %s/%s: %s", r->target,
                         r->werr_file ? r->werr_file : "?", strerror(r->werr));
    char proc[sizeof r->meta.process + 1] = "";
    if (r->have_meta) {
        memcpy(proc, r->meta.process, sizeof r->meta.process);
        proc[sizeof r->meta.process] = 0;
    }
    timeline_config tc = {
        .dirfd = r->dirfd,
        /* A lean report keeps its share of what it writes (timeline_config.keep). */
        .limit_bytes = limit_bytes(lean_share(r) ? -1 : r->opt.timeline_limit_mb),
        .split_bytes = r->opt.timeline_split_bytes,
        .pretty = r->opt.pretty,
        .origin_ns = r->origin,
        .process = proc[0] ? proc : NULL,
        .os_pid = r->have_meta ? r->meta.pid : 0,
        .keep = lean_share(r),
        .keep_bytes = limit_bytes(r->opt.timeline_limit_mb),
        .keep_first = r->opt.steps_first,
        .keep_last = r->opt.steps_last,
        .hold_max = r->opt.keep_hold_max,
        .marks_max = r->opt.keep_marks_max,
    };
    r->limit_set = r->opt.timeline_limit_mb >= 0 && !lean_share(r);
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

static int finish_files(report *r, int existed, char **cause)
{
    report_csv_close_streams(r);

    queue_finding *qf = calloc(MAX_FIND, sizeof *qf);
    advice *adv = calloc(MAX_ADVICE, sizeof *adv);
    if (!qf || !adv) {
        free(qf);
        free(adv);
        return cause_set(cause, "out of memory");
    }
    size_t nqf = analysis_queue_findings(r->a, qf, MAX_FIND);
    size_t nadv = analysis_advise(r->a, adv, MAX_ADVICE);
    report_csv_tables(r, qf, nqf);

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
        report_file_list(r, n);
    }

    /* report.sqlite, then report.html before summary.json, whose "files" lists every file
     * written so far. A job's lean rank report has neither (the job report has its database;
     * analyse --rank R writes a rank's whole report): one a rank added 17 MB to a 64-rank job's
     * 6 MB of reports (bench_job.sh 64, --timeline-limit 1). */
    if (!r->opt.lean) {
        report_sqlite_write(r, r->opt.sqlite_only);
        report_html_write(r, qf, nqf, adv, nadv);
    }
    report_json_write_summary(r, qf, nqf, adv, nadv);
    FILE *f = report_file_create(r, "report.txt");
    if (f) {
        report_print(r, f, 0);
        report_file_close(r, f, "report.txt");
    }
    free(qf);
    free(adv);
    return report_commit(r, existed, cause);
}

/* ---- The run -------------------------------------------------------------------------------- */

void report_free(report *r)
{
    if (!r)
        return;
    timeline_destroy(r->tl);
    stepops_destroy(r->so);
    report_picture_free(r->picture);
    report_csv_close_streams(r);
    report_sqlite_free(r);
    if (r->dirfd >= 0)
        close(r->dirfd);
    if (r->tmp)
        report_remove_tree(r->tmp);
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

/* The recording opened, its file's real path and its run folder found: 0, or -1 with cause. */
static int open_input(report *r, const char *path, char **cause)
{
    if (recording_reader_open(path, &r->rd, cause) < 0)
        return -1;
    char *file = report_locate(path);
    r->info.recording = file ? realpath(file, NULL) : NULL;
    if (!r->info.recording)
        r->info.recording = file;
    else
        free(file);
    r->run_folder = report_run_folder(path);
    if (!r->info.recording || !r->run_folder)
        return cause_set(cause, "out of memory");
    return 0;
}

/* The target folder checked and the temporary folder beside it made: 1 when the target exists
 * (a report to replace), 0 when not, -1 with cause. */
static int prepare_target(report *r, char **cause)
{
    r->target = r->opt.out_dir ? strdup(r->opt.out_dir) : report_join(r->run_folder, REPORT_DIR);
    if (!r->target)
        return cause_set(cause, "out of memory");
    size_t tl = strlen(r->target);
    while (tl > 1 && r->target[tl - 1] == '/')
        r->target[--tl] = 0;
    int ck = report_check_target(r->target, cause);
    if (ck < 0)
        return -1;
    if (report_make_tmp(r, cause) < 0)
        return -1;
    return ck == 2;
}

/* Every batch of the recording to the step operators, the analysis and the timeline, the
 * progress told as it goes: 0, or -1 with cause. */
static int read_events(report *r, char **cause)
{
    struct stat st;
    double size = stat(r->info.recording, &st) == 0 && st.st_size > 0 ? (double)st.st_size : 0;
    double done = 0;
    for (;;) {
        const ts_event *ev;
        size_t n;
        int got = recording_reader_next(r->rd, &ev, &n, cause);
        if (got < 0)
            return -1;
        if (got == 0)
            break;
        if (!r->started && start(r, ev, n, cause) < 0)
            return -1;
        r->info.events += n;
        stepops_feed(r->so, ev, n); /* before the analysis, whose steps may end in this batch */
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
        return -1;
    return 0;
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

    if (open_input(r, path, cause) < 0)
        goto fail;
    int existed = 0;
    if (r->opt.write && (existed = prepare_target(r, cause)) < 0)
        goto fail;

    analysis_config cfg;
    analysis_config_init(&cfg);
    cfg.fp_start_op = r->opt.fp_start_op;
    cfg.bp_end_op = r->opt.bp_end_op;
    cfg.peak_flops = r->opt.peak_flops;
    analysis_sink sink;
    report_csv_sink(r, &sink);
    cfg.sink = r->opt.write ? &sink : NULL;
    if (r->opt.write) {
        r->picture = report_picture_create();
        r->so = stepops_create();
    }
    r->a = analysis_create(&cfg, analysis_names_recording, r->rd);
    if (!r->a || (r->opt.write && (!r->picture || !r->so))) {
        cause_set(cause, "out of memory");
        goto fail;
    }

    if (read_events(r, cause) < 0)
        goto fail;
    analysis_finish(r->a);
    r->info.skipped_bytes = recording_reader_skipped_bytes(r->rd);
    r->info.bad_chunks = recording_reader_bad_chunks(r->rd);
    r->info.read_bytes = recording_reader_extent(r->rd, &r->info.grown_bytes);
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
