"""bench/gpu_check.sh without a GPU: its checker (bench/gpu_check.py) on constructed recordings,
report folders and snapshots, good and bad, and the script's dry run (what CI runs of it)."""
import csv
import json
import os
import shutil
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


GPU_COLUMNS = ("gpu_device,gpu_busy_us,gpu_idle_us,gpu_idle_data_us,gpu_idle_host_us,"
               "gpu_idle_sync_us,gpu_idle_other_us")
BEGIN = 10_000_000_000  # the script's clock at its first ask for a batch (ns)


class TorchChecks(unittest.TestCase):
    """The PyTorch-on-CUDA checks (gpu_check.py torch-*) on constructed runs: the script's log,
    termsight's step trace (with the device split) and summary, dumps, torch.profiler's JSON."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="gpu-check-torch.")
        self.addCleanup(self.tmp.cleanup)
        self.n = 0

    check = Checker.check

    def path(self, name):
        self.n += 1
        return os.path.join(self.tmp.name, f"{self.n}-{name}")

    def log(self, step_ms, plant=()):
        """The script's --log: steps of step_ms each, back to back, the first batch arriving
        50 ms after the first ask; plant: (kind, step) pairs."""
        path, t = self.path("log"), BEGIN
        with open(path, "w") as f:
            for kind, n in plant:
                f.write(f"plant {kind} {n}\n")
            for n, ms in enumerate(step_ms, 1):
                arrived = t + (50_000_000 if n == 1 else 100_000)
                end = (arrived if n == 1 else t) + int(ms * 1e6)
                f.write(f"batch {n} {arrived}\nstep {n} {t} {end}\n")
                t = end + 20_000
        return path

    def run_folder(self, totals_ms, device=None, advice=()):
        """A run folder whose report holds these step totals; device: per step, the split
        (busy, data, host, sync, other in us) or None (no device work); None: no split columns."""
        run = self.path("run")
        os.makedirs(os.path.join(run, "report"))
        head = "step,begin_us,end_us,total_us,source"
        lines = []
        for n, ms in enumerate(totals_ms, 1):
            row = f"{n},{n * 1000},{n * 1000 + ms * 1e3},{ms * 1e3:.3f},auto"
            if device is not None:
                d = device[n - 1]
                row += "," + (f"0,{d[0]},{sum(d[1:])},{d[1]},{d[2]},{d[3]},{d[4]}" if d
                              else ",,,,,,")
            lines.append(row + "\n")
        with open(os.path.join(run, "report", "step_trace.csv"), "w") as f:
            f.write(head + ("," + GPU_COLUMNS if device is not None else "") + "\n")
            f.writelines(lines)
        with open(os.path.join(run, "report", "summary.json"), "w") as f:
            json.dump({"advice": [{"kind": k, "title": k} for k in advice]}, f)
        return run

    def dump(self, kernels, without_op=0):
        path = self.path("dump")
        with open(path, "w") as f:
            for i in range(kernels):
                typ = "" if i < without_op else "aten::mm"
                f.write(line(1000 + i, 1001 + i, "kernel", tid=7, name="gemm", typ=typ, corr=i))
            f.write(line(5000, 5001, "memcpy", tid=7, aux=1, v0=64))
        return path

    def profiler(self, kernels_per_step, kernel_us, ms=11.0):
        path = self.path("prof.json")
        with open(path, "w") as f:
            json.dump({"steps": 4, "kernels": kernels_per_step * 4,
                       "kernels_per_step": kernels_per_step, "kernel_us_per_step": kernel_us,
                       "copies": 4, "copy_us_per_step": 3.0, "ms_per_step": ms}, f)
        return path

    def manifest(self, runs):
        """runs: (model, size, mode, ms, log, art, dump) tuples."""
        path = self.path("manifest")
        with open(path, "w") as f:
            f.writelines("\t".join(str(x) for x in r) + "\n" for r in runs)
        return path

    def small_runs(self, ts_busy=(900, 900, 900, 900), ts_kernels=1200, without_op=0,
                   prof_kernels=300, prof_us=900.0, device=True):
        """One model at the small size: plain, termsight (4 steps of 10 ms), profiler."""
        log = self.log([10, 10, 10, 10])
        split = [(b, 100, 9000, 50, 0) for b in ts_busy] if device else None
        run = self.run_folder([10, 10, 10, 10], device=split)
        return [("lm", "small", "plain", 10.0, log, "-", "-"),
                ("lm", "small", "termsight", 10.1, log, run, self.dump(ts_kernels, without_op)),
                ("lm", "small", "profiler", 11.0, log, self.profiler(prof_kernels, prof_us),
                 "-")]

    def test_steps(self):
        log = self.log([100, 200, 100, 10])
        # Step 1 spans from its batch's arrival (100 ms) up to the ask (150 ms): 140 is inside;
        # 5 % of a step, or 1 ms for a short one.
        for totals, word in (([100, 200, 100, 10], "PASS"), ([140, 209, 96, 10.9], "PASS"),
                             ([100, 200, 106, 10], "FAIL"), ([160, 200, 100, 10], "FAIL"),
                             ([94, 200, 100, 10], "FAIL"), ([100, 200, 100, 11.1], "FAIL"),
                             ([100, 200, 100], "FAIL")):
            with self.subTest(totals=totals):
                m = self.manifest([("lm", "small", "termsight", 10, log,
                                    self.run_folder(totals), "-")])
                rc, words, out = self.check("torch-steps", m)
                self.assertEqual((rc, words.get("torch.steps")),
                                 (0 if word == "PASS" else 1, word), out)
        rc, words, out = self.check("torch-steps", self.manifest([]))
        self.assertEqual((rc, words.get("torch.steps")), (1, "FAIL"), out)

    def test_kernels(self):
        # 1200 kernels over 4 steps: 300 a step, as the profiler counted.
        for kw, word in (({}, "PASS"), ({"ts_kernels": 1220}, "PASS"),
                         ({"ts_kernels": 1260}, "FAIL"), ({"without_op": 13}, "FAIL"),
                         ({"without_op": 12}, "PASS")):
            with self.subTest(**kw):
                rc, words, out = self.check("torch-kernels", self.manifest(self.small_runs(**kw)))
                self.assertEqual((rc, words.get("torch.kernel_ops")),
                                 (0 if word == "PASS" else 1, word), out)
        no_profiler = [r for r in self.small_runs() if r[2] != "profiler"]
        rc, words, out = self.check("torch-kernels", self.manifest(no_profiler))
        self.assertEqual((rc, words.get("torch.kernel_ops")), (1, "FAIL"), out)

    def test_busy(self):
        for kw, word in (({}, "PASS"), ({"ts_busy": (940, 940, 940, 940)}, "PASS"),
                         ({"ts_busy": (1000, 1000, 1000, 1000)}, "FAIL"),
                         ({"ts_busy": (800, 800, 800, 800)}, "FAIL")):
            with self.subTest(**kw):
                rc, words, out = self.check("torch-busy", self.manifest(self.small_runs(**kw)))
                self.assertEqual((rc, words.get("torch.gpu_busy")),
                                 (0 if word == "PASS" else 1, word), out)
        rc, words, out = self.check("torch-busy", self.manifest(self.small_runs(device=False)))
        self.assertEqual((rc, words.get("torch.gpu_busy")), (1, "FAIL"), out)
        self.assertIn("no device split in step_trace.csv", out)

    def test_overhead(self):
        def runs(small_ts, large_ts):
            r = [("lm", "small", m, ms, "-", "-", "-")
                 for m, ms in (("plain", 10.0), ("termsight", small_ts), ("profiler", 11.0),
                               ("plain", 10.2), ("termsight", small_ts), ("profiler", 11.2))]
            return r + [("lm", "large", m, ms, "-", "-", "-")
                        for m, ms in (("plain", 20.0), ("termsight", large_ts))]
        for small_ts, large_ts, word in ((10.3, 20.4, "PASS"), (10.8, 20.4, "FAIL"),
                                         (10.3, 20.8, "FAIL")):
            with self.subTest(small=small_ts, large=large_ts):
                rc, words, out = self.check("torch-overhead",
                                            self.manifest(runs(small_ts, large_ts)))
                self.assertEqual((rc, words.get("torch.overhead")),
                                 (0 if word == "PASS" else 1, word), out)
        self.assertIn("MEASURED torch.overhead.lm.large termsight 4.00 %", out)

    def planted(self, launch_part=2, data_part=1, advice=("gpu_host_bound", "gpu_data"),
                device=True):
        """Steps 1-8; 3 and 4 launch-bound, 6 a data stall. Parts: 1 data, 2 host, 3 sync,
        4 other: which idle part the planted steps have most of."""
        normal = (4000, 10, 300, 200, 20)
        split = [normal] * 8

        def most(part):
            d = [4000, 10, 300, 200, 20]
            d[part] = 15000
            return tuple(d)
        split[2] = split[3] = most(launch_part)
        split[5] = most(data_part)
        plant = (("launch_bound", 3), ("launch_bound", 4), ("data_stall", 6))
        run = self.run_folder([5] * 8, device=split if device else None, advice=advice)
        return run, self.log([5] * 8, plant=plant)

    def test_planted(self):
        rc, words, out = self.check("torch-planted", *self.planted())
        self.assertEqual((rc, words.get("torch.planted")), (0, "PASS"), out)
        for kw in ({"launch_part": 4}, {"data_part": 3}, {"advice": ("gpu_host_bound",)},
                   {"advice": ("gpu_data", "gpu_sync")}, {"device": False}):
            with self.subTest(**kw):
                rc, words, out = self.check("torch-planted", *self.planted(**kw))
                self.assertEqual((rc, words.get("torch.planted")), (1, "FAIL"), out)
        self.assertIn("no device split in step_trace.csv", out)

    def test_planted_host_no_more_than_usual(self):
        """Every step host-bound alike (a small model): the planted ones must stand out."""
        run, log = self.planted()
        trace = os.path.join(run, "report", "step_trace.csv")
        with open(trace) as f:
            rows = f.read().splitlines()
        with open(trace, "w") as f:
            f.write("\n".join(rows[:1] + [r.replace(",300,200,", ",15000,200,") for r in rows[1:]])
                    + "\n")
        rc, words, out = self.check("torch-planted", run, log)
        self.assertEqual((rc, words.get("torch.planted")), (1, "FAIL"), out)
        self.assertIn("no more than the others", out)

    def test_live(self):
        before, after = self.log([5] * 40), self.log([5] * 43)
        for newest, kernels, word in ((41, True, "PASS"), (38, True, "PASS"), (45, True, "PASS"),
                                      (37, True, "FAIL"), (46, True, "FAIL"), (41, False, "FAIL")):
            with self.subTest(newest=newest, kernels=kernels):
                snap = {"steps": {"count": newest - 1, "current": newest + 1,
                                  "recent": [{"step": newest - 1}, {"step": newest}]},
                        "top_kernels": ([{"kernel": "gemm", "op": "aten::mm"}] if kernels
                                        else []) + [{"kernel": "memcpy", "op": ""}]}
                path = self.path("top.json")
                with open(path, "w") as f:
                    json.dump(snap, f)
                rc, words, out = self.check("torch-live", path, before, after)
                self.assertEqual((rc, words.get("torch.live")),
                                 (0 if word == "PASS" else 1, word), out)


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
        # PyTorch on CUDA: its tiny models on the CPU under termsight run (torch.steps), where
        # a Python with PyTorch is (as the script looks for one); the rest needs a GPU.
        for check in ("torch.kernel_ops", "torch.gpu_busy", "torch.planted", "torch.live",
                      "torch.overhead"):
            self.assertEqual(word.get(check), "SKIP", report)
        have_torch = any(subprocess.run([py, "-c", "import torch"], capture_output=True).returncode
                         == 0 for py in ("python3", "/usr/bin/python3") if shutil.which(py))
        self.assertEqual(word.get("torch.steps"), "PASS" if have_torch else "SKIP", report)
        if have_torch:
            self.assertEqual(word.get("torch.runs"), "PASS", report)
            self.assertIn("MEASURED torch.steps.lm.tiny 4 steps", report)
            self.assertIn("MEASURED torch.steps.cnn.tiny 4 steps", report)


if __name__ == "__main__":
    unittest.main()
