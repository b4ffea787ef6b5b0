/* Lane overflow storms, thread churn and fork, in one process with real threads: whatever the
 * load, every event emitted is in the recording or counted as dropped, exactly once, with the
 * reason (a full lane, no free lane); nothing deadlocks, in the process or in a forked child. */
#define TESTUTIL_TAG "storm"
#include "testutil.h"

#include "collectors.h"
#include "faults.h"

#include <dirent.h>
#include <pthread.h>

/* Check's fork mode gives each test its own process, hence its own session. budget_mb: what the
 * lanes may grow into (0: they never grow). */
static termsight_session *storm_session(const char *out, uint32_t lane_events, uint32_t threads,
                                        uint32_t budget_mb)
{
    termsight_options o;
    termsight_options_init(&o);
    o.output_path = out;
    o.lane_events = lane_events;
    o.max_threads = threads;
    o.lane_budget_mb = budget_mb;
    termsight_session *s = NULL;
    ck_assert_msg(termsight_session_create(&o, &s) == 0, "create: %s", termsight_last_error());
    return s;
}

typedef struct storm {
    pthread_barrier_t go, claimed;
    uint64_t events; /* per thread */
    uint64_t base;   /* the first value: names recur over waves, values keep increasing */
    _Atomic uint32_t next_index;
} storm;

/* Emits "emit<k>" counters 0 .. events-1 as fast as it can, all threads released together. */
static void *storm_thread(void *arg)
{
    storm *st = arg;
    uint32_t k = atomic_fetch_add(&st->next_index, 1);
    char name[32];
    snprintf(name, sizeof name, "emit%u", k);
    uint32_t id = termsight_name(name);
    pthread_barrier_wait(&st->go);
    /* Every thread has made its first event (claimed a lane or found none) before any ends. */
    termsight_counter_id(id, (double)st->base);
    pthread_barrier_wait(&st->claimed);
    for (uint64_t i = 1; i < st->events; i++)
        termsight_counter_id(id, (double)(st->base + i));
    return NULL;
}

/* Runs nthreads storm threads at once; returns when all have ended. */
static void run_storm(storm *st, unsigned nthreads)
{
    pthread_t th[TALLY_THREADS];
    ck_assert_uint_le(nthreads, TALLY_THREADS);
    ck_assert_int_eq(pthread_barrier_init(&st->go, NULL, nthreads), 0);
    ck_assert_int_eq(pthread_barrier_init(&st->claimed, NULL, nthreads), 0);
    for (unsigned i = 0; i < nthreads; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, storm_thread, st), 0);
    for (unsigned i = 0; i < nthreads; i++)
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    pthread_barrier_destroy(&st->go);
    pthread_barrier_destroy(&st->claimed);
}

/* Stops, destroys, reads the recording; checks emitted (counters and ranges) = recorded + lost
 * and lost = the drops the session counted. ordered: each name's values increase (one thread per
 * name; lanes are not ordered among themselves, so threads that reuse a name are not). */
static void check_accounted(termsight_session *s, uint64_t emitted, counter_tally *t, int ordered)
{
    /* While the window is open, ls's view of it: the threads that lost events, most first, each
     * with the rate it offered when it began to. */
    ck_assert_int_eq(termsight_flush(s), 0);
    segment_info *list = NULL;
    int n = segment_list(&list, NULL);
    const segment_info *me = NULL;
    for (int i = 0; i < n; i++)
        if (list[i].pid == getpid() && list[i].readable)
            me = &list[i];
    ck_assert_ptr_nonnull(me);
    uint64_t full = termsight_events_dropped(s);
    if (full) {
        ck_assert_uint_gt(me->lost_threads, 0);
        for (uint32_t k = 0; k < me->lost_threads && k < SEGMENT_INFO_LOST; k++) {
            ck_assert_uint_gt(me->lost[k].tid, 0);
            ck_assert_uint_gt(me->lost[k].lost, 0);
            ck_assert_uint_le(me->lost[k].lost, full);
            ck_assert_uint_gt(me->lost[k].rate, 0);
            ck_assert_uint_ge(me->lost[k].first_ns, me->start_ns);
            if (k)
                ck_assert_uint_le(me->lost[k].lost, me->lost[k - 1].lost);
        }
    }
    free(list);
    ck_assert_int_eq(termsight_stop(s), 0);
    uint64_t dropped = termsight_events_dropped(s);
    char run[1024];
    snprintf(run, sizeof run, "%s", termsight_run_folder(s));
    ck_assert_int_eq(termsight_session_destroy(s), 0);
    tally_counters(run, t);
    ck_assert_uint_eq(t->bad_chunks, 0);
    if (ordered) /* one thread per name: its values in order */
        ck_assert_int_eq(t->ordered, 1);
    uint64_t recorded = t->total + t->by_kind[TS_KIND_OP_RANGE];
    ck_assert_msg(recorded + t->lost == emitted,
                  "emitted %" PRIu64 " != recorded %" PRIu64 " + lost %" PRIu64, emitted, recorded,
                  t->lost);
    ck_assert_uint_eq(t->lost, dropped);
    /* Every notice of a thread's full lane says at what rate it was emitting. */
    ck_assert_uint_eq(t->full_rated, t->full_notices);
}

