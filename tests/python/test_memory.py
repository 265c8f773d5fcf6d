"""Acceptance (issue 42): memory sampled at step ends in zero-code mode, on real
PyTorch CPU loops (tests/python/memory_loop.py) that know nothing of gputriage.

- A loop that keeps each step's features tensor with its graph gets
  memory_creep on the host, its growth per step within 10 % of the loop's own
  measurement (its resident set at every step's end, least squares); the same
  loop keeping `.item()` instead gets none.
- memory_headroom's fit over an experiment's runs: runs at batches 20 and 30
  (one --name, one store) predict the peak at batch 40, within 10 % of the
  peak a run at 40 then measures (the loop's own VmHWM).

    GPUTRIAGE=... GPUTRIAGE_PYTHON_PATH=... python3 test_memory.py
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

GPUTRIAGE = os.environ["GPUTRIAGE"]
LOOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "memory_loop.py")
MIB = 1024.0 * 1024.0

try:
    import torch  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


def record(tmp, tag, loop_args, store_args=("--no-store",)):
    report = os.path.join(tmp, f"{tag}.json")
    own = os.path.join(tmp, f"{tag}.own.json")
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # zero-code mode: the recorder puts the package there
    cmd = [GPUTRIAGE, "record", *store_args, "--json", report, "--python", "--", sys.executable, LOOP, "--out", own,
           *loop_args]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise AssertionError(f"record exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    with open(report) as f, open(own) as g:
        return json.load(f), json.load(g)


def findings(report, verdict):
    return [f for f in report["findings"] if f["verdict"] == verdict]


def evidence(finding, name):
    return next(e["value"] for e in finding["evidence"] if e["name"] == name)


@unittest.skipUnless(HAVE_TORCH, "python3-torch is not installed (scripts/bootstrap.sh installs it)")
class MemoryOfRealLoops(unittest.TestCase):
    def test_a_leak_is_measured_and_its_absence_is_not_called_one(self):
        with tempfile.TemporaryDirectory() as tmp:
            # Each step keeps 2 x 1024 tokens x 512 through five layers (about 20 MiB): blocks the host's
            # allocator maps fresh, so the resident set shows the leak as it happens (docs/memory.md).
            leak_loop = ["--model", "seq", "--batch", "2", "--steps", "80"]
            leaking, own = record(tmp, "leak", leak_loop + ["--leak"])
            creep = findings(leaking, "memory_creep")
            self.assertEqual(len(creep), 1, [f["title"] for f in leaking["findings"]])
            self.assertIn("host", creep[0]["title"])
            measured = evidence(creep[0], "growth_per_step") * MIB
            truth = own["growth_per_step_bytes"]
            print(f"leak: {measured / MIB:.3f} MiB per step measured by gputriage, {truth / MIB:.3f} by the loop "
                  f"({100 * (measured / truth - 1):+.1f} %)")
            self.assertLess(abs(measured / truth - 1), 0.10)
            sampled = leaking["recordings"][0]["step_memory"]["processes"][0]
            self.assertGreaterEqual(sampled["sampled_steps"], 60)
            steady, _ = record(tmp, "steady", leak_loop)
            self.assertEqual(findings(steady, "memory_creep"), [], [f["title"] for f in steady["findings"]])
            trend = steady["recordings"][0]["step_memory"]["processes"][0]["host"]["trend"]
            print(f"no leak: {trend['bytes_per_step'] / MIB:.3f} MiB per step, not a creep: {trend['why_not']}")

    def test_two_batch_sizes_predict_the_third(self):
        with tempfile.TemporaryDirectory() as tmp:
            store = ["--store", os.path.join(tmp, "runs.db"), "--name", "memory-batches"]
            loop = ["--model", "seq", "--steps", "6"]
            first, _ = record(tmp, "b20", loop + ["--batch", "20"], store)
            # One run: a lower bound on the largest batch, nothing fitted.
            single = findings(first, "memory_headroom")
            self.assertEqual(len(single), 1)
            self.assertFalse(any(e["name"].startswith("fit_") for e in single[0]["evidence"]))
            second, _ = record(tmp, "b30", loop + ["--batch", "30"], store)
            fitted = findings(second, "memory_headroom")
            self.assertEqual(len(fitted), 1)
            fixed, per_sample = evidence(fitted[0], "fit_fixed_memory"), evidence(fitted[0], "fit_memory_per_sample")
            predicted = fixed + 40 * per_sample
            third, own = record(tmp, "b40", loop + ["--batch", "40"], store)
            measured = own["peak_rss_bytes"] / MIB
            reported = third["recordings"][0]["step_memory"]["processes"][0]["host"]["rss_peak_bytes"] / MIB
            print(f"batch 40: predicted from batches 20 and 30 {predicted:.1f} MiB ({fixed:.1f} + {per_sample:.2f} "
                  f"per sample), measured {measured:.1f} MiB by the loop, {reported:.1f} MiB sampled "
                  f"({100 * (predicted / measured - 1):+.1f} %)")
            self.assertLess(abs(predicted / measured - 1), 0.10)
            # The part that grows with the batch, predicted apart from what does not.
            grown_measured = measured - (fixed + 30 * per_sample)
            self.assertLess(abs(10 * per_sample / grown_measured - 1), 0.25)
            self.assertTrue(any(e["name"] == "fit_largest_batch" for e in findings(third, "memory_headroom")[0]["evidence"]))


if __name__ == "__main__":
    unittest.main(verbosity=2)
