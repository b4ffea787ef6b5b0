/* The monitor killed with SIGKILL, against a process that emits at full speed (fault_emitter):
 * - in the middle of each command (start, stop, flush, mark), at each stage a frontend goes
 *   through: the mailbox claimed but the command not posted, posted, waiting for the answer. The
 *   collector releases an abandoned claim, runs every posted command, keeps emitting and
 *   recording, and the next command from a new frontend succeeds.
 * - attached and detached 1000 times, the way `termsight top` attaches (tui source), every
 *   other monitor killed instead of detaching, one in two sending a mark (half of those killed
 *   right after posting it): every mark reaches the recording, and every event the process
 *   emitted is in the recording or counted as dropped. */
#define TESTUTIL_TAG "monitor"
#include "testutil.h"

#include "faults.h"
#include "tui_internal.h"

#include <errno.h>
#include <sys/stat.h>

/* Two threads in bursts of 256 events at full speed every millisecond into 128-event lanes: the
 * lanes overflow and lap the monitors, and the recording stays at some hundred megabytes. */
static const char *const paced[] = {"--burst", "256", "--lane-events", "128", NULL};

enum stage {
    STAGE_CLAIMED, /* req_seq odd: the mailbox claimed, the command not yet posted */
    STAGE_POSTED,  /* posted, not yet read back */
    STAGE_WAITING, /* polling for the answer */
    STAGE__COUNT
};

static const char *const stage_names[] = {"claimed", "posted", "waiting"};

static ts_mailbox *mailbox_in(const segment *seg)
{
    ts_mailbox *m = segment_mailbox(seg);
    ck_assert_ptr_nonnull(m);
    return m;
}

/* Posts cmd, retrying while the previous command is unanswered or a claim is being released. */
static uint64_t post(const segment *seg, uint32_t cmd, const char *arg)
{
    uint64_t seq, end = faults_now_ns() + 30000000000ull;
    char *why = NULL;
    while (mailbox_send(seg, cmd, arg, &seq, &why) != 0) {
        ck_assert_msg(faults_now_ns() < end, "cannot post %s: %s", mailbox_cmd_name(cmd), why);
        free(why);
        why = NULL;
        faults_nap();
    }
    return seq;
}

typedef struct answer_wait {
    const segment *seg;
    uint64_t seq;
    int32_t status;
    char msg[TS_MAILBOX_MSG];
} answer_wait;

static int answered(void *ctx)
{
    answer_wait *w = ctx;
    return mailbox_reply(w->seg, w->seq, &w->status, w->msg, sizeof w->msg);
}

/* The answer to seq, within 30 s. */
static int32_t answer_of(const segment *seg, uint64_t seq, char *msg, size_t cap)
{
    answer_wait w = {.seg = seg, .seq = seq};
    ck_assert_msg(wait_for(answered, &w, 30), "command %" PRIu64 " never answered", seq);
    if (msg)
        snprintf(msg, cap, "%s", w.msg);
    return w.status;
}

/* The frontend that gets killed: attaches as top does, then goes as far as stage with cmd and
 * tells the parent (the sequence number, 0 for a claim) through fd, then waits to be killed. */
static void doomed_frontend(pid_t target, uint32_t cmd, enum stage stage, int fd)
{
    source *src;
    if (source_open(target, &src, NULL) != 0)
        _exit(2);
    source_poll(src, faults_now_ns());
    segment *seg;
    if (segment_attach(target, 1, &seg, NULL) != 0)
        _exit(3);
    uint64_t seq = 0;
    if (stage == STAGE_CLAIMED) {
        ts_mailbox *m = mailbox_in(seg);
        for (;;) { /* what mailbox_send does, up to its claim */
            uint64_t req = atomic_load(&m->req_seq);
            if (!(req & 1) && atomic_load(&m->ack_seq) == req &&
                atomic_compare_exchange_strong(&m->req_seq, &req, req + 1))
                break;
            faults_nap();
        }
        atomic_store(&m->cmd, cmd);
    } else {
        seq = post(seg, cmd, "doomed");
    }
    if (write(fd, &seq, sizeof seq) != sizeof seq)
        _exit(4);
    int32_t status;
    for (;;) {
        if (stage == STAGE_WAITING)
            mailbox_reply(seg, seq, &status, NULL, 0);
        source_poll(src, faults_now_ns());
        faults_nap();
    }
}

