/* test_report_summary: summary.json and report.txt (report_json.c, report_text.c) on golden
 * recordings: exact integers, the summary's sections, losses, child processes, --pretty and an
 * analysis without files. */
#include "analysis_internal.h"
#include "golden.h"
#include "report.h"
#include "report_fixture.h"

#define TESTUTIL_TAG "report"
#include "testutil.h"

#include <cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The end of a test of a report: what it read (text, its path), the report, its folder and the
 * temporary folder go. */
static void report_done(report *r, char *text, char *path, char *dir, char *tmp)
{
    free(text);
    free(path);
    report_free(r);
    free(dir);
    tmp_remove(tmp);
}

/* Integers go into JSON exactly: numbers up to 2^53, the digits as they are above. */
START_TEST(test_json_integers)
{
    static const struct {
        uint64_t v;
        const char *text;
    } cases[] = {
        {0, "0"},
        {4242, "4242"},
        {(1ull << 53) - 1, "9007199254740991"},
        {1ull << 53, "9007199254740992"},
        {(1ull << 53) + 1, "9007199254740993"},
        {1795471056859229185ull, "1795471056859229185"},
        {UINT64_MAX, "18446744073709551615"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cJSON *o = cJSON_CreateObject();
        ck_assert_int_eq(report_json_u64(o, "v", cases[i].v), 0);
        char *text = cJSON_PrintUnformatted(o);
        char want[64];
        snprintf(want, sizeof want, "{\"v\":%s}", cases[i].text);
        ck_assert_str_eq(text, want);
        /* and it parses back as JSON */
        cJSON *back = cJSON_Parse(text);
        ck_assert_ptr_nonnull(back);
        ck_assert(cJSON_IsNumber(cJSON_GetObjectItem(back, "v")));
        cJSON_Delete(back);
        free(text);
        cJSON_Delete(o);
    }
}
END_TEST

/* Golden A with two descendant processes, a worker and its helper, sampled once. */
static void build_children(golden *g)
{
    build_a(g);
    golden_push(g, (ts_event){.kind = TS_KIND_CPU_CHILD,
                              .tid = 4242,
                              .aux = 100,
                              .device = TS_DEVICE_HOST,
                              .name = golden_name(g, "worker"),
                              .begin_ns = 1000 * US,
                              .end_ns = 2000 * US,
                              .v0 = 300 * US,
                              .v1 = 100 * US,
                              .corr = 8 << 20});
    golden_push(g, (ts_event){.kind = TS_KIND_CPU_CHILD,
                              .tid = 4243,
                              .aux = 4242,
                              .device = TS_DEVICE_HOST,
                              .name = golden_name(g, WEIRD),
                              .begin_ns = 1500 * US,
                              .end_ns = 2000 * US,
                              .v0 = 500 * US,
                              .corr = 1 << 20});
}

/* cpu_processes.csv, summary.json and report.txt have the descendants; a run without any has
 * the header alone and an empty array. */
START_TEST(test_child_rows)
{
    char *tmp, *dir;
    report *r = report_golden(build_children, &tmp, &dir, NULL);
    csv_file f = csv_read(dir, "cpu_processes.csv");
    ck_assert_uint_eq(f.n, 3);
    /* The helper lived 0.5 ms and was busy all of it: first. */
    const char *helper[] = {"4243",    "4242",   "*",      "1",       "100.00",
                            "0.00",    "100.00", "100.00", "500.000", "1048576",
                            "1048576", "*",      "*",      "0",       NULL};
    const char *worker[] = {"4242",    "100",   "worker", "1",       "30.00",
                            "10.00",   "40.00", "40.00",  "400.000", "8388608",
                            "8388608", "*",     "*",      "0",       NULL};
    expect_row(&f, 1, helper);
    expect_row(&f, 2, worker);
    csv_free(&f);
    cJSON *j = json_read(dir, "summary.json");
    const cJSON *procs = jget(j, "cpu.processes");
    ck_assert_int_eq(cJSON_GetArraySize(procs), 2);
    ck_assert_double_eq(jnum(cJSON_GetArrayItem(procs, 1), "pid"), 4242);
    ck_assert_double_eq(jnum(cJSON_GetArrayItem(procs, 1), "peak_rss_bytes"), 8 << 20);
    ck_assert_str_eq(jstr(cJSON_GetArrayItem(procs, 1), "name"), "worker");
    ck_assert_double_eq(jnum(j, "cpu.processes_left_out"), 0);
    cJSON_Delete(j);
    char *p = path_join(dir, "report.txt");
    char *text = slurp(p, NULL);
    ck_assert_msg(strstr(text, "child processes: 2") &&
                      strstr(text, "worker               pid 4242"),
                  "report.txt:\n%s", text);
    free(text);
    free(p);
    /* report.html lists them too, by name and pid. */
    p = path_join(dir, "report.html");
    text = slurp(p, NULL);
    ck_assert_msg(strstr(text, "Processes it started: 2") && strstr(text, ">worker (pid 4242)<") &&
                      strstr(text, "(pid 4243)<"),
                  "report.html has no process list");
    free(text);
    free(p);
    report_free(r);
    free(dir);
    tmp_remove(tmp);

    r = report_a(&tmp, &dir, NULL);
    f = csv_read(dir, "cpu_processes.csv");
    ck_assert_uint_eq(f.n, 1);
    csv_free(&f);
    j = json_read(dir, "summary.json");
    ck_assert_int_eq(cJSON_GetArraySize(jget(j, "cpu.processes")), 0);
    cJSON_Delete(j);
    report_free(r);
    free(dir);
    tmp_remove(tmp);
}
END_TEST

START_TEST(test_summary)
{
    char *tmp, *dir;
    report *r = report_a(&tmp, &dir, NULL);
    /* A wall-clock time past 2^53 is written digit for digit. */
    char *path = path_join(dir, "summary.json");
    char *json_text = slurp(path, NULL);
    ck_assert_msg(strstr(json_text, "\"start_realtime_ns\": 1795471056859229185") ||
                      strstr(json_text, "\"start_realtime_ns\":1795471056859229185"),
                  "summary.json:\n%.2000s", json_text);
    free(json_text);
    free(path);
    cJSON *j = json_read(dir, "summary.json");
    ck_assert_str_eq(jstr(j, "termsight.version"), TERMSIGHT_VERSION);
    ck_assert_int_eq((int)jnum(j, "termsight.report_format"), REPORT_FORMAT);
    ck_assert_str_eq(jstr(j, "recording.format"), "2.0");
    ck_assert_str_eq(jstr(j, "recording.process"), "golden"); /* golden_write_recording's meta */
    ck_assert_int_eq((int)jnum(j, "recording.pid"), 4242);
    ck_assert_str_eq(jstr(j, "recording.clock"), "tsc");
    ck_assert_int_eq((int)jnum(j, "recording.bytes_skipped"), 0);
    ck_assert_int_eq((int)jnum(j, "recording.chunks_skipped"), 0);
    /* Events of golden A: 1 thread name, 1 queue info, 10 samples, 4 ops, 4 step marks, 2 CPU
     * samples, 1 memory sample = 23. */
    ck_assert_int_eq((int)jnum(j, "events.total"), 23);
    ck_assert_int_eq((int)jnum(j, "events.by_kind.op"), 4);
    ck_assert_int_eq((int)jnum(j, "events.by_kind.queue"), 10);
    ck_assert_int_eq((int)jnum(j, "events.by_kind.kernel"), 0);
    ck_assert_int_eq((int)jnum(j, "events.lost"), 0);
    /* Time: origin 0 (the golden's start); first event at 0 (thread name, queue info), last
     * end 3000 us. */
    ck_assert_double_eq(jnum(j, "time.origin_ns"), 0);
    ck_assert_double_eq(jnum(j, "time.last_us"), 3000);
    ck_assert_int_eq((int)jnum(j, "steps.count"), 2);
    ck_assert_str_eq(jstr(j, "steps.source"), "auto");
    /* Averages of the two steps: interval (100+100)/2, fp/bp (600+300)/2, tail (300+600)/2. */
    ck_assert_double_eq_tol(jnum(j, "steps.avg_interval_us"), 100, 1e-9);
    ck_assert_double_eq_tol(jnum(j, "steps.avg_fpbp_us"), 450, 1e-9);
    ck_assert_double_eq_tol(jnum(j, "steps.avg_tail_us"), 450, 1e-9);
    ck_assert_double_eq_tol(jnum(j, "steps.avg_total_us"), 1000, 1e-9);
    ck_assert_double_eq_tol(jnum(j, "ops.self_us"), 750, 1e-9);

    const cJSON *opsj = cJSON_GetObjectItemCaseSensitive(j, "ops");
    const cJSON *types = cJSON_GetObjectItemCaseSensitive(opsj, "top_types");
    ck_assert_int_eq(cJSON_GetArraySize(types), 3);
    ck_assert_str_eq(jstr(cJSON_GetArrayItem(types, 0), "type"), "Conv2D");
    ck_assert_str_eq(jstr(cJSON_GetArrayItem(types, 2), "type"), WEIRD_TYPE);
    const cJSON *ops = cJSON_GetObjectItemCaseSensitive(opsj, "top_ops");
    ck_assert_str_eq(jstr(cJSON_GetArrayItem(ops, 2), "op"), WEIRD_CLEAN);
    ck_assert_double_eq_tol(jnum(cJSON_GetArrayItem(ops, 2), "total_us"), 100, 1e-9);

    const cJSON *queues = cJSON_GetObjectItemCaseSensitive(j, "queues");
    ck_assert_int_eq(cJSON_GetArraySize(queues), 1);
    ck_assert_str_eq(jstr(cJSON_GetArrayItem(queues, 0), "queue"), QUEUE_NAME);
    ck_assert_str_eq(jstr(cJSON_GetArrayItem(queues, 0), "verdict"), "data_processing");
    ck_assert_int_ge(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "queue_findings")), 1);

    ck_assert_int_eq((int)jnum(j, "cpu.samples"), 1);
    ck_assert_double_eq_tol(jnum(j, "cpu.user_pct"), 25, 1e-9);
    ck_assert_double_eq_tol(jnum(j, "cpu.process_user_pct"), 50, 1e-9);
    ck_assert_int_eq((int)jnum(j, "memory.host_rss_bytes"), 1 << 20);
    ck_assert_int_eq((int)jnum(j, "flops.flops"), 1000);
    ck_assert(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(j, "flops"), "utilization")));
    ck_assert(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(j, "advice")));
    ck_assert_int_eq((int)jnum(j, "timeline.files"), 1);
    ck_assert_int_eq((int)jnum(j, "timeline.left_out"), 0);
    ck_assert_double_eq(jnum(j, "timeline.limit_bytes"), 500.0 * 1024 * 1024);

    /* Every file listed exists, and every file there is listed (report.html and report.sqlite
     * too). */
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(j, "files");
    ck_assert_int_eq(cJSON_GetArraySize(files), 19);
    const cJSON *it;
    cJSON_ArrayForEach(it, files)
    {
        char *p = path_join(dir, it->valuestring);
        ck_assert_msg(exists(p), "listed %s missing", it->valuestring);
        free(p);
    }
    DIR *dp = opendir(dir);
    ck_assert_ptr_nonnull(dp);
    for (struct dirent *e; (e = readdir(dp));) {
        if (e->d_name[0] == '.')
            continue;
        int listed = 0;
        cJSON_ArrayForEach(it, files) listed |= !strcmp(it->valuestring, e->d_name);
        ck_assert_msg(listed, "%s is in the folder, not in files", e->d_name);
    }
    closedir(dp);
    cJSON_Delete(j);

    /* report.txt: the sections and the odd name on one line. */
    char *p = path_join(dir, "report.txt");
    char *text = slurp(p, NULL);
    const char *parts[] = {"termsight report",
                           "Steps",
                           "2 steps, average 1.000 ms",
                           "Operator types",
                           "Conv2D",
                           "Data queues",
                           QUEUE_NAME " (host): data_processing",
                           "Suggestions",
                           "a,b\"c\\x0ad\\xff",
                           "Files"};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        ck_assert_msg(strstr(text, parts[i]), "report.txt lacks '%s':\n%s", parts[i], text);
    report_done(r, text, p, dir, tmp);
}
END_TEST

