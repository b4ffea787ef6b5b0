"""The Profiler (after mindspore.Profiler, for CUDA and CPU) and the event calls."""

import atexit
import ctypes
import functools
import json
import os
import warnings
import signal
import subprocess
import threading
import weakref

from . import _lib

__all__ = [
    "Profiler",
    "TermsightError",
    "TermsightOptionError",
    "Queue",
    "step",
    "range",
    "queue",
    "mark",
    "counter",
    "thread_name",
    "analyse",
    "op_analyse",
]

_builtin_range = range


class TermsightError(RuntimeError):
    """A failing library call or termsight command; .code is the termsight_error (negative),
    or None for the command."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = code


class TermsightOptionError(TermsightError, ValueError):
    """The library refused an option (TERMSIGHT_E_INVALID): both a RuntimeError and a
    ValueError."""


# mindspore.Profiler's keywords that only mean something on Ascend; refused with a message.
ASCEND_ONLY = ("aicore_metrics", "l2_cache", "parallel_strategy", "hbm_ddr", "pcie")

_DEFAULTS = {
    "output_path": "./data",
    "start_profile": True,
    "op_time": True,
    "profile_memory": False,
    "profile_communication": False,
    "data_process": True,
    "timeline_limit": 500,
    "profile_framework": "all",
    "sync_enable": True,
    "sample_ms": None,
    "lane_events": None,
    "lane_budget_mb": None,
    "flight_mb": None,
    "max_threads": None,
    "fp_start_op": None,
    "bp_end_op": None,
    "process_name": None,
    "job": None,
    "rank": None,
    "local_rank": None,
    "world_size": None,
}
_BOOLS = ("start_profile", "op_time", "profile_memory", "profile_communication",
          "data_process", "sync_enable")
_FRAMEWORK = ("all", "time", "memory", None)


# Profilers whose session is open, closed at interpreter exit (atexit): a script that does not
# use `with` and is ended by Ctrl-C (Python then re-raises SIGINT to die by it, so the library's
# own exit handler never runs) still flushes its recording and removes its segment.
_open_profilers = weakref.WeakSet()


def _close_at_exit():
    for p in list(_open_profilers):
        if getattr(p, "_pid", None) != os.getpid():
            continue  # a forked child's copy: the session is its parent's
        try:
            p.close()
        except Exception:  # noqa: BLE001 -- at exit, nothing is left to tell
            pass


atexit.register(_close_at_exit)


# SIGTERM and SIGHUP (a closed SSH session) end a Python program at once where it leaves them
# at their default, with no atexit: the first Profiler made in the main thread puts a handler
# there that closes the open Profilers (flush, recording finished, segment removed) and then
# dies by the same signal with the default action, so the program ends exactly as it would have
# (status -15). Where the program has a handler of its own (or ignores the signal) nothing is
# installed, and a handler it installs later replaces this one. Forked children (DataLoader
# workers) get the default back: their Profilers are their parent's.
_CLOSE_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))
_signal_state = {"pid": None, "signals": ()}


def _close_and_die(signum, _frame):
    """Closes the open Profilers, then ends the process by signum's default action."""
    if os.getpid() == _signal_state["pid"]:
        _close_at_exit()
    try:
        signal.signal(signum, signal.SIG_DFL)
    except (ValueError, OSError):  # pragma: no cover (not the main thread: cannot happen)
        pass
    os.kill(os.getpid(), signum)


def _default_in_child():
    for sig in _signal_state["signals"]:
        try:
            if signal.getsignal(sig) is _close_and_die:
                signal.signal(sig, signal.SIG_DFL)
        except (ValueError, OSError):
            pass


def _close_on_signals():
    if _signal_state["pid"] == os.getpid():
        return
    if threading.current_thread() is not threading.main_thread():
        return  # signal.signal works only there; a later Profiler made there installs it
    installed = []
    for sig in _CLOSE_SIGNALS:
        try:
            if signal.getsignal(sig) is signal.SIG_DFL:
                signal.signal(sig, _close_and_die)
                installed.append(sig)
        except (ValueError, OSError):
            continue
    first = _signal_state["pid"] is None
    _signal_state["pid"] = os.getpid()
    _signal_state["signals"] = tuple(installed)
    if first and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_default_in_child)


