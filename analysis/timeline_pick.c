/* timeline_pick: which events of a timeline a share keeps, by steps (timeline.h). Used by a
 * lean rank report (timeline_thin.c) and by the job's merge (job.c), over the lines of timeline
 * files as the timeline writer prints them. */
#include "timeline.h"

#include <stdlib.h>
#include <string.h>

enum { CLASS_META = -2, CLASS_OTHER = -1, CLASS_OUT = -3 };

struct timeline_pick {
    step_span *spans; /* by begin */
    size_t n;
    uint64_t first, last;
    uint64_t *bytes; /* per step: its events' cost */
    char *keep;      /* per step: kept whole */
    uint64_t meta_bytes, other_left;
    int others_full;
};

static int by_begin(const void *a, const void *b)
{
    const step_span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

void step_spans_add(step_span **spans, size_t *n, size_t *cap, step_span s)
{
    if (*n == *cap) {
        size_t want = *cap ? 2 * *cap : 64;
        step_span *sp = realloc(*spans, want * sizeof *sp);
        if (!sp)
            return;
        *spans = sp;
        *cap = want;
    }
    (*spans)[(*n)++] = s;
}

timeline_pick *timeline_pick_create(const step_span *spans, size_t n, uint64_t first, uint64_t last)
{
    timeline_pick *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->spans = malloc((n + 1) * sizeof *p->spans);
    p->bytes = calloc(n + 1, sizeof *p->bytes);
    p->keep = calloc(n + 1, 1);
    if (!p->spans || !p->bytes || !p->keep) {
        timeline_pick_free(p);
        return NULL;
    }
    if (n)
        memcpy(p->spans, spans, n * sizeof *spans);
    qsort(p->spans, n, sizeof *p->spans, by_begin);
    p->n = n;
    p->first = first;
    p->last = last;
    return p;
}

void timeline_pick_free(timeline_pick *p)
{
    if (!p)
        return;
    free(p->spans);
    free(p->bytes);
    free(p->keep);
    free(p);
}

size_t timeline_event_text(const char *line, size_t len)
{
    while (len && (line[len - 1] == '\n' || line[len - 1] == ',' || line[len - 1] == '\r'))
        len--;
    static const char head[] = "{\"traceEvents\":[";
    if (!len || line[0] != '{' || (len >= sizeof head - 1 && !memcmp(line, head, sizeof head - 1)))
        return 0;
    return len;
}

const char *timeline_thousandths(const char *p, const char *end, int64_t *out)
{
    int64_t v = 0;
    int digits = 0, places = -1;
    for (; p < end && ((*p >= '0' && *p <= '9') || (*p == '.' && places < 0)); p++) {
        if (*p == '.') {
            places = 0;
            continue;
        }
        if (++digits > 15 || places >= 3)
            return NULL;
        v = v * 10 + (*p - '0');
        places += places >= 0;
    }
    if (!digits || places == 0)
        return NULL;
    for (int k = places < 0 ? 0 : places; k < 3; k++)
        v *= 10;
    *out = v;
    return p;
}

/* The first place of key (which begins with a quote) in ev, or NULL: by its quote, as the keys
 * sought come early in a line (memmem's set-up costs more than the search). */
static const char *find_key(const char *ev, size_t len, const char *key, size_t klen)
{
    const char *end = ev + len;
    for (const char *p = ev; (p = memchr(p, '"', (size_t)(end - p))); p++)
        if ((size_t)(end - p) >= klen && !memcmp(p, key, klen))
            return p;
    return NULL;
}

/* "ts" of an event in nanoseconds (microseconds with at most 3 decimals, as the writer prints
 * it): 1, or 0 for an event without one. The first "ts" key: the writer puts it before "args",
 * and a quote inside a string is escaped. */
static int event_ts(const char *ev, size_t len, int64_t *ns)
{
    const char *p = find_key(ev, len, "\"ts\":", 5), *end = ev + len;
    if (!p)
        return 0;
    p += 5;
    int neg = p < end && *p == '-';
    if (!timeline_thousandths(p + neg, end, ns))
        return 0;
    *ns = neg ? -*ns : *ns;
    return 1;
}

/* The class of an event of kind k at ts: metadata, the index of the step whose span holds ts
 * (the last that begins at or before it), other (between steps), or out (outside the
 * window). */
static long class_at(const timeline_pick *p, enum pick_kind k, int64_t ts)
{
    if (k == PICK_META)
        return CLASS_META;
    int windowed = p->first > 0 || p->last < UINT64_MAX;
    if (k != PICK_TS)
        return windowed ? CLASS_OUT : CLASS_OTHER;
    size_t lo = 0, hi = p->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->spans[mid].begin <= ts)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!lo || ts > p->spans[lo - 1].end)
        return windowed ? CLASS_OUT : CLASS_OTHER;
    const step_span *s = &p->spans[lo - 1];
    if (s->step < p->first || s->step > p->last)
        return CLASS_OUT;
    return (long)(lo - 1);
}

