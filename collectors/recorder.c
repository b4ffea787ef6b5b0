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
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define OVERFLOW_MAX   (1u << 18)  /* events of the collector's own kept past its lane: 16 MiB */
#define GROW_SLICE_MIN (64u << 10) /* bytes of a growing ring had per drain, at the least */
#define CONSUME_STEP   4096u       /* events written before their lane is released: a chunk */
#define RATE_SPAN_NS   50000000ull /* a lane's offered rate is measured over 50 ms spans */
#define RATE_SPAN_MIN  50000ull    /* ... or over what there is of one, from 50 us on */

/* What the recorder follows of a lane to report its losses as LTTng-UST reports discarded
 * events: per thread and per window, with the rate its thread offered when they began. */
typedef struct lane_watch {
    uint64_t generation;            /* the claim followed; a new thread starts anew */
    uint32_t window;                /* the window followed */
    uint64_t window_drops;          /* the lane's drops when either began */
    uint64_t mark_ns, mark_offered; /* offered: events pushed and dropped, at the mark */
    uint64_t rate;                  /* events/s offered over the last whole span */
    int losing;                     /* lost events in this window already */
} lane_watch;

/* The recorder's state, under the session's drain lock. */
struct recorder {
    recording_writer *writer;
    int recording_fd; /* the recording folder, made at the first start; -1 before */
    uint32_t strings_recorded;
    uint64_t *lane_drops_seen; /* per lane, to write LOST notices for new drops */
    lane_watch *watch;         /* per lane */
    lane_run *runs;            /* per lane, this drain's runs */
    uint64_t no_lane_drops_seen;
    uint64_t last_drain_ns;
    uint64_t write_drops;
    uint64_t program_events; /* taken from the program's threads' lanes (a header mirror) */
    lane_writer own;         /* the collector's own lane: markers, options, names, notices */
    /* What did not fit the collector's own lane, in order, until the next drain writes it
     * (only the recorder thread writes, so other threads never wait for it). */
    ts_event *overflow;
    size_t overflow_n, overflow_cap;
    uint64_t overflow_lost, overflow_lost_seen;
    digest *dg; /* the boards' sums; NULL when they could not be made */
};

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
    if (s->rec->writer) {
        recording_writer_close(s->rec->writer, NULL);
        s->rec->writer = NULL;
    }
}

static void write_strings(termsight_session *s)
{
    uint32_t count = strtab_count(s->names);
    enum { BATCH = 256 };
    const char *bytes[BATCH];
    uint32_t lens[BATCH];
    while (s->rec->writer && s->rec->strings_recorded < count) {
        uint32_t first = s->rec->strings_recorded, n = 0;
        while (n < BATCH && first + n < count) {
            uint32_t len = 0;
            const char *b = strtab_name(s->names, first + n, &len);
            bytes[n] = b ? b : "";
            lens[n] = b ? len : 0;
            n++;
        }
        char *why = NULL;
        if (recording_append_strings(s->rec->writer, first, n, bytes, lens, &why) != 0) {
            record_failed(s, why ? why : "cannot write names");
            free(why);
            return;
        }
        s->rec->strings_recorded = first + n;
        atomic_store_explicit(&segment_header(s->seg)->strings_recorded, s->rec->strings_recorded,
                              memory_order_relaxed);
    }
}

static void count_recorded(termsight_session *s, uint64_t n)
{
    ts_segment_header *h = segment_header(s->seg);
    uint64_t total = atomic_fetch_add_explicit(&s->events_recorded, n, memory_order_relaxed) + n;
    atomic_store_explicit(&h->events_recorded, total, memory_order_relaxed);
    if (s->rec->writer)
        atomic_store_explicit(&h->bytes_recorded, recording_bytes(s->rec->writer),
                              memory_order_relaxed);
}