def _raise(code, what):
    """Turns a failing control call into an exception with the library's message."""
    lib = _lib.load()
    msg = lib.termsight_last_error()
    msg = msg.decode("utf-8", "replace") if msg else ""
    if not msg:
        s = lib.termsight_strerror(code)
        msg = "%s: %s" % (what, s.decode("utf-8", "replace") if s else "error %d" % code)
    cls = TermsightOptionError if code == _lib.E_INVALID else TermsightError
    raise cls(msg, code)


def _bytes(value, what, nul_ok=False):
    """str (UTF-8, lone surrogates kept as their bytes) or bytes -> bytes."""
    if isinstance(value, bytes):
        b = value
    elif isinstance(value, str):
        b = value.encode("utf-8", "surrogateescape")
    elif isinstance(value, os.PathLike):
        b = os.fsencode(value)
    else:
        raise TypeError("%s must be str or bytes, not %s" % (what, type(value).__name__))
    if not nul_ok and b"\0" in b:
        raise ValueError("%s must not contain a NUL byte" % what)
    return b


def _name_id(lib, value, what):
    b = _bytes(value, what, nul_ok=True)
    return lib.termsight_name_n(b, len(b))


def _uint(value, what, lo, hi):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("%s must be an int, not %s" % (what, type(value).__name__))
    if not lo <= value <= hi:
        raise ValueError("%s=%d is out of range: %d to %d" % (what, value, lo, hi))
    return value


# ---- event calls (process-wide: the library has one session per process) -------------------


class _Step:
    """termsight_step_begin/end around a block (`with step() as n:`) or a function (@step())."""

    __slots__ = ("_lib", "number")

    def __init__(self, lib):
        self._lib = lib
        self.number = None
        _lib.explicit_steps = True  # the program marks its steps: torch.auto() stands back

    def __enter__(self):
        self.number = self._lib.termsight_step_begin()
        return self.number

    def __exit__(self, *exc):
        self._lib.termsight_step_end()
        return False

    def __call__(self, func):
        lib = self._lib

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            lib.termsight_step_begin()
            try:
                return func(*args, **kwargs)
            finally:
                lib.termsight_step_end()

        return wrapper


class _Range:
    """termsight_range_begin/end around a block or a function."""

    __slots__ = ("_lib", "_name", "_type", "_enabled")

    def __init__(self, lib, name, type_, enabled=True):
        self._lib = lib
        self._name = _bytes(name, "name", nul_ok=True) if name is not None else None
        self._type = _bytes(type_, "type", nul_ok=True) if type_ is not None else None
        self._enabled = enabled

    def _begin(self, name):
        lib = self._lib
        n = lib.termsight_name_n(name, len(name))
        t = lib.termsight_name_n(self._type, len(self._type)) if self._type is not None else 0
        lib.termsight_range_begin_id(n, t)

    def __enter__(self):
        if self._name is None:
            raise TypeError("range() as a context manager needs a name")
        if self._enabled:
            self._begin(self._name)
        return self

    def __exit__(self, *exc):
        if self._enabled:
            self._lib.termsight_range_end()
        return False

    def __call__(self, func):
        name = self._name
        if name is None:
            name = getattr(func, "__qualname__", getattr(func, "__name__", "function"))
            name = name.encode("utf-8", "surrogateescape")
        lib, enabled, begin = self._lib, self._enabled, self._begin

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            if not enabled:
                return func(*args, **kwargs)
            begin(name)
            try:
                return func(*args, **kwargs)
            finally:
                lib.termsight_range_end()

        return wrapper


class Queue:
    """A registered bounded queue; size(n) records its current length."""

    __slots__ = ("_lib", "handle", "name", "capacity", "_enabled")

    def __init__(self, lib, handle, name, capacity, enabled=True):
        self._lib = lib
        self.handle = handle
        self.name = name
        self.capacity = capacity
        self._enabled = enabled

    def size(self, n):
        if self._enabled:
            self._lib.termsight_queue_size(self.handle, _uint(n, "size", 0, 2**64 - 1))

    def __repr__(self):
        return "<termsight.Queue %r capacity=%d>" % (self.name, self.capacity)


