/* Live and offline statistics agree: one workload recorded by the real collector (nested
 * operator ranges on two threads, steps, a queue), watched by termsight top's source while it
 * runs, then analysed from its recording as termsight analyse reads it. The operators (count,
 * total and self time, by name and by type) and the steps must come out the same: the live view
 * has them from the boards the collector's recorder keeps of what it writes, the report from the
 * recording, both by model's definitions. */
#include "model/model_test.h"
#include "termsight/termsight.h"
#include "tui_internal.h"

#include <pthread.h>

/* A range of known length: spin until it has lasted ns. */
static void spin_ns(uint64_t ns)
{
    uint64_t end = termsight_now_ns() + ns;
    while (termsight_now_ns() < end)
        ;
}

static void ranges(const char *prefix, int n)
{
    char outer[64], inner[64];
    snprintf(outer, sizeof outer, "%s/Conv2D-op1", prefix);
    snprintf(inner, sizeof inner, "%s/Conv2D-op1/im2col", prefix);
    for (int i = 0; i < n; i++) {
        termsight_range_begin(outer, "Conv2D");
        spin_ns(20000);
        termsight_range_begin(inner, "Im2Col");
        spin_ns(30000);
        termsight_range_end();
        termsight_range_end();
        termsight_range_begin("Default/MatMul-op2", "MatMul");
        spin_ns(10000 + 1000 * (uint64_t)i);
        termsight_range_end();
    }
}

static void *other_thread(void *arg)
{
    (void)arg;
    ranges("Worker", 7);
    return NULL;
}

typedef struct row {
    char name[96];
    uint64_t count, total_ns, self_ns;
} row;

/* The operator rows of a (by type or by name), names resolved, sorted by name. */
static size_t rows_of(const analysis *a, int by_type, row *out, size_t max)
{
    op_query q = {.by_type = by_type, .sort = OP_SORT_TOTAL};
    op_stat *st = NULL;
    size_t n = analysis_ops(a, &q, &st);
    ck_assert_uint_le(n, max);
    for (size_t i = 0; i < n; i++) {
        uint32_t len = 0;
        const char *nm = analysis_name(a, st[i].name, &len);
        snprintf(out[i].name, sizeof out[i].name, "%.*s", (int)len, nm ? nm : "");
        out[i].count = st[i].count;
        out[i].total_ns = st[i].total_ns;
        out[i].self_ns = st[i].self_ns;
    }
    free(st);
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(out[j - 1].name, out[j].name) > 0; j--) {
            row t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return n;
}

static void same_rows(const analysis *live, const analysis *offline, int by_type)
{
    row a[32], b[32];
    size_t na = rows_of(live, by_type, a, 32), nb = rows_of(offline, by_type, b, 32);
    ck_assert_uint_eq(na, nb);
    ck_assert_uint_ge(na, 3);
    for (size_t i = 0; i < na; i++) {
        ck_assert_str_eq(a[i].name, b[i].name);
        ck_assert_uint_eq(a[i].count, b[i].count);
        ck_assert_uint_eq(a[i].total_ns, b[i].total_ns);
        ck_assert_uint_eq(a[i].self_ns, b[i].self_ns);
    }
}

START_TEST(test_live_equals_offline)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/live-offline-XXXXXX", mt_tmp_base());
    ck_assert_ptr_nonnull(mkdtemp(dir));

    termsight_options o;
    termsight_options_init(&o);
    o.output_path = dir;
    o.sample_interval_ms = 3600000; /* no CPU samples to speak of: operators and steps only */
    termsight_session *s;
    ck_assert_int_eq(termsight_session_create(&o, &s), TERMSIGHT_OK);
    source *src;
    char *cause = NULL;
    ck_assert_msg(source_open(getpid(), &src, &cause) == 0, "%s", cause ? cause : "?");

    uint32_t q = termsight_queue_register("prefetch", 8, TERMSIGHT_QUEUE_HOST, "loader", "loop");
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, other_thread, NULL), 0);
    for (int step = 0; step < 5; step++) {
        termsight_step_begin();
        termsight_queue_size(q, (uint64_t)step);
        ranges("Default", 3);
        termsight_step_end();
    }
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(termsight_flush(s), TERMSIGHT_OK);

    /* The live side: the boards, once the last step has settled (its end some 50 ms behind the
     * recorder's latest drain), and everything the lanes hold (fewer events than a lane's size,
     * so nothing is overwritten before it is read). */
    analysis *live = source_analysis(src);
    uint64_t t0 = mt_now_ns();
    do {
        mt_pause();
        source_poll(src, termsight_now_ns());
    } while (analysis_steps(live).steps < 5 && mt_now_ns() - t0 < MT_POLL_LIMIT_NS);
    ck_assert_uint_eq(source_status_of(src)->missed, 0);

    char folder[4096];
    snprintf(folder, sizeof folder, "%s", termsight_run_folder(s));
    ck_assert_int_eq(termsight_stop(s), TERMSIGHT_OK);

    /* The offline side: the recording, read as termsight analyse reads it. */
    recording_reader *rd;
    ck_assert_msg(recording_reader_open(folder, &rd, &cause) == 0, "%s", cause ? cause : "?");
    analysis_config cfg;
    analysis_config_init(&cfg);
    analysis *off = analysis_create(&cfg, analysis_names_recording, rd);
    ck_assert_ptr_nonnull(off);
    const ts_event *ev;
    size_t n;
    int got;
    while ((got = recording_reader_next(rd, &ev, &n, &cause)) > 0)
        analysis_feed(off, ev, n);
    ck_assert_msg(got == 0, "%s", cause ? cause : "?");

    /* The report finishes its analysis: its last steps are final, as the board's are. */
    analysis_finish(live);
    analysis_finish(off);
    same_rows(live, off, 1);
    same_rows(live, off, 0);
    step_summary a = analysis_steps(live), b = analysis_steps(off);
    ck_assert_uint_eq(a.steps, b.steps);
    ck_assert_uint_eq(a.steps, 5);
    ck_assert(a.avg_total_ns == b.avg_total_ns);
    ck_assert(a.avg_fpbp_ns == b.avg_fpbp_ns);
    ck_assert(a.avg_compute_ns == b.avg_compute_ns);

    analysis_destroy(off);
    recording_reader_close(rd);
    source_close(src);
    ck_assert_int_eq(termsight_session_destroy(s), TERMSIGHT_OK);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("live_offline");
    TCase *tc = tcase_create("agree");
    tcase_add_test(tc, test_live_equals_offline);
    suite_add_tcase(s, tc);
    return mt_run(s);
}
