/* board: the step and operator boards in the segment (board.h explains what they hold).
 *
 * A sequence lock per record: the writer makes the record's sequence word odd, stores the words
 * (relaxed atomics: a reader may copy them meanwhile), then makes it even with a release store;
 * a reader copies between an acquire load of the word and a second load after an acquire fence,
 * and keeps the copy only when both are the same even value. Step records carry their place in
 * the sequence of steps in that word, so a reader also knows which step it copied. */
#include "model.h"

#include <string.h>

#define READ_TRIES 64 /* copies of a record tried while the writer keeps rewriting it */

void op_totals_add(op_totals *a, const op_totals *b)
{
    if (!b->count)
        return;
    if (!a->count || b->min_ns < a->min_ns)
        a->min_ns = b->min_ns;
    if (b->max_ns > a->max_ns)
        a->max_ns = b->max_ns;
    a->count += b->count;
    a->total_ns += b->total_ns;
    a->self_ns += b->self_ns;
    a->flops += b->flops;
    a->flops_ns += b->flops_ns;
    a->flops_self_ns += b->flops_self_ns;
}

op_totals op_totals_of(const ts_event *ev, uint64_t self_ns)
{
    op_totals t = {0};
    op_totals_count(&t, event_duration(ev), self_ns, event_flops(ev));
    return t;
}

ts_board *segment_board(const segment *s)
{
    return segment_at(s, segment_geometry_of(s)->board_off, sizeof(ts_board));
}

/* ---- The writer --------------------------------------------------------------------------- */

int board_writer_init(board_writer *w, const segment *s)
{
    memset(w, 0, sizeof *w);
    w->b = segment_board(s);
    w->seg = s;
    return w->b ? 0 : -1;
}

