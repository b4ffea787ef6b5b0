/* api: the event calls of include/termsight/termsight.h, the hot path.
 *
 * Every call first loads termsight_collecting_ and returns when it is 0. While collecting, an event
 * is built on the stack and pushed into the calling thread's lane: no lock, no allocation, no
 * system call, except on a thread's first event of a session (gettid, claiming a lane, one malloc).
 *
 * Thread state is split in two: a few words in initial-exec TLS (one %fs-relative load, and small
 * enough for the static TLS surplus when the library is dlopen'ed as an injection), and the rest
 * (open range frames) in a block allocated on the thread's first event. */
#include "collectors.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LIKELY(x)     __builtin_expect(!!(x), 1)
#define UNLIKELY(x)   __builtin_expect(!!(x), 0)
#define NO_LANE_RETRY 4096 /* events between retries of a thread that found no lane */

volatile int termsight_collecting_;

/* The range hooks of the collector that installed them (CUDA collection), or NULL. */
static const range_hooks *_Atomic range_hooks_on;

void api_set_range_hooks(const range_hooks *hooks)
{
    atomic_store_explicit(&range_hooks_on, hooks, memory_order_release);
}

void api_range_start_hook(uint32_t name, uint64_t id)
{
    const range_hooks *h = atomic_load_explicit(&range_hooks_on, memory_order_acquire);
    if (h && h->start)
        h->start(name, id);
}

void api_range_end_hook(uint64_t id)
{
    const range_hooks *h = atomic_load_explicit(&range_hooks_on, memory_order_acquire);
    if (h && h->end)
        h->end(id);
}
_Atomic uint32_t ts_window;
_Atomic uint32_t ts_generation;
tsclock ts_clock;

typedef struct frame {
    uint32_t depth;
    uint32_t name;
    uint32_t type;
    uint32_t corr; /* written into the event's corr (NVTX: the domain) */
    uint64_t begin_ns;
    uint64_t flops;
} frame;

typedef struct thread_block {
    lane_writer w;
    uint32_t tid;
    uint32_t generation; /* the session these lanes belong to */
    uint32_t no_lane;    /* events since the last failed claim */
    uint32_t nframes;
    frame frames[TS_MAX_FRAMES];
} thread_block;

typedef struct thread_hot {
    uint32_t depth;  /* ranges open in `window` (frames beyond TS_MAX_FRAMES counted too) */
    uint32_t window; /* the collection window they began in */
    thread_block *block;
} thread_hot;

static __thread thread_hot hot __attribute__((tls_model("initial-exec")));

static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;

/* The thread ends: its lane goes back to the recorder to drain and free. */
static void thread_exit(void *arg)
{
    thread_block *b = arg;
    if (b->generation == atomic_load(&ts_generation))
        lane_retire(&b->w);
    if (hot.block == b)
        hot.block = NULL;
    free(b);
}

static void make_exit_key(void)
{
    pthread_key_create(&exit_key, thread_exit);
}

enum want_lane {
    BLOCK_ONLY,   /* the thread's block alone (range frames need no lane until they end) */
    LANE_OR_DROP, /* an event to push: no lane counts it dropped */
    LANE_IF_ANY,  /* a range begins: a lane shows it open to monitors, if one can be had */
};

/* Slow path: the thread's first event in this session, or its first since it found no lane.
 * NULL when the event must be dropped; a missing lane counts the drop (LANE_OR_DROP only). */
static __attribute__((noinline)) thread_block *thread_attach(enum want_lane want_lane)
{
    termsight_session *s = session_current();
    if (!s)
        return NULL;
    thread_block *b = hot.block;
    if (!b) {
        b = calloc(1, sizeof *b);
        if (!b)
            return NULL;
        pthread_once(&exit_key_once, make_exit_key);
        pthread_setspecific(exit_key, b);
        hot.block = b;
        b->tid = (uint32_t)gettid();
    }
    if (b->generation != s->generation) {
        /* Lanes of an earlier session live in a segment that is gone: forget, never retire. */
        memset(&b->w, 0, sizeof b->w);
        b->nframes = 0;
        b->no_lane = 0;
        b->generation = s->generation;
    }
    if (want_lane == BLOCK_ONLY || b->w.lane)
        return b;
    if (want_lane == LANE_IF_ANY && b->no_lane)
        return b; /* the next event's retry claims one */
    if (b->no_lane && ++b->no_lane < NO_LANE_RETRY) {
        atomic_fetch_add_explicit(&s->no_lane_drops, 1, memory_order_relaxed);
        return NULL;
    }
    if (lane_claim(s->seg, b->tid, &b->w) != 0) {
        b->no_lane = 1;
        if (want_lane == LANE_IF_ANY)
            return b;
        atomic_fetch_add_explicit(&s->no_lane_drops, 1, memory_order_relaxed);
        return NULL;
    }
    b->no_lane = 0;
    return b;
}

