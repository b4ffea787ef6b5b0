"""Python programs under `termsight run`: the profiler must be invisible to them.

Reproduced before: the collector installed a C handler for SIGTERM and SIGINT, so
signal.getsignal() returned None, multiprocessing's forkserver workers died restoring it
("TypeError: signal handler must be ...") and the Pool respawned them without end (736
tracebacks in 30 s), and Ctrl-C no longer raised KeyboardInterrupt.

Environment: TERMSIGHT_BIN (the termsight command), TERMSIGHT_TEST_TMP (a folder for temporary
files; else the system's). Standard library only.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

PROGRAM = textwrap.dedent("""
    import multiprocessing as mp
    import signal
    import sys

    def square(x):
        return x * x

    if __name__ == "__main__":
        seen = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
        if seen[signal.SIGTERM] is not signal.SIG_DFL:
            sys.exit("SIGTERM handler is %r, not SIG_DFL" % (seen[signal.SIGTERM],))
        if seen[signal.SIGINT] is not signal.default_int_handler:
            sys.exit("SIGINT handler is %r, not Python's" % (seen[signal.SIGINT],))
        method = sys.argv[1]
        ctx = mp.get_context(method)
        with ctx.Pool(2) as pool:
            got = pool.map_async(square, range(40)).get(timeout=60)
        if got != [x * x for x in range(40)]:
            sys.exit("wrong results %r" % (got,))
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            print("ok", method)
        else:
            sys.exit("SIGINT did not raise KeyboardInterrupt")
""")


class RunPython(unittest.TestCase):
    def setUp(self):
        base = os.environ.get("TERMSIGHT_TEST_TMP") or None
        if base:
            os.makedirs(base, exist_ok=True)
        self.tmp = tempfile.mkdtemp(prefix="runpython-", dir=base)
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.script = os.path.join(self.tmp, "pool.py")
        with open(self.script, "w") as f:
            f.write(PROGRAM)

    def run_method(self, method):
        cmd = [os.environ["TERMSIGHT_BIN"], "run", "-o", os.path.join(self.tmp, "out"), "--",
               sys.executable, self.script, method]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120,
                           cwd=self.tmp)
        err = p.stderr.decode("utf-8", "replace")
        self.assertEqual(p.returncode, 0, "%s: exit %d\n%s" % (method, p.returncode, err))
        self.assertEqual(p.stdout.decode().strip(), "ok " + method)
        self.assertNotIn("Traceback", err)
        self.assertIn("termsight: run folder ", err)

    def test_fork(self):
        self.run_method("fork")

    def test_spawn(self):
        self.run_method("spawn")

    def test_forkserver(self):
        self.run_method("forkserver")


if __name__ == "__main__":
    unittest.main()
