"""Issue 42: PyTorch allocator snapshots read as data, checked against PyTorch's
own reading of the same file:

- the public snapshot (tests/data/memory/cs336_snapshot.pickle, torch 2.x, 216
  segments, 5,163 history entries): segments, reserved bytes and bytes per block
  state equal torch.cuda._memory_viz.stats() (PyTorch's own summary, Debian's
  torch 1.13) over the segments CPython's pickle module reads; the history's
  counts by action and the curve's peak equal a plain recomputation from the
  same entries (allocated at the snapshot less the changes after each entry);
- a pickle that would run a command (GLOBAL os.system + REDUCE) is refused with
  the opcode named, exit 2, and the command never runs.

    GPUTRIAGE=... /usr/bin/python3 tests/memory/test_allocator_snapshot.py DATA_DIR
"""
import collections
import json
import os
import pickle
import subprocess
import sys
import tempfile
import unittest
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import skips_are_skips  # noqa: E402  (tests/python)

GPUTRIAGE = os.environ["GPUTRIAGE"]
DATA = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "data")
SNAPSHOT = os.path.join(DATA, "memory", "cs336_snapshot.pickle")

try:
    from torch.cuda import _memory_viz
except ImportError:
    _memory_viz = None


def diagnose(path):
    proc = subprocess.run([GPUTRIAGE, "diagnose", "--json", path], capture_output=True, text=True, timeout=120)
    return proc, (json.loads(proc.stdout) if proc.returncode in (0, 1) else None)


class AllocatorSnapshot(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(SNAPSHOT, "rb") as f:
            cls.snapshot = pickle.load(f)  # CPython's reading: a trusted file, the reference
        proc, report = diagnose(SNAPSHOT)
        if report is None:
            raise AssertionError(f"diagnose exited {proc.returncode}: {proc.stderr}")
        cls.recording = report["recordings"][0]

    @unittest.skipIf(_memory_viz is None, "PyTorch is not installed for this interpreter")
    def test_segments_and_blocks_are_pytorchs_own_summary(self):
        theirs = _memory_viz.stats(self.snapshot["segments"])
        (ours,) = self.recording["allocator_snapshot"]
        self.assertEqual(ours["segments"], theirs["segments"])
        self.assertEqual(ours["reserved_bytes"], theirs["total_size"].value)
        for state, counted in ours["blocks"].items():
            self.assertEqual(counted["bytes"], theirs[state].value, state)
        print(f"  _memory_viz.stats: {theirs}", file=sys.stderr)

    def test_history_and_its_curve_as_recomputed_from_the_entries(self):
        (ours,) = self.recording["allocator_snapshot"]
        entries = self.snapshot["device_traces"][0]
        self.assertEqual(ours["history"], dict(collections.Counter(e["action"] for e in entries)))
        segments = self.snapshot["segments"]
        self.assertEqual(ours["allocated_bytes"], sum(s["allocated_size"] for s in segments))
        changes = [e["size"] if e["action"] == "alloc" else -e["size"]
                   for e in entries if e["action"] in ("alloc", "free_completed")]
        level = ours["allocated_bytes"] - sum(changes)
        peak = 0
        for change in changes:
            level += change
            peak = max(peak, level)
        (device,) = self.recording["memory"]["devices"]
        self.assertEqual(device["peak_allocated_bytes"], peak)
        self.assertEqual(device["peak_reserved_bytes"], ours["reserved_bytes"])  # no segment was allocated in it
        print(f"  history peak {peak} B allocated; at the snapshot {ours['allocated_bytes']} B", file=sys.stderr)

    def test_the_terminal_says_the_state_and_no_empty_metric_log(self):
        text = subprocess.run([GPUTRIAGE, "diagnose", SNAPSHOT], capture_output=True, text=True, timeout=120).stdout
        self.assertIn("allocator (GPU 0): 13.2 GiB reserved in 216 segments, 1.28 GiB allocated", text)
        self.assertIn("226 inactive (11.9 GiB)", text)
        self.assertNotIn("0 samples", text)  # no metric log was read: none is described

    def test_an_oom_in_the_history_is_an_out_of_memory_finding(self):
        """Issue 54: the history's 'oom' entry (PyTorch records one when an allocation
        fails) is the job's OOM: the request, what was free, the job's own frame (the
        first Python frame outside torch, past the C++ frames), and the allocator's
        levels replayed to that moment."""
        mib = 1 << 20
        frames = [{"filename": "??", "line": 0, "name": "torch::unwind::unwind()"},
                  {"filename": "/venv/lib/python3.11/site-packages/torch/nn/functional.py", "line": 1500, "name": "relu"},
                  {"filename": "/job/train.py", "line": 88, "name": "step"}]
        snapshot = {
            "segments": [{"device": 0, "address": 0, "total_size": 1024 * mib, "allocated_size": 900 * mib,
                          "active_size": 900 * mib, "requested_size": 900 * mib, "stream": 0, "segment_type": "large",
                          "blocks": [{"size": 900 * mib, "requested_size": 900 * mib, "state": "active_allocated",
                                      "address": 0},
                                     {"size": 124 * mib, "requested_size": 0, "state": "inactive",
                                      "address": 900 * mib}]}],
            "device_traces": [[
                {"action": "segment_alloc", "addr": 0, "size": 1024 * mib, "stream": 0, "time_us": 1, "frames": []},
                {"action": "alloc", "addr": 0, "size": 600 * mib, "stream": 0, "time_us": 2, "frames": frames[1:]},
                {"action": "alloc", "addr": 600 * mib, "size": 300 * mib, "stream": 0, "time_us": 3, "frames": []},
                {"action": "oom", "addr": 0, "size": 2048 * mib, "stream": 0, "time_us": 4, "device_free": 50 * mib,
                 "frames": frames}]],
        }
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "oom.pickle")
            with open(path, "wb") as f:
                pickle.dump(snapshot, f, protocol=4)
            proc, report = diagnose(path)
        self.assertIsNotNone(report, proc.stderr)
        (oom,) = [f for f in report["findings"] if f["verdict"] == "out_of_memory"]
        self.assertEqual(oom["scope"], "cuda:0")
        self.assertEqual(oom["origin"], "snapshot")
        evidence = {e["name"]: e["value"] for e in oom["evidence"]}
        self.assertAlmostEqual(evidence["requested"], 2048)
        self.assertAlmostEqual(evidence["device_free"], 50)
        self.assertAlmostEqual(evidence["allocated"], 900)
        self.assertAlmostEqual(evidence["reserved_unallocated"], 124)
        self.assertIn("/job/train.py:88 in step", oom["detail"])

    def test_a_pickle_that_would_run_a_command_is_refused_and_runs_nothing(self):
        with tempfile.TemporaryDirectory() as tmp:
            marker = os.path.join(tmp, "ran")

            class RunsCommand:
                def __reduce__(self):
                    return (os.system, (f"touch {marker}",))

            path = os.path.join(tmp, "hostile.pickle")
            with open(path, "wb") as f:
                pickle.dump({"segments": [RunsCommand()]}, f, protocol=4)
            proc, _ = diagnose(path)
            self.assertEqual(proc.returncode, 3, proc.stderr)  # an input that cannot be read
            self.assertIn("STACK_GLOBAL", proc.stderr)
            self.assertIn("refused, not run", proc.stderr)
            self.assertFalse(os.path.exists(marker))


if __name__ == "__main__":
    skips_are_skips.main(verbosity=2)
