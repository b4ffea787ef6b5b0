/* salvage: what a collector that ended without closing its session left in its segment, copied
 * into its recording by another process once it is gone.
 *
 * A process that a signal ends (or that calls _exit) runs none of its code, so its recorder never
 * makes its last drain: the events its threads pushed since the previous one are in the lanes of
 * its segment, which outlives it until removed. The recorder keeps mirrors of its progress in the
 * segment (each lane's tail, the names written), so what is left is exactly tail..head of every
 * lane and the names after strings_recorded. Another process of the same user could have written
 * into the segment; everything read is clamped (one ring per lane, the string table's bounds), so
 * at worst some garbage is appended, never more than the segment holds. */
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NAME_BATCH 256

static uint32_t min_u32(uint32_t a, uint32_t b)
{
    return a < b ? a : b;
}

/* Names [from, to) of the segment, in batches. */
int recording_copy_names(const segment *seg, recording_writer *w, uint32_t from, uint32_t to,
                         char **cause)
{
    const char *bytes[NAME_BATCH];
    uint32_t lens[NAME_BATCH];
    while (from < to) {
        uint32_t n = min_u32(to - from, NAME_BATCH);
        for (uint32_t k = 0; k < n; k++) {
            uint32_t len = 0;
            const char *b = strtab_get(seg, from + k, &len);
            bytes[k] = b ? b : "";
            lens[k] = b ? len : 0;
        }
        if (recording_append_strings(w, from, n, bytes, lens, cause) != 0)
            return -1;
        from += n;
    }
    return 0;
}

