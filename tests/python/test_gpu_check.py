"""bench/gpu_check.sh without a GPU: its checker (bench/gpu_check.py) on constructed recordings,
report folders and snapshots, good and bad, and the script's dry run (what CI runs of it)."""
import csv
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CHECKER = os.path.join(ROOT, "bench", "gpu_check.py")
SCRIPT = os.path.join(ROOT, "bench", "gpu_check.sh")
ASKED = ("cuda_train: asked kernels 2 h2d 1 d2h 1 memsets 1 dev_allocs 1 dev_frees 1 "
         "pinned_allocs 1 pinned_frees 1")


def line(begin, end, kind, tid=1, dev="0", name="", typ="", aux=0, corr=0, v0=0, v1=0):
    return (f'{begin} {end} {kind} tid={tid} dev={dev} name="{name}" type="{typ}" aux={aux} '
            f"corr={corr} v0={v0} v1={v1} flags=0x0\n")


def good_dump():
    """What cuda_train's ASKED line says, recorded as termsight dump prints it."""
    return [
        line(100, 100, "collect_start", dev="host", v0=1),
        line(110, 110, "devmem_alloc", aux=3, v0=4096),
        line(111, 111, "devmem_alloc", aux=2, v0=4096),
        line(120, 125, "cuda_api", dev="host", name="cudaMemcpy", corr=1),
        line(126, 130, "memcpy", tid=7, aux=1, corr=1, v0=4096),
        line(131, 132, "cuda_api", dev="host", name="cudaMemset", corr=2),
        line(133, 134, "memset", tid=7, aux=3, corr=2, v0=8),
        line(140, 141, "cuda_api", dev="host", name="cudaLaunchKernel", typ="fc1/MatMul", corr=3),
        line(142, 150, "kernel", tid=7, name="matmul", typ="fc1/MatMul", corr=3),
        line(151, 152, "cuda_api", dev="host", name="cudaLaunchKernel", typ="fc1/ReLU", corr=4),
        line(153, 160, "kernel", tid=7, name="relu", typ="fc1/ReLU", corr=4),
        line(161, 162, "cuda_api", dev="host", name="cudaMemcpy", corr=5),
        line(163, 170, "memcpy", tid=7, aux=2, corr=5, v0=8),
        line(171, 171, "devmem_free", aux=3, v0=4096),
        line(172, 172, "devmem_free", aux=2, v0=4096),
        line(200, 200, "collect_stop", dev="host", v0=1),
    ]