void board_put_step(board_writer *w, const step_row *row, const step_totals *tot)
{
    uint64_t k = w->steps++;
    ts_step_record *r = &w->b->steps[k % TS_BOARD_STEPS];
    atomic_store_explicit(&r->seq, 2 * k + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    words_store(&r->row, row, sizeof *row);
    words_store(&r->tot, tot, sizeof *tot);
    atomic_store_explicit(&r->seq, 2 * k + 2, memory_order_release);
    atomic_store_explicit(&w->b->steps_written, k + 1, memory_order_release);
}

void board_put_totals(board_writer *w, const step_totals *t)
{
    uint64_t k = w->totals++;
    atomic_store_explicit(&w->b->totals_seq, 2 * k + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    words_store(&w->b->totals, t, sizeof *t);
    atomic_store_explicit(&w->b->totals_seq, 2 * k + 2, memory_order_release);
}

void board_put_op(board_writer *w, uint32_t i, const op_totals *t)
{
    if (i >= w->ops)
        return;
    ts_op_record *r = &w->b->ops[i];
    /* Every rewrite of any record takes the next of the writer's own numbers (never read back
     * from the segment): odd while it writes, even once whole, never the same twice. */
    uint64_t k = ++w->op_puts;
    atomic_store_explicit(&r->seq, 2 * k + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    words_store(&r->t, t, sizeof *t);
    atomic_store_explicit(&r->seq, 2 * k + 2, memory_order_release);
}

void board_put_ops_lost(board_writer *w, uint64_t lost, uint64_t now_ns)
{
    atomic_store_explicit(&w->b->ops_lost, lost, memory_order_relaxed);
    atomic_store_explicit(&w->b->published_ns, now_ns, memory_order_relaxed);
}

int board_put_name(board_writer *w, uint32_t tid, uint32_t name)
{
    uint32_t i = 0;
    while (i < w->names && w->name_tid[i] != tid)
        i++;
    if (i == TS_BOARD_NAMES)
        return -1;
    atomic_store_explicit(&w->b->names[i], (uint64_t)tid << 32 | name, memory_order_relaxed);
    if (i == w->names) {
        w->name_tid[w->names++] = tid;
        atomic_store_explicit(&w->b->names_used, w->names, memory_order_release);
    }
    return 0;
}

int board_op_new(board_writer *w, uint32_t kind, uint32_t name, uint32_t type, uint32_t flags)
{
    if (w->ops == TS_BOARD_OPS)
        return -1;
    if (w->ops == w->ops_ready) {
        /* The op records' pages are had as they are needed, a page's worth at a time: a run
         * with few operators costs a few pages of shared memory. */
        uint64_t off = segment_geometry_of(w->seg)->board_off + offsetof(ts_board, ops) +
                       (uint64_t)w->ops * sizeof(ts_op_record);
        uint32_t n = 4096 / sizeof(ts_op_record) + 1;
        if (n > TS_BOARD_OPS - w->ops)
            n = TS_BOARD_OPS - w->ops;
        if (segment_populate(w->seg, off, (uint64_t)n * sizeof(ts_op_record)) != 0)
            return -1;
        w->ops_ready += n;
    }
    uint32_t i = w->ops++;
    ts_op_record *r = &w->b->ops[i];
    ts_op_record fresh = {.kind = kind, .name = name, .type = type, .flags = flags};
    atomic_store_explicit(&r->seq, 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    words_store((uint8_t *)r + 8, (const uint8_t *)&fresh + 8, sizeof fresh - 8);
    atomic_store_explicit(&r->seq, 2, memory_order_release);
    atomic_store_explicit(&w->b->ops_used, w->ops, memory_order_release);
    return (int)i;
}

/* ---- Readers ------------------------------------------------------------------------------ */

/* Copies bytes of a record guarded by *seq into out: the even sequence it was copied at, or 0
 * when every try found it torn. */
static uint64_t read_record(const _Atomic uint64_t *seq, const void *data, void *out, size_t bytes)
{
    for (int tries = 0; tries < READ_TRIES; tries++) {
        uint64_t s1 = atomic_load_explicit(seq, memory_order_acquire);
        if (s1 & 1)
            continue;
        words_load(out, data, bytes);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(seq, memory_order_relaxed) == s1)
            return s1 ? s1 : 2; /* 0: never written, whole (zeroes) */
    }
    return 0;
}

int board_get_totals(const segment *s, step_totals *out)
{
    const ts_board *b = segment_board(s);
    memset(out, 0, sizeof *out);
    if (!b || !read_record(&b->totals_seq, &b->totals, out, sizeof *out))
        return -1;
    if (out->nslowest > 5)
        out->nslowest = 5;
    return 0;
}

uint64_t board_steps_written(const segment *s)
{
    const ts_board *b = segment_board(s);
    return b ? atomic_load_explicit(&b->steps_written, memory_order_acquire) : 0;
}

size_t board_get_steps(const segment *s, uint64_t from, step_row *out, size_t max, uint64_t *next,
                       step_totals *tot)
{
    const ts_board *b = segment_board(s);
    uint64_t written = board_steps_written(s);
    *next = written;
    if (!b || !max)
        return 0;
    uint64_t k = written > TS_BOARD_STEPS && from < written - TS_BOARD_STEPS
                     ? written - TS_BOARD_STEPS
                     : from;
    if (written - k > max && written >= max)
        k = written - max; /* the newest max of them */
    size_t n = 0;
    ts_step_record rec;
    for (; k < written && n < max; k++) {
        const ts_step_record *r = &b->steps[k % TS_BOARD_STEPS];
        /* A record rewritten for a later step is gone, not torn: only 2k + 2 is step k. The
         * writer overwrites oldest first, so what was copied before a gone one is as old: the
         * steps handed back are the consecutive ones after it. */
        if (read_record(&r->seq, &r->row, &rec.row, sizeof rec - 8) == 2 * k + 2) {
            out[n++] = rec.row;
            if (tot)
                *tot = rec.tot;
        } else {
            n = 0;
        }
    }
    if (tot && n && tot->nslowest > 5)
        tot->nslowest = 5;
    return n;
}

/* A count of records in use as the writer published it, bounded by the board's size. */
static uint32_t used_of(const _Atomic uint32_t *used, uint32_t max)
{
    uint32_t n = atomic_load_explicit(used, memory_order_acquire);
    return n > max ? max : n;
}

uint32_t board_ops_used(const segment *s)
{
    const ts_board *b = segment_board(s);
    return b ? used_of(&b->ops_used, TS_BOARD_OPS) : 0;
}

int board_get_op(const segment *s, uint32_t i, ts_op_record *out)
{
    const ts_board *b = segment_board(s);
    if (!b || i >= TS_BOARD_OPS)
        return -1;
    const ts_op_record *r = &b->ops[i];
    if (!read_record(&r->seq, (const uint8_t *)r + 8, (uint8_t *)out + 8, sizeof *out - 8))
        return -1;
    out->seq = 0;
    return 0;
}

uint32_t board_names_used(const segment *s)
{
    const ts_board *b = segment_board(s);
    return b ? used_of(&b->names_used, TS_BOARD_NAMES) : 0;
}

int board_get_name(const segment *s, uint32_t i, uint32_t *tid, uint32_t *name)
{
    const ts_board *b = segment_board(s);
    if (!b || i >= TS_BOARD_NAMES)
        return -1;
    uint64_t v = atomic_load_explicit(&b->names[i], memory_order_relaxed);
    *tid = (uint32_t)(v >> 32);
    *name = (uint32_t)v;
    return 0;
}

uint64_t board_published_ns(const segment *s)
{
    const ts_board *b = segment_board(s);
    return b ? atomic_load_explicit(&b->published_ns, memory_order_relaxed) : 0;
}

uint64_t board_ops_lost(const segment *s)
{
    const ts_board *b = segment_board(s);
    return b ? atomic_load_explicit(&b->ops_lost, memory_order_relaxed) : 0;
}
