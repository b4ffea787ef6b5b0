/* advisor: the MindSpore Profiler's tuning cases and its CPU and data-queue advice, as
 * rules over the analysis's results. Each suggestion states the numbers that triggered it and
 * carries a weight, the share of step time at stake, that orders them:
 *
 *   ADVICE_LOST           profiler lost events               weight 1 (first: everything else is
 *                                                            partial)
 *   ADVICE_STEP_INTERVAL  interval > INTERVAL_SHARE of step   interval / step; cites the queue
 *                                                            findings
 *   ADVICE_OPERATORS      FP/BP >= FPBP_SHARE of step, and    (FP/BP - gaps) / step x the top
 *                         operators busy >= FPBP_BUSY of it   types' share of operator time
 *   ADVICE_GAPS           gaps > GAP_SHARE of FP/BP (gaps     gaps / step
 *                         exclude communication in flight)
 *   ADVICE_COMM_WAIT      communication wait > COMM_WAIT_     wait / step
 *                         SHARE of step
 *   ADVICE_TAIL           tail > TAIL_SHARE of step, and,     tail / step
 *                         when the wait was advised, tail
 *                         less the wait > TAIL_SHARE too
 *   ADVICE_QUEUE          a bottleneck verdict not cited      interval / step
 *                         by the step-interval advice
 *   ADVICE_CPU            user < CPU_USER_LOW % with a data   interval / step
 *                         bottleneck: more workers (never
 *                         advised, by any rule, when the
 *                         machine idles < CPU_IDLE_LOW %)
 *                         the program's own system time >     the program's system share
 *                         CPU_SYSTEM_HIGH % of a CPU and of
 *                         its CPU time, and context switches
 *                         > CTX_PER_CPU_HIGH per CPU per
 *                         second: fewer threads
 *   ADVICE_GPU_DATA,      the step on the device (steps with  that idle part / the steps' time
 *   ADVICE_GPU_HOST,      device work): the device idle for
 *   ADVICE_GPU_SYNC       data, with nothing queued while the
 *                         host runs (launch-bound), or around
 *                         synchronizations, > GPU_IDLE_SHARE
 *                         of the step
 *
 * A PyTorch program (aten operators or DataLoader waits) is told PyTorch's knobs; the types of
 * its own labels (record_function) are never named as operator types to optimize.
 *
 * Step shares use the averages over finalized steps (interval + FP/BP + tail = the average step).
 * The operator rule needs operator or kernel statistics to name anything. Text is plain ASCII
 * (names are quoted, with '"' turned into '\'' and bytes outside printable ASCII into '?'). */
#include "analysis_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INTERVAL_SHARE   0.15   /* step interval above this share of step time: data pipeline */
#define FPBP_SHARE       0.50   /* FP/BP at least this share of step time ... */
#define FPBP_BUSY        0.50   /* ... and operators busy (not gaps) this share of FP/BP */
#define GAP_SHARE        0.10   /* gaps between operators above this share of FP/BP */
#define TAIL_SHARE       0.15   /* step tail above this share: communication and update */
#define COMM_WAIT_SHARE  0.10   /* waiting for communication above this share of step time */
#define CPU_USER_LOW     50.0   /* machine user % below this, with a data bottleneck */
#define CPU_IDLE_LOW     10.0   /* machine idle % below this: no CPU for more data workers */
#define CPU_SYSTEM_HIGH  20.0   /* the program's system % (of a CPU, of its CPU time) above ... */
#define CTX_PER_CPU_HIGH 5000.0 /* ... with more context switches per second per CPU */
#define GPU_IDLE_SHARE   0.10   /* the device idle for one cause above this share of the step */
#define TOP_TYPES        3      /* operator types named */
#define TOP_GAPS         3      /* gaps named */
#define MAX_FINDINGS     16     /* queue findings read */
#define NAME_TEXT        40     /* bytes of a name shown before "..." */
#define MAX_CANDIDATES   (12 + MAX_FINDINGS)

