/*
 * collectors: what runs inside the training process. The room's header, for its files and its
 * tests; the public face is include/termsight/termsight.h.
 */
#ifndef TERMSIGHT_COLLECTORS_H
#define TERMSIGHT_COLLECTORS_H

#include "model.h"
#define TERMSIGHT_NO_INLINE_CHECK /* the room defines the functions the macros call */
#include "termsight/termsight.h"

#include <pthread.h>
#include <regex.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#define TS_MAX_QUEUES       256
#define TS_MAX_THREAD_NAMES 4096
#define TS_MAX_FRAMES       128 /* open ranges kept per thread; deeper ones are counted, not timed */

/* ---- Hot-path globals (api.c) ---------------------------------------------------------- */

/* Collection windows opened so far; open range frames of an earlier window are dropped. */
extern _Atomic uint32_t ts_window;

/* The flag every event call tests first (termsight_collecting_, exported for the header's inline
 * check): set with a release store when a window opens, cleared when it closes. */
static inline void collecting_set(int on)
{
    __atomic_store_n(&termsight_collecting_, on, __ATOMIC_RELEASE);
}
/* Bumped for every new session, so threads drop lanes of a segment that is gone. */
extern _Atomic uint32_t ts_generation;
/* The collector clock. */
extern tsclock ts_clock;

/* Collection windows without code (window.c): TERMSIGHT_STEPS=A-B from step A's begin through
 * step B's end, and TERMSIGHT_DELAY_S / TERMSIGHT_DURATION_S. */
typedef struct auto_window {
    /* The step window; steps_to 0 when unset. Set before the program's first step. */
    uint64_t steps_from, steps_to;
    _Atomic int steps_state;  /* 0 before step A, 1 from its begin, 2 after step B's end */
    _Atomic uint32_t req;     /* WINDOW_REQ_*: what a training thread left for the loop */
    _Atomic uint64_t open_ns; /* when the training thread turned collection on */
    /* On the loop, under control. */
    int prepared;                                  /* the recording opened ahead of step A */
    int timed;                                     /* a timed window waits to open at start_at_ns */
    uint64_t start_at_ns, stop_at_ns, duration_ns; /* monotonic; stop_at_ns 0: none */
} auto_window;

#define WINDOW_REQ_OPEN  1u /* the step window began: collection is on, its marker is due */
#define WINDOW_REQ_CLOSE 2u /* the step window ended: collection is off, the stop is due */

typedef struct queue_slot {
    uint32_t name;
    uint32_t producer;
    uint32_t consumer;
    uint32_t role;
    uint64_t capacity;
} queue_slot;

/* ---- The job this process is a rank of (job.c) ------------------------------------------ */

typedef struct ts_job {
    char id[64];  /* a path component; "" when the process is no rank of a job */
    int32_t rank; /* -1 when unknown, as the two below */
    int32_t local_rank;
    int32_t world_size;
    char host[64];      /* this machine's short name, a path component */
    char source[16];    /* where id came from: "options", "TERMSIGHT_JOB", "torchrun", "slurm",
                         * "mpi", "torch" (ranks without a run id), "" */
    int32_t parent_pid; /* a forked child's session (session_adopt_child): its parent; else 0 */
} ts_job;

/* The job identity of this process: o's fields where set, else the launcher's environment. */
void job_identify(const termsight_options *o, ts_job *job);

/* ---- The session (session.c) ----------------------------------------------------------- */

typedef struct recorder recorder;       /* recorder.c's */
typedef struct flight flight;           /* flight.c's */
typedef struct sampler_ctl sampler_ctl; /* sampler.c's */

/* The session's own fields, written by session.c (and by the loop it owns, loop.c, and its
 * windows, window.c). Other files of the room read what they need of it: the hot path (api.c)
 * its names, segment, generation and step count directly, as a load costs less than a call;
 * the recorder and the sampler keep their state in structures of their own, opaque here. */
struct termsight_session {
    termsight_options opts; /* strings below are owned copies */
    char *output_path;
    char *fp_start_op;
    char *bp_end_op;
    char process[64];
    ts_job job;
    int children; /* forked children record (TERMSIGHT_CHILDREN) */
    char run_folder[1024];
    char recording_dir[1100];
    uint64_t start_ns, start_realtime_ns; /* as the header says them, kept: never read back */

