/* The profiled process killed with SIGKILL while it collects at full speed: its recording keeps
 * every event the recorder had drained before the kill, `termsight analyse` reads it and says
 * that the window never ended, and what was lost is exactly what the lanes still held.
 *
 * The bound: the recorder drains every lane at once when they are busy, 0.1 ms after a drain that
 * found a few events and 1 ms after one that found none, and writes straight to the file (no
 * buffer in the process: the page cache outlives a SIGKILL). So the events lost are those pushed
 * since the recorder's last drain began: head - tail of each lane at the kill, at most one lane
 * (lane_events) per thread, about the last drain period. */
#define TESTUTIL_TAG "kill"
#include "testutil.h"

#include "cliutil.h"
#include "faults.h"

#define THREADS 2

/* Every thread has emitted (a thread can start late: a sanitizer's, on a busy machine). */
static int all_threads_emit(void *ctx)
{
    const emitter *e = ctx;
    for (unsigned k = 0; k < e->threads; k++)
        if (atomic_load(&e->progress[k]) < 1000)
            return 0;
    return 1;
}

/* The recorder recorded at least ctx[1] events: more than two drains can take (every lane
 * full), so a whole drain began after the threads' first events. */
static int recorded_enough(void *ctx)
{
    uint64_t *args = ctx;
    ts_segment_header *h = (ts_segment_header *)(uintptr_t)args[0];
    return atomic_load(&h->events_recorded) >= args[1];
}

/* The thread of the emitter's thread k: the one that wrote the counters named "emit<k>", read
 * from the recording in run; 0 when none did. */
static uint32_t counter_tid(const char *run, unsigned k)
{
    uint32_t tid = 0;
    recording_reader *r;
    ck_assert_int_eq(recording_reader_open(run, &r, NULL), 0);
    const ts_event *ev;
    size_t n;
    char name[16];
    snprintf(name, sizeof name, "emit%u", k);
    while (!tid && recording_reader_next(r, &ev, &n, NULL) == 1)
        for (size_t i = 0; i < n && !tid; i++) {
            uint32_t len;
            const char *s = recording_reader_string(r, ev[i].name, &len);
            if (ev[i].kind == TS_KIND_COUNTER && s && len == strlen(name) && !memcmp(s, name, len))
                tid = ev[i].tid;
        }
    recording_reader_close(r);
    return tid;
}

/* The newest counter's end in the recording in run (0 when none). */
static uint64_t newest_counter_ns(const char *run)
{
    uint64_t last_ns = 0;
    recording_reader *r;
    ck_assert_int_eq(recording_reader_open(run, &r, NULL), 0);
    const ts_event *ev;
    size_t n;
    while (recording_reader_next(r, &ev, &n, NULL) == 1)
        for (size_t i = 0; i < n; i++)
            if (ev[i].kind == TS_KIND_COUNTER && ev[i].end_ns > last_ns)
                last_ns = ev[i].end_ns;
    recording_reader_close(r);
    return last_ns;
}

/* What the lanes of the dead process say, summed over its threads. */
typedef struct lane_sums {
    uint64_t emitted, drained, pushed, lane_drops;
    uint32_t tids[THREADS];
} lane_sums;

/* Each thread's lane in the dead process's segment against what the recording holds (t): every
 * emit pushed or dropped, everything drained on disk, nothing that was not pushed. */
static void check_lanes(const emitter *e, segment *seg, const counter_tally *t, lane_sums *sum)
{
    ts_segment_header *h = segment_header(seg);
    uint32_t used = atomic_load(&h->lanes_used);
    *sum = (lane_sums){0};
    for (unsigned k = 0; k < THREADS; k++) {
        uint64_t progress = atomic_load(&e->progress[k]);
        sum->emitted += progress;
        ck_assert_uint_gt(t->counters[k], 0);
        uint32_t tid = counter_tid(e->run, k);
        sum->tids[k] = tid;
        ts_lane *lane = NULL;
        for (uint32_t i = 0; i < used; i++)
            if (atomic_load(&segment_lane(seg, i)->tid) == tid)
                lane = segment_lane(seg, i);
        ck_assert_ptr_nonnull(lane);
        uint64_t head = atomic_load(&lane->head), tail = atomic_load(&lane->tail);
        uint64_t d = atomic_load(&lane->drops);
        /* Every emit pushed or dropped; the progress word follows the emit. */
        ck_assert_msg(progress == head + d || progress + 1 == head + d,
                      "thread %u: progress %" PRIu64 ", pushed %" PRIu64 " + dropped %" PRIu64, k,
                      progress, head, d);
        /* Everything drained is on disk; nothing that was not pushed is. The head read here is
         * the segment's mirror, which the producer stores right after its own (the one the
         * recorder reads): a kill between the two leaves it one event behind. */
        ck_assert_uint_ge(t->counters[k], tail);
        ck_assert_uint_le(t->counters[k], head + 1);
        if (!d) /* without drops, exactly the values 0 .. n-1 */
            ck_assert_uint_eq(t->next[k], t->counters[k]);
        sum->drained += tail;
        sum->pushed += head;
        sum->lane_drops += d;
    }
}

