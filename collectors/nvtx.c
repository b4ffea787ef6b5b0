/* nvtx: NVTX v3 injection. With NVTX_INJECTION64_PATH pointing at libtermsight.so, the loader that
 * the NVTX headers put into every module (executable or shared object) calls
 * InitializeInjectionNvtx2 (entry.c) on that module's first NVTX call; nvtx_inject fills its
 * callback tables.
 *
 * What becomes what:
 * - push/pop and start/end ranges: operator ranges (TS_KIND_OP_RANGE, corr = the domain's name id,
 *   0 for the default domain). Push/pop goes through the API's per-thread frames (api.c); one
 *   stack per thread is shared by all domains (NVTX keeps one per domain: programs that interleave
 *   pushes of two domains on one thread get them nested in push order). Start/end ranges live in a
 *   bounded table keyed by the returned id; one that ends on another thread is flagged
 *   TS_EF_CROSS_THREAD, with tid the starting thread and v1 the ending one. Both kinds go to the
 *   range hooks (api.c: CUDA collection's correlation ids), so kernels a thread launches carry
 *   the innermost range it has open, whichever kind.
 * - a range whose name matches the step pattern (POSIX ERE, TERMSIGHT_STEP_PATTERN, default
 *   TS_STEP_PATTERN_DEFAULT) is a step instead: STEP_BEGIN at its begin, STEP_END at its end. Steps
 * are counted while not collecting too, like termsight_step_begin, so --steps windows work.
 * - names equal to PROFILING_FP_START / PROFILING_BP_END: a phase mark (FP at the range's begin,
 *   BP at its end) as well as the operator range.
 * - marks: TS_KIND_NVTX_MARK; nvtxNameOsThreadA: the thread's name.
 * - messages: ASCII as is; Unicode (wchar_t, UTF-32 here) converted to UTF-8 (up to 255 bytes);
 *   registered strings by their handle. Categories, colors and payloads are ignored.
 *
 * Hot path: interning a name already seen is lock-free; a name's class (op, step, phase) is
 * computed once per name id and session and cached; nothing allocates except registering strings
 * and domains. */
#include "collectors.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

/* ---- The step pattern and name classes -------------------------------------------------- */

enum { CLS_KNOWN = 0x80, CLS_STEP = 1, CLS_FP = 2, CLS_BP = 4 };

static regex_t step_re;
static int step_re_state; /* 0: not compiled yet, 1: compiled, -1: did not compile */
static char step_re_why[320];
static pthread_once_t step_re_once = PTHREAD_ONCE_INIT;

int nvtx_step_pattern_compile(const char *pattern, regex_t *re, char *why, size_t cap)
{
    if (!pattern || !*pattern)
        pattern = TS_STEP_PATTERN_DEFAULT;
    int rc = regcomp(re, pattern, REG_EXTENDED | REG_NOSUB);
    if (rc == 0)
        return 0;
    char err[128];
    regerror(rc, re, err, sizeof err);
    snprintf(why, cap,
             "TERMSIGHT_STEP_PATTERN=%.64s is not a POSIX extended regular expression: %s", pattern,
             err);
    return -1;
}

static void step_re_compile(void)
{
    step_re_state = nvtx_step_pattern_compile(getenv("TERMSIGHT_STEP_PATTERN"), &step_re,
                                              step_re_why, sizeof step_re_why) == 0
                        ? 1
                        : -1;
}

int nvtx_step_pattern_init(const char **why)
{
    pthread_once(&step_re_once, step_re_compile);
    if (step_re_state == 1)
        return 0;
    if (why)
        *why = step_re_why;
    return -1;
}

#ifdef TERMSIGHT_HAVE_NVTX

#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

/* Per name id of the current session: CLS_KNOWN | classes, with the session's generation above. */
#define CLASS_CACHE 65536
static _Atomic uint32_t name_class[CLASS_CACHE];

