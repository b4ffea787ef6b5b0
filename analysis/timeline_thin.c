/* timeline_thin: a timeline cut down to a size by steps (timeline.h), for a lean rank report
 * that keeps its share of the job's timeline rather than the beginning of its run.
 *
 * The writer holds such a timeline in memory (up to hold_max, then in its files) and notes where
 * each event line begins, with its kind and ts (a mark). At the end the cut is two passes over
 * the marks through timeline_pick (weigh, then take), and the events kept are copied in their
 * order into one timeline.json: no text is read back. Without marks (more events than
 * marks_max) the cut reads the files' lines instead. What is cut is counted as left out. */
#include "timeline_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define FRAME_BYTES (sizeof FILE_HEAD - 1 + sizeof FILE_TAIL - 1)
#define TAIL_BYTES  (sizeof FILE_TAIL - 1)

/* ---- Holding and marking (called by the writer, timeline.c) -------------------------------- */

/* The held text as the file it stands for: opened, written. 0, or -1 (t->error set). */
static int spill(timeline *t)
{
    if (timeline_file_fd(t) < 0)
        return -1;
    t->holding = 0;
    t->spilled = 1;
    int rc = timeline_write_all(t, t->held, t->held_len);
    free(t->held);
    t->held = NULL;
    t->held_len = t->held_cap = 0;
    return rc;
}

int timeline_hold(timeline *t)
{
    if (!t->holding)
        return 1;
    if (t->held_len + t->len > t->cfg.hold_max)
        return spill(t) < 0 ? 0 : 1;
    if (t->held_len + t->len > t->held_cap) {
        size_t want = t->held_cap ? t->held_cap : BUF_SIZE;
        while (want < t->held_len + t->len)
            want *= 2;
        char *p = realloc(t->held, want);
        if (!p)
            return spill(t) < 0 ? 0 : 1;
        t->held = p;
        t->held_cap = want;
    }
    memcpy(t->held + t->held_len, t->buf, t->len);
    t->held_len += t->len;
    return 0;
}

int timeline_unhold(timeline *t)
{
    return t->holding ? spill(t) : 0;
}

static void lose_marks(timeline *t)
{
    free(t->marks);
    t->marks = NULL;
    t->nmarks = t->cap_marks = 0;
    t->marks_lost = 1;
    /* The cut then reads the text: it must be in the files. */
    timeline_unhold(t);
}

void timeline_mark(timeline *t, uint64_t offset, enum pick_kind k, int64_t ts)
{
    if (t->marks_lost)
        return;
    if (t->nmarks == t->cap_marks) {
        size_t want = t->cap_marks ? 2 * t->cap_marks : 4096;
        if (want > t->cfg.marks_max)
            want = t->cfg.marks_max;
        tl_mark *m = want > t->nmarks ? realloc(t->marks, want * sizeof *m) : NULL;
        if (!m) {
            lose_marks(t);
            return;
        }
        t->marks = m;
        t->cap_marks = want;
    }
    t->marks[t->nmarks++] =
        (tl_mark){.at = (uint64_t)t->file << MARK_OFF_BITS | offset, .ts = ts, .kind = (uint8_t)k};
}

/* ---- The output ---------------------------------------------------------------------------- */

typedef struct thin {
    timeline_pick *pick;
    FILE *out;
    int first;
    uint64_t bytes, events, cut;
} thin;

static void put(thin *th, const char *ev, size_t len)
{
    fputs(th->first ? "\n" : ",\n", th->out);
    fwrite(ev, 1, len, th->out);
    th->bytes += len + (th->first ? 1 : 2);
    th->first = 0;
    th->events++;
}

static const char THIN_TMP[] = ".timeline-thin.tmp";

