/*
 * termsight: the C API a training program calls.
 *
 * One profiler session per process. It owns a shared-memory segment that `termsight top` and
 * `termsight ls` find by pid, and, while collecting, a recording in
 * <output_path>/<process>-<pid>-<YYYYmmdd-HHMMSS>/recording/ that `termsight analyse` reads.
 *
 * Control calls (create, start, stop, flush, destroy) return TERMSIGHT_OK or a negative
 * termsight_error; termsight_last_error() then gives a message for the calling thread.
 *
 * Event calls (ranges, steps, phases, queues, counters, marks, memory) never block, allocate or
 * make a system call after a thread's first event, and return at once when nothing is collecting.
 * They are safe from any thread. An event that finds its thread's ring full is dropped and
 * counted, never waited for.
 */
#ifndef TERMSIGHT_H
#define TERMSIGHT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TERMSIGHT_API __attribute__((visibility("default")))
#else
#define TERMSIGHT_API
#endif

typedef enum termsight_error {
    TERMSIGHT_OK = 0,
    TERMSIGHT_E_INVALID = -1,            /* a bad argument or option */
    TERMSIGHT_E_NO_SESSION = -2,         /* no session exists in this process */
    TERMSIGHT_E_SESSION_EXISTS = -3,     /* a session already exists in this process */
    TERMSIGHT_E_ALREADY_COLLECTING = -4, /* start while collecting */
    TERMSIGHT_E_NOT_COLLECTING = -5,     /* stop while not collecting */
    TERMSIGHT_E_SYSTEM = -6,             /* the OS refused (shared memory, files, threads) */
    TERMSIGHT_E_RECORDING = -7,          /* the recording cannot be written */
    TERMSIGHT_E_TIMEOUT = -8,            /* the recorder did not answer in time */
} termsight_error;

/* A short fixed description of a code ("start while collecting", ...). */
TERMSIGHT_API const char *termsight_strerror(int code);

/* The message of the calling thread's last failing control call; "" when there was none. Valid
 * until that thread's next control call. */
TERMSIGHT_API const char *termsight_last_error(void);

typedef struct termsight_options {
    uint32_t struct_size;    /* sizeof(termsight_options), set by termsight_options_init */
    const char *output_path; /* parent of run folders; default "./termsight-data" */
    int start_collecting;    /* 1 (default): collect from creation; 0: wait for start */
    /* The most events a thread's ring holds, a power of two from 64 to 16777216; default
     * 16777216. A ring starts at 65536 (16384 where /dev/shm has less than 1 GiB free; or this,
     * when smaller) and grows, fourfold at a time,
     * while its thread outruns the recorder, within lane_budget_mb. */
    uint32_t lane_events;
    uint32_t max_threads;        /* threads that can emit at once; default 64 */
    uint32_t sample_interval_ms; /* CPU and memory sampling interval; default 100 */
    uint32_t timeline_limit_mb;  /* timeline size limit for analysis; default 500 */
    const char *fp_start_op;     /* operator that starts the forward pass; NULL: automatic */
    const char *bp_end_op;       /* operator that ends the backward pass; NULL: automatic */
    const char *process_name;    /* name shown by ls/top; NULL: /proc/self/comm */
    /* The training job this process is a rank of (docs/jobs.md). NULL and -1:
     * from the environment the launcher left (torchrun, Slurm, Open MPI, TERMSIGHT_JOB...).
     * A job's run folders go under one job folder, <output_path>/<job>/. */
    const char *job;    /* job id; NULL: from the environment; "" with no rank: no job */
    int32_t rank;       /* this process's rank in the job; -1: from the environment */
    int32_t local_rank; /* its rank on this machine; -1: from the environment */
    int32_t world_size; /* the job's ranks; -1: from the environment */
    /* MiB of shared memory the session's grown rings may take, 0 to 65536; default 256. 0:
     * rings never grow. */
    uint32_t lane_budget_mb;
    /* Flight recorder (docs/usage.md, "Flight recorder"): MiB of memory that keep the last events
     * while collecting, without writing a recording; a snapshot (termsight snapshot, SIGUSR2, a
     * step much slower than the ones before it, a hang) writes them as a recording. 0 (default):
     * off. */
    uint32_t flight_mb;
} termsight_options;

