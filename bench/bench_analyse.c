/* bench_analyse: how fast termsight analyse digests a recording, and how much memory it needs.
 *
 * Generates recordings of a realistic mix (nested operator ranges on a main thread and two
 * data-loader threads, steps with phase marks, CUDA launches and their kernels on three
 * streams, communication kernels, queue samples, CPU and memory samples, device allocations),
 * written in the order a recorder drains them (one thread's lane after another, ranges when
 * they end), then measures, each in a fresh child process:
 *
 *   stats     events/s into the statistics: analysis_feed alone (the reading is not counted)
 *   timeline  MB/s of timeline written: timeline_feed and the rows it draws, with no size limit
 *   report    the whole of report_run (all files, the default 500 MiB timeline limit): wall
 *             time and peak RSS, for two recording lengths, to show memory does not grow with
 *             the length
 *
 * Before each measurement the parent calls sync(), so the page cache's writeback of what the
 * previous one wrote does not slow the next one down.
 *
 * usage: bench_analyse [--events N] [--dir DIR] [--timeline-dir DIR] [--keep]
 *   --events N          events of the long recording (default 10000000); the short one has N/4
 *   --dir DIR           where the recordings and reports go (default: a new folder under
 *                       $TMPDIR or /tmp, removed at the end unless --keep)
 *   --timeline-dir DIR  where the timeline measurement writes (default: DIR); a tmpfs such as
 *                       /dev/shm measures the writer without the disk */
#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define US 1000ull

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what, const char *cause)
{
    fprintf(stderr, "bench_analyse: %s: %s\n", what, cause ? cause : strerror(errno));
    exit(1);
}

/* ---- The generator ------------------------------------------------------------------------ */

enum { N_OPS = 48, N_KERNELS = 16, N_LOADER = 6 };

typedef struct gen {
    recording_writer *w;
    ts_event *buf;
    size_t n, cap;
    uint64_t written;
    uint32_t next_id;
    uint32_t op_name[N_OPS], op_child[N_OPS], op_leaf[N_OPS];
    uint32_t kernel[N_KERNELS], nccl, launch, loader[N_LOADER], queue[2], step_thread_name,
        loader_name, alloc;
    uint64_t corr;
} gen;

static uint32_t intern(gen *g, const char *s)
{
    uint32_t id = g->next_id++;
    uint32_t len = (uint32_t)strlen(s);
    char *cause = NULL;
    if (recording_append_strings(g->w, id, 1, &s, &len, &cause) < 0)
        die("strings", cause);
    return id;
}

static ts_event *push(gen *g, uint16_t kind, uint32_t tid, uint32_t device, uint64_t b, uint64_t e)
{
    if (g->n == g->cap) {
        char *cause = NULL;
        if (recording_append_events(g->w, lane_run_of(g->buf, g->n), &cause) < 0)
            die("events", cause);
        g->written += g->n;
        g->n = 0;
    }
    ts_event *ev = &g->buf[g->n++];
    memset(ev, 0, sizeof *ev);
    ev->kind = kind;
    ev->tid = tid;
    ev->device = device;
    ev->begin_ns = b;
    ev->end_ns = e;
    return ev;
}

static void gen_names(gen *g)
{
    g->next_id = 2;
    static const char *const layers[] = {"conv1", "bn1", "conv2", "bn2", "fc1", "fc2"};
    static const char *const types[] = {"Conv2D",  "BatchNorm", "MatMul", "ReLU",
                                        "BiasAdd", "Softmax",   "AddN",   "Cast"};
    char name[160];
    for (int i = 0; i < N_OPS; i++) {
        const char *scope = i < N_OPS / 2 ? "Default/network" : "Gradients/Default/network";
        snprintf(name, sizeof name, "%s/%s/%s-op%d", scope, layers[i % 6], types[i % 8], i);
        g->op_name[i] = intern(g, name);
        snprintf(name, sizeof name, "%s/%s/%s/Cast-op%d", scope, layers[i % 6], types[i % 8],
                 100 + i);
        g->op_child[i] = intern(g, name);
        snprintf(name, sizeof name, "aten::copy_, seq = %d, op_id = %d", i, 1000 + i);
        g->op_leaf[i] = intern(g, name);
    }
    for (int i = 0; i < N_KERNELS; i++) {
        snprintf(name, sizeof name, "void sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_kernel<%d>", i);
        g->kernel[i] = intern(g, name);
    }
    g->nccl = intern(g, "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long)");
    g->launch = intern(g, "cudaLaunchKernel");
    for (int i = 0; i < N_LOADER; i++) {
        snprintf(name, sizeof name, "MapOp_%d/decode_and_augment", i);
        g->loader[i] = intern(g, name);
    }
    g->queue[0] = intern(g, "host_queue");
    g->queue[1] = intern(g, "device_queue");
    g->step_thread_name = intern(g, "train");
    g->loader_name = intern(g, "data-loader");
    g->alloc = intern(g, "activations");
}

