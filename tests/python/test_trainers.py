"""Acceptance (issue 27): the trainers people use, recorded unmodified with
`gputriage record --python`.

- A real Hugging Face Trainer run (transformers + accelerate, pinned in
  tests/requirements-trainers.txt, installed by scripts/bootstrap.sh into
  .venv-trainers beside Debian's python3-torch): its steps, their forward,
  backward and optimizer phases, and the trainer's configuration, in the report
  and in the run store read back.
- A real PyTorch Lightning `fit` (lightning 2.2.5, same environment; Debian's
  torch 1.13 needs torch's own Python 3.11 fix for Lightning to import, which
  scripts/bootstrap.sh puts in that environment: torch_py311_backport.py): the
  same, its forward and backward counted inside the closure Lightning gives
  optimizer.step().
- The Lightning, Accelerate and DeepSpeed hooks on stand-in modules of the same
  names: the configuration each sends, where a trainer is not installed.

    GPUTRIAGE=... GPUTRIAGE_PYTHON_PATH=... GPUTRIAGE_TRAINERS_PYTHON=... python3 test_trainers.py
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
HERE = os.path.dirname(os.path.abspath(__file__))
TRAINERS_PYTHON = os.environ.get("GPUTRIAGE_TRAINERS_PYTHON", "")


def have_transformers():
    if not TRAINERS_PYTHON or not os.access(TRAINERS_PYTHON, os.X_OK):
        return False
    probe = subprocess.run([TRAINERS_PYTHON, "-c", "import torch, transformers, accelerate"], capture_output=True)
    return probe.returncode == 0


def record(tmp, python, script, *args, store=True, extra_env=None):
    report_path = os.path.join(tmp, "report.json")
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.update(extra_env or {})
    cmd = [GPUTRIAGE, "record", "--json", report_path, "--python"]
    cmd += ["--store", os.path.join(tmp, "runs.db")] if store else ["--no-store"]
    cmd += ["--", python, script, *args]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise AssertionError(f"{cmd} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    with open(report_path) as f:
        return json.load(f), proc.stderr


def record_trainer(test, tmp, script, *args):
    """`script` recorded unmodified in the trainers' environment: (its recording, its
    step markers); 30 steps with forward, backward and optimizer marked in them."""
    report, stderr = record(tmp, TRAINERS_PYTHON, os.path.join(HERE, "trainers", script), *args)
    test.assertNotIn("cannot hook", stderr)
    rec = report["recordings"][0]
    m = rec["step_markers"]
    test.assertIsNotNone(m, stderr)
    test.assertEqual(m["steps"] + m["warmup_steps"], 30)
    test.assertTrue(m["phases_traced"])
    for phase in ("forward", "backward", "optimizer"):
        test.assertGreater(m["phases_ms_mean"][phase], 0, phase)
    return rec, m


def print_phases(name, m):
    p = m["phases_ms_mean"]
    print(f"  {name}: {m['step_ms_mean']:.1f} ms per step: forward {p['forward']:.1f}, backward {p['backward']:.1f}, "
          f"optimizer {p['optimizer']:.1f}, outside {m['untraced_ms_mean']:.1f} ms", file=sys.stderr)


def check_settings_and_store(test, tmp, rec, m, expected):
    """The configuration in the report, and the stored run read back with the same
    steps, phases and configuration."""
    for key, value in expected.items():
        test.assertEqual(rec["settings"].get(key), value, key)
    test.assertIn("trainer.version", rec["settings"])
    stored = subprocess.run([GPUTRIAGE, "diagnose", "--json", "--store", os.path.join(tmp, "runs.db"), "1"],
                            capture_output=True, text=True, timeout=120)
    test.assertEqual(stored.returncode, 0, stored.stderr)
    again = json.loads(stored.stdout)["recordings"][0]
    test.assertEqual(again["step_markers"]["steps"], m["steps"])
    for phase in ("forward", "backward", "optimizer"):
        test.assertAlmostEqual(again["step_markers"]["phases_ms_mean"][phase], m["phases_ms_mean"][phase], places=3)
    for key, value in expected.items():
        test.assertEqual(again["settings"].get(key), value, key)


@unittest.skipUnless(have_transformers(), "no .venv-trainers with transformers (scripts/bootstrap.sh makes it)")
class HuggingFaceTrainer(unittest.TestCase):
    def test_steps_phases_and_configuration_in_the_report_and_the_store(self):
        with tempfile.TemporaryDirectory() as tmp:
            rec, m = record_trainer(self, tmp, "hf_trainer_job.py", os.path.join(tmp, "out"), "--steps", "30")
            phases = m["phases_ms_mean"]
            # Forward and backward are most of a BERT step on the CPU; the rest is the Trainer's own work.
            self.assertGreater(phases["forward"] + phases["backward"], 0.5 * m["step_ms_mean"])
            print_phases("Trainer", m)
            check_settings_and_store(self, tmp, rec, m, {
                "trainer.framework": "transformers.Trainer", "trainer.per_device_train_batch_size": "16",
                "trainer.gradient_accumulation_steps": "1", "trainer.max_steps": "30", "trainer.optim": "adamw_torch",
                "accelerate.framework": "accelerate.Accelerator", "optimizer.class": "AdamW",
                "dataloader.batch_size": "16"})


def lightning_import_error():
    """Why the trainers' environment cannot import Lightning ("" when it can)."""
    if not TRAINERS_PYTHON or not os.access(TRAINERS_PYTHON, os.X_OK):
        return "no .venv-trainers (scripts/bootstrap.sh makes it)"
    # `import lightning` is lazy: a module's construction reaches torch.distributed.
    probe = subprocess.run([TRAINERS_PYTHON, "-c", "import lightning; lightning.LightningModule()"],
                           capture_output=True, text=True)
    return "" if probe.returncode == 0 else (probe.stderr.strip().splitlines() or ["import failed"])[-1]


