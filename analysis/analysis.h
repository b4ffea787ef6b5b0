/*
 * analysis: pure, streaming functions over an event stream. One code path for the live monitor
 * (fed from the segment's lanes) and for `termsight analyse` (fed from a recording): events go in
 * with analysis_feed in any order the recorder produced them, results come out through the
 * accessors below at any time, and rows that complete (steps, queue buckets, CPU and memory
 * samples) are also handed to an optional sink, so a writer can stream them to files while the
 * analysis keeps only a bounded window. Memory grows with the number of distinct names, threads
 * and queues, never with the length of the run.
 *
 * No terminal, no process handling, no files (the writers in report.h do files).
 */
#ifndef TERMSIGHT_ANALYSIS_H
#define TERMSIGHT_ANALYSIS_H

#include "model.h"

#include <stddef.h>
#include <stdint.h>

typedef struct analysis analysis;

/* Resolves a string id of the event stream: the bytes (not NUL-terminated necessarily) and
 * their length, or NULL when unknown. */
typedef const char *(*analysis_name_fn)(void *ctx, uint32_t id, uint32_t *len);

/* Adapters for the two sources of names. */
const char *analysis_names_recording(void *reader, uint32_t id, uint32_t *len);
const char *analysis_names_segment(void *segment, uint32_t id, uint32_t *len);

/* ---- Text (text.c) --------------------------------------------------------------------- */

/* Writes bytes as text that stays valid UTF-8 and holds no control character except, with
 * keep_lines, tab, CR and LF: valid UTF-8 is kept; any other byte (invalid UTF-8, C0 and C1
 * controls, DEL) becomes "\xNN" (lowercase hex), and so does a backslash followed by 'x', so
 * the text decodes back unambiguously. out needs 4 * len + 1 bytes; it is NUL-terminated.
 * Returns its length. */
size_t text_clean(const char *bytes, size_t len, char *out, int keep_lines);

/* ---- Rows handed to the sink as they complete ------------------------------------------ */

/* Step rows (step_row), their sources and gaps (op_gap) are model's step trace (model.h). */

/* One time bucket of one queue. */
typedef struct queue_bucket {
    uint32_t queue; /* index in analysis_queues order */
    uint64_t begin_ns, end_ns;
    uint64_t samples;
    double avg_usage;   /* mean size / capacity, 0..1 */
    double empty_share; /* share of samples with size 0 */
    double full_share;  /* share of samples with size == capacity */
} queue_bucket;

/* One CPU sample interval (percentages of the interval). */
typedef struct cpu_row {
    uint64_t begin_ns, end_ns;
    double machine[TS_CPU__COUNT]; /* percent of all CPUs, by enum ts_cpu_field */
    uint64_t context_switches;
    uint32_t running, blocked;
    double process_user, process_system; /* percent of one CPU */
    uint32_t cpus;                       /* CPUs online, 0 when unknown */
} cpu_row;

/* One memory sample: host RSS (from the sampler) or a device total (after each change). */
typedef struct memory_row {
    uint64_t t_ns;
    uint32_t device;     /* TS_DEVICE_HOST for host RSS */
    uint64_t bytes;      /* RSS, or bytes allocated on the device */
    uint64_t peak_bytes; /* peak so far */
} memory_row;

typedef struct analysis_sink {
    void *ctx;
    void (*step)(void *ctx, const step_row *row);
    void (*queue_bucket)(void *ctx, const queue_bucket *b);
    void (*cpu)(void *ctx, const cpu_row *row);
    void (*memory)(void *ctx, const memory_row *row);
} analysis_sink;

/* ---- Configuration and feeding --------------------------------------------------------- */

typedef struct analysis_config {
    const char *fp_start_op;   /* operator name starting the forward pass; NULL: the recording's
                                  option (TS_KIND_CONFIG fp_start_op), else marks, else auto */
    const char *bp_end_op;     /* likewise for the backward end */
    double peak_flops;         /* peak FLOP/s for utilization; 0: unknown */
    uint32_t recent_steps;     /* finalized steps kept for analysis_recent_steps; default 256 */
    uint32_t recent_buckets;   /* queue/CPU buckets kept for live views; default 120 */
    uint64_t bucket_ns;        /* queue bucket length; default 1 s */
    const analysis_sink *sink; /* may be NULL */
    /* A live monitor's: steps and operator statistics come from the collector's boards
     * (analysis_steps_load, analysis_ops_add), not from the events fed. */
    int board;
} analysis_config;

