/* The live source on real shared memory: it takes steps and operators from the boards whole, and
 * reads what the lanes hold into the analysis and the timeline without writing to them, counts
 * what writers lapped, follows the header's state, sees the process end, sends commands through
 * the mailbox, and refuses foreign segments. The tests play the collector's part: events into a
 * lane, and the recorder's digest of them onto the boards. */
#include "model/model_test.h"
#include "tui_internal.h"

#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

typedef struct writer {
    segment *seg;
    strtab *names;
    lane_writer w;
    digest *dg;
    uint32_t op, type;
} writer;

static const char *writer_name(void *ctx, uint32_t id, uint32_t *len)
{
    return strtab_name(ctx, id, len);
}

/* A segment of our own pid (alive), 64 events a lane. */
static void writer_open(writer *wr, pid_t pid)
{
    memset(wr, 0, sizeof *wr);
    segment_config cfg = mt_config(pid);
    cfg.process = "trainer";
    wr->seg = mt_create(&cfg);
    char *cause = NULL;
    ck_assert_int_eq(strtab_create(wr->seg, &wr->names, &cause), 0);
    ck_assert_int_eq(lane_claim(wr->seg, 77, &wr->w), 0);
    wr->dg = digest_create(wr->seg, writer_name, wr->names, NULL, NULL);
    ck_assert_ptr_nonnull(wr->dg);
    wr->op = strtab_intern(wr->names, "Default/fc1/MatMul-op1", 22, NULL);
    wr->type = strtab_intern(wr->names, "MatMul", 6, NULL);
}

static void writer_close(writer *wr)
{
    digest_destroy(wr->dg);
    strtab_destroy(wr->names);
    segment_close(wr->seg, 1);
}

static uint64_t clock_ns;

static void push_ops(writer *wr, int n)
{
    for (int i = 0; i < n; i++) {
        ts_event e = {.kind = TS_KIND_OP_RANGE,
                      .tid = 77,
                      .device = TS_DEVICE_HOST,
                      .name = wr->op,
                      .type = wr->type,
                      .begin_ns = clock_ns,
                      .end_ns = clock_ns + 1000};
        clock_ns += 2000;
        ck_assert_int_eq(lane_push(&wr->w, &e), 1);
        /* The recorder's part: keep the ring from filling, so writers lap the observer, and
         * sum what it took onto the boards. */
        digest_feed(wr->dg, &e, 1);
        lane_consume(wr->seg, 0, 1);
    }
    digest_publish(wr->dg, clock_ns, 0);
}

static uint64_t op_count(const analysis *a)
{
    op_query q = {.by_type = 1, .sort = OP_SORT_TOTAL};
    op_stat *rows = NULL;
    size_t n = analysis_ops(a, &q, &rows);
    uint64_t c = n ? rows[0].count : 0;
    if (n)
        ck_assert_str_eq(analysis_name(a, rows[0].name, NULL), "MatMul");
    free(rows);
    return c;
}

static void unlink_own(void)
{
    shm_unlink_pid(getpid());
}

START_TEST(test_observe)
{
    writer wr;
    writer_open(&wr, getpid());
    push_ops(&wr, 10);
    source *s = NULL;
    char *cause = NULL;
    ck_assert_msg(source_open(getpid(), &s, &cause) == 0, "%s", cause ? cause : "?");
    const source_status *st = source_status_of(s);
    ck_assert_str_eq(st->process, "trainer");
    ck_assert_str_eq(st->run_folder, "/nonexistent/run");
    ck_assert_int_eq(st->state, TS_STATE_IDLE);
    ck_assert(!st->gone);
    /* What the ring held at attach is read; nothing is missed. */
    ck_assert_uint_eq(source_poll(s, 1000000000ull), 10);
    ck_assert_uint_eq(op_count(source_analysis(s)), 10);
    ck_assert_uint_eq(source_timeline(s)->n, 10);
    ck_assert_uint_eq(st->missed, 0);
    ck_assert(!st->sampled);
    push_ops(&wr, 20);
    atomic_store(&segment_header(wr.seg)->state, TS_STATE_COLLECTING);
    ck_assert_uint_eq(source_poll(s, 2000000000ull), 20);
    ck_assert_int_eq(st->state, TS_STATE_COLLECTING);
    ck_assert_uint_eq(op_count(source_analysis(s)), 30);
    ck_assert_uint_eq(st->observed, 30);
    ck_assert(st->events_per_s > 19.9 && st->events_per_s < 20.1);
    /* The observer never writes: the lane's consumer index is the recorder's alone. */
    ts_lane *l = segment_lane(wr.seg, 0);
    ck_assert_uint_eq(atomic_load(&l->tail), 30);
    ck_assert_uint_eq(atomic_load(&l->head), 30);
    source_close(s);
    writer_close(&wr);
}
END_TEST

