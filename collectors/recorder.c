/* recorder: drains the lanes into the recording, on the session's background thread (loop.c).
 *
 * That thread alone touches the recording's descriptors: it opens the file (a start command),
 * writes every chunk, syncs and closes it. It runs in a descriptor table of its own
 * (util_private_fds), so a program that closes every inherited descriptor, or opens its own files
 * under the same numbers, never has its files written into. Where the system refuses a private
 * table, the writer checks before every write that its descriptor still names its file
 * (recording.c).
 *
 * Other threads never write: what the collector itself emits
 * (markers, metadata, samples, device records) goes into its own lane, or when that is full into
 * an overflow list that the next drain writes, in order.
 *
 * One consumer at a time (the drain lock). Order within a drain: peek every lane (acquire on
 * head), then write the names published since the last drain (a producer interns a name before
 * it pushes an event that uses it, so every id in the peeked events is among them), then the
 * events, then release the lanes. */
#include "collectors.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define OVERFLOW_MAX (1u << 18) /* events of the collector's own kept past its lane: 16 MiB */

void session_record_failed(termsight_session *s, int err, const char *why)
{
    if (!atomic_load_explicit(&s->record_error, memory_order_relaxed)) {
        /* Said once: the training goes on, unrecorded from here. */
        fprintf(stderr, "termsight: recording stopped: %s\n", why);
        size_t n = strnlen(why, sizeof s->record_notice - 1);
        memcpy(s->record_notice, why, n);
        s->record_notice[n] = 0;
        atomic_store_explicit(&s->record_error, err ? (uint32_t)err : EIO, memory_order_release);
        ts_segment_header *h = segment_header(s->seg);
        memcpy(h->record_notice, s->record_notice, n + 1);
        atomic_store_explicit(&h->record_error, s->record_error, memory_order_release);
    }
}

/* Recording failed (disk full, I/O error): say so once, keep draining so that producers never
 * block, count what is thrown away. */
static void record_failed(termsight_session *s, const char *why)
{
    session_record_failed(s, errno, why);
    if (s->writer) {
        recording_writer_close(s->writer, NULL);
        s->writer = NULL;
    }
}

static void write_strings(termsight_session *s)
{
    uint32_t count = strtab_count(s->names);
    enum { BATCH = 256 };
    const char *bytes[BATCH];
    uint32_t lens[BATCH];
    while (s->writer && s->strings_recorded < count) {
        uint32_t first = s->strings_recorded, n = 0;
        while (n < BATCH && first + n < count) {
            uint32_t len = 0;
            const char *b = strtab_name(s->names, first + n, &len);
            bytes[n] = b ? b : "";
            lens[n] = b ? len : 0;
            n++;
        }
        char *why = NULL;
        if (recording_append_strings(s->writer, first, n, bytes, lens, &why) != 0) {
            record_failed(s, why ? why : "cannot write names");
            free(why);
            return;
        }
        s->strings_recorded = first + n;
        atomic_store_explicit(&segment_header(s->seg)->strings_recorded, s->strings_recorded,
                              memory_order_relaxed);
    }
}

static void count_recorded(termsight_session *s, uint64_t n)
{
    ts_segment_header *h = segment_header(s->seg);
    uint64_t total = atomic_fetch_add_explicit(&s->events_recorded, n, memory_order_relaxed) + n;
    atomic_store_explicit(&h->events_recorded, total, memory_order_relaxed);
    if (s->writer)
        atomic_store_explicit(&h->bytes_recorded, recording_bytes(s->writer), memory_order_relaxed);
}

static void write_events(termsight_session *s, const ts_event *a, size_t na, const ts_event *b,
                         size_t nb)
{
    if (!s->writer) {
        s->write_drops += na + nb;
        return;
    }
    char *why = NULL;
    uint64_t before = recording_events(s->writer);
    if (recording_append_events(s->writer, a, na, b, nb, &why) != 0) {
        /* The chunks written whole before the failure are in the file: recorded, not lost. */
        uint64_t written = recording_events(s->writer) - before;
        count_recorded(s, written);
        s->write_drops += na + nb - written;
        record_failed(s, why ? why : "cannot write events");
        free(why);
        return;
    }
    count_recorded(s, na + nb);
}

/* Keeps ev for the next drain. Returns 0 when the overflow is full (the event is then lost and
 * counted). */
static int overflow_push(termsight_session *s, const ts_event *ev)
{
    if (s->overflow_n == s->overflow_cap) {
        size_t cap = s->overflow_cap ? s->overflow_cap * 2 : 1024;
        ts_event *o = cap <= OVERFLOW_MAX ? realloc(s->overflow, cap * sizeof *o) : NULL;
        if (!o) {
            s->overflow_lost++;
            return 0;
        }
        s->overflow = o;
        s->overflow_cap = cap;
    }
    s->overflow[s->overflow_n++] = *ev;
    return 1;
}

/* The collector's own events (window markers, options, names, samples, device records, loss
 * notices) go through its own lane like any thread's: written in order with the rest, and seen by
 * a monitor observing the lanes. Once something waits in the overflow, later events queue behind
 * it, so the order holds. Returns 0 when ev was lost. */
