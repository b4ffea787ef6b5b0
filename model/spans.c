/* spans: sets of time intervals as arrays (spans.h). */
#include "spans.h"

#include <string.h>

static size_t spans_run_end(const span *v, size_t i, size_t n)
{
    size_t j = i + 1;
    while (j < n && v[j - 1].b <= v[j].b)
        j++;
    return j;
}

/* Sorts by begin, in place and stable. Natural merge sort: records come in runs (a lane's
 * drain, a buffer of kernels), so this costs n * log2(runs), n when already sorted. */
void spans_sort(span *v, span *tmp, size_t n)
{
    if (n < 2 || spans_run_end(v, 0, n) == n)
        return;
    span *src = v, *dst = tmp;
    for (;;) {
        size_t i = 0, runs = 0;
        while (i < n) {
            size_t m = spans_run_end(src, i, n);
            size_t e = m < n ? spans_run_end(src, m, n) : n;
            size_t x = i, y = m, k = i;
            while (x < m && y < e)
                dst[k++] = src[y].b < src[x].b ? src[y++] : src[x++];
            while (x < m)
                dst[k++] = src[x++];
            while (y < e)
                dst[k++] = src[y++];
            runs++;
            i = e;
        }
        span *t = src;
        src = dst;
        dst = t;
        if (runs == 1)
            break;
    }
    if (src != v)
        memcpy(v, src, n * sizeof *v);
}

/* Merges sorted spans into disjoint ones in place; returns the count and the covered length. */
size_t spans_coalesce(span *v, size_t n, uint64_t *covered)
{
    size_t m = 0;
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && v[i].b <= v[m - 1].e) {
            if (v[i].e > v[m - 1].e)
                v[m - 1].e = v[i].e;
        } else {
            if (m)
                sum += v[m - 1].e - v[m - 1].b;
            v[m++] = v[i];
        }
    }
    if (m)
        sum += v[m - 1].e - v[m - 1].b;
    *covered = sum;
    return m;
}

uint64_t spans_intersection(const span *a, size_t na, const span *b, size_t nb)
{
    uint64_t sum = 0;
    size_t i = 0, j = 0;
    while (i < na && j < nb) {
        uint64_t lo = a[i].b > b[j].b ? a[i].b : b[j].b;
        uint64_t hi = a[i].e < b[j].e ? a[i].e : b[j].e;
        if (hi > lo)
            sum += hi - lo;
        if (a[i].e < b[j].e)
            i++;
        else
            j++;
    }
    return sum;
}

/* The part of [b, e] that the disjoint, sorted spans v[*at..n) cover. Calls come with
 * increasing b, so *at only moves on. */
uint64_t spans_covered_by(const span *v, size_t n, size_t *at, uint64_t b, uint64_t e)
{
    while (*at < n && v[*at].e <= b)
        (*at)++;
    uint64_t sum = 0;
    for (size_t j = *at; j < n && v[j].b < e; j++) {
        uint64_t lo = v[j].b > b ? v[j].b : b;
        uint64_t hi = v[j].e < e ? v[j].e : e;
        if (hi > lo)
            sum += hi - lo;
    }
    return sum;
}

/* a minus b (both sorted and disjoint) into out, which holds na + nb spans; returns the count. */
size_t spans_minus(const span *a, size_t na, const span *b, size_t nb, span *out)
{
    size_t n = 0, j = 0;
    for (size_t i = 0; i < na; i++) {
        uint64_t cur = a[i].b;
        while (j < nb && b[j].e <= cur)
            j++;
        for (size_t k = j; k < nb && b[k].b < a[i].e; k++) {
            if (b[k].b > cur)
                out[n++] = (span){cur, b[k].b, a[i].name};
            if (b[k].e > cur)
                cur = b[k].e;
        }
        if (cur < a[i].e)
            out[n++] = (span){cur, a[i].e, a[i].name};
    }
    return n;
}

/* The part of [b, e] that the sorted, disjoint spans v cover. */
uint64_t spans_covered(const span *v, size_t n, uint64_t b, uint64_t e)
{
    size_t at = 0;
    return e > b ? spans_covered_by(v, n, &at, b, e) : 0;
}
