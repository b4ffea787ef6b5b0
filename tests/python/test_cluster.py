"""termsight.cluster: a job's ranks analysed as tasks on a Dask LocalCluster (two worker
processes), the job report merged on the client.

Needs Debian's python3-distributed (scripts/test.sh installs it); run with /usr/bin/python3.
A job of three ranks is recorded first (the Python binding, one child process per rank, rank 2
slowed in its step interval), so the report has a known straggler."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

from proctools import end_group

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.join(os.path.dirname(os.path.dirname(HERE)), "python")
sys.path.insert(0, PYDIR)

import termsight.cluster  # noqa: E402

RANK = textwrap.dedent("""\
    import sys, time
    import termsight
    out, rank = sys.argv[1], int(sys.argv[2])
    p = termsight.Profiler(output_path=out, job="dj", rank=rank, world_size=3, sample_ms=20)
    for i in range(8):
        with p.step():
            if rank == 2:
                time.sleep(0.04)   # its input is late: a longer step interval
            with p.range("Default/net/MatMul-op1", "MatMul"):
                time.sleep(0.01)
            with p.range("Default/net/SGD-op2", "SGD"):
                time.sleep(0.002)
    p.close()
    """)


def record_job(out):
    env = dict(os.environ)
    env["PYTHONPATH"] = PYDIR + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    procs = [subprocess.Popen([sys.executable, "-c", RANK, out, str(r)], env=env)
             for r in range(3)]
    for p in procs:
        if p.wait(timeout=120) != 0:
            raise AssertionError("a rank failed: exit %d" % p.returncode)
    return os.path.join(out, "dj")


def job_in_tmp(prefix):
    """A new temporary folder (under TERMSIGHT_TEST_TMP when set) and the job recorded in it."""
    base = os.environ.get("TERMSIGHT_TEST_TMP") or None
    if base:
        os.makedirs(base, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=prefix, dir=base)
    return tmp, record_job(os.path.join(tmp, "data"))


class Cluster(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp, cls.job = job_in_tmp("pycluster-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, True)

    def check_report(self, report):
        with open(os.path.join(report, "summary.json")) as f:
            s = json.load(f)
        self.assertEqual(s["job"]["id"], "dj")
        self.assertEqual([r["rank"] for r in s["ranks"]], [0, 1, 2])
        self.assertTrue(all(r["steps"] == 8 for r in s["ranks"]), s["ranks"])
        self.assertEqual([(g["rank"], g["cause"]) for g in s["stragglers"]], [(2, "data")])
        return s

    def test_on_a_local_cluster(self):
        from distributed import Client, LocalCluster
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            workers = set(client.scheduler_info()["workers"])
            res = termsight.cluster.analyse(self.job, client, timeline_limit=5)
        self.assertEqual(len(res.ranks), 3)
        for r in res.ranks:
            self.assertTrue(r.ok, r.error)
            self.assertIn(r.worker, workers)   # analysed in a worker, not here
            self.assertTrue(os.path.isfile(os.path.join(r.folder, "report", "summary.json")))
        self.assertEqual(res.report, os.path.join(self.job, "report"))
        self.assertIn("straggler:  rank 2 (data)", res.summary)
        self.check_report(res.report)

    def test_without_a_client(self):
        out = os.path.join(self.tmp, "here")
        res = termsight.cluster.analyse(self.job, output=out)
        self.assertEqual(res.ranks, [])
        self.assertEqual(res.report, out)
        self.check_report(out)

    def test_bad_folders(self):
        with self.assertRaises(FileNotFoundError):
            termsight.cluster.analyse(os.path.join(self.tmp, "nothing-here"))
        empty = os.path.join(self.tmp, "empty")
        os.makedirs(empty, exist_ok=True)
        with self.assertRaises(RuntimeError) as cm:
            termsight.cluster.analyse(empty)
        self.assertIn("holds no termsight recording", str(cm.exception))


def wait_for(cond, seconds, what):
    """Polls cond until it holds, at most `seconds`; fails naming what was awaited."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError("no %s within %d s" % (what, seconds))


def stop(p):
    """Ends a process started in a session of its own, with what it started (timeout's child):
    SIGTERM first, which Dask's processes answer by closing (SIGKILL killed their resource
    tracker too and left 18 semaphores a run in /dev/shm), SIGKILL after 20 s."""
    end_group(p, grace=20)


