/* cupti: CUDA activity (kernels, copies, memsets, device memory, API calls, synchronization)
 * through CUPTI's activity API.
 *
 * libcupti is dlopen'ed into a table of function pointers (nvtop's vendor tables), so the library
 * builds and runs where CUDA is absent: then, and on any CUPTI failure (999 without a driver,
 * another subscriber under Nsight), one notice "CUDA collection off: ..." and the rest of the
 * collection goes on. Records reach us in buffers from a bounded pool; the completion callback
 * (CUPTI's thread, or the thread that flushes) translates them into events and appends them to
 * the collector's own lane under the drain lock, never on a training thread's hot path.
 *
 * One clock: CUPTI stamps records with tsclock_now(&ts_clock) through the timestamp callback,
 * registered before any kind is enabled. Attribution: the range hooks push the innermost range's
 * name id as an external correlation id; EXTERNAL_CORRELATION records map each runtime
 * correlation id to it, and kernels, copies and memsets carry it in `type`. The kind is CUSTOM2:
 * PyTorch's profiler pushes its own ids under CUSTOM0 and CUSTOM1 (cupti_internal.h).
 *
 * Here: the status line, the buffer pool, starting and stopping, the range hooks. Loading the
 * library: cupti_load.c; records into events: cupti_translate.c. */
#include "cupti_internal.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static char status[384] = "CUDA collection off: not started";
static pthread_mutex_t status_lock = PTHREAD_MUTEX_INITIALIZER;
static int said; /* under status_lock */

const char *cupti_status(void)
{
    return status;
}

/* A mark with text into s's recording; under s->drain. */
static void mark_locked(termsight_session *s, const char *text, size_t len)
{
    uint64_t now = tsclock_now(&ts_clock);
    ts_event ev = {.kind = TS_KIND_MARK,
                   .device = TS_DEVICE_HOST,
                   .name = strtab_intern(s->names, text, len, NULL),
                   .begin_ns = now,
                   .end_ns = now};
    recorder_append_locked(s, &ev, 1);
}

/* Says why CUDA collection is off, once per process: a line on stderr, and a mark when a window
 * is open (cupti_status() is there for the window metadata). */
