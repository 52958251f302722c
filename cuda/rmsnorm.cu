// RMSNorm: forward and backward one warp per row (rows are d_model long: a few KB, so a warp's
// registers and L1 hold what the second pass re-reads); the recompute from the saved rstd
// elementwise. Math in fp32.
#include <algorithm>
#include <climits>
#include <initializer_list>

#include "cuda/chained_launch.cuh"
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

// FP8 current scaling's amax of a kernel's output, taken as it is stored (common.cuh's as_stored
// and block_amax_into). With kAmax each lane keeps the max |value| it computed in fp32, in a
// register, and the block's max goes into *amax once, after its last store. fmaxf drops NaN.
// Without kAmax (a template argument, so that the kernels without amax keep their registers and
// occupancy) neither runs.
template <bool kAmax, int N>
__device__ __forceinline__ void fold_abs_max(float& m, const float (&v)[N]) {
  if constexpr (kAmax)
#pragma unroll
    for (int i = 0; i < N; ++i) m = fmaxf(m, fabsf(v[i]));
}
template <bool kAmax>
__device__ __forceinline__ void store_amax(float* amax, float m_stored, float* scratch) {
  if constexpr (kAmax) block_amax_into(amax, m_stored, scratch);
}

// kAmax: max |y| as stored into *amax (zeroed by the launcher).
template <typename TY, typename TX, bool kPacked, bool kAmax>
__global__ void rmsnorm_forward_kernel(int64_t rows, int cols, float eps, TY* y, float* rstd, const TX* x,
                                       const float* w, float* amax) {
  begin_chained_kernel();  // launched by launch_chained
  __shared__ float scratch[kWarpSize];
  constexpr int N = kPacked ? kPack : 1;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row = int64_t(blockIdx.x) * kWarps + threadIdx.x / kWarpSize;
  float m = 0.0f;    // max |y| this lane computed (kAmax)
  if (row < rows) {  // the block's amax below takes every thread: no early return
    const TX* xr = x + row * cols;
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
        out[0] = v[0] * inv * w[c];
        yr[c] = from_float<TY>(out[0]);
      }
      fold_abs_max<kAmax>(m, out);
    });
  }
  store_amax<kAmax>(amax, as_stored<TY>(m), scratch);
}

// The forward with the row held in registers (kPacks packs of kPack per lane, up to
// 32·kPack·kPacks columns): every load of the row is issued before the first sum, where the
// loop above waits for each pack in turn. With one warp per row XL's 2048 rows fill a quarter
// of the GPU's warp slots, so the loop is latency-bound
// (docs/reports/2026-11-24_memory-bound-kernels_h100-h200.md).
template <typename TY, typename TX, int kPacks, bool kAmax>
__global__ void rmsnorm_forward_rows_kernel(int64_t rows, int cols, float eps, TY* y, float* rstd, const TX* x,
                                            const float* w, float* amax) {
  begin_chained_kernel();  // launched by launch_chained
  __shared__ float scratch[kWarpSize];
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row = int64_t(blockIdx.x) * kWarps + threadIdx.x / kWarpSize;
  float m = 0.0f;    // max |y| this lane computed (kAmax)
  if (row < rows) {  // the block's amax below takes every thread: no early return
    const TX* xr = x + row * cols;
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
        fold_abs_max<kAmax>(m, out);
      }
    }
  }
  store_amax<kAmax>(amax, as_stored<TY>(m), scratch);
}

// y = x·rstd·w with the rstd the forward saved: the forward's output again, bit for bit (the same
// products in the same order), for a backward that recomputes it. Without the row sums the
// work is elementwise: a thread per pack of N columns over the whole (rows, cols) grid, where
// the forward's warp per row fills a quarter of the GPU's warp slots at XL's 2048 rows.
template <typename TY, typename TX, int N>
__global__ void rmsnorm_apply_kernel(int64_t rows, int cols, TY* y, const TX* x, const float* w, const float* rstd) {
  begin_chained_kernel();  // launched by launch_chained
  const int64_t packs_per_row = cols / N;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * packs_per_row) return;
  const int64_t row = i / packs_per_row;
  const int c = int(i - row * packs_per_row) * N;
  const float inv = rstd[row];
  float v[N], wv[N], out[N];
  load_n<N>(x + row * cols + c, v);
  load_n<N>(w + c, wv);
