"""termsight.torch: PyTorch runs in termsight with three lines.

    import termsight, termsight.torch
    prof = termsight.Profiler(output_path="./data")
    for images, labels in termsight.torch.steps(loader):
        ...                                   # forward, loss, backward, optimizer step

steps() wraps any iterable of batches (a torch.utils.data.DataLoader above all) and records:

- a step per optimizer step: the step begins when the loop asks for a batch (from the second
  batch on, when the batch has arrived: the analysis opens a step's window at the previous step's
  end, so the wait still falls inside it) and ends when the loop asks for the next one, unless no
  optimizer step ran in between (gradient accumulation): then the next batch is the same step's
  next micro-batch. Without any torch.optim optimizer, or with TERMSIGHT_TORCH_STEP=batch, every
  batch is a step;
- the time spent waiting for the loader, as an operator range "DataLoader.__next__" (type
  "DataLoader"): the step trace counts it as the step interval, and forward starts at the first
  operator after it;
- the loader's prefetch depth, where it can be read (a multi-worker DataLoader): a host queue
  "DataLoader prefetch" of capacity num_workers * prefetch_factor holding the batches that have
  arrived and wait to be taken, sampled every queue_ms milliseconds (default 10) by a thread of
  its own while the loop runs. Samples in time, not per batch: workers that finish together
  fill the queue in bursts, so sampling only when the loop asks would miss most of the time it
  spends empty. The queue report then says whether the input pipeline kept up;
- with ops=True (the default), while collecting, an operator range for every operator the step
  runs, named by the module it runs in ("features.0/aten::convolution") and typed by the
  operator ("aten::convolution"). Through libtermsight-torch.so where it was built (PyTorch's
  RecordFunction callbacks: every operator nested as PyTorch runs it, on every thread, backward
  nodes named by their forward's module, record_function blocks as ranges; see
  _lib.load_torch_hook); else through a TorchDispatchMode (the outermost operators of the
  calling thread), or, where CUDA is available and asked for (cuda=True), through
  torch.autograd.profiler.emit_nvtx, whose NVTX ranges reach termsight through its NVTX
  injection (NVTX_INJECTION64_PATH, set here if the program has not set it).

Distributed training: with a torch.nn.parallel.DistributedDataParallel model given to steps()
or ops() (model=ddp_model) while a session exists, every gradient bucket's all-reduce is recorded
as a communication from its issue to its completion ("DDP/bucket<i>/allreduce", with its bytes),
through a DDP communication hook that does what DDP does without one (ddp_comm_hook(): the
gradients summed over the ranks and divided by the world size); a model that has a hook of its
own keeps it (a warning says how to wrap it: model.register_comm_hook(state,
ddp_comm_hook(my_hook))). The step trace then counts the time a step waits for the all-reduce
(comm_wait_us): on a rank that waits for a slower one, the wait for that rank. The collective
operators ("c10d::allreduce_", "c10d::broadcast_", ...) are recorded as communication too, never
as computation: with the native hook from their call to the completion of the Work they return
(track_collectives(): the script's own collectives, and DDP's under auto(), which installs no
comm hook), else their call alone (the wait comes later).

Without a Profiler (no session), steps() just yields the batches. ops() alone is a context
manager for code outside steps() (an evaluation loop, say). auto() does all of it for a script
that calls none of this (termsight run calls it when the script imports torch).
"""

import os
import threading
import types
import warnings
import weakref

from . import _lib

__all__ = ["steps", "ops", "auto", "module_names", "prefetch_depth", "ddp_comm_hook",
           "instrument_ddp", "track_collectives", "DATA_WAIT_NAME", "QUEUE_NAME"]

DATA_WAIT_NAME = "DataLoader.__next__"
DATA_WAIT_TYPE = "DataLoader"
EVAL_BEGIN, EVAL_END = 3, 4  # termsight_phase: an evaluation pass, in no step
QUEUE_NAME = "DataLoader prefetch"


def _import_torch():
    try:
        import torch  # noqa: F401 (the real PyTorch: absolute import)
    except ImportError as e:
        raise RuntimeError("termsight.torch needs PyTorch (import torch failed: %s)" % e) from e
    return torch


# ---- the prefetch depth of a DataLoader iterator --------------------------------------------


def _prefetch_capacity(loader):
    workers = getattr(loader, "num_workers", 0) or 0
    if workers <= 0:
        return 0
    factor = getattr(loader, "prefetch_factor", None) or 2
    return int(workers) * int(factor)


def prefetch_depth(it):
    """Batches a multi-worker DataLoader iterator holds ready for the loop: those in its result
    queue plus those received ahead, in order from the one the loop takes next (a batch that
    arrived early behind a missing one cannot be taken yet: the loop waits all the same). None
    where the iterator does not expose them (single-process loading, another loader, a PyTorch
    whose internals differ)."""
    data_queue = getattr(it, "_data_queue", None)
    task_info = getattr(it, "_task_info", None)
    rcvd = getattr(it, "_rcvd_idx", None)
    if data_queue is None or not isinstance(task_info, dict) or not isinstance(rcvd, int):
        return None
    try:
        waiting = data_queue.qsize()
    except (NotImplementedError, OSError):
        return None
    # An entry (worker, data) is a batch received; (worker,) one still being made.
    ready = 0
    while True:
        info = task_info.get(rcvd + ready)
        if info is None or len(info) != 2:
            break
        ready += 1
    return waiting + ready


