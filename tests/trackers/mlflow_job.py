"""A job that uses MLflow itself, as teams write them: its own experiment, its
own run, its own params and metrics. Imports nothing of gputriage.

    python mlflow_job.py EXPERIMENT SECONDS [EXIT_CODE]
"""
import sys
import time

import mlflow

experiment, seconds = sys.argv[1], float(sys.argv[2])
code = int(sys.argv[3]) if len(sys.argv) > 3 else 0
mlflow.set_experiment(experiment)
with mlflow.start_run(run_name="the-jobs-own-run"):
    mlflow.log_param("lr", 0.1)
    steps = 5
    for i in range(steps):
        mlflow.log_metric("loss", 1.0 / (i + 1), step=i)
        time.sleep(seconds / steps)
print("job done", flush=True)
sys.exit(code)
