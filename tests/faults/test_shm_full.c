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

#include <dirent.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>

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

/* 1 MiB (a budget of 256 KiB): no session can be made (the segment's start is larger than the
 * budget, or than what the tmpfs has). The C example and a Profiler() script train to their end. */
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
    ck_assert_msg((strstr(err, "profiling off: cannot have") ||
                   strstr(err, "profiling off: the shared-memory budget of this process tree has "
                               "no room for a segment's first")) &&
                      strstr(out, "trained in"),
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

/* 7 MiB: the process tree's budget is a quarter of it, 1.75 MiB. The segment is made (its names'
 * pages come as names do), the collector's lane and a few threads' are had (first rings of 256
 * KiB, as a budget this small gets); the others of 12, all emitting at once (--together: none
 * ends before every one has tried), find no room for theirs. No signal: every event recorded or
 * counted as lost. */
START_TEST(no_room_for_every_lane)
{
    char *dir = tmp_make();
    shm_mount("7m");
    emitter e;
    const char *extra[] = {"--events", "20000", "--together", NULL};
    emitter_start(&e, dir, 12, extra);
    emitter_result r;
    emitter_finish_ok(&e, &r);
    ck_assert_uint_eq(r.emitted, 12 * 20000);
    counter_tally t;
    tally_counters(e.run, &t);
    ck_assert_uint_gt(t.total, 0);
    ck_assert_uint_gt(t.lost_by_reason[TS_LOST_NO_LANE], 0);
    ck_assert_uint_eq(t.total + t.lost, r.emitted);
    printf("shm full: 7 MiB /dev/shm, 12 threads: %" PRIu64 " recorded, %" PRIu64
           " lost for want of a lane\n",
           t.total, t.lost_by_reason[TS_LOST_NO_LANE]);
    ck_assert_int_eq(umount("/dev/shm"), 0);
    tmp_remove(dir);
}
END_TEST

/* ---- A container's 64 MB /dev/shm (the tree's budget: model/budget.c) --------------------------
 *
 * Each program finishes as it does without termsight; termsight's own bytes in /dev/shm (its
 * files' blocks, sampled every millisecond while the program runs) stay within the process tree's
 * budget, a quarter of the 64 MB; nothing of termsight's is left in /dev/shm afterwards. */

#define CONTAINER_BUDGET_KIB (64u * 1024 / 4)

typedef struct shm_watch {
    pthread_t thread;
    _Atomic int stop;
    uint64_t peak_kib;
} shm_watch;

/* termsight's KiB in /dev/shm now: every "termsight-*" entry's blocks; *entries their count. */
static uint64_t termsight_kib(int *entries)
{
    DIR *d = opendir("/dev/shm");
    uint64_t kib = 0;
    *entries = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        struct stat st;
        if (!strncmp(e->d_name, "termsight-", 10) &&
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
            kib += (uint64_t)st.st_blocks / 2;
            ++*entries;
        }
    }
    if (d)
        closedir(d);
    return kib;
}