static int append(termsight_session *s, const ts_event *ev)
{
    if (!s->overflow_n && lane_push(&s->own, ev))
        return 1;
    return overflow_push(s, ev);
}

void recorder_append_locked(termsight_session *s, const ts_event *ev, size_t n)
{
    for (size_t i = 0; i < n; i++)
        append(s, &ev[i]);
}

static size_t drain_locked(termsight_session *s);

void recorder_commit_locked(termsight_session *s)
{
    drain_locked(s);
}

/* Returns 0 when the notice could not be kept: the caller keeps the count pending for the next
 * drain, so no loss goes unreported. */
static int lost_notice(termsight_session *s, uint32_t tid, uint64_t count, uint32_t reason)
{
    uint64_t now = tsclock_now(&ts_clock);
    ts_event ev = {.kind = TS_KIND_LOST,
                   .tid = tid,
                   .device = TS_DEVICE_HOST,
                   .aux = reason,
                   .begin_ns = now,
                   .end_ns = now,
                   .v0 = count};
    return append(s, &ev);
}

size_t recorder_drain(termsight_session *s)
{
    pthread_mutex_lock(&s->drain);
    size_t n = drain_locked(s);
    pthread_mutex_unlock(&s->drain);
    return n;
}

static size_t drain_locked(termsight_session *s)
{
    uint32_t used = segment_lanes_used(s->seg);
    lane_run *runs = s->runs;
    size_t total = 0;
    for (uint32_t i = 0; i < used; i++) {
        runs[i].na = runs[i].nb = 0;
        total += lane_peek(s->seg, i, &runs[i].a, &runs[i].na, &runs[i].b, &runs[i].nb);
    }
    /* A window a training thread opened (window.c) waits for its start marker: its events stay
     * in the lanes until the loop has written it. The thread published the request before the
     * events, so a peek that saw one of them sees the request. */
    if (window_opening(s))
        return 0;
    /* The overflow is newer than the collector's lane as peeked: it goes right after it. Events
     * appended to it during this drain (loss notices) wait for the next one. */
    size_t overflow_n = s->overflow_n;
    total += overflow_n;
    write_strings(s);
    uint64_t drops = 0;
    size_t notices = 0;
    for (uint32_t i = 0; i < used; i++) {
        ts_lane *l = segment_lane_ctl(s->seg, i);
        if (runs[i].na + runs[i].nb) {
            write_events(s, runs[i].a, runs[i].na, runs[i].b, runs[i].nb);
            lane_consume(s->seg, i, runs[i].na + runs[i].nb);
        }
        if (l == s->own.lane) {
            /* The collector's own lane loses nothing to a full ring (the overflow takes it). */
            if (overflow_n) {
                write_events(s, s->overflow, overflow_n, NULL, 0);
                memmove(s->overflow, s->overflow + overflow_n,
                        (s->overflow_n - overflow_n) * sizeof *s->overflow);
                s->overflow_n -= overflow_n;
            }
            continue;
        }
        uint64_t d = atomic_load_explicit(&l->drops, memory_order_relaxed);
        if (d != s->lane_drops_seen[i] &&
            lost_notice(s, atomic_load_explicit(&l->tid, memory_order_relaxed),
                        d - s->lane_drops_seen[i], TS_LOST_LANE_FULL)) {
            s->lane_drops_seen[i] = d;
            notices++;
        }
        drops += d;
        lane_reclaim(s->seg, i);
    }
    uint64_t nl = atomic_load_explicit(&s->no_lane_drops, memory_order_relaxed);
    if (nl != s->no_lane_drops_seen &&
        lost_notice(s, 0, nl - s->no_lane_drops_seen, TS_LOST_NO_LANE)) {
        s->no_lane_drops_seen = nl;
        notices++;
    }
    if (s->overflow_lost != s->overflow_lost_seen &&
        lost_notice(s, (uint32_t)getpid(), s->overflow_lost - s->overflow_lost_seen,
                    TS_LOST_LANE_FULL)) {
        s->overflow_lost_seen = s->overflow_lost;
        notices++;
    }
    uint64_t all = drops + nl + s->write_drops + s->overflow_lost;
    atomic_store_explicit(&s->drops, all, memory_order_relaxed);
    atomic_store_explicit(&segment_header(s->seg)->drops, all, memory_order_relaxed);
    atomic_store_explicit(&segment_header(s->seg)->write_drops, s->write_drops,
                          memory_order_relaxed);
    return total + notices;
}

int recorder_init(termsight_session *s)
{
    uint32_t lanes = segment_geometry_of(s->seg)->lane_count;
    s->lane_drops_seen = calloc(lanes, sizeof *s->lane_drops_seen);
    s->runs = calloc(lanes, sizeof *s->runs);
    if (!s->lane_drops_seen || !s->runs || lane_claim(s->seg, (uint32_t)getpid(), &s->own) != 0)
        return -1;
    return 0;
}
