#!/usr/bin/env python3
"""Fetches the corpus cases that cannot be committed (their sources state no
licence) into a local cache, at the commits tests/corpus/cases.toml pins.

  fetch_cases.py CACHE_DIR [--mirror-root DIR] [--sweep-list LIST...]

With --mirror-root, each repository is read from a git mirror at
DIR/OWNER+NAME/repo (as the project's search tool leaves them); otherwise from
GitHub's raw file host, where the network allows (30 s a read, 120 s a file, 64 MiB at most).
A fetch may name an archive `member` (a .zip's file, unpacked beside it, as the user
would) or `extract = "exposition"` (the dcgm-exporter scrape shown on a Markdown page,
tests/corpus/extract_exposition.py). run_corpus.py reads the cache with --fetched
CACHE_DIR (or $GPUTRIAGE_CORPUS_CACHE). --sweep-list also brings every
OWNER/NAME@COMMIT:PATH entry of the invariant sweep's lists (tests/corpus/sweep.py).
"""
import argparse
import io
import os
import subprocess
import sys
import time
import tomllib
import urllib.request
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
MAX_BYTES = 64 << 20
TOTAL_SECONDS = 120


def mirror_git_dir(mirror_root, repo):
    """The git directory of OWNER/NAME's mirror: MIRROR_ROOT/OWNER+NAME/repo, bare or
    with a work tree (then its .git), as the project's search tool leaves them."""
    top = os.path.join(mirror_root, repo.replace("/", "+"), "repo")
    return os.path.join(top, ".git") if os.path.isdir(os.path.join(top, ".git")) else top


def from_mirror(mirror_root, fetch):
    git_dir = mirror_git_dir(mirror_root, fetch["repo"])
    if not os.path.isdir(git_dir):
        raise RuntimeError(f"no mirror at {git_dir}")
    proc = subprocess.run(["git", "--git-dir", git_dir, "show", f"{fetch['commit']}:{fetch['path']}"],
                          capture_output=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.decode(errors="replace").strip())
    return proc.stdout


def from_network(fetch):
    """The file from GitHub's raw host: 30 s for each read, 120 s in all, 64 MiB at most."""
    url = f"https://raw.githubusercontent.com/{fetch['repo']}/{fetch['commit']}/{fetch['path']}"
    deadline = time.monotonic() + TOTAL_SECONDS
    chunks, size = [], 0
    with urllib.request.urlopen(url, timeout=30) as reply:
        while chunk := reply.read(1 << 20):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_BYTES:
                raise RuntimeError(f"larger than {MAX_BYTES} bytes")
            if time.monotonic() > deadline:
                raise RuntimeError(f"not read within {TOTAL_SECONDS} s")
    return b"".join(chunks)


def write_atomically(dest, data):
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    with open(dest + ".part", "wb") as f:
        f.write(data)
    os.replace(dest + ".part", dest)


def fetched_file(cache, fetch):
    """Where the fetched file itself lies in the cache."""
    return os.path.join(cache, fetch["repo"].replace("/", "+"), fetch["commit"], fetch["path"])


def cached_path(cache, fetch):
    """What a case or the sweep reads: the fetched file, its archive member, or its extract."""
    path = fetched_file(cache, fetch)
    if "member" in fetch:
        return path + ".d/" + fetch["member"]
    if "extract" in fetch:
        return path + "." + fetch["extract"]
    return path


def parse_public_entry(entry):
    """OWNER/NAME@COMMIT:PATH as a fetch, None for anything else (a local path)."""
    if "@" not in entry or ":" not in entry.split("@", 1)[1]:
        return None
    repo, rest = entry.split("@", 1)
    commit, path = rest.split(":", 1)
    return {"repo": repo, "commit": commit, "path": path.replace("%20", " ")}  # lists are space-separated


def derived(fetch, data):
    """The bytes a case reads when it names an archive member or an extract, else None."""
    if "member" in fetch:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            info = archive.getinfo(fetch["member"])
            if info.file_size > MAX_BYTES:
                raise RuntimeError(f"{fetch['member']} is larger than {MAX_BYTES} bytes unpacked")
            return archive.read(info)
    if fetch.get("extract") == "exposition":
        proc = subprocess.run([sys.executable, os.path.join(HERE, "extract_exposition.py"), "/dev/stdin"],
                              input=data, capture_output=True, timeout=60)
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr.decode(errors="replace").strip())
        return proc.stdout
    if "extract" in fetch:
        raise RuntimeError(f"unknown extract {fetch['extract']!r}")
    return None


def fetch_one(cache, mirror_root, fetch):
    """'present' or 'fetched (N bytes)'; raises with why on failure."""
    if os.path.exists(cached_path(cache, fetch)):
        return "present"
    data = from_mirror(mirror_root, fetch) if mirror_root else from_network(fetch)
    write_atomically(fetched_file(cache, fetch), data)
    extra = derived(fetch, data)
    if extra is not None:
        write_atomically(cached_path(cache, fetch), extra)
    return f"fetched ({len(data)} bytes)"


def sweep_entries(lists):
    """The OWNER/NAME@COMMIT:PATH entries of invariant-sweep lists, as fetches."""
    for path in lists:
        with open(path, encoding="utf-8") as f:
            for line in f:
                for entry in line.split("#", 1)[0].split():
                    fetch = parse_public_entry(entry)
                    if fetch:
                        yield fetch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cache")
    ap.add_argument("--mirror-root")
    ap.add_argument("--cases", default=os.path.join(HERE, "cases.toml"))
    ap.add_argument("--sweep-list", nargs="*", default=[])
    args = ap.parse_args()
    with open(args.cases, "rb") as f:
        cases = tomllib.load(f)["case"]
    failed = 0
    for entry in sweep_entries(args.sweep_list):
        try:
            fetch_one(args.cache, args.mirror_root, entry)
        except Exception as e:  # one unreachable file must not stop the others
            print(f"failed   sweep {entry['repo']}@{entry['commit']}:{entry['path']}: {e}")
            failed += 1
    for case in cases:
        fetches = case.get("fetch")
        if not fetches:
            continue
        for fetch in fetches if isinstance(fetches, list) else [fetches]:
            try:
                print(f"{fetch_one(args.cache, args.mirror_root, fetch):8} {case['id']}: {fetch['path']}")
            except Exception as e:  # one unreachable case must not stop the others
                print(f"failed   {case['id']}: {e}")
                failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
