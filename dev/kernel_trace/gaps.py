#!/usr/bin/env python3
"""Where a step's time goes between kernels, from a kernel_trace.cpp CSV.

Steps are the intervals between consecutive launches of a marker kernel (by default the
embedding's gather_rows_kernel, the first kernel of every forward); the last --steps complete
intervals are summarised. For each step: the wall time, the time some kernel ran on any stream
(their union) and the idle rest; then, on the stream with the most kernels (the main stream),
every gap between a kernel's end and the next kernel's start, grouped by the two kernels'
classes (cublas, flash, ours). A gap before one of our kernels is what a programmatic dependent
launch can hide.

    gaps.py trace.csv [--steps 4] [--marker gather_rows_kernel]
"""
import statistics
from collections import defaultdict

from trace_csv import kernel_class, main_stream, parse_and_read, union_ns


def main():
    a, rows, bounds = parse_and_read(__doc__, "kernel names listed by time", "gaps.py")
    lo, hi = bounds[0][0], bounds[-1][1]
    window = [r for r in rows if lo <= r["start"] < hi]
    main_id, per_stream = main_stream(window)
    print(f"{len(window)} kernels in {a.steps} steps; streams (kernels): "
          + ", ".join(f"{s} ({n})" for s, n in sorted(per_stream.items(), key=lambda x: -x[1])))
    print("\nstep | wall ms | some kernel running ms | idle ms | main-stream kernels")
    for s, e in bounds:
        ks = [r for r in window if s <= r["start"] < e]
        busy = union_ns([(r["start"], min(r["end"], e)) for r in ks])
        nmain = sum(1 for r in ks if r["stream"] == main_id)
        print(f"{s} | {(e - s) / 1e6:.3f} | {busy / 1e6:.3f} | {(e - s - busy) / 1e6:.3f} | {nmain}")

    main = [r for r in window if r["stream"] == main_id]
    gaps = defaultdict(list)
    for prev, nxt in zip(main, main[1:]):
        gaps[(kernel_class(prev["name"]), kernel_class(nxt["name"]))].append(max(0, nxt["start"] - prev["end"]))
    print("\nmain stream, per step: gaps between consecutive kernels (previous → next class)")
    print("previous → next | gaps a step | total us a step | median us | p90 us")
    for key, g in sorted(gaps.items(), key=lambda x: -sum(x[1])):
        g.sort()
        print(f"{key[0]} → {key[1]} | {len(g) / a.steps:.0f} | {sum(g) / 1e3 / a.steps:.1f} | "
              f"{statistics.median(g) / 1e3:.2f} | {g[int(0.9 * (len(g) - 1))] / 1e3:.2f}")
    allg = [x for g in gaps.values() for x in g]
    print(f"all | {len(allg) / a.steps:.0f} | {sum(allg) / 1e3 / a.steps:.1f} | "
          f"{statistics.median(allg) / 1e3:.2f} |")

    by_name = defaultdict(lambda: [0, 0])
    for r in window:
        by_name[r["name"]][0] += 1
        by_name[r["name"]][1] += r["end"] - r["start"]
    print(f"\nkernels by time (all streams), per step; top {a.top}")
    print("class | calls | ms | us a call | name")
    for name, (n, t) in sorted(by_name.items(), key=lambda x: -x[1][1])[: a.top]:
        print(f"{kernel_class(name)} | {n / a.steps:.0f} | {t / 1e6 / a.steps:.3f} | {t / 1e3 / n:.2f} | {name[:110]}")
    per_class = defaultdict(lambda: [0, 0])
    for r in window:
        c = per_class[kernel_class(r["name"])]
        c[0] += 1
        c[1] += r["end"] - r["start"]
    print("\nclass | calls a step | ms a step")
    for c, (n, t) in sorted(per_class.items(), key=lambda x: -x[1][1]):
        print(f"{c} | {n / a.steps:.0f} | {t / 1e6 / a.steps:.3f}")


if __name__ == "__main__":
    main()