static int off(termsight_session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int off(termsight_session *s, const char *fmt, ...)
{
    pthread_mutex_lock(&status_lock);
    int first = !said;
    said = 1;
    if (first) {
        va_list ap;
        va_start(ap, fmt);
        int n = snprintf(status, sizeof status, "CUDA collection off: ");
        vsnprintf(status + n, sizeof status - (size_t)n, fmt, ap);
        va_end(ap);
        fprintf(stderr, "termsight: %s\n", status);
    }
    pthread_mutex_unlock(&status_lock);
    if (first && s && session_state(s) == TS_STATE_COLLECTING) {
        pthread_mutex_lock(&s->drain);
        mark_locked(s, status, strlen(status));
        pthread_mutex_unlock(&s->drain);
    }
    return -1;
}

/* RTLD_NOLOAD finds the driver only if something in the process loaded it already: a CPU-only
 * program is left alone, and says nothing about CUDA. */
int cupti_process_uses_cuda(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        return 0;
    dlclose(h);
    return 1;
}

#if !TERMSIGHT_HAVE_CUPTI

int cupti_start(termsight_session *s)
{
    return off(s, "termsight was built without CUPTI headers");
}

void cupti_flush(termsight_session *s, int forced)
{
    (void)s, (void)forced;
}

void cupti_stop(termsight_session *s)
{
    (void)s;
}

int cupti_lend(termsight_session *s, int lent)
{
    (void)s, (void)lent;
    return 0;
}

void cupti_fork_child(void) {}

#else

#include <stdlib.h>

/* ---- Buffers ----------------------------------------------------------------------------- */

/* CUPTI recommends 1-10 MB; Kineto uses 4 MB. CUDA 13 gives each thread that uses CUDA its own
 * buffer, so the pool grows on demand up to a bound (TERMSIGHT_CUDA_BUFFERS, default
 * CUPTI_POOL_DEFAULT: 256 MB); at the bound CUPTI gets no buffer and counts the records it drops,
 * which we report as TS_LOST_DEVICE, and the refusals are counted (cupti_pool_refused) and named
 * in a mark (say_refused). */
#define BUFFER_BYTES (4u << 20)

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t pool_cap = CUPTI_POOL_DEFAULT;
static uint8_t *pool_free[CUPTI_POOL_MAX];
static size_t pool_nfree, pool_total;
static uint8_t *pool_ours[CUPTI_POOL_MAX]; /* every buffer allocated here and not freed */
static _Atomic uint64_t pool_refused;
/* CUPTI is lent to another client (cupti_lend): it gets no buffer of ours, so that it asks that
 * client's callbacks once they are registered; under pool_lock. */
static int lending;

/* The session records go to, and the correlation map; under sink_lock (taken before drain). */
static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
static termsight_session *bound;
static cupti_corrmap *corrmap;
static cupti_api_names *api_names; /* the bound session's interned API names */
static int keep_driver;            /* TERMSIGHT_CUDA_DRIVER_API=1 */
static uint64_t refused_said;      /* under sink_lock: the refusals a mark has named */

size_t cupti_pool_bound(size_t cap)
{
    pthread_mutex_lock(&pool_lock);
    pool_cap = cap < 1 ? 1 : cap > CUPTI_POOL_MAX ? CUPTI_POOL_MAX : cap;
    cap = pool_cap;
    pthread_mutex_unlock(&pool_lock);
    return cap;
}

uint64_t cupti_pool_refused(void)
{
    return atomic_load_explicit(&pool_refused, memory_order_relaxed);
}

uint8_t *cupti_buffer_get(void)
{
    uint8_t *b = NULL;
    int refused = 0;
    pthread_mutex_lock(&pool_lock);
    if (lending)
        b = NULL;
    else if (pool_nfree)
        b = pool_free[--pool_nfree];
    else if (pool_total >= pool_cap)
        refused = 1;
    else if ((b = aligned_alloc(8, BUFFER_BYTES))) {
        for (size_t i = 0; i < CUPTI_POOL_MAX; i++)
            if (!pool_ours[i]) {
                pool_ours[i] = b;
                break;
            }
        pool_total++;
    }
    pthread_mutex_unlock(&pool_lock);
    if (refused)
        atomic_fetch_add_explicit(&pool_refused, 1, memory_order_relaxed);
    return b;
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    uint8_t *b = cupti_buffer_get();
    *buffer = b;
    *size = b ? BUFFER_BYTES : 0;
    *max_records = 0;
}

/* A completed buffer back to the pool. One that is not ours (another CUPTI client's, which
 * CUPTI completed to our callbacks after we took them back) is left alone: its owner frees it.
 * Kept for the next request while the pool is within its bound, freed past it. */
void cupti_buffer_put(uint8_t *b)
{
    pthread_mutex_lock(&pool_lock);
    size_t i = 0;
    while (i < CUPTI_POOL_MAX && pool_ours[i] != b)
        i++;
    if (!b || i == CUPTI_POOL_MAX) {
        b = NULL;
    } else if (pool_total <= pool_cap && pool_nfree < CUPTI_POOL_MAX) {
        pool_free[pool_nfree++] = b;
        b = NULL;
    } else {
        pool_ours[i] = NULL;
        pool_total--;
    }
    pthread_mutex_unlock(&pool_lock);
    free(b);
}

static void set_lending(int on)
{
    pthread_mutex_lock(&pool_lock);
    lending = on;
    pthread_mutex_unlock(&pool_lock);
}

static uint32_t sink_intern(void *ctx, const char *bytes, size_t len, int *truncated)
{
    termsight_session *s = ctx;
    return strtab_intern(s->names, bytes, len, truncated);
}

static void sink_emit(void *ctx, const ts_event *ev)
{
    recorder_append_locked(ctx, ev, 1);
    recorder_count_program_locked(ctx, 1);
}

/* RUNTIME or DRIVER records enabled: device records wait for their launch's. */
static _Atomic int launches_on;

/* The sink into s; under sink_lock and s->drain. */
static cupti_sink sink_of(termsight_session *s)
{
    return (cupti_sink){.ctx = s,
                        .intern = sink_intern,
                        .emit = sink_emit,
                        .since_ns = s->window_begin_ns,
                        .api_names = api_names,
                        .wait_for_launch = atomic_load_explicit(&launches_on, memory_order_relaxed),
                        .keep_driver = keep_driver};
}

/* The bound session when it is collecting, with sink_lock and its drain lock taken; else NULL
 * with sink_lock taken. */
static termsight_session *sink_enter(void)
{
    pthread_mutex_lock(&sink_lock);
    termsight_session *s = bound;
    if (!s || !corrmap || session_state(s) != TS_STATE_COLLECTING)
        return NULL;
    pthread_mutex_lock(&s->drain);
    return s;
}

static void sink_leave(termsight_session *s)
{
    if (s)
        pthread_mutex_unlock(&s->drain);
    pthread_mutex_unlock(&sink_lock);
}

/* Requests refused at the pool's bound since the last notice: one mark that says so (CUPTI
 * counts the records it dropped meanwhile, reported as lost). Under sink_lock and drain. */
static void say_refused(termsight_session *s)
{
    uint64_t refused = cupti_pool_refused();
    if (refused == refused_said)
        return;
    refused_said = refused;
    char text[200];
    pthread_mutex_lock(&pool_lock);
    size_t cap = pool_cap;
    pthread_mutex_unlock(&pool_lock);
    int len =
        snprintf(text, sizeof text,
                 "CUDA activity buffers at their bound (%zu of 4 MB, TERMSIGHT_CUDA_BUFFERS): "
                 "%" PRIu64 " requests refused, CUPTI drops records meanwhile",
                 cap, refused);
    mark_locked(s, text, len > 0 && (size_t)len < sizeof text ? (size_t)len : strlen(text));
}

static void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t *buffer,
                                      size_t size, size_t valid)
{
    (void)size;
    const cupti_api *api = cupti_api_load(NULL);
    /* Records completed outside a window (between a stop and the next start) are not kept, nor
     * those of a buffer completed in a window that began before it (sink.since_ns). */
    termsight_session *s = sink_enter();
    if (api && s && buffer) {
        cupti_sink sink = sink_of(s);
        cupti_buffer_done(api, context, stream, buffer, valid, corrmap, &sink);
        say_refused(s);
    }
    sink_leave(s);
    if (buffer)
        cupti_buffer_put(buffer);
}

