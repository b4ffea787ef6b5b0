/* diff_write: a comparison (diff.h) as text, as JSON and as one HTML page. The three say the
 * same rows with the same rule; names are the reports' clean text, escaped again for HTML. */
#include "diff.h"
#include "report.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "850.0 us", "12.345 ms", "1.500 s". */
static void duration(char *buf, size_t cap, double us)
{
    if (!(us >= 0))
        snprintf(buf, cap, "-");
    else if (us >= 1e6)
        snprintf(buf, cap, "%.3f s", us / 1e6);
    else if (us >= 1e3)
        snprintf(buf, cap, "%.3f ms", us / 1e3);
    else
        snprintf(buf, cap, "%.1f us", us);
}

static void change(char *buf, size_t cap, double pct)
{
    if (isinf(pct))
        snprintf(buf, cap, "new");
    else
        snprintf(buf, cap, "%+.1f %%", pct);
}

static void interval(char *buf, size_t cap, const diff_row *r)
{
    if (isnan(r->lo_pct) || isnan(r->hi_pct))
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, "[%+.1f, %+.1f] %%", r->lo_pct, r->hi_pct);
}

static void p_value(char *buf, size_t cap, double p)
{
    if (p < 1e-12)
        snprintf(buf, cap, "<1e-12");
    else
        snprintf(buf, cap, "%.2g", p);
}

/* The row's name as shown, one line: an operator's with its type when that says more. */
static void label(char *buf, size_t cap, const diff_row *r)
{
    char *name = report_clean_dup(r->name), *type = report_clean_dup(r->type);
    if (r->kind == DIFF_OP && type && type[0] && strcmp(r->type, r->name))
        snprintf(buf, cap, "%.240s (%.240s)", name ? name : "?", type);
    else
        snprintf(buf, cap, "%.250s", name ? name : "?");
    free(name);
    free(type);
}

static void side_line(FILE *out, const char *which, const diff_side *s)
{
    char *path = report_clean_dup(s->path);
    fprintf(out, "%s: %s (%s, %zu step%s", which, path ? path : "?", s->job ? "job" : "run",
            s->samples, s->samples == 1 ? "" : "s");
    free(path);
    if (s->job)
        fprintf(out, " over %zu rank%s", s->ranks, s->ranks == 1 ? "" : "s");
    fputs(")\n", out);
}

static void rule_text(char *buf, size_t cap, const diff_result *d, size_t nrows)
{
    const diff_options *o = diff_options_of(d);
    snprintf(buf, cap,
             "a change is significant when its Mann-Whitney p-value, Holm-corrected over %zu "
             "rows, is below %g, and the median and the whole of its %g %% bootstrap interval "
             "changed by at least %g %% (and by %g %% of A's median step)",
             nrows, o->alpha, o->level * 100, o->threshold_pct, o->floor_pct);
}

/* The significant changes of one verdict, one a line: "  op MatMul-op1 (MatMul): +10.2 % [...]". */
static void verdicts(FILE *out, const diff_row *rows, size_t n, enum diff_verdict v)
{
    int any = 0;
    fprintf(out, "%s:", diff_verdict_name(v));
    for (size_t i = 0; i < n; i++) {
        if (rows[i].verdict != v)
            continue;
        char name[512], ch[32], iv[64];
        label(name, sizeof name, &rows[i]);
        change(ch, sizeof ch, rows[i].change_pct);
        interval(iv, sizeof iv, &rows[i]);
        fprintf(out, "\n  %s %s: %s %s", diff_kind_name(rows[i].kind), name, ch, iv);
        any = 1;
    }
    fputs(any ? "\n" : " none\n", out);
}

/* A row's cells as text, the same in the table and on the page. */
typedef struct cells {
    char name[512], a[32], b[32], change[32], interval[64], p[32];
    const char *verdict;
} cells;

static void cells_of(const diff_row *r, cells *c)
{
    label(c->name, sizeof c->name, r);
    duration(c->a, sizeof c->a, r->median_a_us);
    duration(c->b, sizeof c->b, r->median_b_us);
    change(c->change, sizeof c->change, r->change_pct);
    interval(c->interval, sizeof c->interval, r);
    p_value(c->p, sizeof c->p, r->p_adjusted);
    c->verdict = r->verdict == DIFF_SAME ? "no significant change" : diff_verdict_name(r->verdict);
}

#define NAME_WIDTH 48

/* A label fit to the table's name column: a longer one keeps its end (an operator's own name and
 * type), after "...", cut at a character's start. */
