/* model: the boards, what a monitor must never miss (board.c). */
#ifndef TERMSIGHT_MODEL_BOARD_H
#define TERMSIGHT_MODEL_BOARD_H

#include "event.h"
#include "segment.h"
#include "steptrace.h"

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

#endif
