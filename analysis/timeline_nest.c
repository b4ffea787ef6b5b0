/* timeline_nest: the check that keeps a timeline track's complete events nested or disjoint
 * (Chrome's trace viewer draws partial overlaps wrongly). A track keeps its top-level spans,
 * disjoint and by begin; the recorder writes a range when it ends, so children come before their
 * parents and are covered when the parent arrives. Past MAX_ROOTS spans the oldest half is
 * forgotten: only their extent is kept, and an event reaching into it fits only when it covers
 * all of it. */
#include "timeline_internal.h"

#include <stdlib.h>
#include <string.h>

static void roots_forget(track *tr)
{
    uint32_t half = tr->nroots / 2;
    for (uint32_t k = 0; k < half; k++) {
        if (!tr->forgot || tr->roots[k].b < tr->fb)
            tr->fb = tr->roots[k].b;
        if (!tr->forgot || tr->roots[k].e > tr->fe)
            tr->fe = tr->roots[k].e;
        tr->forgot = 1;
    }
    memmove(tr->roots, tr->roots + half, (tr->nroots - half) * sizeof *tr->roots);
    tr->nroots -= half;
}

int timeline_nest_fit(track *tr, uint64_t b, uint64_t e)
{
    int cover_forgotten = 0;
    if (tr->forgot && b < tr->fe) {
        if (!(b <= tr->fb && e >= tr->fe))
            return 0; /* reaches into spans we forgot */
        cover_forgotten = 1;
    }
    /* i: first root ending after b (ends ascend, as roots are disjoint). */
    uint32_t lo = 0, hi = tr->nroots;
    if (hi && tr->roots[hi - 1].e <= b) {
        lo = hi; /* the common case: after every root */
    } else {
        while (lo < hi) {
            uint32_t mid = (lo + hi) / 2;
            if (tr->roots[mid].e > b)
                hi = mid;
            else
                lo = mid + 1;
        }
    }
    uint32_t i = lo, j = i;
    if (i < tr->nroots && tr->roots[i].b < b) {
        /* Starts inside root i: must end inside it, and it must have no children we could
         * cross (we no longer know them). */
        span *r = &tr->roots[i];
        if (e > r->e || r->kids || cover_forgotten)
            return 0;
        r->kids = 1;
        return 1;
    }
    if (i < tr->nroots && tr->roots[i].b == b && e <= tr->roots[i].e) {
        span *r = &tr->roots[i];
        if (r->kids && !(e == r->e))
            return 0;
        if (e == r->e && r->kids) {
            /* The same span again: it holds what root i holds. */
            return 1;
        }
        r->kids = 1;
        return 1;
    }
    /* Starts before roots i..: covers those that start before e, all of which must end by e. */
    while (j < tr->nroots && tr->roots[j].b < e)
        j++;
    if (j > i && tr->roots[j - 1].e > e)
        return 0;
    span s = {b, e, j > i || cover_forgotten};
    if (cover_forgotten)
        tr->forgot = 0;
    if (j == i) {
        if (tr->nroots == tr->cap) {
            if (tr->cap < MAX_ROOTS) {
                uint32_t n = tr->cap ? tr->cap * 2 : 16;
                span *nr = realloc(tr->roots, n * sizeof *nr);
                if (!nr)
                    return -1;
                tr->roots = nr;
                tr->cap = n;
            } else {
                roots_forget(tr);
                return timeline_nest_fit(tr, b, e);
            }
        }
        memmove(tr->roots + i + 1, tr->roots + i, (tr->nroots - i) * sizeof *tr->roots);
        tr->roots[i] = s;
        tr->nroots++;
    } else {
        tr->roots[i] = s;
        memmove(tr->roots + i + 1, tr->roots + j, (tr->nroots - j) * sizeof *tr->roots);
        tr->nroots -= j - i - 1;
    }
    return 1;
}
