/* The NVTX v3 injection without an NVTX loader: fake export tables handed to
 * InitializeInjectionNvtx2 as nvtxDetail/nvtxInit.h would hand them (one per module that embeds
 * NVTX), then the callbacks it filled in called directly under a session, and the recording read
 * event by event. */
#include "collectors.h"
#if TERMSIGHT_HAVE_CUPTI
#include "cupti_internal.h"
#endif

#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#define TESTUTIL_TAG "nvtx"
#include "testutil.h"
#include "eventlist.h"

#include <check.h>
#include <pthread.h>
#include <unistd.h>

int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get);

/* ---- A fake module: its function-pointer slots and its export table ---------------------- */

/* What the loader's slots hold before an injection fills them (its own no-op stubs there). */
static void sentinel(void) {}
#define SENTINEL ((NvtxFunctionPointer)sentinel)

typedef struct fake_module {
    NvtxFunctionPointer core[NVTX_CBID_CORE_SIZE];
    NvtxFunctionPointer *core_slots[NVTX_CBID_CORE_SIZE];
    NvtxFunctionPointer core2[NVTX_CBID_CORE2_SIZE];
    NvtxFunctionPointer *core2_slots[NVTX_CBID_CORE2_SIZE];
    int asked[NVTX_CB_MODULE_SIZE]; /* GetModuleFunctionTable calls per module */
    int gets;                       /* export-table lookups */
} fake_module;

static fake_module mod_a, mod_b;

static void fake_reset(fake_module *m)
{
    memset(m, 0, sizeof *m);
    /* Slot 0 is NULL in the loader's tables (no function has id 0). */
    for (unsigned i = 1; i < NVTX_CBID_CORE_SIZE; i++) {
        m->core[i] = SENTINEL;
        m->core_slots[i] = &m->core[i];
    }
    for (unsigned i = 1; i < NVTX_CBID_CORE2_SIZE; i++) {
        m->core2[i] = SENTINEL;
        m->core2_slots[i] = &m->core2[i];
    }
}

static int table_of(fake_module *m, NvtxCallbackModule module, NvtxFunctionTable *table,
                    unsigned *size)
{
    if (module >= 0 && module < NVTX_CB_MODULE_SIZE)
        m->asked[module]++;
    switch (module) {
    case NVTX_CB_MODULE_CORE:
        *table = m->core_slots;
        *size = NVTX_CBID_CORE_SIZE;
        return 1;
    case NVTX_CB_MODULE_CORE2:
        *table = m->core2_slots;
        *size = NVTX_CBID_CORE2_SIZE;
        return 1;
    default:
        return 0;
    }
}

static int NVTX_API table_a(NvtxCallbackModule module, NvtxFunctionTable *table, unsigned *size)
{
    return table_of(&mod_a, module, table, size);
}

static int NVTX_API table_b(NvtxCallbackModule module, NvtxFunctionTable *table, unsigned *size)
{
    return table_of(&mod_b, module, table, size);
}

static const NvtxExportTableCallbacks etbl_a = {sizeof etbl_a, table_a};
static const NvtxExportTableCallbacks etbl_b = {sizeof etbl_b, table_b};

static const void *NVTX_API get_a(uint32_t id)
{
    mod_a.gets++;
    return id == NVTX_ETID_CALLBACKS ? &etbl_a : NULL;
}

static const void *NVTX_API get_b(uint32_t id)
{
    mod_b.gets++;
    return id == NVTX_ETID_CALLBACKS ? &etbl_b : NULL;
}

/* A loader that has no callbacks table: the injection must say no. */
static const void *NVTX_API get_none(uint32_t id)
{
    (void)id;
    return NULL;
}