/* Forks the doomed frontend, waits for it to reach its stage, SIGKILLs it; returns its seq. */
static uint64_t kill_frontend_at(pid_t target, uint32_t cmd, enum stage stage)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        close(p[0]);
        doomed_frontend(target, cmd, stage, p[1]);
    }
    close(p[1]);
    uint64_t seq = UINT64_MAX;
    ck_assert_msg(read(p[0], &seq, sizeof seq) == sizeof seq, "frontend died before %s %s",
                  stage_names[stage], mailbox_cmd_name(cmd));
    close(p[0]);
    ck_assert_int_eq(kill(child, SIGKILL), 0);
    int st;
    ck_assert_int_eq(waitpid(child, &st, 0), child);
    ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    return seq;
}

static int mailbox_idle(void *ctx)
{
    ts_mailbox *m = ctx;
    uint64_t req = atomic_load(&m->req_seq);
    return !(req & 1) && atomic_load(&m->ack_seq) == req;
}

static int heartbeat_after(void *ctx)
{
    const uint64_t *a = ctx; /* {header, heartbeat before} */
    return atomic_load(&((ts_segment_header *)(uintptr_t)a[0])->heartbeat_ns) > a[1];
}

/* Ends the emitter, which must have run and ended cleanly, and reads its undamaged recording. */
static void finish_cleanly(emitter *e, emitter_result *r, counter_tally *t)
{
    emitter_finish(e, r);
    ck_assert(WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0);
    ck_assert_int_eq(r->stop_rc, 0);
    ck_assert_int_eq(r->destroy_rc, 0);
    tally_counters(e->run, t);
    ck_assert_uint_eq(t->bad_chunks, 0);
    ck_assert_int_eq(t->ordered, 1);
}

START_TEST(killed_in_each_command)
{
    char *out = tmp_make();
    emitter e;
    emitter_start(&e, out, 2, paced);
    segment *seg;
    char *why = NULL;
    ck_assert_msg(segment_attach(e.pid, 1, &seg, &why) == 0, "attach: %s", why);
    ts_segment_header *h = segment_header(seg);
    ts_mailbox *m = mailbox_in(seg);
    static const uint32_t cmds[] = {TS_CMD_STOP, TS_CMD_START, TS_CMD_FLUSH, TS_CMD_MARK};
    uint32_t marks = 0, kills = 0;
    for (int stage = 0; stage < STAGE__COUNT; stage++) {
        for (size_t c = 0; c < sizeof cmds / sizeof cmds[0]; c++) {
            uint32_t cmd = cmds[c];
            uint64_t seq = kill_frontend_at(e.pid, cmd, (enum stage)stage);
            kills++;
            ck_assert_msg(wait_for(mailbox_idle, m, 30), "mailbox stuck after a kill at %s %s",
                          stage_names[stage], mailbox_cmd_name(cmd));
            char msg[TS_MAILBOX_MSG];
            if (stage == STAGE_CLAIMED) {
                /* Released by the collector, answered as abandoned, never run: run it now. */
                uint64_t released = atomic_load(&m->ack_seq);
                ck_assert_int_eq(answer_of(seg, released, msg, sizeof msg), -1);
                ck_assert_str_eq(msg, "command abandoned by its frontend");
                seq = post(seg, cmd, "retried");
            }
            ck_assert_msg(answer_of(seg, seq, msg, sizeof msg) == 0, "%s after a kill at %s: %s",
                          mailbox_cmd_name(cmd), stage_names[stage], msg);
            marks += cmd == TS_CMD_MARK;
            ck_assert_uint_eq(atomic_load(&h->state),
                              cmd == TS_CMD_STOP ? TS_STATE_STOPPED : TS_STATE_COLLECTING);
            /* The process goes on: its threads emit, its recorder loops. */
            ck_assert(emitter_advances(&e, 10));
            uint64_t hb[2] = {(uintptr_t)h, atomic_load(&h->heartbeat_ns)};
            ck_assert(wait_for(heartbeat_after, hb, 10));
        }
    }
    /* The next command from a new frontend. */
    ck_assert_int_eq(answer_of(seg, post(seg, TS_CMD_FLUSH, NULL), NULL, 0), 0);
    segment_close(seg, 0);
    emitter_result r;
    counter_tally t;
    finish_cleanly(&e, &r, &t);
    ck_assert_uint_eq(t.marks, marks);
    ck_assert_uint_eq(t.by_kind[TS_KIND_COLLECT_START], 1 + STAGE__COUNT);
    ck_assert_uint_eq(t.by_kind[TS_KIND_COLLECT_STOP], 1 + STAGE__COUNT);
    ck_assert_uint_eq(t.lost, r.dropped);
    printf("monitor killed %u times mid-command (%u marks); emitted %" PRIu64 ", recorded %" PRIu64
           " counters, dropped %" PRIu64 "\n",
           kills, marks, r.emitted, t.total, r.dropped);
    tmp_remove(out);
}
END_TEST

