"""What changed between runs: the training configuration that moves GPU
utilization, told to the recorder so `gputriage compare` and an experiment's
history can name it ("data wait 9% -> 42%, with dataloader.num_workers 4 -> 0").

Under ``gputriage record`` each setting is one line ``PID<TAB>KEY<TAB>VALUE``
appended to the recorder's channel ($GPUTRIAGE_CONFIG_FD, a memfd); without a
recorder the settings are only kept in this process (``current()``).

Captured by zero-code mode and ``gputriage.watch(loader)``:

- ``dataloader.*``: num_workers, batch_size, pin_memory, prefetch_factor,
  persistent_workers of the loader that has served the most batches;
- ``optimizer.*``: class, fused, foreach, lr of the first optimizer, its tensors (count,
  elements, device) and the update PyTorch runs for them (``implementation``);
- ``autocast.enabled``/``autocast.dtype``, ``compile.used``/``compile.mode``,
  ``attention.backend`` (the fused SDPA kernel PyTorch picked on the first call);
- ``version.torch``/``cuda``/``cudnn``/``nccl``/``python``, ``gpu.model``/``gpu.count``
  as PyTorch sees them.

``gputriage.config(lr=3e-4, model="llama-1b")`` adds the user's own as ``config.KEY``.
"""
import os
import sys
import threading

_lock = threading.Lock()
_settings = {}       # every setting of this process, as sent
_fd = None           # the channel, opened on first use
_fd_checked = False
_MAX_VALUE = 4096


