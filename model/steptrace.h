/* model: the step trace, what a step is and how its time splits (steptrace.c). */
#ifndef TERMSIGHT_MODEL_STEPTRACE_H
#define TERMSIGHT_MODEL_STEPTRACE_H

#include "event.h"

/* What a step is and how its time splits, one definition for every room that needs it. */

/* How a step's forward start and backward end were found. */
enum step_source {
    STEP_SOURCE_NONE = 0,   /* no operator in the step: FP/BP unknown */
    STEP_SOURCE_MARKS = 1,  /* phase marks (termsight_phase_mark) */
    STEP_SOURCE_OPTION = 2, /* operator names given by option or PROFILING_FP_START/BP_END */
    STEP_SOURCE_AUTO = 3,   /* the default rule: first op; op before the last communication */
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
    /* Overlap (steptrace.c: computation against communication) over [begin, end], a partition of
     * its own: overlap_compute + pure_comm + free = total. */
    uint64_t overlap_compute_ns; /* union of computation (kernels; without device work, host ops) */
    uint64_t comm_ns;            /* union of communication (TS_EF_COMM kernels, COMM_OP) */
    uint64_t pure_comm_ns;       /* communication not overlapped by computation */
    uint64_t free_ns;            /* neither */
    uint64_t gap_ns;             /* idle time between consecutive top-level ops in FP/BP, less the
                                    time communication is in flight (that is comm_wait) */
    /* The top-level host ops of the step's thread in [begin, end]: how many, and their time. */
    uint64_t ops, ops_ns;
    /* The step on the device (steptrace.c's comment), when the window holds device work: the
     * device that ran most of it (TS_DEVICE_HOST: none), its busy time (the union of its kernels,
     * copies and memsets on every stream) and its idle time by cause, a partition of its own:
     * gpu_busy + gpu_idle_data + gpu_idle_host + gpu_idle_sync + gpu_idle_other = total. */
    uint32_t gpu_device;
    uint32_t gpu_pad;
    uint64_t gpu_busy_ns;
    uint64_t gpu_idle_data_ns;  /* the step's thread waits for data */
    uint64_t gpu_idle_host_ns;  /* the device has nothing queued while the host runs: host-bound */
    uint64_t gpu_idle_sync_ns;  /* the host waits for the device, or launches again after it did */
    uint64_t gpu_idle_other_ns; /* work is queued and does not run yet (dependencies, latency) */
} step_row;

/* What the step trace has summed over its finalized steps. */
typedef struct step_totals {
    uint64_t steps;        /* finalized */
    uint64_t current_step; /* the last step begun */
    /* Sums of the step_row fields of the same names: */
    uint64_t fpbp_ns, total_ns;
    uint64_t interval_ns, compute_ns, comm_wait_ns, tail_ns, eval_ns; /* the split */
    uint64_t overlap_compute_ns, comm_ns, pure_comm_ns, free_ns, gap_ns;
    /* The steps with device work: how many, their total time and the sums of their device split. */
    uint64_t gpu_steps, gpu_total_ns, gpu_busy_ns;
    uint64_t gpu_idle_data_ns, gpu_idle_host_ns, gpu_idle_sync_ns, gpu_idle_other_ns;
    uint32_t gpu_device; /* the latest step's device (TS_DEVICE_HOST: no step had one) */
    uint32_t gpu_pad;
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

#endif
