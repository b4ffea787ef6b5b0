/* The /proc parsers against inline fixtures, and the sampler in a real session. */
#include "collectors.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* ---- /proc/stat ------------------------------------------------------------------------ */

static const struct {
    const char *text;
    int rc;
    uint64_t user, steal, ctxt;
    uint32_t running, blocked;
} stat_cases[] = {
    {"cpu  10 20 30 40 50 60 70 80 90 100\ncpu0 1 2 3 4 5 6 7 8 9 10\n"
     "intr 123 0 0 1\nctxt 9999\nbtime 1\nprocesses 5\nprocs_running 3\nprocs_blocked 1\n",
     0, 10, 80, 9999, 3, 1},
    /* No trailing newline, tabs and extra spaces. */
    {"cpu \t1 2 3 4 5 6 7 8\nctxt 1\nprocs_running 0\nprocs_blocked 0", 0, 1, 8, 1, 0, 0},
    /* Huge but fitting values. */
    {"cpu  18446744073709551615 0 0 0 0 0 0 1\nctxt 18446744073709551615\nprocs_running "
     "4294967295\nprocs_blocked 0\n",
     0, UINT64_MAX, 1, UINT64_MAX, UINT32_MAX, 0},
    /* Overflow. */
    {"cpu  18446744073709551616 0 0 0 0 0 0 0\nctxt 1\nprocs_running 1\nprocs_blocked 0\n", -1, 0,
     0, 0, 0, 0},
    {"cpu  1 2 3 4 5 6 7 8\nctxt 1\nprocs_running 4294967296\nprocs_blocked 0\n", -1, 0, 0, 0, 0,
     0},
    /* Missing steal (too few fields), missing lines, cut short. */
    {"cpu  1 2 3 4 5 6 7\nctxt 1\nprocs_running 1\nprocs_blocked 0\n", -1, 0, 0, 0, 0, 0},
    {"cpu  1 2 3 4 5 6 7 8\nprocs_running 1\nprocs_blocked 0\n", -1, 0, 0, 0, 0, 0},
    {"cpu  1 2 3 4 5 6 7 8\nctxt 1\nprocs_running 1\n", -1, 0, 0, 0, 0, 0},
    {"cpu  1 2 3 4 5 6 7 8\nctxt 1\nprocs_run", -1, 0, 0, 0, 0, 0},
    {"cpu  1 2 3", -1, 0, 0, 0, 0, 0},
    {"", -1, 0, 0, 0, 0, 0},
    /* Garbage. */
    {"cpu  1 2 x 4 5 6 7 8\nctxt 1\nprocs_running 1\nprocs_blocked 0\n", -1, 0, 0, 0, 0, 0},
    {"cpu  1 2 3 4 5 6 7 8\nctxt -1\nprocs_running 1\nprocs_blocked 0\n", -1, 0, 0, 0, 0, 0},
    {"\x01\xff\n\n\n", -1, 0, 0, 0, 0, 0},
    /* Per-CPU lines alone are not the machine line. */
    {"cpu0 1 2 3 4 5 6 7 8\nctxt 1\nprocs_running 1\nprocs_blocked 0\n", -1, 0, 0, 0, 0, 0},
};

START_TEST(parse_stat)
{
    procfs_machine m;
    const char *text = stat_cases[_i].text;
    int rc = procfs_parse_stat(text, strlen(text), &m);
    ck_assert_msg(rc == stat_cases[_i].rc, "case %d: rc %d", _i, rc);
    if (rc == 0) {
        ck_assert_uint_eq(m.cpu[TS_CPU_USER], stat_cases[_i].user);
        ck_assert_uint_eq(m.cpu[TS_CPU_STEAL], stat_cases[_i].steal);
        ck_assert_uint_eq(m.ctxt, stat_cases[_i].ctxt);
        ck_assert_uint_eq(m.running, stat_cases[_i].running);
        ck_assert_uint_eq(m.blocked, stat_cases[_i].blocked);
    }
}
END_TEST

