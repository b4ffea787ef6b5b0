/*
 * report: the writers of the report folder. They read a recording once, feed every batch to an
 * analysis and to the timeline writer, stream the rows that complete (steps, queue buckets, CPU
 * and memory samples) to CSV files, and write the tables, summary.json and report.txt at the
 * end. The folder is written beside its target under a temporary name and swapped in whole, so
 * no reader ever sees half a report under the final names. docs/report-format.md, "The report
 * folder", documents every file, column and unit.
 *
 * Errors follow model.h: -1 with *cause set to a malloc'd message (cause may be NULL).
 */
#ifndef TERMSIGHT_REPORT_H
#define TERMSIGHT_REPORT_H

#include "analysis.h"
#include "timeline.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define REPORT_DIR               "report" /* <run folder>/report */
#define REPORT_FORMAT            1        /* summary.json "report_format": bumped on changes */
#define REPORT_TIMELINE_LIMIT_MB 500      /* MindSpore's timeline_limit default */

/* Each step's operator totals (stepops.c), one row per step and operator, the steps in order and
 * each step's operators by total time; what termsight diff reads (diff.c). */
#define REPORT_STEP_OPS_CSV    "step_ops.csv"
#define REPORT_STEP_OPS_HEADER "step,op,type,count,total_us"
/* step_trace.csv's columns, in the order the writer puts them (report_csv.c names them once:
 * report_step_columns, for the writer and the readers). */
#define REPORT_STEP_TRACE_CSV "step_trace.csv"
enum report_step_col {
    STEP_COL_STEP,
    STEP_COL_BEGIN,
    STEP_COL_END,
    STEP_COL_FP_START,
    STEP_COL_BP_END,
    STEP_COL_INTERVAL,
    STEP_COL_FPBP,
    STEP_COL_TAIL,
    STEP_COL_TOTAL,
    STEP_COL_FP_OP,
    STEP_COL_BP_OP,
    STEP_COL_SOURCE,
    STEP_COL_COMPUTE,
    STEP_COL_COMM_WAIT,
    STEP_COL_EVAL,
    /* The step on the device (model.h: step_row), empty when the step had no device work. */
    STEP_COL_GPU_DEVICE,
    STEP_COL_GPU_BUSY,
    STEP_COL_GPU_IDLE,
    STEP_COL_GPU_IDLE_DATA,
    STEP_COL_GPU_IDLE_HOST,
    STEP_COL_GPU_IDLE_SYNC,
    STEP_COL_GPU_IDLE_OTHER,
    STEP_COL__COUNT
};
extern const char *const report_step_columns[STEP_COL__COUNT];
/* The report's tables as one SQLite database (report_sqlite.c); docs/report-format.md,
 * "report.sqlite". */
#define REPORT_SQLITE "report.sqlite"

/* Called after each batch with the share of the recording read so far, 0..1 (1 once, at the
 * end). It runs on the thread that called report_run. */
typedef void (*report_progress_fn)(void *ctx, double fraction);

typedef struct report_options {
    const char *out_dir; /* the report folder; NULL: <run folder>/report */
    int pretty;          /* indent the JSON files (analyse(pretty=True) in the Python binding) */
    int write;           /* 0: analyse only, write nothing (termsight analyse --op) */
    double timeline_limit_mb;      /* MiB of timeline in all; < 0: the recording's
                                      timeline_limit_mb option, else REPORT_TIMELINE_LIMIT_MB */
    uint64_t timeline_split_bytes; /* size below which each timeline file stays; 0: default */
    const char *fp_start_op; /* as analysis_config; NULL: the recording's option or automatic */
    const char *bp_end_op;
    double peak_flops; /* FLOP/s for the utilization; 0: unknown */
    int sqlite_only;   /* report.sqlite without the CSV files it holds */
    /* A rank of a job analysed for the job report: no report.html, and the files are not synced
     * one by one (the job report that reads them is; a lost one is made again by analysing).
     * Its timeline is written as a full report's, then cut to timeline_limit_mb by steps
     * (timeline_config.keep: the slowest steps whole first). */
    int lean;
    /* A lean report's timeline holds only steps steps_first..steps_last (a job's --steps);
     * steps_last 0: every step. */
    uint64_t steps_first, steps_last;
    /* How a lean report keeps its share (timeline_config hold_max, marks_max); 0: defaults. */
    uint64_t keep_hold_max;
    size_t keep_marks_max;
    report_progress_fn progress;
    void *progress_ctx;
} report_options;

/* Defaults: write, not pretty, the recording's timeline limit, the default split. */
void report_options_init(report_options *o);

