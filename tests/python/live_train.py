"""A small language model trained the way people write it, for the live view's tests: a Dataset
that tokenises text in Python, a DataLoader with worker processes, a 2-layer Transformer, AdamW,
gradient clipping, a loss printed now and then. Nothing in it knows termsight: it runs under
`termsight run`, which profiles it as termsight.torch.auto() does.

It keeps its own count: after every optimizer step it appends "step N T_NS DUR_NS" to --log
(T_NS on CLOCK_MONOTONIC, the collector's epoch; DUR_NS the step as the script timed it, from
the previous step's end), flushed, so a test can ask at any moment which step the program is at.

usage: live_train.py --seconds S --log FILE [--min-steps N] [--workers N] [--batch B] [--seq L]

It trains for S seconds and at least N steps (0 by default).
"""

import argparse
import math
import os
import random
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

WORDS = ("the of and to in is was for on that with by as at from his her an were are which this "
         "be or has had it not first also new one two their after its who but they have been "
         "more other into year over some when she all time most where only up out would we can "
         "than state during made these under later about used being many three against years "
         "between then such both through before including him part known several early each "
         "while so there city another since same what any until may game well him became").split()


class TextDataset(Dataset):
    """Sentences made up and tokenised in Python, per item, as a text pipeline does."""

    def __init__(self, n, seq, seed):
        self.n, self.seq, self.seed = n, seq, seed
        self.vocab = {w: i + 1 for i, w in enumerate(WORDS)}

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        rng = random.Random(self.seed * 1000003 + i)
        words = [rng.choice(WORDS) for _ in range(self.seq + 1)]
        ids = [self.vocab.get(w.lower().strip(".,"), 0) for w in " ".join(words).split()]
        t = torch.tensor(ids[: self.seq + 1], dtype=torch.long)
        return t[:-1], t[1:]


class TinyLM(nn.Module):
    def __init__(self, vocab, dim=64, heads=4, layers=2, seq=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(1, seq, dim))
        layer = nn.TransformerEncoderLayer(dim, heads, dim_feedforward=2 * dim, dropout=0.1,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(dim, vocab)

    def forward(self, x):
        h = self.embed(x) + self.pos[:, : x.shape[1]]
        return self.head(self.encoder(h))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--min-steps", type=int, default=0)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=32)
    a = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    data = TextDataset(1 << 20, a.seq, 1)
    loader = DataLoader(data, batch_size=a.batch, shuffle=True, num_workers=a.workers,
                        persistent_workers=a.workers > 0)
    model = TinyLM(len(WORDS) + 1, seq=a.seq)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    log = open(a.log, "w", buffering=1)
    start = last = time.monotonic_ns()
    step = 0
    model.train()
    for x, y in loader:
        opt.zero_grad(set_to_none=True)
        out = model(x)
        loss = loss_fn(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        now = time.monotonic_ns()
        log.write("step %d %d %d\n" % (step, now, now - last))
        last = now
        if step % 100 == 0:
            print("step %d loss %.3f" % (step, loss.item()), flush=True)
        if now - start >= a.seconds * 1e9 and step >= a.min_steps:
            break
    log.close()
    print("trained %d steps in %.1f s, %s" % (step, (time.monotonic_ns() - start) / 1e9,
                                              "ok" if math.isfinite(loss.item()) else "nan"),
          flush=True)


if __name__ == "__main__":
    main()
