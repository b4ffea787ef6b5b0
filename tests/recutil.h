/* recutil: small recordings written with the real writer (model/recording.c), for the tests
 * that run `termsight analyse` on them.
 *
 * Include model.h and testutil.h first. */
#ifndef TERMSIGHT_RECUTIL_H
#define TERMSIGHT_RECUTIL_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* tmp/<name>/recording/events.tsr: one thread, two steps, three MatMul ops and a BiasAdd,
 * written in two event chunks; returns the run folder.
 *
 *   step 1 [0, 1000] us:   Default/fc/MatMul-op1 [100, 200], Default/fc/MatMul-op2 [300, 600]
 *   step 2 [1000, 2000]:   Default/fc/MatMul-op1 [1100, 1300], Default/fc/BiasAdd-op3 [1400, 1450]
 *
 * Type MatMul: 3 ops, total 100 + 300 + 200 = 600 us, average 200 us, min 100, max 300; its
 * share of all self time 600 / 650 = 92.3 %. */
static inline char *rec_make_run(const char *tmp, const char *name)
{
    static const char *const strs[] = {"", "<names table full>", "Default/fc/MatMul-op1",
                                       "Default/fc/MatMul-op2", "Default/fc/BiasAdd-op3"};
    char *run = path_join(tmp, name);
    char *dir = path_join(run, TS_RECORDING_DIR);
    recording_meta m;
    memset(&m, 0, sizeof(m));
    m.major = TS_RECORDING_MAJOR;
    m.pid = 5151;
    snprintf(m.process, sizeof(m.process), "trainer");
    recording_writer *w = NULL;
    char *cause = NULL;
    ck_assert_msg(recording_writer_open(dir, &m, &w, &cause) == 0, "writer: %s", cause);
    uint32_t lens[5];
    for (size_t i = 0; i < 5; i++)
        lens[i] = (uint32_t)strlen(strs[i]);
    ck_assert_int_eq(recording_append_strings(w, 0, 5, (const char **)strs, lens, &cause), 0);
#define OP(n, b, e)                                                                                \
    {                                                                                              \
        .kind = TS_KIND_OP_RANGE, .tid = 10, .device = TS_DEVICE_HOST, .name = n,                  \
        .begin_ns = (b)*1000ull, .end_ns = (e)*1000ull                                             \
    }
#define MARK(k, s, t)                                                                              \
    {                                                                                              \
        .kind = k, .tid = 10, .device = TS_DEVICE_HOST, .begin_ns = (t)*1000ull,                   \
        .end_ns = (t)*1000ull, .v0 = s                                                             \
    }
    const ts_event first[] = {
        MARK(TS_KIND_STEP_BEGIN, 1, 0),
        OP(2, 100, 200),
        OP(3, 300, 600),
        MARK(TS_KIND_STEP_END, 1, 1000),
    };
    const ts_event second[] = {
        MARK(TS_KIND_STEP_BEGIN, 2, 1000),
        OP(2, 1100, 1300),
        OP(4, 1400, 1450),
        MARK(TS_KIND_STEP_END, 2, 2000),
    };
#undef OP
#undef MARK
    ck_assert_int_eq(recording_append_events(w, lane_run_of(first, 4), &cause), 0);
    ck_assert_int_eq(recording_append_events(w, lane_run_of(second, 4), &cause), 0);
    ck_assert_int_eq(recording_writer_close(w, &cause), 0);
    free(dir);
    return run;
}

/* A rank's run folder in job folder job_dir, named name (NULL: "rank<R>-h-<pid>-..."):
 * rec_make_run's recording, and the session's job options (job "j", the rank, world size 2). */
static inline char *rec_make_rank(const char *job_dir, int rank, const char *name)
{
    char dflt[64];
    snprintf(dflt, sizeof dflt, "rank%d-h-%d-20261124-000000-0000000%d", rank, 5151 + rank, rank);
    char *run = rec_make_run(job_dir, name ? name : dflt);
    char *dir = path_join(run, TS_RECORDING_DIR);
    recording_writer *w = NULL;
    char *cause = NULL;
    recording_meta m = {.major = TS_RECORDING_MAJOR, .pid = 5151 + rank};
    /* A second writer session appends to the recording: another window's options. */
    ck_assert_msg(recording_writer_open(dir, &m, &w, &cause) == 0, "writer: %s", cause);
    char rank_text[8];
    snprintf(rank_text, sizeof rank_text, "%d", rank);
    const char *strs[] = {"job", "j", "rank", rank_text, "world_size", "2"};
    uint32_t lens[6];
    for (size_t i = 0; i < 6; i++)
        lens[i] = (uint32_t)strlen(strs[i]);
    ck_assert_int_eq(recording_append_strings(w, 5, 6, strs, lens, &cause), 0);
    ts_event cfg[3];
    for (uint32_t i = 0; i < 3; i++)
        cfg[i] = (ts_event){.kind = TS_KIND_CONFIG,
                            .device = TS_DEVICE_HOST,
                            .name = 5 + 2 * i,
                            .type = 6 + 2 * i,
                            .begin_ns = 2000000,
                            .end_ns = 2000000};
    ck_assert_int_eq(recording_append_events(w, lane_run_of(cfg, 3), &cause), 0);
    ck_assert_int_eq(recording_writer_close(w, &cause), 0);
    free(dir);
    return run;
}

#endif
