"""termsight diff on real runs (tests/python/diff_train.py under its own session): two runs of
one program show no significant change (five pairs, ten in the long variant, at most one false
alarm), a run whose MatMul operator is 10 % slower and whose Conv2D operator is 30 % slower names
both with their sizes, and --fail-above 5 exits 1 on that pair and 0 on a pair of the same
program. The two runs of a pair run at the same time, so that whatever else loads the machine
loads both alike: the test compares within a pair, never with a quiet machine.

Environment: TERMSIGHT_LIB, TERMSIGHT_BIN, TERMSIGHT_TEST_TMP, PYTHONPATH with python/,
TERMSIGHT_TEST_LONG (ten pairs). About fifteen seconds of runs (six pairs of 200 steps of 12 ms),
each bounded by a timeout."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TRAIN = os.path.join(HERE, "diff_train.py")
PAIRS = 10 if os.environ.get("TERMSIGHT_TEST_LONG", "0") not in ("", "0") else 5


def termsight_bin():
    return os.path.abspath(os.environ.get("TERMSIGHT_BIN")
                           or os.path.join(REPO, "build", "cli", "termsight"))


def train_pair(a, b, slow_matmul=1.0, slow_conv=1.0):
    """Runs the base program into folder a and, at the same time, the program with its MatMul and
    Conv2D slowed by the factors given into folder b; returns their run folders."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(REPO, "python"),
                                         env.get("PYTHONPATH", "")])
    if env.get("TERMSIGHT_LIB"):
        env["TERMSIGHT_LIB"] = os.path.abspath(env["TERMSIGHT_LIB"])
    procs = [subprocess.Popen([sys.executable, TRAIN, out, str(mm), str(conv)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for out, mm, conv in ((a, 1.0, 1.0), (b, slow_matmul, slow_conv))]
    folders = []
    try:
        for p in procs:
            stdout, stderr = p.communicate(timeout=60)
            if p.returncode != 0:
                raise AssertionError("diff_train.py: %s" % stderr.decode(errors="replace"))
            folders.append(stdout.decode().strip().splitlines()[-1])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return folders


def diff(*args, timeout=60):
    return subprocess.run([termsight_bin(), "diff"] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=timeout)


def significant(rows):
    return [r for r in rows if r["verdict"] != "same"]


class DiffTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        base = os.environ.get("TERMSIGHT_TEST_TMP") or None
        if base:
            os.makedirs(base, exist_ok=True)
        cls.tmp = tempfile.mkdtemp(prefix="diff-", dir=base)
        cls.pairs = [train_pair(os.path.join(cls.tmp, "a%d" % i), os.path.join(cls.tmp, "b%d" % i))
                     for i in range(PAIRS)]
        cls.base, cls.slow = train_pair(os.path.join(cls.tmp, "base"),
                                        os.path.join(cls.tmp, "slow"), 1.1, 1.3)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_same_program_pairs(self):
        """Pairs of runs of one program: at most one shows a significant change."""
        alarms, clean = [], []
        for i, (a, b) in enumerate(self.pairs):
            p = diff("--json", a, b)
            self.assertEqual(p.returncode, 0, p.stderr)
            d = json.loads(p.stdout)
            self.assertEqual(d["a"]["steps"], 200)
            self.assertTrue(d["a"]["operators"])
            names = {(r["kind"], r["name"]) for r in d["rows"]}
            self.assertIn(("phase", "step"), names)
            self.assertIn(("op", "Default/fc1/MatMul-op1"), names)
            self.assertIn(("type", "Conv2D"), names)
            bad = significant(d["rows"])
            (alarms if bad else clean).append((i, bad))
        self.assertLessEqual(len(alarms), 1, "false alarms: %r" % alarms)
        # --fail-above 5 passes a pair of the same program.
        p = diff("--fail-above", "5", *self.pairs[clean[0][0]])
        self.assertEqual(p.returncode, 0, p.stdout.decode() + p.stderr.decode())
        self.assertIn("slower: none", p.stdout.decode())

    def test_slower_operators_named(self):
        """MatMul 10 % and Conv2D 30 % slower: both named with their sizes, nothing else."""
        p = diff("--json", self.base, self.slow)
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = json.loads(p.stdout)["rows"]
        by = {(r["kind"], r["name"]): r for r in rows}
        mm = by[("op", "Default/fc1/MatMul-op1")]
        conv = by[("op", "Default/conv/Conv2D-op2")]
        self.assertEqual(mm["verdict"], "slower")
        self.assertEqual(conv["verdict"], "slower")
        # The sleeps are 6 ms and 3 ms plus the timer's slack: a bit under 10 % and 30 %.
        self.assertTrue(6 <= mm["change_pct"] <= 12, mm)
        self.assertTrue(20 <= conv["change_pct"] <= 33, conv)
        lo, hi = conv["interval_pct"]
        self.assertTrue(lo <= conv["change_pct"] <= hi, conv)
        self.assertEqual(by[("type", "MatMul")]["verdict"], "slower")
        self.assertEqual(by[("phase", "step")]["verdict"], "slower")
        for name in ("Default/act/ReLU-op3", "Default/optimizer/SGD-op4", "DataLoader.__next__"):
            self.assertEqual(by[("op", name)]["verdict"], "same", by[("op", name)])
        self.assertEqual(by[("phase", "interval")]["verdict"], "same")
        # The text says the same, with the sizes, and --fail-above 5 fails the pair.
        p = diff("--fail-above", "5", self.base, self.slow)
        self.assertEqual(p.returncode, 1, p.stderr)
        text = p.stdout.decode()
        m = re.search(r"op Default/fc1/MatMul-op1 \(MatMul\): \+(\d+\.\d) %", text)
        self.assertTrue(m and 6 <= float(m.group(1)) <= 12, text)
        m = re.search(r"op Default/conv/Conv2D-op2 \(Conv2D\): \+(\d+\.\d) %", text)
        self.assertTrue(m and 20 <= float(m.group(1)) <= 33, text)
        self.assertIn("slower than A by more than 5 %", p.stderr.decode())
        self.assertEqual(diff("--fail-above", "50", self.base, self.slow).returncode, 0)

    def test_html(self):
        page = os.path.join(self.tmp, "diff.html")
        p = diff("--html", page, self.base, self.slow)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(page, encoding="utf-8") as f:
            html = f.read()
        self.assertTrue(html.startswith("<!DOCTYPE html>"))
        self.assertIn("Default/conv/Conv2D-op2", html)
        self.assertIn('<tr class="slower">', html)
        self.assertNotIn("<script", html)
        self.assertNotRegex(html, r"(src|href)=\"?(https?:)?//")

    def test_usage(self):
        p = subprocess.run([termsight_bin(), "diff", "--help"], stdout=subprocess.PIPE,
                           timeout=30)
        self.assertEqual(p.returncode, 0)
        self.assertIn(b"--fail-above", p.stdout)
        self.assertEqual(diff(self.base).returncode, 2)
        self.assertEqual(diff("--fail-above", "x", self.base, self.slow).returncode, 2)
        self.assertEqual(diff("--alpha", "2", self.base, self.slow).returncode, 2)
        p = diff(self.base, os.path.join(self.tmp, "nothing-here"))
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"no report and no recording", p.stderr)


if __name__ == "__main__":
    unittest.main()
