#!/usr/bin/env python3
"""Before/after pairs for the gain corpus (issue 11), recorded on a real GPU.

Each pair runs one training loop twice, unfixed and with one fix applied for real,
under the PyTorch profiler (6 active steps), and writes both traces:

  loader     DataLoader num_workers=0 -> 4 (a dataset with CPU work per sample)
  autocast   fp32 -> torch.autocast(bfloat16) on an MLP block
  attention  softmax(q @ k.T) @ v -> F.scaled_dot_product_attention (flash), bf16

    gain_pairs.py OUT_DIR [--device cuda|cpu] [--pairs loader,autocast,attention]

--device cpu runs the same code paths on the CPU (no kernels, a smoke test of the
script itself). The traces go to OUT_DIR/<pair>_{before,after}.pt.trace.json.gz
and a line per pair to tests/data/gain_pairs.tsv's format in OUT_DIR/pairs.tsv.
"""
import argparse
import gzip
import os
import shutil
import time

import torch
import torch.nn.functional as F


class DecodeDataset(torch.utils.data.Dataset):
    """CPU work per sample, as image decoding and augmentation are."""

    def __init__(self, n, decode_ms):
        self.n, self.decode_s = n, decode_ms / 1e3

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        end = time.perf_counter() + self.decode_s
        acc = 0
        while time.perf_counter() < end:
            acc += 1
        return torch.randn(3, 64, 64), i % 10


def cnn(device):
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(64, 128, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(128, 10)).to(device)


def loader_steps(device, fixed, steps):
    decode_ms = 0.5 if device == "cuda" else 0.05
    loader = torch.utils.data.DataLoader(DecodeDataset(10**6, decode_ms), batch_size=32, num_workers=4 if fixed else 0,
                                         pin_memory=device == "cuda", persistent_workers=fixed)
    model = cnn(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    it = iter(loader)

    def step():
        x, y = next(it)
        x, y = x.to(device, non_blocking=True), torch.as_tensor(y).to(device)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


def autocast_steps(device, fixed, steps):
    width, batch = (4096, 256) if device == "cuda" else (256, 32)  # the CPU smoke test stays small
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.GELU(), torch.nn.Linear(width, width)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(batch, width, device=device)
    torch.backends.cuda.matmul.allow_tf32 = False

    def step():
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=fixed):
            loss = model(x).float().pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


def attention_steps(device, fixed, steps):
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    seq = 1024 if device == "cuda" else 128
    q, k, v = (torch.randn(8, 16, seq, 64, device=device, dtype=dtype, requires_grad=True) for _ in range(3))

    def step():
        if fixed:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = (q @ k.transpose(-2, -1)) / 8.0
            mask = torch.ones(seq, seq, device=device, dtype=torch.bool).triu(1)
            out = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ v
        out.float().pow(2).mean().backward()
    return step


PAIRS = {"loader": (loader_steps, "input_bound", "DataLoader num_workers 0 -> 4"),
         "autocast": (autocast_steps, "low_precision", "fp32 -> torch.autocast(bfloat16)"),
         "attention": (attention_steps, "unfused_attention", "softmax(q k^T) v -> F.scaled_dot_product_attention")}


def record(out_dir, name, make_step, device, fixed):
    step = make_step(device, fixed, 10)
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    path = os.path.join(out_dir, f"{name}_{'after' if fixed else 'before'}.pt.trace.json")
    with torch.profiler.profile(activities=activities, record_shapes=True,
                                schedule=torch.profiler.schedule(wait=2, warmup=2, active=6),
                                on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
        for _ in range(10):
            step()
            if device == "cuda":
                torch.cuda.synchronize()
            prof.step()
    with open(path, "rb") as src, gzip.open(path + ".gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    os.remove(path)
    return os.path.basename(path) + ".gz"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out_dir")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--pairs", default=",".join(PAIRS))
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    torch.manual_seed(0)
    rows = []
    for name in args.pairs.split(","):
        make_step, verdict, fix = PAIRS[name]
        if name == "attention" and not hasattr(F, "scaled_dot_product_attention"):
            print(f"{name}: skipped: torch {torch.__version__} has no scaled_dot_product_attention (2.0+)", flush=True)
            continue
        before = record(args.out_dir, name, make_step, args.device, False)
        after = record(args.out_dir, name, make_step, args.device, True)
        gpu = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
        rows.append(f"{name}_{gpu.replace(' ', '_')}\ttraces/gpu-pairs/{before}\ttraces/gpu-pairs/{after}\t{verdict}\t"
                    f"{fix} ({gpu}, torch {torch.__version__})")
        print(f"{name}: {before} -> {after}", flush=True)
    with open(os.path.join(args.out_dir, "pairs.tsv"), "w") as f:
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