/* The thread's block with a lane, for an event to push now. */
static inline thread_block *block(void)
{
    thread_block *b = hot.block;
    if (LIKELY(b && b->w.lane &&
               b->generation == atomic_load_explicit(&ts_generation, memory_order_relaxed)))
        return b;
    return thread_attach(LANE_OR_DROP);
}

/* The thread's block, lane or not, for a range's frame. */
static inline thread_block *frames(void)
{
    thread_block *b = hot.block;
    if (LIKELY(b && b->generation == atomic_load_explicit(&ts_generation, memory_order_relaxed)))
        return b;
    return thread_attach(BLOCK_ONLY);
}

static inline int collecting(void)
{
    return __atomic_load_n(&termsight_collecting_, __ATOMIC_RELAXED);
}

/* Ranges pair up within one window: entering a new one forgets what the old one left open (an
 * end skipped because it came after a stop). Returns 0 when the thread's ranges are from an
 * earlier window and `reset` is 0. */
static inline int same_window(int reset)
{
    uint32_t w = atomic_load_explicit(&ts_window, memory_order_relaxed);
    if (LIKELY(hot.window == w))
        return 1;
    if (!reset)
        return 0;
    hot.window = w;
    hot.depth = 0;
    const range_hooks *h = atomic_load_explicit(&range_hooks_on, memory_order_acquire);
    if (UNLIKELY(h))
        h->reset();
    if (hot.block)
        hot.block->nframes = 0;
    return 1;
}

static inline uint64_t now(void)
{
    return tsclock_now(&ts_clock);
}

static inline void emit(thread_block *b, ts_event *ev)
{
    ev->tid = b->tid;
    lane_push(&b->w, ev);
}

static inline void emit_instant(uint16_t kind, uint32_t name, uint32_t aux, uint64_t v0,
                                uint64_t v1, uint16_t flags)
{
    thread_block *b = block();
    if (UNLIKELY(!b))
        return;
    uint64_t t = now();
    ts_event ev = {.kind = kind,
                   .flags = flags,
                   .device = TS_DEVICE_HOST,
                   .aux = aux,
                   .name = name,
                   .begin_ns = t,
                   .end_ns = t,
                   .v0 = v0,
                   .v1 = v1};
    emit(b, &ev);
}

static uint32_t intern_n(const char *bytes, size_t len, int *truncated)
{
    termsight_session *s = session_current();
    if (!s)
        return TS_STR_NONE;
    return strtab_intern(s->names, bytes, len, truncated);
}

uint64_t termsight_now_ns(void)
{
    return now();
}

uint32_t termsight_name_n(const char *bytes, size_t len)
{
    return intern_n(bytes, len, NULL);
}

uint32_t termsight_name(const char *name)
{
    return name ? intern_n(name, strlen(name), NULL) : TS_STR_NONE;
}

/* ---- Ranges ---------------------------------------------------------------------------- */

