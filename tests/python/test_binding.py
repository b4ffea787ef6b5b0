"""Unit tests of the Python binding (python/termsight), standard library only.

Environment: TERMSIGHT_LIB (libtermsight.so), TERMSIGHT_BIN (the termsight command),
TERMSIGHT_TEST_TMP (a folder for temporary files; else the system's), PYTHONPATH with python/.
Everything that opens a session runs in a fresh interpreter (one session per process).
"""

import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PYDIR = os.path.join(REPO, "python")
if PYDIR not in sys.path:
    sys.path.insert(0, PYDIR)

# Relative paths (as in the docs' commands) would break in children run in a temp folder.
for _var in ("TERMSIGHT_LIB", "TERMSIGHT_BIN"):
    if os.environ.get(_var) and os.sep in os.environ[_var]:
        os.environ[_var] = os.path.abspath(os.environ[_var])

import termsight  # noqa: E402

LINE = re.compile(r'^(\d+) (\d+) (\S+) tid=(\S+) dev=(\S+) name="((?:[^"\\]|\\.)*)" '
                  r'type="((?:[^"\\]|\\.)*)" aux=(\S+) corr=(\S+) v0=(\S+) v1=(\S+)')


def cli():
    return termsight.find_cli()


def dump(folder):
    """The recording's events as dicts, through `termsight dump`."""
    p = subprocess.run([cli(), "dump", folder], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       check=True)
    events = []
    for line in p.stdout.decode("utf-8", "replace").splitlines():
        m = LINE.match(line)
        if m:
            events.append({"begin": int(m.group(1)), "end": int(m.group(2)),
                           "kind": m.group(3), "name": m.group(6), "type": m.group(7),
                           "v0": m.group(10), "v1": m.group(11)})
    return events


SPLIT = ("interval_us", "compute_us", "comm_wait_us", "tail_us", "eval_us")


def split_errors(root):
    """Every step the reports under root hold, checked for the split's promise: interval +
    compute + communication wait + tail + evaluation = the step, within 1 us. Per step in
    step_trace.csv and job_step_trace.csv, on average in summary.json and ranks.csv. Returns
    the steps that break it, as text."""
    bad = []

    def check(where, total, parts):
        if abs(sum(parts) - total) > 1.0:
            bad.append("%s: %s = %.3f, the step %.3f" % (where, "+".join("%.3f" % p for p in parts),
                                                        sum(parts), total))

    def rows(path, total_key):
        with open(path, newline="") as f:
            for i, row in enumerate(csv.DictReader(f)):
                if total_key in row and all(k in row for k in SPLIT):
                    check("%s row %d" % (path, i + 1), float(row[total_key]),
                          [float(row[k]) for k in SPLIT])

    for folder, _, files in os.walk(root):
        if "step_trace.csv" in files:
            rows(os.path.join(folder, "step_trace.csv"), "total_us")
        if "job_step_trace.csv" in files:
            rows(os.path.join(folder, "job_step_trace.csv"), "total_us")
        if "ranks.csv" in files:
            with open(os.path.join(folder, "ranks.csv"), newline="") as f:
                for row in csv.DictReader(f):
                    if int(row["steps"]):
                        check("%s rank %s" % (folder, row["rank"]), float(row["avg_step_us"]),
                              [float(row["avg_" + k]) for k in SPLIT])
        if "summary.json" in files:
            with open(os.path.join(folder, "summary.json")) as f:
                st = json.load(f).get("steps")
            if isinstance(st, dict) and st.get("count"):
                check(folder + "/summary.json", st["avg_total_us"],
                      [st["avg_" + k] for k in SPLIT])
    return bad


# The long variant of a test (ctest's label "long" sets TERMSIGHT_TEST_LONG=1): its soaks and sweeps
# at full length; the default set runs them shorter.
LONG = os.environ.get("TERMSIGHT_TEST_LONG", "0") not in ("", "0")


