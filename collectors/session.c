/* session: the profiler session of this process: its errors, its making and its end, and its state
 * machine (the commands: session_commands.c; options: session_options.c; forked children:
 * session_fork.c).
 *
 * idle --start--> collecting --stop--> stopped --start--> collecting ...
 * start while collecting and stop while not collecting are errors with a message (the Python
 * binding's Profiler raises RuntimeError there: python/termsight). Commands come from the API on
 * any thread and from the mailbox on the recorder thread; the control lock serializes them. */
#include "collectors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LANE_FIRST_EVENTS 65536u /* a ring's size at first: 3 ms at 20 M events/s */
#define LANE_FIRST_SMALL  4096u  /* ... where the tree's budget is small: 256 KiB */
#define BUDGET_ROOMY      (256ull << 20)
#define STRING_IDS        65536
#define STRING_ARENA      (4u << 20)

termsight_session *_Atomic ts_session;
pthread_mutex_t session_create_lock = PTHREAD_MUTEX_INITIALIZER;

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

int session_ok(void)
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

ts_shm_budget *session_budget(void)
{
    return tree_budget;
}

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

/* ---- Create and destroy ---------------------------------------------------------------- */

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

static pthread_once_t process_hooks = PTHREAD_ONCE_INIT;

static void install_process_hooks(void)
{
    atexit(exit_handler);
    session_fork_install();
}

/* TERMSIGHT_CHILDREN=0 (or no, false): forked children record nothing. */
static int children_enabled(void)
{
    const char *v = getenv("TERMSIGHT_CHILDREN");
    return !(v && (v[0] == '0' || !strcmp(v, "no") || !strcmp(v, "false")));
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
    return session_create_from(opts, NULL, 0, out);
}

/* opts completed with the defaults into *full and checked: a shorter struct (an older program)
 * is read as far as it goes, the rest keeps the defaults. */
static int options_complete(const termsight_options *opts, termsight_options *full)
{
    termsight_options_init(full);
    if (opts) {
        int rc = session_check_options(opts);
        if (rc)
            return rc;
        memcpy(full, opts, opts->struct_size < sizeof *full ? opts->struct_size : sizeof *full);
        full->struct_size = sizeof *full;
    }
    return session_check_options(full);
}

/* The session `termsight run` started from the environment before the program's own create
 * (autostarted): the program gets it (its options win over the program's) and owns it from now
 * on (its destroy ends it). Any other existing session is an error. Under the create lock. */
static int handover(termsight_session *existing, termsight_session **out)
{
    if (!existing->autostarted)
        return session_fail(TERMSIGHT_E_SESSION_EXISTS,
                            "a profiler session already exists in this process (pid %d)",
                            (int)getpid());
    existing->autostarted = 0;
    *out = existing;
    return session_ok();
}

/* A new session's memory, locks and copies of the options; NULL when out of memory. */
static termsight_session *session_alloc(const termsight_options *opts, int32_t parent_pid)
{
    termsight_session *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
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
    s->job.parent_pid = parent_pid;
    s->children = children_enabled();
    return s;
}

/* Says once, in a process and the children it forks, that the segment is smaller than the
 * options ask for the limits the process runs under (cfg: what was asked). */
static void limits_say(const termsight_session *s, const segment_config *cfg, uint64_t max,
                       const ts_rlimits *lim)
{
    static int said;
    const segment_geometry *g = segment_geometry_of(s->seg);
    if (said || (g->lane_events == cfg->lane_events && g->lane_max_events == cfg->lane_max_events &&
                 g->string_max == cfg->string_max &&
                 (g->lane_max_events == g->lane_events || g->grow_bytes >= 2 * cfg->grow_budget)))
        return;
    said = 1;
    char why[160];
    rlimits_describe(lim, max, why, sizeof why);
    fprintf(stderr,
            "termsight: the shared-memory segment spans %llu MiB for %s: first rings of %u "
            "events, growing within %llu MiB to %u, %u names; what does not fit is counted as "
            "lost\n",
            (unsigned long long)(segment_size(s->seg) >> 20), why, g->lane_events,
            (unsigned long long)(g->grow_bytes >> 20), g->lane_max_events, g->string_max);
}

/* The session's shared-memory segment and its string table, sized within the tree's budget and
 * what the process's limits leave (model/limits.c): its span counts against RLIMIT_FSIZE when
 * sized and RLIMIT_AS when mapped, sparse or not. */
