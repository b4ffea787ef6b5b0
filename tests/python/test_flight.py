"""The flight recorder: `termsight run --flight` keeps the last events in memory and writes them
as a recording only when a snapshot is taken: by itself for a step much slower than the ones
before it and for a hang, on request (`termsight snapshot PID|--job ID`), and on SIGUSR2.

The program is slow_step (tests/cli/slow_step.c): steady steps of sleeping operators, one step
FACTOR times as long, or a step that never ends. What the snapshots hold is read back through
`termsight analyse` (step_trace.csv, op_statistics.csv, summary.json).

Environment: TERMSIGHT_BIN, SLOW_STEP (the program), TERMSIGHT_TEST_TMP. Every process is
killed at the end of its test, every folder removed.
"""

import csv
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import unittest

from proctools import clean_env, end_group, make_tmp

BIN = os.environ.get("TERMSIGHT_BIN", "termsight")
SLOW_STEP = os.environ.get("SLOW_STEP", "slow_step")
DEADLINE_S = 60


class Flight(unittest.TestCase):
    def setUp(self):
        self.tmp = make_tmp("flight-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.out = os.path.join(self.tmp, "out")
        self.procs = []
        self.addCleanup(self.kill_all)

    def kill_all(self):
        """Each `termsight run` leads a process group of its own: SIGTERM ends the program, and
        run removes what its session left; SIGKILL after the deadline."""
        for p in self.procs:
            end_group(p)

    def env(self, **more):
        return clean_env(**more)

    def start(self, *args, env=None, flight=True):
        cmd = [BIN, "run", "-o", self.out] + (["--flight"] if flight else [])
        cmd += ["--", SLOW_STEP] + [str(a) for a in args]
        p = subprocess.Popen(cmd, env=env or self.env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.procs.append(p)
        return p

    def finish(self, p):
        out, err = p.communicate(timeout=DEADLINE_S)
        self.assertEqual(p.returncode, 0, err)
        return out, err

    def snapshots(self):
        return sorted(glob.glob(os.path.join(self.out, "*", "snapshots", "*")))

    def analyse(self, folder):
        r = subprocess.run([BIN, "analyse", folder], capture_output=True, text=True,
                           timeout=DEADLINE_S)
        self.assertEqual(r.returncode, 0, r.stderr)
        report = os.path.join(folder, "report")
        with open(os.path.join(report, "step_trace.csv")) as f:
            steps = {int(row["step"]): row for row in csv.DictReader(f)}
        with open(os.path.join(report, "op_statistics.csv")) as f:
            ops = {row["op"]: row for row in csv.DictReader(f)}
        with open(os.path.join(report, "summary.json")) as f:
            summary = json.load(f)
        return steps, ops, summary

    def wait_for(self, what, check, proc=None):
        """check() until it returns something true, within the deadline."""
        end = time.monotonic() + DEADLINE_S
        while time.monotonic() < end:
            got = check()
            if got:
                return got
            if proc is not None and proc.poll() is not None:
                self.fail("%s: the program ended first: %s" % (what, proc.communicate()[1]))
            time.sleep(0.05)
        self.fail("%s: not within %d s" % (what, DEADLINE_S))

    def test_slow_step_snapshot_by_itself(self):
        """Step 137 of 300 sixty times as long: one automatic snapshot, named by its cause and
        step, holding step 137 whole and the steps before it; nothing else recorded."""
        out, err = self.finish(self.start(300, 137, 60, 30))
        self.assertIn("step 137", out)
        snaps = self.snapshots()
        # One snapshot, step 137's. On a busy machine a hiccup before it may have had one first
        # (a 30 ms step descheduled for 600 ms was seen at load average 15), which step 137's
        # then replaced, being worse (1.8 s): its number is then 02 or more.
        self.assertEqual(len(snaps), 1, err)
        self.assertRegex(os.path.basename(snaps[0]), r"^\d\d-slow-step137$", err)
        self.assertIn("step 137 took", err)
        run = os.path.dirname(os.path.dirname(snaps[0]))
        self.assertFalse(os.path.exists(os.path.join(run, "recording")),
                         "flight mode writes no recording of its own")
        steps, ops, summary = self.analyse(snaps[0])
        self.assertIn(137, steps)
        total_ms = float(steps[137]["total_us"]) / 1000
        self.assertGreater(total_ms, 60 * 30 * 0.9)
        for k in range(127, 137):
            self.assertIn(k, steps, "step %d of the ten before the slow one" % k)
        self.assertEqual(summary["events"]["snapshot"]["cause"], "slow")
        self.assertIn("step 137", summary["events"]["snapshot"]["why"])

    def test_worse_step_within_the_minute_replaces(self):
        """Step 60 six times as long, step 100 sixty times: within the minute the worse one's
        snapshot takes the place of the first; hiccups shorter than 10 ms are no slow steps."""
        env = self.env(TERMSIGHT_FLIGHT_SLOW="4")
        out, err = self.finish(self.start(130, 60, 6, 30, 0, 0, 100, 60, env=env))
        snaps = [os.path.basename(s) for s in self.snapshots()]
        self.assertEqual(len(snaps), 1, err)
        self.assertRegex(snaps[0], r"^\d\d-slow-step100$", err)  # 03 or more: hiccups came first
        self.assertIn("in place of", err)
        steps, _, summary = self.analyse(self.snapshots()[0])
        self.assertIn(60, steps)
        self.assertIn(100, steps)
        # 2 ms steps, one of them 4 times as long (6 ms more): no slow step by default.
        shutil.rmtree(self.out)
        self.finish(self.start(60, 40, 4, 2))
        self.assertEqual(self.snapshots(), [])

    def test_snapshot_keeps_whole_steps_of_a_small_ring(self):
        """A ring of 1 MiB (16384 events) over 400 steps of about 85 events: the snapshot begins
        at a step whose events are all kept, and holds the slow step with at least ten before."""
        # A factor of 20 (the step is 60 times as long): the short steps of a busy machine vary
        # (a step of 10 ms took more than 8 times as long at load average 6, and its snapshot
        # was the one kept).
        env = self.env(TERMSIGHT_FLIGHT_MB="1", TERMSIGHT_FLIGHT_SLOW="20")
        self.finish(self.start(400, 337, 60, 10, 0, 80, env=env))
        snaps = self.snapshots()
        self.assertEqual(len(snaps), 1)
        self.assertRegex(os.path.basename(snaps[0]), r"^\d\d-slow-step337$")
        steps, ops, _ = self.analyse(snaps[0])
        first = min(steps)
        self.assertGreater(first, 1, "the ring overflowed: older steps are gone")
        self.assertGreaterEqual(337 - first, 10)
        self.assertEqual(sorted(steps), list(range(first, max(steps) + 1)))
        # Every step kept is whole: its 40 tiny operators and its forward each.
        whole = [k for k in steps if k <= 337]
        self.assertGreaterEqual(int(ops["tiny"]["count"]), 80 * len(whole))
        self.assertGreaterEqual(int(ops["forward"]["count"]), len(whole))
        self.assertLess(float(steps[first]["interval_us"]), 4000,
                        "the first step kept begins at its own begin")

    def test_snapshot_on_request_pid_and_job(self):
        """termsight snapshot PID, and --job ID for every rank at once."""
        # No slow-step snapshots: a busy machine's hiccup in a 5 ms step would take a number.
        env0 = self.env(TERMSIGHT_JOB="flightjob", TERMSIGHT_RANK="0", TERMSIGHT_WORLD_SIZE="2",
                        TERMSIGHT_FLIGHT_SLOW="0")
        env1 = self.env(TERMSIGHT_JOB="flightjob", TERMSIGHT_RANK="1", TERMSIGHT_WORLD_SIZE="2",
                        TERMSIGHT_FLIGHT_SLOW="0")
        ranks = [self.start(100000, 0, 1, 5, env=env0), self.start(100000, 0, 1, 5, env=env1)]

        def both_listed():
            r = subprocess.run([BIN, "ls"], capture_output=True, text=True, timeout=DEADLINE_S)
            pids = [self.session_pid(p) for p in ranks]
            listed = {line.split()[0] for line in r.stdout.splitlines() if line.strip()}
            return all(pid and str(pid) in listed for pid in pids)

        self.wait_for("both ranks' sessions", both_listed)

        def stepped(pid):  # a few steps ended (a loaded machine starts them late)
            r = subprocess.run([BIN, "top", "--once", "--json", str(pid)], capture_output=True,
                               text=True, timeout=DEADLINE_S)
            return r.returncode == 0 and json.loads(r.stdout)["steps"]["count"] >= 3

        self.wait_for("both ranks' first steps",
                      lambda: all(stepped(self.session_pid(p)) for p in ranks))
        r = subprocess.run([BIN, "snapshot", "--job", "flightjob", "--why", "look now"],
                           capture_output=True, text=True, timeout=DEADLINE_S)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(r.stdout.splitlines()), 2, r.stdout)
        folders = [line.split(": ", 1)[1] for line in r.stdout.splitlines()]
        self.assertTrue(all("/snapshots/01-request" in f for f in folders), r.stdout)
        for f in folders:
            steps, _, summary = self.analyse(f)
            self.assertGreater(len(steps), 0)
            self.assertEqual(summary["events"]["snapshot"]["why"], "look now")
            self.assertEqual(summary["events"]["snapshot"]["cause"], "request")
        # One process by pid: a second snapshot of its own.
        pid = self.wait_for("the rank's pid", lambda: self.session_pid(ranks[0]))
        # Its reason any bytes: summary.json stays UTF-8, the reason escaped as names are
        # (before, the byte 0xff went into it raw and json.load failed).
        r = subprocess.run([BIN, "snapshot", str(pid), "--why", b"bad\xff\x1b[2J"],
                           capture_output=True, text=True, timeout=DEADLINE_S)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("/snapshots/02-request", r.stdout)
        _, _, summary = self.analyse(r.stdout.split(": ", 1)[1].strip())
        self.assertEqual(summary["events"]["snapshot"]["why"], "bad\\xff\\x1b[2J")

    def session_pid(self, proc):
        """The pid of the session `termsight run` started (its child)."""
        try:
            with open("/proc/%d/task/%d/children" % (proc.pid, proc.pid)) as f:
                kids = f.read().split()
        except OSError:
            return None
        return int(kids[0]) if kids else None

    def test_sigusr2_and_hang(self):
        """SIGUSR2 writes a snapshot; a step that never ends gets a hang snapshot."""
        # No slow-step snapshots: a busy machine's hiccup in a 5 ms step would take a number.
        env = self.env(TERMSIGHT_FLIGHT_HANG_S="2", TERMSIGHT_FLIGHT_SLOW="0")
        p = self.start(100, 0, 1, 5, 30, env=env)
        pid = self.wait_for("the program's pid", lambda: self.session_pid(p), p)
        hang = self.wait_for("the hang snapshot", lambda: [
            s for s in self.snapshots() if os.path.basename(s) == "01-hang-step31"], p)
        os.kill(pid, signal.SIGUSR2)
        self.wait_for("the SIGUSR2 snapshot", lambda: [
            s for s in self.snapshots() if os.path.basename(s) == "02-signal"], p)
        steps, _, summary = self.analyse(hang[0])
        self.assertEqual(sorted(steps), list(range(1, 31)))
        self.assertEqual(summary["steps"]["unfinished_step"], 31)
        self.assertEqual(summary["events"]["snapshot"]["cause"], "hang")
        self.assertIn("no step has ended", summary["events"]["snapshot"]["why"])

    def test_python_saves_and_restores_sigusr2(self):
        """A Python program under --flight sees a SIGUSR2 disposition it can save and restore
        (before: getsignal returned None for the library's C handler, and restoring it raised
        TypeError); SIGUSR2 still writes a snapshot after the restore."""
        program = ("import glob, os, signal, sys, time\n"
                   "saved = signal.getsignal(signal.SIGUSR2)\n"
                   "signal.signal(signal.SIGUSR2, signal.getsignal(signal.SIGUSR2))\n"
                   "print('callable' if callable(saved) else repr(saved), flush=True)\n"
                   "os.kill(os.getpid(), signal.SIGUSR2)\n"
                   "end = time.monotonic() + 30\n"
                   "pattern = os.path.join(sys.argv[1], '*', 'snapshots', '*-signal')\n"
                   "while not glob.glob(pattern) and time.monotonic() < end:\n"
                   "    time.sleep(0.05)\n"
                   "print('snapshot' if glob.glob(pattern) else 'none')\n")
        # sys.executable: the interpreter itself, whose session is made at its start (a shim
        # such as pyenv's would make it in the shell that execs it).
        r = subprocess.run([BIN, "run", "-o", self.out, "--flight", "--", sys.executable, "-c",
                            program, self.out], env=self.env(), capture_output=True, text=True,
                           timeout=DEADLINE_S)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["callable", "snapshot"], r.stderr)

    def test_not_in_flight_mode(self):
        """A session that records as usual keeps no flight recorder: said, exit 1."""
        p = self.start(100000, 0, 1, 5, flight=False)
        pid = self.wait_for("the program's pid", lambda: self.session_pid(p), p)

        def ask():
            r = subprocess.run([BIN, "snapshot", str(pid)], capture_output=True, text=True,
                               timeout=DEADLINE_S)
            return r if "no running termsight session" not in r.stderr else None

        r = self.wait_for("an answer", ask, p)
        self.assertEqual(r.returncode, 1)
        self.assertIn("keeps no flight recorder", r.stderr)
        r = subprocess.run([BIN, "snapshot"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2)
        r = subprocess.run([BIN, "snapshot", "99999999"], capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(r.returncode, 1)


    def test_forked_children_leave_nothing(self):
        """Forked children that end with _exit in flight mode: their segments are reaped, and
        nothing is written for them (no recording, no run folder) without a snapshot."""
        shm_tree = os.environ.get("SHM_TREE")
        if not shm_tree:
            self.skipTest("SHM_TREE is not set")
        r = subprocess.run([BIN, "run", "--flight", "-o", self.out, "--", shm_tree, "fork", "5",
                            "-"], capture_output=True, text=True, timeout=DEADLINE_S,
                           env=self.env())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("no snapshot was taken", r.stderr)
        made = os.listdir(self.out) if os.path.exists(self.out) else []
        self.assertEqual(made, [], "flight mode wrote run folders without a snapshot")

    def test_binding_snapshot(self):
        """The Python binding: Profiler(flight_mb=...) records nothing until snapshot()."""
        import termsight
        prof = termsight.Profiler(output_path=self.out, flight_mb=4)
        self.addCleanup(prof.close)
        for _ in range(5):
            with prof.step():
                with prof.range("work", "Compute"):
                    pass
        prof.snapshot("from Python")
        snaps = self.snapshots()
        self.assertEqual([os.path.basename(s) for s in snaps], ["01-request"])
        steps, ops, summary = self.analyse(snaps[0])
        self.assertEqual(sorted(steps), [1, 2, 3, 4, 5])
        self.assertEqual(int(ops["work"]["count"]), 5)
        self.assertEqual(summary["events"]["snapshot"]["why"], "from Python")
        prof.close()
        self.assertFalse(os.path.exists(os.path.join(os.path.dirname(os.path.dirname(snaps[0])),
                                                     "recording")))

    def test_binding_stacks_folder_without_snapshot(self):
        """A Python flight recorder's run folder is made for termsight hang's stacks file while
        it runs, and removed at its exit when no snapshot was taken and no stack asked for."""
        import sys
        program = ("import os, sys, termsight\n"
                   "p = termsight.Profiler(output_path=sys.argv[1], flight_mb=1)\n"
                   "with p.step():\n"
                   "    pass\n"
                   "print(os.path.isfile(os.path.join(p.run_folder, 'python-stacks.txt')))\n"
                   "p.close()\n")
        r = subprocess.run([sys.executable, "-c", program, self.out], capture_output=True,
                           text=True, timeout=DEADLINE_S, env=self.env())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "True", r.stderr)
        made = os.listdir(self.out) if os.path.exists(self.out) else []
        self.assertEqual(made, [], "a run folder was left without a snapshot")

    def test_binding_stacks_refused_folder(self):
        """A flight recorder whose output folder is refused (writable by every user, without the
        sticky bit) makes nothing in it for the stacks file, and the program runs on."""
        import sys
        os.makedirs(self.out)
        os.chmod(self.out, 0o777)
        program = ("import os, sys, termsight\n"
                   "p = termsight.Profiler(output_path=sys.argv[1], flight_mb=1)\n"
                   "with p.step():\n"
                   "    pass\n"
                   "print(os.path.exists(p.run_folder))\n"
                   "p.close()\n")
        r = subprocess.run([sys.executable, "-c", program, self.out], capture_output=True,
                           text=True, timeout=DEADLINE_S, env=self.env())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "False", r.stderr)
        self.assertEqual(os.listdir(self.out), [])


if __name__ == "__main__":
    unittest.main()
