/* faults: what the fault tests share: conditions waited on with deadlines, the fault_emitter
 * helper run as a child process, and a recording's counters tallied per emitting thread.
 *
 * Include testutil.h first. */
#ifndef TERMSIGHT_FAULTS_H
#define TERMSIGHT_FAULTS_H

#include "model.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define FAULTS_SLOW 1 /* sanitized builds: smaller loads, longer deadlines */
#else
#define FAULTS_SLOW 0
#endif

static inline uint64_t faults_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void faults_nap(void)
{
    struct timespec ts = {0, 200000}; /* 0.2 ms between polls */
    nanosleep(&ts, NULL);
}

/* Polls cond(ctx) until it holds or seconds pass; returns whether it held. */
static inline int wait_for(int (*cond)(void *), void *ctx, double seconds)
{
    uint64_t end = faults_now_ns() + (uint64_t)(seconds * 1e9);
    for (;;) {
        if (cond(ctx))
            return 1;
        if (faults_now_ns() > end)
            return 0;
        faults_nap();
    }
}

/* Runs tests (NULL-terminated) as one suite, each in a process of its own (Check's fork mode:
 * a session is one per process) with timeout seconds; the exit status for main. */
static inline int faults_main(const char *name, int timeout, const TTest *const *tests)
{
    Suite *s = suite_create(name);
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, timeout);
    for (; *tests; tests++)
        tcase_add_test(tc, *tests);
    suite_add_tcase(s, tc);
    return tests_run(s);
}

/* ---- A private mount namespace ------------------------------------------------------------- */

#define FAULTS_IN_NAMESPACE "FAULTS_PRIVATE_MOUNTS"

/* For main: runs this program again in a private mount namespace (unshare -m as root, -rm
 * otherwise), where the tests may mount small file systems. In the first process it returns the
 * second's exit status (77, skip, where no namespace or tmpfs mount can be had); in the second,
 * -1: go on with the tests. */
static inline int faults_private_mounts(void)
{
    if (getenv(FAULTS_IN_NAMESPACE)) {
        /* unshare -rm maps us to root in a user namespace, which may still not allow tmpfs. */
        char probe[] = "/tmp/faults-probe-XXXXXX";
        if (!mkdtemp(probe))
            return 1;
        int can = mount("faults", probe, "tmpfs", 0, "size=64k") == 0;
        int err = errno;
        if (can)
            umount(probe);
        rmdir(probe);
        if (!can) {
            printf("skip: cannot mount a tmpfs in a private mount namespace: %s\n", strerror(err));
            return 77;
        }
        return -1;
    }
    const char *how = geteuid() == 0 ? "-m" : "-rm";
    char probe[64];
    snprintf(probe, sizeof probe, "unshare %s -- true 2>/dev/null", how);
    if (system(probe) != 0) {
        printf("skip: cannot make a private mount namespace (unshare %s fails)\n", how);
        return 77;
    }
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 1;
    self[n] = 0;
    setenv(FAULTS_IN_NAMESPACE, "1", 1);
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) {
        execlp("unshare", "unshare", how, "--", self, (char *)NULL);
        _exit(127);
    }
    int st;
    if (child < 0 || waitpid(child, &st, 0) != child || !WIFEXITED(st))
        return 1;
    return WEXITSTATUS(st);
}

/* ---- The fault_emitter child ($FAULT_EMITTER) ----------------------------------------------- */

typedef struct emitter {
    pid_t pid;
    int in;    /* its stdin: closing it ends an unbounded run */
    FILE *out; /* its stdout */
    char run[1100];
    _Atomic uint64_t *progress; /* per thread, events emitted so far */
    unsigned threads;
} emitter;

typedef struct emitter_result {
    int status; /* waitpid status */
    uint64_t emitted, dropped, recorded;
    int stop_rc, destroy_rc;
} emitter_result;

/* Starts fault_emitter with --output output, --threads threads, a progress file under output and
 * the extra arguments (NULL-terminated, may be NULL); waits for its "run" line. */
static inline void emitter_start(emitter *e, const char *output, unsigned threads,
                                 const char *const *extra)
{
    const char *bin = getenv("FAULT_EMITTER");
    ck_assert_msg(bin && *bin, "FAULT_EMITTER is not set");
    memset(e, 0, sizeof *e);
    e->threads = threads;
    mkdir(output, 0700);
    char progress[1100], nthreads[16];
    snprintf(progress, sizeof progress, "%s/progress-%d", output, (int)getpid());
    snprintf(nthreads, sizeof nthreads, "%u", threads);
    int pf = open(progress, O_RDWR | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(pf, 0);
    ck_assert_int_eq(ftruncate(pf, threads * sizeof(uint64_t)), 0);
    void *map = mmap(NULL, threads * sizeof(uint64_t), PROT_READ, MAP_SHARED, pf, 0);
    ck_assert(map != MAP_FAILED);
    close(pf);
    e->progress = map;

    const char *argv[32] = {bin, "--output", output, "--threads", nthreads, "--progress", progress};
    size_t n = 7;
    for (size_t i = 0; extra && extra[i]; i++) {
        ck_assert_uint_lt(n, 31);
        argv[n++] = extra[i];
    }
    int in[2], out[2];
    ck_assert_int_eq(pipe(in), 0);
    ck_assert_int_eq(pipe(out), 0);
    fflush(NULL);
    e->pid = fork();
    ck_assert_int_ge(e->pid, 0);
    if (e->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]);
        close(in[1]);
        close(out[0]);
        close(out[1]);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    e->in = in[1];
    e->out = fdopen(out[0], "r");
    ck_assert_ptr_nonnull(e->out);
    char line[1100];
    ck_assert_msg(fgets(line, sizeof line, e->out) && !strncmp(line, "run ", 4),
                  "fault_emitter did not start");
    line[strcspn(line, "\n")] = 0;
    snprintf(e->run, sizeof e->run, "%s", line + 4);
}

