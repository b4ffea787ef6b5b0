/* CPU shares of the sampler compared with sysstat's pidstat and mpstat over the same interval.
 *
 * This process burns one thread (the main thread only waits) under a session sampling every
 * 100 ms, while `pidstat -u -p <pid> 1 2` and `mpstat 1 2` run side by side. The recording's
 * samples whose middle lies within the tools' run are averaged (weighted by their length) and
 * compared with the tools' "Average:" lines:
 * - this process's user+system share of one CPU with pidstat's %usr + %system (the robust
 *   figure: the burner keeps one CPU busy whatever else the machine does);
 * - the machine's user, system and idle shares with mpstat's %usr, %sys and %idle ("all").
 * Tolerance: TOLERANCE_PP percentage points. The windows differ by the tools' start-up and by
 * the sampler's 100 ms grain (up to about 2 x 100 ms of 2 s at the edges, 10 pp of a figure that
 * changes at the edges), /proc counts in clock ticks (10 ms: 0.5 pp over 2 s per figure), and
 * on a loaded CI machine the other processes' load moves between those edges.
 *
 * Skips (exit 77) when pidstat or mpstat is missing (Debian package sysstat; scripts/setup.sh
 * installs it). */
#include "collectors.h"

#define TESTUTIL_TAG "sysstat"
#include "testutil.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#define TOLERANCE_PP 15.0

static atomic_int burn_stop;

static void *burner(void *arg)
{
    (void)arg;
    volatile uint64_t x = 0;
    while (!atomic_load_explicit(&burn_stop, memory_order_relaxed))
        for (int i = 0; i < 100000; i++)
            x += (uint64_t)i;
    return (void *)(uintptr_t)x; /* the sum is the work: returned, so it is used */
}

/* The value under column `col` of the "Average:" line whose `key_col` column is `key`, from a
 * sysstat report: the last line holding `col` names the columns. Columns are matched from the
 * right: the first one is a time stamp ("10:00:51", or "10:00:51 AM" in some locales) on the
 * header and "Average:" on the line. Returns 0 or -1. */
static int average_of(const char *report, const char *key_col, const char *key, const char *col,
                      double *out)
{
    char *text = strdup(report);
    ck_assert_ptr_nonnull(text);
    char *names[32];
    int nnames = 0, rc = -1;
    char *save_line, *line = strtok_r(text, "\n", &save_line);
    for (; line; line = strtok_r(NULL, "\n", &save_line)) {
        int average = !strncmp(line, "Average:", 8);
        char *tok[32], *save;
        int n = 0;
        for (char *t = strtok_r(line, " \t", &save); t && n < 32; t = strtok_r(NULL, " \t", &save))
            tok[n++] = t;
        int is_header = 0;
        for (int i = 0; i < n; i++)
            is_header |= !strcmp(tok[i], col);
        if (is_header) {
            memcpy(names, tok, sizeof(char *) * (size_t)n);
            nnames = n;
            continue;
        }
        if (!average || !nnames)
            continue;
        int ki = -1, ci = -1; /* positions from the right */
        for (int i = 0; i < nnames; i++) {
            if (!strcmp(names[i], key_col))
                ki = nnames - i;
            if (!strcmp(names[i], col))
                ci = nnames - i;
        }
        if (ki > 0 && ci > 0 && ki < n && ci < n && !strcmp(tok[n - ki], key)) {
            char *end;
            *out = strtod(tok[n - ci], &end);
            rc = *end ? -1 : 0;
            break;
        }
    }
    free(text);
    return rc;
}

static char *slurp(FILE *f)
{
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    size_t n;
    while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 2) {
            buf = realloc(buf, cap *= 2);
            ck_assert_ptr_nonnull(buf);
        }
    }
    buf[len] = 0;
    return buf;
}

static void near(double got, double want, const char *what)
{
    fprintf(stderr, "test_sysstat: %-16s termsight %6.1f %%  sysstat %6.1f %%\n", what, got, want);
    ck_assert_msg(got >= want - TOLERANCE_PP && got <= want + TOLERANCE_PP,
                  "%s: termsight %.1f %%, sysstat %.1f %% (tolerance %.0f pp)", what, got, want,
                  TOLERANCE_PP);
}

