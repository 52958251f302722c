#!/usr/bin/env python3
"""A step's kernel time per phase and op family, from a kernel_trace.cpp CSV: the roofline's
"achieved" column (bench model --breakdown) without the CUDA events the breakdown puts around
every op, which keep chained launches from overlapping and add their own gaps.

Families come from kernel names (trace_csv.FAMILIES). Phases by position in the step: forward from
the marker kernel (the embedding) to the end of the loss kernel, backward after it, optimizer from
the first AdamW / clip / SGD kernel on (those count as optimizer wherever they fall, so an update
overlapped with the next forward is not charged to that forward's families; the forward's own
kernels still run slower beside it: trace with --update-overlap off to compare with a breakdown).
Each kernel counts its exclusive time on its stream (trace_csv.exclusive_ns).

    families.py trace.csv [--steps 4] [--marker gather_rows_kernel] [--top 12]
"""
from collections import defaultdict

from trace_csv import MEMORY_BOUND, UPDATE_KERNELS, family, main_stream, parse_and_read, with_exclusive

PHASES = ("forward", "backward", "optimizer")


def is_update(name):
    return any(u in name for u in UPDATE_KERNELS)


def phase_of(rows, lo, hi):
    """Phase of each row of one step [lo, hi)."""
    loss_end = max((r["end"] for r in rows if family(r["name"]) == "loss"), default=hi)
    update_start = min((r["start"] for r in rows if is_update(r["name"]) and r["start"] >= loss_end), default=hi)
    out = []
    for r in rows:
        if is_update(r["name"]):
            out.append("optimizer")
        elif r["start"] < loss_end:
            out.append("forward")
        elif r["start"] < update_start:
            out.append("backward")
        else:
            out.append("optimizer")
    return out


def phased(rows, bounds):
    """(row, phase) for every row of every step in bounds."""
    for lo, hi in bounds:
        step = [r for r in rows if lo <= r["start"] < hi]
        yield from zip(step, phase_of(step, lo, hi))


def main():
    a, rows, bounds = parse_and_read(__doc__, "memory-bound kernels listed by time", "families.py")
    with_exclusive(rows)
    main_id, _ = main_stream([r for r in rows if bounds[0][0] <= r["start"] < bounds[-1][1]])
    cells = defaultdict(lambda: [0, 0, 0])  # (phase, family, main stream?) → kernels, exclusive ns, raw ns
    by_name = defaultdict(lambda: [0, 0])
    walls = [hi - lo for lo, hi in bounds]
    for r, ph in phased(rows, bounds):
        fam = family(r["name"])
        c = cells[(ph, fam, r["stream"] == main_id)]
        c[0] += 1
        c[1] += r["exclusive"]
        c[2] += r["end"] - r["start"]
        if fam in MEMORY_BOUND and ph != "optimizer":
            by_name[(ph, r["name"])][0] += 1
            by_name[(ph, r["name"])][1] += r["exclusive"]
    n = a.steps
    print(f"{n} steps, wall {sum(walls) / n / 1e6:.3f} ms a step; main stream {main_id}")
    print("\nphase | family | stream | kernels a step | exclusive ms a step | kernel ms a step (start to end)")
    for (ph, fam, on_main), (k, ex, raw) in sorted(cells.items(), key=lambda x: (PHASES.index(x[0][0]), -x[1][1])):
        print(f"{ph} | {fam} | {'main' if on_main else 'side'} | {k / n:.0f} | {ex / n / 1e6:.3f} | {raw / n / 1e6:.3f}")
    mem = {ph: sum(v[1] for (p, f, _), v in cells.items() if p == ph and f in MEMORY_BOUND) / n / 1e6
           for ph in ("forward", "backward")}
    print(f"\nmemory-bound work (normalization + elementwise, forward + backward): "
          f"{mem['forward']:.3f} + {mem['backward']:.3f} = {sum(mem.values()):.3f} ms a step")
    for ph in ("forward", "backward"):
        parts = {f: sum(v[1] for (p, ff, _), v in cells.items() if p == ph and ff == f) / n / 1e6 for f in MEMORY_BOUND}
        print(f"  {ph}: " + ", ".join(f"{f} {t:.3f}" for f, t in parts.items()))
    print(f"\nmemory-bound kernels by exclusive time, per step; top {a.top}")
    print("phase | calls | ms | us a call | name")
    for (ph, name), (k, ex) in sorted(by_name.items(), key=lambda x: -x[1][1])[: a.top]:
        print(f"{ph} | {k / n:.0f} | {ex / n / 1e6:.3f} | {ex / k / 1e3:.2f} | {name[:110]}")


if __name__ == "__main__":
    main()
