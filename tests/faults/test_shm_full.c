/* Shared memory too small (a container's 64 MB /dev/shm, others' segments filling it): a tmpfs
 * of a few MiB mounted on /dev/shm in a private mount namespace. The profiler must never be the
 * reason a training stops: before, the segment was made sparse and a store to a page the tmpfs
 * could not give killed the process with SIGBUS, and where the segment could not be made at all
 * the examples and Profiler() refused to train. Now the pages written from the start are had at
 * creation (or creation fails with a message and the program trains unprofiled), and a lane's
 * ring is had when a thread first claims it (or that thread has no lane, its events counted as
 * lost). */
#define TESTUTIL_TAG "shmfull"
#include "testutil.h"

#include "cliutil.h"
#include "faults.h"

static void shm_mount(const char *size)
{
    char opts[64];
    snprintf(opts, sizeof opts, "size=%s,mode=1777", size);
    ck_assert_msg(mount("faults", "/dev/shm", "tmpfs", 0, opts) == 0, "mount /dev/shm: %s",
                  strerror(errno));
}

/* Runs argv with stdout and stderr into files of dir; the exit status; *out and *err their text
 * (malloc'd). */
static int run(const char *dir, char *const *argv, char **out, char **err)
{
    char *op = path_join(dir, "stdout"), *ep = path_join(dir, "stderr");
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (!freopen(op, "w", stdout) || !freopen(ep, "w", stderr))
            _exit(126);
        execvp(argv[0], argv);
        _exit(127);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st), "%s ended by signal %d", argv[0], WTERMSIG(st));
    FILE *f = fopen(op, "r");
    size_t len;
    *out = file_slurp(fileno(f), &len);
    fclose(f);
    f = fopen(ep, "r");
    *err = file_slurp(fileno(f), &len);
    fclose(f);
    free(op);
    free(ep);
    return WEXITSTATUS(st);
}

/* 1 MiB: no segment can be made. The C example and a Profiler() script train to their end. */
START_TEST(no_room_for_a_segment)
{
    char *dir = tmp_make();
    shm_mount("1m");
    const char *mlp = getenv("MLP_TRAIN");
    ck_assert_msg(mlp && *mlp, "MLP_TRAIN is not set");
    char *out_dir = path_join(dir, "out"), *out, *err;
    char *const train[] = {(char *)mlp, "--steps", "30", "--output", out_dir, NULL};
    int rc = run(dir, train, &out, &err);
    ck_assert_msg(rc == 0, "mlp_train: exit %d\n%s%s", rc, out, err);
    ck_assert_msg(strstr(err, "profiling off: cannot have") && strstr(out, "trained in"),
                  "mlp_train:\n%s%s", out, err);
    ck_assert_ptr_nonnull(strstr(out, "run folder: none (not profiled)"));
    free(out);
    free(err);

    char script[1024];
    snprintf(script, sizeof script,
             "import warnings, termsight\n"
             "with warnings.catch_warnings(record=True) as w:\n"
             "    warnings.simplefilter('always')\n"
             "    p = termsight.Profiler(output_path=%s)\n"
             "assert len(w) == 1 and issubclass(w[0].category, RuntimeWarning), w\n"
             "assert 'profiling is off' in str(w[0].message), w[0].message\n"
             "assert p.state == 'off' and p.off, p.state\n"
             "q = p.queue('prefetch', 4, role='host')\n"
             "for i in range(3):\n"
             "    with termsight.step():\n"
             "        q.size(i)\n"
             "        with p.range('MatMul-op1', 'MatMul'):\n"
             "            pass\n"
             "p.stop(); p.flush()\n"
             "assert p.analyse() is None and p.events_recorded == 0\n"
             "p.close()\n"
             "print('trained unprofiled')\n",
             "'out-py'");
    char *const py[] = {"python3", "-c", script, NULL};
    rc = run(dir, py, &out, &err);
    ck_assert_msg(rc == 0 && strstr(out, "trained unprofiled"), "python: exit %d\n%s%s", rc, out,
                  err);
    free(out);
    free(err);
    ck_assert_int_eq(umount("/dev/shm"), 0);
    free(out_dir);
    tmp_remove(dir);
}
END_TEST

/* 7 MiB: the segment is made (its names take 4.3 MiB), the collector's lane and one thread's are
 * had (first rings of 1 MiB, as shared memory this scarce gets); the others find no room for
 * theirs. No signal: every event recorded or counted as lost. */
START_TEST(no_room_for_every_lane)
{
    char *dir = tmp_make();
    shm_mount("7m");
    emitter e;
    const char *extra[] = {"--events", "20000", NULL};
    emitter_start(&e, dir, 6, extra);
    emitter_result r;
    emitter_finish_ok(&e, &r);
    ck_assert_uint_eq(r.emitted, 6 * 20000);
    counter_tally t;
    tally_counters(e.run, &t);
    ck_assert_uint_gt(t.total, 0);
    ck_assert_uint_gt(t.lost_by_reason[TS_LOST_NO_LANE], 0);
    ck_assert_uint_eq(t.total + t.lost, r.emitted);
    printf("shm full: 7 MiB /dev/shm, 6 threads: %" PRIu64 " recorded, %" PRIu64
           " lost for want of a lane\n",
           t.total, t.lost_by_reason[TS_LOST_NO_LANE]);
    ck_assert_int_eq(umount("/dev/shm"), 0);
    tmp_remove(dir);
}
END_TEST

int main(void)
{
    int rc = faults_private_mounts();
    if (rc >= 0)
        return rc;
    const TTest *tests[] = {no_room_for_a_segment, no_room_for_every_lane, NULL};
    return faults_main("shm_full", 120, tests);
}
