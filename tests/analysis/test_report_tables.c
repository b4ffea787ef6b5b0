/* test_report_tables: the report folder's tables (report_csv.c, report_html.c) on golden
 * recordings written to disk and read back: every file and header, hand-computed rows, odd names
 * in CSV, text_clean, the run folder, rows that do not depend on the order of arrival. */
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

/* The header as one line, to compare with the documented one. */
static void expect_header(const csv_file *f, const char *want)
{
    char line[1024] = "";
    for (char **c = f->rows[0]; *c; c++) {
        if (c != f->rows[0])
            strcat(line, ",");
        strcat(line, *c);
    }
    ck_assert_str_eq(line, want);
}

static const struct {
    const char *in;
    size_t len;
    const char *out;
} clean_cases[] = {
#define IN(s) s, sizeof(s) - 1
    {IN("plain"), "plain"},
    {IN("tab\tcr\rlf\n"), "tab\tcr\rlf\n"},           /* kept: CSV quotes them, cJSON escapes */
    {IN("\x01"), "\\x01"},                            /* C0 control */
    {IN("a\0b"), "a\\x00b"},                          /* NUL inside a name */
    {IN("\x7f"), "\\x7f"},                            /* DEL */
    {IN("\xff"), "\\xff"},                            /* never UTF-8 */
    {IN("\xc3\xa9t\xc3\xa9"), "\xc3\xa9t\xc3\xa9"},   /* valid two-byte sequences */
    {IN("\xc3"), "\\xc3"},                            /* cut short */
    {IN("\xc3("), "\\xc3("},                          /* bad continuation */
    {IN("\xc0\xaf"), "\\xc0\\xaf"},                   /* overlong */
    {IN("\xe0\x80\xaf"), "\\xe0\\x80\\xaf"},          /* overlong, three bytes */
    {IN("\xed\xa0\x80"), "\\xed\\xa0\\x80"},          /* UTF-16 surrogate */
    {IN("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80"},     /* U+1F600 */
    {IN("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80"}, /* past U+10FFFF */
    {IN("\xc2\x85"), "\\xc2\\x85"},                   /* C1 control U+0085 */
    {IN("\xc2\xa0"), "\xc2\xa0"},                     /* U+00A0 is no control */
    {IN("\\x41"), "\\x5cx41"},                        /* a literal "\x" stays decodable */
    {IN("\\n\\"), "\\n\\"},                           /* other backslashes stay */
#undef IN
};

START_TEST(test_clean_table)
{
    char out[64];
    size_t n = text_clean(clean_cases[_i].in, clean_cases[_i].len, out, 1);
    ck_assert_str_eq(out, clean_cases[_i].out);
    ck_assert_uint_eq(n, strlen(clean_cases[_i].out));
}
END_TEST

START_TEST(test_run_folder)
{
    char *tmp = tmp_make();
    golden g;
    golden_init(&g);
    golden_op(&g, 1, "x", NULL, 1, 2, 0);
    char *run = path_join(tmp, "run");
    write_run(&g, run);
    char *other = path_join(tmp, "bare");
    golden_write_recording(&g, other); /* events.tsr directly in a folder not named recording */
    golden_free(&g);

    char *real = realpath(run, NULL), *real_other = realpath(other, NULL);
    char *rec = path_join(run, TS_RECORDING_DIR), *file = path_join(rec, TS_RECORDING_FILE);
    char *bare_file = path_join(other, TS_RECORDING_FILE);
    const char *paths[] = {run, rec, file};
    for (size_t i = 0; i < 3; i++) {
        char *f = report_run_folder(paths[i]);
        ck_assert_str_eq(f, real);
        free(f);
    }
    char *f = report_run_folder(bare_file);
    ck_assert_str_eq(f, real_other);
    free(f);
    f = report_run_folder(other);
    ck_assert_str_eq(f, real_other);
    free(f);
    free(real);
    free(real_other);
    free(rec);
    free(file);
    free(bare_file);
    free(other);
    free(run);
    tmp_remove(tmp);
}
END_TEST

static const struct {
    const char *file, *header;
} documented[] = {
    {"op_statistics.csv", "op,type,count,total_us,self_us,avg_us,min_us,max_us,share_pct,flops"},
    {"op_type_statistics.csv", "type,count,total_us,self_us,avg_us,min_us,max_us,share_pct,flops"},
    {"kernel_statistics.csv", "kernel,op,count,total_us,avg_us,min_us,max_us,communication"},
    {"step_trace.csv", "step,begin_us,end_us,fp_start_us,bp_end_us,interval_us,fpbp_us,tail_us,"
                       "total_us,fp_op,bp_op,source,compute_us,comm_wait_us,eval_us,gpu_device,"
                       "gpu_busy_us,gpu_idle_us,gpu_idle_data_us,gpu_idle_host_us,gpu_idle_sync_us,"
                       "gpu_idle_other_us"},
    {"overlap.csv", "step,begin_us,end_us,total_us,compute_us,comm_us,pure_comm_us,free_us,gap_us"},
    {"data_queues.csv", "queue,role,producer,consumer,capacity,samples,avg_size,avg_usage_pct,"
                        "empty_pct,full_pct,verdict,bottleneck_op,finding,suggestion"},
    {"data_queue_usage.csv", "queue,begin_us,end_us,samples,avg_usage_pct,empty_pct,full_pct"},
    {"cpu_utilization.csv",
     "begin_us,end_us,user_pct,nice_pct,system_pct,idle_pct,iowait_pct,irq_pct,softirq_pct,"
     "steal_pct,context_switches,running,blocked,process_user_pct,process_system_pct,cpus"},
    {"cpu_threads.csv", "tid,thread,samples,avg_user_pct,avg_system_pct,last_total_pct"},
    {"cpu_processes.csv",
     "pid,ppid,process,samples,avg_user_pct,avg_system_pct,avg_cpu_pct,"
     "peak_cpu_pct,cpu_us,last_rss_bytes,peak_rss_bytes,first_us,last_us,ended"},
    {"memory.csv", "t_us,device,bytes,peak_bytes"},
    {"memory_allocations.csv", "name,device,count,bytes_total,live_bytes,peak_live_bytes"},
    {"flops.csv", "scope,level,flops,time_us,gflops_per_s"},
    {"step_ops.csv", "step,op,type,count,total_us"},
};

START_TEST(test_files_and_headers)
{
    char *tmp, *dir;
    report *r = report_a(&tmp, &dir, NULL);
    for (size_t i = 0; i < sizeof documented / sizeof documented[0]; i++) {
        csv_file f = csv_read(dir, documented[i].file);
        expect_header(&f, documented[i].header);
        csv_free(&f);
    }
    const char *others[] = {"timeline.json", "summary.json", "report.txt", "report.html",
                            "report.sqlite"};
    for (size_t i = 0; i < 5; i++) {
        char *p = path_join(dir, others[i]);
        ck_assert_msg(exists(p), "%s missing", others[i]);
        free(p);
    }
    /* Nothing else: 14 tables and these 5. */
    ck_assert_int_eq(count_prefix(dir, ""), 14 + 5 + 2 /* . and .. */);
    ck_assert_str_eq(report_info_of(r)->dir + strlen(report_info_of(r)->dir) - 7, "/report");
    report_free(r);
    free(dir);
    tmp_remove(tmp);
}
END_TEST

/* report.html: one page that stands alone (no script, no file or site it loads), the step
 * bars (three parts a step), the operators with their names escaped for HTML (a name can say
 * anything: "<script>" stays text), the queue with its verdict, the CPU gauges, and the links
 * to the trace and the other files. */
#define HOSTILE "<script>alert(1)</script>&'"

static void build_hostile(golden *g)
{
    build_a(g);
    golden_op(g, 100, HOSTILE, NULL, 2500, 2550, 0);
}

START_TEST(test_html)
{
    char *tmp, *dir;
    report *r = report_golden(build_hostile, &tmp, &dir, NULL);
    char *path = path_join(dir, "report.html");
    size_t len = 0;
    char *html = slurp(path, &len);
    ck_assert_msg(!strncmp(html, "<!DOCTYPE html>", 15), "%.40s", html);
    ck_assert_msg(strstr(html, "</html>\n"), "the page is cut short");
    static const char *const absent[] = {"<script", "<link", " src=", "url(", "@import", "<iframe"};
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++)
        ck_assert_msg(!strstr(html, absent[i]), "report.html has %s", absent[i]);
    ck_assert_msg(strstr(html, "&lt;script&gt;alert(1)&lt;/script&gt;&amp;&#39;"), "%s", html);
    ck_assert_msg(strstr(html, "a,b&quot;c\\x0ad\\xff"), "the weird name is not there, escaped");
    /* Two steps, three parts each. */
    size_t rects = 0;
    const char *steps = strstr(html, "id=\"steps\""), *ops = strstr(html, "id=\"ops\"");
    ck_assert(steps && ops && steps < ops);
    for (const char *q = steps; (q = strstr(q, "<rect")) && q < ops; q++)
        rects++;
    ck_assert_uint_eq(rects, 6);
    ck_assert_ptr_nonnull(
        strstr(html, "step 1: 1 ms = interval 100 us + compute 600 us + tail 300 us"));
    static const char *const present[] = {"Default/net/Conv2D-op1",
                                          "Default/net/MatMul-op2",
                                          "batch,q",
                                          "data_processing",
                                          "id=\"cpu\"",
                                          ">machine<",
                                          ">process<",
                                          "href=\"timeline.json\"",
                                          "href=\"summary.json\"",
                                          "id=\"advice\""};
    for (size_t i = 0; i < sizeof present / sizeof present[0]; i++)
        ck_assert_msg(strstr(html, present[i]), "report.html lacks %s", present[i]);
    free(html);
    free(path);
    report_free(r);
    free(dir);
    tmp_remove(tmp);
}
END_TEST

START_TEST(test_op_rows)
{
    char *tmp, *dir;
    report *r = report_a(&tmp, &dir, NULL);
    csv_file f = csv_read(dir, "op_statistics.csv");
    ck_assert_uint_eq(f.n, 1 + 3);
    /* By total time: Conv2D-op1 350, MatMul-op2 300, WEIRD 100 (see build_a). */
    expect_row(&f, 1,
               (const char *[]){"Default/net/Conv2D-op1", "Conv2D", "2", "350.000", "350.000",
                                "175.000", "150.000", "200.000", "46.667", "0", NULL});
    expect_row(&f, 2,
               (const char *[]){"Default/net/MatMul-op2", "MatMul", "1", "300.000", "300.000",
                                "300.000", "300.000", "300.000", "40.000", "1000", NULL});
    expect_row(&f, 3,
               (const char *[]){WEIRD_CLEAN, WEIRD_TYPE, "1", "100.000", "100.000", "100.000",
                                "100.000", "100.000", "13.333", "0", NULL});
    csv_free(&f);

    f = csv_read(dir, "op_type_statistics.csv");
    ck_assert_uint_eq(f.n, 1 + 3);
    expect_row(&f, 1,
               (const char *[]){"Conv2D", "2", "350.000", "350.000", "175.000", "150.000",
                                "200.000", "46.667", "0", NULL});
    expect_row(&f, 2,
               (const char *[]){"MatMul", "1", "300.000", "300.000", "300.000", "300.000",
                                "300.000", "40.000", "1000", NULL});
    expect_row(&f, 3,
               (const char *[]){WEIRD_TYPE, "1", "100.000", "100.000", "100.000", "100.000",
                                "100.000", "13.333", "0", NULL});
    csv_free(&f);

    /* The raw text: the odd name's field is quoted, its quote doubled, its newline kept. */
    char *p = path_join(dir, "op_statistics.csv");
    char *text = slurp(p, NULL);
    ck_assert_ptr_nonnull(strstr(text, "\n\"a,b\"\"c\nd\\xff\",\"Weird,\"\"T\"\"\",1,"));
    free(text);
    free(p);

    f = csv_read(dir, "kernel_statistics.csv");
    ck_assert_uint_eq(f.n, 1); /* no kernels in golden A */
    csv_free(&f);
    f = csv_read(dir, "flops.csv");
    /* MatMul-op2 carried 1000 FLOPs in 300 us: scopes Default (1) and Default/net (2), each
     * 1000 / 300000 ns = 0.003 GFLOPS. */
    ck_assert_uint_eq(f.n, 1 + 2);
    expect_row(&f, 1, (const char *[]){"Default", "1", "1000", "300.000", "0.003", NULL});
    expect_row(&f, 2, (const char *[]){"Default/net", "2", "1000", "300.000", "0.003", NULL});
    csv_free(&f);
    report_free(r);
    free(dir);
    tmp_remove(tmp);
}
END_TEST

START_TEST(test_step_rows)
{
    char *tmp, *dir;
    report *r = report_a(&tmp, &dir, NULL);
    csv_file f = csv_read(dir, "step_trace.csv");
    ck_assert_uint_eq(f.n, 1 + 2);
    expect_row(&f, 1,
               (const char *[]){"1",
                                "1000.000",
                                "2000.000",
                                "1100.000",
                                "1700.000",
                                "100.000",
                                "600.000",
                                "300.000",
                                "1000.000",
                                "Default/net/Conv2D-op1",
                                "Default/net/MatMul-op2",
                                "auto",
                                "600.000",
                                "0.000",
                                "0.000",
                                "",
                                "",
                                "",
                                "",
                                "",
                                "",
                                "",
                                NULL});
    expect_row(
        &f, 2,
        (const char *[]){"2",         "2000.000", "3000.000", "2100.000", "2400.000",
                         "100.000",   "300.000",  "600.000",  "1000.000", "Default/net/Conv2D-op1",
                         WEIRD_CLEAN, "auto",     "300.000",  "0.000",    "0.000",
                         "",          "",         "",         "",         "",
                         "",          "",         NULL});
    csv_free(&f);
    f = csv_read(dir, "overlap.csv");
    ck_assert_uint_eq(f.n, 1 + 2);
    expect_row(&f, 1,
               (const char *[]){"1", "1000.000", "2000.000", "1000.000", "500.000", "0.000",
                                "0.000", "500.000", "100.000", NULL});
    expect_row(&f, 2,
               (const char *[]){"2", "2000.000", "3000.000", "1000.000", "250.000", "0.000",
                                "0.000", "750.000", "50.000", NULL});
    csv_free(&f);
    report_free(r);
    free(dir);
    tmp_remove(tmp);
}
END_TEST

/* A run that starts between two bucket boundaries: its first usage bucket begins at the run's
 * start (0), never before it. */
static void build_late_start(golden *g)
{
    golden_init(g);
    g->start_ns = 1500 * MS; /* 1.5 s on the collector's clock: buckets begin at 1 s and 2 s */
    golden_queue_info(g, QUEUE_NAME, TS_QUEUE_HOST, 4, "loader", "train");
    g->ev[g->nev - 1].begin_ns = g->ev[g->nev - 1].end_ns = g->start_ns; /* at the start */
    for (int i = 0; i < 10; i++)
        golden_queue(g, QUEUE_NAME, TS_QUEUE_HOST, 1600000 + 100000 * (uint64_t)i, 2, 4);
}

START_TEST(test_queue_usage_from_the_start)
{
    char *tmp, *dir;
    report *r = report_golden(build_late_start, &tmp, &dir, NULL);
    csv_file f = csv_read(dir, "data_queue_usage.csv");
    ck_assert_uint_eq(f.n, 1 + 2);
    /* [1.5 s, 2 s): 4 samples; [2 s, 3 s): 6. */
    expect_row(
        &f, 1,
        (const char *[]){QUEUE_NAME, "0.000", "500000.000", "4", "50.000", "0.000", "0.000", NULL});
    expect_row(&f, 2,
               (const char *[]){QUEUE_NAME, "500000.000", "1500000.000", "6", "50.000", "0.000",
                                "0.000", NULL});
    csv_free(&f);
    report_free(r);
    free(dir);
    tmp_remove(tmp);
}
END_TEST

START_TEST(test_queue_cpu_memory_rows)
{
    char *tmp, *dir;
    report *r = report_a(&tmp, &dir, NULL);
    csv_file f = csv_read(dir, "data_queues.csv");
    ck_assert_uint_eq(f.n, 1 + 1);
    /* 10 samples, all empty: usage 0 %, empty 100 %, full 0 %. */
    expect_row(&f, 1,
               (const char *[]){QUEUE_NAME, "host", "loader", "train", "4", "10", "0.000", "0.000",
                                "100.000", "0.000", "data_processing", "*", "*", "*", NULL});
    ck_assert_msg(strlen(f.rows[1][12]) > 0, "the finding's text is empty");
    csv_free(&f);

    f = csv_read(dir, "data_queue_usage.csv");
    ck_assert_uint_eq(f.n, 1 + 1);
    expect_row(&f, 1,
               (const char *[]){QUEUE_NAME, "0.000", "1000000.000", "10", "0.000", "100.000",
                                "0.000", NULL});
    csv_free(&f);

    f = csv_read(dir, "cpu_utilization.csv");
    ck_assert_uint_eq(f.n, 1 + 1);
    /* Machine shares from 0.01 % units; the process: 500 us user, 100 us system over 1000 us. */
    expect_row(&f, 1,
               (const char *[]){"1000.000", "2000.000", "25.00", "0.00", "5.00", "70.00", "0.00",
                                "0.00", "0.00", "0.00", "50", "2", "1", "50.00", "10.00", "4",
                                NULL});
    csv_free(&f);

    f = csv_read(dir, "memory.csv");
    ck_assert_uint_eq(f.n, 1 + 1);
    expect_row(&f, 1, (const char *[]){"1500.000", "host", "1048576", "*", NULL});
    csv_free(&f);
    report_free(r);
    free(dir);
    tmp_remove(tmp);
}
END_TEST

/* kernel_statistics.csv from golden B: by total time, each kernel with the op it ran under
 * (none for the collective), the communication flag set for NCCL. */
START_TEST(test_kernel_rows)
{
    golden g;
    build_b(&g);
    char *tmp = tmp_make();
    char *run = path_join(tmp, "run");
    write_run(&g, run);
    golden_free(&g);
    report *r = run_report(run, NULL);
    csv_file f = csv_read(report_info_of(r)->dir, "kernel_statistics.csv");
    ck_assert_uint_eq(f.n, 1 + 2);
    expect_row(&f, 1,
               (const char *[]){"ncclAllReduce", "", "1", "100.000", "100.000", "100.000",
                                "100.000", "1", NULL});
    expect_row(
        &f, 2,
        (const char *[]){KERNEL, "child2", "2", "70.000", "35.000", "20.000", "50.000", "0", NULL});
    csv_free(&f);
    /* The step on the device: step 1 [900,2100] has kernels on device 0 (70 us) and the
     * all-reduce on device 1 (100 us): device 1, busy [1500,1600]. Its idle time is data before
     * the forward start ("outer" at 1000, 100 us), the rest the host's (no launch record names
     * the all-reduce). Step 2 has no device work: empty columns. */
    f = csv_read(report_info_of(r)->dir, "step_trace.csv");
    ck_assert_uint_eq(f.n, 1 + 2);
    expect_row(&f, 1,
               (const char *[]){"1",       "*",        "*",        "*",     "*",       "*",
                                "*",       "*",        "1200.000", "*",     "*",       "*",
                                "*",       "*",        "*",        "1",     "100.000", "1100.000",
                                "100.000", "1000.000", "0.000",    "0.000", NULL});
    expect_row(&f, 2, (const char *[]){"2", "*", "*", "*", "*", "*", "*", "*", "*", "*", "*", "*",
                                       "*", "*", "*", "",  "",  "",  "",  "",  "",  "",  NULL});
    csv_free(&f);
    /* summary.json: the same, averaged over the one step with device work. */
    cJSON *j = json_read(report_info_of(r)->dir, "summary.json");
    ck_assert_int_eq((int)jnum(j, "steps.device.device"), 1);
    ck_assert_int_eq((int)jnum(j, "steps.device.steps"), 1);
    ck_assert_double_eq_tol(jnum(j, "steps.device.total_us"), 1200, 1e-9);
    ck_assert_double_eq_tol(jnum(j, "steps.device.busy_us"), 100, 1e-9);
    ck_assert_double_eq_tol(jnum(j, "steps.device.idle_us"), 1100, 1e-9);
    ck_assert_double_eq_tol(jnum(j, "steps.device.idle_data_us"), 100, 1e-9);
    ck_assert_double_eq_tol(jnum(j, "steps.device.idle_host_us"), 1000, 1e-9);
    ck_assert_double_eq_tol(jnum(j, "steps.device.idle_sync_us"), 0, 1e-9);
    ck_assert_double_eq_tol(jnum(j, "steps.device.idle_other_us"), 0, 1e-9);
    /* The device records under an operator: the two kernels of child2, not the all-reduce. */
    ck_assert_int_eq((int)jnum(j, "device_records.count"), 3);
    ck_assert_int_eq((int)jnum(j, "device_records.with_op"), 2);
    ck_assert_int_eq((int)jnum(j, "device_records.without_op"), 1);
    ck_assert_double_eq_tol(jnum(j, "device_records.total_us"), 170, 1e-9);
    ck_assert_double_eq_tol(jnum(j, "device_records.without_op_us"), 100, 1e-9);
    cJSON_Delete(j);
    /* report.txt and report.html say it under the host's split, which says it is the host's. */
    char *path = path_join(report_info_of(r)->dir, "report.txt");
    char *text = slurp(path, NULL);
    ck_assert_msg(strstr(text, "(on the host; FP/BP from ") &&
                      strstr(text, "on the device (GPU 1, 1 step with device work): busy ") &&
                      strstr(text, "(8 %), idle ") && strstr(text, "+ host-bound ") &&
                      strstr(text, "3 kernels, copies and memsets, 2 (66.7 %) under an operator; "
                                   "under none: 1 (58.8 % of their time)"),
                  "report.txt:\n%.1500s", strstr(text, "Steps") ? strstr(text, "Steps") : text);
    free(text);
    free(path);
    path = path_join(report_info_of(r)->dir, "report.html");
    text = slurp(path, NULL);
    ck_assert_ptr_nonnull(strstr(text, "Step trace (on the host)"));
    ck_assert_ptr_nonnull(strstr(text, "On the device (GPU 1, 1 step with device work): busy "));
    free(text);
    free(path);
    report_free(r);
    free(run);
    tmp_remove(tmp);
}
END_TEST

/* The same events in another recording order (each thread's block moved, as drains interleave
 * lanes differently) give the same tables, byte for byte. */
static void write_reordered(golden *g, const char *run)
{
    golden r;
    golden_init(&r);
    /* Names first (same ids), then the events with tid 100's in the end, the others first. */
    for (uint32_t i = 2; i < g->nnames; i++)
        golden_name_n(&r, g->names[i], g->lens[i]);
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < g->nev; i++)
            if ((g->ev[i].tid == 100) == pass)
                golden_push(&r, g->ev[i]);
    write_run(&r, run);
    golden_free(&r);
}

