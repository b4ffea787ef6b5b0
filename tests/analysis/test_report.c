/* test_report: the report folder (report.c) and the timeline (timeline.c), on golden recordings
 * written to disk and read back: every file and header, hand-computed rows, odd names in CSV
 * and JSON, summary.json, the trace-event rules, the size limit and the split, and how the
 * folder is put in place (temporary folder, replacement, symbolic links, failures). */
#include "analysis_internal.h"
#include "golden.h"
#include "report.h"

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

/* ---- Files and folders -------------------------------------------------------------------- */

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "open %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    ck_assert_ptr_nonnull(buf);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
            ck_assert_ptr_nonnull(buf);
        }
    }
    fclose(f);
    buf[n] = 0;
    if (len)
        *len = n;
    return buf;
}

static int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* Entries of dir whose name starts with prefix. */
static int count_prefix(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += !strncmp(de->d_name, prefix, strlen(prefix));
    closedir(d);
    return n;
}

/* ---- CSV, read back by the rules the writer promises (RFC 4180, LF lines) --------------- */

typedef struct csv_file {
    char ***rows; /* rows[i][j], NULL-terminated rows */
    size_t n;
} csv_file;

static csv_file csv_parse(const char *text)
{
    csv_file f = {0};
    const char *p = text;
    while (*p) {
        char **row = NULL;
        size_t nf = 0;
        for (;;) {
            char *field = malloc(strlen(p) + 1);
            size_t k = 0;
            if (*p == '"') {
                p++;
                for (;;) {
                    ck_assert_msg(*p, "unterminated quoted field");
                    if (*p == '"' && p[1] == '"') {
                        field[k++] = '"';
                        p += 2;
                    } else if (*p == '"') {
                        p++;
                        break;
                    } else {
                        field[k++] = *p++;
                    }
                }
                ck_assert_msg(*p == ',' || *p == '\n', "junk after a quoted field: %.20s", p);
            } else {
                while (*p && *p != ',' && *p != '\n') {
                    ck_assert_msg(*p != '"' && *p != '\r', "unquoted quote or CR: %.20s", p);
                    field[k++] = *p++;
                }
            }
            field[k] = 0;
            row = realloc(row, (nf + 2) * sizeof *row);
            row[nf++] = field;
            row[nf] = NULL;
            if (*p == ',') {
                p++;
                continue;
            }
            ck_assert_msg(*p == '\n', "a line must end with LF");
            p++;
            break;
        }
        f.rows = realloc(f.rows, (f.n + 1) * sizeof *f.rows);
        f.rows[f.n++] = row;
    }
    return f;
}

static void csv_free(csv_file *f)
{
    for (size_t i = 0; i < f->n; i++) {
        for (char **c = f->rows[i]; *c; c++)
            free(*c);
        free(f->rows[i]);
    }
    free(f->rows);
}

static size_t row_len(char **row)
{
    size_t n = 0;
    while (row[n])
        n++;
    return n;
}

static csv_file csv_read(const char *dir, const char *name)
{
    char *path = path_join(dir, name);
    char *text = slurp(path, NULL);
    csv_file f = csv_parse(text);
    free(text);
    free(path);
    ck_assert_msg(f.n >= 1, "%s has no header", name);
    for (size_t i = 1; i < f.n; i++)
        ck_assert_msg(row_len(f.rows[i]) == row_len(f.rows[0]),
                      "%s row %zu has %zu fields, the header %zu", name, i, row_len(f.rows[i]),
                      row_len(f.rows[0]));
    return f;
}

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

/* Compares a row with the expected fields (NULL-terminated; NULL entries in want[] are not
 * possible, "*" means any value). */
static void expect_row(const csv_file *f, size_t i, const char *const *want)
{
    ck_assert_msg(i < f->n, "row %zu missing", i);
    char **row = f->rows[i];
    size_t n = 0;
    for (; want[n]; n++) {
        ck_assert_msg(row[n], "row %zu: field %zu missing", i, n);
        if (strcmp(want[n], "*"))
            ck_assert_msg(!strcmp(row[n], want[n]), "row %zu field %zu (%s): got '%s', want '%s'",
                          i, n, f->rows[0][n], row[n], want[n]);
    }
    ck_assert_msg(!row[n], "row %zu has more fields than expected", i);
}

/* ---- Goldens ------------------------------------------------------------------------------- */

/* Names that must not break CSV or JSON: a comma, a quote, a newline and a byte that is not
 * UTF-8, and their cleaned form (text_clean: \xff becomes the text "\xff"). */
#define WEIRD       "a,b\"c\nd\xff"
#define WEIRD_CLEAN "a,b\"c\nd\\xff"
#define WEIRD_TYPE  "Weird,\"T\""
#define QUEUE_NAME  "batch,q"

/* Golden A, for the tables. One thread (100, "main"), two steps, four top-level ops:
 *
 *   step 1 [1000, 2000]:  Default/net/Conv2D-op1 [1100, 1300]
 *                         Default/net/MatMul-op2 [1400, 1700]  1000 FLOPs
 *   step 2 [2000, 3000]:  Default/net/Conv2D-op1 [2100, 2250]
 *                         WEIRD (type WEIRD_TYPE) [2300, 2400]
 *
 * Ops (no nesting, so self = total): Conv2D-op1 2 x (200, 150) = 350, MatMul-op2 300, WEIRD 100;
 * all self 750, shares 350/750 = 46.667 %, 300/750 = 40 %, 100/750 = 13.333 %.
 * Steps, by the automatic rule (first op's begin, last op's end):
 *   1: interval 1100-1000 = 100, fp/bp 1700-1100 = 600, tail 2000-1700 = 300, total 1000;
 *      computation (host ops, no device work) 200+300 = 500, free 500, gap 1400-1300 = 100.
 *   2: begins at step 1's end 2000; interval 100, fp/bp 2400-2100 = 300, tail 600, total 1000;
 *      computation 150+100 = 250, free 750, gap 2300-2250 = 50.
 * Queue QUEUE_NAME (host, capacity 4): 10 samples of size 0 at 1000, 1100, ... 1900: mostly
 * empty, so data processing is the bottleneck; all in the 1 s bucket [0, 1 s).
 * CPU: one interval [1000, 2000] of the machine (user 25 %, system 5 %, idle 70 %) and of the
 * process (user 500 us = 50 % of one CPU, system 100 us = 10 %).
 * Host memory: RSS 1 MiB (peak 2 MiB) at 1500. */
