#!/usr/bin/env python3
"""Tests first_sight.py check on throwaway git repositories: it passes an honest
history and fails each way a first-sight record can be made dishonest (a record added
with a rule change, a record edited afterwards, a record naming other rules, a case
added with no record and no calibration reason, a record of a case added earlier, a
held-out record of a file gputriage had run on before: swept, committed, or named by a
test)."""
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK = [sys.executable, os.path.join(HERE, "first_sight.py"), "check", "--repo"]


def git(repo, *args):
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, text=True).stdout.strip()


def write(repo, path, text, mode="w"):
    full = os.path.join(repo, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, mode) as f:
        f.write(text)


def case(case_id, calibration=None, files=None, fetch=None):
    extra = f'calibration = "{calibration}"\n' if calibration else ""
    extra += f'files = ["{files}"]\n' if files else ""
    extra += f'fetch = {{ repo = "{fetch[0]}", commit = "{"a" * 40}", path = "{fetch[1]}" }}\n' if fetch else ""
    return f'[[case]]\nid = "{case_id}"\nsource = "x/y@1:z"\nexpect = []\n{extra}\n'


def record_line(repo, case_id, right=True):
    tree = "+".join(git(repo, "rev-parse", f"HEAD:{d}") for d in ("src", "include"))
    return json.dumps({"id": case_id, "recorded": "2026-12-04", "rules_tree": tree, "right": right,
                       "verdicts": [], "failures": []}, sort_keys=True) + "\n"


def commit(repo, message):
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message)


def new_repo():
    repo = tempfile.mkdtemp(prefix="first_sight_test.")
    atexit.register(shutil.rmtree, repo, True)
    git(repo, "init", "-q")
    write(repo, "src/rules.cc", "int threshold = 50;\n")
    write(repo, "include/rules.h", "int threshold();\n")
    write(repo, "tests/corpus/cases.toml", case("old-calibration-case"))
    commit(repo, "base: a case from before first-sight records")
    write(repo, "tests/corpus/cases.toml", case("held-out-a"), "a")
    write(repo, "tests/corpus/first_sight.jsonl", record_line(repo, "held-out-a"), "a")
    commit(repo, "add held-out-a with its first-sight record")
    return repo


