"""A two-rank DistributedDataParallel training loop on the CPU (gloo), as a team
would write it: torch.multiprocessing.spawn starts the ranks, each with its own
DataLoader. One rank can be made slow -- its loader sleeps per batch, or it
stalls on the host after each optimizer step -- to check that gputriage names
that rank (and never the one that waits for it). Imports nothing of gputriage.

    python3 ddp_ranks_loop.py --slow-rank 1 --loader-ms 30 --timings out.json

--all-reduce-in-forward sums the first layer's output over the ranks inside
forward (tensor parallelism's pattern): the ranks then meet in forward first;
--own-comm-hook registers the job's own DDP communication hook (counted).
"""
import argparse
import gc
import json
import os
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel


class AllReducedActivations(torch.nn.Module):
    """A layer whose output is summed over the ranks inside forward, as tensor
    parallelism's row-parallel layers do: the ranks meet in forward too."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        y = self.inner(x)
        dist.all_reduce(y)
        return y / dist.get_world_size()


def counting_allreduce(state, bucket):
    """A job's own DDP communication hook: DDP's all-reduce, counted."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    state["calls"] += 1
    return allreduce_hook(None, bucket)


class Batches(torch.utils.data.Dataset):
    """Whole batches of random data; `delay_s` of sleep per batch (a slow disk)."""

    def __init__(self, count, batch, delay_s):
        self.count, self.batch, self.delay_s = count, batch, delay_s

    def __len__(self):
        return self.count

    def __getitem__(self, i):
        if self.delay_s:
            time.sleep(self.delay_s)
        g = torch.Generator().manual_seed(i)
        return torch.randn(self.batch, 128, generator=g), torch.randint(0, 10, (self.batch,), generator=g)


def worker(rank, world, args, port):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    first = torch.nn.Linear(128, 256)
    if args.all_reduce_in_forward:
        first = AllReducedActivations(first)
    model = DistributedDataParallel(torch.nn.Sequential(first, torch.nn.ReLU(), torch.nn.Linear(256, 10)))
    hook_state = {"calls": 0}
    if args.own_comm_hook:
        model.register_comm_hook(hook_state, counting_allreduce)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    slow = rank == args.slow_rank
    loader = torch.utils.data.DataLoader(Batches(args.steps, 32, args.loader_ms / 1e3 if slow else 0),
                                         batch_size=None, num_workers=0)
    loss_fn = torch.nn.CrossEntropyLoss()
    waits, stalls = [], []
    t = time.perf_counter()
    for x, y in loader:
        waits.append(time.perf_counter() - t)
        loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if slow and args.stall_ms:
            s = time.perf_counter()
            time.sleep(args.stall_ms / 1e3)  # a per-step host stall on this rank only
            stalls.append(time.perf_counter() - s)
        t = time.perf_counter()
    if args.timings:
        with open(f"{args.timings}.rank{rank}", "w") as f:
            json.dump({"rank": rank, "pid": os.getpid(), "data_wait": waits, "stall": stalls,
                       "comm_hook_calls": hook_state["calls"]}, f)
    # The model (and its Python communication hook's futures) goes before the
    # process group: torch 1.13 with a Python hook on gloo otherwise hangs at
    # interpreter exit now and then (4 runs in 10 here, with no recorder at all).
    del model, optimizer
    gc.collect()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--slow-rank", type=int, default=-1)
    ap.add_argument("--loader-ms", type=float, default=0.0)
    ap.add_argument("--stall-ms", type=float, default=0.0)
    ap.add_argument("--all-reduce-in-forward", action="store_true")
    ap.add_argument("--own-comm-hook", action="store_true")
    ap.add_argument("--timings")
    args = ap.parse_args()
    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(args.ranks, args, port), nprocs=args.ranks, join=True)


if __name__ == "__main__":
    main()