/* Losses as LTTng-UST reports discarded events: per window and thread (and reason), with when
 * they began and the rate the thread offered then; in summary.json, report.txt and report.html. */
static void build_losses(golden *g)
{
    golden_init(g);
    golden_thread_name(g, 100, "trainer");
    golden_op(g, 100, "op", NULL, 1000, 1100, 1);
    const struct {
        int window_start;
        uint32_t tid, reason;
        uint64_t t_us, lost, rate;
    } n[] = {
        {1, 0, 0, 900, 0, 0},
        {0, 100, TS_LOST_LANE_FULL, 2050, 5, 48000000},
        {0, 200, TS_LOST_LANE_FULL, 2100, 3, 1000000},
        {0, 100, TS_LOST_LANE_FULL, 2200, 7, 52000000}, /* the same row: rate of the first */
        {0, 0, TS_LOST_NO_LANE, 2300, 2, 0},
        {1, 0, 0, 3000, 0, 0},
        {0, 100, TS_LOST_LANE_FULL, 3100, 4, 9000000},
    };
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++) {
        ts_event *e = golden_instant(g, n[i].window_start ? TS_KIND_COLLECT_START : TS_KIND_LOST,
                                     n[i].tid, n[i].t_us);
        e->aux = n[i].reason;
        e->v0 = n[i].lost;
        e->v1 = n[i].rate;
    }
}

