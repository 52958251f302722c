// RMSNorm's backward at llm.c's working point (16384 rows of 1600, dy bf16, dx accumulated in
// fp32 with its bf16 copy: the model's residual gradient). A pass with the same bytes (5 units in,
// 3 out, two of them in place) takes 147 us there (dev/cuda/stream_variants.cu). First, variants
// of the one-row-a-warp form that was production before the persistent rows (174 us in the step),
// each checked bit for bit against it (variant 0, a copy): none was more than 4 % faster on an H100.
// Then, with dw's finish, that form against the production kernel of cuda/rmsnorm.cu (compiled into
// this file): persistent rows, on grids of 1 to 8 blocks an SM. Last, dw's finishing kernel against a
// wider grid on the same partial rows, both against an fp64 sum. Figures:
// docs/reports/2026-11-27_gemm-choice-covering-grid_h100.md, 2026-11-27_rmsnorm-persistent-autotune_h100.md.
//
//   dev/cuda/build.sh rmsnorm_variants       (here, after building build-hopper; then on the GPU machine,
//   .devbundle/rmsnorm_variants [rows] [cols]   after a bundle's env.sh: it links libparatrain.so)
//   or dev/experiments/probes.sh dev-variants
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../../cuda/rmsnorm.cu"  // the production kernels, anonymous namespace and all
#include "dev_check.h"
#include "dev_fill.cuh"
#include "dev_timing.cuh"

