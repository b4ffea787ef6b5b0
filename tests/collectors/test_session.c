/* Tests of the session: state machine, the recorder with real threads, what reaches the
 * recording, the mailbox from another process, the exit handler, options. Forked children:
 * test_session_fork.c. */
#include "sessionutil.h"

START_TEST(state_machine)
{
    char out[600];
    termsight_session *s = open_session("states", 0, 0, 0, out, sizeof out);
    ck_assert_str_eq(termsight_state(s), "idle");
    ck_assert_int_eq(termsight_stop(s), TERMSIGHT_E_NOT_COLLECTING);
    ck_assert_ptr_nonnull(strstr(termsight_last_error(), "not collecting"));
    ck_assert_int_eq(termsight_start(s), TERMSIGHT_OK);
    ck_assert_str_eq(termsight_state(s), "collecting");
    ck_assert_int_eq(termsight_start(s), TERMSIGHT_E_ALREADY_COLLECTING);
    ck_assert_ptr_nonnull(strstr(termsight_last_error(), "already collecting"));
    ck_assert_int_eq(termsight_stop(s), TERMSIGHT_OK);
    ck_assert_str_eq(termsight_state(s), "stopped");
    ck_assert_int_eq(termsight_stop(s), TERMSIGHT_E_NOT_COLLECTING);
    ck_assert_int_eq(termsight_start(s), TERMSIGHT_OK); /* a second window */

    termsight_session *other = NULL;
    ck_assert_int_eq(termsight_session_create(NULL, &other), TERMSIGHT_E_SESSION_EXISTS);
    ck_assert_ptr_null(other);

    ck_assert(shm_exists_pid(getpid()));
    char run[1024];
    snprintf(run, sizeof run, "%s", termsight_run_folder(s));
    ck_assert_int_eq(termsight_session_destroy(s), TERMSIGHT_OK);
    ck_assert(!shm_exists_pid(getpid())); /* the segment is removed */
    ck_assert_ptr_null(termsight_session_current());

    tally t;
    read_recording(run, &t, NULL, NULL);
    ck_assert_uint_eq(t.by_kind[TS_KIND_COLLECT_START], 2);
    ck_assert_uint_eq(t.by_kind[TS_KIND_COLLECT_STOP], 2);
}
END_TEST

START_TEST(run_folder_layout)
{
    char out[600];
    termsight_options o;
    termsight_options_init(&o);
    make_output(out, sizeof out, "layout");
    o.output_path = out;
    o.process_name = "we/ird\nname";
    termsight_session *s;
    ck_assert_int_eq(termsight_session_create(&o, &s), 0);
    const char *run = termsight_run_folder(s);
    ck_assert_int_eq(strncmp(run, out, strlen(out)), 0);
    char want[64];
    snprintf(want, sizeof want, "/we_ird_name-%d-", (int)getpid());
    ck_assert_ptr_nonnull(strstr(run, want));
    /* ...-<YYYYmmdd-HHMMSS>-<8 hex digits> */
    size_t len = strlen(run);
    ck_assert_uint_gt(len, 25);
    ck_assert_int_eq(run[len - 9], '-');
    ck_assert_uint_eq(strspn(run + len - 8, "0123456789abcdef"), 8);
    ck_assert_int_eq(run[len - 25], '-');
    char file[1200];
    snprintf(file, sizeof file, "%s/recording/events.tsr", run);
    ck_assert_int_eq(access(file, R_OK), 0);
    ck_assert_int_eq(termsight_session_destroy(s), 0);
}
END_TEST

/* The events of a small, known program, checked one by one. */
typedef struct known_ctx {
    int ranges, inner_ok, outer_ok, queue_ok, counter_ok, mark_ok, phases;
    uint64_t steps_begun, steps_ended;
} known_ctx;

