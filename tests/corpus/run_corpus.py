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
import re
import subprocess
import sys
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fetch_cases import cached_path  # noqa: E402 (where fetch_cases.py leaves a fetched file)
SEVERITY_ORDER = ["info", "low", "moderate", "high"]
METRIC_FORMATS = {"nvidia-smi-csv", "nvidia-smi-q", "nvidia-smi-dmon", "dcgmi-dmon", "dcgm-exporter",
                  "capture-bundle"}


# The trace classes users come for (issue 54): each reported on a line of its own,
# with the corpus classes that stand for it.
TRACE_CLASSES = {
    "input_bound": {"input_bound"}, "launch_bound": {"launch_bound"}, "undersized_work": {"undersized_work"},
    "memory_bound": {"memory_bound"}, "low_precision": {"low_precision"},
    "unfused_attention": {"unfused_attention"}, "communication_bound": {"communication_bound"},
    "straggler": {"straggler", "stragglers", "straggler_rank", "load_imbalance"},
    "at_compute_limit": {"at_compute_limit"}, "copy_bound": {"copy_bound"},
}
# Classes named after a verdict: a case in one expects a finding, so it has an `expect`.
FINDING_CLASSES = set().union(*TRACE_CLASSES.values()) - {"stragglers", "straggler"} | {
    "idle", "underutilized", "idle_phases", "throttled", "no_gpu_activity", "efficiency_unknown",
    "misaligned_shapes", "out_of_memory", "memory_fragmentation", "memory_creep", "host_saturated"}


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
    # A case in a class that is a finding expects at least one finding (issue 54).
    silent = [c["id"] for c in cases if FINDING_CLASSES & set(c.get("classes", [])) and not c.get("expect")]
    if silent:
        sys.exit(f"run_corpus: cases in a finding's class that expect no finding: {', '.join(silent)}")
    return cases


def half_of(case, first_sight):
    """released (an issue gave its answer), held out (a first-sight record of a file never
    run before), or calibration (anything else, a record of a file seen before included)."""
    if case.get("answer_given"):
        return "released"
    return "held out" if case["id"] in first_sight and not case.get("calibration") else "calibration"


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


# A fetch cache's layout (OWNER+NAME/COMMIT/..., or cut short after OWNER+NAME): whatever directory holds it on the
# machine that ran the case, messages name it <fetched>, so neither first-sight records
# nor docs/accuracy.md carry a machine's paths (older records did: shown the same way).
CACHE_PREFIX = re.compile(r"/[^\s:'\"]*?/(?=[\w.-]+\+[\w.-]*(/[0-9a-f]{40}/|$))")


def portable(text, root=""):
    """`text` without this machine's paths: the fetch cache as <fetched>/, the repository as ./."""
    if root:
        text = text.replace(os.path.abspath(root) + "/", "./")
    return CACHE_PREFIX.sub("<fetched>/", text)


def run_case(binary, case, paths, root=""):
    cmd = [binary, "diagnose", *paths, "--json", *case.get("args", [])]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return None, "gputriage took over 300 s"
    if proc.returncode not in (0, 1):
        return None, f"exit {proc.returncode}: {portable(proc.stderr.strip(), root)[:300]}"
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
                report, error = run_case(binary, case, paths, root)
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


def baseline_right(case, verdicts):
    """A trivial report's verdicts judged by the case's verdict checks alone (what it expects
    and rules out, and what the report must say it cannot tell, which no baseline says)."""
    return (all(v in verdicts for v in case.get("expect", [])) and
            not any(v in verdicts for v in case.get("expect_not", [])) and not case.get("expect_limitation"))


def baselines(cases, first_sight):
    """name -> the verdicts a trivial report gives every case: nothing, always idle, and
    always the verdict held-out cases expect most often."""
    held = [c for c in cases if half_of(c, first_sight) == "held out"]
    counts = {}
    for c in held:
        for v in c.get("expect", []):
            counts[v] = counts.get(v, 0) + 1
    out = {"empty report": set(), "always idle": {"idle"}}
    if counts:
        top = max(sorted(counts), key=counts.get)
        if top == "idle":
            out = {"empty report": set(), "always idle (the most frequent)": {"idle"}}
        else:
            out[f"always {top} (the most frequent)"] = {top}
    return out