def step():
    """A step: `with termsight.step() as n:` (n is the step's number) or `@termsight.step()`."""
    return _Step(_lib.load())


def range(name=None, type=None):  # noqa: A001 (mindspore.Profiler's name)
    """An operator range: `with termsight.range("MatMul-op1", "MatMul"):` or
    `@termsight.range()` (the function's qualified name). type None: derived from the name
    by the analysis (`Default/net/Conv2D-op11` is `Conv2D`)."""
    return _Range(_lib.load(), name, type)


def queue(name, capacity, role="pipeline", producer=None, consumer=None, _enabled=True):
    """Registers a bounded queue (role "pipeline", "host" or "device"; producer and consumer
    name the stages that fill and drain it) and returns a Queue; RuntimeError when no session
    exists or 256 queues are registered already."""
    lib = _lib.load()
    nb = _bytes(name, "name")
    cap = _uint(capacity, "capacity", 1, 2**64 - 1)
    if role not in _lib.QUEUE_ROLES:
        raise ValueError("role must be one of %s, not %r" % (", ".join(_lib.QUEUE_ROLES), role))
    pb = _bytes(producer, "producer") if producer is not None else None
    cb = _bytes(consumer, "consumer") if consumer is not None else None
    h = lib.termsight_queue_register(nb, cap, _lib.QUEUE_ROLES[role], pb, cb)
    if not h:
        if not lib.termsight_session_current():
            raise TermsightError("queue %r: no profiler session" % (name,), _lib.E_NO_SESSION)
        raise TermsightError("queue %r: the queue table is full (256 queues)" % (name,))
    return Queue(lib, h, name, cap, _enabled)


def mark(text):
    """An instant with a text, shown on the timeline."""
    _lib.load().termsight_mark(_bytes(text, "text"))


def counter(name, value):
    """A counter sample (a number over time: loss, learning rate, ...)."""
    lib = _lib.load()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError("counter value must be a number, not %s" % type(value).__name__)
    lib.termsight_counter_id(_name_id(lib, name, "name"), float(value))


def thread_name(name):
    """Names the calling thread in every view."""
    _lib.load().termsight_thread_name(_bytes(name, "name"))


# ---- analysis through the termsight command ---------------------------------------------


