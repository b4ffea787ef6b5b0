/* spans: sets of time intervals [b, e) as arrays: sorting, union, intersection, difference and
 * coverage. Internal to model (the step trace's split); pure. */
#ifndef TERMSIGHT_MODEL_SPANS_H
#define TERMSIGHT_MODEL_SPANS_H

#include <stddef.h>
#include <stdint.h>

typedef struct span {
    uint64_t b, e;
    uint32_t name;
} span;

/* Sorts by begin, in place and stable. Natural merge sort: records come in runs (a lane's
 * drain, a buffer of kernels), so this costs n * log2(runs), n when already sorted. */
void spans_sort(span *v, span *tmp, size_t n);

/* Merges sorted spans into disjoint ones in place; returns the count and the covered length. */
size_t spans_coalesce(span *v, size_t n, uint64_t *covered);

/* The length that a and b (each sorted and disjoint) have in common. */
uint64_t spans_intersection(const span *a, size_t na, const span *b, size_t nb);

/* The part of [b, e] that the disjoint, sorted spans v[*at..n) cover. Calls come with
 * increasing b, so *at only moves on. */
uint64_t spans_covered_by(const span *v, size_t n, size_t *at, uint64_t b, uint64_t e);

/* a minus b (both sorted and disjoint) into out, which holds na + nb spans; returns the count. */
size_t spans_minus(const span *a, size_t na, const span *b, size_t nb, span *out);

/* The part of [b, e] that the sorted, disjoint spans v cover. */
uint64_t spans_covered(const span *v, size_t n, uint64_t b, uint64_t e);

#endif
