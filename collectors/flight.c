/* flight: the flight recorder. In flight mode (options.flight_mb, TERMSIGHT_FLIGHT) the session
 * collects as usual but writes no recording: every drain's events go into a ring of the
 * process's own memory instead, the newest overwriting the oldest. A snapshot writes what the
 * ring holds as a recording of its own, in run_folder/snapshots/NN-cause[-stepN]/, from the first
 * step that begins after the oldest event kept, with the window's metadata and why in it:
 * `termsight analyse` reads it like any run folder.
 *
 * Which events are whole: the ring keeps drain marks (where a drain began in the ring, and when),
 * one every MARK_GAP_NS at most. Every event pushed after the oldest mark still in the ring is in
 * the ring (a drain takes what was pushed before it peeks), so every event that begins after that
 * moment is, ranges included (written when they end), and device records (pushed after they end).
 *
 * Snapshots come on request (the mailbox's "snapshot", termsight_snapshot, SIGUSR2 where the
 * program leaves it to its default; in Python through a Python handler that calls
 * termsight_flight_signal, python/termsight/_lib.py) and by themselves (flight_watch, on the
 * recorder thread after each drain, from the boards' steps): a step longer than
 * TERMSIGHT_FLIGHT_SLOW times the median of the SLOW_HISTORY before it (and
 * TERMSIGHT_FLIGHT_SLOW_MS longer), and no step ended for TERMSIGHT_FLIGHT_HANG_S seconds (by
 * default HANG_STEPS times the median step, at least 30 s). At most one automatic snapshot a minute
 * (a worse step within it replaces the snapshot) and TERMSIGHT_FLIGHT_MAX in all. Everything here
 * runs on the recorder thread, under the drain lock: the training threads never wait for it. */
#include "collectors.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MARK_GAP_NS      10000000ull    /* a drain mark every 10 ms at most */
#define MARKS            65536u         /* marks kept: 11 minutes of them at the most frequent */
#define SLOW_HISTORY     20u            /* steps the median is taken over */
#define SLOW_HISTORY_MIN 10u            /* steps seen before a step can be called slow */
#define SLOW_DEFAULT     2.5            /* a 3x step in a steady run is caught, noise is not */
#define HANG_STEPS       20u            /* a hang: no step end for this many median steps ... */
#define HANG_MIN_NS      30000000000ull /* ... and at least 30 s */
#define SLOW_MIN_MS      10             /* ... and 10 ms longer at least: hiccups of short steps */
#define AUTO_GAP_NS      60000000000ull /* one automatic snapshot a minute at most */
#define WORSE            1.5            /* a step this much slower (as a ratio) replaces one */
#define AUTO_MAX_DEFAULT 10u
#define CUDA_SETTLE_NS   1500000000ull /* CUPTI hands over device records every second */
#define WRITE_BATCH      4096u

typedef struct flight_mark {
    uint64_t pos; /* events put before the drain */
    uint64_t ns;  /* when it began */
} flight_mark;

struct flight {
    ts_event *ev;
    uint64_t cap;  /* events the ring holds */
    uint64_t head; /* events put so far; the newest at (head - 1) % cap */
    size_t bytes;
    flight_mark *marks;
    uint64_t nmarks; /* marks made so far; the newest at (nmarks - 1) % MARKS */

    /* The triggers (from the environment at creation). */
    double slow;       /* 0: no slow-step snapshots */
    uint64_t slow_min; /* ns a slow step exceeds the median by, at least */
    uint64_t hang_ns;  /* 0: from the steps */
    uint32_t auto_max; /* automatic snapshots in all */

    /* What the watch has seen of the steps. */
    uint64_t steps_next; /* the next step record of the boards to read */
    uint64_t hist[SLOW_HISTORY];
    uint32_t nhist;
    uint64_t last_end_ns, last_step;
    int hang_taken; /* this hang has its snapshot */
    /* A slow step's snapshot, waiting for the step's device records (0: none due). */
    uint64_t due_ns, due_step;
    double due_ratio;
    char due_why[200];

    uint64_t last_auto_ns;
    double last_ratio;      /* the last automatic snapshot's slow step (0: a hang) ... */
    char last_folder[1400]; /* ... and its folder */
    uint32_t autos, taken, skipped;
};

static _Atomic int signalled; /* SIGUSR2 came */