    segment *seg;
    strtab *names;
    uint32_t generation;

    pthread_mutex_t control; /* serializes start/stop/flush/destroy; taken before drain */
    pthread_mutex_t drain;   /* the lanes' consumer and the collector's own lane */

    /* The recorder thread (recorder.c). It alone opens, writes and closes the recording, in a
     * descriptor table of its own where it can (so a program that closes or reuses descriptors
     * cannot reach them); control calls from other threads are handed to it as requests. */
    pthread_t recorder;
    int recorder_running;
    _Atomic int recorder_quit;
    int private_fds;          /* the recorder's descriptor table is its own */
    pthread_mutex_t req_lock; /* one request at a time */
    pthread_mutex_t wake_lock;
    pthread_cond_t wake; /* the recorder's sleep; a request or a quit ends it */
    pthread_cond_t done; /* a request was answered */
    struct {
        int pending;
        uint32_t cmd;
        const char *arg;
        int rc;
        char msg[512];
    } req; /* under wake_lock */

    /* The recorder's state (recorder.c, its own), under drain. */
    recorder *rec;
    /* The flight recorder (flight.c), NULL when off: the last events, kept in place of a
     * recording while collecting. Under drain. */
    flight *flight;
    char snapshot_folder[1400]; /* the last snapshot asked for (cmd_snapshot), under control */

    /* The collector's own figures; the header holds mirrors that it never reads back. */
    _Atomic uint32_t state; /* enum ts_state */
    _Atomic uint64_t events_recorded;
    _Atomic uint64_t drops;
    _Atomic uint32_t record_error; /* errno that stopped recording, 0 while it works */
    char record_notice[256];       /* why; written once, before record_error */

    /* Under control. */
    uint32_t window;
    /* When the current or last window began; written under drain and control, read under
     * either (the CUDA collector leaves out device records from before it). */
    uint64_t window_begin_ns;
    mailbox_state mailbox;

    /* Registered metadata, replayed at every window start. Under meta. */
    pthread_mutex_t meta;
    queue_slot queues[TS_MAX_QUEUES];
    _Atomic uint32_t queue_count;
    int queue_table_full; /* a register found no room: said once on stderr */
    struct {
        uint32_t tid, name;
    } threads[TS_MAX_THREAD_NAMES];
    uint32_t thread_count;

    _Atomic uint64_t no_lane_drops; /* events of threads that found no free lane */
    inflight_claims comm_claims;    /* the communications in flight, published for monitors */
    _Atomic uint64_t step;          /* last step number begun */

    /* The /proc sampler's thread and its wake-ups (sampler.c, its own). */
    sampler_ctl *smp;
    /* The window being sampled, 0 when not collecting. Written under drain, so a sample taken
     * under drain lies between its window's start and stop markers. */
    _Atomic uint32_t sample_window;

    /* Auto-start (autostart.c): a session created from the environment by TERMSIGHT_AUTOSTART,
     * which termsight_session_create hands to the program instead of failing. */
    int autostarted;
    /* The windows the session opens by itself (window.c). */
    auto_window windows;
    /* Ended sessions, kept (session.c: session_retire). */
    struct termsight_session *retired_next;
};

/* An instant of the collector itself (a window marker, an option, a note) at this moment, on
 * the calling thread. */
static inline ts_event session_marker(uint16_t kind, uint32_t name, uint32_t type, uint64_t v0)
{
    uint64_t now = tsclock_now(&ts_clock);
    return (ts_event){.kind = kind,
                      .tid = (uint32_t)gettid(),
                      .device = TS_DEVICE_HOST,
                      .name = name,
                      .type = type,
                      .begin_ns = now,
                      .end_ns = now,
                      .v0 = v0};
}

/* The id of a text in the session's names ("" for NULL). */
static inline uint32_t session_intern(termsight_session *s, const char *text)
{
    return strtab_intern(s->names, text ? text : "", text ? strlen(text) : 0, NULL);
}

/* Checks options as termsight_session_create does: TERMSIGHT_OK, or TERMSIGHT_E_INVALID with
 * termsight_last_error() naming the option (or its environment variable when that is set). */
int session_check_options(const termsight_options *o);

