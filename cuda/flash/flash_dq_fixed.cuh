#pragma once
// dQ summed in 32-bit fixed point (tiles "…/fxp"): the single pass made reproducible.
//
// The single pass adds each key tile's partial dS·K of a query tile into one dQ buffer. In fp32
// those additions round, so their order, which changes from run to run, changes dQ. Integer
// addition does not round: the same partials give the same sum in any order (two's complement
// wraps, but a sum that fits comes out exact whatever the partial sums did on the way). So each
// partial is scaled by a power of two, rounded to int32 once, by the block that made it (its own
// fixed order), and added with integer reductions: dQ is the same bit for bit from run to run.
//
// The scale has to fit every row's sum, and every partial, in 31 bits without knowing them first.
// A bound from the inputs: with P_ij ≥ 0 and Σ_j P_ij = 1,
//   |Σ_{j ∈ any key subset} dS_ij K_jc| ≤ max_j |dP_ij − delta_i| · max |K|
//                                     ≤ 2 ‖dO_i‖ · max_j ‖V_j‖ · max |K|        (dP_ij = dO_i·V_j,
//                                                                              |delta_i| = |dO_i·O_i| ≤ ‖dO_i‖ max_j
//                                                                              ‖V_j‖)
// The delta kernel, which reads dO anyway, writes row i's exponent e_i with 2‖dO_i‖ ≤ 2^e_i, and
// folds max |K| and max Σ V² of each head into two words (atomicMax on the fp32 bits). Row i's
// scale is 2^s with s = kDqFixedTop − e_i − E_h: every partial, and the sum, is at most 2^29 in
// magnitude (a factor 2 below int32's 2^30 … 2^31 for the bf16 and fp32 rounding of P and of the
// bound itself). The resolution is 2^-29 of the bound, so dQ loses precision only where the bound
// is loose by more than about 2^15. Measured against the fp64 reference (FlashGpu.FixedPoint-
// DqIsAsAccurateAsFp32Accumulation: K, V scaled by 16 with dO by 1e-4, and one key 1000 times the
// others), dQ's error is the fp32 sum's to three digits: both are bf16's rounding of dS.
//
// Non-finite inputs: a row whose ‖dO‖ or delta (which carries O, so Q, K, V through the forward)
// is not finite, or a head whose K or V is not, is poisoned: its partials are not added and its dQ
// is stored as NaN, as the fp32 sum would have it. So is a row whose bound is beyond 2^(29+126),
// where 2^s would leave fp32's range (no finite bf16 training reaches that).
#include <cstdint>

namespace pt::cuda {
namespace flash {

constexpr int kDqFixedTop = 29;                         // |partial · 2^s| ≤ 2^kDqFixedTop
constexpr int kDqExpPoison = 0x40000000;                // row exponent or head exponent: not finite
constexpr int kDqExpOfZero = -1000;                     // the exponent of a zero bound: any scale fits
constexpr int kDqFixedMinS = -126, kDqFixedMaxS = 126;  // 2^s and 2^-s both normal fp32

// The smallest e with x ≤ 2^e, for finite x > 0 (denormals included).
__device__ __forceinline__ int ceil_log2(float x) {
  int e;
  const float m = frexpf(x, &e);  // x = m · 2^e, m in [0.5, 1)
  return m == 0.5f ? e - 1 : e;
}

// Row i's exponent from Σ_c dO_ic² (n2) and delta_i: the smallest e with 2 sqrt(n2) ≤ 2^e.
__device__ __forceinline__ int dq_fixed_row_exp(float n2, float delta) {
  if (!isfinite(n2) || !isfinite(delta)) return kDqExpPoison;
  if (n2 == 0.0f) return kDqExpOfZero;
  const int c = ceil_log2(n2);   // sqrt(n2) ≤ 2^(c / 2) ≤ 2^ceil(c / 2)
  return (c + (c & 1)) / 2 + 1;  // ceil(c / 2), + 1 for the factor 2
}

// The head's exponent from its two words (fp32 bits of max |K| and of max Σ V²): the smallest E
// with max |K| · max ‖V‖ ≤ 2^E.
__device__ __forceinline__ int dq_fixed_head_exp(const int* words) {
  const int k_bits = words[0], v2_bits = words[1];
  if (k_bits >= 0x7f800000 || v2_bits >= 0x7f800000) return kDqExpPoison;  // inf or NaN (sign cleared)
  if (k_bits == 0 || v2_bits == 0) return kDqExpOfZero;
  const int c = ceil_log2(__int_as_float(v2_bits));
  return ceil_log2(__int_as_float(k_bits)) + (c + (c & 1)) / 2;
}

// Row scale exponent s (partials are multiplied by 2^s), or kDqExpPoison.
__device__ __forceinline__ int dq_fixed_scale_exp(int row_exp, int head_exp) {
  if (row_exp == kDqExpPoison || head_exp == kDqExpPoison) return kDqExpPoison;
  const int s = kDqFixedTop - row_exp - head_exp;
  if (s < kDqFixedMinS) return kDqExpPoison;   // the bound is beyond what 2^s can bring under 2^29
  return s > kDqFixedMaxS ? kDqFixedMaxS : s;  // a smaller scale still fits
}

// 2^e as fp32, e in [−126, 127].
__device__ __forceinline__ float exp2_int(int e) { return __int_as_float((e + 127) << 23); }

// The partial's scale 2^s (0 for a poisoned row: nothing added) and the stored dQ's factor 2^-s
// (NaN for a poisoned row).
__device__ __forceinline__ float dq_fixed_scale(int s) { return s == kDqExpPoison ? 0.0f : exp2_int(s); }
__device__ __forceinline__ float dq_fixed_unscale(int s) {
  return s == kDqExpPoison ? __int_as_float(0x7fc00000) : exp2_int(-s);
}

// x · 2^s rounded to the nearest int32 (ties to even; saturating), once, in the block that made it.
__device__ __forceinline__ int dq_fixed_round(float x) { return __float2int_rn(x); }
// global += v as int32, atomically in L2, nothing returned (atomicAdd with its result unused
// compiles to a reduction; the compiler folds each word's constant offset into the instruction,
// where inline PTX took a 64-bit address register for each of a thread's 32 words and spilled).
// Lanes of a warp write consecutive words: scattered 4-byte reductions (stride 16 bytes) ran the
// leaderboard backward 2.4× slower.
__device__ __forceinline__ void red_add_s32(int* dst, int v) { atomicAdd(dst, v); }

// Fixed-point layout of a 64-query tile: word (j, e, f) — column tile j, fragment element e, the
// warpgroup's thread f — at j·512 + e·128 + f (the fp32 layout keeps float4 (j, f) at j·128 + f).
__device__ __forceinline__ int fixed_order_word(int j, int e, int f) { return j * 512 + e * 128 + f; }

}  // namespace flash
}  // namespace pt::cuda