static void build_a(golden *g)
{
    golden_init(g);
    golden_thread_name(g, 100, "main");
    golden_queue_info(g, QUEUE_NAME, TS_QUEUE_HOST, 4, "loader", "train");
    for (int i = 0; i < 10; i++)
        golden_queue(g, QUEUE_NAME, TS_QUEUE_HOST, 1000 + 100 * (uint64_t)i, 0, 4);
    golden_op(g, 100, "Default/net/Conv2D-op1", NULL, 1100, 1300, 0);
    golden_op(g, 100, "Default/net/MatMul-op2", NULL, 1400, 1700, 0)->v0 = 1000;
    golden_step(g, 100, 1, 1000, 2000);
    golden_op(g, 100, "Default/net/Conv2D-op1", NULL, 2100, 2250, 0);
    golden_op(g, 100, WEIRD, WEIRD_TYPE, 2300, 2400, 0);
    golden_step(g, 100, 2, 2000, 3000);

    ts_event m = {.kind = TS_KIND_CPU_MACHINE,
                  .device = TS_DEVICE_HOST,
                  .begin_ns = 1000 * US,
                  .end_ns = 2000 * US,
                  .corr = 50,
                  .aux = 2 << 16 | 1};
    uint16_t share[TS_CPU__COUNT] = {
        [TS_CPU_USER] = 2500, [TS_CPU_SYSTEM] = 500, [TS_CPU_IDLE] = 7000};
    ts_cpu_pack(&m, share);
    golden_push(g, m);
    golden_push(g, (ts_event){.kind = TS_KIND_CPU_PROCESS,
                              .device = TS_DEVICE_HOST,
                              .begin_ns = 1000 * US,
                              .end_ns = 2000 * US,
                              .v0 = 500 * US,
                              .v1 = 100 * US,
                              .aux = 2,
                              .corr = 4});
    ts_event *mem = golden_instant(g, TS_KIND_HOST_MEMORY, 100, 1500);
    mem->v0 = 1 << 20;
    mem->v1 = 2 << 20;
}

/* Writes g as dir/recording/events.tsr; returns the run folder dir. */
static void write_run(golden *g, const char *run)
{
    char *rec = path_join(run, TS_RECORDING_DIR);
    golden_write_recording(g, rec);
    free(rec);
}

static report *run_report(const char *path, const report_options *o)
{
    report *r = NULL;
    char *cause = NULL;
    ck_assert_msg(report_run(path, o, &r, &cause) == 0, "report_run: %s", cause);
    ck_assert_ptr_nonnull(r);
    return r;
}

/* Every row of dir's step_trace.csv keeps the split's promise: interval + compute + comm_wait
 * + tail + eval = total, within 1 us (the file has three decimals). */
static void check_split(const char *dir)
{
    char *path = path_join(dir, "step_trace.csv");
    int present = access(path, F_OK) == 0;
    free(path);
    if (!present)
        return;
    csv_file f = csv_read(dir, "step_trace.csv");
    static const char *const want[6] = {"total_us",     "interval_us", "compute_us",
                                        "comm_wait_us", "tail_us",     "eval_us"};
    int col[6] = {-1, -1, -1, -1, -1, -1};
    for (int j = 0; f.n && f.rows[0][j]; j++)
        for (int k = 0; k < 6; k++)
            if (!strcmp(f.rows[0][j], want[k]))
                col[k] = j;
    for (int k = 0; k < 6; k++)
        ck_assert_msg(col[k] >= 0, "step_trace.csv has no %s", want[k]);
    for (size_t i = 1; i < f.n; i++) {
        double sum = 0;
        for (int k = 1; k < 6; k++)
            sum += strtod(f.rows[i][col[k]], NULL);
        ck_assert_msg(fabs(sum - strtod(f.rows[i][col[0]], NULL)) <= 1,
                      "step_trace.csv row %zu: the split adds up to %.3f", i, sum);
    }
    csv_free(&f);
}

/* The run that build makes, in a fresh temporary folder, analysed; *tmp to remove. */
static report *report_golden(void (*build)(golden *), char **tmp, char **dir,
                             const report_options *o)
{
    golden g;
    build(&g);
    *tmp = tmp_make();
    char *run = path_join(*tmp, "run");
    write_run(&g, run);
    golden_free(&g);
    report *r = run_report(run, o);
    *dir = path_join(run, REPORT_DIR);
    free(run);
    check_split(*dir);
    return r;
}

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

/* A golden A run folder in a fresh temporary folder, analysed; *tmp to remove. */
static report *report_a(char **tmp, char **dir, const report_options *o)
{
    return report_golden(build_a, tmp, dir, o);
}

/* ---- text_clean ------------------------------------------------------------------------- */

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

/* ---- The tables --------------------------------------------------------------------------- */

static const struct {
    const char *file, *header;
} documented[] = {
    {"op_statistics.csv", "op,type,count,total_us,self_us,avg_us,min_us,max_us,share_pct,flops"},
    {"op_type_statistics.csv", "type,count,total_us,self_us,avg_us,min_us,max_us,share_pct,flops"},
    {"kernel_statistics.csv", "kernel,op,count,total_us,avg_us,min_us,max_us,communication"},
    {"step_trace.csv", "step,begin_us,end_us,fp_start_us,bp_end_us,interval_us,fpbp_us,tail_us,"
                       "total_us,fp_op,bp_op,source,compute_us,comm_wait_us,eval_us"},
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
               (const char *[]){"1", "1000.000", "2000.000", "1100.000", "1700.000", "100.000",
                                "600.000", "300.000", "1000.000", "Default/net/Conv2D-op1",
                                "Default/net/MatMul-op2", "auto", "600.000", "0.000", "0.000",
                                NULL});
    expect_row(&f, 2,
               (const char *[]){"2", "2000.000", "3000.000", "2100.000", "2400.000", "100.000",
                                "300.000", "600.000", "1000.000", "Default/net/Conv2D-op1",
                                WEIRD_CLEAN, "auto", "300.000", "0.000", "0.000", NULL});
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

/* ---- summary.json and report.txt ---------------------------------------------------------- */

static cJSON *json_read(const char *dir, const char *name)
{
    char *p = path_join(dir, name);
    size_t len;
    char *text = slurp(p, &len);
    cJSON *j = cJSON_ParseWithLength(text, len);
    ck_assert_msg(j != NULL, "%s does not parse", name);
    free(text);
    free(p);
    return j;
}

/* A value by dotted path. Plain tests, no ck_assert on success: Check reports every passed
 * assertion to its parent, which is slow in loops over thousands of events. */
static const cJSON *jget(const cJSON *o, const char *path)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    char *save = NULL;
    for (char *k = strtok_r(buf, ".", &save); k && o; k = strtok_r(NULL, ".", &save))
        o = cJSON_GetObjectItemCaseSensitive(o, k);
    return o;
}

static double jnum(const cJSON *o, const char *path)
{
    const cJSON *it = jget(o, path);
    if (!cJSON_IsNumber(it))
        ck_abort_msg("%s is not a number", path);
    return it->valuedouble;
}

static const char *jstr(const cJSON *o, const char *path)
{
    const cJSON *it = jget(o, path);
    if (!cJSON_IsString(it))
        ck_abort_msg("%s is not a string", path);
    return it->valuestring;
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

/* ---- The timeline --------------------------------------------------------------------------- */

/* Text rules of a timeline file: valid UTF-8 and no control byte but LF (and tab, pretty).
 * Plain tests inside the loop: ck_assert per byte would be slow. */
static void check_bytes(const char *s, size_t len, int pretty)
{
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)s[i];
        if (!(c >= 0x20 || c == '\n' || (pretty && c == '\t')))
            ck_abort_msg("control byte 0x%02x at %zu", c, i);
        size_t n = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
        if (!(c < 0x80 || (c >= 0xc2 && c <= 0xf4)))
            ck_abort_msg("bad UTF-8 lead 0x%02x at %zu", c, i);
        for (size_t k = 1; k < n; k++)
            if (i + k >= len || (s[i + k] & 0xc0) != 0x80)
                ck_abort_msg("bad UTF-8 at %zu", i);
        i += n;
    }
}