/* The current session (NULL when none); set and cleared under the create lock. */
extern termsight_session *_Atomic ts_session;

/* A session due on this process's first event (session_adopt_pending), or SESSION_PENDING_NONE:
 * - SESSION_PENDING_CHILD: a forked child of a collecting process (docs/usage.md, "Child
 * processes"), its own session made from its parent's;
 * - SESSION_PENDING_AUTO: a process `termsight run` started (autostart.c), its session made from
 *   the environment; a process that records nothing of its own (a shell, env, a launcher's
 *   shim) never makes one.
 * While one is due, termsight_collecting_ is 1, so that the first event call gets this far. */
enum { SESSION_PENDING_NONE, SESSION_PENDING_CHILD, SESSION_PENDING_AUTO };
extern _Atomic int ts_session_pending;

/* This process has forked since it loaded the library (its children may have sessions). */
extern _Atomic int ts_forked;

/* The session due (ts_session_pending), made on the first call that needs one: a forked child's
 * from its parent's options, job and rank, names (same ids) and queues; an autostarted process's
 * from the environment. NULL when it cannot be made (said once, and the process runs
 * unprofiled). */
termsight_session *session_adopt_pending(void);

/* The current session; where one is due (ts_session_pending), made on this first call. */
static inline termsight_session *session_current(void)
{
    termsight_session *s = atomic_load_explicit(&ts_session, memory_order_acquire);
    if (__builtin_expect(!s && atomic_load_explicit(&ts_session_pending, memory_order_relaxed), 0))
        s = session_adopt_pending();
    return s;
}

/* Reaps what the dead forked children of this process left (their segments: the lanes'
 * events into their recordings, then removed). On the recorder thread, now and then. */
void session_reap_children(termsight_session *s);

/* Reaps what earlier programs of this process (before an exec) left: their segments, whose
 * lanes' last events go into their recordings. */
void session_reap_earlier_images(termsight_session *s);

/* Sets the calling thread's termsight_last_error() message and returns code. */
int session_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Clears the calling thread's termsight_last_error() message and returns TERMSIGHT_OK. */
int session_ok(void);

/* ---- Between the session's files (session.c, session_commands.c, session_fork.c) ------------ */

/* Held while a session is made or ended; made anew in a forked child (session_fork.c). */
extern pthread_mutex_t session_create_lock;

/* Makes the process's session (termsight_session_create). parent: for a forked child's own
 * session (session_fork.c), the parent's session as the fork copied it, read for what the child
 * inherits, and parent_pid its process; NULL and 0 otherwise. Returns a termsight_error. */
int session_create_from(const termsight_options *opts, const termsight_session *parent,
                        int32_t parent_pid, termsight_session **out);

/* Copies into a forked child's new session what it takes from the parent's: names in id order,
 * the registered queues, the step count. */
void session_inherit(termsight_session *s, const termsight_session *p);

/* Installs the fork handlers (session_fork.c); once per process. */
void session_fork_install(void);

/* The process tree's shared-memory ledger, NULL before the first session made it. */
ts_shm_budget *session_budget(void);

/* Sets the session's state and its mirror in the segment's header, under the control lock. */
void session_set_state(termsight_session *s, uint32_t state);

/* Runs one control command as the API or the mailbox asks; returns a termsight_error. Takes the
 * control lock. On the recorder thread only (session_request hands commands to it). */
int session_command(termsight_session *s, uint32_t cmd, const char *arg);

/* The command that ends a session (termsight_session_destroy), run by the recorder thread: stop,
 * last drains, the recording closed; the recorder thread then ends. */
#define SESSION_CMD_END 0x100u

/* Runs cmd on the recorder thread (at once when called there) and waits for its answer; the
 * message, if any, becomes the calling thread's termsight_last_error(). */
int session_request(termsight_session *s, uint32_t cmd, const char *arg);

/* The session's state (enum ts_state), its own copy. */
uint32_t session_state(const termsight_session *s);

/* Recording stopped for good (cannot be written): the reason, kept once, mirrored into the
 * header for monitors. err is an errno value. */
void session_record_failed(termsight_session *s, int err, const char *why);

/* ---- Internal event entries (api.c), for NVTX and other collectors in the room --------- */

/* termsight_range_begin_id with a correlation value kept in the frame and written into the
 * range's corr field at its end (NVTX: the domain's name id). */
