/* timeline: the Chrome trace-event JSON writer (Perfetto and chrome://tracing).
 *
 * Streamed while the recording is read, so memory does not grow with the run: events are
 * printed as they come, in recording order (the viewers sort by time). The rules it keeps:
 *
 * - {"traceEvents":[...]}, one event per line; ts and dur in microseconds with nanosecond
 *   decimals, rebased to origin_ns.
 * - pid 1 is the host process (tid 1, 2, ... its threads in order of appearance); every other
 *   process (each device, then "Steps" and "Op Overlap Analyse") gets the next pid when it first
 *   appears; a device's tids are its streams. process_name and thread_name metadata come before
 *   a track's first event in each file, and again when a thread names itself later.
 * - Complete events ("X") on one track nest or are disjoint, never partially overlap. A checker
 *   per track (timeline_nest.c) keeps the top-level spans (the recorder writes a range when it
 *   ends, so children come before their parents); an event that would cross one, or that it
 *   cannot verify, goes to an overlap track of the same thread ("... (overlapping 1)", checked
 *   the same way), and past the last of those it is dropped. Both are counted.
 * - Ranges that ended on another thread (TS_EF_CROSS_THREAD) are async "b"/"e" pairs.
 * - A CUDA API call and the kernel with its correlation id are joined by a flow ("s", "f" with
 *   "bp":"e"), through a direct-mapped table of recent correlations (bounded).
 * - Counters ("C"): host and device memory, each queue's size, CPU, user counters.
 * - Every value goes through cJSON: one object per event shape, whose values are raw items
 *   pointing at text cJSON escaped once per distinct name, and at numbers formatted here exactly
 *   from integer nanoseconds, printed through templates (timeline_tmpl.c) into a large buffer.
 *   Names are first made valid UTF-8 without controls (text_clean).
 * - The size limit counts every byte of every file; the first event that does not fit ends the
 *   timeline (the rest is counted as left out), so it covers a prefix of the run. A file that
 *   would pass split_bytes is closed and the next one opened with its own metadata. Each file is
 *   written as .NAME.tmp and renamed once complete. */
#include "timeline_internal.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- Small text helpers -------------------------------------------------------------------- */

char *timeline_put_u64(char *p, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = tmp[--n];
    *p = 0;
    return p;
}

/* v / 10^decimals written exactly, trailing zeros of the fraction dropped. */
static char *fmt_fixed(char *p, int64_t v, int decimals)
{
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    if (v < 0)
        *p++ = '-';
    uint64_t scale = 1;
    for (int i = 0; i < decimals; i++)
        scale *= 10;
    uint64_t fp = u % scale;
    p = timeline_put_u64(p, u / scale);
    if (fp) {
        *p++ = '.';
        for (int i = decimals - 1; i >= 0; i--) {
            p[i] = (char)('0' + fp % 10);
            fp /= 10;
        }
        p += decimals;
        while (p[-1] == '0')
            p--;
    }
    *p = 0;
    return p;
}

/* Slot values. A value that changes from event to event ("varying": times, ids, sizes) is text
 * in t->num; one that a track and a name fix (strings in the arena, pid, tid) is part of the
 * key of the printed template (see print_event). */

static void set_us(timeline *t, shape *sh, int s, int64_t ns)
{
    if (s == S_TS) {
        t->ev_ts = ns;
        t->ev_has_ts = 1;
    }
    fmt_fixed(t->num[s], ns, 3);
    sh->slot[s]->valuestring = t->num[s];
    t->key[s] = VARY;
}

static char *fmt_u64(char *p, uint64_t v)
{
    return timeline_put_u64(p, v);
}

static void set_u64(timeline *t, shape *sh, int s, uint64_t v)
{
    fmt_u64(t->num[s], v);
    sh->slot[s]->valuestring = t->num[s];
    t->key[s] = VARY;
}

/* A number fixed by the track (pid, tid): part of the key. */
static void set_const(timeline *t, shape *sh, int s, uint32_t v)
{
    fmt_u64(t->knum[s], v);
    sh->slot[s]->valuestring = t->knum[s];
    t->key[s] = v;
}

static void set_pct(timeline *t, shape *sh, int s, double pct)
{
    if (!(pct == pct) || pct > 1e12 || pct < -1e12)
        pct = 0;
    fmt_fixed(t->num[s], (int64_t)(pct * 100 + (pct < 0 ? -0.5 : 0.5)), 2);
    sh->slot[s]->valuestring = t->num[s];
    t->key[s] = VARY;
}

/* Number text made by the caller (counters). */
static void set_numtext(timeline *t, shape *sh, int s, const char *text)
{
    snprintf(t->num[s], sizeof t->num[s], "%s", text);
    sh->slot[s]->valuestring = t->num[s];
    t->key[s] = VARY;
}