START_TEST(test_losses)
{
    char *tmp, *dir;
    report *r = report_golden(build_losses, &tmp, &dir, NULL);
    cJSON *j = json_read(dir, "summary.json");
    ck_assert_int_eq((int)jnum(j, "events.lost"), 21);
    const cJSON *rows = jget(j, "events.losses");
    ck_assert_int_eq(cJSON_GetArraySize(rows), 4);
    const struct {
        int window, tid;
        const char *reason;
        int lost;
        double first_us, rate;
    } want[] = {
        {1, 100, "lane_full", 12, 2050, 48000000},
        {1, 200, "lane_full", 3, 2100, 1000000},
        {1, 0, "no_lane", 2, 2300, 0},
        {2, 100, "lane_full", 4, 3100, 9000000},
    };
    for (int i = 0; i < 4; i++) {
        const cJSON *o = cJSON_GetArrayItem(rows, i);
        ck_assert_int_eq((int)jnum(o, "window"), want[i].window);
        ck_assert_int_eq((int)jnum(o, "tid"), want[i].tid);
        ck_assert_str_eq(jstr(o, "reason"), want[i].reason);
        ck_assert_int_eq((int)jnum(o, "lost"), want[i].lost);
        ck_assert_double_eq(jnum(o, "offered_per_s"), want[i].rate);
        /* first_us on the run's time: the rows apart as their first notices were. */
        ck_assert_double_eq_tol(jnum(o, "first_us") - jnum(cJSON_GetArrayItem(rows, 0), "first_us"),
                                want[i].first_us - want[0].first_us, 1e-6);
    }
    cJSON_Delete(j);
    char *p = path_join(dir, "report.txt");
    char *text = slurp(p, NULL);
    ck_assert_msg(strstr(text,
                         "window 1, thread 100 (trainer): 12 events lost (its lane was full), "
                         "from "),
                  "report.txt:\n%s", text);
    ck_assert_msg(strstr(text, "when it offered 48 M events/s"), "report.txt:\n%s", text);
    ck_assert_msg(strstr(text, "window 1, no one thread: 2 events lost (no lane was free)"),
                  "report.txt:\n%s", text);
    ck_assert_msg(strstr(text, "window 2, thread 100 (trainer): 4 events lost"), "report.txt:\n%s",
                  text);
    /* Most first: the 12 before the 4. */
    const char *big = strstr(text, ": 12 events lost"), *small = strstr(text, ": 4 events lost");
    ck_assert(big && small && big < small);
    free(text);
    free(p);
    p = path_join(dir, "report.html");
    text = slurp(p, NULL);
    ck_assert_msg(strstr(text, "<li>window 1, thread 100 (trainer): 12 events lost"),
                  "report.html lacks the losses");
    report_done(r, text, p, dir, tmp);
}
END_TEST

