/* job_timeline: the job report's Chrome trace (job_internal.h), merged from the ranks' timeline
 * files line by line: each rank's processes renumbered (rank R's pid p becomes (R + 1) * 1000 +
 * p) and renamed ("rank R: ..."), its times moved onto one clock (each rank's wall clock at its
 * start), within its share of the limit, chosen by its steps (timeline_pick: the slowest whole
 * first) when it may not all fit: a pass to weigh, then one to write. */
#include "job_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

/* The first top-level key `key` (",\"ts\":") of an event line the timeline writer wrote,
 * before its "args": the text after the key, or NULL. A key's quotes cannot be in a string
 * (there a quote is escaped), and the writer puts "ts" and "pid" before "args". */
static const char *key_at(const char *line, size_t len, const char *key)
{
    size_t kl = strlen(key);
    const char *end = line + len;
    for (const char *p = line; (p = memchr(p, ',', (size_t)(end - p))); p++) {
        size_t left = (size_t)(end - p);
        if (left < 2 || p[1] != '"')
            continue;
        if (left >= 8 && !memcmp(p, ",\"args\":", 8))
            return NULL;
        if (left >= kl && !memcmp(p, key, kl))
            return p + kl;
    }
    return NULL;
}

/* Writes v (thousandths) as "[-]units.ddd" at o: the end. */
static char *put_thousandths(char *o, int64_t v)
{
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    if (v < 0)
        *o++ = '-';
    o = timeline_put_u64(o, u / 1000);
    *o++ = '.';
    *o++ = (char)('0' + u / 100 % 10);
    *o++ = (char)('0' + u / 10 % 10);
    *o++ = (char)('0' + u % 10);
    return o;
}

/* move_event for the lines that are most of a timeline, as its writer prints them: an event with
 * a "ts" of three decimals and a whole "pid", both before its "args", no process name (a line
 * that may name one, beginning {"name":"process_name", is left to the parse). Rewrites them as
 * text into out (room for len + 64 bytes): the length, or 0 for any other line. */
static size_t move_event_fast(const char *line, size_t len, const rank_in *r, int64_t shift_ms3,
                              char *out)
{
    static const char pname[] = "{\"name\":\"process_name\"";
    const char *end = line + len;
    if (len >= sizeof pname - 1 && !memcmp(line, pname, sizeof pname - 1))
        return 0;
    const char *ts = key_at(line, len, ",\"ts\":"), *pid = key_at(line, len, ",\"pid\":");
    if (!ts || !pid || ts > pid)
        return 0;
    int64_t t, p;
    const char *ts_end = timeline_thousandths(ts, end, &t),
               *pid_end = timeline_thousandths(pid, end, &p);
    if (!ts_end || !pid_end || memchr(pid, '.', (size_t)(pid_end - pid)) || ts_end > pid)
        return 0;
    t += shift_ms3;
    p = p / 1000 + (int64_t)(r->rank + 1) * PID_STRIDE;
    char *o = out;
    memcpy(o, line, (size_t)(ts - line));
    o = put_thousandths(o + (ts - line), t);
    memcpy(o, ts_end, (size_t)(pid - ts_end));
    o = timeline_put_u64(o + (pid - ts_end), (uint64_t)p);
    memcpy(o, pid_end, (size_t)(end - pid_end));
    return (size_t)(o - out) + (size_t)(end - pid_end);
}

/* Moves one trace event line of rank r into the job's trace: its pid renumbered, a process's
 * name prefixed with the rank, its time moved by shift_us. Returns the text to write, in *buf
 * (grown as needed, *cap its size) or malloc'd in *owned, with its length; NULL for a line that
 * is no event. */
static const char *move_event(const char *line, size_t len, const rank_in *r, double shift_us,
                              char **buf, size_t *cap, char **owned, size_t *out_len)
{
    *owned = NULL;
    while (len && (line[len - 1] == '\n' || line[len - 1] == ',' || line[len - 1] == '\r'))
        len--;
    if (!len || line[0] != '{')
        return NULL;
    if (*cap < len + 64) {
        char *b = realloc(*buf, len + 64);
        if (b) {
            *buf = b;
            *cap = len + 64;
        }
    }
    if (*cap >= len + 64 &&
        (*out_len = move_event_fast(line, len, r, llround(shift_us * 1000), *buf)))
        return *buf;
    cJSON *ev = cJSON_ParseWithLength(line, len);
    if (!cJSON_IsObject(ev)) {
        cJSON_Delete(ev);
        return NULL;
    }
    cJSON *pid = cJSON_GetObjectItemCaseSensitive(ev, "pid");
    if (cJSON_IsNumber(pid))
        cJSON_SetNumberValue(pid, (double)(r->rank + 1) * PID_STRIDE + pid->valuedouble);
    cJSON *ts = cJSON_GetObjectItemCaseSensitive(ev, "ts");
    if (cJSON_IsNumber(ts)) {
        /* Three decimals, as the ranks' own files: a microsecond time with nanoseconds. */
        char t[64];
        snprintf(t, sizeof t, "%.3f", ts->valuedouble + shift_us);
        cJSON_ReplaceItemInObjectCaseSensitive(ev, "ts", cJSON_CreateRaw(t));
    }
    const cJSON *ph = cJSON_GetObjectItemCaseSensitive(ev, "ph");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(ev, "name");
    cJSON *args = cJSON_GetObjectItemCaseSensitive(ev, "args");
    if (cJSON_IsString(ph) && !strcmp(ph->valuestring, "M") && cJSON_IsString(name) &&
        !strcmp(name->valuestring, "process_name") && cJSON_IsObject(args)) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(args, "name");
        char *renamed = NULL;
        if (asprintf(&renamed, "rank %ld: %s", r->rank, cJSON_IsString(n) ? n->valuestring : "") >=
            0) {
            cJSON_ReplaceItemInObjectCaseSensitive(args, "name", cJSON_CreateString(renamed));
            free(renamed);
        }
    }
    *owned = cJSON_PrintUnformatted(ev);
    cJSON_Delete(ev);
    *out_len = *owned ? strlen(*owned) : 0;
    return *owned;
}

