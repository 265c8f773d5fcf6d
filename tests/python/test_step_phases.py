"""Acceptance (issue 27): the phases inside a step, zero-code. A real PyTorch
loop (Debian's python3-torch, CPU, data in memory) that sleeps 20 ms after each
optimizer step, recorded unmodified with `gputriage record --python`:

- a host_stall finding whose stall per step is within 20 % of the loop's own
  timer around the sleep, and no input_bound;
- forward, backward and optimizer times within 10 % of the loop's own timers;
- the expected gain's range holds the same loop run without the stall;
- the goodput ledger counts the stall as host_stall;

`record --live` showing the split and the stall while the loop runs; copies of
each batch to a device (`meta` standing in for a GPU) as their own phase with
their bytes; and a loader with twice as many workers as the machine has CPUs,
each sample costing CPU work: a host_saturated finding, and no advice anywhere
to run more workers than there are CPUs.

    GPUTRIAGE=... GPUTRIAGE_PYTHON_PATH=... python3 test_step_phases.py
"""
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import unittest
import skips_are_skips  # tests/python: a skipped test is reported skipped, not passed

GPUTRIAGE = os.environ["GPUTRIAGE"]
HERE = os.path.dirname(os.path.abspath(__file__))
LOOP = os.path.join(HERE, "phases_loop.py")
SLOW_DATASET_LOOP = os.path.join(HERE, "torch_training_loop.py")

try:
    import torch  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


