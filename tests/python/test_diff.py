"""termsight diff on real runs (tests/python/diff_train.py under its own session): two runs of
one program show no significant change (ten pairs, at most one false alarm), a run whose MatMul
operator is 10 % slower and whose Conv2D operator is 30 % slower names both with their sizes,
and --fail-above 5 exits 1 on that pair and 0 on a pair of the same program.

Environment: TERMSIGHT_LIB, TERMSIGHT_BIN, TERMSIGHT_TEST_TMP, PYTHONPATH with python/. About
twenty seconds of runs (twelve of 200 steps of 8 ms), each bounded by a timeout."""

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
PAIRS = 10


def termsight_bin():
    return os.path.abspath(os.environ.get("TERMSIGHT_BIN")
                           or os.path.join(REPO, "build", "cli", "termsight"))


def train(out, slow_matmul=1.0, slow_conv=1.0):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(REPO, "python"),
                                         env.get("PYTHONPATH", "")])
    if env.get("TERMSIGHT_LIB"):
        env["TERMSIGHT_LIB"] = os.path.abspath(env["TERMSIGHT_LIB"])
    p = subprocess.run([sys.executable, TRAIN, out, str(slow_matmul), str(slow_conv)], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    if p.returncode != 0:
        raise AssertionError("diff_train.py: %s" % p.stderr.decode(errors="replace"))
    return p.stdout.decode().strip().splitlines()[-1]


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
        cls.base = [train(os.path.join(cls.tmp, "base%d" % i)) for i in range(PAIRS + 1)]
        cls.slow = train(os.path.join(cls.tmp, "slow"), 1.1, 1.3)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_same_program_pairs(self):
        """Ten pairs of runs of one program: at most one shows a significant change."""
        alarms, clean = [], []
        for i in range(PAIRS):
            p = diff("--json", self.base[i], self.base[i + 1])
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
        i = clean[0][0]
        p = diff("--fail-above", "5", self.base[i], self.base[i + 1])
        self.assertEqual(p.returncode, 0, p.stdout.decode() + p.stderr.decode())
        self.assertIn("slower: none", p.stdout.decode())

    def test_slower_operators_named(self):
        """MatMul 10 % and Conv2D 30 % slower: both named with their sizes, nothing else."""
        p = diff("--json", self.base[0], self.slow)
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
        p = diff("--fail-above", "5", self.base[0], self.slow)
        self.assertEqual(p.returncode, 1, p.stderr)
        text = p.stdout.decode()
        m = re.search(r"op Default/fc1/MatMul-op1 \(MatMul\): \+(\d+\.\d) %", text)
        self.assertTrue(m and 6 <= float(m.group(1)) <= 12, text)
        m = re.search(r"op Default/conv/Conv2D-op2 \(Conv2D\): \+(\d+\.\d) %", text)
        self.assertTrue(m and 20 <= float(m.group(1)) <= 33, text)
        self.assertIn("slower than A by more than 5 %", p.stderr.decode())
        self.assertEqual(diff("--fail-above", "50", self.base[0], self.slow).returncode, 0)

    def test_html(self):
        page = os.path.join(self.tmp, "diff.html")
        p = diff("--html", page, self.base[0], self.slow)
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
        self.assertEqual(diff(self.base[0]).returncode, 2)
        self.assertEqual(diff("--fail-above", "x", self.base[0], self.slow).returncode, 2)
        self.assertEqual(diff("--alpha", "2", self.base[0], self.slow).returncode, 2)
        p = diff(self.base[0], os.path.join(self.tmp, "nothing-here"))
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"no report and no recording", p.stderr)


if __name__ == "__main__":
    unittest.main()
