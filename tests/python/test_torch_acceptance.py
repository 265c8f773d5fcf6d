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
import skips_are_skips  # tests/python: a skipped test is reported skipped, not passed

GPUTRIAGE = os.environ["GPUTRIAGE"]
PACKAGE_DIR = os.environ["GPUTRIAGE_PYTHON_PATH"]
LOOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_training_loop.py")

try:
    import torch
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
                # Four loader workers beside the training process on this 2-core
                # machine: how much of the wait they hide depends on what else the
                # machine runs (a CI run measured 27 % once, against 15-19 % usually).
                # The fixed run may take three tries to show it; the slow one, at
                # 55-60 %, must show it at once.
                for attempt in range(1 if expect_input_bound else 3):
                    report, stderr = run_loop(workers, markers, zero_code)
                    m = report["recordings"][0]["step_markers"]
                    if m is None or expect_input_bound or m["data_wait_percent_of_compute"] < 20:
                        break
                    print(f"  num_workers={workers}: {m['data_wait_percent_of_compute']:.0f}% of compute on try "
                          f"{attempt + 1} (a loaded machine); again", file=sys.stderr)
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
                # The loader's settings go with the run (watch() or zero-code), and the user's own.
                settings = report["recordings"][0]["settings"]
                self.assertEqual(settings["dataloader.num_workers"], str(workers))
                if not zero_code:
                    self.assertEqual(settings["config.model"], "mlp")
                    self.assertEqual(settings["config.hidden"], "512")
                # No GPU here: the report says so and judges from the steps alone.
                self.assertIn("gpu_metrics_unavailable",
                              [i["kind"] for i in report["recordings"][0]["import"]["issues"]])

    def test_instrumented_watch(self):
        self.check("watch", zero_code=False)

    def test_instrumented_step_and_phases(self):
        self.check("step", zero_code=False)

    def test_zero_code(self):
        self.check("none", zero_code=True)


