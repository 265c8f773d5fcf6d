"""A CPU training loop for the memory tests (tests/python/memory_test.py), run
under `gputriage record --python` with no gputriage code in it.

--leak keeps each step's backbone features for a later metric as the tensor,
with its autograd graph (never backwarded: the activations it saved stay), the
classic leak; without it the loop keeps `.item()` of the same figure. The loop
measures itself as a user would: its resident set (/proc/self/statm) at the end
of every step, and writes the growth per step (least squares over the steps
past the first tenth) and its peak RSS to --out.
"""
import argparse
import json
import os

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=200)
parser.add_argument("--batch", type=int, default=32)
parser.add_argument("--leak", action="store_true")
parser.add_argument("--model", choices=["mlp", "seq"], default="mlp")
parser.add_argument("--out", required=True)
args = parser.parse_args()
torch.manual_seed(0)
torch.set_num_threads(1)
page = os.sysconf("SC_PAGE_SIZE")


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * page


if args.model == "mlp":
    backbone = nn.Sequential(nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU())
    head = nn.Linear(1024, 10)
    inputs = torch.randn(args.batch * 8, 1024)
else:  # activations dominate and cost little compute: 1024 tokens of 512 each, normalised and activated per token
    class MeanTokens(nn.Module):
        def forward(self, x):
            return x.mean(dim=1)

    backbone = nn.Sequential(nn.Embedding(1000, 512), nn.LayerNorm(512), nn.GELU(), nn.LayerNorm(512), nn.GELU(),
                             MeanTokens())
    head = nn.Linear(512, 10)
    inputs = torch.randint(0, 1000, (args.batch * 8, 1024))
model = nn.Sequential(backbone, head)
labels = torch.randint(0, 10, (inputs.shape[0],))
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(inputs, labels), batch_size=args.batch,
                                     shuffle=False, drop_last=True)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
kept, norms, at_end = [], [], []
step = 0
while step < args.steps:
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        features = backbone(x).norm(dim=1).mean()  # a metric of the features, with grad on
        if args.leak:
            kept.append(features)       # the tensor, with its graph and saved activations
        else:
            norms.append(features.item())
        at_end.append(rss())
        step += 1
        if step == args.steps:
            break

settled = at_end[len(at_end) // 10:]
n = len(settled)
mean_x, mean_y = (n - 1) / 2, sum(settled) / n
slope = sum((i - mean_x) * (y - mean_y) for i, y in enumerate(settled)) / sum((i - mean_x) ** 2 for i in range(n))
with open("/proc/self/status") as f:
    hwm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
with open(args.out, "w") as f:
    json.dump({"growth_per_step_bytes": slope, "peak_rss_bytes": hwm, "steps": step, "batch": args.batch,
               "rss_at_step_end": at_end}, f)
