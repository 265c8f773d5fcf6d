"""A real PyTorch training loop (CPU) with everything a job's GPU-hours go to
outside its steps: a checkpoint restore when one exists, evaluation every
--eval-every steps, a checkpoint (`torch.save`, fsynced) every --ckpt-every
steps, an optional crash (an exception) at --crash-at, and its own timers for
each, written to --timers as JSON when it ends (crash included).

    ledger_loop.py --checkpoint PATH --timers PATH [--crash-at K] [--markers phases|none]

--markers phases: `gputriage.phase("data" / "checkpoint" / "eval" / "restore")`
and `gputriage.step()` around each step; --markers none: no gputriage import.
The timers use the wall clock (time.time_ns), as the recorder and markers do.
"""
import argparse
import json
import os
import time

import torch
from torch import nn


def process_start_ns():
    """This process's start on the wall clock: /proc's start time (clock ticks of
    CLOCK_BOOTTIME, 10 ms) carried over to the wall clock now (/proc/stat's btime
    is whole seconds: too coarse)."""
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    start_s = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of stat; 3 are before the split point
    wall_ns, boot_s = time.time_ns(), time.clock_gettime(time.CLOCK_BOOTTIME)
    return wall_ns - int((boot_s - start_s) * 1e9)


class Timers:
    def __init__(self, path):
        self.path = path
        self.t = {"process_start_ns": process_start_ns(), "steps": [], "checkpoints": [], "evals": [],
                  "restore": None, "restored_step": 0, "crashed": False}

    def write(self):
        self.t["end_ns"] = time.time_ns()
        with open(self.path, "w") as f:
            json.dump(self.t, f)


class Phase:
    """gputriage.phase(name) when markers are on, else nothing; times [begin, end]."""

    def __init__(self, markers, name, out):
        self.scope = markers.phase(name) if markers else None
        self.out = out

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
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--eval-every", type=int, default=20)
    parser.add_argument("--ckpt-every", type=int, default=25)
    parser.add_argument("--crash-at", type=int, default=-1)
    parser.add_argument("--markers", choices=["phases", "none"], default="phases")
    parser.add_argument("--hidden", type=int, default=512)
    args = parser.parse_args()
    timers = Timers(args.timers)
    markers = None
    if args.markers == "phases":
        import gputriage
        markers = gputriage

    torch.manual_seed(0)
    torch.set_num_threads(1)
    features, batch = 256, 64
    model = nn.Sequential(nn.Linear(features, args.hidden), nn.ReLU(), nn.Linear(args.hidden, args.hidden), nn.ReLU(),
                          nn.Linear(args.hidden, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(1)
    data = torch.randn(64 * batch, features, generator=generator)
    labels = torch.randint(0, 10, (64 * batch,), generator=generator)
    first = 0
    if os.path.exists(args.checkpoint):
        restored = []
        with Phase(markers, "restore", restored):
            state = torch.load(args.checkpoint)
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            first = state["step"]
        timers.t["restore"] = restored[0]
        timers.t["restored_step"] = first
    try:
        for step in range(first, args.steps):
            if step == args.crash_at:
                timers.t["crashed"] = True
                raise RuntimeError(f"injected crash at step {step}")
            begin = time.time_ns()
            waits = []
            with Phase(markers, "data", waits):  # the next batch: a slow read
                time.sleep(0.004)
                i = (step * batch) % data.shape[0]
                x, y = data[i:i + batch], labels[i:i + batch]
            scope = markers.step(samples=batch) if markers else None
            if scope:
                scope.__enter__()
            loss = loss_fn(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if scope:
                scope.__exit__(None, None, None)
            timers.t["steps"].append({"step": step, "begin": begin, "end": time.time_ns(), "data": waits[0]})
            done = step + 1
            if done % args.eval_every == 0:
                with Phase(markers, "eval", timers.t["evals"]), torch.no_grad():
                    for j in range(0, 16 * batch, batch):
                        model(data[j:j + batch])
            if done % args.ckpt_every == 0:
                with Phase(markers, "checkpoint", timers.t["checkpoints"]):
                    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": done},
                               args.checkpoint + ".tmp")
                    with open(args.checkpoint + ".tmp", "rb+") as f:
                        os.fsync(f.fileno())
                    os.replace(args.checkpoint + ".tmp", args.checkpoint)
    finally:
        timers.write()


if __name__ == "__main__":
    main()