/* A string that changes from event to event ("step 12"), printed by cJSON each time. */
static void set_text(timeline *t, shape *sh, int s, const char *text)
{
    cJSON *str = cJSON_CreateString(text);
    if (!str || !cJSON_PrintPreallocated(str, t->num[s], (int)sizeof t->num[s], 0))
        strcpy(t->num[s], "\"\"");
    cJSON_Delete(str);
    sh->slot[s]->valuestring = t->num[s];
    t->key[s] = VARY;
}

/* A string of the arena: names are interned there once, so the offset is a key. */
static void set_str(timeline *t, shape *sh, int s, uint32_t off)
{
    sh->slot[s]->valuestring = t->arena + off;
    t->key[s] = off;
}

static int64_t rel(const timeline *t, uint64_t ns)
{
    return (int64_t)(ns - t->cfg.origin_ns);
}

/* ---- Output -------------------------------------------------------------------------------- */

int timeline_write_all(timeline *t, const char *p, size_t n)
{
    while (n && !t->error) {
        ssize_t w = write(t->fd, p, n);
        if (w < 0) {
            if (errno != EINTR)
                t->error = errno ? errno : EIO;
            continue;
        }
        p += w;
        n -= (size_t)w;
    }
    return t->error ? -1 : 0;
}

static void flush_buf(timeline *t)
{
    if (t->len && !t->error && timeline_hold(t))
        timeline_write_all(t, t->buf, t->len);
    t->len = 0;
}

void timeline_file_name(uint32_t i, char *buf, size_t len)
{
    if (i == 0)
        snprintf(buf, len, "timeline.json");
    else
        snprintf(buf, len, "timeline-%" PRIu32 ".json", i);
}

static void tmp_name(uint32_t i, char *buf, size_t len)
{
    char n[64];
    timeline_file_name(i, n, sizeof n);
    snprintf(buf, len, ".%s.tmp", n);
}

