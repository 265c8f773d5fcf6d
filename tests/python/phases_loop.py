"""A real PyTorch training loop (CPU, data in memory) that times its own
forward, backward and optimizer with perf_counter, and can stall the host for
--stall-ms after each optimizer step (a slow per-step callback: logging, a
metric, a sync). It imports nothing of gputriage: zero-code mode
(`gputriage record --python`) instruments it unmodified.

    phases_loop.py --timings out.json [--stall-ms 20] [--steps 60]

The loop's own timers, per step, go to --timings: forward (the model and the
loss module), backward (loss.backward()), optimizer (zero_grad() and step()),
stall; and the whole loop's wall time (loop_s).
"""
import argparse
import json
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--timings", required=True)
    parser.add_argument("--stall-ms", type=float, default=0.0)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--optimizer", choices=["sgd", "adam"], default="adam")
    parser.add_argument("--closure", action="store_true",
                        help="forward and backward inside a closure given to optimizer.step(), as Lightning does")
    parser.add_argument("--depth", type=int, default=1, help="hidden blocks (Linear + ReLU) between input and output")
    parser.add_argument("--copy-to", default="",
                        help="also copy each batch to this device (x non-blocking, y not) before the step's work, "
                             "timed as copy; `meta` stands in for a GPU on a machine without one (nothing is moved, "
                             "the loop trains on the host batch)")
    args = parser.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    features = 256
    blocks = [m for _ in range(args.depth) for m in (nn.Linear(args.hidden, args.hidden), nn.ReLU())]
    model = nn.Sequential(nn.Linear(features, args.hidden), nn.ReLU(), *blocks, nn.Linear(args.hidden, 10))
    optimizer = (torch.optim.Adam(model.parameters(), lr=1e-3) if args.optimizer == "adam"
                 else torch.optim.SGD(model.parameters(), lr=0.01))
    loss_fn = nn.CrossEntropyLoss()
    n = args.steps * args.batch
    data = TensorDataset(torch.randn(n, features), torch.randint(0, 10, (n,)))
    loader = DataLoader(data, batch_size=args.batch, num_workers=0, shuffle=False)

    timings = {"forward": [], "backward": [], "optimizer": [], "stall": [], "copy": []}
    clock = time.perf_counter
    loop_start = clock()
    for x, y in loader:
        if args.copy_to:
            x = x.to(torch.float32)  # a dtype, no device: not a copy
            t0 = clock()
            on_device = (x.to(args.copy_to, non_blocking=True), y.to(args.copy_to))
            timings["copy"].append((clock() - t0) * 1e3)
            del on_device
        if args.closure:
            inside = {}

            def closure():
                inside["t1"] = clock()
                optimizer.zero_grad()
                inside["t2"] = clock()
                loss = loss_fn(model(x), y)
                inside["t3"] = clock()
                loss.backward()
                inside["t4"] = clock()
                return loss

            start = clock()
            optimizer.step(closure)
            end = clock()
            forward, backward = inside["t3"] - inside["t2"], inside["t4"] - inside["t3"]
            optimizer_s = (end - start) - (inside["t4"] - inside["t2"])  # its step and zero_grad, not the closure's
        else:
            start = clock()
            optimizer.zero_grad()
            t1 = clock()
            loss = loss_fn(model(x), y)
            t2 = clock()
            loss.backward()
            t3 = clock()
            optimizer.step()
            end = clock()
            forward, backward, optimizer_s = t2 - t1, t3 - t2, (t1 - start) + (end - t3)
        if args.stall_ms > 0:
            time.sleep(args.stall_ms / 1e3)
        after = clock()
        timings["forward"].append(forward * 1e3)
        timings["backward"].append(backward * 1e3)
        timings["optimizer"].append(optimizer_s * 1e3)
        timings["stall"].append((after - end) * 1e3)
    timings["loop_s"] = clock() - loop_start
    with open(args.timings, "w") as f:
        json.dump(timings, f)


if __name__ == "__main__":
    main()