static int out_open(timeline *t, thin *th, char **cause)
{
    int fd =
        openat(t->cfg.dirfd, THIN_TMP, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    th->out = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!th->out) {
        if (fd >= 0)
            close(fd);
        return cause_set(cause, "cannot write %s: %s", THIN_TMP, strerror(errno));
    }
    fputs(FILE_HEAD, th->out);
    th->first = 1;
    return 0;
}

/* The kept events become timeline.json, the only file; the stats say what it holds. */
static int out_close(timeline *t, thin *th, uint64_t keep_bytes, char **cause)
{
    fputs(FILE_TAIL, th->out);
    int werr = ferror(th->out);
    if (fclose(th->out) != 0 || werr ||
        renameat(t->cfg.dirfd, THIN_TMP, t->cfg.dirfd, "timeline.json") < 0) {
        cause_set(cause, "cannot thin the timeline: %s", strerror(errno ? errno : EIO));
        unlinkat(t->cfg.dirfd, THIN_TMP, 0);
        return -1;
    }
    for (uint32_t k = 1; t->spilled && k < t->st.files; k++) {
        char name[64];
        timeline_file_name(k, name, sizeof name);
        unlinkat(t->cfg.dirfd, name, 0);
    }
    t->st.files = 1;
    t->st.events = th->events;
    t->st.left_out += th->cut;
    t->st.bytes = t->total = th->bytes + FRAME_BYTES;
    t->cfg.limit_bytes = keep_bytes;
    return 0;
}

/* The finished files, mapped: read twice (weigh, then take) without copying them. */
typedef struct mapped {
    char *p;
    size_t len, end; /* end: where its events end (a file's tail follows them) */
} mapped;

static void unmap_all(mapped *m, uint32_t n)
{
    for (uint32_t k = 0; m && k < n; k++)
        if (m[k].p)
            munmap(m[k].p, m[k].len);
    free(m);
}

static mapped *map_all(timeline *t)
{
    mapped *m = calloc(t->st.files + 1, sizeof *m);
    for (uint32_t k = 0; m && k < t->st.files; k++) {
        char name[64];
        timeline_file_name(k, name, sizeof name);
        int fd = openat(t->cfg.dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0) {
            if (fd >= 0)
                close(fd);
            unmap_all(m, k);
            return NULL;
        }
        if (st.st_size > 0) {
            void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
            if (p == MAP_FAILED) {
                close(fd);
                unmap_all(m, k);
                return NULL;
            }
            m[k].p = p;
            m[k].len = (size_t)st.st_size;
            m[k].end = m[k].len >= TAIL_BYTES ? m[k].len - TAIL_BYTES : 0;
        }
        close(fd);
    }
    return m;
}

/* ---- The cut by marks ---------------------------------------------------------------------- */

/* Mark i's text (its separator left out) in src, the text of its file (end: where the file's
 * events end). */
static const char *mark_text(const timeline *t, size_t i, const mapped *src, size_t *len)
{
    const tl_mark *m = &t->marks[i];
    uint64_t file = m->at >> MARK_OFF_BITS, off = m->at & ((1ull << MARK_OFF_BITS) - 1);
    const mapped *f = &src[file];
    uint64_t end = f->end;
    if (i + 1 < t->nmarks && t->marks[i + 1].at >> MARK_OFF_BITS == file)
        end = t->marks[i + 1].at & ((1ull << MARK_OFF_BITS) - 1);
    if (off >= end || end > f->end) {
        *len = 0;
        return NULL;
    }
    const char *p = f->p + off;
    size_t sep = *p == ',' ? 2 : 1; /* ",\n" or "\n" */
    *len = end - off > sep ? end - off - sep : 0;
    return p + sep;
}

