#!/usr/bin/env python3
"""Grows a real Nsight Systems export to a given size, for bench/nsys_scale_benchmark.sh.

The event tables gputriage reads (kernels, copies, memsets, synchronizations,
CUDA API calls, NVTX ranges, OS runtime calls, GPU metric samples) are copied
after themselves again and again, each copy shifted past the end of the last one
in time and, where rows join by correlation id, in correlation id, so the grown
export is the same run repeated: the same kernels, launch delays and gaps, in
the same proportions. The last copy takes only the rows that reach the size.

    make_big_nsys_export.py SOURCE.sqlite TARGET_BYTES OUT.sqlite
"""
import os
import shutil
import sqlite3
import sys

EVENT_TABLES = [
    "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "OSRT_API",
]
GAP_NS = 1000  # between one copy's last event and the next copy's first


def columns(db, table):
    return [row[1] for row in db.execute(f"PRAGMA table_info({table})")]


def main():
    source, target, out = sys.argv[1], int(float(sys.argv[2])), sys.argv[3]
    shutil.copyfile(source, out)
    db = sqlite3.connect(out)
    db.execute("PRAGMA journal_mode = OFF")
    db.execute("PRAGMA synchronous = OFF")
    present = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    tables = [t for t in EVENT_TABLES if t in present]
    timed = [t for t in tables if {"start", "end"} <= set(columns(db, t))]
    # GPU_METRICS samples have a timestamp only.
    if "GPU_METRICS" in present:
        tables.append("GPU_METRICS")
    original_rows = {t: db.execute(f"SELECT max(rowid) FROM {t}").fetchone()[0] or 0 for t in tables}
    # The run's span is its GPU work's, from the launch of its first kernel or copy
    # to the end of its last (before: context creation and allocation; around it,
    # OS runtime calls and metric samples from the process's start to its end):
    # rows outside it are not copied, so the copies follow one another as the
    # run's steps would, in the same proportions of busy and idle time.
    device = [t for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
              if t in tables]
    first_op = min(db.execute(f"SELECT min(start) FROM {t}").fetchone()[0] or 0 for t in device)
    last = max(db.execute(f"SELECT max(end) FROM {t}").fetchone()[0] or 0 for t in device)
    first = first_op
    for t in device:
        launch = db.execute(f"SELECT min(r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN {t} d "
                            f"ON d.correlationId = r.correlationId WHERE d.start = ?", (first_op,)).fetchone()[0]
        if launch is not None:
            first = min(first, launch)
    span = last - first + GAP_NS
    correlations = max([db.execute(f"SELECT max(correlationId) FROM {t}").fetchone()[0] or 0
                        for t in tables if "correlationId" in columns(db, t)] + [0]) + 1
    db.execute("CREATE TEMP TABLE copy_numbers (k INTEGER)")

    def add_copies(numbers):  # copy k of the original rows is shifted k spans on
        db.execute("DELETE FROM copy_numbers")
        db.executemany("INSERT INTO copy_numbers VALUES (?)", [(k,) for k in numbers])
        for t in tables:
            cols = columns(db, t)
            exprs = [f"t.{c} + c.k * {span}" if c in ("start", "end", "timestamp") else
                     f"t.{c} + c.k * {correlations}" if c == "correlationId" else f"t.{c}" for c in cols]
            within = (f"t.timestamp BETWEEN {first} AND {last}" if t == "GPU_METRICS" else
                      f"t.start >= {first} AND t.end <= {last}")
            db.execute(f"INSERT INTO {t} ({', '.join(cols)}) SELECT {', '.join(exprs)} FROM copy_numbers c "
                       f"CROSS JOIN {t} t WHERE t.rowid <= {original_rows[t]} AND {within} ORDER BY c.k, t.rowid")
        db.commit()

    size = os.path.getsize(out)
    add_copies([1])
    per_copy = os.path.getsize(out) - size
    if per_copy <= 0:
        sys.exit(f"{source}: no event rows to grow")
    more = max(0, -(-(target - os.path.getsize(out)) // per_copy))
    add_copies(range(2, 2 + more))
    copies = 1 + more
    db.close()
    print(f"{out}: {os.path.getsize(out)} bytes, {copies} copies of {source}'s events")


if __name__ == "__main__":
    main()
