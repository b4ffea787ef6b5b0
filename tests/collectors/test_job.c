/* Tests of the job identity: where it comes from (options, termsight's variables, torchrun,
 * Slurm, Open MPI, ranks without a run id), the job folder the ranks share and what may not stand
 * at its name, and what a session of a job tells monitors and the recording. */
#define TESTUTIL_TAG "job"
#include "collectors.h"
#include "testutil.h"

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Every variable job_identify reads, cleared before each case. */
static const char *const job_vars[] = {
    "TERMSIGHT_JOB",
    "TERMSIGHT_RANK",
    "TERMSIGHT_LOCAL_RANK",
    "TERMSIGHT_WORLD_SIZE",
    "TORCHELASTIC_RUN_ID",
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "MASTER_PORT",
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_NTASKS",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_MCA_ess_base_jobid",
    "PMIX_NAMESPACE",
    "PMI_RANK",
    "PMI_SIZE",
    "MPI_LOCALRANKID",
};

static void clear_env(void)
{
    for (size_t i = 0; i < sizeof job_vars / sizeof job_vars[0]; i++)
        unsetenv(job_vars[i]);
}

/* env: "NAME=value" entries, NULL-terminated. */
static void identify(const char *const *env, const termsight_options *o, ts_job *job)
{
    clear_env();
    for (size_t i = 0; env[i]; i++)
        ck_assert_int_eq(putenv((char *)env[i]), 0);
    termsight_options d;
    termsight_options_init(&d);
    job_identify(o ? o : &d, job);
    clear_env();
}

typedef struct job_case {
    const char *what;
    const char *env[8];
    const char *id; /* NULL: "torch-<port>-<pgid>", checked apart */
    const char *source;
    int32_t rank, local_rank, world_size;
} job_case;

static const job_case cases[] = {
    {"no launcher", {NULL}, "", "", -1, -1, -1},
    {"termsight's own",
     {"TERMSIGHT_JOB=exp/1\n", "TERMSIGHT_RANK=3", "TERMSIGHT_WORLD_SIZE=4", "RANK=9", NULL},
     "exp_1_",
     "TERMSIGHT_JOB",
     3,
     -1,
     4},
    {"torchrun",
     {"TORCHELASTIC_RUN_ID=abc", "RANK=2", "LOCAL_RANK=0", "WORLD_SIZE=4", "MASTER_PORT=1", NULL},
     "abc",
     "torchrun",
     2,
     0,
     4},
    {"slurm",
     {"SLURM_JOB_ID=77", "SLURM_STEP_ID=0", "SLURM_PROCID=5", "SLURM_LOCALID=1", "SLURM_NTASKS=8",
      NULL},
     "slurm-77.0",
     "slurm",
     5,
     1,
     8},
    {"torchrun inside slurm: torchrun's ranks",
     {"SLURM_JOB_ID=77", "SLURM_PROCID=0", "SLURM_NTASKS=1", "TORCHELASTIC_RUN_ID=r9", "RANK=6",
      "WORLD_SIZE=8", NULL},
     "r9",
     "torchrun",
     6,
     -1,
     8},
    {"open mpi",
     {"OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_RANK=0",
      "PMIX_NAMESPACE=prterun-x-123@1", NULL},
     "mpi-prterun-x-123@1",
     "mpi",
     2,
     0,
     4},
    {"a rank without a world is no job", {"RANK=1", NULL}, "", "", 1, -1, -1},
    {"ranks that do not parse",
     {"TERMSIGHT_JOB=j", "RANK=x", "WORLD_SIZE=0", NULL},
     "j",
     "TERMSIGHT_JOB",
     -1,
     -1,
     -1},
};