/* Past ANALYSIS_LOSS_ROWS rows, the rest add up in one more row of no thread. */
/* Twelve threads each losing events, thread t losing t + 1: more than report.txt and
 * report.html list. */
static void build_many_losses(golden *g)
{
    golden_init(g);
    golden_op(g, 100, "op", NULL, 1000, 1100, 1);
    for (uint32_t t = 1; t <= 12; t++) {
        ts_event *e = golden_instant(g, TS_KIND_LOST, 100 + t, 2000 + t);
        e->aux = TS_LOST_LANE_FULL;
        e->v0 = t + 1;
    }
}

/* report.txt and report.html list the ten largest losses, then how many more summary.json has;
 * summary.json has them all. */
START_TEST(test_losses_listed_ten)
{
    char *tmp, *dir;
    report *r = report_golden(build_many_losses, &tmp, &dir, NULL);
    cJSON *j = json_read(dir, "summary.json");
    ck_assert_int_eq(cJSON_GetArraySize(jget(j, "events.losses")), 12);
    cJSON_Delete(j);
    char *p = path_join(dir, "report.txt");
    char *text = slurp(p, NULL);
    ck_assert_msg(strstr(text, "\n            window 0, thread 112: 13 events lost"),
                  "report.txt:\n%s", text);
    ck_assert_msg(strstr(text, "\n            window 0, thread 103: 4 events lost"),
                  "report.txt:\n%s", text);
    ck_assert_msg(!strstr(text, "thread 102:"), "report.txt lists an eleventh:\n%s", text);
    ck_assert_msg(strstr(text, "\n            and 2 more (summary.json lists them all)\n"),
                  "report.txt:\n%s", text);
    free(text);
    free(p);
    p = path_join(dir, "report.html");
    text = slurp(p, NULL);
    ck_assert_msg(strstr(text, "<ul class=\"advice\">\n<li>window 0, thread 112: 13 events lost"),
                  "report.html lacks the losses");
    ck_assert_msg(strstr(text, "<li>and 2 more (summary.json lists them all)</li>\n</ul>\n"),
                  "report.html lacks the count of the others");
    report_done(r, text, p, dir, tmp);
}
END_TEST