# ---- aten operators as ranges ---------------------------------------------------------------


class _Scopes(threading.local):
    def __init__(self):
        self.stack = []


_scopes = _Scopes()
_hooks_lock = threading.Lock()
_hooks = []  # the global module hooks, installed once
_module_names_on = [True]  # module_names(): whether operators are named by their module
_module_names = {}  # id(module) -> its qualified name, from the models given to ops()/steps()


def _install_module_hooks(torch):
    """Global forward hooks that keep the calling thread's module path (from the root module's
    children down: "features.0"), so that an operator is named after the layer it runs in; with
    the native hook, they tell it the module too (its operators are named there)."""
    with _hooks_lock:
        if _hooks or not _module_names_on[0]:
            return
        native = _lib.load_torch_hook()
        scope_ids = {}  # id(module) -> (its name, the native hook's scope index)

        def name_of(module):
            n = _module_names.get(id(module))
            return n if n is not None else type(module).__name__

        def root(module):
            # The first call of a module outside every other names its children by their
            # paths ("features.0"), as model= does: operators then carry their layer without it.
            if id(module) not in _module_names:
                _name_modules(module)

        if native is None:
            def pre(module, _inputs):
                stack = _scopes.stack
                if not stack:
                    root(module)
                stack.append(name_of(module))

            def post(module, _inputs, _output):
                if _scopes.stack:
                    _scopes.stack.pop()
        else:
            push, pop, intern = (native.termsight_torch_scope_push,
                                 native.termsight_torch_scope_pop, native.termsight_torch_scope)

            def pre(module, _inputs):
                stack = _scopes.stack
                if not stack:
                    root(module)
                key = id(module)
                known = scope_ids.get(key)
                if known is None:
                    n = name_of(module)
                    b = n.encode("utf-8", "surrogateescape")
                    known = scope_ids[key] = (n, intern(b, len(b)))
                # The root module (outermost) names nothing: its children are the scopes. The
                # names stay on the Python stack too, for the dispatch mode where it is used.
                push(known[1] if stack else 0)
                stack.append(known[0])

            def post(module, _inputs, _output):
                if _scopes.stack:
                    _scopes.stack.pop()
                    pop()

        reg = torch.nn.modules.module
        _hooks.append(reg.register_module_forward_pre_hook(pre))
        _hooks.append(reg.register_module_forward_hook(post))


def module_names(enabled=True):
    """Whether operators are named by the module they run in ("features.0/aten::convolution"),
    the default. Naming takes a global forward hook pair, which PyTorch calls on every module
    call; on the CNN of bench/torch_overhead.py its cost was within run-to-run noise
    (bench/RESULTS.md), but a model of many small modules pays it per module. Off, no global
    hook stays installed. Takes effect at once, for every thread (call it between steps, not
    while a forward pass runs); returns the previous setting."""
    torch = _import_torch()
    was = _module_names_on[0]
    _module_names_on[0] = bool(enabled)
    if enabled:
        _install_module_hooks(torch)
    else:
        with _hooks_lock:
            while _hooks:
                _hooks.pop().remove()
    return was


_lend_patched = []
_lend_patched_from = []  # the profiler's own methods, as they were before the wrap


def _install_profiler_lend(torch, lib):
    """PyTorch's profiler (Kineto) and termsight share the process's one CUPTI: Kineto registers
    its own buffers when it prepares a trace and turns activity kinds off when it stops. So
    termsight lends CUPTI just before a torch.profiler (or torch.autograd.profiler) trace is
    prepared and takes it back just after the trace ends; the kernels in between are Kineto's,
    and the window's metadata says so. Installed once; the profiler's own methods still run."""
    with _hooks_lock:
        if _lend_patched:
            return
        cls = getattr(getattr(torch.autograd, "profiler", None), "profile", None)
        prepare = getattr(cls, "_prepare_trace", None)
        leave = getattr(cls, "__exit__", None)
        if prepare is None or leave is None:
            return

        def _prepare_trace(self, *args, **kwargs):
            if getattr(self, "enabled", True) and not getattr(self, "_termsight_lent", False):
                lib.termsight_cuda_lend(1)
                self._termsight_lent = True
            return prepare(self, *args, **kwargs)

        def __exit__(self, *exc):
            try:
                return leave(self, *exc)
            finally:
                if getattr(self, "_termsight_lent", False):
                    self._termsight_lent = False
                    lib.termsight_cuda_lend(0)

        cls._prepare_trace, cls.__exit__ = _prepare_trace, __exit__
        _lend_patched.append(cls)
        _lend_patched_from[:] = [prepare, leave]


_rf_patched = []
RECORD_FUNCTION_TYPE = "record_function"


