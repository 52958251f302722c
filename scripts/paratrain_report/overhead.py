"""The communication overhead of bucketed data-parallel gradient sync, and its least-squares fit.

s bytes of fp32 gradients are all-reduced in n_b buckets of about s/n_b bytes; one all-reduce
of b bytes takes b/w + o (w: algorithm bandwidth, bytes per rank over time; o: the fixed cost
of a call). All calls together take s/w + n_b·o. Backward fills the buckets one after the
other, and a bucket's all-reduce starts as soon as its last gradient is final. In the regime
where bucketing matters, backward produces a bucket in about the time its transfer takes, so
every transfer but the last runs behind the compute of the next bucket while the per-call
costs queue up, each delaying the calls after it. What is left after backward ends:

    overhead(n_b) = s/w + n_b·o − (n_b − 1)/n_b · s/w       (total minus the hidden part)
                  = s/(n_b·w) + n_b·o

Few buckets leave a large last bucket exposed; many pay the call overhead many times. The
minimum, d/dn_b = 0:  n_b* = sqrt(s / (w·o)),  bucket size b* = s/n_b* = sqrt(s·w·o).

The step time measured at several bucket caps is modelled as t0 + overhead(n_b), linear in
(t0, 1/w, o): ordinary least squares. t0, the step without communication, is the measured
`ddp = none` floor when there is one, otherwise a third fitted parameter. docs/REPORT.md
explains the model and its limits.
"""
import math
from dataclasses import dataclass

import numpy as np

MIB = float(1 << 20)


def reference_param_numels(vocab_size, d_model, num_layers, d_ff):
    """Parameter sizes (elements) in registration order, as the model registers them:
    token_embeddings; per layer ln1, q, k, v, output_proj, ln2, w1, w2, w3; ln_final; lm_head."""
    layer = [d_model, d_model * d_model, d_model * d_model, d_model * d_model, d_model * d_model,
             d_model, d_ff * d_model, d_model * d_ff, d_ff * d_model]
    return [vocab_size * d_model] + layer * num_layers + [d_model, vocab_size * d_model]


def bucket_count(param_numels, bucket_mb):
    """Buckets that dist::plan_buckets makes: walk the parameters in reverse registration order
    and open a new bucket when adding one would pass the cap (MiB of fp32 gradients); a larger
    parameter gets a bucket of its own; 0 MiB = one bucket per parameter."""
    cap = bucket_mb * MIB
    count, open_bytes = 0, 0.0
    for numel in reversed(param_numels):
        nbytes = 4.0 * numel
        if count == 0 or (open_bytes > 0 and open_bytes + nbytes > cap):
            count += 1
            open_bytes = 0.0
        open_bytes += nbytes
    return count


@dataclass
class OverheadFit:
    s_bytes: float  # gradient bytes all-reduced per step
    w_Bps: float  # fitted algorithm bandwidth, bytes/s (inf or negative: see optimal_buckets)
    o_s: float  # fitted cost per all-reduce call, s
    t0_s: float  # step time without communication, s
    t0_fitted: bool  # False: t0 is the measured floor
    n_points: int
    rms_s: float  # root-mean-square residual of the fit, s

    def overhead_s(self, n_buckets):
        n = np.asarray(n_buckets, dtype=float)
        return self.s_bytes / (n * self.w_Bps) + n * self.o_s

    def step_s(self, n_buckets):
        return self.t0_s + self.overhead_s(n_buckets)

    @property
    def optimal_buckets(self):
        """n_b* = sqrt(s/(w·o)); None when the fit has no interior minimum (w or o not positive)."""
        if not (self.w_Bps > 0 and math.isfinite(self.w_Bps) and self.o_s > 0):
            return None
        return math.sqrt(self.s_bytes / (self.w_Bps * self.o_s))

    @property
    def optimal_bucket_bytes(self):
        n = self.optimal_buckets
        return None if n is None else self.s_bytes / n


def fit_overhead(s_bytes, n_buckets, step_s, t0_s=None):
    """Least-squares fit of step_s ≈ t0 + s/(n_b·w) + n_b·o over the measured bucket counts.
    With t0_s given it is held fixed. Raises ValueError when the points cannot determine the fit."""
    n = np.asarray(n_buckets, dtype=float)
    y = np.asarray(step_s, dtype=float)
    ok = np.isfinite(n) & np.isfinite(y) & (n > 0)
    n, y = n[ok], y[ok]
    free_t0 = t0_s is None or not math.isfinite(t0_s)
    need = 3 if free_t0 else 2
    if len(np.unique(n)) < need:
        raise ValueError(f"the fit needs at least {need} distinct bucket counts (have {len(np.unique(n))})")
    columns = [s_bytes / n, n] + ([np.ones_like(n)] if free_t0 else [])
    a = np.stack(columns, axis=1)
    target = y if free_t0 else y - t0_s
    coef, *_ = np.linalg.lstsq(a, target, rcond=None)
    inv_w, o = coef[0], coef[1]
    t0 = coef[2] if free_t0 else t0_s
    residual = target - a @ coef
    w = 1.0 / inv_w if inv_w != 0 else math.inf
    return OverheadFit(float(s_bytes), float(w), float(o), float(t0), free_t0, int(len(n)),
                       float(np.sqrt(np.mean(residual ** 2))))
