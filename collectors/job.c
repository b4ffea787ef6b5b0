/* job: which training job this process belongs to, and which rank of it it is.
 *
 * A session's job identity comes from its options (termsight_options.job, .rank, ...) where the
 * program set them, else from the environment the launcher left: termsight's own TERMSIGHT_JOB,
 * TERMSIGHT_RANK, TERMSIGHT_LOCAL_RANK, TERMSIGHT_WORLD_SIZE; torchrun's TORCHELASTIC_RUN_ID,
 * RANK, LOCAL_RANK, WORLD_SIZE; Slurm's SLURM_JOB_ID (and SLURM_STEP_ID), SLURM_PROCID,
 * SLURM_LOCALID, SLURM_NTASKS; Open MPI's OMPI_COMM_WORLD_RANK, _LOCAL_RANK, _SIZE with its job
 * id (OMPI_MCA_ess_base_jobid or PMIX_NAMESPACE). Ranks started the way torchrun starts them but
 * without a run id (torchrun's default id is "none"; torch.multiprocessing launchers set none)
 * are named after their rendezvous port and their process group: "torch-<MASTER_PORT>-<pgid>",
 * which the ranks of one launch on one machine share (a launcher's children, termsight run's
 * and their own DataLoader workers stay in its group), and a launch from an interactive shell
 * does not share with the next; a script that launches several jobs with one port in turn
 * should name them (TERMSIGHT_JOB). */
#include "collectors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The first of names set (to a non-empty value) in the environment, or NULL. */
static const char *env_first(const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *v = getenv(names[i]);
        if (v && *v)
            return v;
    }
    return NULL;
}

/* A whole non-negative decimal below 2^31, or -1. */
static int32_t parse_index(const char *v)
{
    uint32_t u;
    if (!v || options_parse_u32(v, 0, INT32_MAX, &u) != 0)
        return -1;
    return (int32_t)u;
}

static int32_t env_index(const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int32_t v = parse_index(getenv(names[i]));
        if (v >= 0)
            return v;
    }
    return -1;
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

void job_identify(const termsight_options *o, ts_job *job)
{
    memset(job, 0, sizeof *job);
    static const char *const rank_env[] = {"TERMSIGHT_RANK", "RANK", "OMPI_COMM_WORLD_RANK",
                                           "PMI_RANK", "SLURM_PROCID"};
    static const char *const local_env[] = {"TERMSIGHT_LOCAL_RANK", "LOCAL_RANK",
                                            "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                            "SLURM_LOCALID"};
    static const char *const world_env[] = {"TERMSIGHT_WORLD_SIZE", "WORLD_SIZE",
                                            "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"};
    job->rank = o->rank >= 0 ? o->rank : env_index(rank_env, N(rank_env));
    job->local_rank = o->local_rank >= 0 ? o->local_rank : env_index(local_env, N(local_env));
    job->world_size = o->world_size > 0 ? o->world_size : env_index(world_env, N(world_env));
    if (job->world_size == 0)
        job->world_size = -1;

    const char *id = o->job && *o->job ? o->job : getenv("TERMSIGHT_JOB");
    const char *src = o->job && *o->job ? "options" : "TERMSIGHT_JOB";
    char made[64] = "";
    if (!id || !*id) {
        const char *run = getenv("TORCHELASTIC_RUN_ID");
        const char *slurm = getenv("SLURM_JOB_ID");
        static const char *const mpi_env[] = {"OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"};
        const char *mpi = env_first(mpi_env, N(mpi_env));
        if (run && *run && strcmp(run, "none") != 0) {
            id = run, src = "torchrun";
        } else if (slurm && *slurm) {
            const char *step = getenv("SLURM_STEP_ID");
            snprintf(made, sizeof made, "slurm-%.24s%s%.16s", slurm, step && *step ? "." : "",
                     step && *step ? step : "");
            id = made, src = "slurm";
        } else if (mpi && getenv("OMPI_COMM_WORLD_RANK")) {
            snprintf(made, sizeof made, "mpi-%.56s", mpi);
            id = made, src = "mpi";
        } else if (job->rank >= 0 && getenv("WORLD_SIZE")) {
            const char *port = getenv("MASTER_PORT");
            snprintf(made, sizeof made, "torch-%.16s-%d", port && *port ? port : "0",
                     (int)getpgrp());
            id = made, src = "torch";
        } else {
            id = NULL, src = "";
        }
    }
    if (id)
        util_path_component(id, job->id, sizeof job->id);
    snprintf(job->source, sizeof job->source, "%s", src);

    char host[256];
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = 0;
    char *dot = strchr(host, '.');
    if (dot && dot != host)
        *dot = 0;
    util_path_component(host, job->host, sizeof job->host);
}