#pragma unroll
  for (int k = 0; k < N; ++k) out[k] = v[k] * inv * wv[k];
  store_n<N>(y + row * cols + c, out);
}

// dx = inv·(dy⊙w) − inv³/C · x · Σ(dy⊙w⊙x), one warp per row (kWarps rows a block, as many
// blocks as needed: rows fully parallel), and dw's share of the block's rows in the same pass.
// The rows' dw terms dy⊙x·inv meet in shared memory, one line per warp over a chunk of
// kDwChunk columns at a time; the block adds its lines in a fixed order and writes that sum as
// its row of `partial` (blocks × cols, fp32). rmsnorm_dw_finish_kernel then adds the rows of
// `partial` into dw, again in a fixed order: dw is the same bit for bit from run to run.
// The previous pair of kernels read dy and x a second time for dw (rmsnorm_dw_kernel: columns
// summed down slices of rows, one fp32 atomic per column and slice, so the sums' order varied).
// Keeping dw in registers across 4 rows a block with fp32 atomics was slower than the pair and not
// reproducible (docs/reports/2026-11-24_memory-bound-kernels_h100-h200.md).
// dx_lowp (optional): dx rounded to bf16 in the same pass, the next GEMM's operand (the model's
// residual gradient as a bf16 copy, which would otherwise be a cast pass of its own).
constexpr int kDwChunk = 1024;  // columns a block's dw lines hold at once: kWarps × 4 KB of shared memory
// Once every warp has put its dw terms of columns [c0, c1) into its line: the lines added in warp
// order into the block's row of `partial`, then the lines free for the next chunk.
__device__ __forceinline__ void add_dw_lines(const float (&dw_lines)[kWarps][kDwChunk], float* partial, int cols,
                                             int c0, int c1) {
  __syncthreads();
  for (int c = c0 + threadIdx.x; c < c1; c += kThreads) {
    float sum = 0.0f;
#pragma unroll
    for (int v = 0; v < kWarps; ++v) sum += dw_lines[v][c - c0];
    partial[int64_t(blockIdx.x) * cols + c] = sum;
  }
  __syncthreads();
}
template <typename TD, typename TX, bool kPacked, bool kAmax>
__global__ void __launch_bounds__(kThreads)
    rmsnorm_backward_kernel(int64_t rows, int cols, bool accumulate, float* dx, __nv_bfloat16* dx_lowp, float* partial,
                            const TD* dy, const TX* x, const float* w, const float* rstd, float* amax) {
  begin_chained_kernel();  // launched by launch_chained
  constexpr int N = kPacked ? kPack : 1;
  static_assert(kDwChunk % (kWarpSize * kPack) == 0, "a chunk holds whole packs of every lane");
  __shared__ __align__(16) float dw_lines[kWarps][kDwChunk];
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int64_t row = int64_t(blockIdx.x) * kWarps + warp;
  // A warp past the last row still takes part in the block's sums (its lines are zeros).
  const bool live = row < rows;
  const int64_t base = live ? row * cols : 0;
  const TX* xr = x + base;
  const TD* dyr = dy + base;
  float* dxr = dx + base;
  const float inv = live ? rstd[row] : 0.0f;
  float dot = 0.0f;
  if (live)
    for_lane_cols<kPacked>(dyr, cols, lane, [&](int c, const float(&g)[N]) {
      float xv[N], wv[N];
      load_n<N>(xr + c, xv);
      load_n<N>(w + c, wv);
#pragma unroll
      for (int i = 0; i < N; ++i) dot += g[i] * wv[i] * xv[i];
    });
  const float k = inv * inv * inv * warp_sum(dot) / float(cols);
  float m = 0.0f;  // max |dx| this lane computed (kAmax)
  for (int c0 = 0; c0 < cols; c0 += kDwChunk) {
    const int c1 = cols - c0 < kDwChunk ? cols : c0 + kDwChunk;
    for (int c = c0 + lane * N; c < c1; c += kWarpSize * N) {
      float term[N];
      if (live) {
        float g[N], xv[N], wv[N], d[N];
        load_n<N>(dyr + c, g);
        load_n<N>(xr + c, xv);
        load_n<N>(w + c, wv);
        if (accumulate) load_n<N>(dxr + c, d);
#pragma unroll
        for (int i = 0; i < N; ++i) {
          const float di = inv * g[i] * wv[i] - k * xv[i];
          d[i] = accumulate ? d[i] + di : di;
          term[i] = g[i] * xv[i] * inv;
        }
        store_n<N>(dxr + c, d);
        if (dx_lowp) store_n<N>(dx_lowp + base + c, d);
        fold_abs_max<kAmax>(m, d);
      } else {
#pragma unroll
        for (int i = 0; i < N; ++i) term[i] = 0.0f;
      }
#pragma unroll
      for (int i = 0; i < N; ++i) dw_lines[warp][c - c0 + i] = term[i];
    }
    add_dw_lines(dw_lines, partial, cols, c0, c1);
  }
  // The dw lines serve as the block's scratch (block_reduce syncs before it writes there).
  store_amax<kAmax>(amax, dx_lowp ? as_stored<__nv_bfloat16>(m) : m, &dw_lines[0][0]);
}

