"""Records a short PyTorch profiler trace of a small training loop on this GPU.

Used by scripts/demo.sh where a CUDA GPU and PyTorch exist; the trace is then
diagnosed by gputriage like any user trace.
"""
import sys

import torch
from torch.profiler import ProfilerActivity, profile, schedule


def main(path: str) -> None:
    device = "cuda"
    model = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(8)]).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    data = torch.randn(256, 2048, device=device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=1, warmup=2, active=5)) as prof:
        for _ in range(8):
            loss = model(data).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            prof.step()
    torch.cuda.synchronize()
    prof.export_chrome_trace(path)


if __name__ == "__main__":
    main(sys.argv[1])