static int check_known(const recording_reader *r, const ts_event *ev, void *arg)
{
    known_ctx *c = arg;
    switch (ev->kind) {
    case TS_KIND_OP_RANGE:
        c->ranges++;
        if (name_is(r, ev->name, "inner, \"quoted\"\n") && name_is(r, ev->type, "MatMul") &&
            ev->aux == 1 && ev->v0 == 1234)
            c->inner_ok++;
        if (name_is(r, ev->name, "outer") && ev->aux == 0 && ev->type == TS_STR_NONE)
            c->outer_ok++;
        return ev->end_ns >= ev->begin_ns;
    case TS_KIND_QUEUE_SAMPLE:
        c->queue_ok += name_is(r, ev->name, "batches") && ev->v0 == 3 && ev->v1 == 8;
        return 1;
    case TS_KIND_COUNTER: {
        double v;
        memcpy(&v, &ev->v0, sizeof v);
        c->counter_ok += name_is(r, ev->name, "loss") && v == 0.5 && (ev->flags & TS_EF_DOUBLE);
        return 1;
    }
    case TS_KIND_MARK:
        c->mark_ok += name_is(r, ev->name, "checkpoint");
        return 1;
    case TS_KIND_PHASE:
        c->phases++;
        return ev->aux == TS_PHASE_FORWARD_START || ev->aux == TS_PHASE_BACKWARD_END;
    case TS_KIND_STEP_BEGIN:
        c->steps_begun++;
        return ev->v0 == c->steps_begun;
    case TS_KIND_STEP_END:
        c->steps_ended++;
        return ev->v0 == c->steps_begun;
    default:
        return 1;
    }
}

START_TEST(events_reach_recording)
{
    char out[600];
    termsight_session *s = open_session("events", 1, 0, 0, out, sizeof out);
    uint32_t q = termsight_queue_register("batches", 8, TERMSIGHT_QUEUE_HOST, "loader", "train");
    ck_assert_uint_eq(q, 1);
    for (int step = 0; step < 3; step++) {
        ck_assert_uint_eq(termsight_step_begin(), (uint64_t)step + 1);
        termsight_phase_mark(TERMSIGHT_FORWARD_START);
        termsight_range_begin("outer", NULL);
        termsight_range_begin("inner, \"quoted\"\n", "MatMul");
        termsight_range_flops(1234);
        termsight_range_end();
        termsight_range_end();
        termsight_phase_mark(TERMSIGHT_BACKWARD_END);
        termsight_queue_size(q, 3);
        termsight_counter("loss", 0.5);
        termsight_step_end();
    }
    termsight_mark("checkpoint");
    termsight_range_end(); /* unbalanced: ignored */
    char run[1024];
    snprintf(run, sizeof run, "%s", termsight_run_folder(s));
    ck_assert_int_eq(termsight_session_destroy(s), 0);

    known_ctx c = {0};
    tally t;
    read_recording(run, &t, check_known, &c);
    ck_assert_int_eq(c.ranges, 6);
    ck_assert_int_eq(c.inner_ok, 3);
    ck_assert_int_eq(c.outer_ok, 3);
    ck_assert_int_eq(c.queue_ok, 3);
    ck_assert_int_eq(c.counter_ok, 3);
    ck_assert_int_eq(c.mark_ok, 1);
    ck_assert_int_eq(c.phases, 6);
    ck_assert_uint_eq(c.steps_begun, 3);
    ck_assert_uint_eq(c.steps_ended, 3);
    ck_assert_uint_eq(t.by_kind[TS_KIND_QUEUE_INFO], 1);
    ck_assert_uint_eq(t.lost, 0);
}
END_TEST

START_TEST(nothing_while_not_collecting)
{
    char out[600];
    termsight_session *s = open_session("quiet", 0, 0, 0, out, sizeof out);
    termsight_range_begin("before", "T"); /* begun while idle: its end must not pop "inside" */
    ck_assert_int_eq(termsight_start(s), 0);
    termsight_range_begin("inside", "T");
    termsight_range_end();
    termsight_range_end();
    ck_assert_int_eq(termsight_stop(s), 0);
    for (int i = 0; i < 1000; i++) {
        termsight_range_begin("after", "T");
        termsight_range_end();
        termsight_counter("c", i);
    }
    ck_assert_uint_eq(termsight_step_begin(), 1); /* steps count while stopped too */
    char run[1024];
    snprintf(run, sizeof run, "%s", termsight_run_folder(s));
    ck_assert_int_eq(termsight_session_destroy(s), 0);
    tally t;
    read_recording(run, &t, NULL, NULL);
    ck_assert_uint_eq(t.by_kind[TS_KIND_OP_RANGE], 1);
    ck_assert_uint_eq(t.by_kind[TS_KIND_COUNTER], 0);
    ck_assert_uint_eq(t.by_kind[TS_KIND_STEP_BEGIN], 0);
}
END_TEST

