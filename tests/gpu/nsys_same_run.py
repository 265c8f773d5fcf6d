#!/usr/bin/env python3
"""One training loop for the prepared GPU check's Nsight Systems part (issue 44),
run under `nsys profile` while the PyTorch profiler traces it too: the same run
seen by both. Each iteration is one NVTX range "iteration N"
(torch.cuda.nvtx) and one PyTorch profiler step; the profiler keeps iterations
2-21. The loop is input-bound on purpose (a DataLoader with num_workers=0 and
slow samples, as tests/gpu/workloads.py's input_bound), so both reports have a
verdict to agree on.

    python3 nsys_same_run.py TRACE.json
"""
import sys

import torch
from torch.profiler import ProfilerActivity, profile, schedule

from workloads import SlowSamples


def main():
    loader = iter(torch.utils.data.DataLoader(SlowSamples(0.002), batch_size=16, num_workers=0))
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=0, warmup=2, active=20, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(sys.argv[1])) as profiler:
        for i in range(22):
            torch.cuda.nvtx.range_push(f"iteration {i}")
            x, y = next(loader)
            x, y = x.cuda(non_blocking=True), y.cuda()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
            profiler.step()


if __name__ == "__main__":
    main()
