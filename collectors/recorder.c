/* recorder: the thread that drains the lanes into the recording and answers the mailbox.
 *
 * One consumer at a time (the drain lock): the recorder thread, or a control call (stop, flush)
 * that needs everything emitted before it on disk now. Order within a drain: peek every lane
 * (acquire on head), then write the names published since the last drain (a producer interns a
 * name before it pushes an event that uses it, so every id in the peeked events is among them),
 * then the events, then release the lanes. */
#include "collectors.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SCRATCH_EVENTS   1024
#define IDLE_SLEEP_NS    1000000L /* 1 ms between drains when lanes are quiet */
#define FILLING_SLEEP_NS 100000L  /* 0.1 ms when a drain found some events */

/* Recording failed (disk full, I/O error): say so in the header once, keep draining so that
 * producers never block, count what is thrown away. */
static void record_failed(termsight_session *s, const char *why)
{
    ts_segment_header *h = segment_header(s->seg);
    if (!atomic_load_explicit(&h->record_error, memory_order_relaxed)) {
        size_t n = strnlen(why, sizeof h->record_notice - 1);
        memcpy(h->record_notice, why, n);
        h->record_notice[n] = 0;
        atomic_store_explicit(&h->record_error, errno ? (uint32_t)errno : EIO,
                              memory_order_release);
    }
    if (s->writer) {
        recording_writer_close(s->writer, NULL);
        s->writer = NULL;
    }
}

static void write_strings(termsight_session *s)
{
    ts_segment_header *h = segment_header(s->seg);
    uint32_t count = atomic_load_explicit(&h->string_count, memory_order_acquire);
    enum { BATCH = 256 };
    const char *bytes[BATCH];
    uint32_t lens[BATCH];
    while (s->writer && s->strings_recorded < count) {
        uint32_t first = s->strings_recorded, n = 0;
        while (n < BATCH && first + n < count) {
            uint32_t len = 0;
            const char *b = strtab_get(s->seg, first + n, &len);
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
    }
}

static void write_events(termsight_session *s, const ts_event *a, size_t na, const ts_event *b,
                         size_t nb)
{
    ts_segment_header *h = segment_header(s->seg);
    if (!s->writer) {
        s->write_drops += na + nb;
        return;
    }
    char *why = NULL;
    uint64_t before = recording_events(s->writer);
    if (recording_append_events(s->writer, a, na, b, nb, &why) != 0) {
        /* The chunks written whole before the failure are in the file: recorded, not lost. */
        uint64_t written = recording_events(s->writer) - before;
        atomic_fetch_add_explicit(&h->events_recorded, written, memory_order_relaxed);
        s->write_drops += na + nb - written;
        record_failed(s, why ? why : "cannot write events");
        free(why);
        return;
    }
    atomic_fetch_add_explicit(&h->events_recorded, na + nb, memory_order_relaxed);
    atomic_store_explicit(&h->bytes_recorded, recording_bytes(s->writer), memory_order_relaxed);
}

static size_t drain_locked(termsight_session *s);

/* The collector's own events (window markers, options, names, loss notices) go through its own
 * lane like any thread's: written in order with the rest, and seen by a monitor observing the
 * lanes. A full lane is drained on the spot (we hold the drain lock). */
void recorder_append_locked(termsight_session *s, const ts_event *ev, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!lane_push(&s->own, &ev[i])) {
            drain_locked(s);
            lane_push(&s->own, &ev[i]);
        }
    }
}

void recorder_commit_locked(termsight_session *s)
{
    drain_locked(s);
}

/* Inside a drain: pushed without draining again. Returns 0 when the collector's lane is full:
 * the caller keeps the count pending for the next drain, so no loss goes unreported (a storm on
 * more lanes than the collector's lane holds would otherwise lose its notices). */
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
    return lane_push(&s->own, &ev);
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
    ts_segment_header *h = segment_header(s->seg);
    uint32_t used = atomic_load_explicit(&h->lanes_used, memory_order_acquire);
    if (used > h->lane_count)
        used = h->lane_count;

    lane_run *runs = s->runs;
    size_t total = 0;
    for (uint32_t i = 0; i < used; i++) {
        runs[i].na = runs[i].nb = 0;
        total += lane_peek(s->seg, i, &runs[i].a, &runs[i].na, &runs[i].b, &runs[i].nb);
    }
    write_strings(s);
    uint64_t drops = 0;
    size_t notices = 0;
    for (uint32_t i = 0; i < used; i++) {
        if (runs[i].na + runs[i].nb) {
            write_events(s, runs[i].a, runs[i].na, runs[i].b, runs[i].nb);
            lane_consume(s->seg, i, runs[i].na + runs[i].nb);
        }
        ts_lane *l = segment_lane(s->seg, i);
        /* The collector's own lane loses nothing (a full one is drained, a notice that does
         * not fit waits for the next drain): its drops are no loss. */
        if (l == s->own.lane)
            continue;
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
    atomic_store_explicit(&h->drops, drops + nl + s->write_drops, memory_order_relaxed);
    return total + notices;
}

static void *recorder_main(void *arg)
{
    termsight_session *s = arg;
    ts_segment_header *h = segment_header(s->seg);
    uint64_t next_refine = tsclock_now(&ts_clock) + 1000000000ull, refine_gap = 1000000000ull;
    while (!atomic_load_explicit(&s->recorder_quit, memory_order_acquire)) {
        size_t n = recorder_drain(s);

        uint64_t seq;
        uint32_t cmd;
        char arg_text[TS_MAILBOX_ARG];
        if (mailbox_take(s->seg, &s->mailbox, &seq, &cmd, arg_text, sizeof arg_text)) {
            int rc = session_command(s, cmd, arg_text);
            mailbox_answer(s->seg, seq, rc, rc ? termsight_last_error() : "ok");
        }

        uint64_t now = tsclock_now(&ts_clock);
        atomic_store_explicit(&h->heartbeat_ns, now, memory_order_relaxed);
        if (now >= next_refine) {
            /* Longer windows give a better rate: 1 s, 4 s, 16 s ... then every 17 minutes. */
            tsclock_refine(&ts_clock);
            if (refine_gap < 1024000000000ull)
                refine_gap *= 4;
            next_refine = now + refine_gap;
        }
        /* Busy lanes are drained again at once, filling ones soon, quiet ones after a
         * millisecond: a burst finds the recorder awake without a trickle keeping it spinning. */
        if (n < h->lane_events / 8) {
            struct timespec ts = {0, n ? FILLING_SLEEP_NS : IDLE_SLEEP_NS};
            nanosleep(&ts, NULL);
        }
    }
    recorder_drain(s);
    return NULL;
}

int recorder_start(termsight_session *s)
{
    uint32_t lanes = segment_header(s->seg)->lane_count;
    s->lane_drops_seen = calloc(lanes, sizeof *s->lane_drops_seen);
    s->runs = calloc(lanes, sizeof *s->runs);
    if (!s->lane_drops_seen || !s->runs || lane_claim(s->seg, (uint32_t)getpid(), &s->own) != 0)
        return -1;
    atomic_store(&s->recorder_quit, 0);
    if (pthread_create(&s->recorder, NULL, recorder_main, s) != 0)
        return -1;
    pthread_setname_np(s->recorder, "termsight-rec");
    s->recorder_running = 1;
    return 0;
}

void recorder_stop(termsight_session *s)
{
    if (!s->recorder_running)
        return;
    atomic_store_explicit(&s->recorder_quit, 1, memory_order_release);
    pthread_join(s->recorder, NULL);
    s->recorder_running = 0;
}