typedef struct xspan {
    int pid, tid;
    long long b, e; /* ns */
} xspan;

static int xspan_cmp(const void *pa, const void *pb)
{
    const xspan *a = pa, *b = pb;
    if (a->pid != b->pid)
        return a->pid - b->pid;
    if (a->tid != b->tid)
        return a->tid - b->tid;
    if (a->b != b->b)
        return a->b < b->b ? -1 : 1;
    return a->e > b->e ? -1 : a->e < b->e; /* the longer first: parents before children */
}

static int small_int(const cJSON *v)
{
    return cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble < 100000 &&
           v->valuedouble == (double)(int)v->valuedouble;
}

/* A metadata event's args.name for (ph M, name, pid, tid), or NULL. */
static const char *meta_name(const cJSON *evs, const char *what, int pid, int tid)
{
    const cJSON *e;
    const char *found = NULL;
    cJSON_ArrayForEach(e, evs)
    {
        if (strcmp(jstr(e, "ph"), "M") || strcmp(jstr(e, "name"), what))
            continue;
        if ((int)jnum(e, "pid") != pid)
            continue;
        if (tid && (int)jnum(e, "tid") != tid)
            continue;
        found = jstr(e, "args.name"); /* the last one wins, as in the viewers */
    }
    return found;
}

/* Checks one timeline file against the trace-event rules; returns its parsed root. */
static cJSON *check_trace(const char *path, int pretty)
{
    size_t len;
    char *text = slurp(path, &len);
    check_bytes(text, len, pretty);
    cJSON *root = cJSON_ParseWithLength(text, len);
    ck_assert_msg(root != NULL, "%s is not valid JSON", path);
    free(text);
    const cJSON *evs = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
    ck_assert(cJSON_IsArray(evs));

    /* The names given in this file: (pid, 0) for processes, (pid, tid) for threads. */
    size_t n = (size_t)cJSON_GetArraySize(evs), nx = 0, nm = 0;
    xspan *xs = calloc(n + 1, sizeof *xs), *named = calloc(n + 1, sizeof *named);
    const cJSON *e;
    cJSON_ArrayForEach(e, evs)
    {
        if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "ph")) ||
            strcmp(cJSON_GetObjectItemCaseSensitive(e, "ph")->valuestring, "M"))
            continue;
        ck_assert(cJSON_IsString(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "args"), "name")));
        int thread = !strcmp(jstr(e, "name"), "thread_name");
        ck_assert(thread || !strcmp(jstr(e, "name"), "process_name"));
        named[nm++] = (xspan){(int)jnum(e, "pid"), thread ? (int)jnum(e, "tid") : 0, 0, 0};
    }
    cJSON_ArrayForEach(e, evs)
    {
        const char *ph = jstr(e, "ph");
        if (!small_int(cJSON_GetObjectItemCaseSensitive(e, "pid")))
            ck_abort_msg("pid not a small positive integer");
        const cJSON *tid = cJSON_GetObjectItemCaseSensitive(e, "tid");
        if (tid && !small_int(tid))
            ck_abort_msg("tid not a small positive integer");
        if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "name")))
            ck_abort_msg("an event without a name");
        if (!strcmp(ph, "M"))
            continue;
        if (!tid)
            ck_abort_msg("a %s event without tid", ph);
        double ts = jnum(e, "ts");
        int pid = (int)jnum(e, "pid"), t = (int)jnum(e, "tid");
        if (!strcmp(ph, "X")) {
            double dur = jnum(e, "dur");
            if (dur < 0)
                ck_abort_msg("negative dur");
            xs[nx++] = (xspan){pid, t, llround(ts * 1000), llround((ts + dur) * 1000)};
        }
        /* Every thread with events is named in this file, and its process too. */
        int pname = 0, tname = !strcmp(ph, "C"); /* counters belong to the process */
        for (size_t k = 0; k < nm; k++) {
            pname |= named[k].pid == pid && !named[k].tid;
            tname |= named[k].pid == pid && named[k].tid == t;
        }
        if (!pname || !tname)
            ck_abort_msg("pid %d tid %d: no %s_name in %s", pid, t, pname ? "thread" : "process",
                         path);
    }
    free(named);
    /* Complete events on one track nest: sorted by begin (longer first), each must end within
     * the innermost open span that contains its begin. */
    qsort(xs, nx, sizeof *xs, xspan_cmp);
    xspan stack[256];
    int depth = 0;
    for (size_t i = 0; i < nx; i++) {
        if (i && (xs[i].pid != xs[i - 1].pid || xs[i].tid != xs[i - 1].tid))
            depth = 0;
        while (depth && stack[depth - 1].e <= xs[i].b)
            depth--;
        if (depth && xs[i].e > stack[depth - 1].e)
            ck_abort_msg("pid %d tid %d: [%lld, %lld] crosses [%lld, %lld]", xs[i].pid, xs[i].tid,
                         xs[i].b, xs[i].e, stack[depth - 1].b, stack[depth - 1].e);
        ck_assert_int_lt(depth, 256);
        stack[depth++] = xs[i];
    }
    free(xs);
    return root;
}

/* The events named name (and of phase ph, NULL: any). */
static int count_events(const cJSON *root, const char *ph, const char *name)
{
    const cJSON *e;
    int n = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(root, "traceEvents"))
    {
        if (ph && strcmp(jstr(e, "ph"), ph))
            continue;
        if (name && strcmp(jstr(e, "name"), name))
            continue;
        n++;
    }
    return n;
}

static const cJSON *find_event(const cJSON *root, const char *ph, const char *name)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(root, "traceEvents"))
    {
        if (!strcmp(jstr(e, "ph"), ph) && !strcmp(jstr(e, "name"), name))
            return e;
    }
    ck_abort_msg("no %s event named %s", ph, name);
    return NULL;
}

#define MAIN_NAME       "main \"loop\"\n\x01\xff"
#define MAIN_NAME_CLEAN "main \"loop\"\n\\x01\\xff"
#define KERNEL          "gemm,\"k\""

/* Golden B, for the timeline: nesting written children first, a launch and its kernel, two
 * devices, a partial overlap, a range that ended on another thread, steps, counters.
 *
 *   tid 100 (MAIN_NAME): outer [1000, 2000] > child1 [1100, 1200], child2 [1300, 1500] >
 *                        cudaLaunchKernel [1310, 1320] corr 77
 *   device 0 stream 7:   KERNEL [1400, 1450] corr 77 under child2, KERNEL [1460, 1480]
 *   device 1 stream 3:   ncclAllReduce [1500, 1600] (communication)
 *   tid 200:             p1 [3000, 3200], p2 [3100, 3300] (crosses p1: moved), handoff
 *                        [5000, 6000] ended on another thread
 *   steps 1 [900, 2100], 2 [2100, 6500]; queue samples; host RSS; device 0 alloc and free;
 *   a counter; a mark; a phase mark; a lost-events notice. */