/* A range still open at a stop is not recorded, and its end (skipped while stopped) does not
 * pair with ranges of the next window. */
static int only_b(const recording_reader *r, const ts_event *ev, void *ctx)
{
    (void)ctx;
    return ev->kind != TS_KIND_OP_RANGE || (name_is(r, ev->name, "B") && ev->aux == 0);
}

START_TEST(ranges_pair_within_a_window)
{
    char out[600];
    termsight_session *s = open_session("window", 1, 0, 0, out, sizeof out);
    termsight_range_begin("A", "T");
    ck_assert_int_eq(termsight_stop(s), 0);
    termsight_range_end(); /* A's end, while stopped */
    ck_assert_int_eq(termsight_start(s), 0);
    termsight_range_begin("B", "T");
    termsight_range_end();
    termsight_range_end(); /* nothing open in this window: ignored */
    char run[1024];
    snprintf(run, sizeof run, "%s", termsight_run_folder(s));
    ck_assert_int_eq(termsight_session_destroy(s), 0);
    tally t;
    read_recording(run, &t, only_b, NULL);
    ck_assert_uint_eq(t.by_kind[TS_KIND_OP_RANGE], 1);
}
END_TEST

/* TERMSIGHT_STEPS's window (window.c), opened by the step call on the training thread and
 * written by the loop: every event of the window comes after its start marker in the file (none
 * dropped for want of a recording, none ahead of the marker, whatever another thread pushes at
 * the same moment; only a thread that outruns its lane loses events, counted), the marker is
 * dated at step A's begin, and the window holds steps A..B.
 * Many short sessions, each with a one-step window, a busy second thread beside it. */
typedef struct order_ctx {
    int started, stopped;
    uint64_t start_ns, first_step_ns;
    unsigned before_start, steps, ranges, lost;
} order_ctx;

static int window_order(const recording_reader *r, const ts_event *ev, void *ctx)
{
    order_ctx *c = ctx;
    switch (ev->kind) {
    case TS_KIND_COLLECT_START:
        c->started++;
        c->start_ns = ev->begin_ns;
        return 1;
    case TS_KIND_COLLECT_STOP:
        c->stopped++;
        return 1;
    case TS_KIND_STEP_BEGIN:
        if (!c->first_step_ns)
            c->first_step_ns = ev->begin_ns;
        c->steps++;
        return ev->v0 == 2; /* only step 2 */
    case TS_KIND_OP_RANGE:
        c->ranges += name_is(r, ev->name, "in-step");
        break;
    case TS_KIND_LOST:
        /* The busy thread may outrun its lane (its own loss, counted); nothing else is lost. */
        if (ev->aux != TS_LOST_LANE_FULL)
            c->lost += (unsigned)ev->v0;
        return 1;
    default:
        break;
    }
    if (!c->started && (ev->kind == TS_KIND_OP_RANGE || ev->kind == TS_KIND_COUNTER))
        c->before_start++;
    return 1;
}

static _Atomic int busy_quit;

static void *busy_thread(void *arg)
{
    (void)arg;
    while (!atomic_load(&busy_quit))
        termsight_counter("busy", 1.0);
    return NULL;
}