def _install_record_function(torch, lib):
    """torch.profiler.record_function blocks (the user's labels, and PyTorch's own such as
    "Optimizer.step#SGD.step" and "Optimizer.zero_grad#SGD.zero_grad") become ranges of their
    name, type "record_function", around the operators they hold, while collecting. The class's
    own enter and exit still run (torch.profiler sees them as before). Installed once."""
    with _hooks_lock:
        if _rf_patched or _lib.load_torch_hook() is not None:
            return  # the native hook records record_function blocks itself
        cls = torch.autograd.profiler.record_function
        enter, leave = cls.__enter__, cls.__exit__
        collecting = _lib.collecting_flag()
        rf_type = RECORD_FUNCTION_TYPE.encode()

        def __enter__(self):
            r = enter(self)
            if collecting.value:
                name = str(getattr(self, "name", "")).encode("utf-8", "replace")
                lib.termsight_range_begin_id(lib.termsight_name_n(name, len(name)),
                                             lib.termsight_name_n(rf_type, len(rf_type)))
                self._termsight_range = True
            return r

        def __exit__(self, *exc):
            try:
                return leave(self, *exc)
            finally:
                if getattr(self, "_termsight_range", False):
                    self._termsight_range = False
                    lib.termsight_range_end()

        cls.__enter__, cls.__exit__ = __enter__, __exit__
        _rf_patched.append((cls, enter, leave))


def _name_modules(model):
    """Gives the modules of model their qualified names for the operator names."""
    if model is None:
        return
    for qual, module in model.named_modules():
        _module_names[id(module)] = qual or type(module).__name__


class _OpNames:
    """Interned (name, type) ids per (scope, operator), for the session they were made in.
    refresh() at the start of every block the mode covers: a session replaced in between gets
    fresh ids (ids belong to one session); within a block get() makes no library call for a
    pair it has seen."""

    def __init__(self, lib):
        self._lib = lib
        self._ids = {}
        self._session = None

    def refresh(self):
        session = self._lib.termsight_session_current()
        if session != self._session:
            self._ids.clear()
            self._session = session

    def get(self, scope, op):
        key = (scope, op)
        ids = self._ids.get(key)
        if ids is None:
            name = (scope + "/" + op if scope else op).encode("utf-8", "surrogateescape")
            tb = op.encode("utf-8", "surrogateescape")
            ids = (self._lib.termsight_name_n(name, len(name)),
                   self._lib.termsight_name_n(tb, len(tb)))
            self._ids[key] = ids
        return ids


class _NativeRanges:
    """Operator recording through libtermsight-torch.so, with the dispatch mode's interface:
    on while entered (nesting restores what was), and used tells whether an operator was
    recorded since it was last cleared."""

    def __init__(self, hook):
        self._hook = hook
        self._was = []
        self._mark = 0

    @property
    def used(self):
        return self._hook.termsight_torch_recorded() != self._mark

    @used.setter
    def used(self, value):
        if not value:
            self._mark = self._hook.termsight_torch_recorded()

    def __enter__(self):
        self._was.append(self._hook.termsight_torch_enable(1))
        return self

    def __exit__(self, *exc):
        self._hook.termsight_torch_enable(self._was.pop() if self._was else 0)
        return False


_mode_class = []


def _dispatch_mode_class(torch):
    """The TorchDispatchMode subclass, made on first use (importing torch is the caller's)."""
    if _mode_class:
        return _mode_class[0]
    from torch.utils._python_dispatch import TorchDispatchMode

    class AtenRanges(TorchDispatchMode):
        """A range around every aten operator dispatched while the mode is active."""

        def __init__(self, lib):
            super().__init__()
            self._names = _OpNames(lib)
            self._op_names = {}
            self._ids = {}  # (scope, func) -> (name id, type id), cleared with the names
            self._begin = lib.termsight_range_begin_id
            self._end = lib.termsight_range_end
            self._now = lib.termsight_now_ns
            self._comm = lib.termsight_comm_complete
            self.used = False  # an operator ran since steps() last cleared it

        def __enter__(self):
            before = self._names._session
            self._names.refresh()
            if self._names._session != before:
                self._ids.clear()
            return super().__enter__()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.used = True
            # The innermost module below the root ("features.0"): qualified names already hold
            # the path; outside every module (backward, the optimizer) no scope.
            stack = _scopes.stack
            scope = stack[-1] if len(stack) > 1 else ""
            ids = self._ids.get((scope, func))
            if ids is None:
                op = self._op_names.get(func)
                if op is None:
                    schema = getattr(func, "_schema", None)
                    op = schema.name if schema is not None else str(func)
                    self._op_names[func] = op
                ids = self._ids[(scope, func)] = self._names.get(scope, op) + (
                    op.startswith(_COLLECTIVE_PREFIX), op.startswith(_PROFILER_PREFIX))
            if ids[3]:
                # record_function's own operators: the block is a range of its own
                # (_install_record_function), not an operator.
                return func(*args, **(kwargs or {}))
            if ids[2]:
                # A collective's operator issues it; it is communication, not computation.
                t0 = self._now()
                try:
                    return func(*args, **(kwargs or {}))
                finally:
                    self._comm(ids[0], ids[1], t0, self._now(), _tensor_bytes(args))
            self._begin(ids[0], ids[1])
            try:
                return func(*args, **(kwargs or {}))
            finally:
                self._end()

    _mode_class.append(AtenRanges)
    return AtenRanges