class LightningFit(unittest.TestCase):
    def test_steps_phases_and_configuration_in_the_report_and_the_store(self):
        why = lightning_import_error()
        if why:  # without the environment's backport of torch's Python 3.11 fix (scripts/bootstrap.sh)
            self.skipTest(f"Lightning cannot be imported here: {why}")
        with tempfile.TemporaryDirectory() as tmp:
            rec, m = record_trainer(self, tmp, "lightning_job.py", "--steps", "30")
            phases = m["phases_ms_mean"]
            # Lightning runs forward and backward inside the closure it gives
            # optimizer.step(): counted as forward and backward, not optimizer time.
            self.assertGreater(phases["data"], 0)
            self.assertGreater(phases["forward"] + phases["backward"], phases["optimizer"])
            print_phases("Lightning", m)
            check_settings_and_store(self, tmp, rec, m, {
                "trainer.framework": "lightning.Trainer", "trainer.max_steps": "30",
                "trainer.accumulate_grad_batches": "1", "trainer.precision": "32-true",
                "trainer.strategy": "SingleDeviceStrategy", "optimizer.class": "Adam", "dataloader.batch_size": "32",
                "dataloader.num_workers": "0"})


    def test_gradient_accumulation_counts_optimizer_steps_not_micro_batches(self):
        # Issue 53: with accumulate_grad_batches=2, 40 micro-batches were counted
        # as 40 optimizer steps (zero_grad opens each window in one micro-batch,
        # step() closes it in the next: both had optimizer time).
        why = lightning_import_error()
        if why:
            self.skipTest(f"Lightning cannot be imported here: {why}")
        with tempfile.TemporaryDirectory() as tmp:
            report, stderr = record(tmp, TRAINERS_PYTHON, os.path.join(HERE, "trainers", "lightning_job.py"),
                                    "--steps", "20", "--accumulate", "2")
            m = report["recordings"][0]["step_markers"]
            self.assertEqual(m["steps"] + m["warmup_steps"], 40, stderr)
            self.assertEqual(m["optimizer_steps"], 20, m)
            self.assertIn("the steps are micro-batches", stderr)


