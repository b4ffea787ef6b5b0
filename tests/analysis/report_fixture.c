/* report_fixture: what the report tests share (test_report_*.c): files read back, CSV parsed by
 * the rules the writer promises, golden recordings A and B written and reported, JSON read back,
 * timelines checked. */
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

char *slurp(const char *path, size_t *len)
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

int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

int count_prefix(const char *dir, const char *prefix)
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

csv_file csv_parse(const char *text)
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

void csv_free(csv_file *f)
{
    for (size_t i = 0; i < f->n; i++) {
        for (char **c = f->rows[i]; *c; c++)
            free(*c);
        free(f->rows[i]);
    }
    free(f->rows);
}

size_t row_len(char **row)
{
    size_t n = 0;
    while (row[n])
        n++;
    return n;
}

csv_file csv_read(const char *dir, const char *name)
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

void expect_row(const csv_file *f, size_t i, const char *const *want)
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

void build_a(golden *g)
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

void write_run(golden *g, const char *run)
{
    char *rec = path_join(run, TS_RECORDING_DIR);
    golden_write_recording(g, rec);
    free(rec);
}

report *run_report(const char *path, const report_options *o)
{
    report *r = NULL;
    char *cause = NULL;
    ck_assert_msg(report_run(path, o, &r, &cause) == 0, "report_run: %s", cause);
    ck_assert_ptr_nonnull(r);
    return r;
}

void check_split(const char *dir)
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

report *report_golden(void (*build)(golden *), char **tmp, char **dir, const report_options *o)
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

report *report_a(char **tmp, char **dir, const report_options *o)
{
    return report_golden(build_a, tmp, dir, o);
}

cJSON *json_read(const char *dir, const char *name)
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

const cJSON *jget(const cJSON *o, const char *path)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    char *save = NULL;
    for (char *k = strtok_r(buf, ".", &save); k && o; k = strtok_r(NULL, ".", &save))
        o = cJSON_GetObjectItemCaseSensitive(o, k);
    return o;
}

double jnum(const cJSON *o, const char *path)
{
    const cJSON *it = jget(o, path);
    if (!cJSON_IsNumber(it))
        ck_abort_msg("%s is not a number", path);
    return it->valuedouble;
}

const char *jstr(const cJSON *o, const char *path)
{
    const cJSON *it = jget(o, path);
    if (!cJSON_IsString(it))
        ck_abort_msg("%s is not a string", path);
    return it->valuestring;
}

void build_b(golden *g)
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

void build_many(golden *g, int n, const char *limit_mb)
{
    golden_init(g);
    if (limit_mb)
        golden_config(g, "timeline_limit_mb", limit_mb);
    for (int i = 0; i < n; i++)
        golden_op(g, 1, "Default/layer/MatMul-op1", NULL, 10 + 2 * (uint64_t)i,
                  11 + 2 * (uint64_t)i, 0);
}
