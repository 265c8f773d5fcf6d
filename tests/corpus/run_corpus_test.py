#!/usr/bin/env python3
"""The corpus's checks fail when they should: a before/after pair outside the
promised range, a file read as empty, a finding above its allowed severity or
without the text it must carry, a moderate finding without a bounded gain."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_corpus as rc  # noqa: E402


def report(findings=(), recordings=None):
    return {"findings": list(findings),
            "recordings": recordings if recordings is not None else [{"format": "kineto", "import": {"events": 10}}]}


class Judge(unittest.TestCase):
    def test_a_fixed_run_outside_the_promised_range_fails_the_pair(self):
        case = {"gain_pair": {"verdict": "input_bound", "fixed_case": "fixed"}}
        before = report([{"verdict": "input_bound", "expected_gain": {"metric": "avg_step_ms", "range": [114.2, 147.9]}}])
        self.assertEqual(rc.judge_pair(case, before, {"recordings": [{"avg_step_ms": 141.1}]}), [])
        self.assertTrue(rc.judge_pair(case, before, {"recordings": [{"avg_step_ms": 177.6}]}))
        self.assertTrue(rc.judge_pair(case, report(), {"recordings": [{"avg_step_ms": 141.1}]}))  # nothing promised
        self.assertTrue(rc.judge_pair(case, before, None))  # no fixed run

    def test_a_file_read_as_empty_fails_whatever_else_holds(self):
        empty_log = report(recordings=[{"format": "nvidia-smi-csv", "metric_samples": 0, "source": "/x/gpu.csv"}])
        self.assertEqual(rc.judge({"expect": []}, empty_log)[1], ["no samples read from gpu.csv"])
        empty_trace = report(recordings=[{"format": "kineto", "import": {"events": 0}, "source": "t.json"}])
        self.assertEqual(rc.judge({}, empty_trace)[1], ["no events read from t.json"])

    def test_severity_text_and_gain_checks(self):
        f = {"verdict": "low_precision", "severity": "high", "scope": "GPU 0", "expected_gain": None}
        _, failures = rc.judge({"max_severity": {"low_precision": "low"}, "gain_all": True,
                                "expect_text": {"low_precision": "pod default/x"}}, report([f]))
        self.assertEqual(len(failures), 3, failures)
        ok = dict(f, severity="low", scope="GPU 0, pod default/x",
                  expected_gain={"range": [1, 2], "bounded_by": "host_work"})
        self.assertEqual(rc.judge({"max_severity": {"low_precision": "low"}, "gain_all": True,
                                   "expect_text": {"low_precision": "pod default/x"}}, report([ok]))[1], [])

    def test_known_wrong_lists_both_ways(self):
        results = [{"id": "a", "failures": ["x"], "skipped": ""}, {"id": "b", "failures": [], "skipped": ""}]
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"known_wrong_test_{os.getpid()}.txt")
        with open(path, "w") as f:
            f.write("b  # listed but right now\n")
        try:
            problems = rc.check_known_wrong(results, path)
        finally:
            os.remove(path)
        self.assertEqual(len(problems), 2, problems)


class PortableMessages(unittest.TestCase):
    def test_no_machine_path_is_kept(self):
        text = ("exit 3: gputriage: error: /work/corpus-cache/owner+repo/" + "a" * 40 + "/logs/gpu.log:1: no header; "
                "/tmp/x/tests/data/t.csv")
        self.assertEqual(rc.portable("first problem: /tmp/corpus_cache/daspronoy+zetas"),
                         "first problem: <fetched>/daspronoy+zetas")  # a message cut short
        self.assertEqual(rc.portable(text, "/tmp/x"),
                         "exit 3: gputriage: error: <fetched>/owner+repo/" + "a" * 40 + "/logs/gpu.log:1: no header; "
                         "./tests/data/t.csv")


class Halves(unittest.TestCase):
    """Issue 54: a record of a file seen before is calibration; baselines are judged on
    held-out cases; an expectation edited after first sight does not count as fixed."""

    def setUp(self):
        self.cases = [
            {"id": "held", "classes": ["input_bound"], "expect": ["input_bound"], "expect_not": ["idle"],
             "files": ["t.json.gz"]},
            {"id": "seen", "classes": ["idle"], "expect": ["idle"], "expect_not": ["at_compute_limit"],
             "calibration": "swept before its record", "files": ["s.csv"]},
            {"id": "quiet", "classes": ["idle"], "expect": ["idle"], "expect_not": ["input_bound"],
             "files": ["q.csv"]},
        ]
        self.first_sight = {"held": {"right": False}, "seen": {"right": True}, "quiet": {"right": True}}

    def test_a_record_of_a_file_seen_before_is_calibration(self):
        self.assertEqual(rc.half_of(self.cases[0], self.first_sight), "held out")
        self.assertEqual(rc.half_of(self.cases[1], self.first_sight), "calibration")

    def test_baselines_and_edits(self):
        results = [{"id": c["id"], "failures": [], "skipped": "", "verdicts": [], "classes": c["classes"]}
                   for c in self.cases]
        table = rc.accuracy_rows(results, self.cases, self.first_sight, edits={"held": ["expect"]})
        self.assertEqual(table[("all", "first sight")], [1, 2])  # held (wrong) and quiet (right); seen is not held out
        self.assertEqual(table[("all", "held out")], [1, 2])  # held is right today, but was edited after a wrong first sight
        self.assertEqual(table[("all", "calibration")], [1, 1])
        # "always idle" is also the most frequent expected verdict here: one baseline, named so.
        self.assertEqual(table[("all", "always idle (the most frequent)")], [1, 2])
        self.assertEqual(table[("all", "empty report")], [0, 2])
        self.assertEqual(table[("trace: input_bound", "first sight")], [0, 1])  # a trace file: its trace class line

    def test_a_case_in_a_verdicts_class_must_expect_a_finding(self):
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"cases_test_{os.getpid()}.toml")
        with open(path, "w") as f:
            f.write('[[case]]\nid = "x"\nsource = "a/b@1:c"\nclasses = ["memory_bound"]\nexpect = []\n'
                    'expect_not = ["idle"]\nfiles = ["c"]\n')
        try:
            with self.assertRaises(SystemExit) as e:
                rc.load_cases(path)
        finally:
            os.remove(path)
        self.assertIn("expect no finding: x", str(e.exception))


if __name__ == "__main__":
    unittest.main()