/* One step of about 840 events, from t (ns); returns the step's end. */
static uint64_t gen_step(gen *g, uint64_t step, uint64_t t)
{
    const uint64_t t0 = t;
    /* Main thread 1001: 100 top-level ops, each with a child holding a leaf and a launch; the
     * lane gives them in end order: leaf, launch, child, op. */
    uint64_t kt[100], kcorr[100];
    push(g, TS_KIND_STEP_BEGIN, 1001, TS_DEVICE_HOST, t, t)->v0 = step;
    t += 40 * US; /* data fetch */
    push(g, TS_KIND_PHASE, 1001, TS_DEVICE_HOST, t, t)->aux = TS_PHASE_FORWARD_START;
    for (int i = 0; i < 100; i++) {
        int k = (int)((step + (uint64_t)i) % N_OPS);
        uint64_t b = t, cb = b + 2 * US, lb = cb + 1 * US, le = lb + 5 * US, ab = le + 1 * US,
                 ae = ab + 4 * US, ce = ae + 2 * US, e = ce + 3 * US;
        ts_event *ev = push(g, TS_KIND_OP_RANGE, 1001, TS_DEVICE_HOST, lb, le);
        ev->name = g->op_leaf[k];
        ev->aux = 2;
        ev = push(g, TS_KIND_CUDA_API, 1001, TS_DEVICE_HOST, ab, ae);
        ev->name = g->launch;
        ev->corr = kcorr[i] = ++g->corr;
        kt[i] = ae;
        ev = push(g, TS_KIND_OP_RANGE, 1001, TS_DEVICE_HOST, cb, ce);
        ev->name = g->op_child[k];
        ev->aux = 1;
        ev = push(g, TS_KIND_OP_RANGE, 1001, TS_DEVICE_HOST, b, e);
        ev->name = g->op_name[k];
        ev->v0 = 1000000ull * (uint64_t)(k + 1);
        t = e + 2 * US;
    }
    push(g, TS_KIND_PHASE, 1001, TS_DEVICE_HOST, t, t)->aux = TS_PHASE_BACKWARD_END;
    /* Two loader threads: 100 ops each, half with a child. */
    for (uint32_t th = 0; th < 2; th++) {
        uint64_t lt = t0;
        for (int i = 0; i < 100; i++) {
            uint32_t name = g->loader[(i + (int)th) % N_LOADER];
            uint64_t b = lt, e = lt + 30 * US;
            if (i % 2) {
                ts_event *c =
                    push(g, TS_KIND_OP_RANGE, 2001 + th, TS_DEVICE_HOST, b + 5 * US, e - 5 * US);
                c->name = g->loader[(i + 3) % N_LOADER];
                c->aux = 1;
            }
            push(g, TS_KIND_OP_RANGE, 2001 + th, TS_DEVICE_HOST, b, e)->name = name;
            lt = e + 10 * US;
        }
    }
    /* The device, a little later in the file: kernels on streams 7 and 8, one after another on
     * each stream, then communication on stream 9. */
    uint64_t free_at[2] = {0, 0};
    for (int i = 0; i < 100; i++) {
        int s = i % 2;
        uint64_t b = kt[i] + 5 * US;
        if (b < free_at[s])
            b = free_at[s];
        uint64_t e = b + 12 * US;
        free_at[s] = e + 1 * US;
        ts_event *ev = push(g, TS_KIND_KERNEL, 7 + (uint32_t)s, 0, b, e);
        ev->name = g->kernel[i % N_KERNELS];
        ev->type = g->op_name[(step + (uint64_t)i) % N_OPS];
        ev->corr = kcorr[i];
    }
    for (int i = 0; i < 5; i++) {
        ts_event *ev = push(g, TS_KIND_KERNEL, 9, 0, t - (5 - (uint64_t)i) * 60 * US,
                            t - (5 - (uint64_t)i) * 60 * US + 50 * US);
        ev->name = g->nccl;
        ev->flags = TS_EF_COMM;
    }
    for (int i = 0; i < 5; i++) {
        uint64_t a = t0 + (uint64_t)i * 100 * US;
        ts_event *ev = push(g, TS_KIND_DEVMEM_ALLOC, 1001, 0, a, a);
        ev->name = g->alloc;
        ev->v0 = 1 << 20;
        ev->v1 = 0x10000000ull + (uint64_t)i * 0x100000;
        ev = push(g, TS_KIND_DEVMEM_FREE, 1001, 0, a + 50 * US, a + 50 * US);
        ev->v0 = 1 << 20;
        ev->v1 = 0x10000000ull + (uint64_t)i * 0x100000;
    }
    /* Queue samples from the sampler. */
    for (int i = 0; i < 20; i++) {
        uint64_t q = t0 + (uint64_t)i * 100 * US;
        ts_event *ev = push(g, TS_KIND_QUEUE_SAMPLE, 3001, TS_DEVICE_HOST, q, q);
        ev->name = g->queue[i % 2];
        ev->aux = i % 2 ? TS_QUEUE_DEVICE : TS_QUEUE_HOST;
        ev->v0 = (step + (uint64_t)i) % 9;
        ev->v1 = 8;
    }
    t += 20 * US;
    push(g, TS_KIND_STEP_END, 1001, TS_DEVICE_HOST, t, t)->v0 = step;
    /* CPU and memory samples every 20 steps (about every 30 ms). */
    if (step % 20 == 0) {
        ts_event m = {.kind = TS_KIND_CPU_MACHINE,
                      .device = TS_DEVICE_HOST,
                      .begin_ns = t0,
                      .end_ns = t,
                      .corr = 300,
                      .aux = 3 << 16};
        uint16_t share[TS_CPU__COUNT] = {
            [TS_CPU_USER] = 4000, [TS_CPU_SYSTEM] = 800, [TS_CPU_IDLE] = 5200};
        ts_cpu_pack(&m, share);
        *push(g, 0, 0, 0, 0, 0) = m;
        ts_event *p = push(g, TS_KIND_CPU_PROCESS, 3001, TS_DEVICE_HOST, t0, t);
        p->v0 = (t - t0) / 2;
        p->v1 = (t - t0) / 10;
        p->aux = 4;
        p->corr = 8;
        for (uint32_t th = 0; th < 3; th++) {
            p = push(g, TS_KIND_CPU_THREAD, th ? 2000 + th : 1001, TS_DEVICE_HOST, t0, t);
            p->name = th ? g->loader_name : g->step_thread_name;
            p->v0 = (t - t0) / 3;
        }
        p = push(g, TS_KIND_HOST_MEMORY, 3001, TS_DEVICE_HOST, t, t);
        p->v0 = (512ull << 20) + step * 4096;
        p->v1 = p->v0;
    }
    return t + 10 * US;
}

