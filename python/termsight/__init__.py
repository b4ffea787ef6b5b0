"""termsight: a ctypes binding over libtermsight.so (the live profiler for ML training).

    import termsight
    with termsight.Profiler(output_path="./data") as prof:
        q = prof.queue("prefetch", 8, role="host")
        for batch in loader:
            with prof.step():
                q.size(len(buffer))
                with prof.range("MatMul-op1", "MatMul"):
                    ...
        prof.stop()
        print(prof.analyse())          # the report folder

The library is found through TERMSIGHT_LIB, else next to this package, else the repository's
build tree (build/collectors/libtermsight.so), else ctypes.util.find_library("termsight");
analyse() runs the termsight command (TERMSIGHT_BIN, else beside the library's build tree, else
PATH). Importing never fails; Profiler() raises RuntimeError when the library cannot be loaded.
"""

from ._profiler import (  # noqa: F401
    ASCEND_ONLY,
    Profiler,
    Queue,
    TermsightError,
    TermsightOptionError,
    analyse,
    counter,
    mark,
    op_analyse,
    queue,
    range,
    step,
    thread_name,
)
from ._lib import find_cli, load as load_library, loaded_path as library_path  # noqa: F401

__version__ = "0.1.0"

__all__ = [
    "Profiler", "Queue", "TermsightError", "TermsightOptionError", "ASCEND_ONLY", "analyse",
    "op_analyse", "step", "range", "queue", "mark", "counter", "thread_name", "find_cli",
    "load_library", "library_path",
]
