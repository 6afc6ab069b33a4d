#!/usr/bin/env python3
"""mi-stats-view.py -- see a program's memory over time from mimalloc's JSON statistics.

Record snapshots (one JSON object per line) while the program runs:

    MIMALLOC_STATS_FILE=stats-%p.jsonl MIMALLOC_STATS_INTERVAL=100 LD_PRELOAD=libmimalloc.so prog

(%p is the process id: a program and each program it starts write their own
file; a file with several processes in it is shown for one, --pid or the one
with the most snapshots)

then

    tools/mi-stats-view.py stats-1234.jsonl                 # a table over time
    tools/mi-stats-view.py stats-1234.jsonl -o memory.png   # and a plot (needs matplotlib)

The table and the plot show, per snapshot: reserved and committed address space,
the resident set (RSS), the page area holding blocks ("touched": pages threaded
into free lists), and, in builds that count every allocation, the bytes the
program asked for and has not freed ("live"). Python standard library only;
matplotlib (Debian: python3-matplotlib) for the plot. Field names and units:
docs/observability.md.
"""
import argparse
import json
import sys

MiB = float(1 << 20)

# (label, how to read it from a snapshot)
SERIES = [
    ("reserved", lambda s: s["reserved"]["current"]),
    ("committed", lambda s: s["committed"]["current"]),
    ("rss", lambda s: s["process"]["current_rss_bytes"]),
    ("touched", lambda s: s["touched"]["current"]),
    ("live", lambda s: s["malloc"]["current"] if s["per_allocation"] else None),
]


def read_snapshots(path, pid):
    snapshots = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                snapshots.append(json.loads(line))
            except ValueError as e:
                sys.exit("%s:%d: not a JSON object (%s)" % (path, n, e))
    pids = {}
    for s in snapshots:
        pids[s["process"]["pid"]] = pids.get(s["process"]["pid"], 0) + 1
    if pid is None and pids:
        pid = max(pids, key=lambda p: pids[p])
        if len(pids) > 1:
            print("%d processes in %s; showing pid %d (%d snapshots); others: %s" %
                  (len(pids), path, pid, pids[pid], ", ".join(str(p) for p in pids if p != pid)))
    snapshots = [s for s in snapshots if s["process"]["pid"] == pid]
    if not snapshots:
        sys.exit("%s: no snapshots%s (was MIMALLOC_STATS_INTERVAL set?)" % (path, "" if pid is None else " of pid %d" % pid))
    return snapshots


def series(snapshots):
    times = [s["process"]["elapsed_ms"] / 1000.0 for s in snapshots]
    values = {}
    for label, get in SERIES:
        v = [get(s) for s in snapshots]
        if all(x is not None for x in v):
            values[label] = v
    return times, values


def print_table(times, values, out):
    labels = list(values)
    out.write("%9s" % "time (s)" + "".join("%14s" % (l + " MiB") for l in labels) + "\n")
    for i, t in enumerate(times):
        out.write("%9.2f" % t + "".join("%14.1f" % (values[l][i] / MiB) for l in labels) + "\n")
    peaks = "  ".join("%s %.1f MiB" % (l, max(values[l]) / MiB) for l in labels)
    out.write("peak: %s\n" % peaks)


def plot(times, values, title, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("the plot needs matplotlib (Debian: apt-get install python3-matplotlib)")
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for label, v in values.items():
        ax.plot(times, [x / MiB for x in v], label=label, drawstyle="steps-post")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("MiB")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file", help="JSON Lines written with MIMALLOC_STATS_FILE")
    ap.add_argument("-o", "--output", help="write a plot to this file (.png, .svg, ...)")
    ap.add_argument("--title", default=None, help="title of the plot")
    ap.add_argument("--pid", type=int, default=None, help="the process to show (files with several)")
    args = ap.parse_args()
    snapshots = read_snapshots(args.file, args.pid)
    times, values = series(snapshots)
    print_table(times, values, sys.stdout)
    if args.output:
        plot(times, values, args.title or args.file, args.output)
        print("plot: %s" % args.output)


if __name__ == "__main__":
    main()
