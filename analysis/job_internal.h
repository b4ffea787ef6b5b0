/* job_internal: what the job report's files share (job.c the merge of steps, stragglers,
 * advice and the run; job_ranks.c finding and loading the ranks; job_timeline.c the merged
 * timeline; job_write.c the report's files). Only analysis/job*.c include it. */
#ifndef TERMSIGHT_JOB_INTERNAL_H
#define TERMSIGHT_JOB_INTERNAL_H

#include "index_map.h"
#include "job.h"
#include "model.h"
#include "report.h"
#include "timeline.h"

#include <cJSON.h>
#include <stdint.h>
#include <stdio.h>

/* What a rank's report files may hold (docs/jobs.md, "Bad input and limits"): a file past its size
 * is refused, a line past REPORT_MAX_LINE_BYTES skipped; summary.json is kilobytes, a step row
 * about 200 bytes, and report_run writes at most --timeline-limit MiB of timeline (500 by default).
 */
#define MAX_SUMMARY_BYTES    (64ull << 20)
#define MAX_STEP_TRACE_BYTES (1ull << 30)
#define MAX_TIMELINE_BYTES   (4ull << 30)
#define MAX_ALIGNED_STEPS    (1u << 22) /* step numbers aligned; rows past them are counted */
#define MAX_WARNINGS         64         /* kept one by one; the rest counted */
#define PID_STRIDE           1000       /* rank R's trace pid p becomes (R + 1) * PID_STRIDE + p */

/* The merge writes a rank's events a few bytes longer (a pid of up to 7 digits, a time from the
 * job's origin, "rank R: " before a process's name): a rank writes this much of its share. */
#define SHARE_SLACK 0.9

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

/* One suggestion of the cluster advisor (job_advise). */
enum { MAX_JOB_ADVICE = 8 };

typedef struct job_advice {
    const char *kind;
    double weight; /* share of the typical step at stake, 0..1: most important first */
    char title[160];
    char text[640];
} job_advice;

/* job.c */
void job_warn(job_report *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int job_load_steps(merge *m, rank_in *r, char *why, size_t cap);
void job_merge_free(merge *m);
double job_avg(double sum, uint64_t n);
double job_busy_of(const rank_in *r);
void job_find_stragglers(job_report *j, size_t used);
const char *job_cause_text(const char *cause);
size_t job_advise(const job_report *j, size_t used, job_advice *adv);

/* job_ranks.c */
int job_load_summary(rank_in *r, char *why, size_t cap);
void job_warn_unfinished(job_report *j, size_t used);
const char *job_base_name(const char *path);
void job_choose_ranks(job_report *j);

/* job_timeline.c */
int job_is_straggler(const job_report *j, size_t i);
int job_write_timeline(job_report *j, report_dir *d, size_t used, uint64_t limit,
                       const job_options *o);
void job_warn_timeline_cut(job_report *j, size_t used, double mb, const job_options *o);

/* job_write.c */
void job_write_ranks_csv(job_report *j, report_dir *d, size_t used);
void job_write_steps_csv(job_report *j, report_dir *d, merge *m);
cJSON *job_summary_json(const job_report *j, size_t used);
void job_print_report(const job_report *j, FILE *out, int brief);
/* summary.json and report.txt. */
void job_write_summary(job_report *j, report_dir *d, size_t used, int pretty);

#endif