START_TEST(test_loss_rows_bounded)
{
    analysis *a = analysis_create(NULL, NULL, NULL);
    ck_assert_ptr_nonnull(a);
    for (uint32_t t = 1; t <= ANALYSIS_LOSS_ROWS + 100; t++) {
        ts_event e = {
            .kind = TS_KIND_LOST, .tid = t, .aux = TS_LOST_LANE_FULL, .v0 = 2, .v1 = 1000};
        analysis_feed(a, &e, 1);
    }
    const analysis_loss *rows;
    size_t n = analysis_losses(a, &rows);
    ck_assert_uint_eq(n, ANALYSIS_LOSS_ROWS + 1);
    ck_assert_uint_eq(rows[ANALYSIS_LOSS_ROWS - 1].tid, ANALYSIS_LOSS_ROWS);
    ck_assert_uint_eq(rows[ANALYSIS_LOSS_ROWS].tid, 0);
    ck_assert_uint_eq(rows[ANALYSIS_LOSS_ROWS].lost, 200);
    ck_assert_uint_eq(rows[ANALYSIS_LOSS_ROWS].rate, 0);
    ck_assert_uint_eq(analysis_totals_of(a)->lost, 2 * (ANALYSIS_LOSS_ROWS + 100));
    analysis_destroy(a);
}
END_TEST

START_TEST(test_pretty_and_analyse_only)
{
    report_options o;
    report_options_init(&o);
    o.pretty = 1;
    char *tmp, *dir;
    report *r = report_a(&tmp, &dir, &o);
    char *p = path_join(dir, "summary.json");
    char *text = slurp(p, NULL);
    ck_assert_ptr_nonnull(strstr(text, "{\n\t\"termsight\":\t{\n"));
    free(text);
    free(p);
    cJSON_Delete(json_read(dir, "summary.json"));
    cJSON_Delete(json_read(dir, "timeline.json"));
    report_free(r);
    free(dir);

    /* write = 0: the analysis only, nothing on disk. */
    report_options_init(&o);
    o.write = 0;
    char *run = path_join(tmp, "run");
    char *rep = path_join(run, REPORT_DIR);
    nftw(rep, tmp_unlink, 16, FTW_DEPTH | FTW_PHYS);
    r = run_report(run, &o);
    ck_assert(!exists(rep));
    ck_assert_ptr_null(report_info_of(r)->dir);
    ck_assert_uint_eq(analysis_steps(report_analysis(r)).steps, 2);
    ck_assert_int_eq(count_prefix(run, REPORT_DIR), 0);
    report_free(r);
    free(rep);
    free(run);
    tmp_remove(tmp);
}
END_TEST

static Suite *report_summary_suite(void)
{
    Suite *s = suite_create("report_summary");
    TCase *tc = tcase_create("tables");
    tcase_add_test(tc, test_json_integers);
    tcase_add_test(tc, test_summary);
    tcase_add_test(tc, test_losses);
    tcase_add_test(tc, test_losses_listed_ten);
    tcase_add_test(tc, test_loss_rows_bounded);
    tcase_add_test(tc, test_child_rows);
    tcase_add_test(tc, test_pretty_and_analyse_only);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tests_run(report_summary_suite());
}