class Base(unittest.TestCase):
    def setUp(self):
        base = os.environ.get("TERMSIGHT_TEST_TMP") or None
        if base:
            os.makedirs(base, exist_ok=True)
        self.tmp = tempfile.mkdtemp(prefix="pybinding-", dir=base)
        self.addCleanup(shutil.rmtree, self.tmp, True)
        # Runs before the folder is removed: every report a test wrote keeps the split's promise.
        self.addCleanup(lambda: self.assertEqual(split_errors(self.tmp), []))

    def child(self, code, env=None, expect_rc=0):
        """Runs code in a fresh interpreter (cwd self.tmp, `out` = a fresh output folder);
        returns the JSON it prints last with `emit(obj)`."""
        prelude = textwrap.dedent("""\
            import json, os, sys, time
            import termsight
            out = %r
            def emit(obj):
                print("RESULT " + json.dumps(obj))
            """) % os.path.join(self.tmp, "data")
        e = dict(os.environ)
        e["PYTHONPATH"] = PYDIR + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
        e.pop("TERMSIGHT_AUTOSTART", None)
        if env:
            e.update(env)
        p = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], cwd=self.tmp,
                           env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        out = p.stdout.decode("utf-8", "replace")
        err = p.stderr.decode("utf-8", "replace")
        self.assertEqual(p.returncode, expect_rc, "child exit %d\nstdout:\n%s\nstderr:\n%s"
                         % (p.returncode, out, err))
        for line in reversed(out.splitlines()):
            if line.startswith("RESULT "):
                return json.loads(line[len("RESULT "):])
        if expect_rc == 0:
            self.fail("no RESULT line\nstdout:\n%s\nstderr:\n%s" % (out, err))
        return err