void api_range_begin(uint32_t name, uint32_t type, uint32_t corr);
/* Pushes a fully built event (tid included) into the calling thread's lane while collecting. */
void api_emit(ts_event *ev);
/* The calling thread's id, as events carry it (cached after the thread's first event). */
uint32_t api_tid(void);
/* Names thread tid (any thread of the process) in the session's metadata and, while
 * collecting, with a THREAD_NAME event. */
void api_thread_name_tid(uint32_t tid, uint32_t name);

/* ---- Auto-start (autostart.c) ----------------------------------------------------------- */

/* When TERMSIGHT_AUTOSTART=1: checks the environment's options and makes the session due
 * (SESSION_PENDING_AUTO), made on the process's first event; the process `termsight run` started
 * (TERMSIGHT_ROOT_PID) gets it at once, so that an unmodified program is sampled. Idempotent and
 * thread-safe; prints one line on stderr only when the options are wrong. */
void autostart_ensure(void);
/* Makes the due autostart session now (the process records: its first event, CUDA). NULL when
 * there is none or it cannot be made (said once). Under autostart's lock. */
termsight_session *autostart_now(void);

/* Fills the NVTX callback tables of the module whose export-table getter (an
 * NvtxGetExportTableFunc_t, passed as a plain function pointer: this header knows no NVTX type)
 * is given: 1 when filled (again for a module seen before), 0 when not
 * (NVTX then makes that module's calls no-ops). nvtx.c; called from entry.c. */
int nvtx_inject(void (*get_export_table)(void));
/* ---- NVTX (nvtx.c) ---------------------------------------------------------------------- */

/* Compiles the step pattern (TERMSIGHT_STEP_PATTERN, else the default) once. Returns 0, or -1
 * with a message in *why (static storage) when the pattern does not compile. */
int nvtx_step_pattern_init(const char **why);
/* Compiles pattern (NULL or empty: the default) into *re as the step pattern is compiled.
 * Returns 0, or -1 with a message naming TERMSIGHT_STEP_PATTERN in why (cap bytes). */
int nvtx_step_pattern_compile(const char *pattern, regex_t *re, char *why, size_t cap);

/* ---- Windows the session opens by itself (window.c) --------------------------------------- */

/* Before the program's first step (or at once, for the timed window): collect from step from's
 * begin through step to's end; collect from delay_s seconds from now, for duration_s seconds
 * (0: until stopped). Take the control lock. */
void window_set_steps(termsight_session *s, uint64_t from, uint64_t to);
void window_set_timed(termsight_session *s, uint32_t delay_s, uint32_t duration_s);

/* The step calls' hooks, on the training thread when s->windows.steps_to is set: no lock, no
 * allocation, no system call. At step A's begin collection is turned on and the window's
 * start is left for the loop (its marker carries this moment); at step B's end it is turned
 * off and the stop left for the loop. */
void window_step_begin(termsight_session *s, uint64_t step);
void window_step_end(termsight_session *s, uint64_t step);

/* On the loop, under the control lock: what the windows ask for now (the recording opened
 * ahead of a step window, a window's start or stop). */
void window_serve_locked(termsight_session *s);

/* 1 while a window a training thread opened waits for its start marker: the recorder writes
 * nothing until the loop has served it, so no event of the window comes before its marker. */
static inline int window_opening(termsight_session *s)
{
    return (atomic_load_explicit(&s->windows.req, memory_order_acquire) & WINDOW_REQ_OPEN) != 0;
}

/* ---- Window control on the loop (session.c), under the control lock -------------------------- */

/* Opens a window whose start marker says begin_ns. thread_opened: collection was already turned
 * on by a training thread (the step window). Returns a termsight_error. */
int session_window_open_locked(termsight_session *s, uint64_t begin_ns, int thread_opened);
/* Closes the open window (termsight_stop's work). Returns a termsight_error. */
int session_window_close_locked(termsight_session *s);
/* The options and registered names a window begins with, each handed to put (under drain). */
void session_window_metadata(termsight_session *s, void (*put)(void *ctx, const ts_event *ev),
                             void *ctx);
/* Opens the run folder and the recording before any window (a step window's, whose first
 * events then have somewhere to go). Returns a termsight_error. */
