/* test_steps_device: the step on the device (model/steptrace_device.c), case by case on
 * constructed CUDA records: busy time over streams and copies, idle time by cause (data,
 * host-bound, synchronization, other), launches matched by correlation id, the step's device.
 * Each case is fed in the orders a recorder produces (steps_fixture.c), device records late. */
#include "analysis/golden.h"
#include "steps_fixture.h"
#include "testutil.h"

enum { D_KERNEL, D_COPY, D_LAUNCH, D_SYNC, D_FETCH, D_OP, D_STEP2 };

typedef struct dpiece {
    int what;
    uint64_t b, e;
    uint32_t corr;   /* kernels, copies and launches */
    uint32_t device; /* kernels and copies; streams follow the piece's index */
} dpiece;

typedef struct dev_want {
    uint32_t device; /* TS_DEVICE_HOST: no device work */
    uint64_t busy, data, host, sync, other;
} dev_want;

typedef struct device_case {
    const char *label;
    dpiece p[10];
    size_t np;
    dev_want want[2]; /* step 1 [100, 600], and step 2 [600, 1100] where a D_STEP2 piece says so */
} device_case;

#define NONE                                                                                       \
    {                                                                                              \
        TS_DEVICE_HOST, 0, 0, 0, 0, 0                                                              \
    }
/* Pieces: a kernel or a copy on a device, a launch (an API call on thread 1), a synchronization, a
 * data fetch and an op on thread 1, and the second step. */
#define KERNEL(b, e, corr, dev)                                                                    \
    {                                                                                              \
        D_KERNEL, b, e, corr, dev                                                                  \
    }
#define COPY(b, e, corr)                                                                           \
    {                                                                                              \
        D_COPY, b, e, corr, 0                                                                      \
    }
#define LAUNCH(b, corr)                                                                            \
    {                                                                                              \
        D_LAUNCH, b, b + 1, corr, 0                                                                \
    }
#define SYNC(b, e)                                                                                 \
    {                                                                                              \
        D_SYNC, b, e, 0, 0                                                                         \
    }
#define FETCH(b, e)                                                                                \
    {                                                                                              \
        D_FETCH, b, e, 0, 0                                                                        \
    }
#define OP(b, e)                                                                                   \
    {                                                                                              \
        D_OP, b, e, 0, 0                                                                           \
    }
#define STEP2                                                                                      \
    {                                                                                              \
        D_STEP2, 0, 0, 0, 0                                                                        \
    }

static const device_case cases[] = {
    /* Kernels on two streams [200,350] u [300,400] and a copy [380,450]: busy [200,450] 250. No
     * API record: the queue counts as empty. With no host op the forward starts at the first
     * kernel (the default rule): [100,200] is data, [450,600] the host's. */
    {"two streams and a copy",
     {KERNEL(200, 350, 1, 0), KERNEL(300, 400, 2, 0), COPY(380, 450, 3)},
     3,
     {{0, 250, 100, 150, 0, 0}, NONE}},
    /* The step waits for its batch in a fetch [100,250]; the forward starts with the op at 260
     * (data: [100,260]); a kernel [270,480] launched at 262. Idle [100,270]: data 160, then
     * nothing queued until the launch at 262 (host 2), then queued (other 8); [480,600]: host
     * 120. */
    {"data wait",
     {FETCH(100, 250), OP(260, 500), LAUNCH(262, 5), KERNEL(270, 480, 5, 0)},
     4,
     {{0, 210, 160, 122, 0, 8}, NONE}},
    /* Launch-bound: tiny kernels [150,155] [170,175] [190,195], each launched 10, 5 and 5 us
     * before it starts (140, 165, 185); the forward starts at 110 (data [100,110]). Idle
     * [100,150]: data 10, host 30, other 10; [155,170]: host 10, other 5; [175,190]: host 10,
     * other 5; [195,600]: host 405. */
    {"launch-bound",
     {OP(110, 590), LAUNCH(140, 1), KERNEL(150, 155, 1, 0), LAUNCH(165, 2), KERNEL(170, 175, 2, 0),
      LAUNCH(185, 3), KERNEL(190, 195, 3, 0)},
     7,
     {{0, 15, 10, 455, 0, 20}, NONE}},
    /* loss.item(): a kernel [120,300] (launched 112) and its copy to the host [300,310] (114);
     * the host waits in a synchronization [115,312], then launches the next kernel at 390, which
     * runs [400,500]. Idle [100,120]: data 10, host 2, other 8; [310,400]: the synchronization
     * and the launching after it until 390 (sync 80), queued 10 (other); [500,600]: host 100. */
    {"synchronization",
     {OP(110, 590), LAUNCH(112, 1), KERNEL(120, 300, 1, 0), LAUNCH(114, 2), COPY(300, 310, 2),
      SYNC(115, 312), LAUNCH(390, 3), KERNEL(400, 500, 3, 0)},
     8,
     {{0, 290, 10, 102, 80, 18}, NONE}},
    /* Launched in step 1 at 580, run in step 2 [700,800]: step 1 has no device record; in step 2
     * the work was queued all along [600,700] (other 100); a kernel [950,1000] launched at 900:
     * host 100, other 50; [1000,1100]: host 100. */
    {"launched in the step before",
     {STEP2, OP(110, 590), LAUNCH(580, 9), OP(610, 1090), KERNEL(700, 800, 9, 0), LAUNCH(900, 10),
      KERNEL(950, 1000, 10, 0)},
     7,
     {NONE, {0, 150, 0, 200, 0, 150}}},
    /* Two devices: the step's device is the one with the most work (device 1, 200 against 50).
     * The forward starts at the first kernel: [100,200] is data. */
    {"two devices",
     {KERNEL(200, 250, 1, 0), KERNEL(200, 400, 2, 1)},
     2,
     {{1, 200, 100, 200, 0, 0}, NONE}},
    /* A kernel [500,700] across the step end, and an op on the step's thread in each step (the
     * forward starts at 110 and 610): each step gets its part of the kernel (100 busy). */
    {"across steps",
     {STEP2, OP(110, 590), OP(610, 1090), KERNEL(500, 700, 1, 0)},
     4,
     {{0, 100, 10, 390, 0, 0}, {0, 100, 0, 400, 0, 0}}},
};

