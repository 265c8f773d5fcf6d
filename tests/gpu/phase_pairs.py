#!/usr/bin/env python3
"""Before/after pairs for the step-phase verdicts, recorded unmodified with
`gputriage record --python` (zero-code phases) on a real GPU:

  optimizer  Adam over 240 small tensors: foreach=False (the per-tensor loop)
             -> fused=True (optimizer_bound)
  copy       a 32 MiB batch per step from pageable memory, .to(device) blocking
             -> DataLoader(pin_memory=True) and .to(device, non_blocking=True)
             (copy_bound)

    phase_pairs.py CASE before|after [--device cuda|cpu] [--steps N]

tests/gpu/gpu_check.sh records each pair and prints the finding's predicted step
time and range beside the fixed run's. --device cpu runs the same code (a smoke
test of the script; the verdicts are GPU verdicts and stay silent there).
"""
import argparse
import time

import torch


def optimizer_loop(device, fixed, steps):
    # Many small tensors: the update is launches, not bandwidth.
    model = torch.nn.Sequential(*[torch.nn.Linear(128, 128) for _ in range(120)]).to(device)
    if fixed:
        try:
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, fused=True)
        except (TypeError, RuntimeError):  # no fused Adam for this device or release
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, foreach=True)
    else:
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, foreach=False)
    data = torch.utils.data.TensorDataset(torch.randn(steps * 64, 128), torch.randn(steps * 64, 128))
    loader = torch.utils.data.DataLoader(data, batch_size=64)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()


def copy_loop(device, fixed, steps):
    # 32 MiB per batch (8 x 1 Mi float32), a light model: the step is the copy.
    data = torch.utils.data.TensorDataset(torch.randn(steps * 8, 1024 * 1024))
    loader = torch.utils.data.DataLoader(data, batch_size=8, pin_memory=fixed and device == "cuda")
    model = torch.nn.Linear(1024, 1024).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    for (x,) in loader:
        x = x.to(device, non_blocking=fixed)
        loss = model(x.view(-1, 1024)[:64]).square().mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()


CASES = {"optimizer": optimizer_loop, "copy": copy_loop}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("case", choices=sorted(CASES))
    parser.add_argument("variant", choices=["before", "after"])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    torch.manual_seed(0)
    started = time.perf_counter()
    CASES[args.case](args.device, args.variant == "after", args.steps)
    if args.device == "cuda":
        torch.cuda.synchronize()
    print(f"{args.case} {args.variant} on {args.device}: {args.steps} steps in {time.perf_counter() - started:.2f} s")


if __name__ == "__main__":
    main()