/* A recording of about `events` events in dir/recording; returns the count. */
static uint64_t generate(const char *run, uint64_t events)
{
    char *rec;
    if (asprintf(&rec, "%s/%s", run, TS_RECORDING_DIR) < 0)
        die("generate", "out of memory");
    recording_meta meta = {.major = TS_RECORDING_MAJOR,
                           .minor = TS_RECORDING_MINOR,
                           .pid = 4242,
                           .start_ns = 1000000000ull};
    strcpy(meta.process, "bench");
    strcpy(meta.clock, "tsc");
    gen g = {.cap = 8192};
    char *cause = NULL;
    if (recording_writer_open(rec, &meta, &g.w, &cause) < 0)
        die(rec, cause);
    g.buf = malloc(g.cap * sizeof *g.buf);
    if (!g.buf)
        die("generate", "out of memory");
    gen_names(&g);
    ts_event *tn =
        push(&g, TS_KIND_THREAD_NAME, 1001, TS_DEVICE_HOST, meta.start_ns, meta.start_ns);
    tn->name = g.step_thread_name;
    for (uint32_t th = 0; th < 2; th++) {
        tn = push(&g, TS_KIND_THREAD_NAME, 2001 + th, TS_DEVICE_HOST, meta.start_ns, meta.start_ns);
        tn->name = g.loader_name;
    }
    uint64_t t = meta.start_ns + 1000 * US;
    for (uint64_t step = 1; g.written + g.n < events; step++)
        t = gen_step(&g, step, t);
    if (g.n && recording_append_events(g.w, lane_run_of(g.buf, g.n), &cause) < 0)
        die("events", cause);
    g.written += g.n;
    if (recording_writer_close(g.w, &cause) < 0)
        die("close", cause);
    free(g.buf);
    free(rec);
    return g.written;
}

