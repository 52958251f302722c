#!/usr/bin/env python3
"""Where a kernel's warps wait, per SASS instruction kind: ncu's source page as CSV
(`ncu --import R.ncu-rep --page source --csv --print-source sass`, dev/experiments/ncu.sh
ncu-source) summed by opcode, then the instructions with the most samples.

    scripts/ncu_stalls.py CSV [--top N] [--reasons K] [--against BEFORE.csv]

With --against, the same kernel profiled before a change: the samples in all and each reason's
and opcode's share side by side (before → after), as each file's percentages.

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


class Page:
    """One source page summed: samples in all, per stall reason, per opcode."""

    def __init__(self, path):
        self.kernel, header, self.rows = read(path)
        self.reasons = [m.group(1) for h in header for m in [STALL.match(h)] if m]
        if not self.rows or not self.reasons:
            sys.exit(f"ncu_stalls: {path}: no instruction rows with stall_* columns (was SourceCounters collected?)")
        self.total = sum(num(r["Warp Stall Sampling (All Samples)"]) for r in self.rows) or 1.0
        self.by_reason = {k: sum(num(r[f"stall_{k}"]) for r in self.rows) for k in self.reasons}
        self.by_op = defaultdict(lambda: defaultdict(float))
        self.count = defaultdict(int)
        for r in self.rows:
            op = opcode(r["Source"])
            self.count[op] += 1
            self.by_op[op]["all"] += num(r["Warp Stall Sampling (All Samples)"])
            self.by_op[op]["executed"] += num(r["Instructions Executed"])
            for k in self.reasons:
                self.by_op[op][k] += num(r[f"stall_{k}"])

    def pct(self, samples):
        return samples / self.total * 100


def compare(before, after):
    print(f"kernel: {after.kernel}")
    if before.kernel != after.kernel:
        print(f"before: {before.kernel}")
    print(f"samples: {before.total:.0f} → {after.total:.0f} ({(after.total / before.total - 1) * 100:+.1f} %); "
          f"shares in % of each file's samples\n")
    print(f"{'reason':<28} {'before':>7} {'after':>7}")
    for k in sorted(after.reasons, key=lambda k: -after.by_reason[k]):
        b, a = before.pct(before.by_reason.get(k, 0.0)), after.pct(after.by_reason[k])
        if max(a, b) >= 0.5:
            print(f"{k:<28} {b:>7.1f} {a:>7.1f}")
    print(f"\n{'opcode':<28} {'before':>7} {'after':>7}")
    ops = set(before.by_op) | set(after.by_op)
    for op in sorted(ops, key=lambda op: -after.by_op[op]["all"] if op in after.by_op else 0.0):
        b = before.pct(before.by_op[op]["all"]) if op in before.by_op else 0.0
        a = after.pct(after.by_op[op]["all"]) if op in after.by_op else 0.0
        if max(a, b) >= 0.5:
            print(f"{op:<28} {b:>7.1f} {a:>7.1f}")


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends the listing quietly
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=15, help="instructions listed by samples (default 15)")
    ap.add_argument("--reasons", type=int, default=4, help="stall reasons shown per row (default 4)")
    ap.add_argument("--against", metavar="BEFORE.csv", help="the same kernel before a change: shares side by side")
    a = ap.parse_args()
    page = Page(a.csv)
    if a.against:
        compare(Page(a.against), page)
        return
    total, reasons = page.total, page.reasons

    def split(samples_by_reason, n):
        top = sorted(samples_by_reason.items(), key=lambda kv: -kv[1])[:n]
        return ", ".join(f"{k} {v / total * 100:.1f}" for k, v in top if v > 0)

    print(f"kernel: {page.kernel}")
    print(f"{len(page.rows)} instructions, {total:.0f} samples; % of all samples\n")
    print(f"{'opcode':<28} {'instrs':>6} {'executed':>12} {'samples %':>9}  top reasons (% of all samples)")
    for op, v in sorted(page.by_op.items(), key=lambda kv: -kv[1]["all"]):
        if v["all"] / total < 0.005:
            continue
        print(f"{op:<28} {page.count[op]:>6} {v['executed']:>12.0f} {v['all'] / total * 100:>9.1f}  "
              f"{split({k: v[k] for k in reasons}, a.reasons)}")
    print(f"\ntop {a.top} instructions by samples:")
    for r in sorted(page.rows, key=lambda r: -num(r["Warp Stall Sampling (All Samples)"]))[:a.top]:
        s = num(r["Warp Stall Sampling (All Samples)"])
        print(f"{r['Address'][-5:]} {s / total * 100:5.1f}%  {r['Source'].strip()[:60]:<60} "
              f"{split({k: num(r[f'stall_{k}']) for k in reasons}, a.reasons)}")


if __name__ == "__main__":
    main()
