/* model: the event record, one fixed-size record for every kind (event.c). */
#ifndef TERMSIGHT_MODEL_EVENT_H
#define TERMSIGHT_MODEL_EVENT_H

#include <stddef.h>
#include <stdint.h>

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

#endif
