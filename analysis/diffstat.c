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

/* The percentile interval of the m changes (reordered); *lo and *hi untouched when m is 0. */
static void interval_of(double *change, size_t m, double level, double *lo, double *hi)
{
    if (!m)
        return;
    qsort(change, m, sizeof *change, by_double);
    double tail = (1 - level) / 2;
    size_t i = (size_t)floor(tail * (double)(m - 1));
    size_t j = (size_t)ceil((1 - tail) * (double)(m - 1));
    *lo = change[i];
    *hi = change[j < m ? j : m - 1];
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
    interval_of(change, m, level, lo, hi);
    free(scratch);
    free(change);
    return 0;
}

/* ---- One row compared from sorted samples (diffstat_compare) --------------------------------- */

/* A double's bits as a key whose unsigned order is the numbers' order. */
static uint64_t sort_key(double v)
{
    uint64_t k;
    memcpy(&k, &v, sizeof k);
    return k >> 63 ? ~k : k ^ (1ull << 63);
}

static double key_value(uint64_t k)
{
    k = k >> 63 ? k ^ (1ull << 63) : ~k;
    double v;
    memcpy(&v, &k, sizeof v);
    return v;
}

/* x[0..n) sorted ascending: a byte-wise radix sort of the keys (a digit every key shares is
 * skipped), linear where qsort's comparisons took most of a diff of a million steps. -1 without
 * memory. */
