/* Event vocabulary: kind and state names, the error-message helper, and the record layout. The
 * names are pinned on purpose: reports and recordings carry them, so renaming one must show up as
 * a failing test. */
#include "model_test.h"

#include <ctype.h>
#include <stddef.h>

static const struct {
    uint32_t kind;
    const char *name;
} kinds[] = {
    {TS_KIND_NONE, "none"},
    {TS_KIND_OP_RANGE, "op"},
    {TS_KIND_KERNEL, "kernel"},
    {TS_KIND_MEMCPY, "memcpy"},
    {TS_KIND_MEMSET, "memset"},
    {TS_KIND_DEVMEM_ALLOC, "devmem_alloc"},
    {TS_KIND_DEVMEM_FREE, "devmem_free"},
    {TS_KIND_CUDA_API, "cuda_api"},
    {TS_KIND_NVTX_RANGE, "nvtx_range"},
    {TS_KIND_NVTX_MARK, "nvtx_mark"},
    {TS_KIND_STEP_BEGIN, "step_begin"},
    {TS_KIND_STEP_END, "step_end"},
    {TS_KIND_PHASE, "phase"},
    {TS_KIND_QUEUE_SAMPLE, "queue"},
    {TS_KIND_QUEUE_INFO, "queue_info"},
    {TS_KIND_COUNTER, "counter"},
    {TS_KIND_CPU_MACHINE, "cpu_machine"},
    {TS_KIND_CPU_PROCESS, "cpu_process"},
    {TS_KIND_CPU_THREAD, "cpu_thread"},
    {TS_KIND_HOST_MEMORY, "host_memory"},
    {TS_KIND_COMM_OP, "comm"},
    {TS_KIND_LOST, "lost"},
    {TS_KIND_MARK, "mark"},
    {TS_KIND_SYNC, "sync"},
    {TS_KIND_THREAD_NAME, "thread_name"},
    {TS_KIND_COLLECT_START, "collect_start"},
    {TS_KIND_COLLECT_STOP, "collect_stop"},
    {TS_KIND_HOST_ALLOC, "host_alloc"},
    {TS_KIND_HOST_FREE, "host_free"},
    {TS_KIND_CONFIG, "config"},
    {TS_KIND_CPU_CHILD, "cpu_child"},
};

#define N_KINDS (sizeof kinds / sizeof kinds[0])

/* A kind added to the enum without a row here fails this first. */
START_TEST(test_kind_table_complete)
{
    ck_assert_uint_eq(N_KINDS, TS_KIND__COUNT);
    for (size_t i = 0; i < N_KINDS; i++)
        ck_assert_uint_eq(kinds[i].kind, i);
}
END_TEST

START_TEST(test_kind_name_pinned)
{
    ck_assert_str_eq(event_kind_name(kinds[_i].kind), kinds[_i].name);
}
END_TEST

START_TEST(test_kind_names_distinct_and_plain)
{
    for (uint32_t k = 0; k < TS_KIND__COUNT; k++) {
        const char *a = event_kind_name(k);
        ck_assert_ptr_nonnull(a);
        ck_assert_str_ne(a, "unknown");
        ck_assert_uint_gt(strlen(a), 0);
        /* Lower-case identifiers: they become CSV values and JSON keys. */
        for (const char *p = a; *p; p++)
            ck_assert_msg(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '_',
                          "kind %u name \"%s\" has '%c'", k, a, *p);
        for (uint32_t j = 0; j < k; j++)
            ck_assert_msg(strcmp(a, event_kind_name(j)) != 0, "kinds %u and %u both \"%s\"", j, k,
                          a);
    }
}
END_TEST

static const uint32_t out_of_range[] = {TS_KIND__COUNT, TS_KIND__COUNT + 1, 255,       256, 65535,
                                        65536,          0x7fffffffu,        UINT32_MAX};

START_TEST(test_kind_out_of_range)
{
    ck_assert_str_eq(event_kind_name(out_of_range[_i]), "unknown");
}
END_TEST