/* After a forced flush no launch record is on its way: the records waiting for one go out. */
static void release_waiting(void)
{
    termsight_session *s = sink_enter();
    if (s) {
        cupti_sink sink = sink_of(s);
        cupti_release(corrmap, &sink);
    }
    sink_leave(s);
}

/* ---- Starting and stopping ---------------------------------------------------------------- */

static const CUpti_ActivityKind kinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMCPY2,
    CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_MEMORY2,
    CUPTI_ACTIVITY_KIND_RUNTIME,
    CUPTI_ACTIVITY_KIND_DRIVER,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
};

static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static int enabled; /* under start_lock: kinds enabled, callbacks registered */
static int failed;  /* under start_lock: said off once, not tried again */
static CUpti_SubscriberHandle subscriber;

static uint64_t CUPTIAPI clock_now(void)
{
    return tsclock_now(&ts_clock);
}

/* The subscription only claims CUPTI's single subscriber slot, so that another profiler already
 * there is found at once; it enables no callback. */
static void CUPTIAPI no_callback(void *data, CUpti_CallbackDomain dom, CUpti_CallbackId cbid,
                                 const void *info)
{
    (void)data, (void)dom, (void)cbid, (void)info;
}

static const char *result_text(const cupti_api *api, CUptiResult r)
{
    const char *t = NULL;
    if (api->get_result_string(r, &t) != CUPTI_SUCCESS || !t)
        t = "unknown error";
    return t;
}

static int fail_start(termsight_session *s, const cupti_api *api, const char *call, CUptiResult r)
{
    failed = 1;
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
        return off(s, "another CUDA profiler (Nsight, or a second CUPTI client) is attached");
    return off(s, "%s: %s (%d)%s", call, result_text(api, r), (int)r,
               r == CUPTI_ERROR_UNKNOWN ? ", no CUDA driver or GPU?" : "");
}

