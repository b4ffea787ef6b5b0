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
 * PyTorch's profiler pushes its own ids under CUSTOM0 and CUSTOM1 (cupti_internal.h). */
#include "cupti_internal.h"

#include <dlfcn.h>
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
        uint64_t now = tsclock_now(&ts_clock);
        ts_event ev = {.kind = TS_KIND_MARK,
                       .device = TS_DEVICE_HOST,
                       .name = strtab_intern(s->names, status, strlen(status), NULL),
                       .begin_ns = now,
                       .end_ns = now};
        pthread_mutex_lock(&s->drain);
        recorder_append_locked(s, &ev, 1);
        pthread_mutex_unlock(&s->drain);
    }
    return -1;
}

/* ---- Correlation map and classification (no CUPTI needed) ----------------------------- */

void cupti_corrmap_put(cupti_corrmap *m, uint32_t corr, uint32_t op)
{
    m->slot[corr & (CUPTI_CORR_SLOTS - 1)].corr = corr;
    m->slot[corr & (CUPTI_CORR_SLOTS - 1)].op = op;
}

uint32_t cupti_corrmap_get(const cupti_corrmap *m, uint32_t corr)
{
    const __typeof__(m->slot[0]) *e = &m->slot[corr & (CUPTI_CORR_SLOTS - 1)];
    return e->corr == corr ? e->op : TS_STR_NONE;
}