class Checker(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="gpu-check-test.")
        self.addCleanup(self.tmp.cleanup)

    def write(self, name, text):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def check(self, *args):
        """(exit status, {check: PASS|FAIL|SKIP}, output)."""
        p = subprocess.run([sys.executable, CHECKER, *args], capture_output=True, text=True,
                           timeout=60)
        words = {}
        for out in p.stdout.splitlines():
            w = out.split()
            if len(w) >= 3 and w[0] == "RESULT":
                words[w[1]] = w[2]
        return p.returncode, words, p.stdout + p.stderr

    def test_counts_pass_on_a_recording_of_what_was_asked(self):
        rc, words, out = self.check("counts", self.write("d", "".join(good_dump())), ASKED)
        self.assertEqual(rc, 0, out)
        self.assertTrue(words and set(words.values()) == {"PASS"}, out)
        for check in ("kernels.count", "kernels.op", "kernels.after_launch", "copies.count",
                      "memsets.count", "memory.device", "memory.pinned", "device.times"):
            self.assertIn(check, words)

    def test_counts_fail_on_each_kind_of_wrong_record(self):
        cases = {
            "kernels.count": lambda d: [x for x in d if " kernel " not in x or "relu" not in x],
            "kernels.op": lambda d: [x.replace('type="fc1/ReLU"', 'type=""') for x in d],
            "kernels.after_launch": lambda d: [x.replace("153 160 kernel", "140 160 kernel")
                                               for x in d],
            "device.times": lambda d: [x.replace("142 150 kernel", "142 0 kernel") for x in d],
            "copies.count": lambda d: [x.replace("aux=2 corr=5", "aux=8 corr=5") for x in d],
            "memory.pinned": lambda d: [x for x in d if not x.startswith("172 ")],
            "memory.device": lambda d: [x.replace("devmem_alloc tid=1 dev=0 name=\"\" type=\"\" "
                                                  "aux=3", "devmem_alloc tid=1 dev=0 name=\"\" "
                                                  "type=\"\" aux=5") for x in d],
            "lost": lambda d: d + [line(180, 180, "lost", dev="host", aux=4, v0=3)],
        }
        for check, spoil in cases.items():
            with self.subTest(check=check):
                rc, words, out = self.check("counts", self.write("d", "".join(spoil(good_dump()))),
                                            ASKED)
                self.assertEqual(rc, 1, out)
                self.assertEqual(words.get(check), "FAIL", out)

    def test_window(self):
        rc, words, out = self.check("window", self.write("d", "".join(good_dump())))
        self.assertEqual((rc, words.get("window.inside")), (0, "PASS"), out)
        early = [line(50, 60, "kernel", name="before", typ="op", corr=9)] + good_dump()
        rc, words, out = self.check("window", self.write("d", "".join(early)))
        self.assertEqual((rc, words.get("window.inside")), (1, "FAIL"), out)

    def report_folder(self, flows=2, kernel_op="fc1/MatMul", steps=3):
        d = os.path.join(self.tmp.name, "report")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "kernel_statistics.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["kernel", "op", "count", "total_us", "avg_us", "min_us", "max_us",
                        "communication"])
            w.writerow(["matmul", kernel_op, 1, 8, 8, 8, 8, 0])
            w.writerow(["relu", "fc1/ReLU", 1, 7, 7, 7, 7, 0])
            w.writerow(["memcpy", "", 1, 4, 4, 4, 4, 0])  # a set-up copy outside any op
        with open(os.path.join(d, "memory.csv"), "w") as f:
            f.write("t_us,device,bytes,peak_bytes\n0.1,host,100,100\n0.2,0,4096,4096\n")
        trace = [{"name": "thread_name", "ph": "M", "pid": 2, "tid": 7,
                  "args": {"name": "stream 7"}},
                 {"name": "matmul", "cat": "kernel", "ph": "X", "ts": 1, "dur": 1, "pid": 2},
                 {"name": "relu", "cat": "kernel", "ph": "X", "ts": 2, "dur": 1, "pid": 2}]
        trace += [{"name": "launch", "ph": "s", "id": i} for i in range(flows)]
        with open(os.path.join(d, "timeline.json"), "w") as f:
            json.dump({"traceEvents": trace}, f)
        with open(os.path.join(d, "step_trace.csv"), "w") as f:
            f.write("step,begin_us\n" + "".join(f"{i},{i}\n" for i in range(1, steps + 1)))
        return d

    def test_report(self):
        rc, words, out = self.check("report", self.report_folder(), "3")
        self.assertEqual(rc, 0, out)
        self.assertEqual(set(words.values()), {"PASS"}, out)
        for spoilt, check in (({"flows": 1}, "report.flows"),
                              ({"kernel_op": ""}, "report.kernel_ops"),
                              ({"steps": 2}, "report.steps")):
            with self.subTest(check=check):
                rc, words, out = self.check("report", self.report_folder(**spoilt), "3")
                self.assertEqual((rc, words.get(check)), (1, "FAIL"), out)

    def test_top(self):
        snap = {"top_kernels": [{"kernel": "matmul", "op": "fc1/MatMul"},
                                {"kernel": "memset", "op": ""}]}
        rc, words, out = self.check("top", self.write("t.json", json.dumps(snap)))
        self.assertEqual((rc, words.get("top.kernels")), (0, "PASS"), out)
        snap["top_kernels"][0]["op"] = ""
        rc, words, out = self.check("top", self.write("t.json", json.dumps(snap)))
        self.assertEqual((rc, words.get("top.kernels")), (1, "FAIL"), out)
        rc, words, out = self.check("top", self.write("t.json", json.dumps({"top_kernels": []})))
        self.assertEqual((rc, words.get("top.kernels")), (1, "FAIL"), out)

    def test_slowdown_and_rates_are_medians_and_ceilings(self):
        log = "".join(f"RUN default without {v}\n" for v in (1.0, 1.2, 1.1))
        log += "".join(f"RUN default with {v}\n" for v in (1.1, 1.3, 1.21))
        rc, _, out = self.check("slowdown", self.write("s", log))
        self.assertEqual(rc, 0, out)
        self.assertIn("MEASURED slowdown.default 10.00 %", out)
        rc, words, out = self.check("slowdown", self.write("s", "RUN large without 1\n"))
        self.assertEqual((rc, words.get("slowdown.large")), (1, "FAIL"), out)
        rates = ("THREADS 4 RESULT rate.disk_default.max_zero_drop 19.9 19.9 19.9 Mev/s 1\n"
                 "THREADS 4 RESULT rate.disk_default.max_zero_drop 29.9 29.9 29.9 Mev/s 1\n")
        rc, _, out = self.check("rates", self.write("r", rates))
        self.assertEqual(rc, 0, out)
        self.assertIn("MEASURED rate.disk_default.threads4.max_zero_drop 29.9", out)
        rc, words, out = self.check("rates", self.write("r", "nothing\n"))
        self.assertEqual((rc, words.get("rates")), (1, "FAIL"), out)


class DryRun(unittest.TestCase):
    """The script as CI runs it: no GPU, the binaries of this build."""

    def test_dry_run_skips_the_gpu_and_runs_the_rest(self):
        binary = os.environ.get("TERMSIGHT_BIN")
        if not binary:
            self.skipTest("TERMSIGHT_BIN (the build's termsight) is not set")
        build = os.path.dirname(os.path.dirname(os.path.abspath(binary)))
        with tempfile.TemporaryDirectory(prefix="gpu-check-dry.") as out:
            p = subprocess.run(["bash", SCRIPT, "--dry-run", "--bundle", build, "--out", out],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            with open(os.path.join(out, "gpu_check.txt")) as f:
                report = f.read()
        self.assertEqual(report, p.stdout, "the report file holds what was printed")
        results = [r.split() for r in report.splitlines() if r.startswith("RESULT ")]
        word = {r[1]: r[2] for r in results}
        for check in ("driver", "kernels.count", "kernels.op", "window.inside", "top.kernels",
                      "torch.profiler", "slowdown"):
            self.assertEqual(word.get(check), "SKIP", report)
        self.assertIn("RESULT driver SKIP dry run: needs a GPU", report)
        self.assertEqual(word.get("checker"), "PASS", report)
        self.assertEqual(word.get("build"), "PASS", report)
        self.assertNotIn("FAIL", word.values(), report)
        self.assertIn("MEASURED rate.disk_default.threads1.max_zero_drop", report)
        self.assertIn("MEASURED rate.disk_default.threads2.max_zero_drop", report)


if __name__ == "__main__":
    unittest.main()
