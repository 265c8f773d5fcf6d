"""What zero-code mode's phase hooks cost a training step, measured inside one
process so that the machine's drift (these shared machines move run times by
10-20 % from minute to minute) falls on both sides alike.

Run under the recorder with zero-code mode, so markers are really written:
    gputriage record --no-store --python -- python3 bench/phases_overhead.py [BLOCKS] [STEPS_PER_BLOCK]
(bench/phases_overhead_benchmark.sh does this). A real PyTorch loop (CPU, data in
memory) runs in alternating blocks: hooks on (as installed: the DataLoader's
__next__, nn.Module.__call__, torch.autograd.backward, the optimizer's step and
zero_grad, Tensor.to -- each batch is also copied to the `meta` device, standing
in for a GPU; steps and phases marked) and hooks off (PyTorch's own functions put
back for the block). Each block's time per step is kept; the ratio of the
medians, on over off, is the overhead. Two models: a 3-layer MLP (6 module calls
per forward) and 64 hidden blocks of 64 units (130 module calls per forward,
every one through the hooked nn.Module.__call__). Beside the blocks, the hooks'
own cost is timed on no-op calls (best of repeats) and multiplied by the calls
a step makes: the figure that holds on a noisy machine. Goal: < 1 %.
"""
import statistics
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data import dataloader as dataloader_module

BLOCKS = int(sys.argv[1]) if len(sys.argv) > 1 else 16
STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 20


def hooked_functions(optimizer):
    """(holder, name) of every function zero-code mode replaced that this loop calls."""
    return [(nn.Module, "__call__"), (torch.autograd, "backward"), (type(optimizer), "step"),
            (type(optimizer), "zero_grad"), (dataloader_module._BaseDataLoaderIter, "__next__"), (torch.Tensor, "to")]


def set_hooks(saved, on):
    for (holder, name), (hooked, original) in saved.items():
        setattr(holder, name, hooked if on else original)


def measure(name, hidden, batch, depth):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    features = 256 if depth == 1 else hidden
    blocks = [m for _ in range(depth) for m in (nn.Linear(hidden, hidden), nn.ReLU())]
    model = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), *blocks, nn.Linear(hidden, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    n = batch * STEPS
    loader = DataLoader(TensorDataset(torch.randn(n, features), torch.randint(0, 10, (n,))), batch_size=batch)
    saved = {}
    for holder, attr in hooked_functions(optimizer):
        hooked = getattr(holder, attr)
        original = getattr(hooked, "__wrapped__", None)
        if not getattr(hooked, "_gputriage", False) or original is None:
            sys.exit(f"phases_overhead: {holder.__name__}.{attr} is not hooked: run under `gputriage record --python`")
        saved[(holder, attr)] = (hooked, original)

    def block():
        # The loop's own CPU time (its thread's): what the hooks add is CPU work on
        # it, and time the machine took the core away is not.
        start = time.thread_time()
        for x, y in loader:
            x.to("meta", non_blocking=True), y.to("meta")  # the batch's copies to the device
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
        return (time.thread_time() - start) / STEPS * 1e3

    block()  # warm-up, hooks on
    per_step = {True: [], False: []}
    pairs = []
    for i in range(BLOCKS):
        times = {}
        for on in ((True, False) if i % 2 == 0 else (False, True)):  # ABBA: drift falls on both alike
            set_hooks(saved, on)
            times[on] = block()
            per_step[on].append(times[on])
        pairs.append(times[True] / times[False])
    set_hooks(saved, True)
    on, off = statistics.median(per_step[True]), statistics.median(per_step[False])
    # Adjacent blocks (under a second apart) share the machine's state: the median
    # of their ratios is the estimate; the fastest block of each side bounds it.
    ratio = statistics.median(pairs)
    print(f"  {name}: hooks on {on:.3f} ms/step, off {off:.3f} ms/step of CPU (medians of {BLOCKS} blocks of {STEPS} "
          f"steps); adjacent pairs on / off: median {ratio:.4f} (quartiles {statistics.quantiles(pairs, n=4)[0]:.4f}-"
          f"{statistics.quantiles(pairs, n=4)[2]:.4f}); fastest blocks {min(per_step[True]) / min(per_step[False]):.4f}")
    direct = hook_cost_per_step(model, off, saved)
    return ratio, direct


def hook_cost_per_step(model, steps_ms, saved):
    """The hooks' own cost, timed where noise cannot hide it: each hooked call
    on a no-op (best of repeats, hooks on less off), times the calls a step makes."""
    import timeit
    from gputriage import memory, zero_code
    counted = []
    handles = [m.register_forward_pre_hook(lambda *_: counted.append(1)) for m in model.modules()]
    model(torch.randn(1, model[0].in_features))
    for h in handles:
        h.remove()
    module_calls = len(counted) + 1  # and the loss module
    identity = nn.Identity()
    x = torch.zeros(1)

    def best(stmt, on):
        set_hooks(saved, on)
        return min(timeit.repeat(stmt, number=20000, repeat=7)) / 20000

    zero_code._loop.update(step_open=True, in_phase=True)  # an inner module call: the common case
    inner = best(lambda: identity(x), True) - best(lambda: identity(x), False)
    zero_code._loop.update(in_phase=False)  # the outermost call: a phase marked
    outer = best(lambda: identity(x), True) - best(lambda: identity(x), False)
    copy = best(lambda: x.to("meta"), True) - best(lambda: x.to("meta"), False)  # a marked copy, counted
    zero_code._loop.update(step_open=False)
    set_hooks(saved, True)
    # Per step: the outermost call of the model and of the loss, the rest inner;
    # backward, step and zero_grad each a marked call like the outermost one; two copies.
    per_step_us = (2 * outer + (module_calls - 2) * inner + 3 * outer + 2 * copy) * 1e6
    print(f"    hook cost: {inner * 1e9:.0f} ns per inner module call, {outer * 1e9:.0f} ns per marked call, "
          f"{copy * 1e9:.0f} ns per copy; {module_calls} module calls per step: {per_step_us:.1f} us per step = "
          f"{per_step_us / 1e3 / steps_ms * 100:.3f}% of its {steps_ms:.2f} ms")
    # The memory sampler (gputriage/memory.py): one sample as a step ends, at most
    # one per interval: its share is a sample's cost over the longer of the two.
    sampler = memory._sampler
    sampler_share = 0.0
    if sampler is not None:
        per_sample = min(timeit.repeat(lambda: sampler(0), number=2000, repeat=5)) / 2000
        sampler_share = per_sample * 1e3 / max(steps_ms, memory._DEFAULT_INTERVAL_MS)
        print(f"    memory sampler: {per_sample * 1e6:.1f} us per sample (host RSS and VmHWM; GPUs where CUDA is up), "
              f"at most one per {memory._DEFAULT_INTERVAL_MS} ms: {sampler_share * 100:.3f}% of step time")
    return per_step_us / 1e3 / steps_ms + sampler_share


print(f"phases overhead, in one process: python {sys.version.split()[0]}, torch {torch.__version__}")
results = [measure("3-layer MLP, 256 wide, batch 64", 256, 64, 1),
           measure("64 hidden blocks, 64 wide, batch 16 (130 module calls per forward)", 64, 16, 64)]
print(f"worst: blocks on / off = {max(r[0] for r in results):.4f} (noise of the machine: see the quartiles); "
      f"hook and memory sampler cost {max(r[1] for r in results) * 100:.3f}% of step time (goal < 1%)")
