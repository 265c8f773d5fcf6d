"""The gputriage Python package: its API on its own, and under the recorder.

    GPUTRIAGE=path/to/gputriage GPUTRIAGE_PYTHON_PATH=<build>/python python3 test_markers_api.py
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
sys.path.insert(0, PACKAGE_DIR)
import gputriage  # noqa: E402


def record(script, *record_args):
    """Runs `script` (Python source) under `gputriage record --json`; returns (report, stderr)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "job.py")
        with open(path, "w") as f:
            f.write(textwrap.dedent(script))
        report = os.path.join(tmp, "report.json")
        env = dict(os.environ, PYTHONPATH=PACKAGE_DIR)
        proc = subprocess.run([GPUTRIAGE, "record", "--no-store", "--json", report, *record_args, "--",
                               sys.executable, path], env=env, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise AssertionError(f"record failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        with open(report) as f:
            return json.load(f), proc.stderr


def issues(report):
    return {i["kind"]: i for i in report["recordings"][0]["import"]["issues"]}


class WithoutRecorder(unittest.TestCase):
    def test_markers_are_off_and_cost_nothing_but_the_check(self):
        self.assertFalse(gputriage.enabled())
        with gputriage.step(samples=4) as s:
            with gputriage.phase("forward"):
                pass
        self.assertGreaterEqual(s.number, 0)
        self.assertEqual(s.samples, 4)

    def test_steps_are_numbered_in_order_unless_given(self):
        with gputriage.step() as a:
            pass
        with gputriage.step() as b:
            pass
        with gputriage.step(step=1000) as c:
            pass
        with gputriage.step() as d:
            pass
        self.assertEqual(b.number, a.number + 1)
        self.assertEqual(c.number, 1000)
        self.assertEqual(d.number, 1001)

    def test_bad_arguments_are_clear_errors(self):
        with self.assertRaisesRegex(ValueError, "unknown phase 'loading'"):
            gputriage.phase("loading")
        with self.assertRaisesRegex(ValueError, "phase id 12 is not 1..11"):
            gputriage.phase_begin(12)
        # The job's own phases are named too (the goodput ledger's checkpoint, eval, compile, restore),
        # and the step's copies to the device.
        self.assertEqual([gputriage.PHASES[n] for n in ("checkpoint", "eval", "compile", "restore", "copy")],
                         [6, 8, 9, 10, 11])
        with self.assertRaisesRegex(TypeError, "samples must be an int"):
            gputriage.step(samples="32")
        with self.assertRaisesRegex(TypeError, "unexpected or repeated argument 'batch'"):
            gputriage.step(batch=3)
        with self.assertRaisesRegex(TypeError, "missing the step number"):
            gputriage.step_end(samples=3)
        with self.assertRaisesRegex(ValueError, "step numbers are >= 0"):
            gputriage.step(step=-2)

    def test_batch_samples(self):
        class Tensor:
            def __init__(self, *shape):
                self.shape = shape
        self.assertEqual(gputriage.batch_samples(Tensor(32, 3)), 32)
        self.assertEqual(gputriage.batch_samples((Tensor(16, 8), Tensor(16))), 16)
        self.assertEqual(gputriage.batch_samples({"input_ids": Tensor(8, 512)}), 8)
        self.assertEqual(gputriage.batch_samples([{"a": 1}, {"a": 2}, {"a": 3}]), 3)
        self.assertEqual(gputriage.batch_samples(["x", "y"]), 2)
        self.assertIsNone(gputriage.batch_samples(7))
        self.assertIsNone(gputriage.batch_samples(Tensor()))

    def test_watch_yields_everything(self):
        self.assertEqual(list(gputriage.watch(range(5))), [0, 1, 2, 3, 4])
        self.assertEqual(list(gputriage.watch([])), [])


class UnderRecorder(unittest.TestCase):
    def test_instrumented_loop(self):
        # 10 ms of data wait and 5 ms of compute per step, 20 steps of 8 samples.
        report, _ = record("""
            import time, gputriage
            assert gputriage.enabled()
            def loader():
                for i in range(20):
                    time.sleep(0.010)
                    yield list(range(8))
            for batch in gputriage.watch(loader()):
                with gputriage.step(samples=len(batch), tokens=100 * len(batch), flops=2e9):
                    with gputriage.phase("forward"):
                        time.sleep(0.005)
            """)
        m = report["recordings"][0]["step_markers"]
        self.assertEqual(m["steps"] + m["warmup_steps"], 20)
        self.assertTrue(m["phases_known"])
        self.assertAlmostEqual(m["data_wait_ms_mean"], 10, delta=4)
        self.assertAlmostEqual(m["compute_ms_mean"], 5, delta=3)
        self.assertGreater(m["tokens_per_s"], 100 * m["samples_per_s"] * 0.99)
        self.assertAlmostEqual(m["flops_per_step"], 2e9)
        self.assertIsNone(m["mfu_percent"])  # no GPU known
        self.assertIn("input_bound", [f["verdict"] for f in report["findings"]])
        self.assertIn("gpu_metrics_unavailable", issues(report))
        self.assertEqual(report["recordings"][0]["format"], "step-markers")

    def test_device_times_tell_a_hidden_wait_from_an_exposed_one(self):
        # The host waits 10 ms per batch and launches for 2 ms. Fake CUDA events
        # (complete two steps later, as a GPU running behind would) say the GPU
        # worked 12 ms per step -- the wait was spent on queued work -- or 2 ms.
        job = """
            import time, gputriage
            DEVICE_MS = {device_ms}
            class Clock: steps = 0
            class FakeEvent:
                def record(self): self.at = Clock.steps
                def query(self): return Clock.steps >= self.at + 2
                def synchronize(self): pass
                def elapsed_time(self, end): return DEVICE_MS
            timer = gputriage.time_device(timer=gputriage.CudaStepTimer(event_factory=FakeEvent))
            def loader():
                for i in range(30):
                    time.sleep(0.010)
                    yield [0] * 16
            for batch in gputriage.watch(loader()):
                Clock.steps += 1
                time.sleep(0.002)
            """
        hidden, _ = record(job.format(device_ms=12.0))
        m = hidden["recordings"][0]["step_markers"]
        self.assertEqual(m["device_steps"], m["steps"])  # polled ones and those flushed at exit
        self.assertAlmostEqual(m["device_ms_mean"], 12.0, places=3)
        self.assertGreater(m["data_wait_host_ms_mean"], 9)
        self.assertLess(m["data_wait_ms_mean"], 2)  # iteration ~12.2 ms, GPU 12 ms: little exposed
        self.assertNotIn("input_bound", [f["verdict"] for f in hidden["findings"]])
        exposed, _ = record(job.format(device_ms=2.0))
        m = exposed["recordings"][0]["step_markers"]
        self.assertGreater(m["data_wait_ms_mean"], 9)
        verdicts = {f["verdict"]: f for f in exposed["findings"]}
        self.assertIn("input_bound", verdicts)
        self.assertIn("device_ms_per_step", [e["name"] for e in verdicts["input_bound"]["evidence"]])

    def test_device_timer_times_the_phases_on_the_gpu(self):
        # Fake CUDA events read a simulated GPU clock that each phase advances:
        # forward 3 ms, backward 6 ms, optimizer 1 ms on the device, whatever the
        # host took. The report carries both timings, the host's and the GPU's.
        report, stderr = record("""
            import time, gputriage
            class Gpu: ms = 0.0; steps = 0
            class FakeEvent:
                def record(self): self.ms, self.step = Gpu.ms, Gpu.steps
                def query(self): return Gpu.steps >= self.step + 1
                def synchronize(self): pass
                def elapsed_time(self, end): return end.ms - self.ms
            gputriage.time_device(timer=gputriage.CudaStepTimer(event_factory=FakeEvent))
            for batch in gputriage.watch([[0] * 8] * 24):
                Gpu.steps += 1
                with gputriage.phase("forward"):
                    Gpu.ms += 3.0
                    time.sleep(0.001)
                with gputriage.phase("backward"):
                    Gpu.ms += 6.0
                    time.sleep(0.001)
                with gputriage.phase("optimizer"):
                    Gpu.ms += 1.0
                with gputriage.phase("eval"):  # not a step phase: not device-timed
                    Gpu.ms += 50.0
            """)
        m = report["recordings"][0]["step_markers"]
        self.assertEqual(m["phase_timing"], "host and device", stderr)
        self.assertEqual(m["phase_device_steps"], m["steps"])
        device = m["phases_device_ms_mean"]
        self.assertAlmostEqual(device["forward"], 3.0, places=3)
        self.assertAlmostEqual(device["backward"], 6.0, places=3)
        self.assertAlmostEqual(device["optimizer"], 1.0, places=3)
        self.assertEqual(device["copy"], 0.0)
        self.assertGreater(m["phases_ms_mean"]["forward"], 0.5)  # the host's own timing stays
        self.assertNotIn("device_times_unmatched", issues(report))

    def test_watch_marks_each_iteration_and_closes_the_step_a_loop_breaks_out_of(self):
        # A fresh process: automatic steps stop for good once a loop uses step().
        report, stderr = record("""
            import time, gputriage
            for batch in gputriage.watch([[0] * 4] * 3):
                time.sleep(0.002)
            for i, batch in enumerate(gputriage.watch([[0] * 2] * 5)):
                time.sleep(0.002)
                if i == 1:
                    break
            """)
        m = report["recordings"][0]["step_markers"]
        self.assertEqual(m["steps"] + m["warmup_steps"], 5, stderr)
        self.assertAlmostEqual(m["samples_per_s"] * m["step_ms_mean"] / 1e3 * m["steps"],
                               3 * 4 + 2 * 2 - (4 if m["warmup_steps"] else 0), delta=0.01)
        self.assertNotIn("markers_unpaired", issues(report))

    def test_threads_and_processes_at_once_are_neither_lost_nor_mixed(self):
        # 4 threads x 300 phases each in the main process, and 3 child
        # processes started by subprocess (which closes inherited descriptors)
        # writing 200 steps each.
        report, stderr = record("""
            import subprocess, sys, threading, gputriage
            child = "import gputriage\\nassert gputriage.enabled()\\nfor i in range(200):\\n    with gputriage.step(samples=1):\\n        pass\\n"
            procs = [subprocess.Popen([sys.executable, "-c", child]) for _ in range(3)]
            def work():
                for _ in range(300):
                    with gputriage.phase("other"):
                        pass
            threads = [threading.Thread(target=work) for _ in range(4)]
            for t in threads: t.start()
            with gputriage.step(samples=1):
                for t in threads: t.join()
            assert all(p.wait() == 0 for p in procs)
            """)
        m = report["recordings"][0]["step_markers"]
        self.assertEqual(m["processes"], 4)
        self.assertEqual(m["steps"] + m["warmup_steps"], 3 * 200 + 1)
        per_pid = sorted(p["steps"] for p in m["by_process"])
        found = issues(report)
        for kind in ("markers_lost", "markers_corrupt", "markers_unpaired", "markers_abandoned", "phases_unassigned"):
            self.assertNotIn(kind, found, stderr)
        self.assertEqual(len(per_pid), 4)

    def test_a_job_killed_mid_step_leaves_the_recorder_and_the_stored_run_intact(self):
        with tempfile.TemporaryDirectory() as tmp:
            store = os.path.join(tmp, "runs.db")
            job = ("import os, signal, time, gputriage\n"
                   "for i in range(6):\n"
                   "    with gputriage.step(samples=2):\n"
                   "        time.sleep(0.002)\n"
                   "with gputriage.step(samples=2):\n"
                   "    os.kill(os.getpid(), signal.SIGKILL)\n")
            env = dict(os.environ, PYTHONPATH=PACKAGE_DIR)
            proc = subprocess.run([GPUTRIAGE, "record", "--store", store, "--", sys.executable, "-c", job], env=env,
                                  capture_output=True, text=True, timeout=120)
            self.assertEqual(proc.returncode, 128 + 9, proc.stderr)  # the job's fate, passed on
            self.assertIn("markers_unpaired", proc.stderr)
            runs = json.loads(subprocess.run([GPUTRIAGE, "runs", "--store", store, "--json"], capture_output=True,
                                             text=True, check=True).stdout)
            self.assertEqual(len(runs), 1)
            self.assertEqual(runs[0]["status"], "complete")
            again = subprocess.run([GPUTRIAGE, "diagnose", str(runs[0]["id"]), "--store", store, "--json"],
                                   capture_output=True, text=True)
            self.assertEqual(again.returncode, 0, again.stderr)
            m = json.loads(again.stdout)["recordings"][0]["step_markers"]
            self.assertEqual(m["steps"] + m["warmup_steps"], 6)

    def test_zero_code_mode_without_torch_changes_nothing(self):
        report, stderr = record("print('no torch here')", "--python")
        self.assertNotIn("zero-code markers are off", stderr)
        self.assertIsNone(report["recordings"][0]["step_markers"])

    def test_zero_code_chains_to_the_environments_own_sitecustomize(self):
        # Issue 12, item 14: a sitecustomize that takes itself out of sys.modules
        # (as chaining tools do) made Python print "Error in sitecustomize ...
        # KeyError" on every run of a zero-code job.
        with tempfile.TemporaryDirectory() as theirs:
            ran = os.path.join(theirs, "ran")
            with open(os.path.join(theirs, "sitecustomize.py"), "w") as f:
                f.write(f"import sys\nsys.modules.pop('sitecustomize', None)\nopen({ran!r}, 'w').close()\n")
            with tempfile.TemporaryDirectory() as tmp:
                env = dict(os.environ, PYTHONPATH=theirs + os.pathsep + PACKAGE_DIR)
                proc = subprocess.run([GPUTRIAGE, "record", "--no-store", "--python", "--", sys.executable, "-c",
                                       "import sitecustomize; print(sitecustomize.__file__)"],
                                      env=env, capture_output=True, text=True, timeout=120, cwd=tmp)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertNotIn("Error in sitecustomize", proc.stderr)
            self.assertNotIn("KeyError", proc.stderr)
            self.assertTrue(os.path.exists(ran), "the environment's sitecustomize did not run")


class TimeDeviceWithoutCuda(unittest.TestCase):
    def test_warns_once_and_does_nothing(self):
        # Issue 12, item 14: time_device() raised on a machine without CUDA and
        # killed the training script.
        try:
            import torch
            if torch.cuda.is_available():
                self.skipTest("this machine has CUDA")
        except ImportError:
            pass
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.assertIsNone(gputriage.time_device())
            self.assertIsNone(gputriage.time_device())
        mine = [w for w in caught if "time_device" in str(w.message)]
        self.assertEqual(len(mine), 1, [str(w.message) for w in caught])
        with gputriage.step():  # steps go on as before
            pass


if __name__ == "__main__":
    skips_are_skips.main(verbosity=2)