static int segment_make(termsight_session *s)
{
    ts_shm_budget *budget = NULL;
    int rc = tree_budget_get(&budget);
    if (rc != TERMSIGHT_OK)
        return rc;
    ts_rlimits lim;
    rlimits_read(&lim);
    uint64_t max = rlimits_map_max(&lim, 1), grow = (uint64_t)s->opts.lane_budget_mb << 20;
    if (budget && grow > budget->limit) /* rings never grow past the tree's budget */
        grow = budget->limit;
    segment_config cfg = {
        .process = s->process,
        .run_folder = s->run_folder,
        .clock = tsclock_name(&ts_clock),
        .start_ns = tsclock_now(&ts_clock),
        .lane_count = s->opts.max_threads + 1, /* and the collector's own */
        .lane_events = first_ring(s->opts.lane_events, budget),
        .lane_max_events = s->opts.lane_events,
        .grow_budget = grow,
        .string_max = STRING_IDS,
        .string_arena = STRING_ARENA,
        .job = s->job.id,
        .host = s->job.host,
        .rank = s->job.rank,
        .local_rank = s->job.local_rank,
        .world_size = s->job.world_size,
        .parent_pid = s->job.parent_pid,
        .budget = budget,
        .size_max = max == UINT64_MAX ? 0 : max,
    };
    char *why = NULL;
    if (segment_create(&cfg, &s->seg, &why) != 0 || strtab_create(s->seg, &s->names, &why) != 0)
        rc = session_fail(TERMSIGHT_E_SYSTEM, "%s", why ? why : "cannot create the segment");
    else
        limits_say(s, &cfg, max, &lim);
    free(why);
    return rc;
}

/* The first window, when the options ask to start collecting at once. A run folder or recording
 * that cannot be made (a full disk, a folder that is not ours) must not stop the program: the
 * session stays, not collecting, for a monitor to see and a later start to try again; said once.
 * Any other failure ends the session. */
static int start_at_create(termsight_session *s)
{
    int rc = termsight_start(s);
    if (rc == TERMSIGHT_E_RECORDING) {
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
    return TERMSIGHT_OK;
}

int session_create_from(const termsight_options *opts, const termsight_session *parent,
                        int32_t parent_pid, termsight_session **out)
{
    termsight_options full;
    if (!out)
        return session_fail(TERMSIGHT_E_INVALID, "out is NULL");
    *out = NULL;
    int rc = options_complete(opts, &full);
    if (rc)
        return rc;
    opts = &full;

    pthread_mutex_lock(&session_create_lock);
    termsight_session *existing = atomic_load(&ts_session);
    if (existing) {
        rc = handover(existing, out);
        pthread_mutex_unlock(&session_create_lock);
        return rc;
    }
    char why[512];
    int threads = 0; /* the recorder thread (loop) started */
    termsight_session *s = session_alloc(opts, parent ? parent_pid : 0);
    if (!s) {
        rc = session_fail(TERMSIGHT_E_SYSTEM, "out of memory");
        goto fail;
    }
    tsclock_init(&ts_clock,
                 !(getenv("TERMSIGHT_CLOCK") && !strcmp(getenv("TERMSIGHT_CLOCK"), "monotonic")));
    if (!s->output_path || util_run_folder(s->output_path, s->process, &s->job, (int)getpid(),
                                           s->run_folder, sizeof s->run_folder) != 0) {
        rc = session_fail(TERMSIGHT_E_INVALID, "output path too long: %s", opts->output_path);
        goto fail;
    }
    snprintf(s->recording_dir, sizeof s->recording_dir, "%s/" TS_RECORDING_DIR, s->run_folder);
    if ((rc = segment_make(s)) != TERMSIGHT_OK)
        goto fail;
    s->generation = atomic_fetch_add(&ts_generation, 1) + 1;
    s->start_ns = segment_header(s->seg)->start_ns;
    s->start_realtime_ns = segment_header(s->seg)->start_realtime_ns;
    session_set_state(s, TS_STATE_IDLE);
    last_error[0] = 0;
    if (sampler_init(s) != 0 || loop_start(s) != 0) {
        snprintf(why, sizeof why, "%s",
                 *last_error ? last_error : "cannot start the recorder thread");
        rc = session_fail(TERMSIGHT_E_SYSTEM, "%s", why);
        goto fail;
    }
    threads = 1;
    if (sampler_start(s) != 0) {
        rc = session_fail(TERMSIGHT_E_SYSTEM, "cannot start the sampler thread");
        goto fail;
    }
    if (parent)
        session_inherit(s, parent);
    pthread_once(&process_hooks, install_process_hooks);
    atomic_store(&ts_session, s);
    pthread_mutex_unlock(&session_create_lock);
    /* CUDA collection: here when the program already loaded the driver, else from the CUDA
     * injection (InitializeInjection) when the driver initializes. Never in a forked child:
     * CUDA does not survive a fork. */
    if (!parent && cupti_process_uses_cuda())
        cupti_start(s);
    if (opts->start_collecting && (rc = start_at_create(s)) != TERMSIGHT_OK)
        return rc;
    *out = s;
    return session_ok();

fail:
    /* The message survives the cleanup. */
    snprintf(why, sizeof why, "%s", last_error);
    if (s) {
        if (threads)
            loop_stop(s);
        if (s->seg)
            segment_close(s->seg, 1);
        session_free(s);
    }
    pthread_mutex_unlock(&session_create_lock);
    return session_fail(rc, "%s", why);
}

int termsight_session_destroy(termsight_session *s)
{
    if (!s)
        return session_fail(TERMSIGHT_E_INVALID, "session is NULL");
    pthread_mutex_lock(&session_create_lock);
    if (atomic_load(&ts_session) != s) {
        pthread_mutex_unlock(&session_create_lock);
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
    pthread_mutex_unlock(&session_create_lock);
    return rc ? rc : session_ok();
}

termsight_session *termsight_session_current(void)
{
    return session_current();
}
