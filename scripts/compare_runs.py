#!/usr/bin/env python3
"""Compare two training runs of the same model: their losses step by step (the /train_steps
tables of their run records) and their final weights (the checkpoints they saved), e.g. bf16
against fp32 gradients, or one rank count against another.

    scripts/compare_runs.py --records A.h5 B.h5 --checkpoints A_ckpt.h5 B_ckpt.h5 [--json]

Losses: the largest and the mean |loss_B - loss_A| over the steps both ran, the first and last
losses, and the mean over the last 10 % of the steps. Weights: for every parameter the relative
difference ||b - a|| / ||a|| (norm-wise) and max |b - a| / max |a| (elementwise, scaled by the
tensor's largest value); the largest of each, naming its parameter, and the whole model's norm-
wise difference. Either pair may be left out. Exit status 1 when the files do not describe the
same model or steps (a parameter, shape or step missing on one side), 2 on bad arguments.
"""
import argparse
import json
import sys

import numpy as np


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", nargs=2, metavar=("A", "B"), help="run records of `paratrain train` (--out)")
    p.add_argument("--checkpoints", nargs=2, metavar=("A", "B"), help="checkpoints of the runs (--save)")
    p.add_argument("--json", action="store_true", help="one JSON object instead of text")
    args = p.parse_args(argv)
    if not args.records and not args.checkpoints:
        p.error("give --records, --checkpoints or both")
    return args


def losses(path):
    import h5py
    with h5py.File(path, "r") as f:
        if "train_steps" not in f:
            raise ValueError(f"{path}: no /train_steps table (not a `paratrain train` record)")
        t = f["train_steps"][()]
    return dict(zip(t["step"].tolist(), t["loss"].tolist()))


def compare_losses(a_path, b_path):
    a, b = losses(a_path), losses(b_path)
    steps = sorted(set(a) & set(b))
    if not steps or steps != sorted(a) or steps != sorted(b):
        raise ValueError(f"the records ran different steps ({len(a)} and {len(b)} steps, {len(steps)} shared)")
    la, lb = np.array([a[s] for s in steps]), np.array([b[s] for s in steps])
    diff = np.abs(lb - la)
    tail = max(1, len(steps) // 10)
    return {"steps": len(steps), "max_abs_diff": float(diff.max()), "max_abs_diff_step": int(steps[int(diff.argmax())]),
            "mean_abs_diff": float(diff.mean()), "first": [float(la[0]), float(lb[0])],
            "last": [float(la[-1]), float(lb[-1])], "tail_mean": [float(la[-tail:].mean()), float(lb[-tail:].mean())]}


def weights(path):
    """The checkpoint's parameters: every dataset outside /optimizer."""
    import h5py
    out = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset) and not name.startswith("optimizer"):
                out[name] = obj[()].astype(np.float64)
        f.visititems(visit)
    if not out:
        raise ValueError(f"{path}: no parameters (not a paratrain checkpoint)")
    return out


def compare_weights(a_path, b_path):
    a, b = weights(a_path), weights(b_path)
    if set(a) != set(b):
        raise ValueError(f"the checkpoints hold different parameters: {sorted(set(a) ^ set(b))[:5]}")
    rows, sq_diff, sq_ref = [], 0.0, 0.0
    for name in sorted(a):
        if a[name].shape != b[name].shape:
            raise ValueError(f"parameter {name}: shapes {a[name].shape} and {b[name].shape}")
        d = b[name] - a[name]
        ref = float(np.linalg.norm(a[name]))
        scale = float(np.abs(a[name]).max())
        rows.append((name, float(np.linalg.norm(d)) / ref if ref else float("nan"),
                     float(np.abs(d).max()) / scale if scale else float("nan")))
        sq_diff += float((d * d).sum())
        sq_ref += ref * ref
    worst_norm = max(rows, key=lambda r: r[1])
    worst_elem = max(rows, key=lambda r: r[2])
    return {"parameters": len(rows), "model_rel_diff": (sq_diff / sq_ref) ** 0.5 if sq_ref else float("nan"),
            "max_rel_diff": worst_norm[1], "max_rel_diff_param": worst_norm[0],
            "max_elem_diff": worst_elem[2], "max_elem_diff_param": worst_elem[0]}


def main(argv=None):
    args = parse_args(argv)
    result = {}
    try:
        if args.records:
            result["loss"] = compare_losses(*args.records)
        if args.checkpoints:
            result["weights"] = compare_weights(*args.checkpoints)
    except (OSError, ValueError, KeyError) as e:
        print(f"compare_runs.py: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result))
        return 0
    if "loss" in result:
        r = result["loss"]
        print(f"loss over {r['steps']} steps: first {r['first'][0]:.4f} / {r['first'][1]:.4f}, last "
              f"{r['last'][0]:.4f} / {r['last'][1]:.4f}, mean of the last 10 % {r['tail_mean'][0]:.4f} / "
              f"{r['tail_mean'][1]:.4f}; |B - A| max {r['max_abs_diff']:.4g} (step {r['max_abs_diff_step']}), "
              f"mean {r['mean_abs_diff']:.4g}")
    if "weights" in result:
        r = result["weights"]
        print(f"weights ({r['parameters']} parameters): whole model ||B - A|| / ||A|| = {r['model_rel_diff']:.4g}; "
              f"largest per parameter {r['max_rel_diff']:.4g} ({r['max_rel_diff_param']}); largest element "
              f"difference / the parameter's largest value {r['max_elem_diff']:.4g} ({r['max_elem_diff_param']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