static unsigned classify(const termsight_session *s, uint32_t id, const char *text)
{
    uint32_t tag = (s->generation & 0xffffffu) << 8;
    /* Every name that found the table full shares TS_STR_OVERFLOW: its class is the text's,
     * never cached under that id. */
    int cached = id < CLASS_CACHE && id != TS_STR_OVERFLOW;
    if (cached) {
        uint32_t v = atomic_load_explicit(&name_class[id], memory_order_relaxed);
        if ((v & ~0xffu) == tag && (v & CLS_KNOWN))
            return v & 0x7f;
    }
    unsigned c = 0;
    if (nvtx_step_pattern_init(NULL) == 0 && regexec(&step_re, text, 0, NULL, 0) == 0)
        c |= CLS_STEP;
    if (s->fp_start_op && !strcmp(text, s->fp_start_op))
        c |= CLS_FP;
    if (s->bp_end_op && !strcmp(text, s->bp_end_op))
        c |= CLS_BP;
    if (cached)
        atomic_store_explicit(&name_class[id], tag | CLS_KNOWN | c, memory_order_relaxed);
    return c;
}

static inline termsight_session *session(void)
{
    return session_current();
}

static inline int collecting(void)
{
    return __atomic_load_n(&termsight_collecting_, __ATOMIC_RELAXED);
}

/* A name id cached with the session generation it belongs to (registered strings, domains). */
static uint32_t intern_cached(_Atomic uint64_t *cache, const termsight_session *s, const char *text)
{
    uint64_t v = atomic_load_explicit(cache, memory_order_relaxed);
    if ((uint32_t)(v >> 32) == s->generation)
        return (uint32_t)v;
    uint32_t id = termsight_name(text);
    atomic_store_explicit(cache, (uint64_t)s->generation << 32 | id, memory_order_relaxed);
    return id;
}

/* ---- Push and pop ----------------------------------------------------------------------- */

enum { TAG_OP = 1, TAG_STEP = 2, TAG_BP = 4 };

/* Default TLS model: the library may be dlopen'ed as an injection only. */
static __thread uint32_t nvtx_depth;
static __thread uint8_t nvtx_tags[TS_MAX_FRAMES];

/* Classifies and opens what a range named `text` (id `id`, or 0: intern it) becomes; returns its
 * tag. */
static unsigned range_open(termsight_session *s, const char *text, uint32_t id, uint32_t corr,
                           int frames)
{
    if (!id)
        id = termsight_name(text);
    unsigned c = classify(s, id, text);
    if (c & CLS_STEP) {
        termsight_step_begin();
        return TAG_STEP;
    }
    if (!collecting())
        return 0;
    if (c & CLS_FP)
        termsight_phase_mark(TERMSIGHT_FORWARD_START);
    if (frames)
        api_range_begin(id, TS_STR_NONE, corr);
    return TAG_OP | (c & CLS_BP ? TAG_BP : 0);
}

static void range_close(unsigned tag)
{
    if (tag & TAG_STEP)
        termsight_step_end();
    if (tag & TAG_OP)
        termsight_range_end();
    if (tag & TAG_BP)
        termsight_phase_mark(TERMSIGHT_BACKWARD_END);
}

static int push(const char *text, uint32_t id, uint32_t corr)
{
    uint32_t d = nvtx_depth++;
    termsight_session *s = session();
    if (d >= TS_MAX_FRAMES)
        return (int)d;
    nvtx_tags[d] = s && text ? (uint8_t)range_open(s, text, id, corr, 1) : 0;
    return (int)d;
}

static int pop(void)
{
    if (!nvtx_depth)
        return -1;
    uint32_t d = --nvtx_depth;
    if (d < TS_MAX_FRAMES)
        range_close(nvtx_tags[d]);
    return (int)d;
}

/* ---- Start and end (ranges that may end on another thread) ------------------------------ */

#define XR_SLOTS  4096 /* open start/end ranges kept; more are not timed */
#define XR_PROBES 8
#define XR_BUSY   1u

typedef struct xrange {
    _Atomic uint64_t id; /* 0 free, XR_BUSY being written or read, else the range's id */
    uint32_t name, corr, tid, window;
    uint32_t tag, depth;
    uint64_t begin_ns;
} xrange;

