"""Packs the product's wheel: the Python package, the limited-API extension and
the CLI (gputriage/_bin/gputriage), with a `gputriage` console command.

    pack_wheel.py --arch x86_64 --cli PATH --extension PATH --out DIR

The binaries must already be stripped (scripts/build_wheel.sh does it). Prints
the wheel's path. The packing itself is the in-tree build backend's
(python/build_backend/gputriage_build.py), so both wheels are written alike.
"""
import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python", "build_backend"))
import gputriage_build  # noqa: E402

# The policy the binaries are held to: glibc 2.28 (cmake/dependencies.cmake, src/portable/glibc_compat.cc).
GLIBC_FLOOR = "2_28"

DESCRIPTION = """\
gputriage tells ML teams why their GPUs sit idle (input-bound, undersized work,
memory-bound, low precision, unfused attention, launch/host-bound,
communication-bound, stragglers, throttled, idle, or at the compute limit), with
the evidence, the fix, the expected gain and what the idle time costs.

This wheel holds the `gputriage` command (diagnose, record, compare, runs,
export, agent, fleet, serve, top, cost) and the Python package (step markers,
`watch()`, zero-code `gputriage record --python`, the W&B bridge). It runs on
any Linux with glibc 2.28 or newer; NVML is loaded from the NVIDIA driver at
run time, and a PostgreSQL store uses the host's libpq.
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", required=True, choices=["x86_64", "aarch64"])
    parser.add_argument("--cli", required=True)
    parser.add_argument("--extension", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    files = gputriage_build.package_sources()
    for path, wheel_path in ((args.extension, "gputriage/_markers.abi3.so"), (args.cli, "gputriage/_bin/gputriage")):
        with open(path, "rb") as f:
            files[wheel_path] = f.read()
    os.makedirs(args.out, exist_ok=True)
    tag = f"cp38-abi3-manylinux_{GLIBC_FLOOR}_{args.arch}"
    name = gputriage_build.write_wheel(
        args.out, files, tag, executables=("gputriage/_bin/gputriage",),
        summary="Why your GPUs sit idle: the cause, the evidence, the fix, the gain and the cost",
        description=DESCRIPTION, entry_points={"gputriage": "gputriage._launcher:main"})
    print(os.path.join(args.out, name))


if __name__ == "__main__":
    main()
