#!/usr/bin/env python3
"""The first kernel's cycles, clock, tensor and XU pipe use, issue rate, launch shape and warp
stall reasons from each of ncu's raw CSV reports (`ncu --csv --page raw`, paratrain's own output
lines between them ignored): the fa3-peer step of scripts/gpu_checks.sh prints paratrain's and
FlashAttention-3's forward side by side with it.

    scripts/ncu_kernel_metrics.py CSV...
"""
import csv
import sys

WANT = ["gpc__cycles_elapsed.max", "sm__cycles_elapsed.avg.per_second", "gpu__time_duration.sum",
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active", "sm__inst_executed.avg.per_cycle_active",
        "launch__registers_per_thread", "launch__block_size", "launch__grid_size"]
WANT += [f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio" for r in
         ("wait", "long_scoreboard", "short_scoreboard", "mio_throttle", "barrier", "dispatch_stall", "not_selected",
          "math_pipe_throttle", "sleeping")]


def main():
    for path in sys.argv[1:]:
        with open(path) as f:
            rows = list(csv.reader(line for line in f if line.startswith('"')))
        if len(rows) < 3:
            print(path, ": no kernel rows")
            continue
        head, data = rows[0], rows[2]  # rows[1]: the units
        print("==", path.rsplit("/", 1)[-1])
        for w in WANT:
            if w in head:
                print(f"  {w} = {data[head.index(w)]}")


if __name__ == "__main__":
    main()
