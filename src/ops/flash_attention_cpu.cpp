// The tiled CPU implementation of FlashAttention-2 (Dao 2023): Algorithm 1 (forward, online
// softmax) and the recomputing backward, written to be read next to the paper and the CUDA
// kernels. Arithmetic in the tensors' own type (float or double); tiles of block_q × block_k.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "ops/flash_attention.h"

namespace pt::ops::flash_cpu {

namespace {

// Added to a masked (key after query) score: the reference implementation's convention.
constexpr double kMaskedScoreBias = -1e6;

// A (B, H, T, D) view: row pointer of (b, h, t); D is contiguous.
template <typename T>
struct Rows {
  T* base;
  int64_t sb, sh, st;
  Rows(const Tensor& x) : base(x.data_as<T>()), sb(x.stride(0)), sh(x.stride(1)), st(x.stride(2)) {}
  T* row(int64_t b, int64_t h, int64_t t) const { return base + b * sb + h * sh + t * st; }
};

template <typename T>
T dot(const T* a, const T* b, int64_t n) {
  T s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// Key tiles a query tile [q0, q1) must visit: causal stops after the last query's diagonal.
inline int64_t key_end(bool causal, int64_t q1, int64_t tk) { return causal ? std::min(q1, tk) : tk; }

// S_ij = scale · q_i · k_j for one (query tile × key tile) block, masked scores biased.
template <typename T>
void scores(std::vector<T>& s, const Rows<T>& q, const Rows<T>& k, int64_t b, int64_t h, int64_t q0, int64_t nq,
            int64_t k0, int64_t nk, int64_t d, T scale, bool causal) {
  for (int64_t i = 0; i < nq; ++i)
    for (int64_t j = 0; j < nk; ++j) {
      T x = scale * dot(q.row(b, h, q0 + i), k.row(b, h, k0 + j), d);
      if (causal && k0 + j > q0 + i) x += static_cast<T>(kMaskedScoreBias);
      s[i * nk + j] = x;
    }
}

template <typename T>
void forward_impl(Tensor& out_t, Tensor& lse_t, const Tensor& q_t, const Tensor& k_t, const Tensor& v_t, bool causal,
                  int64_t br, int64_t bc) {
  const int64_t B = q_t.size(0), H = q_t.size(1), tq = q_t.size(2), tk = k_t.size(2), d = q_t.size(3);
  const Rows<T> q(q_t), k(k_t), v(v_t), out(out_t);
  float* lse = lse_t.data_as<float>();  // (B, H, Tq) contiguous
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(d)));
  std::vector<T> s(br * bc);    // (br, bc) scores, then probabilities
  std::vector<T> o(br * d);     // (br, d) unnormalised output accumulator
  std::vector<T> m(br), l(br);  // running max and running sum per query row
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t q0 = 0; q0 < tq; q0 += br) {
        const int64_t nq = std::min(br, tq - q0);
        std::fill(o.begin(), o.end(), T(0));
        std::fill(m.begin(), m.end(), -std::numeric_limits<T>::infinity());
        std::fill(l.begin(), l.end(), T(0));
        for (int64_t k0 = 0; k0 < key_end(causal, q0 + nq, tk); k0 += bc) {
          const int64_t nk = std::min(bc, tk - k0);
          scores(s, q, k, b, h, q0, nq, k0, nk, d, scale, causal);
          for (int64_t i = 0; i < nq; ++i) {
            T* si = &s[i * nk];
            const T m_new = std::max(m[i], *std::max_element(si, si + nk));
            // Rescale what was accumulated under the old max; the first tile has alpha = 0.
            const T alpha = std::exp(m[i] - m_new);
            T row_sum = 0;
            for (int64_t j = 0; j < nk; ++j) row_sum += (si[j] = std::exp(si[j] - m_new));
            l[i] = alpha * l[i] + row_sum;
            m[i] = m_new;
            T* oi = &o[i * d];
            for (int64_t c = 0; c < d; ++c) oi[c] *= alpha;
            for (int64_t j = 0; j < nk; ++j) {
              const T* vj = v.row(b, h, k0 + j);
              for (int64_t c = 0; c < d; ++c) oi[c] += si[j] * vj[c];
            }
          }
        }
        for (int64_t i = 0; i < nq; ++i) {
          T* dst = out.row(b, h, q0 + i);
          for (int64_t c = 0; c < d; ++c) dst[c] = o[i * d + c] / l[i];
          lse[(b * H + h) * tq + q0 + i] = static_cast<float>(m[i] + std::log(l[i]));
        }
      }
}

