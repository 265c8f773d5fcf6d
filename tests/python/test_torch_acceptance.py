"""Acceptance: a real PyTorch training loop (Debian's python3-torch, CPU) with a
deliberately slow dataset is diagnosed input-bound at num_workers=0, with the
data-wait share it measured, and not at num_workers=4 -- instrumented with
gputriage.watch()/step(), and with no change to the script (record --python).

    GPUTRIAGE=... GPUTRIAGE_PYTHON_PATH=... python3 test_torch_acceptance.py
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

GPUTRIAGE = os.environ["GPUTRIAGE"]
PACKAGE_DIR = os.environ["GPUTRIAGE_PYTHON_PATH"]
LOOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_training_loop.py")

try:
    import torch  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


def run_loop(workers, markers, zero_code):
    with tempfile.TemporaryDirectory() as tmp:
        report_path = os.path.join(tmp, "report.json")
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        if not zero_code:
            env["PYTHONPATH"] = PACKAGE_DIR  # the instrumented script imports gputriage
        cmd = [GPUTRIAGE, "record", "--no-store", "--json", report_path]
        if zero_code:
            cmd.append("--python")
        cmd += ["--", sys.executable, LOOP, "--workers", str(workers), "--markers", markers]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise AssertionError(f"{cmd} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        with open(report_path) as f:
            return json.load(f), proc.stderr


@unittest.skipUnless(HAVE_TORCH, "python3-torch is not installed (scripts/bootstrap.sh installs it)")
class SlowDatasetLoop(unittest.TestCase):
    def check(self, markers, zero_code):
        for workers, expect_input_bound in ((0, True), (4, False)):
            with self.subTest(workers=workers):
                report, stderr = run_loop(workers, markers, zero_code)
                m = report["recordings"][0]["step_markers"]
                self.assertIsNotNone(m, stderr)
                self.assertEqual(m["steps"] + m["warmup_steps"], 60, stderr)
                self.assertTrue(m["phases_known"])
                self.assertGreater(m["samples_per_s"], 0)
                findings = {f["verdict"]: f for f in report["findings"]}
                share = m["data_wait_percent_of_compute"]
                print(f"  {'zero-code' if zero_code else markers}, num_workers={workers}: data wait "
                      f"{m['data_wait_ms_mean']:.1f} ms / compute {m['compute_ms_mean']:.1f} ms = {share:.0f}% of "
                      f"compute -> {sorted(findings) or 'no verdict'}", file=sys.stderr)
                self.assertEqual("input_bound" in findings, expect_input_bound, stderr)
                if expect_input_bound:
                    f = findings["input_bound"]
                    self.assertEqual(f["origin"], "markers")
                    evidence = {e["name"]: e["value"] for e in f["evidence"]}
                    self.assertAlmostEqual(evidence["data_wait_percent_of_compute"], share, places=6)
                    self.assertGreaterEqual(share, 20)
                    self.assertIn(f"{share:.0f}%", f["title"])
                else:
                    self.assertLess(share, 20)
                # No GPU here: the report says so and judges from the steps alone.
                self.assertIn("gpu_metrics_unavailable",
                              [i["kind"] for i in report["recordings"][0]["import"]["issues"]])

    def test_instrumented_watch(self):
        self.check("watch", zero_code=False)

    def test_instrumented_step_and_phases(self):
        self.check("step", zero_code=False)

    def test_zero_code(self):
        self.check("none", zero_code=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
