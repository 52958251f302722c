// RMSNorm: one warp per row (rows are d_model long: a few KB, so a warp's registers and L1
// hold what the second pass re-reads). Math in fp32.
#include <algorithm>
#include <climits>

#include <type_traits>

#include "cuda/common.cuh"
#include "cuda/rmsnorm.h"

namespace pt::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarpSize;  // rows per block (forward)

// Calls body(c, v) for the row's columns handled by this lane: packs of kPack when kPacked.
template <bool kPacked, int N = kPacked ? kPack : 1, typename T, typename Body>
__device__ __forceinline__ void for_lane_cols(const T* row, int cols, int lane, Body body) {
  for (int c = lane * N; c < cols; c += kWarpSize * N) {
    float v[N];
    if constexpr (kPacked)
      load_pack<N>(row + c, v);
    else
      v[0] = to_float(row[c]);
    body(c, v);
  }
}

template <typename TY, bool kPacked>
__global__ void rmsnorm_forward_kernel(int64_t rows, int cols, float eps, TY* y, float* rstd, const float* x,
                                       const float* w) {
  constexpr int N = kPacked ? kPack : 1;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row = int64_t(blockIdx.x) * kWarps + threadIdx.x / kWarpSize;
  if (row >= rows) return;
  const float* xr = x + row * cols;
  float ss = 0.0f;
  for_lane_cols<kPacked>(xr, cols, lane, [&](int, const float(&v)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) ss += v[i] * v[i];
  });
  const float inv = 1.0f / sqrtf(warp_sum(ss) / float(cols) + eps);
  if (lane == 0) rstd[row] = inv;
  TY* yr = y + row * cols;
  for_lane_cols<kPacked>(xr, cols, lane, [&](int c, const float(&v)[N]) {
    float out[N];
    if constexpr (kPacked) {
      float wv[N];
      load_pack<N>(w + c, wv);
#pragma unroll
      for (int i = 0; i < N; ++i) out[i] = v[i] * inv * wv[i];
      store_pack<N>(yr + c, out);
    } else {
      yr[c] = from_float<TY>(v[0] * inv * w[c]);
    }
  });
}

// The forward with the row held in registers (kPacks packs of kPack per lane, up to
// 32·kPack·kPacks columns): every load of the row is issued before the first sum, where the
// loop above waits for each pack in turn. With one warp per row XL's 2048 rows fill a quarter
// of the GPU's warp slots, so the loop was latency-bound: 9.2 us per call, 1.4 TB/s (ncu, H200).
template <typename TY, int kPacks>
__global__ void rmsnorm_forward_rows_kernel(int64_t rows, int cols, float eps, TY* y, float* rstd, const float* x,
                                            const float* w) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row = int64_t(blockIdx.x) * kWarps + threadIdx.x / kWarpSize;
  if (row >= rows) return;
  const float* xr = x + row * cols;
  float v[kPacks][kPack];
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    const int c = (k * kWarpSize + lane) * kPack;
    if (c < cols) load_pack<kPack>(xr + c, v[k]);
  }
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < kPacks; ++k)
    if ((k * kWarpSize + lane) * kPack < cols)
#pragma unroll
      for (int i = 0; i < kPack; ++i) ss += v[k][i] * v[k][i];
  const float inv = 1.0f / sqrtf(warp_sum(ss) / float(cols) + eps);
  if (lane == 0) rstd[row] = inv;
  TY* yr = y + row * cols;
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    const int c = (k * kWarpSize + lane) * kPack;
    if (c < cols) {
      float wv[kPack], out[kPack];
      load_pack<kPack>(w + c, wv);
#pragma unroll
      for (int i = 0; i < kPack; ++i) out[i] = v[k][i] * inv * wv[i];
      store_pack<kPack>(yr + c, out);
    }
  }
}