void analysis_config_init(analysis_config *c);

/* NULL when out of memory. cfg NULL means the defaults. */
analysis *analysis_create(const analysis_config *cfg, analysis_name_fn names, void *names_ctx);

/* Feeds events, in the order the recording or the lanes gave them. */
void analysis_feed(analysis *a, const ts_event *ev, size_t n);

/* End of input: completes open steps and buckets (handing them to the sink). Feeding after it
 * is allowed, but a live view should not call it for every snapshot: steps and buckets complete
 * by themselves once later data arrives, and finishing early closes a step before its device
 * kernels (which arrive late) are in. */
void analysis_finish(analysis *a);

void analysis_destroy(analysis *a);

/* The bytes of a string id of the stream, or of a name the analysis derived (op types from op
 * names, normalized op names, scope prefixes). "" for unknown ids; *len may be NULL. */
const char *analysis_name(const analysis *a, uint32_t id, uint32_t *len);

/* ---- Totals ---------------------------------------------------------------------------- */

typedef struct analysis_totals {
    uint64_t events;                  /* fed */
    uint64_t by_kind[TS_KIND__COUNT]; /* fed, per kind (unknown kinds count under NONE) */
    uint64_t lost;                    /* events the collector lost (sum of LOST notices) */
    uint64_t lost_by_reason[5];       /* by enum ts_lost_reason */
    uint64_t first_ns, last_ns;       /* earliest begin, latest end */
    uint32_t windows;                 /* collection windows started */
    uint32_t threads;                 /* host threads seen */
} analysis_totals;

const analysis_totals *analysis_totals_of(const analysis *a);

/* Losses as LTTng-UST reports discarded events: per window and thread (and reason), with when
 * they began and the events per second the thread offered then. */
typedef struct analysis_loss {
    uint32_t window; /* 1, 2, ... as the recording's windows began; 0 before the first */
    uint32_t tid;    /* 0: not one thread's (no lane was free; or rows past ANALYSIS_LOSS_ROWS) */
    uint32_t reason; /* enum ts_lost_reason */
    uint64_t lost;
    uint64_t first_ns; /* the first notice's time */
    uint64_t rate;     /* events/s the thread offered when they began; 0: not known */
} analysis_loss;

#define ANALYSIS_LOSS_ROWS 1024 /* rows kept; later ones add to a row of tid 0 */

/* The rows, in the order they began. */
size_t analysis_losses(const analysis *a, const analysis_loss **rows);

/* The name a thread gave itself, 0 when none. */
uint32_t analysis_thread_name(const analysis *a, uint32_t tid);

/* A board analysis's: thread (or process) tid was given name by the program (the collector's
 * names board), as a THREAD_NAME event would say. */
void analysis_name_thread(analysis *a, uint32_t tid, uint32_t name);

/* A recorded option (TS_KIND_CONFIG) by key, or NULL. */
const char *analysis_config_value(const analysis *a, const char *key);

/* ---- Operators, kernels, FLOPs (opstats.c) --------------------------------------------- */

typedef struct op_stat {
    uint32_t name; /* normalized op name id (per op); the type id (per type) */
    uint32_t type; /* op type id */
    uint64_t count;
    uint64_t total_ns; /* inclusive */
    uint64_t self_ns;  /* exclusive of nested ops on the same thread */
    uint64_t min_ns, max_ns;
    uint64_t flops;
    double share; /* self_ns / all ops' self_ns, 0..1 */
} op_stat;

enum op_sort { OP_SORT_TOTAL, OP_SORT_SELF, OP_SORT_AVG, OP_SORT_COUNT, OP_SORT_NAME };

typedef struct op_query {
    int by_type;        /* 1: one row per type; 0: one per op */
    enum op_sort sort;  /* descending, except NAME */
    const char *search; /* case-insensitive substring of name or type; NULL or "": all */
    uint32_t type;      /* only ops of this type id; 0: any (the operator page's "Choose Type") */
    size_t limit;       /* at most this many rows; 0: all */
} op_query;