/* 1,000 cycles in the long variant, 200 in the default set. */
#define CYCLES ((int)test_scale(200, 1000))

/* One monitor: attaches as top does, reads the lanes, in one cycle of two sends a mark, then
 * reports what it observed through fd and detaches (even cycles) or waits to be killed. */
static void monitor_cycle(pid_t target, int cycle, int fd)
{
    source *src;
    if (source_open(target, &src, NULL) != 0)
        _exit(2);
    uint64_t seen = source_poll(src, faults_now_ns());
    if (cycle % 2) {
        uint64_t seq, end = faults_now_ns() + 30000000000ull;
        while (source_send(src, TS_CMD_MARK, &seq, NULL) != 0)
            if (faults_now_ns() > end)
                _exit(5);
            else
                faults_nap();
        int32_t status = 0;
        /* One in two waits for the answer; the other is killed as soon as it posted. */
        while (cycle % 4 == 1 && !source_reply(src, seq, &status, NULL, 0))
            faults_nap();
        if (status != 0)
            _exit(6);
    }
    if (write(fd, &seen, sizeof seen) != sizeof seen)
        _exit(4);
    if (cycle % 2 == 0) {
        source_close(src);
        _exit(0);
    }
    for (;;)
        pause();
}

START_TEST(attach_detach_cycles)
{
    char *out = tmp_make();
    emitter e;
    emitter_start(&e, out, 2, paced);
    uint64_t observed = 0, blind = 0, before = emitter_progress(&e);
    uint64_t t0 = faults_now_ns();
    for (int cycle = 0; cycle < CYCLES; cycle++) {
        int p[2];
        ck_assert_int_eq(pipe(p), 0);
        pid_t child = fork();
        ck_assert_int_ge(child, 0);
        if (child == 0) {
            close(p[0]);
            monitor_cycle(e.pid, cycle, p[1]);
        }
        close(p[1]);
        uint64_t seen = 0;
        ck_assert_msg(read(p[0], &seen, sizeof seen) == sizeof seen, "monitor %d failed", cycle);
        close(p[0]);
        observed += seen;
        blind += !seen;
        if (cycle % 2)
            ck_assert_int_eq(kill(child, SIGKILL), 0);
        int st;
        ck_assert_int_eq(waitpid(child, &st, 0), child);
        ck_assert(cycle % 2 ? WIFSIGNALED(st) : WIFEXITED(st) && WEXITSTATUS(st) == 0);
        if (cycle % 100 == 99) { /* the process was never held up */
            ck_assert_msg(emitter_progress(&e) > before, "no progress by cycle %d", cycle);
            before = emitter_progress(&e);
        }
    }
    double seconds = (double)(faults_now_ns() - t0) / 1e9;
    emitter_result r;
    counter_tally t;
    finish_cleanly(&e, &r, &t);
    ck_assert_uint_eq(t.marks, CYCLES / 2);
    /* Nothing lost that is not counted, nothing counted twice. */
    ck_assert_uint_eq(t.total + t.lost_by_reason[TS_LOST_LANE_FULL], r.emitted);
    ck_assert_uint_eq(t.lost, r.dropped);
    ck_assert_uint_eq(blind, 0); /* every monitor saw events */
    printf("%d attach/detach cycles (%d killed, %d marks) in %.1f s; monitors observed %" PRIu64
           " events; emitted %" PRIu64 ", recorded %" PRIu64 ", dropped %" PRIu64 "\n",
           CYCLES, CYCLES / 2, CYCLES / 2, seconds, observed, r.emitted, t.total, r.dropped);
    tmp_remove(out);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {killed_in_each_command, attach_detach_cycles, NULL};
    return faults_main("monitor_kill", 600, tests);
}