// dx = inv·(dy⊙w) − inv³/C · x · Σ(dy⊙w⊙x), one warp per row, rows fully parallel.
// dw is rmsnorm_dw_kernel's: the first version summed dw in this kernel with a shared-memory
// atomic per element, and those atomics bound it (50 us per call on XL, 14 % of DRAM
// bandwidth, stalls on MIO: ncu, H200).
// dx_lowp (optional): dx rounded to bf16 in the same pass, the next GEMM's operand (the model's
// residual gradient as a bf16 copy, which would otherwise be a cast pass of its own).
template <typename TD, bool kPacked>
__global__ void rmsnorm_backward_dx_kernel(int64_t rows, int cols, bool accumulate, float* dx, __nv_bfloat16* dx_lowp,
                                           const TD* dy, const float* x, const float* w, const float* rstd) {
  constexpr int N = kPacked ? kPack : 1;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row = int64_t(blockIdx.x) * kWarps + threadIdx.x / kWarpSize;
  if (row >= rows) return;
  const float* xr = x + row * cols;
  const TD* dyr = dy + row * cols;
  float* dxr = dx + row * cols;
  const float inv = rstd[row];
  float dot = 0.0f;
  for_lane_cols<kPacked>(dyr, cols, lane, [&](int c, const float(&g)[N]) {
    float xv[N], wv[N];
    if constexpr (kPacked) {
      load_pack<N>(xr + c, xv);
      load_pack<N>(w + c, wv);
    } else {
      xv[0] = xr[c];
      wv[0] = w[c];
    }
#pragma unroll
    for (int i = 0; i < N; ++i) dot += g[i] * wv[i] * xv[i];
  });
  const float k = inv * inv * inv * warp_sum(dot) / float(cols);
  for_lane_cols<kPacked>(dyr, cols, lane, [&](int c, const float(&g)[N]) {
    float xv[N], wv[N], d[N];
    if constexpr (kPacked) {
      load_pack<N>(xr + c, xv);
      load_pack<N>(w + c, wv);
      if (accumulate) load_pack<N>(dxr + c, d);
    } else {
      xv[0] = xr[c];
      wv[0] = w[c];
      if (accumulate) d[0] = dxr[c];
    }
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const float di = inv * g[i] * wv[i] - k * xv[i];
      d[i] = accumulate ? d[i] + di : di;
    }
    if constexpr (kPacked) {
      store_pack<N>(dxr + c, d);
      if (dx_lowp) store_pack<N>(dx_lowp + row * cols + c, d);
    } else {
      dxr[c] = d[0];
      if (dx_lowp) dx_lowp[row * cols + c] = __float2bfloat16(d[0]);
    }
  });
}

// dw += Σ_rows dy⊙x·inv as column sums: block (32 columns × 8 row lanes) over one strip of
// columns and one slice of rows; each thread sums its column down the slice in a register,
// the block's 8 partial sums meet in shared memory, and one atomic per column and slice adds
// the result to dw. A bf16 dw (--grad-dtype bf16) cannot take fp32 atomics: the slices add into
// fp32 sums (scratch, zero on entry), and the strip's last block to finish (a ticket per strip,
// after a fence: every other slice's atomics are visible to it) rounds the sums into dw once
// and zeroes the sums and its ticket for the next call — no launch more than the fp32 path.
constexpr int kDwRowLanes = 8;
template <typename TD, typename TW>
__global__ void rmsnorm_dw_kernel(int64_t rows, int cols, int64_t rows_per_slice, TW* dw, float* sums,
                                  unsigned* tickets, const TD* dy, const float* x, const float* rstd) {
  __shared__ float part[kDwRowLanes][kWarpSize + 1];
  const int c = blockIdx.x * kWarpSize + threadIdx.x;
  const int64_t r_begin = int64_t(blockIdx.y) * rows_per_slice;
  const int64_t r_end = r_begin + rows_per_slice < rows ? r_begin + rows_per_slice : rows;
  float acc = 0.0f;
  if (c < cols)
    for (int64_t r = r_begin + threadIdx.y; r < r_end; r += kDwRowLanes)
      acc += to_float(dy[r * cols + c]) * x[r * cols + c] * rstd[r];
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kDwRowLanes; ++k) sum += part[k][threadIdx.x];
    if constexpr (std::is_same_v<TW, float>)
      atomicAdd(dw + c, sum);
    else
      atomicAdd(sums + c, sum);
  }
  if constexpr (!std::is_same_v<TW, float>) {
    __shared__ bool last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0) last = atomicAdd(tickets + blockIdx.x, 1u) == gridDim.y - 1;
    __syncthreads();
    if (!last) return;
    if (threadIdx.y == 0 && c < cols) {
      const float total = atomicExch(sums + c, 0.0f);
      dw[c] = from_float<TW>(to_float(dw[c]) + total);
    }
    if (threadIdx.x == 0 && threadIdx.y == 0) tickets[blockIdx.x] = 0;
  }
}

}  // namespace

