#!/usr/bin/env python3
"""Fetches the corpus cases that cannot be committed (their sources state no
licence) into a local cache, at the commits tests/corpus/cases.toml pins.

  fetch_cases.py CACHE_DIR [--mirror-root DIR]

With --mirror-root, each repository is read from a git mirror at
DIR/OWNER+NAME/repo (as the project's search tool leaves them); otherwise from
GitHub's raw file host, where the network allows (30 s per file, 64 MiB at most).
run_corpus.py reads the cache with --fetched CACHE_DIR (or $GPUTRIAGE_CORPUS_CACHE).
"""
import argparse
import os
import subprocess
import sys
import tomllib
import urllib.request

MAX_BYTES = 64 << 20


def from_mirror(mirror_root, fetch):
    git_dir = os.path.join(mirror_root, fetch["repo"].replace("/", "+"), "repo")
    if not os.path.isdir(git_dir):
        raise RuntimeError(f"no mirror at {git_dir}")
    proc = subprocess.run(["git", "--git-dir", git_dir, "show", f"{fetch['commit']}:{fetch['path']}"],
                          capture_output=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.decode(errors="replace").strip())
    return proc.stdout


def from_network(fetch):
    url = f"https://raw.githubusercontent.com/{fetch['repo']}/{fetch['commit']}/{fetch['path']}"
    with urllib.request.urlopen(url, timeout=30) as reply:
        data = reply.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise RuntimeError(f"larger than {MAX_BYTES} bytes")
    return data


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cache")
    ap.add_argument("--mirror-root")
    ap.add_argument("--cases", default=os.path.join(os.path.dirname(__file__), "cases.toml"))
    args = ap.parse_args()
    with open(args.cases, "rb") as f:
        cases = tomllib.load(f)["case"]
    failed = 0
    for case in cases:
        fetch = case.get("fetch")
        if not fetch:
            continue
        dest = os.path.join(args.cache, fetch["repo"].replace("/", "+"), fetch["commit"], fetch["path"])
        if os.path.exists(dest):
            print(f"present  {case['id']}")
            continue
        try:
            data = from_mirror(args.mirror_root, fetch) if args.mirror_root else from_network(fetch)
        except Exception as e:  # one unreachable case must not stop the others
            print(f"failed   {case['id']}: {e}")
            failed += 1
            continue
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest + ".part", "wb") as f:
            f.write(data)
        os.replace(dest + ".part", dest)
        print(f"fetched  {case['id']} ({len(data)} bytes)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
