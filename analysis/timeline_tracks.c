/* timeline_tracks: the timeline's processes and tracks (timeline_internal.h): a process per kind
 * (the host, each device, the steps, the overlap rows), a track per thread or stream, the
 * overlap tracks a complete event goes to when it would cross another, and their labels. */
#include "timeline_internal.h"

#include <cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Tracks ------------------------------------------------------------------------------- */

uint32_t timeline_proc_get(timeline *t, uint32_t kind, uint32_t device)
{
    uint64_t key = (uint64_t)kind << 32 | device;
    uint32_t i = index_map_find(&t->proc_of, key);
    if (i != UINT32_MAX)
        return i;
    proc *np = realloc(t->procs, (t->nprocs + 1) * sizeof *np);
    if (!np)
        return 0; /* the host, created first */
    t->procs = np;
    i = t->nprocs;
    if (index_map_get(&t->proc_of, key, i, NULL) == UINT32_MAX)
        return 0;
    t->procs[i] = (proc){.pid = i + 1, .kind = kind, .device = device, .next_tid = 1};
    t->nprocs++;
    return i;
}

uint32_t timeline_track_new(timeline *t, uint32_t p, uint32_t os_tid, const char *label,
                            uint32_t level, uint32_t base)
{
    if (t->ntracks == t->cap_tracks) {
        uint32_t n = t->cap_tracks ? t->cap_tracks * 2 : 64;
        track *nt = realloc(t->tracks, n * sizeof *nt);
        if (!nt)
            return NO_TRACK;
        t->tracks = nt;
        t->cap_tracks = n;
    }
    uint32_t i = t->ntracks++;
    t->tracks[i] = (track){.proc = p,
                           .tid = t->procs[p].next_tid++,
                           .os_tid = os_tid,
                           .label = label,
                           .level = level,
                           .base = level ? base : i,
                           .overflow = NO_TRACK};
    return i;
}

/* The track of (proc, os tid), created on first use. */
uint32_t timeline_track_get(timeline *t, uint32_t p, uint32_t os_tid)
{
    uint64_t key = (uint64_t)p << 32 | os_tid;
    uint32_t i = index_map_find(&t->track_of, key);
    if (i != UINT32_MAX)
        return i;
    i = timeline_track_new(t, p, os_tid, NULL, 0, 0);
    if (i == NO_TRACK)
        return NO_TRACK;
    if (index_map_get(&t->track_of, key, i, NULL) == UINT32_MAX) {
        t->ntracks--;
        t->procs[p].next_tid--;
        return NO_TRACK;
    }
    return i;
}

/* The track a complete event [b, e] goes to: tr itself or one of its overlap tracks; NO_TRACK
 * when it overlaps on all of them (counted as dropped). */
uint32_t timeline_place(timeline *t, uint32_t ti, uint64_t b, uint64_t e)
{
    if (e < b)
        e = b;
    for (uint32_t level = 0; ti != NO_TRACK; level++) {
        int fit = timeline_nest_fit(&t->tracks[ti], b, e);
        if (fit > 0) {
            if (level)
                t->st.moved++;
            return ti;
        }
        if (fit < 0 || level == OVERLAP_LEVELS)
            break;
        if (t->tracks[ti].overflow == NO_TRACK) {
            track *tr = &t->tracks[ti];
            uint32_t n = timeline_track_new(t, tr->proc, tr->os_tid, NULL, level + 1, tr->base);
            if (n == NO_TRACK)
                break;
            t->tracks[ti].overflow = n; /* tracks may have moved */
        }
        ti = t->tracks[ti].overflow;
    }
    t->st.dropped++;
    return NO_TRACK;
}

void timeline_proc_label(timeline *t, const proc *p, char *buf, size_t len)
{
    switch (p->kind) {
    case PROC_HOST:
        if (t->cfg.os_pid)
            snprintf(buf, len, "%s (pid %" PRId32 ")", t->procname, t->cfg.os_pid);
        else
            snprintf(buf, len, "%s", t->procname);
        break;
    case PROC_DEVICE:
        snprintf(buf, len, "device %" PRIu32, p->device);
        break;
    case PROC_STEPS:
        snprintf(buf, len, "Steps");
        break;
    default:
        snprintf(buf, len, "Op Overlap Analyse");
        break;
    }
}

/* The name id a host track's thread goes by now (0: none). */
uint32_t timeline_thread_name_id(timeline *t, const track *tr)
{
    if (t->procs[tr->proc].kind != PROC_HOST || tr->counters)
        return 0;
    return analysis_thread_name(t->a, tr->os_tid);
}

/* The arena offset of a track's label as a JSON string. */
uint32_t timeline_track_label(timeline *t, const track *tr, uint32_t nid)
{
    const proc *p = &t->procs[tr->proc];
    uint32_t len = 0;
    const char *nm = nid ? analysis_raw_name(t->a, nid, &len) : NULL;
    char *text = malloc((nm ? len : 0) + 128);
    if (!text)
        return 0;
    size_t k = 0;
    if (tr->label) {
        k = (size_t)snprintf(text, 96, "%s", tr->label);
    } else if (nm && len) {
        memcpy(text, nm, len);
        k = len + (size_t)snprintf(text + len, 32, " (%" PRIu32 ")", tr->os_tid);
    } else if (p->kind == PROC_HOST && t->cfg.os_pid > 0 && tr->os_tid == (uint32_t)t->cfg.os_pid) {
        k = (size_t)snprintf(text, 48, "main thread (%" PRIu32 ")", tr->os_tid);
    } else {
        k = (size_t)snprintf(text, 48, "%s %" PRIu32, p->kind == PROC_DEVICE ? "stream" : "thread",
                             tr->os_tid);
    }
    if (tr->level)
        k += (size_t)snprintf(text + k, 48, " (overlapping %" PRIu32 ")", tr->level);
    uint32_t off = timeline_arena_add(t, NULL, text, k);
    free(text);
    return off == UINT32_MAX ? 0 : off;
}
