#!/usr/bin/env python3
"""Labelled GPU workloads for the prepared GPU check (tests/gpu/gpu_check.sh).

Each runs for --seconds on the first CUDA device and shows one problem:
  input_bound  a DataLoader with num_workers=0 and slow samples feeds a small CNN
  tiny_batch   batch-1 MLP: many tiny kernels, SMs mostly empty
  fp32         fp32 matmuls with TF32 off: FP32 pipes busy, tensor cores idle
  bf16         large bf16 matmuls: tensor cores busy (the healthy reference)
"""
import argparse
import time

import torch


class SlowSamples(torch.utils.data.Dataset):
    """Samples that take `delay` seconds of CPU each (decoding/augmentation)."""

    def __init__(self, delay):
        self.delay = delay

    def __len__(self):
        return 10**9

    def __getitem__(self, i):
        time.sleep(self.delay)
        return torch.randn(3, 64, 64), i % 10


def run_input_bound(seconds):
    loader = torch.utils.data.DataLoader(SlowSamples(0.004), batch_size=32, num_workers=0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    end = time.time() + seconds
    for x, y in loader:
        x, y = x.cuda(non_blocking=True), torch.as_tensor(y).cuda()
        for _ in range(20):  # enough GPU work per batch for a visible busy phase
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        torch.cuda.synchronize()
        if time.time() > end:
            break


def run_tiny_batch(seconds):
    layers = []
    for _ in range(24):
        layers += [torch.nn.Linear(256, 256), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).cuda()
    x = torch.randn(1, 256, device="cuda")
    end = time.time() + seconds
    while time.time() < end:
        for _ in range(200):
            x = model(x).tanh()
        torch.cuda.synchronize()


def run_matmul(seconds, dtype):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    a = torch.randn(8192, 8192, device="cuda", dtype=dtype)
    b = torch.randn(8192, 8192, device="cuda", dtype=dtype)
    end = time.time() + seconds
    while time.time() < end:
        for _ in range(10):
            c = a @ b
        torch.cuda.synchronize()
    return c


def main():
    p = argparse.ArgumentParser()
    p.add_argument("workload", choices=["input_bound", "tiny_batch", "fp32", "bf16"])
    p.add_argument("--seconds", type=float, default=30)
    a = p.parse_args()
    if a.workload == "input_bound":
        run_input_bound(a.seconds)
    elif a.workload == "tiny_batch":
        run_tiny_batch(a.seconds)
    elif a.workload == "fp32":
        run_matmul(a.seconds, torch.float32)
    else:
        run_matmul(a.seconds, torch.bfloat16)


if __name__ == "__main__":
    main()
