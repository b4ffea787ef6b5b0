#!/usr/bin/env python3
"""torch_gpu_train.py: what a PyTorch user runs, for bench/gpu_check.sh's "PyTorch on CUDA".

A small Transformer language model (--model lm) or a small CNN (--model cnn) trained on synthetic
data from a DataLoader with worker processes, bf16 autocast on CUDA (off on the CPU), AdamW, and
loss.item() every step (which waits for the GPU). It does not import termsight: under
`termsight run -- python3 torch_gpu_train.py ...` termsight finds the steps itself (one per
optimizer.step()).

The script keeps its own clock (time.perf_counter_ns: CLOCK_MONOTONIC on Linux) and writes to
--log, flushed every step (a step's lines once the next step's batch has arrived):
  step N BEGIN_NS END_NS   step N (1-based): from the loop's ask for its batch to its ask for
                           the next one (after loss.item() and the loss printed)
  batch N ARRIVED_NS       when step N's batch arrived from the loader
  plant KIND N             step N is a planted one (KIND launch_bound or data_stall)
and ends with "trained N steps (X ms/step)" on stdout, X the mean of the steps after the first
tenth (at most 10 warm-up steps: CUDA's lazy start, cuBLAS and cuDNN handles, the first buffers).

--profiler FILE runs the whole program under torch.profiler (activities CPU and, on CUDA, CUDA)
and writes FILE as JSON: {"steps", "kernels", "kernels_per_step", "kernel_us_per_step",
"copies", "copy_us_per_step", "ms_per_step"}, from the profiler's own trace (Kineto's categories:
"kernel"; "gpu_memcpy" and "gpu_memset" are the copies).

Planted phases, for the advisor to find:
  --plant-launch-bound K   K consecutive steps from a quarter of the run that also launch
                           LAUNCH_OPS tiny elementwise kernels on a small tensor: the GPU idles
                           while the host launches
  --plant-data-stall K     K steps from half the run, STALL_SPACING apart, whose batch a
                           DataLoader worker delivers STALL_S late (a sleep in __getitem__ for
                           the batch's first sample); spaced so that each waits on its own,
                           beyond what the loader had prefetched

usage: torch_gpu_train.py [--model lm|cnn] [--size tiny|small|large] [--device cuda|cpu]
                          [--steps N] [--workers N] [--log FILE] [--profiler FILE]
                          [--plant-launch-bound K] [--plant-data-stall K]
"""
import argparse
import contextlib
import json
import math
import os
import sys
import tempfile
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

LAUNCH_OPS = 2000  # tiny kernels per launch-bound step
STALL_S = 0.2  # a data-stall step's late delivery
# Batches in flight: workers * prefetch_factor (2 * 2 by default); a stall further apart than
# that waits on its own instead of overlapping the one before.
STALL_SPACING = 6
POOL = 64  # distinct synthetic samples (indexed modulo): generating data is not the point

# The models' sizes. "large" is big enough that kernels, not the host's launches, fill a step;
# "tiny" is for the CPU (gpu_check.sh's dry run): "small" takes seconds a step on a 2-core VM.
SIZES = {
    ("lm", "tiny"): {"layers": 2, "d_model": 64, "heads": 2, "seq": 32, "vocab": 512,
                     "batch": 8},
    ("lm", "small"): {"layers": 4, "d_model": 256, "heads": 4, "seq": 128, "vocab": 8192,
                      "batch": 16},
    ("lm", "large"): {"layers": 8, "d_model": 1024, "heads": 16, "seq": 512, "vocab": 32768,
                      "batch": 16},
    # Images travel as uint8 (a quarter of float32's bytes), so copies stay a small share of a
    # step's device time; they become floats on the device.
    ("cnn", "tiny"): {"widths": (16, 32), "image": 32, "batch": 16, "classes": 10},
    ("cnn", "small"): {"widths": (32, 64, 128, 128), "image": 32, "batch": 32, "classes": 10},
    ("cnn", "large"): {"widths": (128, 256, 512, 512), "image": 64, "batch": 128,
                       "classes": 100},
}