def run_check(repo):
    proc = subprocess.run(CHECK + [repo], capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr


def expect(name, repo, want_ok, needle=""):
    rc, out = run_check(repo)
    ok = (rc == 0) == want_ok and needle in out
    print(f"{'ok  ' if ok else 'FAIL'} {name}: rc={rc}")
    if not ok:
        print(out)
    return ok


def main():
    results = []
    repo = new_repo()
    results.append(expect("an honest history passes", repo, True))

    repo = new_repo()
    write(repo, "src/rules.cc", "int threshold = 20;\n")
    write(repo, "tests/corpus/cases.toml", case("held-out-b"), "a")
    write(repo, "tests/corpus/first_sight.jsonl", record_line(repo, "held-out-b"), "a")
    commit(repo, "throwaway: a case added with a rule change")
    results.append(expect("a record added with a rule change fails", repo, False, "changes rules (src/rules.cc)"))

    repo = new_repo()
    path = os.path.join(repo, "tests/corpus/first_sight.jsonl")
    text = open(path).read().replace('"right": true', '"right": false')
    write(repo, "tests/corpus/first_sight.jsonl", text)
    commit(repo, "throwaway: a record edited")
    results.append(expect("an edited record fails", repo, False, "edits or removes the first-sight record of held-out-a"))

    repo = new_repo()
    line = record_line(repo, "held-out-c")
    write(repo, "include/rules.h", "int threshold(int);\n")
    commit(repo, "a rule change")
    write(repo, "tests/corpus/cases.toml", case("held-out-c"), "a")
    write(repo, "tests/corpus/first_sight.jsonl", line, "a")
    commit(repo, "throwaway: a record made with the rules before the last change")
    results.append(expect("a record naming other rules fails", repo, False, "names rules"))

    repo = new_repo()
    write(repo, "tests/corpus/cases.toml", case("unrecorded"), "a")
    commit(repo, "throwaway: a case with no record")
    results.append(expect("a case added without a record fails", repo, False, "case unrecorded was added"))

    repo = new_repo()
    write(repo, "src/rules.cc", "int threshold = 30;\n")
    write(repo, "tests/corpus/cases.toml", case("calibrated", "added with the threshold it passes"), "a")
    commit(repo, "a calibration case with its rule")
    results.append(expect("a calibration case with its reason passes", repo, True))

    repo = new_repo()
    write(repo, "tests/corpus/first_sight.jsonl", record_line(repo, "old-calibration-case"), "a")
    commit(repo, "throwaway: a record of a case added earlier")
    results.append(expect("a record of an earlier case fails", repo, False, "a case it does not add"))

    repo = new_repo()
    write(repo, "src/rules.cc", "int threshold = 10;\n")
    write(repo, "tests/corpus/cases.toml", case("held-out-d"), "a")
    write(repo, "tests/corpus/first_sight.jsonl", record_line(repo, "held-out-d"), "a")
    results.append(expect("uncommitted records beside a rule change fail", repo, False, "the working tree adds"))
    # Issue 54: a file run through gputriage before its record is not held out.
    repo = new_repo()
    write(repo, "tests/corpus/sweep_public.txt", f"owner/repo@{'a' * 40}:logs/gpu.csv\n")
    commit(repo, "sweep a public file")
    write(repo, "tests/corpus/sweep_public.txt", "# the list emptied again\n")
    commit(repo, "the sweep list changes")
    write(repo, "tests/corpus/cases.toml", case("swept-before", fetch=("owner/repo", "logs/gpu.csv")), "a")
    write(repo, "tests/corpus/first_sight.jsonl", record_line(repo, "swept-before"), "a")
    commit(repo, "throwaway: a held-out record of a file swept two commits earlier")
    results.append(expect("a record of a file swept earlier fails", repo, False,
                          "logs/gpu.csv was in the sweep lists at"))
    path = os.path.join(repo, "tests/corpus/cases.toml")
    write(repo, "tests/corpus/cases.toml", open(path).read().replace(
        'id = "swept-before"\n', 'id = "swept-before"\ncalibration = "swept before its record"\n'))
    commit(repo, "the case says it is calibration")
    results.append(expect("the same record passes once its case says it is calibration", repo, True))

    repo = new_repo()
    write(repo, "tests/corpus/cases.toml", case("same-repo-other-file", fetch=("owner/repo", "logs/other.csv")), "a")
    write(repo, "tests/corpus/sweep_public.txt", f"owner/repo@{'a' * 40}:logs/gpu.csv\n")
    write(repo, "tests/corpus/first_sight.jsonl", record_line(repo, "same-repo-other-file"), "a")
    commit(repo, "a held-out record of a file never swept, beside a swept file of its repository")
    results.append(expect("another file of a swept repository is held out", repo, True))

    repo = new_repo()
    write(repo, "tests/data/metrics/log.csv", "timestamp, utilization.gpu [%]\n")
    commit(repo, "a committed recording")
    write(repo, "tests/corpus/cases.toml", case("committed-before", files="tests/data/metrics/log.csv"), "a")
    write(repo, "tests/corpus/first_sight.jsonl", record_line(repo, "committed-before"), "a")
    commit(repo, "throwaway: a held-out record of a file committed earlier")
    results.append(expect("a record of a file committed earlier fails", repo, False, "was already committed"))

    repo = new_repo()
    write(repo, "tests/metric_test.cc", 'const char* kLog = "logs/tested.csv";\n')
    commit(repo, "a test names a fetched file")
    write(repo, "tests/corpus/cases.toml", case("tested-before", fetch=("owner/repo", "logs/tested.csv")), "a")
    write(repo, "tests/corpus/first_sight.jsonl", record_line(repo, "tested-before"), "a")
    commit(repo, "throwaway: a held-out record of a file a test names")
    # The test names the path but not the repository: not the same file.
    results.append(expect("a path a test names without its repository is not that file", repo, True))
    write(repo, "tests/metric_test.cc", 'const char* kLog = "owner/repo logs/tested2.csv";\n')
    commit(repo, "a test names a fetched file with its repository")
    write(repo, "tests/corpus/cases.toml", case("tested-before-2", fetch=("owner/repo", "logs/tested2.csv")), "a")
    write(repo, "tests/corpus/first_sight.jsonl", record_line(repo, "tested-before-2"), "a")
    commit(repo, "throwaway: a held-out record of a file a test names with its repository")
    results.append(expect("a record of a file a test names fails", repo, False, "was named by tests/metric_test.cc"))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