static const struct {
    uint32_t state;
    const char *name;
} states[] = {
    {TS_STATE_IDLE, "idle"},
    {TS_STATE_COLLECTING, "collecting"},
    {TS_STATE_STOPPED, "stopped"},
    {TS_STATE_ENDED, "ended"},
    {4, "unknown"},
    {5, "unknown"},
    {0x80000000u, "unknown"},
    {UINT32_MAX, "unknown"},
};

START_TEST(test_state_name)
{
    ck_assert_str_eq(state_name(states[_i].state), states[_i].name);
}
END_TEST

START_TEST(test_cause_set_formats)
{
    char *cause = NULL;
    ck_assert_int_eq(cause_set(&cause, "lane %u of %s: %d%%", 3u, "seg", -7), -1);
    ck_assert_ptr_nonnull(cause);
    ck_assert_str_eq(cause, "lane 3 of seg: -7%");
    free(cause);

    cause = NULL;
    ck_assert_int_eq(cause_set(&cause, "plain"), -1);
    ck_assert_str_eq(cause, "plain");
    free(cause);

    /* Longer than any fixed buffer an implementation might be tempted to use. */
    char *big = malloc(20001);
    ck_assert_ptr_nonnull(big);
    memset(big, 'x', 20000);
    big[20000] = 0;
    cause = NULL;
    ck_assert_int_eq(cause_set(&cause, "<%s>", big), -1);
    ck_assert_uint_eq(strlen(cause), 20002);
    ck_assert_int_eq(cause[0], '<');
    ck_assert_int_eq(cause[20001], '>');
    ck_assert_int_eq(memcmp(cause + 1, big, 20000), 0);
    free(cause);
    free(big);
}
END_TEST

START_TEST(test_cause_set_null)
{
    ck_assert_int_eq(cause_set(NULL, "ignored %s %d", "x", 1), -1);
    ck_assert_int_eq(cause_set(NULL, "%s", "ignored"), -1);
}
END_TEST

/* The record is written to shared memory and to recordings as raw bytes: its layout is the
 * format. */
START_TEST(test_event_layout_pinned)
{
    ck_assert_uint_eq(sizeof(ts_event), 64);
    ck_assert_uint_eq(offsetof(ts_event, kind), 0);
    ck_assert_uint_eq(offsetof(ts_event, flags), 2);
    ck_assert_uint_eq(offsetof(ts_event, tid), 4);
    ck_assert_uint_eq(offsetof(ts_event, device), 8);
    ck_assert_uint_eq(offsetof(ts_event, aux), 12);
    ck_assert_uint_eq(offsetof(ts_event, name), 16);
    ck_assert_uint_eq(offsetof(ts_event, type), 20);
    ck_assert_uint_eq(offsetof(ts_event, begin_ns), 24);
    ck_assert_uint_eq(offsetof(ts_event, end_ns), 32);
    ck_assert_uint_eq(offsetof(ts_event, corr), 40);
    ck_assert_uint_eq(offsetof(ts_event, v0), 48);
    ck_assert_uint_eq(offsetof(ts_event, v1), 56);
}
END_TEST

static Suite *event_suite(void)
{
    Suite *s = suite_create("event");
    TCase *tc = tcase_create("names");
    tcase_add_test(tc, test_kind_table_complete);
    tcase_add_loop_test(tc, test_kind_name_pinned, 0, N_KINDS);
    tcase_add_test(tc, test_kind_names_distinct_and_plain);
    tcase_add_loop_test(tc, test_kind_out_of_range, 0,
                        sizeof out_of_range / sizeof out_of_range[0]);
    tcase_add_loop_test(tc, test_state_name, 0, sizeof states / sizeof states[0]);
    suite_add_tcase(s, tc);

    tc = tcase_create("cause");
    tcase_add_test(tc, test_cause_set_formats);
    tcase_add_test(tc, test_cause_set_null);
    suite_add_tcase(s, tc);

    tc = tcase_create("layout");
    tcase_add_test(tc, test_event_layout_pinned);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return mt_run(event_suite());
}