/* The rank's timeline files in order: timeline.json, timeline-1.json, ... NULL after the last
 * one, and for one that cannot be read (a warning says why, when say). */
static FILE *open_timeline(job_report *j, const rank_in *r, unsigned k, int say)
{
    char name[64], why[512];
    timeline_file_name(k, name, sizeof name);
    uint64_t size;
    FILE *f = report_file_read(r->folder, name, MAX_TIMELINE_BYTES, &size, why, sizeof why);
    if (!f && errno != ENOENT && say)
        job_warn(j, "rank %ld (%s): %s: its timeline is merged up to there", r->rank,
                 job_base_name(r->folder), why);
    return f;
}

/* Bytes a moved event may grow by (its pid renumbered, its ts from the job's origin): the
 * choice of a rank's events weighs each this much longer than the rank wrote it. */
#define MOVE_GROWTH 24

typedef int (*event_fn)(void *ctx, const char *ev, size_t len);

/* Each line of one timeline file to fn (ev NULL once fn has said stop: counted, past the end).
 * The file is read mapped, or else line by line. */
static void each_file_event(FILE *f, uint64_t size, event_fn fn, void *ctx, int *go,
                            uint64_t *long_lines, char **line, size_t *lcap)
{
    void *map = size ? mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fileno(f), 0) : MAP_FAILED;
    const char *at = map == MAP_FAILED ? NULL : map, *end = at ? at + size : NULL, *text;
    ssize_t len;
    while ((len = at ? report_next_line(&at, end, &text, long_lines)
                     : report_read_line(f, line, lcap, long_lines)) > 0) {
        if (!at)
            text = *line;
        size_t el = timeline_event_text(text, (size_t)len);
        if (el && *go)
            *go = fn(ctx, text, el);
        else if (el)
            fn(ctx, NULL, el);
    }
    if (map != MAP_FAILED)
        munmap(map, (size_t)size);
}

/* One pass over rank r's timeline files: each event line (its text, length) to fn, which
 * returns 0 to stop. The files' size in all. */
static uint64_t each_rank_event(job_report *j, rank_in *r, int say, event_fn fn, void *ctx,
                                char **line, size_t *lcap)
{
    uint64_t size = 0, quiet_long = 0;
    int go = 1;
    for (unsigned k = 0;; k++) {
        FILE *f = open_timeline(j, r, k, say);
        if (!f)
            break;
        struct stat st;
        uint64_t fsize = fstat(fileno(f), &st) == 0 ? (uint64_t)st.st_size : 0;
        size += fsize;
        if (fn)
            each_file_event(f, fsize, fn, ctx, &go, say ? &j->long_lines : &quiet_long, line, lcap);
        fclose(f);
    }
    return size;
}

typedef struct rank_merge {
    job_report *j;
    rank_in *r;
    timeline_pick *pick;
    FILE *out;
    uint64_t budget, bytes;
    double shift_us;
    int *first, any;
    char *buf; /* a moved event's text */
    size_t cap;
} rank_merge;

static int weigh_event(void *ctx, const char *ev, size_t len)
{
    timeline_pick_weigh(((rank_merge *)ctx)->pick, ev, len, MOVE_GROWTH);
    return 1;
}

/* Moves one event into the job's timeline when the choice takes it and it fits; past the
 * budget (ev NULL) the rest are counted as left out. */
static int merge_event(void *ctx, const char *ev, size_t len)
{
    rank_merge *m = ctx;
    m->any = 1;
    if (!ev || (m->pick && !timeline_pick_take(m->pick, ev, len, MOVE_GROWTH))) {
        m->r->tl_left_out++;
        return 1;
    }
    char *owned;
    size_t ml;
    const char *moved = move_event(ev, len, m->r, m->shift_us, &m->buf, &m->cap, &owned, &ml);
    if (!moved)
        return 1;
    size_t el = ml + 2;
    int fits = m->bytes + el <= m->budget;
    if (fits) {
        fwrite_unlocked(*m->first ? "\n" : ",\n", 1, *m->first ? 1 : 2, m->out);
        fwrite_unlocked(moved, 1, ml, m->out);
        m->bytes += el;
        *m->first = 0;
        m->r->tl_events++;
    } else {
        m->r->tl_left_out++;
    }
    free(owned);
    return fits;
}

