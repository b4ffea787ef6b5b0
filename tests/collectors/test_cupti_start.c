/* Tests of the CUDA collector's life without a GPU: the activity buffer pool serving many CUDA
 * threads up to its bound, and the no-driver path of cupti_start (one notice, everything else
 * goes on). Record translation: test_cupti.c. */
#include "cupti_internal.h"

#include "analysis.h"

#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if TERMSIGHT_HAVE_CUPTI
/* ---- The buffer pool: grows for many CUDA threads, up to its bound ---------------------- */

#define POOL_THREADS 20 /* more than the 8 buffers the pool once stopped at */

static pthread_barrier_t pool_barrier;

static void *take_buffer(void *arg)
{
    uint8_t **got = arg;
    pthread_barrier_wait(&pool_barrier); /* all ask at once */
    *got = cupti_buffer_get();
    pthread_barrier_wait(&pool_barrier); /* and hold it until all have asked */
    return NULL;
}

START_TEST(test_pool_serves_many_threads)
{
    ck_assert_uint_eq(cupti_pool_bound(POOL_THREADS), POOL_THREADS);
    uint8_t *got[POOL_THREADS] = {0};
    pthread_t th[POOL_THREADS];
    uint64_t refused = cupti_pool_refused();
    ck_assert_int_eq(pthread_barrier_init(&pool_barrier, NULL, POOL_THREADS), 0);
    for (int i = 0; i < POOL_THREADS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, take_buffer, &got[i]), 0);
    for (int i = 0; i < POOL_THREADS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&pool_barrier);
    for (int i = 0; i < POOL_THREADS; i++) {
        ck_assert_ptr_nonnull(got[i]);
        for (int j = 0; j < i; j++)
            ck_assert_ptr_ne(got[i], got[j]);
    }
    ck_assert_uint_eq(cupti_pool_refused(), refused);
    /* At the bound: refused, and counted. */
    ck_assert_ptr_null(cupti_buffer_get());
    ck_assert_uint_eq(cupti_pool_refused(), refused + 1);
    /* One back, one out again (the same buffer, kept for reuse). */
    cupti_buffer_put(got[0]);
    uint8_t *again = cupti_buffer_get();
    ck_assert_ptr_eq(again, got[0]);
    /* A lower bound frees what comes back past it; a buffer not ours is left alone. */
    ck_assert_uint_eq(cupti_pool_bound(2), 2);
    uint8_t foreign[16];
    cupti_buffer_put(foreign);
    for (int i = 0; i < POOL_THREADS; i++)
        cupti_buffer_put(got[i]);
    uint8_t *kept[2] = {cupti_buffer_get(), cupti_buffer_get()};
    ck_assert_ptr_nonnull(kept[0]);
    ck_assert_ptr_nonnull(kept[1]);
    ck_assert_ptr_null(cupti_buffer_get());
    cupti_buffer_put(kept[0]);
    cupti_buffer_put(kept[1]);
    cupti_pool_bound(CUPTI_POOL_DEFAULT);
}
END_TEST
#endif

/* ---- The no-driver path: one notice, everything else goes on ----------------------------- */

START_TEST(test_start_without_driver)
{
    char output[512];
    const char *base = getenv("TERMSIGHT_TEST_TMP");
    snprintf(output, sizeof output, "%s/cupti-%d-%ld", base && *base ? base : "/tmp", (int)getpid(),
             (long)time(NULL));
    termsight_options o;
    termsight_options_init(&o);
    o.output_path = output;
    o.start_collecting = 1;
    termsight_session *s = NULL;
    ck_assert_int_eq(termsight_session_create(&o, &s), TERMSIGHT_OK);

    /* stderr into a file, to count the notices. */
    char errpath[600];
    snprintf(errpath, sizeof errpath, "%s.stderr", output);
    fflush(stderr);
    int saved = dup(2);
    int fd = open(errpath, O_CREAT | O_TRUNC | O_RDWR, 0600);
    ck_assert_int_ge(fd, 0);
    dup2(fd, 2);
    int rc1 = cupti_start(s);
    int rc2 = cupti_start(s);
    cupti_flush(s, 0);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);

    char text[2048] = {0};
    ck_assert_int_ge(pread(fd, text, sizeof text - 1, 0), 0);
    close(fd);
    unlink(errpath);
    if (rc1 == 0) {
        /* A machine with a driver: collection is on, nothing said. */
        ck_assert_int_eq(rc2, 0);
        ck_assert_str_eq(text, "");
        ck_assert(!strncmp(cupti_status(), "CUDA collection on", 18));
    } else {
        ck_assert_int_eq(rc2, -1);
        ck_assert_msg(!strncmp(cupti_status(), "CUDA collection off: ", 21), "%s", cupti_status());
        const char *first = strstr(text, "CUDA collection off: ");
        ck_assert_msg(first != NULL, "stderr: %s", text);
        ck_assert_ptr_null(strstr(first + 1, "CUDA collection off"));
        ck_assert_ptr_eq(strchr(text, '\n'), text + strlen(text) - 1); /* one line */
    }

    /* The session records the rest. */
    uint64_t before = termsight_events_recorded(s);
    termsight_range_begin("op", NULL);
    termsight_range_end();
    termsight_mark("after");
    ck_assert_int_eq(termsight_flush(s), TERMSIGHT_OK);
    ck_assert_uint_ge(termsight_events_recorded(s), before + 2);
    ck_assert_str_eq(termsight_state(s), "collecting");
    cupti_stop(s);
    ck_assert_int_eq(termsight_session_destroy(s), TERMSIGHT_OK);
}
END_TEST

static Suite *suite(void)
{
    Suite *su = suite_create("cupti_start");
    TCase *tc = tcase_create("cupti_start");
#if TERMSIGHT_HAVE_CUPTI
    tcase_add_test(tc, test_pool_serves_many_threads);
#endif
    tcase_add_test(tc, test_start_without_driver);
    suite_add_tcase(su, tc);
    return su;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