START_TEST(test_lapped)
{
    writer wr;
    writer_open(&wr, getpid());
    source *s = NULL;
    ck_assert_int_eq(source_open(getpid(), &s, NULL), 0);
    const source_status *st = source_status_of(s);
    /* The thread names itself, then the lane is lapped: the name's event is gone from it. */
    uint32_t name = strtab_intern(wr.names, "trainer-main", 12, NULL);
    ts_event named = {.kind = TS_KIND_THREAD_NAME,
                      .tid = 77,
                      .device = TS_DEVICE_HOST,
                      .name = name,
                      .begin_ns = clock_ns,
                      .end_ns = clock_ns};
    ck_assert_int_eq(lane_push(&wr.w, &named), 1);
    digest_feed(wr.dg, &named, 1);
    lane_consume(wr.seg, 0, 1);
    push_ops(&wr, 200); /* a 64-event lane, lapped */
    /* A copy gets at most 63 whole: the 64th slot is the one the writer fills next. The lanes'
     * views are a sample now; the operators, from the board, are whole. */
    ck_assert_uint_eq(source_poll(s, 1), 63);
    ck_assert_uint_eq(st->missed, 201 - 63);
    ck_assert(st->sampled);
    ck_assert_uint_eq(op_count(source_analysis(s)), 200);
    ck_assert_uint_eq(analysis_thread_name(source_analysis(s), 77), name); /* from the board */
    /* Frozen while the writer went on: resuming reads what the ring still holds and does not
     * count the rest as missed. */
    push_ops(&wr, 500);
    source_resync(s);
    ck_assert_uint_eq(source_poll(s, 2), 63);
    ck_assert_uint_eq(st->missed, 201 - 63);
    source_close(s);
    writer_close(&wr);
}
END_TEST

START_TEST(test_history_at_attach)
{
    writer wr;
    writer_open(&wr, getpid());
    push_ops(&wr, 100);
    source *s = NULL;
    ck_assert_int_eq(source_open(getpid(), &s, NULL), 0);
    ck_assert_uint_eq(source_poll(s, 1), 63);
    ck_assert_uint_eq(source_status_of(s)->missed, 0);
    source_close(s);
    writer_close(&wr);
}
END_TEST

START_TEST(test_ended)
{
    writer wr;
    writer_open(&wr, getpid());
    source *s = NULL;
    ck_assert_int_eq(source_open(getpid(), &s, NULL), 0);
    push_ops(&wr, 5);
    source_poll(s, 1);
    atomic_store(&segment_header(wr.seg)->state, TS_STATE_ENDED);
    source_poll(s, 1000000000ull);
    const source_status *st = source_status_of(s);
    ck_assert(st->gone);
    ck_assert_int_eq(st->state, TS_STATE_ENDED);
    ck_assert(st->events_per_s == 0);
    /* The last data stays. */
    ck_assert_uint_eq(op_count(source_analysis(s)), 5);
    double el = st->elapsed_s;
    mt_pause();
    source_poll(s, 2000000000ull);
    ck_assert(st->elapsed_s == el);
    char *cause = NULL;
    uint64_t seq;
    ck_assert_int_eq(source_send(s, TS_CMD_START, &seq, &cause), -1);
    ck_assert_ptr_nonnull(strstr(cause, "ended"));
    free(cause);
    source_close(s);
    writer_close(&wr);
}
END_TEST

