// FlashAttention-2 forward and backward for fp32 inputs on CUDA cores (FFMA, fp32 throughout).
// TF32 tensor cores would be faster but round operands to 10 mantissa bits (~1e-3 relative
// error), far outside the fp32 tolerance the tests hold these kernels to; fp32 is the
// precise path, bf16 the fast one.
//
// Same algorithms and loop structure as the bf16 kernels (flash_fwd_bf16.cu, flash_bwd_bf16.cu),
// in their plainest form: 128 threads, 32 × 32 tiles in shared memory, four lanes (a quad)
// per tile row, each lane owning every fourth score column and every fourth output column.
#include "cuda/common.cuh"
#include "cuda/flash/flash_common.cuh"
#include "cuda/flash/flash_params.h"

namespace pt::cuda {
namespace flash_fp32 {
namespace {

constexpr int kTile = 32;            // rows per query tile and per key tile
constexpr int kThreads = 4 * kTile;  // a quad per row

// Shared rows padded by one float: the quad's four rows (stride kHeadDim + 1, odd) and a
// warp's eight rows fall in distinct banks.
template <int kHeadDim>
constexpr int ld() {
  return kHeadDim + 1;
}

// Rows [row0, row0 + kTile) of a (T, D) fp32 matrix into shared memory; zeros past `rows`.
template <int kHeadDim>
__device__ __forceinline__ void load_tile(float* dst, const float* src, int64_t row_stride, int row0, int rows) {
  for (int idx = threadIdx.x; idx < kTile * kHeadDim; idx += kThreads) {
    const int r = idx / kHeadDim, c = idx % kHeadDim;
    dst[r * ld<kHeadDim>() + c] = row0 + r < rows ? src[(row0 + r) * row_stride + c] : 0.0f;
  }
}

// Key rows [n0, n0 + kTile) of K and V (of tk), and query rows [m0, m0 + kTile) of Q and dO (of tq).
template <int kHeadDim>
__device__ __forceinline__ void load_kv(float* sK, float* sV, const HeadRows<float>& rows, const FlashParams& p, int n0,
                                        int tk) {
  load_tile<kHeadDim>(sK, rows.k, p.k_s.row, n0, tk);
  load_tile<kHeadDim>(sV, rows.v, p.v_s.row, n0, tk);
}
template <int kHeadDim>
__device__ __forceinline__ void load_q_do(float* sQ, float* sdO, const HeadRows<float>& rows, const float* d_o,
                                          const FlashParams& p, int m0, int tq) {
  load_tile<kHeadDim>(sQ, rows.q, p.q_s.row, m0, tq);
  load_tile<kHeadDim>(sdO, d_o, p.do_s.row, m0, tq);
}
__device__ __forceinline__ void load_vec(float* dst, const float* src, int row0, int rows) {
  if (threadIdx.x < kTile) dst[threadIdx.x] = row0 + threadIdx.x < rows ? src[row0 + threadIdx.x] : 0.0f;
}

// out[i] = a_row · b_row(c4 + 4i) for the 8 columns this lane owns.
template <int kHeadDim>
__device__ __forceinline__ void row_dots(float (&out)[kTile / 4], const float* a_row, const float* b_tile, int c4) {
#pragma unroll
  for (int i = 0; i < kTile / 4; ++i) out[i] = 0.0f;
  for (int c = 0; c < kHeadDim; ++c) {
    const float a = a_row[c];
#pragma unroll
    for (int i = 0; i < kTile / 4; ++i) out[i] = fmaf(a, b_tile[(c4 + 4 * i) * ld<kHeadDim>() + c], out[i]);
  }
}

// acc[j] (column c4 + 4j) += Σ_n w[n] · tile[n][c4 + 4j], where w[n] lives in lane (n % 4) of
// this quad as w_own[n / 4]: broadcast across the quad by shuffles.
template <int kHeadDim>
__device__ __forceinline__ void accumulate_rows(float (&acc)[kHeadDim / 4], const float (&w_own)[kTile / 4],
                                                const float* tile, int c4) {
  const int quad_base = (threadIdx.x % 32) & ~3;
#pragma unroll
  for (int n = 0; n < kTile; ++n) {
    const float w = __shfl_sync(0xffffffffu, w_own[n / 4], quad_base + n % 4);
#pragma unroll
    for (int j = 0; j < kHeadDim / 4; ++j) acc[j] = fmaf(w, tile[n * ld<kHeadDim>() + c4 + 4 * j], acc[j]);
  }
}

// Shared memory: (kTile, ld) tiles one after another, then (the dK/dV pass) two vectors of kTile.
// smem_bytes(n): its size with n tiles; smem_tile(i): tile i.
template <int kHeadDim>
constexpr int smem_bytes(int tiles) {
  return tiles * kTile * ld<kHeadDim>() * 4 + 2 * kTile * 4;
}
template <int kHeadDim>
__device__ __forceinline__ float* smem_tile(int i) {
  extern __shared__ float smem[];
  return smem + i * kTile * ld<kHeadDim>();
}

template <int kHeadDim, bool kCausal>
__global__ void __launch_bounds__(kThreads) fwd_kernel(const FlashParams p) {
  begin_chained_kernel();  // launched by launch_chained or launch_flash_kernel
  float *sQ = smem_tile<kHeadDim>(0), *sK = smem_tile<kHeadDim>(1), *sV = smem_tile<kHeadDim>(2);
  const auto [m0, h, b] = query_tile_rows<kTile>(p);
  const int r = threadIdx.x / 4, c4 = threadIdx.x % 4;
  const int tq = p.seqlen_q, tk = p.seqlen_k, row = m0 + r;
  const HeadRows<float> rows(p, b, h, 0, 0);

  load_tile<kHeadDim>(sQ, rows.q, p.q_s.row, m0, tq);
  float acc[kHeadDim / 4] = {};
  float m = -INFINITY, l = 0.0f;  // running max and this lane's share of the running sum
  const int n_end = kCausal ? min(tk, m0 + kTile) : tk;
  for (int n0 = 0; n0 < n_end; n0 += kTile) {
    __syncthreads();  // previous tile's K, V fully used
    load_kv<kHeadDim>(sK, sV, rows, p, n0, tk);
    __syncthreads();
    float s[kTile / 4];
    row_dots<kHeadDim>(s, sQ + r * ld<kHeadDim>(), sK, c4);
    float mx = m;
#pragma unroll
    for (int i = 0; i < kTile / 4; ++i) {
      const int col = n0 + c4 + 4 * i;
      s[i] *= p.scale;
      if (col >= tk)
        s[i] = -INFINITY;
      else if (kCausal && col > row)
        s[i] += kMaskedScoreBias;
      mx = fmaxf(mx, s[i]);
    }
    mx = quad_max(mx);
    const float alpha = expf(m - mx);  // 0 on the first tile (m = -inf)
    m = mx;
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kTile / 4; ++i) sum += (s[i] = expf(s[i] - mx));
    l = l * alpha + sum;
#pragma unroll
    for (int j = 0; j < kHeadDim / 4; ++j) acc[j] *= alpha;
    accumulate_rows<kHeadDim>(acc, s, sV, c4);
  }
  l = quad_sum(l);
  if (row < tq) {
    float* o = head_row<float>(p.o, p.o_s, b, h, row);
#pragma unroll
    for (int j = 0; j < kHeadDim / 4; ++j) o[c4 + 4 * j] = acc[j] / l;
    if (c4 == 0) p.lse[(static_cast<int64_t>(b) * p.heads + h) * tq + row] = m + logf(l);
  }
}

// delta = rowsum(O ∘ dO), one quad per row.
template <int kHeadDim>
__global__ void __launch_bounds__(kThreads) delta_kernel(const FlashParams p) {
  begin_chained_kernel();  // launched by launch_chained or launch_flash_kernel
  const int m0 = blockIdx.x * kTile, h = blockIdx.y, b = blockIdx.z;
  const int row = m0 + threadIdx.x / 4, c4 = threadIdx.x % 4;
  float s = 0.0f;
  if (row < p.seqlen_q) {
    const float* o = head_row<const float>(p.o, p.o_s, b, h, row);
    const float* d_o = head_row<const float>(p.dout, p.do_s, b, h, row);
    for (int c = c4; c < kHeadDim; c += 4) s = fmaf(o[c], d_o[c], s);
  }
  s = quad_sum(s);
  if (row < p.seqlen_q && c4 == 0) p.delta[(static_cast<int64_t>(b) * p.heads + h) * p.seqlen_q + row] = s;
}

// dK, dV for one key tile: this quad's key row against every query tile that sees it.
template <int kHeadDim, bool kCausal>
__global__ void __launch_bounds__(kThreads) dkdv_kernel(const FlashParams p) {
  begin_chained_kernel();  // launched by launch_chained or launch_flash_kernel
  float *sK = smem_tile<kHeadDim>(0), *sV = smem_tile<kHeadDim>(1), *sQ = smem_tile<kHeadDim>(2);
  float *sdO = smem_tile<kHeadDim>(3), *sL = smem_tile<kHeadDim>(4), *sD = sL + kTile;  // sL, sD: (kTile)
  const auto [n0, h, b] = key_tile_rows<kTile>(p);
  const int r = threadIdx.x / 4, c4 = threadIdx.x % 4, key = n0 + r;
  const int tq = p.seqlen_q, tk = p.seqlen_k;
  const int64_t bh = static_cast<int64_t>(b) * p.heads + h;
  const HeadRows<float> rows(p, b, h, 0, 0);
  const float* d_o = head_row<const float>(p.dout, p.do_s, b, h);

  load_kv<kHeadDim>(sK, sV, rows, p, n0, tk);
  float dk[kHeadDim / 4] = {}, dv[kHeadDim / 4] = {};
  for (int m0 = kCausal ? n0 / kTile * kTile : 0; m0 < tq; m0 += kTile) {
    __syncthreads();
    load_q_do<kHeadDim>(sQ, sdO, rows, d_o, p, m0, tq);
    load_vec(sL, p.lse + bh * tq, m0, tq);
    load_vec(sD, p.delta + bh * tq, m0, tq);
    __syncthreads();
    float pt[kTile / 4], dpt[kTile / 4];  // Pᵀ and dPᵀ for (key, query m0 + c4 + 4i)
    row_dots<kHeadDim>(pt, sK + r * ld<kHeadDim>(), sQ, c4);
    row_dots<kHeadDim>(dpt, sV + r * ld<kHeadDim>(), sdO, c4);
#pragma unroll
    for (int i = 0; i < kTile / 4; ++i) {
      const int col = c4 + 4 * i, query = m0 + col;
      const bool masked = query >= tq || (kCausal && key > query);
      pt[i] = masked ? 0.0f : expf(pt[i] * p.scale - sL[col]);
      dpt[i] = pt[i] * (dpt[i] - sD[col]);  // dSᵀ
    }
    accumulate_rows<kHeadDim>(dv, pt, sdO, c4);  // dV += Pᵀ dO
    accumulate_rows<kHeadDim>(dk, dpt, sQ, c4);  // dK += dSᵀ Q
  }
  if (key < tk) {
    float* dkp = head_row<float>(p.dk, p.dk_s, b, h, key);
    float* dvp = head_row<float>(p.dv, p.dv_s, b, h, key);
#pragma unroll
    for (int j = 0; j < kHeadDim / 4; ++j) {
      dkp[c4 + 4 * j] = dk[j] * p.scale;
      dvp[c4 + 4 * j] = dv[j];
    }
  }
}

// dQ for one query tile: this quad's query row against every key tile it sees.
template <int kHeadDim, bool kCausal>
__global__ void __launch_bounds__(kThreads) dq_kernel(const FlashParams p) {
  begin_chained_kernel();  // launched by launch_chained or launch_flash_kernel
  float *sQ = smem_tile<kHeadDim>(0), *sdO = smem_tile<kHeadDim>(1);
  float *sK = smem_tile<kHeadDim>(2), *sV = smem_tile<kHeadDim>(3);
  const FlashBlock blk = query_tile_block(p);
  const int m0 = blk.tile * kTile, h = blk.h, b = blk.b;
  const int r = threadIdx.x / 4, c4 = threadIdx.x % 4, row = m0 + r;
  const int tq = p.seqlen_q, tk = p.seqlen_k;
  const int64_t bh = static_cast<int64_t>(b) * p.heads + h;
  const HeadRows<float> rows(p, b, h, 0, 0);
  const float* d_o = head_row<const float>(p.dout, p.do_s, b, h);

  load_q_do<kHeadDim>(sQ, sdO, rows, d_o, p, m0, tq);
  const float L = row < tq ? p.lse[bh * tq + row] : 0.0f;
  const float D = row < tq ? p.delta[bh * tq + row] : 0.0f;
  float dq[kHeadDim / 4] = {};
  const int n_end = kCausal ? min(tk, m0 + kTile) : tk;
  for (int n0 = 0; n0 < n_end; n0 += kTile) {
    __syncthreads();
    load_kv<kHeadDim>(sK, sV, rows, p, n0, tk);
    __syncthreads();
    float s[kTile / 4], dp[kTile / 4];
    row_dots<kHeadDim>(s, sQ + r * ld<kHeadDim>(), sK, c4);
    row_dots<kHeadDim>(dp, sdO + r * ld<kHeadDim>(), sV, c4);
#pragma unroll
    for (int i = 0; i < kTile / 4; ++i) {
      const int key = n0 + c4 + 4 * i;
      const bool masked = key >= tk || (kCausal && key > row);
      const float pv = masked ? 0.0f : expf(s[i] * p.scale - L);
      s[i] = pv * (dp[i] - D);  // dS
    }
    accumulate_rows<kHeadDim>(dq, s, sK, c4);  // dQ += dS K
  }
  if (row < tq) {
    float* dqp = head_row<float>(p.dq, p.dq_s, b, h, row);
#pragma unroll
    for (int j = 0; j < kHeadDim / 4; ++j) dqp[c4 + 4 * j] = dq[j] * p.scale;
  }
}

dim3 grid_q(const FlashParams& p) { return flash_grid(p, p.seqlen_q, kTile); }
dim3 grid_k(const FlashParams& p) { return flash_grid(p, p.seqlen_k, kTile); }

template <int kHeadDim, bool kCausal>
void fwd(const FlashParams& p, cudaStream_t stream) {
  launch_flash_kernel(fwd_kernel<kHeadDim, kCausal>, grid_q(p), kThreads, smem_bytes<kHeadDim>(3), stream, p);
}

template <int kHeadDim, bool kCausal>
void bwd(const FlashParams& p, cudaStream_t stream) {
  launch_chained(delta_kernel<kHeadDim>, grid_q(p), kThreads, 0, stream, p);
  PT_CUDA_CHECK_LAUNCH();
  launch_flash_kernel(dkdv_kernel<kHeadDim, kCausal>, grid_k(p), kThreads, smem_bytes<kHeadDim>(4), stream, p);
  launch_flash_kernel(dq_kernel<kHeadDim, kCausal>, grid_q(p), kThreads, smem_bytes<kHeadDim>(4), stream, p);
}

}  // namespace
}  // namespace flash_fp32

void flash_fwd_fp32(const FlashParams& p, cudaStream_t stream) {
  const bool launched = flash_head_dim_switch(p.head_dim, p.causal, [&](auto d, auto causal) {
    flash_fp32::fwd<decltype(d)::value, decltype(causal)::value>(p, stream);
  });
  PT_CHECK(launched, "flash attention: no fp32 kernel for head dimension " + std::to_string(p.head_dim));
}
void flash_bwd_fp32(const FlashParams& p, cudaStream_t stream) {
  const bool launched = flash_head_dim_switch(p.head_dim, p.causal, [&](auto d, auto causal) {
    flash_fp32::bwd<decltype(d)::value, decltype(causal)::value>(p, stream);
  });
  PT_CHECK(launched, "flash attention: no fp32 kernel for head dimension " + std::to_string(p.head_dim));
}

}  // namespace pt::cuda