/* What a run read and wrote, for the caller's summary. */
typedef struct report_info {
    char *recording; /* the recording file read */
    char *dir;       /* the report folder written (NULL when nothing was written) */
    uint64_t events; /* events read */
    uint64_t skipped_bytes, bad_chunks; /* damage the reader skipped */
    /* The recording's size when it was opened, all that was read, and how much longer it was at
     * the end: a recording still being written is read up to its size at the start. */
    uint64_t read_bytes, grown_bytes;
    uint32_t timeline_files;
    uint64_t timeline_events;   /* trace events written (metadata included) */
    uint64_t timeline_left_out; /* events left out by the size limit */
    uint64_t timeline_moved;    /* complete events moved to an overlap track */
    uint64_t timeline_dropped;  /* complete events dropped (overlapping even there) */
    uint64_t timeline_bytes;
    uint64_t timeline_limit_bytes;
} report_info;

typedef struct report report;

/* Reads the recording at path (a run folder, its recording/ folder or the .tsr file) to its end,
 * analyses it and, when opt->write, writes the report folder (opt NULL: the defaults). A
 * recording cut short or damaged is analysed up to its whole chunks (report_info says what was
 * skipped). Fails on a missing, empty or foreign file, a read or write error, an existing target
 * that is a symbolic link, not a directory, or a directory that is not a report folder; on
 * failure nothing is left behind and an earlier report at the target is untouched. When out is
 * not NULL, *out holds the results (report_free it). Thread-safe: several calls may run at once
 * on different targets. */
int report_run(const char *path, const report_options *opt, report **out, char **cause);

/* report_run, without keeping the results. */
int report_write(const char *path, const report_options *opt, char **cause);

const analysis *report_analysis(const report *r);
const report_info *report_info_of(const report *r);
const recording_meta *report_meta(const report *r); /* NULL when the recording had none */
void report_free(report *r);

/* Writes the human-readable report (report.txt) to out; brief: the short summary termsight
 * analyse prints (run, events, steps, top 5 op types, queue verdicts, top 3 suggestions, where
 * the report is). Names are cleaned with CR, LF and tab escaped too. */
void report_print(const report *r, FILE *out, int brief);

/* The run folder a recording path belongs to (malloc'd): a .tsr file's folder, and the parent of
 * a folder named "recording". NULL when out of memory. */
char *report_run_folder(const char *path);

/* Writes s (text already cleaned, text_clean) as one CSV field: quoted, with quotes doubled,
 * when it holds a comma, a quote, CR or LF. No separator. */
void report_csv_field(FILE *f, const char *s);

/* Adds key: v to a cJSON object (a cJSON *) as an exact integer: a cJSON number below 10^15
 * (which cJSON prints exactly), the decimal digits themselves at and above (a wall-clock time in
 * nanoseconds is about 1.8e18; doubles hold integers exactly only up to 2^53). Returns 0, or -1
 * out of memory. */
int report_json_u64(void *object, const char *key, uint64_t v);

/* A malloc'd copy of text made one clean line (text_clean: valid UTF-8, control characters,
 * tab, CR and LF escaped as \xHH), for a terminal or a file; NULL for NULL (or no memory). */
char *report_clean_dup(const char *text);

/* Adds key: len bytes of text (any bytes; NULL for none) to a cJSON object, cleaned (text_clean)
 * into valid UTF-8 without control characters, the rest escaped as \xHH: what every name and path
 * that comes from outside becomes in the JSON the project writes. 0, or -1 out of memory. */
int report_json_text(void *object, const char *key, const char *bytes, size_t len);

/* Each result as the one JSON shape it has wherever it leaves the program (report_json.c): the
 * objects are cJSON *, returned new (NULL out of memory) for the caller to add or delete. */
/* key: the name id's text, cleaned (valid UTF-8), added to object. */
void report_json_name(void *object, const char *key, const analysis *a, uint32_t id);
/* One operator row: "type" (by type) or "op" and "type"; count, total_us, self_us, avg_us,
 * min_us, max_us, share_pct (of all operators' self time). */
void *report_json_op(const analysis *a, const op_stat *row, int by_type);
/* The rows by total time, the first limit (0: all), of one type when type is not 0. */
void *report_json_ops(const analysis *a, int by_type, uint32_t type, size_t limit);
/* The top `limit` kernels, copies and memsets by total time (kernel, op, count, total_us,
 * communication): summary.json's top_kernels. */
void *report_json_kernels(const analysis *a, size_t limit);
/* The step summary: count, source, avg_interval_us ... avg_comm_wait_us, slowest [step,
 * total_us]. */
void *report_json_steps(const analysis *a);
/* A "device" object in object: the step on the device from ns (total, busy, and idle for data,
 * host, sync, other): device, busy_us, idle_us, idle_data_us, idle_host_us, idle_sync_us,
 * idle_other_us. Returns it, NULL without memory. */
void *report_json_device_split(void *object, uint32_t device, const double ns[6]);
/* The CPU summary: samples, the machine's user_pct ... steal_pct, context_switches_per_s,
 * avg_running, avg_blocked, process_user_pct, process_system_pct, cpus, processes_left_out, and
 * "processes" (pid, ppid, name, samples, avg_cpu_pct, peak_cpu_pct, last_rss_bytes, ...; the
 * busiest limit of them, 0: all) with first_us and last_us counted from origin (ns). */