void api_range_begin(uint32_t name, uint32_t type, uint32_t corr)
{
    if (UNLIKELY(!collecting()))
        return;
    if (UNLIKELY(atomic_load_explicit(&ts_session_pending, memory_order_relaxed)))
        session_current(); /* a due session first: its window is the range's */
    same_window(1);
    uint32_t d = hot.depth++;
    const range_hooks *h = atomic_load_explicit(&range_hooks_on, memory_order_acquire);
    if (UNLIKELY(h))
        h->push(name);
    /* The frame, and the range shown open in the thread's lane. A thread's first range claims
     * its lane (the first event of a thread, as any other), so that a thread stuck in it shows
     * where; one that finds none counts its ranges lost when they end, not while they are open. */
    thread_block *b = frames();
    if (UNLIKELY(!b) || UNLIKELY(b->nframes == TS_MAX_FRAMES))
        return;
    if (UNLIKELY(!b->w.lane) && UNLIKELY(!(b = thread_attach(LANE_IF_ANY))))
        return;
    frame *f = &b->frames[b->nframes++];
    f->depth = d;
    f->name = name;
    f->type = type;
    f->corr = corr;
    f->flops = 0;
    f->begin_ns = now();
    if (LIKELY(b->w.lane))
        lane_open_set(&b->w, d + 1, name, hot.window, f->begin_ns);
}

void termsight_range_begin_id(uint32_t name, uint32_t type)
{
    api_range_begin(name, type, 0);
}

void termsight_range_begin(const char *name, const char *type)
{
    if (UNLIKELY(!collecting()))
        return;
    termsight_range_begin_id(termsight_name(name), type ? termsight_name(type) : TS_STR_NONE);
}

/* Ends the innermost open range; records it when `record`. */
static inline void range_end(int record)
{
    if (UNLIKELY(!collecting()) || !same_window(0) || UNLIKELY(!hot.depth))
        return; /* not collecting, or the range began before this window, or never */
    uint32_t d = --hot.depth;
    const range_hooks *h = atomic_load_explicit(&range_hooks_on, memory_order_acquire);
    if (UNLIKELY(h))
        h->pop();
    thread_block *b = hot.block;
    if (!b || !b->nframes || b->frames[b->nframes - 1].depth != d)
        return; /* deeper than the frames kept */
    frame *f = &b->frames[--b->nframes];
    if (b->generation != atomic_load_explicit(&ts_generation, memory_order_relaxed))
        return;
    if (LIKELY(b->w.lane)) {
        /* The enclosing range is the innermost open one again (none kept: none shown). */
        const frame *up = b->nframes ? &b->frames[b->nframes - 1] : NULL;
        lane_open_set(&b->w, up ? d : 0, up ? up->name : TS_STR_NONE, hot.window,
                      up ? up->begin_ns : 0);
    }
    if (!record)
        return;
    ts_event ev = {.kind = TS_KIND_OP_RANGE,
                   .device = TS_DEVICE_HOST,
                   .aux = d,
                   .name = f->name,
                   .type = f->type,
                   .corr = f->corr,
                   .begin_ns = f->begin_ns,
                   .end_ns = now(),
                   .v0 = f->flops};
    if (LIKELY(b->w.lane) || (b = block()))
        emit(b, &ev);
}

void termsight_range_end(void)
{
    range_end(1);
}

void termsight_range_drop(void)
{
    range_end(0);
}

void termsight_range_flops(uint64_t flops)
{
    thread_block *b = hot.block;
    if (b && same_window(0) && b->nframes && b->frames[b->nframes - 1].depth + 1 == hot.depth)
        b->frames[b->nframes - 1].flops = flops;
}

/* A whole interval with the caller's timestamps, at the thread's current depth. */
static void emit_complete(uint16_t kind, uint16_t flags, uint32_t name, uint32_t type,
                          uint64_t begin_ns, uint64_t end_ns, uint64_t v0)
{
    if (UNLIKELY(!collecting()))
        return;
    thread_block *b = block();
    if (UNLIKELY(!b))
        return;
    ts_event ev = {.kind = kind,
                   .flags = flags,
                   .device = TS_DEVICE_HOST,
                   .aux = hot.depth,
                   .name = name,
                   .type = type,
                   .begin_ns = begin_ns,
                   .end_ns = end_ns < begin_ns ? begin_ns : end_ns,
                   .v0 = v0};
    emit(b, &ev);
}

void termsight_range_complete(uint32_t name, uint32_t type, uint64_t begin_ns, uint64_t end_ns,
                              uint64_t flops)
{
    emit_complete(TS_KIND_OP_RANGE, 0, name, type, begin_ns, end_ns, flops);
}

void termsight_comm_complete(uint32_t name, uint32_t type, uint64_t begin_ns, uint64_t end_ns,
                             uint64_t bytes)
{
    emit_complete(TS_KIND_COMM_OP, TS_EF_COMM, name, type, begin_ns, end_ns, bytes);
}