static double env_double(const char *name, double dflt)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return dflt;
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || *end || !(d >= 0) || d > 1e6) {
        fprintf(stderr, "termsight: %s=%s is invalid (a number from 0): %g is used\n", name, v,
                dflt);
        return dflt;
    }
    return d;
}

flight *flight_create(uint32_t mb)
{
    flight *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->bytes = (size_t)mb << 20;
    f->cap = f->bytes / sizeof(ts_event);
    /* Pages are had as the ring fills: a process that records little costs little. */
    void *p = mmap(NULL, f->bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    f->marks = calloc(MARKS, sizeof *f->marks);
    if (p == MAP_FAILED || !f->marks || !f->cap) {
        if (p != MAP_FAILED)
            munmap(p, f->bytes);
        free(f->marks);
        free(f);
        return NULL;
    }
    f->ev = p;
    /* A forked child makes a ring of its own (its session is its own): this one stays here, and
     * its pages are not counted as the child's. */
    madvise(p, f->bytes, MADV_DONTFORK);
    f->slow = env_double("TERMSIGHT_FLIGHT_SLOW", SLOW_DEFAULT);
    f->slow_min = (uint64_t)(env_double("TERMSIGHT_FLIGHT_SLOW_MS", SLOW_MIN_MS) * 1e6);
    f->hang_ns = (uint64_t)(env_double("TERMSIGHT_FLIGHT_HANG_S", 0) * 1e9);
    f->auto_max = (uint32_t)env_double("TERMSIGHT_FLIGHT_MAX", AUTO_MAX_DEFAULT);
    return f;
}

void flight_free(flight *f)
{
    if (!f)
        return;
    munmap(f->ev, f->bytes);
    free(f->marks);
    free(f);
}

void flight_drain_begins(flight *f, uint64_t now)
{
    const flight_mark *last = f->nmarks ? &f->marks[(f->nmarks - 1) % MARKS] : NULL;
    if (last && (last->pos == f->head || now < last->ns + MARK_GAP_NS))
        return; /* nothing put since, or too soon */
    f->marks[f->nmarks++ % MARKS] = (flight_mark){.pos = f->head, .ns = now};
}

static void put_array(flight *f, const ts_event *a, size_t na)
{
    while (na) {
        uint64_t slot = f->head % f->cap;
        size_t n = na < f->cap - slot ? na : (size_t)(f->cap - slot);
        memcpy(&f->ev[slot], a, n * sizeof *a);
        f->head += n;
        a += n;
        na -= n;
    }
}

void flight_put(flight *f, lane_run run)
{
    put_array(f, run.a, run.na);
    put_array(f, run.b, run.nb);
}

/* The oldest mark whose events are all still in the ring: where a snapshot may begin (*pos) and
 * the moment from which every event is whole (*since). Nothing overwritten yet: everything, from
 * the session's start. */
static void whole_from(const flight *f, uint64_t *pos, uint64_t *since)
{
    uint64_t oldest = f->head > f->cap ? f->head - f->cap : 0;
    *pos = oldest;
    *since = 0;
    if (!oldest)
        return;
    uint64_t first = f->nmarks > MARKS ? f->nmarks - MARKS : 0;
    for (uint64_t m = first; m < f->nmarks; m++) {
        const flight_mark *k = &f->marks[m % MARKS];
        if (k->pos >= oldest) {
            *pos = k->pos;
            *since = k->ns;
            return;
        }
    }
    /* Every mark overwritten (more than the ring in one drain): only the newest events. */
    *pos = f->head;
    *since = UINT64_MAX;
}

static const ts_event *at(const flight *f, uint64_t i)
{
    return &f->ev[i % f->cap];
}

/* Collects the window's metadata events (session_window_metadata's put). */
typedef struct event_list {
    ts_event *ev;
    size_t n, cap;
    int failed; /* one could not be kept */
} event_list;

static void list_put(void *ctx, const ts_event *ev)
{
    event_list *l = ctx;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        ts_event *e = realloc(l->ev, cap * sizeof *e);
        if (!e) {
            l->failed = 1;
            return;
        }
        l->ev = e;
        l->cap = cap;
    }
    l->ev[l->n++] = *ev;
}