def now_ns():
    return time.perf_counter_ns()


class Synthetic(Dataset):
    """steps * batch samples from a fixed random pool; the first sample of a stalled batch
    sleeps STALL_S in the worker that makes it."""

    def __init__(self, model, cfg, steps, stalled):
        g = torch.Generator().manual_seed(0)
        self.batch = cfg["batch"]
        self.n = steps * self.batch
        self.stalled = frozenset(stalled)  # 0-based batch indices
        if model == "lm":
            self.tokens = torch.randint(0, cfg["vocab"], (POOL, cfg["seq"] + 1), generator=g)
        else:
            side = cfg["image"]
            self.images = torch.randint(0, 256, (POOL, 3, side, side), dtype=torch.uint8,
                                        generator=g)
            self.labels = torch.randint(0, cfg["classes"], (POOL,), generator=g)
        self.model = model

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i % self.batch == 0 and i // self.batch in self.stalled:
            time.sleep(STALL_S)
        j = i % POOL
        if self.model == "lm":
            return self.tokens[j]
        return self.images[j], self.labels[j]


class LM(nn.Module):
    """A pre-norm Transformer decoder (causal self-attention) over learned positions."""

    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.embed = nn.Embedding(cfg["vocab"], d)
        self.pos = nn.Parameter(torch.zeros(cfg["seq"], d))
        layer = nn.TransformerEncoderLayer(d, cfg["heads"], 4 * d, dropout=0.0,
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, cfg["layers"], enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, cfg["vocab"], bias=False)
        # Made on the host and copied once: no kernel outside the steps.
        seq = cfg["seq"]
        mask = torch.triu(torch.full((seq, seq), float("-inf")), diagonal=1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos
        x = self.blocks(x, mask=self.mask)
        return self.head(self.norm(x))


def cnn(cfg):
    layers, cin = [], 3
    for w in cfg["widths"]:
        for c in (cin, w):
            layers += [nn.Conv2d(c, w, 3, padding=1, bias=False), nn.BatchNorm2d(w),
                       nn.ReLU(inplace=True)]
        layers.append(nn.MaxPool2d(2))
        cin = w
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, cfg["classes"])]
    return nn.Sequential(*layers)


def planted_steps(args):
    """(launch-bound steps, data-stall steps), 1-based; exits 2 when they do not fit."""
    launch = set(range(args.steps // 4 + 1, args.steps // 4 + 1 + args.plant_launch_bound))
    first = args.steps // 2 + 1
    data = {first + STALL_SPACING * i for i in range(args.plant_data_stall)}
    if (launch and max(launch) >= first) or (data and max(data) > args.steps):
        sys.exit(f"torch_gpu_train.py: {args.steps} steps hold no {args.plant_launch_bound} "
                 f"launch-bound steps from step {args.steps // 4 + 1} and "
                 f"{args.plant_data_stall} data stalls from step {first}, {STALL_SPACING} apart")
    return launch, data


def launch_bound(device):
    """LAUNCH_OPS elementwise ops on a 256-element tensor: each a kernel of a microsecond or two,
    each launched by the host; the GPU waits for the host in between."""
    with torch.no_grad():
        t = torch.ones(256, device=device)
        for _ in range(LAUNCH_OPS):
            t.mul_(1.0001)


def to_device(batch, device, model):
    """The batch on the device, inputs and targets (the LM predicts the next token)."""
    if model == "lm":
        batch = batch.to(device, non_blocking=True)
        return batch[:, :-1], batch[:, 1:]
    images, labels = batch
    images = images.to(device, non_blocking=True).float().div_(255)
    return images, labels.to(device, non_blocking=True)


def train(args, device, log):
    """Builds the model and its loader, trains args.steps steps; the step times (ns), each
    from the loop's ask for its batch to its ask for the next (after loss.item()), as termsight
    bounds a step found from optimizer.step()."""
    cfg = SIZES[(args.model, args.size)]
    launch, data = planted_steps(args)
    for kind, steps in (("launch_bound", launch), ("data_stall", data)):
        for s in sorted(steps):
            log.write(f"plant {kind} {s}\n")
    torch.manual_seed(0)
    net = (LM(cfg) if args.model == "lm" else cnn(cfg)).to(device)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
    cuda = device.type == "cuda"
    loader = DataLoader(Synthetic(args.model, cfg, args.steps, [s - 1 for s in data]),
                        batch_size=cfg["batch"], num_workers=args.workers, pin_memory=cuda,
                        # The last ask meets StopIteration at once, not after the workers are
                        # shut down: the last step ends when the loop asks, as every other.
                        persistent_workers=args.workers > 0)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if cuda else contextlib.nullcontext()
    times = []
    done = None  # the step before: (step, begin, arrived), logged once the loop asks again
    it = iter(loader)
    while True:
        t0 = now_ns()
        if done is not None:
            times.append(t0 - done[1])
        try:
            batch = next(it)
        except StopIteration:
            break
        arrived = now_ns()
        if done is not None:
            log_step(log, done, t0)
        step = len(times) + 1
        if step in launch:
            launch_bound(device)
        inputs, targets = to_device(batch, device, args.model)
        with autocast:
            out = net(inputs)
            loss = nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]).float(),
                                               targets.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        value = loss.item()  # waits for the GPU: the step's work is done when it returns
        print(f"step {step} loss {value:.4f}")
        done = (step, t0, arrived)
    if done is not None:
        log_step(log, done, t0)
    return times