// The backward with the row held in registers (kPacks packs of kPack a lane: x as floats, dy as
// loaded; every load of x and dy issued before the first product, where the loop kernel above
// waits for each pack in turn) on a persistent grid: backward_rows_grid's blocks, each warp
// walking rows gridDim·kWarps apart. A warp adds its rows' dw terms into its own line of shared
// memory, a whole row of columns, each lane only into the columns it loads, so a row needs no
// barrier; the block adds its lines in warp order once, at the end, into its row of `partial`.
// dx and its bf16 copy are the one-row-a-warp form's bit for bit (the same arithmetic a row); dw
// adds in another fixed order, the same from run to run on a device (the grid depends only on
// its SM count).
// The persistent grid saves a block of rows' two barriers a chunk and most of the partial rows the
// finish reads (docs/reports/2026-11-27_rmsnorm-persistent-autotune_h100.md). Prefetching the next
// row, or dx, was slower (that report and docs/reports/2026-11-27_gemm-choice-covering-grid_h100.md).
template <typename TD, typename TX, int kPacks, bool kAmax>
__global__ void __launch_bounds__(kThreads, 2)
    rmsnorm_backward_rows_kernel(int64_t rows, int cols, bool accumulate, float* dx, __nv_bfloat16* dx_lowp,
                                 float* partial, const TD* dy, const TX* x, const float* w, const float* rstd,
                                 float* amax) {
  begin_chained_kernel();                           // launched by launch_chained
  extern __shared__ __align__(16) float dw_rows[];  // [kWarps][cols]: each warp's dw terms so far
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  float* line = dw_rows + int64_t(warp) * cols;
  auto col = [&](int k) { return (k * kWarpSize + lane) * kPack; };
#pragma unroll
  for (int k = 0; k < kPacks; ++k)
    if (col(k) < cols)
#pragma unroll
      for (int i = 0; i < kPack; ++i) line[col(k) + i] = 0.0f;
  float m = 0.0f;  // max |dx| this lane computed (kAmax)
  const int64_t stride = int64_t(gridDim.x) * kWarps;
  for (int64_t row = int64_t(blockIdx.x) * kWarps + warp; row < rows; row += stride) {
    const int64_t base = row * cols;
    float xv[kPacks][kPack];           // x's packs of this lane
    RawPack<kPack, TD> g_raw[kPacks];  // dy's, as loaded
#pragma unroll
    for (int k = 0; k < kPacks; ++k)
      if (col(k) < cols) {
        load_pack<kPack>(x + base + col(k), xv[k]);
        g_raw[k].load(dy + base + col(k));
      }
    const float inv = rstd[row];
    float dot = 0.0f;
#pragma unroll
    for (int k = 0; k < kPacks; ++k)
      if (col(k) < cols) {
        float g[kPack], wv[kPack];
        g_raw[k].to_floats(g);
        load_pack<kPack>(w + col(k), wv);
#pragma unroll
        for (int i = 0; i < kPack; ++i) dot += g[i] * wv[i] * xv[k][i];
      }
    const float kk = inv * inv * inv * warp_sum(dot) / float(cols);
#pragma unroll
    for (int k = 0; k < kPacks; ++k)
      if (col(k) < cols) {
        float g[kPack], wv[kPack], d[kPack];
        if (accumulate) load_pack<kPack>(dx + base + col(k), d);
        g_raw[k].to_floats(g);
        load_pack<kPack>(w + col(k), wv);
#pragma unroll
        for (int i = 0; i < kPack; ++i) {
          const float di = inv * g[i] * wv[i] - kk * xv[k][i];
          d[i] = accumulate ? d[i] + di : di;
          line[col(k) + i] += g[i] * xv[k][i] * inv;
        }
        store_pack<kPack>(dx + base + col(k), d);
        if (dx_lowp) store_pack<kPack>(dx_lowp + base + col(k), d);
        fold_abs_max<kAmax>(m, d);
      }
  }
  __syncthreads();
  for (int c = threadIdx.x; c < cols; c += kThreads) {
    float sum = 0.0f;
#pragma unroll
    for (int v = 0; v < kWarps; ++v) sum += dw_rows[v * cols + c];
    partial[int64_t(blockIdx.x) * cols + c] = sum;
  }
  // The dw lines (at least 8 · 8 floats) serve as the block's scratch: block_reduce syncs before it
  // writes there, after the sums above have read them.
  store_amax<kAmax>(amax, dx_lowp ? as_stored<__nv_bfloat16>(m) : m, dw_rows);
}
// The rows kernel's grid: two blocks an SM (its occupancy), fewer where the rows do not fill them.
constexpr int kRowsBlocksPerSm = 2;
int64_t backward_rows_grid(int64_t rows) {
  return std::min<int64_t>(ceil_div(rows, int64_t(kWarps)), int64_t(kRowsBlocksPerSm) * sm_count());
}
// Its dynamic shared memory: a line of cols floats a warp (57 KB at most: 1792 columns).
int backward_rows_smem(int64_t cols) { return int(kWarps * cols * int64_t(sizeof(float))); }