START_TEST(identity_from_the_environment)
{
    const job_case *c = &cases[_i];
    ts_job job;
    identify(c->env, NULL, &job);
    ck_assert_msg(!strcmp(job.id, c->id), "%s: id '%s', want '%s'", c->what, job.id, c->id);
    ck_assert_msg(!strcmp(job.source, c->source), "%s: source %s", c->what, job.source);
    ck_assert_msg(
        job.rank == c->rank && job.local_rank == c->local_rank && job.world_size == c->world_size,
        "%s: rank %d local %d world %d", c->what, job.rank, job.local_rank, job.world_size);
    /* The host: a short name that is one path component. */
    ck_assert(job.host[0] && !strchr(job.host, '/') && !strchr(job.host, '.'));
}
END_TEST

START_TEST(ranks_without_a_run_id)
{
    /* torchrun's default run id, and torch.multiprocessing-style launchers: named after the
     * port and the process group the ranks share. */
    const char *env[] = {"TORCHELASTIC_RUN_ID=none", "RANK=1", "WORLD_SIZE=2", "MASTER_PORT=29577",
                         NULL};
    ts_job job;
    identify(env, NULL, &job);
    char want[64];
    snprintf(want, sizeof want, "torch-29577-%d", (int)getpgrp());
    ck_assert_str_eq(job.id, want);
    ck_assert_str_eq(job.source, "torch");
    ck_assert_int_eq(job.rank, 1);
    ck_assert_int_eq(job.world_size, 2);
}
END_TEST

START_TEST(options_win)
{
    const char *env[] = {"TORCHELASTIC_RUN_ID=abc", "RANK=2", "WORLD_SIZE=4", NULL};
    termsight_options o;
    termsight_options_init(&o);
    o.job = "mine";
    o.rank = 7;
    o.world_size = 8;
    ts_job job;
    identify(env, &o, &job);
    ck_assert_str_eq(job.id, "mine");
    ck_assert_str_eq(job.source, "options");
    ck_assert_int_eq(job.rank, 7);
    ck_assert_int_eq(job.world_size, 8);
    ck_assert_int_eq(job.local_rank, -1);

    /* Bad values are refused with the option's name. */
    o.rank = -2;
    termsight_session *s = NULL;
    ck_assert_int_eq(termsight_session_create(&o, &s), TERMSIGHT_E_INVALID);
    ck_assert_ptr_nonnull(strstr(termsight_last_error(), "rank"));
    o.rank = 0;
    o.world_size = 0;
    ck_assert_int_eq(termsight_session_create(&o, &s), TERMSIGHT_E_INVALID);
    ck_assert_ptr_null(s);
}
END_TEST

/* The CONFIG value recorded under key in the run folder's recording, into out ("" if none). */
static void recorded_config(const char *run, const char *key, char *out, size_t cap)
{
    out[0] = 0;
    recording_reader *r;
    char *why = NULL;
    ck_assert_msg(recording_reader_open(run, &r, &why) == 0, "open: %s", why);
    const ts_event *ev;
    size_t n;
    while (recording_reader_next(r, &ev, &n, &why) == 1) {
        for (size_t i = 0; i < n; i++) {
            uint32_t kl, vl;
            const char *k = recording_reader_string(r, ev[i].name, &kl);
            const char *v = recording_reader_string(r, ev[i].type, &vl);
            if (ev[i].kind == TS_KIND_CONFIG && k && v && kl == strlen(key) && !memcmp(k, key, kl))
                snprintf(out, cap, "%.*s", (int)vl, v);
        }
    }
    recording_reader_close(r);
}

