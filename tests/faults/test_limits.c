/* Every bounded structure of a session filled to its limit and past it: the string table's ids
 * and its arena, names longer than kept, registered queues, thread names, open range frames, the
 * mailbox's argument. Each keeps exactly what fits, says what did not fit where it says so, and
 * the session goes on working. */
#define TESTUTIL_TAG "limits"
#include "testutil.h"

#include "collectors.h"
#include "eventlist.h"
#include "faults.h"

#include <inttypes.h>
#include <time.h>
#include <unistd.h>

static termsight_session *limits_session(const char *out)
{
    termsight_options o;
    termsight_options_init(&o);
    o.output_path = out;
    o.sample_interval_ms = 3600000; /* no sampler thread interning names meanwhile */
    termsight_session *s = NULL;
    ck_assert_msg(termsight_session_create(&o, &s) == 0, "create: %s", termsight_last_error());
    return s;
}

/* Ends the session and reads its recording. */
static void finish(termsight_session *s, event_list *l)
{
    char run[1024];
    snprintf(run, sizeof run, "%s", termsight_run_folder(s));
    ck_assert_int_eq(termsight_session_destroy(s), 0);
    read_all(run, l);
}

START_TEST(string_ids_full)
{
    char *out = tmp_make();
    termsight_session *s = limits_session(out);
    ts_segment_header *h = segment_header(s->seg);
    uint32_t max = h->string_max, first = atomic_load(&h->string_count);
    char name[32];
    for (uint32_t id = first; id < max; id++) {
        snprintf(name, sizeof name, "n%u", id);
        ck_assert_uint_eq(termsight_name(name), id);
    }
    ck_assert_uint_eq(atomic_load(&h->string_count), max);
    /* Past the limit: the overflow id, each miss counted; known names still resolve. */
    enum { PAST = 1000 };
    for (uint32_t i = 0; i < PAST; i++) {
        snprintf(name, sizeof name, "past%u", i);
        ck_assert_uint_eq(termsight_name(name), TS_STR_OVERFLOW);
        termsight_counter(name, i);
    }
    ck_assert_uint_eq(atomic_load(&h->string_drops), PAST * 2); /* name, then the counter's */
    snprintf(name, sizeof name, "n%u", max - 1);
    ck_assert_uint_eq(termsight_name(name), max - 1);
    termsight_counter(name, 1);
    event_list l;
    finish(s, &l);
    ck_assert_uint_eq(count(&l, TS_KIND_COUNTER, "<names table full>"), PAST);
    ck_assert_uint_eq(count(&l, TS_KIND_COUNTER, name), 1);
    char want[32];
    snprintf(want, sizeof want, "n%u", first);
    ck_assert_str_eq(name_of(&l, first), want); /* every id reached the recording */
    printf("string ids: %u of %u taken by the test, %d names past the limit counted\n", max - first,
           max, PAST);
    list_free(&l);
    tmp_remove(out);
}
END_TEST

START_TEST(string_arena_full)
{
    char *out = tmp_make();
    termsight_session *s = limits_session(out);
    ts_segment_header *h = segment_header(s->seg);
    /* Names of the longest length kept take 4 + 8192 + 1 bytes rounded up to 4. */
    const uint32_t need = (4 + TS_NAME_MAX + 1 + 3) & ~3u;
    uint32_t room = h->string_arena - atomic_load(&h->string_used);
    uint32_t fit = room / need;
    char *big = malloc(TS_NAME_MAX + 100);
    ck_assert_ptr_nonnull(big);
    for (uint32_t i = 0; i <= fit; i++) {
        memset(big, 'a' + i % 26, TS_NAME_MAX + 100);
        snprintf(big, 16, "%08u", i);
        big[8] = '-';
        /* 100 bytes over the limit: cut to TS_NAME_MAX, its first bytes then the cut said. */
        uint32_t id = termsight_name_n(big, TS_NAME_MAX + 100);
        ck_assert_uint_eq(id == TS_STR_OVERFLOW, i == fit);
        if (id != TS_STR_OVERFLOW) {
            uint32_t len;
            const char *got = strtab_get(s->seg, id, &len);
            char tail[64];
            size_t tl =
                (size_t)snprintf(tail, sizeof tail, "...[cut: %d bytes]", TS_NAME_MAX + 100);
            ck_assert_uint_eq(len, TS_NAME_MAX);
            ck_assert_int_eq(memcmp(got, big, TS_NAME_MAX - tl), 0);
            ck_assert_int_eq(memcmp(got + TS_NAME_MAX - tl, tail, tl), 0);
        }
    }
    ck_assert_uint_eq(atomic_load(&h->string_drops), 1);
    /* What is left still takes a name that fits it. */
    uint32_t left = h->string_arena - atomic_load(&h->string_used);
    ck_assert_uint_lt(left, need);
    ck_assert_uint_ge(left, 8);
    ck_assert_uint_ne(termsight_name("short"), TS_STR_OVERFLOW);
    termsight_range_begin("short", NULL);
    termsight_range_end();
    event_list l;
    finish(s, &l);
    ck_assert_uint_eq(count(&l, TS_KIND_OP_RANGE, "short"), 1);
    printf("string arena: %u names of %d bytes filled %u bytes of %u\n", fit, TS_NAME_MAX,
           fit * need, h->string_arena);
    free(big);
    list_free(&l);
    tmp_remove(out);
}
END_TEST

