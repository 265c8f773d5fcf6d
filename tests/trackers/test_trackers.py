"""The trackers against the real things (issue 13): an MLflow tracking server
started here (SQLite backend, served artifacts), TensorBoard's own event
reader and the wandb SDK in offline mode, all from the pinned test environment
(.venv, scripts/bootstrap.sh).

The acceptance loop (a real CPU PyTorch loop, zero-code mode) is recorded three
times under one --name, num_workers 4, 0, 4, with MLFLOW_TRACKING_URI set and
--tensorboard: the server holds each run's metric histories, verdict tags and
report artifact (read through MLflow's REST API), and the event files hold the
same values as the local store. Then the server is killed mid-run: the job
finishes on time and the run is stored locally with a warning. A job that
logs to W&B (offline) gets the same windows in its run and the verdicts and
summary figures in its summary, read back from the run's own files with the
values of the local store.

    GPUTRIAGE=... GPUTRIAGE_FAKE_NVML=... .venv/bin/python test_trackers.py [Trackers|TrackersWithoutServer]

(ctest runs the two classes as two entries, trackers_mlflow_tensorboard and
trackers_wandb, side by side.)
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
import glob

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.util import tensor_util

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wandb_log  # noqa: E402

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
                           # A test machine running other tests beside this one can keep
                           # the server's first answers past the default 5 s.
                           "--tracker-timeout", "60",
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
            # One run per setting: the history's spread is not known, so nothing is a
            # regression and the report says so (issue 53: a single earlier run was a baseline).
            self.assertNotIn("regression", verdicts)
            if i > 0:
                self.assertTrue(any("not judged for regressions yet" in n for n in report["notes"]), report["notes"])
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
        print(f"  3 runs in MLflow experiment {experiment_id}, each with its verdicts as tags", file=sys.stderr)

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

    def test_3_a_job_that_opens_its_own_mlflow_run_keeps_it(self):
        # Issue 41: the job sets its experiment and starts its run; under --mlflow it
        # once died ("active experiment ID does not match environment run ID") and
        # left FAILED runs behind. Now it ends with its own code, its run keeps its
        # params and metrics, and gputriage's verdicts are in that run too. Issue 53:
        # and only there: gputriage made a second run of its own in the Default
        # experiment beside it, with the same figures.
        env = dict(os.environ)
        for key in ("MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME", "PYTHONPATH"):
            env.pop(key, None)
        env["MLFLOW_TRACKING_URI"] = self.server.url  # where the job logs, as it would set it itself
        job = [sys.executable, os.path.join(HERE, "mlflow_job.py"), "job-own-experiment", "2"]
        before_default = self.server.post("mlflow/runs/search", {"experiment_ids": ["0"], "max_results": 1000})
        before = len(before_default.get("runs", []))
        proc = record(["--no-store", "--python", "--mlflow", self.server.url, "--name", "gputriage-side",
                       "--nvml-library", FAKE_NVML, "--interval", "0.05", "--tracker-interval", "1",
                       "--tracker-timeout", "60", "--", *job], env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("job done", proc.stdout + proc.stderr)
        experiment = self.server.get("mlflow/experiments/get-by-name", experiment_name="job-own-experiment")
        runs = self.server.post("mlflow/runs/search", {"experiment_ids": [experiment["experiment"]["experiment_id"]]})["runs"]
        self.assertEqual(len(runs), 1, runs)
        job_run = runs[0]
        job_run_id = job_run["info"]["run_id"]
        self.assertEqual(job_run["info"]["status"], "FINISHED")  # its status is the job's
        params = {p["key"]: p["value"] for p in job_run["data"].get("params", [])}
        self.assertEqual(params.get("lr"), "0.1")
        losses = self.server.get("mlflow/metrics/get-history", run_id=job_run_id, metric_key="loss")["metrics"]
        self.assertEqual(len(losses), 5)
        tags = {t["key"]: t["value"] for t in job_run["data"].get("tags", [])}
        self.assertTrue(any(k.startswith("gputriage.verdict.") for k in tags), tags)
        self.assertEqual(tags.get("gputriage.job_exit"), "finished (exit code 0)")
        # The live windows too (one a second), and gputriage's settings under its prefix.
        util = self.server.get("mlflow/metrics/get-history", run_id=job_run_id, metric_key="gpu/utilization_percent")
        self.assertGreaterEqual(len(util["metrics"]), 1, util)
        self.assertTrue(any(k.startswith("gputriage.") for k in params), params)
        self.assertIn(f"the job's own run {job_run_id}", proc.stderr)  # the report says where the figures went
        # No second run: the Default experiment gained nothing.
        after = self.server.post("mlflow/runs/search", {"experiment_ids": ["0"], "max_results": 1000}).get("runs", [])
        self.assertEqual(len(after), before, [r["info"]["run_name"] for r in after])
        # A job that fails: its own exit code, and the report says so.
        failing = record(["--no-store", "--python", "--mlflow", self.server.url, "--nvml-library", FAKE_NVML,
                          "--interval", "0.05", "--tracker-timeout", "60", "--",
                          sys.executable, os.path.join(HERE, "mlflow_job.py"), "job-fails", "1", "3"], env=env)
        self.assertEqual(failing.returncode, 3, failing.stderr)
        self.assertIn("the job FAILED: it exited with code 3", failing.stderr)
        # Its run says FINISHED (the job's `with` block ended before its exit): in words, how the job ended.
        failed_experiment = self.server.get("mlflow/experiments/get-by-name", experiment_name="job-fails")
        failed_run = self.server.post("mlflow/runs/search",
                                      {"experiment_ids": [failed_experiment["experiment"]["experiment_id"]]})["runs"][0]
        failed_tags = {t["key"]: t["value"] for t in failed_run["data"].get("tags", [])}
        self.assertEqual(failed_tags.get("gputriage.job_exit"), "FAILED (exit code 3)", failed_tags)

    def test_9_a_server_killed_mid_run_costs_the_job_nothing(self):
        # Last: it kills the class's server (one MLflow start fewer; tearDownClass
        # finds it gone).
        store = os.path.join(self.root, "killed.db")
        server = self.server
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
        # at most a moment for the tracker: connections to a dead server are refused
        # (not its 10 s deadline; the slack is for a loaded, sanitized build).
        self.assertLess(elapsed, 5 + 6, err)
        self.assertIn("warning", err)
        self.assertIn("MLflow", err)
        listed = json.loads(subprocess.run([GPUTRIAGE, "runs", "--json", "--store", store], capture_output=True,
                                           text=True, check=True).stdout)
        self.assertEqual([r["status"] for r in listed], ["complete"])
        with open(report_path) as f:
            kinds = [i["kind"] for i in json.load(f)["recordings"][0]["import"]["issues"]]
        self.assertIn("tracker_unavailable", kinds)
        print(f"  killed server: the record took {elapsed:.1f} s for a 5 s job", file=sys.stderr)


class TrackersWithoutServer(unittest.TestCase):
    """W&B (offline) and servers of our own: no MLflow server needed, so a
    second ctest entry runs them beside the first."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.root = cls.tmp.name

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_5_a_server_that_answers_nonsense_is_a_warning(self):
        # Replies of the wrong shape (a list, a number where an object belongs,
        # numbers for strings, not JSON): a warning each, never a crash.
        import http.server
        import threading
        replies = [b"[]", b'{"run": 5}', b'{"run": {"info": {"run_id": 7}}}', b"not json", b'{"error_code": 3}']
        for body in replies:
            class Handler(http.server.BaseHTTPRequestHandler):
                def reply(self):
                    self.rfile.read(int(self.headers.get("Content-Length") or 0))
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                do_GET = do_POST = do_PUT = reply

                def log_message(self, *args):
                    pass

            server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            try:
                proc = record(["--no-store", "--mlflow", f"http://127.0.0.1:{server.server_address[1]}", "--", "true"])
            finally:
                server.shutdown()
                server.server_close()
            with self.subTest(reply=body):
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertIn("gputriage: warning: MLflow", proc.stderr)
                self.assertNotIn("runtime error", proc.stderr)

    def test_6_tracker_timeout_bounds_the_wait_for_a_server_that_never_answers(self):
        # A socket that listens and never accepts: the connection completes in the
        # kernel's backlog, the request goes out, no reply ever comes. The job
        # waits for nothing (the run opens when there is something to log); the
        # record's end waits --tracker-timeout for the run to open, then gives up.
        hung = socket.socket()
        hung.bind(("127.0.0.1", 0))
        hung.listen(16)
        closed = socket.socket()
        closed.bind(("127.0.0.1", 0))  # bound, not listening: refused at once
        try:
            started = time.monotonic()
            refused = record(["--no-store", "--mlflow", f"http://127.0.0.1:{closed.getsockname()[1]}", "--", "true"])
            baseline = time.monotonic() - started
            started = time.monotonic()
            proc = record(["--no-store", "--tracker-timeout", "1.5", "--mlflow",
                           f"http://127.0.0.1:{hung.getsockname()[1]}", "--", "true"])
            waited = time.monotonic() - started - baseline
        finally:
            hung.close()
            closed.close()
        self.assertEqual(refused.returncode, 0, refused.stderr)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("timed out", proc.stderr)
        self.assertIn("not logged to MLflow", proc.stderr)
        print(f"  hung server, --tracker-timeout 1.5: the record waited {waited:.2f} s more than against a refusing one",
              file=sys.stderr)
        self.assertGreaterEqual(waited, 1.2)
        self.assertLess(waited, 4.5)  # the default (5 s) would not fit

    def test_4_a_wandb_run_gets_the_windows_and_the_verdicts(self):
        for finish in (True, False):
            with self.subTest(run_finish=finish):
                self.check_wandb(finish)

    def check_wandb(self, finish):
        tag = "finish" if finish else "exit"
        work = os.path.join(self.root, f"wandb-{tag}")
        os.makedirs(work)
        store = os.path.join(work, "runs.db")
        report_path = os.path.join(work, "report.json")
        env = dict(os.environ, WANDB_DIR=work, WANDB_MODE="offline", WANDB_SILENT="true",
                   PYTHONPATH=os.environ["GPUTRIAGE_PYTHON_PATH"])
        env.pop("MLFLOW_TRACKING_URI", None)
        job = [sys.executable, os.path.join(HERE, "wandb_job.py"), "450", "10", "5"] + (["--finish"] if finish else [])
        proc = record(["--store", store, "--name", f"wandb-{tag}", "--json", report_path, "--tensorboard",
                       os.path.join(work, "tb"), "--tracker-interval", "1", "--nvml-library", FAKE_NVML,
                       "--interval", "0.05", "--", *job], env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertNotIn("gputriage: W&B", proc.stderr)
        with open(report_path) as f:
            report = json.load(f)
        stored = json.loads(subprocess.run([GPUTRIAGE, "runs", "--name", f"wandb-{tag}", "--json", "--store", store],
                                           capture_output=True, text=True, check=True).stdout)["runs"][0]
        rows, summary = [], {}
        (log,) = glob.glob(os.path.join(work, "wandb", "offline-run-*", "run-*.wandb"))
        for r in wandb_log.records(log):
            kind = r.WhichOneof("record_type")
            if kind == "history":
                row = {(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in r.history.item}
                if "gputriage/time_s" in row:
                    rows.append(row)
            elif kind == "summary":
                for i in r.summary.update:
                    summary[i.key or "/".join(i.nested_key)] = json.loads(i.value_json)
        # The verdicts and the summary figures, as the store keeps them.
        self.assertEqual(summary["gputriage/verdicts"],
                         ", ".join(f"{f['verdict']} ({f['severity']})" for f in report["findings"]))
        for figure, value in stored["figures"].items():
            if figure == "goodput_percent" or figure.startswith("ledger_"):
                # The job writes its W&B summary before it exits: its ledger (to the
                # exit) is not known then, and is left out rather than given early.
                self.assertNotIn(f"gputriage/summary/{figure}", summary)
                continue
            self.assertTrue(math.isclose(summary[f"gputriage/summary/{figure}"], value, rel_tol=1e-12),
                            (figure, summary.get(f"gputriage/summary/{figure}"), value))
        # Every window, as TensorBoard got it too.
        events = EventAccumulator(os.path.join(work, "tb"), size_guidance={"scalars": 0})
        events.Reload()
        for key in ("gpu/utilization_percent", "gpu/memory_total_mib", "gputriage/step_time_ms"):
            tb = events.Scalars(key)
            wb = [row[key] for row in rows if key in row]
            self.assertGreaterEqual(len(wb), 3 if key.startswith("gpu/") else 1, (key, wb))
            # The W&B windows are TensorBoard's from the first on, none lost in
            # between; only those that closed once the run was ending (the summary
            # written, W&B shutting down, the job gone) are not in the run. Step
            # windows are given 6 s after they close (steps are final 5 s after
            # their end, and each counts in the window it ended in), so the job
            # sees its last 6 s of step windows only in TensorBoard and MLflow.
            self.assertLessEqual(len(wb), len(tb), key)
            for a, b in zip(wb, tb):
                self.assertTrue(math.isclose(a, b.value, rel_tol=1e-6), (key, a, b.value))
            # GPU windows of a job that marks steps wait out the same hold (one step axis).
            late = 4 + 6
            if len(wb) < len(tb):
                self.assertGreater(tb[len(wb)].wall_time, tb[-1].wall_time - late, (key, len(wb), len(tb)))
        # Issue 41: one step axis. The GPU windows carry the job's step numbers, as
        # the step windows do (they had the window's index: 0, 1, 2, ...).
        gpu_steps = [e.step for e in events.Scalars("gpu/utilization_percent")]
        step_steps = [e.step for e in events.Scalars("gputriage/step_time_ms")]
        self.assertEqual(gpu_steps, sorted(gpu_steps))
        self.assertEqual(gpu_steps[-1], step_steps[-1], (gpu_steps, step_steps))
        self.assertGreater(gpu_steps[-1], 3 * len(gpu_steps), gpu_steps)  # ~45 steps a window, not an index
        print(f"  W&B ({tag}): {len(rows)} windows in the run, summary {summary['gputriage/verdicts']}", file=sys.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
