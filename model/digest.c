/* digest: what the recorder writes, summed for monitors on the segment's boards (board.h): the
 * step trace (steptrace.c, the definition the report uses) and every operator's and kernel's
 * totals since the session began. The collector's recorder feeds it each chunk it writes, before
 * the chunk's slots go back to their thread, and publishes after each drain; all of it on the
 * recorder thread, so the training threads pay nothing for it.
 *
 * Steps are finalized when their end lies SETTLE_NS behind the newest drain (the other lanes'
 * events of the step have been drained by then), or SETTLE_DEVICE_NS once device work was seen
 * (kernels come in CUPTI's buffers, later), not only as later steps end: a step shows while the
 * next one runs, a validation pass between two steps delays nothing. */
#include "index_map.h"
#include "model.h"

#include <stdlib.h>
#include <string.h>

#define SETTLE_NS        50000000ull   /* 50 ms */
#define SETTLE_DEVICE_NS 2000000000ull /* 2 s: CUPTI hands over its buffers about every second */
#define KEY_CACHE_BITS   12 /* a direct-mapped cache of 4096 keys in front of the key map */
#define KEY_CACHE        (1u << KEY_CACHE_BITS)

typedef struct key_slot {
    uint64_t key; /* 0: empty (no key is 0: kinds are not 0) */
    uint32_t op;
} key_slot;

struct digest {
    const char *(*name)(void *ctx, uint32_t id, uint32_t *len);
    void *name_ctx;
    steptrace *steps;
    nesting *nest;
    board_writer board;
    int steps_fed;   /* step kinds fed since the last publication */
    int have_steps;  /* a step marker came: the step trace wants operators from then on */
    int device_seen; /* device work: steps wait longer for their kernels */
    index_map keys;  /* op key -> op index (the same on the board) */
    key_slot cache[KEY_CACHE];
    op_totals *ops; /* TS_BOARD_OPS, since the session began */
    uint8_t *dirty; /* ops changed since the last publication */
    uint32_t *changed;
    uint32_t nchanged;
    uint64_t lost; /* operator events not summed: no room on the board, or fed while pressed */
    int pressed;   /* digest_pressed: operators are counted lost, not summed */
    /* The nesting stack of the last range's kind and thread: a drain hands over a thread's
     * events in a row. */
    nesting_stack *stack;
    uint64_t stack_key;
};

/* Kind, communication flag, name and type in one key. */
static inline uint64_t op_key(const ts_event *ev)
{
    /* name | type << 32 in one load, then the kind and the communication flag in the name's top
     * byte, which string ids (below 2^24) leave free. */
    uint64_t w;
    memcpy(&w, &ev->name, sizeof w);
    return (w & 0xffffffff00ffffffull) | (uint64_t)(ev->kind & 0x7f) << 24 |
           (uint64_t)(ev->flags & TS_EF_COMM) << 29;
}

static const char *digest_name(void *ctx, uint32_t id, uint32_t *len)
{
    const digest *d = ctx;
    return d->name ? d->name(d->name_ctx, id, len) : NULL;
}

static void digest_row(void *ctx, const step_row *row)
{
    digest *d = ctx;
    board_put_step(&d->board, row, steptrace_totals(d->steps));
}

digest *digest_create(const segment *seg,
                      const char *(*name)(void *ctx, uint32_t id, uint32_t *len), void *name_ctx,
                      const char *fp_start_op, const char *bp_end_op)
{
    digest *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->name = name;
    d->name_ctx = name_ctx;
    steptrace_hooks h = {.ctx = d, .name = digest_name, .row = digest_row};
    d->steps = steptrace_create(&h, 0);
    d->nest = nesting_create();
    d->ops = calloc(TS_BOARD_OPS, sizeof *d->ops);
    d->dirty = calloc(TS_BOARD_OPS, 1);
    d->changed = calloc(TS_BOARD_OPS, sizeof *d->changed);
    if (!d->steps || !d->nest || !d->ops || !d->dirty || !d->changed ||
        board_writer_init(&d->board, seg) != 0) {
        digest_destroy(d);
        return NULL;
    }
    steptrace_set_options(d->steps, fp_start_op, bp_end_op);
    return d;
}

void digest_destroy(digest *d)
{
    if (!d)
        return;
    steptrace_destroy(d->steps);
    nesting_destroy(d->nest);
    index_map_free(&d->keys);
    free(d->ops);
    free(d->dirty);
    free(d->changed);
    free(d);
}

/* The op index of an event's key, claiming a board record for a new one; -1 when the board is
 * full (the event is counted lost). */
