/* libFuzzer target for the NVTX injection (collectors/nvtx.c): the callbacks it fills into a
 * loader's tables, called under a live session with names of any bytes (ASCII, wide strings with
 * any code unit, event attributes of any size and message type, registered strings and domains,
 * handles of the wrong kind), and the step pattern compiled from any text.
 *
 * The input is a script: one byte chooses the call, the next ones its arguments (a length, then
 * that many bytes of name). Promises checked, besides ASan's: push returns the depth before it
 * and pop the depth after it (-1 when nothing is open); a range named to match the step pattern
 * counts exactly one step and any other none; a bad pattern is refused with a message. Every
 * range the script leaves open is closed at its end, so inputs do not depend on each other. */
#include "collectors.h"
#include "fuzz.h"

#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <wchar.h>

int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get);

#define STEP_PATTERN "^(step|ProfilerStep#[0-9]+)"
#define NAME_MAX_IN  255 /* longest name taken from the input */
#define HANDLES      1024
#define TRUNCATE_AT  4096 /* inputs between two truncations of the recording */

/* ---- A fake module, as tests/collectors/test_nvtx.c drives the injection ----------------- */

static NvtxFunctionPointer core[NVTX_CBID_CORE_SIZE], *core_slots[NVTX_CBID_CORE_SIZE];
static NvtxFunctionPointer core2[NVTX_CBID_CORE2_SIZE], *core2_slots[NVTX_CBID_CORE2_SIZE];

static int NVTX_API table(NvtxCallbackModule module, NvtxFunctionTable *out, unsigned *size)
{
    if (module == NVTX_CB_MODULE_CORE) {
        *out = core_slots;
        *size = NVTX_CBID_CORE_SIZE;
        return 1;
    }
    if (module == NVTX_CB_MODULE_CORE2) {
        *out = core2_slots;
        *size = NVTX_CBID_CORE2_SIZE;
        return 1;
    }
    return 0;
}

static const NvtxExportTableCallbacks etbl = {sizeof etbl, table};

static const void *NVTX_API get_table(uint32_t id)
{
    return id == NVTX_ETID_CALLBACKS ? &etbl : NULL;
}

/* ---- State kept across inputs ------------------------------------------------------------ */

static termsight_session *session;
static char recording[1200];
static regex_t step_re;
/* Registered strings and domains live as long as the process (NVTX has no call to release a
 * string): kept here, reachable, and reused once the pool is full. */
static nvtxStringHandle_t strings[HANDLES];
static nvtxDomainHandle_t domains[HANDLES];
static size_t nstrings, ndomains;

static char dir[] = "/tmp/termsight-fuzz-nvtx-XXXXXX";

/* The session ends and its run folder goes: a fuzzing run leaves nothing behind. */
static void cleanup(void)
{
    char run_folder[1100], folder[1150];
    snprintf(run_folder, sizeof run_folder, "%s", termsight_run_folder(session));
    termsight_session_destroy(session);
    unlink(recording);
    snprintf(folder, sizeof folder, "%s/%s", run_folder, TS_RECORDING_DIR);
    rmdir(folder);
    rmdir(run_folder);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (!mkdtemp(dir)) {
        perror("fuzz_nvtx: mkdtemp");
        abort();
    }
    setenv("TERMSIGHT_STEP_PATTERN", STEP_PATTERN, 1);
    char why[320];
    termsight_options o;
    termsight_options_init(&o);
    o.output_path = dir;
    o.max_threads = 2;
    o.lane_events = 1u << 16;
    o.sample_interval_ms = 3600000;
    o.fp_start_op = "forward";
    o.bp_end_op = "backward";
    o.process_name = "fuzz_nvtx";
    if (nvtx_step_pattern_compile(STEP_PATTERN, &step_re, why, sizeof why) != 0 ||
        termsight_session_create(&o, &session) != TERMSIGHT_OK) {
        fprintf(stderr, "fuzz_nvtx: no session: %s\n", termsight_last_error());
        abort();
    }
    snprintf(recording, sizeof recording, "%s/%s/%s", termsight_run_folder(session),
             TS_RECORDING_DIR, TS_RECORDING_FILE);
    for (unsigned i = 1; i < NVTX_CBID_CORE_SIZE; i++)
        core_slots[i] = &core[i];
    for (unsigned i = 1; i < NVTX_CBID_CORE2_SIZE; i++)
        core2_slots[i] = &core2[i];
    atexit(cleanup);
    if (!InitializeInjectionNvtx2(get_table)) {
        fprintf(stderr, "fuzz_nvtx: the injection refused the tables\n");
        abort();
    }
    return 0;
}