static void write_events(termsight_session *s, lane_run run)
{
    size_t n = lane_run_count(&run);
    if (s->flight) { /* flight mode: kept in memory, no recording (ls counts them) */
        flight_put(s->flight, run);
        count_recorded(s, n);
        return;
    }
    if (!s->rec->writer) {
        s->rec->write_drops += n;
        return;
    }
    char *why = NULL;
    uint64_t before = recording_events(s->rec->writer);
    if (recording_append_events(s->rec->writer, run, &why) != 0) {
        /* The chunks written whole before the failure are in the file: recorded, not lost. */
        uint64_t written = recording_events(s->rec->writer) - before;
        count_recorded(s, written);
        s->rec->write_drops += n - written;
        record_failed(s, why ? why : "cannot write events");
        free(why);
        return;
    }
    count_recorded(s, n);
}

/* Writes lane i's run and releases it a chunk at a time: its thread has room again as soon as a
 * chunk is in the recording, not only once the whole drain is (a drain of a full ring writes
 * for milliseconds where fresh memory is slow). */
static void write_consume(termsight_session *s, uint32_t i, const lane_run *run)
{
    lane_run rest = *run, p;
    size_t n;
    /* A lane three quarters full is one the recorder falls behind on: its operators are left
     * out of the boards' sums then (counted, so the live view says partial), so that the
     * recorder keeps up and the recording loses nothing for the live view's sake. */
    if (s->rec->dg)
        digest_pressed(s->rec->dg, lane_run_count(run) > lane_capacity(s->seg, i) / 4 * 3);
    while ((n = lane_run_take(&rest, CONSUME_STEP, &p))) {
        write_events(s, p);
        if (s->rec->dg) {
            digest_feed(s->rec->dg, p.a, p.na);
            digest_feed(s->rec->dg, p.b, p.nb);
        }
        lane_consume(s->seg, i, n);
    }
}

/* Keeps ev for the next drain. Returns 0 when the overflow is full (the event is then lost and
 * counted). */
static int overflow_push(termsight_session *s, const ts_event *ev)
{
    if (s->rec->overflow_n == s->rec->overflow_cap) {
        size_t cap = s->rec->overflow_cap ? s->rec->overflow_cap * 2 : 1024;
        ts_event *o = cap <= OVERFLOW_MAX ? realloc(s->rec->overflow, cap * sizeof *o) : NULL;
        if (!o) {
            s->rec->overflow_lost++;
            return 0;
        }
        s->rec->overflow = o;
        s->rec->overflow_cap = cap;
    }
    s->rec->overflow[s->rec->overflow_n++] = *ev;
    return 1;
}

/* The collector's own events (window markers, options, names, samples, device records, loss
 * notices) go through its own lane like any thread's: written in order with the rest, and seen by
 * a monitor observing the lanes. Once something waits in the overflow, later events queue behind
 * it, so the order holds. Returns 0 when ev was lost. */
static int append(termsight_session *s, const ts_event *ev)
{
    if (!s->rec->overflow_n && lane_push(&s->rec->own, ev))
        return 1;
    return overflow_push(s, ev);
}

