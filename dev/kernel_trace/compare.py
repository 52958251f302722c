#!/usr/bin/env python3
"""Two kernel_trace.cpp CSVs of the same step side by side (A: the first, B: the second): each
phase and op family's exclusive time a step in both, then the kernels whose time a step differs
most, by phase and kernel name. A kernel that only one run launched shows 0 calls in the other:
that is how two builds' or two runs' different GEMM algorithms show (cuBLAS's kernel names carry
their tile shapes), and how a changed kernel's time shows beside the unchanged ones' run-to-run
spread. Phases and exclusive time as families.py counts them; the last --steps steps of each.

    compare.py a.csv b.csv [--steps 3] [--marker gather_rows_kernel] [--top 16]
"""
import argparse
import sys
from collections import defaultdict

from families import PHASES, phased
from trace_csv import family, read, step_bounds, with_exclusive


def per_step(path, steps, marker):
    """(phase, family) → exclusive ns a step, (phase, name) → [calls, exclusive ns] a step, wall ns a step."""
    rows = with_exclusive(read(path))
    bounds = step_bounds(rows, marker, steps, "compare.py")
    fams, kernels = defaultdict(float), defaultdict(lambda: [0.0, 0.0])
    for r, ph in phased(rows, bounds):
        fams[(ph, family(r["name"]))] += r["exclusive"] / steps
        k = kernels[(ph, r["name"])]
        k[0] += 1 / steps
        k[1] += r["exclusive"] / steps
    return fams, kernels, sum(hi - lo for lo, hi in bounds) / steps


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--marker", default="gather_rows_kernel")
    ap.add_argument("--top", type=int, default=16, help="kernels listed, largest difference first")
    args = ap.parse_args()
    fa, ka, wa = per_step(args.a, args.steps, args.marker)
    fb, kb, wb = per_step(args.b, args.steps, args.marker)
    print(f"{args.steps} steps each; wall ms a step: A {wa / 1e6:.3f}, B {wb / 1e6:.3f}, B − A {(wb - wa) / 1e6:+.3f}")
    print("\nphase | family | A ms a step | B ms a step | B − A")
    for ph, fam in sorted(set(fa) | set(fb), key=lambda k: (PHASES.index(k[0]), -max(fa[k], fb[k]))):
        a, b = fa[(ph, fam)], fb[(ph, fam)]
        print(f"{ph} | {fam} | {a / 1e6:.3f} | {b / 1e6:.3f} | {(b - a) / 1e6:+.3f}")
    print(f"\nkernels by |B − A|, top {args.top}")
    print("phase | A calls | A us a call | B calls | B us a call | B − A ms a step | name")
    keys = sorted(set(ka) | set(kb), key=lambda k: -abs(kb[k][1] - ka[k][1]))
    for k in keys[: args.top]:
        (ca, ta), (cb, tb) = ka[k], kb[k]
        us = lambda c, t: f"{t / c / 1e3:.2f}" if c else "-"
        print(f"{k[0]} | {ca:.0f} | {us(ca, ta)} | {cb:.0f} | {us(cb, tb)} | {(tb - ta) / 1e6:+.3f} | {k[1][:110]}")


if __name__ == "__main__":
    sys.exit(main())