/* The ids the injection implements; the others (categories, resources, Initialize) stay. */
static const unsigned core_ids[] = {
    NVTX_CBID_CORE_MarkEx,       NVTX_CBID_CORE_MarkA,       NVTX_CBID_CORE_MarkW,
    NVTX_CBID_CORE_RangeStartEx, NVTX_CBID_CORE_RangeStartA, NVTX_CBID_CORE_RangeStartW,
    NVTX_CBID_CORE_RangeEnd,     NVTX_CBID_CORE_RangePushEx, NVTX_CBID_CORE_RangePushA,
    NVTX_CBID_CORE_RangePushW,   NVTX_CBID_CORE_RangePop,    NVTX_CBID_CORE_NameOsThreadA,
    NVTX_CBID_CORE_NameOsThreadW};
static const unsigned core2_ids[] = {
    NVTX_CBID_CORE2_DomainMarkEx,          NVTX_CBID_CORE2_DomainRangeStartEx,
    NVTX_CBID_CORE2_DomainRangeEnd,        NVTX_CBID_CORE2_DomainRangePushEx,
    NVTX_CBID_CORE2_DomainRangePop,        NVTX_CBID_CORE2_DomainRegisterStringA,
    NVTX_CBID_CORE2_DomainRegisterStringW, NVTX_CBID_CORE2_DomainCreateA,
    NVTX_CBID_CORE2_DomainCreateW,         NVTX_CBID_CORE2_DomainDestroy};

static int listed(const unsigned *ids, size_t n, unsigned id)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id)
            return 1;
    return 0;
}

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static void check_filled(const fake_module *m)
{
    for (unsigned i = 1; i < NVTX_CBID_CORE_SIZE; i++) {
        int want = listed(core_ids, COUNT(core_ids), i);
        ck_assert_msg(want ? m->core[i] && m->core[i] != SENTINEL : m->core[i] == SENTINEL,
                      "core slot %u %s", i, want ? "not filled" : "overwritten");
    }
    for (unsigned i = 1; i < NVTX_CBID_CORE2_SIZE; i++) {
        int want = listed(core2_ids, COUNT(core2_ids), i);
        ck_assert_msg(want ? m->core2[i] && m->core2[i] != SENTINEL : m->core2[i] == SENTINEL,
                      "core2 slot %u %s", i, want ? "not filled" : "overwritten");
    }
}

START_TEST(tables_filled_once_per_module)
{
    unsetenv("TERMSIGHT_AUTOSTART");
    fake_reset(&mod_a);
    fake_reset(&mod_b);
    ck_assert_int_eq(InitializeInjectionNvtx2(NULL), 0);
    ck_assert_int_eq(InitializeInjectionNvtx2(get_none), 0);

    ck_assert_int_ne(InitializeInjectionNvtx2(get_a), 0);
    check_filled(&mod_a);
    ck_assert_int_eq(mod_a.asked[NVTX_CB_MODULE_CORE], 1);
    ck_assert_int_eq(mod_a.asked[NVTX_CB_MODULE_CORE2], 1);

    /* The same module again: success, nothing asked again, the slots unchanged. */
    fake_module before = mod_a;
    ck_assert_int_ne(InitializeInjectionNvtx2(get_a), 0);
    ck_assert_int_eq(mod_a.asked[NVTX_CB_MODULE_CORE], 1);
    ck_assert_mem_eq(mod_a.core, before.core, sizeof before.core);
    ck_assert_mem_eq(mod_a.core2, before.core2, sizeof before.core2);

    /* A second module (another shared object embedding NVTX) gets the same callbacks. */
    ck_assert_int_ne(InitializeInjectionNvtx2(get_b), 0);
    check_filled(&mod_b);
    ck_assert_mem_eq(mod_b.core, mod_a.core, sizeof mod_a.core);
    ck_assert_mem_eq(mod_b.core2, mod_a.core2, sizeof mod_a.core2);
}
END_TEST

/* ---- The callbacks under a session ------------------------------------------------------- */