#define STORM_EVENTS (FAULTS_SLOW ? 5000 : test_scale(5000, 20000))

/* A session with lanes of lane_events for max_threads, nthreads storm threads of events each;
 * checks the accounting and prints it. */
static void accounted_storm(uint32_t lane_events, uint32_t max_threads, unsigned nthreads,
                            uint64_t events, counter_tally *t)
{
    char *out = tmp_make();
    termsight_session *s = storm_session(out, lane_events, max_threads, 0);
    storm st = {.events = events};
    run_storm(&st, nthreads);
    check_accounted(s, nthreads * events, t, 1);
    printf("storm: %u threads x %" PRIu64 " events, %u lanes of %u: recorded %" PRIu64
           ", dropped %" PRIu64 " (lane full) + %" PRIu64 " (no lane) in %" PRIu64 " notices\n",
           nthreads, events, max_threads, lane_events, t->total,
           t->lost_by_reason[TS_LOST_LANE_FULL], t->lost_by_reason[TS_LOST_NO_LANE],
           t->by_kind[TS_KIND_LOST]);
    tmp_remove(out);
}

/* 64 threads into 64-event lanes: most of it overflows. */
START_TEST(overflow_storm_64_threads)
{
    counter_tally t;
    accounted_storm(64, 64, 64, STORM_EVENTS, &t);
    ck_assert_uint_eq(t.lost, t.lost_by_reason[TS_LOST_LANE_FULL]);
}
END_TEST

/* 200 threads into 64-event lanes: more lanes report drops at each drain than the collector's
 * own 64-event lane holds notices; those wait for the next drain instead of being lost. */
START_TEST(notices_beyond_collector_lane)
{
    counter_tally t;
    accounted_storm(64, 200, 200, STORM_EVENTS / 4, &t);
    ck_assert_uint_ge(t.by_kind[TS_KIND_LOST], 200);
}
END_TEST

/* 64 threads, 16 lanes: the threads that find none count their events as lost, and claim a lane
 * later when one is free. */
START_TEST(more_threads_than_lanes)
{
    counter_tally t;
    accounted_storm(256, 16, 64, STORM_EVENTS, &t);
    ck_assert_uint_gt(t.lost_by_reason[TS_LOST_NO_LANE], 0);
    ck_assert_uint_eq(t.lost,
                      t.lost_by_reason[TS_LOST_LANE_FULL] + t.lost_by_reason[TS_LOST_NO_LANE]);
}
END_TEST

#define CHURN_WAVES  (FAULTS_SLOW ? 50 : (int)test_scale(60, 250))
#define CHURN_THREAD 8
#define CHURN_EVENTS 200

/* Threads created and ended in a loop, 8 at a time into 4 lanes: lanes are retired, drained,
 * freed and claimed again; at the end every lane but the collector's is free. */
START_TEST(thread_churn)
{
    char *out = tmp_make();
    termsight_session *s = storm_session(out, 64, 4, 0);
    storm st = {.events = CHURN_EVENTS};
    for (int wave = 0; wave < CHURN_WAVES; wave++) {
        atomic_store(&st.next_index, 0);
        st.base = (uint64_t)wave * CHURN_EVENTS;
        run_storm(&st, CHURN_THREAD);
    }
    ck_assert_int_eq(termsight_flush(s), 0);
    ts_segment_header *h = segment_header(s->seg);
    uint32_t owned = 0, generations = 0;
    for (uint32_t i = 0; i < h->lane_count; i++) {
        ts_lane *l = segment_lane(s->seg, i);
        owned += atomic_load(&l->state) != TS_LANE_FREE;
        generations += (uint32_t)atomic_load(&l->generation);
    }
    ck_assert_uint_eq(owned, 1); /* the collector's own lane */
    counter_tally t;
    check_accounted(s, (uint64_t)CHURN_WAVES * CHURN_THREAD * CHURN_EVENTS, &t, 0);
    printf("churn: %d threads in waves of %d, 4 lanes claimed %u times: recorded %" PRIu64
           ", dropped %" PRIu64 " (lane full) + %" PRIu64 " (no lane)\n",
           CHURN_WAVES * CHURN_THREAD, CHURN_THREAD, generations, t.total,
           t.lost_by_reason[TS_LOST_LANE_FULL], t.lost_by_reason[TS_LOST_NO_LANE]);
    tmp_remove(out);
}
END_TEST