/* Rank r's timeline files into out, up to budget bytes (lines with their separators), chosen by
 * steps (timeline_pick: its slowest steps whole first) when they may not all fit or a step
 * window is given; what is not taken is counted as left out. Returns the bytes written. */
static uint64_t merge_rank_timeline(job_report *j, rank_in *r, FILE *out, uint64_t budget,
                                    double shift_us, const job_options *o, int *first, char **line,
                                    size_t *lcap)
{
    rank_merge m = {
        .j = j, .r = r, .out = out, .budget = budget, .shift_us = shift_us, .first = first};
    int windowed = o->steps_last > 0;
    uint64_t size = each_rank_event(j, r, 0, NULL, NULL, line, lcap);
    /* A rank's own analysis wrote its share within SHARE_SLACK of it, chosen the same way:
     * taken as it is. Larger files (a full report, a share made for another limit) are chosen
     * from. */
    if (windowed || (double)size > SHARE_SLACK * (double)budget) {
        m.pick = timeline_pick_create(r->spans, r->nspans, o->steps_first,
                                      windowed ? o->steps_last : UINT64_MAX);
        if (m.pick) {
            each_rank_event(j, r, 0, weigh_event, &m, line, lcap);
            timeline_pick_plan(m.pick, budget);
        }
    }
    each_rank_event(j, r, 1, merge_event, &m, line, lcap);
    timeline_pick_free(m.pick);
    free(m.buf);
    j->timeline_ranks += m.any || size > 0;
    return m.bytes;
}

/* A straggler's share of the job's timeline is this many times another rank's. */
#define STRAGGLER_SHARE 2

int job_is_straggler(const job_report *j, size_t i)
{
    for (size_t k = 0; k < j->nstrag; k++)
        if (j->strag[k].idx == i)
            return 1;
    return 0;
}

/* The job's timeline: each rank's, in rank order, within its share of the limit: the limit left
 * shared by the ranks still to come, a straggler's share STRAGGLER_SHARE times the others' (so
 * what a rank leaves unused goes to the ranks after it, the straggler's weight the larger). */
int job_write_timeline(job_report *j, report_dir *d, size_t used, uint64_t limit,
                       const job_options *o)
{
    FILE *out = report_dir_file(d, "timeline.json");
    if (!out)
        return -1;
    double origin = 0;
    uint64_t weights = 0;
    for (size_t i = 0; i < used; i++) {
        if (!i || j->r[i].origin_wall_us < origin)
            origin = j->r[i].origin_wall_us;
        weights += job_is_straggler(j, i) ? STRAGGLER_SHARE : 1;
    }
    static const char head[] = "{\"traceEvents\":[", tail[] = "\n]}\n";
    uint64_t bytes = sizeof head - 1 + sizeof tail - 1;
    fputs(head, out);
    int first = 1;
    char *line = NULL;
    size_t lcap = 0;
    for (size_t i = 0; i < used; i++) {
        rank_in *r = &j->r[i];
        uint64_t left = limit > bytes ? limit - bytes : 0,
                 w = job_is_straggler(j, i) ? STRAGGLER_SHARE : 1;
        bytes +=
            merge_rank_timeline(j, r, out, (uint64_t)((double)left * (double)w / (double)weights),
                                r->origin_wall_us - origin, o, &first, &line, &lcap);
        weights -= w;
        j->timeline_events += r->tl_events;
        j->timeline_left_out += r->tl_left_out;
    }
    free(line);
    fputs(tail, out);
    j->timeline_bytes = bytes;
    return report_dir_close_file(d, out, "timeline.json");
}

/* Names the ranks whose timelines lost events to the limit, in one warning. */
void job_warn_timeline_cut(job_report *j, size_t used, double mb, const job_options *o)
{
    size_t cut = 0;
    char names[160] = "";
    size_t nl = 0;
    for (size_t i = 0; i < used; i++) {
        if (!j->r[i].tl_left_out)
            continue;
        if (nl < sizeof names - 24) {
            int w = snprintf(names + nl, sizeof names - nl, "%s%ld", cut ? ", " : "", j->r[i].rank);
            nl += w > 0 ? (size_t)w : 0;
        } else if (!strstr(names, "...")) {
            snprintf(names + nl, sizeof names - nl, ", ...");
        }
        cut++;
    }
    char window[80] = "";
    if (o->steps_last)
        snprintf(window, sizeof window, " and the step window (--steps %" PRIu64 "-%" PRIu64 ")",
                 o->steps_first, o->steps_last);
    if (cut)
        job_warn(j,
                 "the timeline limit (%.6g MiB, shared by %zu ranks)%s left out %" PRIu64
                 " events of %zu rank%s (%s; each rank's count is ranks[].timeline_left_out in "
                 "summary.json): %s",
                 mb, used, window, j->timeline_left_out, cut, cut == 1 ? "" : "s", names,
                 o->steps_last ? "a larger --timeline-limit or a wider --steps keeps more"
                               : "a larger --timeline-limit keeps more");
}