/* ---- Measurements, each in a child ------------------------------------------------------- */

typedef struct result {
    double seconds; /* the measured part */
    double wall;    /* the whole run */
    uint64_t events, bytes;
    long max_rss_kb;
} result;

/* Time spent drawing the rows the analysis hands over (steps, memory, CPU), which belongs to
 * the timeline's time although it happens inside analysis_feed. */
static double sink_spent;

static void sink_step(void *ctx, const step_row *row)
{
    double t0 = now();
    timeline_step(ctx, row);
    sink_spent += now() - t0;
}

static void sink_mem(void *ctx, const memory_row *row)
{
    double t0 = now();
    timeline_memory(ctx, row);
    sink_spent += now() - t0;
}

static void sink_cpu(void *ctx, const cpu_row *row)
{
    double t0 = now();
    timeline_cpu(ctx, row);
    sink_spent += now() - t0;
}

/* mode 0: statistics; 1: timeline (into dir); 2: the whole report. */
static void measure(int mode, const char *run, const char *dir, result *res)
{
    double w0 = now();
    char *cause = NULL;
    if (mode == 2) {
        report_options o;
        report_options_init(&o);
        if (report_write(run, &o, &cause) < 0)
            die("report", cause);
        res->seconds = now() - w0;
        res->wall = res->seconds;
        return;
    }
    recording_reader *rd;
    if (recording_reader_open(run, &rd, &cause) < 0)
        die(run, cause);
    timeline *tl = NULL;
    analysis_sink sink = {0};
    analysis_config cfg;
    analysis_config_init(&cfg);
    int dfd = -1;
    analysis *a;
    if (mode == 1) {
        mkdir(dir, 0755);
        dfd = open(dir, O_RDONLY | O_DIRECTORY);
        if (dfd < 0)
            die(dir, NULL);
        /* The analysis resolves the names; the timeline draws the step, memory and CPU rows. */
        sink.step = sink_step;
        sink.memory = sink_mem;
        sink.cpu = sink_cpu;
        cfg.sink = &sink;
    }
    a = analysis_create(&cfg, analysis_names_recording, rd);
    if (mode == 1) {
        timeline_config tc = {.dirfd = dfd,
                              .limit_bytes = UINT64_MAX,
                              .origin_ns = 1000000000ull,
                              .process = "bench",
                              .os_pid = 4242};
        tl = timeline_create(&tc, a);
        sink.ctx = tl;
    }
    double spent = 0;
    const ts_event *ev;
    size_t n;
    for (;;) {
        int got = recording_reader_next(rd, &ev, &n, &cause);
        if (got < 0)
            die("read", cause);
        if (!got)
            break;
        res->events += n;
        if (mode == 0) {
            double t0 = now();
            analysis_feed(a, ev, n);
            spent += now() - t0;
        } else {
            analysis_feed(a, ev, n); /* names, thread names, the rows for the timeline */
            double t0 = now();
            timeline_feed(tl, ev, n);
            spent += now() - t0;
        }
    }
    double t0 = now();
    analysis_finish(a); /* for the timeline: the last rows, counted through the sink */
    if (mode == 0)
        spent += now() - t0;
    if (mode == 1) {
        t0 = now();
        if (timeline_finish(tl, &cause) < 0)
            die("timeline", cause);
        spent += now() - t0;
        timeline_stats st;
        timeline_stats_of(tl, &st);
        res->bytes = st.bytes;
        timeline_destroy(tl);
        close(dfd);
    }
    analysis_destroy(a);
    recording_reader_close(rd);
    res->seconds = spent + sink_spent;
    res->wall = now() - w0;
}