START_TEST(a_rank_in_its_job_folder)
{
    char *out = tmp_make();
    clear_env();
    termsight_options o;
    termsight_options_init(&o);
    o.output_path = out;
    o.job = "exp 7";
    o.rank = 1;
    o.local_rank = 1;
    o.world_size = 2;
    termsight_session *s;
    ck_assert_int_eq(termsight_session_create(&o, &s), TERMSIGHT_OK);
    ck_assert_str_eq(termsight_state(s), "collecting");
    char host[64];
    ts_job job;
    job_identify(&o, &job);
    snprintf(host, sizeof host, "%s", job.host);
    /* <output>/<job>/rank<R>-<host>-<pid>-<stamp>-<hex> */
    char want[1200];
    snprintf(want, sizeof want, "%s/exp 7/rank1-%s-%d-", out, host, (int)getpid());
    const char *run = termsight_run_folder(s);
    ck_assert_msg(!strncmp(run, want, strlen(want)), "run folder %s", run);
    ck_assert_uint_eq(strlen(run), strlen(want) + 15 + 1 + 8);

    /* Monitors read the job from the segment's header. */
    segment *seg;
    char *why = NULL;
    ck_assert_msg(segment_attach(getpid(), 0, &seg, &why) == 0, "attach: %s", why);
    const ts_segment_header *h = segment_header(seg);
    ck_assert_str_eq(h->job, "exp 7");
    ck_assert_str_eq(h->host, host);
    ck_assert_int_eq(h->rank, 1);
    ck_assert_int_eq(h->local_rank, 1);
    ck_assert_int_eq(h->world_size, 2);
    segment_close(seg, 0);

    char rundup[1200];
    snprintf(rundup, sizeof rundup, "%s", run);
    ck_assert_int_eq(termsight_session_destroy(s), TERMSIGHT_OK);
    char v[64];
    const char *want_config[][2] = {{"job", "exp 7"},    {"job_source", "options"}, {"rank", "1"},
                                    {"local_rank", "1"}, {"world_size", "2"},       {"host", host}};
    for (size_t i = 0; i < sizeof want_config / sizeof want_config[0]; i++) {
        recorded_config(rundup, want_config[i][0], v, sizeof v);
        ck_assert_msg(!strcmp(v, want_config[i][1]), "%s recorded as '%s'", want_config[i][0], v);
    }
    tmp_remove(out);
}
END_TEST

/* A child that makes a session as rank `rank` of job "shared" under out and exits 0 when its
 * run folder is in the job folder. */
static void rank_child(const char *out, int rank)
{
    termsight_options o;
    termsight_options_init(&o);
    o.output_path = out;
    o.job = "shared";
    o.rank = rank;
    o.world_size = 2;
    termsight_session *s;
    if (termsight_session_create(&o, &s) != TERMSIGHT_OK ||
        strcmp(termsight_state(s), "collecting"))
        _exit(2);
    char want[1200];
    snprintf(want, sizeof want, "%s/shared/rank%d-", out, rank);
    int ok = !strncmp(termsight_run_folder(s), want, strlen(want));
    termsight_session_destroy(s);
    _exit(ok ? 0 : 3);
}

START_TEST(ranks_share_the_job_folder)
{
    char *out = tmp_make();
    clear_env();
    pid_t kids[2];
    for (int r = 0; r < 2; r++) {
        kids[r] = fork();
        ck_assert_int_ge(kids[r], 0);
        if (kids[r] == 0)
            rank_child(out, r);
    }
    for (int r = 0; r < 2; r++) {
        int st;
        ck_assert_int_eq(waitpid(kids[r], &st, 0), kids[r]);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d: status %d", r, st);
    }
    /* Exactly the two rank folders in one job folder. */
    char *job = path_join(out, "shared");
    DIR *d = opendir(job);
    ck_assert_ptr_nonnull(d);
    int ranks[2] = {0, 0}, other = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (!strncmp(e->d_name, "rank0-", 6))
            ranks[0]++;
        else if (!strncmp(e->d_name, "rank1-", 6))
            ranks[1]++;
        else
            other++;
    }
    closedir(d);
    ck_assert_int_eq(ranks[0], 1);
    ck_assert_int_eq(ranks[1], 1);
    ck_assert_int_eq(other, 0);
    free(job);
    tmp_remove(out);
}
END_TEST

/* What stands at a job folder's name and is not one of this user's folders is never used: the
 * session runs on, not collecting, and says why; nothing is made through it. */
