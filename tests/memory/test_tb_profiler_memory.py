"""Issue 42: a trace's memory curve and peaks against torch-tb-profiler's memory
view, computed with its own code (torch-tb-profiler 0.4.3, pinned in
tests/requirements.txt) on the same files:

- HTA's V100 trace with profile_memory (Total Allocated/Reserved on every
  [memory] event): each device's peak allocated within 1 % of tb-profiler's
  (it is the same maximum), and every point of tb-profiler's curve (its LTTB
  sample of the events) inside our decimated curve's band at that time, within 1 %;
- the ResNet-50 samples (PyTorch 1.8: [memory] events carry Bytes only):
  tb-profiler draws no curve for them (it needs Addr and the totals); ours is the
  net sum of Bytes since the trace began, marked relative.

    GPUTRIAGE=... python3 tests/memory/test_tb_profiler_memory.py DATA_DIR
"""
import bisect
import gzip
import json
import os
import subprocess
import sys
import unittest
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import skips_are_skips  # noqa: E402  (tests/python)

GPUTRIAGE = os.environ["GPUTRIAGE"]
DATA = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "data")
HTA_MEMORY = os.path.join(DATA, "traces", "hta", "memory_v100_rank1.json.gz")
RESNET = os.path.join(DATA, "traces", "kineto-resnet50-v100", "num_workers_0.pt.trace.json.gz")

try:
    from torch_tb_profiler.profiler.data import RunProfileData
    from torch_tb_profiler.profiler.run_generator import RunGenerator
    HAVE_TB_PROFILER = True
except ImportError:
    HAVE_TB_PROFILER = False


def tb_profiler_memory(path):
    """tb-profiler's memory view of a trace: {device: (peak bytes, [(t_us, allocated), ...])}."""
    with gzip.open(path, "rt") as f:
        trace = json.load(f)
    data = RunProfileData.from_json("worker", "span", trace)
    data.process()
    data.analyze()
    profile = RunGenerator("worker", "span", data).generate_run_profile()
    if profile.memory_snapshot is None:
        return {}
    view = profile.get_memory_curve(time_metric="us", memory_metric="B", patch_for_step_plot=False)
    first_us = view["metadata"]["first_ts"]
    peaks = {dev: value for (kind, index), value in profile.memory_snapshot.get_peak_memory().items()
             for dev in [("CPU" if int(kind) == 0 else f"GPU{index}")]}
    return {dev: (peaks.get(dev), [(first_us + t, allocated) for t, allocated, _ in rows])
            for dev, rows in view["rows"].items()}


def gputriage_memory(path):
    proc = subprocess.run([GPUTRIAGE, "diagnose", "--json", path], capture_output=True, text=True, timeout=300)
    if proc.returncode not in (0, 1):
        raise AssertionError(f"diagnose exited {proc.returncode}: {proc.stderr}")
    memory = json.loads(proc.stdout)["recordings"][0]["memory"]
    return {d["device"]: d for d in (memory or {}).get("devices", [])}


@unittest.skipUnless(HAVE_TB_PROFILER, "torch-tb-profiler is not installed (scripts/bootstrap.sh installs it)")
class MemoryViewAgainstTbProfiler(unittest.TestCase):
    def test_peaks_and_curve_match_on_a_trace_with_totals(self):
        theirs, ours = tb_profiler_memory(HTA_MEMORY), gputriage_memory(HTA_MEMORY)
        self.assertEqual(set(theirs), {"CPU", "GPU1"})
        self.assertEqual(set(ours), set(theirs))
        for dev, (peak, curve) in theirs.items():
            mine = ours[dev]
            self.assertFalse(mine["relative"])
            self.assertAlmostEqual(mine["peak_allocated_bytes"], peak, delta=0.01 * peak, msg=dev)
            # Our curve keeps each run of consecutive events' lowest and highest point:
            # at any time the allocated bytes lie between the band's bounds around it.
            t0_us = mine["curve"]["t0_ns"] / 1000
            t = [t0_us + ms * 1000 for ms in mine["curve"]["t_ms"]]
            allocated = mine["curve"]["allocated_bytes"]
            outside = []
            for when, value in curve:
                i = bisect.bisect_right(t, when + 1e-6)  # the points at or before it, and after
                lo, hi = max(0, i - 2), min(len(t), i + 2)
                band = allocated[lo:hi]
                if not (min(band) * 0.99 <= value <= max(band) * 1.01):
                    outside.append((when, value, band))
            self.assertEqual(outside[:3], [], f"{dev}: {len(outside)} of {len(curve)} tb-profiler points outside")
            print(f"  {dev}: peak {mine['peak_allocated_bytes']} B (tb-profiler {peak:.0f}); "
                  f"{len(curve)} tb-profiler points inside our {len(t)}-point curve", file=sys.stderr)

    def test_a_trace_without_totals_is_relative_where_tb_profiler_draws_nothing(self):
        theirs, ours = tb_profiler_memory(RESNET), gputriage_memory(RESNET)
        self.assertEqual(theirs, {})  # its records lack Addr and the totals: no curve, no peak
        self.assertIn("GPU0", ours)
        self.assertTrue(ours["GPU0"]["relative"])
        self.assertIsNone(ours["GPU0"]["peak_reserved_bytes"])
        self.assertGreater(ours["GPU0"]["peak_allocated_bytes"], 0)


if __name__ == "__main__":
    skips_are_skips.main(verbosity=2)