static const char *fit(const char *label, char *buf, size_t cap)
{
    size_t len = strlen(label);
    if (len <= NAME_WIDTH)
        return label;
    const char *tail = label + len - (NAME_WIDTH - 3);
    while ((*tail & 0xc0) == 0x80)
        tail++;
    snprintf(buf, cap, "...%s", tail);
    return buf;
}

void diff_print(const diff_result *d, FILE *out)
{
    const diff_row *rows;
    size_t n = diff_rows(d, &rows);
    side_line(out, "A", diff_side_of(d, 0));
    side_line(out, "B", diff_side_of(d, 1));
    char rule[512];
    rule_text(rule, sizeof rule, d, n);
    fprintf(out, "%s\n\n", rule);
    fprintf(out, "%-6s %-*s %10s %10s %8s %18s %8s  %s\n", "KIND", NAME_WIDTH, "NAME", "MEDIAN A",
            "MEDIAN B", "CHANGE", "INTERVAL", "P (HOLM)", "VERDICT");
    for (size_t i = 0; i < n; i++) {
        cells c;
        char shown[NAME_WIDTH + 8];
        cells_of(&rows[i], &c);
        fprintf(out, "%-6s %-*s %10s %10s %8s %18s %8s  %s\n", diff_kind_name(rows[i].kind),
                NAME_WIDTH, fit(c.name, shown, sizeof shown), c.a, c.b, c.change, c.interval, c.p,
                c.verdict);
    }
    fputc('\n', out);
    verdicts(out, rows, n, DIFF_SLOWER);
    verdicts(out, rows, n, DIFF_FASTER);
    const char *const *w;
    size_t nw = diff_warnings(d, &w);
    for (size_t i = 0; i < nw; i++) {
        char *clean = report_clean_dup(w[i]);
        fprintf(out, "warning: %s\n", clean ? clean : "?");
        free(clean);
    }
}

/* ---- JSON ---------------------------------------------------------------------------------- */

static void json_number(cJSON *o, const char *key, double v)
{
    if (isfinite(v))
        cJSON_AddNumberToObject(o, key, v);
    else
        cJSON_AddNullToObject(o, key);
}

static cJSON *json_side(const diff_side *s)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    report_json_text(o, "path", s->path, strlen(s->path));
    cJSON_AddStringToObject(o, "kind", s->job ? "job" : "run");
    cJSON_AddNumberToObject(o, "ranks", (double)s->ranks);
    cJSON_AddNumberToObject(o, "steps", (double)s->samples);
    cJSON_AddBoolToObject(o, "operators", s->have_ops);
    return o;
}

static cJSON *json_row(const diff_row *r)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "kind", diff_kind_name(r->kind));
    cJSON_AddStringToObject(o, "name", r->name);
    if (r->kind == DIFF_OP)
        cJSON_AddStringToObject(o, "type", r->type);
    cJSON_AddNumberToObject(o, "n_a", (double)r->n_a);
    cJSON_AddNumberToObject(o, "n_b", (double)r->n_b);
    json_number(o, "median_a_us", r->median_a_us);
    json_number(o, "median_b_us", r->median_b_us);
    json_number(o, "change_pct", r->change_pct);
    cJSON *iv = cJSON_AddArrayToObject(o, "interval_pct");
    if (iv && !isnan(r->lo_pct) && !isnan(r->hi_pct)) {
        cJSON_AddItemToArray(iv, cJSON_CreateNumber(r->lo_pct));
        cJSON_AddItemToArray(iv, cJSON_CreateNumber(r->hi_pct));
    }
    json_number(o, "p", r->p);
    json_number(o, "p_adjusted", r->p_adjusted);
    cJSON_AddStringToObject(o, "verdict", diff_verdict_name(r->verdict));
    return o;
}

void *diff_json(const diff_result *d)
{
    const diff_row *rows;
    size_t n = diff_rows(d, &rows);
    const diff_options *opt = diff_options_of(d);
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddItemToObject(o, "a", json_side(diff_side_of(d, 0)));
    cJSON_AddItemToObject(o, "b", json_side(diff_side_of(d, 1)));
    cJSON *rule = cJSON_AddObjectToObject(o, "rule");
    if (rule) {
        cJSON_AddStringToObject(rule, "test", "mann-whitney-u");
        cJSON_AddStringToObject(rule, "correction", "holm");
        cJSON_AddNumberToObject(rule, "alpha", opt->alpha);
        cJSON_AddNumberToObject(rule, "threshold_pct", opt->threshold_pct);
        cJSON_AddNumberToObject(rule, "floor_pct_of_step", opt->floor_pct);
        cJSON_AddNumberToObject(rule, "interval_level", opt->level);
        cJSON_AddNumberToObject(rule, "bootstrap", opt->bootstrap);
        cJSON_AddNumberToObject(rule, "skip_steps", (double)opt->skip_steps);
        cJSON_AddNumberToObject(rule, "rows", (double)n);
    }
    cJSON *arr = cJSON_AddArrayToObject(o, "rows");
    size_t slower = 0, faster = 0;
    for (size_t i = 0; i < n; i++) {
        if (arr)
            cJSON_AddItemToArray(arr, json_row(&rows[i]));
        slower += rows[i].verdict == DIFF_SLOWER;
        faster += rows[i].verdict == DIFF_FASTER;
    }
    cJSON_AddNumberToObject(o, "slower", (double)slower);
    cJSON_AddNumberToObject(o, "faster", (double)faster);
    const char *const *w;
    size_t nw = diff_warnings(d, &w);
    cJSON *wa = cJSON_AddArrayToObject(o, "warnings");
    for (size_t i = 0; wa && i < nw; i++)
        cJSON_AddItemToArray(wa, cJSON_CreateString(w[i]));
    return o;
}

