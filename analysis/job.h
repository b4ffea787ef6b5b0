/*
 * job: the report of a training job, merged from its ranks' reports, never from raw events: each
 * rank's run folder is analysed alone (report_run, anywhere, in parallel), and the merge reads
 * only what those wrote (report/summary.json, report/step_trace.csv, report/timeline*.json), so
 * it stays small whatever the ranks recorded. The README's "Distributed training" documents
 * every file and field.
 *
 * Errors follow model.h: -1 with *cause set to a malloc'd message (cause may be NULL).
 */
#ifndef TERMSIGHT_JOB_H
#define TERMSIGHT_JOB_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A rank is a straggler when the time it spends not waiting for the others (step minus
 * communication wait) passes the typical rank's by this share of the typical step... */
#define JOB_STRAGGLER_SHARE 0.20
/* ...and by at least this many microseconds. */
#define JOB_STRAGGLER_MIN_US 1000.0

/* One rank's average step (microseconds), what the straggler rule reads: the offline merge's
 * from the ranks' step traces, `termsight top`'s from each rank's live analysis. */
typedef struct job_rank_avg {
    uint64_t steps; /* 0: no step yet; the rank is left out of the verdict */
    double total_us, interval_us, compute_us, wait_us, tail_us;
} job_rank_avg;

/* A straggler the rule found. */
typedef struct job_straggler {
    size_t idx;            /* index into the averages given */
    const char *cause;     /* "data", "compute" or "tail": the part of the step that grew most */
    double excess_us;      /* its busy time past the typical rank's */
    double others_wait_us; /* the other ranks' average communication wait */
} job_straggler;

/* The straggler rule: ranks whose busy time (step minus communication wait) passes the typical
 * rank's (the lower median of the ranks with steps) by JOB_STRAGGLER_SHARE of the typical step
 * and by JOB_STRAGGLER_MIN_US. Writes them to out (room for n), in index order, and returns
 * their count: 0 with fewer than two ranks with steps, or when out of memory. */
size_t job_stragglers(const job_rank_avg *r, size_t n, job_straggler *out);

/* The verdict when no straggler was found but `unmeasured` ranks (of a job of several) recorded
 * no communication, so their waits look like work: "stragglers: unknown: ...", into buf. */
void job_unknown_verdict(char *buf, size_t cap, size_t unmeasured);

/* Whether path is a job folder: a folder with no recording of its own and at least one rank's
 * run folder ("rank<R>-...", holding recording/) directly under it. */
int job_is_folder(const char *path);

/* The run folders directly under a job folder, sorted by name: the count, *out a malloc'd array
 * of malloc'd paths (job_folders_free). -1 with *cause when the folder cannot be read. */
int job_rank_folders(const char *job_folder, char ***out, char **cause);
void job_folders_free(char **folders, int n);

typedef struct job_options {
    const char *out_dir;      /* the job report folder; NULL: <job folder>/report */
    double timeline_limit_mb; /* MiB of merged timeline; < 0: REPORT_TIMELINE_LIMIT_MB; 0: none */
    int pretty;               /* indent summary.json */
} job_options;

void job_options_init(job_options *o);

/* The MiB of timeline each of `ranks` ranks writes for a job timeline of limit_mb MiB (< 0:
 * REPORT_TIMELINE_LIMIT_MB; 0: none), with room left for the merge's renumbering, so that the
 * merge keeps every rank's share whole. */
double job_timeline_share_mb(double limit_mb, int ranks);

typedef struct job_report job_report;

/* Merges the reports the job folder's ranks have (each <rank folder>/report/, written before)
 * into the job report. A rank that cannot be used (no report, another job, a duplicate, no
 * rank) is left out with a warning; the rest is merged. Fails when no rank can be used or the
 * folder cannot be written. */
int job_report_run(const char *job_folder, const job_options *o, job_report **out, char **cause);

/* The short summary `termsight analyse` prints. */
void job_report_print(const job_report *j, FILE *out);

/* The warnings (each one line), and where the report went. */
size_t job_report_warnings(const job_report *j, const char *const **lines);
const char *job_report_dir(const job_report *j);

void job_report_free(job_report *j);

#endif
