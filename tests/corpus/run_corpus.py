#!/usr/bin/env python3
"""Runs gputriage on the corpus of real public cases (tests/corpus/cases.toml).

For each case: diagnose its files, then check its expectations (verdicts that must
and must not appear, the GPU count, expected gains). Prints the accuracy per failure
class and per half (calibration / held out), optionally writes docs/accuracy.md, and
exits 1 when the held-out half's accuracy is below --floor.

Usage: run_corpus.py GPUTRIAGE [--root DIR] [--fetched DIR] [--write-docs FILE]
                     [--floor 0.9] [--committed-only]
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tomllib


def held_out(case_id):
    """The fixed rule: held out when the first 8 hex digits of sha256(id) are odd."""
    return int(hashlib.sha256(case_id.encode()).hexdigest()[:8], 16) % 2 == 1


def fetched_path(fetched_dir, fetch):
    return os.path.join(fetched_dir, fetch["repo"].replace("/", "+"), fetch["commit"], fetch["path"])


def case_files(case, root, fetched_dir):
    """The case's input paths, or None (with why) when they are not here."""
    if "files" in case:
        paths = [os.path.join(root, f) for f in case["files"]]
        missing = [p for p in paths if not os.path.exists(p)]
        return (None, f"missing {missing[0]}") if missing else (paths, "")
    fetch = case["fetch"]
    path = fetched_path(fetched_dir, fetch) if fetched_dir else ""
    if not path or not os.path.exists(path):
        return None, "not redistributable; not fetched here (tests/corpus/fetch_cases.py)"
    return [path], ""


def judge(case, report):
    """The list of failed checks (empty when the case is right)."""
    verdicts = {f["verdict"] for f in report.get("findings", [])}
    failures = []
    for v in case.get("expect", []):
        if v not in verdicts:
            failures.append(f"expected {v}")
    for v in case.get("expect_not", []):
        if v in verdicts:
            failures.append(f"unexpected {v}")
    if "gpus" in case:
        gpus = sum(len(r.get("metric_devices", [])) for r in report.get("recordings", []))
        if gpus != case["gpus"]:
            failures.append(f"{gpus} GPUs where the source has {case['gpus']}")
    for v, rank in case.get("expect_rank", {}).items():
        ranks = [f.get("rank") for f in report.get("findings", []) if f["verdict"] == v]
        if ranks and rank not in ranks:
            failures.append(f"{v} names rank {ranks[0]} where the source's is rank {rank}")
    if case.get("gain_all"):
        for f in report.get("findings", []):
            gain = f.get("expected_gain") or {}
            if f.get("severity") in ("moderate", "high") and (not gain.get("range") or not gain.get("bounded_by")):
                failures.append(f"{f['verdict']} ({f['severity']}) has no expected gain with a range and what bounds it")
    for v in case.get("gain_for", []):
        for f in report.get("findings", []):
            if f["verdict"] != v:
                continue
            gain = f.get("expected_gain") or {}
            if not gain.get("range") or not gain.get("bounded_by"):
                failures.append(f"{v} has no expected gain with a range and what bounds it")
    return sorted(verdicts), failures


def run_case(binary, case, paths):
    cmd = [binary, "diagnose", *paths, "--json", *case.get("args", [])]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode not in (0, 1):
        return None, f"exit {proc.returncode}: {proc.stderr.strip()[:300]}"
    try:
        return json.loads(proc.stdout), ""
    except json.JSONDecodeError as e:
        return None, f"unreadable JSON: {e}"


def accuracy_rows(results):
    """(class, half) -> [right, total] over the cases that ran."""
    table = {}
    for r in results:
        if r["skipped"]:
            continue
        half = "held out" if r["held_out"] else "calibration"
        for cls in r["classes"] + ["all"]:
            cell = table.setdefault((cls, half), [0, 0])
            cell[0] += 1 if not r["failures"] else 0
            cell[1] += 1
    return table