void recorder_count_program_locked(termsight_session *s, uint64_t n)
{
    s->rec->program_events += n;
    atomic_store_explicit(&segment_header(s->seg)->program_events, s->rec->program_events,
                          memory_order_relaxed);
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
 * drain, so no loss goes unreported. rate: events/s the thread offered, 0 when not known. */
static int lost_notice(termsight_session *s, uint32_t tid, uint64_t count, uint32_t reason,
                       uint64_t rate)
{
    ts_event ev = session_marker(TS_KIND_LOST, 0, 0, count);
    ev.tid = tid;
    ev.aux = reason;
    ev.v1 = rate;
    return append(s, &ev);
}

/* A lane's mirror says it lost nothing in this window (yet). */
static void lost_clear(ts_lane *m)
{
    atomic_store_explicit(&m->lost_window, 0, memory_order_relaxed);
    atomic_store_explicit(&m->lost_first_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&m->lost_rate, 0, memory_order_relaxed);
}

/* Follows lane i (drops: its count now; consumed: what this drain took from it): the rate its
 * thread offers, and in its mirror what it lost in this window, since when and at what rate
 * then. Returns the rate offered now. */
static uint64_t watch_lane(termsight_session *s, uint32_t i, uint64_t drops, uint64_t consumed,
                           uint64_t now)
{
    lane_watch *w = &s->rec->watch[i];
    const ts_lane *l = segment_lane_ctl(s->seg, i);
    ts_lane *m = segment_lane(s->seg, i);
    uint64_t gen = atomic_load_explicit(&l->generation, memory_order_relaxed);
    uint64_t offered = atomic_load_explicit(&l->head, memory_order_relaxed) + drops;
    if (w->generation != gen) {
        /* A thread claimed the lane since the last drain, drained then: its first events are
         * what this drain took, its first drops those past the lane's count then. */
        uint64_t tail = atomic_load_explicit(&l->tail, memory_order_relaxed);
        uint64_t seen = s->rec->lane_drops_seen[i];
        *w = (lane_watch){.generation = gen,
                          .window = s->window,
                          .window_drops = seen,
                          .mark_ns = s->rec->last_drain_ns,
                          .mark_offered = tail - consumed + seen};
        lost_clear(m);
    } else if (w->window != s->window) {
        w->window = s->window;
        w->window_drops = drops;
        w->losing = 0;
        lost_clear(m);
    }
    uint64_t span = now > w->mark_ns ? now - w->mark_ns : 0;
    uint64_t rate = w->rate;
    if (span >= RATE_SPAN_MIN || (!rate && span)) /* a short span rather than none */
        rate = (uint64_t)((double)(offered - w->mark_offered) * 1e9 / (double)span);
    if (span >= RATE_SPAN_NS) {
        w->rate = rate;
        w->mark_ns = now;
        w->mark_offered = offered;
    }
    if (drops > w->window_drops) {
        if (!w->losing) {
            w->losing = 1;
            atomic_store_explicit(&m->lost_first_ns, now, memory_order_relaxed);
            atomic_store_explicit(&m->lost_rate, rate, memory_order_relaxed);
        }
        atomic_store_explicit(&m->lost_window, drops - w->window_drops, memory_order_relaxed);
    }
    return rate;
}

/* Lanes that fit their threads: a lane that lost events, or that a drain found half full, gets a
 * ring four times larger, up to the largest lane and within the session's budget (lane_grow).
 * Its pages are had a slice per drain, a sixteenth of the ring the lane has now: so long as
 * memory comes at 400 MB/s or more (fresh pages of a virtual machine's, seen at 390 MB/s), a
 * slice takes less time than the lane's ring absorbs at 20 M events/s, and draining goes on. */
static void grow(termsight_session *s, uint32_t i, int dropped, uint64_t backlog)
{
    const segment_geometry *g = segment_geometry_of(s->seg);
    if (g->lane_max_events <= g->lane_events)
        return;
    uint32_t cap = lane_capacity(s->seg, i), want = 0;
    if (cap && cap < g->lane_max_events && (dropped || backlog > cap / 2))
        want = cap * 4 < g->lane_max_events ? cap * 4 : g->lane_max_events;
    uint64_t slice = (uint64_t)cap * sizeof(ts_event) / 16;
    lane_grow(s->seg, i, want, slice > GROW_SLICE_MIN ? slice : GROW_SLICE_MIN);
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
    lane_run *runs = s->rec->runs;
    size_t total = 0;
    /* Before the peek: what was pushed before now is in this drain (or an earlier one), what is
     * pushed from here on in this drain or later. The step board is published as of now: taken
     * after the peek, a recorder thread descheduled in between (a loaded machine) would claim
     * steps it has not seen. */
    uint64_t now = tsclock_now(&ts_clock);
    if (s->flight)
        flight_drain_begins(s->flight, now);
    for (uint32_t i = 0; i < used; i++) {
        total += lane_peek(s->seg, i, &runs[i]);
    }
    /* A window a training thread opened (window.c) waits for its start marker: its events stay
     * in the lanes until the loop has written it. The thread published the request before the
     * events, so a peek that saw one of them sees the request. */
    if (window_opening(s))
        return 0;
    /* The overflow is newer than the collector's lane as peeked: it goes right after it. Events
     * appended to it during this drain (loss notices) wait for the next one. */
    size_t overflow_n = s->rec->overflow_n;
    total += overflow_n;
    write_strings(s);
    uint64_t drops = 0;
    size_t notices = 0;
    for (uint32_t i = 0; i < used; i++) {
        ts_lane *l = segment_lane_ctl(s->seg, i);
        write_consume(s, i, &runs[i]);
        if (l == s->rec->own.lane) {
            /* The collector's own lane loses nothing to a full ring (the overflow takes it). */
            if (overflow_n) {
                write_events(s, lane_run_of(s->rec->overflow, overflow_n));
                if (s->rec->dg) {
                    digest_pressed(s->rec->dg, 0);
                    digest_feed(s->rec->dg, s->rec->overflow, overflow_n);
                }
                memmove(s->rec->overflow, s->rec->overflow + overflow_n,
                        (s->rec->overflow_n - overflow_n) * sizeof *s->rec->overflow);
                s->rec->overflow_n -= overflow_n;
            }
            continue;
        }
        if (lane_run_count(&runs[i])) /* the program's own threads recorded: said for reapers */
            recorder_count_program_locked(s, lane_run_count(&runs[i]));
        uint64_t d = atomic_load_explicit(&l->drops, memory_order_relaxed);
        grow(s, i, d != s->rec->lane_drops_seen[i], lane_run_count(&runs[i]));
        uint64_t rate = watch_lane(s, i, d, lane_run_count(&runs[i]), now);
        if (d != s->rec->lane_drops_seen[i] &&
            lost_notice(s, atomic_load_explicit(&l->tid, memory_order_relaxed),
                        d - s->rec->lane_drops_seen[i], TS_LOST_LANE_FULL, rate)) {
            s->rec->lane_drops_seen[i] = d;
            notices++;
        }
        drops += d;
        lane_reclaim(s->seg, i);
    }
    uint64_t nl = atomic_load_explicit(&s->no_lane_drops, memory_order_relaxed);
    if (nl != s->rec->no_lane_drops_seen &&
        lost_notice(s, 0, nl - s->rec->no_lane_drops_seen, TS_LOST_NO_LANE, 0)) {
        s->rec->no_lane_drops_seen = nl;
        notices++;
    }
    if (s->rec->overflow_lost != s->rec->overflow_lost_seen &&
        lost_notice(s, (uint32_t)getpid(), s->rec->overflow_lost - s->rec->overflow_lost_seen,
                    TS_LOST_LANE_FULL, 0)) {
        s->rec->overflow_lost_seen = s->rec->overflow_lost;
        notices++;
    }
    s->rec->last_drain_ns = now;
    if (s->rec->dg)
        digest_publish(s->rec->dg, now, 0);
    uint64_t all = drops + nl + s->rec->write_drops + s->rec->overflow_lost;
    atomic_store_explicit(&s->drops, all, memory_order_relaxed);
    atomic_store_explicit(&segment_header(s->seg)->drops, all, memory_order_relaxed);
    atomic_store_explicit(&segment_header(s->seg)->write_drops, s->rec->write_drops,
                          memory_order_relaxed);
    return total + notices;
}

static const char *recorder_name(void *ctx, uint32_t id, uint32_t *len)
{
    const termsight_session *s = ctx;
    return strtab_name(s->names, id, len);
}

/* The flight ring is mapped in the process (counted against RLIMIT_AS whether its pages are had
 * or not): no more of it than the address-space limit leaves (rlimits.c), said once. */
static void flight_mb_fit(termsight_session *s)
{
    static int said;
    ts_rlimits lim;
    rlimits_read(&lim);
    uint64_t max = rlimits_map_max(&lim, 0), mb = max >> 20;
    if (mb >= s->opts.flight_mb)
        return;
    if (!said++) {
        char why[160];
        rlimits_describe(&lim, max, why, sizeof why);
        fprintf(stderr, "termsight: the flight recorder keeps %llu MiB (asked %u MiB) for %s\n",
                (unsigned long long)mb, s->opts.flight_mb, why);
    }
    s->opts.flight_mb = (uint32_t)mb;
}

int recorder_init(termsight_session *s)
{
    uint32_t lanes = segment_geometry_of(s->seg)->lane_count;
    recorder *r = calloc(1, sizeof *r);
    if (!r)
        return -1;
    s->rec = r;
    r->recording_fd = -1;
    r->last_drain_ns = tsclock_now(&ts_clock);
    r->lane_drops_seen = calloc(lanes, sizeof *r->lane_drops_seen);
    r->runs = calloc(lanes, sizeof *r->runs);
    r->watch = calloc(lanes, sizeof *r->watch);
    if (!r->lane_drops_seen || !r->runs || !r->watch)
        return session_fail(-1, "out of memory");
    if (lane_claim(s->seg, (uint32_t)getpid(), &r->own) != 0)
        return session_fail(-1, "cannot have shared memory for the collector's own lane: /dev/shm "
                                "is full, or this process tree's shared-memory budget is spent "
                                "(TERMSIGHT_SHM_BUDGET_MB sets it)");
    /* Without the boards the session still records; monitors then show no steps. */
    r->dg = digest_create(s->seg, recorder_name, s, s->fp_start_op, s->bp_end_op);
    if (s->opts.flight_mb) {
        flight_mb_fit(s);
        s->flight = flight_create(s->opts.flight_mb);
        if (!s->flight)
            return session_fail(-1,
                                "cannot have %u MiB of memory for the flight recorder "
                                "(TERMSIGHT_FLIGHT_MB sets it)",
                                s->opts.flight_mb);
        flight_signal_install();
        segment_header(s->seg)->flight_mb = s->opts.flight_mb; /* for reapers and ls */
    }
    return 0;
}

void recorder_free(termsight_session *s)
{
    recorder *r = s->rec;
    if (!r)
        return;
    digest_destroy(r->dg);
    flight_free(s->flight);
    s->flight = NULL;
    free(r->overflow);
    free(r->lane_drops_seen);
    free(r->runs);
    free(r->watch);
    free(r);
    s->rec = NULL;
}

/* ---- The recording file ------------------------------------------------------------------- */

/* The disk space kept beside the recording while it is written: when the disk fills up, it is
 * given back so that the recording can still be closed with a note of what was lost. */
#define RESERVE_BYTES (64u << 10)

static void reserve_take(const termsight_session *s)
{
    int fd = openat(s->rec->recording_fd, TS_RECORDING_RESERVE,
                    O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
    if (fd < 0)
        return; /* no reserve: a full disk then ends the recording without its note */
    struct stat st;
    /* Not past the file-size limit (SIGXFSZ): then there is no reserve either. */
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || rlimits_file_check(RESERVE_BYTES) != 0 ||
        posix_fallocate(fd, 0, RESERVE_BYTES) != 0)
        unlinkat(s->rec->recording_fd, TS_RECORDING_RESERVE, 0);
    close(fd);
}

static void reserve_give_back(const termsight_session *s)
{
    struct stat st;
    if (s->rec->recording_fd >= 0 &&
        fstatat(s->rec->recording_fd, TS_RECORDING_RESERVE, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISREG(st.st_mode) && st.st_uid == geteuid())
        unlinkat(s->rec->recording_fd, TS_RECORDING_RESERVE, 0);
}

void recorder_meta(const termsight_session *s, recording_meta *meta)
{
    *meta = (recording_meta){
        .major = TS_RECORDING_MAJOR, .minor = TS_RECORDING_MINOR, .pid = (int32_t)getpid()};
    snprintf(meta->process, sizeof meta->process, "%s", s->process);
    snprintf(meta->clock, sizeof meta->clock, "%s", tsclock_name(&ts_clock));
    meta->start_realtime_ns = s->start_realtime_ns;
    meta->start_ns = s->start_ns;
    gethostname(meta->host, sizeof meta->host - 1);
}

int recorder_open_locked(termsight_session *s)
{
    if (s->rec->writer)
        return 0;
    char why_dir[512];
    if (s->rec->recording_fd < 0 &&
        (s->rec->recording_fd =
             util_make_recording_dir(s->output_path, s->run_folder, why_dir, sizeof why_dir)) < 0)
        return session_fail(TERMSIGHT_E_RECORDING, "%s", why_dir);
    recording_meta meta;
    recorder_meta(s, &meta);
    char *why = NULL;
    if (recording_writer_openat(s->rec->recording_fd, s->recording_dir, &meta, &s->rec->writer,
                                &why) != 0) {
        int rc = session_fail(TERMSIGHT_E_RECORDING, "%s", why ? why : "cannot open recording");
        free(why);
        return rc;
    }
    if (!atomic_load(&s->record_error))
        reserve_take(s);
    return 0;
}

/* The recording stopped early (a full disk, an I/O error): with the reserved space given back,
 * it is opened once more for the note of why and of how many events were lost, so the report can
 * say so. Under the drain lock, after the last drain. */
static void close_failed_recording(termsight_session *s)
{
    reserve_give_back(s);
    if (recorder_open_locked(s) != 0)
        return;
    ts_event note[2] = {session_marker(TS_KIND_LOST, 0, 0, s->rec->write_drops),
                        session_marker(TS_KIND_CONFIG, session_intern(s, "record_error"),
                                       session_intern(s, s->record_notice), 0)};
    note[0].aux = TS_LOST_WRITE;
    note[0].tid = (uint32_t)getpid();
    char *why = NULL;
    uint32_t count = strtab_count(s->names);
    const char *bytes[2];
    uint32_t lens[2];
    int rc = 0;
    /* The names the recorder could not write, then the two the note uses. */
    for (uint32_t id = s->rec->strings_recorded; rc == 0 && id < count; id++) {
        bytes[0] = strtab_name(s->names, id, &lens[0]);
        if (!bytes[0])
            bytes[0] = "", lens[0] = 0;
        rc = recording_append_strings(s->rec->writer, id, 1, bytes, lens, &why);
    }
    if (rc == 0)
        rc = recording_append_events(s->rec->writer, lane_run_of(note, 2), &why);
    if (rc == 0)
        recording_sync(s->rec->writer, NULL);
    free(why);
    recording_writer_close(s->rec->writer, NULL);
    s->rec->writer = NULL;
}

int recorder_sync_locked(termsight_session *s)
{
    char *why = NULL;
    int rc = 0;
    if (s->rec->writer && recording_sync(s->rec->writer, &why) != 0)
        rc = session_fail(TERMSIGHT_E_RECORDING, "flush: %s", why ? why : "sync failed");
    free(why);
    return rc;
}

int recorder_close_locked(termsight_session *s, int had_window)
{
    recorder *r = s->rec;
    int rc = 0;
    if (r->dg) /* the last steps, which no later drain will settle */
        digest_publish(r->dg, tsclock_now(&ts_clock), 1);
    if (r->writer) {
        char *why = NULL;
        if (recording_sync(r->writer, &why) != 0 || recording_writer_close(r->writer, &why) != 0)
            rc = session_fail(TERMSIGHT_E_RECORDING, "%s", why ? why : "cannot close recording");
        free(why);
        r->writer = NULL;
    } else if (atomic_load(&s->record_error) && had_window) {
        close_failed_recording(s);
    }
    reserve_give_back(s);
    if (r->recording_fd >= 0)
        close(r->recording_fd);
    r->recording_fd = -1;
    r->last_drain_ns = tsclock_now(&ts_clock);
    return rc;
}
