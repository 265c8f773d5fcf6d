#!/usr/bin/env python3
"""Runs gputriage on the corpus of real public cases (tests/corpus/cases.toml).

For each case: diagnose its files, then check its expectations (verdicts that must
and must not appear, the GPU count, expected gains, severities, text a finding must
carry, a before/after pair's realized step time) and that every file yielded data.

Halves: a case is held out when it has a first-sight record
(tests/corpus/first_sight.jsonl: gputriage's verdicts on it at the commit that added
it, a commit that changed no rule; tests/corpus/first_sight.py). Every other case is
calibration. Accuracy is printed per failure class and half, today's and, for the
held-out half, at first sight (the only figure no rule was fitted to).

With --known-wrong FILE, exits 1 when a case fails that the file does not list (a
regression), or when a listed case now passes (the list must be kept current).

Usage: run_corpus.py GPUTRIAGE [--root DIR] [--fetched DIR] [--write-docs FILE]
                     [--committed-only] [--known-wrong FILE] [--only ID...]
"""
import argparse
import json
import os
import subprocess
import sys
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fetch_cases import cached_path  # noqa: E402 (where fetch_cases.py leaves a fetched file)
SEVERITY_ORDER = ["info", "low", "moderate", "high"]
METRIC_FORMATS = {"nvidia-smi-csv", "nvidia-smi-q", "nvidia-smi-dmon", "dcgmi-dmon", "dcgm-exporter",
                  "capture-bundle"}


def load_cases(path):
    with open(path, "rb") as f:
        cases = tomllib.load(f)["case"]
    ids = [c["id"] for c in cases]
    if len(ids) != len(set(ids)):
        sys.exit("run_corpus: duplicate case ids")
    # Every case names the false positives gputriage must not give on it (issue 40).
    bare = [c["id"] for c in cases if not c.get("expect_not")]
    if bare:
        sys.exit(f"run_corpus: cases without expect_not (the false positives to rule out): {', '.join(bare)}")
    return cases


def load_first_sight(path):
    """id -> the case's first-sight record (tests/corpus/first_sight.jsonl)."""
    records = {}
    if not os.path.exists(path):
        return records
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"run_corpus: {path}:{number}: not JSON: {e}")
            records[record["id"]] = record
    return records


def case_files(case, root, fetched_dir):
    """The case's input paths, or None (with why) when they are not here."""
    if "files" in case:
        paths = [os.path.join(root, f) for f in case["files"]]
        missing = [p for p in paths if not os.path.exists(p)]
        return (None, f"missing {missing[0]}") if missing else (paths, "")
    fetches = case["fetch"] if isinstance(case["fetch"], list) else [case["fetch"]]
    paths = [cached_path(fetched_dir, f) if fetched_dir else "" for f in fetches]
    if not all(p and os.path.exists(p) for p in paths):
        return None, "not redistributable; not fetched here (tests/corpus/fetch_cases.py)"
    return paths, ""


def no_data(report):
    """A failure for each file read as empty: no events in a trace, no samples in a metric log."""
    failures = []
    for r in report.get("recordings", []):
        source = os.path.basename(r.get("source") or "?")
        if r.get("format") == "kineto" and not (r.get("import") or {}).get("events"):
            failures.append(f"no events read from {source}")
        elif r.get("format") in METRIC_FORMATS and not r.get("metric_samples"):
            failures.append(f"no samples read from {source}")
    return failures


def finding_checks(case, findings):
    """expect_text, max_severity, expect_rank, gain_all and gain_for."""
    failures = []
    for v, text in case.get("expect_text", {}).items():
        matching = [f for f in findings if f["verdict"] == v]
        if matching and not any(text in json.dumps(f) for f in matching):
            failures.append(f"{v} does not say {text!r}")
    for v, level in case.get("max_severity", {}).items():
        for f in findings:
            if f["verdict"] == v and SEVERITY_ORDER.index(f["severity"]) > SEVERITY_ORDER.index(level):
                failures.append(f"{v} at {f['severity']}, above {level}")
    for v, rank in case.get("expect_rank", {}).items():
        ranks = [f.get("rank") for f in findings if f["verdict"] == v]
        if ranks and rank not in ranks:
            failures.append(f"{v} names rank {ranks[0]} where the source's is rank {rank}")
    for f in findings:
        gain = f.get("expected_gain") or {}
        has_gain = gain.get("range") and gain.get("bounded_by")
        if has_gain:
            continue
        if case.get("gain_all") and f.get("severity") in ("moderate", "high"):
            failures.append(f"{f['verdict']} ({f['severity']}) has no expected gain with a range and what bounds it")
        elif f["verdict"] in case.get("gain_for", []):
            failures.append(f"{f['verdict']} has no expected gain with a range and what bounds it")
    return failures