int cupti_is_nccl(const char *name)
{
    return name && (!strncmp(name, "nccl", 4) || strstr(name, "ncclKernel") ||
                    strstr(name, "ncclDevKernel"));
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

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>

/* ---- Loading ---------------------------------------------------------------------------- */

static cupti_api loaded;
static const char *load_why;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

/* The path of a libcupti the process holds already (PyTorch's libtorch_cuda links one), or "". */
static int find_loaded(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    const char *name = info->dlpi_name, *base = name ? strrchr(name, '/') : NULL;
    base = base ? base + 1 : name;
    if (!base || strncmp(base, "libcupti.so", 11) != 0)
        return 0;
    snprintf(data, PATH_MAX, "%s", name);
    return 1;
}

static char lib_path[PATH_MAX]; /* the copy in use, for the status line */
static int lib_was_loaded;      /* the program had loaded it */

static void *open_lib(void)
{
    static const char *const names[] = {"libcupti.so.13", "libcupti.so"};
    static const char *const dirs[] = {"extras/CUPTI/lib64", "lib64", "lib"};
    /* A second copy of CUPTI in one process leaves the first one's client (torch.profiler)
     * without records: the program's own copy is the one to share. */
    char loaded_path[PATH_MAX] = "";
    dl_iterate_phdr(find_loaded, loaded_path);
    if (*loaded_path) {
        void *lib = dlopen(loaded_path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
        if (lib) {
            snprintf(lib_path, sizeof lib_path, "%s", loaded_path);
            lib_was_loaded = 1;
            return lib;
        }
    }
    const char *explicit = getenv("TERMSIGHT_CUPTI_LIB");
    if (explicit && *explicit) {
        snprintf(lib_path, sizeof lib_path, "%s", explicit);
        return dlopen(explicit, RTLD_NOW | RTLD_LOCAL);
    }
    const char *homes[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH")};
    char path[4096];
    for (size_t h = 0; h < 2; h++) {
        if (!homes[h] || !*homes[h])
            continue;
        for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++)
            for (size_t n = 0; n < sizeof names / sizeof names[0]; n++) {
                if (snprintf(path, sizeof path, "%s/%s/%s", homes[h], dirs[d], names[n]) >=
                    (int)sizeof path)
                    continue;
                void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
                if (lib) {
                    snprintf(lib_path, sizeof lib_path, "%s", path);
                    return lib;
                }
            }
    }
    for (size_t n = 0; n < sizeof names / sizeof names[0]; n++) {
        void *lib = dlopen(names[n], RTLD_NOW | RTLD_LOCAL);
        if (lib) {
            snprintf(lib_path, sizeof lib_path, "%s", names[n]);
            return lib;
        }
    }
    snprintf(lib_path, sizeof lib_path, "/usr/local/cuda/lib64/libcupti.so.13");
    return dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
}

static void load(void)
{
    void *lib = open_lib();
    if (!lib) {
        const char *e = dlerror();
        static char why[200];
        snprintf(why, sizeof why, "cannot load libcupti (%s)", e ? e : "not found");
        load_why = why;
        return;
    }
    /* One row per symbol; optional ones may be missing in older versions. */
    static const struct {
        const char *name;
        size_t offset;
        int optional;
    } syms[] = {
        {"cuptiGetVersion", offsetof(cupti_api, get_version), 0},
        {"cuptiActivityRegisterCallbacks", offsetof(cupti_api, register_callbacks), 0},
        {"cuptiActivityEnable", offsetof(cupti_api, enable), 0},
        {"cuptiActivityDisable", offsetof(cupti_api, disable), 0},
        {"cuptiActivityFlushAll", offsetof(cupti_api, flush_all), 0},
        {"cuptiActivityGetNextRecord", offsetof(cupti_api, get_next_record), 0},
        {"cuptiActivityGetNumDroppedRecords", offsetof(cupti_api, get_num_dropped), 0},
        {"cuptiActivityRegisterTimestampCallback", offsetof(cupti_api, register_timestamp), 0},
        {"cuptiSetThreadIdType", offsetof(cupti_api, set_thread_id_type), 0},
        {"cuptiActivityPushExternalCorrelationId", offsetof(cupti_api, push_external), 0},
        {"cuptiActivityPopExternalCorrelationId", offsetof(cupti_api, pop_external), 0},
        {"cuptiSubscribe", offsetof(cupti_api, subscribe), 0},
        {"cuptiUnsubscribe", offsetof(cupti_api, unsubscribe), 0},
        {"cuptiGetResultString", offsetof(cupti_api, get_result_string), 0},
        {"cuptiGetCallbackName", offsetof(cupti_api, get_callback_name), 1},
        {"cuptiActivityFlushPeriod", offsetof(cupti_api, flush_period), 1},
    };
    cupti_api api = {0};
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        void *fn = dlsym(lib, syms[i].name);
        if (!fn && !syms[i].optional) {
            static char why[200];
            snprintf(why, sizeof why, "libcupti lacks %s", syms[i].name);
            load_why = why;
            dlclose(lib);
            return;
        }
        memcpy((char *)&api + syms[i].offset, &fn, sizeof fn);
    }
    loaded = api;
    load_why = NULL;
}

const cupti_api *cupti_api_load(const char **why)
{
    pthread_once(&load_once, load);
    if (why)
        *why = load_why;
    return load_why ? NULL : &loaded;
}

/* ---- Translation ------------------------------------------------------------------------- */

static uint32_t intern(const cupti_sink *sink, const char *name, int *truncated)
{
    if (!name || !*name)
        return TS_STR_NONE;
    return sink->intern(sink->ctx, name, strlen(name), truncated);
}

/* Runtime and driver API names: CUPTI's name of (domain, cbid), interned once per session
 * through the sink's cache (there are one or two API records per launch), else every time. */
static uint32_t api_name(const cupti_api *api, const cupti_sink *sink, CUpti_CallbackDomain dom,
                         uint32_t cbid)
{
    uint32_t *slot = sink->api_names && cbid < CUPTI_API_NAMES
                         ? &sink->api_names->id[dom == CUPTI_CB_DOMAIN_RUNTIME_API][cbid]
                         : NULL;
    if (slot && *slot != TS_STR_NONE)
        return *slot;
    const char *name = NULL;
    if (!api->get_callback_name || api->get_callback_name(dom, cbid, &name) != CUPTI_SUCCESS)
        return TS_STR_NONE;
    uint32_t id = intern(sink, name, NULL);
    if (slot && id != TS_STR_OVERFLOW)
        *slot = id;
    return id;
}

/* The fields every device-side record shares: where it ran, when, and the operator it was
 * launched under (through its correlation id). */
static void device_fields(ts_event *ev, const cupti_corrmap *map, uint16_t kind, uint32_t stream,
                          uint32_t device, uint32_t corr, uint64_t start, uint64_t end)
{
    ev->kind = kind;
    ev->tid = stream;
    ev->device = device;
    ev->corr = corr;
    ev->type = cupti_corrmap_get(map, corr);
    ev->begin_ns = start;
    ev->end_ns = end;
}

/* 1: ev filled; 0: not a kind we keep. */
static int translate_kind(const cupti_api *api, const CUpti_Activity *rec, cupti_corrmap *map,
                          const cupti_sink *sink, ts_event *ev)
{
    int trunc = 0;
    memset(ev, 0, sizeof *ev);
    switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const CUpti_ActivityKernel10 *k = (const void *)rec;
        device_fields(ev, map, TS_KIND_KERNEL, k->streamId, k->deviceId, k->correlationId, k->start,
                      k->end);
        ev->name = intern(sink, k->name, &trunc);
        ev->flags =
            (uint16_t)((trunc ? TS_EF_TRUNCATED : 0) | (cupti_is_nccl(k->name) ? TS_EF_COMM : 0));
        ev->aux = k->contextId;
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *c = (const void *)rec;
        device_fields(ev, map, TS_KIND_MEMCPY, c->streamId, c->deviceId, c->correlationId, c->start,
                      c->end);
        ev->aux = c->copyKind;
        ev->v0 = c->bytes;
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {
        const CUpti_ActivityMemcpyPtoP4 *c = (const void *)rec;
        device_fields(ev, map, TS_KIND_MEMCPY, c->streamId, c->deviceId, c->correlationId, c->start,
                      c->end);
        ev->aux = c->copyKind;
        ev->v0 = c->bytes;
        ev->v1 = (uint64_t)c->srcDeviceId << 32 | c->dstDeviceId; /* peer copy: src, dst */
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *m = (const void *)rec;
        device_fields(ev, map, TS_KIND_MEMSET, m->streamId, m->deviceId, m->correlationId, m->start,
                      m->end);
        ev->aux = m->memoryKind;
        ev->v0 = m->bytes;
        ev->v1 = m->value;
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_MEMORY2: {
        const CUpti_ActivityMemory4 *m = (const void *)rec;
        if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION)
            ev->kind = TS_KIND_DEVMEM_ALLOC;
        else if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE)
            ev->kind = TS_KIND_DEVMEM_FREE;
        else
            return 0;
        ev->tid = m->streamId;
        ev->device = m->deviceId;
        ev->aux = m->memoryKind;
        ev->corr = m->correlationId;
        ev->type = cupti_corrmap_get(map, m->correlationId);
        ev->name = intern(sink, m->name, NULL);
        ev->begin_ns = ev->end_ns = m->timestamp;
        ev->v0 = m->bytes;
        ev->v1 = m->address;
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
        const CUpti_ActivityAPI *a = (const void *)rec;
        CUpti_CallbackDomain dom = rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME
                                       ? CUPTI_CB_DOMAIN_RUNTIME_API
                                       : CUPTI_CB_DOMAIN_DRIVER_API;
        ev->kind = TS_KIND_CUDA_API;
        ev->tid = a->threadId;
        ev->device = TS_DEVICE_HOST;
        ev->aux = a->cbid;
        ev->name = api_name(api, sink, dom, a->cbid);
        /* The launch's operator too: a kernel whose correlation record was evicted, or that
         * reached us first, still finds it through corr. */
        ev->type = cupti_corrmap_get(map, a->correlationId);
        ev->corr = a->correlationId;
        ev->begin_ns = a->start;
        ev->end_ns = a->end;
        ev->v0 = a->returnValue;
        ev->v1 = (uint64_t)dom; /* 1 driver, 2 runtime */
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        const CUpti_ActivitySynchronization2 *y = (const void *)rec;
        ev->kind = TS_KIND_SYNC;
        ev->tid = y->streamId;
        ev->device = TS_DEVICE_HOST; /* the record names a context, not a device */
        ev->aux = (uint32_t)y->type;
        ev->corr = y->correlationId;
        ev->begin_ns = y->start;
        ev->end_ns = y->end;
        ev->v0 = y->contextId;
        ev->v1 = y->cudaEventId;
        return 1;
    }
    default:
        return 0;
    }
}