def accuracy_rows(results, cases, first_sight, edits=None):
    """(class, column) -> [right, total]; columns: calibration, released, held out, first sight,
    and each baseline (on the held-out cases).

    A released case (`answer_given`) came with its expected answer, and gputriage's failures
    on it, stated by the issue that released it: rules were then changed for it, so it is
    not a case added after the rules it tests. Its first sight stays recorded and is
    reported on its own line, not in the held-out figures. A held-out case whose
    expectations were edited after its first sight (`edits`) is not counted as fixed:
    today it is right only if it was right at first sight."""
    edits = edits or {}
    by_id = {c["id"]: c for c in cases}
    trivial = baselines(cases, first_sight)
    table = {}

    def count(cls, column, right):
        cell = table.setdefault((cls, column), [0, 0])
        cell[0] += 1 if right else 0
        cell[1] += 1

    for r in results:
        case = by_id[r["id"]]
        half = half_of(case, first_sight)
        record = first_sight.get(r["id"])
        for cls in case_classes(case) + ["all"]:
            if half == "held out":
                count(cls, "first sight", record["right"])
                for name, verdicts in trivial.items():
                    count(cls, name, baseline_right(case, verdicts))
            if not r["skipped"]:
                right = not r["failures"]
                if half == "held out" and r["id"] in edits:
                    right = right and record["right"]
                count(cls, half, right)
    return table


def case_classes(case):
    """The case's classes, and the trace class each stands for (issue 54's lines)."""
    own = list(case.get("classes", []))
    if not is_trace(case):
        return own
    return own + [f"trace: {name}" for name, members in TRACE_CLASSES.items() if members & set(own)]


def fmt_cell(cell):
    if not cell or cell[1] == 0:
        return "-"
    return f"{cell[0]}/{cell[1]} ({100.0 * cell[0] / cell[1]:.0f} %)"


COLUMNS = ["calibration", "released", "held out", "first sight"]
TRACE_SUFFIXES = (".json", ".json.gz", ".sqlite")  # Kineto traces and Nsight Systems exports


def is_trace(case):
    files = case.get("files") or [f["path"] for f in (case["fetch"] if isinstance(case["fetch"], list)
                                                       else [case["fetch"]])]
    return any(f.endswith(TRACE_SUFFIXES) for f in files)


def baseline_columns(table):
    return sorted({col for (_, col) in table if col.startswith(("empty", "always"))})


