/* model: the collector's clock (tsclock.c). */
#ifndef TERMSIGHT_MODEL_TSCLOCK_H
#define TERMSIGHT_MODEL_TSCLOCK_H

#include <stdatomic.h>
#include <stdint.h>

/* The collector's clock: nanoseconds on CLOCK_MONOTONIC's epoch. On x86-64 with an invariant
 * TSC it is the TSC scaled by a calibrated factor (about 10 ns a read instead of 23 ns for
 * clock_gettime); elsewhere clock_gettime(CLOCK_MONOTONIC). The scale is refined from time to
 * time with continuity kept; readers go through a sequence lock. */
typedef struct tsclock {
    _Atomic uint32_t seq;
    uint32_t use_tsc;
    _Atomic uint64_t base_tsc;
    _Atomic uint64_t base_ns;
    _Atomic uint64_t mult; /* ns per tick << 32 */
    uint64_t cal_tsc;      /* where the current calibration window began */
    uint64_t cal_ns;
} tsclock;

/* Calibrates. use_tsc 0 forces clock_gettime; otherwise the TSC is used when the CPU says it is
 * invariant (constant_tsc and nonstop_tsc). Blocks about 5 ms. */
void tsclock_init(tsclock *c, int use_tsc);

/* Re-measures the tick rate over the time since tsclock_init, keeping now() continuous. Call
 * from a background thread, now and then (seconds apart). */
void tsclock_refine(tsclock *c);

/* A short description for headers: "tsc" or "monotonic". */
const char *tsclock_name(const tsclock *c);

uint64_t tsclock_monotonic_ns(void);

#if defined(__x86_64__)
static inline uint64_t tsclock_ticks(void)
{
    return __builtin_ia32_rdtsc();
}
#endif

static inline uint64_t tsclock_now(const tsclock *c)
{
#if defined(__x86_64__)
    if (c->use_tsc) {
        tsclock *m = (tsclock *)c;
        for (;;) {
            uint32_t s = atomic_load_explicit(&m->seq, memory_order_acquire);
            uint64_t t = tsclock_ticks();
            uint64_t bt = atomic_load_explicit(&m->base_tsc, memory_order_relaxed);
            uint64_t bn = atomic_load_explicit(&m->base_ns, memory_order_relaxed);
            uint64_t mu = atomic_load_explicit(&m->mult, memory_order_relaxed);
            atomic_thread_fence(memory_order_acquire);
            if (!(s & 1) && atomic_load_explicit(&m->seq, memory_order_relaxed) == s) {
                /* A tick read before base_tsc (another core, a refine in between) clamps. */
                uint64_t d = t > bt ? t - bt : 0;
                return bn + (uint64_t)(((unsigned __int128)d * mu) >> 32);
            }
        }
    }
#endif
    (void)c;
    return tsclock_monotonic_ns();
}

#endif