/* Events emitted so far, all threads. */
static inline uint64_t emitter_progress(const emitter *e)
{
    uint64_t sum = 0;
    for (unsigned k = 0; k < e->threads; k++)
        sum += atomic_load_explicit(&e->progress[k], memory_order_acquire);
    return sum;
}

static inline int emitter_advanced_cond(void *ctx)
{
    const uint64_t *args = ctx; /* {emitter pointer, progress before} */
    return emitter_progress((const emitter *)(uintptr_t)args[0]) > args[1];
}

/* Waits until the emitter's threads emit more than they had: it is not blocked. */
static inline int emitter_advances(const emitter *e, double seconds)
{
    uint64_t ctx[2] = {(uintptr_t)e, emitter_progress(e)};
    return wait_for(emitter_advanced_cond, ctx, seconds);
}

/* Ends stdin (an unbounded run stops), reads the report lines and reaps the child. */
static inline void emitter_finish(emitter *e, emitter_result *r)
{
    memset(r, 0, sizeof *r);
    r->stop_rc = r->destroy_rc = 1;
    close(e->in);
    char line[256];
    while (fgets(line, sizeof line, e->out)) {
        sscanf(line, "emitted %" SCNu64, &r->emitted);
        sscanf(line, "dropped %" SCNu64, &r->dropped);
        sscanf(line, "recorded %" SCNu64, &r->recorded);
        sscanf(line, "stop %d", &r->stop_rc);
        sscanf(line, "destroy %d", &r->destroy_rc);
    }
    fclose(e->out);
    ck_assert_int_eq(waitpid(e->pid, &r->status, 0), e->pid);
    munmap((void *)e->progress, e->threads * sizeof(uint64_t));
}

/* emitter_finish, and the emitter ended as it should: exit 0, stop and destroy answered 0. */
static inline void emitter_finish_ok(emitter *e, emitter_result *r)
{
    emitter_finish(e, r);
    ck_assert_msg(WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0,
                  "the training process ended with status %#x", r->status);
    ck_assert_int_eq(r->stop_rc, 0);
    ck_assert_int_eq(r->destroy_rc, 0);
}

/* SIGKILLs the emitter and reaps it. */
static inline void emitter_kill(emitter *e)
{
    kill(e->pid, SIGKILL);
    int st;
    ck_assert_int_eq(waitpid(e->pid, &st, 0), e->pid);
    ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    close(e->in);
    fclose(e->out);
}

/* ---- A recording's counters, per emitting thread ------------------------------------------- */

#define TALLY_THREADS 256

typedef struct counter_tally {
    uint64_t counters[TALLY_THREADS]; /* "emit<k>" counters recorded */
    uint64_t next[TALLY_THREADS];     /* the value after the highest recorded */
    int ordered;                      /* each thread's values increase strictly */
    uint64_t total, lost, marks, events;
    uint64_t lost_by_reason[8];
    uint64_t full_notices, full_rated; /* a full lane's notices of a thread; with its rate */
    uint64_t bad_chunks, skipped_bytes;
    uint64_t by_kind[TS_KIND__COUNT];
} counter_tally;

/* Reads the recording under folder, damaged or not. */
static inline void tally_counters(const char *folder, counter_tally *t)
{
    memset(t, 0, sizeof *t);
    t->ordered = 1;
    recording_reader *r;
    char *why = NULL;
    ck_assert_msg(recording_reader_open(folder, &r, &why) == 0, "open %s: %s", folder,
                  why ? why : "?");
    const ts_event *ev;
    size_t n;
    int rc;
    while ((rc = recording_reader_next(r, &ev, &n, &why)) == 1) {
        for (size_t i = 0; i < n; i++) {
            t->events++;
            if (ev[i].kind < TS_KIND__COUNT)
                t->by_kind[ev[i].kind]++;
            if (ev[i].kind == TS_KIND_LOST) {
                t->lost += ev[i].v0;
                t->lost_by_reason[ev[i].aux & 7] += ev[i].v0;
                if (ev[i].aux == TS_LOST_LANE_FULL && ev[i].tid &&
                    ev[i].tid != (uint32_t)getpid()) {
                    t->full_notices++;
                    t->full_rated += ev[i].v1 > 0;
                }
            }
            if (ev[i].kind == TS_KIND_MARK)
                t->marks++;
            uint32_t len;
            const char *name = recording_reader_string(r, ev[i].name, &len);
            if (ev[i].kind != TS_KIND_COUNTER || !name || len < 5 || memcmp(name, "emit", 4))
                continue;
            unsigned k = (unsigned)strtoul(name + 4, NULL, 10);
            ck_assert_uint_lt(k, TALLY_THREADS);
            double v;
            memcpy(&v, &ev[i].v0, sizeof v);
            uint64_t value = (uint64_t)v;
            if (t->counters[k] && value < t->next[k])
                t->ordered = 0;
            t->counters[k]++;
            t->next[k] = value + 1;
            t->total++;
        }
    }
    ck_assert_msg(rc == 0, "read: %s", why ? why : "?");
    t->bad_chunks = recording_reader_bad_chunks(r);
    t->skipped_bytes = recording_reader_skipped_bytes(r);
    recording_reader_close(r);
}

#endif