/* The session records go to; a new one starts the interned API names afresh. */
static void bind(termsight_session *s)
{
    pthread_mutex_lock(&sink_lock);
    if (s != bound && api_names)
        memset(api_names, 0, sizeof *api_names);
    if (s != bound && corrmap)
        corrmap->npending = 0; /* the old session's names */
    bound = s;
    pthread_mutex_unlock(&sink_lock);
}

static const char *kind_name(CUpti_ActivityKind k)
{
    switch (k) {
    case CUPTI_ACTIVITY_KIND_MEMCPY:
        return "copies";
    case CUPTI_ACTIVITY_KIND_MEMCPY2:
        return "peer copies";
    case CUPTI_ACTIVITY_KIND_MEMSET:
        return "memsets";
    case CUPTI_ACTIVITY_KIND_MEMORY2:
        return "device memory";
    case CUPTI_ACTIVITY_KIND_RUNTIME:
        return "runtime API";
    case CUPTI_ACTIVITY_KIND_DRIVER:
        return "driver API";
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
        return "synchronization";
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
        return "operators of kernels";
    default:
        return "another kind";
    }
}

/* Our clock, thread ids and buffers registered with CUPTI (at the start, and again after another
 * client had them). The clock first: records stamped before it would be on CUPTI's realtime
 * clock. */
static CUptiResult take(const cupti_api *api, const char **call)
{
    CUptiResult r;
    if ((r = api->register_timestamp(clock_now)) != CUPTI_SUCCESS)
        *call = "cuptiActivityRegisterTimestampCallback";
    else if ((r = api->set_thread_id_type(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM)) != CUPTI_SUCCESS)
        *call = "cuptiSetThreadIdType";
    else if ((r = api->register_callbacks(buffer_requested, buffer_completed)) != CUPTI_SUCCESS)
        *call = "cuptiActivityRegisterCallbacks";
    return r;
}

/* The status into the window's metadata (the "cuda" config, the last one counts) when s is
 * collecting; the window's first one was written before CUDA started. Under start_lock. */
static void say_status(termsight_session *s)
{
    if (!s || session_state(s) != TS_STATE_COLLECTING)
        return;
    pthread_mutex_lock(&s->drain);
    ts_event ev =
        session_marker(TS_KIND_CONFIG, session_intern(s, "cuda"), session_intern(s, status), 0);
    recorder_append_locked(s, &ev, 1);
    pthread_mutex_unlock(&s->drain);
}