def gputriage(*args):
    proc = subprocess.run([GPUTRIAGE, *args], capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


@unittest.skipUnless(HAVE_TORCH, "python3-torch is not installed (scripts/bootstrap.sh installs it)")
class ExperimentHistory(unittest.TestCase):
    """Issue 13's acceptance: one loop recorded three times under one --name in
    zero-code mode, num_workers 4, then 0, then 4. The second run regresses
    (step time and data wait) and names num_workers 4 -> 0; the third does not;
    compare of the first two lists the regression and the change."""

    def test_num_workers_regression_is_found_and_named(self):
        with tempfile.TemporaryDirectory() as tmp:
            store = os.path.join(tmp, "runs.db")
            env = dict(os.environ)
            env.pop("PYTHONPATH", None)
            reports = []
            # Two runs at 4 workers (a history knows its spread from a repeat, issue 53), then 0, then 4 again.
            for i, workers in enumerate((4, 4, 0, 4)):
                report_path = os.path.join(tmp, f"run{i + 1}.json")
                cmd = [GPUTRIAGE, "record", "--store", store, "--name", "cpu-loop", "--python", "--json", report_path,
                       "--", sys.executable, LOOP, "--workers", str(workers), "--markers", "none"]
                proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                with open(report_path) as f:
                    reports.append(json.load(f))

            # What the job reported about itself, with no change to the script.
            settings = reports[2]["recordings"][0]["settings"]
            self.assertEqual(settings["dataloader.num_workers"], "0")
            self.assertEqual(settings["dataloader.batch_size"], "32")
            self.assertEqual(settings["optimizer.class"], "SGD")
            # Its tensors and the update PyTorch runs for them: SGD's default on the
            # CPU is the per-tensor loop in every release.
            hidden = 512  # the loop's default: Linear(64, h), Linear(h, h), Linear(h, 10)
            self.assertEqual(settings["optimizer.param_tensors"], "6")
            self.assertEqual(settings["optimizer.params"], str(64 * hidden + hidden + hidden * hidden + hidden + hidden * 10 + 10))
            self.assertEqual(settings["optimizer.device"], "cpu")
            self.assertEqual(settings["optimizer.implementation"], "for-loop")
            self.assertEqual(settings["autocast.enabled"], "false")
            self.assertEqual(settings["version.torch"], torch.__version__)

            def regression(report):
                return [f for f in report["findings"] if f["verdict"] == "regression"]

            self.assertEqual(regression(reports[0]), [], "the first run has nothing to regress against")
            self.assertEqual(regression(reports[1]), [], "a rerun of the same settings")
            found = regression(reports[2])
            self.assertEqual(len(found), 1, json.dumps(reports[2]["findings"], indent=1))
            f = found[0]
            moved = {e["name"] for e in f["evidence"]}
            # Each run's steps, for a failure to explain itself (CI has failed here
            # under load: data wait moved, step time not past its noise floor).
            steps = [{k: r["recordings"][0]["step_markers"].get(k)
                      for k in ("step_ms_mean", "step_ms_p50", "step_ms_cv", "data_wait_ms_mean", "compute_ms_mean")}
                     for r in reports]
            # Step time counts only where the history can tell: two baseline runs one
            # after the other on a loaded machine (23.1 and 17.9 ms once in CI) give a
            # spread whose bar no 4 -> 0 move passes, as it should; the report then
            # names the regression by its data wait alone.
            first, second = steps[0]["step_ms_mean"], steps[1]["step_ms_mean"]
            baseline_agrees = abs(first - second) / ((first + second) / 2) <= 0.10
            if baseline_agrees:
                self.assertIn("step_time_ms", moved, f"{f['title']}; {f['detail']}; steps of the four runs: {steps}")
            else:
                print(f"  step time not judged: the baseline runs differ by more than 10 % ({first:.1f}, {second:.1f} ms)",
                      file=sys.stderr)
            self.assertIn("data_wait_percent", moved, f["title"])
            changes = {c["key"]: (c["before"], c["after"]) for c in f["config_changes"]}
            self.assertEqual(changes.get("dataloader.num_workers"), ("4", "0"), f["detail"])
            self.assertIn("dataloader.num_workers 4 → 0", f["detail"])
            self.assertEqual(regression(reports[3]), [], json.dumps(regression(reports[3]), indent=1))
            print(f"  run 3: {f['title']}", file=sys.stderr)

            # compare of runs 2 and 3 lists the regression and the config change.
            rc, out, err = gputriage("compare", "--json", "2", "3", "--store", store)
            self.assertEqual(rc, 0, err)
            c = json.loads(out)
            self.assertTrue({"step_time_ms", "data_wait_percent"} <= {r["metric"] for r in c["regressions"]}, out)
            self.assertIn({"key": "dataloader.num_workers", "before": "4", "after": "0"}, c["config_changes"])
            why = {e["metric"]: e for e in c["explanations"]}
            self.assertEqual(why["data_wait_percent"]["config_key"], "dataloader.num_workers")

            # The experiment's history, and the CI gates on it.
            rc, out, err = gputriage("runs", "--name", "cpu-loop", "--json", "--store", store)
            self.assertEqual(rc, 0, err)
            history = json.loads(out)
            self.assertEqual([r["regression"] for r in history["runs"]], [False, False, True, False])
            self.assertEqual(gputriage("diagnose", "3", "--fail-on", "regression", "--store", store)[0], 1)
            self.assertEqual(gputriage("diagnose", "4", "--fail-on", "regression", "--store", store)[0], 0)
            # Diagnosed again from the store, run 3 is judged as it was when recorded.
            rc, out, err = gputriage("diagnose", "--json", "3", "--store", store)
            self.assertEqual([g["config_changes"] for g in regression(json.loads(out))], [f["config_changes"]])


if __name__ == "__main__":
    skips_are_skips.main(verbosity=2)