def _run_cli(args):
    cli = _lib.find_cli()
    p = subprocess.run([cli] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = p.stdout.decode("utf-8", "replace")
    err = p.stderr.decode("utf-8", "replace").strip()
    if p.returncode != 0:
        raise TermsightError(err or "termsight %s: exit status %d" % (args[0], p.returncode))
    return out, err


def _path(value, what):
    if not isinstance(value, (str, bytes, os.PathLike)):
        raise TypeError("%s must be a path (str), not %s" % (what, type(value).__name__))
    return os.fsdecode(value)


def analyse(path, pretty=False):
    """Runs `termsight analyse [--pretty] PATH` (a run folder, its recording/ folder or the
    events.tsr file) and returns the report folder's path. RuntimeError (TermsightError) with the
    command's message when it fails."""
    path = _path(path, "path")
    if not isinstance(pretty, bool):
        raise TypeError("pretty must be a bool, not %s" % type(pretty).__name__)
    out, _ = _run_cli(["analyse"] + (["--pretty"] if pretty else []) + ["--", path])
    for line in out.splitlines():
        if line.startswith("report:"):
            return line[len("report:"):].strip()
    return os.path.join(path, "report")


def _op_row(row):
    """One row of `analyse --op NAME --json` (microseconds) as op_analyse's dict (milliseconds,
    MindSpore's op_analyse), with self_ms too."""
    out = {"count": int(row["count"])}
    for k in ("total", "self", "avg", "min", "max"):
        out[k + "_ms"] = row[k + "_us"] / 1000.0
    out["share_pct"] = row["share_pct"]
    return out


def _parse_op(text):
    data = json.loads(text)
    result = {"type": data["type"]["type"]}
    result.update(_op_row(data["type"]))
    result["ops"] = [dict(op=o["op"], **_op_row(o)) for o in data["ops"]]
    return result


def op_analyse(path, op_name):
    """`termsight analyse --op NAME --json PATH`, read: a dict with the op type's `type`,
    `count`, `total_ms`, `self_ms`, `avg_ms`, `min_ms`, `max_ms`, `share_pct` (of all ops' self
    time) and `ops`, a list of dicts with the same figures per op (`op` its name). op_name is a type name
    (case-insensitive; a unique substring will do) or a list of them: then a dict from each name
    to its dict. RuntimeError (TermsightError) with the command's message for an unknown type."""
    path = _path(path, "path")
    if isinstance(op_name, (list, tuple)):
        if not all(isinstance(n, str) for n in op_name):
            raise TypeError("op_name must be a str or a list of str")
        return {n: op_analyse(path, n) for n in op_name}
    if not isinstance(op_name, str):
        raise TypeError("op_name must be a str or a list of str, not %s" % type(op_name).__name__)
    out, _ = _run_cli(["analyse", "--op=" + op_name, "--json", "--", path])
    return _parse_op(out)


# ---- the Profiler ---------------------------------------------------------------------------


class Profiler:
    """The profiler session of this process (one at a time), after mindspore.Profiler.

    Keyword arguments (all optional):

    output_path="./data"  parent of the run folders (TERMSIGHT_OUTPUT when not given and set).
    start_profile=True    collect from construction; False: wait for start() (or `termsight top`).
    op_time=True          record range() operator ranges; False makes range() a no-op.
    profile_memory=False  accepted; host memory is sampled and device allocations are traced
                          (CUDA) whatever its value. Needs op_time=True, as in MindSpore.
    profile_communication=False  accepted; NCCL-like kernels are recognized whatever its value.
                          Needs op_time=True, as in MindSpore.
    data_process=True     record queue sizes; False makes Queue.size() a no-op.
    timeline_limit=500    the timeline's size limit in MiB (options.timeline_limit_mb).
    profile_framework="all"  "all", "time", "memory" or None; accepted, checked, no effect: the
                          host's time and memory are always recorded.
    sync_enable=True      GPU-only in MindSpore; accepted, no effect (CUPTI gives device times).
    sample_ms=None        CPU and memory sampling interval (options.sample_interval_ms).
    lane_events=None      the most events a thread's ring grows to (options.lane_events).
    lane_budget_mb=None   MiB the grown rings may take; 0: rings never grow.
    flight_mb=None        the flight recorder: MiB that keep the last events, no recording;
                          snapshot() writes them (docs/usage.md, Flight recorder). 0: off.
    max_threads, fp_start_op, bp_end_op, process_name: the options of the same name.
    job, rank, local_rank, world_size  the training job this process is a rank of; None: from
                          the launcher's environment (torchrun, Slurm, Open MPI, TERMSIGHT_JOB).
                          Set rank and world_size when ranks are started without those variables
                          (torch.multiprocessing.spawn). See docs/jobs.md.

    The Ascend-only keywords (aicore_metrics, l2_cache, parallel_strategy, hbm_ddr, pcie) raise
    ValueError; any other keyword raises TypeError. Arguments not given keep the library's
    defaults and the TERMSIGHT_* environment variables.
    """

    def __init__(self, **kwargs):
        unknown = [k for k in kwargs if k not in _DEFAULTS]
        ascend = [k for k in unknown if k in ASCEND_ONLY]
        if ascend:
            raise ValueError(
                "Profiler: %s %s Ascend-only (MindSpore on Ascend NPUs); termsight profiles "
                "CUDA and CPU and does not take %s" % (
                    ", ".join(ascend), "is" if len(ascend) == 1 else "are",
                    "it" if len(ascend) == 1 else "them"))
        if unknown:
            raise TypeError("Profiler() got an unexpected keyword argument %r" % unknown[0])
        a = dict(_DEFAULTS)
        a.update(kwargs)
        for k in _BOOLS:
            if not isinstance(a[k], bool):
                raise TypeError("%s must be a bool, not %s" % (k, type(a[k]).__name__))
        if a["profile_framework"] not in _FRAMEWORK:
            raise ValueError("profile_framework must be one of 'all', 'time', 'memory' or None, "
                             "not %r" % (a["profile_framework"],))
        for k in ("profile_memory", "profile_communication"):
            if a[k] and not a["op_time"]:
                raise ValueError("%s=True needs op_time=True" % k)

        self._session = None
        self._run_folder = None
        self._closed = False
        self._op_time = a["op_time"]
        self._data_process = a["data_process"]

        keep = []  # the bytes objects the options point to, alive until create returns
        lib = _lib.load()
        opts = _lib.Options()
        lib.termsight_options_init(ctypes.byref(opts))
        if "output_path" in kwargs or not os.environ.get("TERMSIGHT_OUTPUT"):
            keep.append(_bytes(_path(a["output_path"], "output_path"), "output_path"))
            opts.output_path = keep[-1]
        if "start_profile" in kwargs:
            opts.start_collecting = 1 if a["start_profile"] else 0
        if "timeline_limit" in kwargs:
            opts.timeline_limit_mb = _uint(a["timeline_limit"], "timeline_limit", 1, 2**32 - 1)
        for key, field in (("sample_ms", "sample_interval_ms"), ("lane_events", "lane_events"),
                           ("max_threads", "max_threads"), ("lane_budget_mb", "lane_budget_mb"),
                           ("flight_mb", "flight_mb")):
            if a[key] is not None:
                setattr(opts, field, _uint(a[key], key, 0, 2**32 - 1))
        for key, low in (("rank", 0), ("local_rank", 0), ("world_size", 1)):
            if a[key] is not None:
                setattr(opts, key, _uint(a[key], key, low, 2**31 - 1))
        for key in ("fp_start_op", "bp_end_op", "process_name", "job"):
            if a[key] is not None:
                keep.append(_bytes(a[key], key))
                setattr(opts, key, keep[-1])

        self._lib = lib
        self._off = None
        handle = ctypes.c_void_p()
        rc = lib.termsight_session_create(ctypes.byref(opts), ctypes.byref(handle))
        if rc in (_lib.E_SYSTEM, _lib.E_RECORDING):
            # The system refused what a session needs (shared memory, a thread): the training
            # must run all the same. Said once; this Profiler then does nothing.
            self._off = lib.termsight_last_error().decode("utf-8", "replace")
            warnings.warn("termsight: profiling is off: %s (the program runs on unprofiled)"
                          % self._off, RuntimeWarning, stacklevel=2)
            return
        if rc != _lib.OK:
            _raise(rc, "Profiler")
        self._session = handle.value
        self._pid = os.getpid()
        _open_profilers.add(self)
        _close_on_signals()
        self._remember_folder()
        _lib.register_stacks(lib, self._session)
        if lib.termsight_flight(self._session):
            _lib.adopt_flight_signal()

    # -- state --

    def _remember_folder(self):
        if self._session:
            f = self._lib.termsight_run_folder(self._session)
            if f:
                self._run_folder = os.fsdecode(f)

    @property
    def off(self):
        """Why profiling is off (a string), or None: a Profiler whose session the system refused
        warns once and then does nothing, so that the training runs on."""
        return self._off

    def _handle(self, what):
        if self._session is None:
            raise TermsightError("%s: this Profiler is closed" % what, _lib.E_NO_SESSION)
        return self._session

    @property
    def run_folder(self):
        """The run folder (recording/ and, after analyse, report/); kept after close()."""
        self._remember_folder()
        return self._run_folder

    @property
    def state(self):
        """"idle", "collecting", "stopped", "closed" after close(), or "off"."""
        if self._off is not None:
            return "off"
        if self._session is None:
            return "closed"
        return self._lib.termsight_state(self._session).decode()

    @property
    def events_recorded(self):
        if self._off is not None:
            return 0
        return self._lib.termsight_events_recorded(self._handle("events_recorded"))

    @property
    def events_dropped(self):
        if self._off is not None:
            return 0
        return self._lib.termsight_events_dropped(self._handle("events_dropped"))

    # -- control (each does nothing when profiling is off) --

    def start(self):
        """Opens a collection window; RuntimeError while collecting."""
        if self._off is not None:
            return
        rc = self._lib.termsight_start(self._handle("start"))
        if rc != _lib.OK:
            _raise(rc, "start")
        self._remember_folder()

    def stop(self):
        """Closes the window (what was emitted before is recorded); RuntimeError when not
        collecting."""
        if self._off is not None:
            return
        rc = self._lib.termsight_stop(self._handle("stop"))
        if rc != _lib.OK:
            _raise(rc, "stop")

    def flush(self):
        """Writes everything emitted so far to the recording and syncs it."""
        if self._off is not None:
            return
        rc = self._lib.termsight_flush(self._handle("flush"))
        if rc != _lib.OK:
            _raise(rc, "flush")

    def snapshot(self, why=None):
        """Flight recorder (flight_mb): writes the events kept as a recording under the run
        folder's snapshots/ (why, when given, is kept in it)."""
        if self._off is not None:
            return
        rc = self._lib.termsight_snapshot(self._handle("snapshot"),
                                          _bytes(why, "why") if why is not None else None)
        if rc != _lib.OK:
            _raise(rc, "snapshot")

    def close(self):
        """Stops collecting if needed, flushes and ends the session; a second call does
        nothing. The run folder stays readable (run_folder, analyse())."""
        if self._session is None:
            return
        self._remember_folder()
        s, self._session = self._session, None
        _open_profilers.discard(self)
        rc = self._lib.termsight_session_destroy(s)
        if rc != _lib.OK:
            _raise(rc, "close")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        return "<termsight.Profiler %s %s>" % (self.state, self._run_folder)

    # -- analysis --

    def _folder_for_analysis(self, what):
        if self._session is not None and self.state == "collecting":
            self.flush()
        folder = self.run_folder
        if not folder or not os.path.isdir(os.path.join(folder, "recording")):
            raise TermsightError("%s: nothing recorded yet (the run folder is made when the first "
                                 "collection window opens)" % what)
        return folder

    def analyse(self, offline_path=None, pretty=False):
        """Writes the report folder and returns its path: of this session's run (flushed first
        when collecting; collection goes on), or of offline_path (a run folder, recording/ or
        events.tsr, e.g. of a run that crashed). None when profiling was off."""
        if offline_path is None and self._off is not None:
            return None
        if offline_path is None:
            if not isinstance(pretty, bool):
                raise TypeError("pretty must be a bool, not %s" % type(pretty).__name__)
            offline_path = self._folder_for_analysis("analyse")
        return analyse(offline_path, pretty)

    def op_analyse(self, op_name, device_id=None):
        """One op type's statistics (see termsight.op_analyse) for this session's run.
        device_id: None or an int, accepted as MindSpore's and not used (host operators)."""
        if device_id is not None and (isinstance(device_id, bool)
                                      or not isinstance(device_id, int)):
            raise TypeError("device_id must be an int, not %s" % type(device_id).__name__)
        if not isinstance(op_name, (str, list, tuple)):
            raise TypeError("op_name must be a str or a list of str, not %s"
                            % type(op_name).__name__)
        if self._off is not None:
            return None
        return op_analyse(self._folder_for_analysis("op_analyse"), op_name)

    # -- events (process-wide; methods for convenience) --

    def step(self):
        """See termsight.step()."""
        return _Step(self._lib)

    def range(self, name=None, type=None):  # noqa: A003
        """See termsight.range(); a no-op with op_time=False."""
        return _Range(self._lib, name, type, self._op_time)

    def queue(self, name, capacity, role="pipeline", producer=None, consumer=None):
        """See termsight.queue(); sizes are not recorded with data_process=False."""
        if self._off is not None:  # sizes are not recorded: no session
            return Queue(self._lib, 0, name, _uint(capacity, "capacity", 1, 2**64 - 1), False)
        return queue(name, capacity, role, producer, consumer, _enabled=self._data_process)

    def mark(self, text):
        mark(text)

    def counter(self, name, value):
        counter(name, value)

    def thread_name(self, name):
        thread_name(name)


del _builtin_range
