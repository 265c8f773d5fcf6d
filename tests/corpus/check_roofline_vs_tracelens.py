#!/usr/bin/python3
"""Side-by-side check of gputriage's per-operator roofline against TraceLens's.

TraceLens's perf report of the bundled H100 Qwen1.5-0.5B trace lists, per GEMM
operator and shape, its FLOPs, the bytes it moves and their ratio
(tests/data/oracle/tracelens_qwen1.5_h100_gemm.csv, an extract of its GEMM.csv).
gputriage diagnoses the same trace; every operator both tools list must agree on
FLOPs and FLOP/byte within 1 % (TraceLens reports MiB; bias bytes are the only
modelled difference).

Usage: check_roofline_vs_tracelens.py GPUTRIAGE ROOT
"""
import csv
import json
import os
import subprocess
import sys


def main():
    binary, root = sys.argv[1], sys.argv[2]
    trace = os.path.join(root, "tests/data/traces/tracelens/h100_qwen1.5_0.5b_chat.json.gz")
    oracle = os.path.join(root, "tests/data/oracle/tracelens_qwen1.5_h100_gemm.csv")
    proc = subprocess.run([binary, "diagnose", trace, "--json"], capture_output=True, text=True, timeout=300)
    if proc.returncode not in (0, 1):
        print(proc.stderr)
        return 1
    report = json.loads(proc.stdout)
    roofline = report["recordings"][0]["roofline"]
    if not roofline.get("available"):
        print("roofline not available:", roofline.get("unavailable_reason"))
        return 1
    ours = {(op["op"], op["input_dims"].replace(" ", "")): op for op in roofline["top"]}
    matched = 0
    failures = []
    for row in csv.DictReader(open(oracle)):
        dims = json.loads(row["Input Dims_first"])
        # gputriage keeps the first three inputs (the tensors of a GEMM).
        key = (row["name"], json.dumps(dims[:3]).replace(" ", ""))
        op = ours.get(key)
        if not op:
            continue
        matched += 1
        flops = float(row["GFLOPS_first"]) * 1e9
        intensity = float(row["FLOPS/Byte_first"])
        for what, theirs, mine in (("FLOPs", flops, op["flops"]), ("FLOP/byte", intensity, op["intensity_flops_per_byte"])):
            ratio = mine / theirs
            status = "ok" if abs(ratio - 1) <= 0.01 else "DIFFERS"
            print(f"{row['name']} {key[1]} {what}: gputriage {mine:.4g}, TraceLens {theirs:.4g} ({status})")
            if status != "ok":
                failures.append(f"{key} {what}")
    if matched < 3:
        print(f"only {matched} operators in both reports (need 3)")
        return 1
    print(f"{matched} operators compared; {len(failures)} differ")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