START_TEST(step_window_from_the_training_thread)
{
    for (int round = 0; round < 20 / SCALE + 2; round++) {
        char out[600];
        termsight_session *s = open_session("stepwin", 0, 0, 0, out, sizeof out);
        window_set_steps(s, 2, 2);
        atomic_store(&busy_quit, 0);
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, busy_thread, NULL), 0);
        for (int step = 1; step <= 3; step++) {
            termsight_step_begin();
            termsight_range_begin("in-step", "T"); /* at once: the loop has not run yet */
            termsight_range_end();
            termsight_step_end();
        }
        atomic_store(&busy_quit, 1);
        pthread_join(t, NULL);
        char run[1024];
        snprintf(run, sizeof run, "%s", termsight_run_folder(s));
        ck_assert_int_eq(termsight_session_destroy(s), 0);
        order_ctx c = {0};
        tally tl;
        read_recording(run, &tl, window_order, &c);
        ck_assert_int_eq(c.started, 1);
        ck_assert_int_eq(c.stopped, 1);
        ck_assert_uint_eq(c.before_start, 0);
        ck_assert_uint_eq(c.steps, 1);
        ck_assert_uint_eq(c.ranges, 1);
        ck_assert_uint_eq(c.lost, 0);
        ck_assert_uint_le(c.start_ns, c.first_step_ns);
        ck_assert_uint_gt(c.start_ns, 0);
    }
}
END_TEST

/* A monitor sees what the collector itself writes (window markers, thread names registered
 * before the window opened), because it goes through a lane like everything else. */
START_TEST(observer_sees_collector_events)
{
    char out[600];
    termsight_session *s = open_session("observe", 0, 0, 0, out, sizeof out);
    termsight_thread_name("worker-7");
    ck_assert_int_eq(termsight_start(s), 0);
    segment *seg;
    char *why = NULL;
    ck_assert_msg(segment_attach(getpid(), 0, &seg, &why) == 0, "attach: %s", why);
    uint32_t worker = termsight_name("worker-7");
    int named = 0, started = 0;
    ts_event buf[256];
    uint32_t lanes = atomic_load(&segment_header(seg)->lanes_used);
    for (uint32_t i = 0; i < lanes; i++) {
        uint64_t cursor = 0, missed = 0;
        size_t n;
        while ((n = lane_observe(seg, i, &cursor, buf, 256, &missed)) > 0) {
            for (size_t k = 0; k < n; k++) {
                named += buf[k].kind == TS_KIND_THREAD_NAME && buf[k].name == worker &&
                         buf[k].tid == (uint32_t)gettid();
                started += buf[k].kind == TS_KIND_COLLECT_START;
            }
        }
        ck_assert_uint_eq(missed, 0);
    }
    ck_assert_int_eq(named, 1);
    ck_assert_int_eq(started, 1);
    segment_close(seg, 0);
    ck_assert_int_eq(termsight_session_destroy(s), 0);
}
END_TEST

/* Many threads, small lanes: every event is either recorded or counted as lost. */
#define EMITTERS 6

static void *emitter(void *arg)
{
    uint64_t n = *(uint64_t *)arg;
    uint32_t name = termsight_name("tick");
    for (uint64_t i = 0; i < n; i++)
        termsight_counter_id(name, (double)i);
    return NULL;
}

START_TEST(accounted_under_load)
{
    char out[600];
    termsight_session *s = open_session("load", 1, 64, EMITTERS + 1, out, sizeof out);
    uint64_t per_thread = 200000 / SCALE;
    pthread_t th[EMITTERS];
    for (int i = 0; i < EMITTERS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, emitter, &per_thread), 0);
    for (int i = 0; i < EMITTERS; i++)
        pthread_join(th[i], NULL);
    uint64_t dropped_live;
    char run[1024];
    snprintf(run, sizeof run, "%s", termsight_run_folder(s));
    ck_assert_int_eq(termsight_stop(s), 0);
    dropped_live = termsight_events_dropped(s);
    ck_assert_int_eq(termsight_session_destroy(s), 0);

    tally t;
    read_recording(run, &t, NULL, NULL);
    ck_assert_uint_eq(t.by_kind[TS_KIND_COUNTER] + t.lost, per_thread * EMITTERS);
    ck_assert_uint_eq(t.lost, dropped_live);
}
END_TEST

/* Threads that end give their lanes back: far more threads than lanes, one after another. */
static void *one_range(void *arg)
{
    (void)arg;
    termsight_range_begin("short-lived", "Op");
    termsight_range_end();
    return NULL;
}

