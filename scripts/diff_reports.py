#!/usr/bin/env python3
"""Diagnoses every input with two builds and prints where their JSON reports differ.

  diff_reports.py OLD NEW [--inputs DIR]... [--jobs N] [--show N] [--fail-on-difference]

OLD, NEW: a gputriage binary, or a git commit (anything `git rev-parse` takes), which
is built here first (release preset, the gputriage target alone, in a worktree under
build/diff-reports/COMMIT, kept for the next run). Inputs: every file under
tests/data's traces, metrics and memory (the bundled inputs), and under each
--inputs DIR (a fetch cache, a sweep's files). Each is diagnosed as
`gputriage diagnose FILE --json --color never`, run from its directory so the
reports name it alike. A report is compared with sorted keys and the differences
are printed per input (the first --show lines of a unified diff); exit codes are
compared too.

"Byte for byte as before" is then a command: `scripts/diff_reports.py HEAD~1 HEAD`
prints `N inputs: N identical`. Exits 1 with --fail-on-difference when any differs.
"""
import argparse
import concurrent.futures
import difflib
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUNDLED = [os.path.join(ROOT, "tests", "data", d) for d in ("traces", "metrics", "memory")]
SKIPPED_SUFFIXES = (".md", ".tsv", ".txt.license", ".license")


def build(commit):
    """The gputriage binary of `commit`, built in a worktree (kept for reuse)."""
    sha = subprocess.run(["git", "-C", ROOT, "rev-parse", "--verify", commit + "^{commit}"], capture_output=True,
                         text=True, check=True).stdout.strip()
    tree = os.path.join(ROOT, "build", "diff-reports", sha[:12])
    binary = os.path.join(tree, "build", "release", "src", "cli", "gputriage")
    if os.path.exists(binary):
        return binary
    if not os.path.isdir(tree):
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", tree, sha], check=True,
                       stdout=subprocess.DEVNULL)
    # The release tree's static dependencies and web assets are the checkout's own.
    for shared in ("node_modules", os.path.join("build", "deps")):
        src, dst = os.path.join(ROOT, shared), os.path.join(tree, shared)
        if os.path.exists(src) and not os.path.exists(dst):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.symlink(src, dst)
    print(f"diff_reports: building {commit} ({sha[:12]}) in {tree}", file=sys.stderr)
    subprocess.run(["cmake", "--preset", "release"], cwd=tree, check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", "--preset", "release", "--target", "gputriage", "-j", str(os.cpu_count() or 2)],
                   cwd=tree, check=True, stdout=subprocess.DEVNULL)
    return binary


def binary_of(what):
    if os.path.isfile(what) and os.access(what, os.X_OK):
        return os.path.abspath(what)
    return build(what)


def inputs(dirs):
    out = []
    for top in dirs:
        for d, _, files in os.walk(top):
            out += [os.path.join(d, f) for f in files if not f.endswith(SKIPPED_SUFFIXES)]
    return sorted(out)


def report(binary, path):
    """(exit code, the JSON report with sorted keys, or stderr's first line)."""
    proc = subprocess.run([binary, "diagnose", os.path.basename(path), "--json", "--color", "never"],
                          cwd=os.path.dirname(path), capture_output=True, text=True, timeout=600)
    try:
        text = json.dumps(json.loads(proc.stdout), indent=1, sort_keys=True)
    except json.JSONDecodeError:
        text = (proc.stderr.strip().splitlines() or [""])[0]
    return proc.returncode, text


def compare(old, new, path):
    (old_rc, old_text), (new_rc, new_text) = report(old, path), report(new, path)
    if old_rc == new_rc and old_text == new_text:
        return None
    lines = [f"exit {old_rc} -> {new_rc}"] if old_rc != new_rc else []
    lines += list(difflib.unified_diff(old_text.splitlines(), new_text.splitlines(), "old", "new", n=1, lineterm=""))
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--inputs", action="append", default=[], help="another directory of inputs (repeatable)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--show", type=int, default=40, help="diff lines printed per input")
    ap.add_argument("--fail-on-difference", action="store_true")
    args = ap.parse_args()
    old, new = binary_of(args.old), binary_of(args.new)
    files = inputs(BUNDLED + args.inputs)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda f: (f, compare(old, new, f)), files))
    differ = [(f, d) for f, d in results if d is not None]
    for f, d in differ:
        print(f"== {os.path.relpath(f, ROOT)}: {len(d)} diff lines")
        for line in d[: args.show]:
            print(f"   {line}")
        if len(d) > args.show:
            print(f"   ... and {len(d) - args.show} more")
    print(f"diff_reports: {len(files)} inputs: {len(files) - len(differ)} identical, {len(differ)} differ "
          f"({args.old} -> {args.new})")
    return 1 if differ and args.fail_on_difference else 0


if __name__ == "__main__":
    sys.exit(main())