/* 1: ev filled; 0: not a kind we keep; -1: a timed record that a forced flush returned
 * unfinished (CUPTI gives 0 for a time it does not have yet). */
static int translate_one(const cupti_api *api, const CUpti_Activity *rec, cupti_corrmap *map,
                         const cupti_sink *sink, ts_event *ev)
{
    if (!translate_kind(api, rec, map, sink, ev))
        return 0;
    int instant = ev->kind == TS_KIND_DEVMEM_ALLOC || ev->kind == TS_KIND_DEVMEM_FREE;
    if (!ev->begin_ns || (!instant && (!ev->end_ns || ev->end_ns < ev->begin_ns)))
        return -1;
    return 1;
}

/* One loss notice for count device records: dropped by CUPTI, or returned unfinished. */
static void device_lost(const cupti_sink *sink, uint64_t count)
{
    uint64_t now = tsclock_now(&ts_clock);
    ts_event ev = {.kind = TS_KIND_LOST,
                   .device = TS_DEVICE_HOST,
                   .aux = TS_LOST_DEVICE,
                   .begin_ns = now,
                   .end_ns = now,
                   .v0 = count};
    sink->emit(sink->ctx, &ev);
}

size_t cupti_translate(const cupti_api *api, uint8_t *buffer, size_t valid, cupti_corrmap *map,
                       const cupti_sink *sink)
{
    CUpti_Activity *rec = NULL;
    while (api->get_next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind != CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION)
            continue;
        const CUpti_ActivityExternalCorrelation *x = (const void *)rec;
        if (x->externalKind == CUPTI_EXTERNAL_KIND)
            cupti_corrmap_put(map, x->correlationId, (uint32_t)x->externalId);
    }
    size_t n = 0;
    uint64_t unfinished = 0;
    rec = NULL;
    while (api->get_next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
        ts_event ev;
        int r = translate_one(api, rec, map, sink, &ev);
        if (r < 0)
            unfinished++;
        if (r <= 0 || ev.begin_ns < sink->since_ns)
            continue;
        sink->emit(sink->ctx, &ev);
        n++;
    }
    if (unfinished) {
        device_lost(sink, unfinished);
        n++;
    }
    return n;
}