/* analyse reads the run folder, counts what it recovered (t), and says the window never ended. */
static void check_analyse_unfinished(const char *out, const char *run, const counter_tally *t)
{
    char *report = path_join(out, "report");
    const char *args[] = {"analyse", run, "-o", report, NULL};
    cli_result res;
    cli_run(out, args, &res);
    ck_assert_msg(res.status == 0, "analyse: %s", res.err);
    char want[64];
    snprintf(want, sizeof want, "events:     %" PRIu64 " ", t->events);
    ck_assert_msg(strstr(res.out, want), "analyse does not count %" PRIu64 " events:\n%s",
                  t->events, res.out);
    ck_assert_msg(strstr(res.out, "unfinished:"), "analyse does not say the window is open:\n%s",
                  res.out);
    if (t->bad_chunks)
        err_expect(&res, "damaged chunks");
    cli_result_free(&res);
    free(report);
}

/* `termsight ls --clean` adds what the lanes still held to the recording: then every event
 * pushed is on disk (at most the chunk being written at the kill twice: written, its lane not
 * yet released), and the report says how the process ended. The segment is closed here. */
static void check_clean(const char *out, const char *run, pid_t pid, segment *seg,
                        const lane_sums *sum, uint64_t recovered)
{
    uint32_t used = atomic_load(&segment_header(seg)->lanes_used);
    uint64_t head[THREADS] = {0};
    for (uint32_t i = 0; i < used; i++) {
        ts_lane *lane = segment_lane(seg, i);
        for (unsigned k = 0; k < THREADS; k++)
            if (atomic_load(&lane->tid) == sum->tids[k])
                head[k] = atomic_load(&lane->head);
    }
    segment_close(seg, 0);
    /* Only this pid's: other tests' stale sessions are theirs to clean. */
    char pid_text[16];
    snprintf(pid_text, sizeof pid_text, "%d", (int)pid);
    const char *clean[] = {"ls", "--clean", pid_text, NULL};
    cli_result res;
    cli_run(out, clean, &res);
    ck_assert_msg(res.status == 0, "ls --clean: %s", res.err);
    /* Said when the lanes held something the recorder had not taken: a kill right after a drain
     * that took everything (a slow emitter, under TSan) leaves nothing to add. */
    if (sum->pushed > recovered)
        ck_assert_msg(strstr(res.out, "events its lanes still held were added to its recording"),
                      "ls --clean:\n%s", res.out);
    cli_result_free(&res);
    counter_tally after;
    tally_counters(run, &after);
    for (unsigned k = 0; k < THREADS; k++) {
        ck_assert_uint_ge(after.counters[k], head[k]);
        ck_assert_uint_le(after.counters[k], head[k] + 65536);
    }
    char *report = path_join(out, "report-after");
    const char *again[] = {"analyse", run, "-o", report, NULL};
    cli_run(out, again, &res);
    ck_assert_msg(res.status == 0, "analyse: %s", res.err);
    ck_assert_msg(strstr(res.out, "ended:      the process ended (found gone by termsight ls "
                                  "--clean) before it closed its session"),
                  "analyse does not say how the process ended:\n%s", res.out);
    ck_assert_ptr_null(strstr(res.out, "unfinished:"));
    cli_result_free(&res);
    free(report);
    printf("sigkill: after ls --clean, %" PRIu64 " counters on disk of %" PRIu64 " pushed\n",
           after.total, head[0] + head[1]);
}

START_TEST(sigkill_while_collecting)
{
    char *out = tmp_make();
    emitter e;
    const char *extra[] = {"--lane-events", "65536", NULL};
    emitter_start(&e, out, THREADS, extra);
    segment *seg;
    char *why = NULL;
    ck_assert_msg(segment_attach(e.pid, 0, &seg, &why) == 0, "attach: %s", why);
    ts_segment_header *h = segment_header(seg);
    ck_assert_msg(wait_for(all_threads_emit, &e, 60), "the emitter's threads did not start");
    uint64_t enough[2] = {(uintptr_t)h,
                          atomic_load(&h->events_recorded) + 100000 + 2ull * (THREADS + 1) * 65536};
    ck_assert_msg(wait_for(recorded_enough, enough, 60), "the recorder did not record %" PRIu64,
                  enough[1]);
    ck_assert(emitter_advances(&e, 10)); /* still emitting at full speed */
    uint64_t kill_ns = faults_now_ns();
    emitter_kill(&e);

    /* The dead process's segment stays until removed: it says what the lanes held. */
    counter_tally t;
    tally_counters(e.run, &t);
    ck_assert_uint_le(t.bad_chunks, 1); /* at most the chunk being written at the kill */
    ck_assert_int_eq(t.ordered, 1);
    ck_assert_uint_ge(t.events, atomic_load(&h->events_recorded));
    lane_sums sum;
    check_lanes(&e, seg, &t, &sum);
    /* The newest event on disk against the kill: how much time the loss covers. */
    uint64_t last_ns = newest_counter_ns(e.run);
    printf("sigkill: emitted %" PRIu64 ", pushed %" PRIu64 ", dropped %" PRIu64
           " (lanes full), recovered %" PRIu64 " counters (%" PRIu64 " events, %" PRIu64
           " bad chunk), lost at the kill %" PRIu64 " (written, lane not yet released: %" PRIu64
           "), newest recovered event %.3f ms before the kill\n",
           sum.emitted, sum.pushed, sum.lane_drops, t.total, t.events, t.bad_chunks,
           sum.pushed - t.total, t.total - sum.drained,
           kill_ns > last_ns ? (double)(kill_ns - last_ns) / 1e6 : 0.0);

    check_analyse_unfinished(out, e.run, &t);
    check_clean(out, e.run, e.pid, seg, &sum, t.total);
    tmp_remove(out);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {sigkill_while_collecting, NULL};
    return faults_main("kill_process", 120, tests);
}
