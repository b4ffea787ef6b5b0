/* A program that loads libtermsight.so with dlopen, uses it and unloads it with dlclose, then goes
 * on: its threads end, it loads the library again, it exits. Reproduced before: after dlclose, a
 * thread that had emitted ended and crashed in __nptl_deallocate_tsd, its key's destructor
 * pointing into the unloaded library (and the exit handler and the fork handler did too). The
 * library is linked with -z nodelete: dlclose leaves it loaded, so everything that points into it
 * stays valid.
 *
 * Each case runs in a child process of its own (Check's fork mode), the library from
 * $TERMSIGHT_LIB. */
#define TESTUTIL_TAG "dlclose"
#include "testutil.h"

#include "termsight/termsight.h"

#include <dlfcn.h>
#include <pthread.h>

typedef struct api {
    void *handle;
    void (*options_init)(termsight_options *);
    int (*create)(const termsight_options *, termsight_session **);
    int (*destroy)(termsight_session *);
    int (*stop)(termsight_session *);
    uint32_t (*name)(const char *);
    void (*counter_id)(uint32_t, double);
    void (*range_begin)(const char *, const char *);
    void (*range_end)(void);
    uint64_t (*recorded)(const termsight_session *);
} api;

static void *sym(void *h, const char *name)
{
    void *p = dlsym(h, name);
    ck_assert_msg(p, "dlsym %s: %s", name, dlerror());
    return p;
}

static void load(api *a)
{
    const char *lib = getenv("TERMSIGHT_LIB");
    ck_assert_msg(lib && *lib, "TERMSIGHT_LIB is not set");
    a->handle = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(a->handle, "dlopen: %s", dlerror());
    *(void **)&a->options_init = sym(a->handle, "termsight_options_init");
    *(void **)&a->create = sym(a->handle, "termsight_session_create");
    *(void **)&a->destroy = sym(a->handle, "termsight_session_destroy");
    *(void **)&a->stop = sym(a->handle, "termsight_stop");
    *(void **)&a->name = sym(a->handle, "termsight_name");
    *(void **)&a->counter_id = sym(a->handle, "termsight_counter_id");
    *(void **)&a->range_begin = sym(a->handle, "termsight_range_begin");
    *(void **)&a->range_end = sym(a->handle, "termsight_range_end");
    *(void **)&a->recorded = sym(a->handle, "termsight_events_recorded");
}

static termsight_session *create(const api *a, const char *out)
{
    termsight_options o;
    a->options_init(&o);
    o.output_path = out;
    termsight_session *s = NULL;
    ck_assert_int_eq(a->create(&o, &s), TERMSIGHT_OK);
    return s;
}

static void *emit(void *arg)
{
    const api *a = arg;
    uint32_t id = a->name("from a thread");
    for (int i = 0; i < 1000; i++)
        a->counter_id(id, i);
    a->range_begin("open when the thread ends", "Op");
    return NULL;
}

static void *nothing(void *arg)
{
    return arg;
}

/* A thread that emitted, kept alive across dlclose, then let end. */
static pthread_barrier_t unloaded;

static void *emit_then_wait(void *arg)
{
    emit(arg);
    pthread_barrier_wait(&unloaded);
    return NULL;
}

static void join_new_thread(void)
{
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, nothing, NULL), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
}

START_TEST(unload_after_destroy)
{
    char *out = tmp_make();
    for (int round = 0; round < 2; round++) {
        api a;
        load(&a);
        termsight_session *s = create(&a, out);
        pthread_t t, waiting;
        ck_assert_int_eq(pthread_create(&t, NULL, emit, &a), 0);
        ck_assert_int_eq(pthread_join(t, NULL), 0);
        pthread_barrier_init(&unloaded, NULL, 2);
        ck_assert_int_eq(pthread_create(&waiting, NULL, emit_then_wait, &a), 0);
        emit(&a); /* the main thread too: its destructor runs at exit */
        ck_assert_int_eq(a.stop(s), 0);
        ck_assert_uint_gt(a.recorded(s), 2000);
        ck_assert_int_eq(a.destroy(s), 0);
        ck_assert_int_eq(dlclose(a.handle), 0);
        pthread_barrier_wait(&unloaded); /* ends after the unload, its destructor runs */
        ck_assert_int_eq(pthread_join(waiting, NULL), 0);
        pthread_barrier_destroy(&unloaded);
        join_new_thread();
    }
    tmp_remove(out);
}
END_TEST

/* dlclose while the session is still alive, then exit: the exit handler ends the session. */
START_TEST(unload_with_session_alive)
{
    char *out = tmp_make();
    api a;
    load(&a);
    create(&a, out);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, emit, &a), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(dlclose(a.handle), 0);
    join_new_thread();
    exit(0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dlclose");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, unload_after_destroy);
    tcase_add_exit_test(tc, unload_with_session_alive, 0);
    suite_add_tcase(s, tc);
    return tests_run(s);
}
