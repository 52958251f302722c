#!/usr/bin/env python3
"""Where a kernel's warps wait, per SASS instruction kind: ncu's source page as CSV
(`ncu --import R.ncu-rep --page source --csv --print-source sass`, scripts/gpu_checks.sh
ncu-source) summed by opcode, then the instructions with the most samples.

    scripts/ncu_stalls.py CSV [--top N] [--reasons K]

Each warp-stall sample is one warp seen at one instruction, issuing or not; the columns
stall_<reason> split them by why the warp could not issue (`selected`: it issued). A kernel
whose samples sit on wgmma waits is waiting for its tensor cores; on MUFU or FFMA with
`wait` / `math` it is in its element-wise work.
"""
import argparse
import csv
import re
import signal
import sys
from collections import defaultdict

# ncu names the not-issued split "(Not Issued)"; the plain columns count every sample.
STALL = re.compile(r"^stall_([a-z_]+)$")


def opcode(sass):
    """The instruction's opcode with its modifiers (`MUFU.EX2`, `HGMMA.64x64x16.F32.BF16`), the
    predicate and operands dropped; HGMMA shapes folded to `HGMMA`."""
    text = sass.strip()
    if text.startswith("@"):
        text = text.split(None, 1)[1] if " " in text else text
    op = text.split(None, 1)[0] if text else "?"
    if op.startswith("HGMMA"):
        return "HGMMA"
    return op


def read(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    kernel = rows[0][1] if rows and rows[0] and rows[0][0] == "Kernel Name" else "?"
    header_at = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    header = rows[header_at]
    out = []
    for r in rows[header_at + 1:]:
        if len(r) != len(header):
            continue
        out.append(dict(zip(header, r)))
    return kernel, header, out


def num(x):
    try:
        return float(x)
    except ValueError:
        return 0.0


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends the listing quietly
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=15, help="instructions listed by samples (default 15)")
    ap.add_argument("--reasons", type=int, default=4, help="stall reasons shown per row (default 4)")
    a = ap.parse_args()
    kernel, header, rows = read(a.csv)
    reasons = [m.group(1) for h in header for m in [STALL.match(h)] if m]
    if not rows or not reasons:
        sys.exit(f"ncu_stalls: {a.csv}: no instruction rows with stall_* columns (was SourceCounters collected?)")
    total = sum(num(r["Warp Stall Sampling (All Samples)"]) for r in rows) or 1.0

    def split(samples_by_reason, n):
        top = sorted(samples_by_reason.items(), key=lambda kv: -kv[1])[:n]
        return ", ".join(f"{k} {v / total * 100:.1f}" for k, v in top if v > 0)

    by_op = defaultdict(lambda: defaultdict(float))
    count = defaultdict(int)
    for r in rows:
        op = opcode(r["Source"])
        count[op] += 1
        by_op[op]["all"] += num(r["Warp Stall Sampling (All Samples)"])
        by_op[op]["executed"] += num(r["Instructions Executed"])
        for k in reasons:
            by_op[op][k] += num(r[f"stall_{k}"])
    print(f"kernel: {kernel}")
    print(f"{len(rows)} instructions, {total:.0f} samples; % of all samples\n")
    print(f"{'opcode':<28} {'instrs':>6} {'executed':>12} {'samples %':>9}  top reasons (% of all samples)")
    for op, v in sorted(by_op.items(), key=lambda kv: -kv[1]["all"]):
        if v["all"] / total < 0.005:
            continue
        print(f"{op:<28} {count[op]:>6} {v['executed']:>12.0f} {v['all'] / total * 100:>9.1f}  "
              f"{split({k: v[k] for k in reasons}, a.reasons)}")
    print(f"\ntop {a.top} instructions by samples:")
    for r in sorted(rows, key=lambda r: -num(r["Warp Stall Sampling (All Samples)"]))[:a.top]:
        s = num(r["Warp Stall Sampling (All Samples)"])
        print(f"{r['Address'][-5:]} {s / total * 100:5.1f}%  {r['Source'].strip()[:60]:<60} "
              f"{split({k: num(r[f'stall_{k}']) for k in reasons}, a.reasons)}")


if __name__ == "__main__":
    main()
