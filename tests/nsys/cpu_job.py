"""A CPU training loop recorded by two profilers at once, for the agreement of a
Kineto trace and an Nsight Systems export of the same run (issue 44).

Each iteration is one NVTX range "iteration N" (the Megatron/NeMo naming, written
through NVIDIA's `nvtx` package, which nsys traces) and one PyTorch profiler step
(ProfilerStep#N): the profiler records iterations 2-21 (two warm-up steps first),
nsys all 22. A small MLP, one thread, fixed seed.

    python3 cpu_job.py TRACE.json
"""
import sys

import nvtx
import torch
from torch.profiler import ProfilerActivity, profile, schedule

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(64, 256)
y = torch.randint(0, 10, (64,))
with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=2, active=20, repeat=1),
             on_trace_ready=lambda p: p.export_chrome_trace(sys.argv[1])) as profiler:
    for i in range(22):
        with nvtx.annotate(f"iteration {i}"):
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
        profiler.step()
