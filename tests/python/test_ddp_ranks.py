"""Acceptance (issue 41, item 1): ranks of a real distributed job. A two-rank
DistributedDataParallel loop on the CPU (gloo, Debian's python3-torch), started
by torch.multiprocessing.spawn and recorded unmodified with
`gputriage record --python`:

- rank 1's loader 30 ms slower per batch: straggler_rank names rank 1 (by rank
  number) with its data wait as the cause, never rank 0, which waits for it
  inside backward's all-reduce; the input finding says the wait is rank 1's;
- a 30 ms host stall on rank 1 after each optimizer step: rank 1 again, late
  from finishing its previous step;
- both ranks alike: no straggler;
- zero-code mode times DDP's all-reduce apart from backward (through a
  communication hook): the waiting rank's wait is its communication phase, not
  backward work; a collective called inside forward is cut out of forward alike;
- every report names the ranks (rank and world size known) in its per-rank table.

    GPUTRIAGE=... GPUTRIAGE_PYTHON_PATH=... python3 test_ddp_ranks.py
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest
import skips_are_skips  # tests/python: a skipped test is reported skipped, not passed

GPUTRIAGE = os.environ["GPUTRIAGE"]
HERE = os.path.dirname(os.path.abspath(__file__))
LOOP = os.path.join(HERE, "ddp_ranks_loop.py")

try:
    import torch  # noqa: F401
    import torch.distributed
    HAVE_GLOO = torch.distributed.is_available() and torch.distributed.is_gloo_available()
except ImportError:
    HAVE_GLOO = False


def record(*loop_args):
    """The job recorded zero-code: (report, terminal text, the ranks' own timers)."""
    with tempfile.TemporaryDirectory() as tmp:
        report_path, timings = os.path.join(tmp, "report.json"), os.path.join(tmp, "timings.json")
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)  # the script imports nothing of gputriage
        cmd = [GPUTRIAGE, "record", "--no-store", "--json", report_path, "--python", "--", sys.executable, LOOP,
               "--timings", timings] + list(loop_args)
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise AssertionError(f"{cmd} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        own = {}
        for rank in (0, 1):
            with open(f"{timings}.rank{rank}") as f:
                own[rank] = json.load(f)
        with open(report_path) as f:
            return json.load(f), proc.stdout + proc.stderr, own


def findings(report):
    return {f["verdict"]: f for f in report["findings"]}


@unittest.skipUnless(HAVE_GLOO, "python3-torch with gloo is not installed (scripts/bootstrap.sh installs it)")
class DdpRanks(unittest.TestCase):
    def check_ranks_named(self, report, own):
        m = report["recordings"][0]["step_markers"]
        self.assertIsNotNone(m)
        by_pid = {p["pid"]: p for p in m["by_process"]}
        for rank, timers in own.items():
            self.assertIn(timers["pid"], by_pid, m["by_process"])
            self.assertEqual(by_pid[timers["pid"]]["rank"], rank, by_pid[timers["pid"]])
        return m

    def test_slow_loader_rank_is_the_straggler(self):
        report, text, own = record("--slow-rank", "1", "--loader-ms", "30")
        m = self.check_ranks_named(report, own)
        self.assertTrue(m["rank_sync"]["synchronous"], m["rank_sync"])
        f = findings(report)
        self.assertIn("straggler_rank", f, json.dumps(m, indent=1))
        title = f["straggler_rank"]["title"]
        self.assertIn("rank 1 (pid", title)
        self.assertNotIn("rank 0", title)
        self.assertIn("waiting for its next batch", f["straggler_rank"]["detail"])
        late = {p["rank"]: p for p in m["by_process"]}
        print(f"  rank 1 arrives {late[1]['late_ms_p50']:.1f} ms late; rank 0 waits {late[0]['waited_ms_p50']:.1f} ms",
              file=sys.stderr)
        # The lateness is rank 1's extra data wait, as its own timer measured it (the sleep, within a few ms).
        own_wait = sorted(own[1]["data_wait"])[len(own[1]["data_wait"]) // 2] * 1e3
        self.assertAlmostEqual(late[1]["late_ms_p50"], own_wait, delta=max(5.0, 0.25 * own_wait))
        self.assertIn("input_bound", f)
        self.assertIn("on rank 1", f["input_bound"]["title"])
        self.assertIn("rank 1 (pid", text)  # the terminal's per-rank table
        self.check_wait_is_communication(late, "backward")

    def check_wait_is_communication(self, by_rank, phase):
        """Rank 0 waits for rank 1 inside `phase` (DDP's all-reduce in backward, or
        one in forward): that wait is its communication phase, and `phase` holds
        about what the late rank's does (its work, not the wait)."""
        waiting, late = by_rank[0], by_rank[1]
        comm0, comm1 = waiting["phases_ms_mean"]["communication"], late["phases_ms_mean"]["communication"]
        print(f"  communication: rank 0 {comm0:.1f} ms, rank 1 {comm1:.1f} ms; {phase}: rank 0 "
              f"{waiting['phases_ms_mean'][phase]:.1f} ms, rank 1 {late['phases_ms_mean'][phase]:.1f} ms", file=sys.stderr)
        self.assertGreaterEqual(comm0, 0.8 * waiting["waited_ms_p50"], waiting)
        self.assertLess(comm1, 0.25 * comm0, late)
        self.assertLess(waiting["phases_ms_mean"][phase], 2 * late["phases_ms_mean"][phase] + 2.0, by_rank)

    def test_the_jobs_own_comm_hook_runs_and_is_timed(self):
        steps = 30
        report, text, own = record("--slow-rank", "1", "--loader-ms", "30", "--own-comm-hook", "--steps", str(steps))
        m = self.check_ranks_named(report, own)
        for rank in (0, 1):  # one bucket per step: the job's hook ran for every one
            self.assertEqual(own[rank]["comm_hook_calls"], steps, own[rank])
        self.assertIn("rank 1 (pid", findings(report)["straggler_rank"]["title"])
        self.check_wait_is_communication({p["rank"]: p for p in m["by_process"]}, "backward")

    def test_all_reduce_in_forward_is_communication(self):
        report, text, own = record("--slow-rank", "1", "--loader-ms", "30", "--all-reduce-in-forward")
        m = self.check_ranks_named(report, own)
        f = findings(report)
        self.assertIn("straggler_rank", f, json.dumps(m, indent=1))
        self.assertIn("rank 1 (pid", f["straggler_rank"]["title"])
        self.assertNotIn("rank 0", f["straggler_rank"]["title"])
        self.check_wait_is_communication({p["rank"]: p for p in m["by_process"]}, "forward")

    def test_host_stall_rank_is_the_straggler(self):
        report, text, own = record("--slow-rank", "1", "--stall-ms", "30")
        m = self.check_ranks_named(report, own)
        f = findings(report)
        self.assertIn("straggler_rank", f, json.dumps(m, indent=1))
        self.assertIn("rank 1 (pid", f["straggler_rank"]["title"])
        self.assertNotIn("rank 0", f["straggler_rank"]["title"])
        self.assertIn("finishing its previous step late", f["straggler_rank"]["detail"])

    def test_balanced_ranks_name_no_straggler(self):
        report, text, own = record()
        self.check_ranks_named(report, own)
        self.assertNotIn("straggler_rank", findings(report))


if __name__ == "__main__":
    skips_are_skips.main()