/* ---- HTML ---------------------------------------------------------------------------------- */

static const char style[] =
    "body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px auto;"
    "max-width:1200px;padding:0 16px;color:#1d1d1f;background:#fff}"
    "h1{font-size:22px;margin:0 0 8px}.meta{color:#555}table{border-collapse:collapse;"
    "width:100%;margin-top:16px}th,td{padding:3px 8px;text-align:right;white-space:nowrap}"
    "th{border-bottom:1px solid #bbb;font-weight:600}td.n,th.n{text-align:left;"
    "white-space:normal;word-break:break-all}tr:nth-child(even){background:#f6f6f8}"
    "tr.slower td.v{color:#b3261e;font-weight:600}tr.faster td.v{color:#1e7b34;"
    "font-weight:600}.bar{display:inline-block;height:10px;vertical-align:middle}"
    ".up{background:#c8504a}.down{background:#4f9a5f}";

static void html_side(FILE *f, const char *which, const diff_side *s)
{
    fprintf(f, "<div class=\"meta\"><b>%s</b>: ", which);
    char *clean = report_clean_dup(s->path);
    report_html_text(f, clean ? clean : "?");
    free(clean);
    fprintf(f, " (%s, %zu steps", s->job ? "job" : "run", s->samples);
    if (s->job)
        fprintf(f, " over %zu ranks", s->ranks);
    fputs(")</div>\n", f);
}

static void html_row(FILE *f, const diff_row *r)
{
    cells c;
    cells_of(r, &c);
    fprintf(f, "<tr class=\"%s\"><td class=\"n\">%s</td><td class=\"n\">",
            diff_verdict_name(r->verdict), diff_kind_name(r->kind));
    report_html_text(f, c.name);
    double w = isfinite(r->change_pct) ? fmin(fabs(r->change_pct), 100) : 100;
    fprintf(f,
            "</td><td>%s</td><td>%s</td><td>%s <span class=\"bar %s\" style=\"width:%.0fpx\">"
            "</span></td><td>%s</td><td>%s</td><td class=\"v\">%s</td></tr>\n",
            c.a, c.b, c.change, r->change_pct > 0 ? "up" : "down", w, c.interval, c.p, c.verdict);
}

int diff_write_html(const diff_result *d, FILE *f)
{
    const diff_row *rows;
    size_t n = diff_rows(d, &rows);
    fprintf(f,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<title>termsight diff</title><style>%s</style></head><body>\n"
            "<h1>termsight diff</h1>\n",
            style);
    html_side(f, "A", diff_side_of(d, 0));
    html_side(f, "B", diff_side_of(d, 1));
    char rule[512];
    rule_text(rule, sizeof rule, d, n);
    fputs("<p class=\"meta\">", f);
    report_html_text(f, rule);
    fputs(".</p>\n<table><tr><th class=\"n\">kind</th><th class=\"n\">name</th><th>median A</th>"
          "<th>median B</th><th>change</th><th>interval</th><th>p (Holm)</th><th>verdict</th>"
          "</tr>\n",
          f);
    for (size_t i = 0; i < n; i++)
        html_row(f, &rows[i]);
    fputs("</table>\n", f);
    const char *const *w;
    size_t nw = diff_warnings(d, &w);
    for (size_t i = 0; i < nw; i++) {
        char *clean = report_clean_dup(w[i]);
        fputs("<p class=\"meta\">warning: ", f);
        report_html_text(f, clean ? clean : "?");
        fputs("</p>\n", f);
        free(clean);
    }
    fputs("</body></html>\n", f);
    if (fflush(f) != 0 || ferror(f))
        return -1;
    return 0;
}
