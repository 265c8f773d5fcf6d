"""The `gputriage` command an installed wheel puts on PATH.

The wheel carries the CLI as gputriage/_bin/gputriage beside this package. This
runs it in this process's place (exec): its exit code, signals, terminal and
process id are the command's own, and the Python interpreter is gone before the
CLI starts. The CLI finds this package from its own location (`record
--python`).
"""
import os
import sys


def main():
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin", "gputriage")
    if not os.access(exe, os.X_OK):
        sys.stderr.write(f"gputriage: {exe} is missing: this install has the Python markers only (built with "
                         "`pip install ./python`); the command comes with the wheel scripts/build_wheel.sh builds\n")
        return 127
    os.execv(exe, ["gputriage"] + sys.argv[1:])
    return 127  # not reached: execv replaces this process or raises


if __name__ == "__main__":
    sys.exit(main())