size_t cupti_buffer_done(const cupti_api *api, CUcontext context, uint32_t stream, uint8_t *buffer,
                         size_t valid, cupti_corrmap *map, const cupti_sink *sink)
{
    size_t n = valid ? cupti_translate(api, buffer, valid, map, sink) : 0;
    size_t dropped = 0;
    if (api->get_num_dropped(context, stream, &dropped) == CUPTI_SUCCESS && dropped) {
        device_lost(sink, dropped);
        n++;
    }
    return n;
}

/* ---- Buffers ----------------------------------------------------------------------------- */

/* CUPTI recommends 1-10 MB; Kineto uses 4 MB. At the cap CUPTI gets no buffer and counts the
 * records it drops, which we report as TS_LOST_DEVICE. */
#define BUFFER_BYTES (4u << 20)
#define BUFFER_CAP   8 /* 32 MB in all */

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *pool_free[BUFFER_CAP];
static size_t pool_nfree, pool_total;
static uint8_t *pool_ours[BUFFER_CAP]; /* every buffer allocated here and not freed */
/* CUPTI is lent to another client (cupti_lend): it gets no buffer of ours, so that it asks that
 * client's callbacks once they are registered; under pool_lock. */
static int lending;

/* The session records go to, and the correlation map; under sink_lock (taken before drain). */
static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
static termsight_session *bound;
static cupti_corrmap *corrmap;
static cupti_api_names *api_names; /* the bound session's interned API names */

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    uint8_t *b = NULL;
    pthread_mutex_lock(&pool_lock);
    if (lending)
        b = NULL;
    else if (pool_nfree)
        b = pool_free[--pool_nfree];
    else if (pool_total < BUFFER_CAP && (b = aligned_alloc(8, BUFFER_BYTES))) {
        for (size_t i = 0; i < BUFFER_CAP; i++)
            if (!pool_ours[i]) {
                pool_ours[i] = b;
                break;
            }
        pool_total++;
    }
    pthread_mutex_unlock(&pool_lock);
    *buffer = b;
    *size = b ? BUFFER_BYTES : 0;
    *max_records = 0;
}