START_TEST(cpu_shares_match_sysstat)
{
    char *tmp = tmp_make();
    termsight_options o;
    termsight_options_init(&o);
    o.output_path = tmp;
    o.sample_interval_ms = 100;
    termsight_session *s = NULL;
    ck_assert_int_eq(termsight_session_create(&o, &s), TERMSIGHT_OK);
    char run[1100];
    snprintf(run, sizeof run, "%s", termsight_run_folder(s));

    pthread_t t;
    atomic_store(&burn_stop, 0);
    ck_assert_int_eq(pthread_create(&t, NULL, burner, NULL), 0);
    usleep(300 * 1000); /* the burner at full speed and the sampler's baseline taken */

    char cmd[160];
    snprintf(cmd, sizeof cmd, "LC_ALL=C S_COLORS=never pidstat -u -p %d 1 2", (int)getpid());
    uint64_t t0 = termsight_now_ns();
    FILE *pid_f = popen(cmd, "r");
    FILE *mp_f = popen("LC_ALL=C S_COLORS=never mpstat 1 2", "r");
    ck_assert_ptr_nonnull(pid_f);
    ck_assert_ptr_nonnull(mp_f);
    char *pid_out = slurp(pid_f);
    char *mp_out = slurp(mp_f);
    ck_assert_int_eq(pclose(pid_f), 0);
    ck_assert_int_eq(pclose(mp_f), 0);
    uint64_t t1 = termsight_now_ns();
    usleep(300 * 1000); /* the sample covering t1 written */

    atomic_store(&burn_stop, 1);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(termsight_session_destroy(s), TERMSIGHT_OK);

    double p_usr, p_sys, m_usr, m_sys, m_idle;
    char pid_text[16];
    snprintf(pid_text, sizeof pid_text, "%d", (int)getpid());
    ck_assert_msg(average_of(pid_out, "PID", pid_text, "%usr", &p_usr) == 0 &&
                      average_of(pid_out, "PID", pid_text, "%system", &p_sys) == 0,
                  "pidstat's report not understood:\n%s", pid_out);
    ck_assert_msg(average_of(mp_out, "CPU", "all", "%usr", &m_usr) == 0 &&
                      average_of(mp_out, "CPU", "all", "%sys", &m_sys) == 0 &&
                      average_of(mp_out, "CPU", "all", "%idle", &m_idle) == 0,
                  "mpstat's report not understood:\n%s", mp_out);

    /* The samples whose middle lies within [t0, t1], weighted by their length. */
    recording_reader *r;
    char *why = NULL;
    ck_assert_msg(recording_reader_open(run, &r, &why) == 0, "open: %s", why ? why : "?");
    const ts_event *ev;
    size_t n;
    int rc;
    double proc_ns = 0, proc_window = 0, m_window = 0, share[TS_CPU__COUNT] = {0};
    while ((rc = recording_reader_next(r, &ev, &n, &why)) == 1) {
        for (size_t i = 0; i < n; i++) {
            const ts_event *e = &ev[i];
            uint64_t mid = e->begin_ns / 2 + e->end_ns / 2;
            if (mid < t0 || mid > t1 || e->end_ns <= e->begin_ns)
                continue;
            double len = (double)(e->end_ns - e->begin_ns);
            if (e->kind == TS_KIND_CPU_PROCESS) {
                proc_ns += (double)(e->v0 + e->v1);
                proc_window += len;
            } else if (e->kind == TS_KIND_CPU_MACHINE) {
                for (int f = 0; f < TS_CPU__COUNT; f++)
                    share[f] += ts_cpu_share(e, (enum ts_cpu_field)f) / 100.0 * len;
                m_window += len;
            }
        }
    }
    ck_assert_msg(rc == 0, "read: %s", why ? why : "?");
    recording_reader_close(r);
    /* 2 s of 100 ms samples: at least 15 even on a loaded machine. */
    ck_assert_double_gt(proc_window, 1.5e9);
    ck_assert_double_gt(m_window, 1.5e9);

    double proc = proc_ns / proc_window * 100.0;
    near(proc, p_usr + p_sys, "process usr+sys");
    /* mpstat's %usr leaves out guest time, which /proc/stat's user includes; no guests here. */
    near(share[TS_CPU_USER] / m_window, m_usr, "machine usr");
    near(share[TS_CPU_SYSTEM] / m_window, m_sys, "machine sys");
    near(share[TS_CPU_IDLE] / m_window, m_idle, "machine idle");
    /* Both saw the burner: most of a CPU on a quiet machine, a share of one beside other work
     * (a quarter at load average 8 on two cores), well above the idle process's. */
    ck_assert_double_gt(p_usr + p_sys, 10.0);

    free(pid_out);
    free(mp_out);
    tmp_remove(tmp);
}
END_TEST

static int have(const char *prog)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", prog);
    return system(cmd) == 0;
}

int main(void)
{
    if (!have("pidstat") || !have("mpstat")) {
        fputs("test_sysstat: skipped: pidstat or mpstat not found (Debian package sysstat)\n",
              stderr);
        return 77;
    }
    Suite *s = suite_create("sysstat");
    TCase *tc = tcase_create("cpu");
    tcase_add_test(tc, cpu_shares_match_sysstat);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
