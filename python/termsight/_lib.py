"""Finding and loading libtermsight.so and the termsight command, and the ctypes prototypes.

Nothing here runs at import time: the library is loaded on first use, so `import termsight`
never fails; constructing a Profiler when the library cannot be found raises RuntimeError
naming every place that was tried.
"""

import atexit
import ctypes
import ctypes.util
import os
import shutil
import threading

LIB_NAME = "libtermsight.so"
LIB_SONAME = "libtermsight.so.0"  # an installed library, by the name the loader knows it by
TORCH_HOOK_NAME = "libtermsight-torch.so"
BIN_NAME = "termsight"

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
# <repo>/python/termsight -> <repo>
_REPO_DIR = os.path.dirname(os.path.dirname(_PACKAGE_DIR))

# termsight_error codes (include/termsight/termsight.h)
OK = 0
E_INVALID = -1
E_NO_SESSION = -2
E_SESSION_EXISTS = -3
E_ALREADY_COLLECTING = -4
E_NOT_COLLECTING = -5
E_SYSTEM = -6
E_RECORDING = -7
E_TIMEOUT = -8

QUEUE_ROLES = {"pipeline": 0, "host": 1, "device": 2}


class Options(ctypes.Structure):
    """struct termsight_options, field for field."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("output_path", ctypes.c_char_p),
        ("start_collecting", ctypes.c_int),
        ("lane_events", ctypes.c_uint32),
        ("max_threads", ctypes.c_uint32),
        ("sample_interval_ms", ctypes.c_uint32),
        ("timeline_limit_mb", ctypes.c_uint32),
        ("fp_start_op", ctypes.c_char_p),
        ("bp_end_op", ctypes.c_char_p),
        ("process_name", ctypes.c_char_p),
        ("job", ctypes.c_char_p),
        ("rank", ctypes.c_int32),
        ("local_rank", ctypes.c_int32),
        ("world_size", ctypes.c_int32),
        ("lane_budget_mb", ctypes.c_uint32),
        ("flight_mb", ctypes.c_uint32),
    ]


_P = ctypes.c_void_p
_S = ctypes.c_char_p
_U32 = ctypes.c_uint32
_U64 = ctypes.c_uint64
_PROTOTYPES = {
    # name: (restype, argtypes)
    "termsight_strerror": (_S, [ctypes.c_int]),
    "termsight_last_error": (_S, []),
    "termsight_options_init": (None, [ctypes.POINTER(Options)]),
    "termsight_session_create": (ctypes.c_int, [ctypes.POINTER(Options), ctypes.POINTER(_P)]),
    "termsight_start": (ctypes.c_int, [_P]),
    "termsight_stop": (ctypes.c_int, [_P]),
    "termsight_flush": (ctypes.c_int, [_P]),
    "termsight_snapshot": (ctypes.c_int, [_P, _S]),
    "termsight_cuda_lend": (ctypes.c_int, [ctypes.c_int]),
    "termsight_session_destroy": (ctypes.c_int, [_P]),
    "termsight_session_current": (_P, []),
    "termsight_state": (_S, [_P]),
    "termsight_run_folder": (_S, [_P]),
    "termsight_flight": (ctypes.c_int, [_P]),
    "termsight_flight_signal": (ctypes.c_int, [ctypes.c_int]),
    "termsight_events_recorded": (_U64, [_P]),
    "termsight_events_dropped": (_U64, [_P]),
    "termsight_now_ns": (_U64, []),
    "termsight_name": (_U32, [_S]),
    "termsight_name_n": (_U32, [_S, ctypes.c_size_t]),
    "termsight_range_begin": (None, [_S, _S]),
    "termsight_range_begin_id": (None, [_U32, _U32]),
    "termsight_range_end": (None, []),
    "termsight_range_drop": (None, []),
    "termsight_range_flops": (None, [_U64]),
    "termsight_range_complete": (None, [_U32, _U32, _U64, _U64, _U64]),
    "termsight_comm_complete": (None, [_U32, _U32, _U64, _U64, _U64]),
    "termsight_comm_issue": (_U64, [_U32, _U64]),
    "termsight_comm_done": (None, [_U64]),
    "termsight_stacks_signal": (ctypes.c_int, [ctypes.c_int]),
    "termsight_stacks_file": (ctypes.c_int, [_P]),
    "termsight_step_begin": (_U64, []),
    "termsight_step_end": (None, []),
    "termsight_phase_mark": (None, [ctypes.c_int]),
    "termsight_queue_register": (_U32, [_S, _U64, ctypes.c_int, _S, _S]),
    "termsight_queue_size": (None, [_U32, _U64]),
    "termsight_counter": (None, [_S, ctypes.c_double]),
    "termsight_counter_id": (None, [_U32, ctypes.c_double]),
    "termsight_mark": (None, [_S]),
    "termsight_memory_alloc": (None, [_S, _U64, _U64, ctypes.c_int]),
    "termsight_memory_free": (None, [_U64, _U64, ctypes.c_int]),
    "termsight_thread_name": (None, [_S]),
    "termsight_process_name": (None, [_U32, _S]),
}

# Set once the program marks steps itself (termsight.step(), Profiler.step(),
# termsight.torch.steps()): termsight.torch.auto() then leaves the steps to it.
explicit_steps = False

_lock = threading.Lock()
_lib = None
_lib_path = None


def _candidates():
    """(description, path or name) in the order they are tried, made as they are tried: the
    last, ctypes.util.find_library, runs programs (ldconfig, gcc), which only a library found
    nowhere else is worth (under `termsight run` each would be profiled too)."""
    env = os.environ.get("TERMSIGHT_LIB")
    if env:
        # An explicit choice is the only one tried: a wrong TERMSIGHT_LIB is an error, not a
        # reason to load some other build.
        yield ("TERMSIGHT_LIB", env)
        return
    out = []
    # Under `termsight run` the library is already in the process (LD_PRELOAD): that copy, whose
    # session autostart made, is the one to talk to.
    if os.environ.get("TERMSIGHT_AUTOSTART") == "1":
        for entry in os.environ.get("LD_PRELOAD", "").replace(" ", ":").split(":"):
            if os.path.basename(entry).startswith(LIB_NAME) and os.sep in entry:
                out.append(("preloaded by termsight run", entry))
    out += [
        ("next to the package", os.path.join(_PACKAGE_DIR, LIB_NAME)),
        ("the build tree", os.path.join(_REPO_DIR, "build", "collectors", LIB_NAME)),
    ]
    yield from out
    # Installed (the Debian package, cmake --install): by its SONAME, where the dynamic loader
    # looks (its cache, LD_LIBRARY_PATH).
    yield ("the loader's search path", LIB_SONAME)
    yield ("ctypes.util.find_library('termsight')", ctypes.util.find_library("termsight"))


def _mapped_files():
    """The files mapped into this process, from /proc/self/maps (OSError when unreadable)."""
    with open("/proc/self/maps") as f:
        return [parts[5].strip() for parts in (line.split(None, 5) for line in f)
                if len(parts) == 6]


def _mapped(name):
    """The file a library loaded by name came from (the loader chose it); the name itself when
    it cannot be told."""
    try:
        for path in _mapped_files():
            base = os.path.basename(path)
            if base == name or base.startswith(name + "."):
                return path
    except OSError:
        pass
    return name


def load():
    """The loaded library (a ctypes.CDLL); RuntimeError naming where it looked if none loads."""
    global _lib, _lib_path
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for what, path in _candidates():
            if not path:
                tried.append("%s: nothing found" % what)
                continue
            if os.sep in path and not os.path.exists(path):
                tried.append("%s: %s does not exist" % (what, path))
                continue
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                tried.append("%s: %s (%s)" % (what, path, e))
                continue
            missing = [n for n in _PROTOTYPES if not hasattr(lib, n)]
            if missing:
                tried.append("%s: %s lacks %s" % (what, path, ", ".join(missing[:3])))
                continue
            for name, (res, args) in _PROTOTYPES.items():
                fn = getattr(lib, name)
                fn.restype = res
                fn.argtypes = args
            _lib, _lib_path = lib, os.path.abspath(path) if os.sep in path else _mapped(path)
            return lib
        raise RuntimeError(
            "termsight: cannot load %s; looked at: %s. Build it (cmake --build build) or set "
            "TERMSIGHT_LIB to its path." % (LIB_NAME, "; ".join(tried))
        )


_TORCH_HOOK_PROTOTYPES = {
    "termsight_torch_install": (ctypes.c_int, []),
    "termsight_torch_enable": (ctypes.c_int, [ctypes.c_int]),
    "termsight_torch_scope": (_U32, [_S, ctypes.c_size_t]),
    "termsight_torch_scope_push": (None, [_U32]),
    "termsight_torch_scope_pop": (None, []),
    "termsight_torch_recorded": (_U64, []),
    "termsight_torch_track_comm": (ctypes.c_int, [ctypes.c_int]),
}
_torch_hook = None
_torch_hook_tried = []  # why it was not loaded, once looked for


def load_torch_hook():
    """libtermsight-torch.so (PyTorch's RecordFunction callbacks, built where libtorch-dev is
    installed) loaded and installed, or None where it is off (TERMSIGHT_TORCH_HOOK=0), absent
    or refused; torch must be imported first. TERMSIGHT_TORCH_HOOK=<path> names the only one
    tried. Looked for beside the loaded libtermsight.so, beside the package, in the build tree."""
    global _torch_hook
    load()  # first: the hook's libtermsight.so.0 is then this instance, not another copy
    with _lock:
        if _torch_hook is not None or _torch_hook_tried:
            return _torch_hook
        env = os.environ.get("TERMSIGHT_TORCH_HOOK", "")
        if env == "0":
            _torch_hook_tried.append("TERMSIGHT_TORCH_HOOK=0")
            return None
        if env and env != "1":
            places = [env]
        else:
            places = [os.path.join(_PACKAGE_DIR, TORCH_HOOK_NAME),
                      os.path.join(_REPO_DIR, "build", "collectors", TORCH_HOOK_NAME)]
            if _lib_path and os.sep in _lib_path:
                places.insert(0, os.path.join(os.path.dirname(os.path.realpath(_lib_path)),
                                              TORCH_HOOK_NAME))
        for path in places:
            if not os.path.exists(path):
                _torch_hook_tried.append("%s does not exist" % path)
                continue
            other = _other_libtorch(path, explicit=bool(places == [env]))
            if other:
                _torch_hook_tried.append(other)
                continue
            try:
                hook = ctypes.CDLL(path)
                for name, (res, args) in _TORCH_HOOK_PROTOTYPES.items():
                    fn = getattr(hook, name)
                    fn.restype = res
                    fn.argtypes = args
            except (OSError, AttributeError) as e:
                _torch_hook_tried.append("%s: %s" % (path, e))
                continue
            if hook.termsight_torch_install() != 0:
                _torch_hook_tried.append("%s: PyTorch refused its callbacks" % path)
                continue
            _torch_hook = hook
            return hook
        return None


def _other_libtorch(path, explicit):
    """Why the hook at path must not be loaded into this process ("" when it may): it was built
    against one libtorch (named in path + ".libtorch" by the build), and loading it beside
    another (a pip wheel's) would bring a second PyTorch into the process. A hook named
    explicitly without that file is trusted."""
    try:
        with open(path + ".libtorch") as f:
            want = f.read().strip()
    except OSError:
        return "" if explicit else "%s.libtorch is missing: cannot tell its libtorch" % path
    try:
        mapped = {p for p in _mapped_files() if "libtorch_cpu" in p}
    except OSError as e:
        return "cannot read /proc/self/maps: %s" % e
    mapped = {os.path.realpath(m) for m in mapped}
    if want in mapped:
        return ""
    return ("%s was built against %s, and this process runs %s" %
            (path, want, ", ".join(sorted(mapped)) or "no libtorch_cpu"))


def torch_hook_missing():
    """Why load_torch_hook() found none ("" when it did or was not asked yet)."""
    return "; ".join(_torch_hook_tried)


STACKS_FILE = "python-stacks.txt"  # model/segment.h's TS_STACKS_FILE
_stacks = {}  # pid -> (signal, file) once registered in that process


def _stacks_signal():
    """The signal termsight hang asks for stacks with: SIGRTMAX - 3 (61 on Linux), a real-time
    signal no Python library we know uses; None when the program has a handler of its own for it
    (or ignores it), or the platform has none."""
    import signal

    sig = getattr(signal, "SIGRTMAX", None)
    if sig is None:
        return None
    sig = int(sig) - 3
    try:
        if signal.getsignal(sig) != signal.SIG_DFL:
            return None  # the program's (None: installed outside Python, not ours to take)
        # A handler a C library set after Python started is not in getsignal's table.
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(("SigCgt:", "SigIgn:")) and int(line.split()[1], 16) >> (
                        sig - 1) & 1:
                    return None
    except (ValueError, OSError, IndexError):
        return None
    return sig


def _drop_unused(folder, path, pid):
    """At exit: a flight recorder's run folder made only for the stacks file, which nobody asked
    for and no snapshot joined, is removed (as flight mode leaves no folder). Only by the process
    that made it: a forked child that exits normally leaves its parent's folder alone."""
    if os.getpid() != pid:
        return
    try:
        if os.path.getsize(path) == 0:
            os.unlink(path)
            os.rmdir(folder)
    except OSError:
        pass


def register_stacks(lib, session):
    """termsight hang's way to every thread's Python stack, without ptrace and without stopping
    the program: faulthandler writes them into STACKS_FILE in the run folder on a signal the
    program does not use, and the segment says which. Once per process; True when registered.
    Never raises: the program runs on without it."""
    if os.getpid() in _stacks:
        return True
    try:
        import faulthandler

        folder = os.fsdecode(lib.termsight_run_folder(session) or b"")
        sig = _stacks_signal()
        if not folder or sig is None:
            return False
        # The library makes a flight recorder's run folder (otherwise made at its first
        # snapshot) through the checks every run folder passes.
        made = not os.path.isdir(folder)
        fd = lib.termsight_stacks_file(session)
        if fd < 0:
            return False
        path = os.path.join(folder, STACKS_FILE)
        f = os.fdopen(fd, "ab", buffering=0)
        if made:
            atexit.register(_drop_unused, folder, path, os.getpid())
        # chain=False: the signal's default action would end the program.
        faulthandler.register(sig, file=f, all_threads=True, chain=False)
        if lib.termsight_stacks_signal(sig) != OK:
            faulthandler.unregister(sig)
            f.close()
            return False
        _stacks[os.getpid()] = (sig, f)
        return True
    except Exception:  # noqa: BLE001 -- the profiler never stops the training
        return False


def _flight_usr2(signum, frame):
    """SIGUSR2 under a flight recorder: asks the library for a snapshot, as its own handler did."""
    load().termsight_flight_signal(1)


def adopt_flight_signal():
    """A flight recorder takes a snapshot on SIGUSR2, through a handler the library set in C, which
    Python's signal.getsignal() shows as None: a program that saves and restores the disposition
    (signal.signal(SIGUSR2, signal.getsignal(SIGUSR2))) would get a TypeError. Where the
    library's handler is the one installed, a Python handler that asks the same takes its place,
    so getsignal returns a callable that can be restored. It runs when Python next runs bytecode
    on the main thread, as every Python handler does. Only from the main thread; never raises.
    True when adopted."""
    try:
        import signal

        sig = getattr(signal, "SIGUSR2", None)
        if sig is None or signal.getsignal(sig) is not None:
            return False  # the program's own, or Python's default
        if load().termsight_flight_signal(0) != 1:
            return False  # some other C library's: not ours to replace
        signal.signal(sig, _flight_usr2)
        return True
    except Exception:  # noqa: BLE001 -- the profiler never stops the training
        return False


def collecting_flag():
    """The library's exported collecting flag (termsight_collecting_) as a ctypes c_int: its
    .value is nonzero while a collection window is open; reading it costs no call."""
    return ctypes.c_int.in_dll(load(), "termsight_collecting_")


def loaded_path():
    """The path (or name) the library was loaded from, None before it is loaded."""
    return _lib_path


def find_cli():
    """The termsight command: TERMSIGHT_BIN, then beside the library's build tree
    (<build>/collectors/libtermsight.so -> <build>/cli/termsight) or beside the library itself,
    then <repo>/build/cli/termsight, then PATH. RuntimeError naming where it looked."""
    env = os.environ.get("TERMSIGHT_BIN")
    if env:
        if os.path.isfile(env) and os.access(env, os.X_OK):
            return env
        raise RuntimeError("termsight: TERMSIGHT_BIN=%s is not an executable file" % env)
    places = []
    lib = _lib_path
    if lib and os.sep in lib:
        libdir = os.path.dirname(os.path.realpath(lib))
        places.append(os.path.join(os.path.dirname(libdir), "cli", BIN_NAME))
        places.append(os.path.join(libdir, BIN_NAME))
        # Installed: <prefix>/lib/<multiarch>/ or <prefix>/lib/ beside <prefix>/bin/.
        places.append(os.path.join(libdir, "..", "..", "bin", BIN_NAME))
        places.append(os.path.join(libdir, "..", "bin", BIN_NAME))
    places.append(os.path.join(_PACKAGE_DIR, BIN_NAME))
    places.append(os.path.join(_REPO_DIR, "build", "cli", BIN_NAME))
    for p in places:
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    which = shutil.which(BIN_NAME)
    if which:
        return which
    raise RuntimeError(
        "termsight: cannot find the termsight command; looked at TERMSIGHT_BIN (unset), %s and "
        "PATH" % ", ".join(places)
    )
