"""A real PyTorch training loop (CPU) with a validation pass after each epoch,
as most training scripts have, and a choice of where its batches come from. It
imports nothing of gputriage: zero-code mode instruments it unmodified.

    validation_loop.py --timings out.json [--batches loader|manual]
                       [--val loader|tensors|none] [--val-ms 400] [--sleep-ms 0]
                       [--compile]

--batches loader: a DataLoader drives the loop; manual: the loop makes each
batch itself (nanoGPT's get_batch: a slice of a tensor) and no DataLoader is
ever iterated in training. --val: the validation pass after each epoch
(model.eval() and torch.no_grad()) iterates its own DataLoader, or slices of a
tensor, for about --val-ms. The loop's own timers go to --timings: each
training iteration (from the batch's making to the optimizer's return), each
validation pass, the whole loop, and its first forward call (with --compile:
torch.compile's compilation).
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
    parser.add_argument("--batches", choices=["loader", "manual"], default="loader")
    parser.add_argument("--val", choices=["loader", "tensors", "none"], default="loader")
    parser.add_argument("--val-ms", type=float, default=400.0)
    parser.add_argument("--sleep-ms", type=float, default=0.0, help="host work in each training step")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20, help="training steps per epoch")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--compile", action="store_true", help="train through torch.compile(model) (PyTorch 2)")
    args = parser.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    features, hidden = 64, 128
    model = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    # Its first call compiles (Dynamo traces, Inductor generates C++ and builds it).
    train_model = torch.compile(model) if args.compile else model
    loss_fn = nn.CrossEntropyLoss()
    n = args.steps * args.batch
    x_all, y_all = torch.randn(n, features), torch.randint(0, 10, (n,))
    loader = DataLoader(TensorDataset(x_all, y_all), batch_size=args.batch, shuffle=False)
    val_x = torch.randn(8 * args.batch, features)
    val_loader = DataLoader(TensorDataset(val_x), batch_size=args.batch)

    def manual_batches():
        for i in range(args.steps):
            yield x_all[i * args.batch:(i + 1) * args.batch], y_all[i * args.batch:(i + 1) * args.batch]

    def validate():
        """About --val-ms of evaluation: the batches repeat until the time is spent."""
        model.eval()
        deadline = time.perf_counter() + args.val_ms / 1e3
        with torch.no_grad():
            while time.perf_counter() < deadline:
                if args.val == "loader":
                    for (x,) in val_loader:
                        model(x)
                        time.sleep(0.005)
                else:
                    for i in range(8):
                        model(val_x[i * args.batch:(i + 1) * args.batch])
                        time.sleep(0.005)
        model.train()

    clock = time.perf_counter
    timings = {"step": [], "val": []}
    loop_start = clock()
    for _ in range(args.epochs):
        batches = iter(loader) if args.batches == "loader" else manual_batches()
        while True:
            start = clock()
            try:
                x, y = next(batches)
            except StopIteration:
                break
            optimizer.zero_grad()
            forward_start = clock()
            out = train_model(x)
            timings.setdefault("first_forward_ms", (clock() - forward_start) * 1e3)
            loss = loss_fn(out, y)
            loss.backward()
            if args.sleep_ms:
                time.sleep(args.sleep_ms / 1e3)
            optimizer.step()
            timings["step"].append((clock() - start) * 1e3)
        if args.val != "none":
            t0 = clock()
            validate()
            timings["val"].append((clock() - t0) * 1e3)
    timings["loop_s"] = clock() - loop_start
    with open(args.timings, "w") as f:
        json.dump(timings, f)


if __name__ == "__main__":
    main()