int timeline_file_fd(timeline *t)
{
    char name[80];
    tmp_name(t->file, name, sizeof name);
    t->fd = openat(t->cfg.dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (t->fd < 0)
        t->error = errno;
    return t->fd;
}

/* A kept share's first file is held in memory (timeline_thin.c) and opened only if it spills. */
static int file_open(timeline *t)
{
    t->holding = t->cfg.keep && !t->spilled && !t->marks_lost && t->file == 0;
    if (!t->holding && timeline_file_fd(t) < 0)
        return -1;
    t->open = 1;
    t->len = 0;
    memcpy(t->buf, FILE_HEAD, sizeof FILE_HEAD - 1);
    t->len = sizeof FILE_HEAD - 1;
    t->file_bytes = t->len;
    t->file_events = 0;
    t->total += t->len;
    t->st.files = t->file + 1;
    return 0;
}

static int file_close(timeline *t)
{
    if (!t->open)
        return 0;
    if (timeline_unhold(t) < 0)
        return -1;
    memcpy(t->buf + t->len, FILE_TAIL, sizeof FILE_TAIL - 1);
    t->len += sizeof FILE_TAIL - 1;
    t->total += sizeof FILE_TAIL - 1;
    flush_buf(t);
    if (close(t->fd) < 0 && !t->error)
        t->error = errno;
    t->open = 0;
    t->fd = -1;
    char from[80], to[64];
    tmp_name(t->file, from, sizeof from);
    timeline_file_name(t->file, to, sizeof to);
    if (!t->error && renameat(t->cfg.dirfd, from, t->cfg.dirfd, to) < 0)
        t->error = errno;
    return t->error ? -1 : 0;
}

/* ---- Emission ------------------------------------------------------------------------------ */

static void set_pid_tid(timeline *t, shape *sh, const track *tr)
{
    set_const(t, sh, S_PID, t->procs[tr->proc].pid);
    if (sh->slot[S_TID])
        set_const(t, sh, S_TID, tr->tid);
}

/* Prints the metadata a track needs in this file: its process's name once per file, its
 * thread's name once per file and again when the thread renamed itself. Labels are added to
 * the arena each time: that happens once per file and per rename, and keeps them simple.
 * Returns -1 when the buffer is full. */
static int print_meta(timeline *t, track *tr)
{
    proc *p = &t->procs[tr->proc];
    if (p->meta_file != t->file + 1) {
        char label[160];
        timeline_proc_label(t, p, label, sizeof label);
        uint32_t off = timeline_arena_add(t, NULL, label, strlen(label));
        uint32_t key = timeline_literal(t, L_PROCESS_NAME, "process_name");
        shape *sh = &t->shapes[SH_MP];
        set_str(t, sh, S_NAME, key);
        set_str(t, sh, S_A0, off == UINT32_MAX ? 0 : off);
        set_const(t, sh, S_PID, p->pid);
        if (timeline_print_shape(t, sh) < 0)
            return -1;
        p->meta_file = t->file + 1;
        t->st.events++;
    }
    if (tr->counters)
        return 0;
    if (tr->names_seen == t->names_gen && tr->meta_file == t->file + 1)
        return 0;
    tr->names_seen = t->names_gen;
    uint32_t nid = timeline_thread_name_id(t, tr);
    if (tr->meta_file == t->file + 1 && nid == tr->meta_name)
        return 0;
    uint32_t off = timeline_track_label(t, tr, nid);
    uint32_t key = timeline_literal(t, L_THREAD_NAME, "thread_name");
    shape *sh = &t->shapes[SH_M];
    set_str(t, sh, S_NAME, key);
    set_str(t, sh, S_A0, off);
    set_pid_tid(t, sh, tr);
    if (timeline_print_shape(t, sh) < 0)
        return -1;
    tr->meta_file = t->file + 1;
    tr->meta_name = nid;
    t->st.events++;
    return 0;
}

/* What fill() sets up: the shape is complete except pid/tid and metadata. */
typedef void (*fill_fn)(timeline *t, shape *sh, const void *arg);

/* Emits one event of shape sh on track ti: metadata first where needed, then the event, within
 * the size limit and the split. fill sets the shape's values (again after a rotation). */
static void emit(timeline *t, int shi, uint32_t ti, fill_fn fill, const void *arg)
{
    if (t->stopped || t->error) {
        t->st.left_out++;
        return;
    }
    shape *sh = &t->shapes[shi];
    for (int attempt = 0; attempt < 2; attempt++) {
        if (!t->open && file_open(t) < 0)
            return;
        if (BUF_SIZE - t->len < BUF_MARGIN)
            flush_buf(t);
        track *tr = &t->tracks[ti];
        proc *p = &t->procs[tr->proc];
        /* Undo information, for an event that does not fit. */
        size_t mark = t->len;
        uint64_t base = t->file_bytes - t->len; /* the file's offset of buf[0] */
        uint64_t fevents = t->file_events, events = t->st.events;
        uint32_t pmeta = p->meta_file, tmeta = tr->meta_file, tname = tr->meta_name;
        uint64_t seen = tr->names_seen;

        int rc = print_meta(t, &t->tracks[ti]);
        size_t meta_end = t->len;
        tr = &t->tracks[ti];
        t->ev_has_ts = 0;
        if (rc == 0) {
            fill(t, sh, arg);
            set_pid_tid(t, sh, tr);
            rc = timeline_print_event(t, shi, sh);
        }
        uint64_t add = t->len - mark;
        int fits_limit = t->total + add + (sizeof FILE_TAIL - 1) <= t->cfg.limit_bytes;
        int fits_file = t->file_bytes + add + (sizeof FILE_TAIL - 1) <= t->cfg.split_bytes;
        if (rc == 0 && fits_limit && fits_file) {
            t->file_bytes += add;
            t->total += add;
            t->st.events++;
            if (t->cfg.keep && meta_end > mark)
                timeline_mark(t, base + mark, PICK_META, 0);
            if (t->cfg.keep)
                timeline_mark(t, base + meta_end, t->ev_has_ts ? PICK_TS : PICK_NONE, t->ev_ts);
            return;
        }
        t->len = mark;
        t->file_events = fevents;
        t->st.events = events;
        p->meta_file = pmeta;
        tr->meta_file = tmeta;
        tr->meta_name = tname;
        tr->names_seen = seen;
        if (rc == 0 && !fits_limit) {
            t->stopped = 1;
            t->st.left_out++;
            return;
        }
        if (rc < 0 || fevents == 0 || attempt == 1)
            break; /* too big even for a file of its own */
        file_close(t);
        t->file++;
    }
    t->st.left_out++;
}

/* ---- Fillers ------------------------------------------------------------------------------ */

typedef struct x_arg {
    const ts_event *e;
    uint32_t name_off, cat_off, a0_off; /* arena offsets */
    uint64_t flops;
    const char *text; /* a name made for this event, instead of name_off */
} x_arg;

static void fill_x(timeline *t, shape *sh, const void *arg)
{
    const x_arg *x = arg;
    const ts_event *e = x->e;
    set_str(t, sh, S_NAME, x->name_off);
    set_str(t, sh, S_CAT, x->cat_off);
    set_us(t, sh, S_TS, rel(t, e->begin_ns));
    set_us(t, sh, S_DUR, (int64_t)(e->end_ns >= e->begin_ns ? e->end_ns - e->begin_ns : 0));
    if (sh == &t->shapes[SH_X_OP] || sh == &t->shapes[SH_X_OPF]) {
        set_str(t, sh, S_A0, x->a0_off);
        if (sh == &t->shapes[SH_X_OPF])
            set_u64(t, sh, S_A1, x->flops);
    } else if (sh == &t->shapes[SH_X_KERNEL]) {
        set_str(t, sh, S_A0, x->a0_off);
        set_u64(t, sh, S_A1, e->corr);
    } else if (sh == &t->shapes[SH_X_COPY]) {
        set_str(t, sh, S_A0, x->a0_off);
        set_u64(t, sh, S_A1, e->v0);
        set_u64(t, sh, S_A2, e->aux);
    } else if (sh == &t->shapes[SH_X_API]) {
        set_u64(t, sh, S_A0, e->corr);
    } else if (sh == &t->shapes[SH_X_COMM]) {
        set_u64(t, sh, S_A0, e->v0);
    }
}

static void fill_instant(timeline *t, shape *sh, const void *arg)
{
    const x_arg *x = arg;
    if (x->text)
        set_text(t, sh, S_NAME, x->text);
    else
        set_str(t, sh, S_NAME, x->name_off);
    set_str(t, sh, S_CAT, x->cat_off);
    set_us(t, sh, S_TS, rel(t, x->e->begin_ns));
}

typedef struct async_arg {
    const ts_event *e;
    uint32_t name_off, cat_off, a0_off;
    uint64_t id;
    int end;
} async_arg;

static void fill_async(timeline *t, shape *sh, const void *arg)
{
    const async_arg *x = arg;
    set_str(t, sh, S_NAME, x->name_off);
    set_str(t, sh, S_CAT, x->cat_off);
    set_u64(t, sh, S_ID, x->id);
    set_us(t, sh, S_TS, rel(t, x->end ? x->e->end_ns : x->e->begin_ns));
    if (!x->end)
        set_str(t, sh, S_A0, x->a0_off);
}

typedef struct flow_arg {
    uint64_t id, ts;
    uint32_t name_off;
} flow_arg;

static void fill_flow(timeline *t, shape *sh, const void *arg)
{
    const flow_arg *f = arg;
    set_str(t, sh, S_NAME, f->name_off);
    set_str(t, sh, S_CAT, f->name_off);
    set_u64(t, sh, S_ID, f->id);
    set_us(t, sh, S_TS, rel(t, f->ts));
}

typedef struct counter_arg {
    uint32_t name_off;
    uint64_t t_ns;
    const char *value[3]; /* number text */
} counter_arg;

static void fill_counter(timeline *t, shape *sh, const void *arg)
{
    const counter_arg *c = arg;
    set_str(t, sh, S_NAME, c->name_off);
    set_us(t, sh, S_TS, rel(t, c->t_ns));
    for (int i = 0; i < 3 && sh->slot[S_A0 + i]; i++)
        set_numtext(t, sh, S_A0 + i, c->value[i]);
}

typedef struct span_arg {
    uint32_t name_off, cat_off;
    uint64_t b, e;
    const step_row *row;
    double share;
    const char *text; /* a name made for this span, instead of name_off */
} span_arg;

static void fill_span(timeline *t, shape *sh, const void *arg)
{
    const span_arg *s = arg;
    if (s->text)
        set_text(t, sh, S_NAME, s->text);
    else
        set_str(t, sh, S_NAME, s->name_off);
    set_str(t, sh, S_CAT, s->cat_off);
    set_us(t, sh, S_TS, rel(t, s->b));
    set_us(t, sh, S_DUR, (int64_t)(s->e - s->b));
    set_u64(t, sh, S_A0, s->row->step);
    if (sh == &t->shapes[SH_X_STEP]) {
        set_us(t, sh, S_A1, (int64_t)s->row->interval_ns);
        set_us(t, sh, S_A2, (int64_t)s->row->compute_ns);
        set_us(t, sh, S_A3, (int64_t)s->row->comm_wait_ns);
        set_us(t, sh, S_A4, (int64_t)s->row->tail_ns);
        set_us(t, sh, S_A5, (int64_t)s->row->eval_ns);
        set_str(t, sh, S_A6,
                timeline_literal(t, L_SOURCE0 + (s->row->source & 3),
                                 step_source_name(s->row->source)));
    } else {
        set_pct(t, sh, S_A1, s->share);
    }
}

/* ---- Events ------------------------------------------------------------------------------- */

static uint32_t host_track(timeline *t, uint32_t tid)
{
    return timeline_track_get(t, 0, tid);
}

static uint32_t device_track(timeline *t, uint32_t device, uint32_t stream)
{
    return timeline_track_get(t, timeline_proc_get(t, PROC_DEVICE, device), stream);
}

/* Counters belong to a process; their track has a tid (positive, like every tid here) but no
 * thread of its own, so no thread_name. UINT32_MAX is no thread id nor stream. */
static uint32_t counter_track(timeline *t, uint32_t p)
{
    uint32_t ti = timeline_track_get(t, p, UINT32_MAX);
    if (ti != NO_TRACK)
        t->tracks[ti].counters = 1;
    return ti;
}

/* The op type id of an op event: given, or derived from its name (cached per name). */
static uint32_t op_type(timeline *t, const ts_event *e)
{
    if (e->type != TS_STR_NONE)
        return e->type;
    uint32_t v = index_map_find(&t->optype, e->name);
    if (v != UINT32_MAX)
        return v;
    v = names_op_type(t->a, e->name, TS_STR_NONE);
    index_map_get(&t->optype, e->name, v, NULL);
    return v;
}

static void flow_note(timeline *t, uint64_t corr, uint32_t side, uint64_t ts, uint32_t ti)
{
    if (!corr || ti == NO_TRACK)
        return;
    flow_slot *s = &t->flows[corr & (FLOW_SLOTS - 1)];
    if (s->side && s->corr == corr && s->side != side) {
        uint32_t launch = side == 1 ? ti : s->track, kernel = side == 1 ? s->track : ti;
        uint64_t lts = side == 1 ? ts : s->ts, kts = side == 1 ? s->ts : ts;
        uint32_t name = timeline_literal(t, L_AC2G, "ac2g");
        flow_arg fs = {corr, lts, name}, ff = {corr, kts, name};
        uint64_t before = t->st.left_out;
        emit(t, SH_FS, launch, fill_flow, &fs);
        if (t->st.left_out == before) {
            emit(t, SH_FF, kernel, fill_flow, &ff);
            if (t->st.left_out == before)
                t->st.flows++;
        }
        s->side = 0;
        return;
    }
    *s = (flow_slot){corr, ts, ti, side};
}

/* An op's FLOPs: v0, an integer or (TS_EF_DOUBLE) a double. */
static uint64_t op_flops(const ts_event *e)
{
    if (!(e->flags & TS_EF_DOUBLE))
        return e->v0;
    double d;
    memcpy(&d, &e->v0, sizeof d);
    return d >= 1 && d < 1.8e19 ? (uint64_t)d : 0;
}

static void complete(timeline *t, int shi, uint32_t ti, const ts_event *e, uint32_t cat,
                     uint32_t name_off, uint32_t a0_off, int flow_side)
{
    if (ti == NO_TRACK)
        return;
    if (t->stopped || t->error) {
        t->st.left_out++;
        return;
    }
    uint64_t end = e->end_ns >= e->begin_ns ? e->end_ns : e->begin_ns;
    uint32_t at = timeline_place(t, ti, e->begin_ns, end);
    if (at == NO_TRACK)
        return;
    x_arg x = {e, name_off, cat, a0_off, op_flops(e), NULL};
    uint64_t before = t->st.left_out;
    emit(t, shi, at, fill_x, &x);
    if (flow_side && t->st.left_out == before)
        flow_note(t, e->corr, (uint32_t)flow_side, e->begin_ns, at);
}

static void instant(timeline *t, int shi, uint32_t ti, const ts_event *e, uint32_t cat,
                    uint32_t name_off, const char *text)
{
    if (ti == NO_TRACK)
        return;
    x_arg x = {e, name_off, cat, 0, 0, text};
    emit(t, shi, ti, fill_instant, &x);
}

static void counter(timeline *t, int shi, uint32_t ti, uint32_t name_off, uint64_t t_ns,
                    const char *v0, const char *v1, const char *v2)
{
    if (ti == NO_TRACK)
        return;
    counter_arg c = {name_off, t_ns, {v0, v1, v2}};
    emit(t, shi, ti, fill_counter, &c);
}

static void one(timeline *t, const ts_event *e)
{
    uint32_t dev = e->device != TS_DEVICE_HOST;
    switch (e->kind) {
    case TS_KIND_OP_RANGE:
    case TS_KIND_NVTX_RANGE: {
        int op = e->kind == TS_KIND_OP_RANGE;
        uint32_t ti = host_track(t, e->tid);
        uint32_t cat = op ? timeline_literal(t, L_OP, "op") : timeline_literal(t, L_NVTX, "nvtx");
        uint32_t name = timeline_jstr(t, STR_NAME, e->name, op ? "op" : "nvtx");
        uint32_t type =
            op ? timeline_jstr(t, STR_NAME, op_type(t, e), "") : timeline_literal(t, L_EMPTY, "");
        if (e->flags & TS_EF_CROSS_THREAD) {
            if (ti == NO_TRACK)
                return;
            async_arg b = {e, name, cat, type, ++t->async_ids, 0}, en = b;
            en.end = 1;
            uint64_t before = t->st.left_out;
            emit(t, SH_B, ti, fill_async, &b);
            if (t->st.left_out == before)
                emit(t, SH_E, ti, fill_async, &en);
            return;
        }
        if (!op)
            complete(t, SH_X0, ti, e, cat, name, 0, 0);
        else
            complete(t, op_flops(e) ? SH_X_OPF : SH_X_OP, ti, e, cat, name, type, 0);
        return;
    }
    case TS_KIND_CUDA_API:
        complete(t, SH_X_API, host_track(t, e->tid), e, timeline_literal(t, L_API, "cuda_api"),
                 timeline_jstr(t, STR_NAME, e->name, "cuda_api"), 0, 1);
        return;
    case TS_KIND_COMM_OP:
        complete(t, SH_X_COMM, host_track(t, e->tid), e, timeline_literal(t, L_COMM, "comm"),
                 timeline_jstr(t, STR_NAME, e->name, "comm"), 0, 0);
        return;
    case TS_KIND_KERNEL: {
        uint32_t ti = dev ? device_track(t, e->device, e->tid) : host_track(t, e->tid);
        uint32_t cat = e->flags & TS_EF_COMM ? timeline_literal(t, L_COMM_KERNEL, "comm_kernel")
                                             : timeline_literal(t, L_KERNEL, "kernel");
        complete(t, SH_X_KERNEL, ti, e, cat, timeline_jstr(t, STR_NAME, e->name, "kernel"),
                 timeline_jstr(t, STR_NAME, e->type, ""), 2);
        return;
    }
    case TS_KIND_MEMCPY:
    case TS_KIND_MEMSET: {
        int cp = e->kind == TS_KIND_MEMCPY;
        uint32_t ti = dev ? device_track(t, e->device, e->tid) : host_track(t, e->tid);
        complete(t, SH_X_COPY, ti, e,
                 cp ? timeline_literal(t, L_MEMCPY, "memcpy")
                    : timeline_literal(t, L_MEMSET, "memset"),
                 timeline_jstr(t, STR_NAME, e->name, cp ? "memcpy" : "memset"),
                 timeline_jstr(t, STR_NAME, e->type, ""), 0);
        return;
    }
    case TS_KIND_SYNC: {
        uint32_t ti = dev ? device_track(t, e->device, e->tid) : host_track(t, e->tid);
        complete(t, SH_X0, ti, e, timeline_literal(t, L_SYNC, "sync"),
                 timeline_jstr(t, STR_NAME, e->name, "synchronize"), 0, 0);
        return;
    }
    case TS_KIND_MARK:
    case TS_KIND_NVTX_MARK:
        instant(t, SH_I, host_track(t, e->tid), e, timeline_literal(t, L_MARK, "mark"),
                timeline_jstr(t, STR_NAME, e->name, "mark"), NULL);
        return;
    case TS_KIND_PHASE:
        instant(t, SH_I, host_track(t, e->tid), e, timeline_literal(t, L_PHASE, "phase"),
                e->aux == TS_PHASE_FORWARD_START  ? timeline_literal(t, L_FWD, "forward start")
                : e->aux == TS_PHASE_BACKWARD_END ? timeline_literal(t, L_BWD, "backward end")
                                                  : timeline_literal(t, L_PHASE, "phase"),
                NULL);
        return;
    case TS_KIND_LOST:
    case TS_KIND_COLLECT_START:
    case TS_KIND_COLLECT_STOP: {
        char text[96];
        if (e->kind == TS_KIND_LOST)
            snprintf(text, sizeof text, "lost %" PRIu64 " events", e->v0);
        else
            snprintf(text, sizeof text, "collection window %" PRIu64 " %s", e->v0,
                     e->kind == TS_KIND_COLLECT_START ? "starts" : "stops");
        instant(t, SH_IG, host_track(t, e->tid), e, timeline_literal(t, L_LOST, "profiler"), 0,
                text);
        return;
    }
    case TS_KIND_QUEUE_SAMPLE: {
        char v[24];
        snprintf(v, sizeof v, "%" PRIu64, e->v0);
        counter(t, SH_C_SIZE, counter_track(t, 0), timeline_jstr(t, STR_QUEUE, e->name, "queue"),
                e->begin_ns, v, NULL, NULL);
        return;
    }
    case TS_KIND_COUNTER: {
        char v[40];
        if (e->flags & TS_EF_DOUBLE) {
            double d;
            memcpy(&d, &e->v0, sizeof d);
            if (d != d || d > 1e300 || d < -1e300)
                return;
            snprintf(v, sizeof v, "%.17g", d);
        } else {
            snprintf(v, sizeof v, "%" PRIu64, e->v0);
        }
        counter(t, SH_C1, counter_track(t, 0), timeline_jstr(t, STR_NAME, e->name, "counter"),
                e->begin_ns, v, NULL, NULL);
        return;
    }
    case TS_KIND_THREAD_NAME:
        t->names_gen++;
        return;
    default:
        return; /* drawn from the analysis rows (steps, memory, CPU) or not drawn */
    }
}

void timeline_feed(timeline *t, const ts_event *ev, size_t n)
{
    for (size_t i = 0; i < n; i++)
        one(t, &ev[i]);
}

/* ---- Rows ------------------------------------------------------------------------------- */

static uint32_t fixed_track(timeline *t, uint32_t kind, const char *label)
{
    uint32_t p = timeline_proc_get(t, kind, 0);
    return timeline_track_new(t, p, 0, label, 0, 0);
}

void timeline_step(timeline *t, const step_row *row)
{
    if (row->end_ns < row->begin_ns)
        return;
    if (t->steps_track == NO_TRACK) {
        t->steps_track = fixed_track(t, PROC_STEPS, "Steps");
        static const char *const rows[4] = {"Merged Computation", "Merged Communication",
                                            "Pure Communication", "Free Time"};
        for (int i = 0; i < 4; i++)
            t->overlap_track[i] = fixed_track(t, PROC_OVERLAP, rows[i]);
        if (t->steps_track == NO_TRACK)
            return;
    }
    step_spans_add(&t->spans, &t->nspans, &t->cap_spans,
                   (step_span){row->step, rel(t, row->begin_ns), rel(t, row->end_ns)});
    char name[48];
    snprintf(name, sizeof name, "step %" PRIu64, row->step);
    uint32_t ti = timeline_place(t, t->steps_track, row->begin_ns, row->end_ns);
    if (ti != NO_TRACK) {
        span_arg s = {0,   timeline_literal(t, L_STEP, "step"), row->begin_ns, row->end_ns, row, 0,
                      name};
        emit(t, SH_X_STEP, ti, fill_span, &s);
    }
    /* The overlap rows: each step's merged time, drawn from the step's start (the step rows
     * carry the totals, not the intervals). */
    const uint64_t amount[4] = {row->overlap_compute_ns, row->comm_ns, row->pure_comm_ns,
                                row->free_ns};
    static const char *const label[4] = {"computation", "communication", "pure communication",
                                         "free"};
    uint64_t total = row->end_ns - row->begin_ns;
    for (int i = 0; i < 4; i++) {
        if (!amount[i] || t->overlap_track[i] == NO_TRACK)
            continue;
        uint64_t e = row->begin_ns + (amount[i] < total ? amount[i] : total);
        uint32_t at = timeline_place(t, t->overlap_track[i], row->begin_ns, e);
        if (at == NO_TRACK)
            continue;
        span_arg s = {timeline_literal(t, L_DYNAMIC + (uint32_t)i, label[i]),
                      timeline_literal(t, L_OVERLAP, "overlap"),
                      row->begin_ns,
                      e,
                      row,
                      total ? 100.0 * (double)amount[i] / (double)total : 0,
                      NULL};
        emit(t, SH_X_SHARE, at, fill_span, &s);
    }
}

void timeline_memory(timeline *t, const memory_row *row)
{
    char v[24];
    snprintf(v, sizeof v, "%" PRIu64, row->bytes);
    if (row->device == TS_DEVICE_HOST)
        counter(t, SH_C_BYTES, counter_track(t, 0),
                timeline_literal(t, L_HOST_MEMORY, "host memory"), row->t_ns, v, NULL, NULL);
    else
        counter(t, SH_C_BYTES, counter_track(t, timeline_proc_get(t, PROC_DEVICE, row->device)),
                timeline_literal(t, L_DEVICE_MEMORY, "device memory"), row->t_ns, v, NULL, NULL);
}

void timeline_cpu(timeline *t, const cpu_row *row)
{
    char u[24], s[24], w[24];
    double m[3] = {row->machine[TS_CPU_USER] + row->machine[TS_CPU_NICE],
                   row->machine[TS_CPU_SYSTEM] + row->machine[TS_CPU_IRQ] +
                       row->machine[TS_CPU_SOFTIRQ],
                   row->machine[TS_CPU_IOWAIT]};
    char *out[3] = {u, s, w};
    for (int i = 0; i < 3; i++) {
        double v = m[i] == m[i] ? m[i] : 0;
        fmt_fixed(out[i], (int64_t)(v * 100 + 0.5), 2);
    }
    uint32_t ti = counter_track(t, 0);
    counter(t, SH_C_CPU, ti, timeline_literal(t, L_CPU, "machine cpu"), row->end_ns, u, s, w);
    fmt_fixed(u, (int64_t)(row->process_user * 100 + 0.5), 2);
    fmt_fixed(s, (int64_t)(row->process_system * 100 + 0.5), 2);
    counter(t, SH_C_PROC, ti, timeline_literal(t, L_PROC_CPU, "process cpu"), row->end_ns, u, s,
            NULL);
}

/* ---- Life cycle --------------------------------------------------------------------------- */

/* A zeroed table of which a run touches few pages (the flows, the templates): mapped, so that
 * only those pages are ever zeroed, rather than allocated and cleared whole for every timeline
 * (a job analyses a thousand ranks in one process). NULL when out of memory. */
static void *table_map(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void table_unmap(void *p, size_t bytes)
{
    if (p)
        munmap(p, bytes);
}

timeline *timeline_create(const timeline_config *cfg, analysis *a)
{
    timeline *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->cfg = *cfg;
    if (!t->cfg.split_bytes)
        t->cfg.split_bytes = TIMELINE_SPLIT_DEFAULT;
    if (!t->cfg.hold_max)
        t->cfg.hold_max = TIMELINE_HOLD_MAX;
    if (!t->cfg.marks_max)
        t->cfg.marks_max = TIMELINE_MARKS_MAX;
    t->a = a;
    t->fd = -1;
    t->steps_track = NO_TRACK;
    t->procname = strdup(cfg->process && *cfg->process ? cfg->process : "host");
    t->buf = malloc(BUF_SIZE);
    t->flows = table_map(FLOW_SLOTS * sizeof *t->flows);
    t->tmpl = table_map(TMPL_SLOTS * sizeof *t->tmpl);
    t->tmpl_used = malloc(TMPL_SLOTS * sizeof *t->tmpl_used);
    t->scratch = malloc(TMPL_MAX);
    if (!t->procname || !t->buf || !t->flows || !t->tmpl || !t->tmpl_used || !t->scratch ||
        timeline_shapes_build(t) < 0 || index_map_init(&t->strings, 1024) < 0 ||
        index_map_init(&t->optype, 256) < 0 || index_map_init(&t->proc_of, 16) < 0 ||
        index_map_init(&t->track_of, 64) < 0 || timeline_arena_add(t, NULL, "", 0) != 0) {
        timeline_destroy(t);
        return NULL;
    }
    t->procname[strcspn(t->procname, "\n")] = 0;
    timeline_proc_get(t, PROC_HOST, 0); /* pid 1 */
    return t;
}

void timeline_set_limit(timeline *t, uint64_t limit_bytes)
{
    t->cfg.limit_bytes = limit_bytes;
}

int timeline_finish(timeline *t, char **cause)
{
    if (!t->open && !t->error)
        file_open(t); /* an empty timeline is still a valid file */
    if (t->holding)
        flush_buf(t); /* which may spill it to its file */
    if (t->holding) {
        /* Kept in memory for the cut: completed there, no file written. */
        t->total += sizeof FILE_TAIL - 1;
        t->open = 0;
    } else {
        file_close(t);
    }
    t->st.bytes = t->total;
    if (!t->error && t->cfg.keep && !t->cfg.pretty && timeline_keep_finish(t, cause) < 0)
        return -1;
    if (t->error) {
        char name[64];
        timeline_file_name(t->file, name, sizeof name);
        return cause_set(cause, "cannot write %s: %s", name, strerror(t->error));
    }
    return 0;
}

void timeline_stats_of(const timeline *t, timeline_stats *out)
{
    *out = t->st;
    out->bytes = t->total;
    out->limit_bytes = t->cfg.limit_bytes;
}

void timeline_destroy(timeline *t)
{
    if (!t)
        return;
    if (t->open) {
        close(t->fd);
        char name[80];
        tmp_name(t->file, name, sizeof name);
        unlinkat(t->cfg.dirfd, name, 0);
    }
    for (int i = 0; i < SH_COUNT; i++)
        cJSON_Delete(t->shapes[i].root);
    for (uint32_t i = 0; i < t->ntracks; i++)
        free(t->tracks[i].roots);
    free(t->tracks);
    free(t->spans);
    free(t->held);
    free(t->marks);
    free(t->procs);
    index_map_free(&t->strings);
    index_map_free(&t->optype);
    index_map_free(&t->proc_of);
    index_map_free(&t->track_of);
    free(t->arena);
    table_unmap(t->flows, FLOW_SLOTS * sizeof *t->flows);
    for (uint32_t i = 0; t->tmpl && i < t->ntmpl_used; i++)
        free(t->tmpl[t->tmpl_used[i]].text);
    table_unmap(t->tmpl, TMPL_SLOTS * sizeof *t->tmpl);
    free(t->tmpl_used);
    free(t->scratch);
    free(t->buf);
    free(t->procname);
    free(t);
}