START_TEST(test_process_gone)
{
    pid_t pid = mt_pid(1); /* no such process */
    writer wr;
    writer_open(&wr, pid);
    source *s = NULL;
    ck_assert_int_eq(source_open(pid, &s, NULL), 0);
    ck_assert(source_status_of(s)->gone);
    ck_assert_int_eq(source_status_of(s)->state, TS_STATE_IDLE);
    source_close(s);
    /* Not live: the list leaves it out. */
    segment_info *list = NULL;
    int n = source_list_live(&list, NULL);
    ck_assert_int_ge(n, 0);
    for (int i = 0; i < n; i++)
        ck_assert_int_ne(list[i].pid, pid);
    free(list);
    writer_close(&wr);
}
END_TEST

START_TEST(test_list_live)
{
    writer wr;
    writer_open(&wr, getpid());
    segment_info *list = NULL;
    int n = source_list_live(&list, NULL);
    int found = 0;
    for (int i = 0; i < n; i++)
        found |= list[i].pid == getpid() && !strcmp(list[i].process, "trainer");
    ck_assert(found);
    free(list);
    writer_close(&wr);
}
END_TEST

START_TEST(test_commands)
{
    writer wr;
    writer_open(&wr, getpid());
    source *s = NULL;
    ck_assert_int_eq(source_open(getpid(), &s, NULL), 0);
    uint64_t seq = 0, again;
    char *cause = NULL;
    ck_assert_int_eq(source_send(s, TS_CMD_START, &seq, &cause), 0);
    int32_t status = 1;
    char msg[TS_MAILBOX_MSG];
    ck_assert_int_eq(source_reply(s, seq, &status, msg, sizeof msg), 0);
    /* One command at a time: the second is refused with a message. */
    ck_assert_int_eq(source_send(s, TS_CMD_STOP, &again, &cause), -1);
    ck_assert_ptr_nonnull(cause);
    free(cause);
    cause = NULL;
    /* The collector's side answers with an error; the monitor shows it, not swallows it. */
    mailbox_state ms = {0};
    uint64_t got;
    uint32_t cmd;
    char arg[TS_MAILBOX_ARG];
    ck_assert_int_eq(mailbox_take(wr.seg, &ms, &got, &cmd, arg, sizeof arg), 1);
    ck_assert_uint_eq(got, seq);
    ck_assert_uint_eq(cmd, TS_CMD_START);
    mailbox_answer(wr.seg, got, -3, "start: the profiler is already collecting (window 1)");
    ck_assert_int_eq(source_reply(s, seq, &status, msg, sizeof msg), 1);
    ck_assert_int_eq(status, -3);
    ck_assert_str_eq(msg, "start: the profiler is already collecting (window 1)");
    ck_assert_int_eq(source_send(s, TS_CMD_FLUSH, &again, &cause), 0);
    source_close(s);
    writer_close(&wr);
}
END_TEST

START_TEST(test_foreign_segment)
{
    static const struct {
        size_t len;
        unsigned char fill;
    } cases[] = {{0, 0}, {16, 0xab}, {4096, 0}, {65536, 0x54}};
    pid_t pid = mt_pid(2);
    char name[64];
    snprintf(name, sizeof name, "/" TS_SEGMENT_PREFIX "%d-0123456789abcdef", (int)pid);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int fd = shm_open(name, O_RDWR | O_CREAT | O_TRUNC, 0600);
        ck_assert_int_ge(fd, 0);
        unsigned char *buf = malloc(cases[i].len + 1);
        memset(buf, cases[i].fill, cases[i].len + 1);
        ck_assert_int_eq(write(fd, buf, cases[i].len), (ssize_t)cases[i].len);
        free(buf);
        close(fd);
        source *s = NULL;
        char *cause = NULL;
        ck_assert_int_eq(source_open(pid, &s, &cause), -1);
        ck_assert_ptr_null(s);
        ck_assert_msg(cause && *cause, "case %zu: no message", i);
        free(cause);
    }
    shm_unlink(name);
    source *s = NULL;
    char *cause = NULL;
    ck_assert_int_eq(source_open(pid, &s, &cause), -1); /* none at all */
    ck_assert_ptr_nonnull(cause);
    free(cause);
}
END_TEST

