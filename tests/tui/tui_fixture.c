/* The crafted run the tui room's panel and frame tests draw, and the canvas readers. */
#include "tui_fixture.h"

#include <locale.h>
#include <stdlib.h>

/* ---- A crafted run ---------------------------------------------------------------------- */

static const char *const names[N__COUNT] = {
    [N_NONE] = "",
    [N_OVERFLOW] = "<names table full>",
    [N_MATMUL1] = "Default/fc1/MatMul-op1",
    [N_MATMUL] = "MatMul",
    [N_RELU1] = "Default/relu1/ReLU-op2",
    [N_RELU] = "ReLU",
    [N_MATMUL_GRAD] = "Gradients/Default/fc1/gradMatMul/MatMul-op3",
    [N_QUEUE] = "batch_queue",
    [N_TRAIN] = "train",
    [N_LOADER] = "data-loader",
    [N_EVIL] = "evil\x1b[2J\r\nname\xff\xfe\x07",
    [N_EVIL_TYPE] = "Evil",
    [N_KERNEL] = "volta_sgemm_128x64_nn",
    [N_REC] = "termsight-rec",
    [N_SMP] = "termsight-smp",
    [N_AUTOGRAD] = "pt_autograd_0",
    [N_WORKER] = "evaluation DataLoader worker 1",
};

const char *names_fn(void *ctx, uint32_t id, uint32_t *len)
{
    (void)ctx;
    if (id >= N__COUNT)
        return NULL;
    *len = (uint32_t)strlen(names[id]);
    return names[id];
}

ts_event ev(uint16_t kind, uint32_t tid, uint64_t b, uint64_t e)
{
    return (ts_event){
        .kind = kind, .tid = tid, .device = TS_DEVICE_HOST, .begin_ns = b, .end_ns = e};
}

ts_event op(uint32_t name, uint32_t type, uint64_t b, uint64_t e)
{
    ts_event x = ev(TS_KIND_OP_RANGE, TRAIN_TID, b, e);
    x.name = name;
    x.type = type;
    return x;
}

void feed(run *r, const ts_event *e, size_t n)
{
    analysis_feed(r->a, e, n);
    tlring_feed(&r->tl, e, n);
}

/* Steps of 4 ms: interval 0.1 ms, forward+backward 3.2 ms (MatMul 1 ms, ReLU 0.2 ms, MatMul
 * gradient 2 ms), tail 0.2 ms, idle to the next; step SLOW_STEP's gradient takes 5 ms more.
 * A host queue sampled for 5 s, CPU samples, host memory, and one kernel on a stream. */