START_TEST(parse_stat_fields_in_order)
{
    const char *text = "cpu  1 2 3 4 5 6 7 8 9 10\nctxt 1\nprocs_running 1\nprocs_blocked 0\n";
    procfs_machine m;
    ck_assert_int_eq(procfs_parse_stat(text, strlen(text), &m), 0);
    for (int f = 0; f < TS_CPU__COUNT; f++)
        ck_assert_uint_eq(m.cpu[f], (uint64_t)f + 1);
    /* Every prefix of a valid text that lacks the last line fails, none crashes. */
    size_t cut = strstr(text, "procs_blocked 0") - text + strlen("procs_blocked ");
    for (size_t len = 0; len < cut; len++)
        ck_assert_int_eq(procfs_parse_stat(text, len, &m), -1);
}
END_TEST

/* ---- /proc/<pid>/stat ------------------------------------------------------------------ */

#define TAIL                                                                                       \
    " S 1 2 3 0 -1 4194560 100 0 0 0 %s %s 0 0 20 0 %s 0 12345 1000 200 18446744073709551615"

static const struct {
    const char *comm;
    const char *utime, *stime, *threads;
    int rc;
} task_cases[] = {
    {"(python3)", "150", "25", "7", 0},
    {"(a) b (c)", "1", "2", "3", 0},
    {"(with spaces  )", "0", "0", "1", 0},
    {"()", "5", "6", "1", 0},
    {"())))", "5", "6", "1", 0},
    {"(x\ny)", "5", "6", "1", 0},
    {"(big)", "18446744073709551615", "18446744073709551615", "4294967295", 0},
    {"(over)", "18446744073709551616", "0", "1", -1},
    {"(threads)", "1", "1", "4294967296", -1},
    {"(neg)", "-1", "0", "1", -1},
    {"(garbage)", "1x", "0", "1", -1},
    {"no parens", "1", "2", "3", -1},
};

START_TEST(parse_task_stat)
{
    char text[512];
    snprintf(text, sizeof text, "4242 %s" TAIL "\n", task_cases[_i].comm, task_cases[_i].utime,
             task_cases[_i].stime, task_cases[_i].threads);
    procfs_task t;
    int rc = procfs_parse_task_stat(text, strlen(text), &t);
    ck_assert_msg(rc == task_cases[_i].rc, "case %d (%s): rc %d", _i, text, rc);
    if (rc == 0) {
        ck_assert_uint_eq(t.utime, strtoull(task_cases[_i].utime, NULL, 10));
        ck_assert_uint_eq(t.stime, strtoull(task_cases[_i].stime, NULL, 10));
        ck_assert_uint_eq(t.num_threads, strtoull(task_cases[_i].threads, NULL, 10));
    }
}
END_TEST

START_TEST(parse_task_stat_truncated)
{
    const char *text = "77 (a) b (c) R 1 2 3 0 -1 0 0 0 0 0 11 22 0 0 20 0 9 0 1 2 3\n";
    procfs_task t;
    ck_assert_int_eq(procfs_parse_task_stat(text, strlen(text), &t), 0);
    ck_assert_uint_eq(t.utime, 11);
    ck_assert_uint_eq(t.stime, 22);
    ck_assert_uint_eq(t.num_threads, 9);
    /* Cut anywhere before num_threads ends: an error. */
    size_t need = strstr(text, " 9 0 1") - text + 1;
    for (size_t len = 0; len < need; len++)
        ck_assert_msg(procfs_parse_task_stat(text, len, &t) == -1, "len %zu", len);
    ck_assert_int_eq(procfs_parse_task_stat("", 0, &t), -1);
    ck_assert_int_eq(procfs_parse_task_stat(")(", 2, &t), -1);
}
END_TEST

/* ---- /proc/self/status ------------------------------------------------------------------ */

static const struct {
    const char *text;
    int rc;
    uint64_t rss, hwm;
} status_cases[] = {
    {"Name:\tpython3\nVmPeak:\t  100 kB\nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\nThreads:\t3\n",
     0, 1024 * 1024, 2048 * 1024},
    {"VmRSS: 0 kB\nVmHWM: 0 kB", 0, 0, 0},
    {"VmRSS:\t18014398509481983 kB\nVmHWM:\t1 kB\n", 0, 18014398509481983ull * 1024, 1024},
    {"VmRSS:\t18014398509481984 kB\nVmHWM:\t1 kB\n", -1, 0, 0}, /* bytes overflow */
    {"VmRSS:\t1024 kB\n", -1, 0, 0},
    {"VmHWM:\t1024 kB\n", -1, 0, 0},
    {"VmRSS:\t1024\nVmHWM:\t1024 kB\n", -1, 0, 0},
    {"VmRSS:\t kB\nVmHWM:\t1024 kB\n", -1, 0, 0},
    {"VmRSS:\t1024 kB\nVmHWM:\t10", -1, 0, 0},
    {"", -1, 0, 0},
};