static void build_b(golden *g)
{
    golden_init(g);
    golden_thread_name(g, 100, MAIN_NAME);
    golden_op(g, 100, "child1", NULL, 1100, 1200, 1);
    golden_push(g, (ts_event){.kind = TS_KIND_CUDA_API,
                              .tid = 100,
                              .device = TS_DEVICE_HOST,
                              .name = golden_name(g, "cudaLaunchKernel"),
                              .begin_ns = 1310 * US,
                              .end_ns = 1320 * US,
                              .corr = 77});
    golden_op(g, 100, "child2", NULL, 1300, 1500, 1);
    golden_op(g, 100, "outer", NULL, 1000, 2000, 0);
    golden_kernel(g, 0, 7, KERNEL, "child2", 1400, 1450, 0)->corr = 77;
    golden_kernel(g, 0, 7, KERNEL, "child2", 1460, 1480, 0);
    golden_kernel(g, 1, 3, "ncclAllReduce", NULL, 1500, 1600, 1);
    golden_op(g, 200, "p1", NULL, 3000, 3200, 0);
    golden_op(g, 200, "p2", NULL, 3100, 3300, 0);
    golden_op(g, 200, "handoff", NULL, 5000, 6000, 0)->flags |= TS_EF_CROSS_THREAD;
    golden_step(g, 100, 1, 900, 2100);
    golden_step(g, 100, 2, 2100, 6500);
    for (uint64_t i = 0; i < 3; i++)
        golden_queue(g, QUEUE_NAME, TS_QUEUE_HOST, 1000 + 500 * i, i + 1, 4);
    ts_event *m = golden_instant(g, TS_KIND_HOST_MEMORY, 100, 1500);
    m->v0 = 1 << 20;
    m->v1 = 1 << 20;
    golden_push(g, (ts_event){.kind = TS_KIND_DEVMEM_ALLOC,
                              .tid = 100,
                              .device = 0,
                              .begin_ns = 1400 * US,
                              .end_ns = 1400 * US,
                              .v0 = 4096,
                              .v1 = 0x1000});
    golden_push(g, (ts_event){.kind = TS_KIND_DEVMEM_FREE,
                              .tid = 100,
                              .device = 0,
                              .begin_ns = 1900 * US,
                              .end_ns = 1900 * US,
                              .v0 = 4096,
                              .v1 = 0x1000});
    ts_event *c = golden_instant(g, TS_KIND_COUNTER, 100, 1800);
    c->name = golden_name(g, "loss");
    double half = 0.5;
    memcpy(&c->v0, &half, sizeof half);
    c->flags = TS_EF_DOUBLE;
    golden_instant(g, TS_KIND_MARK, 100, 1050)->name = golden_name(g, "epoch\n1");
    golden_phase(g, 100, TS_PHASE_FORWARD_START, 1000);
    ts_event *lost = golden_instant(g, TS_KIND_LOST, 100, 2050);
    lost->v0 = 5;
    lost->aux = TS_LOST_LANE_FULL;
}

/* The (pid, tid) an event named name was drawn on. */
static void where(const cJSON *root, const char *ph, const char *name, int *pid, int *tid)
{
    const cJSON *e = find_event(root, ph, name);
    *pid = (int)jnum(e, "pid");
    *tid = (int)jnum(e, "tid");
}

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
    report_free(r);
    free(run);
    tmp_remove(tmp);
}
END_TEST

START_TEST(test_timeline_rules)
{
    int pretty = _i;
    golden g;
    build_b(&g);
    char *tmp = tmp_make();
    char *run = path_join(tmp, "run");
    write_run(&g, run);
    golden_free(&g);
    report_options o;
    report_options_init(&o);
    o.pretty = pretty;
    report *r = run_report(run, &o);
    const report_info *info = report_info_of(r);
    ck_assert_uint_eq(info->timeline_files, 1);
    ck_assert_uint_eq(info->timeline_moved, 1); /* p2 */
    ck_assert_uint_eq(info->timeline_dropped, 0);
    ck_assert_uint_eq(info->timeline_left_out, 0);

    char *path = path_join(info->dir, "timeline.json");
    cJSON *root = check_trace(path, pretty);
    ck_assert_uint_eq(
        (uint64_t)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(root, "traceEvents")),
        info->timeline_events);

    /* The host process and its thread names. */
    ck_assert_str_eq(
        meta_name(cJSON_GetObjectItemCaseSensitive(root, "traceEvents"), "process_name", 1, 0),
        "golden (pid 4242)");
    int pid, tid, pid2, tid2;
    where(root, "X", "outer", &pid, &tid);
    ck_assert_int_eq(pid, 1);
    ck_assert_str_eq(
        meta_name(cJSON_GetObjectItemCaseSensitive(root, "traceEvents"), "thread_name", 1, tid),
        MAIN_NAME_CLEAN " (100)");

    /* Times: microseconds from the origin (the golden's start, 0); child1 [1100, 1200]. */
    const cJSON *c1 = find_event(root, "X", "child1");
    ck_assert_double_eq(jnum(c1, "ts"), 1100);
    ck_assert_double_eq(jnum(c1, "dur"), 100);
    ck_assert_str_eq(jstr(c1, "cat"), "op");
    ck_assert_str_eq(jstr(c1, "args.type"), "child1");
    where(root, "X", "child1", &pid2, &tid2);
    ck_assert_int_eq(tid2, tid);
    where(root, "X", "cudaLaunchKernel", &pid2, &tid2);
    ck_assert_int_eq(tid2, tid);

    /* Devices: their own processes; streams as threads. */
    int kpid, ktid;
    where(root, "X", KERNEL, &kpid, &ktid);
    ck_assert_int_ge(kpid, 2);
    ck_assert_str_eq(
        meta_name(cJSON_GetObjectItemCaseSensitive(root, "traceEvents"), "process_name", kpid, 0),
        "device 0");
    ck_assert_str_eq(
        meta_name(cJSON_GetObjectItemCaseSensitive(root, "traceEvents"), "thread_name", kpid, ktid),
        "stream 7");
    ck_assert_int_eq(count_events(root, "X", KERNEL), 2);
    ck_assert_str_eq(jstr(find_event(root, "X", KERNEL), "args.op"), "child2");
    where(root, "X", "ncclAllReduce", &pid2, &tid2);
    ck_assert_int_ne(pid2, kpid);
    ck_assert_str_eq(jstr(find_event(root, "X", "ncclAllReduce"), "cat"), "comm_kernel");

    /* The launch and its kernel: one flow, "s" on the host thread at the call's start, "f"
     * binding to the kernel's slice. */
    const cJSON *s = find_event(root, "s", "ac2g"), *f = find_event(root, "f", "ac2g");
    ck_assert_int_eq((int)jnum(s, "id"), 77);
    ck_assert_int_eq((int)jnum(f, "id"), 77);
    ck_assert_str_eq(jstr(f, "bp"), "e");
    ck_assert_int_eq((int)jnum(s, "tid"), tid);
    ck_assert_double_eq(jnum(s, "ts"), 1310);
    ck_assert_int_eq((int)jnum(f, "pid"), kpid);
    ck_assert_double_eq(jnum(f, "ts"), 1400);
    ck_assert_int_eq(count_events(root, "s", NULL), 1);

    /* The partial overlap: p2 on an overlap track of thread 200. */
    where(root, "X", "p1", &pid, &tid);
    where(root, "X", "p2", &pid2, &tid2);
    ck_assert_int_eq(pid2, pid);
    ck_assert_int_ne(tid2, tid);
    ck_assert_str_eq(
        meta_name(cJSON_GetObjectItemCaseSensitive(root, "traceEvents"), "thread_name", pid2, tid2),
        "thread 200 (overlapping 1)");

    /* The range that ended on another thread: an async pair. */
    const cJSON *b = find_event(root, "b", "handoff"), *e = find_event(root, "e", "handoff");
    ck_assert_double_eq(jnum(b, "id"), jnum(e, "id"));
    ck_assert_double_eq(jnum(b, "ts"), 5000);
    ck_assert_double_eq(jnum(e, "ts"), 6000);
    ck_assert_int_eq(count_events(root, "X", "handoff"), 0);

    /* Steps: one track, "step N" spanning each step. */
    const cJSON *s1 = find_event(root, "X", "step 1");
    ck_assert_double_eq(jnum(s1, "ts"), 900);
    ck_assert_double_eq(jnum(s1, "dur"), 1200);
    where(root, "X", "step 2", &pid2, &tid2);
    ck_assert_int_eq(pid2, (int)jnum(s1, "pid"));
    ck_assert_int_eq(tid2, (int)jnum(s1, "tid"));
    ck_assert_str_eq(
        meta_name(cJSON_GetObjectItemCaseSensitive(root, "traceEvents"), "process_name", pid2, 0),
        "Steps");
    /* The overlap rows. */
    where(root, "X", "computation", &pid, &tid);
    ck_assert_str_eq(
        meta_name(cJSON_GetObjectItemCaseSensitive(root, "traceEvents"), "process_name", pid, 0),
        "Op Overlap Analyse");
    ck_assert_str_eq(
        meta_name(cJSON_GetObjectItemCaseSensitive(root, "traceEvents"), "thread_name", pid, tid),
        "Merged Computation");

    /* Counters. */
    ck_assert_int_eq(count_events(root, "C", "queue " QUEUE_NAME), 3);
    ck_assert_double_eq(jnum(find_event(root, "C", "queue " QUEUE_NAME), "args.size"), 1);
    ck_assert_double_eq(jnum(find_event(root, "C", "host memory"), "args.bytes"), 1 << 20);
    ck_assert_int_ge(count_events(root, "C", "device memory"), 1);
    ck_assert_int_eq((int)jnum(find_event(root, "C", "device memory"), "pid"), kpid);
    ck_assert_double_eq(jnum(find_event(root, "C", "loss"), "args.value"), 0.5);
    /* Instants. */
    ck_assert_double_eq(jnum(find_event(root, "i", "epoch\n1"), "ts"), 1050);
    ck_assert_double_eq(jnum(find_event(root, "i", "forward start"), "ts"), 1000);
    ck_assert_str_eq(jstr(find_event(root, "i", "lost 5 events"), "s"), "g");

    cJSON_Delete(root);
    free(path);
    report_free(r);
    free(run);
    tmp_remove(tmp);
}
END_TEST