static result in_child(int mode, const char *run, const char *dir)
{
    int fds[2];
    if (pipe(fds) < 0)
        die("pipe", NULL);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        die("fork", NULL);
    if (pid == 0) {
        close(fds[0]);
        result r = {0};
        measure(mode, run, dir, &r);
        if (write(fds[1], &r, sizeof r) != (ssize_t)sizeof r)
            _exit(1);
        _exit(0);
    }
    close(fds[1]);
    result r = {0};
    ssize_t got = read(fds[0], &r, sizeof r);
    close(fds[0]);
    int st;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) != pid || !WIFEXITED(st) || WEXITSTATUS(st) || got != sizeof r)
        die("measurement", "the child failed");
    r.max_rss_kb = ru.ru_maxrss;
    return r;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

int main(int argc, char **argv)
{
    uint64_t events = 10000000;
    const char *dir = NULL, *tl_dir = NULL;
    int keep = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--events") && i + 1 < argc) {
            events = strtoull(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--dir") && i + 1 < argc) {
            dir = argv[++i];
            if (strlen(dir) > 2000) {
                fputs("bench_analyse: --dir is too long\n", stderr);
                return 2;
            }
        } else if (!strcmp(argv[i], "--timeline-dir") && i + 1 < argc) {
            tl_dir = argv[++i];
            if (strlen(tl_dir) > 2000) {
                fputs("bench_analyse: --timeline-dir is too long\n", stderr);
                return 2;
            }
        } else if (!strcmp(argv[i], "--keep")) {
            keep = 1;
        } else {
            fputs("usage: bench_analyse [--events N] [--dir DIR] [--timeline-dir DIR] [--keep]\n",
                  stderr);
            return 2;
        }
    }
    char tmpl[2048];
    if (!dir) {
        const char *t = getenv("TMPDIR");
        snprintf(tmpl, sizeof tmpl, "%s/bench-analyse-XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(tmpl))
            die(tmpl, NULL);
        dir = tmpl;
    } else {
        keep = 1;
    }

    const uint64_t sizes[2] = {events / 4, events};
    const char *names[2] = {"short", "long"};
    printf("bench_analyse: recordings of %" PRIu64 " and %" PRIu64 " events in %s\n", sizes[0],
           sizes[1], dir);
    char run[2][4200], tl[2][4300];
    uint64_t made[2];
    for (int i = 0; i < 2; i++) {
        snprintf(run[i], sizeof run[i], "%s/%s", dir, names[i]);
        snprintf(tl[i], sizeof tl[i], "%s/%s-timeline-%ld", tl_dir ? tl_dir : dir, names[i],
                 (long)getpid());
        double t0 = now();
        made[i] = generate(run[i], sizes[i]);
        printf("  generated %-5s %10" PRIu64 " events in %.2f s\n", names[i], made[i], now() - t0);
    }

    printf("\n%-6s %-9s %12s %10s %14s %12s %10s\n", "length", "measure", "events", "seconds",
           "rate", "wall s", "peak RSS");
    for (int i = 0; i < 2; i++) {
        sync();
        result s = in_child(0, run[i], NULL);
        printf("%-6s %-9s %12" PRIu64 " %10.3f %9.1f M/s %12.3f %7.1f MiB\n", names[i], "stats",
               s.events, s.seconds, (double)s.events / s.seconds / 1e6, s.wall,
               (double)s.max_rss_kb / 1024);
        sync();
        result t = in_child(1, run[i], tl[i]);
        printf("%-6s %-9s %12" PRIu64 " %10.3f %8.1f MB/s %12.3f %7.1f MiB  (%.1f MB of "
               "timeline)\n",
               names[i], "timeline", t.events, t.seconds, (double)t.bytes / t.seconds / 1e6, t.wall,
               (double)t.max_rss_kb / 1024, (double)t.bytes / 1e6);
        nftw(tl[i], rm_one, 16, FTW_DEPTH | FTW_PHYS);
        sync();
        result r = in_child(2, run[i], NULL);
        printf("%-6s %-9s %12" PRIu64 " %10.3f %9.1f M/s %12.3f %7.1f MiB\n", names[i], "report",
               made[i], r.seconds, (double)made[i] / r.seconds / 1e6, r.wall,
               (double)r.max_rss_kb / 1024);
    }
    if (!keep)
        nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}