# Stand-ins with the real packages' module names and the attributes the hooks
# read; their trainers step a torch-like optimizer with a closure, as Lightning does.
STAND_INS = {
    "lightning/__init__.py": "__version__ = '2.2.5'",
    "lightning/pytorch/__init__.py": "",
    "lightning/pytorch/trainer/__init__.py": "",
    "lightning/pytorch/trainer/trainer.py": """
        class Trainer:
            precision = "bf16-mixed"
            accumulate_grad_batches = 4
            max_steps = 100
            log_every_n_steps = 50
            gradient_clip_val = 1.0
            num_devices = 8
            num_nodes = 2
            class DDPStrategy:
                pass
            strategy = DDPStrategy()
            def fit(self, model):
                return model()
    """,
    "accelerate/__init__.py": "__version__ = '0.30.1'",
    "accelerate/accelerator.py": """
        class Accelerator:
            mixed_precision = "bf16"
            gradient_accumulation_steps = 2
            num_processes = 8
            class _Type:
                value = "MULTI_GPU"
            distributed_type = _Type()
            def prepare(self, *things):
                return things
    """,
    "deepspeed/__init__.py": "__version__ = '0.14.0'",
    "deepspeed/runtime/__init__.py": "",
    "deepspeed/runtime/engine.py": """
        class DeepSpeedEngine:
            def zero_optimization_stage(self):
                return 3
            def gradient_accumulation_steps(self):
                return 8
            def train_micro_batch_size_per_gpu(self):
                return 4
            def bfloat16_enabled(self):
                return True
            def fp16_enabled(self):
                return False
            def forward(self, x):
                return x
    """,
}

STAND_IN_JOB = """
    from lightning.pytorch.trainer.trainer import Trainer
    from accelerate.accelerator import Accelerator
    from deepspeed.runtime.engine import DeepSpeedEngine

    Trainer().fit(lambda: None)
    Trainer().fit(lambda: None)  # once is enough
    Accelerator().prepare("model", "optimizer")
    DeepSpeedEngine().forward(1)
"""


class TrainerHooksOnStandIns(unittest.TestCase):
    def test_each_trainer_sends_its_configuration_once(self):
        with tempfile.TemporaryDirectory() as tmp:
            for path, text in STAND_INS.items():
                os.makedirs(os.path.join(tmp, "pkgs", os.path.dirname(path)), exist_ok=True)
                with open(os.path.join(tmp, "pkgs", path), "w") as f:
                    f.write(textwrap.dedent(text))
            job = os.path.join(tmp, "job.py")
            with open(job, "w") as f:
                f.write(textwrap.dedent(STAND_IN_JOB))
            # --python puts ours in front of PYTHONPATH; the stand-ins after it.
            report, stderr = record(tmp, sys.executable, job, store=False,
                                    extra_env={"PYTHONPATH": os.path.join(tmp, "pkgs")})
            self.assertNotIn("cannot hook", stderr)
            settings = report["recordings"][0]["settings"]
        expected = {
            "trainer.framework": "deepspeed",  # the last trainer to start; each sends its own keys
            "trainer.precision": "bf16-mixed", "trainer.accumulate_grad_batches": "4", "trainer.max_steps": "100",
            "trainer.devices": "8", "trainer.nodes": "2", "trainer.strategy": "DDPStrategy",
            "trainer.gradient_clip_val": "1.0",
            "accelerate.framework": "accelerate.Accelerator", "accelerate.version": "0.30.1",
            "accelerate.mixed_precision": "bf16", "accelerate.gradient_accumulation_steps": "2",
            "accelerate.distributed_type": "MULTI_GPU", "accelerate.num_processes": "8",
            "trainer.zero_stage": "3", "trainer.gradient_accumulation_steps": "8", "trainer.micro_batch_size": "4",
            "trainer.bf16": "true", "trainer.fp16": "false", "trainer.version": "0.14.0",
        }
        for key, value in expected.items():
            self.assertEqual(settings.get(key), value, key)


if __name__ == "__main__":
    skips_are_skips.main()