uint64_t termsight_comm_issue(uint32_t name, uint64_t begin_ns)
{
    termsight_session *s = session_current();
    if (!s)
        return 0;
    uint64_t t = inflight_comm_issue(s->seg, &s->comm_claims, name, begin_ns);
    /* The session in the ticket's top bits: one from an ended session is not this one's. */
    return t ? t ^ (uint64_t)(s->generation & 0xffffu) << 16 : 0;
}

void termsight_comm_done(uint64_t ticket)
{
    termsight_session *s = session_current();
    if (!s || !ticket)
        return;
    inflight_comm_done(s->seg, &s->comm_claims, ticket ^ (uint64_t)(s->generation & 0xffffu) << 16);
}

int termsight_stacks_signal(int signo)
{
    termsight_session *s = session_current();
    if (!s)
        return TERMSIGHT_E_NO_SESSION;
    if (signo && (signo < SIGRTMIN || signo > SIGRTMAX))
        return TERMSIGHT_E_INVALID; /* a real-time signal: no other is sent by termsight hang */
    atomic_store_explicit(&segment_header(s->seg)->stacks_signal, signo, memory_order_release);
    return TERMSIGHT_OK;
}

/* ---- Steps, phases, marks -------------------------------------------------------------- */

uint64_t termsight_step_begin(void)
{
    termsight_session *s = session_current();
    if (!s)
        return 0;
    /* Steps are numbered whether or not a window is open, so numbers match the training's. */
    uint64_t n = atomic_fetch_add_explicit(&s->step, 1, memory_order_relaxed) + 1;
    if (UNLIKELY(s->windows.steps_to))
        window_step_begin(s, n);
    if (collecting())
        emit_instant(TS_KIND_STEP_BEGIN, TS_STR_NONE, 0, n, 0, 0);
    return n;
}

void termsight_step_end(void)
{
    termsight_session *s = session_current();
    if (!s || (!collecting() && !s->windows.steps_to))
        return;
    uint64_t n = atomic_load_explicit(&s->step, memory_order_relaxed);
    if (collecting())
        emit_instant(TS_KIND_STEP_END, TS_STR_NONE, 0, n, 0, 0);
    if (UNLIKELY(s->windows.steps_to))
        window_step_end(s, n);
}

void termsight_phase_mark(termsight_phase phase)
{
    if (UNLIKELY(!collecting()))
        return;
    if (phase < TERMSIGHT_FORWARD_START || phase > TERMSIGHT_EVAL_END)
        return;
    emit_instant(TS_KIND_PHASE, TS_STR_NONE, (uint32_t)phase, 0, 0, 0);
}

void termsight_mark(const char *text)
{
    if (UNLIKELY(!collecting()))
        return;
    emit_instant(TS_KIND_MARK, text ? termsight_name(text) : TS_STR_NONE, 0, 0, 0, 0);
}

void termsight_counter_id(uint32_t name, double value)
{
    if (UNLIKELY(!collecting()))
        return;
    uint64_t bits;
    memcpy(&bits, &value, sizeof bits);
    emit_instant(TS_KIND_COUNTER, name, 0, bits, 0, TS_EF_DOUBLE);
}

void termsight_counter(const char *name, double value)
{
    if (UNLIKELY(!collecting()))
        return;
    termsight_counter_id(termsight_name(name), value);
}

/* ---- Queues ---------------------------------------------------------------------------- */