START_TEST(parse_status)
{
    uint64_t rss = 7, hwm = 7;
    const char *text = status_cases[_i].text;
    int rc = procfs_parse_status(text, strlen(text), &rss, &hwm);
    ck_assert_msg(rc == status_cases[_i].rc, "case %d: rc %d", _i, rc);
    if (rc == 0) {
        ck_assert_uint_eq(rss, status_cases[_i].rss);
        ck_assert_uint_eq(hwm, status_cases[_i].hwm);
    }
}
END_TEST

/* ---- comm ------------------------------------------------------------------------------- */

static const struct {
    const char *text;
    size_t len;
    int rc;
    const char *want;
} comm_cases[] = {
    {"loader\n", 7, 0, "loader"},
    {"a) b (c\n", 8, 0, "a) b (c"},
    {"  \n", 3, 0, "  "},
    {"\n", 1, 0, ""},
    {"no-newline", 10, 0, "no-newline"},
    {"x\0y\n", 4, -1, NULL},
    {"", 0, -1, NULL},
    {"0123456789abcdef\n", 17, -1, NULL}, /* longer than the 16-byte buffer below */
    {"0123456789abcde\n", 16, 0, "0123456789abcde"},
};

START_TEST(parse_comm)
{
    char out[16];
    int rc = procfs_parse_comm(comm_cases[_i].text, comm_cases[_i].len, out, sizeof out);
    ck_assert_msg(rc == comm_cases[_i].rc, "case %d: rc %d", _i, rc);
    if (rc == 0)
        ck_assert_str_eq(out, comm_cases[_i].want);
}
END_TEST

/* The parsers on this machine's real files. */
static size_t slurp(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    ck_assert_uint_lt(n, cap);
    return n;
}

START_TEST(parse_real_files)
{
    static char buf[1 << 20];
    procfs_machine m;
    procfs_task t;
    uint64_t rss, hwm;
    ck_assert_int_eq(procfs_parse_stat(buf, slurp("/proc/stat", buf, sizeof buf), &m), 0);
    ck_assert_uint_gt(m.ctxt, 0);
    ck_assert_int_eq(procfs_parse_task_stat(buf, slurp("/proc/self/stat", buf, sizeof buf), &t), 0);
    ck_assert_uint_ge(t.num_threads, 1);
    ck_assert_int_eq(
        procfs_parse_status(buf, slurp("/proc/self/status", buf, sizeof buf), &rss, &hwm), 0);
    ck_assert_uint_gt(rss, 0);
    ck_assert_uint_ge(hwm, rss);
}
END_TEST

/* ---- The sampler in a session ---------------------------------------------------------- */

#define BURNER_NAME "ts burn (x)"

static _Atomic int burner_tid;

static void *burn(void *arg)
{
    (void)arg;
    termsight_thread_name(BURNER_NAME);
    pthread_setname_np(pthread_self(), BURNER_NAME);
    atomic_store(&burner_tid, (int)gettid());
    /* 300 ms of this thread's CPU time, however busy the machine is. */
    struct timespec t;
    volatile uint64_t x = 0;
    do {
        for (int i = 0; i < 100000; i++)
            x += (uint64_t)i * i;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    } while (t.tv_sec * 1000000000L + t.tv_nsec < 300000000L);
    (void)x;
    return NULL;
}

typedef struct seen {
    uint64_t machine, process, threads, memory, burner;
    uint64_t bad_share_sum;
    uint64_t proc_ns, proc_dur_ns, cpus;
    uint64_t burner_ns;
    uint64_t rss, peak;
    uint64_t stop_ns, last_sample_ns;
} seen;

static int name_is(const recording_reader *r, uint32_t id, const char *want)
{
    uint32_t len;
    const char *s = recording_reader_string(r, id, &len);
    return s && len == strlen(want) && !memcmp(s, want, len);
}

static uint64_t cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
           (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;
}

