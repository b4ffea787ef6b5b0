"""termsight.cluster: a training job's analysis on a Dask distributed cluster.

    from dask.distributed import Client
    import termsight.cluster
    client = Client("scheduler:8786")                 # workers that see the job folder
    result = termsight.cluster.analyse("/shared/termsight-data/my-job", client)
    print(result.report)                              # /shared/termsight-data/my-job/report

Each rank's run folder is analysed by `termsight analyse RUN_FOLDER` in a task on a worker (the
job folder must be on a file system the workers share: the tasks read each rank's recording and
write its report/ beside it); the job report is then merged on the client by `termsight analyse
--merge-only JOB_FOLDER`, which reads only the ranks' reports. Without a client, the whole runs
here: `termsight analyse JOB_FOLDER`, its rank analyses several at a time.

Dask is imported only by the caller (a Client is passed in): this module needs no Dask to import.
Workers started as processes re-import the caller's __main__, so run such code from a file or a
module, never from standard input.
"""

import os
import socket
import subprocess
import time

from ._lib import find_cli

__all__ = ["analyse", "rank_folders", "JobAnalysis", "RankAnalysis"]


class RankAnalysis:
    """How one rank's analysis went: folder, worker (the Dask worker's address, None when run
    here), host, seconds, ok, and error (its stderr when it failed)."""

    def __init__(self, folder, worker, host, seconds, ok, error):
        self.folder = folder
        self.worker = worker
        self.host = host
        self.seconds = seconds
        self.ok = ok
        self.error = error

    def __repr__(self):
        return "RankAnalysis(%r, worker=%r, %.3f s, ok=%r)" % (
            os.path.basename(self.folder), self.worker, self.seconds, self.ok)


class JobAnalysis:
    """The job report's folder (report), its printed summary (summary), and each rank's
    RankAnalysis (ranks; empty when the whole ran here)."""

    def __init__(self, report, summary, ranks):
        self.report = report
        self.summary = summary
        self.ranks = ranks

    def __repr__(self):
        return "JobAnalysis(%r, %d ranks)" % (self.report, len(self.ranks))


def rank_folders(job_folder):
    """The run folders directly under a job folder (folders holding recording/), sorted."""
    out = []
    for name in sorted(os.listdir(job_folder)):
        path = os.path.join(job_folder, name)
        if (not name.startswith(".") and os.path.isdir(path) and not os.path.islink(path)
                and os.path.isdir(os.path.join(path, "recording"))):
            out.append(path)
    return out


def _run(args):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def _analyse_rank(folder, options):
    """A worker's task: `termsight analyse folder` with the worker's own termsight command."""
    worker = None
    try:
        from distributed import get_worker
        worker = get_worker().address
    except (ImportError, ValueError):
        pass
    start = time.monotonic()
    rc, _out, err = _run([find_cli(), "analyse"] + list(options) + [folder])
    return RankAnalysis(folder, worker, socket.gethostname(), time.monotonic() - start, rc == 0,
                        err.strip() or None)


def analyse(job_folder, client=None, timeline_limit=None, pretty=False, output=None):
    """Analyses a job folder: its ranks on the Dask client's workers (or here, without a
    client), then the job report, merged here. Returns a JobAnalysis; raises RuntimeError when
    no rank could be merged (with termsight's message). A rank whose analysis failed is left out
    of the merge, which says so; its error is in JobAnalysis.ranks."""
    job_folder = os.path.abspath(job_folder)
    if not os.path.isdir(job_folder):
        raise FileNotFoundError("termsight.cluster.analyse: %s is not a folder" % job_folder)
    options = []
    if timeline_limit is not None:
        options += ["--timeline-limit", str(timeline_limit)]
    if pretty:
        options += ["--pretty"]
    merge = [find_cli(), "analyse"] + options
    if output is not None:
        merge += ["-o", os.path.abspath(output)]
    ranks = []
    if client is None:
        rc, out, err = _run(merge + [job_folder])
    else:
        folders = rank_folders(job_folder)
        if not folders:
            raise RuntimeError("termsight.cluster.analyse: %s holds no run folders" % job_folder)
        futures = client.map(_analyse_rank, folders, options=options, pure=False)
        ranks = client.gather(futures)
        rc, out, err = _run(merge + ["--merge-only", job_folder])
    if rc != 0:
        raise RuntimeError("termsight analyse %s failed: %s" % (job_folder, err.strip()))
    report = output if output is not None else os.path.join(job_folder, "report")
    return JobAnalysis(os.path.abspath(report), out, ranks)
