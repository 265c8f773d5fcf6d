#!/usr/bin/python3
"""Records real multi-rank PyTorch profiler traces on this machine's CPU (gloo),
with a known cause of arrival skew at the collectives, for the straggler cases of
the corpus (tests/corpus/cases.toml, source "recorded here").

Each rank trains the same small MLP and averages its gradients with one
all-reduce per step (what DistributedDataParallel does, called from Python so the
profiler records the collective: DDP's reducer runs gloo from a thread the CPU
profiler of this torch does not see), so every rank waits for the last one. --late-rank R makes
rank R stall on the host for --delay-ms before its forward pass each step (a sleep,
as an I/O wait or a slow host call does, so the other ranks keep the cores): a
persistent straggler whose cause is host time. --moving makes a different
rank late each step (lateness that moves). Without either, no rank is late by
design. Clocks are aligned: the ranks run on one machine.

    /usr/bin/python3 tests/corpus/record_ranks.py OUT_DIR --ranks 4 --late-rank 2 --delay-ms 30

Writes OUT_DIR/rank-<r>.pt.trace.json.gz and OUT_DIR/run.json (what was injected).
"""
import argparse
import gzip
import json
import os
import sys
import time


def worker(rank, args):
    import torch
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(args.port)
    dist.init_process_group("gloo", rank=rank, world_size=args.ranks)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 256)
    y = torch.randn(64, 256)
    steps = args.warmup + args.active

    def late(step):
        if args.late_rank is not None:
            return rank == args.late_rank
        if args.moving:
            return rank == (step * 7 + 3) % args.ranks
        return False

    path = os.path.join(args.out, f"rank-{rank}.pt.trace.json")
    anchors = {}
    sched = torch.profiler.schedule(wait=0, warmup=args.warmup, active=args.active, repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=sched,
                                on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
        for step in range(steps):
            # The CPU profiler of this torch times events from its own start; a
            # wall-clock reading inside a named span gives each trace its offset to
            # the Unix epoch, so the ranks' clocks align as Kineto's do.
            with torch.profiler.record_function(f"wall_clock_anchor#{step}"):
                anchors[step] = time.time_ns()
            if late(step):
                with torch.profiler.record_function("host_stall"):
                    time.sleep(args.delay_ms / 1000.0)
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            grads = [p.grad for p in model.parameters()]
            flat = torch.cat([g.reshape(-1) for g in grads])
            dist.all_reduce(flat)
            flat /= args.ranks
            offset = 0
            for g in grads:
                g.copy_(flat[offset:offset + g.numel()].view_as(g))
                offset += g.numel()
            opt.step()
            prof.step()
    dist.barrier()
    dist.destroy_process_group()
    # This torch's CPU build exports a bare event list (no Kineto metadata): the
    # rank and world size go where Kineto writes them on CUDA builds.
    with open(path) as src:
        trace = json.load(src)
    if isinstance(trace, list):
        trace = {"traceEvents": trace}
    events = trace["traceEvents"]
    anchor = next(e for e in events if e.get("name", "").startswith("wall_clock_anchor#"))
    offset_us = anchors[int(anchor["name"].split("#")[1])] / 1000.0 - float(anchor["ts"])
    for e in events:
        if "ts" in e:
            e["ts"] = round(float(e["ts"]) + offset_us, 3)
    trace["distributedInfo"] = {"backend": "gloo", "rank": rank, "world_size": args.ranks}
    with gzip.open(path + ".gz", "wt", compresslevel=9) as dst:
        json.dump(trace, dst)
    os.remove(path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--late-rank", type=int)
    ap.add_argument("--moving", action="store_true")
    ap.add_argument("--delay-ms", type=float, default=30.0)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--active", type=int, default=10)
    ap.add_argument("--port", type=int, default=29517)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    import torch
    import torch.multiprocessing as mp

    mp.spawn(worker, args=(args,), nprocs=args.ranks, join=True)
    with open(os.path.join(args.out, "run.json"), "w") as f:
        json.dump({"ranks": args.ranks, "late_rank": args.late_rank, "moving": args.moving,
                   "delay_ms": args.delay_ms, "active_steps": args.active, "torch": torch.__version__,
                   "recorded": time.strftime("%Y-%m-%d")}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
