/* session: the profiler session of this process, its options and its state machine.
 *
 * idle --start--> collecting --stop--> stopped --start--> collecting ...
 * start while collecting and stop while not collecting are errors with a message (the seeds'
 * Profiler raises RuntimeError there). Commands come from the API on any thread and from the
 * mailbox on the recorder thread; the control lock serializes them. */
#include "collectors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_LANE_EVENTS (1u << 24) /* the most a ring grows to */
#define LANE_FIRST_EVENTS   65536u     /* a ring's size at first: 3 ms at 20 M events/s */
#define LANE_FIRST_SMALL    4096u      /* ... where the tree's budget is small: 256 KiB */
#define BUDGET_ROOMY        (256ull << 20)
#define DEFAULT_LANE_BUDGET 256u /* MiB: a ring of 2^20 events and the one before it */
#define LANE_BUDGET_MAX     65536u
#define FLIGHT_MB_DEFAULT   64u /* the flight recorder's: a million events */
#define FLIGHT_MB_MAX       65536u
#define DEFAULT_MAX_THREADS 64
#define DEFAULT_TIMELINE_MB 500
#define STRING_IDS          65536
#define STRING_ARENA        (4u << 20)

termsight_session *_Atomic ts_session;
static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- Errors ---------------------------------------------------------------------------- */

static __thread char last_error[512];

int session_fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return code;
}

static int ok(void)
{
    last_error[0] = 0;
    return TERMSIGHT_OK;
}

const char *termsight_last_error(void)
{
    return last_error;
}

const char *termsight_strerror(int code)
{
    switch (code) {
    case TERMSIGHT_OK:
        return "success";
    case TERMSIGHT_E_INVALID:
        return "invalid argument";
    case TERMSIGHT_E_NO_SESSION:
        return "no profiler session in this process";
    case TERMSIGHT_E_SESSION_EXISTS:
        return "a profiler session already exists in this process";
    case TERMSIGHT_E_ALREADY_COLLECTING:
        return "the profiler is already collecting";
    case TERMSIGHT_E_NOT_COLLECTING:
        return "the profiler is not collecting";
    case TERMSIGHT_E_SYSTEM:
        return "the system refused a resource";
    case TERMSIGHT_E_RECORDING:
        return "the recording cannot be written";
    case TERMSIGHT_E_TIMEOUT:
        return "timed out";
    default:
        return "unknown error";
    }
}

/* ---- Options --------------------------------------------------------------------------- */

/* Environment values that do not parse become bad (a value create refuses, naming the
 * variable). */
static void env_u32(const char *name, uint32_t *field, uint32_t bad)
{
    const char *v = getenv(name);
    if (v && options_parse_u32(v, 0, UINT32_MAX, field) != 0)
        *field = bad;
}

void termsight_options_init(termsight_options *o)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->output_path = TS_OUTPUT_DEFAULT;
    o->start_collecting = 1;
    o->lane_events = DEFAULT_LANE_EVENTS;
    o->lane_budget_mb = DEFAULT_LANE_BUDGET;
    o->max_threads = DEFAULT_MAX_THREADS;
    o->sample_interval_ms = TS_SAMPLE_MS_DEFAULT;
    o->timeline_limit_mb = DEFAULT_TIMELINE_MB;
    o->rank = o->local_rank = o->world_size = -1; /* job and ranks: from the environment */

    const char *v;
    if ((v = getenv("TERMSIGHT_OUTPUT")) && *v)
        o->output_path = v;
    if ((v = getenv("TERMSIGHT_START")))
        o->start_collecting = !(v[0] == '0' || !strcmp(v, "no") || !strcmp(v, "false"));
    env_u32("TERMSIGHT_LANE_EVENTS", &o->lane_events, 0);
    env_u32("TERMSIGHT_LANE_BUDGET_MB", &o->lane_budget_mb, UINT32_MAX);
    env_u32("TERMSIGHT_MAX_THREADS", &o->max_threads, 0);
    env_u32("TERMSIGHT_SAMPLE_MS", &o->sample_interval_ms, 0);
    env_u32("TERMSIGHT_TIMELINE_LIMIT_MB", &o->timeline_limit_mb, 0);
    if ((v = getenv("TERMSIGHT_FLIGHT")) && *v)
        o->flight_mb =
            v[0] == '0' || !strcmp(v, "no") || !strcmp(v, "false") ? 0 : FLIGHT_MB_DEFAULT;
    env_u32("TERMSIGHT_FLIGHT_MB", &o->flight_mb, UINT32_MAX);
    if ((v = getenv("PROFILING_FP_START")) && *v)
        o->fp_start_op = v;
    if ((v = getenv("PROFILING_BP_END")) && *v)
        o->bp_end_op = v;
}

static int bad_option(const char *field, const char *env, uint32_t value, const char *want)
{
    const char *v = getenv(env);
    if (v)
        return session_fail(TERMSIGHT_E_INVALID, "%s=%s is invalid: %s", env, v, want);
    return session_fail(TERMSIGHT_E_INVALID, "option %s=%u is invalid: %s", field, value, want);
}

/* A lane's first ring: 65536 events (4 MiB), or 4096 (256 KiB) where the tree's shared-memory
 * budget is under 256 MiB (a container's 64 MB /dev/shm has a 16 MiB one: there a thread that
 * records little costs little, and 48 of them fit); never more than the largest ring. Rings grow
 * from there, within the budget, as their threads fill them. */