START_TEST(lanes_reused)
{
    char out[600];
    termsight_session *s = open_session("reuse", 1, 64, 2, out, sizeof out);
    int rounds = 40;
    for (int i = 0; i < rounds; i++) {
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, one_range, NULL), 0);
        pthread_join(t, NULL);
        /* The recorder frees a retired lane once drained; flushing drains now. */
        ck_assert_int_eq(termsight_flush(s), 0);
    }
    char run[1024];
    snprintf(run, sizeof run, "%s", termsight_run_folder(s));
    ck_assert_int_eq(termsight_session_destroy(s), 0);
    tally t;
    read_recording(run, &t, NULL, NULL);
    ck_assert_uint_eq(t.by_kind[TS_KIND_OP_RANGE], (uint64_t)rounds);
    ck_assert_uint_eq(t.lost, 0);
}
END_TEST

/* A thread that finds no lane loses what it emits, each event counted once: a range when it
 * ends (one that never ends was never emitted), an instant when it is made. */
static void *laneless(void *arg)
{
    (void)arg;
    for (int i = 0; i < 10; i++)
        termsight_range_begin("open", "Op");
    for (int i = 0; i < 4; i++)
        termsight_range_end();
    for (int i = 0; i < 3; i++)
        termsight_mark("lost");
    return NULL;
}

START_TEST(no_lane_counts_what_was_emitted)
{
    char out[600];
    termsight_session *s = open_session("nolane", 1, 64, 1, out, sizeof out);
    termsight_mark("the main thread takes the only lane");
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, laneless, NULL), 0);
    pthread_join(t, NULL);
    char run[1024];
    snprintf(run, sizeof run, "%s", termsight_run_folder(s));
    ck_assert_int_eq(termsight_stop(s), 0);
    ck_assert_uint_eq(termsight_events_dropped(s), 4 + 3);
    ck_assert_int_eq(termsight_session_destroy(s), 0);
    tally t2;
    read_recording(run, &t2, NULL, NULL);
    ck_assert_uint_eq(t2.lost, 4 + 3);
    ck_assert_uint_eq(t2.by_kind[TS_KIND_OP_RANGE], 0);
    ck_assert_uint_eq(t2.by_kind[TS_KIND_MARK], 1);
}
END_TEST

/* Every window has its CPU and memory figures, however much shorter than the sampling interval:
 * a baseline when it opens and a sample when it closes, both inside it. */
START_TEST(short_window_sampled)
{
    termsight_options o;
    termsight_options_init(&o);
    char out[600];
    make_output(out, sizeof out, "short");
    o.output_path = out;
    o.sample_interval_ms = 60000;
    termsight_session *s = NULL;
    ck_assert_int_eq(termsight_session_create(&o, &s), TERMSIGHT_OK);
    char run[1024];
    snprintf(run, sizeof run, "%s", termsight_run_folder(s));
    for (int w = 0; w < 3; w++) {
        if (w)
            ck_assert_int_eq(termsight_start(s), 0);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do /* 20 ms of work */
            clock_gettime(CLOCK_MONOTONIC, &t1);
        while ((t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec) < 20000000L);
        ck_assert_int_eq(termsight_stop(s), 0);
    }
    ck_assert_int_eq(termsight_session_destroy(s), 0);
    recording_reader *r;
    ck_assert_int_eq(recording_reader_open(run, &r, NULL), 0);
    const ts_event *ev;
    size_t n;
    int window = 0, open = 0;
    uint64_t start_ns = 0, stop_ns = 0, process[4] = {0}, memory[4] = {0};
    while (recording_reader_next(r, &ev, &n, NULL) == 1) {
        for (size_t i = 0; i < n; i++) {
            if (ev[i].kind == TS_KIND_COLLECT_START)
                window++, open = 1, start_ns = ev[i].begin_ns;
            if (ev[i].kind == TS_KIND_COLLECT_STOP)
                open = 0, stop_ns = ev[i].end_ns;
            if (ev[i].kind == TS_KIND_CPU_PROCESS || ev[i].kind == TS_KIND_HOST_MEMORY) {
                ck_assert_msg(open, "a sample outside a window");
                ck_assert_uint_ge(ev[i].begin_ns, start_ns);
                (ev[i].kind == TS_KIND_CPU_PROCESS ? process : memory)[window]++;
            }
        }
    }
    recording_reader_close(r);
    ck_assert_int_eq(window, 3);
    ck_assert_uint_gt(stop_ns, start_ns);
    for (int w = 1; w <= 3; w++) {
        ck_assert_msg(process[w] == 1, "window %d: %llu process samples", w,
                      (unsigned long long)process[w]);
        ck_assert_uint_eq(memory[w], 1);
    }
}
END_TEST

