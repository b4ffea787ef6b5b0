"""termsight hang on a stuck 4-rank DDP job (gloo, CPU) under `termsight run`: rank 3's
Dataset.__getitem__ blocks forever after a few steps; the other ranks then wait in the gradient
all-reduce. `termsight hang JOB --json` must name rank 3 as the rank the others wait for, show
the others inside the communication for seconds, rank 3 inside DataLoader.__next__, and rank 3's
Python stack with the Dataset's function, got through faulthandler (no ptrace, nothing stopped).
The job is then killed (bounded) and its shared memory and folders removed. Skips without
PyTorch, as test_torch does. Without PyTorch: one Python process with the binding, a thread
stuck in a range (its range and stack shown; asked twice, each answer only what was asked), and
a program with a handler of its own for the signal, which is then never sent.
"""

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import unittest

from test_binding import Base
import termsight  # noqa: E402 (test_binding puts the package on sys.path)
import test_torch  # skips and CI rules as for test_torch
from test_torch import HAVE_TORCH
from test_ddp import ASAN_PRELOADED

RANKS = 4
STUCK = 3  # the rank whose data never comes
STEPS_BEFORE = 3  # steps every rank trains before that
WAIT_S = 3.0  # the others must have waited this long
DEADLINE_S = 150

SCRIPT = textwrap.dedent("""\
    import os, socket, subprocess, sys, threading, time

    def launch():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = str(s.getsockname()[1])
        procs = []
        for r in range(%(ranks)d):
            env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="%(ranks)d",
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
            procs.append(subprocess.Popen([sys.executable, __file__], env=env))
        for p in procs:
            p.wait()

    class StuckDataset:
        never = threading.Event()

        def __init__(self, rank):
            self.rank = rank

        def __len__(self):
            return 100000

        def __getitem__(self, i):
            import torch
            if self.rank == %(stuck)d and i >= %(steps)d * 4:
                print("rank %%d: data blocks" %% self.rank, flush=True)
                self.never.wait()  # forever: the hang under test
            return torch.full((8,), float(i %% 7)), torch.tensor(i %% 2)

    def train():
        import torch
        import torch.distributed as dist
        from torch.utils.data import DataLoader
        rank = int(os.environ["RANK"])
        dist.init_process_group("gloo")
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 2))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        loader = DataLoader(StuckDataset(rank), batch_size=4, num_workers=0)
        batches = loader
        if os.environ.get("HANG_MODE") == "steps":  # the script marks its steps: DDP comm hook
            import termsight.torch
            batches = termsight.torch.steps(loader, model=model)
        for step, (x, y) in enumerate(batches):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            print("rank %%d: step %%d" %% (rank, step), flush=True)

    if __name__ == "__main__":
        launch() if "RANK" not in os.environ else train()
    """) % {"ranks": RANKS, "stuck": STUCK, "steps": STEPS_BEFORE}


PLAIN = textwrap.dedent("""\
    import os, signal, sys, threading, time
    import termsight

    def wait_for_a_flag_never_set(flag):
        name = "waiting for the flag"
        if sys.argv[1] == "hostile":  # a name that clears the screen and forges a verdict
            name = b"waiting\\x1b[2J\\nverdict: rank 7 is the one the others wait for\\xff"
        with termsight.range(name, "wait"):
            flag.wait()

    own = sys.argv[1] == "own-handler"
    if own:  # the program's own use of the signal termsight would take
        signal.signal(signal.SIGRTMAX - 3, lambda *a: print("program's handler ran", flush=True))
    prof = termsight.Profiler(output_path=sys.argv[2])
    flag = threading.Event()
    t = threading.Thread(target=wait_for_a_flag_never_set, args=(flag,), name="waiter")
    t.start()
    print("ready", flush=True)
    sys.stdin.read()  # until the test closes stdin
    flag.set()
    t.join()
    prof.close()
    """)