/* The overlap guard, case by case: ranges on thread 1 in recording order, how many must go to
 * an overlap track, and that the file keeps the nesting rule whatever happens. */
typedef struct span_case {
    const char *what;
    uint64_t ev[8][2]; /* [begin, end] us, in recording order; {0, 0} ends */
    int moved;
} span_case;

static const span_case span_cases[] = {
    {"children before their parent (the recorder's order)",
     {{10, 20}, {30, 40}, {5, 50}, {60, 70}},
     0},
    {"a parent before its child (late child): nested", {{5, 50}, {10, 20}}, 0},
    {"a second late child cannot be checked against the first: moved",
     {{5, 50}, {10, 20}, {30, 40}},
     1},
    {"partial overlap, later", {{10, 20}, {15, 25}}, 1},
    {"partial overlap, earlier", {{15, 25}, {10, 20}}, 1},
    {"identical ranges nest", {{10, 20}, {10, 20}}, 0},
    {"touching ranges are disjoint", {{10, 20}, {20, 30}, {0, 10}}, 0},
    {"a range late into a gap", {{10, 20}, {40, 50}, {25, 35}}, 0},
    {"a range late across a gap's edge", {{10, 20}, {40, 50}, {25, 45}}, 1},
    {"a parent covering several earlier ones", {{10, 20}, {25, 30}, {35, 40}, {0, 100}}, 0},
    {"three ranges crossing one another: two overlap tracks", {{10, 30}, {20, 40}, {25, 50}}, 2},
    {"zero-length ranges", {{10, 10}, {10, 20}, {20, 20}}, 0},
};

START_TEST(test_timeline_nesting)
{
    const span_case *c = &span_cases[_i];
    golden g;
    golden_init(&g);
    int n = 0;
    char name[16];
    for (; n < 8 && c->ev[n][1]; n++) {
        snprintf(name, sizeof name, "r%d", n);
        golden_op(&g, 1, name, NULL, c->ev[n][0], c->ev[n][1], 0);
    }
    char *tmp = tmp_make();
    char *run = path_join(tmp, "run");
    write_run(&g, run);
    golden_free(&g);
    report *r = run_report(run, NULL);
    const report_info *info = report_info_of(r);
    ck_assert_msg(info->timeline_moved == (uint64_t)c->moved, "%s: moved %llu, want %d", c->what,
                  (unsigned long long)info->timeline_moved, c->moved);
    ck_assert_uint_eq(info->timeline_dropped, 0);
    char *path = path_join(info->dir, "timeline.json");
    cJSON *root = check_trace(path, 0);
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "r%d", i);
        ck_assert_int_eq(count_events(root, "X", name), 1);
    }
    cJSON_Delete(root);
    free(path);
    report_free(r);
    free(run);
    tmp_remove(tmp);
}
END_TEST

/* Many top-level ranges: the guard forgets the oldest ones (memory stays bounded) and then
 * refuses a range reaching back into them, but takes one that covers them all. */