static uint32_t first_ring(uint32_t largest, const ts_shm_budget *b)
{
    uint32_t first = b && b->limit < BUDGET_ROOMY ? LANE_FIRST_SMALL : LANE_FIRST_EVENTS;
    return largest < first ? largest : first;
}

/* ---- The shared-memory budget -------------------------------------------------------------
 *
 * One ledger for the process tree (model/budget.c): the one `termsight run` names in
 * TERMSIGHT_SHM_BUDGET, else one this process makes, which its forked children share (the
 * pointer and the mapping survive the fork). Under the create lock; kept for the process's life:
 * sessions come and go, the tree's budget stays. */
static ts_shm_budget *tree_budget;

static int tree_budget_get(ts_shm_budget **out)
{
    if (!tree_budget) {
        const char *name = getenv("TERMSIGHT_SHM_BUDGET");
        char *why = NULL;
        if (name && *name && budget_attach(name, &tree_budget, &why) != 0) {
            fprintf(stderr,
                    "termsight: TERMSIGHT_SHM_BUDGET: %s; this process keeps a budget of "
                    "its own\n",
                    why ? why : name);
            free(why);
            why = NULL;
        }
        uint64_t limit;
        if (!tree_budget) {
            if (budget_limit_for(segment_shm_available(), getenv("TERMSIGHT_SHM_BUDGET_MB"), &limit,
                                 &why) != 0) {
                int rc = session_fail(TERMSIGHT_E_INVALID, "%s", why);
                free(why);
                return rc;
            }
            tree_budget = budget_create_private(limit);
            if (!tree_budget)
                return session_fail(TERMSIGHT_E_SYSTEM, "cannot map the shared-memory ledger");
        }
    }
    *out = tree_budget;
    return TERMSIGHT_OK;
}

int session_check_options(const termsight_options *o)
{
    /* Programs built before the job fields were added pass the shorter struct: accepted, and
     * read that far (termsight_session_create). */
    if (o->struct_size < offsetof(termsight_options, job))
        return session_fail(TERMSIGHT_E_INVALID,
                            "termsight_options not initialized with termsight_options_init");
    if (o->struct_size >= sizeof *o &&
        (o->rank < -1 || o->local_rank < -1 || o->world_size < -1 || o->world_size == 0))
        return session_fail(TERMSIGHT_E_INVALID,
                            "option rank, local_rank or world_size is invalid: -1 (from the "
                            "environment) or a rank from 0, a world size from 1");
    uint32_t le = o->lane_events;
    if (le < 64 || le > (1u << 24) || (le & (le - 1)))
        return bad_option("lane_events", "TERMSIGHT_LANE_EVENTS", le,
                          "a power of two from 64 to 16777216");
    if (o->struct_size >= offsetof(termsight_options, lane_budget_mb) + sizeof o->lane_budget_mb &&
        o->lane_budget_mb > LANE_BUDGET_MAX)
        return bad_option("lane_budget_mb", "TERMSIGHT_LANE_BUDGET_MB", o->lane_budget_mb,
                          "from 0 to 65536 MiB");
    if (o->max_threads < 1 || o->max_threads > 4096)
        return bad_option("max_threads", "TERMSIGHT_MAX_THREADS", o->max_threads, "from 1 to 4096");
    if (o->sample_interval_ms < TS_SAMPLE_MS_MIN || o->sample_interval_ms > TS_SAMPLE_MS_MAX)
        return bad_option("sample_interval_ms", "TERMSIGHT_SAMPLE_MS", o->sample_interval_ms,
                          "from 1 to 3600000 ms");
    if (o->timeline_limit_mb < 1 || o->timeline_limit_mb > 1000000)
        return bad_option("timeline_limit_mb", "TERMSIGHT_TIMELINE_LIMIT_MB", o->timeline_limit_mb,
                          "from 1 to 1000000 MB");
    if (o->struct_size >= offsetof(termsight_options, flight_mb) + sizeof o->flight_mb &&
        o->flight_mb > FLIGHT_MB_MAX)
        return bad_option("flight_mb", "TERMSIGHT_FLIGHT_MB", o->flight_mb, "from 0 to 65536 MiB");
    if (!o->output_path || !*o->output_path)
        return session_fail(TERMSIGHT_E_INVALID, "output_path is empty");
    return TERMSIGHT_OK;
}

/* ---- Create and destroy ---------------------------------------------------------------- */

static void set_state(termsight_session *s, uint32_t state);

/* Sessions that ended (termsight_session_destroy), kept and reachable: a thread of the program
 * that loaded the session just before the end may still be in an API call that reads its names,
 * its lanes or its locks, whether the program destroyed it or the exit handler did while its
 * threads ran on. What only the recorder and the sampler use is freed; the rest stays. */
static termsight_session *retired;

static void session_retire(termsight_session *s)
{
    recorder_free(s);
    sampler_free(s);
    s->retired_next = retired;
    retired = s;
}

