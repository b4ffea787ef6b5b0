/* Tests of the CUDA collector without a GPU: buffers of real CUDA 13 activity records, walked by
 * the real cuptiActivityGetNextRecord (it needs no driver), translated into events; the
 * correlation map, NCCL classification, dropped records (the buffer pool and the no-driver path
 * of cupti_start: test_cupti_start.c). Skips, saying why, when libcupti cannot be loaded or
 * termsight was built without it. */
#include "cupti_internal.h"

#include "analysis.h"

#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- No CUPTI needed ---------------------------------------------------------------------- */

START_TEST(test_nccl_names)
{
    static const struct {
        const char *name;
        int comm;
    } cases[] = {
        {"ncclKernel_AllReduce_RING_LL_Sum_float", 1},
        {"ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 1},
        {"_Z24ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_tP11ncclDevComm", 1},
        {"_Z13ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", 1},
        {"nccl_anything", 1},
        {"void gemm_kernel<float>(float*)", 0},
        {"ampere_sgemm_128x64_nn", 0},
        {"NCCL_upper", 0},
        {"", 0},
        {NULL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_msg(cupti_is_nccl(cases[i].name) == cases[i].comm, "%s",
                      cases[i].name ? cases[i].name : "(null)");
}
END_TEST

START_TEST(test_corrmap_evicts_in_order)
{
    cupti_corrmap *m = calloc(1, sizeof *m);
    ck_assert_ptr_nonnull(m);
    ck_assert_uint_eq(cupti_corrmap_get(m, 5), TS_STR_NONE);
    for (uint32_t c = 1; c <= CUPTI_CORR_SLOTS; c++)
        cupti_corrmap_put(m, c, c + 100);
    ck_assert_uint_eq(cupti_corrmap_get(m, 1), 101);
    ck_assert_uint_eq(cupti_corrmap_get(m, CUPTI_CORR_SLOTS), CUPTI_CORR_SLOTS + 100);
    /* One more: the oldest (1) goes, the rest stay. */
    cupti_corrmap_put(m, CUPTI_CORR_SLOTS + 1, 7);
    ck_assert_uint_eq(cupti_corrmap_get(m, 1), TS_STR_NONE);
    ck_assert_uint_eq(cupti_corrmap_get(m, 2), 102);
    ck_assert_uint_eq(cupti_corrmap_get(m, CUPTI_CORR_SLOTS + 1), 7);
    free(m);
}
END_TEST

#if TERMSIGHT_HAVE_CUPTI

static const cupti_api *api;

static int have_cupti(void)
{
    const char *why = NULL;
    api = cupti_api_load(&why);
    if (!api)
        fprintf(stderr, "test_cupti: skipped, %s\n", why);
    return api != NULL;
}

/* ---- A sink that keeps what it is given --------------------------------------------------- */

#define MAX_NAMES  64
#define MAX_EVENTS 64

typedef struct sink_state {
    char *names[MAX_NAMES]; /* id i+2: 0 and 1 are TS_STR_NONE and TS_STR_OVERFLOW, as in strtab */
    uint32_t nnames;
    uint32_t interns; /* calls of t_intern */
    ts_event ev[MAX_EVENTS];
    size_t nev;
} sink_state;

static uint32_t t_intern(void *ctx, const char *bytes, size_t len, int *truncated)
{
    sink_state *st = ctx;
    st->interns++;
    for (uint32_t i = 0; i < st->nnames; i++)
        if (strlen(st->names[i]) == len && !memcmp(st->names[i], bytes, len))
            return i + 2;
    ck_assert_uint_lt(st->nnames, MAX_NAMES);
    st->names[st->nnames] = strndup(bytes, len);
    if (truncated)
        *truncated = 0;
    return ++st->nnames + 1;
}

static void t_emit(void *ctx, const ts_event *ev)
{
    sink_state *st = ctx;
    ck_assert_uint_lt(st->nev, MAX_EVENTS);
    st->ev[st->nev++] = *ev;
}

static const char *t_name(const sink_state *st, uint32_t id)
{
    return id >= 2 && id <= st->nnames + 1 ? st->names[id - 2] : "";
}

static void sink_free(sink_state *st)
{
    for (uint32_t i = 0; i < st->nnames; i++)
        free(st->names[i]);
}

/* ---- A buffer laid out as CUPTI lays it: records back to back, 8-byte aligned ------------- */

typedef struct buf {
    _Alignas(8) uint8_t bytes[16384];
    size_t used;
} buf;

static void put(buf *b, const void *rec, size_t size)
{
    ck_assert_uint_eq(size % 8, 0);
    ck_assert_uint_le(b->used + size, sizeof b->bytes);
    memcpy(b->bytes + b->used, rec, size);
    b->used += size;
}

#define PUT(b, rec) put((b), &(rec), sizeof(rec))

/* The op ids the tests use as external correlation ids (string ids of range names). */
#define OP_MATMUL 41u
#define OP_RELU   42u

static void put_external(buf *b, uint32_t corr, uint64_t op)
{
    CUpti_ActivityExternalCorrelation x = {0};
    x.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    x.externalKind = CUPTI_EXTERNAL_KIND;
    x.externalId = op;
    x.correlationId = corr;
    PUT(b, x);
}

static CUpti_ActivityKernel10 kernel(const char *name, uint32_t corr, uint64_t start, uint64_t end)
{
    CUpti_ActivityKernel10 k;
    memset(&k, 0, sizeof k);
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.start = start;
    k.end = end;
    k.deviceId = 1;
    k.contextId = 3;
    k.streamId = 7;
    k.gridX = k.gridY = k.gridZ = 1;
    k.blockX = 128;
    k.blockY = k.blockZ = 1;
    k.registersPerThread = 32;
    k.correlationId = corr;
    k.name = name;
    return k;
}

static size_t walk(buf *b, cupti_corrmap *map, sink_state *st)
{
    cupti_sink sink = {.ctx = st, .intern = t_intern, .emit = t_emit};
    return cupti_translate(api, b->bytes, b->used, map, &sink);
}

START_TEST(test_get_next_record_walks_hand_built_buffer)
{
    if (!have_cupti())
        return;
    buf *b = calloc(1, sizeof *b);
    CUpti_ActivityKernel10 k = kernel("k", 1, 10, 20);
    PUT(b, k);
    put_external(b, 1, OP_MATMUL);
    CUpti_Activity *rec = NULL;
    ck_assert_int_eq(api->get_next_record(b->bytes, b->used, &rec), CUPTI_SUCCESS);
    ck_assert_ptr_eq(rec, (void *)b->bytes);
    ck_assert_int_eq(api->get_next_record(b->bytes, b->used, &rec), CUPTI_SUCCESS);
    ck_assert_ptr_eq(rec, (void *)(b->bytes + sizeof k));
    ck_assert_int_eq(api->get_next_record(b->bytes, b->used, &rec), CUPTI_ERROR_MAX_LIMIT_REACHED);
    free(b);
}
END_TEST

START_TEST(test_kernel_fields_and_attribution)
{
    if (!have_cupti())
        return;
    buf *b = calloc(1, sizeof *b);
    cupti_corrmap *map = calloc(1, sizeof *map);
    sink_state st = {0};
    /* The API record of launch 11 (under matmul), its kernel, a kernel launched outside any
     * range (12), and launch 13's correlation record after its kernel in the buffer. */
    put_external(b, 11, OP_MATMUL);
    CUpti_ActivityAPI a = {0};
    a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    a.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
    a.start = 900;
    a.end = 950;
    a.processId = 1234;
    a.threadId = 5678;
    a.correlationId = 11;
    PUT(b, a);
    CUpti_ActivityKernel10 k1 = kernel("void gemm<float>(float*)", 11, 1000, 2000);
    PUT(b, k1);
    CUpti_ActivityKernel10 k2 = kernel("void lonely()", 12, 2100, 2200);
    PUT(b, k2);
    CUpti_ActivityKernel10 k3 = kernel("relu_kernel", 13, 2300, 2400);
    k3.streamId = 9;
    PUT(b, k3);
    put_external(b, 13, OP_RELU);

    ck_assert_uint_eq(walk(b, map, &st), 4);
    const ts_event *e = &st.ev[0];
    ck_assert_uint_eq(e->kind, TS_KIND_CUDA_API);
    ck_assert_str_eq(t_name(&st, e->name), "cudaLaunchKernel_v7000");
    ck_assert_uint_eq(e->aux, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
    ck_assert_uint_eq(e->tid, 5678);
    ck_assert_uint_eq(e->device, TS_DEVICE_HOST);
    ck_assert_uint_eq(e->corr, 11);
    ck_assert_uint_eq(e->type, OP_MATMUL);
    ck_assert_uint_eq(e->begin_ns, 900);
    ck_assert_uint_eq(e->end_ns, 950);
    ck_assert_uint_eq(e->v1, CUPTI_CB_DOMAIN_RUNTIME_API);

    e = &st.ev[1];
    ck_assert_uint_eq(e->kind, TS_KIND_KERNEL);
    ck_assert_str_eq(t_name(&st, e->name), "void gemm<float>(float*)");
    ck_assert_uint_eq(e->type, OP_MATMUL);
    ck_assert_uint_eq(e->tid, 7);
    ck_assert_uint_eq(e->device, 1);
    ck_assert_uint_eq(e->aux, 3);
    ck_assert_uint_eq(e->corr, 11);
    ck_assert_uint_eq(e->begin_ns, 1000);
    ck_assert_uint_eq(e->end_ns, 2000);
    ck_assert_uint_eq(e->flags, 0);

    ck_assert_uint_eq(st.ev[2].kind, TS_KIND_KERNEL);
    ck_assert_str_eq(t_name(&st, st.ev[2].name), "void lonely()");
    ck_assert_uint_eq(st.ev[2].type, TS_STR_NONE);
    ck_assert_uint_eq(st.ev[2].corr, 12);

    /* The correlation record later in the same buffer still attributes (two passes). */
    ck_assert_uint_eq(st.ev[3].type, OP_RELU);
    ck_assert_uint_eq(st.ev[3].tid, 9);

    /* A kernel in a later buffer finds its op in the map kept across buffers. */
    buf *b2 = calloc(1, sizeof *b2);
    CUpti_ActivityKernel10 k4 = kernel("void gemm<float>(float*)", 11, 3000, 3100);
    PUT(b2, k4);
    sink_state st2 = {0};
    ck_assert_uint_eq(walk(b2, map, &st2), 1);
    ck_assert_uint_eq(st2.ev[0].type, OP_MATMUL);

    sink_free(&st);
    sink_free(&st2);
    free(b2);
    free(map);
    free(b);
}
END_TEST

/* One operator that launches 40 kernels (an op of PyTorch's often does: a fused attention, a
 * convolution's algorithm), each with its own correlation id and all under the op's external
 * id, beside 5 kernels launched under no range: 40 carry the op, 5 none. */
START_TEST(test_op_with_40_kernels)
{
    if (!have_cupti())
        return;
    buf *b = calloc(1, sizeof *b);
    cupti_corrmap *map = calloc(1, sizeof *map);
    sink_state st = {0};
    for (uint32_t i = 0; i < 45; i++) {
        uint32_t corr = 100 + i;
        if (i % 9 != 8) /* every ninth kernel launched under no range */
            put_external(b, corr, OP_MATMUL);
        CUpti_ActivityKernel10 k = kernel("gemm_part", corr, 1000 + 10 * i, 1005 + 10 * i);
        PUT(b, k);
    }
    ck_assert_uint_eq(walk(b, map, &st), 45);
    uint32_t under = 0, none = 0;
    for (size_t i = 0; i < st.nev; i++) {
        ck_assert_uint_eq(st.ev[i].kind, TS_KIND_KERNEL);
        if (st.ev[i].type == OP_MATMUL)
            under++;
        else if (st.ev[i].type == TS_STR_NONE)
            none++;
    }
    ck_assert_uint_eq(under, 40);
    ck_assert_uint_eq(none, 5);
    sink_free(&st);
    free(map);
    free(b);
}
END_TEST

START_TEST(test_nccl_kernel_is_comm)
{
    if (!have_cupti())
        return;
    buf *b = calloc(1, sizeof *b);
    cupti_corrmap *map = calloc(1, sizeof *map);
    sink_state st = {0};
    CUpti_ActivityKernel10 k1 = kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 1, 10, 20);
    CUpti_ActivityKernel10 k2 = kernel("_Z20ncclKernel_AllGatherv", 2, 30, 40);
    CUpti_ActivityKernel10 k3 = kernel("sgemm", 3, 50, 60);
    PUT(b, k1);
    PUT(b, k2);
    PUT(b, k3);
    ck_assert_uint_eq(walk(b, map, &st), 3);
    ck_assert(st.ev[0].flags & TS_EF_COMM);
    ck_assert(st.ev[1].flags & TS_EF_COMM);
    ck_assert(!(st.ev[2].flags & TS_EF_COMM));
    sink_free(&st);
    free(map);
    free(b);
}
END_TEST

/* A host-to-device copy (under MATMUL), a peer-to-peer copy (under RELU) and a memset (MATMUL). */
static void put_copies_memset(buf *b)
{
    CUpti_ActivityMemcpy6 c = {0};
    c.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    c.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    c.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
    c.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    c.bytes = 1 << 20;
    c.start = 100;
    c.end = 300;
    c.deviceId = 0;
    c.contextId = 1;
    c.streamId = 14;
    c.correlationId = 21;
    PUT(b, c);

    CUpti_ActivityMemcpyPtoP4 p = {0};
    p.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
    p.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
    p.bytes = 4096;
    p.start = 400;
    p.end = 450;
    p.deviceId = 2;
    p.streamId = 15;
    p.srcDeviceId = 2;
    p.dstDeviceId = 3;
    p.correlationId = 22;
    PUT(b, p);

    CUpti_ActivityMemset4 m = {0};
    m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    m.value = 0xab;
    m.bytes = 512;
    m.start = 500;
    m.end = 510;
    m.deviceId = 1;
    m.streamId = 16;
    m.correlationId = 21;
    m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    PUT(b, m);
}

/* A device allocation (RELU) and its release, an INVALID memory operation, a driver call and a
 * stream synchronization with no API record of its call. */
static void put_memory_driver_sync(buf *b)
{
    CUpti_ActivityMemory4 al = {0};
    al.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    al.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
    al.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    al.correlationId = 22;
    al.address = 0x7f0000001000ull;
    al.bytes = 2 << 20;
    al.timestamp = 600;
    al.deviceId = 1;
    al.streamId = 16;
    PUT(b, al);
    CUpti_ActivityMemory4 rel = al;
    rel.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
    rel.timestamp = 700;
    rel.correlationId = 23;
    PUT(b, rel);
    CUpti_ActivityMemory4 odd = al;
    odd.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_INVALID;
    PUT(b, odd);

    CUpti_ActivityAPI d = {0};
    d.kind = CUPTI_ACTIVITY_KIND_DRIVER;
    d.cbid = CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2;
    d.start = 800;
    d.end = 810;
    d.threadId = 99;
    d.correlationId = 24;
    d.returnValue = 2;
    PUT(b, d);

    CUpti_ActivitySynchronization2 y = {0};
    y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    y.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
    y.start = 900;
    y.end = 990;
    y.correlationId = 25;
    y.contextId = 1;
    y.streamId = 14;
    y.cudaEventId = 0;
    PUT(b, y);
}

/* The events of put_copies_memset, first in st. */
static void check_copies_memset(const sink_state *st)
{
    const ts_event *e = &st->ev[0];
    ck_assert_uint_eq(e->kind, TS_KIND_MEMCPY);
    ck_assert_uint_eq(e->v0, 1 << 20);
    ck_assert_uint_eq(e->aux, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
    ck_assert_uint_eq(e->tid, 14);
    ck_assert_uint_eq(e->device, 0);
    ck_assert_uint_eq(e->type, OP_MATMUL);
    ck_assert_uint_eq(e->corr, 21);
    ck_assert_uint_eq(e->begin_ns, 100);
    ck_assert_uint_eq(e->end_ns, 300);

    e = &st->ev[1];
    ck_assert_uint_eq(e->kind, TS_KIND_MEMCPY);
    ck_assert_uint_eq(e->aux, CUPTI_ACTIVITY_MEMCPY_KIND_PTOP);
    ck_assert_uint_eq(e->v0, 4096);
    ck_assert_uint_eq(e->v1, (2ull << 32) | 3);
    ck_assert_uint_eq(e->device, 2);
    ck_assert_uint_eq(e->tid, 15);
    ck_assert_uint_eq(e->type, OP_RELU);

    e = &st->ev[2];
    ck_assert_uint_eq(e->kind, TS_KIND_MEMSET);
    ck_assert_uint_eq(e->v0, 512);
    ck_assert_uint_eq(e->v1, 0xab);
    ck_assert_uint_eq(e->tid, 16);
    ck_assert_uint_eq(e->device, 1);
    ck_assert_uint_eq(e->type, OP_MATMUL);
    ck_assert_uint_eq(e->begin_ns, 500);
    ck_assert_uint_eq(e->end_ns, 510);
}

/* The events of put_memory_driver_sync, after the three of put_copies_memset. */
static void check_memory_driver_sync(const sink_state *st)
{
    const ts_event *e = &st->ev[3];
    ck_assert_uint_eq(e->kind, TS_KIND_DEVMEM_ALLOC);
    ck_assert_uint_eq(e->v0, 2 << 20);
    ck_assert_uint_eq(e->v1, 0x7f0000001000ull);
    ck_assert_uint_eq(e->device, 1);
    ck_assert_uint_eq(e->begin_ns, 600);
    ck_assert_uint_eq(e->end_ns, 600);
    ck_assert_uint_eq(e->type, OP_RELU);
    ck_assert_uint_eq(e->corr, 22);

    e = &st->ev[4];
    ck_assert_uint_eq(e->kind, TS_KIND_DEVMEM_FREE);
    ck_assert_uint_eq(e->v0, 2 << 20);
    ck_assert_uint_eq(e->v1, 0x7f0000001000ull);
    ck_assert_uint_eq(e->begin_ns, 700);
    ck_assert_uint_eq(e->type, TS_STR_NONE);

    /* The INVALID memory operation made no event. */
    e = &st->ev[5];
    ck_assert_uint_eq(e->kind, TS_KIND_CUDA_API);
    ck_assert_str_eq(t_name(st, e->name), "cuMemAlloc_v2");
    ck_assert_uint_eq(e->aux, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2);
    ck_assert_uint_eq(e->tid, 99);
    ck_assert_uint_eq(e->corr, 24);
    ck_assert_uint_eq(e->v0, 2);
    ck_assert_uint_eq(e->v1, CUPTI_CB_DOMAIN_DRIVER_API);

    e = &st->ev[6];
    ck_assert_uint_eq(e->kind, TS_KIND_SYNC);
    /* No API record of its call: the stream's lane on the context's device (the copy's). */
    ck_assert_uint_eq(e->tid, 14);
    ck_assert_uint_eq(e->device, 0);
    ck_assert_uint_eq(e->aux, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE);
    ck_assert_uint_eq(e->corr, 25);
    ck_assert_uint_eq(e->begin_ns, 900);
    ck_assert_uint_eq(e->end_ns, 990);
    ck_assert_uint_eq(e->v0, 1);
}

START_TEST(test_copies_memsets_memory_sync)
{
    if (!have_cupti())
        return;
    buf *b = calloc(1, sizeof *b);
    cupti_corrmap *map = calloc(1, sizeof *map);
    sink_state st = {0};
    put_external(b, 21, OP_MATMUL);
    put_external(b, 22, OP_RELU);

    put_copies_memset(b);
    put_memory_driver_sync(b);
    ck_assert_uint_eq(walk(b, map, &st), 7);
    check_copies_memset(&st);
    check_memory_driver_sync(&st);

    sink_free(&st);
    free(map);
    free(b);
}
END_TEST

/* cupti_buffer_done asks the table for drops: a table whose count is 7. */
static CUptiResult seven_dropped(CUcontext context, uint32_t stream, size_t *dropped)
{
    (void)context, (void)stream;
    *dropped = 7;
    return CUPTI_SUCCESS;
}

static CUptiResult none_dropped(CUcontext context, uint32_t stream, size_t *dropped)
{
    (void)context, (void)stream;
    *dropped = 0;
    return CUPTI_SUCCESS;
}

START_TEST(test_dropped_records_are_lost_events)
{
    if (!have_cupti())
        return;
    buf *b = calloc(1, sizeof *b);
    cupti_corrmap *map = calloc(1, sizeof *map);
    sink_state st = {0};
    CUpti_ActivityKernel10 k = kernel("k", 1, 10, 20);
    PUT(b, k);
    cupti_api t = *api;
    t.get_num_dropped = seven_dropped;
    cupti_sink sink = {.ctx = &st, .intern = t_intern, .emit = t_emit};
    ck_assert_uint_eq(cupti_buffer_done(&t, NULL, 0, b->bytes, b->used, map, &sink), 2);
    ck_assert_uint_eq(st.ev[0].kind, TS_KIND_KERNEL);
    ck_assert_uint_eq(st.ev[1].kind, TS_KIND_LOST);
    ck_assert_uint_eq(st.ev[1].aux, TS_LOST_DEVICE);
    ck_assert_uint_eq(st.ev[1].v0, 7);
    /* An empty buffer with drops still reports them; no drops, no notice. */
    ck_assert_uint_eq(cupti_buffer_done(&t, NULL, 0, b->bytes, 0, map, &sink), 1);
    t.get_num_dropped = none_dropped;
    ck_assert_uint_eq(cupti_buffer_done(&t, NULL, 0, b->bytes, b->used, map, &sink), 1);
    ck_assert_uint_eq(st.nev, 4);
    sink_free(&st);
    free(map);
    free(b);
}
END_TEST

static CUpti_ActivityAPI api_record(CUpti_ActivityKind kind, uint32_t cbid, uint32_t corr,
                                    uint32_t tid, uint64_t start, uint64_t end)
{
    CUpti_ActivityAPI a;
    memset(&a, 0, sizeof a);
    a.kind = kind;
    a.cbid = cbid;
    a.correlationId = corr;
    a.threadId = tid;
    a.processId = 1234;
    a.start = start;
    a.end = end;
    return a;
}

static const char *t_names(void *ctx, uint32_t id, uint32_t *len)
{
    const sink_state *st = ctx;
    if (id < 2 || id > st->nnames + 1)
        return NULL;
    *len = (uint32_t)strlen(st->names[id - 2]);
    return st->names[id - 2];
}

/* CUDA 13's per-thread buffers: a kernel (and a copy) in a buffer processed before the one that
 * holds its launch's external correlation and API records. They wait for it, and the analysis's
 * kernel statistics list them under their op. */
START_TEST(test_kernel_before_its_launch_is_attributed)
{
    if (!have_cupti())
        return;
    buf *first = calloc(1, sizeof *first), *second = calloc(1, sizeof *second);
    cupti_corrmap *map = calloc(1, sizeof *map);
    sink_state st = {0};
    uint32_t matmul = t_intern(&st, "matmul", 6, NULL);
    CUpti_ActivityKernel10 k = kernel("void gemm<float>(float*)", 31, 1000, 2000);
    PUT(first, k);
    CUpti_ActivityMemcpy6 c;
    memset(&c, 0, sizeof c);
    c.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    c.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
    c.bytes = 64;
    c.start = 2100;
    c.end = 2200;
    c.streamId = 7;
    c.correlationId = 32;
    PUT(first, c);
    put_external(second, 31, matmul);
    CUpti_ActivityAPI launch =
        api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 31,
                   77, 900, 950);
    PUT(second, launch);
    CUpti_ActivityAPI copy = api_record(
        CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, 32, 77, 960, 2300);
    PUT(second, copy); /* outside any range: no external correlation */

    cupti_sink sink = {.ctx = &st, .intern = t_intern, .emit = t_emit, .wait_for_launch = 1};
    ck_assert_uint_eq(cupti_translate(api, first->bytes, first->used, map, &sink), 0);
    ck_assert_uint_eq(map->npending, 2);
    ck_assert_uint_eq(cupti_translate(api, second->bytes, second->used, map, &sink), 4);
    ck_assert_uint_eq(map->npending, 0);
    ck_assert_uint_eq(st.ev[0].kind, TS_KIND_KERNEL);
    ck_assert_uint_eq(st.ev[0].type, matmul);
    ck_assert_uint_eq(st.ev[0].corr, 31);
    ck_assert_uint_eq(st.ev[1].kind, TS_KIND_MEMCPY);
    ck_assert_uint_eq(st.ev[1].type, TS_STR_NONE);

    analysis_config cfg;
    analysis_config_init(&cfg);
    analysis *a = analysis_create(&cfg, t_names, &st);
    ck_assert_ptr_nonnull(a);
    analysis_feed(a, st.ev, st.nev);
    analysis_finish(a);
    kernel_stat *rows = NULL;
    size_t n = analysis_kernels(a, 0, &rows);
    int found = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t len = 0, oplen = 0;
        const char *name = analysis_name(a, rows[i].name, &len);
        const char *op = analysis_name(a, rows[i].op, &oplen);
        if (len == 24 && !memcmp(name, "void gemm<float>(float*)", 24)) {
            ck_assert_msg(oplen == 6 && !memcmp(op, "matmul", 6), "op '%.*s'", (int)oplen, op);
            ck_assert_uint_eq(rows[i].count, 1);
            found = 1;
        }
    }
    ck_assert(found);
    free(rows);
    analysis_destroy(a);

    /* A kernel whose launch never comes goes out unattributed at a forced flush; without API
     * records (sink.wait_for_launch 0) it goes out at once. */
    buf *third = calloc(1, sizeof *third);
    CUpti_ActivityKernel10 orphan = kernel("orphan", 99, 3000, 3100);
    PUT(third, orphan);
    st.nev = 0;
    ck_assert_uint_eq(cupti_translate(api, third->bytes, third->used, map, &sink), 0);
    ck_assert_uint_eq(cupti_release(map, &sink), 1);
    ck_assert_str_eq(t_name(&st, st.ev[0].name), "orphan");
    ck_assert_uint_eq(st.ev[0].type, TS_STR_NONE);
    sink.wait_for_launch = 0;
    ck_assert_uint_eq(cupti_translate(api, third->bytes, third->used, map, &sink), 1);
    ck_assert_uint_eq(map->npending, 0);

    sink_free(&st);
    free(third);
    free(map);
    free(second);
    free(first);
}
END_TEST

/* A kernel whose launch never comes waits a bounded number of buffers, then goes out. */
START_TEST(test_waiting_is_bounded)
{
    if (!have_cupti())
        return;
    buf *b = calloc(1, sizeof *b), *empty = calloc(1, sizeof *empty);
    cupti_corrmap *map = calloc(1, sizeof *map);
    sink_state st = {0};
    CUpti_ActivityKernel10 k = kernel("waits", 5, 10, 20);
    PUT(b, k);
    cupti_sink sink = {.ctx = &st, .intern = t_intern, .emit = t_emit, .wait_for_launch = 1};
    ck_assert_uint_eq(cupti_translate(api, b->bytes, b->used, map, &sink), 0);
    size_t out = 0;
    for (int i = 0; i < CUPTI_PENDING_BUFFERS; i++)
        out += cupti_translate(api, empty->bytes, 0, map, &sink);
    ck_assert_uint_eq(out, 0);
    ck_assert_uint_eq(cupti_translate(api, empty->bytes, 0, map, &sink), 1);
    ck_assert_str_eq(t_name(&st, st.ev[0].name), "waits");
    sink_free(&st);
    free(map);
    free(empty);
    free(b);
}
END_TEST

/* The driver calls a runtime call makes carry its correlation id: by default only the runtime
 * record is kept, and a driver call of its own (no runtime record with its id) is; with
 * keep_driver, every driver record. */
START_TEST(test_driver_records_under_runtime_left_out)
{
    if (!have_cupti())
        return;
    buf *b = calloc(1, sizeof *b);
    cupti_corrmap *map = calloc(1, sizeof *map);
    CUpti_ActivityAPI inner = api_record(CUPTI_ACTIVITY_KIND_DRIVER,
                                         CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 41, 5, 110, 120);
    CUpti_ActivityAPI outer =
        api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 41,
                   5, 100, 130);
    CUpti_ActivityAPI direct = api_record(CUPTI_ACTIVITY_KIND_DRIVER,
                                          CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 42, 5, 140, 150);
    PUT(b, inner);
    PUT(b, outer);
    PUT(b, direct);
    sink_state st = {0}, all = {0};
    cupti_sink sink = {.ctx = &st, .intern = t_intern, .emit = t_emit};
    ck_assert_uint_eq(cupti_translate(api, b->bytes, b->used, map, &sink), 2);
    ck_assert_uint_eq(st.ev[0].v1, CUPTI_CB_DOMAIN_RUNTIME_API);
    ck_assert_uint_eq(st.ev[0].corr, 41);
    ck_assert_uint_eq(st.ev[1].v1, CUPTI_CB_DOMAIN_DRIVER_API);
    ck_assert_uint_eq(st.ev[1].corr, 42);
    /* The runtime record in an earlier buffer than its driver call: still left out. */
    buf *late = calloc(1, sizeof *late);
    PUT(late, inner);
    ck_assert_uint_eq(cupti_translate(api, late->bytes, late->used, map, &sink), 0);
    cupti_sink keep = {.ctx = &all, .intern = t_intern, .emit = t_emit, .keep_driver = 1};
    ck_assert_uint_eq(cupti_translate(api, b->bytes, b->used, map, &keep), 3);
    ck_assert_uint_eq(all.ev[0].v1, CUPTI_CB_DOMAIN_DRIVER_API);
    ck_assert_uint_eq(all.ev[0].corr, 41);
    sink_free(&st);
    sink_free(&all);
    free(late);
    free(map);
    free(b);
}
END_TEST

static CUpti_ActivitySynchronization2 sync_record(uint32_t corr, uint32_t context, uint32_t stream,
                                                  uint64_t start, uint64_t end)
{
    CUpti_ActivitySynchronization2 y;
    memset(&y, 0, sizeof y);
    y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    y.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
    y.correlationId = corr;
    y.contextId = context;
    y.streamId = stream;
    y.cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    y.start = start;
    y.end = end;
    return y;
}

/* A synchronization names no thread: it is the thread of its API call, found through the
 * correlation id (in a later buffer too); without that call's record, the stream's lane on the
 * context's device; with neither, a lost record, never a stream id posing as a thread. */
START_TEST(test_sync_on_its_calling_thread)
{
    if (!have_cupti())
        return;
    buf *b = calloc(1, sizeof *b), *later = calloc(1, sizeof *later);
    cupti_corrmap *map = calloc(1, sizeof *map);
    sink_state st = {0};
    CUpti_ActivitySynchronization2 y = sync_record(51, 1, 14, 200, 300);
    PUT(b, y);
    CUpti_ActivityAPI call =
        api_record(CUPTI_ACTIVITY_KIND_RUNTIME,
                   CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, 51, 4321, 190, 310);
    PUT(b, call);
    CUpti_ActivitySynchronization2 y2 = sync_record(52, 1, 15, 400, 500);
    PUT(b, y2);
    cupti_sink sink = {.ctx = &st, .intern = t_intern, .emit = t_emit, .wait_for_launch = 1};
    ck_assert_uint_eq(cupti_translate(api, b->bytes, b->used, map, &sink), 2);
    ck_assert_uint_eq(st.ev[0].kind, TS_KIND_SYNC);
    ck_assert_uint_eq(st.ev[0].tid, 4321);
    ck_assert_uint_eq(st.ev[0].device, TS_DEVICE_HOST);
    ck_assert_uint_eq(st.ev[1].kind, TS_KIND_CUDA_API);
    ck_assert_uint_eq(map->npending, 1); /* 52 waits for its call */
    CUpti_ActivityAPI call2 =
        api_record(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, 52,
                   4322, 390, 510);
    PUT(later, call2);
    ck_assert_uint_eq(cupti_translate(api, later->bytes, later->used, map, &sink), 2);
    ck_assert_uint_eq(st.ev[2].kind, TS_KIND_SYNC);
    ck_assert_uint_eq(st.ev[2].tid, 4322);
    ck_assert_uint_eq(st.ev[2].device, TS_DEVICE_HOST);

    /* No call record: a context whose device a kernel named, then one nobody named. */
    buf *lone = calloc(1, sizeof *lone);
    CUpti_ActivityKernel10 k = kernel("k", 60, 600, 700);
    k.contextId = 8;
    k.deviceId = 2;
    PUT(lone, k);
    CUpti_ActivitySynchronization2 y3 = sync_record(61, 8, 16, 710, 720);
    CUpti_ActivitySynchronization2 y4 = sync_record(62, 9, 17, 730, 740);
    PUT(lone, y3);
    PUT(lone, y4);
    st.nev = 0;
    sink.wait_for_launch = 0;
    ck_assert_uint_eq(cupti_translate(api, lone->bytes, lone->used, map, &sink), 3);
    ck_assert_uint_eq(st.ev[1].kind, TS_KIND_SYNC);
    ck_assert_uint_eq(st.ev[1].tid, 16);
    ck_assert_uint_eq(st.ev[1].device, 2);
    ck_assert_uint_eq(st.ev[2].kind, TS_KIND_LOST);
    ck_assert_uint_eq(st.ev[2].v0, 1);
    sink_free(&st);
    free(lone);
    free(later);
    free(map);
    free(b);
}
END_TEST

/* A buffer completed inside a window holds records from before it (a --steps window opened
 * while CUPTI still held them) and records a forced flush returned unfinished (a time of 0):
 * neither is recorded; the unfinished ones are counted in one loss notice. */
START_TEST(test_window_and_unfinished_records_left_out)
{
    if (!have_cupti())
        return;
    buf *b = calloc(1, sizeof *b);
    cupti_corrmap *map = calloc(1, sizeof *map);
    sink_state st = {0};
    CUpti_ActivityKernel10 before = kernel("before", 1, 50, 60);
    CUpti_ActivityKernel10 inside = kernel("inside", 2, 120, 130);
    CUpti_ActivityKernel10 no_end = kernel("no_end", 3, 140, 0);
    CUpti_ActivityKernel10 no_start = kernel("no_start", 4, 0, 150);
    CUpti_ActivityKernel10 reversed = kernel("reversed", 5, 170, 160);
    PUT(b, before);
    PUT(b, inside);
    PUT(b, no_end);
    PUT(b, no_start);
    PUT(b, reversed);
    CUpti_ActivityMemory4 m;
    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    m.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
    m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.timestamp = 125;
    m.bytes = 4096;
    PUT(b, m);
    cupti_sink sink = {.ctx = &st, .intern = t_intern, .emit = t_emit, .since_ns = 100};
    ck_assert_uint_eq(cupti_translate(api, b->bytes, b->used, map, &sink), 3);
    ck_assert_uint_eq(st.ev[0].kind, TS_KIND_KERNEL);
    ck_assert_str_eq(t_name(&st, st.ev[0].name), "inside");
    ck_assert_uint_eq(st.ev[1].kind, TS_KIND_DEVMEM_ALLOC);
    ck_assert_uint_eq(st.ev[1].begin_ns, 125);
    ck_assert_uint_eq(st.ev[2].kind, TS_KIND_LOST);
    ck_assert_uint_eq(st.ev[2].aux, TS_LOST_DEVICE);
    ck_assert_uint_eq(st.ev[2].v0, 3);
    /* Without a window's start, the kernel from before is kept. */
    st.nev = 0;
    sink.since_ns = 0;
    ck_assert_uint_eq(cupti_translate(api, b->bytes, b->used, map, &sink), 4);
    ck_assert_str_eq(t_name(&st, st.ev[0].name), "before");
    sink_free(&st);
    free(map);
    free(b);
}
END_TEST

/* API names are interned once per sink that keeps a cache, every time for one that does not;
 * the names are the same either way. */
START_TEST(test_api_names_interned_once)
{
    if (!have_cupti())
        return;
    buf *b = calloc(1, sizeof *b);
    cupti_corrmap *map = calloc(1, sizeof *map);
    cupti_api_names *names = calloc(1, sizeof *names);
    for (uint32_t i = 0; i < 4; i++) {
        CUpti_ActivityAPI a = {0};
        a.kind = i < 3 ? CUPTI_ACTIVITY_KIND_RUNTIME : CUPTI_ACTIVITY_KIND_DRIVER;
        a.cbid = i < 3 ? CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000
                       : CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
        a.start = 100 + 10 * i;
        a.end = 105 + 10 * i;
        a.correlationId = 20 + i;
        PUT(b, a);
    }
    sink_state st = {0}, plain = {0};
    cupti_sink cached = {.ctx = &st, .intern = t_intern, .emit = t_emit, .api_names = names};
    ck_assert_uint_eq(cupti_translate(api, b->bytes, b->used, map, &cached), 4);
    ck_assert_uint_eq(cupti_translate(api, b->bytes, b->used, map, &cached), 4);
    ck_assert_uint_eq(st.interns, 2); /* the runtime's name and the driver's, once each */
    ck_assert_str_eq(t_name(&st, st.ev[0].name), "cudaLaunchKernel_v7000");
    ck_assert_uint_eq(st.ev[1].name, st.ev[0].name);
    ck_assert_str_eq(t_name(&st, st.ev[3].name), "cuLaunchKernel");
    ck_assert_uint_eq(st.ev[7].name, st.ev[3].name);
    cupti_sink uncached = {.ctx = &plain, .intern = t_intern, .emit = t_emit};
    ck_assert_uint_eq(cupti_translate(api, b->bytes, b->used, map, &uncached), 4);
    ck_assert_uint_eq(plain.interns, 4);
    ck_assert_str_eq(t_name(&plain, plain.ev[2].name), "cudaLaunchKernel_v7000");
    sink_free(&st);
    sink_free(&plain);
    free(names);
    free(map);
    free(b);
}
END_TEST
#endif

static Suite *suite(void)
{
    Suite *su = suite_create("cupti");
    TCase *tc = tcase_create("cupti");
    tcase_add_test(tc, test_nccl_names);
    tcase_add_test(tc, test_corrmap_evicts_in_order);
#if TERMSIGHT_HAVE_CUPTI
    tcase_add_test(tc, test_get_next_record_walks_hand_built_buffer);
    tcase_add_test(tc, test_kernel_fields_and_attribution);
    tcase_add_test(tc, test_op_with_40_kernels);
    tcase_add_test(tc, test_nccl_kernel_is_comm);
    tcase_add_test(tc, test_copies_memsets_memory_sync);
    tcase_add_test(tc, test_dropped_records_are_lost_events);
    tcase_add_test(tc, test_window_and_unfinished_records_left_out);
    tcase_add_test(tc, test_api_names_interned_once);
    tcase_add_test(tc, test_kernel_before_its_launch_is_attributed);
    tcase_add_test(tc, test_waiting_is_bounded);
    tcase_add_test(tc, test_driver_records_under_runtime_left_out);
    tcase_add_test(tc, test_sync_on_its_calling_thread);
#else
    fprintf(stderr, "test_cupti: record translation skipped, built without CUPTI\n");
#endif
    suite_add_tcase(su, tc);
    return su;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
