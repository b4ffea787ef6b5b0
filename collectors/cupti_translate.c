/* cupti_translate: CUDA activity records into events, a pure function behind a sink (the tests
 * drive it with hand-built records): the correlation map that attributes device records to the
 * operator and thread of their launch, the records that wait for their launch, and the
 * translation of each record kind (cupti_internal.h). */
#include "cupti_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

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

#if TERMSIGHT_HAVE_CUPTI

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

#endif