_COLLECTIVE_PREFIX = "c10d::"
_PROFILER_PREFIX = "profiler::"


def _tensor_bytes(args):
    """Bytes of the tensors in a collective's first argument (a tensor or a list of them)."""
    first = args[0] if args else None
    tensors = first if isinstance(first, (list, tuple)) else (first,)
    n = 0
    for t in tensors:
        try:
            n += t.numel() * t.element_size()
        except AttributeError:
            pass
    return n


# ---- DistributedDataParallel: each bucket's all-reduce from issue to completion ---------------


def ddp_comm_hook(hook=None, name=None):
    """A DDP communication hook that records every bucket's communication from the hook's call
    (the bucket is ready, the collective is issued) to the completion of the future the hook
    returns, as "DDP/bucket<i>/<name>" (type name) with the bucket's bytes. hook: the hook to
    wrap, called as hook(state, bucket) (default: PyTorch's allreduce_hook, what DDP does
    without a hook; its state is the process group, None for the default group). name: the
    collective's name (default: the hook's name less "_hook", "allreduce").

        model.register_comm_hook(state, termsight.torch.ddp_comm_hook(my_hook))

    The completion is seen by the thread that completes the future (gloo's or NCCL's), which
    records it; while not collecting nothing is recorded."""
    _import_torch()
    if hook is None:
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
        hook = allreduce_hook
    if name is None:
        name = getattr(hook, "__name__", "") or "comm"
        if name.endswith("_hook"):
            name = name[:-len("_hook")]
    lib = _lib.load()
    now, comm, intern = lib.termsight_now_ns, lib.termsight_comm_complete, lib.termsight_name_n
    issue, issued = lib.termsight_comm_issue, lib.termsight_comm_done
    tname = name.encode("utf-8", "surrogateescape")

    def timed(state, bucket):
        t0 = now()
        label = ("DDP/bucket%d/%s" % (bucket.index(), name)).encode("utf-8", "surrogateescape")
        # In flight until it completes: a rank whose peers never join shows it waits here.
        ticket = issue(intern(label, len(label)), t0)
        try:
            fut = hook(state, bucket)
        except BaseException:
            issued(ticket)
            raise
        buf = bucket.buffer()
        nbytes = buf.numel() * buf.element_size()

        def done(f):
            issued(ticket)
            # Interned when it completes: ids belong to the session current then.
            comm(intern(label, len(label)), intern(tname, len(tname)), t0, now(), nbytes)
            return f.value()

        return fut.then(done)

    timed.__name__ = "termsight_" + name
    timed.__qualname__ = timed.__name__
    return timed


def track_collectives():
    """Once the program has a process group (torch.distributed initialized), has the native
    hook follow every collective to its completion (DDP's bucket all-reduces, the script's own
    collectives): the time a step waits for communication, with no hook of the program's
    replaced and no Python run on the backend's threads. Returns True when on, False without a
    process group yet, None where it cannot be (no native hook)."""
    hook = _lib.load_torch_hook()
    if hook is None:
        return None
    dist = getattr(_import_torch(), "distributed", None)
    try:
        if dist is None or not dist.is_available() or not dist.is_initialized():
            return False
        hook.termsight_torch_track_comm(1)
    except Exception:  # noqa: BLE001 -- the profiler never stops the training
        return None
    return True


_ddp_done = set()  # id() of the DDP models given our hook, or found with one of their own


def instrument_ddp(model, hook=None, state=None):
    """Registers ddp_comm_hook(hook) on a DistributedDataParallel model, once. Returns True
    when the hook is in place, False when the model is no DDP model or already has a hook of
    its own (a RuntimeWarning says how to wrap it). steps() and ops() call it for the model
    they are given while a session exists."""
    torch = _import_torch()
    ddp = getattr(getattr(torch.nn, "parallel", None), "DistributedDataParallel", None)
    if ddp is None or not isinstance(model, ddp):
        return False
    if id(model) in _ddp_done:
        return getattr(model, "_termsight_comm_hook", False)
    _ddp_done.add(id(model))
    try:
        model.register_comm_hook(state, ddp_comm_hook(hook))
    except RuntimeError as e:
        import warnings
        warnings.warn("termsight: this DistributedDataParallel model has a communication hook "
                      "of its own (%s), so its communication is not recorded: register "
                      "termsight.torch.ddp_comm_hook(your_hook) instead" % (e,),
                      RuntimeWarning, stacklevel=3)
        return False
    model._termsight_comm_hook = True
    return True


def _nvtx_injection(lib_path):
    """Points NVTX at libtermsight.so unless the program chose an injection already; NVTX reads
    the variable at its first call."""
    if lib_path and os.sep in lib_path:
        os.environ.setdefault("NVTX_INJECTION64_PATH", lib_path)


