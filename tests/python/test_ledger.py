"""Acceptance (issue 26): a real PyTorch CPU loop with a restore, evaluation,
checkpoints and a crash, recorded by `gputriage record` with explicit
`gputriage.phase(...)` markers and unmodified in zero-code mode (`--python`):
each bucket of the goodput ledger against the loop's own timers (within 5 % or
50 ms), the buckets adding up to the job, the steps after the last checkpoint of
the run that crashed as its lost work, and the stored run's ledger the same as
the one reported when it ended.

    GPUTRIAGE=... GPUTRIAGE_PYTHON_PATH=... python3 test_ledger.py
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
LOOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ledger_loop.py")

try:
    import torch  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False

CRASH_AT = 45  # checkpoints at 25 and 50, evaluations at 20 and 40: the crash loses steps 25-44


def record(tmp, name, zero_code, extra):
    report = os.path.join(tmp, f"{name}.json")
    timers = os.path.join(tmp, f"{name}.timers.json")
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if not zero_code:
        env["PYTHONPATH"] = PACKAGE_DIR  # the instrumented loop imports gputriage
    cmd = [GPUTRIAGE, "record", "--store", os.path.join(tmp, "runs.db"), "--name", "ledger-loop", "--json", report]
    cmd += ["--python"] if zero_code else []
    cmd += ["--", sys.executable, LOOP, "--checkpoint", os.path.join(tmp, "ckpt.pt"), "--timers", timers,
            "--markers", "none" if zero_code else "phases"] + extra
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    with open(report) as f, open(timers) as g:
        return proc, json.load(f), json.load(g)


def seconds(ledger, name):
    bucket = next(b for b in ledger["buckets"] if b["name"] == name)
    return None if not bucket["known"] else bucket["hours"] * 3600.0


def span_s(pairs):
    return sum(end - begin for begin, end in pairs) / 1e9


@unittest.skipUnless(HAVE_TORCH, "python3-torch is not installed (scripts/bootstrap.sh installs it)")
class LedgerOfARealLoop(unittest.TestCase):
    def expect_close(self, ledger, name, truth_s):
        got = seconds(ledger, name)
        self.assertIsNotNone(got, f"{name} unknown")
        tolerance = max(0.05, 0.05 * truth_s)
        self.assertLessEqual(abs(got - truth_s), tolerance,
                             f"{name}: ledger {got:.3f} s, the loop's own timers {truth_s:.3f} s")

    def check_run(self, ledger, timers, crashed, zero_code):
        self.assertEqual(ledger["unit"], "job_hours")  # no GPU here
        total = sum(b["hours"] for b in ledger["buckets"] if b["known"])
        self.assertAlmostEqual(total, ledger["total"], delta=0.01 * ledger["total"])
        steps = timers["steps"]
        last_save = max([end for _, end in timers["checkpoints"]], default=0)
        lost = [s for s in steps if crashed and s["end"] > last_save]
        kept = [s for s in steps if s not in lost]
        self.expect_close(ledger, "data_wait", sum(s["data"][1] - s["data"][0] for s in kept) / 1e9)
        self.expect_close(ledger, "productive",
                          sum((s["end"] - s["begin"]) - (s["data"][1] - s["data"][0]) for s in kept) / 1e9)
        self.expect_close(ledger, "lost_work", sum(s["end"] - s["begin"] for s in lost) / 1e9)
        self.expect_close(ledger, "evaluation", span_s(timers["evals"]))
        self.expect_close(ledger, "checkpoint_save", span_s(timers["checkpoints"]))
        restore = span_s([timers["restore"]]) if timers["restore"] else 0.0
        if timers["restore"]:
            self.expect_close(ledger, "checkpoint_restore", restore)
        # Start-up: the process's start (from /proc, 10 ms ticks) to its first step, less the restore.
        self.expect_close(ledger, "startup", (steps[0]["begin"] - timers["process_start_ns"]) / 1e9 - restore)
        # In zero-code mode the last step ends only when the process does (no next batch ends it).
        if crashed:
            self.assertGreater(seconds(ledger, "crash"), 0)
            self.assertEqual(seconds(ledger, "teardown"), 0)
        else:
            self.assertEqual(seconds(ledger, "lost_work"), 0)
            self.assertGreaterEqual(seconds(ledger, "teardown"), 0 if zero_code else 1e-6)
        if zero_code:
            # Forward, backward and the optimizer are marked: the rest of each step is measured (no GPU here:
            # all of it). This loop does nothing else in a step: the rest is its own Python.
            self.assertIsNotNone(seconds(ledger, "host_stall"))
            self.assertLess(seconds(ledger, "host_stall"), 0.2 * seconds(ledger, "productive"))
        else:
            self.assertIsNone(seconds(ledger, "host_stall"))  # the loop marks no forward/backward/optimizer

    def crash_then_resume(self, zero_code):
        with tempfile.TemporaryDirectory() as tmp:
            proc, report, timers = record(tmp, "crashed", zero_code, ["--crash-at", str(CRASH_AT)])
            self.assertEqual(proc.returncode, 1, proc.stderr)  # the job's own exit code
            self.assertIn("ledger:", proc.stderr)
            ledger = report["recordings"][0]["ledger"]
            self.assertIsNotNone(ledger, proc.stderr)
            self.check_run(ledger, timers, crashed=True, zero_code=zero_code)
            lost_steps = next(b for b in ledger["buckets"] if b["name"] == "lost_work")["count"]
            crashed_ledger, last_step = ledger, timers["steps"][-1]["step"]

            proc, report, timers = record(tmp, "resumed", zero_code, [])
            self.assertEqual(proc.returncode, 0, proc.stderr)
            # The work lost is the work redone: the crashed run's steps after its
            # last checkpoint are the steps the resumed run repeats.
            self.assertEqual(lost_steps, last_step + 1 - timers["restored_step"])
            self.assertEqual(lost_steps, CRASH_AT - 25)
            ledger = report["recordings"][0]["ledger"]
            self.check_run(ledger, timers, crashed=False, zero_code=zero_code)

            # The experiment: both runs added up, and the restart between them.
            runs = subprocess.run([GPUTRIAGE, "runs", "--store", os.path.join(tmp, "runs.db"), "--name", "ledger-loop",
                                   "--json"], capture_output=True, text=True, timeout=120)
            self.assertEqual(runs.returncode, 0, runs.stderr)
            experiment = json.loads(runs.stdout)
            both = experiment["ledger"]
            self.assertEqual((both["runs"], both["failed_runs"], both["restarts"]), (2, 1, 1))
            hours = {b["name"]: b["hours"] for b in both["buckets"]}
            self.assertAlmostEqual(hours["lost_work"], seconds(crashed_ledger, "lost_work") / 3600.0, delta=1e-9)
            first, second = experiment["runs"]
            self.assertAlmostEqual(hours["restart"], (second["started_ns"] - first["ended_ns"]) / 3.6e12, delta=1e-9)
            self.assertAlmostEqual(sum(hours.values()), both["total"], delta=1e-6 * both["total"])
            self.assertAlmostEqual(both["goodput"] * both["total"], hours["productive"], delta=1e-9)

            # The stored run gives the same ledger (its phases and its end are kept).
            stored = subprocess.run([GPUTRIAGE, "diagnose", "--json", "--store", os.path.join(tmp, "runs.db"), "2"],
                                    capture_output=True, text=True, timeout=120)
            self.assertEqual(stored.returncode, 0, stored.stderr)
            again = json.loads(stored.stdout)["recordings"][0]["ledger"]
            for a, b in zip(ledger["buckets"], again["buckets"]):
                self.assertEqual(a["name"], b["name"])
                self.assertEqual(a["known"], b["known"], a["name"])
                if a["known"]:
                    self.assertAlmostEqual(a["hours"], b["hours"], delta=1e-9, msg=a["name"])

    def test_explicit_phase_markers(self):
        self.crash_then_resume(zero_code=False)

    def test_zero_code_mode(self):
        self.crash_then_resume(zero_code=True)


if __name__ == "__main__":
    skips_are_skips.main()
