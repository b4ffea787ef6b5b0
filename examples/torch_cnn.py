#!/usr/bin/env python3
"""A small CNN trained with PyTorch on generated images, profiled by termsight.

Each image is 1x28x28 noise with a bright bar whose position and direction give its class
(10 classes); a multi-worker DataLoader produces the batches (with a light augmentation: a
random shift and fresh noise per sample). The network (two conv-ReLU-pool blocks and a linear
classifier) learns it: the loss falls and the accuracy on held-out images is printed at the end.

The three lines termsight asks for are marked "termsight:". Then:

    python3 examples/torch_cnn.py --steps 60 --output ./termsight-data --analyse

--slow-data makes every sample wait 4 ms (or --slow-data-ms) in the workers, as if read from
slow storage, so that the input pipeline, not the network, is the bottleneck (the queue report
says so);
--no-profile runs without termsight.
"""

import argparse
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))  # the source tree's package

import termsight  # noqa: E402  termsight:
import termsight.torch  # noqa: E402  termsight:

CLASSES = 10
SIDE = 28


class Bars(Dataset):
    """Images of a bar: classes 0-4 horizontal at five heights, 5-9 vertical at five columns."""

    def __init__(self, n, seed, slow_ms=0.0):
        self.n = n
        self.seed = seed
        self.slow_ms = slow_ms

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(self.seed * 1000003 + i)
        label = int(torch.randint(CLASSES, (1,), generator=g))
        img = 1.2 * torch.randn(1, SIDE, SIDE, generator=g)
        pos = 3 + 5 * (label % 5) + int(torch.randint(-1, 2, (1,), generator=g))  # shift
        if label < 5:
            img[0, pos:pos + 2, 2:SIDE - 2] += 1.0
        else:
            img[0, 2:SIDE - 2, pos:pos + 2] += 1.0
        if self.slow_ms > 0:  # storage that answers slowly (a network file system, say)
            time.sleep(self.slow_ms / 1000.0)
        return img, label


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.classifier = nn.Linear(16 * 7 * 7, CLASSES)

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def accuracy(net, loader):
    net.eval()
    right = total = 0
    with torch.no_grad():
        for x, y in loader:
            right += int((net(x).argmax(1) == y).sum())
            total += len(y)
    net.train()
    return right / max(total, 1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=100, help="training steps (default 100)")
    ap.add_argument("--batch", type=int, default=32, help="batch size (default 32)")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader workers (default 2)")
    ap.add_argument("--lr", type=float, default=0.02, help="SGD learning rate (default 0.02)")
    ap.add_argument("--slow-data", action="store_true",
                    help="make the input pipeline the bottleneck (4 ms of storage latency per "
                    "sample, or --slow-data-ms)")
    ap.add_argument("--slow-data-ms", type=float, default=4.0,
                    help="the storage latency per sample of --slow-data, in ms (default 4)")
    ap.add_argument("--output", default=os.environ.get("TERMSIGHT_OUTPUT", "./termsight-data"),
                    help="folder for termsight's run folder (default ./termsight-data)")
    ap.add_argument("--analyse", action="store_true", help="write the report after training")
    ap.add_argument("--no-profile", action="store_true", help="train without termsight")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    a = ap.parse_args(argv)
    if a.steps < 1 or a.batch < 1 or a.workers < 0 or a.slow_data_ms < 0:
        ap.error("--steps and --batch must be at least 1, --workers and --slow-data-ms at "
                 "least 0")

    torch.manual_seed(0)
    torch.set_num_threads(a.threads)
    train = Bars(a.steps * a.batch, seed=1, slow_ms=a.slow_data_ms if a.slow_data else 0.0)
    held_out = Bars(512, seed=2)
    if a.workers:
        loader = DataLoader(train, batch_size=a.batch, shuffle=True, num_workers=a.workers,
                            prefetch_factor=2)
    else:
        loader = DataLoader(train, batch_size=a.batch, shuffle=True)
    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=a.lr, momentum=0.9)

    prof = None
    if not a.no_profile:
        prof = termsight.Profiler(output_path=a.output)  # termsight:
    batches = loader if prof is None else termsight.torch.steps(loader, model=net)  # termsight:

    losses = []
    t0 = time.perf_counter()
    trained = 0
    for x, y in batches:
        loss = F.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
        trained += 1
        if trained % 20 == 0:
            print("step %4d  loss %.4f" % (trained, sum(losses[-20:]) / len(losses[-20:])),
                  flush=True)
    seconds = time.perf_counter() - t0

    report = None
    if prof is not None:
        prof.stop()
        if a.analyse:
            report = prof.analyse()
        prof.close()
    acc = accuracy(net, DataLoader(held_out, batch_size=128))
    first = sum(losses[:10]) / min(len(losses), 10)
    last = sum(losses[-10:]) / min(len(losses), 10)
    print("trained %d steps in %.2f s: loss %.4f -> %.4f, held-out accuracy %.1f%%"
          % (trained, seconds, first, last, 100.0 * acc))
    if prof is not None:
        print("run folder: %s" % prof.run_folder)
    if report:
        print("report: %s" % report)
    if not math.isfinite(last):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
