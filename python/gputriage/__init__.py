"""gputriage step markers for Python training loops.

Under ``gputriage record -- python train.py`` every marker goes to the
recorder, which times data loading against compute and judges the run; without
a recorder each call returns after one check.

    import gputriage

    for batch in gputriage.watch(loader):          # time blocked in the loader
        with gputriage.step(samples=len(batch)):   # one training step
            with gputriage.phase("forward"):
                loss = model(batch)
            ...

``watch`` alone marks each loop iteration as a step (the batch's samples are
counted when the batch has a length); a ``step`` inside it takes that step over.
``gputriage record --python`` does the same with no change to the script.
``gputriage.time_device()`` also times each step on the GPU (CUDA events, no
synchronisation), so a wait the GPU spent on queued work is not taken for idle,
and the step's forward, backward, optimizer and copy phases the same way.
"""
from gputriage._markers import (  # noqa: F401  (the public API)
    ABI_VERSION,
    PHASES,
    enabled,
    phase,
    phase_begin,
    phase_device_time,
    phase_end,
    step,
    step_begin,
    step_device_time,
    step_end,
)
from gputriage._markers import _auto_step_begin, _auto_step_end
from gputriage.device import CudaStepTimer, time_device  # noqa: F401
from gputriage import job_config as _config
from gputriage.job_config import config  # noqa: F401

__all__ = ["ABI_VERSION", "PHASES", "enabled", "phase", "phase_begin", "phase_end", "step", "step_begin",
           "step_end", "step_device_time", "phase_device_time", "watch", "batch_samples", "time_device", "CudaStepTimer",
           "transformer_flops_per_token", "config"]

_DATA = PHASES["data"]


def batch_samples(batch):
    """Samples in a batch, or None: the first dimension of its first tensor
    (default_collate's output: a tensor, or a list, tuple or dict of them), else
    the length of a list of examples (a custom collate_fn's)."""
    for _ in range(4):  # ((inputs, mask), labels), {"input_ids": ...}: nested a few levels
        shape = getattr(batch, "shape", None)
        if shape is not None:
            return int(shape[0]) if len(shape) > 0 else None
        if isinstance(batch, dict):
            if not batch:
                return None
            batch = next(iter(batch.values()))
        elif isinstance(batch, (list, tuple)):
            if not batch:
                return None
            if isinstance(batch, list) and getattr(batch[0], "shape", None) is None:
                return len(batch)  # a list of examples
            batch = batch[0]
        else:
            return None
    return None


def _next_batch(fetch, samples):
    """The start of one loop iteration, for watch() and zero-code mode: fetch()
    timed as the data phase, then the batch's automatic step opened. Returns the
    batch and its sample count (None: not counted)."""
    phase_begin(_DATA)
    try:
        batch = fetch()
    finally:
        phase_end(_DATA)
    count = samples(batch) if samples is not None else None
    _auto_step_begin()
    return batch, count


def watch(iterable, samples=batch_samples):
    """Yields from ``iterable`` (a DataLoader), timing each wait for the next item
    as the step's data phase and, unless the loop marks its own steps with
    ``gputriage.step``, each iteration as a step. ``samples`` maps a batch to its
    sample count (None: not counted)."""
    fetch, next_batch, auto_end = iter(iterable).__next__, _next_batch, _auto_step_end
    # A DataLoader's settings (num_workers, batch_size, ...) go with the run.
    loader_batch = _config.loader_batch if hasattr(iterable, "num_workers") else None
    count = None
    memory_started = False
    try:
        while True:
            try:
                item, count = next_batch(fetch, samples)
            except StopIteration:
                return
            if loader_batch is not None:
                loader_batch(iterable)
            if not memory_started:
                memory_started = True
                _start_memory()
            yield item
            auto_end(count)
            count = None
    finally:
        auto_end(count)  # the loop broke out of its last step


def _start_memory():
    """Each step's memory at its end, under a recorder (gputriage/memory.py)."""
    try:
        from gputriage import memory
        memory.start()
    except Exception as e:  # never break the user's loop
        import sys
        sys.stderr.write(f"gputriage: memory is not sampled: {e!r}\n")


def transformer_flops_per_token(n_params, n_layers=0, hidden=0, seq_len=0):
    """Model FLOPs per token of a dense decoder-only transformer's training step:
    6N + 12·L·H·T (PaLM, Appendix B; torchtitan's get_num_flop_per_token), with
    N the parameters without embeddings; the attention term needs layers, hidden
    size and sequence length. Multiply by tokens per step for ``step(flops=...)``."""
    return 6 * n_params + 12 * n_layers * hidden * seq_len


# Under a recorder, a job that uses W&B gets the recorder's figures and its
# verdicts in its run (gputriage/wandb_bridge.py), with or without zero-code mode.
def _hook_wandb_under_a_recorder():
    import os
    if not os.environ.get("GPUTRIAGE_FEED_FD") and not os.environ.get("GPUTRIAGE_FEED_PATH"):
        return
    from gputriage import mlflow_bridge, wandb_bridge, zero_code
    zero_code.hook_modules({"wandb": wandb_bridge.patch_wandb, "mlflow": mlflow_bridge.patch_mlflow})


_hook_wandb_under_a_recorder()