namespace pt::cuda {
namespace {

enum Variant : int {
  kPrefetchDx = 1,  // prefetch.global.L2 of the lane's dx lines before x and dy are waited for
  kStreamXDy = 2,   // x and dy loaded evict-first (read once)
  kDxEarly = 4,     // dx loaded with x and dy (one block an SM: 56 more registers a thread)
};

__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

template <int kPacks, int V>
__global__ void __launch_bounds__(kThreads, (V & kDxEarly) ? 1 : 2)
    backward_variant(int64_t rows, int cols, bool accumulate, float* dx, __nv_bfloat16* dx_lowp, float* partial,
                     const __nv_bfloat16* dy, const float* x, const float* w, const float* rstd) {
  __shared__ __align__(16) float dw_lines[kWarps][kDwChunk];
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int64_t row = int64_t(blockIdx.x) * kWarps + warp;
  const bool live = row < rows;
  const int64_t base = live ? row * cols : 0;
  auto col = [&](int k) { return (k * kWarpSize + lane) * kPack; };
  float xv[kPacks][kPack];
  RawPack<kPack, __nv_bfloat16> g_raw[kPacks];
  float dxv[(V & kDxEarly) ? kPacks : 1][kPack];
  if (live) {
    if constexpr ((V & kPrefetchDx) != 0)
#pragma unroll
      for (int k = 0; k < kPacks; ++k)
        if (col(k) < cols && accumulate) prefetch_l2(dx + base + col(k));
#pragma unroll
    for (int k = 0; k < kPacks; ++k)
      if (col(k) < cols) {
        if constexpr ((V & kStreamXDy) != 0) {
          const float4* px = reinterpret_cast<const float4*>(x + base + col(k));
          const float4 a = __ldcs(px), b = __ldcs(px + 1);
          xv[k][0] = a.x, xv[k][1] = a.y, xv[k][2] = a.z, xv[k][3] = a.w;
          xv[k][4] = b.x, xv[k][5] = b.y, xv[k][6] = b.z, xv[k][7] = b.w;
          g_raw[k].words[0] = __ldcs(reinterpret_cast<const uint4*>(dy + base + col(k)));
        } else {
          load_pack<kPack>(x + base + col(k), xv[k]);
          g_raw[k].load(dy + base + col(k));
        }
        if constexpr ((V & kDxEarly) != 0)
          if (accumulate) load_pack<kPack>(dx + base + col(k), dxv[k]);
      }
  }
  const float inv = live ? rstd[row] : 0.0f;
  float dot = 0.0f;
  if (live)
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
  if (live)
#pragma unroll
    for (int k = 0; k < kPacks; ++k)
      if (col(k) < cols) {
        float g[kPack], wv[kPack], d[kPack];
        if constexpr ((V & kDxEarly) != 0) {
#pragma unroll
          for (int i = 0; i < kPack; ++i) d[i] = dxv[k][i];
        } else {
          if (accumulate) load_pack<kPack>(dx + base + col(k), d);
        }
        g_raw[k].to_floats(g);
        load_pack<kPack>(w + col(k), wv);
#pragma unroll
        for (int i = 0; i < kPack; ++i) {
          const float di = inv * g[i] * wv[i] - kk * xv[k][i];
          d[i] = accumulate ? d[i] + di : di;
        }
        store_pack<kPack>(dx + base + col(k), d);
        if (dx_lowp) store_pack<kPack>(dx_lowp + base + col(k), d);
      }
  for (int c0 = 0; c0 < cols; c0 += kDwChunk) {
    const int c1 = cols - c0 < kDwChunk ? cols : c0 + kDwChunk;
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int c = col(k);
      if (c < c0 || c >= c1) continue;
      float term[kPack];
      if (live) {
        float g[kPack];
        g_raw[k].to_floats(g);
#pragma unroll
        for (int i = 0; i < kPack; ++i) term[i] = g[i] * xv[k][i] * inv;
      } else {
#pragma unroll
        for (int i = 0; i < kPack; ++i) term[i] = 0.0f;
      }
#pragma unroll
      for (int i = 0; i < kPack; ++i) dw_lines[warp][c - c0 + i] = term[i];
    }
    add_dw_lines(dw_lines, partial, cols, c0, c1);
  }
}

// dw's finishing kernel on strips of 8 columns (one 32-byte sector of a partial row) with 128
// lanes a column, 16 adds a thread at 2048 partial rows instead of the production kernel's 64 on
// 50 blocks; the lanes' sums of a column added by 4 warps, then those 4 in order.
constexpr int kStripCols = 8, kStripLanes = 128, kStripParts = kStripLanes / kWarpSize;
__global__ void __launch_bounds__(kStripCols* kStripLanes)
    dw_finish_8x128(int64_t blocks, int cols, float* dw, const float* partial) {
  __shared__ float lanes[kStripLanes][kStripCols + 1];
  __shared__ float parts[kStripCols][kStripParts];
  const int tx = threadIdx.x % kStripCols, ty = threadIdx.x / kStripCols;
  const int c = blockIdx.x * kStripCols + tx;
  float acc = 0.0f;
  if (c < cols)
#pragma unroll 4
    for (int64_t b = ty; b < blocks; b += kStripLanes) acc += partial[b * cols + c];
  lanes[ty][tx] = acc;
  __syncthreads();
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int wc = warp % kStripCols, part = warp / kStripCols;
  const float s = warp_sum(lanes[part * kWarpSize + lane][wc]);
  if (lane == 0) parts[wc][part] = s;
  __syncthreads();
  const int col = blockIdx.x * kStripCols + threadIdx.x;
  if (threadIdx.x < kStripCols && col < cols) {
    float sum = 0.0f;
#pragma unroll
    for (int q = 0; q < kStripParts; ++q) sum += parts[threadIdx.x][q];
    dw[col] = sum;
  }
}

template <typename T>
std::vector<T> host(const T* d, size_t n) {
  std::vector<T> h(n);
  DEV_CHECK_CUDA(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

// The same bits in every element.
bool same_bits(const std::vector<__nv_bfloat16>& a, const std::vector<__nv_bfloat16>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](auto x, auto y) {
           return __bfloat16_as_ushort(x) == __bfloat16_as_ushort(y);
         });
}

// The production finish as cuda/rmsnorm.cu launches it: dw = the sum of partial's first rows.
void finish_dw(int64_t partial_rows, int cols, float* dw, const float* partial) {
  rmsnorm_dw_finish_kernel<float><<<unsigned((cols + kWarpSize - 1) / kWarpSize), dim3(kWarpSize, kDwRowLanes)>>>(
      partial_rows, cols, false, dw, partial);
}

}  // namespace
}  // namespace pt::cuda

