"""Checks a `gputriage record --json` report of tests/wheel/marked_loop.py: its
40 steps reached the recorder through the markers, and the 6 ms loader against
1 ms of compute is judged input-bound. Prints what it found; exits 1 otherwise.
    check_marked_loop.py REPORT.json LABEL"""
import json
import sys

report = json.load(open(sys.argv[1]))
markers = report["recordings"][0]["step_markers"]
if not markers or markers["steps"] + markers["warmup_steps"] != 40:
    sys.exit(f"FAIL: {sys.argv[2]}: not the loop's 40 steps: {markers}")
verdicts = [f["verdict"] for f in report["findings"]]
if "input_bound" not in verdicts:
    sys.exit(f"FAIL: {sys.argv[2]}: not judged input-bound: {verdicts}")
print(f"ok: {sys.argv[2]}: 40 steps from the marked loop, verdicts {verdicts}")