// Backward with recomputation: P = exp(S − L) rebuilt per tile from the saved L, never stored.
// Outer loop over key tiles (dK, dV complete per tile, as in the CUDA dK/dV kernel), dQ
// accumulated across key tiles in a (Tq, D) buffer.
template <typename T>
void backward_impl(Tensor& dq_t, Tensor& dk_t, Tensor& dv_t, const Tensor& do_t, const Tensor& q_t, const Tensor& k_t,
                   const Tensor& v_t, const Tensor& o_t, const Tensor& lse_t, bool causal, int64_t br, int64_t bc) {
  const int64_t B = q_t.size(0), H = q_t.size(1), tq = q_t.size(2), tk = k_t.size(2), d = q_t.size(3);
  const Rows<T> q(q_t), k(k_t), v(v_t), o(o_t), dout(do_t), dq(dq_t), dk(dk_t), dv(dv_t);
  const float* lse = lse_t.data_as<float>();
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(d)));
  std::vector<T> s(br * bc), dp(br * bc);  // (br, bc): P then dS; dP
  std::vector<T> dq_acc(tq * d);           // (Tq, D) for one (b, h)
  std::vector<T> dk_acc(bc * d), dv_acc(bc * d);
  std::vector<T> delta(tq);  // D_i = rowsum(dO_i ∘ O_i)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const float* L = lse + (b * H + h) * tq;
      for (int64_t i = 0; i < tq; ++i) delta[i] = dot(dout.row(b, h, i), o.row(b, h, i), d);
      std::fill(dq_acc.begin(), dq_acc.end(), T(0));
      for (int64_t k0 = 0; k0 < tk; k0 += bc) {
        const int64_t nk = std::min(bc, tk - k0);
        std::fill(dk_acc.begin(), dk_acc.end(), T(0));
        std::fill(dv_acc.begin(), dv_acc.end(), T(0));
        // Causal: query tiles wholly before this key tile see none of it.
        const int64_t q_begin = causal ? k0 / br * br : 0;
        for (int64_t q0 = q_begin; q0 < tq; q0 += br) {
          const int64_t nq = std::min(br, tq - q0);
          scores(s, q, k, b, h, q0, nq, k0, nk, d, scale, causal);
          for (int64_t i = 0; i < nq; ++i)
            for (int64_t j = 0; j < nk; ++j) s[i * nk + j] = std::exp(s[i * nk + j] - static_cast<T>(L[q0 + i]));
          for (int64_t i = 0; i < nq; ++i) {
            const T* doi = dout.row(b, h, q0 + i);
            for (int64_t j = 0; j < nk; ++j) {
              const T p = s[i * nk + j];
              for (int64_t c = 0; c < d; ++c) dv_acc[j * d + c] += p * doi[c];  // dV += Pᵀ dO
              dp[i * nk + j] = dot(doi, v.row(b, h, k0 + j), d);                // dP = dO Vᵀ
              s[i * nk + j] = p * (dp[i * nk + j] - delta[q0 + i]);             // dS = P ∘ (dP − D)
            }
          }
          for (int64_t i = 0; i < nq; ++i) {
            const T* qi = q.row(b, h, q0 + i);
            for (int64_t j = 0; j < nk; ++j) {
              const T ds = s[i * nk + j] * scale;
              const T* kj = k.row(b, h, k0 + j);
              for (int64_t c = 0; c < d; ++c) {
                dq_acc[(q0 + i) * d + c] += ds * kj[c];  // dQ += dS K / sqrt(d)
                dk_acc[j * d + c] += ds * qi[c];         // dK += dSᵀ Q / sqrt(d)
              }
            }
          }
        }
        for (int64_t j = 0; j < nk; ++j) {
          std::copy(&dk_acc[j * d], &dk_acc[j * d] + d, dk.row(b, h, k0 + j));
          std::copy(&dv_acc[j * d], &dv_acc[j * d] + d, dv.row(b, h, k0 + j));
        }
      }
      for (int64_t i = 0; i < tq; ++i) std::copy(&dq_acc[i * d], &dq_acc[i * d] + d, dq.row(b, h, i));
    }
}

void check_tiles(int block_q, int block_k) {
  PT_CHECK(block_q > 0 && block_k > 0, "flash_cpu: tile sizes must be positive (got " + std::to_string(block_q) +
                                           " × " + std::to_string(block_k) + ")");
}

}  // namespace

void forward(Tensor& out, Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v, bool causal, int block_q,
             int block_k) {
  check_tiles(block_q, block_k);
  if (q.dtype() == DType::F64)
    forward_impl<double>(out, lse, q, k, v, causal, block_q, block_k);
  else if (q.dtype() == DType::F32)
    forward_impl<float>(out, lse, q, k, v, causal, block_q, block_k);
  else
    PT_FAIL(std::string("flash attention on the CPU takes fp32 or fp64 tensors, got ") + dtype_name(q.dtype()));
}

void backward(Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
              const Tensor& out, const Tensor& lse, bool causal, int block_q, int block_k) {
  check_tiles(block_q, block_k);
  if (q.dtype() == DType::F64)
    backward_impl<double>(dq, dk, dv, dout, q, k, v, out, lse, causal, block_q, block_k);
  else if (q.dtype() == DType::F32)
    backward_impl<float>(dq, dk, dv, dout, q, k, v, out, lse, causal, block_q, block_k);
  else
    PT_FAIL(std::string("flash attention on the CPU takes fp32 or fp64 tensors, got ") + dtype_name(q.dtype()));
}

}  // namespace pt::ops::flash_cpu
