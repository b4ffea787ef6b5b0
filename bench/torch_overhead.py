#!/usr/bin/env python3
"""What termsight.torch costs a PyTorch training step (examples/torch_cnn.py's CNN, CPU).

Modes take turns, in rounds, inside one process so they share the machine's state:
  plain     the training loop alone
  steps     termsight.torch.steps(loader, ops=False): steps, the DataLoader wait, the queue
  ops-nomod ops with termsight.torch.module_names(False): operators not named by their module
            (no module hooks) (before "ops": on a small
            machine a mode's place in the round moves its ratio, see bench/RESULTS.md)
  ops       steps(loader, model=net): the same plus every operator as a range, through the
            native hook (libtermsight-torch.so) where it was built, else the Python fallback
  ops-outputs ops with the native hook keeping every operator's outputs, as it does once a
            process group exists (termsight_torch_track_comm: collectives to their completion)
  idle-ops  steps with ops while the session exists but does not collect
  ops-py    ops through the Python fallback (a TorchDispatchMode; only where the native hook
            exists, which then still gets the module hooks' calls)
  bare-mode a TorchDispatchMode that only forwards each operator: what any dispatch mode costs,
            the floor under "ops-py"
  torch-prof torch.profiler.profile(activities=[CPU]) around the loop: its cost while it
            records (its processing at the end of the block is not in the step times)
Each round trains ROUND_STEPS steps per mode over the same in-memory batches (no workers, so
the loader costs nothing and only the instrumentation differs); the figure per mode is the
median over rounds of the mean step time. Prints one line per mode and the ratios to plain.

    /usr/bin/python3 bench/torch_overhead.py [--rounds 15] [--steps 40] [--threads 1]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "python"))
sys.path.insert(0, os.path.join(REPO, "examples"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import termsight  # noqa: E402
import termsight.torch  # noqa: E402
from torch_cnn import Bars, Net  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--steps", type=int, default=40, help="steps per mode per round")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(a.threads)
    data = Bars(a.steps * a.batch, seed=1)
    batches = []
    for i in range(a.steps):
        xs, ys = zip(*(data[i * a.batch + j] for j in range(a.batch)))
        batches.append((torch.stack(xs), torch.tensor(ys)))
    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

    out = tempfile.mkdtemp(prefix="torch-overhead-")
    prof = termsight.Profiler(output_path=out, start_profile=False)

    def train(batch_iter):
        t0 = time.perf_counter()
        for x, y in batch_iter:
            loss = F.cross_entropy(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        return (time.perf_counter() - t0) / a.steps

    from torch.utils._python_dispatch import TorchDispatchMode

    class Forward(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    def bare_mode():
        with Forward():
            return train(batches)

    def python_ops():
        real = termsight._lib.load_torch_hook
        termsight._lib.load_torch_hook = lambda: None
        try:
            return train(termsight.torch.steps(batches, model=net))
        finally:
            termsight._lib.load_torch_hook = real

    def ops_without_module_names():
        was = termsight.torch.module_names(False)
        try:
            return train(termsight.torch.steps(batches, model=net))
        finally:
            termsight.torch.module_names(was)

    def ops_keeping_outputs():
        hook = termsight._lib.load_torch_hook()
        was = hook.termsight_torch_track_comm(1)
        try:
            return train(termsight.torch.steps(batches, model=net))
        finally:
            hook.termsight_torch_track_comm(was)

    def torch_profiler():
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
            return train(batches)

    native = termsight._lib.load_torch_hook() is not None

    modes = {
        "plain": lambda: train(batches),
        "steps": lambda: train(termsight.torch.steps(batches, ops=False)),
        "ops-nomod": ops_without_module_names,
        "ops": lambda: train(termsight.torch.steps(batches, model=net)),
        "idle-ops": lambda: train(termsight.torch.steps(batches, model=net)),
        "bare-mode": bare_mode,
        "torch-prof": torch_profiler,
    }
    if native:
        modes["ops-outputs"] = ops_keeping_outputs
        modes["ops-py"] = python_ops
    times = {m: [] for m in modes}
    train(batches)  # warm-up
    for _ in range(a.rounds):
        for m, run in modes.items():
            collecting = m in ("steps", "ops", "ops-outputs", "ops-py", "ops-nomod")
            if collecting:
                prof.start()
            times[m].append(run())
            if collecting:
                prof.stop()
    dropped = prof.events_dropped
    prof.close()
    base = statistics.median(times["plain"])
    print("torch %s, %d threads, batch %d, %d rounds x %d steps per mode; events dropped: %d; "
          "operators through %s" % (torch.__version__, a.threads, a.batch, a.rounds, a.steps,
                                    dropped, "the native hook" if native else "Python"))
    for m, t in times.items():
        med = statistics.median(t)
        print("%-11s median step %8.3f ms  (min %.3f, max %.3f)  ratio %.3f"
              % (m, med * 1e3, min(t) * 1e3, max(t) * 1e3, med / base))


if __name__ == "__main__":
    main()
