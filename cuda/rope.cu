// Rotary embedding on strided (B, H, T, D) views. Thread x owns one dimension pair (its
// frequency is computed once) and walks the (b, h, t) rows along y; a warp touches 64
// consecutive elements of a row, so loads coalesce whatever the outer strides are.
#include <algorithm>

#include "cuda/common.cuh"
#include "cuda/rope.h"

namespace pt::cuda {

namespace {

struct RopeParams {
  int64_t heads, tokens, rows, half;  // rows = B·H·T; half = D / 2 pairs
  int64_t in_b, in_h, in_t;           // strides of in (elements); stride of D is 1
  int64_t out_b, out_h, out_t;
  float theta;
  float sign;  // +1 forward, -1 inverse
};

template <typename T>
__global__ void rope_kernel(RopeParams p, T* out, const T* in) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.half) return;
  // As PyTorch's tables: inv_freq = 1 / theta^(2i/D) and angle = t · inv_freq, both fp32.
  const float inv_freq = 1.0f / powf(p.theta, float(2 * i) / float(2 * p.half));
  for (int64_t r = int64_t(blockIdx.y) * blockDim.y + threadIdx.y; r < p.rows;
       r += int64_t(gridDim.y) * blockDim.y) {
    const int64_t t = r % p.tokens, bh = r / p.tokens, h = bh % p.heads, b = bh / p.heads;
    const T* x = in + b * p.in_b + h * p.in_h + t * p.in_t + 2 * i;
    T* y = out + b * p.out_b + h * p.out_h + t * p.out_t + 2 * i;
    float s, c;
    sincosf(float(t) * inv_freq, &s, &c);
    s *= p.sign;
    const float x0 = to_float(x[0]), x1 = to_float(x[1]);  // both read first: y may be x
    y[0] = from_float<T>(x0 * c - x1 * s);
    y[1] = from_float<T>(x0 * s + x1 * c);
  }
}

}  // namespace

void rope(cudaStream_t s, Tensor& out, const Tensor& in, double theta, bool inverse) {
  RopeParams p;
  p.heads = in.size(1);
  p.tokens = in.size(2);
  p.rows = in.size(0) * p.heads * p.tokens;
  p.half = in.size(3) / 2;
  p.in_b = in.stride(0);
  p.in_h = in.stride(1);
  p.in_t = in.stride(2);
  p.out_b = out.stride(0);
  p.out_h = out.stride(1);
  p.out_t = out.stride(2);
  p.theta = float(theta);
  p.sign = inverse ? -1.0f : 1.0f;
  if (p.rows == 0 || p.half == 0) return;
  const dim3 block(32, 8);
  const unsigned pair_blocks = unsigned(ceil_div(p.half, 32));
  const int64_t want_rows = std::max<int64_t>(1, int64_t(sm_count()) * 16 / pair_blocks);
  const dim3 grid(pair_blocks, unsigned(std::min<int64_t>(ceil_div(p.rows, 8), std::min<int64_t>(want_rows, 65535))));
  dispatch_float(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    rope_kernel<<<grid, block, 0, s>>>(p, static_cast<T*>(out.data()), static_cast<const T*>(in.data()));
    PT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace pt::cuda
