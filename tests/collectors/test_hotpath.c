/* The hot path's promise, checked rather than read: after a thread's first event (and a name's
 * first use), an event call takes no lock, allocates nothing and makes no system call. The test
 * binary puts its own malloc family and pthread_mutex_lock in front of libc's (the collector,
 * linked in statically, calls these), counting the calls a thread makes while armed, and a
 * seccomp filter on the calling thread traps every system call it makes while armed (SIGSYS, the
 * call not made, its number noted). Every event call of the public API is made while armed, on a
 * session that collects, and a step window (TERMSIGHT_STEPS) opens and closes on the armed
 * thread. Sanitizer builds interpose malloc themselves: there the test skips. */
#include "collectors.h"
#include "shmnames.h"

#include <check.h>
#include <errno.h>
#include <dlfcn.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

/* ---- Counting what the armed thread calls ------------------------------------------------- */

static __thread int armed;
static __thread unsigned allocs, locks;
static volatile sig_atomic_t trapped, trapped_nr;

#if !SANITIZED
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

void *malloc(size_t n)
{
    if (armed)
        allocs++;
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t size)
{
    if (armed)
        allocs++;
    return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
    if (armed)
        allocs++;
    return __libc_realloc(p, n);
}

void free(void *p)
{
    __libc_free(p);
}

int pthread_mutex_lock(pthread_mutex_t *m)
{
    static int (*real)(pthread_mutex_t *);
    if (!real)
        real = (int (*)(pthread_mutex_t *))dlsym(RTLD_NEXT, "pthread_mutex_lock");
    if (armed)
        locks++;
    return real(m);
}
#endif

static void on_sigsys(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    trapped++;
    trapped_nr = si->si_syscall;
#if defined(__x86_64__)
    /* The call was not made: it fails, as a call the kernel refused would. */
    ((ucontext_t *)uc)->uc_mcontext.gregs[REG_RAX] = -ENOSYS;
#else
    (void)uc;
#endif
}

/* Traps every system call of the calling thread from now on, but for the few the test itself
 * needs to end (exit, and the signal return the trap itself uses). Returns 0 or -1; asserts
 * nothing itself (Check reports each passed assertion to its parent with a write). */
static int trap_syscalls(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_rt_sigreturn, 3, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit_group, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -1;
    return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0 ? 0 : -1;
}

/* Every event call of the API, with names and ids that have been seen before. */
static void event_calls(uint32_t q, uint32_t name, uint32_t type)
{
    termsight_step_begin();
    termsight_phase_mark(TERMSIGHT_FORWARD_START);
    termsight_range_begin("Default/fc1/MatMul-op1", "MatMul");
    termsight_range_flops(1000);
    termsight_range_begin_id(name, type);
    termsight_range_end();
    termsight_range_end();
    uint64_t t = termsight_now_ns();
    termsight_range_complete(name, type, t, t + 10, 0);
    termsight_comm_complete(name, type, t, t + 10, 4096);
    termsight_comm_done(termsight_comm_issue(name, t));
    termsight_range_begin_id(name, type);
    termsight_range_drop();
    termsight_queue_size(q, 3);
    termsight_counter("loss", 0.5);
    termsight_counter_id(name, 1.5);
    termsight_mark("epoch");
    termsight_memory_alloc("weights", 0x1000, 4096, -1);
    termsight_memory_free(0x1000, 4096, -1);
    termsight_phase_mark(TERMSIGHT_BACKWARD_END);
    termsight_step_end();
}

typedef struct result {
    termsight_session *session;
    int stopped;
    int filtered;
    unsigned allocs, locks, syscalls;
    long last_nr;
} result;

static void *armed_thread(void *arg)
{
    result *res = arg;
    uint32_t q = termsight_queue_register("prefetch", 8, TERMSIGHT_QUEUE_HOST, "loader", "loop");
    uint32_t name = termsight_name("Default/fc2/Add-op2"), type = termsight_name("Add");
    event_calls(q, name, type); /* the thread's first events and the names' first uses */

    struct sigaction sa = {.sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSYS, &sa, NULL);
    /* A step window (TERMSIGHT_STEPS) that opens and closes while armed: its edges are the
     * step calls' too. */
    termsight_session *s = res->session;
    res->stopped = termsight_stop(s) == TERMSIGHT_OK;
    uint64_t step = atomic_load(&s->step);
    window_set_steps(s, step + 400, step + 600);
    res->filtered = trap_syscalls() == 0;
    armed = 1;
    for (int i = 0; i < 1000; i++)
        event_calls(q, name, type);
    armed = 0;
    res->allocs = allocs;
    res->locks = locks;
    res->syscalls = (unsigned)trapped;
    res->last_nr = trapped_nr;
    return NULL;
}

START_TEST(test_no_lock_alloc_or_syscall)
{
    if (SANITIZED) {
        fputs("test_hotpath: skipped under a sanitizer (it interposes malloc itself)\n", stderr);
        return;
    }
    char out[512];
    const char *base = getenv("TERMSIGHT_TEST_TMP");
    snprintf(out, sizeof out, "%s/hotpath-%d-%ld", base && *base ? base : "/tmp", (int)getpid(),
             (long)time(NULL));
    termsight_options o;
    termsight_options_init(&o);
    o.output_path = out;
    o.lane_events = 1u << 16; /* 1001 rounds of ~16 events: nothing dropped, nothing waits */
    termsight_session *s;
    ck_assert_int_eq(termsight_session_create(&o, &s), TERMSIGHT_OK);

    result res = {.session = s};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, armed_thread, &res), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_msg(res.filtered, "cannot install the seccomp filter");
    ck_assert_msg(res.syscalls == 0, "%u system calls on the hot path (the last: number %ld)",
                  res.syscalls, res.last_nr);
    ck_assert_msg(res.allocs == 0, "%u allocations on the hot path", res.allocs);
    ck_assert_msg(res.locks == 0, "%u mutex locks on the hot path", res.locks);
    ck_assert(res.stopped);
    ck_assert_uint_ge(termsight_events_recorded(s) + termsight_events_dropped(s), 1);
    /* The step window came and went: a command serves what it left for the loop first. */
    ck_assert_int_eq(termsight_flush(s), TERMSIGHT_OK);
    ck_assert_int_eq(atomic_load(&s->windows.steps_state), 2);
    ck_assert_uint_eq(s->window, 2);
    ck_assert_str_eq(termsight_state(s), "stopped");
    ck_assert_int_eq(termsight_session_destroy(s), TERMSIGHT_OK);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", out);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hotpath");
    TCase *tc = tcase_create("promise");
    tcase_add_test(tc, test_no_lock_alloc_or_syscall);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    shm_unlink_pid(getpid());
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
