/* procfs: parsers of the /proc files the sampler reads. They take the text (not NUL-terminated,
 * possibly cut short) so tests feed fixtures; anything that does not parse returns -1. Numbers
 * that do not fit 64 bits are errors, not wrapped. */
#include "collectors.h"

#include <string.h>

typedef struct cursor {
    const char *p, *end;
} cursor;

static int is_space(char c)
{
    return c == ' ' || c == '\t';
}

static void skip_spaces(cursor *c)
{
    while (c->p < c->end && is_space(*c->p))
        c->p++;
}

/* An unsigned decimal after optional spaces, ending at a space, a newline or the end. */
static int read_u64(cursor *c, uint64_t *out)
{
    skip_spaces(c);
    if (c->p >= c->end || *c->p < '0' || *c->p > '9')
        return -1;
    uint64_t v = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        uint64_t d = (uint64_t)(*c->p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
        c->p++;
    }
    if (c->p < c->end && !is_space(*c->p) && *c->p != '\n')
        return -1;
    *out = v;
    return 0;
}

/* Skips one whitespace-separated token on the current line; -1 when there is none. */
static int skip_token(cursor *c)
{
    skip_spaces(c);
    const char *start = c->p;
    while (c->p < c->end && !is_space(*c->p) && *c->p != '\n')
        c->p++;
    return c->p > start ? 0 : -1;
}

/* The line starting at p (without its newline) in [*line, *line_end); returns the next line. */
static const char *next_line(const char *p, const char *end, const char **line_end)
{
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    *line_end = nl ? nl : end;
    return nl ? nl + 1 : end;
}

static int starts_with(const char *p, const char *end, const char *word)
{
    size_t n = strlen(word);
    return (size_t)(end - p) >= n && !memcmp(p, word, n);
}

int procfs_parse_stat(const char *text, size_t len, procfs_machine *out)
{
    if (!text || !out)
        return -1;
    enum { HAVE_CPU = 1, HAVE_CTXT = 2, HAVE_RUNNING = 4, HAVE_BLOCKED = 8, HAVE_ALL = 15 };
    unsigned have = 0;
    memset(out, 0, sizeof *out);
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *le;
        const char *next = next_line(p, end, &le);
        cursor c = {p, le};
        uint64_t v;
        if (starts_with(p, le, "cpu ")) {
            c.p += 4;
            /* user nice system idle iowait irq softirq steal: the order of enum ts_cpu_field.
             * guest and guest_nice that may follow are already inside user and nice. */
            for (int f = 0; f < TS_CPU__COUNT; f++)
                if (read_u64(&c, &out->cpu[f]) != 0)
                    return -1;
            have |= HAVE_CPU;
        } else if (starts_with(p, le, "ctxt ")) {
            c.p += 5;
            if (read_u64(&c, &out->ctxt) != 0)
                return -1;
            have |= HAVE_CTXT;
        } else if (starts_with(p, le, "procs_running ")) {
            c.p += 14;
            if (read_u64(&c, &v) != 0 || v > UINT32_MAX)
                return -1;
            out->running = (uint32_t)v;
            have |= HAVE_RUNNING;
        } else if (starts_with(p, le, "procs_blocked ")) {
            c.p += 14;
            if (read_u64(&c, &v) != 0 || v > UINT32_MAX)
                return -1;
            out->blocked = (uint32_t)v;
            have |= HAVE_BLOCKED;
        }
        p = next;
    }
    return have == HAVE_ALL ? 0 : -1;
}

int procfs_parse_task_stat(const char *text, size_t len, procfs_task *out)
{
    if (!text || !out)
        return -1;
    memset(out, 0, sizeof *out);
    const char *end = text + len;
    const char *open = memchr(text, '(', len);
    /* comm may hold any bytes, ')' and newlines included: it ends at the last ')'. */
    const char *close = NULL;
    for (const char *q = end; q > text; q--)
        if (q[-1] == ')') {
            close = q - 1;
            break;
        }
    if (!open || !close || close < open)
        return -1;
    cursor c = {close + 1, end};
    /* Field 3 is the state letter; then ppid (4) .. rss (24). */
    skip_spaces(&c);
    out->state = c.p < c.end ? *c.p : 0;
    if (skip_token(&c) != 0)
        return -1;
    for (int field = 4; field <= 24; field++) {
        uint64_t v;
        switch (field) {
        case 4:
        case 14:
        case 15:
        case 20:
        case 22:
        case 24:
            if (read_u64(&c, &v) != 0)
                return -1;
            break;
        default:
            if (skip_token(&c) != 0)
                return -1;
            continue;
        }
        if ((field == 4 || field == 20) && v > UINT32_MAX)
            return -1;
        if (field == 4)
            out->ppid = (uint32_t)v;
        else if (field == 14)
            out->utime = v;
        else if (field == 15)
            out->stime = v;
        else if (field == 20)
            out->num_threads = (uint32_t)v;
        else if (field == 22)
            out->start = v;
        else
            out->rss_pages = v;
    }
    return 0;
}

/* "Key:   1234 kB" */
static int status_kb(const char *p, const char *le, const char *key, uint64_t *kb)
{
    cursor c = {p + strlen(key), le};
    if (read_u64(&c, kb) != 0)
        return -1;
    skip_spaces(&c);
    if (!starts_with(c.p, le, "kB") || *kb > UINT64_MAX / 1024)
        return -1;
    return 0;
}

int procfs_parse_status(const char *text, size_t len, uint64_t *rss_bytes, uint64_t *hwm_bytes)
{
    if (!text || !rss_bytes || !hwm_bytes)
        return -1;
    int have_rss = 0, have_hwm = 0;
    uint64_t rss = 0, hwm = 0;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *le;
        const char *next = next_line(p, end, &le);
        if (starts_with(p, le, "VmRSS:")) {
            if (status_kb(p, le, "VmRSS:", &rss) != 0)
                return -1;
            have_rss = 1;
        } else if (starts_with(p, le, "VmHWM:")) {
            if (status_kb(p, le, "VmHWM:", &hwm) != 0)
                return -1;
            have_hwm = 1;
        }
        p = next;
    }
    if (!have_rss || !have_hwm)
        return -1;
    *rss_bytes = rss * 1024;
    *hwm_bytes = hwm * 1024;
    return 0;
}

int procfs_parse_comm(const char *text, size_t len, char *out, size_t cap)
{
    if (!text || !out || cap == 0 || len == 0)
        return -1;
    /* The kernel ends comm with one newline; a name may itself hold any other byte but NUL. */
    if (text[len - 1] == '\n')
        len--;
    if (memchr(text, '\0', len) || len >= cap)
        return -1;
    memcpy(out, text, len);
    out[len] = 0;
    return 0;
}

int procfs_parse_schedstat(const char *text, size_t len, uint64_t *run_ns)
{
    if (!text || !run_ns)
        return -1;
    cursor c = {text, text + len};
    uint64_t run = 0, wait = 0;
    /* Three numbers: time on a CPU (ns), time waiting to run (ns), timeslices. */
    if (read_u64(&c, &run) != 0 || read_u64(&c, &wait) != 0)
        return -1;
    *run_ns = run;
    return 0;
}