def class_table(table, classes, columns):
    lines = ["| class | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for cls in classes:
        lines.append(f"| {cls} | " + " | ".join(fmt_cell(table.get((cls, col))) for col in columns) + " |")
    return lines


def markdown(cases, results, table, first_sight, edits):
    by_id = {c["id"]: c for c in cases}
    halves = {c["id"]: half_of(c, first_sight) for c in cases}
    trace_lines = [f"trace: {name}" for name in TRACE_CLASSES]
    classes = sorted({c for (c, _) in table if c != "all" and c not in trace_lines}) + ["all"]
    # A repository (owner/name before "@"), or "recorded here" for this project's own recordings.
    sources = {c["source"].split("@")[0] if "@" in c["source"] else c["source"].split(":")[0] for c in cases}
    ran = [r for r in results if not r["skipped"]]
    held = [i for i, h in halves.items() if h == "held out"]
    seen = [i for i in first_sight if by_id.get(i, {}).get("calibration") and halves.get(i) == "calibration"]
    trivial = baseline_columns(table)
    lines = [
        "# Accuracy on the corpus of real cases",
        "",
        "Written by `tests/corpus/run_corpus.py --write-docs docs/accuracy.md` from "
        "`tests/corpus/cases.toml`: each case is a real public recording whose expected verdicts were "
        "written from its source's own evidence before gputriage was run on it. A case is right when "
        "every expected verdict is found, no ruled-out verdict is, every file yielded data, and its GPU "
        "count, expected gains, severities, finding text and before/after pair (where the case names them) hold.",
        "",
        "**Held out** means the case has a first-sight record (`tests/corpus/first_sight.jsonl`) of a file "
        "gputriage had never run on before: gputriage's verdicts on it at the commit that added it, a "
        "commit that changed nothing under `src/` or `include/`, written by `tests/corpus/first_sight.py "
        "record` and never edited afterwards; and its file was in no sweep list at any earlier commit, not "
        "committed before, and named by no test, benchmark or script at the commit before "
        "(`first_sight.py check`, a ctest, verifies all of it against `git log`). **First sight** is the "
        "accuracy of those records: the only figure no rule was fitted to. **Held out** (today) is the "
        "same cases judged by today's rules, which may have been fitted to them after they were seen; a "
        "case whose expectations were edited after its first sight counts as right today only if it was "
        "right at first sight. Every other case is **calibration**: the cases added before 2026-12-04, "
        "any case added together with the rule that passes it, and the first-sight records of files "
        "swept or committed before their record (issue 54's audit), each of which says so in its case.",
        "",
        "The **baselines** are trivial reports judged on the held-out cases by the same verdict checks "
        "(what a case expects and rules out, and what its report must say it cannot tell): an empty "
        "report, one that always says `idle`, and one that always gives the verdict held-out cases "
        "expect most often. A figure is worth what it beats them by.",
        "",
        f"{len(cases)} cases from {len(sources)} sources; {len(ran)} ran here "
        f"({len(results) - len(ran)} not redistributable and not fetched); {len(first_sight)} first-sight "
        f"records: {len(held)} held out, {len(seen)} of files seen before (calibration), "
        f"{sum(1 for i in first_sight if halves.get(i) == 'released')} released.",
        "",
        "## The trace classes users come for",
        "",
        "Traces and Nsight Systems exports whose cause is one of these (a case counts in each class it "
        "stands for; `straggler` takes `stragglers`, `straggler_rank` and `load_imbalance`). Issue 54 "
        "asks for at least 10 held-out cases in each.",
        "",
    ]
    lines += class_table(table, trace_lines, ["first sight", *trivial, "held out", "calibration"])
    lines += ["", "## Every class", ""]
    lines += class_table(table, classes, ["calibration", "released", "held out", "first sight", *trivial])
    told = [first_sight[i] for i, h in halves.items() if h == "released" and i in first_sight]
    lines += ["", f"The {len(told)} **released** cases (`answer_given`) are the files issue 40 released with "
              f"their expected verdicts and gputriage's failures on them stated; rules were changed for "
              f"them afterwards, so they are not cases added after the rules they test, and count apart. "
              f"Their first sight, recorded before any rule changed for them: "
              f"{fmt_cell([sum(1 for r in told if r['right']), len(told)])}.",
              "", f"The {len(seen)} first-sight records of files seen before their record: "
              f"{fmt_cell([sum(1 for i in seen if first_sight[i]['right']), len(seen)])} right then; not held out."]
    if edits:
        lines += ["", "Held-out cases whose expectations changed after their first sight (not counted as fixed): "
                  + "; ".join(f"`{i}` ({', '.join(fields)})" for i, fields in sorted(edits.items())) + "."]
    lines += ["", "## First sight by batch", "",
              "Each batch is the cases whose first sight was recorded against one state of the rules (the "
              "git trees of `src/` and `include/`), in the order they were added; held out apart from the rest "
              "(files seen before their record, and released cases).", "",
              "| batch (rules' trees, first 12 hex digits each) | recorded | held out: right at first sight "
              "| not held out: right at first sight |",
              "|---|---|---|---|"]
    for tree, records in batches(first_sight):
        kept = [r for r in records if halves.get(r["id"]) == "held out"]
        other = [r for r in records if halves.get(r["id"]) != "held out"]
        short = "+".join(t[:12] for t in tree.split("+"))
        lines.append(f"| `{short}` | {records[0].get('recorded', '?')} "
                     f"| {fmt_cell([sum(1 for r in kept if r['right']), len(kept)])} "
                     f"| {fmt_cell([sum(1 for r in other if r['right']), len(other)])} |")
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
        at_first = "—" if not record else ("right" if record["right"] else "wrong: " + portable("; ".join(record["failures"])))
        half = halves[r["id"]] + (" (seen before)" if r["id"] in seen else "")
        lines.append(f"| `{r['id']}` | {half} | {', '.join(r['classes'])} | {', '.join(r['verdicts']) or '—'} "
                     f"| {today} | {at_first} |")
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


def print_results(results, table, cases, first_sight):
    halves = {c["id"]: half_of(c, first_sight) for c in cases}
    for r in results:
        mark = "skip" if r["skipped"] else ("ok  " if not r["failures"] else "FAIL")
        half = {"held out": "held-out", "released": "released"}.get(halves[r["id"]], "calib   ")
        print(f"{mark} {half} {r['id']}: {', '.join(r['verdicts']) or '-'}"
              + (f"  <- {'; '.join(r['failures'])}" if r["failures"] else "")
              + (f"  ({r['skipped']})" if r["skipped"] else ""))
    print()
    columns = COLUMNS + baseline_columns(table)
    print(f"{'class':32} " + " ".join(f"{col:>16}" for col in columns))
    for cls in sorted({c for (c, _) in table if c != "all"}) + ["all"]:
        print(f"{cls:32} " + " ".join(f"{fmt_cell(table.get((cls, col))):>16}" for col in columns))


def first_sight_module():
    sys.path.insert(0, HERE)
    import first_sight  # noqa: E402 (beside this script)
    return first_sight


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
    # Expectations edited after first sight are read from git history for the docs only
    # (ctest's run needs no history).
    edits = first_sight_module().expectation_edits(os.path.abspath(args.root)) if args.write_docs else {}
    table = accuracy_rows(results, cases, first_sight, edits)
    print_results(results, table, cases, first_sight)
    if args.write_docs:
        with open(args.write_docs, "w") as f:
            f.write(markdown(cases, results, table, first_sight, edits))
    if args.known_wrong:
        problems = check_known_wrong(results, args.known_wrong)
        for p in problems:
            print(f"run_corpus: {p}")
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
