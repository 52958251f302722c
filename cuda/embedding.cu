// Embedding gather (a copy of rows, no arithmetic) and its scatter-add: fp32 atomics into an fp32
// gradient, or per-id fp32 sums rounded once into a bf16 one.
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

// dweight[ids[n], c] += dout[n, c]; one thread per (n, pack of columns). With `slot` the row
// added to is slot[ids[n]] instead of ids[n] (the bf16 path's fp32 sums, below).
template <typename TD>
__global__ void scatter_add_kernel(int64_t rows, int64_t cols, bool packed, int64_t vocab, float* dweight,
                                   const TD* dout, const int32_t* ids, const int32_t* slot) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t per_row = packed ? cols / kPack : cols;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * per_row; i += stride) {
    const int64_t r = i / per_row, u = i % per_row;
    const int32_t id = ids[r];
    if (id < 0 || id >= vocab) continue;  // NaN already flagged this id in the forward pass
    float* dst = dweight + int64_t(slot ? slot[id] : id) * cols;
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

// A bf16 dweight (--grad-dtype bf16) gets each distinct id's rows summed in fp32 and rounded
// into it once: bf16 atomics would round at every add, and a token repeated k times in a batch
// would lose about log2(k) bits of its gradient. first (V) holds, per id, the first row that
// carries it (any value above every row index elsewhere); sums (N, C) fp32 is zero on entry and
// receives, in the first row of each id, the sum of that id's rows.
__global__ void first_row_kernel(int64_t rows, int64_t vocab, const int32_t* ids, int32_t* first) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < rows; r += stride) {
    const int32_t id = ids[r];
    if (id >= 0 && id < vocab) atomicMin(first + id, int32_t(r));
  }
}

// dweight[id, c] = bf16(dweight[id, c] + sums[first[id], c]) for each id present: the thread
// of row r writes when r is its id's first row.
__global__ void add_sums_kernel(int64_t rows, int64_t cols, int64_t vocab, __nv_bfloat16* dweight, const float* sums,
                                const int32_t* ids, const int32_t* first) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * cols; i += stride) {
    const int64_t r = i / cols, c = i % cols;
    const int32_t id = ids[r];
    if (id < 0 || id >= vocab || first[id] != r) continue;
    __nv_bfloat16* dst = dweight + int64_t(id) * cols + c;
    *dst = __float2bfloat16(__bfloat162float(*dst) + sums[i]);
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

void embedding_backward(cudaStream_t s, Tensor& dweight, const Tensor& dout, const Tensor& ids,
                        const EmbeddingBf16Scratch& scratch) {
  const int64_t rows = ids.numel(), cols = dweight.size(1), vocab = dweight.size(0);
  if (rows * cols == 0) return;
  const bool bf16 = dweight.dtype() == DType::BF16;
  int32_t* first = nullptr;
  float* sums = nullptr;
  if (bf16) {
    first = scratch.first->data_as<int32_t>();
    sums = scratch.sums->data_as<float>();
    // 0x7f7f7f7f: above every row index.
    PT_CUDA_CHECK(cudaMemsetAsync(first, 0x7f, size_t(vocab) * sizeof(int32_t), s));
    PT_CUDA_CHECK(cudaMemsetAsync(sums, 0, size_t(rows * cols) * sizeof(float), s));
    first_row_kernel<<<grid_for(rows, kThreads), kThreads, 0, s>>>(rows, vocab, ids.data_as<const int32_t>(), first);
    PT_CUDA_CHECK_LAUNCH();
  }
  dispatch_float(dout.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const bool packed = cols % kPack == 0 && aligned16(dout.data());
    const int64_t work = rows * (packed ? cols / kPack : cols);
    scatter_add_kernel<<<grid_for(work, kThreads), kThreads, 0, s>>>(
        rows, cols, packed, vocab, bf16 ? sums : dweight.data_as<float>(), static_cast<const T*>(dout.data()),
        ids.data_as<const int32_t>(), first);
    PT_CUDA_CHECK_LAUNCH();
  });
  if (bf16) {
    add_sums_kernel<<<grid_for(rows * cols, kThreads), kThreads, 0, s>>>(
        rows, cols, vocab, static_cast<__nv_bfloat16*>(dweight.data()), sums, ids.data_as<const int32_t>(), first);
    PT_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace pt::cuda
