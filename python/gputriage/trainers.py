"""The trainers people use, in zero-code mode: their configuration, told to the
recorder as ``trainer.*`` settings (docs/formats.md).

Their steps and phases need nothing of their own: Hugging Face Trainer,
Accelerate, PyTorch Lightning and DeepSpeed's engine all iterate a
``torch.utils.data.DataLoader``, call the model as a module, run
``torch.autograd.backward`` and step ``torch.optim`` optimizers (Lightning through
a closure), which zero-code mode already marks (zero_code.py). What they add is
configuration that moves utilization and that no torch object carries: gradient
accumulation, mixed precision as the trainer sets it, gradient checkpointing, the
distributed strategy. Each hook sends it once, when training starts, and never
lets an error reach the trainer. An Accelerator's own settings go under
``accelerate.*`` (Hugging Face Trainer runs on one).
"""
import functools
import sys

from gputriage import job_config as _config

# (the trainer's attribute, the setting's key): read with getattr, sent when present.
_HF_ARGS = (
    ("per_device_train_batch_size", "per_device_train_batch_size"),
    ("gradient_accumulation_steps", "gradient_accumulation_steps"),
    ("bf16", "bf16"), ("fp16", "fp16"), ("tf32", "tf32"),
    ("gradient_checkpointing", "gradient_checkpointing"),
    ("optim", "optim"), ("torch_compile", "torch_compile"), ("max_grad_norm", "max_grad_norm"),
    ("dataloader_num_workers", "dataloader_num_workers"), ("dataloader_pin_memory", "dataloader_pin_memory"),
    ("logging_steps", "logging_steps"), ("eval_strategy", "eval_strategy"), ("evaluation_strategy", "eval_strategy"),
    ("save_steps", "save_steps"), ("max_steps", "max_steps"),
)
_LIGHTNING = (
    ("precision", "precision"), ("accumulate_grad_batches", "accumulate_grad_batches"),
    ("max_steps", "max_steps"), ("log_every_n_steps", "log_every_n_steps"),
    ("gradient_clip_val", "gradient_clip_val"), ("num_devices", "devices"), ("num_nodes", "nodes"),
)
_ACCELERATE = (
    ("mixed_precision", "mixed_precision"), ("gradient_accumulation_steps", "gradient_accumulation_steps"),
    ("distributed_type", "distributed_type"), ("num_processes", "num_processes"),
)


def _send(prefix, framework, module, source, fields):
    """PREFIX.framework / .version, then each field of `source` as PREFIX.KEY."""
    _config._send(f"{prefix}.framework", framework)
    version = getattr(sys.modules.get(module.__name__.split(".")[0]), "__version__", None)
    if version is not None:
        _config._send(f"{prefix}.version", version)
    for attribute, key in fields:
        value = getattr(source, attribute, None)
        if value is None or callable(value):
            continue
        value = getattr(value, "value", value)  # enums (IntervalStrategy, PrecisionType, DistributedType)
        _config._send(f"{prefix}.{key}", value)


def _once_before(cls, method, report):
    """cls.method calls report(self) first, once per process; failures are swallowed."""
    original = getattr(cls, method, None)
    if original is None or getattr(original, "_gputriage", False):
        return
    done = [False]

    @functools.wraps(original)
    def wrapped(self, *args, **kwargs):
        if not done[0]:
            done[0] = True
            try:
                report(self)
            except Exception:  # never break the user's trainer
                pass
        return original(self, *args, **kwargs)

    wrapped._gputriage = True
    setattr(cls, method, wrapped)


def patch_transformers_trainer(module):
    cls = getattr(module, "Trainer", None)
    if cls is not None:
        _once_before(cls, "train", lambda trainer: _send("trainer", "transformers.Trainer", module, trainer.args,
                                                            _HF_ARGS))


def patch_lightning_trainer(module):
    cls = getattr(module, "Trainer", None)
    if cls is None:
        return

    def report(trainer):
        _send("trainer", "lightning.Trainer", module, trainer, _LIGHTNING)
        strategy = getattr(trainer, "strategy", None)
        if strategy is not None:
            _config._send("trainer.strategy", type(strategy).__name__)

    _once_before(cls, "fit", report)


def patch_accelerator(module):
    cls = getattr(module, "Accelerator", None)
    if cls is not None:
        # Under its own keys: Hugging Face Trainer runs on an Accelerator too.
        _once_before(cls, "prepare", lambda accelerator: _send("accelerate", "accelerate.Accelerator", module,
                                                               accelerator, _ACCELERATE))


def patch_deepspeed_engine(module):
    cls = getattr(module, "DeepSpeedEngine", None)
    if cls is None:
        return

    def report(engine):
        _config._send("trainer.framework", "deepspeed")
        version = getattr(sys.modules.get("deepspeed"), "__version__", None)
        if version is not None:
            _config._send("trainer.version", version)
        for attribute, key in (("zero_optimization_stage", "zero_stage"),
                               ("gradient_accumulation_steps", "gradient_accumulation_steps"),
                               ("train_micro_batch_size_per_gpu", "micro_batch_size"),
                               ("bfloat16_enabled", "bf16"), ("fp16_enabled", "fp16")):
            getter = getattr(engine, attribute, None)
            if callable(getter):
                _config._send(f"trainer.{key}", getter())

    _once_before(cls, "forward", report)


PATCHES = {
    "transformers.trainer": patch_transformers_trainer,
    "lightning.pytorch.trainer.trainer": patch_lightning_trainer,
    "pytorch_lightning.trainer.trainer": patch_lightning_trainer,
    "accelerate.accelerator": patch_accelerator,
    "deepspeed.runtime.engine": patch_deepspeed_engine,
}
