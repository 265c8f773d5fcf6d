"""Zero-code step markers: ``gputriage record --python -- python train.py``.

The recorder puts ``gputriage/_sitecustomize`` on PYTHONPATH; its
sitecustomize calls ``install()`` in every Python process of the job. Nothing is
imported early: hooks wait for the script to import PyTorch, then

- every DataLoader iterator's ``__next__`` is timed as the data phase, and each
  batch opens a step that the next ``__next__`` closes (the batch's samples
  counted), exactly what ``gputriage.watch(loader)`` marks;
- every optimizer's ``step()`` is marked as the optimizer phase;
- where CUDA is available, each step is also timed on the GPU (CUDA events read
  without synchronising; GPUTRIAGE_DEVICE_TIME=0 turns this off).

Evaluation loaders are timed too: their batches count as steps.
"""
import atexit
import functools
import os
import importlib.abc
import importlib.util
import sys

import gputriage
from gputriage import _markers

_OPTIMIZER = _markers.PHASES["optimizer"]
_installed = False
_device_timing_checked = False


def _start_device_timing_once():
    """At the first batch (CUDA is initialised by then if the job uses it), also
    time each step on the GPU: CUDA events, no synchronisation.
    GPUTRIAGE_DEVICE_TIME=0 turns it off."""
    global _device_timing_checked
    _device_timing_checked = True
    if os.environ.get("GPUTRIAGE_DEVICE_TIME", "1") == "0":
        return
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
            gputriage.time_device()
    except Exception as e:  # never break the user's loop
        sys.stderr.write(f"gputriage: zero-code mode: device step times are off: {e!r}\n")


def _patch_dataloader(module):
    cls = getattr(module, "_BaseDataLoaderIter", None)
    if cls is None or getattr(cls.__next__, "_gputriage", False):
        return
    original = cls.__next__
    next_batch, auto_end, samples = gputriage._next_batch, _markers._auto_step_end, gputriage.batch_samples

    @functools.wraps(original)
    def __next__(self):
        # What watch() does, one call at a time: the previous batch's step ends here.
        auto_end(getattr(self, "_gputriage_samples", None))
        self._gputriage_samples = None
        batch, self._gputriage_samples = next_batch(functools.partial(original, self), samples)
        if not _device_timing_checked:
            _start_device_timing_once()
        return batch

    __next__._gputriage = True
    cls.__next__ = __next__


def _patch_optimizer(module):
    cls = getattr(module, "Optimizer", None)
    if cls is None or getattr(cls.__init__, "_gputriage", False):
        return
    original_init = cls.__init__
    begin, end = _markers.phase_begin, _markers.phase_end

    def wrap_step(step):
        @functools.wraps(step)  # keeps PyTorch's own marks on it (its profiler hook's `hooked`)
        def marked_step(*args, **kwargs):
            begin(_OPTIMIZER)
            try:
                return step(*args, **kwargs)
            finally:
                end(_OPTIMIZER)

        marked_step._gputriage = True
        return marked_step

    @functools.wraps(original_init)
    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        # Per class, once: PyTorch wraps the class's step during __init__ too.
        klass = type(self)
        if not getattr(klass.step, "_gputriage", False):
            klass.step = wrap_step(klass.step)

    __init__._gputriage = True
    cls.__init__ = __init__


_PATCHES = {
    "torch.utils.data.dataloader": _patch_dataloader,
    "torch.optim.optimizer": _patch_optimizer,
}


class _PatchAfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: lets the other finders load a hooked module, then
    patches it once it has run."""

    def find_spec(self, name, path=None, target=None):
        patch = _PATCHES.get(name)
        if patch is None:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        original_exec = loader.exec_module

        class _Loader(importlib.abc.Loader):
            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                original_exec(module)
                try:
                    patch(module)
                except Exception as e:  # never break the user's import
                    sys.stderr.write(f"gputriage: zero-code mode: cannot hook {name}: {e!r}\n")

        spec.loader = _Loader()
        return spec


def install():
    """Hooks DataLoader iteration and optimizer steps (now if PyTorch is already
    imported, else when it is). Idempotent."""
    global _installed
    if _installed:
        return
    _installed = True
    for name, patch in _PATCHES.items():
        module = sys.modules.get(name)
        if module is not None:
            patch(module)
    sys.meta_path.insert(0, _PatchAfterImport())
    atexit.register(_markers._auto_step_end, None)  # the last batch's step