class ops:
    """Operator ranges for every aten operator run inside the block (see the module's doc).

    model: optional root module, whose named_modules() give the operators' scope names.
    cuda: None decides by torch.cuda.is_available(); True uses emit_nvtx, False the dispatch
    mode. Re-entrant: an inner ops() inside an active one does nothing."""

    _active = threading.local()

    def __init__(self, model=None, cuda=None):
        self._torch = _import_torch()
        self._lib = _lib.load()
        self._model = model
        self._native = _lib.load_torch_hook() if cuda is not True else None
        self._cuda = (self._native is None and self._torch.cuda.is_available() if cuda is None
                      else bool(cuda))
        self._ctx = None
        self._mode = None
        _install_module_hooks(self._torch)
        _install_record_function(self._torch, self._lib)
        _name_modules(model)
        if model is not None and self._lib.termsight_session_current():
            instrument_ddp(model)

    def __enter__(self):
        if getattr(ops._active, "on", False):
            return self
        torch = self._torch
        if self._cuda:
            if not torch.cuda.is_available():
                raise RuntimeError("termsight.torch.ops(cuda=True): this PyTorch cannot use CUDA "
                                   "(torch.version.cuda is %s); use cuda=False or None"
                                   % (torch.version.cuda,))
            _nvtx_injection(_lib.loaded_path())
            self._ctx = torch.autograd.profiler.emit_nvtx(record_shapes=False)
        else:
            # One mode per ops(): its interned names serve every step that re-enters it.
            if self._mode is None:
                self._mode = (_NativeRanges(self._native) if self._native is not None
                              else _dispatch_mode_class(torch)(self._lib))
            self._ctx = self._mode
        self._ctx.__enter__()
        ops._active.on = True
        return self

    def __exit__(self, *exc):
        if self._ctx is None:
            return False
        ctx, self._ctx = self._ctx, None
        ops._active.on = False
        return bool(ctx.__exit__(*exc))

    @property
    def used(self):
        """Whether an operator was recorded since used was last set False; True where that
        cannot be told (emit_nvtx, or before the first block)."""
        return True if self._mode is None or self._cuda else self._mode.used

    @used.setter
    def used(self, value):
        if self._mode is not None and not self._cuda:
            self._mode.used = value


# ---- steps ----------------------------------------------------------------------------------


class _DepthSampler(threading.Thread):
    """Samples a DataLoader iterator's prefetch depth into a registered queue every interval
    seconds until stopped. Reading the iterator's tables under the GIL is safe beside the loop."""

    def __init__(self, lib, queue_handle, it, interval):
        super().__init__(name="termsight DataLoader sampler", daemon=True)
        self._lib = lib
        self._q = queue_handle
        self._it = it
        self._interval = interval
        self._done = threading.Event()

    def run(self):
        lib, q, it = self._lib, self._q, self._it
        while True:
            try:
                depth = prefetch_depth(it)
            except ReferenceError:  # auto(): the loop dropped its iterator
                return
            if depth is None:
                return
            lib.termsight_queue_size(q, depth)
            if self._done.wait(self._interval):
                return

    def stop(self):
        self._done.set()
        self.join()


# The prefetch queue of each loader, registered once per session and reused by every epoch's
# steps() (the library's queue table is bounded): loader -> (session, capacity, queue handle).
_loader_queues = weakref.WeakKeyDictionary()
_queue_table_warned = False


def _loader_queue(lib, loader, capacity):
    global _queue_table_warned
    session = lib.termsight_session_current()
    try:
        known = _loader_queues.get(loader)
    except TypeError:  # a loader that cannot be weakly referenced: registered each time
        known = None
    if known and known[0] == session and known[1] == capacity:
        return known[2]
    q = lib.termsight_queue_register(QUEUE_NAME.encode(), capacity, _lib.QUEUE_ROLES["host"],
                                     b"DataLoader workers", b"training loop")
    if not q:
        if not _queue_table_warned:
            _queue_table_warned = True
            warnings.warn("termsight: the queue table is full: the DataLoader's prefetch depth "
                          "is not recorded", RuntimeWarning, stacklevel=3)
        return 0
    try:
        _loader_queues[loader] = (session, capacity, q)
    except TypeError:
        pass
    return q


def _name_workers(lib, it, evaluation=False):
    """Names the DataLoader's worker processes ("DataLoader worker 0", ...; "evaluation
    DataLoader worker 0", ... for a loader iterated without gradients) for the CPU views and
    reports, where the iterator has them (a multi-worker DataLoader's _workers)."""
    if not lib.termsight_session_current():
        return
    prefix = b"evaluation " if evaluation else b""
    for i, w in enumerate(getattr(it, "_workers", None) or ()):
        pid = getattr(w, "pid", None)
        if isinstance(pid, int) and pid > 0:
            lib.termsight_process_name(pid, prefix + b"DataLoader worker %d" % i)


def _depth_sampler(lib, loader, it, queue_ms):
    """A started _DepthSampler for it, or None where the depth cannot be read or no session
    records it."""
    if not queue_ms or not lib.termsight_session_current():
        return None
    capacity = _prefetch_capacity(loader)
    if not capacity or prefetch_depth(it) is None:
        return None
    q = _loader_queue(lib, loader, capacity)
    if not q:
        return None
    sampler = _DepthSampler(lib, q, it, queue_ms / 1000.0)
    sampler.start()
    return sampler


