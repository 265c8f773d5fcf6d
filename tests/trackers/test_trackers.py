"""The trackers against the real things (issue 13): an MLflow tracking server
started here (SQLite backend, served artifacts) and TensorBoard's own event
reader, both from the pinned test environment (.venv, scripts/bootstrap.sh).

The acceptance loop (a real CPU PyTorch loop, zero-code mode) is recorded three
times under one --name, num_workers 4, 0, 4, with MLFLOW_TRACKING_URI set and
--tensorboard: the server holds each run's metric histories, verdict tags and
report artifact (read through MLflow's REST API), and the event files hold the
same values as the local store. Then the server is killed mid-run: the job
finishes on time and the run is stored locally with a warning.

    GPUTRIAGE=... GPUTRIAGE_FAKE_NVML=... .venv/bin/python test_trackers.py
"""
import json
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.util import tensor_util

GPUTRIAGE = os.environ["GPUTRIAGE"]
FAKE_NVML = os.environ["GPUTRIAGE_FAKE_NVML"]
HERE = os.path.dirname(os.path.abspath(__file__))
LOOP = os.path.join(HERE, "..", "python", "torch_training_loop.py")
MLFLOW = os.path.join(os.path.dirname(sys.executable), "mlflow")
DEBIAN_PYTHON = "/usr/bin/python3"  # the interpreter with Debian's python3-torch


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MlflowServer:
    def __init__(self, root):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(os.path.join(root, "mlflow.log"), "w")
        self.proc = subprocess.Popen(
            [MLFLOW, "server", "--backend-store-uri", f"sqlite:///{root}/mlflow.db", "--artifacts-destination",
             f"{root}/artifacts", "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True, cwd=root)
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                urllib.request.urlopen(self.url + "/health", timeout=2).read()
                return
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the MLflow server did not start; see {self.log.name}")

    def get(self, api, **query):
        url = f"{self.url}/api/2.0/{api}?{urllib.parse.urlencode(query)}"
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.load(r)

    def post(self, api, body):
        req = urllib.request.Request(f"{self.url}/api/2.0/{api}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.load(r)

    def artifact(self, experiment_id, run_id, path):
        url = f"{self.url}/api/2.0/mlflow-artifacts/artifacts/{experiment_id}/{run_id}/artifacts/{path}"
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.read()

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the server and its workers
            self.proc.wait()
        self.log.close()


def record(args, env=None, timeout=300):
    proc = subprocess.run([GPUTRIAGE, "record", *args], capture_output=True, text=True, timeout=timeout,
                          env=env or os.environ)
    return proc


class Trackers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.root = cls.tmp.name
        cls.server = MlflowServer(cls.root)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.tmp.cleanup()

    def test_1_runs_reach_mlflow_and_tensorboard_with_the_stored_values(self):
        store = os.path.join(self.root, "runs.db")
        env = dict(os.environ, MLFLOW_TRACKING_URI=self.server.url, MLFLOW_EXPERIMENT_NAME="cpu-loop-history")
        env.pop("PYTHONPATH", None)
        reports = []
        for i, workers in enumerate((4, 0, 4)):
            report_path = os.path.join(self.root, f"run{i + 1}.json")
            proc = record(["--store", store, "--name", "cpu-loop", "--python", "--json", report_path,
                           "--tensorboard", os.path.join(self.root, "tb", f"run{i + 1}"), "--tracker-interval", "1",
                           "--", DEBIAN_PYTHON, LOOP, "--workers", str(workers), "--markers", "none", "--steps", "450"],
                          env=env)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertNotIn("gputriage: warning", proc.stderr, proc.stderr)
            with open(report_path) as f:
                reports.append(json.load(f))

        # MLflow: one run per recording in the experiment, in order.
        experiment = self.server.get("mlflow/experiments/get-by-name", experiment_name="cpu-loop-history")
        experiment_id = experiment["experiment"]["experiment_id"]
        runs = self.server.post("mlflow/runs/search", {"experiment_ids": [experiment_id], "max_results": 10,
                                                       "order_by": ["attributes.start_time ASC"]})["runs"]
        self.assertEqual(len(runs), 3)
        history = json.loads(subprocess.run([GPUTRIAGE, "runs", "--name", "cpu-loop", "--json", "--store", store],
                                            capture_output=True, text=True, check=True).stdout)["runs"]
        for i, (run, report, stored) in enumerate(zip(runs, reports, history)):
            info, data = run["info"], run["data"]
            self.assertEqual(info["status"], "FINISHED")
            self.assertEqual(info["run_name"], "cpu-loop")
            tags = {t["key"]: t["value"] for t in data.get("tags", [])}
            verdicts = {f["verdict"]: f["severity"] for f in report["findings"]}
            for verdict, severity in verdicts.items():
                self.assertEqual(tags.get(f"gputriage.verdict.{verdict}"), severity, tags)
            self.assertEqual("regression" in verdicts, i == 1)
            # Metric histories: every window's point, and the summary as the store keeps it.
            steps = self.server.get("mlflow/metrics/get-history", run_id=info["run_id"],
                                    metric_key="gputriage/step_time_ms")["metrics"]
            self.assertGreaterEqual(len(steps), 2, steps)
            metrics = {m["key"]: m["value"] for m in data["metrics"]}
            for figure, value in stored["figures"].items():
                self.assertAlmostEqual(metrics[f"gputriage/summary/{figure}"], value, places=6, msg=figure)
            # The report artifact is the report gputriage printed.
            artifact = json.loads(self.server.artifact(experiment_id, info["run_id"], "gputriage/report.json"))
            self.assertEqual([f["verdict"] for f in artifact["findings"]], [f["verdict"] for f in report["findings"]])
            params = {p["key"]: p["value"] for p in data.get("params", [])}
            self.assertEqual(params.get("gputriage.dataloader.num_workers"), str((4, 0, 4)[i]))

            # TensorBoard: the same windows and the same summary, read by TensorBoard itself.
            events = EventAccumulator(os.path.join(self.root, "tb", f"run{i + 1}"),
                                      size_guidance={"scalars": 0, "tensors": 0})
            events.Reload()
            tb_steps = [(e.step, e.value) for e in events.Scalars("gputriage/step_time_ms")]
            self.assertEqual(len(tb_steps), len(steps))
            for (tb_step, tb_value), m in zip(tb_steps, sorted(steps, key=lambda m: m["timestamp"])):
                self.assertEqual(tb_step, m["step"])
                self.assertTrue(math.isclose(tb_value, m["value"], rel_tol=1e-6), (tb_value, m["value"]))
            for figure, value in stored["figures"].items():
                got = events.Scalars(f"gputriage/summary/{figure}")[-1].value
                self.assertTrue(math.isclose(got, value, rel_tol=1e-6, abs_tol=1e-6), (figure, got, value))
            text = tensor_util.make_ndarray(events.Tensors("gputriage/verdicts")[-1].tensor_proto).item().decode()
            for verdict in verdicts:
                self.assertIn(f"**{verdict}**", text)
        print(f"  3 runs in MLflow experiment {experiment_id}; run 2 tagged regression", file=sys.stderr)

    def test_2_gpu_windows_carry_the_seed_keys(self):
        # Through the fake NVML: the seed's gpu/* keys, one point per second.
        proc = record(["--no-store", "--mlflow", self.server.url, "--name", "fake-gpu", "--nvml-library", FAKE_NVML,
                       "--interval", "0.05", "--tracker-interval", "1", "--", "sleep", "3.5"])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        runs = self.server.post("mlflow/runs/search", {"experiment_ids": ["0"], "filter": "attributes.run_name = 'fake-gpu'"})
        run_id = runs["runs"][0]["info"]["run_id"]
        util = self.server.get("mlflow/metrics/get-history", run_id=run_id, metric_key="gpu/utilization_percent")["metrics"]
        self.assertGreaterEqual(len(util), 3, util)
        total = self.server.get("mlflow/metrics/get-history", run_id=run_id, metric_key="gpu/memory_total_mib")["metrics"]
        self.assertGreater(total[0]["value"], 0)

    def test_3_a_server_killed_mid_run_costs_the_job_nothing(self):
        store = os.path.join(self.root, "killed.db")
        server = MlflowServer(os.path.join(self.root))
        report_path = os.path.join(self.root, "killed.json")
        env = dict(os.environ, MLFLOW_TRACKING_URI=server.url)
        started = time.time()
        proc = subprocess.Popen([GPUTRIAGE, "record", "--store", store, "--name", "killed", "--json", report_path,
                                 "--nvml-library", FAKE_NVML, "--interval", "0.05", "--tracker-interval", "1", "--",
                                 "sh", "-c", "sleep 5; echo done"], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        time.sleep(2)
        server.stop()  # SIGKILL mid-run
        out, err = proc.communicate(timeout=60)
        elapsed = time.time() - started
        self.assertEqual(proc.returncode, 0, err)
        self.assertEqual(out.strip(), "done")
        # The job's 5 s, the recorder's start (the MLflow run made before it), and
        # at most a moment for the tracker: connections to a dead server are refused.
        self.assertLess(elapsed, 5 + 4, err)
        self.assertIn("warning", err)
        self.assertIn("MLflow", err)
        listed = json.loads(subprocess.run([GPUTRIAGE, "runs", "--json", "--store", store], capture_output=True,
                                           text=True, check=True).stdout)
        self.assertEqual([r["status"] for r in listed], ["complete"])
        with open(report_path) as f:
            kinds = [i["kind"] for i in json.load(f)["recordings"][0]["import"]["issues"]]
        self.assertIn("tracker_unavailable", kinds)
        print(f"  killed server: the record took {elapsed:.1f} s for a 5 s job", file=sys.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