static xrange xr[XR_SLOTS];
static _Atomic uint64_t xr_seq;

static nvtxRangeId_t range_start(const char *text, uint32_t id, uint32_t corr)
{
    termsight_session *s = session();
    if (!s || !text)
        return 0;
    if (!id)
        id = termsight_name(text);
    unsigned tag = range_open(s, text, id, corr, 0);
    if (!tag)
        return 0;
    uint64_t seq = atomic_fetch_add_explicit(&xr_seq, 1, memory_order_relaxed) + 1;
    for (unsigned i = 0; i < XR_PROBES; i++) {
        uint64_t slot = (seq + i) & (XR_SLOTS - 1), expect = 0;
        xrange *r = &xr[slot];
        if (!atomic_compare_exchange_strong_explicit(&r->id, &expect, XR_BUSY, memory_order_acquire,
                                                     memory_order_relaxed))
            continue;
        r->name = id;
        r->corr = corr;
        r->tid = api_tid();
        r->window = atomic_load_explicit(&ts_window, memory_order_relaxed);
        r->tag = tag;
        r->depth = nvtx_depth;
        r->begin_ns = termsight_now_ns();
        uint64_t rid = (seq + i) << 12 | slot; /* >= 4096: never 0 or XR_BUSY */
        atomic_store_explicit(&r->id, rid, memory_order_release);
        if (tag & TAG_OP)
            api_range_start_hook(id, rid); /* kernels this thread launches: its op */
        return rid;
    }
    /* The table is full: the range is not timed; a step still ends. */
    if (tag & TAG_STEP)
        termsight_step_end();
    return 0;
}

int nvtx_range_open(uint64_t rid)
{
    return rid >= XR_SLOTS &&
           atomic_load_explicit(&xr[rid & (XR_SLOTS - 1)].id, memory_order_acquire) == rid;
}

static void range_end(nvtxRangeId_t rid)
{
    if (rid < XR_SLOTS)
        return;
    xrange *r = &xr[rid & (XR_SLOTS - 1)];
    uint64_t expect = rid;
    if (!atomic_compare_exchange_strong_explicit(&r->id, &expect, XR_BUSY, memory_order_acquire,
                                                 memory_order_relaxed))
        return; /* unknown, ended already, or lost to a full table */
    xrange x = {.name = r->name,
                .corr = r->corr,
                .tid = r->tid,
                .window = r->window,
                .tag = r->tag,
                .depth = r->depth,
                .begin_ns = r->begin_ns};
    atomic_store_explicit(&r->id, 0, memory_order_release);
    if (x.tag & TAG_OP)
        api_range_end_hook(rid);
    if (x.tag & TAG_STEP) {
        termsight_step_end();
        return;
    }
    if (!collecting() || atomic_load_explicit(&ts_window, memory_order_relaxed) != x.window)
        return;
    uint32_t tid = api_tid();
    ts_event ev = {.kind = TS_KIND_OP_RANGE,
                   .flags = tid != x.tid ? TS_EF_CROSS_THREAD : 0,
                   .tid = x.tid,
                   .device = TS_DEVICE_HOST,
                   .aux = x.depth,
                   .name = x.name,
                   .corr = x.corr,
                   .begin_ns = x.begin_ns,
                   .end_ns = termsight_now_ns(),
                   .v1 = tid};
    if (x.tag & TAG_BP)
        termsight_phase_mark(TERMSIGHT_BACKWARD_END);
    api_emit(&ev);
}

/* ---- Marks and thread names ------------------------------------------------------------- */

static void mark(const char *text, uint32_t id, uint32_t corr)
{
    if (!collecting() || !text)
        return;
    uint64_t t = termsight_now_ns();
    ts_event ev = {.kind = TS_KIND_NVTX_MARK,
                   .tid = api_tid(),
                   .device = TS_DEVICE_HOST,
                   .name = id ? id : termsight_name(text),
                   .corr = corr,
                   .begin_ns = t,
                   .end_ns = t};
    api_emit(&ev);
}