/* ---- Reading the script ------------------------------------------------------------------ */

typedef struct script {
    const uint8_t *p, *end;
} script;

static unsigned next_byte(script *s)
{
    return s->p < s->end ? *s->p++ : 0;
}

/* A name of up to 255 bytes of the input, NUL-terminated. */
static const char *next_name(script *s, char *buf)
{
    size_t n = next_byte(s);
    if (n > (size_t)(s->end - s->p))
        n = (size_t)(s->end - s->p);
    memcpy(buf, s->p, n);
    buf[n] = 0;
    s->p += n;
    return buf;
}

/* A wide name: four input bytes a code unit, any value. */
static const wchar_t *next_wide(script *s, wchar_t *buf)
{
    size_t n = next_byte(s);
    if (n > (size_t)(s->end - s->p) / 4)
        n = (size_t)(s->end - s->p) / 4;
    memcpy(buf, s->p, n * 4);
    buf[n] = 0;
    s->p += n * 4;
    return buf;
}

static nvtxDomainHandle_t pick_domain(script *s)
{
    unsigned b = next_byte(s);
    if (b == 0 || !ndomains)
        return NULL;
    if (b == 1 && nstrings) /* a handle of the wrong kind */
        return (nvtxDomainHandle_t)strings[0];
    return domains[b % ndomains];
}

typedef struct attrs {
    nvtxEventAttributes_t a;
    char name[NAME_MAX_IN + 1];
    wchar_t wide[NAME_MAX_IN + 1];
} attrs;

/* Event attributes: the size field, the message type and the message chosen by the input. */
static const nvtxEventAttributes_t *next_attrs(script *s, attrs *at)
{
    unsigned how = next_byte(s);
    if (how == 0xff)
        return NULL;
    memset(&at->a, 0, sizeof at->a);
    at->a.version = NVTX_VERSION;
    at->a.size =
        how & 1 ? (uint16_t)(next_byte(s) | next_byte(s) << 8) : NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    at->a.messageType = (int32_t)(how >> 1) % 5;
    switch (at->a.messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
        at->a.message.ascii = how & 0x80 ? NULL : next_name(s, at->name);
        break;
    case NVTX_MESSAGE_TYPE_UNICODE:
        at->a.message.unicode = how & 0x80 ? NULL : next_wide(s, at->wide);
        break;
    case NVTX_MESSAGE_TYPE_REGISTERED: {
        unsigned b = next_byte(s);
        if (b == 1 && ndomains) /* a domain where a string belongs */
            at->a.message.registered = (nvtxStringHandle_t)domains[0];
        else
            at->a.message.registered = b && nstrings ? strings[b % nstrings] : NULL;
        break;
    }
    default:
        break;
    }
    return &at->a;
}

/* ---- The calls --------------------------------------------------------------------------- */

#define CORE(id, type)  ((type)core[NVTX_CBID_CORE_##id])
#define CORE2(id, type) ((type)core2[NVTX_CBID_CORE2_##id])

