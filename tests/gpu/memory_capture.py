"""Issue 42's GPU memory inputs, recorded on a real GPU with PyTorch alone (no
gputriage build needed there), for the CPU-side tests to read:

- memory_resnet18.pt.trace.json.gz: a profiler trace with profile_memory=True
  (ResNet-18 training, batch 32, 3 active steps): [memory] events with Addr,
  Bytes, Total Allocated, Total Reserved, Device Type/Id;
- snapshot_train.pickle.gz: the caching allocator's snapshot after 3 steps with
  its history recorded (torch.cuda.memory._record_memory_history/_dump_snapshot);
- snapshot_oom.pickle.gz: the same after an allocation that cannot fit (the OOM
  record, the failing request);
- memory_runs.json: the loops' own measurements: a leaking loop (each step's loss
  kept with its graph) and the same loop without the leak (memory_allocated after
  every step), peak memory at four batch sizes (max_memory_allocated, reset per
  run) with the bytes of parameters, gradients and optimizer state, the OOM's
  message, memory_stats() at the end, the device and versions.

    python3 tests/gpu/memory_capture.py OUT_DIR
"""
import gzip
import json
import os
import shutil
import sys
import time

import torch
import torchvision

OUT = sys.argv[1] if len(sys.argv) > 1 else "memory-out"
DEV = torch.device("cuda", 0)


def model_and_optimizer():
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=100).to(DEV)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3)


def batch(n):
    return torch.randn(n, 3, 224, 224, device=DEV), torch.randint(0, 100, (n,), device=DEV)


def train_step(model, optimizer, x, y):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss


def tensor_bytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)


def state_bytes(model, optimizer):
    params = list(model.parameters())
    state = [v for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v)]
    return {"parameters": tensor_bytes(params), "gradients": tensor_bytes([p.grad for p in params]),
            "optimizer_state": tensor_bytes(state)}


def gzip_file(path):
    with open(path, "rb") as src, gzip.open(path + ".gz", "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    os.remove(path)


def profiled_trace():
    model, optimizer = model_and_optimizer()
    x, y = batch(32)
    path = os.path.join(OUT, "memory_resnet18.pt.trace.json")
    schedule = torch.profiler.schedule(wait=1, warmup=1, active=3)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
                                profile_memory=True, record_shapes=True, schedule=schedule,
                                on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
        for _ in range(5):
            train_step(model, optimizer, x, y)
            prof.step()
    torch.cuda.synchronize()
    gzip_file(path)


def snapshot_of_training():
    model, optimizer = model_and_optimizer()
    x, y = batch(32)
    torch.cuda.memory._record_memory_history(max_entries=40000, stacks="python")
    for _ in range(3):
        train_step(model, optimizer, x, y)
    torch.cuda.synchronize()
    path = os.path.join(OUT, "snapshot_train.pickle")
    torch.cuda.memory._dump_snapshot(path)
    torch.cuda.memory._record_memory_history(enabled=None)
    gzip_file(path)


def snapshot_of_oom(facts):
    model, optimizer = model_and_optimizer()
    x, y = batch(32)
    torch.cuda.memory._record_memory_history(max_entries=20000, stacks="python")
    train_step(model, optimizer, x, y)
    total = torch.cuda.get_device_properties(0).total_memory
    try:
        torch.empty(2 * total, dtype=torch.uint8, device=DEV)  # cannot fit: a plain cudaMalloc refused
        facts["oom"] = None
    except torch.cuda.OutOfMemoryError as e:
        facts["oom"] = {"requested_bytes": 2 * total, "message": str(e)}
    path = os.path.join(OUT, "snapshot_oom.pickle")
    torch.cuda.memory._dump_snapshot(path)
    torch.cuda.memory._record_memory_history(enabled=None)
    gzip_file(path)


def per_step_memory(leak, steps=12):
    """memory_allocated after each step; a leaking loop keeps each loss with its graph."""
    model, optimizer = model_and_optimizer()
    x, y = batch(16)
    kept, after = [], []
    for _ in range(steps):
        loss = train_step(model, optimizer, x, y)
        if leak:
            kept.append(loss)  # the classic leak: the tensor and its autograd graph live on
        torch.cuda.synchronize()
        after.append(torch.cuda.memory_allocated(DEV))
    del kept
    return after


def batch_sweep():
    rows = []
    for n in (8, 16, 32, 64):
        model, optimizer = model_and_optimizer()
        x, y = batch(n)
        train_step(model, optimizer, x, y)  # optimizer state exists from here on
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats(DEV)
        for _ in range(3):
            train_step(model, optimizer, x, y)
        torch.cuda.synchronize()
        rows.append({"batch": n, "peak_allocated": torch.cuda.max_memory_allocated(DEV),
                     "peak_reserved": torch.cuda.max_memory_reserved(DEV),
                     "allocated_after": torch.cuda.memory_allocated(DEV), **state_bytes(model, optimizer)})
        del model, optimizer, x, y
        torch.cuda.empty_cache()
    return rows


def main():
    os.makedirs(OUT, exist_ok=True)
    props = torch.cuda.get_device_properties(0)
    facts = {"device": props.name, "total_memory": props.total_memory, "torch": torch.__version__,
             "torchvision": torchvision.__version__, "cuda": torch.version.cuda,
             "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}
    t0 = time.time()
    for name, part in (("trace", profiled_trace), ("snapshot", snapshot_of_training),
                       ("oom", lambda: snapshot_of_oom(facts)),
                       ("leak", lambda: facts.__setitem__("leak_allocated_after_step", per_step_memory(True))),
                       ("no_leak", lambda: facts.__setitem__("no_leak_allocated_after_step", per_step_memory(False))),
                       ("batches", lambda: facts.__setitem__("batch_sweep", batch_sweep()))):
        try:
            part()
            print(f"{name}: done ({time.time() - t0:.1f} s)", flush=True)
        except Exception as e:  # one part's failure leaves the others
            facts.setdefault("failures", {})[name] = repr(e)
            print(f"{name}: FAILED {e!r}", flush=True)
        torch.cuda.empty_cache()
    facts["memory_stats"] = {k: v for k, v in torch.cuda.memory_stats(DEV).items() if isinstance(v, (int, float))}
    with open(os.path.join(OUT, "memory_runs.json"), "w") as f:
        json.dump(facts, f, indent=1)
    for name in sorted(os.listdir(OUT)):
        print(f"  {name}: {os.path.getsize(os.path.join(OUT, name))} bytes")


if __name__ == "__main__":
    main()