def log_step(log, done, end):
    """A step's lines in the log, written inside the next step (between its batch's arrival and
    its work), so that writing them falls within a step by either clock."""
    step, begin, arrived = done
    log.write(f"batch {step} {arrived}\nstep {step} {begin} {end}\n")
    log.flush()


def ms_per_step(times):
    warm = min(10, len(times) // 10)
    kept = times[warm:] or times
    return sum(kept) / len(kept) / 1e6 if kept else math.nan


def profile_summary(prof, steps, ms):
    """Kernels and copies per step from the profiler's own trace (Kineto's categories)."""
    fd, path = tempfile.mkstemp(prefix="torch-trace.", suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            doc = json.load(f)
    finally:
        os.unlink(path)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
    copies = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("gpu_memcpy",
                                                                           "gpu_memset")]
    per = max(steps, 1)
    return {"steps": steps, "kernels": len(kernels), "kernels_per_step": len(kernels) / per,
            "kernel_us_per_step": sum(float(e.get("dur", 0)) for e in kernels) / per,
            "copies": len(copies),
            "copy_us_per_step": sum(float(e.get("dur", 0)) for e in copies) / per,
            "ms_per_step": ms}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=("lm", "cnn"), default="lm")
    p.add_argument("--size", choices=("tiny", "small", "large"), default="small")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--log", default=os.devnull)
    p.add_argument("--profiler", metavar="FILE")
    p.add_argument("--plant-launch-bound", type=int, default=0, metavar="K")
    p.add_argument("--plant-data-stall", type=int, default=0, metavar="K")
    args = p.parse_args(argv)
    if args.steps < 1:
        p.error("--steps must be 1 or more")
    return args


def main(argv):
    args = parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("torch_gpu_train.py: CUDA is not available to this PyTorch "
                 f"({torch.__version__}); --device cpu trains on the CPU")
    prof = None
    if args.profiler:
        acts = [torch.profiler.ProfilerActivity.CPU]
        if device.type == "cuda":
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        prof = torch.profiler.profile(activities=acts)
    with open(args.log, "w") as log, (prof if prof is not None else contextlib.nullcontext()):
        times = train(args, device, log)
    ms = ms_per_step(times)
    print(f"trained {len(times)} steps ({ms:.4f} ms/step)", flush=True)
    if prof is not None:
        summary = profile_summary(prof, len(times), ms)
        with open(args.profiler, "w") as f:
            json.dump(summary, f)
        print("profiler: " + json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