class _OptimizerSteps:
    """Counts optimizer steps, so that a training step is one optimizer step: with gradient
    accumulation the batches between two optimizer steps are that step's micro-batches. Every
    torch.optim optimizer created once this is installed counts its step() calls (also through an
    LR scheduler or AMP's GradScaler). TERMSIGHT_TORCH_STEP=batch makes every batch a step."""

    def __init__(self):
        self.count = 0
        self.optimizers = 0  # optimizers created since installed: 0 leaves batches as steps
        self.by_batch = os.environ.get("TERMSIGHT_TORCH_STEP", "") == "batch"
        self.installed = False

    def mark(self):
        return self.count

    def accumulating(self, mark):
        """True when no optimizer step ran since mark while optimizers exist: the batch just
        trained is a micro-batch of a step that goes on."""
        return not self.by_batch and self.optimizers > 0 and mark is not None and \
            self.count == mark

    def install(self, torch):
        with _hooks_lock:
            if self.installed:
                return
            self.installed = True
            base = getattr(getattr(torch, "optim", None), "Optimizer", None)
            if base is None:
                return
            init = base.__init__
            counter = self

            def counted_step(opt, *args, **kwargs):
                counter.count += 1
                return type(opt).step(opt, *args, **kwargs)

            def __init__(opt, *args, **kwargs):
                init(opt, *args, **kwargs)
                if "step" not in vars(opt):
                    # A bound method, as LR schedulers expect to wrap (method.__self__).
                    opt.step = types.MethodType(counted_step, opt)
                    counter.optimizers += 1

            base.__init__ = __init__
            # AMP's GradScaler skips optimizer.step() when gradients overflowed: the iteration
            # is a step all the same.
            for amp in (getattr(torch, "amp", None), getattr(torch.cuda, "amp", None)):
                scaler = getattr(amp, "GradScaler", None)
                if scaler is None or getattr(scaler.step, "_termsight", False):
                    continue

                def scaler_step(sc, optimizer, *args, _step=scaler.step, **kwargs):
                    before = counter.count
                    try:
                        return _step(sc, optimizer, *args, **kwargs)
                    finally:
                        if counter.count == before:
                            counter.count += 1

                scaler_step._termsight = True
                scaler.step = scaler_step


_optim = _OptimizerSteps()


class _EvalInSteps:
    """Evaluation passes inside steps() steps: while a steps() loop runs, a DataLoader iterated
    without gradients (a validation loop in the training loop's body) marks an evaluation pass
    from its iterator's start until it is exhausted or the training loop takes its next batch,
    so that the step's split counts it as evaluation, not as its tail."""

    def __init__(self):
        self.loops = 0  # steps() loops running
        self.open = False
        self.lib = None

    def install(self, torch, lib):
        if self.lib is not None:
            return
        self.lib = lib
        from torch.utils.data import dataloader as dl
        loader_iter, base_next = dl.DataLoader.__iter__, dl._BaseDataLoaderIter.__next__

        def __iter__(loader):
            if self.loops and not self.open and not torch.is_grad_enabled():
                self.begin()
            return loader_iter(loader)

        def __next__(it):
            try:
                return base_next(it)
            except StopIteration:
                if self.open and not torch.is_grad_enabled():
                    self.end()
                raise

        dl.DataLoader.__iter__ = __iter__
        dl._BaseDataLoaderIter.__next__ = __next__

    def begin(self):
        self.open = True
        self.lib.termsight_phase_mark(EVAL_BEGIN)

    def end(self):
        if self.open:
            self.open = False
            self.lib.termsight_phase_mark(EVAL_END)


_evals = _EvalInSteps()