/* Rows for q into *rows (malloc'd, caller frees). Returns the row count. */
size_t analysis_ops(const analysis *a, const op_query *q, op_stat **rows);

/* An op's type as the statistics have it: type when the event carries one, else the one derived
 * from its name ("Default/net/MatMul-op4" -> "MatMul") when the analysis has seen that op, else
 * the name itself. */
uint32_t analysis_op_type_of(const analysis *a, uint32_t name, uint32_t type);

/* Type id for a type name (as derived or given), 0 when there is none. */
uint32_t analysis_op_type(const analysis *a, const char *type);

/* A board analysis's: what an operator (OP_RANGE, NVTX_RANGE) or device event kind (KERNEL,
 * MEMCPY, MEMSET, under the op `type`) of the stream's name and type ids added since the last
 * call, as the collector's operator board says (flags: TS_EF_COMM for a communication kernel).
 * Rows are grouped by name as events' are. */
void analysis_ops_add(analysis *a, uint32_t kind, uint32_t name, uint32_t type, uint32_t flags,
                      const op_totals *t);

/* Sum of all ops' self time. */
uint64_t analysis_ops_self_ns(const analysis *a);

typedef struct kernel_stat {
    uint32_t name; /* kernel name id */
    uint32_t op;   /* operator it ran under, 0 when unknown */
    uint64_t count, total_ns, min_ns, max_ns;
    int comm; /* communication kernel */
} kernel_stat;

/* Kernels by (name, op), by total time descending; limit 0: all. */
size_t analysis_kernels(const analysis *a, size_t limit, kernel_stat **rows);

/* How many device records (kernels, copies, memsets) and how much of their time ran under an
 * operator (attributed through their launch's correlation id), of all of them. */
typedef struct device_attribution {
    uint64_t records, with_op;
    uint64_t time_ns, with_op_ns;
} device_attribution;
device_attribution analysis_device_attribution(const analysis *a);
/* The same for a query, as operators are asked for: q->sort (total, average, count; name
 * ascending; a kernel has no self time, so self sorts by total), q->search over the kernel's and
 * its op's names, q->limit; by_type and type do not apply. */
size_t analysis_kernels_query(const analysis *a, const op_query *q, kernel_stat **rows);

typedef struct flops_scope {
    uint32_t scope; /* id of a '/'-separated prefix of op names, e.g. "Default/network" */
    uint32_t level; /* 1 for the first scope name */
    uint64_t flops;
    uint64_t time_ns; /* inclusive time of the ops below it that carried FLOPs */
} flops_scope;

/* Scope levels by FLOPs descending. */
size_t analysis_flops_scopes(const analysis *a, flops_scope **rows);

typedef struct flops_summary {
    uint64_t flops;     /* total over ops that carried FLOPs */
    uint64_t time_ns;   /* their self time */
    double flops_per_s; /* achieved */
    double utilization; /* flops_per_s / peak, -1 when the peak is unknown */
} flops_summary;

flops_summary analysis_flops(const analysis *a);

/* ---- Steps, overlap, gaps (steps.c) ---------------------------------------------------- */

typedef struct step_summary {
    uint64_t steps; /* finalized */
    double avg_total_ns, avg_fpbp_ns;
    /* The split (model.h: step_row), a partition of the average step. */
    double avg_interval_ns, avg_compute_ns, avg_comm_wait_ns, avg_tail_ns, avg_eval_ns;
    /* Overlap: merged computation, communication, communication alone, neither; gaps. */
    double avg_overlap_compute_ns, avg_comm_ns, avg_pure_comm_ns, avg_free_ns, avg_gap_ns;
    /* The step on the device (model.h: step_row), averaged over the gpu_steps steps with device
     * work: busy and idle by cause, a partition of their average total. */
    uint64_t gpu_steps;
    uint32_t gpu_device; /* the latest such step's device; TS_DEVICE_HOST when none */
    double avg_gpu_total_ns, avg_gpu_busy_ns;
    double avg_gpu_idle_data_ns, avg_gpu_idle_host_ns, avg_gpu_idle_sync_ns, avg_gpu_idle_other_ns;
    uint64_t slowest[5]; /* step numbers, slowest first; 0 pads */
    uint64_t slowest_ns[5];
    uint64_t current_step;     /* last step begun */
    uint64_t unfinished_step;  /* the last step begun when it never ended (interrupted, or
                                  under way): in no average; 0 when every begun step ended */
    uint32_t source;           /* enum step_source of the latest step */
    uint64_t late_events;      /* arrived after their step was finalized: not in its row */
    uint64_t outside_events;   /* in no step */
    uint64_t dropped_events;   /* not attributed: the bounded buffers were full */
    uint64_t incomplete_steps; /* ended without a recorded begin */
    uint64_t evals;            /* evaluation passes (TS_PHASE_EVAL_BEGIN .. END), in steps or not */
    double eval_ns;            /* their time */
    double eval_inside_ns;     /* the part of it inside steps (the steps' eval parts) */
} step_summary;