static void session_free(termsight_session *s)
{
    recorder_free(s);
    pthread_mutex_destroy(&s->req_lock);
    pthread_mutex_destroy(&s->wake_lock);
    pthread_cond_destroy(&s->wake);
    pthread_cond_destroy(&s->done);
    strtab_destroy(s->names);
    free(s->output_path);
    free(s->fp_start_op);
    free(s->bp_end_op);
    pthread_mutex_destroy(&s->control);
    pthread_mutex_destroy(&s->drain);
    pthread_mutex_destroy(&s->meta);
    sampler_free(s);
    free(s);
}

static void exit_handler(void)
{
    termsight_session *s = atomic_load(&ts_session);
    if (s)
        termsight_session_destroy(s);
}

/* ---- Forked children ----------------------------------------------------------------------
 *
 * A forked child shares the parent's mapping but must never write into its lanes: it forgets
 * the session (the recorder thread does not exist in the child anyway). When the parent was
 * collecting, the child's first call that records something makes it a session of its own
 * (session_adopt_child): a child that only execs, or never records, costs nothing. */

static int session_create(const termsight_options *opts, const termsight_session *parent,
                          termsight_session **out);

_Atomic int ts_session_pending;
_Atomic int ts_forked;
static const termsight_session *fork_parent; /* the parent's session as the fork copied it */
static int32_t fork_parent_pid;
static pthread_mutex_t adopt_lock = PTHREAD_MUTEX_INITIALIZER;

/* TERMSIGHT_CHILDREN=0 (or no, false): forked children record nothing. */
static int children_enabled(void)
{
    const char *v = getenv("TERMSIGHT_CHILDREN");
    return !(v && (v[0] == '0' || !strcmp(v, "no") || !strcmp(v, "false")));
}

/* A fork waits while the recorder reaps (it allocates, opens files and directories): a child
 * forked meanwhile would inherit an allocator's locks held (a sanitizer's allocator does not take
 * them around a fork as glibc's does) and hang at its first allocation. */
static pthread_mutex_t reap_lock = PTHREAD_MUTEX_INITIALIZER;

static void fork_prepare(void)
{
    pthread_mutex_lock(&reap_lock);
}

static void fork_parent_side(void)
{
    atomic_store(&ts_forked, 1);
    pthread_mutex_unlock(&reap_lock);
}

static void fork_child(void)
{
    termsight_session *p = atomic_load(&ts_session);
    int follow = p && p->children && atomic_load(&p->state) == TS_STATE_COLLECTING;
    pthread_mutex_init(&reap_lock, NULL); /* held across the fork: made anew here */
    if (!p && atomic_load(&ts_session_pending) == SESSION_PENDING_CHILD) {
        /* A child forked before this process made its own session (a daemon's double fork):
         * it is a child of the same collecting session, made on its first event too. */
        pthread_mutex_init(&create_lock, NULL);
        pthread_mutex_init(&adopt_lock, NULL);
        atomic_store(&ts_forked, 0);
        return;
    }
    /* Locks another thread of the parent may have held at the fork are held forever in the
     * child: made anew. */
    pthread_mutex_init(&create_lock, NULL);
    pthread_mutex_init(&adopt_lock, NULL);
    atomic_store(&ts_session, NULL);
    atomic_fetch_add(&ts_generation, 1);
    fork_parent = follow ? p : NULL;
    fork_parent_pid = follow ? (int32_t)getppid() : 0;
    atomic_store(&ts_session_pending, follow ? SESSION_PENDING_CHILD : SESSION_PENDING_NONE);
    atomic_store(&ts_forked, 0); /* this process's own children, from now */
    /* CUDA does not survive a fork: the child never calls into the parent's CUPTI. */
    api_set_range_hooks(NULL);
    cupti_fork_child();
    if (!follow)
        collecting_set(0); /* else kept: the next call comes into the library and adopts */
}

/* What the child's session takes from the parent's before it starts: every name, in id order
 * (so ids the program cached in the parent, a Python object's or a static's, mean the same
 * here), the registered queues, the step count. The parent's tables are read only up to what
 * was published at the fork. */
static void inherit(termsight_session *s, const termsight_session *p)
{
    uint32_t n = strtab_count(p->names);
    for (uint32_t id = TS_STR_OVERFLOW + 1; id < n; id++) {
        uint32_t len = 0;
        const char *name = strtab_name(p->names, id, &len);
        if (!name || strtab_intern(s->names, name, len, NULL) != id)
            break; /* ids would no longer match: later names are interned anew */
    }
    uint32_t q = atomic_load(&p->queue_count);
    if (q > TS_MAX_QUEUES)
        q = TS_MAX_QUEUES;
    memcpy(s->queues, p->queues, q * sizeof s->queues[0]);
    atomic_store(&s->queue_count, q);
    atomic_store(&s->step, atomic_load(&p->step));
}

static termsight_session *adopt_child(void)
{
    pthread_mutex_lock(&adopt_lock);
    termsight_session *s = atomic_load(&ts_session);
    if (!s && atomic_load(&ts_session_pending) == SESSION_PENDING_CHILD) {
        const termsight_session *p = fork_parent;
        termsight_options o = p->opts; /* its strings are the parent's copies, here too */
        o.start_collecting = 0;        /* started once it has inherited */
        o.process_name = NULL;         /* the child's own */
        o.job = p->job.id;
        o.rank = p->job.rank;
        o.local_rank = p->job.local_rank;
        o.world_size = p->job.world_size;
        int rc = session_create(&o, p, &s);
        if (rc == TERMSIGHT_OK && termsight_start(s) != TERMSIGHT_OK)
            fprintf(stderr,
                    "termsight: forked child %d: not collecting: %s (it runs on unprofiled)\n",
                    (int)getpid(), last_error);
        if (rc != TERMSIGHT_OK) {
            fprintf(stderr,
                    "termsight: forked child %d records nothing: %s (it runs on unprofiled)\n",
                    (int)getpid(), last_error);
            s = NULL;
            collecting_set(0);
        }
        atomic_store(&ts_session_pending, SESSION_PENDING_NONE);
    }
    pthread_mutex_unlock(&adopt_lock);
    return s;
}