// The packed backward for rows of `packs` packs a lane: the register-resident kernel for exactly
// that many up to kMax, the loop kernel above it. The exact count, unlike the forward's powers of
// two, since a row's x and dy take most of the registers two blocks an SM allow (1600 columns: 7
// packs; 8 spilled). An fp32 dy takes twice the registers of a bf16 one, so it stops at 4 packs
// (1024 columns).
template <typename TD>
constexpr int kMaxBackwardPacks = sizeof(TD) == 2 ? 7 : 4;
template <typename TD, typename TX, bool kAmax, int kMax = kMaxBackwardPacks<TD>>
auto packed_backward_kernel(int64_t packs) -> decltype(&rmsnorm_backward_kernel<TD, TX, true, kAmax>) {
  if constexpr (kMax == 0)
    return rmsnorm_backward_kernel<TD, TX, true, kAmax>;
  else
    return packs == kMax ? rmsnorm_backward_rows_kernel<TD, TX, kMax, kAmax>
                         : packed_backward_kernel<TD, TX, kAmax, kMax - 1>(packs);
}

// dw += Σ_blocks partial[block][·] (dw = Σ, dw not read, unless accumulate): a block per strip
// of 32 columns, kDwRowLanes threads down each column over every kDwRowLanes-th row of partial;
// then warp y adds column y's kDwRowLanes sums (read across the shared lines) with one warp_sum.
// Every sum has a fixed order, so dw is the same bit for bit from run to run. A bf16 dw
// (--grad-dtype bf16) gets the finished fp32 sum rounded in once.
// 32 lanes of 8 rows a column beat 8 lanes of 32 rows; the kernel is mostly launch and tail
// (docs/reports/2026-11-25_rope-table-recompute-swiglu_h100.md).
constexpr int kDwRowLanes = kWarpSize;  // the final sums are one warp per column
template <typename TW>
__global__ void __launch_bounds__(kWarpSize* kDwRowLanes)
    rmsnorm_dw_finish_kernel(int64_t blocks, int cols, bool accumulate, TW* dw, const float* partial) {
  begin_chained_kernel();  // launched by launch_chained
  __shared__ float lanes[kDwRowLanes][kWarpSize + 1];
  const int c = blockIdx.x * kWarpSize + threadIdx.x;
  float acc = 0.0f;
  if (c < cols)
#pragma unroll 4
    for (int64_t b = threadIdx.y; b < blocks; b += kDwRowLanes) acc += partial[b * cols + c];
  lanes[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  const int col = blockIdx.x * kWarpSize + threadIdx.y;  // warp y's column
  const float sum = warp_sum(lanes[threadIdx.x][threadIdx.y]);
  if (threadIdx.x == 0 && col < cols) dw[col] = from_float<TW>(accumulate ? to_float(dw[col]) + sum : sum);
}

// The kernels index columns with int: refuse wider rows with one message.
void check_width(int64_t cols) { PT_CHECK(cols <= INT32_MAX, "rmsnorm: rows longer than 2^31 elements"); }
// Whole packs of kPack a row, every pointer 16-byte aligned (null ones skipped).
bool packs_fit(int64_t cols, std::initializer_list<const void*> ptrs) {
  if (cols % kPack != 0) return false;
  for (const void* p : ptrs)
    if (p && !aligned16(p)) return false;
  return true;
}

}  // namespace