def _text(value):
    """A setting's value as the recorder keeps it: bools as true/false, dtypes
    without their module ("bfloat16"), everything else as str()."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    text = str(value)
    if text.startswith("torch.") and type(value).__name__ == "dtype":
        text = text[len("torch."):]
    return text


def _escape(text):
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def _is_channel(path):
    try:
        return os.readlink(path).startswith("/memfd:gputriage-config")
    except OSError:
        return False


def _open_channel():
    """The recorder's channel: the inherited descriptor when it is still the
    channel (reopened for appending, so writers in several processes never
    overwrite each other), else the recorder's /proc path. None without one."""
    fd = os.environ.get("GPUTRIAGE_CONFIG_FD", "")
    candidates = []
    if fd.isdigit():
        candidates.append(f"/proc/self/fd/{fd}")
    path = os.environ.get("GPUTRIAGE_CONFIG_PATH", "")
    if path:
        candidates.append(path)
    for candidate in candidates:
        if not _is_channel(candidate):
            continue  # the number was reused for something else: never write there
        try:
            return os.open(candidate, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        except OSError:
            continue
    return None


def _send(key, value):
    """Keeps key = value and, under a recorder, sends it (only when it changed)."""
    global _fd, _fd_checked
    text = _text(value)
    if len(text) > _MAX_VALUE:
        text = text[:_MAX_VALUE - 3] + "..."
    with _lock:
        if _settings.get(key) == text:
            return
        _settings[key] = text
        if not _fd_checked:
            _fd_checked = True
            _fd = _open_channel()
        if _fd is None:
            return
        line = f"{os.getpid()}\t{key}\t{_escape(text)}\n".encode("utf-8", "replace")
        try:
            os.write(_fd, line)  # one write per line: O_APPEND keeps lines whole
        except OSError:
            pass  # the recorder is gone: the job goes on


def _reset_after_fork():
    # A forked child (a DataLoader worker) reopens the channel if it writes at all.
    global _fd, _fd_checked, _lock
    _lock = threading.Lock()
    _fd, _fd_checked = None, False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def request(text):
    """Asks the recorder for something (``summary NONCE``: the diagnosis so far,
    answered in the job's feed). False without a recorder."""
    global _fd, _fd_checked
    with _lock:
        if not _fd_checked:
            _fd_checked = True
            _fd = _open_channel()
        if _fd is None:
            return False
        try:
            os.write(_fd, f"{os.getpid()}\tgputriage.request\t{_escape(text)}\n".encode())
            return True
        except OSError:
            return False


def config(**settings):
    """Records the user's own settings with the run, as ``config.KEY``:
    ``gputriage.config(lr=3e-4, model="llama-1b", seq_len=4096)``."""
    for key, value in settings.items():
        _send("config." + key, value)


def current():
    """Every setting this process has recorded (KEY -> text)."""
    with _lock:
        return dict(_settings)


# --- What is captured automatically -----------------------------------------

_loader_batches = {}   # id(loader) -> batches served
_main_loader = None    # id of the loader whose settings are sent
_optimizer_seen = False
_autocast_seen = False
_compile_seen = False
_attention_seen = False
_first_step_done = False


def loader_settings(loader):
    """A DataLoader's settings that move input throughput."""
    batch_size = getattr(loader, "batch_size", None)
    if batch_size is None:
        batch_size = getattr(getattr(loader, "batch_sampler", None), "batch_size", None)
    workers = getattr(loader, "num_workers", 0)
    prefetch = getattr(loader, "prefetch_factor", None)
    return {
        "dataloader.num_workers": workers,
        "dataloader.batch_size": batch_size,
        "dataloader.pin_memory": bool(getattr(loader, "pin_memory", False)),
        # Only read by worker processes: with none it is not a setting in effect.
        "dataloader.prefetch_factor": prefetch if workers else None,
        "dataloader.persistent_workers": bool(getattr(loader, "persistent_workers", False)),
    }


def loader_batch(loader):
    """One batch served by `loader`: the loader that serves the most batches is
    the training loader, whose settings are the run's."""
    global _main_loader
    key = id(loader)
    count = _loader_batches.get(key, 0) + 1
    _loader_batches[key] = count
    if key != _main_loader and count > _loader_batches.get(_main_loader, 0):
        _main_loader = key
        for k, v in loader_settings(loader).items():
            _send(k, v)
    if not _first_step_done and count >= 2:
        first_step_done()


def optimizer_implementation(optimizer, params):
    """How a torch.optim optimizer updates its tensors, as PyTorch picks it:
    "fused" (one kernel per group), "foreach" (multi-tensor kernels) or
    "for-loop" (a few kernels per tensor); None for an optimizer of another
    library, whose defaults say nothing of it."""
    if not type(optimizer).__module__.startswith("torch.optim"):
        return None
    defaults = getattr(optimizer, "defaults", {}) or {}
    fused, foreach = defaults.get("fused"), defaults.get("foreach")
    if fused:
        return "fused"
    if foreach is not None:
        return "foreach" if foreach else "for-loop"
    if fused is None and foreach is None:
        # Neither asked for: PyTorch 2 picks foreach for tensors all on CUDA (the
        # rule it applies at each step()); PyTorch 1 always runs the loop.
        pick = getattr(sys.modules.get("torch.optim.optimizer"), "_default_to_fused_or_foreach", None)
        if pick is None:
            return "for-loop"
        try:
            _, foreach = pick(params, bool(defaults.get("differentiable", False)), use_fused=False)
        except TypeError:  # an older signature: (params, differentiable)
            _, foreach = pick(params, bool(defaults.get("differentiable", False)))
        return "foreach" if foreach else "for-loop"
    return "for-loop"  # fused=False asked for, foreach left unset: PyTorch runs the loop


def optimizer_created(optimizer):
    global _optimizer_seen
    if _optimizer_seen:
        return
    _optimizer_seen = True
    defaults = getattr(optimizer, "defaults", {}) or {}
    _send("optimizer.class", type(optimizer).__name__)
    _send("optimizer.fused", bool(defaults.get("fused") or False))
    foreach = defaults.get("foreach")
    _send("optimizer.foreach", "default" if foreach is None else bool(foreach))
    if "lr" in defaults:
        _send("optimizer.lr", defaults["lr"])
    # What the update costs per step: one pass over these tensors, a few kernels
    # each in the for-loop implementation.
    params = [p for group in getattr(optimizer, "param_groups", []) for p in group.get("params", [])]
    if params:
        _send("optimizer.param_tensors", len(params))
        _send("optimizer.params", sum(p.numel() for p in params))
        _send("optimizer.device", params[0].device.type)
    implementation = optimizer_implementation(optimizer, params)
    if implementation is not None:
        _send("optimizer.implementation", implementation)


def autocast_entered(enabled, dtype, device_type):
    global _autocast_seen
    if _autocast_seen or not enabled:
        return
    _autocast_seen = True
    _send("autocast.enabled", True)
    _send("autocast.dtype", dtype)
    _send("autocast.device", device_type)


def compile_called(mode, backend):
    global _compile_seen
    _compile_seen = True
    _send("compile.used", True)
    _send("compile.mode", mode or "default")
    _send("compile.backend", backend if isinstance(backend, str) else getattr(backend, "__name__", "custom"))


def attention_backend(name):
    global _attention_seen
    _attention_seen = True
    _send("attention.backend", name)


def versions():
    """The versions that move performance, as PyTorch reports them."""
    torch = sys.modules.get("torch")
    _send("version.python", "%d.%d.%d" % sys.version_info[:3])
    if torch is None:
        return
    _send("version.torch", getattr(torch, "__version__", "unknown"))
    _send("version.cuda", getattr(getattr(torch, "version", None), "cuda", None))
    try:
        cudnn = torch.backends.cudnn
        _send("version.cudnn", cudnn.version() if cudnn.is_available() else None)
    except Exception:
        pass
    try:
        # Only where CUDA is already in use: never initialise it for the job.
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            nccl = getattr(torch.cuda, "nccl", None)
            if nccl is not None:
                v = nccl.version()
                _send("version.nccl", ".".join(map(str, v)) if isinstance(v, tuple) else v)
            _send("gpu.count", torch.cuda.device_count())
            _send("gpu.model", torch.cuda.get_device_name(torch.cuda.current_device()))
    except Exception:
        pass


# The launchers' names for rank, local rank and world size, most common first
# (the recorder reads the same from /proc/PID/environ: src/record/process_rank.cc).
_RANK_NAMES = (
    ("RANK", "LOCAL_RANK", "WORLD_SIZE"),  # torchrun, accelerate, DeepSpeed
    ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE"),
)


def _env_int(name):
    value = os.environ.get(name, "")
    return int(value) if value.isdigit() else None


def report_rank():
    """Tells the recorder who this process is in a distributed run, as
    ``dist.rank``/``dist.local_rank``/``dist.world_size`` (kept per process):
    torch.distributed's own answer once it is initialised (mp.spawn passes the
    rank as an argument, not in the environment), else the launcher's variables.
    Returns whether a rank was known."""
    rank = world = local = backend = None
    source = None
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            rank, world, source = dist.get_rank(), dist.get_world_size(), "torch.distributed"
            backend = dist.get_backend()
    except Exception:
        rank = None  # a half-initialised group: the environment may still say
    for rank_name, local_name, world_name in _RANK_NAMES:
        if _env_int(rank_name) is None:
            continue
        if rank is None:
            rank, world, source = _env_int(rank_name), _env_int(world_name), rank_name
        local = _env_int(local_name)
        break
    if rank is None:
        return False
    _send("dist.rank", rank)
    _send("dist.source", source)
    if world is not None:
        _send("dist.world_size", world)
    if local is not None:
        _send("dist.local_rank", local)
    if backend is not None:
        _send("dist.backend", backend)
    try:
        import socket
        _send("host.name", socket.gethostname())
    except Exception:
        pass
    return True


def first_step_done():
    """After the first training step, what the job did not use is known too:
    no autocast, no torch.compile, no SDPA call (each replaced if used later)."""
    global _first_step_done
    _first_step_done = True
    versions()
    report_rank()
    if not _autocast_seen:
        _send("autocast.enabled", False)
    if not _compile_seen:
        _send("compile.used", False)
    if not _attention_seen:
        _send("attention.backend", "no sdpa call")


def at_exit():
    """A job that served a single batch never finished a step: say what is known."""
    if _loader_batches and not _first_step_done:
        first_step_done()
    report_rank()
