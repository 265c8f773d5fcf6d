#!/usr/bin/env python3
"""Extracts one Prometheus exposition (a dcgm-exporter scrape) from a Markdown page
that shows it inside a code block, as the Kubernetes AI conformance pages do.

  extract_exposition.py PAGE.md [--block N] > scrape.prom

Keeps the lines of the N-th (from 1) contiguous run of exposition lines (`# HELP`,
`# TYPE`, `name{labels} value`, `name value`) that names a DCGM_FI_ field, unchanged
and in order; everything else on the page (prose, commands, other output) is left
out. Exits 1 when the page holds no such run, so a page that changed shape is not
silently turned into an empty scrape.
"""
import argparse
import re
import sys

SAMPLE = re.compile(r'^[A-Za-z_:][A-Za-z0-9_:]*(\{.*\})?\s+[-+0-9.eEInfNa]+(\s+-?\d+)?\s*$')
COMMENT = re.compile(r'^# (HELP|TYPE) [A-Za-z_:][A-Za-z0-9_:]*( .*)?$')


def runs(lines):
    """Contiguous runs of exposition lines, blank lines ending a run."""
    current = []
    for line in lines:
        text = line.rstrip("\n")
        if SAMPLE.match(text) or COMMENT.match(text):
            current.append(text)
            continue
        if current:
            yield current
            current = []
    if current:
        yield current


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("page")
    ap.add_argument("--block", type=int, default=1)
    args = ap.parse_args()
    with open(args.page, encoding="utf-8") as f:
        blocks = [r for r in runs(f) if any(l.startswith("DCGM_FI_") for l in r)]
    if len(blocks) < args.block:
        print(f"{args.page}: {len(blocks)} exposition block(s) naming DCGM_FI_ fields; "
              f"block {args.block} asked for", file=sys.stderr)
        return 1
    sys.stdout.write("\n".join(blocks[args.block - 1]) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
