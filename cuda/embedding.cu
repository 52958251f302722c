// Embedding gather (a copy of rows, no arithmetic) and its scatter-add, deterministic: the rows
// are sorted by id and each id's rows summed in a fixed order, then added to its gradient row once.
#include <algorithm>
#include <cmath>
#include <cub/device/device_radix_sort.cuh>

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

// The backward sorts the rows by id so that each id's rows sit together (a run) and one thread
// per (run, columns) sums them in a fixed order: fp32 atomics would add them in whatever order
// the threads arrive, and float addition is not associative, so the gradient's bits would vary
// from run to run. keys[r] = ids[r] where it lies in [0, vocab), else vocab: every skipped id
// sorts after the real ones (the sort reads only the bits up to vocab, and a raw negative id
// would sort on its low bits among them). row_of[r] = r, carried along by the sort.
__global__ void sort_keys_kernel(int64_t rows, int64_t vocab, const int32_t* ids, uint32_t* keys, int32_t* row_of) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < rows; r += stride) {
    const int32_t id = ids[r];
    keys[r] = (id >= 0 && id < vocab) ? uint32_t(id) : uint32_t(vocab);
    row_of[r] = int32_t(r);
  }
}

// Rows of a run loaded before any of them is added: a long run (a frequent token) then waits
// on memory once per kAhead rows instead of once per row.
constexpr int kAhead = 4;

// keys (N) sorted, row_of (N) the rows in that order, ascending within a run (the sort is
// stable). The thread of (sorted position p, columns c..c+N) returns unless p starts a run of
// a real id; else it sums the run's rows of dout in ascending row order in fp32 and adds the
// sum to dweight[id] once: fp32 += sum, bf16 = bf16(float(dweight) + sum), a single rounding
// (bf16 adds row by row would lose about log2(k) bits of a token repeated k times). Each
// dweight element is written by one thread, in an order fixed by the ids alone.
template <int N, typename TW, typename TD>
__global__ void add_sorted_runs_kernel(int64_t rows, int64_t cols, int64_t vocab, TW* dweight, const TD* dout,
                                       const uint32_t* keys, const int32_t* row_of) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t per_row = cols / N;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * per_row; i += stride) {
    const int64_t p = i / per_row, c = (i % per_row) * N;
    const uint32_t id = keys[p];
    if (id >= vocab || (p > 0 && keys[p - 1] == id)) continue;  // skipped id, or not a run's start
    int64_t end = p + 1;
    while (end < rows && keys[end] == id) ++end;
    float sum[N] = {};
    int64_t q = p;
    for (; q + kAhead <= end; q += kAhead) {
      float v[kAhead][N];
#pragma unroll
      for (int a = 0; a < kAhead; ++a) load_n<N>(dout + int64_t(row_of[q + a]) * cols + c, v[a]);
#pragma unroll
      for (int a = 0; a < kAhead; ++a)
#pragma unroll
        for (int k = 0; k < N; ++k) sum[k] += v[a][k];
    }
    for (; q < end; ++q) {
      float v[N];
      load_n<N>(dout + int64_t(row_of[q]) * cols + c, v);
#pragma unroll
      for (int k = 0; k < N; ++k) sum[k] += v[k];
    }
    TW* dst = dweight + int64_t(id) * cols + c;
    float w[N];
    load_n<N>(dst, w);
#pragma unroll
    for (int k = 0; k < N; ++k) w[k] += sum[k];
    store_n<N>(dst, w);
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

// Cost: a radix sort of N int32 keys over ceil(log2(V + 1)) bits (a few passes; for the N of a
// training step, up to tens of thousands of rows, tens of microseconds), then one read of dout
// and one read-modify-write of each present id's row. An id repeated k times is summed by C/kPack
// threads walking its k rows, about k/kAhead memory waits each.
void embedding_backward(cudaStream_t s, Tensor& dweight, const Tensor& dout, const Tensor& ids) {
  const int64_t rows = ids.numel(), cols = dweight.size(1), vocab = dweight.size(0);
  if (rows * cols == 0) return;
  PT_CHECK(rows <= INT32_MAX && vocab < INT32_MAX, "embedding_backward: 2^31 - 1 or more rows or ids");
  // The keys lie in [0, vocab] (vocab: a skipped id): the sort reads their low end_bit bits.
  int end_bit = 0;
  while ((int64_t(1) << end_bit) <= vocab) ++end_bit;
  auto scratch = [&](int64_t n, DType t, const char* name) {
    return Tensor::empty({n}, t, dweight.device(), name, MemCategory::Workspace);
  };
  // (N) keys and (N) rows, twice each: the sort moves them back and forth between the pairs.
  const Tensor keys[2] = {scratch(rows, DType::U32, "embedding_sort_keys"),
                          scratch(rows, DType::U32, "embedding_sort_keys_alt")};
  const Tensor row_of[2] = {scratch(rows, DType::I32, "embedding_sort_rows"),
                            scratch(rows, DType::I32, "embedding_sort_rows_alt")};
  sort_keys_kernel<<<grid_for(rows, kThreads), kThreads, 0, s>>>(
      rows, vocab, ids.data_as<const int32_t>(), keys[0].data_as<uint32_t>(), row_of[0].data_as<int32_t>());
  PT_CUDA_CHECK_LAUNCH();
  cub::DoubleBuffer<uint32_t> key_buf(keys[0].data_as<uint32_t>(), keys[1].data_as<uint32_t>());
  cub::DoubleBuffer<int32_t> row_buf(row_of[0].data_as<int32_t>(), row_of[1].data_as<int32_t>());
  size_t temp_bytes = 0;  // asked first: with a null buffer the call only sizes it
  PT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, key_buf, row_buf, int(rows), 0, end_bit, s));
  // The sort's own scratch, in 4-byte words.
  const Tensor temp =
      scratch(std::max<int64_t>(ceil_div(int64_t(temp_bytes), 4), 1), DType::U32, "embedding_sort_temp");
  PT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.data(), temp_bytes, key_buf, row_buf, int(rows), 0, end_bit, s));
  const uint32_t* sorted_keys = key_buf.Current();  // which of the pair holds the result is known on the host
  const int32_t* sorted_rows = row_buf.Current();
  dispatch_float_pair(dweight.dtype(), dout.dtype(), [&](auto w_tag, auto d_tag) {
    using TW = typename decltype(w_tag)::type;
    using TD = typename decltype(d_tag)::type;
    TW* dw = static_cast<TW*>(dweight.data());
    const TD* g = static_cast<const TD*>(dout.data());
    if (cols % kPack == 0 && aligned16(dw) && aligned16(g)) {
      add_sorted_runs_kernel<kPack><<<grid_for(rows * (cols / kPack), kThreads), kThreads, 0, s>>>(
          rows, cols, vocab, dw, g, sorted_keys, sorted_rows);
    } else {
      add_sorted_runs_kernel<1>
          <<<grid_for(rows * cols, kThreads), kThreads, 0, s>>>(rows, cols, vocab, dw, g, sorted_keys, sorted_rows);
    }
    PT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace pt::cuda