/* ---- fork from inside ranges, with and without exec ---------------------------------------- */

#define FORKS (FAULTS_SLOW ? 10 : (int)test_scale(12, 40))
/* TSan ends the child of a threaded process when it starts threads (its die_after_fork): there
 * the children are made to record nothing (TERMSIGHT_CHILDREN=0), so none starts a session. */
#ifdef __SANITIZE_THREAD__
#define CHILD_OWN_SESSION 0
#else
#define CHILD_OWN_SESSION 1
#endif

typedef struct busy {
    _Atomic int stop;
    _Atomic uint64_t emitted[2];
    _Atomic uint32_t names;
} busy;

/* Emits counters until told to stop: flat out in the long variant (some 10 M events a second,
 * hundreds of MB of recording read back); in the default set in bursts of 64 with a nap between,
 * still emitting at every fork, with a recording of a few MB. */
static void *busy_emitter(void *arg)
{
    busy *b = arg;
    static _Atomic uint32_t index;
    uint32_t k = atomic_fetch_add(&index, 1);
    char name[32];
    snprintf(name, sizeof name, "emit%u", k);
    uint32_t id = termsight_name(name);
    uint64_t i = 0;
    int paced = !test_scale(0, 1);
    while (!atomic_load_explicit(&b->stop, memory_order_relaxed)) {
        termsight_counter_id(id, (double)i++);
        if (paced && (i & 63) == 0)
            faults_nap();
    }
    atomic_store(&b->emitted[k], i);
    return NULL;
}

/* Interns new names until told to stop, so that the table's lock is often held at a fork. */
static void *busy_namer(void *arg)
{
    busy *b = arg;
    char name[32];
    while (!atomic_load_explicit(&b->stop, memory_order_relaxed)) {
        uint32_t n = atomic_fetch_add(&b->names, 1);
        snprintf(name, sizeof name, "name-%u", n % 20000);
        termsight_range_begin(name, "Namer");
        termsight_range_end();
    }
    return NULL;
}

/* Ranges named name in the recording under run. */
static uint64_t count_ranges(const char *run, const char *name)
{
    recording_reader *r;
    ck_assert_int_eq(recording_reader_open(run, &r, NULL), 0);
    const ts_event *ev;
    size_t n;
    uint64_t c = 0;
    while (recording_reader_next(r, &ev, &n, NULL) == 1)
        for (size_t i = 0; i < n; i++) {
            uint32_t len;
            const char *s = recording_reader_string(r, ev[i].name, &len);
            c +=
                ev[i].kind == TS_KIND_OP_RANGE && s && len == strlen(name) && !memcmp(s, name, len);
        }
    recording_reader_close(r);
    return c;
}

/* Reaps child within seconds, else kills it and fails: a child stuck on a lock the fork copied
 * held never ends. */
static int reap_within(pid_t child, double seconds)
{
    uint64_t end = faults_now_ns() + (uint64_t)(seconds * 1e9);
    int st;
    for (;;) {
        pid_t got = waitpid(child, &st, WNOHANG);
        ck_assert_int_ge(got, 0);
        if (got == child)
            return st;
        if (faults_now_ns() > end) {
            kill(child, SIGKILL);
            waitpid(child, &st, 0);
            ck_abort_msg("forked child %d did not end within %.0f s: deadlock", (int)child,
                         seconds);
        }
        faults_nap();
    }
}

/* A forked child without exec ends through exit (the collector's exit handler runs) and then
 * here, before LeakSanitizer's check would report the memory of the parent's threads, which the
 * child never had: registered before the session's handler, so it runs after it. */
static int in_forked_child;

static void forked_child_ends(void)
{
    if (in_forked_child)
        _exit(0);
}

/* In the child of a fork without exec: the inherited session is not the child's. Everything it
 * does with it is refused or ignored, without waiting on a lock the fork copied held; its first
 * range makes it a session of its own (its own segment and run folder), unless children are
 * off. */