termsight_session *session_adopt_pending(void)
{
    switch (atomic_load(&ts_session_pending)) {
    case SESSION_PENDING_CHILD:
        return adopt_child();
    case SESSION_PENDING_AUTO:
        return autostart_now();
    default:
        return atomic_load(&ts_session);
    }
}

static void reap_children_locked(termsight_session *s);

void session_reap_children(termsight_session *s)
{
    pthread_mutex_lock(&reap_lock);
    reap_children_locked(s);
    pthread_mutex_unlock(&reap_lock);
}

static void reap_children_locked(termsight_session *s)
{
    segment_info *list;
    int n = segment_list_ended(0, getpid(), &list, NULL);
    if (n <= 0)
        return;
    for (int i = 0; i < n; i++) {
        uint64_t events = 0;
        char *cause = NULL;
        /* Only into run folders under this session's output folder, where its children's go. */
        if (segment_reap(&list[i], "it called _exit, as forked workers do; reaped by its parent",
                         s->output_path, tree_budget, &events, &cause) != 0)
            fprintf(stderr, "termsight: cannot reap a forked child's session: %s\n",
                    cause ? cause : "?");
        free(cause);
    }
    free(list);
}

/* Removes the run folder a session of this process left that holds its recording only (what a
 * session makes): by name, never following a link; a folder with anything else stays. */