typedef void (*mark_a_fn)(const char *);
typedef int (*push_a_fn)(const char *);
typedef int (*pop_fn)(void);
typedef nvtxRangeId_t (*start_a_fn)(const char *);
typedef void (*end_fn)(nvtxRangeId_t);
typedef void (*name_thread_a_fn)(uint32_t, const char *);
typedef nvtxDomainHandle_t (*domain_create_a_fn)(const char *);
typedef void (*domain_destroy_fn)(nvtxDomainHandle_t);
typedef nvtxStringHandle_t (*register_a_fn)(nvtxDomainHandle_t, const char *);
typedef int (*domain_push_ex_fn)(nvtxDomainHandle_t, const nvtxEventAttributes_t *);
typedef int (*domain_pop_fn)(nvtxDomainHandle_t);
typedef void (*domain_mark_ex_fn)(nvtxDomainHandle_t, const nvtxEventAttributes_t *);

#define CORE(id, type)  ((type)mod_a.core[NVTX_CBID_CORE_##id])
#define CORE2(id, type) ((type)mod_a.core2[NVTX_CBID_CORE2_##id])

typedef struct end_arg {
    nvtxRangeId_t id;
    uint32_t tid;
} end_arg;

static void *end_elsewhere(void *p)
{
    end_arg *a = p;
    a->tid = (uint32_t)gettid();
    CORE(RangeEnd, end_fn)(a->id);
    return NULL;
}

static nvtxEventAttributes_t ascii(const char *text)
{
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = text;
    return a;
}

static const ts_event *find_phase(const event_list *l, uint32_t phase)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->ev[i].kind == TS_KIND_PHASE && l->ev[i].aux == phase)
            return &l->ev[i];
    return NULL;
}

/* Registered strings live as long as the process (NVTX has no call to release them); programs
 * keep their handles, as here, where LeakSanitizer sees it still reachable. */
static nvtxStringHandle_t reg;

/* Module a's table filled by the injection, with the default step pattern and no autostart. */
static void inject_a(void)
{
    unsetenv("TERMSIGHT_AUTOSTART");
    unsetenv("TERMSIGHT_STEP_PATTERN");
    /* In a test process of its own (Check's default) the module is new; run without fork, it
     * was filled by the test above and stays so. */
    if (!mod_a.core[NVTX_CBID_CORE_MarkA])
        fake_reset(&mod_a);
    ck_assert_int_ne(InitializeInjectionNvtx2(get_a), 0);
    check_filled(&mod_a);
}

/* Core calls on this thread (main_tid): nested pushes and pops, a range started here and ended
 * on another thread (*ea: its id, and the thread that ended it), a mark, a thread name. */
static void call_core(uint32_t main_tid, end_arg *ea)
{
    /* Nested push/pop: the return values are the depths. */
    ck_assert_int_eq(CORE(RangePushA, push_a_fn)("outer"), 0);
    ck_assert_int_eq(CORE(RangePushA, push_a_fn)("inner"), 1);
    ck_assert_int_eq(CORE(RangePop, pop_fn)(), 1);
    ck_assert_int_eq(CORE(RangePop, pop_fn)(), 0);
    ck_assert_int_eq(CORE(RangePop, pop_fn)(), -1); /* nothing open: NVTX's error value */

    /* Start here, end on another thread. */
    *ea = (end_arg){.id = CORE(RangeStartA, start_a_fn)("handoff")};
    ck_assert_uint_ne(ea->id, 0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, end_elsewhere, ea), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_uint_ne(ea->tid, main_tid);
    CORE(RangeEnd, end_fn)(ea->id); /* ended already: ignored */

    CORE(MarkA, mark_a_fn)("hello mark");
    CORE(NameOsThreadA, name_thread_a_fn)(main_tid, "nvtx-test-main");
}

/* A domain: a pushed range, a mark, and a range named by a registered string. Returns the
 * domain, for call_steps_phases to destroy after its calls. */
static nvtxDomainHandle_t call_domain(void)
{
    nvtxDomainHandle_t d = CORE2(DomainCreateA, domain_create_a_fn)("my-domain");
    ck_assert_ptr_nonnull(d);
    reg = CORE2(DomainRegisterStringA, register_a_fn)(d, "registered-op");
    ck_assert_ptr_nonnull(reg);
    nvtxEventAttributes_t a = ascii("dom-op");
    ck_assert_int_eq(CORE2(DomainRangePushEx, domain_push_ex_fn)(d, &a), 0);
    ck_assert_int_eq(CORE2(DomainRangePop, domain_pop_fn)(d), 0);
    a = ascii("dom-mark");
    CORE2(DomainMarkEx, domain_mark_ex_fn)(d, &a);
    a = ascii(NULL);
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = reg;
    ck_assert_int_eq(CORE2(DomainRangePushEx, domain_push_ex_fn)(d, &a), 0);
    ck_assert_int_eq(CORE2(DomainRangePop, domain_pop_fn)(d), 0);
    return d;
}