void rmsnorm_forward(cudaStream_t s, Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& w, float eps,
                     float* amax) {
  const int64_t rows = x.size(0), cols = x.size(1);
  zero_amax(s, amax);
  if (rows == 0) return;
  check_width(cols);
  const bool packed = packs_fit(cols, {x.data(), w.data(), y.data()});
  dispatch_float_pair(y.dtype(), x.dtype(), [&](auto y_tag, auto x_tag) {
    dispatch_amax(amax, [&](auto amax_tag) {
      using TY = typename decltype(y_tag)::type;
      using TX = typename decltype(x_tag)::type;
      constexpr bool kAmax = decltype(amax_tag)::value;
      const unsigned blocks = unsigned(ceil_div(rows, kWarps));
      // Packs per lane for the register-resident row: the smallest of 1, 2, 4, 8 that holds it.
      const int64_t packs = ceil_div(cols, int64_t(kWarpSize) * kPack);
      auto kernel = !packed      ? rmsnorm_forward_kernel<TY, TX, false, kAmax>
                    : packs <= 1 ? rmsnorm_forward_rows_kernel<TY, TX, 1, kAmax>
                    : packs <= 2 ? rmsnorm_forward_rows_kernel<TY, TX, 2, kAmax>
                    : packs <= 4 ? rmsnorm_forward_rows_kernel<TY, TX, 4, kAmax>
                    : packs <= 8 ? rmsnorm_forward_rows_kernel<TY, TX, 8, kAmax>
                                 : rmsnorm_forward_kernel<TY, TX, true, kAmax>;
      launch_chained(kernel, blocks, kThreads, 0, s, rows, int(cols), eps, static_cast<TY*>(y.data()),
                     rstd.data_as<float>(), static_cast<const TX*>(x.data()), w.data_as<const float>(), amax);
      PT_CUDA_CHECK_LAUNCH();
    });
  });
}