START_TEST(test_names_bounded_timeline)
{
    /* Many events: the timeline ring stays at its size. */
    writer wr;
    writer_open(&wr, getpid());
    source *s = NULL;
    ck_assert_int_eq(source_open(getpid(), &s, NULL), 0);
    for (int round = 0; round < 1000; round++) {
        push_ops(&wr, 60);
        source_poll(s, (uint64_t)round + 1);
    }
    ck_assert_uint_eq(source_status_of(s)->observed, 60000);
    ck_assert_uint_le(source_timeline(s)->n, source_timeline(s)->cap);
    ck_assert_uint_eq(source_timeline(s)->nlanes, 1);
    source_close(s);
    writer_close(&wr);
}
END_TEST

/* ---- A job's ranks --------------------------------------------------------------------- */

#define STEP_NS 200000000ull /* 200 ms steps */
#define STEPS   12

/* A rank of a job in a process of its own (a session is alive while its process maps it): it
 * writes STEPS steps, each a compute op of compute_ms then an all-reduce until 10 ms before the
 * step's end, says so on the pipe and waits to be killed. */
static pid_t start_rank(const char *job, int rank, int world, int compute_ms, int ready)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed check leaves no rank behind */
    segment_config cfg = mt_config(0);
    cfg.process = "ranktrainer";
    cfg.job = job;
    cfg.host = "node7";
    cfg.rank = rank;
    cfg.local_rank = rank;
    cfg.world_size = world;
    segment *seg;
    strtab *names;
    lane_writer w;
    digest *dg = NULL;
    if (segment_create(&cfg, &seg, NULL) != 0 || strtab_create(seg, &names, NULL) != 0 ||
        lane_claim(seg, 77, &w) != 0 || !(dg = digest_create(seg, writer_name, names, NULL, NULL)))
        _exit(1);
    uint32_t op = strtab_intern(names, "forward_backward", 16, NULL);
    uint32_t ar = strtab_intern(names, "all_reduce", 10, NULL);
    for (uint64_t k = 1; k <= STEPS; k++) {
        uint64_t t0 = k * STEP_NS, c = (uint64_t)compute_ms * 1000000ull;
        ts_event ev[4] = {
            {.kind = TS_KIND_STEP_BEGIN, .tid = 77, .begin_ns = t0, .end_ns = t0, .v0 = k},
            {.kind = TS_KIND_OP_RANGE,
             .tid = 77,
             .name = op,
             .begin_ns = t0 + 10000000ull,
             .end_ns = t0 + 10000000ull + c},
            {.kind = TS_KIND_COMM_OP,
             .tid = 77,
             .name = ar,
             .begin_ns = t0 + 10000000ull + c,
             .end_ns = t0 + STEP_NS - 10000000ull},
            {.kind = TS_KIND_STEP_END,
             .tid = 77,
             .begin_ns = t0 + STEP_NS - 1,
             .end_ns = t0 + STEP_NS - 1,
             .v0 = k},
        };
        for (int i = 0; i < 4; i++) {
            ev[i].device = TS_DEVICE_HOST;
            if (lane_push(&w, &ev[i]) != 1)
                _exit(1);
        }
        digest_feed(dg, ev, 4);
    }
    digest_publish(dg, (STEPS + 1) * STEP_NS, 1);
    /* The training's own count, which the collector mirrors: it began one step more than its
     * events say (the header and the Ranks screen must say the same). */
    atomic_store(&segment_header(seg)->steps, STEPS + 1);
    char c = 'r';
    if (write(ready, &c, 1) != 1)
        _exit(1);
    for (;;)
        pause();
}

typedef struct job_fixture {
    char job[64];
    int pipe[2];
    pid_t pid[4];
    int n;
} job_fixture;

