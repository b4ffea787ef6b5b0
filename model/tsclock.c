/* tsclock: the collector's nanosecond clock, TSC-scaled where the TSC is invariant.
 *
 * clock_gettime costs about 23 ns on these machines and the TSC about 10 ns, so the TSC is worth
 * its calibration: now() = base_ns + (ticks - base_tsc) * mult >> 32, with base and mult taken
 * against CLOCK_MONOTONIC. tsclock_refine() measures the rate over a longer window and moves the
 * base to "now" so the clock stays continuous and monotonic per thread. */
#include "model.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

uint64_t tsclock_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#if defined(__x86_64__)
/* Both flags mean the TSC ticks at one rate in every P- and C-state: safe to scale. */
static int tsc_invariant(void)
{
    FILE *f = fopen("/proc/cpuinfo", "re");
    if (!f)
        return 0;
    char line[4096];
    int ok = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5))
            continue;
        ok = strstr(line, " constant_tsc") && strstr(line, " nonstop_tsc");
        break;
    }
    fclose(f);
    return ok;
}

/* A (ticks, ns) pair read as close together as possible: the tightest of a few tries. */
static void sample_pair(uint64_t *tsc, uint64_t *ns)
{
    uint64_t best = UINT64_MAX;
    *tsc = *ns = 0;
    for (int i = 0; i < 16; i++) {
        uint64_t t0 = tsclock_ticks();
        uint64_t n = tsclock_monotonic_ns();
        uint64_t t1 = tsclock_ticks();
        if (t1 - t0 < best) {
            best = t1 - t0;
            *tsc = t0 + (t1 - t0) / 2;
            *ns = n;
        }
    }
}

static uint64_t rate(uint64_t dtsc, uint64_t dns)
{
    return dtsc ? (uint64_t)(((unsigned __int128)dns << 32) / dtsc) : 0;
}
#endif

void tsclock_init(tsclock *c, int use_tsc)
{
    memset(c, 0, sizeof *c);
#if defined(__x86_64__)
    if (use_tsc && tsc_invariant()) {
        uint64_t t0, n0, t1, n1;
        sample_pair(&t0, &n0);
        struct timespec pause = {0, 5 * 1000 * 1000};
        nanosleep(&pause, NULL);
        sample_pair(&t1, &n1);
        uint64_t m = rate(t1 - t0, n1 - n0);
        if (m) {
            c->use_tsc = 1;
            c->cal_tsc = t0;
            c->cal_ns = n0;
            atomic_store_explicit(&c->base_tsc, t1, memory_order_relaxed);
            atomic_store_explicit(&c->base_ns, n1, memory_order_relaxed);
            atomic_store_explicit(&c->mult, m, memory_order_relaxed);
        }
    }
#else
    (void)use_tsc;
#endif
}

void tsclock_refine(tsclock *c)
{
#if defined(__x86_64__)
    if (!c->use_tsc)
        return;
    uint64_t t, n;
    sample_pair(&t, &n);
    uint64_t m = rate(t - c->cal_tsc, n - c->cal_ns);
    if (!m)
        return;
    /* Keep continuity: the new line starts where the old one says this tick is. Only this
     * thread writes the fields, so reading them without the lock is fine here. */
    uint64_t now_tsc = tsclock_ticks();
    uint64_t bt = atomic_load_explicit(&c->base_tsc, memory_order_relaxed);
    uint64_t bn = atomic_load_explicit(&c->base_ns, memory_order_relaxed);
    uint64_t mu = atomic_load_explicit(&c->mult, memory_order_relaxed);
    uint64_t cont =
        bn + (uint64_t)(((unsigned __int128)(now_tsc > bt ? now_tsc - bt : 0) * mu) >> 32);
    uint32_t s = atomic_load_explicit(&c->seq, memory_order_relaxed);
    atomic_store_explicit(&c->seq, s + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&c->base_tsc, now_tsc, memory_order_relaxed);
    atomic_store_explicit(&c->base_ns, cont, memory_order_relaxed);
    atomic_store_explicit(&c->mult, m, memory_order_relaxed);
    atomic_store_explicit(&c->seq, s + 2, memory_order_release);
#else
    (void)c;
#endif
}

const char *tsclock_name(const tsclock *c)
{
    return c->use_tsc ? "tsc" : "monotonic";
}
