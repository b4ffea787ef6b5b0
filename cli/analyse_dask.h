/* analyse_dask: a job's rank analyses as tasks on a Dask cluster (analyse_dask.c). */
#ifndef TERMSIGHT_ANALYSE_DASK_H
#define TERMSIGHT_ANALYSE_DASK_H

/* Runs `termsight analyse OPTIONS FOLDER` for each of the n folders as a task on the Dask
 * cluster whose scheduler is at `scheduler` (tcp://HOST:PORT), each within timeout_s seconds on
 * its worker; options is NULL-terminated. A rank whose task failed gets one line on stderr.
 * Returns 0 once every task has ended (well or not), -1 when the cluster could not be used (a
 * line per rank said why). Never waits without bound. */
int analyse_dask_ranks(const char *scheduler, double timeout_s, char **folders, int n,
                       char *const *options);

#endif
