/* The /proc parsers against inline fixtures, and the sampler in a real session. */
#include "collectors.h"
#include "eventlist.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
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
        ck_assert_uint_eq(t.ppid, 1);
        ck_assert_int_eq(t.state, 'S');
        ck_assert_uint_eq(t.start, 12345);
        ck_assert_uint_eq(t.rss_pages, 200);
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
    ck_assert_uint_eq(t.ppid, 1);
    ck_assert_uint_eq(t.start, 1);
    ck_assert_uint_eq(t.rss_pages, 3);
    ck_assert_int_eq(t.state, 'R');
    /* Cut anywhere before rss ends: an error. */
    size_t need = strlen(text) - 1;
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

START_TEST(parse_schedstat)
{
    uint64_t ns = 7;
    ck_assert_int_eq(procfs_parse_schedstat("328279395 357243 22\n", 20, &ns), 0);
    ck_assert_uint_eq(ns, 328279395);
    ck_assert_int_eq(procfs_parse_schedstat("12", 2, &ns), -1); /* cut short */
    ck_assert_int_eq(procfs_parse_schedstat("x 1 2\n", 6, &ns), -1);
    ck_assert_int_eq(procfs_parse_schedstat("99999999999999999999 1 1\n", 25, &ns), -1);
    ck_assert_int_eq(procfs_parse_schedstat("", 0, &ns), -1);
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
    ck_assert_uint_eq(t.ppid, (uint64_t)getppid());
    ck_assert_uint_gt(t.rss_pages, 0);
    ck_assert_uint_gt(t.start, 0);
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
    uint64_t machine, process, threads, children, memory, burner;
    int burner_named; /* the burner's last sample has its name */
    uint64_t bad_share_sum;
    uint64_t proc_ns, proc_dur_ns, cpus;
    uint64_t burner_ns;
    uint64_t rss, peak;
    uint64_t stop_ns, last_sample_ns;
    uint64_t proc_begin, proc_end, proc_last_ns; /* the latest process interval */
    uint64_t thread_over_process;                /* thread intervals above their process's */
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
                sn->proc_begin = ev->begin_ns;
                sn->proc_end = ev->end_ns;
                sn->proc_last_ns = ev->v0 + ev->v1;
                sn->proc_dur_ns += ev->end_ns - ev->begin_ns;
                sn->cpus = ev->corr;
                ck_assert_uint_ge(ev->aux, 2);
                break;
            case TS_KIND_CPU_THREAD:
                sn->threads++;
                /* A thread never shows more than its process over the same interval. */
                if (ev->begin_ns == sn->proc_begin && ev->end_ns == sn->proc_end &&
                    ev->v0 + ev->v1 > sn->proc_last_ns)
                    sn->thread_over_process++;
                if (ev->tid == (uint32_t)atomic_load(&burner_tid)) {
                    /* A sample taken between the thread's start and its rename has the name
                     * it was born with; the last one has its own. */
                    sn->burner_named = name_is(r, ev->name, BURNER_NAME);
                    sn->burner++;
                    sn->burner_ns += ev->v0 + ev->v1;
                }
                break;
            case TS_KIND_CPU_CHILD:
                sn->children++;
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

/* A session writing under $TERMSIGHT_TEST_TMP (else /tmp), sampling every interval_ms. */
static termsight_session *sampled_session(const char *tag, uint32_t interval_ms, int start)
{
    char out[600];
    const char *base = getenv("TERMSIGHT_TEST_TMP");
    snprintf(out, sizeof out, "%s/procfs%s-%d-%ld", base && *base ? base : "/tmp", tag,
             (int)getpid(), (long)time(NULL));
    termsight_options o;
    termsight_options_init(&o);
    o.output_path = out;
    o.sample_interval_ms = interval_ms;
    o.start_collecting = start;
    termsight_session *s = NULL;
    ck_assert_int_eq(termsight_session_create(&o, &s), TERMSIGHT_OK);
    return s;
}

/* Destroys s, leaving its run folder in run_folder. */
static void session_end(termsight_session *s, char *run_folder, size_t cap)
{
    snprintf(run_folder, cap, "%s", termsight_run_folder(s));
    ck_assert_int_eq(termsight_session_destroy(s), TERMSIGHT_OK);
}

START_TEST(sampler_session)
{
    uint64_t cpu0 = cpu_seconds();
    termsight_session *s = sampled_session("", 10, 1);

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
    session_end(s, run_folder, sizeof run_folder);
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
    ck_assert_int_eq(sn.burner_named, 1);
    /* The process started no other: no descendant was sampled. */
    ck_assert_uint_eq(sn.children, 0);
    ck_assert_msg(sn.burner_ns >= 150000000ull, "burner sampled %lu ns",
                  (unsigned long)sn.burner_ns);
    /* Its 300 ms to the scheduler's nanosecond where schedstat exists (clock ticks would
     * round each interval to 10 ms), else within a tick per sample. */
    ck_assert_msg(sn.burner_ns <= (access("/proc/thread-self/schedstat", R_OK) == 0
                                       ? 305000000ull
                                       : 300000000ull + sn.burner * 10000000ull),
                  "burner sampled %lu ns", (unsigned long)sn.burner_ns);
    ck_assert_uint_eq(sn.thread_over_process, 0);
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
    termsight_session *s = sampled_session("-w", 5, 0);
    for (int w = 0; w < 3; w++) {
        ck_assert_int_eq(termsight_start(s), TERMSIGHT_OK);
        usleep(60000);
        ck_assert_int_eq(termsight_stop(s), TERMSIGHT_OK);
        usleep(30000);
    }
    char run_folder[1100];
    session_end(s, run_folder, sizeof run_folder);

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
            } else if ((ev->kind >= TS_KIND_CPU_MACHINE && ev->kind <= TS_KIND_HOST_MEMORY) ||
                       ev->kind == TS_KIND_CPU_CHILD) {
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

/* ---- Descendant processes ------------------------------------------------------------ */

/* Forks a child that forks a grandchild; both wait until release is closed. */
static pid_t fork_tree(int release[2], pid_t *grandchild)
{
    int ready[2];
    ck_assert_int_eq(pipe(release), 0);
    ck_assert_int_eq(pipe(ready), 0);
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        close(release[1]);
        close(ready[0]);
        pid_t g = fork();
        if (g == 0) {
            char c;
            while (read(release[0], &c, 1) < 0)
                ;
            _exit(0);
        }
        int32_t gp = (int32_t)g;
        (void)!write(ready[1], &gp, sizeof gp);
        char c;
        while (read(release[0], &c, 1) < 0)
            ;
        if (g > 0)
            waitpid(g, NULL, 0);
        _exit(0);
    }
    close(release[0]);
    close(ready[1]);
    int32_t gp = -1;
    ck_assert_int_eq(read(ready[0], &gp, sizeof gp), (ssize_t)sizeof gp);
    close(ready[0]);
    ck_assert_int_gt(gp, 0);
    *grandchild = (pid_t)gp;
    return child;
}

static int has_pid(const uint32_t *pids, int n, pid_t pid)
{
    for (int i = 0; i < n; i++)
        if (pids[i] == (uint32_t)pid)
            return 1;
    return 0;
}

/* Both ways of finding descendants find the child and the grandchild, and nothing else; a
 * process without children has none. */
START_TEST(descendants)
{
    uint32_t pids[16], left = 7;
    int files = access("/proc/thread-self/children", R_OK) == 0;
    for (int way = 0; way < 2; way++)
        if (way == 0 || files)
            ck_assert_int_eq(sampler_descendants(way, (uint32_t)getpid(), pids, 16, &left), 0);
    ck_assert_uint_eq(left, 0);

    int release[2];
    pid_t g, c = fork_tree(release, &g);
    for (int way = 0; way < 2; way++) {
        if (way == 1 && !files)
            continue;
        int n = sampler_descendants(way, (uint32_t)getpid(), pids, 16, &left);
        ck_assert_msg(n == 2, "way %d: %d descendants", way, n);
        ck_assert_uint_eq(left, 0);
        ck_assert(pids[0] == (uint32_t)c); /* breadth first */
        ck_assert(has_pid(pids, n, g));
        /* Bounded by max: the rest is counted. */
        ck_assert_int_eq(sampler_descendants(way, (uint32_t)getpid(), pids, 1, &left), 1);
        ck_assert_uint_eq(left, 1);
        /* From the child: the grandchild alone. */
        ck_assert_int_eq(sampler_descendants(way, (uint32_t)c, pids, 16, &left), 1);
        ck_assert(pids[0] == (uint32_t)g);
    }
    close(release[1]);
    int st;
    ck_assert_int_eq(waitpid(c, &st, 0), c);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}
END_TEST

#define BURN_NS    300000000ull
#define BURN_BYTES (64u << 20)

/* A forked child: touches BURN_BYTES, burns BURN_NS of its CPU time (at most 20 s of wall
 * time), says so on done, and waits until release is closed. */
static void burner_child(int done, int release)
{
    char *mem = malloc(BURN_BYTES);
    if (mem)
        memset(mem, 1, BURN_BYTES);
    struct timespec cpu, wall0, wall;
    clock_gettime(CLOCK_MONOTONIC, &wall0);
    volatile uint64_t x = 0;
    do {
        for (int i = 0; i < 100000; i++)
            x += (uint64_t)i * i;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
        clock_gettime(CLOCK_MONOTONIC, &wall);
    } while ((uint64_t)cpu.tv_sec * 1000000000ull + (uint64_t)cpu.tv_nsec < BURN_NS &&
             wall.tv_sec - wall0.tv_sec < 20);
    (void)x;
    char c = mem ? mem[BURN_BYTES - 1] : 0;
    (void)!write(done, &c, 1);
    while (read(release, &c, 1) < 0)
        ;
    _exit(0);
}

typedef struct child_seen {
    pid_t pid;
    uint64_t events, cpu_ns, peak_rss, first_begin, ppid;
    int named;
} child_seen;

/* Two forked children burn 300 ms of CPU each and hold 64 MB: the recording has both, with
 * their CPU time and RSS, their parent, and their first interval from their start. */
START_TEST(sampler_children)
{
    termsight_session *s = sampled_session("-c", 10, 1);

    int done[2], release[2];
    ck_assert_int_eq(pipe(done), 0);
    ck_assert_int_eq(pipe(release), 0);
    uint64_t forked_ns = tsclock_now(&ts_clock);
    child_seen ch[2] = {{0}};
    for (int i = 0; i < 2; i++) {
        ch[i].pid = fork();
        ck_assert_int_ge(ch[i].pid, 0);
        if (ch[i].pid == 0) {
            close(done[0]);
            close(release[1]);
            burner_child(done[1], release[0]);
        }
    }
    close(done[1]);
    close(release[0]);
    char c[2];
    size_t got = 0;
    while (got < 2) {
        ssize_t n = read(done[0], c + got, 2 - got);
        ck_assert_int_gt(n, 0);
        got += (size_t)n;
    }
    /* Both have burned and wait: the window's last sample sees all their time. */
    ck_assert_int_eq(termsight_stop(s), TERMSIGHT_OK);
    close(release[1]);
    for (int i = 0; i < 2; i++) {
        int st;
        ck_assert_int_eq(waitpid(ch[i].pid, &st, 0), ch[i].pid);
        ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    close(done[0]);
    char run_folder[1100];
    session_end(s, run_folder, sizeof run_folder);

    uint64_t others = 0, stop_ns = 0;
    char comm[64] = "";
    FILE *f = fopen("/proc/self/comm", "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(comm, sizeof comm, f));
    fclose(f);
    comm[strcspn(comm, "\n")] = 0;
    event_list l;
    read_all(run_folder, &l);
    for (size_t i = 0; i < l.n; i++) {
        const ts_event *ev = &l.ev[i];
        if (ev->kind == TS_KIND_COLLECT_STOP)
            stop_ns = ev->begin_ns;
        if (ev->kind != TS_KIND_CPU_CHILD)
            continue;
        ck_assert_uint_le(ev->begin_ns, ev->end_ns);
        child_seen *k = ev->tid == (uint32_t)ch[0].pid   ? &ch[0]
                        : ev->tid == (uint32_t)ch[1].pid ? &ch[1]
                                                         : NULL;
        if (!k) {
            others++;
            continue;
        }
        if (!k->events++)
            k->first_begin = ev->begin_ns;
        k->cpu_ns += ev->v0 + ev->v1;
        k->peak_rss = ev->corr > k->peak_rss ? ev->corr : k->peak_rss;
        k->ppid = ev->aux;
        k->named += !strcmp(name_of(&l, ev->name), comm);
    }
    list_free(&l);
    ck_assert_uint_eq(others, 0);
    for (int i = 0; i < 2; i++) {
        ck_assert_uint_gt(ch[i].events, 1);
        ck_assert_uint_eq(ch[i].named, ch[i].events);
        ck_assert_uint_eq(ch[i].ppid, (uint64_t)getpid());
        /* 300 ms burned (the clock-tick rounding of user and system time and the memset's page
         * faults on either side), and the 64 MB they touched. */
        ck_assert_msg(ch[i].cpu_ns >= BURN_NS - 30000000ull &&
                          ch[i].cpu_ns <= BURN_NS + 150000000ull,
                      "child %d: %llu ns", i, (unsigned long long)ch[i].cpu_ns);
        ck_assert_uint_ge(ch[i].peak_rss, BURN_BYTES);
        /* The first interval begins at the child's start (clock ticks: 10 ms), not before. */
        ck_assert_uint_ge(ch[i].first_begin + 20000000ull, forked_ns);
        ck_assert_uint_le(ch[i].first_begin, stop_ns);
    }
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
    tcase_add_test(p, parse_schedstat);
    suite_add_tcase(s, p);
    TCase *t = tcase_create("sampler");
    tcase_add_test(t, sampler_session);
    tcase_add_test(t, sampler_windows);
    tcase_add_test(t, descendants);
    tcase_add_test(t, sampler_children);
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
