#pragma once
// The element-wise parts of the flash kernels, on accumulator fragments: the forward's online
// softmax and the backward's P and dS. Shared by the mma.sync and the wgmma kernels, whose fp32
// accumulators have one layout: a thread holds rows g and g+8 of its warp's 16-row strip and, in
// each 8-column tile j, columns 8j + 2t and 8j + 2t + 1 (acc[j][e]: row g + 8·(e/2), column
// 8j + 2t + e%2).
#include "cuda/flash/flash_mma.cuh"

namespace pt::cuda::flash {

__device__ __forceinline__ int frag_row(int e) { return (threadIdx.x % 32) / 4 + 8 * (e >> 1); }
__device__ __forceinline__ int frag_col(int j, int e) { return j * 8 + 2 * (threadIdx.x % 4) + (e & 1); }

// The running max is raised only when a row of the warp would otherwise see P above 2^8
// (FlashAttention-4's conditional rescaling): below that, P = 2^(scale·S − stale max) ≤ 256 keeps
// bf16's relative precision, and O, l and L all use the same stale max, so the result is the same
// softmax. Most key tiles of a long row then skip alpha's exponentials and O's rescale.
constexpr float kRescaleLog2Threshold = 8.0f;

// Forward, one key tile, the scores' part: mask (kMasked: the tile crosses the diagonal or the
// end of the keys; unmasked tiles do no index arithmetic), raise the running max where a row of
// the warp needs it, turn the raw scores S into P = exp(scale·S − max) in place and rescale the
// running sum. Returns whether this warp raised its max (warp-uniform); then alpha is the factor
// O must be rescaled by (rescale_rows), left to the caller so that a P·V product still in flight
// (the warp-specialised forward) can finish first. Otherwise O stays as it is and alpha is unset.
// row0: query index of the strip's first row; n0: key index of the tile's first column.
template <int kBlockN, bool kCausal, bool kMasked>
__device__ __forceinline__ bool softmax_scores(float (&acc_s)[kBlockN / 8][4], float (&row_max)[2], float (&row_sum)[2],
                                               float (&alpha)[2], int row0, int n0, int seqlen_k, float scale_log2,
                                               float mask_bias) {
  if constexpr (kMasked) {
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = n0 + frag_col(j, e), row = row0 + frag_row(e);
        if (col >= seqlen_k)
          acc_s[j][e] = -INFINITY;  // past the last key: not a score at all
        else if (kCausal && col > row)
          acc_s[j][e] += mask_bias;
      }
  }
  float mx[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    mx[r] = row_max[r];
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j) mx[r] = fmaxf(mx[r], fmaxf(acc_s[j][2 * r], acc_s[j][2 * r + 1]));
    mx[r] = quad_max(mx[r]);  // finite: every tile has a valid key, masked ones are only biased
  }
  // First tile: row_max = -inf, so the max is raised and alpha = 2^-inf = 0 (O and l are still zero).
  const bool raise = __any_sync(0xffffffffu, (mx[0] - row_max[0]) * scale_log2 > kRescaleLog2Threshold ||
                                                 (mx[1] - row_max[1]) * scale_log2 > kRescaleLog2Threshold);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (raise) {
      alpha[r] = exp2_approx((row_max[r] - mx[r]) * scale_log2);
      row_max[r] = mx[r];
    }
    const float neg_max = -row_max[r] * scale_log2;
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j) {
      acc_s[j][2 * r] = exp2_approx(fmaf(acc_s[j][2 * r], scale_log2, neg_max));
      acc_s[j][2 * r + 1] = exp2_approx(fmaf(acc_s[j][2 * r + 1], scale_log2, neg_max));
      sum += acc_s[j][2 * r] + acc_s[j][2 * r + 1];
    }
    // Each lane keeps a partial sum of its own columns; the quad adds them up at the end.
    row_sum[r] = (raise ? row_sum[r] * alpha[r] : row_sum[r]) + sum;
  }
  return raise;
}