static pid_t add_rank(job_fixture *f, int rank, int compute_ms)
{
    pid_t pid = start_rank(f->job, rank, 3, compute_ms, f->pipe[1]);
    char c;
    ck_assert_int_eq(read(f->pipe[0], &c, 1), 1);
    f->pid[f->n++] = pid;
    return pid;
}

static void end_rank(job_fixture *f, int i)
{
    kill(f->pid[i], SIGKILL);
    waitpid(f->pid[i], NULL, 0);
}

static void job_close(job_fixture *f)
{
    for (int i = 0; i < f->n; i++) {
        end_rank(f, i);
        shm_unlink_pid(f->pid[i]);
    }
    close(f->pipe[0]);
    close(f->pipe[1]);
}

/* Three ranks, the third computing 70 ms more per step while the other two wait for it in their
 * all-reduce: attached to rank 1, the table has all three by rank with their figures, and the
 * third is the straggler by computation. */
START_TEST(test_job_ranks)
{
    job_fixture f = {.n = 0};
    snprintf(f.job, sizeof f.job, "unit-%d", (int)getpid());
    ck_assert_int_eq(pipe(f.pipe), 0);
    add_rank(&f, 2, 170);
    pid_t r1 = add_rank(&f, 1, 100);
    pid_t r0 = add_rank(&f, 0, 100);
    ranks *rk = NULL;
    char *cause = NULL;
    ck_assert_msg(ranks_open(r1, &rk, &cause) == 0, "%s", cause ? cause : "?");
    ranks_poll(rk, 1000000000ull);
    const ranks_table *t = ranks_table_of(rk);
    ck_assert_str_eq(t->job, f.job);
    ck_assert_uint_eq(t->n, 3);
    ck_assert_int_eq(t->world_size, 3);
    ck_assert_uint_eq(t->hidden, 0);
    ck_assert_int_eq(t->selected, 1); /* the rank attached to */
    ck_assert_int_eq(source_status_of(ranks_selected(rk))->pid, r1);
    ck_assert_int_eq(t->row[0].pid, r0);
    ck_assert_int_eq(t->row[1].pid, r1);
    ck_assert_int_eq(t->row[2].pid, f.pid[0]);
    for (int i = 0; i < 3; i++) {
        const rank_row *r = &t->row[i];
        ck_assert_int_eq(r->rank, i);
        ck_assert_str_eq(r->host, "node7");
        ck_assert_int_eq(r->state, TS_STATE_IDLE);
        ck_assert(!r->gone);
        ck_assert_uint_eq(r->step, STEPS + 1);
        ck_assert_uint_ge(r->steps, 5);
        ck_assert(r->have_last);
        ck_assert_msg(fabs(r->avg_total_ns - 200e6) < 1e6, "rank %d: %.0f", i, r->avg_total_ns);
        double wait = i == 2 ? 10e6 : 80e6, compute = i == 2 ? 170e6 : 100e6;
        ck_assert_msg(fabs(r->avg_wait_ns - wait) < 1e6, "rank %d wait %.0f", i, r->avg_wait_ns);
        ck_assert_msg(fabs(r->avg_compute_ns - compute) < 1e6, "rank %d compute %.0f", i,
                      r->avg_compute_ns);
        ck_assert(fabs(r->last_wait_ns - wait) < 1e6);
        ck_assert_int_eq(r->straggler, i == 2);
    }
    ck_assert_uint_eq(t->stragglers, 1);
    ck_assert_str_eq(t->row[2].cause, "compute");
    ck_assert_msg(fabs(t->row[2].excess_ns - 70e6) < 1e6, "%.0f", t->row[2].excess_ns);
    ck_assert_msg(fabs(t->row[2].others_wait_ns - 80e6) < 1e6, "%.0f", t->row[2].others_wait_ns);

    /* The Ranks screen says so; the snapshot carries the table. */
    canvas c;
    ck_assert_int_eq(canvas_init(&c, 24, 120, &glyphs_ascii), 0);
    view v;
    view_init(&v);
    source *sel = ranks_selected(rk);
    panel_ctx p = {.a = source_analysis(sel),
                   .tl = source_timeline(sel),
                   .st = source_status_of(sel),
                   .rk = t};
    /* The header says the step the Ranks screen says. */
    frame_header(&c, (rect){0, 0, 2, 120}, p.st, p.a, NULL, ROLE_NORMAL, -1, 0);
    char line[512], all[8192] = "";
    canvas_line(&c, 1, line, sizeof line);
    ck_assert_msg(strstr(line, "step 13 "), "%s", line);
    canvas_clear(&c);
    panel_ranks.draw(&p, &v, &c, (rect){0, 0, 24, 120}, 1);
    for (int y = 0; y < 24; y++) {
        canvas_line(&c, y, line, sizeof line);
        strncat(all, line, sizeof all - strlen(all) - 2);
        strcat(all, "\n");
    }
    ck_assert_msg(strstr(all, "3 ranks on this machine of 3"), "%s", all);
    ck_assert_msg(strstr(all, "COMM WAIT") && strstr(all, "straggler: rank 2"), "%s", all);
    ck_assert_msg(strstr(all, "80.0 ms") || strstr(all, "80.00 ms"), "%s", all);
    canvas_free(&c);
    char *json = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&json, &len);
    ck_assert_int_eq(snapshot_json(mem, &p), 0);
    fclose(mem);
    ck_assert_msg(strstr(json, "\"ranks\"") && strstr(json, "\"stragglers\"") &&
                      strstr(json, "\"compute\""),
                  "%s", json);
    free(json);

    /* Enter on a row shows that rank. */
    ranks_select(rk, 0);
    ck_assert_int_eq(source_status_of(ranks_selected(rk))->pid, r0);
    ck_assert_int_eq(ranks_table_of(rk)->selected, 0);

    /* A rank that ends keeps its figures; one that starts later is picked up. */
    end_rank(&f, 0);
    pid_t r3 = add_rank(&f, 3, 100);
    ranks_poll(rk, 5000000000ull);
    ck_assert_uint_eq(t->n, 4);
    ck_assert_int_eq(t->row[3].pid, r3);
    ck_assert(t->row[2].gone);
    ck_assert_uint_ge(t->row[2].steps, 5);
    ck_assert_int_eq(t->selected, 0);
    ranks_close(rk);
    job_close(&f);
}
END_TEST

