"""The results file of the scale benchmarks (trace_scale, nsys_scale): one line
per measured command, "label size_gb file_bytes wall_s peak_rss_kb", read into
rows[size][label] = (file_bytes, wall_s, rss_kb) and printed as one table."""
import collections


def load(path):
    rows = collections.defaultdict(dict)
    for line in open(path):
        label, size, nbytes, wall, rss = line.split("\t")
        rows[size][label] = (int(nbytes), float(wall), int(rss))
    return rows


def print_table(rows):
    print()
    print(f"{'size':>6} {'what':<22} {'wall s':>8} {'MB/s':>8} {'peak RSS MiB':>13}")
    for size, r in rows.items():
        for label, (nbytes, wall, rss) in r.items():
            print(f"{size:>5}G {label:<22} {wall:8.2f} {nbytes / 1e6 / max(wall, 1e-3):8.0f} {rss / 1024:13.1f}")
    print()


def print_rss_ratio(rows, label="gputriage"):
    """Peak RSS of the smallest size against the largest: memory that does not grow."""
    sizes = list(rows)
    if len(sizes) > 1:
        small, big = rows[sizes[0]][label][2], rows[sizes[-1]][label][2]
        print(f"peak RSS {sizes[0]} GB / {sizes[-1]} GB: {small / big:.2f} (goal: within 20%, i.e. >= 0.8)")


def report(path):
    """The rows of `path`, their table printed."""
    rows = load(path)
    print_table(rows)
    return rows
