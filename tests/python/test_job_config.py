"""The job's configuration as zero-code mode captures it, through the real
hooks and the real recorder channel: a stand-in `torch` package (this
machine's PyTorch 1.13 has no torch.compile or SDPA) with the same names the
hooks look for, and a script that compiles, attends and autocasts.

    GPUTRIAGE=... GPUTRIAGE_PYTHON_PATH=... python3 test_job_config.py
"""
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest
import skips_are_skips  # tests/python: a skipped test is reported skipped, not passed

GPUTRIAGE = os.environ["GPUTRIAGE"]
PACKAGE_DIR = os.environ["GPUTRIAGE_PYTHON_PATH"]

FAKE_TORCH = {
    "torch/__init__.py": """
        from torch import amp, nn, backends, cuda, utils, optim
        from torch.amp.autocast_mode import autocast
        __version__ = "9.9.0+fake"
        class version:
            cuda = "12.8"
        def compile(model=None, *, mode=None, backend="inductor", **kwargs):
            return model
        def _fused_sdp_choice(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
            return 1 if is_causal else 0
    """,
    "torch/amp/__init__.py": "",
    "torch/amp/autocast_mode.py": """
        class autocast:
            def __init__(self, device_type, dtype=None, enabled=True):
                self.device, self.fast_dtype, self._enabled = device_type, dtype, enabled
            def __enter__(self):
                return self
            def __exit__(self, *exc):
                return False
    """,
    "torch/nn/__init__.py": "from torch.nn import functional, attention",
    "torch/nn/functional.py": """
        def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
            return query
    """,
    "torch/nn/attention.py": """
        import enum
        class SDPBackend(enum.IntEnum):
            ERROR = -1
            MATH = 0
            FLASH_ATTENTION = 1
            EFFICIENT_ATTENTION = 2
    """,
    "torch/backends/__init__.py": "from torch.backends import cuda, cudnn",
    "torch/backends/cuda.py": "",
    "torch/backends/cudnn.py": """
        def is_available():
            return True
        def version():
            return 91000
    """,
    "torch/cuda.py": """
        def is_available():
            return False
        def is_initialized():
            return False
    """,
    "torch/utils/__init__.py": "",
    "torch/optim/__init__.py": "from torch.optim.optimizer import Optimizer",
    "torch/optim/optimizer.py": """
        class Optimizer:
            def __init__(self, params, defaults):
                self.defaults = defaults
            def step(self):
                pass
    """,
}

SCRIPT = """
    import torch
    import torch.nn.functional as F
    from torch.optim.optimizer import Optimizer

    class AdamW(Optimizer):
        def __init__(self, params, lr=1e-3, fused=None):
            super().__init__(params, dict(lr=lr, fused=fused, foreach=None))

    opt = AdamW([], lr=3e-4, fused=True)
    model = torch.compile(lambda x: x, mode="max-autotune")
    with torch.autocast("cuda", dtype="bfloat16", enabled=False):
        pass  # off: not a use of autocast
    for _ in range(3):
        F.scaled_dot_product_attention(1, 2, 3, is_causal=True)
    with torch.autocast("cuda", dtype="bfloat16"):
        pass
"""


class ZeroCodeConfiguration(unittest.TestCase):
    def test_hooks_report_what_the_job_used(self):
        with tempfile.TemporaryDirectory() as tmp:
            for path, text in FAKE_TORCH.items():
                os.makedirs(os.path.join(tmp, os.path.dirname(path)), exist_ok=True)
                with open(os.path.join(tmp, path), "w") as f:
                    f.write(textwrap.dedent(text))
            script = os.path.join(tmp, "job.py")
            with open(script, "w") as f:
                f.write(textwrap.dedent(SCRIPT))
            report_path = os.path.join(tmp, "report.json")
            env = dict(os.environ, PYTHONPATH=tmp)  # the stand-in torch; --python adds ours in front
            proc = subprocess.run([GPUTRIAGE, "record", "--no-store", "--python", "--json", report_path, "--",
                                   sys.executable, script], env=env, capture_output=True, text=True, timeout=120)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertNotIn("cannot hook", proc.stderr)
            with open(report_path) as f:
                settings = json.load(f)["recordings"][0]["settings"]
            expected = {
                "optimizer.class": "AdamW",
                "optimizer.fused": "true",
                "optimizer.foreach": "default",
                "optimizer.lr": "0.0003",
                "optimizer.implementation": None,  # a class of the script's own: its update is not claimed
                "compile.used": "true",
                "compile.mode": "max-autotune",
                "compile.backend": "inductor",
                "attention.backend": "flash_attention",  # what _fused_sdp_choice picked for causal inputs
                "autocast.enabled": "true",
                "autocast.dtype": "bfloat16",
                "autocast.device": "cuda",
            }
            self.assertEqual({k: settings.get(k) for k in expected}, expected, proc.stderr)

    def test_a_recycled_descriptor_is_never_written(self):
        # $GPUTRIAGE_CONFIG_FD names a descriptor the job has since reused for
        # its own file: the package must not append to it.
        with tempfile.TemporaryDirectory() as tmp:
            own = os.path.join(tmp, "own.txt")
            code = textwrap.dedent(f"""
                import os
                fd = os.open({own!r}, os.O_WRONLY | os.O_CREAT)
                os.environ["GPUTRIAGE_CONFIG_FD"] = str(fd)
                os.environ.pop("GPUTRIAGE_CONFIG_PATH", None)
                import gputriage
                gputriage.config(lr=0.1)
                assert gputriage.job_config.current() == {{"config.lr": "0.1"}}
            """)
            env = dict(os.environ, PYTHONPATH=PACKAGE_DIR)
            proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertEqual(os.path.getsize(own), 0)


if __name__ == "__main__":
    skips_are_skips.main(verbosity=2)