static int cut_by_marks(timeline *t, thin *th, const mapped *src, uint64_t keep_bytes, char **cause)
{
    for (size_t i = 0; i < t->nmarks; i++) {
        size_t len;
        if (mark_text(t, i, src, &len))
            timeline_pick_weigh_at(th->pick, t->marks[i].kind, t->marks[i].ts, len + 2);
    }
    timeline_pick_plan(th->pick, keep_bytes > FRAME_BYTES ? keep_bytes - FRAME_BYTES : 0);
    if (out_open(t, th, cause) < 0)
        return -1;
    for (size_t i = 0; i < t->nmarks; i++) {
        size_t len;
        const char *ev = mark_text(t, i, src, &len);
        if (!ev)
            continue;
        if (timeline_pick_take_at(th->pick, t->marks[i].kind, t->marks[i].ts, len + 2)) {
            put(th, ev, len);
            /* A metadata mark may be two lines (a process's name, then its thread's). */
            for (const char *nl = ev;
                 t->marks[i].kind == PICK_META && (nl = memchr(nl, '\n', len - (size_t)(nl - ev)));
                 nl++)
                th->events++;
        } else
            th->cut++;
    }
    return out_close(t, th, keep_bytes, cause);
}

/* ---- The cut by lines ---------------------------------------------------------------------- */

/* Every event line of the mapped files: weighed, or taken (put) or cut. */
static void each_line(const mapped *m, uint32_t files, thin *th, int weighing)
{
    for (uint32_t k = 0; k < files; k++) {
        const char *p = m[k].p, *end = p + m[k].len;
        while (p && p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            const char *stop = nl ? nl + 1 : end;
            size_t len = timeline_event_text(p, (size_t)(stop - p));
            if (len && weighing)
                timeline_pick_weigh(th->pick, p, len, 0);
            else if (len && timeline_pick_take(th->pick, p, len, 0))
                put(th, p, len);
            else if (len)
                th->cut++;
            p = stop;
        }
    }
}

static int cut_by_lines(timeline *t, thin *th, const mapped *m, uint64_t keep_bytes, char **cause)
{
    each_line(m, t->st.files, th, 1);
    timeline_pick_plan(th->pick, keep_bytes > FRAME_BYTES ? keep_bytes - FRAME_BYTES : 0);
    if (out_open(t, th, cause) < 0)
        return -1;
    each_line(m, t->st.files, th, 0);
    return out_close(t, th, keep_bytes, cause);
}

/* ---- The cut ------------------------------------------------------------------------------- */

/* A held timeline that fits as it is: written as its one file. */
static int write_held(timeline *t, char **cause)
{
    thin th = {0};
    if (out_open(t, &th, cause) < 0)
        return -1;
    size_t head = sizeof FILE_HEAD - 1;
    if (t->held_len > head)
        fwrite(t->held + head, 1, t->held_len - head, th.out);
    th.first = t->held_len <= head;
    th.bytes = t->held_len - head;
    th.events = t->st.events;
    return out_close(t, &th, t->cfg.limit_bytes, cause);
}

int timeline_keep_finish(timeline *t, char **cause)
{
    uint64_t keep_bytes = t->cfg.keep_bytes, first = t->cfg.keep_first,
             last = t->cfg.keep_last ? t->cfg.keep_last : UINT64_MAX;
    int windowed = first > 0 || last < UINT64_MAX;
    if (!windowed && t->total <= keep_bytes)
        return t->holding ? write_held(t, cause) : 0;
    thin th = {.pick = timeline_pick_create(t->spans, t->nspans, first, last)};
    if (!th.pick)
        return cause_set(cause, "out of memory");
    int rc = -1;
    uint32_t files = t->st.files;
    mapped held = {t->held, t->held_len, t->held_len}, *m = t->holding ? &held : map_all(t);
    if (!m)
        cause_set(cause, "cannot read the timeline to thin it: %s", strerror(errno));
    else if (!t->marks_lost)
        rc = cut_by_marks(t, &th, m, keep_bytes, cause);
    else
        rc = cut_by_lines(t, &th, m, keep_bytes, cause);
    if (m != &held)
        unmap_all(m, files);
    timeline_pick_free(th.pick);
    return rc;
}
