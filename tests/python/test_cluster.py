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
import unittest

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


class Cluster(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        base = os.environ.get("TERMSIGHT_TEST_TMP") or None
        if base:
            os.makedirs(base, exist_ok=True)
        cls.tmp = tempfile.mkdtemp(prefix="pycluster-", dir=base)
        cls.job = record_job(os.path.join(cls.tmp, "data"))

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


if __name__ == "__main__":
    unittest.main()