// O's rows times the running max's correction (softmax_scores' alpha).
template <int kHeadDim>
__device__ __forceinline__ void rescale_rows(float (&acc_o)[kHeadDim / 8][4], const float (&alpha)[2]) {
#pragma unroll
  for (int j = 0; j < kHeadDim / 8; ++j) {
    acc_o[j][0] *= alpha[0];
    acc_o[j][1] *= alpha[0];
    acc_o[j][2] *= alpha[1];
    acc_o[j][3] *= alpha[1];
  }
}

// Forward, one key tile, both parts: softmax_scores, then O rescaled at once where the max was raised.
template <int kBlockN, int kHeadDim, bool kCausal, bool kMasked>
__device__ __forceinline__ void online_softmax(float (&acc_s)[kBlockN / 8][4], float (&acc_o)[kHeadDim / 8][4],
                                               float (&row_max)[2], float (&row_sum)[2], int row0, int n0, int seqlen_k,
                                               float scale_log2, float mask_bias) {
  float alpha[2];
  if (softmax_scores<kBlockN, kCausal, kMasked>(acc_s, row_max, row_sum, alpha, row0, n0, seqlen_k, scale_log2,
                                                mask_bias))
    rescale_rows<kHeadDim>(acc_o, alpha);
}

// The forward epilogue's row statistics of this warp's 16 query rows from row0: L = m·scale + log(l)
// (the logsumexp of the scaled scores) to lse, rows past the last query skipped; inv = 1 / l of
// this thread's two rows, O's scale.
__device__ __forceinline__ void store_lse(const FlashParams& p, int b, int h, int row0, const float (&row_max)[2],
                                          const float (&row_sum)[2], float (&inv)[2]) {
  const int valid_rows = p.seqlen_q - row0;
  float* lse = p.lse + (static_cast<int64_t>(b) * p.heads + h) * p.seqlen_q + row0;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float l = quad_sum(row_sum[r]);
    inv[r] = 1.0f / l;
    if (threadIdx.x % 4 == 0 && frag_row(2 * r) < valid_rows) lse[frag_row(2 * r)] = row_max[r] * p.scale + logf(l);
  }
}

// Forward epilogue of this warp's 16 query rows from row0: L (store_lse), and O = acc / l to bf16
// rows; rows past the last query skipped.
template <int kHeadDim>
__device__ __forceinline__ void store_output(const FlashParams& p, int b, int h, int row0,
                                             const float (&acc_o)[kHeadDim / 8][4], const float (&row_max)[2],
                                             const float (&row_sum)[2]) {
  float inv[2];
  store_lse(p, b, h, row0, row_max, row_sum, inv);
  store_strip<kHeadDim>(head_row<bf16>(p.o, p.o_s, b, h, row0), p.o_s.row, acc_o, inv[0], inv[1], p.seqlen_q - row0);
}

// The RoPE table's rows from position `row` on (store_strip's `unrotate`), or null when the
// caller wants dQ and dK as they are (p.rope_cos_sin unset).
template <int kHeadDim>
__device__ __forceinline__ const float2* unrotate_rows(const FlashParams& p, int row) {
  return p.rope_cos_sin == nullptr
             ? nullptr
             : reinterpret_cast<const float2*>(p.rope_cos_sin) + static_cast<int64_t>(row) * (kHeadDim / 2);
}

// Backward epilogue of a dK/dV pass: this warp's 16 key rows from key0 of dK (times scale, the
// 1/sqrt(d) that Sᵀ's gradient carries; rotated back when p.rope_cos_sin is set) and dV, as bf16
// rows; rows past the last key skipped.
template <int kHeadDim>
__device__ __forceinline__ void store_dk_dv(const FlashParams& p, int b, int h, int key0,
                                            const float (&acc_dk)[kHeadDim / 8][4],
                                            const float (&acc_dv)[kHeadDim / 8][4]) {
  store_strip<kHeadDim>(head_row<bf16>(p.dk, p.dk_s, b, h, key0), p.dk_s.row, acc_dk, p.scale, p.scale,
                        p.seqlen_k - key0, unrotate_rows<kHeadDim>(p, key0));
  store_strip<kHeadDim>(head_row<bf16>(p.dv, p.dv_s, b, h, key0), p.dv_s.row, acc_dv, 1.0f, 1.0f, p.seqlen_k - key0);
}