static void read_samples(const char *run_folder, seen *sn)
{
    memset(sn, 0, sizeof *sn);
    recording_reader *r;
    char *why = NULL;
    ck_assert_msg(recording_reader_open(run_folder, &r, &why) == 0, "open: %s", why);
    const ts_event *evs;
    size_t n;
    int rc;
    while ((rc = recording_reader_next(r, &evs, &n, &why)) == 1) {
        for (size_t i = 0; i < n; i++) {
            const ts_event *ev = &evs[i];
            switch (ev->kind) {
            case TS_KIND_CPU_MACHINE: {
                sn->machine++;
                uint32_t sum = 0;
                for (int f = 0; f < TS_CPU__COUNT; f++)
                    sum += ts_cpu_share(ev, (enum ts_cpu_field)f);
                if (sum < 9990 || sum > 10010)
                    sn->bad_share_sum++;
                ck_assert_uint_gt(ev->end_ns, ev->begin_ns);
                break;
            }
            case TS_KIND_CPU_PROCESS:
                sn->process++;
                sn->proc_ns += ev->v0 + ev->v1;
                sn->proc_dur_ns += ev->end_ns - ev->begin_ns;
                sn->cpus = ev->corr;
                ck_assert_uint_ge(ev->aux, 2);
                break;
            case TS_KIND_CPU_THREAD:
                sn->threads++;
                if (ev->tid == (uint32_t)atomic_load(&burner_tid)) {
                    ck_assert(name_is(r, ev->name, BURNER_NAME));
                    sn->burner++;
                    sn->burner_ns += ev->v0 + ev->v1;
                }
                break;
            case TS_KIND_HOST_MEMORY:
                sn->memory++;
                sn->rss = ev->v0;
                sn->peak = ev->v1;
                ck_assert_uint_gt(ev->v0, 0);
                ck_assert_uint_ge(ev->v1, ev->v0);
                break;
            case TS_KIND_COLLECT_STOP:
                sn->stop_ns = ev->begin_ns;
                break;
            default:
                break;
            }
            if (ev->kind >= TS_KIND_CPU_MACHINE && ev->kind <= TS_KIND_HOST_MEMORY &&
                ev->end_ns > sn->last_sample_ns)
                sn->last_sample_ns = ev->end_ns;
        }
    }
    ck_assert_msg(rc == 0, "read: %s", why);
    recording_reader_close(r);
}

START_TEST(sampler_session)
{
    char out[600];
    const char *base = getenv("TERMSIGHT_TEST_TMP");
    snprintf(out, sizeof out, "%s/procfs-%d-%ld", base && *base ? base : "/tmp", (int)getpid(),
             (long)time(NULL));
    termsight_options o;
    termsight_options_init(&o);
    o.output_path = out;
    o.sample_interval_ms = 10;
    uint64_t cpu0 = cpu_seconds();
    termsight_session *s = NULL;
    ck_assert_int_eq(termsight_session_create(&o, &s), TERMSIGHT_OK);

    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, burn, NULL), 0);
    pthread_join(th, NULL);
    /* The burner is gone by now; wait (bounded, 5 s) until the sampler has written a few more
     * samples (each is at least five events), so the last interval that saw it is in. */
    termsight_flush(s);
    uint64_t e0 = termsight_events_recorded(s);
    for (int i = 0; i < 500 && termsight_events_recorded(s) < e0 + 20; i++) {
        usleep(10000);
        termsight_flush(s);
    }
    ck_assert_uint_ge(termsight_events_recorded(s), e0 + 20);
    char run_folder[1100];
    snprintf(run_folder, sizeof run_folder, "%s", termsight_run_folder(s));
    ck_assert_int_eq(termsight_session_destroy(s), TERMSIGHT_OK);
    uint64_t cpu_total = cpu_seconds() - cpu0;

    seen sn;
    read_samples(run_folder, &sn);
    ck_assert_uint_gt(sn.machine, 5);
    ck_assert_uint_eq(sn.bad_share_sum, 0);
    ck_assert_uint_gt(sn.process, 5);
    ck_assert_uint_gt(sn.proc_ns, 0);
    ck_assert_uint_gt(sn.cpus, 0);
    /* Clock ticks are 10 ms: allow one tick per sample beyond CPUs x time. */
    ck_assert_uint_le(sn.proc_ns, sn.cpus * sn.proc_dur_ns + sn.process * 10000000ull);
    /* The samples cover part of the run: never more than getrusage's total (one tick of slack
     * per CPU time source, user and system), and the burner's 300 ms are mostly in. */
    ck_assert_uint_le(sn.proc_ns, cpu_total + 20000000ull);
    ck_assert_uint_gt(sn.burner, 0);
    ck_assert_msg(sn.burner_ns >= 150000000ull, "burner sampled %lu ns",
                  (unsigned long)sn.burner_ns);
    ck_assert_uint_le(sn.burner_ns, 400000000ull);
    ck_assert_uint_gt(sn.memory, 0);
    ck_assert_uint_gt(sn.rss, 0);
    ck_assert_uint_ge(sn.peak, sn.rss);
    /* No sample lies after the window's stop marker. */
    ck_assert_uint_gt(sn.stop_ns, 0);
    ck_assert_uint_le(sn.last_sample_ns, sn.stop_ns);
}
END_TEST