/* Steps (a pushed "step" and a started/ended "ProfilerStep#3") and the phase operators. */
static void call_steps_phases(void)
{
    CORE(RangePushA, push_a_fn)("step");
    CORE(RangePushA, push_a_fn)("in step");
    CORE(RangePop, pop_fn)();
    CORE(RangePop, pop_fn)();
    nvtxRangeId_t ps = CORE(RangeStartA, start_a_fn)("ProfilerStep#3");
    ck_assert_uint_ne(ps, 0);
    CORE(RangeEnd, end_fn)(ps);

    /* Phase operators. */
    CORE(RangePushA, push_a_fn)("fwd_op");
    CORE(RangePop, pop_fn)();
    CORE(RangePushA, push_a_fn)("bwd_op");
    CORE(RangePop, pop_fn)();
}

/* What call_core recorded; ended_on: the thread that ended the handed-off range. */
static void check_core(const event_list *l, uint32_t main_tid, uint32_t ended_on)
{
    const ts_event *outer = find(l, TS_KIND_OP_RANGE, "outer");
    const ts_event *inner = find(l, TS_KIND_OP_RANGE, "inner");
    ck_assert_ptr_nonnull(outer);
    ck_assert_ptr_nonnull(inner);
    ck_assert_uint_eq(count(l, TS_KIND_OP_RANGE, "outer"), 1);
    ck_assert_uint_eq(count(l, TS_KIND_OP_RANGE, "inner"), 1);
    ck_assert_uint_eq(outer->aux, 0);
    ck_assert_uint_eq(inner->aux, 1);
    ck_assert_uint_eq(outer->tid, main_tid);
    ck_assert_uint_eq(inner->tid, main_tid);
    ck_assert_uint_eq(outer->corr, 0); /* the default domain */
    ck_assert_uint_ge(inner->begin_ns, outer->begin_ns);
    ck_assert_uint_le(inner->end_ns, outer->end_ns);
    ck_assert(!(outer->flags & TS_EF_CROSS_THREAD));

    const ts_event *h = find(l, TS_KIND_OP_RANGE, "handoff");
    ck_assert_ptr_nonnull(h);
    ck_assert_uint_eq(count(l, TS_KIND_OP_RANGE, "handoff"), 1);
    ck_assert(h->flags & TS_EF_CROSS_THREAD);
    ck_assert_uint_eq(h->tid, main_tid);
    ck_assert_uint_eq(h->v1, ended_on);
    ck_assert_uint_le(h->begin_ns, h->end_ns);

    const ts_event *m = find(l, TS_KIND_NVTX_MARK, "hello mark");
    ck_assert_ptr_nonnull(m);
    ck_assert_uint_eq(m->tid, main_tid);
    ck_assert_uint_eq(m->corr, 0);

    const ts_event *tn = find(l, TS_KIND_THREAD_NAME, "nvtx-test-main");
    ck_assert_ptr_nonnull(tn);
    ck_assert_uint_eq(tn->tid, main_tid);
}

/* What call_domain recorded. */
static void check_domain(const event_list *l)
{
    const ts_event *dop = find(l, TS_KIND_OP_RANGE, "dom-op");
    ck_assert_ptr_nonnull(dop);
    ck_assert_str_eq(name_of(l, dop->corr), "my-domain");
    ck_assert_uint_eq(dop->aux, 0);
    const ts_event *dm = find(l, TS_KIND_NVTX_MARK, "dom-mark");
    ck_assert_ptr_nonnull(dm);
    ck_assert_uint_eq(dm->corr, dop->corr);
    const ts_event *rop = find(l, TS_KIND_OP_RANGE, "registered-op");
    ck_assert_ptr_nonnull(rop);
    ck_assert_uint_eq(rop->corr, dop->corr);
}