/* ---- Messages, registered strings and domains ------------------------------------------- */

#define UTF8_MAX      256
#define HANDLE_STRING 0x74735354u /* "TSst" */
#define HANDLE_DOMAIN 0x74734454u /* "TSdT" */

typedef struct reg_string {
    uint32_t magic;
    _Atomic uint64_t cache;
    char text[];
} reg_string;

typedef struct domain {
    uint32_t magic;
    _Atomic uint64_t cache;
    char name[];
} domain;

/* wchar_t (UTF-32) to UTF-8, cut at a character boundary to fit cap bytes with the NUL; invalid
 * code points become '?'. */
static const char *utf8_from_wide(const wchar_t *w, char *out, size_t cap)
{
    size_t n = 0;
    for (; w && *w; w++) {
        char b[4];
        size_t k = utf8_encode((uint32_t)*w, b);
        if (!k) {
            b[0] = '?';
            k = 1;
        }
        if (n + k >= cap)
            break;
        memcpy(out + n, b, k);
        n += k;
    }
    out[n] = 0;
    return out;
}

static uint32_t domain_id(nvtxDomainHandle_t h)
{
    const domain *d = (const domain *)h;
    termsight_session *s = session();
    if (!d || !s || d->magic != HANDLE_DOMAIN)
        return 0;
    return intern_cached((_Atomic uint64_t *)&d->cache, s, d->name);
}

/* The text of an event's message, and its id when it is a registered string (0 otherwise). */
static const char *message(const nvtxEventAttributes_t *a, char *buf, uint32_t *id)
{
    *id = 0;
    size_t need = offsetof(nvtxEventAttributes_t, message) + sizeof a->message;
    if (!a || a->size < need)
        return NULL;
    switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
        return a->message.ascii;
    case NVTX_MESSAGE_TYPE_UNICODE:
        return a->message.unicode ? utf8_from_wide(a->message.unicode, buf, UTF8_MAX) : NULL;
    case NVTX_MESSAGE_TYPE_REGISTERED: {
        reg_string *r = (reg_string *)a->message.registered;
        termsight_session *s = session();
        if (!r || r->magic != HANDLE_STRING)
            return NULL;
        if (s)
            *id = intern_cached(&r->cache, s, r->text);
        return r->text;
    }
    default:
        return "";
    }
}

/* ---- The callbacks ---------------------------------------------------------------------- */

static void NVTX_API cb_mark_a(const char *msg)
{
    mark(msg, 0, 0);
}

static void NVTX_API cb_mark_w(const wchar_t *msg)
{
    char buf[UTF8_MAX];
    if (collecting() && msg)
        mark(utf8_from_wide(msg, buf, sizeof buf), 0, 0);
}

static void NVTX_API cb_mark_ex(const nvtxEventAttributes_t *a)
{
    char buf[UTF8_MAX];
    uint32_t id;
    if (collecting()) {
        const char *text = message(a, buf, &id);
        mark(text, id, 0);
    }
}

static int NVTX_API cb_push_a(const char *msg)
{
    return push(msg, 0, 0);
}

static int NVTX_API cb_push_w(const wchar_t *msg)
{
    char buf[UTF8_MAX];
    return push(msg ? utf8_from_wide(msg, buf, sizeof buf) : NULL, 0, 0);
}

static int NVTX_API cb_push_ex(const nvtxEventAttributes_t *a)
{
    char buf[UTF8_MAX];
    uint32_t id;
    const char *text = message(a, buf, &id);
    return push(text, id, 0);
}

static int NVTX_API cb_pop(void)
{
    return pop();
}

static nvtxRangeId_t NVTX_API cb_start_a(const char *msg)
{
    return range_start(msg, 0, 0);
}

static nvtxRangeId_t NVTX_API cb_start_w(const wchar_t *msg)
{
    char buf[UTF8_MAX];
    return range_start(msg ? utf8_from_wide(msg, buf, sizeof buf) : NULL, 0, 0);
}

