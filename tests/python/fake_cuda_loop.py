"""The GPU paths of the memory sampler without a GPU (tests/python/test_memory.py):
a loop that marks its steps with gputriage.step() and hands memory.start() a
stand-in for torch.cuda whose caching allocator leaks 64 MiB a step on GPU 0,
retries an allocation every 10 steps and, at the end, the job dies of an
out-of-memory error worded as PyTorch 2.1+ words it. Everything else is the
real code: the sampler, the markers, the recorder, the OOM hook."""
import time

import gputriage
from gputriage import memory

MIB, GIB = 1 << 20, 1 << 30


class FakeCuda:
    def __init__(self):
        self.step = 0

    def ready(self):
        return True

    def device_count(self):
        return 2  # GPU 1 is never used: its allocator holds nothing

    def stats(self, device):
        if device != 0:
            return {"allocated_bytes": {"all": {"current": 0, "peak": 0}}, "reserved_bytes": {"all": {"current": 0}}}
        allocated = 20 * GIB + self.step * 64 * MIB
        return {"allocated_bytes": {"all": {"current": allocated, "peak": allocated + 3 * GIB}},
                "reserved_bytes": {"all": {"current": allocated + 5 * GIB}},
                "num_alloc_retries": self.step // 10, "num_ooms": 0}

    def total_bytes(self, device):
        return 80 * GIB


class OutOfMemoryError(RuntimeError):
    pass


cuda = FakeCuda()
memory.start(cuda=cuda)
for step in range(120):
    with gputriage.step(samples=16):
        cuda.step = step
        time.sleep(0.012)
raise OutOfMemoryError(
    "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.50 GiB is free. "
    "Including non-PyTorch memory, this process has 77.60 GiB memory in use. Of the allocated memory 27.44 GiB is "
    "allocated by PyTorch, and 5.00 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is "
    "large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.")