START_TEST(test_tables_order_independent)
{
    golden g;
    build_a(&g);
    char *tmp = tmp_make();
    char *run1 = path_join(tmp, "run1"), *run2 = path_join(tmp, "run2");
    write_run(&g, run1);
    write_reordered(&g, run2);
    golden_free(&g);
    report_free(run_report(run1, NULL));
    report_free(run_report(run2, NULL));
    const char *files[] = {"op_statistics.csv",
                           "op_type_statistics.csv",
                           "kernel_statistics.csv",
                           "step_trace.csv",
                           "overlap.csv",
                           "data_queues.csv",
                           "flops.csv"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char *d1 = path_join(run1, REPORT_DIR), *d2 = path_join(run2, REPORT_DIR);
        char *p1 = path_join(d1, files[i]), *p2 = path_join(d2, files[i]);
        char *a = slurp(p1, NULL), *b = slurp(p2, NULL);
        ck_assert_msg(!strcmp(a, b), "%s differs:\n%s\n---\n%s", files[i], a, b);
        free(a);
        free(b);
        free(p1);
        free(p2);
        free(d1);
        free(d2);
    }
    free(run1);
    free(run2);
    tmp_remove(tmp);
}
END_TEST

static Suite *report_tables_suite(void)
{
    Suite *s = suite_create("report_tables");
    TCase *tc = tcase_create("text");
    tcase_add_loop_test(tc, test_clean_table, 0, sizeof clean_cases / sizeof clean_cases[0]);
    tcase_add_test(tc, test_run_folder);
    suite_add_tcase(s, tc);

    tc = tcase_create("tables");
    tcase_add_test(tc, test_files_and_headers);
    tcase_add_test(tc, test_html);
    tcase_add_test(tc, test_op_rows);
    tcase_add_test(tc, test_step_rows);
    tcase_add_test(tc, test_queue_cpu_memory_rows);
    tcase_add_test(tc, test_queue_usage_from_the_start);
    tcase_add_test(tc, test_tables_order_independent);
    tcase_add_test(tc, test_kernel_rows);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tests_run(report_tables_suite());
}
