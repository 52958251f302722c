// Naive attention on the CPU: forward against softmax(QKᵀ/sqrt(D) + mask)·V evaluated here,
// gradients against finite differences, and the same results on strided views of a fused
// (B, T, 3, H, D) QKV buffer with outputs written into views.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "core/profiler.h"
#include "cpu/test_ops_helpers.h"
#include "ops/attention.h"

namespace pt::test {
namespace {

struct Dims {
  int64_t B, H, Tq, Tk, D;
};

// Contiguous (B, H, T, D) inputs → out (B, H, Tq, D); probs (B, H, Tq, Tk) if asked.
std::vector<double> attention_ref(const Dims& d, const std::vector<double>& q, const std::vector<double>& k,
                                  const std::vector<double>& v, bool causal, std::vector<double>* probs = nullptr) {
  std::vector<double> out(d.B * d.H * d.Tq * d.D, 0.0);
  if (probs) probs->assign(d.B * d.H * d.Tq * d.Tk, 0.0);
  const double scale = 1.0 / std::sqrt(double(d.D));
  for (int64_t bh = 0; bh < d.B * d.H; ++bh)
    for (int64_t i = 0; i < d.Tq; ++i) {
      std::vector<double> s(d.Tk);
      double mx = -1e300;
      for (int64_t j = 0; j < d.Tk; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < d.D; ++c) dot += q[(bh * d.Tq + i) * d.D + c] * k[(bh * d.Tk + j) * d.D + c];
        s[j] = dot * scale;
        if (!causal || j <= i + d.Tk - d.Tq) mx = std::max(mx, s[j]);
      }
      double total = 0;
      for (int64_t j = 0; j < d.Tk; ++j) {
        s[j] = (!causal || j <= i + d.Tk - d.Tq) ? std::exp(s[j] - mx) : 0.0;
        total += s[j];
      }
      for (int64_t j = 0; j < d.Tk; ++j) {
        const double p = s[j] / total;
        if (probs) (*probs)[(bh * d.Tq + i) * d.Tk + j] = p;
        for (int64_t c = 0; c < d.D; ++c) out[(bh * d.Tq + i) * d.D + c] += p * v[(bh * d.Tk + j) * d.D + c];
      }
    }
  return out;
}

class AttentionCases : public ::testing::TestWithParam<std::tuple<bool, int64_t>> {};

TEST_P(AttentionCases, ForwardAndGradients) {
  const auto [causal, tk] = GetParam();
  const Dims d{2, 3, 4, tk, 6};
  Context ctx(Device::cpu());
  const auto qv = randn(d.B * d.H * d.Tq * d.D, 1), kv = randn(d.B * d.H * d.Tk * d.D, 2),
             vv = randn(d.B * d.H * d.Tk * d.D, 3), w = randn(d.B * d.H * d.Tq * d.D, 4);
  Tensor q = f64(ctx, {d.B, d.H, d.Tq, d.D}, qv), k = f64(ctx, {d.B, d.H, d.Tk, d.D}, kv),
         v = f64(ctx, {d.B, d.H, d.Tk, d.D}, vv);
  Tensor out = Tensor::empty({d.B, d.H, d.Tq, d.D}, DType::F64, ctx.device());
  Tensor probs = Tensor::empty({d.B, d.H, d.Tq, d.Tk}, DType::F64, ctx.device());
  poison(ctx, out);
  poison(ctx, probs);
  ops::naive_attention_forward(ctx, out, probs, q, k, v, causal);
  std::vector<double> ref_probs;
  const auto ref = attention_ref(d, qv, kv, vv, causal, &ref_probs);
  PT_EXPECT_ALLCLOSE(host(ctx, out), ref, 1e-13, 1e-14);
  PT_EXPECT_ALLCLOSE(host(ctx, probs), ref_probs, 1e-13, 1e-15);

  Tensor dq = Tensor::empty(q.shape(), DType::F64, ctx.device()),
         dk = Tensor::empty(k.shape(), DType::F64, ctx.device()),
         dv = Tensor::empty(v.shape(), DType::F64, ctx.device());
  poison(ctx, dq);
  poison(ctx, dk);
  poison(ctx, dv);
  ops::naive_attention_backward(ctx, dq, dk, dv, f64(ctx, out.shape(), w), q, k, v, probs, causal);
  expect_gradient([&](const std::vector<double>& x) { return attention_ref(d, x, kv, vv, causal); }, qv, w,
                  host(ctx, dq));
  expect_gradient([&](const std::vector<double>& x) { return attention_ref(d, qv, x, vv, causal); }, kv, w,
                  host(ctx, dk));
  expect_gradient([&](const std::vector<double>& x) { return attention_ref(d, qv, kv, x, causal); }, vv, w,
                  host(ctx, dv));
}

// Causal with Tk ∈ {4 (= Tq), 7 (bottom-right aligned)}; non-causal with Tk ∈ {4, 7}.
INSTANTIATE_TEST_SUITE_P(MaskAndLength, AttentionCases,
                         ::testing::Combine(::testing::Bool(), ::testing::Values(int64_t(4), int64_t(7))));

TEST(Attention, StridedViewsOfFusedQkvMatchContiguous) {
  Context ctx(Device::cpu());
  const int64_t B = 2, T = 5, H = 2, D = 4, C = H * D;
  const Dims d{B, H, T, T, D};
  const auto qkv_v = randn(B * T * 3 * C, 5), w = randn(B * H * T * D, 6);
  Tensor qkv = f64(ctx, {B, T, 3, H, D}, qkv_v);
  // (B, H, T, D) views into the fused buffer and into a token-major (B, T, H, D) output.
  auto view = [&](Tensor& t, int64_t which) { return t.as_strided({B, H, T, D}, {T * 3 * C, D, 3 * C, 1}, which * C); };
  Tensor q = view(qkv, 0), k = view(qkv, 1), v = view(qkv, 2);
  Tensor out_tok = Tensor::empty({B, T, H, D}, DType::F64, ctx.device());
  poison(ctx, out_tok);
  Tensor out = out_tok.as_strided({B, H, T, D}, {T * C, D, C, 1});
  Tensor probs = Tensor::empty({B, H, T, T}, DType::F64, ctx.device());
  ops::naive_attention_forward(ctx, out, probs, q, k, v, true);

  // The same on contiguous copies, through the reference.
  std::vector<double> qc(B * H * T * D), kc(qc.size()), vc(qc.size()), wt(qc.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < D; ++c) {
          const int64_t dst = ((b * H + h) * T + t) * D + c;
          qc[dst] = qkv_v[(((b * T + t) * 3 + 0) * H + h) * D + c];
          kc[dst] = qkv_v[(((b * T + t) * 3 + 1) * H + h) * D + c];
          vc[dst] = qkv_v[(((b * T + t) * 3 + 2) * H + h) * D + c];
        }
  const auto ref = attention_ref(d, qc, kc, vc, true);
  const auto got_tok = host(ctx, out_tok);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < D; ++c)
          EXPECT_NEAR(got_tok[((b * T + t) * H + h) * D + c], ref[((b * H + h) * T + t) * D + c], 1e-13);