typedef struct buf {
    char *p;
    size_t cap, len;
} buf;

/* Appends, truncating at the buffer's end (always NUL-terminated). */
static void put(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(buf *b, const char *fmt, ...)
{
    if (b->len + 1 >= b->cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        b->len = b->len + (size_t)n < b->cap ? b->len + (size_t)n : b->cap - 1;
}

/* Plain ASCII: '"' becomes '\'', other bytes outside printable ASCII become '?'. */
static void put_ascii(buf *b, const char *s, size_t len, size_t max)
{
    size_t i = 0;
    for (; i < len && i < max && b->len + 1 < b->cap; i++) {
        unsigned char c = (unsigned char)s[i];
        b->p[b->len++] = c == '"' ? '\'' : (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    b->p[b->len] = 0;
    if (i < len)
        put(b, "...");
}

static void put_name(buf *b, const analysis *a, uint32_t id)
{
    uint32_t len = 0;
    const char *s = analysis_name(a, id, &len);
    put(b, "\"");
    if (len)
        put_ascii(b, s, len, NAME_TEXT);
    else
        put(b, "?");
    put(b, "\"");
}

static void put_dur(buf *b, double ns)
{
    if (ns >= 1e9)
        put(b, "%.2f s", ns / 1e9);
    else if (ns >= 1e6)
        put(b, "%.2f ms", ns / 1e6);
    else
        put(b, "%.1f us", ns / 1e3);
}

static double pct(double part, double whole)
{
    return whole > 0 ? 100.0 * part / whole : 0.0;
}

typedef struct candidate {
    advice adv;
    size_t seq; /* keeps equal weights in the order found */
} candidate;

typedef struct ctx {
    const analysis *a;
    candidate c[MAX_CANDIDATES];
    candidate spare; /* written to, and dropped, when c is full */
    size_t n;
    step_summary s;
    double step_ns; /* the average step (its split adds up to it) */
    double interval_share, fpbp_share, tail_share;
    int have_steps;
    double cpu_idle; /* the machine's average idle %, when sampled; cpu_full: below CPU_IDLE_LOW */
    int cpu_full;
    int pytorch; /* a PyTorch program (aten operators, DataLoader waits): advice in its knobs */
} ctx;

/* The knobs a suggestion names: PyTorch's for a PyTorch program, else the MindSpore Profiler's
 * with PyTorch's beside them. */
static const char *workers_knob(const ctx *x)
{
    return x->pytorch ? "DataLoader num_workers" : "num_parallel_workers, DataLoader num_workers";
}

static const char *threads_knob(const ctx *x)
{
    return x->pytorch ? "torch.set_num_threads, OMP_NUM_THREADS, fewer DataLoader num_workers"
                      : "num_parallel_workers, OMP_NUM_THREADS, intra-op threads";
}

/* PyTorch's: aten operators, or DataLoader waits (termsight.torch names both). */
static int is_pytorch(const analysis *a)
{
    op_query q = {.by_type = 1, .sort = OP_SORT_TOTAL};
    op_stat *types = NULL;
    size_t n = analysis_ops(a, &q, &types);
    int yes = 0;
    for (size_t i = 0; i < n && !yes; i++) {
        uint32_t len = 0;
        const char *t = analysis_name(a, types[i].name, &len);
        yes = t &&
              ((len > 6 && !memcmp(t, "aten::", 6)) || (len == 10 && !memcmp(t, "DataLoader", 10)));
    }
    free(types);
    return yes;
}

/* A new suggestion; its text is written through the returned buffer. */
static buf add(ctx *x, uint32_t kind, double weight, buf *title)
{
    candidate *c = x->n < MAX_CANDIDATES ? &x->c[x->n] : &x->spare;
    memset(c, 0, sizeof *c);
    c->seq = x->n < MAX_CANDIDATES ? x->n++ : x->n;
    c->adv.kind = kind;
    c->adv.weight = weight < 0 ? 0 : weight > 1 ? 1 : weight;
    *title = (buf){c->adv.title, sizeof c->adv.title, 0};
    return (buf){c->adv.text, sizeof c->adv.text, 0};
}

static int is_bottleneck(uint32_t verdict)
{
    return verdict == QUEUE_VERDICT_DATA_PROCESSING || verdict == QUEUE_VERDICT_TRANSFER ||
           verdict == QUEUE_VERDICT_OPERATOR;
}

/* One queue finding as a sentence: its text and suggestion, in ASCII. */
/* A finding and its suggestion; with the machine's CPUs full, the suggestion (more workers)
 * gives way to what can help then. */
static void put_finding(const ctx *x, buf *b, const queue_finding *f)
{
    size_t at = b->len;
    put_ascii(b, f->text, strnlen(f->text, sizeof f->text), sizeof f->text);
    if (b->len > at && b->p[at] >= 'a' && b->p[at] <= 'z')
        b->p[at] = (char)(b->p[at] - 'a' + 'A'); /* it starts a sentence */
    if (f->suggestion[0] && !x->cpu_full) {
        put(b, "; ");
        put_ascii(b, f->suggestion, strnlen(f->suggestion, sizeof f->suggestion),
                  sizeof f->suggestion);
    }
    put(b, ".");
}

/* With the machine's CPUs full, more data workers would share the same CPUs. */
static void put_cpu_full(const ctx *x, buf *b)
{
    put(b,
        " The machine's CPUs had no idle time to spare (%.1f%% idle on average): more data "
        "workers (num_workers) would only share them. Make each sample cheaper (decode or "
        "augment once and cache, a faster storage format), move augmentation to the device, or "
        "give the job more CPUs.",
        x->cpu_idle);
}

static void rule_lost(ctx *x)
{
    const analysis_totals *t = analysis_totals_of(x->a);
    if (!t->lost)
        return;
    static const char *const reason[] = {
        [TS_LOST_LANE_FULL] = "a lane was full",
        [TS_LOST_NO_LANE] = "every lane was taken",
        [TS_LOST_WRITE] = "the recording could not be written",
        [TS_LOST_DEVICE] = "the device tracer dropped records",
    };
    buf title, b = add(x, ADVICE_LOST, 1.0, &title);
    put(&title, "Events lost: %llu, results are partial", (unsigned long long)t->lost);
    put(&b, "The profiler lost %llu events (%.1f%% of %llu recorded and lost):",
        (unsigned long long)t->lost, pct((double)t->lost, (double)(t->events + t->lost)),
        (unsigned long long)(t->events + t->lost));
    const char *sep = " ";
    for (int r = TS_LOST_LANE_FULL; r <= TS_LOST_DEVICE; r++) {
        if (!t->lost_by_reason[r])
            continue;
        put(&b, "%s%llu because %s", sep, (unsigned long long)t->lost_by_reason[r], reason[r]);
        sep = ", ";
    }
    put(&b, ". Statistics and steps miss what was lost.");
    uint64_t known = 0;
    for (int r = TS_LOST_LANE_FULL; r <= TS_LOST_DEVICE; r++)
        known += t->lost_by_reason[r];
    /* Full lanes are the common cause, and the one to suggest when no reason was given. */
    if (t->lost_by_reason[TS_LOST_LANE_FULL] || known < t->lost)
        put(&b, " Raise the lane size (TERMSIGHT_LANE_EVENTS, a power of two) so bursts fit "
                "between drains.");
    if (t->lost_by_reason[TS_LOST_NO_LANE])
        put(&b, " Raise TERMSIGHT_MAX_THREADS: more threads wrote events than there were lanes.");
    if (t->lost_by_reason[TS_LOST_WRITE])
        put(&b, " Check the free space and permissions of the output folder.");
    if (t->lost_by_reason[TS_LOST_DEVICE])
        put(&b, " The device tracer's buffers overflowed: record fewer kernels or shorter "
                "windows.");
}

/* Returns 1 when it fired. Cites the bottleneck findings that fit; marks them cited. */
static int rule_interval(ctx *x, const queue_finding *qf, size_t nq, int *cited)
{
    if (!x->have_steps || x->interval_share <= INTERVAL_SHARE)
        return 0;
    buf title, b = add(x, ADVICE_STEP_INTERVAL, x->interval_share, &title);
    put(&title, "Long step interval: %.1f%% of step time waits for data",
        100.0 * x->interval_share);
    put(&b, "The step interval (previous step end to forward start) averages ");
    put_dur(&b, x->s.avg_interval_ns);
    put(&b, ", %.1f%% of the ", 100.0 * x->interval_share);
    put_dur(&b, x->step_ns);
    put(&b, " step (%llu steps, more than %.0f%%): the training waits for data.",
        (unsigned long long)x->s.steps, 100.0 * INTERVAL_SHARE);
    int any = 0, bottleneck = 0;
    for (size_t i = 0; i < nq; i++) {
        if (!is_bottleneck(qf[i].verdict))
            continue;
        bottleneck = 1;
        char tmp[sizeof qf[i].text + sizeof qf[i].suggestion + 16];
        buf t = {tmp, sizeof tmp, 0};
        tmp[0] = 0;
        put_finding(x, &t, &qf[i]);
        /* Only whole findings; the others become advice of their own. */
        if (b.len + 1 + t.len + 1 >= b.cap)
            continue;
        put(&b, " %s", tmp);
        cited[i] = 1;
        any = 1;
    }
    if (!any && !bottleneck) {
        if (nq)
            put(&b, " The data queues show no bottleneck; look at the data fetch on the training "
                    "thread itself (loading, decoding, host-to-device copies).");
        else if (x->cpu_full)
            put(&b, " No data queues were recorded: register the pipeline's queues "
                    "(termsight_queue_register) to find the slow stage.");
        else
            put(&b,
                " No data queues were recorded: register the pipeline's queues "
                "(termsight_queue_register) to find the slow stage; meanwhile raise the "
                "pipeline's parallelism (%s) and prefetching.",
                workers_knob(x));
    }
    if (x->cpu_full)
        put_cpu_full(x, &b);
    return 1;
}

static void rule_operators(ctx *x)
{
    if (!x->have_steps || x->fpbp_share < FPBP_SHARE || x->s.avg_fpbp_ns <= 0)
        return;
    double busy = x->s.avg_fpbp_ns - x->s.avg_gap_ns;
    if (busy < 0)
        busy = 0;
    double busy_frac = busy / x->s.avg_fpbp_ns;
    if (busy_frac < FPBP_BUSY)
        return;

    /* Data fetches recorded as ranges (termsight.torch's DataLoader wait) are waits for data,
     * which the step-interval and queue advice cover: never operators to optimize. */
    op_query q = {.by_type = 1, .sort = OP_SORT_SELF, .limit = TOP_TYPES + 4};
    op_stat *ops = NULL;
    size_t nops = analysis_ops(x->a, &q, &ops), kept = 0;
    for (size_t i = 0; i < nops; i++) {
        uint32_t len = 0;
        const char *name = analysis_name(x->a, ops[i].name, &len);
        if (!(name && opname_is_fetch(name, len)) && !opname_is_label(name, len) &&
            kept < TOP_TYPES)
            ops[kept++] = ops[i];
    }
    nops = kept;
    kernel_stat *ks = NULL;
    size_t nks = nops ? 0 : analysis_kernels(x->a, 0, &ks);
    double kernel_total = 0;
    for (size_t i = 0; i < nks; i++)
        kernel_total += (double)ks[i].total_ns;
    if (!nops && (!nks || kernel_total <= 0)) {
        free(ops);
        free(ks);
        return;
    }
    double top = 0;
    size_t shown = nops ? nops : (nks < TOP_TYPES ? nks : TOP_TYPES);
    for (size_t i = 0; i < shown; i++)
        top += nops ? ops[i].share : (double)ks[i].total_ns / kernel_total;

    buf title, b = add(x, ADVICE_OPERATORS, busy / x->step_ns * top, &title);
    put(&title, "Long forward/backward: %.1f%% of step time in operators", pct(busy, x->step_ns));
    put(&b, "Forward and backward propagation average ");
    put_dur(&b, x->s.avg_fpbp_ns);
    put(&b, ", %.1f%% of the ", 100.0 * x->fpbp_share);
    put_dur(&b, x->step_ns);
    put(&b, " step, with operators busy %.1f%% of it.", 100.0 * busy_frac);
    if (nops) {
        put(&b, " Operator types by self time:");
        for (size_t i = 0; i < nops; i++) {
            put(&b, "%s ", i ? "," : "");
            put_name(&b, x->a, ops[i].name);
            put(&b, " %.1f%% (", 100.0 * ops[i].share);
            put_dur(&b, (double)ops[i].self_ns);
            put(&b, " over %llu calls)", (unsigned long long)ops[i].count);
        }
        put(&b, ". Look at the slowest operators of these types for ones to optimize, fuse or "
                "run in lower precision.");
    } else {
        put(&b, " Kernels by total time:");
        for (size_t i = 0; i < shown; i++) {
            put(&b, "%s ", i ? "," : "");
            put_name(&b, x->a, ks[i].name);
            put(&b, " %.1f%% (", pct((double)ks[i].total_ns, kernel_total));
            put_dur(&b, (double)ks[i].total_ns);
            put(&b, " over %llu launches)", (unsigned long long)ks[i].count);
        }
        put(&b, ". Look at these kernels and the operators they run under.");
    }
    free(ops);
    free(ks);
}

static void rule_gaps(ctx *x)
{
    if (!x->have_steps || x->s.avg_fpbp_ns <= 0 || x->s.avg_gap_ns / x->s.avg_fpbp_ns <= GAP_SHARE)
        return;
    buf title, b = add(x, ADVICE_GAPS, x->s.avg_gap_ns / x->step_ns, &title);
    put(&title, "Gaps between operators: %.1f%% of forward/backward idle",
        pct(x->s.avg_gap_ns, x->s.avg_fpbp_ns));
    put(&b, "Idle gaps between operators on the training thread average ");
    put_dur(&b, x->s.avg_gap_ns);
    put(&b, " per step, %.1f%% of forward/backward (", pct(x->s.avg_gap_ns, x->s.avg_fpbp_ns));
    put_dur(&b, x->s.avg_fpbp_ns);
    put(&b, ").");
    op_gap g[TOP_GAPS];
    size_t ng = analysis_gaps(x->a, g, TOP_GAPS);
    for (size_t i = 0; i < ng; i++) {
        put(&b, "%s ", i ? ";" : " Largest:");
        put_dur(&b, (double)g[i].gap_ns);
        put(&b, " in step %llu on thread %u", (unsigned long long)g[i].step, g[i].tid);
        uint32_t tn = analysis_thread_name(x->a, g[i].tid);
        if (tn) {
            put(&b, " (");
            put_name(&b, x->a, tn);
            put(&b, ")");
        }
        put(&b, " between ");
        put_name(&b, x->a, g[i].before);
        put(&b, " and ");
        put_name(&b, x->a, g[i].after);
    }
    put(&b,
        "%sFind what runs between them in the timeline (synchronization, host-side work, "
        "Python overhead) and take it off the critical path.",
        ng ? ". " : " ");
}

/* Time the step waits with communication in flight and nothing computing: on a healthy rank
 * the collective is short or overlapped, so a long wait is nearly always another rank arriving
 * late (a straggler), which only the job's ranks side by side can name. */
static void rule_comm_wait(ctx *x)
{
    if (!x->have_steps || x->s.avg_comm_wait_ns / x->step_ns <= COMM_WAIT_SHARE)
        return;
    double share = x->s.avg_comm_wait_ns / x->step_ns;
    buf title, b = add(x, ADVICE_COMM_WAIT, share, &title);
    put(&title, "Waiting for communication: %.1f%% of step time", 100.0 * share);
    put(&b, "The step waits ");
    put_dur(&b, x->s.avg_comm_wait_ns);
    put(&b, " per step (%.1f%% of the ", 100.0 * share);
    put_dur(&b, x->step_ns);
    put(&b, " step) with communication in flight and nothing computing (communication averages ");
    put_dur(&b, x->s.avg_comm_ns);
    put(&b, " per step). This is not idle time between operators: the step is blocked in a "
            "collective, most likely waiting for another rank that is slower (its data, its "
            "compute, its host). Compare the ranks in the job report: the slow rank is the one "
            "that waits least. If every rank waits alike, the communication itself is slow: "
            "overlap it with backward (gradient bucketing), communicate less, or check the "
            "network.");
}

static void rule_tail(ctx *x)
{
    if (!x->have_steps || x->tail_share <= TAIL_SHARE)
        return;
    buf title, b = add(x, ADVICE_TAIL, x->tail_share, &title);
    put(&title, "Long step tail: %.1f%% of step time after backward", 100.0 * x->tail_share);
    put(&b, "The step tail (backward end to step end, less any communication wait) averages ");
    put_dur(&b, x->s.avg_tail_ns);
    put(&b, ", %.1f%% of the ", 100.0 * x->tail_share);
    put_dur(&b, x->step_ns);
    put(&b, " step (more than %.0f%%): gradient communication and the parameter update.",
        100.0 * TAIL_SHARE);
    if (x->s.avg_comm_ns > 0) {
        put(&b, " Communication averages ");
        put_dur(&b, x->s.avg_comm_ns);
        put(&b, " per step, of which ");
        put_dur(&b, x->s.avg_pure_comm_ns);
        put(&b,
            " (%.1f%%) is not overlapped by computation. Overlap the gradient all-reduce "
            "with the backward pass (gradient bucketing), communicate less (larger batches "
            "per step, compression), and check the optimizer's update.",
            pct(x->s.avg_pure_comm_ns, x->s.avg_comm_ns));
    } else {
        put(&b, " No communication was recorded in the steps, so the tail is the parameter "
                "update: use a fused optimizer and move other work out of the step end.");
    }
}

/* The step on the device: where the device idles for one cause, the cause and what would help.
 * The shares are of the steps with device work (their split adds up to their time). */
static void rule_device(ctx *x)
{
    const step_summary *s = &x->s;
    double total = s->avg_gpu_total_ns;
    if (!s->gpu_steps || total <= 0)
        return;
    static const struct {
        uint32_t kind;
        const char *cause, *why, *fix, *fix_pytorch;
    } causes[] = {
        {ADVICE_GPU_DATA, "waiting for data",
         "the step's thread waits for its next batch while nothing is queued on the device",
         "Prepare data ahead of the step: more data workers, pinned host memory with "
         "asynchronous copies, prefetching to the device.",
         "Prepare data ahead of the step: more DataLoader workers (num_workers), "
         "pin_memory=True with .to(device, non_blocking=True), a larger prefetch_factor."},
        {ADVICE_GPU_HOST, "waiting for the host: launch-bound",
         "nothing is queued on the device while the host runs: the host launches work more "
         "slowly than the device runs it",
         "Launch fewer, larger kernels: fuse small operators, capture the step in a CUDA graph, "
         "use larger batches, and move host-side work out of the step.",
         "Launch fewer, larger kernels: torch.compile to fuse small operators, CUDA graphs "
         "(torch.cuda.graphs, mode=\"reduce-overhead\"), larger batches, fused optimizers "
         "(foreach/fused=True), and Python work (logging, metrics) out of the step."},
        {ADVICE_GPU_SYNC, "around synchronizations",
         "the host waits for the device (a synchronization, a copy to the host) and the device "
         "then waits while the host queues work again",
         "Synchronize less often: keep values on the device and read them every N steps.",
         "Synchronize less often: loss.item(), .cpu(), .tolist() and torch.cuda.synchronize() "
         "each wait for the device; accumulate the loss on the device and read it every N "
         "steps."},
    };
    const double idle[] = {s->avg_gpu_idle_data_ns, s->avg_gpu_idle_host_ns,
                           s->avg_gpu_idle_sync_ns};
    for (size_t i = 0; i < sizeof causes / sizeof causes[0]; i++) {
        double share = idle[i] / total;
        if (share <= GPU_IDLE_SHARE)
            continue;
        buf title, b = add(x, causes[i].kind, share, &title);
        put(&title, "GPU idle %.1f%% of each step %s", 100.0 * share, causes[i].cause);
        put(&b, "On the device (GPU %u, %llu steps with device work) the step averages ",
            s->gpu_device, (unsigned long long)s->gpu_steps);
        put_dur(&b, total);
        put(&b, ": busy ");
        put_dur(&b, s->avg_gpu_busy_ns);
        put(&b, " (%.1f%%), idle ", pct(s->avg_gpu_busy_ns, total));
        put_dur(&b, idle[i]);
        put(&b, " (%.1f%%) because %s. ", 100.0 * share, causes[i].why);
        put(&b, "%s", x->pytorch ? causes[i].fix_pytorch : causes[i].fix);
        put(&b, " At best the step gets %.1f%% shorter.", 100.0 * share);
    }
}

static void rule_queues(ctx *x, const queue_finding *qf, size_t nq, const int *cited)
{
    for (size_t i = 0; i < nq; i++) {
        if (!is_bottleneck(qf[i].verdict) || cited[i])
            continue;
        buf title, b = add(x, ADVICE_QUEUE, x->interval_share, &title);
        put(&title, "Data queue bottleneck: %s",
            qf[i].verdict == QUEUE_VERDICT_TRANSFER   ? "host-to-device transfer"
            : qf[i].verdict == QUEUE_VERDICT_OPERATOR ? "a pipeline stage"
                                                      : "data processing");
        put_finding(x, &b, &qf[i]);
        if (x->have_steps) {
            put(&b, " The step interval is %.1f%% of step time (", 100.0 * x->interval_share);
            put_dur(&b, x->s.avg_interval_ns);
            put(&b, " per step).");
        }
        if (x->cpu_full)
            put_cpu_full(x, &b);
    }
}

static void rule_cpu(ctx *x, int data_bottleneck)
{
    cpu_summary c = analysis_cpu(x->a);
    if (!c.samples)
        return;
    double user = c.machine[TS_CPU_USER], sys = c.machine[TS_CPU_SYSTEM];
    if (user < CPU_USER_LOW && data_bottleneck) {
        buf title, b = add(x, ADVICE_CPU, x->interval_share, &title);
        put(&title, "CPU has room: %.1f%% user time while data is the bottleneck", user);
        put(&b, "Machine CPU user time averaged %.1f%% (system %.1f%%, idle %.1f%%", user, sys,
            c.machine[TS_CPU_IDLE]);
        if (c.cpus)
            put(&b, ", %u CPUs", c.cpus);
        put(&b, ") over %llu samples while the data pipeline is the bottleneck",
            (unsigned long long)c.samples);
        if (x->have_steps)
            put(&b, " (step interval %.1f%% of step time)", 100.0 * x->interval_share);
        put(&b, ": below %.0f%%, the CPUs have room. Give the data pipeline more workers (%s).",
            CPU_USER_LOW, workers_knob(x));
    }
    /* Threads contending: judged by the program's own system time (the machine's may be
     * another program's), with the machine's context switches as the sign of contention. */
    double per_cpu = c.context_switches_per_s / (c.cpus ? c.cpus : 1);
    double psys = c.process_system, ptotal = c.process_user + c.process_system;
    if (psys > CPU_SYSTEM_HIGH && ptotal > 0 && psys / ptotal > CPU_SYSTEM_HIGH / 100.0 &&
        per_cpu > CTX_PER_CPU_HIGH) {
        buf title, b = add(x, ADVICE_CPU, psys / ptotal, &title);
        put(&title, "Too many threads: %.1f%% system time, %.0f context switches/s", psys,
            c.context_switches_per_s);
        put(&b,
            "The program spent %.1f%% of a CPU in system time (user %.1f%%: %.0f%% of its CPU "
            "time in the kernel) while the machine made %.0f context switches per second",
            psys, c.process_user, 100.0 * psys / ptotal, c.context_switches_per_s);
        if (c.cpus)
            put(&b, " (%.0f per CPU over %u CPUs)", per_cpu, c.cpus);
        put(&b,
            " with %.1f runnable processes on average (machine system time %.1f%%): its "
            "threads contend for the CPUs. Use fewer threads (%s).",
            c.avg_running, sys, threads_knob(x));
    }
}

static int candidate_cmp(const void *pa, const void *pb)
{
    const candidate *a = pa, *b = pb;
    if (a->adv.weight != b->adv.weight)
        return a->adv.weight > b->adv.weight ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

size_t analysis_advise(const analysis *a, advice *out, size_t max)
{
    if (!a || !out || !max)
        return 0;
    ctx *x = calloc(1, sizeof *x);
    if (!x)
        return 0;
    x->a = a;
    x->pytorch = is_pytorch(a);
    x->s = analysis_steps(a);
    x->step_ns = x->s.avg_total_ns;
    x->have_steps = x->s.steps > 0 && x->step_ns > 0;
    if (x->have_steps) {
        x->interval_share = x->s.avg_interval_ns / x->step_ns;
        x->fpbp_share = x->s.avg_fpbp_ns / x->step_ns;
        x->tail_share = x->s.avg_tail_ns / x->step_ns;
    }
    cpu_summary cpu = analysis_cpu(a);
    if (cpu.samples) {
        x->cpu_idle = cpu.machine[TS_CPU_IDLE];
        x->cpu_full = x->cpu_idle < CPU_IDLE_LOW;
    }
    queue_finding qf[MAX_FINDINGS];
    size_t nq = analysis_queue_findings(a, qf, MAX_FINDINGS);
    int cited[MAX_FINDINGS] = {0};
    int data_bottleneck = 0;
    for (size_t i = 0; i < nq; i++)
        if (qf[i].verdict == QUEUE_VERDICT_DATA_PROCESSING ||
            qf[i].verdict == QUEUE_VERDICT_OPERATOR)
            data_bottleneck = 1;

    rule_lost(x);
    if (rule_interval(x, qf, nq, cited))
        data_bottleneck = 1;
    rule_operators(x);
    rule_gaps(x);
    rule_comm_wait(x);
    rule_tail(x);
    rule_device(x);
    rule_queues(x, qf, nq, cited);
    rule_cpu(x, data_bottleneck);

    qsort(x->c, x->n, sizeof x->c[0], candidate_cmp);
    size_t n = x->n < max ? x->n : max;
    for (size_t i = 0; i < n; i++)
        out[i] = x->c[i].adv;
    free(x);
    return n;
}

const char *advisor_kind_name(uint32_t kind)
{
    static const char *const n[] = {
        "",    "step_interval", "operators", "gaps",     "tail",           "queue",
        "cpu", "lost",          "comm_wait", "gpu_data", "gpu_host_bound", "gpu_sync"};
    return kind >= 1 && kind < sizeof n / sizeof n[0] ? n[kind] : "unknown";
}
