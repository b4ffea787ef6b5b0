/* sessionutil.h: what the session tests (test_session.c, test_session_fork.c) share: sessions
 * in a temporary output folder, and a recording read back with its events tallied by kind. */
#ifndef TERMSIGHT_TESTS_SESSIONUTIL_H
#define TERMSIGHT_TESTS_SESSIONUTIL_H

#include "collectors.h"
#include "shmnames.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SCALE 8
#else
#define SCALE 1
#endif

static char tmp_root[512];

static inline void make_output(char *out, size_t cap, const char *tag)
{
    const char *base = getenv("TERMSIGHT_TEST_TMP");
    snprintf(tmp_root, sizeof tmp_root, "%s", base && *base ? base : "/tmp");
    snprintf(out, cap, "%s/session-%d-%s-%ld", tmp_root, (int)getpid(), tag, (long)time(NULL));
}

static inline termsight_session *open_session(const char *tag, int start, uint32_t lane_events,
                                              uint32_t threads, char *output, size_t cap)
{
    termsight_options o;
    termsight_options_init(&o);
    make_output(output, cap, tag);
    o.output_path = output;
    o.start_collecting = start;
    if (lane_events)
        o.lane_events = lane_events;
    if (threads)
        o.max_threads = threads;
    termsight_session *s = NULL;
    int rc = termsight_session_create(&o, &s);
    ck_assert_msg(rc == TERMSIGHT_OK, "create: %d %s", rc, termsight_last_error());
    return s;
}

/* What a recording holds, by kind, with names resolved. */
typedef struct tally {
    uint64_t by_kind[TS_KIND__COUNT];
    uint64_t lost;
    uint64_t max_step;
    int names_ok;
} tally;

typedef int (*event_check)(const recording_reader *r, const ts_event *ev, void *ctx);

static inline void read_recording(const char *run_folder, tally *t, event_check check, void *ctx)
{
    memset(t, 0, sizeof *t);
    recording_reader *r;
    char *why = NULL;
    ck_assert_msg(recording_reader_open(run_folder, &r, &why) == 0, "open: %s", why);
    const ts_event *ev;
    size_t n;
    int rc;
    while ((rc = recording_reader_next(r, &ev, &n, &why)) == 1) {
        for (size_t i = 0; i < n; i++) {
            ck_assert_uint_lt(ev[i].kind, TS_KIND__COUNT);
            t->by_kind[ev[i].kind]++;
            if (ev[i].kind == TS_KIND_LOST)
                t->lost += ev[i].v0;
            if (ev[i].kind == TS_KIND_STEP_BEGIN && ev[i].v0 > t->max_step)
                t->max_step = ev[i].v0;
            if (check)
                ck_assert(check(r, &ev[i], ctx));
        }
    }
    ck_assert_msg(rc == 0, "read: %s", why);
    ck_assert_uint_eq(recording_reader_bad_chunks(r), 0);
    recording_reader_close(r);
}

static inline int name_is(const recording_reader *r, uint32_t id, const char *want)
{
    uint32_t len;
    const char *s = recording_reader_string(r, id, &len);
    return s && len == strlen(want) && !memcmp(s, want, len);
}

#endif