/* A completed buffer back to the pool. One that is not ours (another CUPTI client's, which
 * CUPTI completed to our callbacks after we took them back) is left alone: its owner frees it. */
static void buffer_release(uint8_t *b)
{
    pthread_mutex_lock(&pool_lock);
    size_t i = 0;
    while (i < BUFFER_CAP && pool_ours[i] != b)
        i++;
    if (i == BUFFER_CAP) {
        b = NULL;
    } else if (pool_nfree < BUFFER_CAP) {
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

static void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t *buffer,
                                      size_t size, size_t valid)
{
    (void)size;
    const cupti_api *api = cupti_api_load(NULL);
    pthread_mutex_lock(&sink_lock);
    termsight_session *s = bound;
    /* Records completed outside a window (between a stop and the next start) are not kept, nor
     * those of a buffer completed in a window that began before it (sink.since_ns). */
    if (api && s && buffer && session_state(s) == TS_STATE_COLLECTING) {
        pthread_mutex_lock(&s->drain);
        cupti_sink sink = {.ctx = s,
                           .intern = sink_intern,
                           .emit = sink_emit,
                           .since_ns = s->window_begin_ns,
                           .api_names = api_names};
        cupti_buffer_done(api, context, stream, buffer, valid, corrmap, &sink);
        pthread_mutex_unlock(&s->drain);
    }
    pthread_mutex_unlock(&sink_lock);
    if (buffer)
        buffer_release(buffer);
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
    for (; on < sizeof kinds / sizeof kinds[0]; on++) {
        if ((r = api->enable(kinds[on])) == CUPTI_SUCCESS)
            continue;
        if (kinds[on] == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
            call = "cuptiActivityEnable(CONCURRENT_KERNEL)";
            goto fail_disable;
        }
        size_t n = strlen(without);
        snprintf(without + n, sizeof without - n, "%s%s", n ? ", " : "", kind_name(kinds[on]));
    }
    /* Completed buffers reach us about every second, not only when one fills: the live view's
     * kernels and a short window's. */
    if (api->flush_period)
        api->flush_period(1000);
    enabled = 1;
    snprintf(status, sizeof status, "CUDA collection on (CUPTI %u, %.120s%s%s%.100s)", version,
             lib_path, lib_was_loaded ? ", the program's own copy" : "",
             *without ? "; without " : "", without);
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
    if (enabled)
        cupti_api_load(NULL)->flush_all(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
    pthread_mutex_unlock(&start_lock);
}

void cupti_stop(termsight_session *s)
{
    pthread_mutex_lock(&start_lock);
    if (enabled) {
        const cupti_api *api = cupti_api_load(NULL);
        /* Forced: incomplete buffers too, the session's last records. */
        api->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
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

/* External correlation ids this thread pushed and has not popped. */
static __thread uint32_t pushed __attribute__((tls_model("initial-exec")));

static void cupti_range_push(uint32_t name)
{
    if (loaded.push_external(CUPTI_EXTERNAL_KIND, name) == CUPTI_SUCCESS)
        pushed++;
}

static void cupti_range_pop(void)
{
    uint64_t last;
    if (pushed && loaded.pop_external(CUPTI_EXTERNAL_KIND, &last) == CUPTI_SUCCESS)
        pushed--;
}

static void cupti_range_reset(void)
{
    uint64_t last;
    for (; pushed; pushed--)
        loaded.pop_external(CUPTI_EXTERNAL_KIND, &last);
}

const range_hooks cupti_range_hooks = {
    .push = cupti_range_push,
    .pop = cupti_range_pop,
    .reset = cupti_range_reset,
};

#endif