static void child_without_exec(termsight_session *parent, const char *out)
{
    (void)out;
    termsight_range_end(); /* the ranges the parent had open */
    termsight_range_end();
    termsight_range_begin("child", "Child");
    termsight_range_end();
    termsight_counter("child", 1);
    in_forked_child = 1;
    termsight_session *own = termsight_session_current();
#if CHILD_OWN_SESSION
    if (!own || own == parent)
        _exit(10);
#else
    if (own)
        _exit(10);
#endif
    if (termsight_flush(parent) != TERMSIGHT_E_NO_SESSION)
        _exit(11);
    if (termsight_stop(parent) != TERMSIGHT_E_NO_SESSION)
        _exit(12);
    if (termsight_start(parent) != TERMSIGHT_E_NO_SESSION)
        _exit(13);
#if CHILD_OWN_SESSION
    for (int i = 0; i < 100; i++)
        termsight_counter_id(termsight_name("emit0"), i);
    if (termsight_flush(own) != 0)
        _exit(14);
    if (termsight_session_destroy(own) != 0)
        _exit(15);
#endif
    exit(0); /* through the atexit handlers, as a program would */
}

START_TEST(fork_inside_ranges)
{
    char *out = tmp_make();
    ck_assert_int_eq(atexit(forked_child_ends), 0);
    if (!CHILD_OWN_SESSION)
        setenv("TERMSIGHT_CHILDREN", "0", 1);
    termsight_session *s = storm_session(out, 4096, 8, 0);
    unsetenv("TERMSIGHT_CHILDREN");
    busy b = {0};
    pthread_t th[3];
    ck_assert_int_eq(pthread_create(&th[0], NULL, busy_emitter, &b), 0);
    ck_assert_int_eq(pthread_create(&th[1], NULL, busy_emitter, &b), 0);
    ck_assert_int_eq(pthread_create(&th[2], NULL, busy_namer, &b), 0);
    const char *exe = getenv("FAULT_EMITTER");
    ck_assert_ptr_nonnull(exe);
    int execs = 0;
    for (int f = 0; f < FORKS; f++) {
        termsight_range_begin("around fork", "Fork");
        termsight_range_begin("inner", "Fork");
        pid_t child = fork();
        ck_assert_int_ge(child, 0);
        if (child == 0) {
            if (f % 2)
                child_without_exec(s, out);
            int null = open("/dev/null", O_WRONLY);
            dup2(null, 1);
            execl(exe, exe, "--output", out, "--events", "1000", "--threads", "2", (char *)NULL);
            _exit(127);
        }
        termsight_range_end();
        termsight_range_end();
        int st = reap_within(child, 60);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork %d: child status %d", f, st);
        execs += f % 2 == 0;
    }
    atomic_store(&b.stop, 1);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);

    char parent_run[1024];
    snprintf(parent_run, sizeof parent_run, "%s", termsight_run_folder(s));
    counter_tally t;
    uint64_t emitted = atomic_load(&b.emitted[0]) + atomic_load(&b.emitted[1]);
    check_accounted(s, emitted + atomic_load(&b.names) + 2 * FORKS, &t, 1);
    ck_assert_uint_eq(t.counters[0] + t.counters[1], t.total);
    ck_assert_uint_eq(count_ranges(parent_run, "around fork"), FORKS);

    /* Every child's own run folder (not the parent's) holds all of its events. */
    int runs = 0;
    DIR *d = opendir(out);
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    while ((de = readdir(d))) {
        char *run = path_join(out, de->d_name);
        if (de->d_name[0] != '.' && strcmp(run, parent_run)) {
            counter_tally c;
            tally_counters(run, &c);
            ck_assert_uint_eq(c.bad_chunks, 0);
            ck_assert_uint_eq(c.lost, 0);
            ck_assert_msg(c.total == 2000 || c.total == 100, "%s: %" PRIu64 " counters", run,
                          c.total);
            runs++;
        }
        free(run);
    }
    closedir(d);
    ck_assert_int_eq(runs, execs + (CHILD_OWN_SESSION ? FORKS - execs : 0));
    printf("fork: %d forks inside ranges (%d exec), parent recorded %" PRIu64 " counters, dropped "
           "%" PRIu64 "; %d child recordings\n",
           FORKS, execs, t.total, t.lost, runs);
    tmp_remove(out);
}
END_TEST

/* A thread that emits in phases, waiting for the test between them. */
typedef struct phased {
    pthread_barrier_t step;
    uint64_t batch[3]; /* events per phase */
    uint64_t emitted;
    _Atomic uint32_t tid;
} phased;

