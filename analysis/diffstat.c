/* diffstat: the statistics termsight diff judges a change by (diff.h): medians, the Mann-Whitney
 * U test (normal approximation with the tie correction and a continuity correction, two-sided),
 * Holm's step-down correction for many rows, and a percentile bootstrap interval on the change of
 * the medians, with a fixed seed so that the same inputs give the same interval. */
#include "diff.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The k-th smallest of x[0..n) (0-based), reordering x so that x[0..k) holds no larger value
 * and x(k..n) no smaller: Wirth's selection. */
static double select_kth(double *x, size_t n, size_t k)
{
    long l = 0, m = (long)n - 1, kk = (long)k;
    while (l < m) {
        double pivot = x[kk];
        long i = l, j = m;
        do {
            while (x[i] < pivot)
                i++;
            while (pivot < x[j])
                j--;
            if (i <= j) {
                double t = x[i];
                x[i] = x[j];
                x[j] = t;
                i++;
                j--;
            }
        } while (i <= j);
        if (j < kk)
            l = i;
        if (kk < i)
            m = j;
    }
    return x[k];
}

/* The median of x[0..n), reordering x; NAN when n is 0. */
static double median_inplace(double *x, size_t n)
{
    if (!n)
        return NAN;
    double hi = select_kth(x, n, n / 2);
    if (n % 2)
        return hi;
    double lo = x[0]; /* after the selection, x[0..n/2) holds the smaller half */
    for (size_t i = 1; i < n / 2; i++)
        if (x[i] > lo)
            lo = x[i];
    return (lo + hi) / 2;
}

double diffstat_median(const double *x, size_t n)
{
    if (!n)
        return NAN;
    double *c = malloc(n * sizeof *c);
    if (!c)
        return NAN;
    memcpy(c, x, n * sizeof *c);
    double m = median_inplace(c, n);
    free(c);
    return m;
}

typedef struct ranked {
    double v;
    int from_a;
} ranked;

static int by_value(const void *x, const void *y)
{
    const ranked *a = x, *b = y;
    return (a->v > b->v) - (a->v < b->v);
}

int diffstat_mann_whitney(const double *a, size_t na, const double *b, size_t nb, diffstat_mw *out)
{
    *out = (diffstat_mw){.u = 0, .z = 0, .p = 1};
    if (!na || !nb)
        return 0;
    size_t n = na + nb;
    ranked *r = malloc(n * sizeof *r);
    if (!r)
        return -1;
    for (size_t i = 0; i < na; i++)
        r[i] = (ranked){a[i], 1};
    for (size_t i = 0; i < nb; i++)
        r[na + i] = (ranked){b[i], 0};
    qsort(r, n, sizeof *r, by_value);
    double rank_sum_a = 0, ties = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && r[j].v == r[i].v)
            j++;
        double t = (double)(j - i), mid = (double)(i + j + 1) / 2; /* ranks i+1 .. j */
        for (size_t k = i; k < j; k++)
            if (r[k].from_a)
                rank_sum_a += mid;
        ties += t * t * t - t;
        i = j;
    }
    free(r);
    double fa = (double)na, fb = (double)nb, fn = (double)n;
    out->u = rank_sum_a - fa * (fa + 1) / 2;
    double mean = fa * fb / 2;
    double var = fa * fb / 12 * ((fn + 1) - ties / (fn * (fn - 1)));
    if (!(var > 0))
        return 0; /* every value the same: no evidence of a change */
    double d = out->u - mean;
    d = d > 0.5 ? d - 0.5 : d < -0.5 ? d + 0.5 : 0; /* continuity correction */
    out->z = d / sqrt(var);
    out->p = erfc(fabs(out->z) / sqrt(2.0));
    return 0;
}

typedef struct by_p {
    double p;
    size_t i;
} by_p;

static int cmp_p(const void *x, const void *y)
{
    const by_p *a = x, *b = y;
    if (a->p != b->p)
        return a->p < b->p ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

int diffstat_holm(const double *p, size_t n, double *adjusted)
{
    by_p *s = n ? malloc(n * sizeof *s) : NULL;
    if (n && !s)
        return -1;
    for (size_t i = 0; i < n; i++)
        s[i] = (by_p){p[i], i};
    qsort(s, n, sizeof *s, cmp_p);
    double run = 0;
    for (size_t k = 0; k < n; k++) {
        double q = (double)(n - k) * s[k].p;
        if (q > 1)
            q = 1;
        if (q < run) /* adjusted p-values never decrease along the order */
            q = run;
        run = q;
        adjusted[s[k].i] = q;
    }
    free(s);
    return 0;
}

/* splitmix64: a small, fixed generator, so that intervals do not move from run to run. */
static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double resample_median(const double *x, size_t n, double *scratch, uint64_t *state)
{
    for (size_t i = 0; i < n; i++)
        scratch[i] = x[next_random(state) % n];
    return median_inplace(scratch, n);
}

static int by_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

int diffstat_bootstrap(const double *a, size_t na, const double *b, size_t nb, unsigned iters,
                       uint64_t seed, double level, double *lo, double *hi)
{
    *lo = *hi = NAN;
    if (!na || !nb || !iters)
        return 0;
    double *scratch = malloc((na > nb ? na : nb) * sizeof *scratch);
    double *change = malloc(iters * sizeof *change);
    if (!scratch || !change) {
        free(scratch);
        free(change);
        return -1;
    }
    uint64_t state = seed;
    size_t m = 0;
    for (unsigned k = 0; k < iters; k++) {
        double ma = resample_median(a, na, scratch, &state);
        double mb = resample_median(b, nb, scratch, &state);
        if (ma > 0)
            change[m++] = (mb / ma - 1) * 100;
    }
    if (m) {
        qsort(change, m, sizeof *change, by_double);
        double tail = (1 - level) / 2;
        size_t i = (size_t)floor(tail * (double)(m - 1));
        size_t j = (size_t)ceil((1 - tail) * (double)(m - 1));
        *lo = change[i];
        *hi = change[j < m ? j : m - 1];
    }
    free(scratch);
    free(change);
    return 0;
}

double diffstat_change_pct(double median_a, double median_b)
{
    if (median_a > 0)
        return (median_b / median_a - 1) * 100;
    return median_b > 0 ? INFINITY : 0;
}

enum diff_verdict diffstat_verdict(double p_adjusted, double alpha, double change_pct,
                                   double lo_pct, double hi_pct, double threshold_pct)
{
    if (!(p_adjusted < alpha) || !(fabs(change_pct) >= threshold_pct))
        return DIFF_SAME;
    /* The interval's end nearest no change must pass the threshold too: a change of 3 % whose
     * interval reaches down to 1 % is not shown to be one of 2 %. */
    if (change_pct > 0 && !isnan(lo_pct) && lo_pct < threshold_pct)
        return DIFF_SAME;
    if (change_pct < 0 && !isnan(hi_pct) && hi_pct > -threshold_pct)
        return DIFF_SAME;
    return change_pct > 0 ? DIFF_SLOWER : DIFF_FASTER;
}