uint32_t termsight_queue_register(const char *name, uint64_t capacity, termsight_queue_role role,
                                  const char *producer, const char *consumer)
{
    termsight_session *s = session_current();
    if (!s || !name)
        return 0;
    queue_slot q = {.name = termsight_name(name),
                    .producer = producer ? termsight_name(producer) : TS_STR_NONE,
                    .consumer = consumer ? termsight_name(consumer) : TS_STR_NONE,
                    .role = (uint32_t)role,
                    .capacity = capacity};
    pthread_mutex_lock(&s->meta);
    uint32_t n = atomic_load(&s->queue_count);
    if (n == TS_MAX_QUEUES) {
        int first = !s->queue_table_full;
        s->queue_table_full = 1;
        pthread_mutex_unlock(&s->meta);
        if (first) /* said once: the queue's sizes will not be recorded */
            fprintf(stderr,
                    "termsight: the queue table is full (%d queues): queue \"%s\" and later ones "
                    "are not recorded (register a queue once and reuse its handle)\n",
                    TS_MAX_QUEUES, name);
        return 0;
    }
    s->queues[n] = q;
    atomic_store_explicit(&s->queue_count, n + 1, memory_order_release);
    pthread_mutex_unlock(&s->meta);
    if (collecting())
        emit_instant(TS_KIND_QUEUE_INFO, q.name, q.role, capacity,
                     (uint64_t)q.producer << 32 | q.consumer, 0);
    return n + 1;
}

void termsight_queue_size(uint32_t queue, uint64_t size)
{
    if (UNLIKELY(!collecting()))
        return;
    termsight_session *s = session_current();
    if (!s || !queue || queue > atomic_load_explicit(&s->queue_count, memory_order_acquire))
        return;
    const queue_slot *q = &s->queues[queue - 1];
    emit_instant(TS_KIND_QUEUE_SAMPLE, q->name, q->role, size, q->capacity, 0);
}

/* ---- Memory and threads ---------------------------------------------------------------- */

void termsight_memory_alloc(const char *name, uint64_t address, uint64_t bytes, int device)
{
    if (UNLIKELY(!collecting()))
        return;
    thread_block *b = block();
    if (!b)
        return;
    uint64_t t = now();
    ts_event ev = {.kind = device < 0 ? TS_KIND_HOST_ALLOC : TS_KIND_DEVMEM_ALLOC,
                   .device = device < 0 ? TS_DEVICE_HOST : (uint32_t)device,
                   .name = name ? termsight_name(name) : TS_STR_NONE,
                   .begin_ns = t,
                   .end_ns = t,
                   .v0 = bytes,
                   .v1 = address};
    emit(b, &ev);
}

void termsight_memory_free(uint64_t address, uint64_t bytes, int device)
{
    if (UNLIKELY(!collecting()))
        return;
    thread_block *b = block();
    if (!b)
        return;
    uint64_t t = now();
    ts_event ev = {.kind = device < 0 ? TS_KIND_HOST_FREE : TS_KIND_DEVMEM_FREE,
                   .device = device < 0 ? TS_DEVICE_HOST : (uint32_t)device,
                   .begin_ns = t,
                   .end_ns = t,
                   .v0 = bytes,
                   .v1 = address};
    emit(b, &ev);
}

void termsight_thread_name(const char *name)
{
    if (!name || !session_current())
        return;
    api_thread_name_tid((uint32_t)gettid(), termsight_name(name));
}

/* A process's pid is its main thread's id: named in the same table, which the analysis reads for
 * threads and child processes alike. */
void termsight_process_name(uint32_t pid, const char *name)
{
    if (!name || !pid || !session_current())
        return;
    api_thread_name_tid(pid, termsight_name(name));
}

uint32_t api_tid(void)
{
    thread_block *b = hot.block;
    return b ? b->tid : (uint32_t)gettid();
}

void api_emit(ts_event *ev)
{
    if (UNLIKELY(!collecting()))
        return;
    thread_block *b = block();
    if (LIKELY(b))
        lane_push(&b->w, ev);
}

void api_thread_name_tid(uint32_t tid, uint32_t id)
{
    termsight_session *s = session_current();
    if (!s)
        return;
    pthread_mutex_lock(&s->meta);
    uint32_t i = 0;
    while (i < s->thread_count && s->threads[i].tid != tid)
        i++;
    if (i < TS_MAX_THREAD_NAMES) {
        s->threads[i].tid = tid;
        s->threads[i].name = id;
        if (i == s->thread_count)
            s->thread_count++;
    }
    pthread_mutex_unlock(&s->meta);
    if (collecting()) {
        uint64_t t = now();
        ts_event ev = {.kind = TS_KIND_THREAD_NAME,
                       .tid = tid,
                       .device = TS_DEVICE_HOST,
                       .name = id,
                       .begin_ns = t,
                       .end_ns = t};
        api_emit(&ev);
    }
}