/* Fills *opts with the defaults, then applies the TERMSIGHT_* environment variables (see
 * docs/usage.md, "Environment variables": TERMSIGHT_OUTPUT, TERMSIGHT_START, TERMSIGHT_LANE_EVENTS,
 * TERMSIGHT_LANE_BUDGET_MB, TERMSIGHT_MAX_THREADS, TERMSIGHT_SAMPLE_MS,
 * TERMSIGHT_TIMELINE_LIMIT_MB, TERMSIGHT_FLIGHT, TERMSIGHT_FLIGHT_MB) and the MindSpore Profiler's
 * PROFILING_FP_START / PROFILING_BP_END. */
TERMSIGHT_API void termsight_options_init(termsight_options *opts);

typedef struct termsight_session termsight_session;

/* Creates this process's session: the segment, the recorder thread and, when start_collecting,
 * the first collection window. opts NULL means termsight_options_init's values. Fails with
 * TERMSIGHT_E_SESSION_EXISTS when one exists, TERMSIGHT_E_INVALID for bad options,
 * TERMSIGHT_E_SYSTEM when shared memory or a thread cannot be had. When only the first window
 * cannot open (the run folder or the recording cannot be made: a full disk, an output folder
 * that is another user's link), the session is still created, not collecting, with one line on
 * stderr saying why: the training runs on, a monitor shows the session, a later start may
 * succeed. Under `termsight run` (TERMSIGHT_AUTOSTART=1) a session exists before main: the first
 * create returns it with TERMSIGHT_OK, with the run's options rather than opts, and the caller
 * then owns it. A program that cannot have a session should train on without one (the examples
 * do). */
TERMSIGHT_API int termsight_session_create(const termsight_options *opts, termsight_session **out);

/* Opens a collection window. TERMSIGHT_E_ALREADY_COLLECTING while collecting. */
TERMSIGHT_API int termsight_start(termsight_session *s);

/* Closes the window; everything emitted before the call is recorded before it returns.
 * TERMSIGHT_E_NOT_COLLECTING when no window is open. */
TERMSIGHT_API int termsight_stop(termsight_session *s);

/* Everything emitted before the call is written to the recording and synced to disk. */
TERMSIGHT_API int termsight_flush(termsight_session *s);

/* Flight recorder (options.flight_mb, TERMSIGHT_FLIGHT): writes the events kept, from the first
 * whole step they hold, as a recording in a folder of its own under the run folder,
 * snapshots/NN-request/ (why, may be NULL: said in its metadata). TERMSIGHT_E_INVALID when the
 * session keeps no flight recorder. */
TERMSIGHT_API int termsight_snapshot(termsight_session *s, const char *why);

/* Stops collecting if needed, flushes, ends the recorder, removes the segment, frees s. */
TERMSIGHT_API int termsight_session_destroy(termsight_session *s);

/* CUDA collection next to another CUPTI client in the process (PyTorch's profiler, which takes
 * CUPTI's buffers and may turn its activity kinds off when it stops): lent 1 just before that
 * client starts (termsight's device records so far are flushed to it first), 0 just after it
 * stopped (termsight takes CUPTI back). termsight.torch calls it around torch.profiler blocks;
 * the window's metadata says while device records were lent. TERMSIGHT_OK, also where CUDA
 * collection is off; TERMSIGHT_E_SYSTEM when CUPTI could not be taken back (said there). */
TERMSIGHT_API int termsight_cuda_lend(int lent);

/* The session of this process, or NULL. */
TERMSIGHT_API termsight_session *termsight_session_current(void);

/* "idle", "collecting", "stopped". */
TERMSIGHT_API const char *termsight_state(const termsight_session *s);

/* The run folder (holding recording/ and later report/). A flight recorder's is made at its
 * first snapshot. */
TERMSIGHT_API const char *termsight_run_folder(const termsight_session *s);

/* 1 when the session keeps a flight recorder (and writes no recording), else 0. */
TERMSIGHT_API int termsight_flight(const termsight_session *s);

/* The flight recorder's SIGUSR2, for a binding whose runtime keeps its own table of handlers
 * (Python's signal.getsignal() shows a handler set in C as None, which cannot be restored):
 * request 0 returns 1 when termsight's own SIGUSR2 handler is the one installed, else 0; request
 * 1 asks for a snapshot as SIGUSR2 does (async-signal-safe) and returns 1. The binding puts a
 * handler of its runtime in termsight's place that calls this with 1. */
TERMSIGHT_API int termsight_flight_signal(int request);

/* Events recorded and dropped so far. */
TERMSIGHT_API uint64_t termsight_events_recorded(const termsight_session *s);
TERMSIGHT_API uint64_t termsight_events_dropped(const termsight_session *s);

/* ---- Events ---------------------------------------------------------------------------- */

