/* Helpers shared by the model tests: segment names that cannot collide, the scratch folder, and
 * loop counts scaled down under ThreadSanitizer. Everything is static inline so that a test that
 * uses only part of it still builds with -Werror. */
#ifndef TERMSIGHT_MODEL_TEST_H
#define TERMSIGHT_MODEL_TEST_H

#include "model.h"
#include "shmnames.h"

#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_THREAD__)
#define MT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MT_TSAN 1
#endif
#endif
#ifndef MT_TSAN
#define MT_TSAN 0
#endif

/* Any sanitizer (ASan, UBSan or TSan): the library runs several times slower. */
#if MT_TSAN || defined(__SANITIZE_ADDRESS__)
#define MT_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(undefined_behavior_sanitizer)
#define MT_SANITIZED 1
#endif
#endif
#ifndef MT_SANITIZED
#define MT_SANITIZED 0
#endif

/* Loop counts: TSan runs 5-15x slower, and so does a machine that asks for it
 * (TERMSIGHT_TEST_QUICK=1). */
static inline unsigned mt_scale(unsigned normal, unsigned reduced)
{
    const char *q = getenv("TERMSIGHT_TEST_QUICK");
    return MT_TSAN || (q && *q && strcmp(q, "0") != 0) ? reduced : normal;
}

/* Seconds since t0 (CLOCK_MONOTONIC): bounds for waits on another thread. */
static inline double mt_seconds_since(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Segment pids. Linux pids stay below 2^22, so 500000000 and up are never live processes; each
 * test binary gets its own band of MT_PID_BAND names from the pid of its runner (set in main
 * before Check forks), so binaries run side by side never share a name. Offsets within a binary
 * are per test. */
#define MT_PID_BAND 100
static pid_t mt_runner_pid;

static inline void mt_init(void)
{
    mt_runner_pid = getpid();
}

static inline pid_t mt_pid(int offset)
{
    ck_assert_int_lt(offset, MT_PID_BAND);
    pid_t pid = (pid_t)(500000000 + (mt_runner_pid % 4194304) * MT_PID_BAND + offset);
    ck_assert_msg(kill(pid, 0) != 0 && errno == ESRCH, "pid %d unexpectedly exists", (int)pid);
    return pid;
}

/* Unlinks every name of this binary's band: an unchecked teardown, run in the runner after a
 * test case, so that a failed test leaves nothing in /dev/shm. */
static inline void mt_unlink_band(void)
{
    for (int k = 0; k < MT_PID_BAND; k++)
        shm_unlink_pid((pid_t)(500000000 + (mt_runner_pid % 4194304) * MT_PID_BAND + k));
}

static inline segment_config mt_config(pid_t pid)
{
    segment_config c = {
        .pid = pid,
        .process = "model-test",
        .run_folder = "/nonexistent/run",
        .clock = "monotonic",
        .start_ns = 12345,
        .lane_count = 4,
        .lane_events = 64,
        .string_max = 1024,
        .string_arena = 1u << 20,
    };
    return c;
}

static inline segment *mt_create(const segment_config *cfg)
{
    segment *s = NULL;
    char *cause = NULL;
    int rc = segment_create(cfg, &s, &cause);
    ck_assert_msg(rc == 0, "segment_create(pid %d): %s", (int)cfg->pid, cause ? cause : "?");
    ck_assert_ptr_nonnull(s);
    free(cause);
    return s;
}

/* A second mapping of the same segment, as another process would see it. */
static inline segment *mt_attach(pid_t pid, int writable)
{
    segment *s = NULL;
    char *cause = NULL;
    int rc = segment_attach(pid, writable, &s, &cause);
    ck_assert_msg(rc == 0, "segment_attach(%d): %s", (int)pid, cause ? cause : "?");
    free(cause);
    return s;
}

static inline int mt_shm_exists(pid_t pid)
{
    return shm_exists_pid(pid);
}

static inline const char *mt_tmp_base(void)
{
    const char *base = getenv("TERMSIGHT_TEST_TMP");
    return base && *base ? base : "/tmp";
}

static inline uint64_t mt_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* For polling loops: the bound is generous, the pause short, and the loop ends as soon as the
 * condition holds. */
#define MT_POLL_LIMIT_NS (20ull * 1000000000ull)

static inline void mt_pause(void)
{
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
}

/* Runs a suite; the runner's pid anchors this binary's segment names. */
static inline int mt_run(Suite *suite)
{
    mt_init();
    SRunner *sr = srunner_create(suite);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    mt_unlink_band();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
