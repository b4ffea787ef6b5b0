/* session_fork: forked children (their own sessions, made from the parent's on their first
 * event), the sessions of children and earlier programs of this process reaped, and the fork
 * handlers that keep the library's locks usable in a child. */
#include "collectors.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- Forked children ----------------------------------------------------------------------
 *
 * A forked child shares the parent's mapping but must never write into its lanes: it forgets
 * the session (the recorder thread does not exist in the child anyway). When the parent was
 * collecting, the child's first call that records something makes it a session of its own
 * (session_adopt_child): a child that only execs, or never records, costs nothing. */

_Atomic int ts_session_pending;
_Atomic int ts_forked;
static const termsight_session *fork_parent; /* the parent's session as the fork copied it */
static int32_t fork_parent_pid;
static pthread_mutex_t adopt_lock = PTHREAD_MUTEX_INITIALIZER;

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
        pthread_mutex_init(&session_create_lock, NULL);
        pthread_mutex_init(&adopt_lock, NULL);
        atomic_store(&ts_forked, 0);
        return;
    }
    /* Locks another thread of the parent may have held at the fork are held forever in the
     * child: made anew. */
    pthread_mutex_init(&session_create_lock, NULL);
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
void session_inherit(termsight_session *s, const termsight_session *p)
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
        int rc = session_create_from(&o, p, fork_parent_pid, &s);
        if (rc == TERMSIGHT_OK && termsight_start(s) != TERMSIGHT_OK)
            fprintf(stderr,
                    "termsight: forked child %d: not collecting: %s (it runs on unprofiled)\n",
                    (int)getpid(), termsight_last_error());
        if (rc != TERMSIGHT_OK) {
            fprintf(stderr,
                    "termsight: forked child %d records nothing: %s (it runs on unprofiled)\n",
                    (int)getpid(), termsight_last_error());
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
                         s->output_path, session_budget(), &events, &cause) != 0)
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
        if (segment_reap(&list[i], "the process ran another program (exec)", NULL, session_budget(),
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

void session_fork_install(void)
{
    pthread_atfork(fork_prepare, fork_parent_side, fork_child);
}