/* The kind and ts of an event line, read from its text. */
static long class_of(const timeline_pick *p, const char *ev, size_t len)
{
    /* "ph" comes early in a line: its key found, the value's first letter tells. */
    const char *ph = find_key(ev, len, "\"ph\":\"", 6);
    if (ph && ph + 6 < ev + len && ph[6] == 'M')
        return CLASS_META;
    int64_t ts = 0;
    enum pick_kind k = event_ts(ev, len, &ts) ? PICK_TS : PICK_NONE;
    return class_at(p, k, ts);
}

static void weigh_class(timeline_pick *p, long c, uint64_t cost)
{
    if (c == CLASS_META)
        p->meta_bytes += cost;
    else if (c >= 0)
        p->bytes[c] += cost;
}

void timeline_pick_weigh(timeline_pick *p, const char *ev, size_t len, uint64_t extra)
{
    weigh_class(p, class_of(p, ev, len), len + 2 + extra);
}

void timeline_pick_weigh_at(timeline_pick *p, enum pick_kind k, int64_t ts, uint64_t cost)
{
    weigh_class(p, class_at(p, k, ts), cost);
}

static int by_length_desc(const void *a, const void *b, void *ctx)
{
    const step_span *s = ctx;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    int64_t dx = s[x].end - s[x].begin, dy = s[y].end - s[y].begin;
    return dx < dy ? 1 : dx > dy ? -1 : (x > y) - (x < y);
}

void timeline_pick_plan(timeline_pick *p, uint64_t budget)
{
    uint64_t left = budget > p->meta_bytes ? budget - p->meta_bytes : 0;
    size_t *order = malloc((p->n + 1) * sizeof *order);
    if (order) {
        for (size_t i = 0; i < p->n; i++)
            order[i] = i;
        qsort_r(order, p->n, sizeof *order, by_length_desc, p->spans);
    }
    for (size_t k = 0; k < p->n; k++) {
        size_t i = order ? order[k] : k; /* out of memory: in time order */
        if (p->bytes[i] && p->bytes[i] <= left) {
            p->keep[i] = 1;
            left -= p->bytes[i];
        }
    }
    free(order);
    p->other_left = left;
}

static int take_class(timeline_pick *p, long c, uint64_t cost)
{
    if (c == CLASS_META || (c >= 0 && p->keep[c]))
        return 1;
    if (c == CLASS_OUT || p->others_full)
        return 0;
    if (cost <= p->other_left) {
        p->other_left -= cost;
        return 1;
    }
    p->others_full = 1; /* in time order: none after the first that does not fit */
    return 0;
}

int timeline_pick_take(timeline_pick *p, const char *ev, size_t len, uint64_t extra)
{
    return take_class(p, class_of(p, ev, len), len + 2 + extra);
}

int timeline_pick_take_at(timeline_pick *p, enum pick_kind k, int64_t ts, uint64_t cost)
{
    return take_class(p, class_at(p, k, ts), cost);
}
