/* hotpath.h: what the hot-path benchmark's files share (hotpath.c: options, main and the
 * per-call sections; hotpath_harness.c: helpers, results, sessions and bursts; hotpath_rate.c:
 * the events-per-second section). */
#ifndef TERMSIGHT_BENCH_HOTPATH_H
#define TERMSIGHT_BENCH_HOTPATH_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>
#include <zlib.h>

#include "termsight/termsight.h"

#ifdef TS_BENCH_LTTNG
#include "lttng_tp.h"
#endif

#define MAX_REPEATS      32
#define MAX_RATES        32
#define MAX_RATE_THREADS 64

/* The options (hotpath.c), set once by main. */
typedef struct bench_opts {
    int repeats;              /* repeats of every measurement */
    int rate_repeats;         /* repeats of the rate section (each rate is seconds long) */
    int rate_threads;         /* producer threads of the rate section, sharing its target */
    uint32_t rate_small_lane; /* the rate section also runs with this lane size on tmpfs */
    uint64_t hot_events;      /* events per kind per repeat in the hot section */
    uint32_t lane_events;     /* lane size for the hot and rate sections */
    uint64_t idle_calls;      /* calls per repeat in the idle section */
    uint64_t clock_calls;     /* calls per repeat in the clock section */
    double rate_seconds;      /* producer time per rate */
    uint64_t rate_max_ev;     /* cap on events per rate (recording size) */
    double rates[MAX_RATES];
    int nrates;
    const char *tmpfs_dir; /* hot section and rate/parts on tmpfs */
    const char *disk_dir;  /* rate/parts on the real disk */
    const char *sections;
    const char *rate_configs; /* tmpfs, disk, tmpfs_lane16k */
    uint32_t lttng_sleep_ms;  /* pause after an LTTng burst for the consumer daemon */
} bench_opts;
extern bench_opts opt;

/* name is one of the comma-separated words of list. */
int listed(const char *list, const char *name);

/* Says what went wrong and ends the program (status 1). */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
uint64_t mono_ns(void);
void sleep_ns(uint64_t ns);
double median(const double *v, int n);

/* Keeps a value alive without a store the compiler could drop. */
static inline void keep(uint64_t v)
{
    __asm__ volatile("" : : "r"(v));
}

/* Removes a folder this program created. */
void rm_rf(const char *path);

/* One measurement of the figure key (created on first use with its unit and description). */
void put(const char *key, const char *unit, const char *what, double v);
/* The table of every figure, then one RESULT line per figure. */
void print_results(void);

extern char work_dir[PATH_MAX]; /* <tmpfs_dir>/termsight-bench-<pid> */

typedef struct bench_session {
    termsight_session *s;
    char dir[PATH_MAX];
    pid_t rec_tid; /* the library's recorder thread, for its CPU time */
} bench_session;

/* Scheduler figures of a thread of this process: ns on a CPU and ns runnable but waiting for
 * one (schedstat), and its voluntary context switches (sleeps, blocking writes). */
typedef struct thread_sched {
    uint64_t run_ns, wait_ns, vol_switches;
} thread_sched;
thread_sched thread_sched_get(pid_t tid);

/* A session recording in a new folder under parent (lane 0: the default lanes; monotonic: the
 * clock forced to clock_gettime); ends the program when it cannot be made. */
void session_open(bench_session *b, const char *parent, int collecting, uint32_t lane,
                  int monotonic);
/* Ends the session and removes its folder. */
void session_close(bench_session *b);
/* Events recorded or counted as dropped. */
uint64_t accounted(termsight_session *s);
/* Waits until the recorder has accounted for target events. */
void wait_recorded(termsight_session *s, uint64_t target);

enum kind { K_INSTANT, K_PAIR, K_COMPLETE, K_LTTNG, K__COUNT };

extern uint32_t id_name, id_type;
extern uint32_t my_tid;

/* Emits n events of kind k and returns the nanoseconds the calls took. */
uint64_t burst(enum kind k, uint64_t n);
/* Grows this thread's lane through its first pass: ns per event of that pass. */
double warm_lane(termsight_session *s, uint64_t burst_events);

/* The LTTng-UST tracepoint's ns per event in the last hot repeat (hotpath.c); 0: not measured. */
extern double lttng_last;

/* The events-per-second section (hotpath_rate.c). */
void section_rate(void);

#endif