int session_recording_open_locked(termsight_session *s);

/* ---- The session's background thread (loop.c) ----------------------------------------- */

/* Starts the thread "termsight-rec" (the recorder's state first). Returns 0 or -1. */
int loop_start(termsight_session *s);
/* Asks the thread to end and joins it (after a last drain). */
void loop_stop(termsight_session *s);
/* Wakes the thread from its sleep (a request is waiting, or it must quit). */
void loop_wake(termsight_session *s);

/* ---- The recorder (recorder.c) --------------------------------------------------------- */

/* The recorder's state for s (per-lane counts, the collector's own lane). Returns 0 or -1 (the
 * state made so far is then freed by recorder_free). */
int recorder_init(termsight_session *s);
void recorder_free(termsight_session *s);

/* The recording file, under the drain lock on the recorder thread. Open: the run folder and its
 * recording/ made at the first call (kept open, in the recorder's own descriptor table), the
 * recording opened in it, disk space reserved beside it for a last note; nothing when open.
 * Sync: what was written reaches the disk. Close (the session's end): synced and closed, or,
 * when recording failed during a window (had_window), reopened once for the note of why and
 * of what was lost. Each returns a termsight_error with termsight_last_error() set. */
int recorder_open_locked(termsight_session *s);
/* The header of a recording of this session's (the recording's, a snapshot's). */
void recorder_meta(const termsight_session *s, recording_meta *meta);
int recorder_sync_locked(termsight_session *s);
int recorder_close_locked(termsight_session *s, int had_window);

/* On the recorder thread: drains every lane into the recording (or discards, when recording
 * failed). Takes the drain lock. Returns the number of events taken plus the loss notices it
 * left in the collector's lane: 0 when there was nothing to do. */
size_t recorder_drain(termsight_session *s);

/* Under the drain lock, on any thread: appends events of the collector itself (markers,
 * metadata, samples, device records) to its own lane, where monitors see them too; what does not
 * fit waits in order for the recorder's next drain. Never waits and never writes. */
void recorder_append_locked(termsight_session *s, const ts_event *ev, size_t n);

/* Counts n events of the program's own that came another way than its threads' lanes (the CUDA
 * collector's device records), in the header's program_events. Under the drain lock. */
void recorder_count_program_locked(termsight_session *s, uint64_t n);

/* Under the drain lock, on the recorder thread: drains every lane now, so what was appended is
 * written. */
void recorder_commit_locked(termsight_session *s);

/* ---- The flight recorder (flight.c) --------------------------------------------------- */

/* The last events in mb MiB of memory of the process's own (pages had as they fill), with the
 * triggers of automatic snapshots from the environment (docs/usage.md, "Flight recorder"). NULL
 * when the memory cannot be had. */
flight *flight_create(uint32_t mb);
void flight_free(flight *f);
/* Under drain, on the recorder thread: a drain begins at now (before it peeks at the lanes), and
 * the events it takes, in order. */
void flight_drain_begins(flight *f, uint64_t now);
void flight_put(flight *f, lane_run run);
/* On the recorder thread, after a drain: the automatic snapshots (a step much slower than the
 * ones before it, no step ended for long) and SIGUSR2's. */
void flight_watch(termsight_session *s, uint64_t now);
/* Under control and drain, on the recorder thread: writes the events kept as a recording in a
 * snapshot folder (cause: a path component; step: the step concerned, 0 none; why: said in its
 * metadata). The folder's path into folder. A termsight_error. */
int flight_snapshot_locked(termsight_session *s, const char *cause, uint64_t step, const char *why,
                           char *folder, size_t cap);
/* SIGUSR2 asks for a snapshot, where the program left it to its default; once per process. */
void flight_signal_install(void);

/* ---- The /proc sampler (sampler.c, procfs.c) ------------------------------------------ */

/* The sampler's control block (its locks, its wake-ups), before any of the session's threads
 * starts: the loop asks it for samples. Returns 0 or -1. */
int sampler_init(termsight_session *s);
/* Starts the thread "termsight-smp", which samples the machine, the process, its threads and
 * its memory every sample_interval_ms while s->sample_window is nonzero. Returns 0, or -1 when
 * the thread cannot start. */
