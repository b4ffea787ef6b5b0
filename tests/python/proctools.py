"""What the Python tests share about the processes they start: a temporary folder, an environment
without the caller's TERMSIGHT_* settings, and the end of a process group (SIGTERM, then
SIGKILL)."""

import os
import signal
import subprocess
import tempfile


def make_tmp(prefix):
    """A new folder under TERMSIGHT_TEST_TMP (the system's temporary folder when unset); the
    caller removes it."""
    base = os.environ.get("TERMSIGHT_TEST_TMP") or None
    if base:
        os.makedirs(base, exist_ok=True)
    return tempfile.mkdtemp(prefix=prefix, dir=base)


def clean_env(**more):
    """os.environ without TERMSIGHT_* (but the command and library the test names), plus more."""
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("TERMSIGHT_") and k not in ("TERMSIGHT_BIN", "TERMSIGHT_LIB"):
            del env[k]
    env.update(more)
    return env


def end_group(p, grace=30):
    """Ends p, started with start_new_session, and its group: SIGTERM first (termsight run
    removes what its program's session left, Dask's processes close and their resource tracker
    removes their semaphores from /dev/shm), SIGKILL after grace seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            break
        try:
            p.communicate(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue
    p.communicate(timeout=30)
