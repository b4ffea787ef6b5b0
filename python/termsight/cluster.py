"""termsight.cluster: a training job's analysis on a Dask distributed cluster.

    from dask.distributed import Client
    import termsight.cluster
    client = Client("scheduler:8786")                 # workers that see the job folder
    result = termsight.cluster.analyse("/shared/termsight-data/my-job", client)
    print(result.report)                              # /shared/termsight-data/my-job/report

Each rank's run folder is analysed by `termsight analyse --lean RUN_FOLDER` in a task on a worker
that is a command line (subprocess.run: a worker needs the termsight command, not this package;
`termsight analyse JOB_FOLDER --scheduler ADDR` does the same without Python here) (the
job folder must be on a file system the workers share: the tasks read each rank's recording and
write its report/ beside it); the job report is then merged on the client by `termsight analyse
--merge-only JOB_FOLDER`, which reads only the ranks' reports. Without a client, the whole runs
here: `termsight analyse JOB_FOLDER`, its rank analyses several at a time.

Dask is imported only by the caller (a Client is passed in): this module needs no Dask to import.
Workers started as processes re-import the caller's __main__, so run such code from a file or a
module, never from standard input.
"""

import os
import subprocess
import time

from ._lib import find_cli

__all__ = ["analyse", "rank_folders", "JobAnalysis", "RankAnalysis"]


class RankAnalysis:
    """How one rank's analysis went: folder, worker (the Dask worker's address, None when run
    here or unknown), host (None: not known), seconds (from the submission to its result), ok,
    and error (its stderr, or why its task failed)."""

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


def _gather_ranks(client, folders, options, timeout):
    """Each folder's `termsight analyse --lean OPTIONS FOLDER` as a task that is a command line
    (the command: TERMSIGHT_WORKER_COMMAND, else the one this machine finds, find_cli, by the
    same path on the workers):
    subprocess.run from the standard library, so a worker needs the termsight command and no
    part of this package. A RankAnalysis per folder, failures included (never raised)."""
    cmd = [os.environ.get("TERMSIGHT_WORKER_COMMAND") or find_cli(), "analyse", "--lean"]
    futures = [client.submit(subprocess.run, cmd + list(options) + [f], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, timeout=timeout, pure=False)
               for f in folders]
    start = time.monotonic()
    out = []
    for folder, fut in zip(folders, futures):
        error = None
        try:
            p = fut.result(timeout=timeout + 60)
            if p.returncode != 0:
                error = p.stderr.decode("utf-8", "replace").strip() or "exit %d" % p.returncode
        except FileNotFoundError as e:
            error = "a worker cannot run %s: %s" % (cmd[0], e.strerror)
        except Exception as e:  # the task's own failure, or no answer in time
            error = "%s: %s" % (type(e).__name__, e)
        holders = client.who_has([fut]).get(fut.key) or ()
        worker = sorted(holders)[0] if holders else None
        out.append(RankAnalysis(folder, worker, None, time.monotonic() - start, error is None,
                                error))
    return out


def analyse(job_folder, client=None, timeline_limit=None, pretty=False, output=None,
            task_timeout=600):
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
        # Each rank's timeline cut to its share of the job's, as the command shares it
        # (job_timeline_share_mb in analysis/job.c: 0.9 of the limit over the ranks).
        limit = 500.0 if timeline_limit is None else float(timeline_limit)
        rank_options = (["--pretty"] if pretty else []) + [
            "--timeline-limit", "%.6f" % (limit / len(folders) * 0.9)]
        ranks = _gather_ranks(client, folders, rank_options, task_timeout)
        rc, out, err = _run(merge + ["--merge-only", job_folder])
    if rc != 0:
        raise RuntimeError("termsight analyse %s failed: %s" % (job_folder, err.strip()))
    report = output if output is not None else os.path.join(job_folder, "report")
    return JobAnalysis(os.path.abspath(report), out, ranks)