def judge(case, report):
    """(the verdicts found, the list of failed checks: empty when the case is right)."""
    findings = report.get("findings", [])
    verdicts = {f["verdict"] for f in findings}
    failures = no_data(report)
    failures += [f"expected {v}" for v in case.get("expect", []) if v not in verdicts]
    failures += [f"unexpected {v}" for v in case.get("expect_not", []) if v in verdicts]
    # What the report must say it cannot tell (its recordings' limitations), e.g.
    # records the profiler dropped.
    said = [text for r in report.get("recordings", []) for text in r.get("limitations", [])]
    failures += [f"does not say it cannot tell {t!r}" for t in case.get("expect_limitation", [])
                 if not any(t in s for s in said)]
    if "gpus" in case:
        gpus = sum(len(r.get("metric_devices", [])) for r in report.get("recordings", []))
        if gpus != case["gpus"]:
            failures.append(f"{gpus} GPUs where the source has {case['gpus']}")
    failures += finding_checks(case, findings)
    return sorted(verdicts), failures


def mean_step_ms(report):
    steps = [r["avg_step_ms"] for r in report.get("recordings", []) if r.get("avg_step_ms")]
    return sum(steps) / len(steps) if steps else None


def judge_pair(case, report, fixed_report):
    """gain_pair: the fixed run's mean step time inside the range the verdict promised."""
    pair = case["gain_pair"]
    gain = next((f.get("expected_gain") for f in report.get("findings", []) if f["verdict"] == pair["verdict"]), None)
    realized = mean_step_ms(fixed_report) if fixed_report else None
    if realized is None:
        return [f"gain_pair: the fixed run {pair['fixed_case']} has no step time here"]
    if not gain or gain.get("metric") != "avg_step_ms" or not gain.get("range"):
        return [f"gain_pair: {pair['verdict']} promised no step time (the fixed run measured {realized:.2f} ms)"]
    low, high = sorted(gain["range"])
    if not low <= realized <= high:
        return [f"gain_pair: {pair['verdict']} promised {low:.2f}-{high:.2f} ms, the fixed run measured {realized:.2f} ms"]
    return []


def run_case(binary, case, paths):
    cmd = [binary, "diagnose", *paths, "--json", *case.get("args", [])]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return None, "gputriage took over 300 s"
    if proc.returncode not in (0, 1):
        return None, f"exit {proc.returncode}: {proc.stderr.strip()[:300]}"
    try:
        return json.loads(proc.stdout), ""
    except json.JSONDecodeError as e:
        return None, f"unreadable JSON: {e}"


def run_cases(binary, cases, root, fetched, committed_only=False):
    """One result per case: verdicts, failures, or why it was skipped."""
    results, reports = [], {}
    for case in cases:
        r = {"id": case["id"], "classes": case.get("classes", []), "verdicts": [], "failures": [], "skipped": ""}
        if committed_only and "files" not in case:
            r["skipped"] = "not redistributable (left out with --committed-only)"
        else:
            paths, why = case_files(case, root, fetched)
            if paths is None:
                r["skipped"] = why
            else:
                report, error = run_case(binary, case, paths)
                if report is None:
                    r["failures"] = [error]
                else:
                    reports[case["id"]] = report
                    r["verdicts"], r["failures"] = judge(case, report)
        results.append(r)
    by_id = {c["id"]: c for c in cases}
    skipped = {r["id"] for r in results if r["skipped"]}
    for r in results:
        case = by_id[r["id"]]
        # A pair is judged wherever its before run ran and its fixed run was not left
        # out here (a fixed run that failed, or is missing, fails the pair).
        if "gain_pair" in case and r["id"] in reports and case["gain_pair"]["fixed_case"] not in skipped:
            r["failures"] += judge_pair(case, reports[r["id"]], reports.get(case["gain_pair"]["fixed_case"]))
    return results