START_TEST(test_timeline_nesting_forgets)
{
    golden g;
    golden_init(&g);
    for (uint64_t i = 0; i < 2000; i++)
        golden_op(&g, 1, "step_op", NULL, 100 + 10 * i, 105 + 10 * i, 0);
    golden_op(&g, 1, "reaches_back", NULL, 102, 30000, 0); /* crosses the first op */
    golden_op(&g, 1, "covers_all", NULL, 50, 30000, 0);
    char *tmp = tmp_make();
    char *run = path_join(tmp, "run");
    write_run(&g, run);
    golden_free(&g);
    report *r = run_report(run, NULL);
    const report_info *info = report_info_of(r);
    ck_assert_uint_eq(info->timeline_moved, 1);
    char *path = path_join(info->dir, "timeline.json");
    cJSON *root = check_trace(path, 0);
    int p1, t1, p2, t2;
    where(root, "X", "covers_all", &p1, &t1);
    where(root, "X", "step_op", &p2, &t2);
    ck_assert_int_eq(t1, t2);
    where(root, "X", "reaches_back", &p2, &t2);
    ck_assert_int_ne(t1, t2);
    ck_assert_int_eq(count_events(root, "X", "step_op"), 2000);
    cJSON_Delete(root);
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

/* n ops of 1 us, 2 us apart, on thread 1; with a recorded timeline limit when limit_mb. */
static void build_many(golden *g, int n, const char *limit_mb)
{
    golden_init(g);
    if (limit_mb)
        golden_config(g, "timeline_limit_mb", limit_mb);
    for (int i = 0; i < n; i++)
        golden_op(g, 1, "Default/layer/MatMul-op1", NULL, 10 + 2 * (uint64_t)i,
                  11 + 2 * (uint64_t)i, 0);
}

/* Checks every timeline file of dir; returns the ops drawn and the bytes of all files. */
static int check_timeline_files(const char *dir, uint32_t files, uint64_t split, uint64_t *bytes)
{
    int ops = 0;
    *bytes = 0;
    for (uint32_t i = 0; i < files; i++) {
        char name[64];
        timeline_file_name(i, name, sizeof name);
        char *p = path_join(dir, name);
        struct stat st;
        ck_assert_int_eq(stat(p, &st), 0);
        if (split)
            ck_assert_msg((uint64_t)st.st_size <= split, "%s: %lld bytes", name,
                          (long long)st.st_size);
        *bytes += (uint64_t)st.st_size;
        cJSON *root = check_trace(p, 0);
        ops += count_events(root, "X", "Default/layer/MatMul-op1");
        cJSON_Delete(root);
        free(p);
    }
    char name[64];
    timeline_file_name(files, name, sizeof name);
    char *p = path_join(dir, name);
    ck_assert_msg(!exists(p), "%s beyond the count", name);
    free(p);
    ck_assert_int_eq(count_prefix(dir, ".timeline"), 0); /* no temporary name left */
    return ops;
}

START_TEST(test_timeline_split)
{
    golden g;
    build_many(&g, 3000, NULL);
    char *tmp = tmp_make();
    char *run = path_join(tmp, "run");
    write_run(&g, run);
    golden_free(&g);
    report_options o;
    report_options_init(&o);
    o.timeline_split_bytes = 32 * 1024;
    report *r = run_report(run, &o);
    const report_info *info = report_info_of(r);
    /* 3000 ops of about 120 bytes: over 350 KiB, so more than 10 files of 32 KiB. */
    ck_assert_uint_gt(info->timeline_files, 10);
    uint64_t bytes;
    ck_assert_int_eq(
        check_timeline_files(info->dir, info->timeline_files, o.timeline_split_bytes, &bytes),
        3000);
    ck_assert_uint_eq(bytes, info->timeline_bytes);
    ck_assert_uint_eq(info->timeline_left_out, 0);
    cJSON *j = json_read(info->dir, "summary.json");
    ck_assert_int_eq((int)jnum(j, "timeline.files"), (int)info->timeline_files);
    cJSON_Delete(j);
    report_free(r);
    free(run);
    tmp_remove(tmp);
}
END_TEST

/* The size limit: from the option (_i 0), from the recording's option (_i 1). The timeline
 * stops at the first event that would pass it; every op is either drawn or counted. */
START_TEST(test_timeline_limit)
{
    golden g;
    build_many(&g, 12000, _i ? "1" : NULL);
    char *tmp = tmp_make();
    char *run = path_join(tmp, "run");
    write_run(&g, run);
    golden_free(&g);
    report_options o;
    report_options_init(&o);
    if (!_i)
        o.timeline_limit_mb = 0.1;
    uint64_t limit = _i ? 1024 * 1024 : (uint64_t)(0.1 * 1024 * 1024);
    report *r = run_report(run, &o);
    const report_info *info = report_info_of(r);
    uint64_t bytes;
    int ops = check_timeline_files(info->dir, info->timeline_files, 0, &bytes);
    ck_assert_uint_le(bytes, limit);
    ck_assert_uint_gt(bytes, limit - 1024); /* filled up to the limit */
    ck_assert_uint_gt(info->timeline_left_out, 0);
    ck_assert_uint_eq((uint64_t)ops + info->timeline_left_out, 12000);
    cJSON *j = json_read(info->dir, "summary.json");
    ck_assert_double_eq(jnum(j, "timeline.left_out"), (double)info->timeline_left_out);
    ck_assert_double_eq(jnum(j, "timeline.limit_bytes"), (double)limit);
    cJSON_Delete(j);
    report_free(r);
    free(run);
    tmp_remove(tmp);
}
END_TEST

/* A lean report's timeline cut to its share by steps: 10 steps of 200 ops, step 7 three times
 * as long as the others; a share of about two steps holds step 7 whole (rather than the
 * beginning of the run), the rest in time order up to the share, every op drawn or counted. */
START_TEST(test_lean_timeline_by_steps)
{
    enum { STEPS = 10, OPS = 200, SLOW = 7 };
    golden g;
    golden_init(&g);
    uint64_t at = 10;
    for (int k = 1; k <= STEPS; k++) {
        uint64_t len = k == SLOW ? 3000 : 1000, gap = len / OPS;
        for (uint64_t i = 0; i < OPS; i++)
            golden_op(&g, 1, k == SLOW ? "Default/slow/MatMul-op1" : "Default/layer/MatMul-op1",
                      NULL, at + i * gap + 1, at + i * gap + 2, 0);
        golden_step(&g, 1, (uint64_t)k, at, at + len);
        at += len + 10;
    }
    char *tmp = tmp_make();
    char *run = path_join(tmp, "run");
    write_run(&g, run);
    golden_free(&g);
    report_options o;
    report_options_init(&o);
    o.lean = 1;
    o.timeline_limit_mb = 0.06; /* about two steps' ops */
    uint64_t limit = (uint64_t)(0.06 * 1024 * 1024);
    report *r = run_report(run, &o);
    const report_info *info = report_info_of(r);
    ck_assert_uint_eq(info->timeline_files, 1);
    char *p = path_join(info->dir, "timeline.json");
    cJSON *root = check_trace(p, 0);
    free(p);
    int slow = count_events(root, "X", "Default/slow/MatMul-op1");
    int others = count_events(root, "X", "Default/layer/MatMul-op1");
    ck_assert_int_eq(slow, OPS); /* the slowest step whole */
    ck_assert_int_gt(others, 0);
    ck_assert_int_lt(others, OPS * (STEPS - 1));
    ck_assert_ptr_nonnull(find_event(root, "X", "step 7"));
    cJSON_Delete(root);
    ck_assert_uint_le(info->timeline_bytes, limit);
    ck_assert_uint_gt(info->timeline_left_out, 0);
    cJSON *j = json_read(info->dir, "summary.json");
    ck_assert_double_eq(jnum(j, "timeline.left_out"), (double)info->timeline_left_out);
    ck_assert_double_eq(jnum(j, "timeline.bytes"), (double)info->timeline_bytes);
    cJSON_Delete(j);
    ck_assert_int_eq(count_prefix(info->dir, ".timeline"), 0);
    report_free(r);
    free(run);
    tmp_remove(tmp);
}
END_TEST

/* ---- The folder --------------------------------------------------------------------------- */

/* A pid that was and is no more: a child that has exited and been reaped. */
static pid_t gone_pid(void)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(0);
    ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
    return pid;
}

/* The temporary folders an analyse killed mid-write left: the next analyse of the same run
 * removes those whose process is gone, and nothing else. */
