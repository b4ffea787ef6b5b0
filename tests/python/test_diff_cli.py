"""termsight diff's command line on reports written here (no runs): an argument that is not a
run folder, a job folder or a recording is named as given, with what is wrong with it (before,
`diff A /etc/passwd` spoke of /etc); progress goes to stderr when it is a terminal, and nothing
does when it is not.

Environment: TERMSIGHT_BIN, TERMSIGHT_TEST_TMP. Each command bounded by a timeout; the folders
(a few MB) removed."""

import os
import pty
import shutil
import subprocess
import unittest

from proctools import make_tmp

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.path.abspath(os.environ.get("TERMSIGHT_BIN")
                      or os.path.join(HERE, "..", "..", "build", "cli", "termsight"))
STEPS = 70000  # past the 65,536 rows between two progress lines


def write_run(run, steps):
    rep = os.path.join(run, "report")
    os.makedirs(rep)
    with open(os.path.join(rep, "step_trace.csv"), "w") as t, \
            open(os.path.join(rep, "step_ops.csv"), "w") as o:
        t.write("step,total_us,interval_us,compute_us,tail_us\n")
        o.write("step,op,type,count,total_us\n")
        for i in range(1, steps + 1):
            mm = 1000 + i % 101
            t.write("%d,%d,100,%d,50\n" % (i, 150 + mm, mm))
            o.write("%d,m,MatMul,1,%d\n" % (i, mm))


def diff(*args):
    return subprocess.run([BIN, "diff"] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=60)


class DiffCli(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = make_tmp("diffcli-")
        cls.a, cls.b = os.path.join(cls.tmp, "a"), os.path.join(cls.tmp, "b")
        write_run(cls.a, STEPS)
        write_run(cls.b, STEPS)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, True)

    def test_what_was_given_is_named(self):
        empty = os.path.join(self.tmp, "empty")
        os.makedirs(empty, exist_ok=True)
        for given, wrong in (("/etc/passwd", "a file, not a run folder"),
                             (os.path.join(self.tmp, "none"), "no such file or folder, so no report and no recording"),
                             ("/dev/null", "neither a folder nor a file"),
                             (empty, "has no report and no recording")):
            r = diff(self.a, given)
            err = r.stderr.decode(errors="replace")
            self.assertEqual(r.returncode, 1, err)
            self.assertIn(given, err)
            self.assertIn(wrong, err)
            self.assertNotIn("/etc has", err)
            self.assertEqual(r.stdout, b"")

    def test_progress_on_a_terminal_only(self):
        r = diff(self.a, self.b)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, b"")  # not a terminal: nothing
        self.assertIn(b"MatMul", r.stdout)
        master, slave = pty.openpty()
        try:
            p = subprocess.Popen([BIN, "diff", self.a, self.b], stdout=subprocess.DEVNULL,
                                 stderr=slave)
            os.close(slave)
            said = b""
            while True:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # the terminal's other side closed
                    break
                if not chunk:
                    break
                said += chunk
            self.assertEqual(p.wait(timeout=60), 0)
        finally:
            os.close(master)
        self.assertIn(b"termsight: diff: reading A's steps: 65536", said)
        self.assertIn(b"comparing rows", said)
        self.assertTrue(said.endswith(b"\r\x1b[K"), said[-40:])  # the line cleared at the end


if __name__ == "__main__":
    unittest.main()
