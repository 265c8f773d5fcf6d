"""A training loop's shape without PyTorch (the clean systems have none): a
loader that takes 6 ms a batch and 1 ms of compute, marked through watch() and
phase(). Under `gputriage record --python` the package comes from the wheel."""
import time

import gputriage

assert gputriage.enabled(), "no recorder: run under gputriage record"


def batches():
    for _ in range(40):
        time.sleep(0.006)  # the loader: the step waits on it
        yield list(range(16))


for batch in gputriage.watch(batches()):
    with gputriage.phase("forward"):
        time.sleep(0.0005)
    with gputriage.phase("backward"):
        time.sleep(0.0005)
print("loop done")