static inline int op_of(digest *d, const ts_event *ev)
{
    uint64_t key = op_key(ev);
    key_slot *c = &d->cache[(key * 0x9e3779b97f4a7c15ull) >> (64 - KEY_CACHE_BITS)];
    if (c->key == key)
        return (int)c->op;
    uint32_t i = index_map_find(&d->keys, key);
    if (i == UINT32_MAX) {
        int b = board_op_new(&d->board, ev->kind, ev->name, ev->type, ev->flags & TS_EF_COMM);
        if (b < 0)
            return -1;
        if (index_map_get(&d->keys, key, (uint32_t)b, NULL) != (uint32_t)b)
            return -1; /* no memory for the map: a later event of the key tries again */
        i = (uint32_t)b;
    }
    *c = (key_slot){key, i};
    return (int)i;
}

/* An operator, kernel, copy or memset into its op record: self time by nesting for ranges (the
 * nesting goes on whether or not the op has a record: its children were counted). */
static inline void feed_op(digest *d, const ts_event *ev, int range)
{
    if (d->pressed) {
        d->lost++;
        return;
    }
    uint64_t dur = event_duration(ev), self = dur;
    if (range && !(ev->flags & TS_EF_CROSS_THREAD)) {
        uint64_t sk = (uint64_t)ev->kind << 32 | ev->tid;
        if (!d->stack || d->stack_key != sk) {
            d->stack = nesting_stack_of(d->nest, ev->kind, ev->tid);
            d->stack_key = sk;
        }
        if (d->stack)
            self = nesting_stack_self(d->stack, ev->aux, ev->begin_ns, dur);
    }
    int i = op_of(d, ev);
    if (i < 0) {
        d->lost++;
        return;
    }
    op_totals_count(&d->ops[i], dur, self, event_flops(ev));
    if (!d->dirty[i]) {
        d->dirty[i] = 1;
        d->changed[d->nchanged++] = (uint32_t)i;
    }
}

static void feed_steps(digest *d, const ts_event *e)
{
    steptrace_feed(d->steps, e);
    d->steps_fed = 1;
}

/* Operators into their records; to the step trace, step markers and window starts always, and
 * once the program marks steps, top-level ranges, kernels, communication and phases (a program
 * that marks no step costs its recorder no step trace: without a step every record is outside).
 */
void digest_feed(digest *d, const ts_event *ev, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        const ts_event *e = &ev[k];
        switch (e->kind) {
        case TS_KIND_OP_RANGE:
        case TS_KIND_NVTX_RANGE:
            feed_op(d, e, 1);
            if (e->aux == 0 && d->have_steps)
                feed_steps(d, e);
            break;
        case TS_KIND_KERNEL:
            d->device_seen = 1;
            feed_op(d, e, 0);
            if (d->have_steps)
                feed_steps(d, e);
            break;
        case TS_KIND_MEMCPY:
        case TS_KIND_MEMSET:
            d->device_seen = 1;
            feed_op(d, e, 0);
            if (d->have_steps)
                feed_steps(d, e);
            break;
        case TS_KIND_STEP_BEGIN:
        case TS_KIND_STEP_END:
            d->have_steps = 1;
            feed_steps(d, e);
            break;
        case TS_KIND_COLLECT_START:
            feed_steps(d, e);
            break;
        case TS_KIND_THREAD_NAME:
            board_put_name(&d->board, e->tid, e->name);
            break;
        case TS_KIND_PHASE:
        case TS_KIND_COMM_OP:
        case TS_KIND_SYNC:
        case TS_KIND_CUDA_API:
            if (d->have_steps)
                feed_steps(d, e);
            break;
        default:
            break;
        }
    }
}

void digest_pressed(digest *d, int pressed)
{
    /* A parent whose children went unsummed counts them as its own time: its operators are
     * partial then anyway. */
    d->pressed = pressed;
}

void digest_publish(digest *d, uint64_t now_ns, int finish)
{
    uint64_t before = steptrace_totals(d->steps)->steps;
    if (finish)
        steptrace_finish(d->steps);
    else
        steptrace_settle(d->steps, now_ns, d->device_seen ? SETTLE_DEVICE_NS : SETTLE_NS);
    if (d->steps_fed || steptrace_totals(d->steps)->steps != before) {
        board_put_totals(&d->board, steptrace_totals(d->steps));
        d->steps_fed = 0;
    }
    for (uint32_t k = 0; k < d->nchanged; k++) {
        uint32_t i = d->changed[k];
        board_put_op(&d->board, i, &d->ops[i]);
        d->dirty[i] = 0;
    }
    d->nchanged = 0;
    board_put_ops_lost(&d->board, d->lost, now_ns);
}