/* A window marker or option of the collector's own as the snapshot's metadata says it. */
static ts_event snapshot_config(termsight_session *s, const char *key, const char *value,
                                uint64_t at_ns)
{
    ts_event ev =
        session_marker(TS_KIND_CONFIG, session_intern(s, key), session_intern(s, value), 0);
    ev.begin_ns = ev.end_ns = at_ns;
    return ev;
}

static int write_snapshot(termsight_session *s, recording_writer *w, uint64_t pos, uint64_t t0,
                          const char *cause, const char *why, char **err)
{
    flight *f = s->flight;
    event_list head = {0};
    /* Nothing overwritten (t0 0): from the session's start. */
    uint64_t at_ns = t0 ? t0 : s->start_ns;
    ts_event start = session_marker(TS_KIND_COLLECT_START, 0, 0, 1);
    start.begin_ns = start.end_ns = at_ns;
    list_put(&head, &start);
    session_window_metadata(s, list_put, &head);
    char num[32];
    ts_event more[4] = {
        snapshot_config(s, "snapshot", why, at_ns),
        snapshot_config(s, "snapshot_cause", cause, at_ns),
    };
    snprintf(num, sizeof num, "%u", f->skipped);
    more[2] = snapshot_config(s, "snapshots_skipped", num, at_ns);
    snprintf(num, sizeof num, "%u", s->opts.flight_mb);
    more[3] = snapshot_config(s, "flight_mb", num, at_ns);
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
        list_put(&head, &more[i]);
    int rc = -1;
    if (head.failed) {
        *err = strdup("out of memory");
        goto out;
    }
    /* Every name the events may use: they were interned before being pushed. */
    if (recording_copy_names(s->seg, w, 0, strtab_count(s->names), err) != 0 ||
        recording_append_events(w, lane_run_of(head.ev, head.n), err) != 0)
        goto out;
    ts_event batch[WRITE_BATCH];
    size_t n = 0;
    for (uint64_t i = pos; i < f->head; i++) {
        const ts_event *e = at(f, i);
        if (e->begin_ns < t0 || e->kind == TS_KIND_COLLECT_START || e->kind == TS_KIND_COLLECT_STOP)
            continue; /* partly kept, or the flight window's own markers */
        batch[n++] = *e;
        if (n == WRITE_BATCH) {
            if (recording_append_events(w, lane_run_of(batch, n), err) != 0)
                goto out;
            n = 0;
        }
    }
    batch[n++] = session_marker(TS_KIND_COLLECT_STOP, 0, 0, 1);
    rc = recording_append_events(w, lane_run_of(batch, n), err);
out:
    free(head.ev);
    return rc;
}

/* Whether dir (a descriptor, kept) holds the entry name and nothing else (or nothing at all,
 * unless need). */
static int holds_only(int dir, const char *name, int need)
{
    int fd = dup(dir);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    int only = 1, seen = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (strcmp(e->d_name, name))
            only = 0;
        else
            seen = 1;
    }
    closedir(d);
    return only && (seen || !need);
}

/* Removes a snapshot folder of this session's that holds only its recording (one the user has
 * analysed, or put anything in, is kept): 0, or -1 when kept. whole: only one whose recording
 * has its events.tsr (else also what a failed snapshot left: recording/ with or without it). */