  // Gradients into views of a fused dqkv buffer equal the contiguous gradients.
  Tensor dqkv = Tensor::empty({B, T, 3, H, D}, DType::F64, ctx.device());
  poison(ctx, dqkv);
  Tensor dq = view(dqkv, 0), dk = view(dqkv, 1), dv = view(dqkv, 2);
  Tensor dout = f64(ctx, {B, H, T, D}, w);
  ops::naive_attention_backward(ctx, dq, dk, dv, dout, q, k, v, probs, true);
  Tensor qt = f64(ctx, {B, H, T, D}, qc), kt = f64(ctx, {B, H, T, D}, kc), vt = f64(ctx, {B, H, T, D}, vc);
  Tensor dqc = Tensor::empty(qt.shape(), DType::F64, ctx.device()),
         dkc = Tensor::empty(qt.shape(), DType::F64, ctx.device()),
         dvc = Tensor::empty(qt.shape(), DType::F64, ctx.device());
  ops::naive_attention_backward(ctx, dqc, dkc, dvc, dout, qt, kt, vt, probs, true);
  const auto fused = host(ctx, dqkv);
  const std::vector<double> contiguous[3] = {host(ctx, dqc), host(ctx, dkc), host(ctx, dvc)};
  for (int64_t which = 0; which < 3; ++which)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t t = 0; t < T; ++t)
          for (int64_t c = 0; c < D; ++c)
            EXPECT_NEAR(fused[(((b * T + t) * 3 + which) * H + h) * D + c],
                        contiguous[which][((b * H + h) * T + t) * D + c], 1e-13);
}