int sampler_start(termsight_session *s);
/* Ends the sampler thread and joins it, after a last sample when a window is open. Fine when it
 * never started. */
void sampler_stop(termsight_session *s);
/* Frees what sampler_start made, after sampler_stop (with the session). */
void sampler_free(termsight_session *s);
/* Has the sampler take a sample now, outside the drain lock: at a window's start its baseline,
 * before a window's stop marker its last sample. wait: until it was taken (at most a second). */
void sampler_sample_now(termsight_session *s, int wait);

/* The descendants of pid (children, their children ...), breadth first, as the sampler finds
 * them: through /proc/<pid>/task/<tid>/children when children_files, else by reading every
 * process's parent in /proc. At most max (and the sampler's limit, 256) into out; *left_out
 * (may be NULL) counts those seen past that. Returns the count, or -1 without memory. */
int sampler_descendants(int children_files, uint32_t pid, uint32_t *out, uint32_t max,
                        uint32_t *left_out);

/* /proc/stat: the "cpu " line in clock ticks (enum ts_cpu_field order), context switches since
 * boot, runnable and blocked processes. */
typedef struct procfs_machine {
    uint64_t cpu[TS_CPU__COUNT];
    uint64_t ctxt;
    uint32_t running, blocked;
} procfs_machine;

/* /proc/<pid>/stat or /proc/<pid>/task/<tid>/stat: CPU time and start (since boot) in clock
 * ticks, parent, threads, resident pages (the process's, also in a thread's file). */
typedef struct procfs_task {
    uint64_t utime, stime;
    uint64_t start;
    uint64_t rss_pages;
    uint32_t ppid;
    uint32_t num_threads;
    char state; /* R, S, D, Z (exited, not yet waited for), ... */
} procfs_task;

/* Parse len bytes of text (need not be NUL-terminated). Return 0, or -1 when a field is
 * missing, cut short, not a number or does not fit. */
int procfs_parse_stat(const char *text, size_t len, procfs_machine *out);
/* comm may hold spaces and parentheses: the fields are read after the last ')', up to rss
 * (field 24), which every kernel since 2.6 writes. */
int procfs_parse_task_stat(const char *text, size_t len, procfs_task *out);
/* /proc/<pid>/task/<tid>/schedstat: the thread's time on a CPU, in nanoseconds (the
 * scheduler's own figure, where stat's are clock ticks). */
int procfs_parse_schedstat(const char *text, size_t len, uint64_t *run_ns);
/* VmRSS and VmHWM, in bytes. */
int procfs_parse_status(const char *text, size_t len, uint64_t *rss_bytes, uint64_t *hwm_bytes);
/* A thread's comm without its newline into out (cap bytes with the NUL); -1 when empty input,
 * a NUL byte, or longer than cap - 1. */
int procfs_parse_comm(const char *text, size_t len, char *out, size_t cap);

/* ---- Helpers (util.c) ------------------------------------------------------------------ */

/* Starts a collector thread named name (15 bytes at most) with every signal blocked; detached
 * when asked. Returns 0, or -1 when it cannot start. */
int util_thread_start(pthread_t *t, int detached, void *(*fn)(void *), void *arg, const char *name);

/* A condition variable whose timed waits go by CLOCK_MONOTONIC, the collector clock's epoch. */
void util_cond_init_monotonic(pthread_cond_t *c);

/* For a collector thread at its start: gives it a descriptor table of its own
 * (unshare(CLONE_FILES)) holding only the standard streams, so that what it opens later cannot
 * be closed, replaced or written through by the program's other threads. Returns 1 when the
 * table is private, 0 when the system refused (a seccomp filter): descriptors are then shared as
 * usual and must be checked before use. */
int util_private_fds(void);

/* Process name for headers and folder names: /proc/self/comm, else "process". */
void util_process_name(char *out, size_t cap);

/* name made safe as one path component: '/', control bytes and leading dots become '_'. */
void util_path_component(const char *name, char *out, size_t cap);

/* path made absolute against the working directory now ("./rel" and "rel" both become
 * "<cwd>/rel"), malloc'd: the run folder it leads to is then the same from every process that
 * reads it from the segment. A working directory that cannot be told (getcwd fails) leaves path
 * as given. NULL when out of memory. */
char *util_absolute_path(const char *path);