class Keywords(Base):
    """Argument checks happen before the library is touched: in this process."""

    def test_ascend_only_refused(self):
        for kw in ("aicore_metrics", "l2_cache", "parallel_strategy"):
            with self.assertRaises(ValueError) as cm:
                termsight.Profiler(**{kw: 0})
            self.assertIn(kw, str(cm.exception))
            self.assertIn("Ascend-only", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            termsight.Profiler(l2_cache=True, aicore_metrics=1)
        self.assertIn("l2_cache, aicore_metrics are Ascend-only", str(cm.exception))

    def test_unknown_keyword(self):
        with self.assertRaises(TypeError) as cm:
            termsight.Profiler(no_such_option=1)
        self.assertIn("no_such_option", str(cm.exception))
        with self.assertRaises(TypeError):
            termsight.Profiler("./data")  # keywords only, as in mindspore.Profiler

    def test_bad_values(self):
        with self.assertRaises(TypeError):
            termsight.Profiler(op_time="yes")
        with self.assertRaises(TypeError):
            termsight.Profiler(start_profile=1)
        with self.assertRaises(ValueError):
            termsight.Profiler(profile_framework="everything")
        with self.assertRaises(ValueError) as cm:
            termsight.Profiler(op_time=False, profile_memory=True)
        self.assertIn("op_time", str(cm.exception))
        with self.assertRaises(ValueError):
            termsight.Profiler(op_time=False, profile_communication=True)

    def test_offline_argument_types(self):
        with self.assertRaises(TypeError):
            termsight.analyse(42)
        with self.assertRaises(TypeError):
            termsight.analyse(self.tmp, pretty="yes")
        with self.assertRaises(TypeError):
            termsight.op_analyse(self.tmp, 3)
        with self.assertRaises(TypeError):
            termsight.op_analyse(self.tmp, ["MatMul", 3])

    def test_offline_analyse_of_nothing(self):
        with self.assertRaises(RuntimeError) as cm:
            termsight.analyse(os.path.join(self.tmp, "missing"))
        self.assertTrue(str(cm.exception))

    def test_queue_without_session(self):
        with self.assertRaises(RuntimeError) as cm:
            termsight.queue("q", 4)
        self.assertIn("no profiler session", str(cm.exception))
        with self.assertRaises(ValueError):
            termsight.queue("q", 4, role="gpu")
        with self.assertRaises(ValueError):
            termsight.mark("a\0b")

    def test_events_without_session_are_no_ops(self):
        with termsight.step() as n:
            self.assertIsInstance(n, int)
            with termsight.range("x"):
                termsight.mark("m")
                termsight.counter("c", 1.0)
                termsight.thread_name("t")


class Library(Base):
    def test_library_not_found(self):
        missing = os.path.join(self.tmp, "nowhere", "libtermsight.so")
        err = self.child("""
            try:
                termsight.Profiler(output_path=out)
            except RuntimeError as e:
                emit(str(e))
            """, env={"TERMSIGHT_LIB": missing})
        self.assertIn(missing, err)
        self.assertIn("TERMSIGHT_LIB", err)

    def test_library_not_a_library(self):
        bogus = os.path.join(self.tmp, "libtermsight.so")
        with open(bogus, "w") as f:
            f.write("not an ELF file\n")
        err = self.child("""
            try:
                termsight.Profiler(output_path=out)
            except RuntimeError as e:
                emit(str(e))
            """, env={"TERMSIGHT_LIB": bogus})
        self.assertIn(bogus, err)

    def test_cli_not_found(self):
        missing = os.path.join(self.tmp, "no-termsight")
        r = self.child("""
            p = termsight.Profiler(output_path=out)
            try:
                p.analyse()
            except RuntimeError as e:
                emit(str(e))
            """, env={"TERMSIGHT_BIN": missing})
        self.assertIn(missing, r)

    def test_library_option_error_has_library_message(self):
        r = self.child("""
            try:
                termsight.Profiler(output_path=out, lane_events=3)
            except ValueError as e:
                emit([str(e), isinstance(e, RuntimeError), e.code])
            """)
        self.assertIn("lane_events=3", r[0])
        self.assertTrue(r[1])
        self.assertEqual(r[2], -1)


class Session(Base):
    def test_events_recorded(self):
        r = self.child("""
            p = termsight.Profiler(output_path=out, sample_ms=50)
            p.thread_name("trainer")
            q = p.queue("prefetch", 8, role="host", producer="loader", consumer="train")
            for i in range(3):
                with p.step() as n:
                    q.size(i)
                    with p.range("Default/net/MatMul-op1", "MatMul"):
                        with p.range("inner"):
                            pass
                    p.counter("loss", 1.5 - i)
            p.mark("hello mark")
            p.flush()
            emit({"folder": p.run_folder, "state": p.state, "recorded": p.events_recorded,
                  "dropped": p.events_dropped, "queue": repr(q)})
            p.close()
            """)
        self.assertEqual(r["state"], "collecting")
        self.assertGreater(r["recorded"], 0)
        self.assertEqual(r["dropped"], 0)
        self.assertTrue(os.path.isdir(os.path.join(r["folder"], "recording")))
        ev = dump(r["folder"])
        kinds = [e["kind"] for e in ev]
        self.assertEqual(kinds.count("step_begin"), 3)
        self.assertEqual(kinds.count("step_end"), 3)
        ops = [e for e in ev if e["kind"] == "op"]
        self.assertEqual(sum(1 for e in ops if e["name"] == "Default/net/MatMul-op1"
                             and e["type"] == "MatMul"), 3)
        self.assertEqual(sum(1 for e in ops if e["name"] == "inner" and e["type"] == ""), 3)
        qs = [e for e in ev if e["kind"] == "queue" and e["name"] == "prefetch"]
        self.assertEqual(sorted(e["v0"] for e in qs), ["0", "1", "2"])
        self.assertTrue(all(e["v1"] == "8" for e in qs))
        counters = [float(e["v0"]) for e in ev if e["kind"] == "counter" and e["name"] == "loss"]
        self.assertEqual(counters, [1.5, 0.5, -0.5])
        self.assertIn(("mark", "hello mark"), [(e["kind"], e["name"]) for e in ev])
        self.assertIn(("thread_name", "trainer"), [(e["kind"], e["name"]) for e in ev])

    def test_job_identity(self):
        # Ranks started without the launcher's variables (torch.multiprocessing.spawn) name
        # themselves; the run folder goes under the job folder and the report says the job.
        r = self.child("""
            p = termsight.Profiler(output_path=out, job="exp-3", rank=2, local_rank=0,
                                   world_size=4)
            with p.step():
                pass
            p.stop()
            folder = p.run_folder
            report = p.analyse()
            p.close()
            emit({"folder": folder, "report": report})
            """, env={"RANK": "9", "WORLD_SIZE": "16", "TORCHELASTIC_RUN_ID": "other"})
        parent, leaf = os.path.split(r["folder"])
        self.assertEqual(parent, os.path.join(self.tmp, "data", "exp-3"))
        self.assertTrue(leaf.startswith("rank2-"), leaf)
        with open(os.path.join(r["report"], "summary.json")) as f:
            job = json.load(f)["job"]
        self.assertEqual(job["id"], "exp-3")
        self.assertEqual((job["rank"], job["local_rank"], job["world_size"]), (2, 0, 4))
        self.assertEqual(job["source"], "options")

        # From torchrun's variables when the program says nothing.
        r = self.child("""
            p = termsight.Profiler(output_path=out)
            emit({"folder": p.run_folder})
            p.close()
            """, env={"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2",
                      "TORCHELASTIC_RUN_ID": "run-77"})
        self.assertTrue(r["folder"].startswith(os.path.join(self.tmp, "data", "run-77", "rank1-")),
                        r["folder"])

        for kw, bad in (("rank", -1), ("world_size", 0), ("rank", "1")):
            with self.assertRaises((ValueError, TypeError)):
                termsight.Profiler(**{kw: bad})

    def test_ctrl_c_without_with(self):
        # The documented lines without `with`, ended by Ctrl-C: Python dies by SIGINT as always
        # (status -2), and the recording is closed and the segment removed on the way out.
        code = textwrap.dedent("""\
            import os, signal, sys, time
            import termsight
            p = termsight.Profiler(output_path=sys.argv[1])
            with p.step():
                p.mark("before ctrl-c")
            print(p.run_folder, flush=True)
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(30)
            """)
        e = dict(os.environ)
        e["PYTHONPATH"] = PYDIR + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
        e.pop("TERMSIGHT_AUTOSTART", None)
        p = subprocess.run([sys.executable, "-c", code, os.path.join(self.tmp, "data")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e, timeout=60)
        self.assertEqual(p.returncode, -signal.SIGINT, p.stderr)
        self.assertIn(b"KeyboardInterrupt", p.stderr)
        folder = p.stdout.decode().strip()
        pid = int(folder.rsplit("-", 4)[-4])
        self.assertFalse([f for f in os.listdir("/dev/shm")
                          if f.startswith("termsight-%d-" % pid)])
        kinds = [e["kind"] for e in dump(folder)]
        self.assertIn("mark", kinds)
        self.assertEqual(kinds.count("collect_start"), kinds.count("collect_stop"))

    def test_sigterm_without_with(self):
        # The same ended by SIGTERM (and SIGHUP, a closed SSH session), which Python leaves at
        # their default: the process still dies by the signal, with the recording closed and the
        # segment removed; a forked child has the default; a program's own handler is kept.
        code = textwrap.dedent("""\
            import os, signal, sys, time
            import termsight
            sig = getattr(signal, sys.argv[2])
            mine = lambda *a: None
            signal.signal(signal.SIGUSR1, mine)
            p = termsight.Profiler(output_path=sys.argv[1])
            assert signal.getsignal(signal.SIGUSR1) is mine
            pid = os.fork()
            if pid == 0:
                os._exit(0 if signal.getsignal(sig) is signal.SIG_DFL else 3)
            _, status = os.waitpid(pid, 0)
            assert status == 0, "the child's handler is not the default"
            with p.step():
                p.mark("before the signal")
            print(p.run_folder, flush=True)
            os.kill(os.getpid(), sig)
            time.sleep(30)
            """)
        e = dict(os.environ)
        e["PYTHONPATH"] = PYDIR + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
        e.pop("TERMSIGHT_AUTOSTART", None)
        for name in ("SIGTERM", "SIGHUP"):
            sig = getattr(signal, name)
            p = subprocess.run([sys.executable, "-c", code, os.path.join(self.tmp, "data"), name],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e, timeout=60)
            self.assertEqual(p.returncode, -sig, p.stderr)
            folder = p.stdout.decode().strip()
            pid = int(folder.rsplit("-", 4)[-4])
            self.assertFalse([f for f in os.listdir("/dev/shm")
                              if f.startswith("termsight-%d-" % pid)], name)
            kinds = [e["kind"] for e in dump(folder)]
            self.assertIn("mark", kinds)
            self.assertEqual(kinds.count("collect_start"), kinds.count("collect_stop"), name)

    def test_start_stop_errors(self):
        r = self.child("""
            res = {}
            p = termsight.Profiler(output_path=out)
            try:
                p.start()
            except RuntimeError as e:
                res["start"] = [str(e), e.code]
            p.stop()
            try:
                p.stop()
            except RuntimeError as e:
                res["stop"] = [str(e), e.code]
            res["state"] = p.state
            p.start()                      # a second window in the same recording
            res["state2"] = p.state
            p.close()
            p.close()                      # a second close does nothing
            for name in ("start", "stop", "flush"):
                try:
                    getattr(p, name)()
                except RuntimeError as e:
                    res["closed_" + name] = str(e)
            res["closed_state"] = p.state
            emit(res)
            """)
        self.assertIn("already collecting", r["start"][0])
        self.assertEqual(r["start"][1], -4)
        self.assertIn("not collecting", r["stop"][0])
        self.assertEqual(r["stop"][1], -5)
        self.assertEqual(r["state"], "stopped")
        self.assertEqual(r["state2"], "collecting")
        for name in ("start", "stop", "flush"):
            self.assertIn("closed", r["closed_" + name])
        self.assertEqual(r["closed_state"], "closed")

    def test_start_profile_false(self):
        r = self.child("""
            res = {}
            p = termsight.Profiler(output_path=out, start_profile=False)
            res["state0"] = p.state
            try:
                p.stop()
            except RuntimeError as e:
                res["stop"] = str(e)
            try:
                p.analyse()
            except RuntimeError as e:
                res["analyse"] = str(e)
            p.mark("before start")         # not collecting: not recorded
            p.start()
            res["state1"] = p.state
            p.mark("after start")
            p.stop()
            res["folder"] = p.run_folder
            p.close()
            emit(res)
            """)
        self.assertEqual(r["state0"], "idle")
        self.assertIn("not collecting", r["stop"])
        self.assertIn("nothing recorded", r["analyse"])
        self.assertEqual(r["state1"], "collecting")
        marks = [e["name"] for e in dump(r["folder"]) if e["kind"] == "mark"]
        self.assertEqual(marks, ["after start"])

    def test_second_profiler_refused(self):
        r = self.child("""
            res = {}
            p = termsight.Profiler(output_path=out)
            try:
                termsight.Profiler(output_path=out)
            except RuntimeError as e:
                res["second"] = [str(e), e.code]
            res["first_state"] = p.state   # the first is untouched
            p.close()
            with termsight.Profiler(output_path=out) as p2:   # after close: allowed again
                res["third"] = p2.state
            res["third_after"] = p2.state
            emit(res)
            """)
        self.assertIn("already exists", r["second"][0])
        self.assertEqual(r["second"][1], -3)
        self.assertEqual(r["first_state"], "collecting")
        self.assertEqual(r["third"], "collecting")
        self.assertEqual(r["third_after"], "closed")

    def test_decorators_and_context_managers(self):
        r = self.child("""
            p = termsight.Profiler(output_path=out)

            @p.range("Conv2D-op3", "Conv2D")
            def conv(x):
                return x * 2

            @termsight.range()
            def helper():
                return "h"

            @p.step()
            def train_step(i):
                return conv(i) + len(helper())

            vals = [train_step(i) for i in range(4)]
            try:
                with p.range("failing"):
                    raise KeyError("inside")
            except KeyError:
                pass
            with termsight.step() as n:
                pass
            p.stop()
            emit({"vals": vals, "folder": p.run_folder, "n": n,
                  "name": train_step.__name__})
            """)
        self.assertEqual(r["vals"], [1, 3, 5, 7])
        self.assertEqual(r["n"], 5)
        self.assertEqual(r["name"], "train_step")
        ev = dump(r["folder"])
        kinds = [e["kind"] for e in ev]
        self.assertEqual(kinds.count("step_begin"), 5)
        self.assertEqual(kinds.count("step_end"), 5)
        names = [(e["name"], e["type"]) for e in ev if e["kind"] == "op"]
        self.assertEqual(names.count(("Conv2D-op3", "Conv2D")), 4)
        self.assertEqual(names.count(("helper", "")), 4)
        self.assertEqual(names.count(("failing", "")), 1)

    def test_op_time_and_data_process_off(self):
        r = self.child("""
            p = termsight.Profiler(output_path=out, op_time=False, data_process=False,
                                   sync_enable=False, profile_framework=None, timeline_limit=7)
            with p.range("skipped"):
                pass
            p.queue("q", 4).size(2)
            with p.step():
                pass
            p.stop()
            emit(p.run_folder)
            """)
        ev = dump(r)
        self.assertFalse([e for e in ev if e["kind"] in ("op", "queue")])
        self.assertIn("step_begin", [e["kind"] for e in ev])
        conf = {e["name"]: e["type"] for e in ev if e["kind"] == "config"}
        self.assertEqual(conf.get("timeline_limit_mb"), "7")

    def test_analyse_and_op_analyse(self):
        r = self.child("""
            p = termsight.Profiler(output_path=out)
            q = p.queue("prefetch", 4)
            for i in range(3):
                with p.step():
                    q.size(i)
                    with p.range("MatMul-op1", "MatMul"):
                        time.sleep(0.002)
                    with p.range("MatMul-op2", "MatMul"):
                        pass
                    with p.range("ReLU-op3", "ReLU"):
                        pass
            res = {"live_report": p.analyse()}          # while collecting: flushed first
            res["state"] = p.state
            res["op"] = p.op_analyse("matmul")
            res["ops"] = p.op_analyse(["MatMul", "ReLU"], device_id=0)
            for bad in (lambda: p.op_analyse("NoSuchType"),):
                try:
                    bad()
                except RuntimeError as e:
                    res["unknown"] = str(e)
            try:
                p.op_analyse(5)
            except TypeError as e:
                res["type_error"] = str(e)
            try:
                p.op_analyse("MatMul", device_id="0")
            except TypeError as e:
                res["device_error"] = str(e)
            p.close()
            res["report"] = p.analyse(pretty=True)      # after close: the run folder stays
            with open(os.path.join(res["report"], "summary.json")) as f:
                res["pretty"] = chr(10) + chr(9) in f.read()
            res["offline"] = termsight.analyse(os.path.join(p.run_folder, "recording"))
            res["folder"] = p.run_folder
            emit(res)
            """)
        folder = r["folder"]
        self.assertEqual(r["state"], "collecting")
        self.assertEqual(r["live_report"], os.path.join(folder, "report"))
        self.assertEqual(r["report"], os.path.join(folder, "report"))
        self.assertEqual(r["offline"], os.path.join(folder, "report"))
        with open(os.path.join(r["report"], "summary.json")) as f:
            summary = json.load(f)
        self.assertEqual(summary["steps"]["count"], 3)
        self.assertTrue(r["pretty"])
        with open(os.path.join(r["report"], "summary.json")) as f:
            self.assertNotIn("\n\t", f.read())         # the offline analyse was not pretty
        op = r["op"]
        self.assertEqual(op["type"], "MatMul")
        self.assertEqual(op["count"], 6)
        self.assertGreaterEqual(op["total_ms"], 6.0)
        self.assertAlmostEqual(op["avg_ms"], op["total_ms"] / 6, delta=0.01)
        self.assertLessEqual(op["min_ms"], op["max_ms"])
        self.assertGreater(op["share_pct"], 50.0)
        self.assertEqual(sorted(o["op"] for o in op["ops"]), ["MatMul-op1", "MatMul-op2"])
        self.assertEqual([o["count"] for o in op["ops"]], [3, 3])
        self.assertEqual(r["ops"]["ReLU"]["type"], "ReLU")
        self.assertEqual(r["ops"]["ReLU"]["count"], 3)
        self.assertEqual(r["ops"]["MatMul"]["count"], 6)
        self.assertIn("NoSuchType", r["unknown"])
        self.assertIn("op_name", r["type_error"])
        self.assertIn("device_id", r["device_error"])

    def test_offline_analyse_method(self):
        first = self.child("""
            p = termsight.Profiler(output_path=out)
            with p.step():
                with p.range("Add-op1", "Add"):
                    pass
            p.close()
            emit(p.run_folder)
            """)
        r = self.child("""
            p = termsight.Profiler(output_path=out, start_profile=False)
            emit(p.analyse(offline_path=%r))
            """ % first)
        self.assertEqual(r, os.path.join(first, "report"))
        with open(os.path.join(r, "summary.json")) as f:
            self.assertEqual(json.load(f)["steps"]["count"], 1)


if __name__ == "__main__":
    unittest.main()
