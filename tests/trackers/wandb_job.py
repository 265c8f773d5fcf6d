"""A training-loop stand-in that logs to W&B (offline) and marks its steps with
gputriage.watch(): each step waits DATA_MS for its batch and computes
COMPUTE_MS. Run under `gputriage record`; the recorder's windows and verdicts
reach this job's W&B run through the gputriage package.

    wandb_job.py STEPS DATA_MS COMPUTE_MS [--finish]
"""
import os
import sys
import time

import gputriage
import wandb


def batches(n, data_s):
    for i in range(n):
        time.sleep(data_s)  # reading and decoding
        yield [i] * 8


def main():
    steps, data_ms, compute_ms = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
    run = wandb.init(project="gputriage-test", mode="offline", dir=os.environ["WANDB_DIR"])
    for i, batch in enumerate(gputriage.watch(batches(steps, data_ms / 1e3))):
        time.sleep(compute_ms / 1e3)
        wandb.log({"loss": 1.0 / (i + 1)})
    if "--finish" in sys.argv:
        run.finish()


if __name__ == "__main__":
    main()