static nvtxRangeId_t NVTX_API cb_start_ex(const nvtxEventAttributes_t *a)
{
    char buf[UTF8_MAX];
    uint32_t id;
    const char *text = message(a, buf, &id);
    return range_start(text, id, 0);
}

static void NVTX_API cb_end(nvtxRangeId_t id)
{
    range_end(id);
}

static void NVTX_API cb_name_os_thread_a(uint32_t tid, const char *name)
{
    if (name && session())
        api_thread_name_tid(tid, termsight_name(name));
}

static void NVTX_API cb_name_os_thread_w(uint32_t tid, const wchar_t *name)
{
    char buf[UTF8_MAX];
    if (name && session())
        api_thread_name_tid(tid, termsight_name(utf8_from_wide(name, buf, sizeof buf)));
}

static void NVTX_API cb_domain_mark_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    char buf[UTF8_MAX];
    uint32_t id;
    if (collecting()) {
        const char *text = message(a, buf, &id);
        mark(text, id, domain_id(d));
    }
}

static int NVTX_API cb_domain_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    char buf[UTF8_MAX];
    uint32_t id;
    const char *text = message(a, buf, &id);
    return push(text, id, domain_id(d));
}

static int NVTX_API cb_domain_pop(nvtxDomainHandle_t d)
{
    (void)d;
    return pop();
}

static nvtxRangeId_t NVTX_API cb_domain_start_ex(nvtxDomainHandle_t d,
                                                 const nvtxEventAttributes_t *a)
{
    char buf[UTF8_MAX];
    uint32_t id;
    const char *text = message(a, buf, &id);
    return range_start(text, id, domain_id(d));
}

static void NVTX_API cb_domain_end(nvtxDomainHandle_t d, nvtxRangeId_t id)
{
    (void)d;
    range_end(id);
}

/* Registered strings live as long as the process (NVTX has no call to release them). */
static nvtxStringHandle_t register_string(const char *text)
{
    if (!text)
        return NULL;
    size_t n = strlen(text);
    reg_string *r = malloc(sizeof *r + n + 1);
    if (!r)
        return NULL;
    r->magic = HANDLE_STRING;
    atomic_init(&r->cache, 0);
    memcpy(r->text, text, n + 1);
    return (nvtxStringHandle_t)r;
}

static nvtxStringHandle_t NVTX_API cb_domain_register_string_a(nvtxDomainHandle_t d,
                                                               const char *text)
{
    (void)d;
    return register_string(text);
}

static nvtxStringHandle_t NVTX_API cb_domain_register_string_w(nvtxDomainHandle_t d,
                                                               const wchar_t *text)
{
    char buf[UTF8_MAX];
    (void)d;
    return text ? register_string(utf8_from_wide(text, buf, sizeof buf)) : NULL;
}

static nvtxDomainHandle_t create_domain(const char *name)
{
    if (!name)
        return NULL;
    size_t n = strlen(name);
    domain *d = malloc(sizeof *d + n + 1);
    if (!d)
        return NULL;
    d->magic = HANDLE_DOMAIN;
    atomic_init(&d->cache, 0);
    memcpy(d->name, name, n + 1);
    return (nvtxDomainHandle_t)d;
}

static nvtxDomainHandle_t NVTX_API cb_domain_create_a(const char *name)
{
    return create_domain(name);
}

static nvtxDomainHandle_t NVTX_API cb_domain_create_w(const wchar_t *name)
{
    char buf[UTF8_MAX];
    return name ? create_domain(utf8_from_wide(name, buf, sizeof buf)) : NULL;
}

static void NVTX_API cb_domain_destroy(nvtxDomainHandle_t h)
{
    domain *d = (domain *)h;
    if (d && d->magic == HANDLE_DOMAIN) {
        d->magic = 0;
        free(d);
    }
}

/* ---- Injection entry -------------------------------------------------------------------- */

typedef struct callback {
    unsigned id;
    NvtxFunctionPointer fn;
} callback;

