/* nesting: the self time of ranges written when they end (operator and NVTX ranges), for the
 * analysis's operator statistics (analysis/opstats.c) and the collector's live operator board
 * alike. The per-range step is inline (nesting.h, nesting_stack_self); finding a thread's stack and
 * growing it are here.
 *
 * On one thread a nested child arrives before its parent, and each thread's events keep their
 * order whatever the interleaving with other threads. Each (thread, kind) keeps, per depth, the
 * summed time of the ranges that still wait for their parent; a range at depth d takes what waits
 * below it as its children. Children that began before the parent began are not its own (their
 * parent was not recorded: collection started inside it, or it was lost) and are dropped rather
 * than subtracted. */
#include "index_map.h"
#include "model.h"

#include <stdlib.h>

struct nesting {
    index_map thread_map;    /* kind << 32 | tid -> thread index */
    nesting_stack **threads; /* each allocated on its own: a stack's address never moves */
    uint32_t nthreads, cap_threads;
    uint64_t last_key;
    uint32_t last;
};

nesting *nesting_create(void)
{
    return calloc(1, sizeof(nesting));
}

void nesting_destroy(nesting *n)
{
    if (!n)
        return;
    index_map_free(&n->thread_map);
    for (uint32_t i = 0; i < n->nthreads; i++) {
        free(n->threads[i]->lv);
        free(n->threads[i]);
    }
    free(n->threads);
    free(n);
}

nesting_stack *nesting_stack_of(nesting *n, uint32_t kind, uint32_t tid)
{
    uint64_t key = (uint64_t)kind << 32 | tid;
    if (n->nthreads && key == n->last_key)
        return n->threads[n->last];
    uint32_t i = index_map_find(&n->thread_map, key);
    if (i == UINT32_MAX) {
        if (n->nthreads == n->cap_threads) {
            uint32_t cap = n->cap_threads ? n->cap_threads * 2 : 16;
            nesting_stack **t = realloc(n->threads, (size_t)cap * sizeof *t);
            if (!t)
                return NULL;
            n->threads = t;
            n->cap_threads = cap;
        }
        nesting_stack *t = calloc(1, sizeof *t);
        if (!t || index_map_get(&n->thread_map, key, n->nthreads, NULL) == UINT32_MAX) {
            free(t);
            return NULL;
        }
        i = n->nthreads++;
        n->threads[i] = t;
    }
    n->last_key = key;
    n->last = i;
    return n->threads[i];
}

int nesting_reserve(nesting_stack *t, uint32_t need)
{
    if (need <= t->cap)
        return 0;
    uint32_t cap = t->cap ? t->cap : 16;
    while (cap < need)
        cap *= 2;
    nesting_level *lv = realloc(t->lv, (size_t)cap * sizeof *lv);
    if (!lv)
        return -1;
    for (uint32_t l = t->cap; l < cap; l++)
        lv[l] = (nesting_level){0, UINT64_MAX};
    t->lv = lv;
    t->cap = cap;
    return 0;
}

uint64_t nesting_self(nesting *n, uint32_t kind, uint32_t tid, uint32_t depth, uint64_t begin,
                      uint64_t dur)
{
    nesting_stack *t = nesting_stack_of(n, kind, tid);
    return t ? nesting_stack_self(t, depth, begin, dur) : dur;
}