void rmsnorm_apply(cudaStream_t s, Tensor& y, const Tensor& x, const Tensor& w, const Tensor& rstd) {
  const int64_t rows = x.size(0), cols = x.size(1);
  check_width(cols);
  if (rows == 0) return;
  const int n = packs_fit(cols, {x.data(), w.data(), y.data()}) ? kPack : 1;  // columns a thread
  dispatch_float_pair(y.dtype(), x.dtype(), [&](auto y_tag, auto x_tag) {
    using TY = typename decltype(y_tag)::type;
    using TX = typename decltype(x_tag)::type;
    auto kernel = n == kPack ? rmsnorm_apply_kernel<TY, TX, kPack> : rmsnorm_apply_kernel<TY, TX, 1>;
    launch_chained(kernel, grid_covering(rows * (cols / n), kThreads), kThreads, 0, s, rows, int(cols),
                   static_cast<TY*>(y.data()), static_cast<const TX*>(x.data()), w.data_as<const float>(),
                   rstd.data_as<const float>());
    PT_CUDA_CHECK_LAUNCH();
  });
}

int64_t rmsnorm_dw_partial_rows(int64_t rows) { return ceil_div(rows, int64_t(kWarps)); }

void rmsnorm_backward(cudaStream_t s, Tensor& dx, Tensor& dw, const Tensor& dy, const Tensor& x, const Tensor& w,
                      const Tensor& rstd, bool accumulate, float* partial, Tensor* dx_lowp, bool dw_accumulate,
                      float* amax) {
  const int64_t rows = x.size(0), cols = x.size(1);
  zero_amax(s, amax);
  if (rows == 0) return;
  check_width(cols);
  const int64_t blocks = rmsnorm_dw_partial_rows(rows);
  PT_CHECK(blocks <= INT32_MAX, "rmsnorm: more than 2^31 blocks of rows");
  int64_t partial_rows = blocks;  // rows of `partial` the backward kernel writes
  dispatch_float_pair(dy.dtype(), x.dtype(), [&](auto dy_tag, auto x_tag) {
    dispatch_amax(amax, [&](auto amax_tag) {
      using TD = typename decltype(dy_tag)::type;
      using TX = typename decltype(x_tag)::type;
      constexpr bool kAmax = decltype(amax_tag)::value;
      const bool packed =
          packs_fit(cols, {x.data(), w.data(), dy.data(), dx.data(), dx_lowp ? dx_lowp->data() : nullptr});
      const int64_t packs = ceil_div(cols, int64_t(kWarpSize) * kPack);
      auto kernel =
          packed ? packed_backward_kernel<TD, TX, kAmax>(packs) : rmsnorm_backward_kernel<TD, TX, false, kAmax>;
      int smem = 0;
      if (packed && packs <= kMaxBackwardPacks<TD>) {  // the rows kernel: persistent, its lines dynamic
        partial_rows = backward_rows_grid(rows);
        smem = backward_rows_smem(cols);
        PT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      }
      launch_chained(kernel, unsigned(partial_rows), kThreads, smem, s, rows, int(cols), accumulate,
                     dx.data_as<float>(), dx_lowp ? static_cast<__nv_bfloat16*>(dx_lowp->data()) : nullptr, partial,
                     static_cast<const TD*>(dy.data()), static_cast<const TX*>(x.data()), w.data_as<const float>(),
                     rstd.data_as<const float>(), amax);
      PT_CUDA_CHECK_LAUNCH();
    });
  });
  const dim3 grid(unsigned(ceil_div(cols, int64_t(kWarpSize)))), block(kWarpSize, kDwRowLanes);
  if (dw.dtype() == DType::BF16)
    launch_chained(rmsnorm_dw_finish_kernel<__nv_bfloat16>, grid, block, 0, s, partial_rows, int(cols), dw_accumulate,
                   static_cast<__nv_bfloat16*>(dw.data()), static_cast<const float*>(partial));
  else
    launch_chained(rmsnorm_dw_finish_kernel<float>, grid, block, 0, s, partial_rows, int(cols), dw_accumulate,
                   dw.data_as<float>(), static_cast<const float*>(partial));
  PT_CUDA_CHECK_LAUNCH();
}

}  // namespace pt::cuda
