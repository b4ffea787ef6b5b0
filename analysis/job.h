/*
 * job: the report of a training job, merged from its ranks' reports, never from raw events: each
 * rank's run folder is analysed alone (report_run, anywhere, in parallel), and the merge reads
 * only what those wrote (report/summary.json, report/step_trace.csv, report/timeline*.json), so
 * it stays small whatever the ranks recorded. docs/jobs.md documents
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

/* ---- Hang triage (analysis/hang.c): live, from what each rank is inside now ------------- */

/* A communication in flight this long (seconds) means the rank waits for the others... */
#define JOB_HANG_COMM_S 2.0
/* ...and a step that has not ended for JOB_HANG_STEPS typical steps, and JOB_HANG_MIN_S at
 * least, means the rank has stopped: its open range is worth showing. */
#define JOB_HANG_STEPS 3.0
#define JOB_HANG_MIN_S 2.0

/* What one rank is inside now. */
typedef struct job_rank_wait {
    int live;       /* 0: the process is gone; left out */
    int32_t rank;   /* -1: none (a launcher); left out when the others have ranks */
    int32_t pid;    /* named when the rank is unknown */
    double comm_s;  /* its oldest communication in flight has waited this long; < 0: none */
    double since_s; /* since its last step ended (or its session began); < 0: unknown */
} job_rank_wait;

/* Whether a rank whose last step ended since_s seconds ago, in a run whose typical step takes
 * typical_s (<= 0: unknown), has stopped: since_s >= JOB_HANG_STEPS * typical_s and
 * >= JOB_HANG_MIN_S. */
int job_stalled(double since_s, double typical_s);

/* The hang rule: when some live ranks wait in a communication (in flight JOB_HANG_COMM_S or
 * more), the live ranks that do not are the ones the others wait for. Processes of no rank (a
 * launcher) count only where no process has a rank. Their indexes into out (room for n), in
 * order; returns their count: 0 when no rank waits, or when every live rank does (no rank can
 * then be named). *waiting: the ranks that wait (may be NULL). */
size_t job_waited_for(const job_rank_wait *r, size_t n, size_t *out, size_t *waiting);

/* The verdict in words into buf: "rank 3 is the one the others wait for (3 ranks wait in a
 * communication)" (a process of no rank by its pid), or why no rank is named. */
void job_hang_verdict(char *buf, size_t cap, const job_rank_wait *r, size_t n);

struct segment;
struct inflight_summary;

/* What a process is inside, in one line, as top and hang show it: "in <its oldest communication
 * in flight> for 41.2 s", else "in <its main thread's innermost open range> for 60.1 s" (names
 * from s's string table, checked); "" when neither. now_ns: the collector clock. Returns how
 * long it has been inside, -1 when nothing. */
double job_inside_text(const struct segment *s, const struct inflight_summary *in, uint64_t now_ns,
                       char *buf, size_t cap);

/* The name of string id in s, checked, into out: "(unknown name)" when it is not published,
 * "(deeper than kept)" for TS_STR_NONE. */
void job_name_of(const struct segment *s, uint32_t id, char *out, size_t cap);

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
    /* The job timeline holds only steps steps_first..steps_last (--steps A-B); steps_last 0:
     * every step. */
    uint64_t steps_first, steps_last;
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