void *report_json_cpu(const analysis *a, uint64_t origin, size_t limit);
/* The memory summary: host_samples, host_rss_bytes, host_peak_rss_bytes, "devices" (device,
 * bytes, peak_bytes). */
void *report_json_memory(const analysis *a);

/* What the job report reads back from a rank's summary.json (report_summary_read). */
typedef struct report_summary {
    char job[64], host[64], process[64]; /* host: the job's, else the recording's */
    long rank, local_rank, world_size;   /* -1 when not recorded */
    long pid, parent_pid;                /* -1, 0 when not recorded */
    double origin_wall_us;               /* the time origin on the wall clock */
    double lost, bytes_skipped, chunks_skipped, avg_comm_us;
    uint64_t timeline_left_out;
    char ended[64]; /* how the process ended without closing its session (as recorded); "" */
    int unfinished; /* a collection window has no stop */
} report_summary;

/* FOLDER/report/summary.json (at most max bytes) read into s: 0, or -1 with why ("no report
 * (...)" when there is none). */
int report_summary_read(const char *folder, uint64_t max, report_summary *s, char *why, size_t cap);

/* The job a recording's process was a rank of, from its recorded options (the session's CONFIG
 * job, job_source, host, rank, local_rank, world_size). Texts as recorded (not cleaned). */
typedef struct report_job {
    char id[64], source[64], host[64];
    long rank, local_rank, world_size; /* -1 when not recorded */
} report_job;

/* 1 and *job when the recording names a job, else 0. */
int report_job_of(const analysis *a, report_job *job);

/* A report folder written by another writer (the job report, job.c) the way report_run writes
 * its own: into a new folder beside the target, which then takes the target's place in one
 * rename; an existing target is replaced only when it holds report files and nothing else. */
typedef struct report_dir report_dir;
int report_dir_open(const char *target, report_dir **out, char **cause);
/* A new file (0644) in the folder, or NULL (the error is kept for commit). */
FILE *report_dir_file(report_dir *d, const char *name);
int report_dir_close_file(report_dir *d, FILE *f, const char *name);
int report_dir_fd(const report_dir *d);
/* Swaps the folder in and frees d: 0, or -1 with *cause (a write error, or the swap). */
int report_dir_commit(report_dir *d, char **cause);
/* Removes the unfinished folder and frees d. */
void report_dir_abort(report_dir *d);

/* Text (already clean, text_clean) for HTML: &, <, >, " and ' escaped. */
void report_html_text(FILE *f, const char *s);

/* ---- Reading a report folder back (report_read.c) ----------------------------------------- */

#define REPORT_MAX_LINE_BYTES (4u << 20) /* a longer line of a report file is passed over */

/* FOLDER/report/NAME opened for reading when it is a regular file of at most max bytes: opened
 * without blocking and without following a link, so that a FIFO, a device or a link there is
 * refused rather than waited on or read through. NULL with why ("report/NAME: ...", naming the
 * file) and errno (ENOENT when there is none); *size its size. */
FILE *report_file_read(const char *folder, const char *name, uint64_t max, uint64_t *size,
                       char *why, size_t cap);

/* The next line of f into *line (malloc'd, grown; NUL-terminated, the newline kept): its length,
 * or -1 at the end. A line longer than REPORT_MAX_LINE_BYTES is passed over and counted in
 * *long_lines. */
ssize_t report_read_line(FILE *f, char **line, size_t *cap, uint64_t *long_lines);

/* report_read_line over text in memory (a mapped file): the next line of [*at, end) (its start
 * in *line, the newline kept): its length, or -1 at the end; *at moves past it. */
ssize_t report_next_line(const char **at, const char *end, const char **line, uint64_t *long_lines);

/* Splits one CSV line (RFC 4180 quoting, as the report writes it) in place into at most max
 * fields; returns their count. */
size_t report_csv_split(char *line, char **field, size_t max);

/* A rank's step_trace.csv read back row by row, its columns found by their names in its header
 * (a file from another version may lack some or order them otherwise). */
typedef struct report_step_reader {
    FILE *f;
    char *line;
    size_t cap;
    int col[STEP_COL__COUNT]; /* each column's index in the file, -1 when it has none */
    uint64_t *long_lines;     /* lines passed over for their length are counted here */
} report_step_reader;

/* FOLDER/report/step_trace.csv opened (at most max bytes) and its header read: 0, or -1 with
 * why and errno (ENOENT: no such file; EINVAL: no step or total_us column). */
int report_step_trace_open(report_step_reader *sr, const char *folder, uint64_t max,
                           uint64_t *long_lines, char *why, size_t cap);
/* The next row whose step (a whole number) and total_us are numbers in [0, 1e15]: v[k] the
 * number in column k, -1 where the file has no such column or its field is not such a number.
 * 1, or 0 at the end. */
int report_step_trace_next(report_step_reader *sr, double v[STEP_COL__COUNT]);
void report_step_trace_close(report_step_reader *sr);

#endif
