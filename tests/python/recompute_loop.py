"""A CPU training loop with or without activation checkpointing, and its own
timers: the before/after pair of the recompute_overhead finding.

    recompute_loop.py --timings out.json [--checkpoint] [--blocks 6] [--steps 40]

Each of --blocks MLP blocks runs through torch.utils.checkpoint.checkpoint with
--checkpoint (backward runs its forward again), plainly without. The loop times
its checkpoint calls itself (checkpoint_s: their total over the run) and each
whole step; it knows nothing of gputriage.
"""
import argparse
import json
import time

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--timings", required=True)
    parser.add_argument("--checkpoint", action="store_true")
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    blocks = nn.ModuleList(nn.Sequential(nn.Linear(args.hidden, 2 * args.hidden), nn.GELU(),
                                         nn.Linear(2 * args.hidden, args.hidden)) for _ in range(args.blocks))
    head = nn.Linear(args.hidden, 10)
    params = list(blocks.parameters()) + list(head.parameters())
    optimizer = torch.optim.SGD(params, lr=1e-3)
    data = torch.utils.data.TensorDataset(torch.randn(args.steps * args.batch, args.hidden),
                                          torch.randint(0, 10, (args.steps * args.batch,)))
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch)
    checkpoint_s, step_s = 0.0, []
    for x, y in loader:
        started = time.perf_counter()
        h = x.requires_grad_()  # reentrant checkpointing needs an input that requires grad
        for block in blocks:
            if args.checkpoint:
                t = time.perf_counter()
                h = h + checkpoint(block, h)
                checkpoint_s += time.perf_counter() - t
            else:
                h = h + block(h)
        loss = nn.functional.cross_entropy(head(h), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        step_s.append(time.perf_counter() - started)
    with open(args.timings, "w") as f:
        json.dump({"checkpoint_s": checkpoint_s, "step_s": step_s, "blocks": args.blocks}, f)


if __name__ == "__main__":
    main()