/* The Ranks screen drawn at cols x 24, as text lines. */
static void draw_ranks(const ranks_table *t, int cols, char *all, size_t cap)
{
    canvas c;
    ck_assert_int_eq(canvas_init(&c, 24, cols, &glyphs_ascii), 0);
    view v;
    view_init(&v);
    panel_ctx p = {.rk = t};
    panel_ranks.draw(&p, &v, &c, (rect){0, 0, 24, cols}, 1);
    char line[512];
    all[0] = 0;
    for (int y = 0; y < 24; y++) {
        canvas_line(&c, y, line, sizeof line);
        strncat(all, line, cap - strlen(all) - 2);
        strcat(all, "\n");
    }
    canvas_free(&c);
}

/* An empty table of job `job`'s n ranks, all on this machine. */
static void table_init(ranks_table *t, const char *job, size_t n)
{
    memset(t, 0, sizeof *t);
    snprintf(t->job, sizeof t->job, "%s", job);
    t->world_size = (int32_t)n;
    t->n = n;
}

/* Two ranks with steps and no communication recorded (DDP not instrumented): no straggler can
 * be found, and the Ranks screen says why rather than calling them balanced. */
START_TEST(test_ranks_without_communication)
{
    static ranks_table t;
    table_init(&t, "nocomm", 2);
    for (int i = 0; i < 2; i++)
        t.row[i] = (rank_row){.rank = i,
                              .local_rank = i,
                              .pid = 100 + i,
                              .steps = 10,
                              .avg_total_ns = 200e6,
                              .avg_interval_ns = i ? 150e6 : 10e6,
                              .avg_compute_ns = i ? 40e6 : 180e6,
                              .avg_tail_ns = 10e6,
                              .cpu = -1};
    ranks_verdict(&t);
    ck_assert_uint_eq(t.stragglers, 0);
    ck_assert_uint_eq(t.unmeasured, 2);
    char all[8192];
    draw_ranks(&t, 140, all, sizeof all);
    ck_assert_msg(strstr(all, "stragglers: unknown: 2 ranks recorded no communication"), "%s", all);
    ck_assert_msg(!strstr(all, "within the job rule"), "%s", all);
}
END_TEST