START_TEST(flush_puts_everything_on_disk)
{
    char out[600];
    termsight_session *s = open_session("flush", 1, 0, 0, out, sizeof out);
    for (int i = 0; i < 5000; i++) {
        termsight_range_begin("op", "Op");
        termsight_range_end();
    }
    ck_assert_int_eq(termsight_flush(s), 0);
    tally t;
    read_recording(termsight_run_folder(s), &t, NULL, NULL); /* while the session lives */
    ck_assert_uint_eq(t.by_kind[TS_KIND_OP_RANGE], 5000);
    ck_assert_uint_eq(termsight_events_recorded(s) >= 5000, 1);
    ck_assert_int_eq(termsight_session_destroy(s), 0);
}
END_TEST

/* A frontend in another process drives the session through the mailbox. */
static int child_command(pid_t owner, uint32_t cmd, int32_t *status, char *msg, size_t cap)
{
    segment *seg;
    if (segment_attach(owner, 1, &seg, NULL) != 0)
        return -1;
    uint64_t seq;
    if (mailbox_send(seg, cmd, NULL, &seq, NULL) != 0) {
        segment_close(seg, 0);
        return -1;
    }
    /* The recorder polls every millisecond: allow ten seconds. */
    for (int i = 0; i < 10000; i++) {
        if (mailbox_reply(seg, seq, status, msg, cap)) {
            segment_close(seg, 0);
            return 0;
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    segment_close(seg, 0);
    return -1;
}

START_TEST(mailbox_from_another_process)
{
    char out[600];
    termsight_session *s = open_session("mailbox", 0, 0, 0, out, sizeof out);
    pid_t owner = getpid();
    pid_t child = fork();
    if (child == 0) {
        int32_t st;
        char msg[256];
        int ok = child_command(owner, TS_CMD_START, &st, msg, sizeof msg) == 0 && st == 0;
        ok = ok && child_command(owner, TS_CMD_START, &st, msg, sizeof msg) == 0 &&
             st == TERMSIGHT_E_ALREADY_COLLECTING && strstr(msg, "already collecting");
        ok = ok && child_command(owner, TS_CMD_STOP, &st, msg, sizeof msg) == 0 && st == 0;
        _exit(ok ? 0 : 1);
    }
    int status;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_str_eq(termsight_state(s), "stopped");
    ck_assert_int_eq(termsight_session_destroy(s), 0);
}
END_TEST

/* A program that returns from main without destroying its session: the exit handler records
 * everything and removes the segment. */
START_TEST(exit_flushes_and_removes)
{
    char out[600];
    make_output(out, sizeof out, "exit");
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    pid_t child = fork();
    if (child == 0) {
        close(fd[0]);
        termsight_options o;
        termsight_options_init(&o);
        o.output_path = out;
        termsight_session *s;
        if (termsight_session_create(&o, &s) != 0)
            _exit(2);
        for (int i = 0; i < 777; i++) {
            termsight_range_begin("op", "Op");
            termsight_range_end();
        }
        char run[1024];
        snprintf(run, sizeof run, "%s", termsight_run_folder(s));
        if (write(fd[1], run, strlen(run) + 1) < 0)
            _exit(3);
        exit(0); /* not _exit: atexit handlers run */
    }
    close(fd[1]);
    char run[1024] = {0};
    ck_assert_int_gt(read(fd[0], run, sizeof run - 1), 0);
    close(fd[0]);
    int status;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert(!shm_exists_pid(child));
    tally t;
    read_recording(run, &t, NULL, NULL);
    ck_assert_uint_eq(t.by_kind[TS_KIND_OP_RANGE], 777);
    ck_assert_uint_eq(t.by_kind[TS_KIND_COLLECT_STOP], 1);
}
END_TEST

START_TEST(bad_options)
{
    termsight_options o;
    termsight_options_init(&o);
    termsight_session *s = NULL;
    o.lane_events = 1000;
    ck_assert_int_eq(termsight_session_create(&o, &s), TERMSIGHT_E_INVALID);
    ck_assert_ptr_nonnull(strstr(termsight_last_error(), "power of two"));
    ck_assert_ptr_null(s);

    setenv("TERMSIGHT_LANE_EVENTS", "lots", 1);
    termsight_options_init(&o);
    ck_assert_int_eq(termsight_session_create(&o, &s), TERMSIGHT_E_INVALID);
    ck_assert_ptr_nonnull(strstr(termsight_last_error(), "TERMSIGHT_LANE_EVENTS=lots"));
    unsetenv("TERMSIGHT_LANE_EVENTS");

    setenv("PROFILING_FP_START", "Conv2D-op1", 1);
    termsight_options_init(&o);
    ck_assert_str_eq(o.fp_start_op, "Conv2D-op1");
    unsetenv("PROFILING_FP_START");

    o.output_path = "";
    ck_assert_int_eq(termsight_session_create(&o, &s), TERMSIGHT_E_INVALID);
    ck_assert_int_eq(termsight_start(NULL), TERMSIGHT_E_NO_SESSION);
    ck_assert_str_eq(termsight_strerror(TERMSIGHT_E_NOT_COLLECTING),
                     "the profiler is not collecting");
}
END_TEST

START_TEST(unwritable_output)
{
    termsight_options o;
    termsight_options_init(&o);
    char out[600];
    make_output(out, sizeof out, "file");
    FILE *f = fopen(out, "w"); /* a file where the output folder should be */
    ck_assert_ptr_nonnull(f);
    fclose(f);
    o.output_path = out;
    /* The training must not stop for it: the session is made, not collecting (one line on
     * stderr says why); a start says why too, and fails until the path is fixed. */
    termsight_session *s = NULL;
    ck_assert_int_eq(termsight_session_create(&o, &s), TERMSIGHT_OK);
    ck_assert_str_eq(termsight_state(s), "idle");
    ck_assert_int_eq(termsight_start(s), TERMSIGHT_E_RECORDING);
    ck_assert_ptr_nonnull(strstr(termsight_last_error(), out));
    ck_assert_int_eq(unlink(out), 0);
    ck_assert_int_eq(termsight_start(s), TERMSIGHT_OK); /* fixed: it records */
    termsight_mark("after all");
    ck_assert_int_eq(termsight_stop(s), TERMSIGHT_OK);
    ck_assert_uint_gt(termsight_events_recorded(s), 0);
    ck_assert_int_eq(termsight_session_destroy(s), TERMSIGHT_OK);
    ck_assert_ptr_null(termsight_session_current());
}
END_TEST

static Suite *session_suite(void)
{
    Suite *s = suite_create("session");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, state_machine);
    tcase_add_test(tc, run_folder_layout);
    tcase_add_test(tc, events_reach_recording);
    tcase_add_test(tc, nothing_while_not_collecting);
    tcase_add_test(tc, ranges_pair_within_a_window);
    tcase_add_test(tc, step_window_from_the_training_thread);
    tcase_add_test(tc, observer_sees_collector_events);
    tcase_add_test(tc, accounted_under_load);
    tcase_add_test(tc, lanes_reused);
    tcase_add_test(tc, no_lane_counts_what_was_emitted);
    tcase_add_test(tc, short_window_sampled);
    tcase_add_test(tc, flush_puts_everything_on_disk);
    tcase_add_test(tc, mailbox_from_another_process);
    tcase_add_test(tc, exit_flushes_and_removes);
    tcase_add_test(tc, bad_options);
    tcase_add_test(tc, unwritable_output);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(session_suite());
    /* Check's default fork mode: each test in a fresh process, as the session is one per
     * process. */
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}