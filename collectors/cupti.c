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

/* ---- Correlation map and classification (no CUPTI needed) ----------------------------- */

/* The slot of corr, emptied for it when it held an older id. */
static __typeof__(((cupti_corrmap *)0)->slot[0]) *corr_slot(cupti_corrmap *m, uint32_t corr)
{
    __typeof__(m->slot[0]) *e = &m->slot[corr & (CUPTI_CORR_SLOTS - 1)];
    if (e->corr != corr)
        *e = (__typeof__(*e)){.corr = corr, .op = TS_STR_NONE};
    return e;
}

void cupti_corrmap_put(cupti_corrmap *m, uint32_t corr, uint32_t op)
{
    __typeof__(m->slot[0]) *e = corr_slot(m, corr);
    e->op = op;
    e->seen |= CUPTI_SEEN_EXTERNAL;
}

void cupti_corrmap_api(cupti_corrmap *m, uint32_t corr, uint32_t tid, int runtime)
{
    __typeof__(m->slot[0]) *e = corr_slot(m, corr);
    e->tid = tid;
    e->seen |= runtime ? CUPTI_SEEN_RUNTIME : CUPTI_SEEN_DRIVER;
}

static const __typeof__(((cupti_corrmap *)0)->slot[0]) *corr_find(const cupti_corrmap *m,
                                                                  uint32_t corr)
{
    const __typeof__(m->slot[0]) *e = &m->slot[corr & (CUPTI_CORR_SLOTS - 1)];
    return e->corr == corr && e->seen ? e : NULL;
}

uint32_t cupti_corrmap_get(const cupti_corrmap *m, uint32_t corr)
{
    const __typeof__(m->slot[0]) *e = corr_find(m, corr);
    return e ? e->op : TS_STR_NONE;
}

/* ---- Records that wait for their launch (no CUPTI needed) ------------------------------ */

static int device_kind(uint16_t kind)
{
    return kind == TS_KIND_KERNEL || kind == TS_KIND_MEMCPY || kind == TS_KIND_MEMSET ||
           kind == TS_KIND_DEVMEM_ALLOC || kind == TS_KIND_DEVMEM_FREE;
}

/* 1 when what ev waits for is known, and sets it: a device record's operator (its launch's
 * external correlation or API record seen: an operator, or none), a synchronization's thread
 * (its API record seen). 0: not yet. */
static int settle(const cupti_corrmap *m, ts_event *ev)
{
    if (device_kind(ev->kind)) {
        const __typeof__(m->slot[0]) *e = ev->corr ? corr_find(m, (uint32_t)ev->corr) : NULL;
        if (e)
            ev->type = e->op;
        return e || !ev->corr;
    }
    if (ev->kind == TS_KIND_SYNC) {
        const __typeof__(m->slot[0]) *e = corr_find(m, (uint32_t)ev->corr);
        if (!e || !(e->seen & (CUPTI_SEEN_RUNTIME | CUPTI_SEEN_DRIVER)))
            return 0;
        ev->tid = e->tid;
        ev->device = TS_DEVICE_HOST;
        return 1;
    }
    return 1;
}

#if TERMSIGHT_HAVE_CUPTI
static void learn_context(cupti_corrmap *m, uint32_t context, uint32_t device)
{
    for (size_t i = 0; i < CUPTI_CONTEXTS; i++)
        if (m->ctx[i].context == context + 1 || !m->ctx[i].context) {
            m->ctx[i].context = context + 1; /* 0: empty */
            m->ctx[i].device = device;
            return;
        }
}

#endif

/* A synchronization whose API record never came: on its stream's lane of the context's device
 * (v0: the context), when the stream and the device are known. 0: neither thread nor lane. */
static int sync_on_stream(const cupti_corrmap *m, ts_event *ev)
{
    if (ev->tid == UINT32_MAX)
        return 0;
    for (size_t i = 0; i < CUPTI_CONTEXTS && m->ctx[i].context; i++)
        if (m->ctx[i].context == (uint32_t)ev->v0 + 1) {
            ev->device = m->ctx[i].device;
            return 1;
        }
    return 0;
}

/* ev out, as it is: 1 emitted, 0 left out (before the window), -1 nowhere to put it. */
static int release_one(const cupti_corrmap *m, ts_event *ev, const cupti_sink *sink)
{
    if (!settle(m, ev) && ev->kind == TS_KIND_SYNC && !sync_on_stream(m, ev))
        return -1;
    if (ev->begin_ns < sink->since_ns)
        return 0;
    sink->emit(sink->ctx, ev);
    return 1;
}

static void device_lost(const cupti_sink *sink, uint64_t count);

/* The first k waiting records out as they are, the rest moved up; a synchronization with no
 * place is counted in one loss notice. Returns the events emitted. */
static size_t release_first(cupti_corrmap *m, uint32_t k, const cupti_sink *sink)
{
    size_t n = 0;
    uint64_t nowhere = 0;
    for (uint32_t i = 0; i < k; i++) {
        int r = release_one(m, &m->pending[i], sink);
        n += r > 0;
        nowhere += r < 0;
    }
    memmove(m->pending, m->pending + k, (m->npending - k) * sizeof *m->pending);
    memmove(m->waited, m->waited + k, (m->npending - k) * sizeof *m->waited);
    m->npending -= k;
    if (nowhere) {
        device_lost(sink, nowhere);
        n++;
    }
    return n;
}

size_t cupti_release(cupti_corrmap *m, const cupti_sink *sink)
{
    return release_first(m, m->npending, sink);
}