START_TEST(job_folder_not_ours)
{
    char *out = tmp_make();
    char *elsewhere = tmp_make();
    clear_env();
    char *job = path_join(out, "j");
    ck_assert_int_eq(symlink(elsewhere, job), 0);
    termsight_options o;
    termsight_options_init(&o);
    o.output_path = out;
    o.job = "j";
    o.rank = 0;
    termsight_session *s;
    ck_assert_int_eq(termsight_session_create(&o, &s), TERMSIGHT_OK);
    ck_assert_str_eq(termsight_state(s), "idle");
    ck_assert_int_eq(termsight_start(s), TERMSIGHT_E_RECORDING);
    ck_assert_ptr_nonnull(strstr(termsight_last_error(), "/j"));
    ck_assert_int_eq(termsight_session_destroy(s), TERMSIGHT_OK);
    DIR *d = opendir(elsewhere);
    int entries = 0;
    for (struct dirent *e; (e = readdir(d));)
        entries += e->d_name[0] != '.';
    closedir(d);
    ck_assert_int_eq(entries, 0);
    ck_assert_int_eq(unlink(job), 0);

    /* Another user's folder (needs root to make one). */
    if (geteuid() == 0) {
        ck_assert_int_eq(mkdir(job, 0777), 0);
        ck_assert_int_eq(chown(job, 65534, 65534), 0);
        ck_assert_int_eq(termsight_session_create(&o, &s), TERMSIGHT_OK);
        ck_assert_str_eq(termsight_state(s), "idle");
        ck_assert_int_eq(termsight_start(s), TERMSIGHT_E_RECORDING);
        ck_assert_ptr_nonnull(strstr(termsight_last_error(), "another user"));
        ck_assert_int_eq(termsight_session_destroy(s), TERMSIGHT_OK);
        d = opendir(job);
        entries = 0;
        for (struct dirent *e; (e = readdir(d));)
            entries += e->d_name[0] != '.';
        closedir(d);
        ck_assert_int_eq(entries, 0);
    }
    free(job);
    tmp_remove(elsewhere);
    tmp_remove(out);
}
END_TEST

/* A program built before the job fields existed passes the shorter struct: it is read that far,
 * and the job comes from the environment. */
START_TEST(older_options_struct)
{
    char *out = tmp_make();
    clear_env();
    setenv("TERMSIGHT_JOB", "old", 1);
    setenv("TERMSIGHT_RANK", "4", 1);
    termsight_options o;
    termsight_options_init(&o);
    o.output_path = out;
    o.struct_size = offsetof(termsight_options, job);
    o.rank = 99; /* past the struct the program knows: never read */
    termsight_session *s;
    ck_assert_int_eq(termsight_session_create(&o, &s), TERMSIGHT_OK);
    char want[1200];
    snprintf(want, sizeof want, "%s/old/rank4-", out);
    ck_assert_msg(!strncmp(termsight_run_folder(s), want, strlen(want)), "%s",
                  termsight_run_folder(s));
    ck_assert_int_eq(termsight_session_destroy(s), TERMSIGHT_OK);
    o.struct_size = offsetof(termsight_options, job) - 1;
    ck_assert_int_eq(termsight_session_create(&o, &s), TERMSIGHT_E_INVALID);
    clear_env();
    tmp_remove(out);
}
END_TEST

static Suite *job_suite(void)
{
    Suite *s = suite_create("job");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, identity_from_the_environment, 0, sizeof cases / sizeof cases[0]);
    tcase_add_test(tc, ranks_without_a_run_id);
    tcase_add_test(tc, options_win);
    tcase_add_test(tc, a_rank_in_its_job_folder);
    tcase_add_test(tc, ranks_share_the_job_folder);
    tcase_add_test(tc, job_folder_not_ours);
    tcase_add_test(tc, older_options_struct);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(job_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
