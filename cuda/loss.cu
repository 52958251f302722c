// Fused softmax cross-entropy (one block per row: online max/sum over the vocabulary, then
// the gradient written in the same kernel, in place if asked; the rows' losses summed in a fixed
// order by one more block, so the loss is the same bit for bit from run to run) and mean/sum
// squared error (fp32 atomics). Nothing is copied to the host.
#include <climits>

#include "cuda/common.cuh"
#include "cuda/loss.h"

namespace pt::cuda {

namespace {

constexpr int kThreads = 256;

// row_loss[r] = (logsumexp(x_r) − x_r[t_r]) / rows; dlogits_r = (softmax(x_r) − onehot(t_r)) ·
// grad_mul (grad_mul = grad_scale / rows).
template <typename T, int N>
__global__ void cross_entropy_kernel(int64_t vocab, float inv_rows, float grad_mul, float* row_loss, T* dlogits,
                                     const T* logits, const int32_t* targets) {
  __shared__ MaxSum scratch[32];
  const int64_t row = blockIdx.x;
  const T* xr = logits + row * vocab;
  const int32_t target = targets[row];
  const bool target_ok = target >= 0 && target < vocab;  // else the loss becomes NaN
  // Read the target's logit before any thread can overwrite it (dlogits may alias logits);
  // block_combine's barriers order this read before the writes below.
  const float x_target = threadIdx.x == 0 && target_ok ? to_float(xr[target]) : 0.0f;

  MaxSum st = empty_stats();
  for (int64_t c = int64_t(threadIdx.x) * N; c < vocab; c += int64_t(blockDim.x) * N) {
    float v[N];
    load_n<N>(xr + c, v);
    st = fold(st, v);
  }
  st = block_combine(st, scratch);
  const float lse = st.m + logf(st.s);
  if (threadIdx.x == 0) row_loss[row] = target_ok ? (lse - x_target) * inv_rows : NAN;
  if (!dlogits) return;

  T* dr = dlogits + row * vocab;
  for (int64_t c = int64_t(threadIdx.x) * N; c < vocab; c += int64_t(blockDim.x) * N) {
    float v[N];
    load_n<N>(xr + c, v);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float onehot = c + k == target ? 1.0f : 0.0f;
      v[k] = target_ok ? (expf(v[k] - lse) - onehot) * grad_mul : NAN;
    }
    store_n<N>(dr + c, v);
  }
}

// loss = Σ_r row_loss[r], one block: each thread sums its rows in order, then a fixed tree.
__global__ void sum_rows_kernel(int64_t rows, const float* row_loss, float* loss) {
  __shared__ float scratch[32];
  float sum = 0.0f;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) sum += row_loss[r];
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) *loss = sum;
}

// loss += Σ (pred − target)² · inv_norm; dpred = 2 (pred − target) · inv_norm.
template <typename TP, typename TT, int N>
__global__ void mse_kernel(int64_t n, float inv_norm, float* loss, TP* dpred, const TP* pred, const TT* target) {
  __shared__ float scratch[32];
  const int64_t stride = int64_t(gridDim.x) * blockDim.x * N;
  float sum = 0.0f;
  // Whole groups of N here; the launcher sends the tail through the N == 1 instance.
  for (int64_t c = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * N; c + N <= n; c += stride) {
    float p[N], t[N], d[N];
    load_n<N>(pred + c, p);
    load_n<N>(target + c, t);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float diff = p[k] - t[k];
      sum += diff * diff;
      d[k] = 2.0f * diff * inv_norm;
    }
    if (dpred) store_n<N>(dpred + c, d);
  }
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) atomicAdd(loss, sum * inv_norm);
}

}  // namespace

void cross_entropy(cudaStream_t s, Tensor& loss, Tensor* dlogits, const Tensor& logits, const Tensor& targets,
                   float grad_scale) {
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  PT_CHECK(rows <= INT32_MAX, "cross_entropy: more than 2^31 rows");
  Tensor row_loss = Tensor::empty({rows}, DType::F32, logits.device(), "cross_entropy_row_loss");  // (rows)
  dispatch_float(logits.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = static_cast<const T*>(logits.data());
    T* dx = dlogits ? static_cast<T*>(dlogits->data()) : nullptr;
    const bool packed = vocab % kPack == 0 && aligned16(x) && (!dx || aligned16(dx));
    auto kernel = packed ? cross_entropy_kernel<T, kPack> : cross_entropy_kernel<T, 1>;
    // grad_scale 1 gives exactly 1/rows, as before; a power of two scales it exactly.
    kernel<<<unsigned(rows), kThreads, 0, s>>>(vocab, 1.0f / float(rows), grad_scale / float(rows),
                                               row_loss.data_as<float>(), dx, x, targets.data_as<const int32_t>());
    PT_CUDA_CHECK_LAUNCH();
  });
  sum_rows_kernel<<<1, 1024, 0, s>>>(rows, row_loss.data_as<const float>(), loss.data_as<float>());
  PT_CUDA_CHECK_LAUNCH();
}

void mse_loss(cudaStream_t s, Tensor& loss, Tensor* dpred, const Tensor& pred, const Tensor& target, bool mean) {
  const int64_t n = pred.numel();
  const float inv_norm = mean ? 1.0f / float(n) : 1.0f;
  PT_CUDA_CHECK(cudaMemsetAsync(loss.data(), 0, sizeof(float), s));
  dispatch_float(pred.dtype(), [&](auto ptag) {
    using TP = typename decltype(ptag)::type;
    dispatch_float(target.dtype(), [&](auto ttag) {
      using TT = typename decltype(ttag)::type;
      const TP* p = static_cast<const TP*>(pred.data());
      const TT* t = static_cast<const TT*>(target.data());
      TP* d = dpred ? static_cast<TP*>(dpred->data()) : nullptr;
      float* l = loss.data_as<float>();
      int64_t head = 0;  // elements done in packs
      if (aligned16(p) && aligned16(t) && (!d || aligned16(d))) {
        head = n / kPack * kPack;
        if (head > 0) {
          mse_kernel<TP, TT, kPack><<<grid_for(head / kPack, kThreads), kThreads, 0, s>>>(head, inv_norm, l, d, p, t);
          PT_CUDA_CHECK_LAUNCH();
        }
      }
      if (head < n) {
        mse_kernel<TP, TT, 1><<<grid_for(n - head, kThreads), kThreads, 0, s>>>(
            n - head, inv_norm, l, d ? d + head : nullptr, p + head, t + head);
        PT_CUDA_CHECK_LAUNCH();
      }
    });
  });
}

}  // namespace pt::cuda