static int sort_doubles(double *x, size_t n)
{
    uint64_t *k = malloc((n ? n : 1) * sizeof *k), *t = malloc((n ? n : 1) * sizeof *t);
    if (!k || !t) {
        free(k);
        free(t);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        k[i] = sort_key(x[i]);
    for (int shift = 0; shift < 64; shift += 8) {
        size_t count[257] = {0};
        for (size_t i = 0; i < n; i++)
            count[((k[i] >> shift) & 0xff) + 1]++;
        if (n && count[((k[0] >> shift) & 0xff) + 1] == n)
            continue;
        for (int d = 0; d < 256; d++)
            count[d + 1] += count[d];
        for (size_t i = 0; i < n; i++)
            t[count[(k[i] >> shift) & 0xff]++] = k[i];
        uint64_t *swap = k;
        k = t;
        t = swap;
    }
    for (size_t i = 0; i < n; i++)
        x[i] = key_value(k[i]);
    free(k);
    free(t);
    return 0;
}

static double sorted_median(const double *s, size_t n)
{
    return !n ? NAN : n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* Mann-Whitney from the two samples sorted: their tie groups met in a merge, each adding what
 * diffstat_mann_whitney adds for it, in the same order (the same figures to the bit). */
static void sorted_mann_whitney(const double *a, size_t na, const double *b, size_t nb,
                                diffstat_mw *out)
{
    *out = (diffstat_mw){.u = 0, .z = 0, .p = 1};
    if (!na || !nb)
        return;
    double rank_sum_a = 0, ties = 0;
    size_t i = 0, j = 0;
    while (i < na || j < nb) {
        double v = j >= nb || (i < na && a[i] <= b[j]) ? a[i] : b[j];
        size_t ca = 0, cb = 0;
        while (i + ca < na && a[i + ca] == v)
            ca++;
        while (j + cb < nb && b[j + cb] == v)
            cb++;
        double t = (double)(ca + cb), mid = (double)(2 * (i + j) + ca + cb + 1) / 2;
        for (size_t k = 0; k < ca; k++)
            rank_sum_a += mid;
        ties += t * t * t - t;
        i += ca;
        j += cb;
    }
    double fa = (double)na, fb = (double)nb, fn = (double)(na + nb);
    out->u = rank_sum_a - fa * (fa + 1) / 2;
    double mean = fa * fb / 2;
    double var = fa * fb / 12 * ((fn + 1) - ties / (fn * (fn - 1)));
    if (!(var > 0))
        return;
    double d = out->u - mean;
    d = d > 0.5 ? d - 0.5 : d < -0.5 ? d + 0.5 : 0;
    out->z = d / sqrt(var);
    out->p = erfc(fabs(out->z) / sqrt(2.0));
}

static double uniform(uint64_t *state) /* in (0, 1] */
{
    return (double)((next_random(state) >> 11) + 1) * 0x1p-53;
}

/* A Gamma(alpha, 1) variate, alpha >= 1: Marsaglia and Tsang's method, Box-Muller normals. */
static double gamma_draw(double alpha, uint64_t *state)
{
    double d = alpha - 1.0 / 3, c = 1 / sqrt(9 * d);
    for (;;) {
        double x = sqrt(-2 * log(uniform(state))) * cos(2 * M_PI * uniform(state));
        double v = 1 + c * x;
        if (v <= 0)
            continue;
        v = v * v * v;
        if (log(uniform(state)) < 0.5 * x * x + d - d * v + d * log(v))
            return d * v;
    }
}

/* The median of a resample (n draws with replacement) of the sorted s, drawn without drawing the
 * resample: its k-th smallest is s[floor(n U)] where U, the k-th smallest of n uniforms, is
 * Beta(k, n - k + 1); for an even n the next one is U plus (1 - U) times the least of the n - k
 * uniforms above U, 1 - R^(1 / (n - k)). The same distribution in a few draws instead of n. */
static double drawn_median(const double *s, size_t n, uint64_t *state)
{
    size_t k = (n + 1) / 2;
    double ga = gamma_draw((double)k, state), gb = gamma_draw((double)(n - k + 1), state);
    double u = ga / (ga + gb);
    size_t i = (size_t)(u * (double)n);
    double lo = s[i < n ? i : n - 1];
    if (n % 2)
        return lo;
    double u2 = u + (1 - u) * (1 - pow(uniform(state), 1.0 / (double)(n - k)));
    size_t j = (size_t)(u2 * (double)n);
    return (lo + s[j < n ? j : n - 1]) / 2;
}

/* The interval from the sorted samples (both at least 2 long), as diffstat_bootstrap forms it. */
static int drawn_bootstrap(const double *a, size_t na, const double *b, size_t nb, unsigned iters,
                           uint64_t seed, double level, double *lo, double *hi)
{
    double *change = malloc((iters ? iters : 1) * sizeof *change);
    if (!change)
        return -1;
    uint64_t state = seed;
    size_t m = 0;
    for (unsigned k = 0; k < iters; k++) {
        double ma = drawn_median(a, na, &state), mb = drawn_median(b, nb, &state);
        if (ma > 0)
            change[m++] = (mb / ma - 1) * 100;
    }
    interval_of(change, m, level, lo, hi);
    free(change);
    return 0;
}

int diffstat_compare(const double *a, size_t na, const double *b, size_t nb, unsigned iters,
                     uint64_t seed, double level, diffstat_row *out)
{
    *out = (diffstat_row){.median_a = NAN, .median_b = NAN, .lo = NAN, .hi = NAN};
    double *sa = malloc((na ? na : 1) * sizeof *sa), *sb = malloc((nb ? nb : 1) * sizeof *sb);
    int rc = -1;
    if (!sa || !sb)
        goto done;
    memcpy(sa, a, na * sizeof *sa);
    memcpy(sb, b, nb * sizeof *sb);
    if (sort_doubles(sa, na) < 0 || sort_doubles(sb, nb) < 0)
        goto done;
    out->median_a = sorted_median(sa, na);
    out->median_b = sorted_median(sb, nb);
    sorted_mann_whitney(sa, na, sb, nb, &out->mw);
    if (na + nb <= DIFFSTAT_RESAMPLE_MAX || na < 2 || nb < 2)
        rc = diffstat_bootstrap(a, na, b, nb, iters, seed, level, &out->lo, &out->hi);
    else
        rc = drawn_bootstrap(sa, na, sb, nb, iters, seed, level, &out->lo, &out->hi);
done:
    free(sa);
    free(sb);
    return rc;
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