/* "<output>/<process>-<pid>-<YYYYmmdd-HHMMSS>-<8 random hex digits>"; for a rank of a job
 * "<output>/<job>/rank<R>-<host>-<pid>-<stamp>-<hex>" (a forked child of rank R:
 * "<output>/<job>/rank<R>-worker-<host>-<pid>-..."; a process of a job without a rank:
 * "<output>/<job>/<process>-<host>-<pid>-<stamp>-<hex>"). job may be NULL. */
int util_run_folder(const char *output, const char *process, const ts_job *job, int pid, char *out,
                    size_t cap);

/* Creates run_folder, which util_run_folder made under output: the output folder first, when
 * missing, then a job folder (shared with the job's other ranks: made unless there, and it must
 * be this user's), then the run folder and its recording/ folder, each exclusively with mode
 * 0700. All through folder descriptors and never through a link, except a link at the output
 * folder that is the user's own or root's. Returns the recording folder's descriptor, or -1 with
 * why (cap bytes). */
int util_make_recording_dir(const char *output, const char *run_folder, char *why, size_t cap);

/* A flight-recorder snapshot's folder, run_folder/snapshots/name/ (made exclusively), and its
 * recording/ folder: the run folder and snapshots/ opened or made (this user's), through folder
 * descriptors as util_make_recording_dir does. Returns the recording folder's descriptor and the
 * snapshot folder's path in folder, or -1 with why (cap bytes). */
int util_make_snapshot_dir(const char *output, const char *run_folder, const char *name,
                           char *folder, size_t folder_cap, char *why, size_t cap);

/* run_folder opened, or made when missing and make is set, through folder descriptors as
 * util_make_snapshot_dir opens it. Returns its descriptor, or -1 with why (cap bytes). */
int util_open_run_folder(const char *output, const char *run_folder, int make, char *why,
                         size_t cap);

/* ---- Range hooks (api.c) ------------------------------------------------------------------ */

/* What another collector does at each range's begin and end on the calling thread (CUDA
 * collection: push and pop an external correlation id, so kernels are attributed to the range),
 * and when a thread's ranges from an earlier window are forgotten. Installed once the collector
 * is on (a release store), never removed; api.c calls them through this table and knows no
 * collector by name. */
typedef struct range_hooks {
    void (*push)(uint32_t name);
    void (*pop)(void);
    void (*reset)(void);
    /* A start/end range (NVTX) opened on this thread, with its id; ended (on any thread). */
    void (*start)(uint32_t name, uint64_t id);
    void (*end)(uint64_t id);
} range_hooks;

void api_set_range_hooks(const range_hooks *hooks);
/* The installed hooks' start and end, when there are hooks. */
void api_range_start_hook(uint32_t name, uint64_t id);
void api_range_end_hook(uint64_t id);
/* 1 while the NVTX start/end range id is open (not ended yet). */
int nvtx_range_open(uint64_t id);

/* ---- CUDA activity through CUPTI (cupti.c) ---------------------------------------------- */

/* Loads CUPTI, registers the clock and buffers, enables the activities; records go to s.
 * Returns 0, or -1 when CUDA collection is off (said once on stderr; cupti_status() says why).
 * Idempotent. */
int cupti_start(termsight_session *s);

/* 1 when the process has loaded the CUDA driver (libcuda), the cue to start CUDA collection for a
 * session created without the CUDA injection. */
int cupti_process_uses_cuda(void);

/* cuptiActivityFlushAll; forced also hands over incomplete buffers. Never under s->drain. */
void cupti_flush(termsight_session *s, int forced);

/* Forced flush, then no more records to s. Never under s->drain. */
void cupti_stop(termsight_session *s);
/* Another CUPTI client in the process (PyTorch's profiler) is about to take CUPTI (lent 1: our
 * buffers are flushed first) or has let it go (lent 0: our clock, buffers and kinds again). The
 * window's "cuda" config says so. 0, or -1 when CUDA collection could not be taken back. */
int cupti_lend(termsight_session *s, int lent);
/* In a forked child: CUDA collection is off and not tried again (CUDA does not survive a fork);
 * the parent's CUPTI is never called. */
void cupti_fork_child(void);

/* "CUDA collection on (CUPTI n)" or "CUDA collection off: why". */
const char *cupti_status(void);

#endif