typedef void(NVTX_API *mark_a_fn)(const char *);
typedef void(NVTX_API *mark_w_fn)(const wchar_t *);
typedef void(NVTX_API *mark_ex_fn)(const nvtxEventAttributes_t *);
typedef int(NVTX_API *push_a_fn)(const char *);
typedef int(NVTX_API *push_w_fn)(const wchar_t *);
typedef int(NVTX_API *push_ex_fn)(const nvtxEventAttributes_t *);
typedef int(NVTX_API *pop_fn)(void);
typedef nvtxRangeId_t(NVTX_API *start_a_fn)(const char *);
typedef nvtxRangeId_t(NVTX_API *start_w_fn)(const wchar_t *);
typedef nvtxRangeId_t(NVTX_API *start_ex_fn)(const nvtxEventAttributes_t *);
typedef void(NVTX_API *end_fn)(nvtxRangeId_t);
typedef void(NVTX_API *thread_a_fn)(uint32_t, const char *);
typedef void(NVTX_API *thread_w_fn)(uint32_t, const wchar_t *);
typedef void(NVTX_API *dmark_fn)(nvtxDomainHandle_t, const nvtxEventAttributes_t *);
typedef int(NVTX_API *dpush_fn)(nvtxDomainHandle_t, const nvtxEventAttributes_t *);
typedef int(NVTX_API *dpop_fn)(nvtxDomainHandle_t);
typedef nvtxRangeId_t(NVTX_API *dstart_fn)(nvtxDomainHandle_t, const nvtxEventAttributes_t *);
typedef void(NVTX_API *dend_fn)(nvtxDomainHandle_t, nvtxRangeId_t);
typedef nvtxStringHandle_t(NVTX_API *dreg_a_fn)(nvtxDomainHandle_t, const char *);
typedef nvtxStringHandle_t(NVTX_API *dreg_w_fn)(nvtxDomainHandle_t, const wchar_t *);
typedef nvtxDomainHandle_t(NVTX_API *dcreate_a_fn)(const char *);
typedef nvtxDomainHandle_t(NVTX_API *dcreate_w_fn)(const wchar_t *);
typedef void(NVTX_API *ddestroy_fn)(nvtxDomainHandle_t);

#define RANGES 64

typedef struct run {
    int depth; /* pushes open, as the injection must count them */
    nvtxRangeId_t ranges[RANGES];
    size_t nranges;
} run;

static uint64_t steps(void)
{
    return atomic_load(&session->step);
}

static int is_step(const char *name)
{
    return regexec(&step_re, name, 0, NULL, 0) == 0;
}

static void pushed(run *r, int got)
{
    FUZZ_CHECK(got == r->depth);
    r->depth++;
}

static void popped(run *r, int got)
{
    FUZZ_CHECK(got == (r->depth ? r->depth - 1 : -1));
    if (r->depth)
        r->depth--;
}

static void started(run *r, nvtxRangeId_t id)
{
    if (id && r->nranges < RANGES)
        r->ranges[r->nranges++] = id;
    else if (id)
        CORE(RangeEnd, end_fn)(id);
}

static void keep_string(nvtxStringHandle_t h)
{
    if (h && nstrings < HANDLES)
        strings[nstrings++] = h;
    else
        FUZZ_CHECK(!h || nstrings == HANDLES); /* cannot happen: the pool is checked first */
}

static void keep_domain(nvtxDomainHandle_t h)
{
    if (h)
        domains[ndomains++] = h;
}

/* One call of the script to the core API (op 0 to 12): marks, ranges, thread names. */
static void core_call(script *s, run *r, unsigned op)
{
    char name[NAME_MAX_IN + 1];
    wchar_t wide[NAME_MAX_IN + 1];
    attrs at;
    switch (op) {
    case 0:
        CORE(MarkA, mark_a_fn)(next_name(s, name));
        break;
    case 1:
        CORE(MarkW, mark_w_fn)(next_wide(s, wide));
        break;
    case 2:
        CORE(MarkEx, mark_ex_fn)(next_attrs(s, &at));
        break;
    case 3: {
        /* The step oracle: a plain ASCII push counts a step iff its name matches. */
        const char *n = next_name(s, name);
        uint64_t before = steps();
        int depth = r->depth;
        pushed(r, CORE(RangePushA, push_a_fn)(n));
        if (depth < TS_MAX_FRAMES)
            FUZZ_CHECK(steps() - before == (uint64_t)is_step(n));
        break;
    }
    case 4:
        pushed(r, CORE(RangePushW, push_w_fn)(next_wide(s, wide)));
        break;
    case 5:
        pushed(r, CORE(RangePushEx, push_ex_fn)(next_attrs(s, &at)));
        break;
    case 6:
        popped(r, CORE(RangePop, pop_fn)());
        break;
    case 7: {
        const char *n = next_name(s, name);
        uint64_t before = steps();
        started(r, CORE(RangeStartA, start_a_fn)(n));
        FUZZ_CHECK(steps() - before == (uint64_t)is_step(n));
        break;
    }
    case 8:
        started(r, CORE(RangeStartW, start_w_fn)(next_wide(s, wide)));
        break;
    case 9:
        started(r, CORE(RangeStartEx, start_ex_fn)(next_attrs(s, &at)));
        break;
    case 10: {
        /* An id of ours, or any value: unknown ids are ignored. */
        unsigned b = next_byte(s);
        if (b < r->nranges) {
            CORE(RangeEnd, end_fn)(r->ranges[b]);
            r->ranges[b] = r->ranges[--r->nranges];
        } else {
            CORE(RangeEnd, end_fn)((nvtxRangeId_t)b << (next_byte(s) % 56));
        }
        break;
    }
    case 11:
        CORE(NameOsThreadA, thread_a_fn)(next_byte(s), next_name(s, name));
        break;
    default:
        CORE(NameOsThreadW, thread_w_fn)(next_byte(s), next_wide(s, wide));
        break;
    }
}