#define CB(id, fn)                                                                                 \
    {                                                                                              \
        (id), (NvtxFunctionPointer)(fn)                                                            \
    }

static const callback core_callbacks[] = {
    CB(NVTX_CBID_CORE_MarkEx, cb_mark_ex),
    CB(NVTX_CBID_CORE_MarkA, cb_mark_a),
    CB(NVTX_CBID_CORE_MarkW, cb_mark_w),
    CB(NVTX_CBID_CORE_RangeStartEx, cb_start_ex),
    CB(NVTX_CBID_CORE_RangeStartA, cb_start_a),
    CB(NVTX_CBID_CORE_RangeStartW, cb_start_w),
    CB(NVTX_CBID_CORE_RangeEnd, cb_end),
    CB(NVTX_CBID_CORE_RangePushEx, cb_push_ex),
    CB(NVTX_CBID_CORE_RangePushA, cb_push_a),
    CB(NVTX_CBID_CORE_RangePushW, cb_push_w),
    CB(NVTX_CBID_CORE_RangePop, cb_pop),
    CB(NVTX_CBID_CORE_NameOsThreadA, cb_name_os_thread_a),
    CB(NVTX_CBID_CORE_NameOsThreadW, cb_name_os_thread_w),
};

static const callback core2_callbacks[] = {
    CB(NVTX_CBID_CORE2_DomainMarkEx, cb_domain_mark_ex),
    CB(NVTX_CBID_CORE2_DomainRangeStartEx, cb_domain_start_ex),
    CB(NVTX_CBID_CORE2_DomainRangeEnd, cb_domain_end),
    CB(NVTX_CBID_CORE2_DomainRangePushEx, cb_domain_push_ex),
    CB(NVTX_CBID_CORE2_DomainRangePop, cb_domain_pop),
    CB(NVTX_CBID_CORE2_DomainRegisterStringA, cb_domain_register_string_a),
    CB(NVTX_CBID_CORE2_DomainRegisterStringW, cb_domain_register_string_w),
    CB(NVTX_CBID_CORE2_DomainCreateA, cb_domain_create_a),
    CB(NVTX_CBID_CORE2_DomainCreateW, cb_domain_create_w),
    CB(NVTX_CBID_CORE2_DomainDestroy, cb_domain_destroy),
};

static int fill(const NvtxExportTableCallbacks *etbl, NvtxCallbackModule module,
                const callback *cbs, size_t n)
{
    NvtxFunctionTable table = NULL;
    unsigned int size = 0;
    if (!etbl->GetModuleFunctionTable(module, &table, &size) || !table)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (cbs[i].id < size && table[cbs[i].id])
            *table[cbs[i].id] = cbs[i].fn;
    return 0;
}

#define MAX_MODULES 256

static pthread_mutex_t modules_lock = PTHREAD_MUTEX_INITIALIZER;
static NvtxGetExportTableFunc_t modules[MAX_MODULES];
static unsigned module_count;

int nvtx_inject(void (*get_export_table)(void))
{
    NvtxGetExportTableFunc_t get = (NvtxGetExportTableFunc_t)get_export_table;
    if (!get)
        return 0;
    pthread_mutex_lock(&modules_lock);
    for (unsigned i = 0; i < module_count; i++) {
        if (modules[i] == get) {
            pthread_mutex_unlock(&modules_lock);
            return 1;
        }
    }
    const NvtxExportTableCallbacks *etbl = get(NVTX_ETID_CALLBACKS);
    int ok = etbl && etbl->struct_size >= sizeof *etbl && etbl->GetModuleFunctionTable &&
             fill(etbl, NVTX_CB_MODULE_CORE, core_callbacks,
                  sizeof core_callbacks / sizeof core_callbacks[0]) == 0;
    if (ok)
        fill(etbl, NVTX_CB_MODULE_CORE2, core2_callbacks,
             sizeof core2_callbacks / sizeof core2_callbacks[0]);
    if (ok && module_count < MAX_MODULES)
        modules[module_count++] = get;
    pthread_mutex_unlock(&modules_lock);
    return ok;
}

#endif
