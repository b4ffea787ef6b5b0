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

/* The table cupti_api_load fills (zeroed until then): the range hooks' default. */
extern cupti_api cupti_loaded;

/* The path of the libcupti in use, for the status line; *programs: 1 when it is the copy the
 * program had loaded. */
const char *cupti_lib_path(int *programs);
#endif

#if TERMSIGHT_HAVE_CUPTI
/* The external correlation kind our range hooks push: PyTorch's profiler (Kineto) uses CUSTOM0
 * and CUSTOM1 for its own operator ids. */
#define CUPTI_EXTERNAL_KIND CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2
#endif

/* What the collector knows of each runtime correlation id: the operator (string id of the range
 * the launch ran under, from EXTERNAL_CORRELATION records) and the thread of its API call (from
 * RUNTIME and DRIVER records). Bounded: correlation ids only grow, so slot = id & mask keeps the
 * newest CUPTI_CORR_SLOTS ids and a new id evicts the oldest in its slot (in order).
 *
 * With CUDA 13's per-thread activity buffers, a kernel may reach us in a buffer processed before
 * the one that holds its launch's records: such device records (and synchronizations, which
 * take their thread from the API call) wait in `pending` until a later buffer brings the launch,
 * and are emitted then, attributed; bounded (the oldest goes out unattributed when it is full or
 * has waited CUPTI_PENDING_BUFFERS buffers), and emptied by cupti_release at a forced flush. */
#define CUPTI_CORR_SLOTS      (1u << 16)
#define CUPTI_PENDING         4096
#define CUPTI_PENDING_BUFFERS 64
#define CUPTI_CONTEXTS        32

enum { CUPTI_SEEN_EXTERNAL = 1, CUPTI_SEEN_RUNTIME = 2, CUPTI_SEEN_DRIVER = 4 };

typedef struct cupti_corrmap {
    struct {
        uint32_t corr;
        uint32_t op;
        uint32_t tid;  /* the API call's thread, when seen */
        uint32_t seen; /* CUPTI_SEEN_* */
    } slot[CUPTI_CORR_SLOTS];
    ts_event pending[CUPTI_PENDING]; /* oldest first */
    uint32_t waited[CUPTI_PENDING];  /* buffers each has waited */
    uint32_t npending;
    struct {
        uint32_t context, device;
    } ctx[CUPTI_CONTEXTS]; /* a context's device, from its kernels, copies and memsets */
} cupti_corrmap;

void cupti_corrmap_put(cupti_corrmap *m, uint32_t corr, uint32_t op);
/* The API call of corr was seen on thread tid (runtime: 1 for a runtime call, 0 driver). */
void cupti_corrmap_api(cupti_corrmap *m, uint32_t corr, uint32_t tid, int runtime);
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
    /* API records are being collected: a device record or synchronization whose launch has not
     * been seen yet waits for it (0: emitted at once, with what is known). */
    int wait_for_launch;
    /* Keep driver API records that a runtime call made (0: only driver calls no runtime call
     * wraps, those whose correlation id no runtime record has). */
    int keep_driver;
} cupti_sink;

/* 1 when a kernel name is an NCCL kernel (communication): it starts with "nccl" or holds
 * "ncclKernel" or "ncclDevKernel" (mangled names). */
int cupti_is_nccl(const char *name);

#if TERMSIGHT_HAVE_CUPTI
/* Translates the valid bytes of an activity buffer: first the external correlation and API
 * records into map (CUPTI writes them before their API record, kernels come later), then emits
 * the records that waited in map for a launch this buffer brought, then every other record
 * through sink: device records attributed to their launch's operator, or left waiting in map
 * (sink->wait_for_launch) when their launch is not known yet; a synchronization on the thread of
 * its API call; driver API records a runtime call made left out (unless sink->keep_driver).
 * Records that began before sink->since_ns are left out, and those a forced flush returned
 * unfinished (a start or end of 0, or an end before the start) are counted in one TS_KIND_LOST
 * (reason TS_LOST_DEVICE). Returns the number of events emitted. */
size_t cupti_translate(const cupti_api *api, uint8_t *buffer, size_t valid, cupti_corrmap *map,
                       const cupti_sink *sink);

/* A completed buffer: translates it, then reads the dropped-record count for (context, stream)
 * and emits one TS_KIND_LOST (reason TS_LOST_DEVICE) when it is nonzero. Returns events
 * emitted. */
size_t cupti_buffer_done(const cupti_api *api, CUcontext context, uint32_t stream, uint8_t *buffer,
                         size_t valid, cupti_corrmap *map, const cupti_sink *sink);

/* The activity buffer pool: cupti_buffer_get hands out a 4 MB buffer (NULL when lending, out of
 * memory, or at the bound: then counted), cupti_buffer_put takes one back (a buffer that is not
 * ours is left alone). Buffers grow on demand up to the bound, CUDA 13 holding one per thread
 * that uses CUDA. cupti_pool_bound sets the bound (at least 1, at most CUPTI_POOL_MAX) and
 * returns it; cupti_pool_refused counts the requests refused at the bound. */
#define CUPTI_POOL_DEFAULT 64
#define CUPTI_POOL_MAX     1024
/* The table the range hooks push and pop external correlation ids through (NULL: the loaded
 * libcupti's); tests hand in their own. */
void cupti_range_hooks_api(const cupti_api *api);

uint8_t *cupti_buffer_get(void);
void cupti_buffer_put(uint8_t *b);
size_t cupti_pool_bound(size_t bound);
uint64_t cupti_pool_refused(void);
#endif

/* Emits every record waiting in map with what is known of it (a forced flush or a stop: no
 * launch record is still on its way); a synchronization whose thread and device are both
 * unknown is counted in a TS_KIND_LOST instead. Returns the number of events emitted. */
size_t cupti_release(cupti_corrmap *m, const cupti_sink *sink);

#endif