// The dQ pass's per-row statistics of this thread's two rows (row0: the warp's first query):
// −L·log2(e) and delta, zero past the last query.
__device__ __forceinline__ void load_row_stats(const FlashParams& p, int b, int h, int row0, float (&neg_lse2)[2],
                                               float (&delta)[2]) {
  const int64_t base = (static_cast<int64_t>(b) * p.heads + h) * p.seqlen_q;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row0 + frag_row(2 * r);
    const bool valid = row < p.seqlen_q;
    neg_lse2[r] = valid ? -p.lse[base + row] * kLog2e : 0.0f;
    delta[r] = valid ? p.delta[base + row] : 0.0f;
  }
}

// Backward, rows are queries (the dQ pass): P = exp(scale·S − L_row) in place; masked entries
// (key past the end, or after the query when causal) exactly 0. neg_lse2[r] = −L·log2(e).
template <int kBlockN, bool kCausal, bool kMasked>
__device__ __forceinline__ void probs_by_row(float (&acc_s)[kBlockN / 8][4], const float (&neg_lse2)[2], int row0,
                                             int n0, int seqlen_k, float scale_log2) {
#pragma unroll
  for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float pv = exp2_approx(fmaf(acc_s[j][e], scale_log2, neg_lse2[e >> 1]));
      if constexpr (kMasked) {
        const int key = n0 + frag_col(j, e), query = row0 + frag_row(e);
        if (key >= seqlen_k || (kCausal && key > query)) pv = 0.0f;
      }
      acc_s[j][e] = pv;
    }
}

// dS = P ∘ (dP − delta_row), into acc_p.
template <int kBlockN>
__device__ __forceinline__ void ds_by_row(float (&acc_p)[kBlockN / 8][4], const float (&acc_dp)[kBlockN / 8][4],
                                          const float (&delta)[2]) {
#pragma unroll
  for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc_p[j][e] *= acc_dp[j][e] - delta[e >> 1];
}

// Backward, rows are keys and columns queries (the dK/dV pass computes Sᵀ = K·Qᵀ):
// Pᵀ = exp(scale·Sᵀ − L_column) in place, masked entries (query past the end, or before the key
// when causal) exactly 0. lse: the tile's L values; key0: key index of the strip's first row.
template <int kBlockM, bool kCausal, bool kMasked>
__device__ __forceinline__ void probs_by_col(float (&acc_s)[kBlockM / 8][4], const float* lse, int key0, int m0,
                                             int seqlen_q, float scale_log2) {
#pragma unroll
  for (int j = 0; j < kBlockM / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int col = frag_col(j, e);
      float pv = exp2_approx(fmaf(acc_s[j][e], scale_log2, -lse[col] * kLog2e));
      if constexpr (kMasked) {
        const int query = m0 + col, key = key0 + frag_row(e);
        if (query >= seqlen_q || (kCausal && key > query)) pv = 0.0f;
      }
      acc_s[j][e] = pv;
    }
}

// dSᵀ = Pᵀ ∘ (dPᵀ − delta_column), into acc_dp.
template <int kBlockM>
__device__ __forceinline__ void ds_by_col(float (&acc_dp)[kBlockM / 8][4], const float (&acc_p)[kBlockM / 8][4],
                                          const float* delta) {
#pragma unroll
  for (int j = 0; j < kBlockM / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc_dp[j][e] = acc_p[j][e] * (acc_dp[j][e] - delta[frag_col(j, e)]);
}

}  // namespace pt::cuda::flash