/* Nanoseconds on the collector's clock (CLOCK_MONOTONIC's epoch), for complete ranges. */
TERMSIGHT_API uint64_t termsight_now_ns(void);

/* The id of a name (any bytes), for the *_id calls. Interning is lock-free for names already
 * seen; ids are stable for the session. Returns 0 when no session exists. */
TERMSIGHT_API uint32_t termsight_name(const char *name);
TERMSIGHT_API uint32_t termsight_name_n(const char *bytes, size_t len);

/* Operator ranges nest per thread: end closes the innermost open range of the calling thread.
 * type may be NULL (derived later from the name). Only ranges that begin and end within one
 * collection window are recorded: one that began before a start, or ends after a stop, is not. */
TERMSIGHT_API void termsight_range_begin(const char *name, const char *type);
TERMSIGHT_API void termsight_range_begin_id(uint32_t name, uint32_t type);
TERMSIGHT_API void termsight_range_end(void);
/* Ends the innermost open range without recording it: a wait that turned out to be none (an
 * iterator found exhausted). Until it ends, a range shows as open to monitors either way. */
TERMSIGHT_API void termsight_range_drop(void);
/* Attaches a FLOPs count to the innermost open range of the calling thread. */
TERMSIGHT_API void termsight_range_flops(uint64_t flops);
/* A whole range with its own timestamps (termsight_now_ns clock). */
TERMSIGHT_API void termsight_range_complete(uint32_t name, uint32_t type, uint64_t begin_ns,
                                            uint64_t end_ns, uint64_t flops);

/* A whole communication (a collective or a send/receive) from its issue to its completion
 * (termsight_now_ns clock), with the bytes it moved (0 when unknown); name says which (an id
 * from termsight_name). May be called from any thread, the one that saw it complete included.
 * The analysis counts it as communication, never as computation: the step trace's comm_wait is
 * the time a step waits for it with nothing computing. Recorded only while collecting, like
 * every event; never blocks, drops (and counts) when the thread's lane is full. */
TERMSIGHT_API void termsight_comm_complete(uint32_t name, uint32_t type, uint64_t begin_ns,
                                           uint64_t end_ns, uint64_t bytes);

/* Hang triage: a communication issued at begin_ns (termsight_now_ns clock) that has not yet
 * completed, shown to monitors (termsight top, termsight hang) as in flight until
 * termsight_comm_done(ticket), called from any thread (the one that sees it complete). Whether or
 * not collecting, while a session exists; no lock, no system call. Returns the ticket, 0 when
 * there is no session or TS_COMM_SLOTS (16) are in flight already (then it is not shown). */
TERMSIGHT_API uint64_t termsight_comm_issue(uint32_t name, uint64_t begin_ns);
TERMSIGHT_API void termsight_comm_done(uint64_t ticket);

/* Hang triage: tells monitors that the program writes every thread's stack into the file
 * "python-stacks.txt" in its run folder when it gets signal signo (termsight.torch and the Python
 * binding set this up with faulthandler), so that `termsight hang` can ask for them; 0: it does
 * not. TERMSIGHT_OK, TERMSIGHT_E_NO_SESSION, or TERMSIGHT_E_INVALID (not a real-time signal,
 * SIGRTMIN to SIGRTMAX). */
TERMSIGHT_API int termsight_stacks_signal(int signo);

/* The file termsight_stacks_signal announces, opened for appending (made with mode 0600 when
 * missing, never through a link) in the session's run folder. A flight recorder's run folder,
 * otherwise made at its first snapshot, is made here, through the checks every run folder passes
 * (an output folder of another user's, or one others may write, is refused). Returns a descriptor
 * the caller owns, or -1: no session, no run folder yet (a session that has not recorded), or
 * refused (termsight_last_error says why). */
TERMSIGHT_API int termsight_stacks_file(termsight_session *session);

/* Steps: begin numbers the step (1, 2, ... per session) and returns its number. */
TERMSIGHT_API uint64_t termsight_step_begin(void);
TERMSIGHT_API void termsight_step_end(void);

typedef enum termsight_phase {
    TERMSIGHT_FORWARD_START = 1,
    TERMSIGHT_BACKWARD_END = 2,
    /* An evaluation pass between training steps (validation): from its begin to its end, time is
     * in no step (the next step's interval starts at the end), and the report counts the passes
     * and their time apart. termsight.torch marks them around no-grad loader loops. */
    TERMSIGHT_EVAL_BEGIN = 3,
    TERMSIGHT_EVAL_END = 4,
} termsight_phase;
TERMSIGHT_API void termsight_phase_mark(termsight_phase phase);