int recording_salvage(const segment *seg, const char *dir, const char *why, uint64_t *events,
                      char **cause)
{
    *events = 0;
    ts_segment_header *h = segment_header(seg);
    uint32_t state = atomic_load_explicit(&h->state, memory_order_acquire);
    if (!atomic_load_explicit(&h->window, memory_order_relaxed) || state == TS_STATE_ENDED)
        return 0; /* never recorded, or closed its recording itself */

    recording_meta meta = {.major = TS_RECORDING_MAJOR, .minor = TS_RECORDING_MINOR, .pid = h->pid};
    snprintf(meta.process, sizeof meta.process, "%.*s", (int)sizeof h->process - 1, h->process);
    snprintf(meta.clock, sizeof meta.clock, "%.*s", (int)sizeof h->clock - 1, h->clock);
    meta.start_realtime_ns = h->start_realtime_ns;
    meta.start_ns = h->start_ns;
    gethostname(meta.host, sizeof meta.host - 1);
    /* The space the collector kept beside its recording for its last note (a full disk). */
    char reserve[4096];
    snprintf(reserve, sizeof reserve, "%s/%s", dir, TS_RECORDING_RESERVE);
    struct stat st;
    if (lstat(reserve, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid())
        unlink(reserve);
    recording_writer *w;
    if (recording_writer_open(dir, &meta, &w, cause) != 0)
        return -1;

    const segment_geometry *g = segment_geometry_of(seg);
    uint32_t count =
        min_u32(atomic_load_explicit(&h->string_count, memory_order_acquire), g->string_max);
    uint32_t done =
        min_u32(atomic_load_explicit(&h->strings_recorded, memory_order_relaxed), count);
    int rc = recording_copy_names(seg, w, done, count, cause);

    uint64_t last_ns = atomic_load_explicit(&h->heartbeat_ns, memory_order_relaxed);
    uint32_t used = segment_lanes_used(seg);
    for (uint32_t i = 0; rc == 0 && i < used; i++) {
        /* From the tail on, the old ring's part first when the lane had just grown. */
        const ts_lane *l = segment_lane(seg, i);
        uint64_t at = atomic_load_explicit(&l->tail, memory_order_relaxed);
        lane_run run;
        size_t n;
        for (int part = 0; rc == 0 && part < 2 && (n = lane_peek_at(seg, i, at, &run)); part++) {
            for (size_t k = 0; k < n; k++) {
                const ts_event *e = lane_run_at(&run, k);
                if (e->end_ns > last_ns && e->end_ns - last_ns < 3600000000000ull)
                    last_ns = e->end_ns; /* an hour past the heartbeat is damage, not a time */
            }
            rc = recording_append_events(w, run, cause);
            if (rc == 0)
                *events += n;
            at += n;
        }
    }

    /* The window's end and why it came so; when the recording had stopped early (a full disk),
     * why, and how many events were lost: names after the segment's, events that use them. */
    char notice[sizeof h->record_notice];
    snprintf(notice, sizeof notice, "%.*s", (int)sizeof notice - 1, h->record_notice);
    int failed = atomic_load_explicit(&h->record_error, memory_order_acquire) != 0;
    const char *text[4] = {"ended", why ? why : "without closing its session", "record_error",
                           notice};
    uint32_t lens[4];
    for (int k = 0; k < 4; k++)
        lens[k] = (uint32_t)strlen(text[k]);
    if (rc == 0)
        rc = recording_append_strings(w, count, failed ? 4 : 2, text, lens, cause);
    ts_event tail[4];
    size_t nt = 0;
    const ts_event base = {
        .tid = (uint32_t)h->pid, .device = TS_DEVICE_HOST, .begin_ns = last_ns, .end_ns = last_ns};
    if (state == TS_STATE_COLLECTING) { /* a window still open gets its stop */
        tail[nt] = base;
        tail[nt].kind = TS_KIND_COLLECT_STOP;
        tail[nt++].v0 = atomic_load_explicit(&h->window, memory_order_relaxed);
    }
    tail[nt] = base;
    tail[nt].kind = TS_KIND_CONFIG;
    tail[nt].name = count;
    tail[nt++].type = count + 1;
    if (failed) {
        tail[nt] = base;
        tail[nt].kind = TS_KIND_LOST;
        tail[nt].aux = TS_LOST_WRITE;
        tail[nt++].v0 = atomic_load_explicit(&h->write_drops, memory_order_relaxed);
        tail[nt] = base;
        tail[nt].kind = TS_KIND_CONFIG;
        tail[nt].name = count + 2;
        tail[nt++].type = count + 3;
    }
    if (rc == 0)
        rc = recording_append_events(w, lane_run_of(tail, nt), cause);
    if (rc == 0)
        rc = recording_sync(w, cause);
    if (recording_writer_close(w, rc == 0 ? cause : NULL) != 0)
        rc = -1;
    return rc;
}

int segment_reap(const segment_info *info, const char *why, const char *within,
                 ts_shm_budget *ledger, uint64_t *events, char **cause)
{
    *events = 0;
    char claimed[128];
    char *first = NULL;
    int c = segment_claim(info->shm_name, info->pid, claimed, sizeof claimed, &first);
    if (c <= 0) {
        int r = c ? cause_set(cause, "pid %d (%s): %s", (int)info->pid, info->shm_name,
                              first ? first : "cannot be reaped")
                  : 0;
        free(first);
        return r; /* 0: gone, or another reaper has it */
    }
    segment *seg;
    if (segment_attach_name(claimed, 0, &seg, NULL) == 0) {
        const ts_segment_header *h = segment_header(seg);
        char run[sizeof h->run_folder];
        size_t wl = within ? strlen(within) : 0;
        /* Where the collector meant, or nowhere: never its text read from here. */
        int known = segment_run_folder(seg, run, sizeof run, &first) == 0; /* first: why not */
        if (known && within &&
            (strlen(run) <= wl || strncmp(run, within, wl) != 0 || run[wl] != '/')) {
            cause_set(&first, "its run folder %s is not under %s: not written to", run, within);
        } else if (known && !(h->minor >= 2 && h->flight_mb)) { /* flight mode: no recording */
            char dir[sizeof run + 16];
            snprintf(dir, sizeof dir, "%s/" TS_RECORDING_DIR, run);
            recording_salvage(seg, dir, why, events, &first); /* first says why it failed */
        }
        /* What it held of the tree's ledger goes back: never more than the segment's size. */
        uint64_t held = atomic_load_explicit(&h->budget_charged, memory_order_relaxed);
        uint64_t most = segment_size(seg) + TS_SEGMENT_CTL_SIZE;
        if (ledger && h->budget_id == ledger->id)
            budget_give(ledger, held < most ? held : most);
        segment_close(seg, 0);
    }
    /* A damaged or foreign object at the name has nothing to recover: it goes all the same. */
    segment_remove_claimed(info->shm_name, claimed);
    if (first) {
        int r = cause_set(cause, "pid %d (%s): %s", (int)info->pid, info->shm_name, first);
        free(first);
        return r;
    }
    return 0;
}