static void remove_bare_run_folder(const char *run)
{
    int fd = open(run, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return;
    int rec = openat(fd, TS_RECORDING_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (rec >= 0) {
        unlinkat(rec, TS_RECORDING_FILE, 0);
        unlinkat(rec, TS_RECORDING_RESERVE, 0);
        close(rec);
        unlinkat(fd, TS_RECORDING_DIR, AT_REMOVEDIR);
    }
    close(fd);
    rmdir(run);
}

void session_reap_earlier_images(termsight_session *s)
{
    segment_info *list;
    int n = segment_list(&list, NULL);
    for (int i = 0; i < n; i++) {
        if (list[i].pid != getpid() || list[i].alive || !list[i].readable ||
            !strcmp(list[i].shm_name, segment_shm_name(s->seg)))
            continue;
        uint64_t events = 0;
        char *cause = NULL;
        if (segment_reap(&list[i], "the process ran another program (exec)", NULL, tree_budget,
                         &events, &cause) != 0)
            fprintf(stderr,
                    "termsight: cannot reap the session of this process's earlier "
                    "program: %s\n",
                    cause ? cause : "?");
        else if (!list[i].program_events && !events && list[i].run_folder[0] == '/' &&
                 strcmp(list[i].run_folder, s->run_folder))
            /* A shim (a shell script that execs the real program) recorded nothing of its own:
             * this program's session covers the process from here, its samples included. */
            remove_bare_run_folder(list[i].run_folder);
        free(cause);
    }
    if (n > 0)
        free(list);
}

static pthread_once_t process_hooks = PTHREAD_ONCE_INIT;

static void install_process_hooks(void)
{
    atexit(exit_handler);
    pthread_atfork(fork_prepare, fork_parent_side, fork_child);
}

static char *dup_or_null(const char *v)
{
    return v ? strdup(v) : NULL;
}

int termsight_session_create(const termsight_options *opts, termsight_session **out)
{
    /* Under `termsight run`, the session from the environment first: the program then gets it
     * (session_create's handover). */
    if (atomic_load(&ts_session_pending) == SESSION_PENDING_AUTO)
        autostart_now();
    return session_create(opts, NULL, out);
}

/* parent: for a forked child's own session (session_adopt_child), the parent's session as the
 * fork copied it, read for what the child inherits; NULL otherwise. */
static int session_create(const termsight_options *opts, const termsight_session *parent,
                          termsight_session **out)
{
    termsight_options full;
    if (!out)
        return session_fail(TERMSIGHT_E_INVALID, "out is NULL");
    *out = NULL;
    termsight_options_init(&full);
    if (opts) {
        int rc = session_check_options(opts);
        if (rc)
            return rc;
        /* A shorter struct (an older program) is read as far as it goes; the rest keeps the
         * defaults. */
        memcpy(&full, opts, opts->struct_size < sizeof full ? opts->struct_size : sizeof full);
        full.struct_size = sizeof full;
    }
    opts = &full;
    int rc = session_check_options(opts);
    if (rc)
        return rc;

    pthread_mutex_lock(&create_lock);
    termsight_session *existing = atomic_load(&ts_session);
    if (existing && existing->autostarted) {
        /* termsight run started this session from the environment before the program's own
         * create: the program gets that session (its options win over the program's), and owns
         * it from now on (its destroy ends it). */
        existing->autostarted = 0;
        pthread_mutex_unlock(&create_lock);
        *out = existing;
        return ok();
    }
    if (existing) {
        pthread_mutex_unlock(&create_lock);
        return session_fail(TERMSIGHT_E_SESSION_EXISTS,
                            "a profiler session already exists in this process (pid %d)",
                            (int)getpid());
    }
    termsight_session *s = calloc(1, sizeof *s);
    if (!s) {
        pthread_mutex_unlock(&create_lock);
        return session_fail(TERMSIGHT_E_SYSTEM, "out of memory");
    }
    pthread_mutex_init(&s->control, NULL);
    pthread_mutex_init(&s->drain, NULL);
    pthread_mutex_init(&s->meta, NULL);
    pthread_mutex_init(&s->req_lock, NULL);
    pthread_mutex_init(&s->wake_lock, NULL);
    /* The recorder's sleeps are timed on CLOCK_MONOTONIC, the collector clock's epoch. */
    util_cond_init_monotonic(&s->wake);
    pthread_cond_init(&s->done, NULL);
    s->opts = *opts;
    s->output_path = util_absolute_path(opts->output_path); /* the header's run folder too */
    s->fp_start_op = dup_or_null(opts->fp_start_op);
    s->bp_end_op = dup_or_null(opts->bp_end_op);
    s->opts.output_path = s->output_path;
    s->opts.fp_start_op = s->fp_start_op;
    s->opts.bp_end_op = s->bp_end_op;
    s->opts.process_name = NULL;
    if (opts->process_name && *opts->process_name)
        snprintf(s->process, sizeof s->process, "%s", opts->process_name);
    else
        util_process_name(s->process, sizeof s->process);

    job_identify(opts, &s->job);
    s->opts.job = NULL; /* kept as s->job */
    if (parent)
        s->job.parent_pid = fork_parent_pid;
    s->children = children_enabled();

    tsclock_init(&ts_clock,
                 !(getenv("TERMSIGHT_CLOCK") && !strcmp(getenv("TERMSIGHT_CLOCK"), "monotonic")));
    if (!s->output_path || util_run_folder(s->output_path, s->process, &s->job, (int)getpid(),
                                           s->run_folder, sizeof s->run_folder) != 0) {
        session_free(s);
        pthread_mutex_unlock(&create_lock);
        return session_fail(TERMSIGHT_E_INVALID, "output path too long: %s", opts->output_path);
    }
    snprintf(s->recording_dir, sizeof s->recording_dir, "%s/" TS_RECORDING_DIR, s->run_folder);

    ts_shm_budget *budget = NULL;
    if ((rc = tree_budget_get(&budget)) != TERMSIGHT_OK) {
        session_free(s);
        pthread_mutex_unlock(&create_lock);
        return rc;
    }
    segment_config cfg = {
        .process = s->process,
        .run_folder = s->run_folder,
        .clock = tsclock_name(&ts_clock),
        .start_ns = tsclock_now(&ts_clock),
        .lane_count = opts->max_threads + 1, /* and the collector's own */
        .lane_events = first_ring(opts->lane_events, budget),
        .lane_max_events = opts->lane_events,
        .grow_budget = (uint64_t)opts->lane_budget_mb << 20,
        .string_max = STRING_IDS,
        .string_arena = STRING_ARENA,
        .job = s->job.id,
        .host = s->job.host,
        .rank = s->job.rank,
        .local_rank = s->job.local_rank,
        .world_size = s->job.world_size,
        .parent_pid = s->job.parent_pid,
        .budget = budget,
    };
    char *why = NULL;
    if (segment_create(&cfg, &s->seg, &why) != 0 || strtab_create(s->seg, &s->names, &why) != 0) {
        rc = session_fail(TERMSIGHT_E_SYSTEM, "%s", why ? why : "cannot create the segment");
        free(why);
        if (s->seg)
            segment_close(s->seg, 1);
        session_free(s);
        pthread_mutex_unlock(&create_lock);
        return rc;
    }
    s->generation = atomic_fetch_add(&ts_generation, 1) + 1;
    s->start_ns = segment_header(s->seg)->start_ns;
    s->start_realtime_ns = segment_header(s->seg)->start_realtime_ns;
    set_state(s, TS_STATE_IDLE);
    last_error[0] = 0;
    if (sampler_init(s) != 0 || loop_start(s) != 0) {
        char why[512];
        snprintf(why, sizeof why, "%s",
                 *termsight_last_error() ? termsight_last_error()
                                         : "cannot start the recorder thread");
        segment_close(s->seg, 1);
        session_free(s);
        pthread_mutex_unlock(&create_lock);
        return session_fail(TERMSIGHT_E_SYSTEM, "%s", why);
    }
    if (sampler_start(s) != 0) {
        loop_stop(s);
        segment_close(s->seg, 1);
        session_free(s);
        pthread_mutex_unlock(&create_lock);
        return session_fail(TERMSIGHT_E_SYSTEM, "cannot start the sampler thread");
    }
    if (parent)
        inherit(s, parent);
    pthread_once(&process_hooks, install_process_hooks);
    atomic_store(&ts_session, s);
    pthread_mutex_unlock(&create_lock);
    /* CUDA collection: here when the program already loaded the driver, else from the CUDA
     * injection (InitializeInjection) when the driver initializes. Never in a forked child:
     * CUDA does not survive a fork. */
    if (!parent && cupti_process_uses_cuda())
        cupti_start(s);

    if (opts->start_collecting) {
        rc = termsight_start(s);
        if (rc == TERMSIGHT_E_RECORDING) {
            /* The run folder or the recording cannot be made (a full disk, a folder that is
             * not ours): the program must not stop training for it. The session stays, not
             * collecting, for a monitor to see and a later start to try again; said once. */
            fprintf(stderr,
                    "termsight: not collecting: %s (the program runs on unprofiled; a "
                    "later start may succeed)\n",
                    last_error);
        } else if (rc) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", last_error);
            termsight_session_destroy(s);
            return session_fail(rc, "%s", msg);
        }
    }
    *out = s;
    return ok();
}

int termsight_session_destroy(termsight_session *s)
{
    if (!s)
        return session_fail(TERMSIGHT_E_INVALID, "session is NULL");
    pthread_mutex_lock(&create_lock);
    if (atomic_load(&ts_session) != s) {
        pthread_mutex_unlock(&create_lock);
        return session_fail(TERMSIGHT_E_NO_SESSION, "not this process's current session");
    }
    /* The sampler appends under the drain lock: it ends first. The recorder thread then stops
     * collecting, writes what is left and closes the recording (it alone holds its descriptor),
     * and ends. */
    sampler_stop(s);
    int rc = session_request(s, SESSION_CMD_END, NULL);
    loop_stop(s);
    /* Unlink the name but keep the mapping: a thread that passed the collecting check just
     * before the stop may still be writing into its lane, and must not touch unmapped memory.
     * The pages go when the process ends. */
    segment_unlink(s->seg);
    session_retire(s);
    pthread_mutex_unlock(&create_lock);
    return rc ? rc : ok();
}

termsight_session *termsight_session_current(void)
{
    return session_current();
}

/* ---- Commands -------------------------------------------------------------------------- */

uint32_t session_state(const termsight_session *s)
{
    return atomic_load(&((termsight_session *)s)->state);
}

/* The state changes under the control lock; monitors read its mirror in the header. */
static void set_state(termsight_session *s, uint32_t state)
{
    atomic_store(&s->state, state);
    atomic_store(&segment_header(s->seg)->state, state);
}

/* Options and registered names at the head of every window, so any window reads alone. */
void session_window_metadata(termsight_session *s, void (*put)(void *ctx, const ts_event *ev),
                             void *ctx)
{
    const struct {
        const char *key, *value;
    } config[] = {
        {"process", s->process},     {"fp_start_op", s->fp_start_op},
        {"bp_end_op", s->bp_end_op}, {"clock", tsclock_name(&ts_clock)},
        {"cuda", cupti_status()},
    };
    for (size_t i = 0; i < sizeof config / sizeof config[0]; i++) {
        if (!config[i].value)
            continue;
        ts_event ev = session_marker(TS_KIND_CONFIG, session_intern(s, config[i].key),
                                     session_intern(s, config[i].value), 0);
        put(ctx, &ev);
    }
    if (s->job.parent_pid > 0) {
        char v[16];
        snprintf(v, sizeof v, "%d", (int)s->job.parent_pid);
        ts_event ev = session_marker(TS_KIND_CONFIG, session_intern(s, "parent_pid"),
                                     session_intern(s, v), 0);
        put(ctx, &ev);
    }
    if (s->job.id[0]) {
        const struct {
            const char *key;
            int32_t value;
        } ranks[] = {{"rank", s->job.rank},
                     {"local_rank", s->job.local_rank},
                     {"world_size", s->job.world_size}};
        const char *texts[][2] = {
            {"job", s->job.id}, {"job_source", s->job.source}, {"host", s->job.host}};
        for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
            ts_event ev = session_marker(TS_KIND_CONFIG, session_intern(s, texts[i][0]),
                                         session_intern(s, texts[i][1]), 0);
            put(ctx, &ev);
        }
        for (size_t i = 0; i < sizeof ranks / sizeof ranks[0]; i++) {
            char v[16];
            if (ranks[i].value < 0)
                continue;
            snprintf(v, sizeof v, "%d", (int)ranks[i].value);
            ts_event ev = session_marker(TS_KIND_CONFIG, session_intern(s, ranks[i].key),
                                         session_intern(s, v), 0);
            put(ctx, &ev);
        }
    }
    char num[32];
    snprintf(num, sizeof num, "%u", s->opts.timeline_limit_mb);
    ts_event tl = session_marker(TS_KIND_CONFIG, session_intern(s, "timeline_limit_mb"),
                                 session_intern(s, num), 0);
    put(ctx, &tl);
    snprintf(num, sizeof num, "%u", s->opts.sample_interval_ms);
    ts_event si = session_marker(TS_KIND_CONFIG, session_intern(s, "sample_interval_ms"),
                                 session_intern(s, num), 0);
    put(ctx, &si);

    pthread_mutex_lock(&s->meta);
    for (uint32_t i = 0; i < s->thread_count; i++) {
        ts_event ev = session_marker(TS_KIND_THREAD_NAME, s->threads[i].name, 0, 0);
        ev.tid = s->threads[i].tid;
        put(ctx, &ev);
    }
    uint32_t nq = atomic_load(&s->queue_count);
    for (uint32_t i = 0; i < nq; i++) {
        const queue_slot *q = &s->queues[i];
        ts_event ev = session_marker(TS_KIND_QUEUE_INFO, q->name, 0, q->capacity);
        ev.aux = q->role;
        ev.v1 = (uint64_t)q->producer << 32 | q->consumer;
        put(ctx, &ev);
    }
    pthread_mutex_unlock(&s->meta);
}