class SchedulerOption(unittest.TestCase):
    """`termsight analyse JOB --scheduler`: a real dask-scheduler and dask-worker processes on
    127.0.0.1, every process bounded in time and killed at the end."""

    @classmethod
    def setUpClass(cls):
        cls.tmp, cls.job = job_in_tmp("pysched-")
        cls.cli = termsight.find_cli()
        cls.procs = []

    @classmethod
    def tearDownClass(cls):
        for p in cls.procs:
            stop(p)
        shutil.rmtree(cls.tmp, True)

    def start(self, args, path, log):
        env = dict(os.environ, PATH=path)
        # Workers with the command alone: no termsight Python package, no TERMSIGHT_BIN.
        for k in ("TERMSIGHT_BIN", "TERMSIGHT_LIB", "PYTHONPATH"):
            env.pop(k, None)
        f = open(os.path.join(self.tmp, log), "wb")
        self.addCleanup(f.close)
        # A bound of its own too: the process ends even if this test is killed.
        p = subprocess.Popen(["timeout", "300"] + args, env=env, cwd=self.tmp, stdout=f,
                             stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(p)
        return p

    def cluster(self, name, worker_paths):
        """A scheduler and one worker per PATH; returns the scheduler's address."""
        sfile = os.path.join(self.tmp, name + "-scheduler.json")
        sched = self.start(["/usr/bin/dask-scheduler", "--host", "127.0.0.1", "--port", "0",
                            "--no-dashboard", "--scheduler-file", sfile],
                           "/usr/bin:/bin", name + "-scheduler.log")
        wait_for(lambda: os.path.exists(sfile) and os.path.getsize(sfile) > 0, 60,
                 "scheduler file")
        with open(sfile) as f:
            addr = json.load(f)["address"]
        workers = []
        for k, path in enumerate(worker_paths):
            workers.append(self.start(["/usr/bin/dask-worker", "--scheduler-file", sfile,
                                       "--nthreads", "1", "--no-dashboard", "--host",
                                       "127.0.0.1"], path, "%s-worker%d.log" % (name, k)))

        def all_in():
            code = ("import sys; from distributed import Client; c = Client(sys.argv[1], "
                    "timeout=10); print(len(c.scheduler_info()['workers'])); c.close()")
            r = subprocess.run(["/usr/bin/python3", "-c", code, addr], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, timeout=60)
            return r.stdout.strip() == str(len(worker_paths)).encode()
        wait_for(all_in, 120, "workers at the scheduler")
        self.addCleanup(lambda: [stop(p) for p in [sched] + workers])
        return addr

    def analyse(self, args, env=None, timeout=240):
        e = dict(os.environ, TERMSIGHT_PYTHON="/usr/bin/python3")
        e.update(env or {})
        return subprocess.run([self.cli, "analyse"] + args, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=e, timeout=timeout)

    def report_of(self, folder):
        with open(os.path.join(folder, "summary.json")) as f:
            s = json.load(f)
        with open(os.path.join(folder, "ranks.csv")) as f:
            ranks = f.read()
        with open(os.path.join(folder, "job_steps.csv")) as f:
            steps = f.read()
        return s["ranks"], s["stragglers"], s["timeline"], ranks, steps

    def test_same_report_as_here(self):
        here = os.path.join(self.tmp, "here")
        r = self.analyse(["-o", here, self.job])
        self.assertEqual(r.returncode, 0, r.stderr)
        bindir = os.path.dirname(os.path.abspath(self.cli))
        addr = self.cluster("good", [bindir + ":/usr/bin:/bin"] * 2)
        there = os.path.join(self.tmp, "there")
        r = self.analyse(["-o", there, "--scheduler", addr, self.job])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"straggler:  rank 2 (data)", r.stdout)
        self.assertEqual(self.report_of(here), self.report_of(there))
        # TERMSIGHT_SCHEDULER does the same.
        r = self.analyse(["-o", there, self.job], env={"TERMSIGHT_SCHEDULER": addr})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.report_of(here), self.report_of(there))

    def test_worker_without_the_command(self):
        job = os.path.join(self.tmp, "copy", "dj")
        shutil.copytree(self.job, job, ignore=shutil.ignore_patterns("report"))
        addr = self.cluster("bad", ["/usr/bin:/bin"])
        r = self.analyse(["--scheduler", addr, "--task-timeout", "60", job])
        err = r.stderr.decode()
        lines = [l for l in err.splitlines() if "a worker cannot run termsight" in l]
        self.assertEqual(len(lines), 3, err)   # one line per rank
        self.assertNotEqual(r.returncode, 0)   # nothing to merge
        self.assertIn("no rank of a job could be used", err)

    def test_python_without_dask(self):
        """A Python that lacks distributed: the error names it and TERMSIGHT_PYTHON."""
        nodask = os.path.join(self.tmp, "python-nodask")
        with open(nodask, "w") as f:   # -S: without site-packages, so without distributed
            f.write('#!/bin/sh\nexec /usr/bin/python3 -S "$@"\n')
        os.chmod(nodask, 0o755)
        r = self.analyse(["--scheduler", "tcp://127.0.0.1:1", self.job],
                         env={"TERMSIGHT_PYTHON": nodask}, timeout=120)
        err = r.stderr.decode()
        self.assertEqual(r.returncode, 1, err)
        self.assertIn("needs Python with Dask distributed", err)
        self.assertIn(nodask, err)
        self.assertIn("TERMSIGHT_PYTHON", err)
        # One that cannot be run at all says the same.
        r = self.analyse(["--scheduler", "tcp://127.0.0.1:1", self.job],
                         env={"TERMSIGHT_PYTHON": nodask + "-absent"}, timeout=120)
        err = r.stderr.decode()
        self.assertEqual(r.returncode, 1, err)
        self.assertIn(nodask + "-absent", err)
        self.assertIn("TERMSIGHT_PYTHON", err)

    def test_scheduler_that_does_not_answer(self):
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))               # a port nobody listens on
        port = s.getsockname()[1]
        s.close()
        r = self.analyse(["--scheduler", "tcp://127.0.0.1:%d" % port, self.job], timeout=120)
        err = r.stderr.decode()
        self.assertEqual(r.returncode, 1, err)
        self.assertEqual(err.count("does not answer"), 3, err)


if __name__ == "__main__":
    unittest.main()
