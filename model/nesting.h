/* model: self time of nested ranges (nesting.c). */
#ifndef TERMSIGHT_MODEL_NESTING_H
#define TERMSIGHT_MODEL_NESTING_H

#include <stddef.h>
#include <stdint.h>

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

#endif