TEST(Attention, ThreeDimensionalInputIsOneHead) {
  Context ctx(Device::cpu());
  const Dims d{2, 1, 3, 3, 4};
  const auto qv = randn(24, 7), kv = randn(24, 8), vv = randn(24, 9);
  Tensor q = f64(ctx, {2, 3, 4}, qv), k = f64(ctx, {2, 3, 4}, kv), v = f64(ctx, {2, 3, 4}, vv);
  Tensor out = Tensor::empty({2, 3, 4}, DType::F64, ctx.device()),
         probs = Tensor::empty({2, 1, 3, 3}, DType::F64, ctx.device());
  ops::naive_attention_forward(ctx, out, probs, q, k, v, true);
  PT_EXPECT_ALLCLOSE(host(ctx, out), attention_ref(d, qv, kv, vv, true), 1e-13, 1e-14);
}

TEST(Attention, PhasesAreTimedUnderTheirFamilies) {
  // "computing attention scores" and "final matmul" count as Matmul, "computing softmax" as
  // Softmax; the matmul/softmax ops nested inside are not counted a second time.
  Context ctx(Device::cpu());
  KernelTimer timer(ctx);
  ctx.set_timer(&timer);
  const int64_t B = 3;
  Tensor q = f64(ctx, {B, 2, 4, 8}, randn(B * 64, 1));
  Tensor out = Tensor::empty({B, 2, 4, 8}, DType::F64, ctx.device()),
         probs = Tensor::empty({B, 2, 4, 4}, DType::F64, ctx.device());
  timer.set_phase("forward");
  ops::naive_attention_forward(ctx, out, probs, q, q, q, true);
  ctx.set_timer(nullptr);
  int64_t matmuls = 0, softmaxes = 0, others = 0;
  for (const auto& e : timer.collect()) {
    if (e.family == OpFamily::Matmul)
      matmuls += e.count;
    else if (e.family == OpFamily::Softmax)
      softmaxes += e.count;
    else
      others += e.count;
  }
  EXPECT_EQ(matmuls, B + 1);  // one scores GEMM per batch entry, one "final matmul" range
  EXPECT_EQ(softmaxes, B);
  EXPECT_EQ(others, 0);
}

TEST(Attention, MismatchedInputsGiveClearErrors) {
  Context ctx(Device::cpu());
  Tensor q = f64(ctx, {1, 2, 3, 4}, randn(24, 1)), k = f64(ctx, {1, 3, 3, 4}, randn(36, 2));
  Tensor out = Tensor::empty({1, 2, 3, 4}, DType::F64, ctx.device()),
         probs = Tensor::empty({1, 2, 3, 3}, DType::F64, ctx.device());
  try {
    ops::naive_attention_forward(ctx, out, probs, q, k, k, false);
    FAIL() << "different head counts accepted";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find(
            "naive_attention_forward: q (1, 2, 3, 4), k (1, 3, 3, 4) and v (1, 3, 3, 4) differ in batch or heads"),
        std::string::npos)
        << e.what();
  }
  Tensor k_ok = f64(ctx, {1, 2, 3, 4}, randn(24, 3));
  Tensor probs_bad = Tensor::empty({1, 2, 3, 4}, DType::F64, ctx.device());
  EXPECT_THROW(ops::naive_attention_forward(ctx, out, probs_bad, q, k_ok, k_ok, false), Error);
}

}  // namespace
}  // namespace pt::test
