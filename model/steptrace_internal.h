/* steptrace's internals shared by steptrace.c (attributing events to steps, finalizing them in
 * order) and steptrace_split.c (a finalized step's phases, overlap, split and gaps). Only those
 * include it. */
#ifndef TERMSIGHT_MODEL_STEPTRACE_INTERNAL_H
#define TERMSIGHT_MODEL_STEPTRACE_INTERNAL_H

#include "index_map.h"
#include "model.h"
#include "spans.h"

#define MAX_OPEN      64             /* unfinalized steps; the oldest is finalized beyond */
#define LAG_STEPS     4              /* a step waits for this many later steps to end ... */
#define LAG_NS        1000000000ull  /* ... and for a step end this far past its own */
#define HOLD_MAX      (1u << 19)     /* records held (pending and open steps), 16 MiB */
#define GAPS_KEEP     32             /* largest gaps kept for steptrace_gaps */
#define WINDOW_STARTS 8              /* recent collection window starts, for step windows */
#define NAME_CACHE    4096           /* direct-mapped cache in front of the name flags */
#define SLOTS         (MAX_OPEN + 1) /* one spare for the step being inserted */

/* The order matters: the intervals that carry on past their step come first (up to REC_SYNC),
 * the evaluation marks last. */
enum rec_class {
    REC_HOST,   /* top-level host op (OP_RANGE / NVTX_RANGE with depth 0), any thread */
    REC_KERNEL, /* device kernel, computation */
    REC_COMM,   /* communication: TS_EF_COMM kernel or range, or COMM_OP */
    REC_COPY,   /* device copy or memset */
    REC_SYNC,   /* a thread waiting for the device (a synchronization whose thread is known) */
    REC_FWD,    /* phase mark: forward start */
    REC_BWD,    /* phase mark: backward end */
    REC_LAUNCH, /* a CUDA runtime or driver API call: its begin, and corr */
    REC_EVAL_B, /* phase mark: an evaluation pass begins */
    REC_EVAL_E, /* phase mark: an evaluation pass ends */
};

enum rec_flag {
    RF_CARRY = 1,  /* the part of an interval that runs on past its step: overlap only */
    RF_DEVICE = 2, /* device work (a kernel) */
};

enum name_flag {
    NF_FP = 1,    /* matches the forward-start op option */
    NF_BP = 2,    /* matches the backward-end op option */
    NF_FETCH = 4, /* a data fetch (get_next, GetNext, data fetch, DataLoader, next batch) */
    NF_KNOWN = 0x80,
};

#define REC_NO_DEVICE 255 /* rec.dev of a host record */

typedef struct rec {
    uint64_t begin, end;
    uint32_t name, tid;
    uint32_t corr; /* device records and launches: the correlation id (0: none) */
    uint8_t cls, flags;
    uint8_t nf;  /* enum name_flag, set while finalizing */
    uint8_t dev; /* device records: the device index (254 for 254 and above), else
                    REC_NO_DEVICE */
} rec;

typedef struct slot {
    uint64_t number;
    uint64_t begin, end, lo; /* markers, and the window start */
    uint32_t tid;            /* the thread that marks steps: its ops drive FP/BP and gaps */
    uint8_t has_begin, has_end, has_lo, used;
    rec *recs;
    uint32_t n, cap;
} slot;

typedef struct name_cache_entry {
    uint32_t id;
    uint8_t flags; /* 0: empty */
} name_cache_entry;

struct steptrace {
    steptrace_hooks hooks;
    slot slots[SLOTS];
    slot *open[SLOTS]; /* open steps by number */
    uint32_t nopen;

    rec *pending;
    size_t npending, cap_pending;
    size_t slot_recs; /* records held by open steps */
    uint64_t horizon; /* latest step end seen */

    int have_final; /* the last finalized step, for the next window's start */
    uint64_t final_number, final_end;
    uint64_t window_start[WINDOW_STARTS];
    uint32_t nwindow;
    uint64_t eval_end[WINDOW_STARTS]; /* recent evaluation passes' ends */
    uint32_t neval;

    int have_current;
    uint64_t current_begin;

    step_totals tot; /* sums, the slowest steps, what is not in the trace */

    step_row *recent; /* ring of the last finalized rows */
    uint32_t recent_cap, recent_n, recent_head;

    op_gap gaps[GAPS_KEEP]; /* largest first */
    uint32_t ngaps;

    char *fp_opt, *bp_opt; /* the operator options in force, NULL when none */
    index_map name_map;    /* name id -> index in name_flags */
    uint8_t *name_flags;
    uint32_t nnames, cap_names;
    name_cache_entry cache[NAME_CACHE];

    span *sa, *sb, *sw, *sx, *tmp; /* scratch for finalizing, grown to the largest step */
    size_t cap_span;
    size_t
        ncomm; /* disjoint communication spans in sb, from steptrace_split_overlap for the gaps */
};

/* The flags (enum name_flag) of name id under the operator options in force. */
uint8_t steptrace_name_flags(steptrace *st, uint32_t id);

/* Idle time on the step's thread between consecutive top-level ops, inside [fp, bp], less the
 * time communication (st->sb, st->ncomm spans) is in flight. */
uint64_t steptrace_split_gaps(steptrace *st, const slot *s, uint64_t fp, uint64_t bp);

/* Union of computation and of communication over [lo, hi], their overlap, and from them the
 * split (step_split). */
void steptrace_split_overlap(steptrace *st, const slot *s, uint64_t lo, uint64_t hi, step_row *row);

/* Forward start and backward end: marks, else the operator options, else the default rule. */
void steptrace_split_phases(steptrace *st, slot *s, uint64_t lo, uint64_t hi, step_row *row);

/* The step on the device (steptrace_device.c): after the phases and the gaps (it uses st->sb).
 * Spans for s->n + 2 records must be had. */
void steptrace_split_device(steptrace *st, const slot *s, uint64_t lo, uint64_t hi, step_row *row);

#endif