step_summary analysis_steps(const analysis *a);

/* The last finalized steps, oldest first, at most max. */
size_t analysis_recent_steps(const analysis *a, step_row *out, size_t max);

/* A board analysis's (analysis_config.board): the totals and last rows (oldest first) of the
 * collector's step board replace what the step trace holds. */
void analysis_steps_load(analysis *a, const step_totals *t, const step_row *rows, size_t n);

/* The largest gaps between consecutive top-level ops on one thread, largest first. */
size_t analysis_gaps(const analysis *a, op_gap *out, size_t max);

/* ---- Data queues (queues.c) ------------------------------------------------------------ */

enum queue_verdict {
    QUEUE_VERDICT_NONE = 0,            /* too few samples to say */
    QUEUE_VERDICT_OK = 1,              /* not a bottleneck */
    QUEUE_VERDICT_DATA_PROCESSING = 2, /* host queue mostly empty: data processing is slow */
    QUEUE_VERDICT_TRANSFER = 3,        /* host queue full, device queue empty: transfer is slow */
    QUEUE_VERDICT_OPERATOR = 4,        /* pipeline: its producer or consumer op is the bottleneck */
    QUEUE_VERDICT_TRAINING = 5,        /* queues full: the pipeline keeps up, training is slower */
};

typedef struct queue_stat {
    uint32_t name, producer, consumer; /* ids; producer/consumer 0 when unknown */
    uint32_t role;                     /* enum ts_queue_role */
    uint64_t capacity;
    uint64_t samples;
    double avg_size;
    double avg_usage; /* 0..1 */
    double empty_share, full_share;
} queue_stat;

/* Queues in first-seen order (the index used by queue_bucket.queue). */
size_t analysis_queues(const analysis *a, queue_stat **rows);

/* The last buckets of one queue, oldest first (the live heatmap). */
size_t analysis_queue_recent(const analysis *a, uint32_t queue, queue_bucket *out, size_t max);

typedef struct queue_finding {
    uint32_t verdict;     /* enum queue_verdict */
    uint32_t queue;       /* index of the queue the finding is about */
    uint32_t op;          /* bottleneck operator (stage) name id, 0 when none */
    char text[256];       /* what the numbers say, with the numbers */
    char suggestion[256]; /* what to tune (num_parallel_workers, prefetch, ...) */
} queue_finding;

/* The verdicts, the most severe first. */
size_t analysis_queue_findings(const analysis *a, queue_finding *out, size_t max);

/* The names of a queue's verdict (none, ok, data_processing, transfer, operator, training) and
 * role (pipeline, host, device); "unknown" past them. */
const char *queues_verdict_name(uint32_t verdict);
const char *queues_role_name(uint32_t role);

/* ---- CPU (cpu.c) ----------------------------------------------------------------------- */

typedef struct cpu_summary {
    uint64_t samples;
    double machine[TS_CPU__COUNT]; /* averages, percent */
    double context_switches_per_s;
    double avg_running, avg_blocked;
    double process_user, process_system; /* averages, percent of one CPU */
    uint32_t cpus;
    uint32_t processes;          /* descendant processes sampled */
    uint32_t processes_left_out; /* most descendants one sample left out (past its limit) */
} cpu_summary;

cpu_summary analysis_cpu(const analysis *a);

/* The last samples, oldest first. */
size_t analysis_cpu_recent(const analysis *a, cpu_row *out, size_t max);