def accuracy_rows(results, first_sight, released):
    """(class, column) -> [right, total]; columns: calibration, released, held out, first sight.

    A released case (`answer_given`) came with its expected answer, and gputriage's failures
    on it, stated by the issue that released it: rules were then changed for it, so it is
    not a case added after the rules it tests. Its first sight stays recorded and is
    reported on its own line, not in the held-out figures."""
    table = {}

    def count(cls, column, right):
        cell = table.setdefault((cls, column), [0, 0])
        cell[0] += 1 if right else 0
        cell[1] += 1

    for r in results:
        record = first_sight.get(r["id"])
        is_released = r["id"] in released
        for cls in r["classes"] + ["all"]:
            if record and not is_released:
                count(cls, "first sight", record["right"])
            if not r["skipped"]:
                column = "released" if is_released else ("held out" if record else "calibration")
                count(cls, column, not r["failures"])
    return table


def fmt_cell(cell):
    if not cell or cell[1] == 0:
        return "-"
    return f"{cell[0]}/{cell[1]} ({100.0 * cell[0] / cell[1]:.0f} %)"


COLUMNS = ["calibration", "released", "held out", "first sight"]


def markdown(cases, results, table, first_sight, released):
    classes = sorted({c for (c, _) in table if c != "all"}) + ["all"]
    # A repository (owner/name before "@"), or "recorded here" for this project's own recordings.
    sources = {c["source"].split("@")[0] if "@" in c["source"] else c["source"].split(":")[0] for c in cases}
    ran = [r for r in results if not r["skipped"]]
    lines = [
        "# Accuracy on the corpus of real cases",
        "",
        "Written by `tests/corpus/run_corpus.py --write-docs docs/accuracy.md` from "
        "`tests/corpus/cases.toml`: each case is a real public recording whose expected verdicts were "
        "written from its source's own evidence before gputriage was run on it. A case is right when "
        "every expected verdict is found, no ruled-out verdict is, every file yielded data, and its GPU "
        "count, expected gains, severities, finding text and before/after pair (where the case names them) hold.",
        "",
        "**Held out** means the case has a first-sight record (`tests/corpus/first_sight.jsonl`) and "
        "its expected answer was written here from its source's evidence (not stated by an issue): "
        "gputriage's verdicts on it at the commit that added it, a commit that changed nothing under "
        "`src/` or `include/`, written by `tests/corpus/first_sight.py record` and never edited "
        "afterwards (`first_sight.py check`, a ctest, verifies both against `git log`). "
        "**First sight** is the accuracy of those records: the only figure no rule was fitted to. "
        "**Held out** (today) is the same cases judged by today's rules: rules changed after a case was "
        "seen may have been fitted to it. Every other case is **calibration**: the cases added before "
        "2026-12-04 (an audit found the earlier hash split was not held out: several cases had golden "
        "tests or thresholds fitted to them before the split existed) and any case added together with "
        "the rule that passes it.",
        "",
        f"{len(cases)} cases from {len(sources)} sources; {len(ran)} ran here "
        f"({len(results) - len(ran)} not redistributable and not fetched); {len(first_sight)} with a first-sight record.",
        "",
        "| class | calibration (today) | released (today) | held out (today) | held out at first sight |",
        "|---|---|---|---|---|",
    ]
    for cls in classes:
        lines.append(f"| {cls} | " + " | ".join(fmt_cell(table.get((cls, col))) for col in COLUMNS) + " |")
    told = [r for i, r in first_sight.items() if i in released]
    lines += ["", f"The {len(told)} **released** cases (`answer_given`) are the files issue 40 released with "
              f"their expected verdicts and gputriage's failures on them stated; rules were changed for "
              f"them afterwards, so they are not cases added after the rules they test, and count apart. "
              f"Their first sight, recorded before any rule changed for them: "
              f"{fmt_cell([sum(1 for r in told if r['right']), len(told)])}."]
    lines += ["", "## First sight by batch", "",
              "Each batch is the cases whose first sight was recorded against one state of the rules (the "
              "git trees of `src/` and `include/`), in the order they were added.", "",
              "| batch (rules' trees, first 12 hex digits each) | recorded | cases | right at first sight |",
              "|---|---|---|---|"]
    for tree, records in batches(first_sight):
        right = sum(1 for r in records if r["right"])
        short = "+".join(t[:12] for t in tree.split("+"))
        lines.append(f"| `{short}` | {records[0].get('recorded', '?')} | {len(records)} | {fmt_cell([right, len(records)])} |")
    lines += ["", "## Cases", "", "| case | half | classes | verdicts found today | today | at first sight |",
              "|---|---|---|---|---|---|"]
    for r in results:
        record = first_sight.get(r["id"])
        if r["skipped"]:
            today = f"not run: {r['skipped']}"
        elif r["failures"]:
            today = "wrong: " + "; ".join(r["failures"])
        else:
            today = "right"
        seen = "—" if not record else ("right" if record["right"] else "wrong: " + "; ".join(record["failures"]))
        half = "released" if r["id"] in released else ("held out" if record else "calibration")
        lines.append(f"| `{r['id']}` | {half} | {', '.join(r['classes'])} | {', '.join(r['verdicts']) or '—'} "
                     f"| {today} | {seen} |")
    return "\n".join(lines) + "\n"