def fmt_cell(cell):
    if not cell or cell[1] == 0:
        return "-"
    return f"{cell[0]}/{cell[1]} ({100.0 * cell[0] / cell[1]:.0f} %)"


def markdown(cases, results, table):
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
        "every expected verdict is found, no ruled-out verdict is, and its GPU count and expected gains "
        "(where the case names them) hold. Held out: the first 8 hex digits of sha256(case id) are odd; "
        "thresholds are set on the calibration half only.",
        "",
        f"{len(cases)} cases from {len(sources)} sources; {len(ran)} ran here "
        f"({len(results) - len(ran)} not redistributable and not fetched).",
        "",
        "| class | calibration | held out |",
        "|---|---|---|",
    ]
    for cls in classes:
        lines.append(f"| {cls} | {fmt_cell(table.get((cls, 'calibration')))} | {fmt_cell(table.get((cls, 'held out')))} |")
    lines += ["", "## Cases", "", "| case | half | classes | verdicts found | result |", "|---|---|---|---|---|"]
    for r in results:
        half = "held out" if r["held_out"] else "calibration"
        if r["skipped"]:
            result = f"not run: {r['skipped']}"
        elif r["failures"]:
            result = "wrong: " + "; ".join(r["failures"])
        else:
            result = "right"
        lines.append(f"| `{r['id']}` | {half} | {', '.join(r['classes'])} | {', '.join(r['verdicts']) or '—'} | {result} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gputriage")
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    ap.add_argument("--cases", default=os.path.join(os.path.dirname(__file__), "cases.toml"))
    ap.add_argument("--fetched", default=os.environ.get("GPUTRIAGE_CORPUS_CACHE", ""))
    ap.add_argument("--write-docs")
    ap.add_argument("--floor", type=float, default=0.0)
    ap.add_argument("--committed-only", action="store_true")
    args = ap.parse_args()

    with open(args.cases, "rb") as f:
        cases = tomllib.load(f)["case"]
    ids = [c["id"] for c in cases]
    if len(ids) != len(set(ids)):
        sys.exit("run_corpus: duplicate case ids")
    results = []
    for case in cases:
        r = {"id": case["id"], "held_out": held_out(case["id"]), "classes": case.get("classes", []),
             "verdicts": [], "failures": [], "skipped": ""}
        if args.committed_only and "files" not in case:
            r["skipped"] = "not redistributable (left out with --committed-only)"
        else:
            paths, why = case_files(case, args.root, args.fetched)
            if paths is None:
                r["skipped"] = why
            else:
                report, error = run_case(args.gputriage, case, paths)
                if report is None:
                    r["failures"] = [error]
                else:
                    r["verdicts"], r["failures"] = judge(case, report)
        results.append(r)
        mark = "skip" if r["skipped"] else ("ok  " if not r["failures"] else "FAIL")
        half = "held-out" if r["held_out"] else "calib   "
        print(f"{mark} {half} {r['id']}: {', '.join(r['verdicts']) or '-'}"
              + (f"  <- {'; '.join(r['failures'])}" if r["failures"] else "")
              + (f"  ({r['skipped']})" if r["skipped"] else ""))

    table = accuracy_rows(results)
    print()
    print(f"{'class':28} {'calibration':>16} {'held out':>16}")
    for cls in sorted({c for (c, _) in table if c != "all"}) + ["all"]:
        print(f"{cls:28} {fmt_cell(table.get((cls, 'calibration'))):>16} {fmt_cell(table.get((cls, 'held out'))):>16}")
    if args.write_docs:
        with open(args.write_docs, "w") as f:
            f.write(markdown(cases, results, table))
    held = table.get(("all", "held out"), [0, 0])
    if held[1] and held[0] / held[1] < args.floor:
        print(f"run_corpus: held-out accuracy {held[0]}/{held[1]} is below the floor {args.floor:.0%}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
