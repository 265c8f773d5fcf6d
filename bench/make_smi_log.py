#!/usr/bin/env python3
"""Writes a synthetic nvidia-smi --query-gpu CSV log for the ingest benchmark.

It has the shape of `nvidia-smi --query-gpu=timestamp,index,name,utilization.gpu,
utilization.memory,power.draw,power.limit,memory.used,memory.total,clocks.sm,
temperature.gpu,clocks_event_reasons.active --format=csv -lms 100` on an 8-GPU
node: units in the values (the default csv format, the slower one to parse),
GPUs interleaved, an input-bound sawtooth on half the GPUs.

    python3 bench/make_smi_log.py OUT SIZE_MB [GPUS]
"""
import sys

out, size_mb = sys.argv[1], float(sys.argv[2])
gpus = int(sys.argv[3]) if len(sys.argv) > 3 else 8
target = int(size_mb * 1e6)
header = ("timestamp, index, name, utilization.gpu [%], utilization.memory [%], power.draw [W], power.limit [W], "
          "memory.used [MiB], memory.total [MiB], clocks.sm [MHz], temperature.gpu, clocks_event_reasons.active\n")
# Row tails for each GPU over a 64-tick cycle (6.4 s): values vary, text stays realistic.
tails = []
for g in range(gpus):
    cycle = []
    for k in range(64):
        starved = g % 2 == 1 and (k % 16) >= 10  # sawtooth: the loader falls behind
        util = 0 if starved else 90 + (k * 7 + g) % 10
        power = 95.0 + k * 0.37 if starved else 600.0 + (k * 13 + g * 7) % 90 + (k % 7) * 0.13
        cycle.append(f", {g}, NVIDIA H100 80GB HBM3, {util} %, {util // 3} %, {power:.2f} W, 700.00 W, "
                     f"{60000 + k * 11} MiB, 81559 MiB, {345 if starved else 1980} MHz, {55 + k % 9}, "
                     f"0x{(1 if starved else 0):016X}\n")
    tails.append(cycle)
written = 0
with open(out, "w", buffering=1 << 22) as f:
    f.write(header)
    written += len(header)
    tick = 0
    while written < target:
        chunk = []
        for _ in range(1000):
            ms = tick * 100
            s, ms = divmod(ms, 1000)
            m, s = divmod(s, 60)
            h, m = divmod(m, 60)
            d, h = divmod(h, 24)
            stamp = f"2026/03/{1 + d:02d} {h:02d}:{m:02d}:{s:02d}.{ms:03d}"
            k = tick % 64
            for g in range(gpus):
                chunk.append(stamp + tails[g][k])
            tick += 1
        text = "".join(chunk)
        f.write(text)
        written += len(text)
print(f"{out}: {written / 1e6:.1f} MB, {tick} intervals x {gpus} GPUs")
