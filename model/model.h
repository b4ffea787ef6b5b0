/*
 * model: termsight's shared vocabulary.
 *
 * The event record, the clock, the shared-memory segment (header, lanes, string table, control
 * mailbox) and the recording format. Pure data structures and their lock-free protocols: no
 * threads, no policy. Everything that crosses a process boundary is described here, so the
 * collector, the monitor and the analysis agree on it.
 *
 * Errors follow one convention: functions return 0 (or a count) on success and -1 on failure,
 * with *cause set to a malloc'd message the caller frees (cause may be NULL).
 */
#ifndef TERMSIGHT_MODEL_H
#define TERMSIGHT_MODEL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Sets *cause (when cause is not NULL) to a malloc'd formatted message and returns -1, so that
 * failures read `return cause_set(cause, "...", ...);`. */
int cause_set(char **cause, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Creates the folders on path that do not exist yet, with mode (less the umask): its parents,
 * and path itself when with_last. Existing ones are left as they are. Returns 0, or -1 with
 * *cause naming the folder that could not be made. */
int path_mkdirs(const char *path, int with_last, mode_t mode, char **cause);

/* Copies bytes (a multiple of 8) of shared memory word by word with relaxed atomic loads, or
 * stores: what a reader copies while a writer may be rewriting it (checked afterwards by the
 * caller's protocol: a lane's head, a record's sequence word), and what such a writer stores. */
static inline void words_load(void *dst, const void *src, size_t bytes)
{
    uint64_t *to = dst;
    const uint64_t *from = src;
    for (size_t k = 0; k < bytes / 8; k++)
        to[k] = __atomic_load_n(&from[k], __ATOMIC_RELAXED);
}

static inline void words_store(void *dst, const void *src, size_t bytes)
{
    uint64_t *to = dst;
    const uint64_t *from = src;
    for (size_t k = 0; k < bytes / 8; k++)
        __atomic_store_n(&to[k], from[k], __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------------------------------ */
/* UTF-8 (utf8.c)                                                                             */
/* ------------------------------------------------------------------------------------------ */

/* The length (1..4) of the valid UTF-8 sequence at s (left bytes, left >= 1) and its code point
 * in *cp (untouched when invalid); 0 when it is not one (overlong forms, surrogates and code
 * points past U+10FFFF are not). utf8_len: the same without the code point. */
size_t utf8_decode(const unsigned char *s, size_t left, uint32_t *cp);
size_t utf8_len(const unsigned char *s, size_t left);
/* cp as UTF-8 into out (4 bytes of room): its length, 0 for a surrogate or past U+10FFFF. */
size_t utf8_encode(uint32_t cp, char *out);

/* ------------------------------------------------------------------------------------------ */
/* Configuration: limits and defaults shared by the library and the termsight command          */
/* ------------------------------------------------------------------------------------------ */

#define TS_OUTPUT_DEFAULT       "./termsight-data" /* parent of run folders */
#define TS_SAMPLE_MS_MIN        1u
#define TS_SAMPLE_MS_MAX        3600000u /* an hour */
#define TS_SAMPLE_MS_DEFAULT    100u
#define TS_SECONDS_MAX          31536000u /* a year: TERMSIGHT_DELAY_S, TERMSIGHT_DURATION_S */
#define TS_STEP_PATTERN_DEFAULT "^(step|ProfilerStep#[0-9]+)"

/* A whole decimal number from min to max (no sign, nothing after it) into *out: 0, or -1. */
int options_parse_u32(const char *text, uint32_t min, uint32_t max, uint32_t *out);

/* A step window "A-B" (1 <= A <= B) into *from and *to: 0, or -1. */
int options_parse_steps(const char *text, uint64_t *from, uint64_t *to);

/* ------------------------------------------------------------------------------------------ */
/* Event record                                                                               */
/* ------------------------------------------------------------------------------------------ */

/* Every kind of event, one numbering for lanes, recordings and analysis. Values are part of the
 * recording format: append, never renumber. */
enum ts_kind {
    TS_KIND_NONE = 0,
    TS_KIND_OP_RANGE = 1,     /* operator range; name=op, type=op type, v0=FLOPs, aux=depth */
    TS_KIND_KERNEL = 2,       /* device kernel; tid=stream, type=operator it ran under, aux=context,
                                 corr=launch correlation, v0=FLOPs when known; TS_EF_COMM marks
                                 communication (NCCL) kernels */
    TS_KIND_MEMCPY = 3,       /* device copy; tid=stream, type=operator, v0=bytes, aux=direction */
    TS_KIND_MEMSET = 4,       /* device memset; tid=stream, type=operator, v0=bytes */
    TS_KIND_DEVMEM_ALLOC = 5, /* device memory allocation; v0=bytes, v1=address, aux=where
                               * (enum ts_devmem_kind) */
    TS_KIND_DEVMEM_FREE = 6,  /* device memory release; v0=bytes, v1=address, aux=where */
    TS_KIND_CUDA_API = 7,     /* runtime/driver API call; aux=callback id, corr=correlation */
    TS_KIND_NVTX_RANGE = 8,   /* NVTX range; aux=depth, corr=domain */
    TS_KIND_NVTX_MARK = 9,    /* NVTX instant */
    TS_KIND_STEP_BEGIN = 10,  /* instant; v0=step number */
    TS_KIND_STEP_END = 11,    /* instant; v0=step number */
    TS_KIND_PHASE = 12,       /* instant; aux=enum ts_phase */
    TS_KIND_QUEUE_SAMPLE = 13, /* instant; name=queue, v0=size, v1=capacity */
    TS_KIND_QUEUE_INFO = 14,   /* instant; name=queue, aux=role, v0=capacity,
                                  v1=producer id << 32 | consumer id */
    TS_KIND_COUNTER = 15,      /* instant; name=counter, v0=value (double bits when TS_EF_DOUBLE) */
    TS_KIND_CPU_MACHINE = 16,  /* interval [begin, end] of the machine's CPU: see ts_cpu_field */
    TS_KIND_CPU_PROCESS = 17,  /* interval of this process: v0=user ns, v1=system ns,
                                  aux=threads, corr=CPUs online | descendant processes seen but
                                  not followed (past the sampler's limit) << 32 */
    TS_KIND_CPU_THREAD = 18,   /* interval of one thread: tid, name=its name, v0=user ns,
                                  v1=system ns */
    TS_KIND_HOST_MEMORY = 19,  /* instant; v0=RSS bytes, v1=peak RSS bytes */
    TS_KIND_COMM_OP = 20,      /* communication on the host (collective, send/recv); v0=bytes */
    TS_KIND_LOST = 21,         /* notice; v0=events lost, aux=enum ts_lost_reason, v1=events/s
                                * the thread offered then (0: not known) */
    TS_KIND_MARK = 22,         /* instant mark from the API; name=text */
    TS_KIND_SYNC = 23,         /* device synchronization; device=TS_DEVICE_HOST: tid=the
                                  thread whose API call waited; else tid=the stream on that
                                  device (the call's record was not seen); aux=type, corr=the
                                  call's correlation, v0=context, v1=CUDA event */
    TS_KIND_THREAD_NAME = 24,  /* instant; tid=thread, name=its name */
    TS_KIND_COLLECT_START = 25, /* instant; a collection window opens; v0=window number */
    TS_KIND_COLLECT_STOP = 26,  /* instant; a collection window closes; v0=window number */
    TS_KIND_HOST_ALLOC = 27,    /* host allocation by name from the API; v0=bytes, v1=address */
    TS_KIND_HOST_FREE = 28,     /* host release from the API; v0=bytes, v1=address */
    TS_KIND_CONFIG = 29,        /* instant; a collector option: name=key, type=value */
    TS_KIND_CPU_CHILD = 30,     /* interval of one descendant process (child, grandchild ...):
                                   tid=its pid, name=its comm, aux=its parent's pid, v0=user ns,
                                   v1=system ns, corr=RSS bytes at the end, TS_EF_EXITED once
                                   it exited; a process new since the previous sample has its
                                   interval begin at its start */
    TS_KIND__COUNT
};

/* Event flags. */
enum ts_event_flag {
    TS_EF_DOUBLE = 1u << 0,       /* v0 holds an IEEE double, not an integer */
    TS_EF_CROSS_THREAD = 1u << 1, /* a range that ended on another thread than it began */
    TS_EF_COMM = 1u << 2,         /* classified as communication (overlap analysis) */
    TS_EF_TRUNCATED = 1u << 3,    /* name was longer than the string table keeps */
    TS_EF_EXITED = 1u << 4,       /* CPU_CHILD: the process had exited (its parent had not yet
                                     waited for it): its times are final, its RSS is 0 */
};

enum ts_phase {
    TS_PHASE_FORWARD_START = 1,
    TS_PHASE_BACKWARD_END = 2,
    /* An evaluation pass (forward passes without gradients between training steps): its time
     * is in no step, and the next step's window opens no earlier than its end. */
    TS_PHASE_EVAL_BEGIN = 3,
    TS_PHASE_EVAL_END = 4,
};

enum ts_lost_reason {
    TS_LOST_LANE_FULL = 1, /* a lane was full */
    TS_LOST_NO_LANE = 2,   /* every lane was taken */
    TS_LOST_WRITE = 3,     /* the recording could not be written */
    TS_LOST_DEVICE = 4,    /* the device tracer dropped records */
};

/* Where a TS_KIND_DEVMEM_* allocation lives: CUPTI's memory kinds (cupti_activity.h), which the
 * CUDA collector keeps in aux. Only device memory counts as the device's: pinned host memory is
 * in the process's resident memory already, and managed memory moves between host and device. */
enum ts_devmem_kind {
    TS_DEVMEM_UNKNOWN = 0, /* not said (an older recording, a program's own event) */
    TS_DEVMEM_PAGEABLE = 1,
    TS_DEVMEM_PINNED = 2,
    TS_DEVMEM_DEVICE = 3,
    TS_DEVMEM_ARRAY = 4,
    TS_DEVMEM_MANAGED = 5,
    TS_DEVMEM_DEVICE_STATIC = 6,
    TS_DEVMEM_MANAGED_STATIC = 7,
};

/* 1 when an allocation of this kind is the device's memory. */
static inline int ts_devmem_on_device(uint32_t kind)
{
    return kind == TS_DEVMEM_UNKNOWN || kind == TS_DEVMEM_DEVICE || kind == TS_DEVMEM_ARRAY ||
           kind == TS_DEVMEM_DEVICE_STATIC;
}

enum ts_queue_role {
    TS_QUEUE_PIPELINE = 0, /* between two data-pipeline operators */
    TS_QUEUE_HOST = 1,     /* host queue: pipeline output waiting for transfer */
    TS_QUEUE_DEVICE = 2,   /* device queue: data on the device waiting for a step */
};

#define TS_DEVICE_HOST 0xffffffffu

/* TS_KIND_CPU_MACHINE fields. Shares of the interval are in units of 0.01 % (0..10000), four to
 * a word: v0 = user | nice << 16 | system << 32 | idle << 48, v1 = iowait | irq << 16 |
 * softirq << 32 | steal << 48; corr = context switches in the interval; aux = running processes
 * << 16 | blocked processes. ts_cpu_share and ts_cpu_pack read and write them. */
enum ts_cpu_field {
    TS_CPU_USER,
    TS_CPU_NICE,
    TS_CPU_SYSTEM,
    TS_CPU_IDLE,
    TS_CPU_IOWAIT,
    TS_CPU_IRQ,
    TS_CPU_SOFTIRQ,
    TS_CPU_STEAL,
    TS_CPU__COUNT
};

/* One fixed-size record for everything (one cache line). Timestamps are nanoseconds on the
 * collector's clock (CLOCK_MONOTONIC's epoch; see tsclock). Instants have begin == end. */
typedef struct ts_event {
    uint16_t kind;     /* enum ts_kind */
    uint16_t flags;    /* enum ts_event_flag */
    uint32_t tid;      /* OS thread id, or stream id for device kinds */
    uint32_t device;   /* device index, TS_DEVICE_HOST for host events */
    uint32_t aux;      /* kind-defined small value */
    uint32_t name;     /* string id */
    uint32_t type;     /* string id */
    uint64_t begin_ns; /* start, ns */
    uint64_t end_ns;   /* end, ns */
    uint64_t corr;     /* correlation id, or a third kind-defined value */
    uint64_t v0;       /* kind-defined */
    uint64_t v1;       /* kind-defined */
} ts_event;

_Static_assert(sizeof(ts_event) == 64, "ts_event must be one cache line");
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "lane_push builds ts_event words for a little-endian layout");
_Static_assert(offsetof(ts_event, flags) == 2 && offsetof(ts_event, tid) == 4 &&
                   offsetof(ts_event, device) == 8 && offsetof(ts_event, aux) == 12 &&
                   offsetof(ts_event, name) == 16 && offsetof(ts_event, type) == 20 &&
                   offsetof(ts_event, begin_ns) == 24 && offsetof(ts_event, v1) == 56,
               "ts_event layout that lane_push writes word by word");

static inline uint16_t ts_cpu_share(const ts_event *ev, enum ts_cpu_field f)
{
    uint64_t w = f < 4 ? ev->v0 : ev->v1;
    return (uint16_t)(w >> (16 * (f & 3)));
}

static inline void ts_cpu_pack(ts_event *ev, const uint16_t share[TS_CPU__COUNT])
{
    ev->v0 = ev->v1 = 0;
    for (int f = 0; f < TS_CPU__COUNT; f++)
        *(f < 4 ? &ev->v0 : &ev->v1) |= (uint64_t)share[f] << (16 * (f & 3));
}

/* The kind's stable lower-case name ("op", "kernel", ...), or "unknown". */
const char *event_kind_name(uint32_t kind);

/* ------------------------------------------------------------------------------------------ */
/* Clock                                                                                      */
/* ------------------------------------------------------------------------------------------ */

/* The collector's clock: nanoseconds on CLOCK_MONOTONIC's epoch. On x86-64 with an invariant
 * TSC it is the TSC scaled by a calibrated factor (about 10 ns a read instead of 23 ns for
 * clock_gettime); elsewhere clock_gettime(CLOCK_MONOTONIC). The scale is refined from time to
 * time with continuity kept; readers go through a sequence lock. */
typedef struct tsclock {
    _Atomic uint32_t seq;
    uint32_t use_tsc;
    _Atomic uint64_t base_tsc;
    _Atomic uint64_t base_ns;
    _Atomic uint64_t mult; /* ns per tick << 32 */
    uint64_t cal_tsc;      /* where the current calibration window began */
    uint64_t cal_ns;
} tsclock;

/* Calibrates. use_tsc 0 forces clock_gettime; otherwise the TSC is used when the CPU says it is
 * invariant (constant_tsc and nonstop_tsc). Blocks about 5 ms. */
void tsclock_init(tsclock *c, int use_tsc);

/* Re-measures the tick rate over the time since tsclock_init, keeping now() continuous. Call
 * from a background thread, now and then (seconds apart). */
void tsclock_refine(tsclock *c);

/* A short description for headers: "tsc" or "monotonic". */
const char *tsclock_name(const tsclock *c);

uint64_t tsclock_monotonic_ns(void);

#if defined(__x86_64__)
static inline uint64_t tsclock_ticks(void)
{
    return __builtin_ia32_rdtsc();
}
#endif

static inline uint64_t tsclock_now(const tsclock *c)
{
#if defined(__x86_64__)
    if (c->use_tsc) {
        tsclock *m = (tsclock *)c;
        for (;;) {
            uint32_t s = atomic_load_explicit(&m->seq, memory_order_acquire);
            uint64_t t = tsclock_ticks();
            uint64_t bt = atomic_load_explicit(&m->base_tsc, memory_order_relaxed);
            uint64_t bn = atomic_load_explicit(&m->base_ns, memory_order_relaxed);
            uint64_t mu = atomic_load_explicit(&m->mult, memory_order_relaxed);
            atomic_thread_fence(memory_order_acquire);
            if (!(s & 1) && atomic_load_explicit(&m->seq, memory_order_relaxed) == s) {
                /* A tick read before base_tsc (another core, a refine in between) clamps. */
                uint64_t d = t > bt ? t - bt : 0;
                return bn + (uint64_t)(((unsigned __int128)d * mu) >> 32);
            }
        }
    }
#endif
    (void)c;
    return tsclock_monotonic_ns();
}

/* ------------------------------------------------------------------------------------------ */
/* Operator names (opname.c)                                                                  */
/* ------------------------------------------------------------------------------------------ */

/* The length of an op's key within name[0..len): PyTorch's NVTX names append fields
 * (", seq = N", ", op_id = N", ", sizes = [[...]]", ", input_op_ids = [...]"), and the key is the
 * name cut where the first of them starts (never cut to nothing); else len. */
uint32_t opname_key_length(const char *name, uint32_t len);

/* 1 when the name is a data fetch's (get_next, GetNext, data fetch, DataLoader, next batch;
 * letters and digits compared without case): a wait for data, never an operator to optimize. */
int opname_is_fetch(const char *name, uint32_t len);

/* 1 when the type is the program's own labels' (termsight.torch gives torch.profiler's
 * record_function blocks the type "record_function"): a label, never an operator type. */
int opname_is_label(const char *type, uint32_t len);

/* ------------------------------------------------------------------------------------------ */
/* Self time of nested ranges (nesting.c)                                                     */
/* ------------------------------------------------------------------------------------------ */

#define NESTING_MAX_DEPTH 1024 /* deeper ranges are counted but take no part in nesting */

/* Per (kind, thread), the ranges that still wait for their parent, by depth. */
typedef struct nesting nesting;

nesting *nesting_create(void); /* NULL when out of memory */
void nesting_destroy(nesting *n);

typedef struct nesting_level {
    uint64_t sum_ns;    /* ranges at this depth waiting for their parent */
    uint64_t min_begin; /* the earliest begin among them */
} nesting_level;

/* One (kind, thread)'s levels; its address stays the same for the life of n. */
typedef struct nesting_stack {
    nesting_level *lv;
    uint32_t cap, top; /* levels at top and above are empty */
} nesting_stack;

/* The stack of (kind, tid), made on first use; NULL without memory. */
nesting_stack *nesting_stack_of(nesting *n, uint32_t kind, uint32_t tid);
/* Room for need levels: 0, or -1 without memory. */
int nesting_reserve(nesting_stack *t, uint32_t need);

/* nesting_self on a stack found before (a caller that meets one thread's ranges in a row keeps
 * it): every recorded range goes through here. */
static inline uint64_t nesting_stack_self(nesting_stack *t, uint32_t depth, uint64_t begin,
                                          uint64_t dur)
{
    if (depth >= NESTING_MAX_DEPTH || (depth >= t->cap && nesting_reserve(t, depth + 1) != 0))
        return dur;
    /* Below depth, normally only depth + 1 holds anything; deeper levels hold ranges whose own
     * parent went unrecorded, and they lie inside this range too when they began inside it. */
    uint64_t children = 0;
    for (uint32_t l = depth + 1; l < t->top; l++) {
        if (t->lv[l].min_begin >= begin)
            children += t->lv[l].sum_ns;
        t->lv[l] = (nesting_level){0, UINT64_MAX};
    }
    t->top = depth + 1;
    nesting_level *p = &t->lv[depth];
    p->sum_ns += dur;
    if (begin < p->min_begin)
        p->min_begin = begin;
    return dur > children ? dur - children : 0;
}

/* The self time of a range of kind on thread tid at depth that lasted dur from begin: dur less
 * the ranges of the same kind and thread that ended before it, deeper, and began inside it.
 * Ranges come in the order their thread ended them. Without memory (or past
 * NESTING_MAX_DEPTH) the range counts as having no children. */
uint64_t nesting_self(nesting *n, uint32_t kind, uint32_t tid, uint32_t depth, uint64_t begin,
                      uint64_t dur);

/* ------------------------------------------------------------------------------------------ */
/* Step trace (steptrace.c)                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* What a step is and how its time splits, one definition for every room that needs it. */

/* How a step's forward start and backward end were found. */
enum step_source {
    STEP_SOURCE_NONE = 0,   /* no operator in the step: FP/BP unknown */
    STEP_SOURCE_MARKS = 1,  /* phase marks (termsight_phase_mark) */
    STEP_SOURCE_OPTION = 2, /* operator names given by option or PROFILING_FP_START/BP_END */
    STEP_SOURCE_AUTO = 3,   /* the seeds' rule: first op; op before the last communication */
};

/* The name of an enum step_source value: none, marks, option, auto ("unknown" past them). */
const char *step_source_name(uint32_t source);

/* One step of the step trace (all times ns on the collector clock, durations in ns).
 *
 * The split is a partition of the step: interval + compute + comm_wait + tail + eval = total,
 * exactly. Time during an evaluation pass is eval; before the forward start it is interval
 * (waiting for data); after it, communication in flight while nothing computes is comm_wait;
 * what remains is compute up to the backward end and tail after it. */
typedef struct step_row {
    uint64_t step;     /* number from termsight_step_begin */
    uint64_t begin_ns; /* start of the step interval: the previous step's end, or this step's
                          begin for the first step */
    uint64_t end_ns;   /* step end */
    uint64_t fp_start_ns, bp_end_ns;
    uint64_t fpbp_ns;      /* forward start .. backward end, whatever happens in it */
    uint64_t total_ns;     /* end - begin */
    uint64_t interval_ns;  /* the split: begin .. forward start, less evaluation */
    uint64_t compute_ns;   /* the split: forward start .. backward end, less the waits */
    uint64_t comm_wait_ns; /* the split: waiting for communication after the forward start */
    uint64_t tail_ns;      /* the split: backward end .. step end, less the waits */
    uint64_t eval_ns;      /* the split: evaluation passes inside the step */
    uint32_t fp_op, bp_op; /* name ids of the operators that set them, 0 with marks or none */
    uint32_t source;       /* enum step_source */
    uint32_t tid;          /* the thread that marked the step */
    /* Overlap (seed 001 "Op Overlap Analyse") over [begin, end], a partition of its own:
     * overlap_compute + pure_comm + free = total. */
    uint64_t overlap_compute_ns; /* union of computation (kernels; without device work, host ops) */
    uint64_t comm_ns;            /* union of communication (TS_EF_COMM kernels, COMM_OP) */
    uint64_t pure_comm_ns;       /* communication not overlapped by computation */
    uint64_t free_ns;            /* neither */
    uint64_t gap_ns;             /* idle time between consecutive top-level ops in FP/BP, less the
                                    time communication is in flight (that is comm_wait) */
    /* The top-level host ops of the step's thread in [begin, end]: how many, and their time. */
    uint64_t ops, ops_ns;
} step_row;

/* What the step trace has summed over its finalized steps. */
typedef struct step_totals {
    uint64_t steps;        /* finalized */
    uint64_t current_step; /* the last step begun */
    /* Sums of the step_row fields of the same names: */
    uint64_t fpbp_ns, total_ns;
    uint64_t interval_ns, compute_ns, comm_wait_ns, tail_ns, eval_ns; /* the split */
    uint64_t overlap_compute_ns, comm_ns, pure_comm_ns, free_ns, gap_ns;
    uint64_t slowest[5];    /* step numbers, slowest first by total less eval; 0 pads */
    uint64_t slowest_ns[5]; /* their total less eval */
    uint32_t nslowest;
    uint32_t last_source; /* enum step_source of the latest step */
    uint64_t late;        /* records that arrived after their step was finalized */
    uint64_t outside;     /* records in no step */
    uint64_t dropped;     /* records not attributed: the bounded buffers were full */
    uint64_t incomplete;  /* steps ended without a recorded begin */
} step_totals;

typedef struct op_gap {
    uint64_t gap_ns;
    uint64_t at_ns; /* where the gap begins */
    uint64_t step;  /* 0 when outside steps */
    uint32_t tid;
    uint32_t before; /* op name ids on each side */
    uint32_t after;
} op_gap;

typedef struct steptrace steptrace;

typedef struct steptrace_hooks {
    void *ctx;
    /* The bytes of a name id (for the operator options and data fetches), NULL when unknown. */
    const char *(*name)(void *ctx, uint32_t id, uint32_t *len);
    /* Before a step is finalized (may call steptrace_set_options); NULL: nothing. */
    void (*prepare)(void *ctx, steptrace *t);
    /* Each finalized step, in order; NULL: none wanted. */
    void (*row)(void *ctx, const step_row *row);
} steptrace_hooks;

/* A step trace keeping the last `recent` rows (0: none). NULL when out of memory. */
steptrace *steptrace_create(const steptrace_hooks *hooks, uint32_t recent);
void steptrace_destroy(steptrace *t);

/* The operator names that set forward start and backward end (NULL or "": none), matched by the
 * op's exact name or its key (opname_key_length). */
void steptrace_set_options(steptrace *t, const char *fp_start_op, const char *bp_end_op);

/* One event, in the order the recording or the lanes gave it; kinds that do not matter to steps
 * are ignored. Steps are finalized as later ones end (a step waits for 4 later step ends and a
 * second of later time, so that late records, a device's kernels, find it). Memory is bounded:
 * it does not grow with the length of the run. */
void steptrace_feed(steptrace *t, const ts_event *ev);

/* End of input: finalizes every ended step. */
void steptrace_finish(steptrace *t);

/* A live trace's (the collector's): finalizes, in order, the ended steps whose end lies at least
 * quiet_ns before now_ns (their records have come by then), without waiting for later steps.
 * Returns how many. */
size_t steptrace_settle(steptrace *t, uint64_t now_ns, uint64_t quiet_ns);

const step_totals *steptrace_totals(const steptrace *t);
/* The last finalized steps, oldest first, at most max. */
size_t steptrace_recent(const steptrace *t, step_row *out, size_t max);
/* The largest gaps between consecutive top-level ops on one thread, largest first. */
size_t steptrace_gaps(const steptrace *t, op_gap *out, size_t max);

/* Totals and the last rows (oldest first) from elsewhere replace what the trace holds. */
void steptrace_load(steptrace *t, const step_totals *tot, const step_row *rows, size_t n);

/* ------------------------------------------------------------------------------------------ */
/* Shared-memory segment                                                                      */
/* ------------------------------------------------------------------------------------------ */

#define TS_SEGMENT_MAGIC 0x5453454753495354ull /* "TSIGSEGT" little-endian */
#define TS_SEGMENT_MAJOR 5 /* 4: the step and operator boards; 5: the step split */
#define TS_SEGMENT_MINOR                                                                           \
    2 /* 1: the ledger's id and charge; 2: flight_mb, open ranges, stacks signal */
#define TS_SEGMENT_PREFIX "termsight-" /* shm name: "/termsight-<pid>-<16 hex digits>" */
#define TS_NAME_MAX       8192         /* longest name the string table keeps */

/* Collector state, the same words everywhere (ls, top, API). */
enum ts_state {
    TS_STATE_IDLE = 0,       /* never started */
    TS_STATE_COLLECTING = 1, /* recording */
    TS_STATE_STOPPED = 2,    /* stopped after collecting */
    TS_STATE_ENDED = 3,      /* the process ended its session */
};

/* "idle", "collecting", "stopped", "ended", or "unknown". */
const char *state_name(uint32_t state);

/* One communication in flight, as monitors see it: whole while seq is even; begin_ns 0: the
 * slot is free. */
typedef struct ts_comm_slot {
    _Atomic uint32_t seq;
    _Atomic uint32_t name; /* string id */
    _Atomic uint64_t begin_ns;
} ts_comm_slot;

#define TS_COMM_SLOTS  16                  /* communications in flight a monitor can see */
#define TS_STACKS_FILE "python-stacks.txt" /* in the run folder: termsight_stacks_signal */

/* The segment starts with this header. Offsets are from the segment's start; the segment holds
 * no pointers. Readers validate every field through segment_attach before using any offset. */
typedef struct ts_segment_header {
    uint64_t magic;       /* TS_SEGMENT_MAGIC */
    uint32_t endian;      /* 0x01020304 as written */
    uint16_t major;       /* incompatible layout changes */
    uint16_t minor;       /* compatible additions */
    uint32_t header_size; /* sizeof(ts_segment_header) */
    uint32_t event_size;  /* sizeof(ts_event) */
    uint32_t lane_size;   /* sizeof(ts_lane) */
    uint32_t word_size;   /* sizeof(void *) of the writer */
    uint64_t segment_size;

    int32_t pid;
    uint32_t uid;
    char process[64];           /* NUL-terminated */
    char clock[16];             /* tsclock_name() */
    uint64_t start_realtime_ns; /* wall clock at creation */
    uint64_t start_ns;          /* collector clock at creation */
    char run_folder[1024];      /* NUL-terminated; where the recording goes */

    uint32_t lane_count;
    uint32_t lane_events;     /* each lane's first ring, in events, a power of two */
    uint64_t lanes_off;       /* lane_count ts_lane records */
    uint64_t rings_off;       /* lane_count rings of lane_events events */
    uint32_t lane_max_events; /* the largest ring a lane may grow to (lane_events: none) */
    uint32_t pad_grow;
    uint64_t grow_off;         /* the grow region: the larger rings lanes grow into */
    uint64_t grow_bytes;       /* its size; the rings in use there take at most half */
    uint32_t string_max;       /* ids available */
    uint32_t string_arena;     /* bytes available for names */
    uint64_t string_index_off; /* string_max uint32 arena offsets */
    uint64_t string_arena_off;
    uint64_t mailbox_off;

    /* Live state, written by the collector: mirrors of what it keeps in its own memory, for
     * monitors. Any process of the user can write here, so the collector never reads these
     * back; the lanes' records are mirrors too (segment_lane_ctl). */
    _Atomic uint32_t state;        /* enum ts_state */
    _Atomic uint32_t lanes_used;   /* lanes ever claimed, for readers' scans */
    _Atomic uint32_t string_count; /* ids published */
    _Atomic uint32_t string_used;  /* arena bytes used */
    _Atomic uint64_t events_recorded;
    _Atomic uint64_t drops; /* events lost for any reason */
    _Atomic uint64_t bytes_recorded;
    _Atomic uint64_t string_drops;     /* names that did not fit */
    _Atomic uint64_t heartbeat_ns;     /* recorder's last loop, collector clock */
    _Atomic uint32_t window;           /* collection windows started */
    _Atomic uint32_t record_error;     /* nonzero: recording stopped (errno) */
    char record_notice[256];           /* why recording stopped; valid when record_error != 0 */
    _Atomic uint32_t strings_recorded; /* ids written to the recording so far */
    _Atomic uint32_t steps;       /* the last step begun, as the recorder last saw it (saturates;
                                   * minor 1: 0 from an older writer, unknown) */
    _Atomic uint64_t write_drops; /* events lost because the recording could not be written */

    /* The job (README: Distributed training), set at creation. */
    char job[64];  /* NUL-terminated; "" when the process is no rank of a job */
    char host[64]; /* NUL-terminated */
    int32_t rank;  /* -1 when unknown, as the two below */
    int32_t local_rank;
    int32_t world_size;
    int32_t parent_pid; /* a forked child's session: the process it was forked from; else 0 */
    _Atomic uint64_t grow_used; /* bytes of the grow region's rings in use (mirror) */
    uint64_t board_off;         /* the boards (ts_board) */
    /* Minor 1: the ledger (budget.c) this segment's pages were taken from, and how many bytes it
     * holds of it now (a mirror), for whoever reaps the segment to give back. */
    uint64_t budget_id;
    _Atomic uint64_t budget_charged;
    /* Minor 1: events the program's own threads pushed (every lane but the collector's), taken
     * so far: 0 for a process that recorded nothing of its own (its samples aside). */
    _Atomic uint64_t program_events;
    /* Minor 2: MiB of the flight recorder's (0: none): the session writes no recording of its
     * own, only snapshots; whatever its lanes hold at its end goes nowhere. */
    uint32_t flight_mb;
    uint32_t pad_minor2;
    /* Minor 2: hang triage. The signal on which the program writes every thread's stack into
     * TS_STACKS_FILE in its run folder (termsight_stacks_signal); 0: none. And the
     * communications issued and not yet complete (comm_slots_issue), for monitors. */
    _Atomic int32_t stacks_signal;
    uint32_t pad_hang;
    ts_comm_slot comm[TS_COMM_SLOTS];
} ts_segment_header;

enum ts_lane_state {
    TS_LANE_FREE = 0,    /* claimable */
    TS_LANE_OWNED = 1,   /* a thread writes into it */
    TS_LANE_RETIRED = 2, /* its thread ended; free once drained */
};

/* One single-producer ring's control block; four cache lines so producer and consumer never
 * share one. Indexes only grow; index j lies in the ring that holds it at slot j & (events - 1).
 *
 * A lane grows: the consumer offers a larger ring (next_off, next_events), its pages had; the
 * producer takes it when its ring is full, at its head h, and goes on there: indexes from h on
 * (ring_from) lie in the new ring, the ones before in the old one until the consumer has passed
 * them. The producer rewrites the ring fields under ring_seq (odd while it writes), which
 * readers go by as by a sequence lock. */
typedef struct ts_lane {
    _Alignas(64) _Atomic uint64_t head; /* next index the producer writes (producer only) */
    /* The producer's innermost open range, for monitors (lane_open_set, lane_open_read): on the
     * producer's own cache line; the fields below are whole while open_seq is even. */
    _Atomic uint32_t open_seq;
    _Atomic uint32_t open_depth;  /* ranges open on the thread; 0: none */
    _Atomic uint32_t open_name;   /* the innermost kept one's name id */
    _Atomic uint32_t open_window; /* the collection window it began in */
    _Atomic uint64_t open_begin_ns;
    char pad0[32];
    _Atomic uint64_t tail; /* next index the consumer reads (consumer only) */
    char pad1[56];
    _Atomic uint32_t state;      /* enum ts_lane_state */
    _Atomic uint32_t tid;        /* owner's OS thread id */
    _Atomic uint64_t drops;      /* events dropped because the ring was full */
    _Atomic uint64_t generation; /* claims so far; observers notice reuse */
    /* Written by the consumer, for observers (ls, top): what this lane's thread lost in the
     * window under way, when that began and the events per second it offered then. */
    _Atomic uint64_t lost_window;
    _Atomic uint64_t lost_first_ns; /* collector clock; 0: none lost */
    _Atomic uint64_t lost_rate;
    char pad2[16];
    _Atomic uint32_t ring_seq;    /* even: the fields below are whole */
    _Atomic uint32_t ring_events; /* the ring indexes from ring_from on lie in */
    _Atomic uint64_t ring_off;    /* its offset in the segment */
    _Atomic uint64_t ring_from;
    _Atomic uint64_t old_off;     /* the ring indexes below ring_from lie in */
    _Atomic uint32_t old_events;  /* 0: none */
    _Atomic uint32_t next_events; /* a ring offered by the consumer; 0: none, or taken */
    _Atomic uint64_t next_off;
    char pad3[16];
} ts_lane;

_Static_assert(sizeof(ts_lane) == 256, "ts_lane layout");
_Static_assert(offsetof(ts_lane, open_begin_ns) < 64, "the open range on the head's line");
_Static_assert(sizeof(ts_segment_header) <= 4096, "header fits its page");

typedef struct segment segment;

/* What one thread lost in the window under way (a lane's mirror). */
typedef struct lane_loss {
    uint32_t tid;
    uint64_t lost;
    uint64_t first_ns; /* collector clock, when the recorder first saw it */
    uint64_t rate;     /* events per second the thread offered then */
} lane_loss;

#define SEGMENT_INFO_LOST 4

/* The layout of a segment, copied from its header once, when it is created or validated: every
 * later access goes by this copy, never by the header, which another process may rewrite. */
typedef struct segment_geometry {
    uint32_t lane_count;
    uint32_t lane_events;
    uint32_t lane_max_events;
    uint64_t grow_off, grow_bytes;
    uint32_t string_max;
    uint32_t string_arena;
    uint64_t lanes_off;
    uint64_t rings_off;
    uint64_t string_index_off;
    uint64_t string_arena_off;
    uint64_t mailbox_off;
    uint64_t board_off;
} segment_geometry;

/* ---- The shared-memory ledger of a process tree (budget.c) ---------------------------- */

#define TS_BUDGET_MAGIC   0x5447445542535354ull /* "TSSBUDGT" little-endian */
#define TS_BUDGET_PREFIX  "termsight-budget-"   /* a named ledger: /dev/shm/<this><pid>-<hex> */
#define TS_BUDGET_SHARE   4                     /* a tree has a quarter of what /dev/shm has free */
#define TS_BUDGET_CEILING (2ull << 30)          /* ... and 2 GiB at most */
#define TS_BUDGET_MB_MAX  1048576u              /* TERMSIGHT_SHM_BUDGET_MB: up to 1 TiB */

/* One page, shared by the processes of a tree. Any process of the user may write a named one:
 * readers bound what they read, and a damaged ledger misleads its own tree only. */
typedef struct ts_shm_budget {
    uint64_t magic; /* TS_BUDGET_MAGIC, written last */
    uint64_t id;    /* random, never 0: segments charged to it say it (budget_id) */
    uint64_t limit; /* bytes the tree's segments may have */
    uint32_t uid;   /* its creator */
    uint32_t pad;
    _Atomic uint64_t used;    /* bytes had now */
    _Atomic uint64_t peak;    /* the most had at once */
    _Atomic uint64_t refused; /* requests refused */
} ts_shm_budget;

/* An anonymous ledger of limit bytes (a tree's first process; its forked children share it).
 * NULL when it cannot be mapped. */
ts_shm_budget *budget_create_private(uint64_t limit);
/* A named ledger ("/termsight-budget-<pid>-<hex>" into name) for processes that exec. 0, or -1
 * with *cause. The creator unlinks the name when the tree ends (shm_unlink). */
int budget_create_named(uint64_t limit, char *name, size_t cap, ts_shm_budget **out, char **cause);
/* Maps the named ledger of this user: 0, or -1 with *cause (not one, not ours, damaged). */
int budget_attach(const char *name, ts_shm_budget **out, char **cause);
void budget_close(ts_shm_budget *b);
/* Takes bytes from the ledger: 0, or -1 (refused and counted) when that would pass its limit.
 * A NULL ledger has no limit. */
int budget_take(ts_shm_budget *b, uint64_t bytes);
/* Gives bytes back (never below 0). */
void budget_give(ts_shm_budget *b, uint64_t bytes);
/* Removes this user's named ledgers whose maker (termsight run) is gone without removing them
 * (it was killed): the count removed. */
int budget_remove_orphans(void);
/* The limit of a new tree's ledger: TERMSIGHT_SHM_BUDGET_MB (mb) when set, else a
 * TS_BUDGET_SHARE-th of what /dev/shm has free (available), at most TS_BUDGET_CEILING. 0, or -1
 * with *cause when mb does not parse. */
int budget_limit_for(uint64_t available, const char *mb, uint64_t *limit, char **cause);

typedef struct segment_config {
    pid_t pid;                            /* name and header pid; 0 means getpid() */
    const char *process;                  /* process name for the header */
    const char *run_folder;               /* recording destination for the header */
    const char *clock;                    /* clock name for the header */
    uint64_t start_ns;                    /* collector clock at creation */
    uint32_t lane_count;                  /* 1 .. 4096 */
    uint32_t lane_events;                 /* a lane's first ring: power of two, 64 .. 2^24 */
    uint32_t lane_max_events;             /* the most it grows to: lane_events .. 2^24 */
    uint64_t grow_budget;                 /* bytes the grown rings may take (0: none grow) */
    uint32_t string_max;                  /* 16 .. 2^24 */
    uint32_t string_arena;                /* bytes, 4096 .. 2^30 */
    const char *job;                      /* the job this process is a rank of; NULL or "": none */
    const char *host;                     /* this machine's name; NULL: none */
    int32_t rank, local_rank, world_size; /* in the job; -1: unknown; read only with a job */
    int32_t parent_pid;                   /* a forked child's session: its parent; else 0 */
    ts_shm_budget *budget;                /* the tree's ledger the pages are taken from; NULL:
                                           * none (no limit) */
} segment_config;

/* Creates "/termsight-<pid>-<random>" mode 0600, exclusively: the random part (getrandom) keeps
 * anyone from taking the name first; a name found taken is never opened, another is drawn. */
int segment_create(const segment_config *cfg, segment **out, char **cause);

/* Bytes the shared-memory file system has free for this user now; UINT64_MAX when it cannot be
 * told. */
uint64_t segment_shm_available(void);

/* Opens and validates the segment of pid (found by name in /dev/shm; of several, the one the
 * process maps, else the newest; names of other users' are passed over, see segment_note).
 * writable 0 maps it read-only (observers), 1 read-write (frontends sending commands). A foreign,
 * damaged, truncated or incompatible segment, or only another user's, is an error with a
 * message; none is "pid N: no such segment". */
int segment_attach(pid_t pid, int writable, segment **out, char **cause);

/* Same for a segment given by shm name ("/termsight-123-...") or a path to a file holding one. */
int segment_attach_name(const char *name, int writable, segment **out, char **cause);

/* What segment_attach passed over to find s (another user's objects at names of its pid, which
 * anyone can plant): a sentence, or "" when nothing. */
const char *segment_note(const segment *s);

/* The absolute path of s's run folder: the header's, or, for a relative one (older collectors
 * wrote the output option as given), joined to the working directory of the process when it
 * still maps s and is this user's. 0, or -1 with *cause when it cannot be told (never resolved
 * against the caller's own directory) or does not fit in cap. */
int segment_run_folder(const segment *s, char *out, size_t cap, char **cause);

/* Validates a header and its layout against the real size of the mapping. */
int segment_validate(const void *base, uint64_t size, char **cause);

/* Unmaps. remove 1 also unlinks the shm name (the owner at exit). NULL is fine. */
void segment_close(segment *s, int remove);

/* Removes the shm name and frees the rings' pages but keeps the mapping valid (the owner at
 * session end, while other threads may still be finishing an event call into it). */
void segment_unlink(const segment *s);

/* The creator's: has the pages of [off, off + len) (a full shared-memory file system fails here
 * instead of with SIGBUS at a store). 0, or -1 (out of bounds, not the creator, or no memory). */
int segment_populate(const segment *s, uint64_t off, uint64_t len);

/* The one bounds-checked accessor: a pointer to len bytes at off, or NULL when they do not lie
 * inside the segment. */
void *segment_at(const segment *s, uint64_t off, uint64_t len);

ts_segment_header *segment_header(const segment *s);
uint64_t segment_size(const segment *s);
const char *segment_shm_name(const segment *s);

/* A NUL-terminated copy into dst (cap bytes) of a header string of src_cap bytes, which the
 * process may still be writing or a hostile one left unterminated. */
void segment_copy_field(char *dst, size_t cap, const char *src, size_t src_cap);

const segment_geometry *segment_geometry_of(const segment *s);

/* The control mailbox: in an object of its own beside the segment ("<name>-ctl", mode 0600),
 * mapped writable for the creator and for a writable attach; NULL for a read-only attach. The
 * segment itself is mode 0400 and every attach maps it read-only: a monitor writes commands,
 * nothing else. */
typedef struct ts_mailbox ts_mailbox;
ts_mailbox *segment_mailbox(const segment *s);

/* The lane record and ring of lane i in the segment, or NULL when i is out of range. */
ts_lane *segment_lane(const segment *s, uint32_t i);
ts_event *segment_ring(const segment *s, uint32_t i);

/* The offset of lane i's first ring (lane_events events): where every lane starts, and where a
 * reclaimed one starts again. i below the lane count. */
uint64_t segment_first_ring_off(const segment *s, uint32_t i);

/* The ring of events at off, or NULL unless it lies whole among the first rings or in the grow
 * region and its size is one a lane may have. */
ts_event *segment_ring_at(const segment *s, uint64_t off, uint32_t events);

/* Whether the ring at off is a grown one (in the grow region). */
int segment_ring_grown(const segment *s, uint64_t off);

/* The creator's consumer's, one thread: a ring of events from the grow region, within the
 * budget (half the region), its pages not yet had; 0 and *off, or -1 (over the budget, no
 * room, or shared memory found full). Freed, its pages go back. */
int segment_grow_alloc(const segment *s, uint32_t events, uint64_t *off);
/* had: the bytes of it made present (segment_grow_populate), given back to the ledger; UINT64_MAX
 * for the whole ring. */
void segment_grow_free(const segment *s, uint64_t off, uint32_t events, uint64_t had);

/* Has the pages of [off, off + len), taken from the ledger: 0, or -1 when the ledger refuses
 * them or shared memory is full (no ring is tried after that). */
int segment_grow_populate(const segment *s, uint64_t off, uint64_t len);

/* A lane's larger ring being made ready by the consumer (lane_grow). */
typedef struct lane_grow_state {
    uint64_t off; /* the ring; events 0: none */
    uint32_t events;
    int offered;        /* handed to the producer (next_*), not yet seen taken */
    uint64_t populated; /* bytes of it had so far */
    uint32_t freed_seq; /* the ring_seq whose old ring has been freed */
} lane_grow_state;

/* The creator's per-lane growth state; NULL for an attacher. */
lane_grow_state *segment_grow_state(const segment *s, uint32_t i);

/* The control block that lane i's producer and consumer go by: for the segment's creator a
 * private copy in its own memory, which no other process can write (segment_lane is then only
 * its mirror, for observers); for an attacher the segment's record itself. NULL when i is out of
 * range. */
ts_lane *segment_lane_ctl(const segment *s, uint32_t i);

/* The creator's, before lane i's first use: has its ring's pages (a full shared-memory file
 * system then fails here rather than with SIGBUS at a store). 0, or -1 when they cannot be had;
 * a claim is made once per lane. A system call: on a thread's first event only. */
int segment_lane_ready(const segment *s, uint32_t i);

/* The threads that lost events in the window under way, from the lane mirrors: up to max of
 * them, most first, in out; returns how many lanes had losses. */
uint32_t segment_lane_losses(const segment *s, lane_loss *out, uint32_t max);

/* Lanes ever claimed (readers scan this many): the creator's own count, or the header's, capped
 * at the lane count, for an attacher. */
uint32_t segment_lanes_used(const segment *s);

/* Lane i was claimed: the count of lanes used (and its mirror) grows to cover it. */
void segment_lane_claimed(const segment *s, uint32_t i);

/* What `termsight ls` shows about one segment found in /dev/shm. */
typedef struct segment_info {
    pid_t pid;
    int alive;    /* the process exists */
    int readable; /* attach worked; else error says why */
    char shm_name[64];
    char process[64];
    uint32_t state;
    uint64_t events_recorded;
    uint64_t drops;
    uint64_t start_realtime_ns;
    char run_folder[1024];
    char job[64]; /* "" when none */
    int32_t rank, world_size;
    int32_t parent_pid; /* a forked child's session: its parent; else 0 */
    char error[256];
    uint32_t window;   /* collection windows started */
    uint64_t start_ns; /* the collector clock at the segment's creation */
    /* The threads that lost events in the window under way, most first (lane mirrors). */
    uint32_t lost_threads; /* how many did; the first SEGMENT_INFO_LOST are here */
    lane_loss lost[SEGMENT_INFO_LOST];
    uint64_t budget_id, budget_charged; /* the ledger it was charged to, and how much */
    uint64_t program_events;            /* the program's own events taken (header mirror) */
    uint32_t flight_mb;                 /* its flight recorder's MiB; 0: it records as usual */
} segment_info;

/* Lists this user's segments, newest pid last. *out is malloc'd. Returns the count or -1. */
int segment_list(segment_info **out, char **cause);

/* Lists, as segment_list does, this user's segments whose process has ended (no such process, or
 * a zombie not yet waited for) and whose header names budget_id as its ledger (when not 0) or
 * parent as its parent (when > 0). Cheap enough to call every 100 ms: a segment of a process
 * that is still there is never opened. */
int segment_list_ended(uint64_t budget_id, pid_t parent, segment_info **out, char **cause);

/* Removes the segment named name (of pid) when its process no longer maps it. Returns 0, or -1
 * when it is in use, not ours or gone. */
int segment_remove_stale_name(const char *name, pid_t pid, char **cause);

/* Takes the segment named name (of pid, whose process no longer maps it) for one reaper: renames
 * it to "<name>-reap", its path into claimed. 1 when taken; 0 when there is nothing to take (gone,
 * another reaper took it first, or junk that was not a file, removed); -1 with *cause (not ours,
 * in use). */
int segment_claim(const char *name, pid_t pid, char *claimed, size_t cap, char **cause);
#define TS_SEGMENT_CTL_SIZE 4096u /* the control object beside a segment */

/* Removes what segment_claim took, and the control object beside name. */
void segment_remove_claimed(const char *name, const char *claimed);

/* Removes every segment of pid that its process no longer maps: the count removed, or -1 when
 * none could be (in use, not ours, or none there). */
int segment_remove_stale(pid_t pid, char **cause);

/* Removes this user's control objects ("/termsight-<pid>-<hex>-ctl") whose segment is gone and
 * whose process is gone (left by a segment removed by hand, or by an older termsight), and the
 * segments a reaper took and never removed ("-reap": it died): the count removed. */
int segment_remove_orphan_ctls(void);

/* ------------------------------------------------------------------------------------------ */
/* Boards: what a monitor must never miss (board.c)                                           */
/* ------------------------------------------------------------------------------------------ */

/* The collector's recorder sees every event it writes into the recording; as it drains the lanes
 * it runs the step trace and sums every operator, and publishes the results here, in the
 * segment: the last TS_BOARD_STEPS steps with their split, the step totals (averages and the
 * slowest steps over the whole run) and each operator's and kernel's totals since the session
 * began. A monitor reads them whatever the event rate, however long it was away: steps and
 * operator statistics live are exactly what the recording holds, never a sample of the lanes.
 *
 * One writer (the recorder thread of the segment's creator), which never reads back what it
 * wrote; readers go by sequence numbers (a record is whole when its sequence word is even and
 * unchanged across the copy) and bound every index they read. */

#define TS_BOARD_STEPS 512  /* step records kept: the last 512 steps */
#define TS_BOARD_OPS   4096 /* operators and kernels with totals; further ones are counted lost */
#define TS_BOARD_NAMES 1024 /* threads and processes with a name the program gave them */

/* One operator's (or kernel's) totals since the session began. */
typedef struct op_totals {
    uint64_t count, total_ns, self_ns, min_ns, max_ns;
    uint64_t flops, flops_ns, flops_self_ns; /* FLOPs, and the inclusive and self time of the
                                                events that carried them */
} op_totals;

/* Sums b into a (min and max taken); b with no count changes nothing. */
void op_totals_add(op_totals *a, const op_totals *b);

/* The FLOPs an OP_RANGE carries in v0 (an integer, or a double with TS_EF_DOUBLE); a value that
 * is not a count from 1 to 1.8e19, or another kind, counts as none. */
static inline uint64_t event_flops(const ts_event *ev)
{
    if (ev->kind != TS_KIND_OP_RANGE)
        return 0;
    if (!(ev->flags & TS_EF_DOUBLE))
        return ev->v0;
    double d;
    __builtin_memcpy(&d, &ev->v0, sizeof d);
    return d >= 1.0 && d < 1.8e19 ? (uint64_t)d : 0; /* NaN and negatives fail both tests */
}

/* Counts one range or device event into a: its duration, the self time given (nesting_self for
 * ranges; the duration for device work), and its FLOPs (event_flops). What op_totals_add of the
 * event alone would do, without building it: every recorded operator goes through here. */
static inline void op_totals_count(op_totals *a, uint64_t dur, uint64_t self_ns, uint64_t flops)
{
    if (!a->count || dur < a->min_ns)
        a->min_ns = dur;
    if (dur > a->max_ns)
        a->max_ns = dur;
    a->count++;
    a->total_ns += dur;
    a->self_ns += self_ns;
    if (flops) {
        a->flops += flops;
        a->flops_ns += dur;
        a->flops_self_ns += self_ns;
    }
}

/* An event's duration (0 when it ends before it begins). */
static inline uint64_t event_duration(const ts_event *ev)
{
    return ev->end_ns > ev->begin_ns ? ev->end_ns - ev->begin_ns : 0;
}

/* One event as totals (op_totals_count into zeroes). */
op_totals op_totals_of(const ts_event *ev, uint64_t self_ns);

typedef struct ts_step_record {
    /* 2k + 1 while the k-th step (from 0) is written here, 2k + 2 once whole */
    _Atomic uint64_t seq;
    step_row row;
    step_totals tot; /* the totals once this step was counted: rows and sums agree */
} ts_step_record;

typedef struct ts_op_record {
    _Atomic uint64_t seq; /* odd while written */
    uint32_t kind;        /* TS_KIND_OP_RANGE, NVTX_RANGE, KERNEL, MEMCPY or MEMSET */
    uint32_t name, type;  /* string ids: the op and its type; for device kinds, the op they ran
                             under */
    uint32_t flags;       /* TS_EF_COMM: a communication kernel */
    op_totals t;
} ts_op_record;

typedef struct ts_board {
    _Atomic uint64_t totals_seq; /* odd while the totals are written */
    step_totals totals;
    _Atomic uint64_t steps_written; /* step records ever written: the newest is at
                                       (steps_written - 1) % TS_BOARD_STEPS */
    _Atomic uint32_t ops_used;      /* op records in use, from the first */
    _Atomic uint32_t names_used;    /* names records in use, from the first */
    _Atomic uint64_t ops_lost;      /* operator events not on the board (it was full) */
    _Atomic uint64_t published_ns;  /* collector clock, the recorder's last publication */
    /* The names the program gave its threads and processes (termsight_thread_name,
     * termsight_process_name: DataLoader workers), tid << 32 | name id, one word each. */
    _Atomic uint64_t names[TS_BOARD_NAMES];
    _Alignas(64) ts_step_record steps[TS_BOARD_STEPS];
    ts_op_record ops[TS_BOARD_OPS];
} ts_board;

_Static_assert(sizeof(step_row) % 8 == 0 && sizeof(step_totals) % 8 == 0 &&
                   sizeof(op_totals) % 8 == 0 && sizeof(ts_op_record) % 8 == 0,
               "board records are copied word by word");
_Static_assert(offsetof(ts_board, steps) % 64 == 0, "step records start on a cache line");
_Static_assert(offsetof(ts_step_record, row) == 8 &&
                   offsetof(ts_step_record, tot) == 8 + sizeof(step_row),
               "a step record is copied whole after its sequence word");

/* The boards of s, or NULL (a segment too short for them cannot pass segment_validate). */
ts_board *segment_board(const segment *s);

/* The writer's private view (the recorder's), never read back from the segment. */
typedef struct board_writer {
    ts_board *b;
    const segment *seg;
    uint64_t steps;                    /* step records written */
    uint64_t totals;                   /* totals written */
    uint32_t ops;                      /* op records claimed */
    uint32_t ops_ready;                /* op records whose pages are had */
    uint64_t op_puts;                  /* op records written, all of them: their sequence numbers */
    uint32_t names;                    /* names records in use */
    uint32_t name_tid[TS_BOARD_NAMES]; /* their threads */
} board_writer;

/* The creator's: 0, or -1 when s has no boards. */
int board_writer_init(board_writer *w, const segment *s);
/* A finished step with the totals once it was counted, the step totals now, an operator's totals
 * now (index from board_op_new), the operator events that found no room. */
void board_put_step(board_writer *w, const step_row *row, const step_totals *tot);
void board_put_totals(board_writer *w, const step_totals *t);
void board_put_op(board_writer *w, uint32_t i, const op_totals *t);
void board_put_ops_lost(board_writer *w, uint64_t lost, uint64_t now_ns);
/* The collector clock of the writer's last publication (0: none yet). */
uint64_t board_published_ns(const segment *s);
/* Thread (or process) tid is called name now; 0, or -1 when the names board is full. */
int board_put_name(board_writer *w, uint32_t tid, uint32_t name);
/* A new op record for (kind, name, type, flags): its index, or -1 when the board is full or its
 * pages cannot be had. */
int board_op_new(board_writer *w, uint32_t kind, uint32_t name, uint32_t type, uint32_t flags);

/* Readers (any process). The totals: 0, or -1 when they stay torn (a writer that died mid-way)
 * or there is no board. */
int board_get_totals(const segment *s, step_totals *out);
/* Step records ever written (what a reader has seen up to is its own business). */
uint64_t board_steps_written(const segment *s);
/* The steps written from the from-th (0-based) on, oldest first, at most max (the newest max),
 * consecutive: the newest run of them still on the board and whole (a writer that overtakes the
 * copy costs the oldest). tot (may be NULL): the totals once the newest of them was counted,
 * which agree with the rows (the totals record, board_get_totals, may be ahead or behind them).
 * *next: the index after the last one the board had (pass it back as from). Returns how many were
 * copied. */
size_t board_get_steps(const segment *s, uint64_t from, step_row *out, size_t max, uint64_t *next,
                       step_totals *tot);
/* Op records in use (bounded by TS_BOARD_OPS). */
uint32_t board_ops_used(const segment *s);
/* Op record i: 0, or -1 when out of range or torn. */
int board_get_op(const segment *s, uint32_t i, ts_op_record *out);
uint64_t board_ops_lost(const segment *s);
/* Names records in use (bounded by TS_BOARD_NAMES), and record i: 0 with the thread and its name
 * id, or -1 out of range. */
uint32_t board_names_used(const segment *s);
int board_get_name(const segment *s, uint32_t i, uint32_t *tid, uint32_t *name);

/* The sums behind the boards (digest.c): the step trace by the operator options given, and every
 * operator's and kernel's totals. One thread: the segment creator's recorder. */
typedef struct digest digest;

/* name: the bytes of a string id (for the operator options and data fetches). NULL when out of
 * memory or when seg has no boards. */
digest *digest_create(const segment *seg,
                      const char *(*name)(void *ctx, uint32_t id, uint32_t *len), void *name_ctx,
                      const char *fp_start_op, const char *bp_end_op);
void digest_destroy(digest *d);
/* Events the recorder took from the lanes, in the order it writes them. */
void digest_feed(digest *d, const ts_event *ev, size_t n);
/* While pressed (a recorder that falls behind: a lane three quarters full), operators fed are
 * counted as left out (the operator board says so: partial) instead of summed, which costs the
 * recorder nothing; steps are summed whatever the pressure. */
void digest_pressed(digest *d, int pressed);
/* After a drain: the steps that have settled (finish: every ended step, at the session's end)
 * and what changed, onto the boards. now_ns: the collector clock at the drain. */
void digest_publish(digest *d, uint64_t now_ns, int finish);

/* ------------------------------------------------------------------------------------------ */
/* Lanes                                                                                      */
/* ------------------------------------------------------------------------------------------ */

/* The producer's private view of its lane (thread-local in the collector). */
typedef struct lane_writer {
    ts_lane *lane;   /* segment_lane_ctl: what producer and consumer go by */
    ts_lane *mirror; /* segment_lane: the copy observers read; never read back */
    ts_event *ring;
    uint64_t mask;
    uint64_t head;        /* our copy of lane->head */
    uint64_t cached_tail; /* last tail seen, at least ring_from; re-read when the ring looks full */
    uint64_t ring_from;   /* the first index in ring */
    uint64_t ring_off;
    const segment *seg;
    uint32_t open_seq; /* our copy of mirror->open_seq */
} lane_writer;

/* A ring's fields as one reader saw them whole (the lane's sequence lock). */
typedef struct lane_rings {
    uint32_t seq;
    ts_event *ring; /* indexes from `from` on; NULL when the fields name no ring */
    uint32_t events;
    uint64_t off, from;
    ts_event *old; /* indexes below `from`; NULL when none */
    uint32_t old_events;
    uint64_t old_off;
} lane_rings;

/* l's rings as whole fields, checked against s. 0, or -1 when they stay torn (a writer died
 * mid-way or the record is damaged) or name no ring of s. */
int lane_rings_read(const segment *s, const ts_lane *l, lane_rings *out);

/* The producer's slow path, when its ring looks full: takes a larger ring the consumer offered,
 * else re-reads the consumer's tail. 1 when there is room now. No lock, no system call. */
int lane_make_room(lane_writer *w);

/* Claims a free lane of s for thread tid. Returns 0, or -1 when every lane is taken. */
int lane_claim(const segment *s, uint32_t tid, lane_writer *w);

/* The producer's thread ends: the consumer frees the lane once it has drained it. */
void lane_retire(lane_writer *w);

/* Appends ev. No lock, no allocation, no system call. Returns 1, or 0 when the ring is full (the
 * drop is counted in the lane). */
static inline int lane_push(lane_writer *w, const ts_event *ev)
{
    uint64_t h = w->head;
    if (h - w->cached_tail > w->mask && !lane_make_room(w)) {
        uint64_t d = atomic_fetch_add_explicit(&w->lane->drops, 1, memory_order_relaxed);
        atomic_store_explicit(&w->mirror->drops, d + 1, memory_order_relaxed);
        return 0;
    }
    /* Orders the previous head store before this slot's stores, so an observer that copied a
     * half-written slot also sees the head that tells it so (lane_observe). The slot is written
     * as eight words with relaxed atomic stores because that observer may read it concurrently
     * (on x86 both are plain moves). Each word is built from the fields rather than re-read
     * from *ev: reading 8 bytes that were just stored 2 and 4 at a time stalls store-to-load
     * forwarding, about 5 ns an event. */
    atomic_thread_fence(memory_order_release);
    uint64_t *to = (uint64_t *)(void *)&w->ring[h & w->mask];
    __atomic_store_n(&to[0],
                     (uint64_t)ev->kind | (uint64_t)ev->flags << 16 | (uint64_t)ev->tid << 32,
                     __ATOMIC_RELAXED);
    __atomic_store_n(&to[1], (uint64_t)ev->device | (uint64_t)ev->aux << 32, __ATOMIC_RELAXED);
    __atomic_store_n(&to[2], (uint64_t)ev->name | (uint64_t)ev->type << 32, __ATOMIC_RELAXED);
    __atomic_store_n(&to[3], ev->begin_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&to[4], ev->end_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&to[5], ev->corr, __ATOMIC_RELAXED);
    __atomic_store_n(&to[6], ev->v0, __ATOMIC_RELAXED);
    __atomic_store_n(&to[7], ev->v1, __ATOMIC_RELAXED);
    w->head = h + 1;
    atomic_store_explicit(&w->lane->head, h + 1, memory_order_release);
    atomic_store_explicit(&w->mirror->head, h + 1, memory_order_release);
    return 1;
}

/* The producer, on its hot path: publishes its thread's innermost open range (depth 0: none open)
 * in its lane's mirror for monitors, under the open range's sequence lock: two stores of the
 * sequence around four relaxed ones, on the producer's own cache line; nothing read back. */
static inline void lane_open_set(lane_writer *w, uint32_t depth, uint32_t name, uint32_t window,
                                 uint64_t begin_ns)
{
    ts_lane *m = w->mirror;
    uint32_t q = w->open_seq;
    w->open_seq = q + 2;
    atomic_store_explicit(&m->open_seq, q + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&m->open_depth, depth, memory_order_relaxed);
    atomic_store_explicit(&m->open_name, name, memory_order_relaxed);
    atomic_store_explicit(&m->open_window, window, memory_order_relaxed);
    atomic_store_explicit(&m->open_begin_ns, begin_ns, memory_order_relaxed);
    atomic_store_explicit(&m->open_seq, q + 2, memory_order_release);
}

/* ---- Hang triage: what each thread is inside, and the communications in flight ------------- */

/* A thread's innermost open range, or a communication in flight, as a monitor read it whole. */
typedef struct open_range {
    uint32_t tid;   /* the lane's thread; 0 for a communication */
    uint32_t depth; /* ranges open on the thread (1 for a communication) */
    uint32_t name;  /* string id; TS_STR_NONE when deeper than the frames kept */
    uint64_t begin_ns;
} open_range;

/* Reader (any process): the innermost open range of lane l, as published (lane_open_set): 1 and
 * *out when a range is open in collection window `window`, 0 when none is (or it is from another
 * window), -1 when the fields stay torn (a writer died mid-way, or damage). */
int inflight_lane_read(const ts_lane *l, uint32_t window, open_range *out);

/* Reader: the innermost open ranges of s's owned lanes while it collects, up to max of them in
 * out, each checked (a name id within the string table, a begin at or after the segment's start
 * and not after now_ns); returns how many. */
uint32_t inflight_ranges(const segment *s, uint64_t now_ns, open_range *out, uint32_t max);

/* Reader: the communications in flight in s, oldest first, checked as above; up to max in out. */
uint32_t inflight_comms(const segment *s, uint64_t now_ns, open_range *out, uint32_t max);

#define INFLIGHT_RANGES 16 /* threads' open ranges a summary keeps */

/* What one process is inside now, read whole and checked (inflight_read). */
typedef struct inflight_summary {
    uint32_t nranges; /* the threads' innermost open ranges (at most INFLIGHT_RANGES) */
    open_range ranges[INFLIGHT_RANGES];
    int main; /* the one to show: the main thread's (tid == pid), else the longest open; -1 */
    uint32_t ncomms; /* communications in flight, oldest first */
    open_range comms[TS_COMM_SLOTS];
    uint64_t steps;            /* steps ended on the board */
    uint64_t last_step_end_ns; /* the last one's end; 0: none yet */
    uint64_t typical_step_ns;  /* the median of the last steps; 0: unknown */
} inflight_summary;

/* Reader: what s's process is inside at now_ns (the collector clock, tsclock_monotonic_ns). */
void inflight_read(const segment *s, uint64_t now_ns, inflight_summary *out);

/* The creator's private claim on the communication slots (never in the segment, which another
 * process could write). */
typedef struct inflight_claims {
    _Atomic uint32_t busy; /* a bit per slot */
    /* Each slot's sequence, written by its owner for the time it owns it; atomic because a stale
     * ticket's completion may read it while a new owner writes it. */
    _Atomic uint32_t seq[TS_COMM_SLOTS];
} inflight_claims;

/* Any thread of the creator: publishes a communication issued at begin_ns, not yet complete. A
 * ticket for inflight_comm_done, 0 when every slot is taken. No lock, no system call. */
uint64_t inflight_comm_issue(const segment *s, inflight_claims *c, uint32_t name,
                             uint64_t begin_ns);

/* Any thread: the communication of ticket completed; a ticket already done, or 0, does nothing. */
void inflight_comm_done(const segment *s, inflight_claims *c, uint64_t ticket);

/* Events as at most two contiguous runs (a and then b, where a lane's ring wraps): what a drain
 * finds in a lane, and what the recorder, the flight recorder and the recording writer take. A run
 * may be NULL when its count is 0. */
typedef struct lane_run {
    const ts_event *a, *b;
    size_t na, nb;
} lane_run;

/* One contiguous array of n events as a run. */
static inline lane_run lane_run_of(const ts_event *ev, size_t n)
{
    return (lane_run){.a = ev, .na = n};
}

/* The events in a run. */
static inline size_t lane_run_count(const lane_run *r)
{
    return r->na + r->nb;
}

/* Event k (below lane_run_count) of a run. */
static inline const ts_event *lane_run_at(const lane_run *r, size_t k)
{
    return k < r->na ? &r->a[k] : &r->b[k - r->na];
}

/* The first events of *rest, at most max, into *piece, and *rest stepped past them: how many. */
size_t lane_run_take(lane_run *rest, size_t max, lane_run *piece);

/* Consumer: the events published and not yet consumed, as at most two contiguous runs of one
 * ring (of the old ring first, while the consumer has not passed it: a later peek has the rest),
 * into *out. Returns the total; release them with lane_consume. head and tail come from shared
 * memory and are clamped so that a damaged lane yields at most one ring's worth. */
size_t lane_peek(const segment *s, uint32_t i, lane_run *out);
/* The same from index `from` on instead of the tail (a reader that does not consume). */
size_t lane_peek_at(const segment *s, uint32_t i, uint64_t from, lane_run *out);
/* Releases n events; an old ring the consumer has passed goes back to the grow region. */
void lane_consume(const segment *s, uint32_t i, size_t n);

/* The size of lane i's ring now (0 when its fields name no ring). */
uint32_t lane_capacity(const segment *s, uint32_t i);

/* Consumer, the segment's creator: makes a ring of `events` ready for lane i, had bytes at a time
 * (a large ring's pages cost milliseconds: the drains go on between), then offers it; the
 * producer takes it when its ring is full. Returns 1 when a ring was offered or is waiting to be
 * taken, 0 while pages are being had, -1 when lane i cannot grow now (no budget, shared memory
 * full, its old ring not yet passed, or events not larger than its ring). A call with events 0
 * only goes on with a ring begun before. */
int lane_grow(const segment *s, uint32_t i, uint32_t events, uint64_t bytes);

/* Consumer: a retired lane that is fully drained becomes free. Returns 1 when it was freed. */
int lane_reclaim(const segment *s, uint32_t i);

/* Observer (another process, read-only): copies up to max events from *cursor onward into out,
 * never writing to the lane. Events the producer overwrote before or during the copy are not
 * returned and are added to *missed; *cursor advances past what was returned or missed. */
size_t lane_observe(const segment *s, uint32_t i, uint64_t *cursor, ts_event *out, size_t max,
                    uint64_t *missed);

/* ------------------------------------------------------------------------------------------ */
/* String table                                                                               */
/* ------------------------------------------------------------------------------------------ */

#define TS_STR_NONE     0u /* "" */
#define TS_STR_OVERFLOW 1u /* "<names table full>" */

/* Process-local writer over the segment's table: lookups are lock-free, inserts serialize on a
 * mutex (first use of a name only). */
typedef struct strtab strtab;

/* Creates the writer and publishes the reserved ids. */
int strtab_create(const segment *s, strtab **out, char **cause);
void strtab_destroy(strtab *t);

/* The id of these bytes (any bytes, len up to TS_NAME_MAX; longer is cut and *truncated set when
 * truncated is not NULL). A full table yields TS_STR_OVERFLOW and counts the miss. */
uint32_t strtab_intern(strtab *t, const char *bytes, size_t len, int *truncated);

/* Ids interned so far (the writer's own count). */
uint32_t strtab_count(const strtab *t);

/* The writer's lookup: the bytes of id, or NULL when id was not interned or its entry, which
 * lives in shared memory, is out of bounds. */
const char *strtab_name(const strtab *t, uint32_t id, uint32_t *len);

/* Reader (any process): the bytes of id, or NULL when id is unpublished or its entry is out of
 * bounds. */
const char *strtab_get(const segment *s, uint32_t id, uint32_t *len);

/* ------------------------------------------------------------------------------------------ */
/* Control mailbox                                                                            */
/* ------------------------------------------------------------------------------------------ */

enum ts_cmd {
    TS_CMD_NONE = 0,
    TS_CMD_START = 1,
    TS_CMD_STOP = 2,
    TS_CMD_FLUSH = 3,
    TS_CMD_MARK = 4,     /* arg: the mark's text */
    TS_CMD_SNAPSHOT = 5, /* flight recorder: write the events kept; arg: why; answer: the folder */
};

#define TS_MAILBOX_ARG 256
#define TS_MAILBOX_MSG 256

/* The mailbox, in the segment's control object. req_seq is even when stable and odd while a
 * frontend writes a command; the collector answers by setting ack_seq to the request's sequence. */
struct ts_mailbox {
    _Atomic uint64_t req_seq;
    _Atomic uint64_t ack_seq;
    _Atomic uint32_t cmd;
    _Atomic int32_t status;
    char arg[TS_MAILBOX_ARG];
    char msg[TS_MAILBOX_MSG];
};

/* The collector's memory of a frontend's unfinished claim, to release it when abandoned. */
typedef struct mailbox_state {
    uint64_t odd_seq;
    uint32_t polls;
} mailbox_state;

/* Polls after which an unfinished claim counts as abandoned. */
#define TS_MAILBOX_STALE_POLLS 200

/* "start", "stop", "flush", "mark", "snapshot", or NULL. */
const char *mailbox_cmd_name(uint32_t cmd);

/* Frontend: posts cmd. Fails when another frontend's command is still unanswered. */
int mailbox_send(const segment *s, uint32_t cmd, const char *arg, uint64_t *seq, char **cause);

/* Frontend: 1 when seq has been answered (status: 0 or a negative termsight error code; msg
 * copied, NUL-terminated), 0 while pending. */
int mailbox_reply(const segment *s, uint64_t seq, int32_t *status, char *msg, size_t msglen);

/* Collector: 1 and the command when a new one is waiting, else 0. A claim abandoned by a frontend
 * that died while writing is released after TS_MAILBOX_STALE_POLLS polls. */
int mailbox_take(const segment *s, mailbox_state *st, uint64_t *seq, uint32_t *cmd, char *arg,
                 size_t arglen);

/* Collector: answers seq. */
void mailbox_answer(const segment *s, uint64_t seq, int32_t status, const char *msg);

/* ------------------------------------------------------------------------------------------ */
/* Recording                                                                                  */
/* ------------------------------------------------------------------------------------------ */

/* A recording is one append-only file of chunks, written by one process: a 24-byte chunk header
 * (magic, type, flags, payload length, checksum, sequence number) and the payload, padded to 8
 * bytes. The checksum (CRC-32C since format 2, CRC-32 before; the flags name it) covers the
 * header's other fields and the padded payload. A reader
 * resynchronizes on the next valid chunk after damage, so a file cut short or with flipped bytes
 * still yields every whole chunk. */

#define TS_RECORDING_MAJOR  2 /* recording_meta.major: incompatible changes (2: CRC-32C) */
#define TS_RECORDING_MINOR  0 /* recording_meta.minor: compatible additions */
#define TS_RECORDING_OLDEST 1 /* the oldest major still read */
#define TS_RECORDING_FILE   "events.tsr"
#define TS_RECORDING_DIR    "recording"
/* A run folder's flight-recorder snapshots: snapshots/NN-cause[-stepN]/, each a run folder of its
 * own (a recording/ folder, and the report once analysed). */
#define TS_SNAPSHOT_DIR "snapshots"
/* Beside the recording while it is written: disk space kept so that a recording that a full disk
 * stopped can still be closed with a note of what was lost. Removed at the end. */
#define TS_RECORDING_RESERVE "events.reserve"

enum ts_chunk_type {
    TS_CHUNK_META = 1,    /* recording_meta */
    TS_CHUNK_STRINGS = 2, /* names for consecutive ids */
    TS_CHUNK_EVENTS = 3,  /* ts_event records */
};

typedef struct recording_meta {
    uint32_t major, minor; /* recording format */
    int32_t pid;
    char process[64];
    char clock[16];
    uint64_t start_realtime_ns;
    uint64_t start_ns;
    char host[64];
} recording_meta;

typedef struct recording_writer recording_writer;

/* Creates dir (and parents) mode 0700 and appends to dir/events.tsr (created 0600, never through a
 * symbolic link), starting with a META chunk. dir, and its parent when dir is a run folder's
 * recording/ folder, must be folders of this user and not symbolic links: else -1. */
int recording_writer_open(const char *dir, const recording_meta *meta, recording_writer **out,
                          char **cause);

/* The same in the folder open as dirfd (dir names it in messages): dir/events.tsr opened there,
 * never through a link, and only when it is a regular file of this user. */
int recording_writer_openat(int dirfd, const char *dir, const recording_meta *meta,
                            recording_writer **out, char **cause);

/* STRINGS chunks holding ids first .. first+count-1 (one, or several over 16 MiB). */
int recording_append_strings(recording_writer *w, uint32_t first, uint32_t count,
                             const char *const *bytes, const uint32_t *lens, char **cause);

/* One or more EVENTS chunks holding the events of run, in order (lane_run_of for one array). */
int recording_append_events(recording_writer *w, lane_run run, char **cause);

/* Everything appended so far reaches the disk (fdatasync). */
int recording_sync(recording_writer *w, char **cause);

uint64_t recording_bytes(const recording_writer *w);

/* Events appended so far. A recording_append_events that fails has still written the events of
 * the chunks it finished before the failure: they count here, and are in the file. */
uint64_t recording_events(const recording_writer *w);

int recording_writer_close(recording_writer *w, char **cause);

/* After a collector's process ended without closing its session (a signal, _exit): appends to
 * the recording in dir what its segment (attached; read-only is enough) still holds: the names
 * the recorder had not written, the events every lane held past its last drain, a stop marker for
 * a window left open and a CONFIG event "ended" whose value is why. *events: the lanes' events
 * copied. Returns 0 (nothing done when the session never opened a window or closed its recording
 * itself), -1 with *cause when the recording cannot be written. */
int recording_salvage(const segment *seg, const char *dir, const char *why, uint64_t *events,
                      char **cause);

/* Appends names [from, to) of seg's string table to w (an unpublished or damaged entry as "").
 * 0, or -1 with *cause. */
int recording_copy_names(const segment *seg, recording_writer *w, uint32_t from, uint32_t to,
                         char **cause);

/* A segment whose process is gone (info from segment_list): what its lanes still held goes
 * into its recording (recording_salvage, why as the "ended" note; only when its run folder lies
 * under within, unless within is NULL; a relative one, which older collectors wrote, only when
 * segment_run_folder can resolve it), then the segment is removed, and what it held of ledger
 * given back (when the segment was charged to that ledger; NULL: none). One reaper at a time: the
 * segment is first renamed out of the way ("<name>-reap"), and a segment another reaper took
 * meanwhile is left to it (0, nothing done). *events: the events recovered. 0, or -1 with *cause
 * (the first thing that failed; the rest is still done). */
int segment_reap(const segment_info *info, const char *why, const char *within,
                 ts_shm_budget *ledger, uint64_t *events, char **cause);

typedef struct recording_reader recording_reader;

/* Opens a recording file, a recording/ folder or a run folder holding one. */
int recording_reader_open(const char *path, recording_reader **out, char **cause);

/* Next batch of events, in file order: 1 with *ev, *n set (valid until the next call), 0 at the
 * end, -1 on a read error. STRINGS and META chunks are absorbed on the way. */
int recording_reader_next(recording_reader *r, const ts_event **ev, size_t *n, char **cause);

/* A name seen so far, or NULL. */
const char *recording_reader_string(const recording_reader *r, uint32_t id, uint32_t *len);

/* The first META chunk, or NULL before it was read. */
const recording_meta *recording_reader_meta(const recording_reader *r);

/* Damage seen so far: bytes skipped and chunks refused (bad checksum, bad length, cut short). */
uint64_t recording_reader_skipped_bytes(const recording_reader *r);
uint64_t recording_reader_bad_chunks(const recording_reader *r);

/* The bytes the reader reads: the file's size when it was opened. A recording still being
 * written is read up to there and no further (the chunk its writer was writing then is the end,
 * not damage), so reading ends whatever the writer does; *grown (may be NULL): how many bytes
 * the file has now past that size, 0 when none. */
uint64_t recording_reader_extent(const recording_reader *r, uint64_t *grown);

/* What reading cost so far: bytes read from the file, bytes checksummed (valid chunks and
 * candidates that failed), bytes held for names. Reading is linear in the bytes the file holds
 * (holes of a sparse file are jumped over, failed checksums are bounded by a multiple of the
 * bytes passed), and names cost a bounded multiple of their chunks (README: RELIABILITY). */
typedef struct recording_reader_work {
    uint64_t bytes_read;
    uint64_t bytes_checked;
    uint64_t name_memory;
} recording_reader_work;
recording_reader_work recording_reader_work_done(const recording_reader *r);

void recording_reader_close(recording_reader *r);

#endif