static int remove_snapshot(const char *folder, int whole)
{
    int rc = -1;
    int d = open(folder, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d < 0)
        return -1;
    int r = openat(d, TS_RECORDING_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (r >= 0 && holds_only(d, TS_RECORDING_DIR, 1) && holds_only(r, TS_RECORDING_FILE, whole) &&
        (unlinkat(r, TS_RECORDING_FILE, 0) == 0 || (!whole && errno == ENOENT)) &&
        unlinkat(d, TS_RECORDING_DIR, AT_REMOVEDIR) == 0)
        rc = rmdir(folder);
    if (r >= 0)
        close(r);
    close(d);
    return rc;
}

int flight_snapshot_locked(termsight_session *s, const char *cause, uint64_t step, const char *why,
                           char *folder, size_t cap)
{
    flight *f = s->flight;
    if (!f)
        return session_fail(TERMSIGHT_E_INVALID,
                            "snapshot: this process keeps no flight recorder (termsight run "
                            "--flight, TERMSIGHT_FLIGHT=1)");
    uint64_t pos, since;
    whole_from(f, &pos, &since);
    /* From the first step that begins with everything after it kept. */
    uint64_t t0 = since;
    if (since) {
        t0 = UINT64_MAX;
        for (uint64_t i = pos; i < f->head; i++) {
            const ts_event *e = at(f, i);
            if (e->kind == TS_KIND_STEP_BEGIN && e->begin_ns >= since && e->begin_ns < t0)
                t0 = e->begin_ns;
        }
        if (t0 == UINT64_MAX)
            t0 = since;
    }
    char name[96];
    if (step)
        snprintf(name, sizeof name, "%02u-%.40s-step%llu", f->taken + 1, cause,
                 (unsigned long long)step);
    else
        snprintf(name, sizeof name, "%02u-%.40s", f->taken + 1, cause);
    char whydir[512];
    int dirfd = util_make_snapshot_dir(s->output_path, s->run_folder, name, folder, cap, whydir,
                                       sizeof whydir);
    if (dirfd < 0)
        return session_fail(TERMSIGHT_E_RECORDING, "snapshot: %s", whydir);
    recording_meta meta;
    recorder_meta(s, &meta);
    recording_writer *w = NULL;
    char *err = NULL;
    char recdir[1200];
    snprintf(recdir, sizeof recdir, "%s/" TS_RECORDING_DIR, folder);
    int rc = recording_writer_openat(dirfd, recdir, &meta, &w, &err);
    if (rc == 0)
        rc = write_snapshot(s, w, pos, t0, cause, why ? why : cause, &err);
    if (rc == 0)
        rc = recording_sync(w, &err);
    if (w && recording_writer_close(w, rc == 0 ? &err : NULL) != 0)
        rc = -1;
    close(dirfd);
    f->taken++;
    if (rc != 0) {
        /* What it wrote goes (a full disk must not stay full of a partial snapshot). */
        remove_snapshot(folder, 0);
        int r = session_fail(TERMSIGHT_E_RECORDING, "snapshot: %s",
                             err ? err : "cannot write the recording");
        free(err);
        return r;
    }
    return TERMSIGHT_OK;
}

/* The median of the steps in the history. */
static uint64_t median(const flight *f)
{
    uint64_t v[SLOW_HISTORY];
    uint32_t n = f->nhist < SLOW_HISTORY ? f->nhist : SLOW_HISTORY;
    memcpy(v, f->hist, n * sizeof *v);
    for (uint32_t i = 1; i < n; i++) /* insertion sort: twenty at most */
        for (uint32_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
            uint64_t t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n ? (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2) : 0;
}

/* A snapshot taken on the loop (the control and drain locks taken here), said on stderr with its
 * folder (into folder; "" when it failed) and the snapshot it replaces (instead_of, or NULL). */
static void snapshot_said(termsight_session *s, const char *cause, uint64_t step, const char *why,
                          const char *instead_of, char *folder, size_t cap)
{
    pthread_mutex_lock(&s->control);
    pthread_mutex_lock(&s->drain);
    int rc = flight_snapshot_locked(s, cause, step, why, folder, cap);
    pthread_mutex_unlock(&s->drain);
    pthread_mutex_unlock(&s->control);
    if (rc != TERMSIGHT_OK) {
        folder[0] = 0;
        fprintf(stderr, "termsight: %s: %s\n", why, termsight_last_error());
        return;
    }
    fprintf(stderr, "termsight: %s: flight recorder snapshot in %s%s%s%s\n", why, folder,
            instead_of ? " (in place of " : "", instead_of ? instead_of : "",
            instead_of ? ", a smaller slowdown less than a minute before)" : "");
}

/* An automatic snapshot now, if one is allowed: 1 when taken. ratio: a slow step's, over the
 * median (0: a hang). Within a minute of the last one, a slow step WORSE times as slow replaces
 * a slow step's snapshot (unless the user has touched it): the minute keeps its worst. */
static int auto_snapshot(termsight_session *s, const char *cause, uint64_t step, const char *why,
                         double ratio, uint64_t now)
{
    flight *f = s->flight;
    int within = f->last_auto_ns && now < f->last_auto_ns + AUTO_GAP_NS;
    int replace = within && ratio > 0 && f->last_ratio > 0 && ratio >= WORSE * f->last_ratio;
    char was[sizeof f->last_folder];
    snprintf(was, sizeof was, "%s", f->last_folder);
    if ((!replace && (within || f->autos >= f->auto_max)) || (replace && remove_snapshot(was, 1))) {
        f->skipped++;
        return 0;
    }
    if (!replace) {
        f->autos++;
        f->last_auto_ns = now; /* a replacement keeps the minute of the one it replaces */
    }
    f->last_ratio = ratio;
    snapshot_said(s, cause, step, why, replace ? was : NULL, f->last_folder, sizeof f->last_folder);
    return 1;
}

static int cuda_on(void)
{
    return !strncmp(cupti_status(), "CUDA collection on", 18);
}

/* The boards' new steps: slow ones, and the last end for the hang watch. */
static void watch_steps(termsight_session *s, uint64_t now)
{
    flight *f = s->flight;
    step_row rows[32];
    uint64_t next;
    size_t n;
    while ((n = board_get_steps(s->seg, f->steps_next, rows, 32, &next, NULL)) > 0) {
        f->steps_next = next;
        for (size_t i = 0; i < n; i++) {
            const step_row *r = &rows[i];
            uint64_t med = median(f);
            double ratio = med ? (double)r->total_ns / (double)med : 0;
            if (f->slow > 0 && f->nhist >= SLOW_HISTORY_MIN && med && ratio > f->slow &&
                r->total_ns >= med + f->slow_min && ratio > f->due_ratio) {
                /* Due once the step's device records are in; a worse one meanwhile instead. */
                f->due_ns = now + (cuda_on() ? CUDA_SETTLE_NS : 0);
                f->due_step = r->step;
                f->due_ratio = ratio;
                snprintf(f->due_why, sizeof f->due_why,
                         "step %llu took %.1f ms, %.1f times the median of the %u before it",
                         (unsigned long long)r->step, (double)r->total_ns / 1e6, ratio,
                         f->nhist < SLOW_HISTORY ? f->nhist : SLOW_HISTORY);
            }
            f->hist[f->nhist++ % SLOW_HISTORY] = r->total_ns;
            if (f->nhist >= 2 * SLOW_HISTORY)
                f->nhist -= SLOW_HISTORY; /* stays full, the slot order kept */
            f->last_end_ns = r->end_ns;
            f->last_step = r->step;
            f->hang_taken = 0;
        }
        if (n < 32)
            break;
    }
}

void flight_watch(termsight_session *s, uint64_t now)
{
    flight *f = s->flight;
    if (!f)
        return;
    if (atomic_exchange(&signalled, 0)) {
        char folder[1400];
        snapshot_said(s, "signal", 0, "SIGUSR2", NULL, folder, sizeof folder);
    }
    watch_steps(s, now);
    if (f->due_ns && now >= f->due_ns) {
        if (cuda_on()) { /* the step's last device records */
            cupti_flush(s, 0);
            recorder_drain(s);
        }
        f->due_ns = 0;
        auto_snapshot(s, "slow", f->due_step, f->due_why, f->due_ratio, now);
        f->due_ratio = 0;
    }
    if (!f->last_end_ns || f->hang_taken || now <= f->last_end_ns)
        return;
    uint64_t med = median(f);
    uint64_t limit = f->hang_ns                       ? f->hang_ns
                     : med * HANG_STEPS > HANG_MIN_NS ? med * HANG_STEPS
                                                      : HANG_MIN_NS;
    if (now - f->last_end_ns < limit)
        return;
    char why[200];
    snprintf(why, sizeof why, "no step has ended for %.1f s (step %llu ended last)",
             (double)(now - f->last_end_ns) / 1e9, (unsigned long long)f->last_step);
    if (auto_snapshot(s, "hang", f->last_step + 1, why, 0, now))
        f->hang_taken = 1;
}

static void on_usr2(int sig)
{
    (void)sig;
    atomic_store(&signalled, 1);
}

int termsight_flight_signal(int request)
{
    if (request) {
        atomic_store(&signalled, 1);
        return 1;
    }
    struct sigaction cur;
    return sigaction(SIGUSR2, NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) &&
           cur.sa_handler == on_usr2;
}

void flight_signal_install(void)
{
    static _Atomic int done;
    if (atomic_exchange(&done, 1))
        return;
    struct sigaction old;
    if (sigaction(SIGUSR2, NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) ||
        old.sa_handler != SIG_DFL)
        return; /* the program's own */
    struct sigaction sa = {.sa_handler = on_usr2, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR2, &sa, NULL);
}