def steps(loader, ops=True, model=None, queue_ms=10, cuda=None):
    """Yields loader's batches, one termsight step per optimizer step (see the module's doc).

    ops: record aten operators as ranges (True), or not (False). model: the root module, for
    operator scope names. queue_ms: the prefetch depth's sampling interval in milliseconds, 0
    for none. cuda: as for ops()."""
    if isinstance(queue_ms, bool) or not isinstance(queue_ms, (int, float)) or queue_ms < 0:
        raise ValueError("queue_ms must be a number of milliseconds >= 0, not %r" % (queue_ms,))
    lib = _lib.load()
    _lib.explicit_steps = True
    for st in _auto:
        st.stand_back()
    _optim.install(_import_torch())
    collecting = _lib.collecting_flag()
    mode = _make_ops(ops, model, cuda)
    _install_record_function(_import_torch(), lib)
    if model is not None and lib.termsight_session_current():
        instrument_ddp(model)
    if mode is not None and not getattr(model, "_termsight_comm_hook", False):
        track_collectives()  # collectives the comm hook does not see, to their completion
    wait_name = DATA_WAIT_NAME.encode()
    wait_type = DATA_WAIT_TYPE.encode()
    # The first step opens before its batch is asked for (no earlier step end opens its window)
    # when the loader has batches to give; an unsized one may have none, and a step opened for
    # nothing would count a step that did not train.
    try:
        begin_first_early = len(loader) > 0
        if not begin_first_early:
            return
    except TypeError:
        begin_first_early = False

    it = iter(loader)
    _name_workers(lib, it)
    sampler = _depth_sampler(lib, loader, it, queue_ms)
    _evals.install(_import_torch(), lib)
    _evals.loops += 1
    first = True
    opened = False  # a step is open: begun, not ended (micro-batches until an optimizer step)
    step_ran = False  # operators ran in the open step (or it cannot be told)
    mark = None
    try:
        while True:
            if first and begin_first_early:
                lib.termsight_step_begin()
                opened, step_ran, mark = True, False, _optim.mark()
            # An open range while the loop waits, so that a loader that never delivers shows
            # where the loop is (termsight top, termsight hang); interned per batch: a session
            # started or replaced between batches gets its ids.
            lib.termsight_range_begin_id(lib.termsight_name_n(wait_name, len(wait_name)),
                                         lib.termsight_name_n(wait_type, len(wait_type)))
            try:
                batch = next(it)
            except StopIteration:
                lib.termsight_range_drop()  # no batch came: no wait to count
                # len() promised a batch that did not come, or micro-batches that no optimizer
                # step closed: the step ends with the loader.
                if opened:
                    lib.termsight_step_end()
                return
            except BaseException:
                lib.termsight_range_drop()
                raise
            lib.termsight_range_end()
            if not opened:
                lib.termsight_step_begin()
                opened, step_ran, mark = True, False, _optim.mark()
            first = False
            # Operators only while collecting: a dispatch mode costs every operator its trip
            # through Python even when nothing is recorded.
            traced = mode is not None and collecting.value
            if traced:
                mode.__enter__()
                mode.used = False
            ran, closing = True, False
            try:
                yield batch
                _evals.end()  # the loop takes its next batch: its evaluation is over
            except GeneratorExit:
                # The loop stopped at this batch. A step in which no operator ran (`if i >= N:
                # break` at the top of the loop) trained nothing: it is left unended, so it is not
                # counted. Without operator tracing, it cannot be told and counts.
                ran, closing = not traced or mode.used, True
                raise
            finally:
                if traced:
                    mode.__exit__(None, None, None)
                step_ran = step_ran or ran
                # A step is an optimizer step: a batch after which none ran is a micro-batch of
                # the step, which goes on with the next batch. A loop closed before its optimizer
                # step (an exception or Ctrl-C in the middle of the step) leaves it unfinished:
                # unended, not counted.
                if closing and _optim.accumulating(mark):
                    opened = False
                elif closing or not _optim.accumulating(mark):
                    if step_ran:
                        lib.termsight_step_end()
                    opened = False
    finally:
        _evals.end()
        _evals.loops -= 1
        if sampler is not None:
            sampler.stop()


def _make_ops(enabled, model, cuda):
    if not enabled:
        return None
    return ops(model=model, cuda=cuda)


# ---- zero code: an unmodified script under `termsight run` ---------------------------------


class _AutoSteps:
    """The state of auto(): the iterator whose batches are the steps, and the open step."""

    def __init__(self, lib, hook, queue_ms):
        self.lib = lib
        self.hook = hook
        self.queue_ms = queue_ms
        self.owner = None  # weakref to the iterator that makes the steps
        self.open = False  # a step is open (begun, not ended)
        self.mark = 0  # the hook's count of operators when the step began
        self.traced = False  # operators are being recorded in the open step
        self.collecting = _lib.collecting_flag()
        self.wait_ids = None
        self.opt_mark = None  # _optim's count when the open step began
        self.evaluating = False  # an evaluation pass is open (EVAL_BEGIN marked, no END yet)
        self.comm_tracked = hook is None  # collectives followed to their completion

    def end_step(self):
        """Ends the open step: counted when operators ran in it (or where that cannot be told);
        a step in which nothing ran (a loop that stopped at its top) is left unended, so it is
        not counted."""
        if not self.open:
            return
        self.open = False
        ran = True
        if self.traced:
            ran = self.hook.termsight_torch_recorded() != self.mark
            self.hook.termsight_torch_enable(0)
            self.traced = False
        if ran:
            self.lib.termsight_step_end()

    def begin_step(self):
        lib = self.lib
        lib.termsight_step_begin()
        self.open = True
        self.opt_mark = _optim.mark()
        if not self.comm_tracked:
            self.track_comm()
        if self.hook is not None and self.collecting.value:
            self.mark = self.hook.termsight_torch_recorded()
            self.hook.termsight_torch_enable(1)
            self.traced = True

    def track_comm(self):
        self.comm_tracked = track_collectives() is not False  # False: no process group yet

    def eval_begin(self):
        """Batches drawn without gradients from a loader that does not make the steps: an
        evaluation pass, in no step. The training step whose optimizer step ran ends first."""
        if self.open and not _optim.accumulating(self.opt_mark):
            self.end_step()
        self.lib.termsight_phase_mark(EVAL_BEGIN)
        self.evaluating = True

    def eval_end(self):
        if self.evaluating:
            self.evaluating = False
            self.lib.termsight_phase_mark(EVAL_END)

    def stand_back(self):
        """The program marks its own steps from now on: the open step ends, none begins."""
        self.end_step()
        self.owner = None

    def dropped(self, ref):
        # The loop let go of its iterator (a break, or the loop's frame ended): its step ends now,
        # unless it never reached its optimizer step (an exception or Ctrl-C in the middle of
        # it): that step is unfinished, left unended, and not counted.
        if self.owner is ref:
            if _optim.accumulating(self.opt_mark):
                self.open = False
                if self.traced:
                    self.hook.termsight_torch_enable(0)
                    self.traced = False
            else:
                self.end_step()
            self.owner = None

    def wait_begin(self):
        """The wait for a batch, open until the loader delivers (then termsight_range_end):
        a loop stuck there shows where (termsight top, termsight hang)."""
        lib = self.lib
        w, t = DATA_WAIT_NAME.encode(), DATA_WAIT_TYPE.encode()
        lib.termsight_range_begin_id(lib.termsight_name_n(w, len(w)),
                                     lib.termsight_name_n(t, len(t)))