#if TERMSIGHT_HAVE_CUPTI
/* After a buffer's launches are known: emits the waiting records they settle, and those that
 * have waited too long (unattributed), keeping the others in order. *nowhere counts the
 * synchronizations that had no place. */
static size_t pending_settle(cupti_corrmap *m, const cupti_sink *sink, uint64_t *nowhere)
{
    size_t n = 0;
    uint32_t keep = 0;
    for (uint32_t i = 0; i < m->npending; i++) {
        ts_event *ev = &m->pending[i];
        if (settle(m, ev) || ++m->waited[i] > CUPTI_PENDING_BUFFERS) {
            int r = release_one(m, ev, sink);
            n += r > 0;
            *nowhere += r < 0;
            continue;
        }
        m->waited[keep] = m->waited[i];
        m->pending[keep++] = *ev;
    }
    m->npending = keep;
    return n;
}

/* ev waits for its launch; when the queue is full its older half goes out as it is (in one
 * move, not one per record). Returns the events emitted to make room. */
static size_t pending_add(cupti_corrmap *m, const ts_event *ev, const cupti_sink *sink)
{
    size_t n = m->npending == CUPTI_PENDING ? release_first(m, CUPTI_PENDING / 2, sink) : 0;
    m->pending[m->npending] = *ev;
    m->waited[m->npending++] = 0;
    return n;
}

/* A driver call that a runtime call made: CUPTI gives both the runtime call's correlation id
 * (the device records' documentation: "the driver and runtime API activity record that
 * launched" them), and the runtime record says it already. */
static int driver_under_runtime(const cupti_corrmap *m, const CUpti_Activity *rec)
{
    if (rec->kind != CUPTI_ACTIVITY_KIND_DRIVER)
        return 0;
    const __typeof__(m->slot[0]) *e = corr_find(m, ((const CUpti_ActivityAPI *)rec)->correlationId);
    return e && (e->seen & CUPTI_SEEN_RUNTIME);
}

#endif

/* One loss notice for count device records: dropped by CUPTI, returned unfinished, or with no
 * place. */
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
static void device_fields(ts_event *ev, cupti_corrmap *map, uint16_t kind, uint32_t stream,
                          uint32_t device, uint32_t context, uint32_t corr, uint64_t start,
                          uint64_t end)
{
    learn_context(map, context, device);
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
        device_fields(ev, map, TS_KIND_KERNEL, k->streamId, k->deviceId, k->contextId,
                      k->correlationId, k->start, k->end);
        ev->name = intern(sink, k->name, &trunc);
        ev->flags =
            (uint16_t)((trunc ? TS_EF_TRUNCATED : 0) | (cupti_is_nccl(k->name) ? TS_EF_COMM : 0));
        ev->aux = k->contextId;
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *c = (const void *)rec;
        device_fields(ev, map, TS_KIND_MEMCPY, c->streamId, c->deviceId, c->contextId,
                      c->correlationId, c->start, c->end);
        ev->aux = c->copyKind;
        ev->v0 = c->bytes;
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {
        const CUpti_ActivityMemcpyPtoP4 *c = (const void *)rec;
        device_fields(ev, map, TS_KIND_MEMCPY, c->streamId, c->deviceId, c->contextId,
                      c->correlationId, c->start, c->end);
        ev->aux = c->copyKind;
        ev->v0 = c->bytes;
        ev->v1 = (uint64_t)c->srcDeviceId << 32 | c->dstDeviceId; /* peer copy: src, dst */
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *m = (const void *)rec;
        device_fields(ev, map, TS_KIND_MEMSET, m->streamId, m->deviceId, m->contextId,
                      m->correlationId, m->start, m->end);
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
        /* CUPTI names no thread here: the thread is its API call's (settle), else the
         * stream's lane on the context's device (sync_on_stream). */
        ev->kind = TS_KIND_SYNC;
        ev->tid = y->streamId;
        ev->device = TS_DEVICE_HOST;
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

size_t cupti_translate(const cupti_api *api, uint8_t *buffer, size_t valid, cupti_corrmap *map,
                       const cupti_sink *sink)
{
    CUpti_Activity *rec = NULL;
    while (api->get_next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
            const CUpti_ActivityExternalCorrelation *x = (const void *)rec;
            if (x->externalKind == CUPTI_EXTERNAL_KIND)
                cupti_corrmap_put(map, x->correlationId, (uint32_t)x->externalId);
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME ||
                   rec->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
            const CUpti_ActivityAPI *a = (const void *)rec;
            cupti_corrmap_api(map, a->correlationId, a->threadId,
                              rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME);
        }
    }
    /* Unfinished records and synchronizations with no place: one loss notice. */
    uint64_t lost = 0;
    size_t n = pending_settle(map, sink, &lost);
    rec = NULL;
    while (api->get_next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (!sink->keep_driver && driver_under_runtime(map, rec))
            continue;
        ts_event ev;
        int r = translate_one(api, rec, map, sink, &ev);
        if (r < 0)
            lost++;
        if (r <= 0)
            continue;
        if (!settle(map, &ev) && sink->wait_for_launch) {
            n += pending_add(map, &ev, sink);
            continue;
        }
        r = release_one(map, &ev, sink);
        n += r > 0;
        lost += r < 0;
    }
    if (lost) {
        device_lost(sink, lost);
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
    int len = snprintf(status, sizeof status, "CUDA collection on (CUPTI %u, %.120s%s%s%.100s)",
                       version, lib_path, lib_was_loaded ? ", the program's own copy" : "",
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

static const cupti_api *hook_api = &loaded;

void cupti_range_hooks_api(const cupti_api *api)
{
    hook_api = api ? api : &loaded;
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