/* One call of the script to the domain API (op 13 to 24), a stop or start, or a step pattern. */
static void domain_call(script *s, run *r, unsigned op)
{
    char name[NAME_MAX_IN + 1];
    wchar_t wide[NAME_MAX_IN + 1];
    attrs at;
    switch (op) {
    case 13:
        if (ndomains < HANDLES)
            keep_domain(CORE2(DomainCreateA, dcreate_a_fn)(next_name(s, name)));
        break;
    case 14:
        if (ndomains < HANDLES)
            keep_domain(CORE2(DomainCreateW, dcreate_w_fn)(next_wide(s, wide)));
        break;
    case 15:
        if (nstrings < HANDLES)
            keep_string(
                CORE2(DomainRegisterStringA, dreg_a_fn)(pick_domain(s), next_name(s, name)));
        break;
    case 16:
        if (nstrings < HANDLES)
            keep_string(
                CORE2(DomainRegisterStringW, dreg_w_fn)(pick_domain(s), next_wide(s, wide)));
        break;
    case 17:
        CORE2(DomainMarkEx, dmark_fn)(pick_domain(s), next_attrs(s, &at));
        break;
    case 18: {
        nvtxDomainHandle_t d = pick_domain(s);
        pushed(r, CORE2(DomainRangePushEx, dpush_fn)(d, next_attrs(s, &at)));
        break;
    }
    case 19:
        popped(r, CORE2(DomainRangePop, dpop_fn)(pick_domain(s)));
        break;
    case 20: {
        nvtxDomainHandle_t d = pick_domain(s);
        started(r, CORE2(DomainRangeStartEx, dstart_fn)(d, next_attrs(s, &at)));
        break;
    }
    case 21:
        if (r->nranges)
            CORE2(DomainRangeEnd, dend_fn)(pick_domain(s), r->ranges[--r->nranges]);
        break;
    case 22:
        /* Stop or start collecting: the callbacks behave outside a window too. */
        if (termsight_stop(session) != TERMSIGHT_OK)
            FUZZ_CHECK(termsight_start(session) == TERMSIGHT_OK);
        break;
    case 23:
        if (ndomains)
            CORE2(DomainDestroy, ddestroy_fn)(domains[--ndomains]);
        break;
    default: {
        /* A step pattern of any text: compiled, or refused with a message. */
        char why[320] = "";
        regex_t re;
        const char *pattern = next_name(s, name);
        if (!fuzz_pattern_testable(pattern))
            break;
        if (nvtx_step_pattern_compile(pattern, &re, why, sizeof why) == 0) {
            regexec(&re, name, 0, NULL, 0);
            regfree(&re);
        } else {
            FUZZ_CHECK(strstr(why, "TERMSIGHT_STEP_PATTERN=") == why);
        }
        break;
    }
    }
}

/* One call of the script. */
static void step_call(script *s, run *r)
{
    unsigned op = next_byte(s) % 25;
    if (op < 13)
        core_call(s, r, op);
    else
        domain_call(s, r, op);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static unsigned inputs;
    if (++inputs % TRUNCATE_AT == 0)
        (void)truncate(recording, 0); /* the recorder appends: the file stays small */
    script s = {data, data + size};
    run r = {0};
    while (s.p < s.end)
        step_call(&s, &r);
    while (r.depth)
        popped(&r, CORE(RangePop, pop_fn)());
    while (r.nranges)
        CORE(RangeEnd, end_fn)(r.ranges[--r.nranges]);
    if (strcmp(termsight_state(session), "collecting"))
        FUZZ_CHECK(termsight_start(session) == TERMSIGHT_OK);
    return 0;
}
