#!/usr/bin/env python3
"""First-sight records: gputriage's verdicts on a corpus case at the commit that adds it.

  first_sight.py record GPUTRIAGE ID... [--fetched DIR]
      Diagnoses the named cases (they must be in cases.toml and runnable here) and
      appends one line per case to first_sight.jsonl: the verdicts, the failed checks,
      right or wrong, and the git tree of src/ and include/ the rules came from.
      Refuses when src/ or include/ differ from HEAD (the rules must be a committed
      state), when the binary is older than a file under them, or when a case already
      has a record. Commit the cases and their records together, with nothing under
      src/ or include/ in that commit.

  first_sight.py check [--repo DIR]
      Verifies every record against git history: the commit that added the record
      also added its case to cases.toml, changed nothing under src/ or include/, and
      its rules are the ones the record names; no record was edited or removed since;
      and every case added since first-sight records began has a record or says why
      it is calibration (`calibration = "..."` in cases.toml). A record is held out
      only if its case's files were never run through gputriage before it: not in a
      sweep list at any earlier commit, not a committed file already in the tree, not
      named by a test, benchmark or script (SEEN_WHERE) at the commit before; a record
      of a file seen before is a violation unless its case says it is calibration.
      Uncommitted records are checked against the working tree the same way. Exits 1
      on any violation.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = "tests/corpus/cases.toml"
RECORDS = "tests/corpus/first_sight.jsonl"
RULE_DIRS = ["src", "include"]
# Where a file that gputriage ran on before its first sight is named: the sweep lists
# (run through gputriage by sweep.py), and the tests, benchmarks and scripts.
SWEEP_LISTS = ["tests/corpus/sweep_public.txt", "tests/corpus/sweep_committed.txt"]
# tests/data is left out: its recordings are binary or data, and a committed file is
# seen from the tree itself.
SEEN_WHERE = ["tests", "bench", "scripts", ":!tests/data", ":!" + CASES, ":!" + RECORDS,
              ":!tests/corpus/known_wrong.txt"]


def git(repo, *args, check=True, timeout=300):
    try:
        proc = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, errors="replace",
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"git {' '.join(args)}: no answer within {timeout} s")
    if check and proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


def rules_tree(repo, commit):
    """The trees of src/ and include/ at a commit ("WORKTREE": HEAD's, checked unchanged by the caller)."""
    if commit == "WORKTREE":
        commit = "HEAD"
    return "+".join(git(repo, "rev-parse", f"{commit}:{d}", check=False).strip() or "-" for d in RULE_DIRS)


def text_at(repo, commit, path):
    """A file's text at a commit (or in the working tree), empty where it is absent."""
    if commit == "WORKTREE":
        full = os.path.join(repo, path)
        return open(full, encoding="utf-8").read() if os.path.exists(full) else ""
    return git(repo, "show", f"{commit}:{path}", check=False)


def case_ids_at(repo, commit):
    """The cases of cases.toml by id, at a commit or in the working tree."""
    text = text_at(repo, commit, CASES)
    if not text:
        return {}
    return {c["id"]: c for c in tomllib.loads(text).get("case", [])}


def records_at(repo, commit):
    """record line text -> id, at a commit or in the working tree."""
    text = text_at(repo, commit, RECORDS)
    lines = {}
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                lines[line] = json.loads(line)["id"]
            except (json.JSONDecodeError, KeyError) as e:
                raise RuntimeError(f"{RECORDS}:{number} at {commit[:12]}: not a record: {e}")
    return lines


class ShallowClone(Exception):
    pass


def history(repo):
    """Commits that touched the records file, oldest first (first-parent history)."""
    if git(repo, "rev-parse", "--is-shallow-repository").strip() == "true":
        try:  # where the origin is reachable, within two minutes
            git(repo, "fetch", "--quiet", "--unshallow", check=False, timeout=120)
        except RuntimeError:
            pass
        if git(repo, "rev-parse", "--is-shallow-repository").strip() == "true":
            raise ShallowClone("a shallow clone whose history cannot be fetched: the records cannot be checked "
                               "against it (clone without --depth)")
    out = git(repo, "log", "--first-parent", "--reverse", "--format=%H", "--", RECORDS)
    return out.split()


def changed_rules(repo, commit):
    """Paths under src/ or include/ that the commit changed against its first parent."""
    if commit == "WORKTREE":
        out = git(repo, "status", "--porcelain", "--untracked-files=all", "--", *RULE_DIRS)
        return [line[3:] for line in out.splitlines()]
    parent = git(repo, "rev-parse", "--verify", "--quiet", f"{commit}^", check=False).strip()
    if not parent:
        return git(repo, "ls-tree", "-r", "--name-only", commit, "--", *RULE_DIRS).split()
    return git(repo, "diff", "--name-only", parent, commit, "--", *RULE_DIRS).split()


def parent_of(repo, commit):
    if commit == "WORKTREE":
        return "HEAD"
    return git(repo, "rev-parse", "--verify", "--quiet", f"{commit}^", check=False).strip()


def case_file_names(case):
    """How the case's files are named in a list or a test: committed paths, or fetched
    files as (repository, path in it)."""
    if "files" in case:
        return [(None, f) for f in case["files"]]
    fetches = case.get("fetch", [])
    return [(f["repo"], f["path"]) for f in (fetches if isinstance(fetches, list) else [fetches])]


class SeenFiles:
    """Whether a case's files were run through gputriage before a commit: listed for the
    sweep at that commit's parent or any commit before it, a committed file already in
    the parent's tree (every committed recording is swept in CI), or named by a test,
    benchmark or script there."""

    def __init__(self, repo):
        self.repo = repo
        self.worktree_cases = case_ids_at(repo, "WORKTREE")  # where a record's case may say it is calibration
        self.list_texts = {}  # commit -> the sweep lists' text there
        self.list_commits = {}  # parent -> the commits up to it that changed the sweep lists

    def lists_before(self, parent):
        if parent not in self.list_commits:
            self.list_commits[parent] = git(self.repo, "log", "--first-parent", "--format=%H", parent, "--",
                                            *SWEEP_LISTS).split()
        for c in self.list_commits[parent]:
            if c not in self.list_texts:
                self.list_texts[c] = "\n".join(text_at(self.repo, c, p) for p in SWEEP_LISTS)
        return [(c, self.list_texts[c]) for c in self.list_commits[parent]]

    def named_in_tree(self, parent, needle):
        out = git(self.repo, "grep", "-I", "-l", "-F", "-e", needle, parent, "--", *SEEN_WHERE, check=False)
        return [line.split(":", 1)[1] for line in out.splitlines() if ":" in line]

    def exists_at(self, commit, path):
        return subprocess.run(["git", "-C", self.repo, "cat-file", "-e", f"{commit}:{path}"],
                              capture_output=True).returncode == 0

    def why_seen(self, commit, case):
        """Where the case's files were seen before `commit`, or '' when never."""
        parent = parent_of(self.repo, commit)
        if not parent:
            return ""
        for repo_name, path in case_file_names(case):
            for c, text in self.lists_before(parent):
                hit = any(line.startswith(repo_name + "@") and (":" + path) in line for line in text.splitlines()) \
                    if repo_name else path in text
                if hit:
                    return f"{path} was in the sweep lists at {c[:12]}"
            if repo_name is None and self.exists_at(parent, path):
                return f"{path} was already committed at {parent[:12]} (the CI sweep runs every committed recording)"
            named = [f for f in self.named_in_tree(parent, path)
                     if repo_name is None or repo_name in text_at(self.repo, parent, f)]
            if named:
                return f"{path} was named by {named[0]} at {parent[:12]}"
        return ""


def check_commit(repo, commit, before_records, problems, seen=None):
    """The records a commit adds, and the records it changes or drops."""
    now_records = records_at(repo, commit)
    now_cases = case_ids_at(repo, commit)
    parent = parent_of(repo, commit)
    before_cases = case_ids_at(repo, parent) if parent else {}
    label = "the working tree" if commit == "WORKTREE" else commit[:12]
    for line, case_id in before_records.items():
        if line not in now_records:
            problems.append(f"{label} edits or removes the first-sight record of {case_id}")
    added = [(line, cid) for line, cid in now_records.items() if line not in before_records]
    if not added:
        return now_records
    rules = changed_rules(repo, commit)
    tree = rules_tree(repo, commit)
    for line, case_id in added:
        record = json.loads(line)
        if case_id in before_records.values():
            problems.append(f"{label} records {case_id} a second time")
        if rules:
            problems.append(f"{label} adds the first-sight record of {case_id} and changes rules ({rules[0]}"
                            f"{' and more' if len(rules) > 1 else ''})")
        if record.get("rules_tree") != tree:
            problems.append(f"{label}: the record of {case_id} names rules {record.get('rules_tree')}, "
                            f"the commit's are {tree}")
        if case_id not in now_cases or case_id in before_cases:
            problems.append(f"{label} records {case_id}, a case it does not add to cases.toml")
        elif seen is not None:
            why = seen.why_seen(commit, now_cases[case_id])
            if why and not seen.worktree_cases.get(case_id, {}).get("calibration"):
                problems.append(f"{label} records {case_id} as held out, but its file was run through gputriage "
                                f"before: {why} (a held-out case needs a file never run before; say "
                                f"`calibration = \"why\"` in its case)")
    return now_records


# What a case's answer is made of: editing one after first sight changes what "right" means.
EXPECTATION_FIELDS = ["expect", "expect_not", "expect_limitation", "expect_text", "expect_rank", "max_severity",
                      "gpus", "gain_for", "gain_all", "gain_pair"]


def expectation_edits(repo):
    """id -> the expectation fields of a recorded case that differ today from the commit
    that added its record ({} where the history cannot be read)."""
    try:
        commits = history(repo)
    except (ShallowClone, RuntimeError):
        return {}
    today = case_ids_at(repo, "WORKTREE")
    edits, before = {}, set()
    for commit in commits:
        now = set(records_at(repo, commit).values())
        added = now - before
        before = now
        if not added:
            continue
        then = case_ids_at(repo, commit)
        for case_id in added:
            old, new = then.get(case_id, {}), today.get(case_id, {})
            fields = [f for f in EXPECTATION_FIELDS if old.get(f) != new.get(f)]
            if fields and case_id in today:
                edits[case_id] = fields
    return edits


def check_unrecorded_cases(repo, first_commit, records, problems):
    """Cases added since records began: each needs a record or a stated calibration reason."""
    parent = parent_of(repo, first_commit)
    before = case_ids_at(repo, parent) if parent else {}
    recorded = set(records.values())
    for case_id, case in case_ids_at(repo, "WORKTREE").items():
        if case_id in before or case_id in recorded or case.get("calibration"):
            continue
        problems.append(f"case {case_id} was added without a first-sight record and without "
                        f"`calibration = \"why\"`")


def check(repo):
    problems = []
    commits = history(repo)
    records = {}
    seen = SeenFiles(repo)
    for commit in commits:
        records = check_commit(repo, commit, records, problems, seen)
    dirty = git(repo, "status", "--porcelain", "--", RECORDS).strip()
    if dirty:
        records = check_commit(repo, "WORKTREE", records, problems, seen)
    if commits or dirty:
        check_unrecorded_cases(repo, commits[0] if commits else "WORKTREE", records, problems)
    for p in problems:
        print(f"first_sight: {p}")
    print(f"first_sight: {len(records)} records checked over {len(commits)} commit(s)"
          f"{' and the working tree' if dirty else ''}: {'ok' if not problems else f'{len(problems)} violation(s)'}")
    return 1 if problems else 0


def newest_rule_file(repo):
    newest = 0.0
    for d in RULE_DIRS:
        for base, _, files in os.walk(os.path.join(repo, d)):
            for name in files:
                newest = max(newest, os.path.getmtime(os.path.join(base, name)))
    return newest


def record(repo, binary, ids, fetched):
    sys.path.insert(0, HERE)
    import run_corpus  # noqa: E402 (beside this script)

    if changed_rules(repo, "WORKTREE"):
        sys.exit("first_sight: src/ or include/ differ from HEAD: first sight is recorded on committed rules")
    if os.path.getmtime(binary) < newest_rule_file(repo):
        sys.exit(f"first_sight: {binary} is older than a file under src/ or include/: build it first")
    cases = {c["id"]: c for c in run_corpus.load_cases(os.path.join(repo, CASES))}
    existing = set(run_corpus.load_first_sight(os.path.join(repo, RECORDS)))
    missing = [i for i in ids if i not in cases]
    again = [i for i in ids if i in existing]
    if missing or again:
        sys.exit(f"first_sight: not in cases.toml: {missing}; recorded already: {again}")
    chosen = [cases[i] for i in ids]
    # A gain pair's fixed run is diagnosed beside it, so the pair's check can be made.
    extra = [cases[c["gain_pair"]["fixed_case"]] for c in chosen if "gain_pair" in c]
    results = run_corpus.run_cases(binary, chosen + [c for c in extra if c not in chosen], repo, fetched)
    skipped = [r["id"] for r in results if r["skipped"] and r["id"] in ids]
    if skipped:
        sys.exit(f"first_sight: cannot run {skipped} here (fetch them first: fetch_cases.py)")
    tree = rules_tree(repo, "WORKTREE")
    today = datetime.date.today().isoformat()
    with open(os.path.join(repo, RECORDS), "a", encoding="utf-8") as f:
        for r in results:
            if r["id"] not in ids:
                continue
            line = {"id": r["id"], "recorded": today, "rules_tree": tree, "right": not r["failures"],
                    "verdicts": r["verdicts"], "failures": r["failures"]}
            f.write(json.dumps(line, sort_keys=True) + "\n")
            print(f"{'right' if not r['failures'] else 'wrong'} {r['id']}: {', '.join(r['verdicts']) or '-'}"
                  + (f"  <- {'; '.join(r['failures'])}" if r["failures"] else ""))
    return 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("gputriage")
    rec.add_argument("ids", nargs="+")
    rec.add_argument("--fetched", default=os.environ.get("GPUTRIAGE_CORPUS_CACHE", ""))
    chk = sub.add_parser("check")
    chk.add_argument("--repo", default=os.path.join(HERE, "..", ".."))
    args = ap.parse_args()
    repo = os.path.abspath(os.path.join(HERE, "..", "..")) if args.command == "record" else os.path.abspath(args.repo)
    try:
        if args.command == "record":
            return record(repo, os.path.abspath(args.gputriage), args.ids, args.fetched)
        return check(repo)
    except ShallowClone as e:
        print(f"first_sight: not checked: {e}", file=sys.stderr)
        return 77  # ctest reports it skipped (SKIP_RETURN_CODE), never passed
    except RuntimeError as e:
        print(f"first_sight: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
