#!/usr/bin/env python3
"""Lists the GPU recordings in local git mirrors of public repositories, for the
invariant sweep (tests/corpus/sweep.py).

  mine_sweep.py MIRROR_ROOT OWNER/NAME[@COMMIT]... > more.txt

Each repository is read at its mirror's HEAD, or at COMMIT where given (a file
since deleted) (MIRROR_ROOT/OWNER+NAME/repo, as the
project's search tool leaves them). A file is listed when its first bytes show a
format gputriage reads: a Kineto trace ("traceEvents" with a kernel or cpu_op
category), an nvidia-smi query CSV, -q report, default table or dmon log, dcgmi dmon output or a
dcgm-exporter scrape. One entry a line, OWNER/NAME@COMMIT:PATH; a trace directory's
rank files (rank*, worker*) are one run on one line.
"""
import gzip
import os
import re
import subprocess
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fetch_cases  # noqa: E402

MAX_BYTES = 64 << 20
HEAD_BYTES = 256 << 10
SUFFIXES = (".json", ".json.gz", ".csv", ".txt", ".log", ".prom", ".out")
METRIC_MARKERS = (b"utilization.gpu", b"DCGM_FI_", b"dcgm_gpu_utilization", b"==============NVSMI LOG",
                  b"# gpu ", b"#Entity", b"GPUTL", b"gpu_utilization", b"gpu_util", b"power.draw [W]",
                  b"memory.used [MiB]", b"temperature.gpu", b"| NVIDIA-SMI ")
RANK = re.compile(r"(rank|worker)[-_]?(\d+)", re.IGNORECASE)


def git(git_dir, *args):
    return subprocess.run(["git", "--git-dir", git_dir, *args], capture_output=True, timeout=300).stdout


def head_of(git_dir, blob, gzipped):
    """The file's first HEAD_BYTES, inflated where it is gzip."""
    proc = subprocess.Popen(["git", "--git-dir", git_dir, "cat-file", "blob", blob], stdout=subprocess.PIPE)
    data = proc.stdout.read(HEAD_BYTES if not gzipped else 4 << 20)
    proc.kill()
    proc.wait()
    if gzipped:
        try:
            return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data, HEAD_BYTES)
        except zlib.error:
            return b""
    return data


def kind_of(head):
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):  # UTF-16 (PowerShell's redirection of nvidia-smi)
        head = head.decode("utf-16", errors="replace").encode()
    if b'"traceEvents"' in head and (b'"cat": "kernel"' in head or b'"cat":"kernel"' in head or b'"cpu_op"' in head
                                     or b'"ProfilerStep#' in head or b'"deviceProperties"' in head):
        return "trace"
    if any(m in head[:16384] for m in METRIC_MARKERS):
        return "metrics"
    return ""


def mine(mirror_root, repo):
    """OWNER/NAME (read at HEAD) or OWNER/NAME@COMMIT (a file since deleted)."""
    repo, _, at = repo.partition("@")
    git_dir = fetch_cases.mirror_git_dir(mirror_root, repo)
    commit = git(git_dir, "rev-parse", at or "HEAD").decode().strip()
    runs = {}
    for line in git(git_dir, "ls-tree", "-r", "-l", commit).decode(errors="replace").splitlines():
        meta, path = line.split("\t", 1)
        _, kind, blob, size = meta.split()
        if kind != "blob" or not size.isdigit() or not path.endswith(SUFFIXES) or not 0 < int(size) <= MAX_BYTES:
            continue
        found = kind_of(head_of(git_dir, blob, path.endswith(".gz")))
        if not found:
            continue
        # The rank files of one trace directory are one run.
        key = os.path.dirname(path) if found == "trace" and RANK.search(os.path.basename(path)) else path
        # Runs are space-separated: a space inside a path is written %20 (parse_public_entry reads it back).
        runs.setdefault(key, []).append(f"{repo}@{commit}:{path.replace(' ', '%20')}")
    return [" ".join(sorted(files)) for _, files in sorted(runs.items())]


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    for repo in sys.argv[2:]:
        for run in mine(sys.argv[1], repo):
            print(run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