int cupti_start(termsight_session *s)
{
    pthread_mutex_lock(&start_lock);
    if (enabled || failed) {
        if (enabled)
            bind(s);
        pthread_mutex_unlock(&start_lock);
        return enabled ? 0 : -1;
    }
    const char *why = NULL;
    const cupti_api *api = cupti_api_load(&why);
    if (!api) {
        failed = 1;
        pthread_mutex_unlock(&start_lock);
        return off(s, "%s", why);
    }
    if ((!corrmap && !(corrmap = calloc(1, sizeof *corrmap))) ||
        (!api_names && !(api_names = calloc(1, sizeof *api_names)))) {
        failed = 1;
        pthread_mutex_unlock(&start_lock);
        return off(s, "out of memory");
    }
    /* Options first: CUPTI may call back as soon as the callbacks are registered. */
    const char *env = getenv("TERMSIGHT_CUDA_DRIVER_API");
    keep_driver = env && !strcmp(env, "1");
    const char *bad_buffers = NULL;
    if ((env = getenv("TERMSIGHT_CUDA_BUFFERS")) && *env) {
        char *end;
        unsigned long n = strtoul(env, &end, 10);
        if (*end || n < 1 || n > CUPTI_POOL_MAX || *env == '-')
            bad_buffers = env;
        else
            cupti_pool_bound(n);
    }
    uint32_t version = 0;
    api->get_version(&version);
    CUptiResult r;
    const char *call;
    size_t on = 0;
    /* Another profiler already there (Nsight) holds CUPTI's one subscriber slot: found at once.
     * The slot is given back at once, for a client that comes later and needs it (PyTorch's
     * profiler subscribes). */
    if ((r = api->subscribe(&subscriber, no_callback, NULL)) != CUPTI_SUCCESS) {
        call = "cuptiSubscribe";
        goto fail;
    }
    api->unsubscribe(subscriber);
    if ((r = take(api, &call)) != CUPTI_SUCCESS)
        goto fail;
    bind(s);
    /* Kernels are the one kind collection cannot go without; another kind this CUPTI or
     * platform refuses is left off and named in the status. */
    char without[160] = "";
    int api_on = 0;
    for (; on < sizeof kinds / sizeof kinds[0]; on++) {
        if ((r = api->enable(kinds[on])) == CUPTI_SUCCESS) {
            api_on |=
                kinds[on] == CUPTI_ACTIVITY_KIND_RUNTIME || kinds[on] == CUPTI_ACTIVITY_KIND_DRIVER;
            continue;
        }
        if (kinds[on] == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
            call = "cuptiActivityEnable(CONCURRENT_KERNEL)";
            goto fail_disable;
        }
        size_t n = strlen(without);
        snprintf(without + n, sizeof without - n, "%s%s", n ? ", " : "", kind_name(kinds[on]));
    }
    atomic_store_explicit(&launches_on, api_on, memory_order_relaxed);
    /* Completed buffers reach us about every second, not only when one fills: the live view's
     * kernels and a short window's. */
    if (api->flush_period)
        api->flush_period(1000);
    enabled = 1;
    int programs = 0;
    const char *path = cupti_lib_path(&programs);
    int len = snprintf(status, sizeof status, "CUDA collection on (CUPTI %u, %.120s%s%s%.100s)",
                       version, path, programs ? ", the program's own copy" : "",
                       *without ? "; without " : "", without);
    if (bad_buffers && len > 0 && (size_t)len < sizeof status)
        snprintf(status + len, sizeof status - (size_t)len,
                 "; TERMSIGHT_CUDA_BUFFERS=%.16s is not a number from 1 to %d: %d buffers",
                 bad_buffers, CUPTI_POOL_MAX, CUPTI_POOL_DEFAULT);
    say_status(s);
    api_set_range_hooks(&cupti_range_hooks);
    pthread_mutex_unlock(&start_lock);
    return 0;

fail_disable:
    while (on--)
        api->disable(kinds[on]);
    bind(NULL);
fail:
    fail_start(s, api, call, r);
    pthread_mutex_unlock(&start_lock);
    return -1;
}

int cupti_lend(termsight_session *s, int lent)
{
    pthread_mutex_lock(&start_lock);
    if (!enabled) {
        pthread_mutex_unlock(&start_lock);
        return 0;
    }
    const cupti_api *api = cupti_api_load(NULL);
    const char *call = NULL;
    CUptiResult r = CUPTI_SUCCESS;
    if (lent) {
        /* Our buffers back first, and no new one: records the other client's window makes would
         * otherwise land in a buffer of ours that CUPTI already holds (the client sets its own
         * clock when it prepares). */
        set_lending(1);
        api->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        snprintf(status, sizeof status,
                 "CUDA collection lent to another CUPTI client "
                 "(torch.profiler): its kernels are not recorded here");
    } else {
        /* The other client registered its own buffers and clock and may have turned kinds off:
         * ours again, every kind on. */
        set_lending(0);
        r = take(api, &call);
        for (size_t i = 0; r == CUPTI_SUCCESS && i < sizeof kinds / sizeof kinds[0]; i++)
            if (api->enable(kinds[i]) != CUPTI_SUCCESS &&
                kinds[i] == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
                r = CUPTI_ERROR_UNKNOWN;
                call = "cuptiActivityEnable(CONCURRENT_KERNEL)";
            }
        if (r == CUPTI_SUCCESS)
            snprintf(status, sizeof status, "CUDA collection on again after another CUPTI client");
        else
            snprintf(status, sizeof status,
                     "CUDA collection off after another CUPTI client: %s: %s", call,
                     result_text(api, r));
    }
    say_status(s);
    pthread_mutex_unlock(&start_lock);
    return r == CUPTI_SUCCESS ? 0 : -1;
}

