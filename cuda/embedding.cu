// Embedding gather (a copy of rows, no arithmetic) and its scatter-add with fp32 atomics.
#include <cmath>

#include "cuda/common.cuh"
#include "cuda/embedding.h"

namespace pt::cuda {

namespace {

constexpr int kThreads = 256;

// out[n, :] = weight[ids[n], :] in units of W (uint4 = 16 bytes, or one element): row_units
// units per row. An id outside [0, vocab) writes NaN so the bug shows instead of reading
// someone else's memory.
template <typename W, typename T>
__global__ void gather_rows_kernel(int64_t rows, int64_t row_units, int64_t vocab, W* out, const W* weight,
                                   const int32_t* ids) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * row_units; i += stride) {
    const int64_t r = i / row_units, u = i % row_units;
    const int32_t id = ids[r];
    if (id >= 0 && id < vocab) {
      out[i] = weight[int64_t(id) * row_units + u];
    } else {
      W nan_unit;
      T* e = reinterpret_cast<T*>(&nan_unit);
      for (int k = 0; k < int(sizeof(W) / sizeof(T)); ++k) e[k] = from_float<T>(NAN);
      out[i] = nan_unit;
    }
  }
}

// dweight[ids[n], c] += dout[n, c]; one thread per (n, pack of columns).
template <typename TD>
__global__ void scatter_add_kernel(int64_t rows, int64_t cols, bool packed, int64_t vocab, float* dweight,
                                   const TD* dout, const int32_t* ids) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t per_row = packed ? cols / kPack : cols;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * per_row; i += stride) {
    const int64_t r = i / per_row, u = i % per_row;
    const int32_t id = ids[r];
    if (id < 0 || id >= vocab) continue;  // NaN already flagged this id in the forward pass
    float* dst = dweight + int64_t(id) * cols;
    if (packed) {
      float v[kPack];
      load_pack<kPack>(dout + r * cols + u * kPack, v);
#pragma unroll
      for (int k = 0; k < kPack; ++k) atomicAdd(dst + u * kPack + k, v[k]);
    } else {
      atomicAdd(dst + u, to_float(dout[r * cols + u]));
    }
  }
}

}  // namespace

void embedding_forward(cudaStream_t s, Tensor& out, const Tensor& ids, const Tensor& weight) {
  const int64_t rows = ids.numel(), cols = weight.size(1), vocab = weight.size(0);
  if (rows * cols == 0) return;
  dispatch_float(weight.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t row_bytes = cols * int64_t(sizeof(T));
    if (row_bytes % 16 == 0 && aligned16(out.data()) && aligned16(weight.data())) {
      const int64_t units = row_bytes / 16;
      gather_rows_kernel<uint4, T><<<grid_for(rows * units, kThreads), kThreads, 0, s>>>(
          rows, units, vocab, static_cast<uint4*>(out.data()), static_cast<const uint4*>(weight.data()),
          ids.data_as<const int32_t>());
    } else {
      gather_rows_kernel<T, T><<<grid_for(rows * cols, kThreads), kThreads, 0, s>>>(
          rows, cols, vocab, static_cast<T*>(out.data()), static_cast<const T*>(weight.data()),
          ids.data_as<const int32_t>());
    }
    PT_CUDA_CHECK_LAUNCH();
  });
}

void embedding_backward(cudaStream_t s, Tensor& dweight, const Tensor& dout, const Tensor& ids) {
  const int64_t rows = ids.numel(), cols = dweight.size(1), vocab = dweight.size(0);
  if (rows * cols == 0) return;
  dispatch_float(dout.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const bool packed = cols % kPack == 0 && aligned16(dout.data());
    const int64_t work = rows * (packed ? cols / kPack : cols);
    scatter_add_kernel<<<grid_for(work, kThreads), kThreads, 0, s>>>(
        rows, cols, packed, vocab, dweight.data_as<float>(), static_cast<const T*>(dout.data()),
        ids.data_as<const int32_t>());
    PT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace pt::cuda