START_TEST(test_stale_tmp_removed)
{
    char *tmp, *dir;
    report *r = report_a(&tmp, &dir, NULL);
    report_free(r);
    char *run = path_join(tmp, "run");
    char name[128];
    /* A dead analyse's folder, with files and a folder in it. */
    snprintf(name, sizeof name, REPORT_DIR ".tmp-%d-0", (int)gone_pid());
    char *dead = path_join(run, name);
    ck_assert_int_eq(mkdir(dead, 0755), 0);
    char *f1 = path_join(dead, "op_statistics.csv"), *sub = path_join(dead, "part");
    file_write(f1, "half written", 12);
    ck_assert_int_eq(mkdir(sub, 0755), 0);
    char *f2 = path_join(sub, "timeline-1.json");
    file_write(f2, "[", 1);
    /* A live process's (ours, with a number no report of ours takes). */
    snprintf(name, sizeof name, REPORT_DIR ".tmp-%d-999999", (int)getpid());
    char *live = path_join(run, name);
    ck_assert_int_eq(mkdir(live, 0755), 0);
    /* A link with a dead pid's name, pointing to a folder that must keep its file. */
    char *kept = path_join(tmp, "kept");
    ck_assert_int_eq(mkdir(kept, 0755), 0);
    char *kept_file = path_join(kept, "precious");
    file_write(kept_file, "x", 1);
    snprintf(name, sizeof name, REPORT_DIR ".tmp-%d-1", (int)gone_pid());
    char *link = path_join(run, name);
    ck_assert_int_eq(symlink(kept, link), 0);
    /* Names that only look alike. */
    char *other = path_join(run, REPORT_DIR ".tmp-1x-0");
    ck_assert_int_eq(mkdir(other, 0755), 0);

    r = run_report(run, NULL);
    report_free(r);
    ck_assert_msg(!exists(dead), "the dead analyse's folder is still there");
    ck_assert(exists(live));
    ck_assert(exists(link));
    ck_assert(exists(kept_file));
    ck_assert(exists(other));
    ck_assert_int_eq(unlink(link), 0);
    free(f1), free(f2), free(sub), free(dead), free(live), free(kept), free(kept_file);
    free(link), free(other), free(run), free(dir);
    tmp_remove(tmp);
}
END_TEST

START_TEST(test_no_tmp_left_and_replace)
{
    char *tmp, *dir;
    report *r = report_a(&tmp, &dir, NULL);
    report_free(r);
    char *run = path_join(tmp, "run");
    ck_assert_int_eq(count_prefix(run, REPORT_DIR ".tmp"), 0);

    /* A stale file of an older report goes with it: the folder is replaced whole. */
    char *stale = path_join(dir, "timeline-7.json");
    FILE *f = fopen(stale, "w");
    fputs("{}", f);
    fclose(f);
    golden g;
    build_many(&g, 10, NULL);
    char *run2 = path_join(tmp, "run2");
    write_run(&g, run2);
    golden_free(&g);
    report_options o;
    report_options_init(&o);
    o.out_dir = dir;
    r = run_report(run2, &o);
    ck_assert_str_eq(report_info_of(r)->dir, dir);
    report_free(r);
    ck_assert(!exists(stale));
    csv_file c = csv_read(dir, "op_statistics.csv");
    ck_assert_str_eq(c.rows[1][0], "Default/layer/MatMul-op1"); /* the second recording's */
    csv_free(&c);
    ck_assert_int_eq(count_prefix(run, REPORT_DIR ".tmp"), 0);
    ck_assert_int_eq(count_prefix(run, REPORT_DIR), 1);

    /* A folder holding something that is not a report file is not replaced. */
    char *notes = path_join(dir, "notes.txt");
    f = fopen(notes, "w");
    fputs("mine", f);
    fclose(f);
    char *cause = NULL;
    ck_assert_int_eq(report_run(run2, &o, NULL, &cause), -1);
    ck_assert_ptr_nonnull(strstr(cause, "notes.txt"));
    free(cause);
    ck_assert(exists(notes));
    char *sum = path_join(dir, "summary.json");
    ck_assert(exists(sum));
    ck_assert_int_eq(count_prefix(run, REPORT_DIR ".tmp"), 0);

    /* Nor is a regular file. */
    char *file = path_join(tmp, "plain");
    f = fopen(file, "w");
    fclose(f);
    o.out_dir = file;
    cause = NULL;
    ck_assert_int_eq(report_run(run2, &o, NULL, &cause), -1);
    ck_assert_ptr_nonnull(strstr(cause, "not a folder"));
    free(cause);
    ck_assert_int_eq(count_prefix(tmp, "plain.tmp"), 0);

    free(file);
    free(sum);
    free(notes);
    free(stale);
    free(run2);
    free(run);
    free(dir);
    tmp_remove(tmp);
}
END_TEST

START_TEST(test_symlink_target)
{
    golden g;
    build_many(&g, 10, NULL);
    char *tmp = tmp_make();
    char *run = path_join(tmp, "run");
    write_run(&g, run);
    golden_free(&g);
    char *elsewhere = path_join(tmp, "elsewhere"), *keep = path_join(elsewhere, "summary.json");
    ck_assert_int_eq(mkdir(elsewhere, 0700), 0);
    FILE *f = fopen(keep, "w");
    fputs("theirs", f);
    fclose(f);
    char *target = path_join(run, REPORT_DIR);
    ck_assert_int_eq(symlink(elsewhere, target), 0);

    char *cause = NULL;
    ck_assert_int_eq(report_run(run, NULL, NULL, &cause), -1);
    ck_assert_msg(strstr(cause, "symbolic link"), "cause: %s", cause);
    free(cause);
    struct stat st;
    ck_assert_int_eq(lstat(target, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    ck_assert_int_eq(count_prefix(elsewhere, ""), 3); /* ., .. and summary.json */
    char *text = slurp(keep, NULL);
    ck_assert_str_eq(text, "theirs");
    free(text);
    ck_assert_int_eq(count_prefix(run, REPORT_DIR ".tmp"), 0);
    free(target);
    free(keep);
    free(elsewhere);
    free(run);
    tmp_remove(tmp);
}
END_TEST

/* A write that fails midway (the file size limit): -1 with the reason, no temporary folder, and
 * the earlier report untouched. */
START_TEST(test_failure_leaves_nothing)
{
    char *tmp, *dir;
    report *r = report_a(&tmp, &dir, NULL);
    report_free(r);
    char *sum = path_join(dir, "summary.json");
    char *before = slurp(sum, NULL);
    golden g;
    build_many(&g, 3000, NULL);
    char *run2 = path_join(tmp, "run2");
    write_run(&g, run2);
    golden_free(&g);

    struct rlimit old, small;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    small = old;
    small.rlim_cur = 16 * 1024;
    signal(SIGXFSZ, SIG_IGN);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &small), 0);
    report_options o;
    report_options_init(&o);
    o.out_dir = dir;
    char *cause = NULL;
    int rc = report_run(run2, &o, NULL, &cause);
    setrlimit(RLIMIT_FSIZE, &old);
    ck_assert_int_eq(rc, -1);
    ck_assert_msg(strstr(cause, "File too large"), "cause: %s", cause);
    free(cause);
    char *after = slurp(sum, NULL);
    ck_assert_str_eq(after, before);
    char *run = path_join(tmp, "run");
    ck_assert_int_eq(count_prefix(run, REPORT_DIR ".tmp"), 0);
    ck_assert_int_eq(count_prefix(run, REPORT_DIR), 1);

    /* And with no earlier report: nothing at all. */
    o.out_dir = NULL;
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &small), 0);
    cause = NULL;
    rc = report_run(run2, &o, NULL, &cause);
    setrlimit(RLIMIT_FSIZE, &old);
    ck_assert_int_eq(rc, -1);
    free(cause);
    ck_assert_int_eq(count_prefix(run2, REPORT_DIR), 0);
    free(run);
    free(after);
    free(before);
    free(sum);
    free(run2);
    free(dir);
    tmp_remove(tmp);
}
END_TEST