/* Queues and thread names are kept up to TS_MAX_QUEUES and TS_MAX_THREAD_NAMES and replayed at
 * the head of every window: exactly those. */
START_TEST(queues_and_thread_names_full)
{
    char *out = tmp_make();
    termsight_session *s = limits_session(out);
    char name[32];
    for (uint32_t i = 1; i <= TS_MAX_QUEUES + 10; i++) {
        snprintf(name, sizeof name, "queue%u", i);
        uint32_t q = termsight_queue_register(name, 8, TERMSIGHT_QUEUE_PIPELINE, NULL, NULL);
        ck_assert_uint_eq(q, i <= TS_MAX_QUEUES ? i : 0);
        termsight_queue_size(q, 1); /* 0 is ignored */
    }
    uint32_t tname = termsight_name("worker");
    for (uint32_t tid = 1; tid <= TS_MAX_THREAD_NAMES + 100; tid++)
        api_thread_name_tid(1000000 + tid, tname);
    /* A second window replays what was kept. */
    ck_assert_int_eq(termsight_stop(s), 0);
    ck_assert_int_eq(termsight_start(s), 0);
    event_list l;
    finish(s, &l);
    ck_assert_uint_eq(count(&l, TS_KIND_QUEUE_SAMPLE, NULL), TS_MAX_QUEUES);
    /* Registered while collecting (one each) and replayed by the second window. */
    ck_assert_uint_eq(count(&l, TS_KIND_QUEUE_INFO, NULL), 2 * TS_MAX_QUEUES);
    /* Named while collecting: every one; replayed: the ones kept. */
    ck_assert_uint_eq(count(&l, TS_KIND_THREAD_NAME, "worker"),
                      TS_MAX_THREAD_NAMES + 100 + TS_MAX_THREAD_NAMES);
    list_free(&l);
    tmp_remove(out);
}
END_TEST

/* Ranges nested deeper than the frames kept: the outer ones are timed, the deeper counted so
 * that ends pair up again; the next range is recorded as usual. */
START_TEST(frames_deeper_than_kept)
{
    char *out = tmp_make();
    termsight_session *s = limits_session(out);
    enum { DEPTH = TS_MAX_FRAMES + 72 };
    for (int i = 0; i < DEPTH; i++)
        termsight_range_begin("deep", "Nest");
    for (int i = 0; i < DEPTH; i++)
        termsight_range_end();
    termsight_range_begin("after", "Nest");
    termsight_range_end();
    event_list l;
    finish(s, &l);
    ck_assert_uint_eq(count(&l, TS_KIND_OP_RANGE, "deep"), TS_MAX_FRAMES);
    const ts_event *after = find(&l, TS_KIND_OP_RANGE, "after");
    ck_assert_ptr_nonnull(after);
    ck_assert_uint_eq(after->aux, 0); /* depth 0 again */
    list_free(&l);
    tmp_remove(out);
}
END_TEST

/* A mark through the mailbox with a text longer than its argument: cut to what the mailbox
 * holds, recorded, answered. */
START_TEST(mailbox_argument_full)
{
    char *out = tmp_make();
    termsight_session *s = limits_session(out);
    segment *seg;
    ck_assert_int_eq(segment_attach(getpid(), 1, &seg, NULL), 0);
    char text[1000];
    memset(text, 'm', sizeof text - 1);
    text[sizeof text - 1] = 0;
    uint64_t seq;
    ck_assert_int_eq(mailbox_send(seg, TS_CMD_MARK, text, &seq, NULL), 0);
    int32_t status = -1;
    /* The recorder thread answers; wait with a deadline of 30 s. */
    for (int i = 0; i < 30000 && !mailbox_reply(seg, seq, &status, NULL, 0); i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    ck_assert_int_eq(status, 0);
    segment_close(seg, 0);
    event_list l;
    finish(s, &l);
    ck_assert_uint_eq(count(&l, TS_KIND_MARK, NULL), 1);
    for (size_t i = 0; i < l.n; i++)
        if (l.ev[i].kind == TS_KIND_MARK)
            ck_assert_uint_eq(strlen(name_of(&l, l.ev[i].name)), TS_MAILBOX_ARG - 1);
    list_free(&l);
    tmp_remove(out);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {
        string_ids_full,         string_arena_full,     queues_and_thread_names_full,
        frames_deeper_than_kept, mailbox_argument_full, NULL};
    return faults_main("limits", 120, tests);
}