static void *phased_thread(void *arg)
{
    phased *p = arg;
    uint32_t id = termsight_name("emit0");
    atomic_store(&p->tid, (uint32_t)gettid());
    for (int k = 0; k < 3; k++) {
        pthread_barrier_wait(&p->step);
        for (uint64_t i = 0; i < p->batch[k]; i++, p->emitted++)
            termsight_counter_id(id, (double)p->emitted);
        pthread_barrier_wait(&p->step);
    }
    pthread_barrier_wait(&p->step); /* alive (its lane its own) until the test has looked */
    return NULL;
}

/* Lane i of the thread that claimed one as tid. */
static uint32_t lane_of(const termsight_session *s, uint32_t tid)
{
    for (uint32_t i = 0; i < segment_lanes_used(s->seg); i++)
        if (atomic_load(&segment_lane_ctl(s->seg, i)->tid) == tid)
            return i;
    ck_abort_msg("thread %u has no lane", tid);
    return 0;
}

/* Waits until the recorder has offered lane i a larger ring (it has its pages a slice per
 * drain), at most 20 s. */
static void offered(const termsight_session *s, uint32_t i)
{
    for (int k = 0; k < 20000 && !atomic_load(&segment_lane_ctl(s->seg, i)->next_events); k++)
        usleep(1000);
    ck_assert_uint_gt(atomic_load(&segment_lane_ctl(s->seg, i)->next_events), 0);
}

/* A lane that overflowed gets a ring four times larger at the thread's next full ring, within
 * the session's budget (20 MiB here: a ring of 262,144 events, not one of 2^20; 5 MiB where
 * shared memory is scarce and rings start at 16384); every event is recorded or counted as
 * dropped. The recorder is held (its drain lock) while the thread fills
 * its first ring, so that it overflows whatever the machine's speed. */
START_TEST(lanes_grow_within_budget)
{
    char *out = tmp_make();
    int scarce = segment_shm_available() < (1ull << 30);
    termsight_session *s = storm_session(out, 1u << 24, 2, scarce ? 5 : 20);
    const uint32_t first = segment_geometry_of(s->seg)->lane_events;
    ck_assert_uint_eq(first, scarce ? 16384 : 65536);
    phased p = {.batch = {100000, 300000, 1200000}};
    ck_assert_int_eq(pthread_barrier_init(&p.step, NULL, 2), 0);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, phased_thread, &p), 0);

    pthread_mutex_lock(&s->drain); /* phase 1: overflows the first ring */
    pthread_barrier_wait(&p.step);
    pthread_barrier_wait(&p.step);
    pthread_mutex_unlock(&s->drain);
    uint32_t li = lane_of(s, atomic_load(&p.tid));
    ck_assert_uint_gt(atomic_load(&segment_lane_ctl(s->seg, li)->drops), 0);
    offered(s, li);
    pthread_barrier_wait(&p.step); /* phase 2: takes the larger ring */
    pthread_barrier_wait(&p.step);
    ck_assert_uint_eq(lane_capacity(s->seg, li), 4 * first);
    ck_assert_uint_eq(atomic_load(&segment_lane(s->seg, li)->ring_events), 4 * first);

    pthread_mutex_lock(&s->drain); /* phase 3: overflows it; 2^20 would be over the budget */
    pthread_barrier_wait(&p.step);
    pthread_barrier_wait(&p.step);
    pthread_mutex_unlock(&s->drain);
    ck_assert_int_eq(termsight_flush(s), 0);
    ck_assert_int_eq(termsight_flush(s), 0);
    ck_assert_uint_eq(lane_capacity(s->seg, li), 4 * first);
    ck_assert_uint_le(atomic_load(&segment_header(s->seg)->grow_used), (scarce ? 5u : 20u) << 20);
    ck_assert_uint_eq(atomic_load(&segment_lane_ctl(s->seg, li)->next_events), 0);
    pthread_barrier_wait(&p.step);
    pthread_join(th, NULL);
    pthread_barrier_destroy(&p.step);
    counter_tally t;
    check_accounted(s, p.emitted, &t, 1);
    ck_assert_uint_gt(t.lost, 0);
    printf("growth: %" PRIu64 " events, lane of %u grew to %u, recorded %" PRIu64
           ", dropped %" PRIu64 " while the recorder was held\n",
           p.emitted, first, 4 * first, t.total, t.lost);
    tmp_remove(out);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {overflow_storm_64_threads,
                            notices_beyond_collector_lane,
                            more_threads_than_lanes,
                            thread_churn,
                            fork_inside_ranges,
                            lanes_grow_within_budget,
                            NULL};
    return faults_main("lane_storms", 300, tests);
}