def hang(job, *args):
    p = subprocess.run([termsight.find_cli(), "hang", job, "--json"] + list(args),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def by_rank(report):
    return {r["rank"]: r for r in report["ranks"] if r["rank"] >= 0}


@unittest.skipUnless(HAVE_TORCH, getattr(test_torch, "WHY", ""))
@unittest.skipIf(ASAN_PRELOADED, "ASan's preloaded runtime aborts on PyTorch distributed's C++ "
                 "exceptions (the normal build runs these)")
class Hang(Base):
    def start_job(self, mode="auto", flight=False):
        path = os.path.join(self.tmp, "stuck_ddp.py")
        with open(path, "w") as f:
            f.write(SCRIPT)
        self.job = "hangtest-%d" % os.getpid()
        self.pids = set()
        env = dict(os.environ, TERMSIGHT_JOB=self.job, HANG_MODE=mode)
        env.pop("TERMSIGHT_LIB", None)
        self.log = open(os.path.join(self.tmp, "job.log"), "wb")
        self.addCleanup(self.log.close)
        # A process group of its own, so that every process of the job can be ended.
        self.proc = subprocess.Popen([termsight.find_cli(), "run", "-o",
                                      os.path.join(self.tmp, "data")] +
                                     (["--flight"] if flight else []) +
                                     ["--", sys.executable, path], cwd=self.tmp, env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.addCleanup(self.end_job)

    def group_gone(self, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.proc.poll()  # the leader reaped: a zombie would keep the group
            try:
                os.killpg(self.proc.pid, 0)
            except ProcessLookupError:
                return True
            time.sleep(0.1)
        return False

    def end_job(self):
        """Ends the job's whole process group (SIGTERM, then SIGKILL after a bounded wait) and
        checks that no shared memory of its processes is left."""
        for sig, grace in ((signal.SIGTERM, 20), (signal.SIGKILL, 30)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            if self.group_gone(grace):
                break
        self.proc.wait(30)
        self.assertTrue(self.group_gone(1), "the job's processes did not end")
        left = [f for f in os.listdir("/dev/shm")
                if any(f.startswith("termsight-%d-" % pid) for pid in self.pids)]
        if left:  # killed before they could close: their segments are stale now
            subprocess.run([termsight.find_cli(), "ls", "--clean"] + [str(p) for p in self.pids],
                           stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=60)
        self.assertEqual([f for f in os.listdir("/dev/shm") if f in left], [])

    def job_log(self):
        self.log.flush()
        with open(os.path.join(self.tmp, "job.log"), "rb") as f:
            return f.read().decode("utf-8", "replace")[-4000:]

    def wait_stuck(self):
        """Polls termsight hang (no stacks asked) until the others have waited WAIT_S in a
        communication; returns the last report. Fails at the deadline."""
        deadline = time.monotonic() + DEADLINE_S
        last = None
        while time.monotonic() < deadline:
            self.assertIsNone(self.proc.poll(), "the job ended:\n" + self.job_log())
            rc, out, err = hang(self.job, "--wait-s", "0", "--no-snapshot")
            if rc == 0:
                last = json.loads(out)
                ranks = by_rank(last)
                others = [ranks.get(r) for r in range(RANKS) if r != STUCK]
                self.pids.update(r["pid"] for r in last["ranks"])
                if len(ranks) == RANKS and all(
                        o and o["communication"] and o["communication"]["open_s"] >= WAIT_S
                        for o in others):
                    return last
            time.sleep(0.5)
        self.fail("the ranks never showed waiting: %s\n%s" % (last, self.job_log()))

    def test_names_the_rank_the_others_wait_for(self):
        self.start_job()
        self.check_stuck_job()

    def test_with_steps_and_the_ddp_comm_hook(self):
        # termsight.torch.steps(loader, model=ddp_model): the all-reduces go through
        # termsight's DDP comm hook ("DDP/bucket0/allreduce"), the data wait through steps().
        # In flight mode: hang also asks every rank for a snapshot, which analyse reads, and
        # for its stacks (the run folder made for them before any snapshot).
        self.start_job("steps", flight=True)
        report = self.wait_stuck()
        rc, out, err = hang(self.job, "--wait-s", "20")
        self.assertEqual(rc, 0, err)
        report = json.loads(out)
        ranks = by_rank(report)
        for r in range(RANKS):
            folder = ranks[r]["snapshot"]
            self.assertIsNotNone(folder, ranks[r]["snapshot_note"])
            self.assertIn("/snapshots/", folder)
            a = subprocess.run([termsight.find_cli(), "analyse", folder], capture_output=True,
                               timeout=120)
            self.assertEqual(a.returncode, 0, a.stderr)
            with open(os.path.join(folder, "report", "summary.json")) as f:
                summary = json.load(f)
            self.assertEqual(summary["events"]["snapshot"]["why"], "termsight hang")
            self.assertGreater(summary["steps"]["count"], 0)
        self.assertEqual([w["rank"] for w in report["waited_for"]], [STUCK], report)
        for r in range(RANKS):
            if r != STUCK:
                self.assertRegex(ranks[r]["communication"]["name"], r"^DDP/bucket\d+/allreduce$")
        self.assertRegex(ranks[STUCK]["inside"], r"^in DataLoader\.__next__ for ")
        stuck = ranks[STUCK]
        self.assertIsNotNone(stuck["python_stacks"], stuck["stacks_note"])
        self.assertIn("in __getitem__", stuck["python_stacks"])

    def check_stuck_job(self):
        self.wait_stuck()
        rc, out, err = hang(self.job, "--wait-s", "20")
        self.assertEqual(rc, 0, err)
        report = json.loads(out)
        ranks = by_rank(report)
        self.assertEqual(sorted(ranks), list(range(RANKS)), report)
        self.assertEqual([w["rank"] for w in report["waited_for"]], [STUCK], report)
        self.assertEqual(report["waiting"], RANKS - 1)
        self.assertIn("rank %d is the one the others wait for" % STUCK, report["verdict"])
        # Not in flight mode: no snapshot, and why.
        self.assertIsNone(ranks[0]["snapshot"])
        self.assertIn("flight recorder", ranks[0]["snapshot_note"])
        for r in range(RANKS):
            if r == STUCK:
                continue
            c = ranks[r]["communication"]
            self.assertGreaterEqual(c["open_s"], WAIT_S, ranks[r])
            self.assertIn("allreduce", c["name"], ranks[r])
            self.assertTrue(ranks[r]["inside"].startswith("in "), ranks[r])
        stuck = ranks[STUCK]
        self.assertIsNone(stuck["communication"], stuck)
        self.assertRegex(stuck["inside"], r"^in DataLoader\.__next__ for \d+\.\d s$")
        main = [t for t in stuck["threads"] if t["main"]]
        self.assertEqual(len(main), 1, stuck)
        self.assertEqual(main[0]["range"], "DataLoader.__next__")
        self.assertGreaterEqual(main[0]["open_s"], WAIT_S)
        # The stack, from faulthandler in the run folder: the Dataset's function, and the
        # stuck rank still running (asked, not stopped).
        self.assertIsNotNone(stuck["python_stacks"], stuck["stacks_note"])
        self.assertIn("in __getitem__", stuck["python_stacks"])
        self.assertIn("stuck_ddp.py", stuck["python_stacks"])
        self.assertIsNone(self.proc.poll())
        # The text form says the same.
        p = subprocess.run([termsight.find_cli(), "hang", self.job, "--wait-s", "0"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        text = p.stdout.decode()
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("verdict: rank %d is the one the others wait for" % STUCK, text)
        self.assertRegex(text, r"thread \d+ \(main\): in DataLoader\.__next__ for \d+\.\d s")
        self.check_top()

    def check_top(self):
        """termsight top --once on the stuck job: each rank's innermost open range with its
        duration, and the Ranks screen's verdict naming the stuck rank."""
        p = subprocess.run([termsight.find_cli(), "top", "--job", self.job, "--once", "--json"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        job = json.loads(p.stdout)["job"]
        ranks = {r["rank"]: r for r in job["ranks"] if r["rank"] >= 0}
        self.assertEqual(sorted(ranks), list(range(RANKS)), job)
        for r, row in ranks.items():
            self.assertTrue(row["stalled"], row)
            self.assertEqual(row["waited_for"], r == STUCK, row)
            want = r"^in DataLoader\.__next__ for " if r == STUCK else r"^in \S*allreduce\S* for "
            self.assertRegex(row["inside"], want + r"\d+\.\d s$")
        self.assertIn("rank %d is the one the others wait for" % STUCK, job["hang_verdict"])
        env = dict(os.environ, COLUMNS="140", LINES="40")
        p = subprocess.run([termsight.find_cli(), "top", "--job", self.job, "--once"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        text = p.stdout.decode("utf-8", "replace")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("INSIDE", text)
        self.assertIn("rank %d is the one the others wait for" % STUCK, text)
        self.assertRegex(text, r"stalled in \S+ for \d+\.\d s")


class PlainPython(Base):
    """termsight hang on one Python process with the binding (no PyTorch needed)."""

    def start(self, mode, python=sys.executable, data=b"data"):
        path = os.path.join(self.tmp, "plain.py")
        with open(path, "w") as f:
            f.write(PLAIN)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.path.dirname(os.path.dirname(termsight.__file__)) + (
            os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        p = subprocess.Popen([python, path, mode, os.path.join(os.fsencode(self.tmp), data)],
                             cwd=self.tmp, env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)

        def end():
            try:
                p.communicate(b"", timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()
        self.addCleanup(end)
        self.assertEqual(p.stdout.readline(), b"ready\n")
        deadline = time.monotonic() + 30  # the thread's range open, as a monitor sees it
        out = err = ""
        while time.monotonic() < deadline:
            rc, out, err = hang(str(p.pid), "--wait-s", "0")
            if rc == 0 and json.loads(out)["ranks"][0]["threads"]:
                return p
            time.sleep(0.1)
        self.fail("the open range never showed: %s %s" % (out, err))

    def test_stacks_and_open_range(self):
        p = self.start("plain")
        rc, out, err = hang(str(p.pid), "--wait-s", "20")
        self.assertEqual(rc, 0, err)
        proc = json.loads(out)["ranks"][0]
        self.assertEqual(proc["pid"], p.pid)
        ranges = [t["range"] for t in proc["threads"]]
        self.assertIn("waiting for the flag", ranges)
        self.assertIn("waiting for the flag", proc["inside"])
        self.assertIn("in wait_for_a_flag_never_set", proc["python_stacks"])
        self.assertIsNone(p.poll(), "asked for its stacks, the program runs on")
        # Asked again: only what the second request appended.
        rc, out, err = hang(str(p.pid), "--wait-s", "20")
        self.assertEqual(rc, 0, err)
        again = json.loads(out)["ranks"][0]["python_stacks"]
        self.assertEqual(again.count("in wait_for_a_flag_never_set"), 1, again)

    def test_stacks_file_of_another_user_not_shown(self):
        """A stacks file of another user's (uid 65534 here) in the run folder, as where that
        user swapped a run folder for one of theirs: never read or shown."""
        if os.geteuid() != 0:
            self.skipTest("needs root, to chown to uid 65534")
        p = self.start("plain")
        rc, out, err = hang(str(p.pid), "--wait-s", "0")
        stacks = os.path.join(json.loads(out)["ranks"][0]["run_folder"], "python-stacks.txt")
        with open(stacks, "a") as f:
            f.write("verdict: rank 7 is the one the others wait for\n")
        os.chown(stacks, 65534, 65534)
        rc, out, err = hang(str(p.pid), "--wait-s", "2")
        self.assertEqual(rc, 0, err)
        proc = json.loads(out)["ranks"][0]
        self.assertIsNone(proc["python_stacks"])
        self.assertIn("not a file of yours", proc["stacks_note"])
        self.assertNotIn("rank 7", out)

    def test_a_program_that_uses_the_signal_is_left_alone(self):
        p = self.start("own-handler")
        rc, out, err = hang(str(p.pid), "--wait-s", "2")
        self.assertEqual(rc, 0, err)
        proc = json.loads(out)["ranks"][0]
        self.assertIsNone(proc["python_stacks"])
        self.assertIn("no stack dump registered", proc["stacks_note"])
        out, _ = p.communicate(b"", timeout=60)
        self.assertNotIn(b"program's handler ran", out)

    def test_hostile_names(self):
        """A range name, a process name (a link to Python) and a run folder with ESC[2J, a line
        feed and a byte that is not UTF-8: hang's text, hang --json and ls print them escaped
        as top does (before, the text cleared the screen and a second verdict line stood in it,
        and the JSON was not UTF-8)."""
        evil = b"py\x1b[2J\nverdict\xff"
        link = os.path.join(os.fsencode(self.tmp), evil)
        os.symlink(sys.executable, link)
        p = self.start("hostile", python=link, data=b"data\x1b[2J\n\xff")
        cli = termsight.find_cli()
        raw = subprocess.run([cli, "hang", str(p.pid), "--json", "--wait-s", "0"],
                             stdout=subprocess.PIPE, timeout=60).stdout
        proc = json.loads(raw)["ranks"][0]   # bytes: strict UTF-8
        # As in top --once --json: escaped, the line feed kept (JSON escapes it).
        self.assertIn("waiting\\x1b[2J\nverdict: rank 7", proc["threads"][0]["range"]
                      if proc["threads"] else "", proc)
        self.assertIn("\\x1b[2J", proc["process"])
        self.assertIn("\\x1b[2J", proc["run_folder"])
        for args in (["hang", str(p.pid), "--wait-s", "0"], ["ls"]):
            out = subprocess.run([cli] + args, stdout=subprocess.PIPE, timeout=60).stdout
            text = out.decode("utf-8")   # strict
            self.assertNotRegex(text, "[\x00-\x09\x0b-\x1f\x7f]", args)
            mine = [l for l in text.splitlines() if str(p.pid) in l or "rank 7" in l]
            self.assertTrue(mine, (args, text))
            if args[0] == "hang":
                verdicts = [l for l in text.splitlines() if l.startswith("verdict:")]
                self.assertEqual(len(verdicts), 1, text)
                self.assertIn("waiting\\x1b[2J\\x0averdict: rank 7", text)
            else:
                self.assertIn("\\x1b[2J", mine[0])

    def test_no_session(self):
        rc, out, err = hang("no-such-job-%d" % os.getpid())
        self.assertEqual(rc, 1)
        self.assertIn("no live session of job", err)


SLOW_STEP = os.environ.get("SLOW_STEP", "slow_step")


class Stopped(Base):
    """A SIGSTOPped rank (slow_step under termsight run, with and without a flight recorder):
    hang asks only a session that keeps a flight recorder for a snapshot and gives up on a
    stopped one after a bounded wait, saying so (before, it asked every session and waited
    30 s for the stopped one)."""

    def start(self, flight):
        out = os.path.join(self.tmp, "flight" if flight else "plain")
        p = subprocess.Popen([termsight.find_cli(), "run", "-o", out] +
                             (["--flight"] if flight else []) +
                             ["--", SLOW_STEP, "100000", "0", "1", "20"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             start_new_session=True)

        def end():
            try:
                os.killpg(p.pid, signal.SIGCONT)
                os.killpg(p.pid, signal.SIGTERM)
                p.communicate(timeout=30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                p.kill()
                p.communicate()
        self.addCleanup(end)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the program (run's child) with its session
            try:
                with open("/proc/%d/task/%d/children" % (p.pid, p.pid)) as f:
                    kids = f.read().split()
            except OSError:
                kids = []
            if kids and hang(kids[0], "--wait-s", "0", "--no-snapshot")[0] == 0:
                return int(kids[0])
            time.sleep(0.1)
        self.fail("no session: %s" % p.stderr.read1().decode(errors="replace"))

    def hang_stopped(self, pid):
        os.kill(pid, signal.SIGSTOP)
        t0 = time.monotonic()
        # A backstop only (hang used to wait 30 s); what is asserted is what hang says.
        p = subprocess.run([termsight.find_cli(), "hang", str(pid), "--json"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=15)
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout)["ranks"][0], time.monotonic() - t0

    def test_no_snapshot_asked_without_a_flight_recorder(self):
        pid = self.start(flight=False)
        rank, _ = self.hang_stopped(pid)
        self.assertIsNone(rank["snapshot"])
        self.assertIn("no flight recorder", rank["snapshot_note"])
        self.assertIn("not asked", rank["snapshot_note"])
        # Nothing was posted to its mailbox: a command sent now is the only one, not one queued
        # behind hang's unanswered request.
        p = subprocess.run([termsight.find_cli(), "snapshot", "--wait", "10", str(pid)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=15)
        said = (p.stdout + p.stderr).decode(errors="replace")
        self.assertNotIn("previous command has not been answered", said)
        self.assertRegex(said, r"did not answer in \d+\.\d s: stopped \(state T\)")

    def test_stopped_flight_recorder_said(self):
        pid = self.start(flight=True)
        rank, took = self.hang_stopped(pid)
        self.assertIsNone(rank["snapshot"])
        self.assertRegex(rank["snapshot_note"],
                         r"^pid %d did not answer in \d+\.\d s: stopped \(state T\)$" % pid)
        waited = float(re.search(r"in (\d+\.\d) s", rank["snapshot_note"]).group(1))
        self.assertLess(waited, 10, "bounded per rank, not the 30 s of a snapshot")


if __name__ == "__main__":
    unittest.main()