/* What call_steps_phases recorded. */
static void check_steps_phases(const event_list *l)
{
    /* Two steps, numbered 1 and 2; step ranges are not operators, what is inside them is. */
    ck_assert_uint_eq(count(l, TS_KIND_STEP_BEGIN, NULL), 2);
    ck_assert_uint_eq(count(l, TS_KIND_STEP_END, NULL), 2);
    uint64_t next = 1;
    for (size_t i = 0; i < l->n; i++)
        if (l->ev[i].kind == TS_KIND_STEP_BEGIN)
            ck_assert_uint_eq(l->ev[i].v0, next++);
    ck_assert_uint_eq(count(l, TS_KIND_OP_RANGE, "step"), 0);
    ck_assert_uint_eq(count(l, TS_KIND_OP_RANGE, "ProfilerStep#3"), 0);
    const ts_event *in_step = find(l, TS_KIND_OP_RANGE, "in step");
    ck_assert_ptr_nonnull(in_step);
    ck_assert_uint_eq(in_step->aux, 0); /* the step's frame is no operator frame */

    /* Phase marks at the forward operator's begin and the backward operator's end; the
     * operators are recorded as well. */
    const ts_event *fw = find(l, TS_KIND_OP_RANGE, "fwd_op");
    const ts_event *bw = find(l, TS_KIND_OP_RANGE, "bwd_op");
    ck_assert_ptr_nonnull(fw);
    ck_assert_ptr_nonnull(bw);
    const ts_event *fp = find_phase(l, TS_PHASE_FORWARD_START);
    const ts_event *bp = find_phase(l, TS_PHASE_BACKWARD_END);
    ck_assert_ptr_nonnull(fp);
    ck_assert_ptr_nonnull(bp);
    ck_assert_uint_ge(fp->begin_ns, in_step->end_ns);
    ck_assert_uint_le(fp->begin_ns, fw->end_ns);
    ck_assert_uint_ge(bp->begin_ns, bw->end_ns);
    ck_assert_uint_eq(count(l, TS_KIND_PHASE, NULL), 2);
}

/* A session with its output in tmp and the options' defaults. */
static termsight_session *session_in(const char *tmp)
{
    termsight_options o;
    termsight_options_init(&o);
    o.output_path = tmp;
    termsight_session *s = NULL;
    ck_assert_int_eq(termsight_session_create(&o, &s), TERMSIGHT_OK);
    return s;
}

START_TEST(callbacks_recorded)
{
    inject_a();

    /* The phase operators (PROFILING_FP_START, PROFILING_BP_END) come from the environment when
     * the options are made. */
    setenv("PROFILING_FP_START", "fwd_op", 1);
    setenv("PROFILING_BP_END", "bwd_op", 1);
    char *tmp = tmp_make();
    termsight_session *s = session_in(tmp);
    char run[1100];
    snprintf(run, sizeof run, "%s", termsight_run_folder(s));
    uint32_t main_tid = (uint32_t)gettid();

    end_arg ea;
    call_core(main_tid, &ea);
    nvtxDomainHandle_t d = call_domain();
    call_steps_phases();

    CORE2(DomainDestroy, domain_destroy_fn)(d);
    ck_assert_int_eq(termsight_session_destroy(s), TERMSIGHT_OK);
    unsetenv("PROFILING_FP_START");
    unsetenv("PROFILING_BP_END");

    event_list l;
    read_all(run, &l);

    check_core(&l, main_tid, ea.tid);
    check_domain(&l);
    check_steps_phases(&l);

    free(l.ev);
    recording_reader_close(l.reader);
    tmp_remove(tmp);
}
END_TEST

#if TERMSIGHT_HAVE_CUPTI
/* ---- Start/end ranges attribute the kernels their thread launches ------------------------ */

