"""A real PyTorch training loop (CPU) that runs out of memory under an
address-space limit, as `ulimit -v` (or a batch system's vmem limit) sets one:
its sequences grow every step (the longest batches come last), and the
activations of a step grow with batch x length. It imports nothing of
gputriage: zero-code mode instruments it unmodified.

    oom_loop.py --batch 64 --steps 12 --limit-mib 600

--limit-mib: RLIMIT_AS is set to the process's address space after setup
plus this much (so the limit means the same whatever the libraries reserve).
The loop prints the step it finished last ("done N") and exits 0 when every
step fits; the out-of-memory error ends it otherwise, at its own line.
"""
import argparse
import resource

import torch
from torch import nn


def address_space_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--limit-mib", type=float, default=600)
    parser.add_argument("--features", type=int, default=256)
    args = parser.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(args.features, 1024), nn.ReLU(), nn.Linear(1024, args.features))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    # Warm the allocator and the optimizer's state at the smallest shape first.
    model(torch.randn(1, 8, args.features)).mean().backward()
    optimizer.step()
    optimizer.zero_grad()
    limit = address_space_bytes() + int(args.limit_mib * (1 << 20))
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
    for step in range(args.steps):
        length = 32 * (step + 1)  # the longest sequences come last
        x = torch.randn(args.batch, length, args.features)
        loss = model(x).pow(2).mean()  # the line that runs out of memory
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        print(f"done {step}", flush=True)


if __name__ == "__main__":
    main()