/* A hang: three ranks inside the all-reduce for 41 s, rank 2 in its data loader. Each rank's
 * open range shows (the INSIDE column goes first on a stall, even at 80 columns) and the verdict
 * names rank 2; the same ranks making steps keep the usual columns. */
START_TEST(test_ranks_hang)
{
    static ranks_table t;
    table_init(&t, "stuck", 4);
    for (int i = 0; i < 4; i++) {
        t.row[i] = (rank_row){.rank = i,
                              .pid = 100 + i,
                              .steps = 3,
                              .cpu = -1,
                              .comm_s = i == 2 ? -1 : 41.2,
                              .since_s = 41.2,
                              .stalled = 1};
        snprintf(t.row[i].inside, sizeof t.row[i].inside, "%s",
                 i == 2 ? "in DataLoader.__next__ for 60.1 s" : "in c10d::allreduce_ for 41.2 s");
    }
    ranks_verdict(&t);
    ck_assert_uint_eq(t.waited_for, 1);
    ck_assert_uint_eq(t.stalled, 4);
    ck_assert(t.row[2].waited_for && !t.row[0].waited_for);
    char all[8192];
    draw_ranks(&t, 80, all, sizeof all);
    ck_assert_msg(strstr(all, "INSIDE"), "%s", all);
    ck_assert_msg(strstr(all, "in DataLoader.__next__ for 60.1 s"), "%s", all);
    ck_assert_msg(strstr(all, "in c10d::allreduce_ for 41.2 s"), "%s", all);
    ck_assert_msg(strstr(all, "rank 2 is the one the others wait for (3 ranks wait in a"), "%s",
                  all);
    for (int i = 0; i < 4; i++) {
        t.row[i].stalled = 0;
        t.row[i].comm_s = -1;
    }
    ranks_verdict(&t);
    draw_ranks(&t, 80, all, sizeof all);
    ck_assert_msg(!strstr(all, "INSIDE") && !strstr(all, "wait for"), "%s", all);
}
END_TEST

/* A session of no job: the table has it alone, without a job id. */
START_TEST(test_no_job)
{
    writer wr;
    writer_open(&wr, getpid());
    ranks *rk = NULL;
    ck_assert_int_eq(ranks_open(getpid(), &rk, NULL), 0);
    ranks_poll(rk, 1);
    ck_assert_str_eq(ranks_table_of(rk)->job, "");
    ck_assert_uint_eq(ranks_table_of(rk)->n, 1);
    ck_assert_int_eq(ranks_table_of(rk)->row[0].rank, -1);
    ck_assert_uint_eq(ranks_table_of(rk)->stragglers, 0);
    ranks_close(rk);
    writer_close(&wr);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tui_source");
    TCase *tc = tcase_create("source");
    tcase_add_checked_fixture(tc, NULL, unlink_own);
    tcase_add_test(tc, test_observe);
    tcase_add_test(tc, test_lapped);
    tcase_add_test(tc, test_history_at_attach);
    tcase_add_test(tc, test_ended);
    tcase_add_test(tc, test_process_gone);
    tcase_add_test(tc, test_list_live);
    tcase_add_test(tc, test_commands);
    tcase_add_test(tc, test_ranks_without_communication);
    tcase_add_test(tc, test_ranks_hang);
    tcase_add_test(tc, test_foreign_segment);
    tcase_add_test(tc, test_names_bounded_timeline);
    tcase_add_test(tc, test_job_ranks);
    tcase_add_test(tc, test_no_job);
    suite_add_tcase(s, tc);
    return mt_run(s);
}
