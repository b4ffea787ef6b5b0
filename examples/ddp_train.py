#!/usr/bin/env python3
"""Data-parallel training on CPU (torch.distributed, gloo), one termsight session per rank.

Run without RANK in the environment, the script is its own launcher: it starts --ranks
processes of itself the way torchrun does (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID per process), waits for them (at most --timeout
seconds, then ends them) and exits non-zero when one failed. With RANK set (by this launcher,
torchrun or Slurm), it is one rank: a small MLP wrapped in DistributedDataParallel learns a
generated classification task from a DataLoader with --workers worker processes, through
termsight.torch.steps(), which also records every gradient bucket's all-reduce from issue to
completion. Each rank is an ordinary termsight session with its own run folder in the job
folder --output/<TORCHELASTIC_RUN_ID>/; with --analyse the launcher then writes the job report
(termsight analyse JOB_FOLDER: the straggler and its cause, the others' communication wait).

    python3 examples/ddp_train.py --ranks 4 --steps 30 --slow-rank 1 --slow-ms 150 --analyse

--slow-rank R --slow-ms MS makes rank R a straggler: each step it does MS ms more work between
forward and backward (a sleep inside the operator range "slow rank: extra work", so its own
report counts it as computation), and the other ranks wait for it in the gradient all-reduce:
their reports show it as communication wait (step trace comm_wait_us), not as gaps.
--no-profile trains without termsight.
"""

import argparse
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))  # the source tree's package

FEATURES = 32
CLASSES = 8


def say(text):
    """One line to stdout in one write: the ranks share the launcher's stdout, and print()'s
    separate write of the newline let two ranks' lines run together."""
    data = (text + "\n").encode()
    os.write(sys.stdout.fileno(), data)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(a, argv):
    """Starts a.ranks processes of this script as torchrun would, and waits for them."""
    port = str(free_port())
    run_id = "ddp_train-%d-%s" % (os.getpid(), port)
    procs = []
    for rank in range(a.ranks):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(a.ranks),
                   LOCAL_WORLD_SIZE=str(a.ranks), MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                   TORCHELASTIC_RUN_ID=run_id)
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__)] + argv,
                                      env=env))
    deadline = time.monotonic() + a.timeout
    codes = [None] * len(procs)
    while any(c is None for c in codes):
        for i, p in enumerate(procs):
            if codes[i] is None:
                codes[i] = p.poll()
        if any(c not in (None, 0) for c in codes) or time.monotonic() > deadline:
            break  # one failed (the others would wait for it forever) or too long
        time.sleep(0.05)
    for i, p in enumerate(procs):
        if codes[i] is None:
            p.terminate()
            try:
                codes[i] = p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                codes[i] = p.wait()
            print("rank %d: ended by the launcher" % i, file=sys.stderr, flush=True)
    failed = [i for i, c in enumerate(codes) if c != 0]
    if failed:
        print("ranks %s failed (exit codes %s)" % (failed, codes), file=sys.stderr, flush=True)
        return 1
    if a.analyse and not a.no_profile:
        # The job report: the ranks' reports merged (termsight analyse JOB_FOLDER).
        import termsight.cluster
        job = os.path.join(a.output, os.environ.get("TERMSIGHT_JOB") or run_id)
        res = termsight.cluster.analyse(job)
        print(res.summary, end="", flush=True)
        print("job report: %s" % res.report, flush=True)
    return 0


def dataset(n, seed):
    import torch
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(CLASSES, FEATURES, generator=torch.Generator().manual_seed(7)) * 2.0
    y = torch.randint(CLASSES, (n,), generator=g)
    x = centers[y] + torch.randn(n, FEATURES, generator=g)
    return torch.utils.data.TensorDataset(x, y)


def train(a):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler

    import termsight  # termsight:
    import termsight.torch  # termsight:

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(1)
    torch.manual_seed(0)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    data = dataset(a.steps * a.batch * world, seed=1)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=a.batch, sampler=sampler, num_workers=a.workers,
                        persistent_workers=False)
    model = nn.Sequential(nn.Linear(FEATURES, a.hidden), nn.ReLU(), nn.Linear(a.hidden, a.hidden),
                          nn.ReLU(), nn.Linear(a.hidden, CLASSES))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)

    prof = None
    if not a.no_profile:
        prof = termsight.Profiler(output_path=a.output,  # termsight:
                                  process_name="ddp_train.rank%d" % rank)
    batches = loader if prof is None else termsight.torch.steps(loader, model=ddp)  # termsight:
    slow = a.slow_ms / 1000.0 if rank == a.slow_rank else 0.0

    losses = []
    t0 = time.perf_counter()
    for x, y in batches:
        out = ddp(x)
        if slow:
            with termsight.range("slow rank: extra work", "ExtraWork"):
                time.sleep(slow)
        loss = F.cross_entropy(out, y)
        opt.zero_grad()
        loss.backward()  # the gradient all-reduce: waits here for the slowest rank
        opt.step()
        losses.append(float(loss))
    seconds = time.perf_counter() - t0

    report = None
    if prof is not None:
        prof.stop()
        if a.analyse:
            report = prof.analyse()
        prof.close()
    dist.destroy_process_group()
    first = sum(losses[:5]) / max(min(len(losses), 5), 1)
    last = sum(losses[-5:]) / max(min(len(losses), 5), 1)
    say("rank %d: trained %d steps in %.2f s: loss %.4f -> %.4f" % (rank, len(losses), seconds,
                                                                     first, last))
    if prof is not None:
        say("rank %d: run folder: %s" % (rank, prof.run_folder))
    if report:
        say("rank %d: report: %s" % (rank, report))
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=2, help="ranks to launch (default 2)")
    ap.add_argument("--steps", type=int, default=20, help="training steps per rank (default 20)")
    ap.add_argument("--batch", type=int, default=64, help="batch size per rank (default 64)")
    ap.add_argument("--hidden", type=int, default=256, help="hidden layer width (default 256)")
    ap.add_argument("--workers", type=int, default=1, help="DataLoader workers (default 1)")
    ap.add_argument("--slow-rank", type=int, default=-1,
                    help="the rank that does --slow-ms more work per step (default none)")
    ap.add_argument("--slow-ms", type=float, default=100.0,
                    help="the straggler's extra work per step in ms (default 100)")
    ap.add_argument("--output", default=os.environ.get("TERMSIGHT_OUTPUT", "./termsight-data"),
                    help="folder for the ranks' run folders (default ./termsight-data)")
    ap.add_argument("--analyse", action="store_true",
                    help="each rank writes its report, then the launcher the job report")
    ap.add_argument("--no-profile", action="store_true", help="train without termsight")
    ap.add_argument("--timeout", type=float, default=300.0,
                    help="seconds before the launcher ends the ranks (default 300)")
    a = ap.parse_args(argv)
    if a.ranks < 1 or a.steps < 1 or a.batch < 1 or a.workers < 0 or a.slow_ms < 0:
        ap.error("--ranks, --steps and --batch must be at least 1, --workers and --slow-ms at "
                 "least 0")
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return train(a)
    return launch(a, argv)


if __name__ == "__main__":
    sys.exit(main())
