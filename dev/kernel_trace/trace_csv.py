"""Reading a kernel_trace.cpp CSV: rows, steps, kernel classes. Shared by gaps.py and families.py."""
import argparse
import csv
import sys
from collections import defaultdict

# The update's kernels (the optimizer phase wherever they run); the clip norm's squared_norm pass
# is the optimizer family's too, but runs beside backward.
UPDATE_KERNELS = ("adamw", "clip_kernel", "sgd_kernel")
# Kernel name fragments → the roofline's op families (src/core/profiler.h), first match wins.
# cuBLAS's GEMMs are nvjet / xmma / cutlass kernels on Hopper; our own kernels are named in cuda/.
FAMILIES = (
    ("matmul", ("gemm", "xmma", "nvjet", "cutlass", "cublas", "splitkreduce")),
    ("attention", ("flash",)),
    ("communication", ("nccl",)),
    ("normalization", ("rmsnorm",)),
    ("loss", ("cross_entropy", "sum_rows_kernel", "mse_kernel")),
    ("optimizer", UPDATE_KERNELS + ("squared_norm",)),
    ("elementwise", ("rope", "map_kernel", "swiglu", "gather_rows", "scatter_add", "first_row", "add_sums",
                     "add_bias", "bias_backward", "softmax")),
)
MEMORY_BOUND = ("normalization", "elementwise")


def family(name):
    n = name.lower()
    for fam, parts in FAMILIES:
        if any(p in n for p in parts):
            return fam
    return "other"


def kernel_class(name):
    """cublas, flash, nccl or ours: who launched it (gaps.py's grouping)."""
    fam = family(name)
    return {"matmul": "cublas", "attention": "flash", "communication": "nccl"}.get(fam, "ours")


def parse_and_read(doc, top_help, tool):
    """The arguments every summary takes (the CSV, how many steps, the kernel that starts a step,
    how many kernels to list), then the trace: (args, rows in start order, the steps' bounds)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--marker", default="gather_rows_kernel")
    ap.add_argument("--top", type=int, default=12, help=top_help)
    a = ap.parse_args()
    rows = read(a.csv)
    return a, rows, step_bounds(rows, a.marker, a.steps, tool)


def read(path):
    with open(path) as f:
        rows = [dict(start=int(r["start_ns"]), end=int(r["end_ns"]), stream=int(r["stream"]), name=r["name"])
                for r in csv.DictReader(f)]
    rows.sort(key=lambda r: r["start"])
    return rows


def step_bounds(rows, marker, steps, tool):
    """The last `steps` complete intervals between launches of the marker kernel."""
    marks = [r["start"] for r in rows if marker in r["name"]]
    if len(marks) < steps + 1:
        sys.exit(f"{tool}: {len(marks)} launches of {marker}: need --steps + 1 = {steps + 1}")
    return list(zip(marks[-steps - 1:-1], marks[-steps:]))


def main_stream(rows):
    per_stream = defaultdict(int)
    for r in rows:
        per_stream[r["stream"]] += 1
    return max(per_stream, key=per_stream.get), per_stream


def exclusive_ns(rows):
    """Each kernel's time on its stream: from its start, or the previous kernel's end on that stream
    if later, to its end. A chained launch (programmatic dependent launch) starts a kernel before the
    one ahead of it ends; the overlap is the earlier kernel's, so a stream's exclusive times add up to
    the time it was busy. Rows in start order; returns one value per row."""
    last_end, out = {}, []
    for r in rows:
        begin = max(r["start"], last_end.get(r["stream"], r["start"]))
        out.append(max(0, r["end"] - begin))
        last_end[r["stream"]] = max(last_end.get(r["stream"], 0), r["end"])
    return out


def with_exclusive(rows):
    """rows, each with its exclusive time on its stream as "exclusive" (exclusive_ns)."""
    for r, ns in zip(rows, exclusive_ns(rows)):
        r["exclusive"] = ns
    return rows


def union_ns(intervals):
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total
