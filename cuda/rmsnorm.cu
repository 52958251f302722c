// RMSNorm: one warp per row (rows are d_model long: a few KB, so a warp's registers and L1
// hold what the second pass re-reads). Math in fp32.
#include <algorithm>
#include <climits>

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
    if constexpr (kPacked) load_pack<N>(row + c, v);
    else v[0] = to_float(row[c]);
    body(c, v);
  }
}

template <typename TY, bool kPacked>
__global__ void rmsnorm_forward_kernel(int64_t rows, int cols, float eps, TY* y, float* rstd,
                                       const float* x, const float* w) {
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

// dx = inv·(dy⊙w) − inv³/C · x · Σ(dy⊙w⊙x); dw += Σ_rows dy⊙x·inv. Warps stride over rows;
// the block sums its rows' dw in shared memory and adds it to dw with one atomic per column.
template <typename TD, bool kPacked>
__global__ void rmsnorm_backward_kernel(int64_t rows, int cols, bool accumulate, float* dx,
                                        float* dw, const TD* dy, const float* x, const float* w,
                                        const float* rstd) {
  extern __shared__ float dw_block[];  // (cols)
  constexpr int N = kPacked ? kPack : 1;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) dw_block[c] = 0.0f;
  __syncthreads();
  const int lane = threadIdx.x % kWarpSize, warps = blockDim.x / kWarpSize;
  for (int64_t row = int64_t(blockIdx.x) * warps + threadIdx.x / kWarpSize; row < rows;
       row += int64_t(gridDim.x) * warps) {
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
        atomicAdd(dw_block + c + i, g[i] * xv[i] * inv);
      }
      if constexpr (kPacked) store_pack<N>(dxr + c, d);
      else dxr[c] = d[0];
    });
  }
  __syncthreads();
  for (int c = threadIdx.x; c < cols; c += blockDim.x) atomicAdd(dw + c, dw_block[c]);
}

}  // namespace

void rmsnorm_forward(cudaStream_t s, Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& w,
                     float eps) {
  const int64_t rows = x.size(0), cols = x.size(1);
  if (rows == 0) return;
  PT_CHECK(cols <= INT32_MAX, "rmsnorm: rows longer than 2^31 elements");
  dispatch_float(y.dtype(), [&](auto tag) {
    using TY = typename decltype(tag)::type;
    const bool packed = cols % kPack == 0 && aligned16(x.data()) && aligned16(w.data()) &&
                        aligned16(y.data());
    const unsigned blocks = unsigned(ceil_div(rows, kWarps));
    auto kernel = packed ? rmsnorm_forward_kernel<TY, true> : rmsnorm_forward_kernel<TY, false>;
    kernel<<<blocks, kThreads, 0, s>>>(rows, int(cols), eps, static_cast<TY*>(y.data()),
                                       rstd.data_as<float>(), x.data_as<const float>(),
                                       w.data_as<const float>());
    PT_CUDA_CHECK_LAUNCH();
  });
}

void rmsnorm_backward(cudaStream_t s, Tensor& dx, Tensor& dw, const Tensor& dy, const Tensor& x,
                      const Tensor& w, const Tensor& rstd, bool accumulate) {
  const int64_t rows = x.size(0), cols = x.size(1);
  if (rows == 0) return;
  const size_t smem = size_t(cols) * sizeof(float);
  int dev = 0, smem_max = 0;
  PT_CUDA_CHECK(cudaGetDevice(&dev));
  PT_CUDA_CHECK(cudaDeviceGetAttribute(&smem_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  PT_CHECK(smem <= size_t(smem_max), "rmsnorm_backward: rows of " + std::to_string(cols) +
                                         " elements exceed the shared-memory budget of one block");
  dispatch_float(dy.dtype(), [&](auto tag) {
    using TD = typename decltype(tag)::type;
    const bool packed = cols % kPack == 0 && aligned16(x.data()) && aligned16(w.data()) &&
                        aligned16(dy.data()) && aligned16(dx.data());
    auto kernel = packed ? rmsnorm_backward_kernel<TD, true> : rmsnorm_backward_kernel<TD, false>;
    if (smem > 48 * 1024)
      PT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    // Two blocks per SM at most: each block pays one atomic per column at the end.
    const unsigned blocks = unsigned(std::min<int64_t>(ceil_div(rows, kWarps), int64_t(sm_count()) * 2));
    kernel<<<blocks, kThreads, smem, s>>>(rows, int(cols), accumulate, dx.data_as<float>(),
                                          dw.data_as<float>(), static_cast<const TD*>(dy.data()),
                                          x.data_as<const float>(), w.data_as<const float>(),
                                          rstd.data_as<const float>());
    PT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace pt::cuda