void rmsnorm_forward(cudaStream_t s, Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& w, float eps) {
  const int64_t rows = x.size(0), cols = x.size(1);
  if (rows == 0) return;
  PT_CHECK(cols <= INT32_MAX, "rmsnorm: rows longer than 2^31 elements");
  dispatch_float(y.dtype(), [&](auto tag) {
    using TY = typename decltype(tag)::type;
    const bool packed = cols % kPack == 0 && aligned16(x.data()) && aligned16(w.data()) && aligned16(y.data());
    const unsigned blocks = unsigned(ceil_div(rows, kWarps));
    // Packs per lane for the register-resident row: the smallest of 1, 2, 4, 8 that holds it.
    const int64_t packs = ceil_div(cols, int64_t(kWarpSize) * kPack);
    auto kernel = !packed      ? rmsnorm_forward_kernel<TY, false>
                  : packs <= 1 ? rmsnorm_forward_rows_kernel<TY, 1>
                  : packs <= 2 ? rmsnorm_forward_rows_kernel<TY, 2>
                  : packs <= 4 ? rmsnorm_forward_rows_kernel<TY, 4>
                  : packs <= 8 ? rmsnorm_forward_rows_kernel<TY, 8>
                               : rmsnorm_forward_kernel<TY, true>;
    kernel<<<blocks, kThreads, 0, s>>>(rows, int(cols), eps, static_cast<TY*>(y.data()), rstd.data_as<float>(),
                                       x.data_as<const float>(), w.data_as<const float>());
    PT_CUDA_CHECK_LAUNCH();
  });
}

int64_t rmsnorm_dw_scratch_numel(int64_t cols) { return cols + ceil_div(cols, int64_t(kWarpSize)); }

void rmsnorm_backward(cudaStream_t s, Tensor& dx, Tensor& dw, const Tensor& dy, const Tensor& x, const Tensor& w,
                      const Tensor& rstd, bool accumulate, float* dw_scratch, Tensor* dx_lowp) {
  const int64_t rows = x.size(0), cols = x.size(1);
  if (rows == 0) return;
  PT_CHECK(cols <= INT32_MAX, "rmsnorm: rows longer than 2^31 elements");
  dispatch_float(dy.dtype(), [&](auto tag) {
    using TD = typename decltype(tag)::type;
    const bool packed = cols % kPack == 0 && aligned16(x.data()) && aligned16(w.data()) && aligned16(dy.data()) &&
                        aligned16(dx.data()) && (!dx_lowp || aligned16(dx_lowp->data()));
    // Row slices so that strips × slices is about four blocks per SM, each slice at least
    // 64 rows (the atomics per column stay few).
    const int64_t strips = ceil_div(cols, int64_t(kWarpSize));
    const int64_t want = std::max<int64_t>(1, int64_t(sm_count()) * 4 / strips);
    const int64_t slices = std::min<int64_t>({want, ceil_div(rows, int64_t(64)), 65535});
    const int64_t per_slice = ceil_div(rows, slices);
    const dim3 grid(unsigned(strips), unsigned(ceil_div(rows, per_slice))), block(kWarpSize, kDwRowLanes);
    if (dw.dtype() == DType::BF16) {
      PT_CHECK(dw_scratch, "rmsnorm_backward: a bf16 dw needs the fp32 scratch");
      rmsnorm_dw_kernel<TD, __nv_bfloat16>
          <<<grid, block, 0, s>>>(rows, int(cols), per_slice, static_cast<__nv_bfloat16*>(dw.data()), dw_scratch,
                                  reinterpret_cast<unsigned*>(dw_scratch + cols), static_cast<const TD*>(dy.data()),
                                  x.data_as<const float>(), rstd.data_as<const float>());
    } else {
      rmsnorm_dw_kernel<TD, float><<<grid, block, 0, s>>>(rows, int(cols), per_slice, dw.data_as<float>(), nullptr,
                                                          nullptr, static_cast<const TD*>(dy.data()),
                                                          x.data_as<const float>(), rstd.data_as<const float>());
    }
    PT_CUDA_CHECK_LAUNCH();
    // After dw: dx may alias dy.
    auto dx_kernel = packed ? rmsnorm_backward_dx_kernel<TD, true> : rmsnorm_backward_dx_kernel<TD, false>;
    dx_kernel<<<unsigned(ceil_div(rows, kWarps)), kThreads, 0, s>>>(
        rows, int(cols), accumulate, dx.data_as<float>(),
        dx_lowp ? static_cast<__nv_bfloat16*>(dx_lowp->data()) : nullptr, static_cast<const TD*>(dy.data()),
        x.data_as<const float>(), w.data_as<const float>(), rstd.data_as<const float>());
    PT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace pt::cuda