static void append_one(void *ctx, const ts_event *ev)
{
    recorder_append_locked(ctx, ev, 1);
}

/* Opens window s->window + 1 with its start marker at begin_ns. thread_opened: a training thread
 * already turned collection on and moved the threads' window (the step window, window.c), so
 * only the recording's side is left to do. */
static int window_open(termsight_session *s, uint64_t begin_ns, int thread_opened)
{
    ts_segment_header *h = segment_header(s->seg);
    if (session_state(s) == TS_STATE_COLLECTING)
        return session_fail(TERMSIGHT_E_ALREADY_COLLECTING,
                            "start: the profiler is already collecting (window %u)", s->window);
    if (atomic_load(&s->record_error))
        return session_fail(TERMSIGHT_E_RECORDING, "start: recording stopped earlier: %s",
                            s->record_notice);
    pthread_mutex_lock(&s->drain);
    int rc = s->flight ? 0 : recorder_open_locked(s); /* flight mode: snapshots record */
    if (rc == 0) {
        s->window++;
        s->window_begin_ns = begin_ns;
        ts_event ev = session_marker(TS_KIND_COLLECT_START, 0, 0, s->window);
        ev.begin_ns = ev.end_ns = begin_ns;
        recorder_append_locked(s, &ev, 1);
        session_window_metadata(s, append_one, s);
        recorder_commit_locked(s);
        atomic_store(&s->sample_window, s->window);
        atomic_store(&h->window, s->window);
        set_state(s, TS_STATE_COLLECTING);
        if (!thread_opened) {
            atomic_fetch_add(&ts_window, 1);
            collecting_set(1);
        }
    }
    pthread_mutex_unlock(&s->drain);
    if (rc == 0)
        sampler_sample_now(s, 1); /* the window's baseline, now rather than an interval later */
    return rc;
}