def record(stall_ms, optimizer="adam", closure=False, copy_to=""):
    """The loop recorded zero-code: (report, the loop's own per-step timers, stderr)."""
    with tempfile.TemporaryDirectory() as tmp:
        report_path, timings_path = os.path.join(tmp, "report.json"), os.path.join(tmp, "timings.json")
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)  # the script imports nothing of gputriage
        cmd = [GPUTRIAGE, "record", "--no-store", "--json", report_path, "--python", "--", sys.executable, LOOP,
               "--timings", timings_path, "--stall-ms", str(stall_ms), "--hidden", "256", "--batch", "64",
               "--steps", "60", "--optimizer", optimizer] + (["--closure"] if closure else []) + \
              (["--copy-to", copy_to] if copy_to else [])
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise AssertionError(f"{cmd} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        with open(report_path) as f, open(timings_path) as g:
            return json.load(f), json.load(g), proc.stderr


def judged_mean(timings, key, steps):
    """The loop's own mean over the steps gputriage judged (warm-up steps lead)."""
    return statistics.mean(timings[key][-steps:])


@unittest.skipUnless(HAVE_TORCH, "python3-torch is not installed (scripts/bootstrap.sh installs it)")
class HostStallLoop(unittest.TestCase):
    def test_stall_found_phases_agree_and_the_gain_holds_the_fixed_loop(self):
        report, timings, stderr = record(20)
        m = report["recordings"][0]["step_markers"]
        self.assertIsNotNone(m, stderr)
        self.assertTrue(m["phases_traced"], m)
        self.assertEqual(m["phase_timing"], "host")
        n = m["steps"]
        findings = {f["verdict"]: f for f in report["findings"]}
        self.assertNotIn("input_bound", findings)
        self.assertIn("host_stall", findings, json.dumps(m, indent=1))
        f = findings["host_stall"]
        evidence = {e["name"]: e["value"] for e in f["evidence"]}
        stall_truth = judged_mean(timings, "stall", n)
        print(f"  stall per step: measured {evidence['untraced_ms_per_step']:.2f} ms, loop's own timer "
              f"{stall_truth:.2f} ms", file=sys.stderr)
        self.assertLess(abs(evidence["untraced_ms_per_step"] - stall_truth), 0.2 * stall_truth)

        for phase in ("forward", "backward", "optimizer"):
            mine, theirs = m["phases_ms_mean"][phase], judged_mean(timings, phase, n)
            print(f"  {phase}: gputriage {mine:.2f} ms, loop's own timers {theirs:.2f} ms", file=sys.stderr)
            self.assertLess(abs(mine - theirs), 0.1 * theirs, phase)
            self.assertAlmostEqual(evidence[f"{phase}_ms_per_step"], mine, places=6)

        buckets = {b["name"]: b for b in report["recordings"][0]["ledger"]["buckets"]}
        self.assertTrue(buckets["host_stall"]["known"])
        stall_total_ms = sum(timings["stall"])  # every step's, warm-up too: the ledger counts the whole job
        ledger_ms = buckets["host_stall"]["hours"] * 3.6e6
        print(f"  ledger host_stall {ledger_ms:.0f} ms, the loop's stalls {stall_total_ms:.0f} ms", file=sys.stderr)
        self.assertLess(abs(ledger_ms - stall_total_ms), 0.2 * stall_total_ms)

        # The same loop without the stall lands inside the promised range. A
        # loaded machine moves a run's step time: up to three tries.
        gain = f["expected_gain"]
        low, high = gain["range"]
        for attempt in range(3):
            fixed, _, fixed_stderr = record(0)
            fixed_ms = fixed["recordings"][0]["step_markers"]["step_ms_mean"]
            print(f"  without the stall: {fixed_ms:.1f} ms per step; promised {gain['expected']:.1f} "
                  f"({low:.1f}-{high:.1f}) from {gain['current']:.1f}", file=sys.stderr)
            if low <= fixed_ms <= high:
                break
        self.assertLessEqual(low, fixed_ms, fixed_stderr)
        self.assertLessEqual(fixed_ms, high, fixed_stderr)
        self.assertNotIn("host_stall", {x["verdict"] for x in fixed["findings"]})


@unittest.skipUnless(HAVE_TORCH, "python3-torch is not installed (scripts/bootstrap.sh installs it)")
class OptimizerClosure(unittest.TestCase):
    def test_forward_and_backward_inside_the_step_closure_are_not_the_optimizers(self):
        # Lightning's and LBFGS's way: optimizer.step(closure) runs forward and backward.
        report, timings, stderr = record(0, optimizer="sgd", closure=True)
        m = report["recordings"][0]["step_markers"]
        self.assertTrue(m["phases_traced"], stderr)
        n = m["steps"]
        for phase in ("forward", "backward", "optimizer"):
            mine, theirs = m["phases_ms_mean"][phase], judged_mean(timings, phase, n)
            print(f"  closure, {phase}: gputriage {mine:.2f} ms, loop's own timers {theirs:.2f} ms", file=sys.stderr)
            # The optimizer's own part is under a millisecond here: the loop's timer around the closure
            # holds 0.1-0.15 ms the markers do not (its cause not found yet); forward and backward agree.
            self.assertLess(abs(mine - theirs), 0.1 * theirs + (0.25 if phase == "optimizer" else 0.0), phase)
        self.assertNotIn("host_stall", {f["verdict"] for f in report["findings"]})


@unittest.skipUnless(HAVE_TORCH and shutil.which("script"), "needs python3-torch and util-linux's script")
class CopyPhase(unittest.TestCase):
    def test_copies_to_a_device_are_their_own_phase_with_their_bytes(self):
        # No GPU here: the `meta` device stands in (the same Tensor.to call and
        # hook; nothing is moved, so the phase is short but present).
        report, timings, stderr = record(0, copy_to="meta")
        rec = report["recordings"][0]
        m = rec["step_markers"]
        self.assertIsNotNone(m, stderr)
        self.assertTrue(m["phases_traced"])
        copy = m["phases_ms_mean"]["copy"]
        self.assertGreater(copy, 0, m["phases_ms_mean"])
        # Inside the loop's own timer around the two copies (a meta copy takes
        # microseconds, as long as the hook's own Python around it: no ratio).
        own = judged_mean(timings, "copy", m["steps"])
        self.assertLessEqual(copy, own, (copy, own))
        settings = rec["settings"]
        # Two copies per batch of 64: x (64 x 256 float32, non-blocking), y (64 int64); the
        # dtype-only .to(float32) is no copy.
        x_bytes, y_bytes = 64 * 256 * 4, 64 * 8
        self.assertEqual(settings.get("copy.calls"), str(2 * 60))
        self.assertEqual(settings.get("copy.bytes"), str(60 * (x_bytes + y_bytes)))
        self.assertEqual(float(settings.get("copy.pinned_percent")), 0.0)
        self.assertAlmostEqual(float(settings.get("copy.non_blocking_percent")), 100.0 * x_bytes / (x_bytes + y_bytes),
                               places=1)
        # Microseconds of a meta copy: far below the copy_bound threshold.
        self.assertNotIn("copy_bound", [f["verdict"] for f in report["findings"]])
        # The loop's last fetch (the loader exhausted) is no phase without a step.
        self.assertNotIn("phases_unassigned", [i["kind"] for i in rec["import"]["issues"]])
        print(f"  copy phase {copy * 1e3:.0f} us per step against the loop's {own * 1e3:.0f} us", file=sys.stderr)


class LiveScreen(unittest.TestCase):
    def test_record_live_shows_the_split_and_the_stall_while_the_job_runs(self):
        # script(1) gives the recorder a terminal; the screen is redrawn every second.
        # About 4 s of steps: shorter than the recorder's 5 s hold, so they show
        # only because the live view takes the held steps too.
        with tempfile.TemporaryDirectory() as tmp:
            command = " ".join(shlex.quote(a) for a in [
                GPUTRIAGE, "record", "--no-store", "--live", "--python", "--", sys.executable, LOOP,
                "--timings", os.path.join(tmp, "t.json"), "--stall-ms", "20", "--hidden", "256", "--batch", "64",
                "--steps", "120"])
            env = dict(os.environ, COLUMNS="160")
            env.pop("PYTHONPATH", None)
            proc = subprocess.run(["script", "-q", "-e", "-c", command, os.path.join(tmp, "typescript")], env=env,
                                  capture_output=True, timeout=300)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            with open(os.path.join(tmp, "typescript"), "rb") as f:
                screen = f.read().decode("utf-8", "replace")
        self.assertIn("gputriage record --live", screen)
        # While it ran (the final report comes after): the bar, and the stall as the verdict so far.
        live = screen[:screen.find("gputriage diagnosis")]
        self.assertRegex(live, r"\[d*f+b+o*\.+\]", live)
        # The 20 ms sleep after each step, host-timed: never shorter; on a loaded
        # machine the sleep overshoots, so only a loose upper bound.
        outside = [float(v) for v in re.findall(r"outside the phases (\d+\.\d)", live)]
        self.assertTrue(outside, live)
        self.assertTrue(all(19.5 <= v <= 60 for v in outside), live)
        self.assertIn("Host stall", live)


FIX_PAIRS_LOOP = os.path.join(HERE, "fix_pairs_loop.py")


def record_recompute(checkpointed, blocks=6, steps=30):
    """fix_pairs_loop.py recorded zero-code: (report, the loop's own timers)."""
    with tempfile.TemporaryDirectory() as tmp:
        report_path, timings_path = os.path.join(tmp, "report.json"), os.path.join(tmp, "timings.json")
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        cmd = [GPUTRIAGE, "record", "--no-store", "--json", report_path, "--python", "--", sys.executable,
               FIX_PAIRS_LOOP, "--timings", timings_path, "--blocks", str(blocks), "--steps", str(steps),
               "--hidden", "256"] + (["--checkpoint"] if checkpointed else [])
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise AssertionError(f"{cmd} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        with open(report_path) as f, open(timings_path) as g:
            return json.load(f), json.load(g)


@unittest.skipUnless(HAVE_TORCH, "python3-torch is not installed (scripts/bootstrap.sh installs it)")
class RecomputePair(unittest.TestCase):
    """Activation checkpointing on and off, the same loop: the recomputation the
    checkpointed run reports is the loop's own checkpointed forward, and the run
    without it lands inside the finding's range."""

    def test_recomputation_measured_and_its_gain_holds_the_run_without(self):
        blocks, steps = 6, 30
        # Interleaved (A B A B), so load from other work hits both sides; each side's
        # least disturbed run (the fastest) is the one compared.
        runs = {True: [], False: []}
        for _ in range(2):
            for checkpointed in (True, False):
                runs[checkpointed].append(record_recompute(checkpointed, blocks, steps))
        fastest = lambda side: min(side, key=lambda r: r[0]["recordings"][0]["step_markers"]["step_ms_mean"])
        before, timings = fastest(runs[True])
        after, _ = fastest(runs[False])
        settings = before["recordings"][0]["settings"]
        self.assertEqual(settings.get("checkpointing.calls"), str(blocks * steps), settings)
        measured = float(settings["checkpointing.forward_seconds"])
        own = timings["checkpoint_s"]
        print(f"  checkpointed forward: {measured:.3f} s (zero-code), {own:.3f} s (the loop's timer)", file=sys.stderr)
        self.assertLessEqual(measured, own)  # timed inside the loop's own timer
        self.assertGreater(measured, 0.9 * own)
        self.assertNotIn("checkpointing.calls", after["recordings"][0]["settings"])
        findings = {f["verdict"]: f for f in before["findings"]}
        self.assertIn("recompute_overhead", findings, [f["verdict"] for f in before["findings"]])
        self.assertNotIn("recompute_overhead", {f["verdict"] for f in after["findings"]})
        gain = findings["recompute_overhead"]["expected_gain"]
        realized = after["recordings"][0]["step_markers"]["step_ms_mean"]
        print(f"  recompute_overhead: {gain['current']:.1f} ms -> predicted {gain['expected']:.1f} "
              f"[{gain['range'][0]:.1f}, {gain['range'][1]:.1f}], realized {realized:.1f} ms", file=sys.stderr)
        self.assertEqual(gain["bounded_by"], "memory_headroom")
        self.assertLessEqual(gain["range"][0], realized)
        self.assertLessEqual(realized, gain["range"][1])


@unittest.skipUnless(HAVE_TORCH, "python3-torch is not installed (scripts/bootstrap.sh installs it)")
class WorkersBeyondTheCores(unittest.TestCase):
    def test_host_saturated_and_never_more_workers_than_cores(self):
        cpus = len(os.sched_getaffinity(0))
        if cpus > 4:
            self.skipTest(f"{cpus} CPUs: twice as many workers is not a small test")
        workers = 2 * cpus
        with tempfile.TemporaryDirectory() as tmp:
            report_path = os.path.join(tmp, "report.json")
            env = dict(os.environ)
            env.pop("PYTHONPATH", None)
            cmd = [GPUTRIAGE, "record", "--no-store", "--json", report_path, "--python", "--", sys.executable,
                   SLOW_DATASET_LOOP, "--markers", "none", "--workers", str(workers), "--steps", "80",
                   "--sample-ms", "0", "--decode-ms", "5"]
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            with open(report_path) as f:
                report = json.load(f)
        host = report["recordings"][0]["host"]
        self.assertIsNotNone(host, proc.stderr)
        outside = host["machine_busy_percent_mean"] / 100.0 * host["machine_cpus"] - host["job_cpu_cores_mean"]
        print(f"  {workers} workers on {cpus} CPUs: the job used {host['job_cpu_cores_mean']:.2f} cores, "
              f"other work {outside:.2f}, saturated {host['saturated_percent_of_time']:.0f}% of the time",
              file=sys.stderr)
        if outside > 0.5:
            # Other work held the cores: the job could not fill its CPUs, and the rule
            # (rightly) does not call a job that others crowd out saturated. What this
            # test measures needs the machine to itself: said, not counted as passed.
            self.skipTest(f"work outside the job used {outside:.2f} cores on average: the job's own saturation "
                          f"cannot be measured under that load")
        self.assertEqual(host["job_cpus"], cpus)
        self.assertGreaterEqual(host["job_processes_max"], workers + 1)
        findings = {f["verdict"]: f for f in report["findings"]}
        self.assertIn("host_saturated", findings, json.dumps(host))
        self.assertEqual(findings["host_saturated"]["origin"], "host")
        # The advice: at most a worker per CPU the training process leaves, and
        # the input_bound fix (when the wait shows) cheaper batches, not workers.
        advised = [int(n) for r in findings["host_saturated"]["recommendations"]
                   for n in re.findall(r"num_workers=(\d+)\) at most", r["action"])]
        self.assertEqual(advised, [cpus - 1])
        if "input_bound" in findings:
            action = findings["input_bound"]["recommendations"][0]["action"]
            self.assertIn("cheaper", action)
            self.assertIn(f"num_workers={workers}", action)  # the run's own, quoted; no other count
            self.assertEqual(re.findall(r"num_workers=(\d+)", action), [str(workers)])

if __name__ == "__main__":
    skips_are_skips.main()