static void *watch_loop(void *arg)
{
    shm_watch *w = arg;
    while (!atomic_load(&w->stop)) {
        int entries;
        uint64_t k = termsight_kib(&entries);
        if (k > w->peak_kib)
            w->peak_kib = k;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    return NULL;
}

/* Runs argv with the watch on: its exit status must be 0 (a SIGBUS fails run()), termsight's peak
 * within the budget, nothing of termsight's left. */
static void container_case(const char *dir, const char *what, char *const *argv)
{
    shm_watch w = {0};
    ck_assert_int_eq(pthread_create(&w.thread, NULL, watch_loop, &w), 0);
    char *out, *err;
    int rc = run(dir, argv, &out, &err);
    atomic_store(&w.stop, 1);
    pthread_join(w.thread, NULL);
    ck_assert_msg(rc == 0 && strstr(out, "ok"), "%s: exit %d\n%s%s", what, rc, out, err);
    printf("container 64 MB: %s: termsight's peak /dev/shm use %" PRIu64
           " KiB of a %u KiB budget\n",
           what, w.peak_kib, CONTAINER_BUDGET_KIB);
    ck_assert_msg(w.peak_kib <= CONTAINER_BUDGET_KIB, "%s: %" PRIu64 " KiB over the budget\n%s",
                  what, w.peak_kib, err);
    int left;
    termsight_kib(&left);
    ck_assert_msg(left == 0, "%s left %d entries in /dev/shm", what, left);
    free(out);
    free(err);
}

static const char *shm_tree(void)
{
    const char *v = getenv("SHM_TREE");
    ck_assert_msg(v && *v, "SHM_TREE is not set");
    return v;
}

static int sanitized(const char *what)
{
    if (!getenv("TERMSIGHT_SANITIZED"))
        return 0;
    printf("container 64 MB: %s skipped under a sanitizer (its runtime cannot be preloaded into "
           "the programs termsight run starts)\n",
           what);
    return 1;
}

/* 300 children (60 in the default set) that record and _exit, and 48 threads that record once
 * before the program writes 16 MiB of shared memory of its own: with the program's own session, and
 * under termsight run. */
START_TEST(container_recorders)
{
    char *dir = tmp_make();
    shm_mount("64m");
    char *o = path_join(dir, "out");
    char nforks[16], forks_what[64], run_forks_what[96];
    snprintf(nforks, sizeof nforks, "%ld", test_scale(60, 300));
    snprintf(forks_what, sizeof forks_what, "%s forked recorders", nforks);
    snprintf(run_forks_what, sizeof run_forks_what, "%s under termsight run", forks_what);
    char *const forks[] = {(char *)shm_tree(), "fork", nforks, o, NULL};
    container_case(dir, forks_what, forks);
    char *const pool[] = {(char *)shm_tree(), "threads", "48", "16", o, NULL};
    container_case(dir, "48 pool threads, then 16 MiB of the program's", pool);
    if (!sanitized("termsight run")) {
        const char *bin = getenv("TERMSIGHT_BIN");
        char *const run_forks[] = {(char *)bin,        "run",  "-o",   o,   "--",
                                   (char *)shm_tree(), "fork", nforks, "-", NULL};
        container_case(dir, run_forks_what, run_forks);
        char *const run_pool[] = {(char *)bin, "run", "-o", o,   "--", (char *)shm_tree(),
                                  "threads",   "48",  "16", "-", NULL};
        container_case(dir, "48 pool threads under termsight run", run_pool);
        char loop[4200];
        snprintf(loop, sizeof loop, "for i in $(seq 20); do env true; done; exec '%s' shm 24",
                 shm_tree());
        char *const shell[] = {(char *)bin, "run", "-o", o, "--", "sh", "-c", loop, NULL};
        container_case(dir, "20 env true, then 24 MiB of the program's", shell);
    }
    ck_assert_int_eq(umount("/dev/shm"), 0);
    free(o);
    tmp_remove(dir);
}
END_TEST

/* A PyTorch DataLoader with two workers and a range in __getitem__, 12 epochs (4 in the default
 * set, the script's argument), under termsight run: each epoch's workers record and end. */
static const char torch_loader[] =
    "import sys, torch, termsight\n"
    "from torch.utils.data import DataLoader, Dataset\n"
    "class Data(Dataset):\n"
    "    def __len__(self): return 256\n"
    "    def __getitem__(self, i):\n"
    "        with termsight.range('getitem'):\n"
    "            return torch.full((64,), float(i)), i % 3\n"
    "model = torch.nn.Linear(64, 3)\n"
    "opt = torch.optim.SGD(model.parameters(), lr=0.01)\n"
    "batches = 0\n"
    "epochs = int(sys.argv[1])\n"
    "for epoch in range(epochs):\n"
    "    for x, y in DataLoader(Data(), batch_size=32, num_workers=2):\n"
    "        opt.zero_grad(); torch.nn.functional.cross_entropy(model(x), y).backward(); "
    "opt.step()\n"
    "        batches += 1\n"
    "assert batches == epochs * 8, batches\n"
    "print('ok')\n";

START_TEST(container_torch_loader)
{
    if (sanitized("the PyTorch case") || system("/usr/bin/python3 -c 'import torch' 2>/dev/null")) {
        printf("container 64 MB: the PyTorch case needs /usr/bin/python3 with torch\n");
        return;
    }
    char *dir = tmp_make();
    shm_mount("64m");
    char *script = path_join(dir, "loader.py"), *o = path_join(dir, "out");
    FILE *f = fopen(script, "w");
    ck_assert_ptr_nonnull(f);
    fputs(torch_loader, f);
    fclose(f);
    char epochs[16], what[64];
    snprintf(epochs, sizeof epochs, "%ld", test_scale(4, 12));
    snprintf(what, sizeof what, "PyTorch, 2 DataLoader workers, %s epochs", epochs);
    char *const argv[] = {(char *)getenv("TERMSIGHT_BIN"),
                          "run",
                          "-o",
                          o,
                          "--",
                          "/usr/bin/python3",
                          script,
                          epochs,
                          NULL};
    container_case(dir, what, argv);
    ck_assert_int_eq(umount("/dev/shm"), 0);
    free(script);
    free(o);
    tmp_remove(dir);
}
END_TEST

int main(void)
{
    int rc = faults_private_mounts();
    if (rc >= 0)
        return rc;
    const TTest *tests[] = {no_room_for_a_segment, no_room_for_every_lane, container_recorders,
                            container_torch_loader, NULL};
    return faults_main("shm_full", 600, tests);
}
