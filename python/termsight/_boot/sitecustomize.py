"""termsight run's hook into Python programs (this folder is first on PYTHONPATH under
`termsight run`, unless --no-python): when the program imports torch, termsight.torch.auto()
profiles its DataLoader loops, operators and queues without a line changed in it.

It first runs the sitecustomize it stands in front of (Debian's, a virtualenv's), so the program
starts as it would have. Nothing here ever stops the program: any failure is one warning."""

import os
import sys


def _chain():
    """Runs the next sitecustomize on sys.path, the one Python would have imported."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        if os.path.abspath(entry or os.curdir) == here:
            continue
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", [entry])
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            sys.modules["sitecustomize"] = module
            spec.loader.exec_module(module)
            return


def _when_torch_is_imported():
    """A finder that lets the real torch load, then calls termsight.torch.auto()."""
    import importlib.abc
    import importlib.machinery

    class TorchFinder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name != "torch":
                return None
            sys.meta_path.remove(self)  # once, and the real finders find the real torch
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return spec
            loader, run = spec.loader, spec.loader.exec_module

            def exec_module(module):
                run(module)
                _start()

            loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, TorchFinder())


def _start():
    try:
        import termsight.torch
        termsight.torch.auto()
    except Exception as e:  # noqa: BLE001 -- the program must run on, profiled or not
        import warnings
        warnings.warn("termsight: PyTorch is not profiled: %s" % (e,), RuntimeWarning)


def _adopt_flight_signal():
    """Under --flight the library's SIGUSR2 handler becomes a Python one, which the program can
    save and restore with signal.getsignal (termsight/_lib.py, adopt_flight_signal)."""
    if os.environ.get("TERMSIGHT_FLIGHT", "0") in ("", "0", "no", "false"):
        return
    try:
        from termsight import _lib

        _lib.adopt_flight_signal()
    except Exception:  # noqa: BLE001 -- the profiler never stops the program
        pass


try:
    _chain()
finally:
    _adopt_flight_signal()
    if os.environ.get("TERMSIGHT_AUTOSTART") == "1":
        if "torch" in sys.modules:
            _start()
        else:
            _when_torch_is_imported()