_auto = []


def auto(queue_ms=10):
    """Profiles an unmodified PyTorch script: what steps() records, for every DataLoader loop,
    without one line in the script. `termsight run -- python3 train.py` calls it when the script
    imports torch (through the sitecustomize it puts on PYTHONPATH); a script may call it too.

    Each batch taken from a DataLoader iterator with gradients enabled begins a step (or is the
    next micro-batch of the open step, where no optimizer step ran since it began), which ends
    when the loop asks for the next batch, when the loader is exhausted or when the loop lets go
    of its iterator (a break). The first iterator to make a step makes them until it is done;
    batches of other loaders meanwhile (a second loader zipped in) are data waits inside the
    step, not steps; batches of another loader drawn without gradients (validation under
    torch.no_grad()) are an evaluation pass, in no step: from the first such batch until that
    loader is done or the training loop asks for its next batch. A program that marks its steps
    itself (termsight.torch.steps(), termsight.step(), Profiler.step()) is left to do so: from
    its first such call, auto() makes no step and no wait. The wait for each batch, the
    loader's prefetch queue and its worker processes' names are recorded as steps() records
    them; operators (with their modules, backward too) through the native hook
    (libtermsight-torch.so) while a step is open and the session collects: where the hook is
    missing, steps and waits only, with one warning. Returns True when installed (once), False
    without a session."""
    if _auto:
        return True
    lib = _lib.load()
    session = lib.termsight_session_current()
    if not session:
        return False
    _lib.register_stacks(lib, session)
    torch = _import_torch()
    _install_profiler_lend(torch, lib)
    _optim.install(torch)
    hook = _lib.load_torch_hook()
    if hook is None:
        warnings.warn("termsight: PyTorch operators are not recorded without libtermsight-torch.so "
                      "(%s); steps and data waits are" % (_lib.torch_hook_missing() or "not found"),
                      RuntimeWarning, stacklevel=2)
    else:
        _install_module_hooks(torch)
    from torch.utils.data import dataloader as dl

    st = _AutoSteps(lib, hook, queue_ms)
    loader_iter, base_next = dl.DataLoader.__iter__, dl._BaseDataLoaderIter.__next__
    samplers = weakref.WeakKeyDictionary()  # iterator -> its depth sampler

    def __iter__(self):
        # A loader iterated without gradients while another makes the steps: an evaluation
        # pass, from here (its workers start now) on.
        evaluating = False
        try:
            evaluating = not torch.is_grad_enabled()
            if evaluating and not st.evaluating and not _lib.explicit_steps:
                st.eval_begin()
        except Exception:  # noqa: BLE001 -- the profiler never stops the training
            pass
        it = loader_iter(self)
        try:
            _name_workers(lib, it, evaluating)
            if isinstance(it, dl._BaseDataLoaderIter) and it not in samplers:
                sampler = _depth_sampler(lib, self, weakref.proxy(it), st.queue_ms)
                if sampler is not None:
                    samplers[it] = sampler
        except Exception:  # noqa: BLE001 -- the profiler never stops the training
            pass
        return it

    def __next__(self):
        if _lib.explicit_steps:
            if st.open:
                st.stand_back()
            return base_next(self)
        owner = st.owner() if st.owner is not None else None
        steps = owner is None or owner is self
        evaluating = owner is not self and not torch.is_grad_enabled()
        if evaluating and not st.evaluating:
            st.eval_begin()
        elif steps and not evaluating:
            st.eval_end()  # the training loop asks for its next batch: evaluation is over
        if steps and st.open and not _optim.accumulating(st.opt_mark):
            st.end_step()  # the loop asks for the next batch: the step it trained ends
        st.wait_begin()
        try:
            batch = base_next(self)
        except StopIteration:
            lib.termsight_range_drop()  # no batch came: no wait to count
            if evaluating:
                st.eval_end()  # the evaluation loader is done
            if steps:
                st.end_step()  # micro-batches that no optimizer step closed end with the loader
                st.owner = None
            sampler = samplers.pop(self, None)
            if sampler is not None:
                sampler.stop()
            raise
        except BaseException:
            lib.termsight_range_drop()
            raise
        lib.termsight_range_end()
        if steps and torch.is_grad_enabled():
            if owner is None:
                st.owner = weakref.ref(self, st.dropped)
            if not st.open:  # else the next micro-batch of the open step
                st.begin_step()
        return batch

    dl.DataLoader.__iter__ = __iter__
    dl._BaseDataLoaderIter.__next__ = __next__
    _auto.append(st)
    return True