static int cmd_start(termsight_session *s)
{
    return window_open(s, tsclock_now(&ts_clock), 0);
}

int session_window_open_locked(termsight_session *s, uint64_t begin_ns, int thread_opened)
{
    return window_open(s, begin_ns, thread_opened);
}

static int cmd_stop(termsight_session *s)
{
    if (session_state(s) != TS_STATE_COLLECTING)
        return session_fail(TERMSIGHT_E_NOT_COLLECTING,
                            "stop: the profiler is not collecting (state %s)",
                            state_name(session_state(s)));
    collecting_set(0);
    /* Forced: a plain flush hands over full buffers only, and the window's last kernels would
     * arrive after the stop marker. */
    cupti_flush(s, 1);
    recorder_drain(s);
    sampler_sample_now(s, 1); /* the window's last figures, however short it was */
    pthread_mutex_lock(&s->drain);
    atomic_store(&s->sample_window, 0); /* no sample after the stop marker */
    ts_event ev = session_marker(TS_KIND_COLLECT_STOP, 0, 0, s->window);
    recorder_append_locked(s, &ev, 1);
    recorder_commit_locked(s);
    pthread_mutex_unlock(&s->drain);
    set_state(s, TS_STATE_STOPPED);
    return 0;
}

int session_window_close_locked(termsight_session *s)
{
    return cmd_stop(s);
}

int session_recording_open_locked(termsight_session *s)
{
    if (s->flight)
        return TERMSIGHT_OK; /* snapshots record, when they come */
    if (atomic_load(&s->record_error))
        return session_fail(TERMSIGHT_E_RECORDING, "recording stopped earlier: %s",
                            s->record_notice);
    pthread_mutex_lock(&s->drain);
    int rc = recorder_open_locked(s);
    pthread_mutex_unlock(&s->drain);
    return rc;
}

static int cmd_flush(termsight_session *s)
{
    cupti_flush(s, 0);
    recorder_drain(s);
    pthread_mutex_lock(&s->drain);
    int rc = recorder_sync_locked(s);
    if (!rc && atomic_load(&s->record_error))
        rc = session_fail(TERMSIGHT_E_RECORDING, "flush: recording stopped earlier: %s",
                          s->record_notice);
    pthread_mutex_unlock(&s->drain);
    return rc;
}

static int cmd_mark(termsight_session *s, const char *text)
{
    if (session_state(s) != TS_STATE_COLLECTING)
        return session_fail(TERMSIGHT_E_NOT_COLLECTING, "mark: the profiler is not collecting");
    pthread_mutex_lock(&s->drain);
    ts_event ev = session_marker(TS_KIND_MARK, session_intern(s, text), 0, 0);
    recorder_append_locked(s, &ev, 1);
    recorder_commit_locked(s);
    pthread_mutex_unlock(&s->drain);
    return 0;
}

/* A flight-recorder snapshot of what the session kept: the device records CUDA has, the lanes
 * drained, then written; the answer is the snapshot's folder. */