typedef enum termsight_queue_role {
    TERMSIGHT_QUEUE_PIPELINE = 0, /* between two data-pipeline stages */
    TERMSIGHT_QUEUE_HOST = 1,     /* batches ready on the host */
    TERMSIGHT_QUEUE_DEVICE = 2,   /* batches on the device waiting for a step */
} termsight_queue_role;

/* Registers a bounded queue; producer and consumer name the stages that fill and drain it (NULL
 * when unknown). Returns a handle for termsight_queue_size, 0 when no session exists or the
 * queue table (256 queues) is full. */
TERMSIGHT_API uint32_t termsight_queue_register(const char *name, uint64_t capacity,
                                                termsight_queue_role role, const char *producer,
                                                const char *consumer);
TERMSIGHT_API void termsight_queue_size(uint32_t queue, uint64_t size);

TERMSIGHT_API void termsight_counter(const char *name, double value);
TERMSIGHT_API void termsight_counter_id(uint32_t name, double value);
TERMSIGHT_API void termsight_mark(const char *text);

/* Host or device memory the program manages itself; device -1 for host. */
TERMSIGHT_API void termsight_memory_alloc(const char *name, uint64_t address, uint64_t bytes,
                                          int device);
TERMSIGHT_API void termsight_memory_free(uint64_t address, uint64_t bytes, int device);

/* Names the calling thread in every view. */
TERMSIGHT_API void termsight_thread_name(const char *name);
/* Names another process of this one's (a worker it started: "DataLoader worker 0") as the CPU
 * views and reports show it, instead of its command name. */
TERMSIGHT_API void termsight_process_name(uint32_t pid, const char *name);

/* ---- Inline fast path ------------------------------------------------------------------ */

/* Not an API to call: nonzero while a collection window is open. The macros below test it in the
 * caller, so an event call while nothing is collecting costs one load and a branch instead of a
 * call into the library. The functions behind them check again, so taking their address or
 * calling them through a binding (ctypes) behaves the same. Define TERMSIGHT_NO_INLINE_CHECK to
 * call the functions directly. */
extern TERMSIGHT_API volatile int termsight_collecting_;

#if !defined(TERMSIGHT_NO_INLINE_CHECK) && defined(__GNUC__)
/* A relaxed atomic load: the same plain load on every target, and no data race for ThreadSanitizer
 * against the release store that start and stop make. */
#define TERMSIGHT_IF_COLLECTING_(call)                                                             \
    (__builtin_expect(__atomic_load_n(&termsight_collecting_, __ATOMIC_RELAXED), 0) ? (call)       \
                                                                                    : (void)0)
#define termsight_range_begin(n, t)    TERMSIGHT_IF_COLLECTING_(termsight_range_begin(n, t))
#define termsight_range_begin_id(n, t) TERMSIGHT_IF_COLLECTING_(termsight_range_begin_id(n, t))
#define termsight_range_end()          TERMSIGHT_IF_COLLECTING_(termsight_range_end())
#define termsight_range_drop()         TERMSIGHT_IF_COLLECTING_(termsight_range_drop())
#define termsight_range_flops(f)       TERMSIGHT_IF_COLLECTING_(termsight_range_flops(f))
#define termsight_range_complete(n, t, b, e, f)                                                    \
    TERMSIGHT_IF_COLLECTING_(termsight_range_complete(n, t, b, e, f))
#define termsight_comm_complete(n, t, b, e, by)                                                    \
    TERMSIGHT_IF_COLLECTING_(termsight_comm_complete(n, t, b, e, by))
#define termsight_step_end()       TERMSIGHT_IF_COLLECTING_(termsight_step_end())
#define termsight_phase_mark(p)    TERMSIGHT_IF_COLLECTING_(termsight_phase_mark(p))
#define termsight_queue_size(q, n) TERMSIGHT_IF_COLLECTING_(termsight_queue_size(q, n))
#define termsight_counter(n, v)    TERMSIGHT_IF_COLLECTING_(termsight_counter(n, v))
#define termsight_counter_id(n, v) TERMSIGHT_IF_COLLECTING_(termsight_counter_id(n, v))
#define termsight_mark(t)          TERMSIGHT_IF_COLLECTING_(termsight_mark(t))
#define termsight_memory_alloc(n, a, b, d)                                                         \
    TERMSIGHT_IF_COLLECTING_(termsight_memory_alloc(n, a, b, d))
#define termsight_memory_free(a, b, d) TERMSIGHT_IF_COLLECTING_(termsight_memory_free(a, b, d))
#endif

#ifdef __cplusplus
}
#endif

#endif