typedef struct cpu_thread {
    uint32_t tid, name; /* the name the program gave (THREAD_NAME), else the OS name sampled */
    uint64_t samples;
    double avg_user, avg_system; /* percent of one CPU */
    double last_total;           /* the latest sample's user+system */
} cpu_thread;

/* A thread's name: the one the program gave it (THREAD_NAME), else the one the OS gave it as
 * the CPU samples carry it; TS_STR_NONE when neither is known. */
uint32_t analysis_thread_label(const analysis *a, uint32_t tid);

/* Threads by average CPU descending. */
size_t analysis_cpu_threads(const analysis *a, cpu_thread **rows);

/* A descendant process of the profiled one (a data-loader worker, a helper it started). */
typedef struct cpu_child {
    uint32_t pid, ppid; /* ppid as of its latest sample */
    uint32_t name;      /* its comm, as of its latest sample that had one */
    uint64_t samples;
    double avg_user, avg_system;   /* percent of one CPU, over the time it was sampled */
    double peak_total, last_total; /* user+system of its busiest and of its latest sample */
    uint64_t cpu_ns;               /* user+system sampled */
    uint64_t last_rss, peak_rss;   /* bytes, while it ran */
    uint64_t first_ns, last_ns;    /* first sample's begin (its start, when it started in a window),
                                      latest sample's end */
    int ended; /* exited, or absent from the latest process sample (it ended, or the window
                  closed first) */
} cpu_child;

/* Descendant processes, those still running first, then by average CPU descending. *rows is
 * malloc'd (the caller frees it); 0 rows when none was sampled or without memory. */
size_t analysis_cpu_children(const analysis *a, cpu_child **rows);

/* ---- Memory (memory.c) ----------------------------------------------------------------- */

typedef struct memory_summary {
    uint64_t host_samples;
    uint64_t host_rss, host_peak_rss; /* latest and peak */
    uint32_t devices;                 /* devices with allocations */
    uint64_t device_bytes[8];         /* current, per device index < 8 */
    uint64_t device_peak[8];
    uint64_t unmatched_frees; /* frees of addresses never seen allocated */
    uint64_t unmatched_bytes;
    uint64_t untracked; /* allocations whose free cannot be matched (table full) */
    uint64_t replaced;  /* allocations at an address still live */
} memory_summary;

memory_summary analysis_memory(const analysis *a);

typedef struct alloc_stat {
    uint32_t name;   /* allocation name id (0: unnamed) */
    uint32_t device; /* TS_DEVICE_HOST or device */
    uint64_t count, bytes_total, live_bytes, peak_live_bytes;
} alloc_stat;

/* Named allocations by peak live bytes descending. */
size_t analysis_allocations(const analysis *a, alloc_stat **rows);

/* ---- Advisor (advisor.c) --------------------------------------------------------------- */

enum advice_kind {
    ADVICE_STEP_INTERVAL = 1, /* long step interval: the data pipeline */
    ADVICE_OPERATORS = 2,     /* long FP/BP: the top operators */
    ADVICE_GAPS = 3,          /* gaps between operators */
    ADVICE_TAIL = 4,          /* long step tail: communication and update */
    ADVICE_QUEUE = 5,         /* a data-queue verdict */
    ADVICE_CPU = 6,           /* CPU utilization: threads too few or too many */
    ADVICE_LOST = 7,          /* the profiler lost events: results are partial */
    ADVICE_COMM_WAIT = 8,     /* the step waits for communication (another rank, the network) */
    ADVICE_GPU_DATA = 9,      /* the device idles while the step waits for data */
    ADVICE_GPU_HOST = 10,     /* the device idles with nothing queued: launch-bound */
    ADVICE_GPU_SYNC = 11,     /* the device idles around synchronizations (loss.item()) */
};

typedef struct advice {
    uint32_t kind;  /* enum advice_kind */
    double weight;  /* share of step time at stake, 0..1, for ordering */
    char title[96]; /* one line */
    char text[768]; /* the numbers that triggered it and what to do */
} advice;

/* The tuning suggestions, most important first. */
size_t analysis_advise(const analysis *a, advice *out, size_t max);

/* The name of an advice kind (step_interval, operators, gaps, tail, queue, cpu, lost,
 * comm_wait); "unknown" past them. */
const char *advisor_kind_name(uint32_t kind);

#endif