void cupti_flush(termsight_session *s, int forced)
{
    (void)s;
    pthread_mutex_lock(&start_lock);
    if (enabled) {
        cupti_api_load(NULL)->flush_all(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
        if (forced)
            release_waiting();
    }
    pthread_mutex_unlock(&start_lock);
}

void cupti_stop(termsight_session *s)
{
    pthread_mutex_lock(&start_lock);
    if (enabled) {
        const cupti_api *api = cupti_api_load(NULL);
        /* Forced: incomplete buffers too, the session's last records. */
        api->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        release_waiting();
        pthread_mutex_lock(&sink_lock);
        if (bound == s)
            bound = NULL;
        pthread_mutex_unlock(&sink_lock);
    }
    pthread_mutex_unlock(&start_lock);
}

void cupti_fork_child(void)
{
    /* Only this thread runs here; a lock another thread held at the fork stays held. */
    pthread_mutex_init(&start_lock, NULL);
    pthread_mutex_init(&sink_lock, NULL);
    pthread_mutex_init(&pool_lock, NULL);
    if (enabled)
        snprintf(status, sizeof status, "CUDA collection off: a forked child of a CUDA process");
    enabled = 0;
    failed = 1;
    bound = NULL;
}

/* ---- Range hooks ------------------------------------------------------------------------- */

/* What this thread pushed onto CUPTI's external correlation stack and has not popped, in order:
 * push/pop ranges (id 0) and NVTX start/end ranges (their id). CUPTI's stack is the thread's and
 * last in, first out; start/end ranges need not be, so one that ends below the top is taken out
 * and the entries above it pushed again, and the thread's launches always go to the innermost
 * range it has open. A start/end range that another thread ended cannot be popped from there
 * (the stack is this thread's): it leaves this one at this thread's next range call. Default TLS
 * model: the library may be dlopen'ed as an injection. */
#define HOOK_DEPTH   32

static __thread struct {
    uint32_t name;
    uint64_t id;
} hooked[HOOK_DEPTH];
static __thread uint32_t nhooked, hooked_over; /* over: pushes past HOOK_DEPTH, not made */

static const cupti_api *hook_api = &cupti_loaded;

void cupti_range_hooks_api(const cupti_api *api)
{
    hook_api = api ? api : &cupti_loaded;
}

static int hook_push(uint32_t name, uint64_t id)
{
    if (nhooked == HOOK_DEPTH ||
        hook_api->push_external(CUPTI_EXTERNAL_KIND, name) != CUPTI_SUCCESS)
        return 0;
    hooked[nhooked].name = name;
    hooked[nhooked++].id = id;
    return 1;
}

/* Takes entry i out: pops down to it, pushes back what was above. */
static void hook_remove(uint32_t i)
{
    uint64_t last;
    for (uint32_t k = nhooked; k > i; k--)
        hook_api->pop_external(CUPTI_EXTERNAL_KIND, &last);
    uint32_t n = nhooked;
    nhooked = i;
    for (uint32_t k = i + 1; k < n; k++)
        hook_push(hooked[k].name, hooked[k].id);
}

/* Start/end ranges another thread ended, out. */
static void hook_tidy(void)
{
    for (uint32_t i = nhooked; i-- > 0;)
        if (hooked[i].id && !nvtx_range_open(hooked[i].id))
            hook_remove(i);
}

static void cupti_range_push(uint32_t name)
{
    hook_tidy();
    if (nhooked == HOOK_DEPTH)
        hooked_over++;
    else
        hook_push(name, 0);
}

static void cupti_range_pop(void)
{
    hook_tidy();
    if (hooked_over) {
        hooked_over--;
        return;
    }
    for (uint32_t i = nhooked; i-- > 0;)
        if (!hooked[i].id) {
            hook_remove(i);
            return;
        }
}

static void cupti_range_start(uint32_t name, uint64_t id)
{
    hook_tidy();
    hook_push(name, id);
}

static void cupti_range_end(uint64_t id)
{
    for (uint32_t i = nhooked; i-- > 0;)
        if (hooked[i].id == id) {
            hook_remove(i);
            break;
        }
    hook_tidy();
}

static void cupti_range_reset(void)
{
    uint64_t last;
    for (; nhooked; nhooked--)
        hook_api->pop_external(CUPTI_EXTERNAL_KIND, &last);
    hooked_over = 0;
}

const range_hooks cupti_range_hooks = {
    .push = cupti_range_push,
    .pop = cupti_range_pop,
    .reset = cupti_range_reset,
    .start = cupti_range_start,
    .end = cupti_range_end,
};

#endif