static void add_dpiece(golden *g, const dpiece *p, uint32_t stream)
{
    ts_event *e;
    switch (p->what) {
    case D_KERNEL:
        golden_kernel(g, p->device, stream, "k", NULL, p->b, p->e, 0)->corr = p->corr;
        break;
    case D_COPY:
        e = golden_kernel(g, p->device, stream, "", NULL, p->b, p->e, 0);
        e->kind = TS_KIND_MEMCPY;
        e->corr = p->corr;
        e->aux = 2; /* device to host */
        break;
    case D_LAUNCH:
        e = golden_op(g, 1, "cudaLaunchKernel", NULL, p->b, p->e, 0);
        e->kind = TS_KIND_CUDA_API;
        e->corr = p->corr;
        break;
    case D_SYNC:
        e = golden_op(g, 1, "", NULL, p->b, p->e, 0);
        e->kind = TS_KIND_SYNC;
        break;
    case D_FETCH:
        golden_op(g, 1, "DataLoader.__next__", NULL, p->b, p->e, 0);
        break;
    case D_OP:
        golden_op(g, 1, "aten::addmm", NULL, p->b, p->e, 0);
        break;
    }
}

static void check_want(const step_row *r, const dev_want *w, const char *label, const char *order,
                       size_t step)
{
    ck_assert_msg(r->gpu_device == w->device && r->gpu_busy_ns == w->busy * US &&
                      r->gpu_idle_data_ns == w->data * US && r->gpu_idle_host_ns == w->host * US &&
                      r->gpu_idle_sync_ns == w->sync * US && r->gpu_idle_other_ns == w->other * US,
                  "%s, %s, step %zu: device %u busy %llu data %llu host %llu sync %llu other %llu "
                  "ns",
                  label, order, step, r->gpu_device, (unsigned long long)r->gpu_busy_ns,
                  (unsigned long long)r->gpu_idle_data_ns, (unsigned long long)r->gpu_idle_host_ns,
                  (unsigned long long)r->gpu_idle_sync_ns,
                  (unsigned long long)r->gpu_idle_other_ns);
    if (w->device != TS_DEVICE_HOST) /* a partition of the step */
        ck_assert_uint_eq(r->gpu_busy_ns + r->gpu_idle_data_ns + r->gpu_idle_host_ns +
                              r->gpu_idle_sync_ns + r->gpu_idle_other_ns,
                          r->total_ns);
}

START_TEST(test_device_cases)
{
    const device_case *c = &cases[_i];
    golden g;
    golden_init(&g);
    int two = 0;
    for (size_t i = 0; i < c->np; i++)
        two |= c->p[i].what == D_STEP2;
    golden_step(&g, 1, 1, 100, 600);
    if (two)
        golden_step(&g, 1, 2, 600, 1100);
    for (size_t i = 0; i < c->np; i++)
        add_dpiece(&g, &c->p[i], 7 + (uint32_t)i);
    size_t nsteps = two ? 2 : 1;
    for (size_t o = 0; o < N_ORDERS; o++) {
        capture cap;
        analysis_sink sink;
        analysis *a = analyse_in_order(&g, NULL, &orders[o], &cap, &sink);
        ck_assert_uint_eq(cap.n, nsteps);
        for (size_t s = 0; s < nsteps; s++)
            check_want(&cap.rows[s], &c->want[s], c->label, orders[o].label, s + 1);
        /* The summary averages the steps with device work. */
        step_summary sum = analysis_steps(a);
        double busy = 0, host = 0, total = 0;
        uint64_t steps = 0;
        for (size_t s = 0; s < nsteps; s++) {
            if (c->want[s].device == TS_DEVICE_HOST)
                continue;
            steps++;
            busy += (double)(c->want[s].busy * US);
            host += (double)(c->want[s].host * US);
            total += (double)(cap.rows[s].total_ns);
        }
        ck_assert_uint_eq(sum.gpu_steps, steps);
        ck_assert_double_eq(sum.avg_gpu_busy_ns, busy / (double)steps);
        ck_assert_double_eq(sum.avg_gpu_idle_host_ns, host / (double)steps);
        ck_assert_double_eq(sum.avg_gpu_total_ns, total / (double)steps);
        analysis_destroy(a);
    }
    golden_free(&g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("steps_device");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, test_device_cases, 0, (int)(sizeof cases / sizeof cases[0]));
    suite_add_tcase(s, tc);
    return tests_run(s);
}