def batches(first_sight):
    """[(rules tree, [records])] in the order the records were added."""
    out = []
    for record in first_sight.values():
        if out and out[-1][0] == record.get("rules_tree"):
            out[-1][1].append(record)
        else:
            out.append((record.get("rules_tree"), [record]))
    return out


def check_known_wrong(results, path):
    """Failures not listed (regressions) and listed cases that now pass: both fail the run."""
    listed = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            text = line.split("#", 1)[0].strip()
            if text:
                listed.add(text.split()[0])
    problems = []
    for r in results:
        if r["skipped"]:
            continue
        if r["failures"] and r["id"] not in listed:
            problems.append(f"{r['id']} is wrong and not in {os.path.basename(path)}: {'; '.join(r['failures'])}")
        if not r["failures"] and r["id"] in listed:
            problems.append(f"{r['id']} is right now: take it out of {os.path.basename(path)}")
    return problems


def print_results(results, table, first_sight):
    for r in results:
        mark = "skip" if r["skipped"] else ("ok  " if not r["failures"] else "FAIL")
        half = "held-out" if r["id"] in first_sight else "calib   "
        print(f"{mark} {half} {r['id']}: {', '.join(r['verdicts']) or '-'}"
              + (f"  <- {'; '.join(r['failures'])}" if r["failures"] else "")
              + (f"  ({r['skipped']})" if r["skipped"] else ""))
    print()
    print(f"{'class':28} " + " ".join(f"{col:>16}" for col in COLUMNS))
    for cls in sorted({c for (c, _) in table if c != "all"}) + ["all"]:
        print(f"{cls:28} " + " ".join(f"{fmt_cell(table.get((cls, col))):>16}" for col in COLUMNS))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gputriage")
    ap.add_argument("--root", default=os.path.join(HERE, "..", ".."))
    ap.add_argument("--cases", default=os.path.join(HERE, "cases.toml"))
    ap.add_argument("--first-sight", default=os.path.join(HERE, "first_sight.jsonl"))
    ap.add_argument("--fetched", default=os.environ.get("GPUTRIAGE_CORPUS_CACHE", ""))
    ap.add_argument("--write-docs")
    ap.add_argument("--committed-only", action="store_true")
    ap.add_argument("--known-wrong")
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()

    cases = load_cases(args.cases)
    if args.only:
        cases = [c for c in cases if c["id"] in args.only]
    first_sight = load_first_sight(args.first_sight)
    results = run_cases(args.gputriage, cases, args.root, args.fetched, args.committed_only)
    released = {c["id"] for c in cases if c.get("answer_given")}
    table = accuracy_rows(results, first_sight, released)
    print_results(results, table, first_sight)
    if args.write_docs:
        with open(args.write_docs, "w") as f:
            f.write(markdown(cases, results, table, first_sight, released))
    if args.known_wrong:
        problems = check_known_wrong(results, args.known_wrong)
        for p in problems:
            print(f"run_corpus: {p}")
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