void make_run(run *r, int evil)
{
    memset(r, 0, sizeof *r);
    r->a = analysis_create(NULL, names_fn, NULL);
    ck_assert_ptr_nonnull(r->a);
    ck_assert_int_eq(tlring_init(&r->tl, 4096), 0);
    ts_event tn = ev(TS_KIND_THREAD_NAME, TRAIN_TID, T0, T0);
    tn.name = N_TRAIN;
    feed(r, &tn, 1);
    uint64_t t = T0;
    for (uint64_t s = 1; s <= STEPS; s++) {
        uint64_t extra = s == SLOW_STEP ? 5 * MS : 0;
        ts_event e[8];
        int n = 0;
        e[n] = ev(TS_KIND_STEP_BEGIN, TRAIN_TID, t, t);
        e[n++].v0 = s;
        e[n] = ev(TS_KIND_PHASE, TRAIN_TID, t + 100 * US, t + 100 * US);
        e[n++].aux = TS_PHASE_FORWARD_START;
        e[n++] = op(N_MATMUL1, N_MATMUL, t + 100 * US, t + 1100 * US);
        e[n++] = evil ? op(N_EVIL, N_EVIL_TYPE, t + 1100 * US, t + 1300 * US)
                      : op(N_RELU1, N_RELU, t + 1100 * US, t + 1300 * US);
        e[n++] = op(N_MATMUL_GRAD, N_MATMUL, t + 1300 * US, t + 3300 * US + extra);
        e[n] = ev(TS_KIND_PHASE, TRAIN_TID, t + 3300 * US + extra, t + 3300 * US + extra);
        e[n++].aux = TS_PHASE_BACKWARD_END;
        e[n] = ev(TS_KIND_STEP_END, TRAIN_TID, t + 3500 * US + extra, t + 3500 * US + extra);
        e[n++].v0 = s;
        feed(r, e, (size_t)n);
        t += 4 * MS + extra;
    }
    ts_event k = ev(TS_KIND_KERNEL, 7, T0 + 200 * US, T0 + 900 * US);
    k.device = 0;
    k.name = N_KERNEL;
    k.type = N_MATMUL;
    feed(r, &k, 1);
    /* The queue: mostly full for 5 s. */
    for (uint64_t q = 0; q < 50; q++) {
        ts_event s = ev(TS_KIND_QUEUE_SAMPLE, LOADER_TID, T0 + q * 100 * MS, T0 + q * 100 * MS);
        s.name = N_QUEUE;
        s.aux = TS_QUEUE_HOST;
        s.v0 = q % 10 == 0 ? 4 : 8;
        s.v1 = 8;
        feed(r, &s, 1);
    }
    /* CPU: user 30 %, system 10 %, iowait 5 % of the machine; the process 150 % of one CPU. */
    for (uint64_t i = 0; i < 5; i++) {
        uint64_t b = T0 + i * 100 * MS, e = b + 100 * MS;
        uint16_t share[TS_CPU__COUNT] = {[TS_CPU_USER] = 3000,
                                         [TS_CPU_SYSTEM] = 1000,
                                         [TS_CPU_IOWAIT] = 500,
                                         [TS_CPU_IDLE] = 5500};
        ts_event m = ev(TS_KIND_CPU_MACHINE, 0, b, e);
        ts_cpu_pack(&m, share);
        ts_event p = ev(TS_KIND_CPU_PROCESS, 0, b, e);
        p.v0 = 120 * MS;
        p.v1 = 30 * MS;
        p.aux = 3;
        p.corr = 4;
        ts_event th = ev(TS_KIND_CPU_THREAD, TRAIN_TID, b, e);
        th.name = N_TRAIN;
        th.v0 = 90 * MS;
        th.v1 = 5 * MS;
        ts_event mem = ev(TS_KIND_HOST_MEMORY, 0, e, e);
        mem.v0 = 300ull << 20;
        mem.v1 = 512ull << 20;
        /* A data-loader worker process all along, and one that ended after the first sample. */
        ts_event w = ev(TS_KIND_CPU_CHILD, 5151, b, e);
        w.name = N_TRAIN;
        w.v0 = 70 * MS;
        w.corr = 200ull << 20;
        ts_event gone = ev(TS_KIND_CPU_CHILD, 5152, b, e);
        /* A worker whose name is longer than a label. */
        ts_event named = ev(TS_KIND_CPU_CHILD, 5153, b, e);
        named.name = N_WORKER;
        named.v0 = 10 * MS;
        /* The collector's own threads: 2 % and 1 % of one CPU. */
        ts_event rec = ev(TS_KIND_CPU_THREAD, 300, b, e), smp = ev(TS_KIND_CPU_THREAD, 301, b, e);
        rec.name = N_REC;
        rec.v0 = 2 * MS;
        smp.name = N_SMP;
        smp.v1 = 1 * MS;
        ts_event batch[9] = {m, p, th, mem, w, rec, smp, named, gone};
        feed(r, batch, i == 0 ? 9 : 8);
    }
    analysis_finish(r->a);
    r->st = (source_status){.pid = 4242,
                            .state = TS_STATE_COLLECTING,
                            .elapsed_s = 83,
                            .events_per_s = 12345,
                            .drops = 0,
                            .missed = 17,
                            .window = 1};
    strcpy(r->st.process, "trainer");
    strcpy(r->st.run_folder, "/tmp/runs/trainer-4242-20250101-000000");
    r->p = (panel_ctx){.a = r->a, .tl = &r->tl, .st = &r->st};
}

void free_run(run *r)
{
    analysis_destroy(r->a);
    tlring_free(&r->tl);
}

/* ---- Reading canvases back -------------------------------------------------------------- */

char dump_text[64 * 1024];

/* The canvas as dump_text, one line per row. */
const char *dump(const canvas *c)
{
    size_t n = 0;
    for (int y = 0; y < c->rows && n + 4 * (size_t)c->cols + 2 < sizeof dump_text; y++) {
        n += canvas_line(c, y, dump_text + n, sizeof dump_text - n);
        dump_text[n++] = '\n';
    }
    dump_text[n] = 0;
    return dump_text;
}

int line_with(const canvas *c, const char *needle, char *out, size_t cap)
{
    for (int y = 0; y < c->rows; y++) {
        canvas_line(c, y, out, cap);
        if (strstr(out, needle))
            return y;
    }
    return -1;
}

void draw_panel(run *r, view *v, canvas *c, int panel, int rows, int cols, int full,
                const glyphs *g)
{
    if (c->cells)
        canvas_free(c);
    ck_assert_int_eq(canvas_init(c, rows, cols, g), 0);
    panels[panel]->draw(&r->p, v, c, (rect){0, 0, rows, cols}, full);
}

int run_suite(Suite *s)
{
    setlocale(LC_ALL, "C.UTF-8");
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