/* Stop and start again: no sample spans the gap between windows; destroy while idle works. */
START_TEST(sampler_windows)
{
    char out[600];
    const char *base = getenv("TERMSIGHT_TEST_TMP");
    snprintf(out, sizeof out, "%s/procfs-w-%d-%ld", base && *base ? base : "/tmp", (int)getpid(),
             (long)time(NULL));
    termsight_options o;
    termsight_options_init(&o);
    o.output_path = out;
    o.sample_interval_ms = 5;
    o.start_collecting = 0;
    termsight_session *s = NULL;
    ck_assert_int_eq(termsight_session_create(&o, &s), TERMSIGHT_OK);
    for (int w = 0; w < 3; w++) {
        ck_assert_int_eq(termsight_start(s), TERMSIGHT_OK);
        usleep(60000);
        ck_assert_int_eq(termsight_stop(s), TERMSIGHT_OK);
        usleep(30000);
    }
    char run_folder[1100];
    snprintf(run_folder, sizeof run_folder, "%s", termsight_run_folder(s));
    ck_assert_int_eq(termsight_session_destroy(s), TERMSIGHT_OK);

    recording_reader *r;
    char *why = NULL;
    ck_assert_msg(recording_reader_open(run_folder, &r, &why) == 0, "open: %s", why);
    const ts_event *evs;
    size_t n;
    int rc, open = 0;
    uint64_t start_ns = 0, machine = 0;
    while ((rc = recording_reader_next(r, &evs, &n, &why)) == 1) {
        for (size_t i = 0; i < n; i++) {
            const ts_event *ev = &evs[i];
            if (ev->kind == TS_KIND_COLLECT_START) {
                open = 1;
                start_ns = ev->begin_ns;
            } else if (ev->kind == TS_KIND_COLLECT_STOP) {
                open = 0;
            } else if (ev->kind >= TS_KIND_CPU_MACHINE && ev->kind <= TS_KIND_HOST_MEMORY) {
                ck_assert_msg(open, "sample outside a window");
                ck_assert_uint_ge(ev->begin_ns, start_ns);
                machine += ev->kind == TS_KIND_CPU_MACHINE;
            }
        }
    }
    ck_assert_int_eq(rc, 0);
    recording_reader_close(r);
    ck_assert_uint_gt(machine, 3);
}
END_TEST

static Suite *procfs_suite(void)
{
    Suite *s = suite_create("procfs");
    TCase *p = tcase_create("parsers");
    tcase_add_loop_test(p, parse_stat, 0, sizeof stat_cases / sizeof stat_cases[0]);
    tcase_add_test(p, parse_stat_fields_in_order);
    tcase_add_loop_test(p, parse_task_stat, 0, sizeof task_cases / sizeof task_cases[0]);
    tcase_add_test(p, parse_task_stat_truncated);
    tcase_add_loop_test(p, parse_status, 0, sizeof status_cases / sizeof status_cases[0]);
    tcase_add_loop_test(p, parse_comm, 0, sizeof comm_cases / sizeof comm_cases[0]);
    tcase_add_test(p, parse_real_files);
    suite_add_tcase(s, p);
    TCase *t = tcase_create("sampler");
    tcase_add_test(t, sampler_session);
    tcase_add_test(t, sampler_windows);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(procfs_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
