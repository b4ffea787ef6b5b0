/* report_json: each result as the one JSON object it is wherever it leaves the program
 * (summary.json, `termsight top --once --json`, `termsight analyse --op TYPE --json`, and
 * through them the Python binding): times in microseconds, counts as exact integers, names
 * cleaned to valid UTF-8. */
#include "analysis_internal.h"
#include "report.h"

#include <cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

int report_json_u64(void *object, const char *key, uint64_t v)
{
    /* cJSON prints a double with 15 significant digits when that reads back within its
     * tolerance: exact for integers below 10^15 only. */
    if (v < 1000000000000000ull)
        return cJSON_AddNumberToObject(object, key, (double)v) ? 0 : -1;
    char digits[24];
    snprintf(digits, sizeof digits, "%" PRIu64, v);
    return cJSON_AddRawToObject(object, key, digits) ? 0 : -1;
}

static double us_of(double ns)
{
    return ns / 1000.0;
}

void report_json_name(void *object, const char *key, const analysis *a, uint32_t id)
{
    uint32_t len = 0;
    const char *s = analysis_name(a, id, &len);
    char *buf = malloc(4 * (size_t)len + 1);
    if (!buf)
        return;
    text_clean(s ? s : "", s ? len : 0, buf, 1);
    cJSON_AddStringToObject(object, key, buf);
    free(buf);
}

void *report_json_op(const analysis *a, const op_stat *row, int by_type)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    report_json_name(o, by_type ? "type" : "op", a, row->name);
    if (!by_type)
        report_json_name(o, "type", a, row->type);
    report_json_u64(o, "count", row->count);
    cJSON_AddNumberToObject(o, "total_us", us_of((double)row->total_ns));
    cJSON_AddNumberToObject(o, "self_us", us_of((double)row->self_ns));
    cJSON_AddNumberToObject(o, "avg_us",
                            row->count ? us_of((double)row->total_ns / (double)row->count) : 0);
    cJSON_AddNumberToObject(o, "min_us", us_of((double)row->min_ns));
    cJSON_AddNumberToObject(o, "max_us", us_of((double)row->max_ns));
    cJSON_AddNumberToObject(o, "share_pct", 100 * row->share);
    return o;
}

void *report_json_ops(const analysis *a, int by_type, uint32_t type, size_t limit)
{
    cJSON *arr = cJSON_CreateArray();
    op_query q = {.by_type = by_type, .sort = OP_SORT_TOTAL, .limit = limit, .type = type};
    op_stat *rows = NULL;
    size_t n = analysis_ops(a, &q, &rows);
    for (size_t i = 0; arr && i < n; i++) {
        cJSON *o = report_json_op(a, &rows[i], by_type);
        if (!o)
            break;
        cJSON_AddItemToArray(arr, o);
    }
    free(rows);
    return arr;
}

void *report_json_steps(const analysis *a)
{
    step_summary ss = analysis_steps(a);
    cJSON *st = cJSON_CreateObject();
    if (!st)
        return NULL;
    report_json_u64(st, "count", ss.steps);
    cJSON_AddStringToObject(st, "source", steps_source_name(ss.source));
    const struct {
        const char *key;
        double ns;
    } avg[] = {
        {"avg_interval_us", ss.avg_interval_ns},
        {"avg_fpbp_us", ss.avg_fpbp_ns},
        {"avg_tail_us", ss.avg_tail_ns},
        {"avg_total_us", ss.avg_total_ns},
        {"avg_compute_us", ss.avg_compute_ns},
        {"avg_comm_us", ss.avg_comm_ns},
        {"avg_pure_comm_us", ss.avg_pure_comm_ns},
        {"avg_free_us", ss.avg_free_ns},
        {"avg_gap_us", ss.avg_gap_ns},
        {"avg_comm_wait_us", ss.avg_comm_wait_ns},
    };
    for (size_t i = 0; i < sizeof avg / sizeof avg[0]; i++)
        cJSON_AddNumberToObject(st, avg[i].key, us_of(avg[i].ns));
    cJSON *slow = cJSON_AddArrayToObject(st, "slowest");
    for (int i = 0; slow && i < 5 && ss.slowest_ns[i]; i++) {
        cJSON *o = cJSON_CreateObject();
        if (!o)
            break;
        report_json_u64(o, "step", ss.slowest[i]);
        cJSON_AddNumberToObject(o, "total_us", us_of((double)ss.slowest_ns[i]));
        cJSON_AddItemToArray(slow, o);
    }
    return st;
}
