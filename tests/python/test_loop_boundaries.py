"""Issue 53: where zero-code steps begin and end, on a real PyTorch loop
(tests/python/validation_loop.py, Debian's python3-torch on the CPU) recorded
unmodified with `gputriage record --python`:

- a validation pass after each epoch (model.eval(), torch.no_grad(), about
  0.4 s, over its own DataLoader or over tensors) is evaluation between steps:
  `evaluation_overhead` with the pass's own time, and no step holds any of it
  (before the fix the epoch's last fetch pulled each pass into the next step:
  host_stall high and unstable_step_time high, a 15 ms mean step for 0.6 ms;
  on a busy machine slow steps may still be unstable, for that reason);
- a loop that makes its own batches, with no DataLoader, gets its steps from
  its optimizer (before: 0 steps and no verdict), the report says so, and a
  5 ms host sleep per step is timed as the loop's own timer says;
- (PyTorch 2) a model trained through torch.compile: its compilation (the
  first call, the first backward) is the ledger's compile/warm-up time, within
  15 % of the loop's own timer for those steps, and no step verdict counts it.

    GPUTRIAGE=... GPUTRIAGE_PYTHON_PATH=... python3 test_loop_boundaries.py
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import unittest
import skips_are_skips  # tests/python: a skipped test is reported skipped, not passed

GPUTRIAGE = os.environ["GPUTRIAGE"]
LOOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "validation_loop.py")

try:
    import torch  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


def record(*loop_args, env=None):
    """The loop recorded zero-code: (JSON report, the loop's own timers, terminal report)."""
    with tempfile.TemporaryDirectory() as tmp:
        report_path, timings_path = os.path.join(tmp, "report.json"), os.path.join(tmp, "timings.json")
        env = dict(os.environ, **(env or {}))
        env.pop("PYTHONPATH", None)  # the script imports nothing of gputriage
        cmd = [GPUTRIAGE, "record", "--no-store", "--no-mlflow", "--json", report_path, "--python", "--",
               sys.executable, LOOP, "--timings", timings_path] + list(loop_args)
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise AssertionError(f"{cmd} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        with open(report_path) as f, open(timings_path) as g:
            return json.load(f), json.load(g), proc.stdout + proc.stderr


def verdicts(report):
    return {f["verdict"]: f for f in report["findings"]}


def no_pass_inside_a_step(test, m, timings, found, text):
    """No step holds a 0.4 s validation pass: the judged mean step stays at the
    loop's own scale (before the fix: 15.4 ms for the loop's 0.6), and no step
    verdict counts a pass's time. Both timers see the same load: on a busy
    machine slow steps may still be judged unstable, for that reason."""
    own_mean = statistics.mean(timings["step"])
    test.assertLess(m["step_ms_mean"], 3 * own_mean + 5, text)
    if "host_stall" in found:
        stall = {e["name"]: e["value"] for e in found["host_stall"]["evidence"]}["untraced_ms_per_step"]
        test.assertLess(stall, 3 * own_mean + 5, text)


@unittest.skipUnless(HAVE_TORCH, "python3-torch is not installed (scripts/bootstrap.sh installs it)")
class ValidationBetweenSteps(unittest.TestCase):
    def check(self, val):
        report, timings, text = record("--batches", "loader", "--val", val, "--val-ms", "400")
        m = report["recordings"][0]["step_markers"]
        found = verdicts(report)
        print(f"  --val {val}: {m['steps']} steps, mean {m['step_ms_mean']:.2f} ms (loop's own "
              f"{statistics.mean(timings['step']):.2f}), verdicts {sorted(found)}", file=sys.stderr)
        self.assertEqual(m["step_boundary"], "dataloader")
        self.assertIn("evaluation_overhead", found, text)
        no_pass_inside_a_step(self, m, timings, found, text)
        evidence = {e["name"]: e["value"] for e in found["evaluation_overhead"]["evidence"]}
        own_val_s = sum(timings["val"]) / 1e3
        self.assertEqual(evidence["evaluation_count"], len(timings["val"]), evidence)
        self.assertAlmostEqual(evidence["evaluation_seconds"], own_val_s, delta=0.15 * own_val_s)

    def test_a_pass_over_its_own_dataloader(self):
        self.check("loader")

    def test_a_pass_over_tensors(self):
        self.check("tensors")


@unittest.skipUnless(HAVE_TORCH, "python3-torch is not installed (scripts/bootstrap.sh installs it)")
class StepsWithoutADataLoader(unittest.TestCase):
    def test_the_optimizer_delimits_the_steps(self):
        report, timings, text = record("--batches", "manual", "--val", "none", "--sleep-ms", "5", "--epochs", "3")
        m = report["recordings"][0]["step_markers"]
        self.assertIsNotNone(m, text)
        own = timings["step"]
        print(f"  no DataLoader: {m['steps']} steps (+{m['warmup_steps']} warm-up) of {len(own)}, mean "
              f"{m['step_ms_mean']:.2f} ms (loop's own {statistics.mean(own):.2f})", file=sys.stderr)
        self.assertEqual(m["step_boundary"], "optimizer")
        self.assertIn("no DataLoader drove the loop", text)
        # Every iteration is a step; the first begins at its forward, not at its zero_grad.
        self.assertEqual(m["steps"] + m["warmup_steps"], len(own))
        judged = own[-m["steps"]:]
        self.assertAlmostEqual(m["step_ms_mean"], statistics.mean(judged), delta=0.15 * statistics.mean(judged))
        self.assertTrue(m["phases_traced"], m)

    def test_a_validation_pass_without_a_dataloader_is_evaluation(self):
        report, timings, text = record("--batches", "manual", "--val", "tensors", "--val-ms", "400")
        m = report["recordings"][0]["step_markers"]
        found = verdicts(report)
        self.assertEqual(m["step_boundary"], "optimizer")
        self.assertEqual(m["steps"] + m["warmup_steps"], len(timings["step"]))
        self.assertIn("evaluation_overhead", found, text)
        no_pass_inside_a_step(self, m, timings, found, text)


def ledger_seconds(report, name):
    bucket = next(b for b in report["recordings"][0]["ledger"]["buckets"] if b["name"] == name)
    return bucket["hours"] * 3600.0 if bucket["known"] else None


@unittest.skipUnless(HAVE_TORCH and hasattr(torch, "compile"),
                     "needs PyTorch 2 (torch.compile): the python_torch2_* tests run this with PyPI's")
class CompiledModel(unittest.TestCase):
    def test_the_first_call_is_compile_time_outside_the_judged_steps(self):
        # torch.compile's first call builds the model (seconds on a CPU: Inductor
        # writes C++ and compiles it): the goodput ledger's compile bucket, never
        # a slow judged step or a host stall.
        with tempfile.TemporaryDirectory() as cache:  # compiled afresh, not read from an earlier run's cache
            report, timings, text = record("--batches", "loader", "--val", "none", "--compile",
                                           env={"TORCHINDUCTOR_CACHE_DIR": cache})
        m = report["recordings"][0]["step_markers"]
        found = verdicts(report)
        own = timings["step"]
        compile_s = ledger_seconds(report, "compile_warmup")
        print(f"  torch.compile: first forward {timings['first_forward_ms']:.0f} ms and first {m['warmup_steps']} steps "
              f"{sum(own[:m['warmup_steps']]):.0f} ms by the loop, compile bucket {compile_s:.3f} s; {m['steps']} steps (+{m['warmup_steps']} warm-up), mean {m['step_ms_mean']:.2f} ms "
              f"(loop's own {statistics.mean(own[1:]):.2f}); verdicts {sorted(found)}", file=sys.stderr)
        self.assertIsNotNone(compile_s, text)
        self.assertGreater(timings["first_forward_ms"], 500, "the loop's first call did not compile")
        # The bucket holds the marked first call and the warm-up steps around it
        # (the backward graph compiles at the first backward): the loop's own
        # time for the steps gputriage left out as warm-up.
        self.assertEqual(m["steps"] + m["warmup_steps"], len(own))
        warmup_s = sum(own[:m["warmup_steps"]]) / 1e3
        self.assertAlmostEqual(compile_s, warmup_s, delta=0.15 * warmup_s)
        judged = own[-m["steps"]:]
        self.assertAlmostEqual(m["step_ms_mean"], statistics.mean(judged), delta=0.15 * statistics.mean(judged))
        # No step holds the compilation (seconds): the judged steps stay at the
        # loop's own scale, as with a validation pass (a loaded machine may still
        # make fast steps unstable, for that reason).
        no_pass_inside_a_step(self, m, {"step": judged}, found, text)


@unittest.skipUnless(HAVE_TORCH, "python3-torch is not installed (scripts/bootstrap.sh installs it)")
class TheJobsOwnError(unittest.TestCase):
    def test_its_traceback_has_no_frame_of_ours(self):
        # Issue 53: an error the job raised inside a hooked call (a module's
        # forward under a DataLoader's loop) showed gputriage's frames.
        script = ("import torch\nfrom torch import nn\n"
                  "class Bad(nn.Module):\n    def forward(self, x):\n        raise ValueError('the job s own error')\n"
                  "model = Bad()\n"
                  "for x in torch.utils.data.DataLoader(torch.zeros(4, 2), batch_size=2):\n    model(x)\n")
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        proc = subprocess.run([GPUTRIAGE, "record", "--no-store", "--no-mlflow", "--nvml-library", "/nonexistent/x.so",
                               "--python", "--", sys.executable, "-c", script],
                              env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        traceback = proc.stderr[proc.stderr.index("Traceback"):]
        self.assertIn("ValueError: the job s own error", traceback)
        self.assertIn("in forward", traceback)
        self.assertNotIn("gputriage/zero_code.py", traceback)
        self.assertNotIn("_sitecustomize", traceback)


class APlainPythonLoop(unittest.TestCase):
    def test_no_steps_says_why_and_how_to_mark_them(self):
        # Issue 53: a loop without PyTorch got "no steps" and no hint to mark them.
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        proc = subprocess.run([GPUTRIAGE, "record", "--no-store", "--no-mlflow", "--nvml-library", "/nonexistent/x.so",
                               "--python", "--", sys.executable, "-c", "total = sum(i * i for i in range(1000))"],
                              env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("the job never imported PyTorch", proc.stderr)
        self.assertIn("gputriage.step()", proc.stderr)


if __name__ == "__main__":
    skips_are_skips.main()
