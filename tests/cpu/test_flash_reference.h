#pragma once
// Naive attention in fp64, the oracle of the flash-attention tests (CPU and GPU suites):
// materialises S, P = softmax(S), O = P·V and differentiates the softmax row by row
// (dS = P ∘ (dP − rowsum(P ∘ dP))), a different route from flash's rowsum(O ∘ dO).
// All arrays are (B, H, T, D) / (B, H, T) row-major.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace pt::test::flash_ref {

struct Dims {
  int64_t B, H, tq, tk, d;
  int64_t q_elems() const { return B * H * tq * d; }
  int64_t k_elems() const { return B * H * tk * d; }
  int64_t rows() const { return B * H * tq; }
};

struct Result {
  std::vector<double> o, lse;      // forward
  std::vector<double> dq, dk, dv;  // backward (filled when dout is given)
};

inline Result attention(const Dims& m, const std::vector<double>& q, const std::vector<double>& k,
                        const std::vector<double>& v, const std::vector<double>* dout, bool causal) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(m.d));
  Result r;
  r.o.assign(m.q_elems(), 0.0);
  r.lse.assign(m.rows(), 0.0);
  if (dout) {
    r.dq.assign(m.q_elems(), 0.0);
    r.dk.assign(m.k_elems(), 0.0);
    r.dv.assign(m.k_elems(), 0.0);
  }
  std::vector<double> p(m.tq * m.tk), dp(m.tq * m.tk);
  for (int64_t bh = 0; bh < m.B * m.H; ++bh) {
    const double* Q = &q[bh * m.tq * m.d];
    const double* K = &k[bh * m.tk * m.d];
    const double* V = &v[bh * m.tk * m.d];
    for (int64_t i = 0; i < m.tq; ++i) {
      double mx = -INFINITY;
      for (int64_t j = 0; j < m.tk; ++j) {
        double s = 0;
        for (int64_t c = 0; c < m.d; ++c) s += Q[i * m.d + c] * K[j * m.d + c];
        s *= scale;
        if (causal && j > i) s += -1e6;
        p[i * m.tk + j] = s;
        mx = std::max(mx, s);
      }
      double sum = 0;
      for (int64_t j = 0; j < m.tk; ++j) sum += std::exp(p[i * m.tk + j] - mx);
      r.lse[bh * m.tq + i] = mx + std::log(sum);
      for (int64_t j = 0; j < m.tk; ++j) p[i * m.tk + j] = std::exp(p[i * m.tk + j] - mx) / sum;
      for (int64_t c = 0; c < m.d; ++c) {
        double o = 0;
        for (int64_t j = 0; j < m.tk; ++j) o += p[i * m.tk + j] * V[j * m.d + c];
        r.o[(bh * m.tq + i) * m.d + c] = o;
      }
    }
    if (!dout) continue;
    const double* dO = &(*dout)[bh * m.tq * m.d];
    for (int64_t i = 0; i < m.tq; ++i) {
      double pdp = 0;
      for (int64_t j = 0; j < m.tk; ++j) {
        double s = 0;
        for (int64_t c = 0; c < m.d; ++c) s += dO[i * m.d + c] * V[j * m.d + c];
        dp[i * m.tk + j] = s;
        pdp += p[i * m.tk + j] * s;
      }
      for (int64_t j = 0; j < m.tk; ++j) dp[i * m.tk + j] = p[i * m.tk + j] * (dp[i * m.tk + j] - pdp);  // dS
    }
    for (int64_t i = 0; i < m.tq; ++i)
      for (int64_t j = 0; j < m.tk; ++j) {
        const double ds = dp[i * m.tk + j] * scale, pij = p[i * m.tk + j];
        for (int64_t c = 0; c < m.d; ++c) {
          r.dq[(bh * m.tq + i) * m.d + c] += ds * K[j * m.d + c];
          r.dk[(bh * m.tk + j) * m.d + c] += ds * Q[i * m.d + c];
          r.dv[(bh * m.tk + j) * m.d + c] += pij * dO[i * m.d + c];
        }
      }
  }
  return r;
}

// (B, H, T, D) gradients turned back by RoPE's inverse at positions 0..T-1 (pairs (2i, 2i+1),
// angle t · theta^(-2i/D)), in fp64: what the backward's `unrotate` promises for dq and dk.
inline std::vector<double> unrotate(std::vector<double> g, int64_t B, int64_t H, int64_t T, int64_t D, double theta) {
  for (int64_t bh = 0; bh < B * H; ++bh)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < D / 2; ++i) {
        const double a = double(t) * std::pow(theta, -double(2 * i) / double(D));
        double& x0 = g[(bh * T + t) * D + 2 * i];
        double& x1 = g[(bh * T + t) * D + 2 * i + 1];
        const double y0 = x0 * std::cos(a) + x1 * std::sin(a), y1 = x1 * std::cos(a) - x0 * std::sin(a);
        x0 = y0, x1 = y1;
      }
  return g;
}

}  // namespace pt::test::flash_ref