static int cmd_snapshot(termsight_session *s, const char *why)
{
    cupti_flush(s, 0);
    recorder_drain(s);
    char folder[1400];
    pthread_mutex_lock(&s->drain);
    int rc = flight_snapshot_locked(s, "request", 0, why && *why ? why : "asked for", folder,
                                    sizeof folder);
    pthread_mutex_unlock(&s->drain);
    if (rc == TERMSIGHT_OK)
        snprintf(s->snapshot_folder, sizeof s->snapshot_folder, "%s", folder);
    return rc;
}

/* The end of the session, on the recorder thread: the window closed, the device records
 * flushed, the threads cut off, every lane drained, the recording synced and closed. */
static int cmd_end(termsight_session *s)
{
    /* No window opens any more: a step window not yet begun, a timed one not yet due. */
    atomic_store(&s->windows.steps_state, 2);
    s->windows.timed = 0;
    s->windows.stop_at_ns = 0;
    if (session_state(s) == TS_STATE_COLLECTING)
        cmd_stop(s);
    cupti_stop(s); /* the forced flush at exit: device records still in CUPTI's buffers */
    atomic_store(&ts_session, NULL);
    atomic_fetch_add(&ts_generation, 1);
    /* A drain leaves loss notices for the next one: drain until one has nothing to do (the
     * producers have stopped, so that comes). */
    while (recorder_drain(s))
        ;
    pthread_mutex_lock(&s->drain);
    int rc = recorder_close_locked(s, s->window != 0);
    pthread_mutex_unlock(&s->drain);
    set_state(s, TS_STATE_ENDED);
    atomic_store(&s->recorder_quit, 1);
    return rc;
}

int session_command(termsight_session *s, uint32_t cmd, const char *arg)
{
    pthread_mutex_lock(&s->control);
    window_serve_locked(s); /* a step window's start or stop first: the command comes after */
    int rc;
    switch (cmd) {
    case TS_CMD_START:
        rc = cmd_start(s);
        break;
    case TS_CMD_STOP:
        rc = cmd_stop(s);
        break;
    case TS_CMD_FLUSH:
        rc = cmd_flush(s);
        break;
    case TS_CMD_MARK:
        rc = cmd_mark(s, arg ? arg : "");
        break;
    case TS_CMD_SNAPSHOT:
        rc = cmd_snapshot(s, arg);
        break;
    case SESSION_CMD_END:
        rc = cmd_end(s);
        break;
    default:
        rc = session_fail(TERMSIGHT_E_INVALID, "unknown command %u", cmd);
        break;
    }
    pthread_mutex_unlock(&s->control);
    return rc ? rc : ok();
}

int session_request(termsight_session *s, uint32_t cmd, const char *arg)
{
    if (pthread_equal(pthread_self(), s->recorder))
        return session_command(s, cmd, arg);
    pthread_mutex_lock(&s->req_lock);
    pthread_mutex_lock(&s->wake_lock);
    if (atomic_load(&s->recorder_quit)) {
        /* The session ended meanwhile (a destroy on another thread): nobody would answer. */
        pthread_mutex_unlock(&s->wake_lock);
        pthread_mutex_unlock(&s->req_lock);
        return session_fail(TERMSIGHT_E_NO_SESSION, "the session has ended");
    }
    s->req.cmd = cmd;
    s->req.arg = arg;
    s->req.pending = 1;
    pthread_cond_broadcast(&s->wake);
    while (s->req.pending)
        pthread_cond_wait(&s->done, &s->wake_lock);
    int rc = s->req.rc;
    if (rc)
        session_fail(rc, "%s", s->req.msg);
    pthread_mutex_unlock(&s->wake_lock);
    pthread_mutex_unlock(&s->req_lock);
    return rc ? rc : ok();
}

static int with_session(termsight_session *s, uint32_t cmd, const char *arg)
{
    if (!s)
        return session_fail(TERMSIGHT_E_NO_SESSION, "no profiler session");
    /* A forked child keeps the pointer but not the session (fork_child): the fork may have
     * copied its locks held by threads the child lacks, and its lanes are the parent's. */
    if (s != atomic_load(&ts_session))
        return session_fail(TERMSIGHT_E_NO_SESSION,
                            "not this process's session (a forked child has none)");
    return session_request(s, cmd, arg);
}

int termsight_start(termsight_session *s)
{
    return with_session(s, TS_CMD_START, NULL);
}

int termsight_stop(termsight_session *s)
{
    return with_session(s, TS_CMD_STOP, NULL);
}

int termsight_flush(termsight_session *s)
{
    return with_session(s, TS_CMD_FLUSH, NULL);
}

int termsight_snapshot(termsight_session *s, const char *why)
{
    return with_session(s, TS_CMD_SNAPSHOT, why);
}

int termsight_cuda_lend(int lent)
{
    if (cupti_lend(atomic_load(&ts_session), lent) == 0)
        return TERMSIGHT_OK;
    return session_fail(TERMSIGHT_E_SYSTEM, "CUDA collection: %s", cupti_status());
}

const char *termsight_state(const termsight_session *s)
{
    return s ? state_name(session_state(s)) : "none";
}

const char *termsight_run_folder(const termsight_session *s)
{
    return s ? s->run_folder : "";
}

uint64_t termsight_events_recorded(const termsight_session *s)
{
    return s ? atomic_load(&((termsight_session *)s)->events_recorded) : 0;
}

uint64_t termsight_events_dropped(const termsight_session *s)
{
    return s ? atomic_load(&((termsight_session *)s)->drops) : 0;
}