int main(int argc, char** argv) {
  using namespace pt::cuda;
  const int64_t rows = argc > 1 ? std::atoll(argv[1]) : 16384;
  const int cols = argc > 2 ? std::atoi(argv[2]) : 1600;
  constexpr int kPacks = 7;
  if ((cols + kWarpSize * kPack - 1) / (kWarpSize * kPack) != kPacks || cols % kPack) {
    std::fprintf(stderr, "cols must need exactly %d packs a lane (1569..1792, a multiple of 8)\n", kPacks);
    return 2;
  }
  const int64_t n = rows * cols, blocks = (rows + kWarps - 1) / kWarps;
  float *x, *w, *rstd, *dx0, *dx, *partial, *tmp;
  __nv_bfloat16 *dy, *lowp;
  DEV_CHECK_CUDA(cudaMalloc(&x, n * 4));
  DEV_CHECK_CUDA(cudaMalloc(&tmp, n * 4));
  DEV_CHECK_CUDA(cudaMalloc(&dx0, n * 4));
  DEV_CHECK_CUDA(cudaMalloc(&dx, n * 4));
  DEV_CHECK_CUDA(cudaMalloc(&dy, n * 2));
  DEV_CHECK_CUDA(cudaMalloc(&lowp, n * 2));
  DEV_CHECK_CUDA(cudaMalloc(&w, cols * 4));
  DEV_CHECK_CUDA(cudaMalloc(&rstd, rows * 4));
  DEV_CHECK_CUDA(cudaMalloc(&partial, blocks * cols * 4));
  fill<<<1024, 256>>>(n, x, 1, 4.0f, 0.0f);
  fill<<<1024, 256>>>(n, tmp, 2, 2.0f, 0.0f);
  to_bf16<<<1024, 256>>>(n, dy, tmp);
  fill<<<1024, 256>>>(n, dx0, 3, 1.0f, 0.0f);
  fill<<<64, 256>>>(cols, w, 4, 2.0f, 0.0f);
  fill<<<64, 256>>>(rows, rstd, 5, 0.5f, 1.0f);
  DEV_CHECK_CUDA(cudaDeviceSynchronize());
  const double bytes = double(n) * (4 + 2 + 4 + 4 + 2) + double(blocks) * cols * 4;
  std::printf("RMSNorm backward, %lld rows x %d, dy bf16, dx accumulated (fp32) + bf16 copy: %.0f MB a call\n",
              (long long)rows, cols, bytes / 1e6);

  // Each variant runs once from dx0 for the check, then is timed (dx keeps accumulating: the same
  // bytes move).
  std::vector<float> ref_dx, ref_partial;
  std::vector<__nv_bfloat16> ref_lowp;
  auto run = [&](const char* name, auto kernel) {
    DEV_CHECK_CUDA(cudaMemcpy(dx, dx0, n * 4, cudaMemcpyDeviceToDevice));
    kernel<<<unsigned(blocks), kThreads>>>(rows, cols, true, dx, lowp, partial, dy, x, w, rstd);
    DEV_CHECK_CUDA(cudaDeviceSynchronize());
    auto hdx = host(dx, n);
    auto hp = host(partial, blocks * cols);
    auto hl = host(lowp, n);
    const char* check = "reference";
    if (ref_dx.empty()) {
      ref_dx = hdx, ref_partial = hp, ref_lowp = hl;
    } else {
      const bool ok = hdx == ref_dx && hp == ref_partial && same_bits(hl, ref_lowp);
      check = ok ? "bit for bit" : "DIFFERS";
    }
    const float ms = dev_median_ms(
        [&] { kernel<<<unsigned(blocks), kThreads>>>(rows, cols, true, dx, lowp, partial, dy, x, w, rstd); });
    std::printf("%-44s %8.1f us %6.3f TB/s  %s\n", name, ms * 1e3, bytes / (ms * 1e-3) / 1e12, check);
  };
  run("one row a warp (variant 0: production to 27)", backward_variant<kPacks, 0>);
  run("dx prefetched to L2", backward_variant<kPacks, kPrefetchDx>);
  run("x, dy evict-first", backward_variant<kPacks, kStreamXDy>);
  run("dx prefetched, x, dy evict-first", backward_variant<kPacks, kPrefetchDx | kStreamXDy>);
  run("dx loaded early (1 block an SM)", backward_variant<kPacks, kDxEarly>);
  run("dx early, x, dy evict-first", backward_variant<kPacks, kDxEarly | kStreamXDy>);

  // The production kernel (persistent rows) and its finish, on grids of 1 to 8
  // blocks an SM (production: backward_rows_grid), against one row a warp (variant 0) and its
  // finish: dx and its copy bit for bit, dw against an fp64 sum of dy·x·rstd over the rows.
  {
    const int sms = sm_count();
    const int smem = backward_rows_smem(cols);
    auto kernel = rmsnorm_backward_rows_kernel<__nv_bfloat16, float, kPacks, false>;  // x fp32: the default stream
    DEV_CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    float* dw;
    DEV_CHECK_CUDA(cudaMalloc(&dw, cols * 4));
    const auto hx = host(x, n), hr = host(rstd, rows);
    const auto hdy = host(dy, n);
    std::vector<double> want(cols, 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) want[c] += double(__bfloat162float(hdy[r * cols + c])) * hx[r * cols + c] * hr[r];
    auto dw_error = [&] {
      const auto h = host(dw, cols);
      double e = 0, m = 0;
      for (int c = 0; c < cols; ++c) e = std::max(e, std::abs(h[c] - want[c])), m = std::max(m, std::abs(want[c]));
      return e / m;
    };
    // Runs launch once from dx0 for the checks, then times it.
    auto check_and_time = [&](const char* name, auto launch) {
      DEV_CHECK_CUDA(cudaMemcpy(dx, dx0, n * 4, cudaMemcpyDeviceToDevice));
      launch();
      DEV_CHECK_CUDA(cudaDeviceSynchronize());
      const bool same_dx = host(dx, n) == ref_dx;
      const bool same_lowp = same_bits(host(lowp, n), ref_lowp);
      const double e = dw_error();
      std::printf("%-44s %8.1f us  dw %.1e  dx %s\n", name, dev_median_ms(launch) * 1e3, e,
                  same_dx && same_lowp ? "bit for bit" : "DIFFERS");
    };
    std::printf("\nwith dw finished (max |dw − fp64| / max |dw|)\n");
    check_and_time("one row a warp + finish", [&] {
      backward_variant<kPacks, 0><<<unsigned(blocks), kThreads>>>(rows, cols, true, dx, lowp, partial, dy, x, w, rstd);
      finish_dw(blocks, cols, dw, partial);
    });
    for (int per_sm : {1, 2, 3, 4, 8}) {
      const int64_t grid = std::min<int64_t>(blocks, int64_t(per_sm) * sms);
      char name[64];
      std::snprintf(name, sizeof name, "persistent, %d blocks an SM%s + finish", per_sm,
                    grid == backward_rows_grid(rows) ? " (production)" : "");
      check_and_time(name, [&] {
        kernel<<<unsigned(grid), kThreads, smem>>>(rows, cols, true, dx, lowp, partial, dy, x, w, rstd, nullptr);
        finish_dw(grid, cols, dw, partial);
      });
    }
    DEV_CHECK_CUDA(cudaFree(dw));
  }

  // dw from the partial rows: both kernels against an fp64 sum on the host.
  fill<<<1024, 256>>>(blocks * cols, partial, 6, 1.0f, 0.0f);
  float* dw;
  DEV_CHECK_CUDA(cudaMalloc(&dw, cols * 4));
  DEV_CHECK_CUDA(cudaDeviceSynchronize());
  const auto hp = host(partial, size_t(blocks) * cols);
  std::vector<double> exact(cols, 0.0);
  for (int64_t b = 0; b < blocks; ++b)
    for (int c = 0; c < cols; ++c) exact[c] += hp[size_t(b) * cols + c];
  auto worst = [&] {
    const auto h = host(dw, cols);
    double e = 0;
    for (int c = 0; c < cols; ++c) e = std::max(e, std::abs(h[c] - exact[c]));
    return e;
  };
  std::printf("\ndw from %lld partial rows of %d (%.1f MB)\n", (long long)blocks, cols, blocks * cols * 4 / 1e6);
  const float t_prod = dev_median_ms([&] { finish_dw(blocks, cols, dw, partial); });
  std::printf("%-44s %8.1f us  max |dw - fp64| %.2e\n", "production: strips of 32, 32 lanes a column", t_prod * 1e3,
              worst());
  const float t_strip = dev_median_ms([&] {
    dw_finish_8x128<<<unsigned((cols + kStripCols - 1) / kStripCols), kStripCols * kStripLanes>>>(blocks, cols, dw,
                                                                                                  partial);
  });
  std::printf("%-44s %8.1f us  max |dw - fp64| %.2e\n", "strips of 8, 128 lanes a column", t_strip * 1e3, worst());
  return 0;
}
