"""A real PyTorch training loop (CPU) with everything a job's GPU-hours go to
outside its steps: a checkpoint restore when one exists, evaluation every
--eval-every steps (a DataLoader under torch.no_grad()), a checkpoint
(`torch.save`) every --ckpt-every steps, an optional crash (an
exception) at --crash-at, and its own timers for each, written to --timers as
JSON when it ends (crash included).

    ledger_loop.py --checkpoint PATH --timers PATH [--crash-at K] [--markers phases|none]

--markers phases: `gputriage.phase("data" / "checkpoint" / "eval" / "restore")`
and `gputriage.step()` around each step; --markers none: no gputriage import
(`gputriage record --python` finds the same phases by itself). The timers use
the wall clock (time.time_ns), as the recorder and the markers do.
"""
import argparse
import contextlib
import json
import os
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


def process_start_ns():
    """This process's start on the wall clock: /proc's start time (clock ticks of
    CLOCK_BOOTTIME, 10 ms) carried over to the wall clock now (/proc/stat's btime
    is whole seconds: too coarse)."""
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    start_s = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of stat; 3 are before the split point
    wall_ns, boot_s = time.time_ns(), time.clock_gettime(time.CLOCK_BOOTTIME)
    return wall_ns - int((boot_s - start_s) * 1e9)


class Samples(Dataset):
    """Random samples, each read slowly (`read_ms`, a stand-in for I/O)."""

    def __init__(self, n, features, read_ms, seed):
        generator = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, features, generator=generator)
        self.y = torch.randint(0, 10, (n,), generator=generator)
        self.read_s = read_ms / 1e3

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        if self.read_s:
            time.sleep(self.read_s)
        return self.x[i], self.y[i]


class Timed:
    """Appends [begin, end] (wall ns) of the block to `out`; inside gputriage.phase(name) when given."""

    def __init__(self, out, markers=None, name=None):
        self.out, self.scope = out, markers.phase(name) if markers else None

    def __enter__(self):
        self.begin = time.time_ns()
        if self.scope:
            self.scope.__enter__()

    def __exit__(self, *exc):
        if self.scope:
            self.scope.__exit__(*exc)
        self.out.append([self.begin, time.time_ns()])
        return False


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--timers", required=True)
    parser.add_argument("--steps", type=int, default=55)
    parser.add_argument("--eval-every", type=int, default=20)
    parser.add_argument("--ckpt-every", type=int, default=25)
    parser.add_argument("--crash-at", type=int, default=-1)
    parser.add_argument("--markers", choices=["phases", "none"], default="phases")
    parser.add_argument("--hidden", type=int, default=512)
    args = parser.parse_args()
    timers = {"process_start_ns": process_start_ns(), "steps": [], "checkpoints": [], "evals": [], "restore": None,
              "restored_step": 0}
    markers = None
    if args.markers == "phases":
        import gputriage
        markers = gputriage

    torch.manual_seed(0)
    torch.set_num_threads(1)
    features, batch = 256, 32
    model = nn.Sequential(nn.Linear(features, args.hidden), nn.ReLU(), nn.Linear(args.hidden, args.hidden), nn.ReLU(),
                          nn.Linear(args.hidden, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    val = DataLoader(Samples(8 * batch, features, 0.0, 2), batch_size=batch)
    first = 0
    if os.path.exists(args.checkpoint):
        restored = []
        with Timed(restored, markers, "restore"):
            state = torch.load(args.checkpoint)
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            first = state["step"]
        timers["restore"], timers["restored_step"] = restored[0], first
    # The batches still to train on (a resumed run starts where its checkpoint was taken).
    batches = iter(DataLoader(Samples((args.steps - first) * batch, features, 0.1, 1 + first), batch_size=batch))
    try:
        for step in range(first, args.steps):
            if step == args.crash_at:
                raise RuntimeError(f"injected crash at step {step}")
            begin = time.time_ns()
            waits = []
            with Timed(waits, markers, "data"):
                x, y = next(batches)
            with markers.step(samples=batch) if markers else contextlib.nullcontext():
                loss = loss_fn(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            timers["steps"].append({"step": step, "begin": begin, "end": time.time_ns(), "data": waits[0]})
            done = step + 1
            if done % args.eval_every == 0:
                with Timed(timers["evals"], markers, "eval"), torch.no_grad():
                    for xb, _ in val:
                        model(xb)
            if done % args.ckpt_every == 0:
                with Timed(timers["checkpoints"], markers, "checkpoint"):
                    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": done},
                               args.checkpoint)
    finally:
        timers["end_ns"] = time.time_ns()
        with open(args.timers, "w") as f:
            json.dump(timers, f)


if __name__ == "__main__":
    main()