/* A fake CUPTI external correlation stack (the thread's, as CUPTI's is): its top is the op a
 * kernel launched now would carry in its EXTERNAL_CORRELATION record. */
static __thread uint64_t corr_stack[64];
static __thread uint32_t corr_depth;

static CUptiResult fake_push(CUpti_ExternalCorrelationKind kind, uint64_t id)
{
    ck_assert_int_eq(kind, CUPTI_EXTERNAL_KIND);
    ck_assert_uint_lt(corr_depth, 64);
    corr_stack[corr_depth++] = id;
    return CUPTI_SUCCESS;
}

static CUptiResult fake_pop(CUpti_ExternalCorrelationKind kind, uint64_t *last)
{
    ck_assert_int_eq(kind, CUPTI_EXTERNAL_KIND);
    ck_assert_uint_gt(corr_depth, 0);
    *last = corr_stack[--corr_depth];
    return CUPTI_SUCCESS;
}

static uint64_t corr_top(void)
{
    return corr_depth ? corr_stack[corr_depth - 1] : 0;
}

START_TEST(start_end_ranges_attribute_launches)
{
    inject_a();
    char *tmp = tmp_make();
    termsight_session *s = session_in(tmp);
    static cupti_api fake;
    fake.push_external = fake_push;
    fake.pop_external = fake_pop;
    cupti_range_hooks_api(&fake);
    api_set_range_hooks(&cupti_range_hooks);
    uint32_t a = termsight_name("start-a"), b = termsight_name("push-b"),
             c = termsight_name("start-c"), d = termsight_name("start-d"),
             e = termsight_name("handed-e"), f = termsight_name("push-f");

    /* A start range is the op of what its thread launches while it is the innermost. */
    nvtxRangeId_t ra = CORE(RangeStartA, start_a_fn)("start-a");
    ck_assert_uint_eq(corr_top(), a);
    CORE(RangePushA, push_a_fn)("push-b");
    ck_assert_uint_eq(corr_top(), b);
    /* Ended below the top: out from under it, the pushed range stays innermost. */
    CORE(RangeEnd, end_fn)(ra);
    ck_assert_uint_eq(corr_depth, 1);
    ck_assert_uint_eq(corr_top(), b);
    CORE(RangePop, pop_fn)();
    ck_assert_uint_eq(corr_depth, 0);

    /* Overlapping start ranges ended out of order. */
    nvtxRangeId_t rc = CORE(RangeStartA, start_a_fn)("start-c");
    nvtxRangeId_t rd = CORE(RangeStartA, start_a_fn)("start-d");
    ck_assert_uint_eq(corr_top(), d);
    CORE(RangeEnd, end_fn)(rc);
    ck_assert_uint_eq(corr_depth, 1);
    ck_assert_uint_eq(corr_top(), d);
    CORE(RangeEnd, end_fn)(rd);
    ck_assert_uint_eq(corr_depth, 0);
    (void)c;

    /* Ended on another thread: this thread's launches keep it until its next range call. */
    end_arg ea = {.id = CORE(RangeStartA, start_a_fn)("handed-e")};
    ck_assert_uint_eq(corr_top(), e);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, end_elsewhere, &ea), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_uint_eq(corr_top(), e);
    CORE(RangePushA, push_a_fn)("push-f");
    ck_assert_uint_eq(corr_depth, 1);
    ck_assert_uint_eq(corr_top(), f);
    CORE(RangePop, pop_fn)();
    ck_assert_uint_eq(corr_depth, 0);

    api_set_range_hooks(NULL);
    cupti_range_hooks_api(NULL);
    ck_assert_int_eq(termsight_session_destroy(s), TERMSIGHT_OK);
    tmp_remove(tmp);
}
END_TEST
#endif

int main(void)
{
    Suite *s = suite_create("nvtx");
    TCase *tc = tcase_create("injection");
    tcase_add_test(tc, tables_filled_once_per_module);
    tcase_add_test(tc, callbacks_recorded);
#if TERMSIGHT_HAVE_CUPTI
    tcase_add_test(tc, start_end_ranges_attribute_launches);
#endif
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