START_TEST(test_bad_inputs)
{
    char *tmp = tmp_make();
    char *missing = path_join(tmp, "missing"), *empty = path_join(tmp, "empty.tsr"),
         *foreign = path_join(tmp, "foreign.tsr");
    FILE *f = fopen(empty, "w");
    fclose(f);
    f = fopen(foreign, "w");
    fputs("{\"traceEvents\": []} and more bytes than a chunk header", f);
    fclose(f);
    const struct {
        const char *path, *says;
    } cases[] = {
        {missing, "cannot open"},
        {empty, "is empty"},
        {foreign, "not a termsight recording"},
    };
    for (size_t i = 0; i < 3; i++) {
        char *cause = NULL;
        ck_assert_int_eq(report_run(cases[i].path, NULL, NULL, &cause), -1);
        ck_assert_msg(strstr(cause, cases[i].says), "%s: %s", cases[i].path, cause);
        free(cause);
    }
    ck_assert_int_eq(count_prefix(tmp, REPORT_DIR), 0);
    free(missing);
    free(empty);
    free(foreign);
    tmp_remove(tmp);
}
END_TEST

/* A recording cut short: the whole chunks are analysed, the damage reported. The events go in
 * two chunks (10 ops, then 10 more); the cut falls inside the second. */
START_TEST(test_truncated)
{
    golden g;
    build_many(&g, 20, NULL);
    char *tmp = tmp_make();
    char *run = path_join(tmp, "run"), *rec = path_join(run, TS_RECORDING_DIR);
    recording_meta meta = {.major = TS_RECORDING_MAJOR, .minor = TS_RECORDING_MINOR, .pid = 7};
    recording_writer *w;
    char *why = NULL;
    ck_assert_int_eq(recording_writer_open(rec, &meta, &w, &why), 0);
    const char **bytes = calloc(g.nnames, sizeof *bytes);
    for (uint32_t i = 0; i < g.nnames; i++)
        bytes[i] = g.names[i];
    ck_assert_int_eq(recording_append_strings(w, 0, g.nnames, bytes, g.lens, &why), 0);
    free(bytes);
    ck_assert_int_eq(recording_append_events(w, lane_run_of(g.ev, 10), &why), 0);
    ck_assert_int_eq(recording_append_events(w, lane_run_of(g.ev + 10, 10), &why), 0);
    ck_assert_int_eq(recording_writer_close(w, &why), 0);
    golden_free(&g);
    char *file = path_join(rec, TS_RECORDING_FILE);
    struct stat st;
    ck_assert_int_eq(stat(file, &st), 0);
    ck_assert_int_eq(truncate(file, st.st_size - 100), 0);

    report *r = run_report(file, NULL);
    const report_info *info = report_info_of(r);
    ck_assert_uint_eq(info->events, 10);
    ck_assert_uint_gt(info->skipped_bytes + info->bad_chunks, 0);
    cJSON *j = json_read(info->dir, "summary.json");
    ck_assert_double_eq(jnum(j, "recording.bytes_skipped"), (double)info->skipped_bytes);
    ck_assert_double_eq(jnum(j, "recording.chunks_skipped"), (double)info->bad_chunks);
    ck_assert_int_eq((int)jnum(j, "events.total"), 10);
    cJSON_Delete(j);
    char *real = realpath(run, NULL);
    char *want = path_join(real, REPORT_DIR);
    ck_assert_str_eq(info->dir, want); /* the run folder's, from the .tsr path */
    free(real);
    free(want);
    report_free(r);
    free(file);
    free(rec);
    free(run);
    tmp_remove(tmp);
}
END_TEST

typedef struct progress_log {
    double v[4096];
    int n;
} progress_log;

static void progress_note(void *ctx, double f)
{
    progress_log *l = ctx;
    if (l->n < 4096)
        l->v[l->n++] = f;
}

START_TEST(test_progress)
{
    golden g;
    build_many(&g, 100, NULL);
    char *tmp = tmp_make();
    char *run = path_join(tmp, "run"), *rec = path_join(run, TS_RECORDING_DIR);
    recording_meta meta = {.major = TS_RECORDING_MAJOR, .minor = TS_RECORDING_MINOR};
    recording_writer *w;
    char *why = NULL;
    ck_assert_int_eq(recording_writer_open(rec, &meta, &w, &why), 0);
    const char **bytes = calloc(g.nnames, sizeof *bytes);
    for (uint32_t i = 0; i < g.nnames; i++)
        bytes[i] = g.names[i];
    ck_assert_int_eq(recording_append_strings(w, 0, g.nnames, bytes, g.lens, &why), 0);
    free(bytes);
    for (int i = 0; i < 10; i++) /* ten chunks: ten batches */
        ck_assert_int_eq(recording_append_events(w, lane_run_of(g.ev + 10 * i, 10), &why), 0);
    ck_assert_int_eq(recording_writer_close(w, &why), 0);
    golden_free(&g);

    progress_log log = {.n = 0};
    report_options o;
    report_options_init(&o);
    o.progress = progress_note;
    o.progress_ctx = &log;
    report_free(run_report(run, &o));
    ck_assert_int_ge(log.n, 11);
    for (int i = 0; i < log.n; i++) {
        ck_assert(log.v[i] >= 0 && log.v[i] <= 1);
        if (i)
            ck_assert(log.v[i] >= log.v[i - 1]);
    }
    ck_assert(log.v[log.n - 1] == 1.0);
    ck_assert(log.v[log.n - 2] > 0.5 && log.v[log.n - 2] < 1.0);
    free(rec);
    free(run);
    tmp_remove(tmp);
}
END_TEST

/* ---- Suite ---------------------------------------------------------------------------------- */

static Suite *report_suite(void)
{
    Suite *s = suite_create("report");
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
    tcase_add_test(tc, test_json_integers);
    tcase_add_test(tc, test_summary);
    tcase_add_test(tc, test_losses);
    tcase_add_test(tc, test_loss_rows_bounded);
    tcase_add_test(tc, test_child_rows);
    tcase_add_test(tc, test_pretty_and_analyse_only);
    tcase_add_test(tc, test_tables_order_independent);
    tcase_add_test(tc, test_kernel_rows);
    suite_add_tcase(s, tc);

    tc = tcase_create("timeline");
    tcase_add_loop_test(tc, test_timeline_rules, 0, 2);
    tcase_add_loop_test(tc, test_timeline_nesting, 0, sizeof span_cases / sizeof span_cases[0]);
    tcase_add_test(tc, test_timeline_nesting_forgets);
    tcase_add_test(tc, test_timeline_split);
    tcase_add_loop_test(tc, test_timeline_limit, 0, 2);
    tcase_add_test(tc, test_lean_timeline_by_steps);
    suite_add_tcase(s, tc);

    tc = tcase_create("folder");
    tcase_add_test(tc, test_no_tmp_left_and_replace);
    tcase_add_test(tc, test_stale_tmp_removed);
    tcase_add_test(tc, test_symlink_target);
    tcase_add_test(tc, test_failure_leaves_nothing);
    tcase_add_test(tc, test_bad_inputs);
    tcase_add_test(tc, test_truncated);
    tcase_add_test(tc, test_progress);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(report_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
