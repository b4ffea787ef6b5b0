/* cupti_internal.h: the CUDA collector's insides, for cupti.c and its tests only.
 *
 * libcupti is loaded at run time (dlopen) into a table of function pointers, so that the library
 * runs where CUPTI or the driver is missing. Translation of activity records into events is a
 * pure function over a buffer, driven by the tests with hand-built CUDA 13 records. */
#ifndef TERMSIGHT_CUPTI_INTERNAL_H
#define TERMSIGHT_CUPTI_INTERNAL_H

#include "collectors.h"

/* The room's entry points (also declared in collectors.h for api.c and session.c). */
int cupti_start(termsight_session *s);
void cupti_flush(termsight_session *s, int forced);
void cupti_stop(termsight_session *s);
int cupti_lend(termsight_session *s, int lent);
void cupti_fork_child(void);
const char *cupti_status(void);
/* Its range hooks (collectors.h), installed when collection is on. */
extern const range_hooks cupti_range_hooks;

#if TERMSIGHT_HAVE_CUPTI
#include <cupti.h>

/* The CUPTI calls we use, resolved from the loaded library. get_callback_name and flush_period
 * may be NULL. */
typedef struct cupti_api {
    CUptiResult (*get_version)(uint32_t *version);
    CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc,
                                      CUpti_BuffersCallbackCompleteFunc);
    CUptiResult (*enable)(CUpti_ActivityKind kind);
    CUptiResult (*disable)(CUpti_ActivityKind kind);
    CUptiResult (*flush_all)(uint32_t flag);
    CUptiResult (*get_next_record)(uint8_t *buffer, size_t valid, CUpti_Activity **record);
    CUptiResult (*get_num_dropped)(CUcontext context, uint32_t stream, size_t *dropped);
    CUptiResult (*register_timestamp)(CUpti_TimestampCallbackFunc fn);
    CUptiResult (*set_thread_id_type)(CUpti_ActivityThreadIdType type);
    CUptiResult (*push_external)(CUpti_ExternalCorrelationKind kind, uint64_t id);
    CUptiResult (*pop_external)(CUpti_ExternalCorrelationKind kind, uint64_t *last);
    CUptiResult (*subscribe)(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc fn, void *data);
    CUptiResult (*unsubscribe)(CUpti_SubscriberHandle sub);
    CUptiResult (*get_result_string)(CUptiResult result, const char **text);
    CUptiResult (*get_callback_name)(CUpti_CallbackDomain domain, uint32_t cbid, const char **name);
    CUptiResult (*flush_period)(uint32_t ms); /* NULL in a CUPTI without it */
} cupti_api;

/* Loads libcupti once per process (the copy the process holds already, else TERMSIGHT_CUPTI_LIB,
 * then $CUDA_HOME and $CUDA_PATH, then the default search, then /usr/local/cuda) and returns its
 * table, or NULL with *why set to a static message. Thread-safe. */
const cupti_api *cupti_api_load(const char **why);
#endif

#if TERMSIGHT_HAVE_CUPTI
/* The external correlation kind our range hooks push: PyTorch's profiler (Kineto) uses CUSTOM0
 * and CUSTOM1 for its own operator ids. */
#define CUPTI_EXTERNAL_KIND CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2
#endif

/* Runtime correlation id -> operator (string id of the range the launch ran under), from
 * EXTERNAL_CORRELATION records. Bounded: correlation ids only grow, so slot = id & mask keeps the
 * newest CUPTI_CORR_SLOTS ids and a new id evicts the oldest in its slot (in order). */
#define CUPTI_CORR_SLOTS (1u << 16)

typedef struct cupti_corrmap {
    struct {
        uint32_t corr;
        uint32_t op;
    } slot[CUPTI_CORR_SLOTS];
} cupti_corrmap;

void cupti_corrmap_put(cupti_corrmap *m, uint32_t corr, uint32_t op);
/* The operator of corr, or TS_STR_NONE when unknown or evicted. */
uint32_t cupti_corrmap_get(const cupti_corrmap *m, uint32_t corr);

/* Runtime and driver API names as one sink interned them: id[runtime?][cbid], 0 until then. */
#define CUPTI_API_NAMES 1024
typedef struct cupti_api_names {
    uint32_t id[2][CUPTI_API_NAMES];
} cupti_api_names;

/* Where translated events go. intern returns a string id (TS_STR_NONE when it cannot) and sets
 * *truncated when the name was cut. */
typedef struct cupti_sink {
    void *ctx;
    uint32_t (*intern)(void *ctx, const char *bytes, size_t len, int *truncated);
    void (*emit)(void *ctx, const ts_event *ev);
    /* Records that began before this belong before the collection window: left out. */
    uint64_t since_ns;
    /* API names interned through this sink before (NULL: each looked up and interned). */
    cupti_api_names *api_names;
} cupti_sink;

/* 1 when a kernel name is an NCCL kernel (communication): it starts with "nccl" or holds
 * "ncclKernel" or "ncclDevKernel" (mangled names). */
int cupti_is_nccl(const char *name);

#if TERMSIGHT_HAVE_CUPTI
/* Translates the valid bytes of an activity buffer: first the external correlation records into
 * map (CUPTI writes them before their API record, kernels come later), then every other record
 * into events through sink, leaving out those that began before sink->since_ns and those a forced
 * flush returned unfinished (a start or end of 0, or an end before the start): these are counted
 * in one TS_KIND_LOST (reason TS_LOST_DEVICE). Returns the number of events emitted. */
size_t cupti_translate(const cupti_api *api, uint8_t *buffer, size_t valid, cupti_corrmap *map,
                       const cupti_sink *sink);

/* A completed buffer: translates it, then reads the dropped-record count for (context, stream)
 * and emits one TS_KIND_LOST (reason TS_LOST_DEVICE) when it is nonzero. Returns events
 * emitted. */
size_t cupti_buffer_done(const cupti_api *api, CUcontext context, uint32_t stream, uint8_t *buffer,
                         size_t valid, cupti_corrmap *map, const cupti_sink *sink);
#endif

#endif
