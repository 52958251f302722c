#!/usr/bin/env python3
"""Where a step's time goes between kernels, from a kernel_trace.cpp CSV.

Steps are the intervals between consecutive launches of a marker kernel (by default the
embedding's gather_rows_kernel, the first kernel of every forward); the last --steps complete
intervals are summarised. For each step: the wall time, the time some kernel ran on any stream
(their union) and the idle rest; then, on the stream with the most kernels (the main stream),
every gap between a kernel's end and the next kernel's start, grouped by the two kernels'
classes (cublas, flash, ours). A gap before one of our kernels is what a programmatic dependent
launch can hide. Then the main stream's idle time by cause: before each step's first kernel
(the host launching, or waiting), and gaps that end within 5 us of another stream's kernel ending
inside them (a wait on that stream's event: the deferred update's chunks, say).

    gaps.py trace.csv [--steps 4] [--marker gather_rows_kernel]
"""
import bisect
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

    # The main stream's idle time by cause.
    WAIT_NS = 5000
    other_ends = sorted(r["end"] for r in rows if r["stream"] != main_id)
    main_all = [r for r in rows if r["stream"] == main_id]
    starts = [r["start"] for r in main_all]
    step_starts = {s for s, _ in bounds}
    before_first = []
    for s in sorted(step_starts):
        i = bisect.bisect_left(starts, s)
        if i > 0:  # the latest end among the kernels before it (chained ones overlap)
            before_first.append(max(0, s - max(r["end"] for r in main_all[max(0, i - 8):i])))
    waits, rest = [], []
    for prev, nxt in zip(main, main[1:]):
        g = nxt["start"] - prev["end"]
        if g <= 0 or nxt["start"] in step_starts:
            continue
        j = bisect.bisect_right(other_ends, nxt["start"]) - 1
        on_other = j >= 0 and other_ends[j] > prev["end"] and nxt["start"] - other_ends[j] <= WAIT_NS
        (waits if on_other else rest).append(g)
    print("\nmain stream idle, per step: cause | gaps a step | ms a step")
    print(f"before the step's first kernel | 1 | {sum(before_first) / 1e6 / len(before_first):.3f}"
          if before_first else "before the step's first kernel | 0 | 0.000")
    print(f"ended by another stream's kernel (a wait) | {len(waits) / a.steps:.0f} | {sum(waits) / 1e6 / a.steps:.3f}")
    print(f"other gaps | {len(rest) / a.steps:.0f} | {sum(rest) / 1e6 / a.steps:.3f}")

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
