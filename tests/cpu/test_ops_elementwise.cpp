// Elementwise ops and the embedding on the CPU: forwards against formulas evaluated here in
// fp64, backwards against central finite differences, aliasing, and bad-input errors.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "cpu/test_ops_helpers.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"

namespace pt::test {
namespace {

double silu(double a) { return a / (1.0 + std::exp(-a)); }
double swiglu(double a, double b) { return silu(a) * b; }

// f(a[i], b[i]) for every i.
template <typename F>
std::vector<double> zip_map(const std::vector<double>& a, const std::vector<double>& b, F f) {
  std::vector<double> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = f(a[i], b[i]);
  return out;
}

TEST(Elementwise, AddAndInPlaceVariants) {
  Context ctx(Device::cpu());
  const int64_t n = 13;
  const auto av = randn(n, 1), bv = randn(n, 2);
  Tensor a = f64(ctx, {n}, av), b = f64(ctx, {n}, bv), out = Tensor::empty({n}, DType::F64, ctx.device());
  poison(ctx, out);
  ops::add(ctx, out, a, b);
  std::vector<double> sum(n), axpy(n), scaled(n);
  for (int64_t i = 0; i < n; ++i) {
    sum[i] = av[i] + bv[i];
    axpy[i] = av[i] - 0.25 * bv[i];
    scaled[i] = 3.0 * av[i];
  }
  PT_EXPECT_ALLCLOSE(host(ctx, out), sum, 1e-15, 0);
  ops::add(ctx, a, a, b);  // out aliases a
  PT_EXPECT_ALLCLOSE(host(ctx, a), sum, 1e-15, 0);

  Tensor x = f64(ctx, {n}, av);
  ops::add_inplace(ctx, x, b, -0.25f);
  PT_EXPECT_ALLCLOSE(host(ctx, x), axpy, 1e-15, 0);
  Tensor y = f64(ctx, {n}, av);
  ops::scale_inplace(ctx, y, 3.0f);
  PT_EXPECT_ALLCLOSE(host(ctx, y), scaled, 1e-15, 0);
}

TEST(Elementwise, CastRoundsLikeTheTargetType) {
  Context ctx(Device::cpu());
  const int64_t n = 11;
  const auto v = randn(n, 3, 10.0);
  Tensor src = f64(ctx, {n}, v);
  Tensor to32 = Tensor::empty({n}, DType::F32, ctx.device()), tobf = Tensor::empty({n}, DType::BF16, ctx.device());
  ops::cast(ctx, to32, src);
  ops::cast(ctx, tobf, to32);
  const auto got32 = host(ctx, to32), gotbf = host(ctx, tobf);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(got32[i], double(float(v[i])));
    EXPECT_EQ(gotbf[i], double(round_to_bf16(float(v[i]))));
  }
  Tensor wrong = Tensor::empty({n + 1}, DType::F32, ctx.device());
  EXPECT_THROW(ops::cast(ctx, wrong, src), Error);
  // A scaled cast multiplies in fp32 and rounds once: bf16 → fp32 · 1/3 as the two-step form.
  Tensor scaled = Tensor::empty({n}, DType::F32, ctx.device());
  ops::cast(ctx, scaled, tobf, 1.0f / 3.0f);
  const auto got_scaled = host(ctx, scaled);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(got_scaled[i], double(float(gotbf[i]) * (1.0f / 3.0f))) << i;
}

TEST(Elementwise, BiasForwardAndBackward) {
  Context ctx(Device::cpu());
  const int64_t rows = 4, cols = 5;
  const auto yv = randn(rows * cols, 4), bv = randn(cols, 5), w = randn(rows * cols, 6);
  Tensor y = f64(ctx, {rows, cols}, yv), bias = f64(ctx, {cols}, bv);
  ops::add_bias(ctx, y, bias);
  std::vector<double> ref(rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) ref[r * cols + c] = yv[r * cols + c] + bv[c];
  PT_EXPECT_ALLCLOSE(host(ctx, y), ref, 1e-15, 0);

  // dbias accumulates: start from ones, expect 1 + d/dbias Σ w ⊙ (y + bias).
  Tensor dbias = f64(ctx, {cols}, std::vector<double>(cols, 1.0));
  ops::bias_backward(ctx, dbias, f64(ctx, {rows, cols}, w));
  auto forward = [&](const std::vector<double>& b) {
    std::vector<double> out(rows * cols);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = yv[r * cols + c] + b[c];
    return out;
  };
  auto got = host(ctx, dbias);
  for (double& g : got) g -= 1.0;
  expect_gradient(forward, bv, w, got);
}

TEST(Elementwise, ReluForwardAndBackward) {
  Context ctx(Device::cpu());
  const int64_t n = 17;
  auto xv = randn(n, 7);
  for (double& x : xv)
    if (std::fabs(x) < 1e-3) x = 0.5;  // keep finite differences away from the kink
  const auto w = randn(n, 8);
  Tensor x = f64(ctx, {n}, xv), y = Tensor::empty({n}, DType::F64, ctx.device());
  poison(ctx, y);
  ops::relu_forward(ctx, y, x);
  auto forward = [](const std::vector<double>& in) {
    std::vector<double> out(in.size());
    for (size_t i = 0; i < in.size(); ++i) out[i] = in[i] > 0 ? in[i] : 0.0;
    return out;
  };
  PT_EXPECT_ALLCLOSE(host(ctx, y), forward(xv), 0, 0);
  Tensor dy = f64(ctx, {n}, w);
  ops::relu_backward(ctx, dy, dy, y);  // dx aliases dy
  expect_gradient(forward, xv, w, host(ctx, dy));
}

TEST(Elementwise, SwigluForwardAndBackward) {
  Context ctx(Device::cpu());
  const int64_t rows = 3, cols = 7, n = rows * cols;
  const auto h1v = randn(n, 9, 2.0), h3v = randn(n, 10), w = randn(n, 11);
  Tensor h1 = f64(ctx, {rows, cols}, h1v), h3 = f64(ctx, {rows, cols}, h3v);
  Tensor g = Tensor::empty({rows, cols}, DType::F64, ctx.device());
  poison(ctx, g);
  ops::swiglu_forward(ctx, g, h1, h3);
  PT_EXPECT_ALLCLOSE(host(ctx, g), zip_map(h1v, h3v, swiglu), 1e-14, 1e-15);

  Tensor dg = f64(ctx, {rows, cols}, w);
  Tensor dh1 = Tensor::empty({rows, cols}, DType::F64, ctx.device());
  Tensor dh3 = Tensor::empty({rows, cols}, DType::F64, ctx.device());
  poison(ctx, dh1);
  poison(ctx, dh3);
  ops::swiglu_backward(ctx, dh1, dh3, dg, h1, h3);
  // Gradients with respect to h1 and h3 by finite differences of the same scalar.
  expect_gradient([&](const std::vector<double>& a) { return zip_map(a, h3v, swiglu); }, h1v, w, host(ctx, dh1));
  expect_gradient([&](const std::vector<double>& b) { return zip_map(h1v, b, swiglu); }, h3v, w, host(ctx, dh3));
  // dh3 aliasing dg gives the same answer.
  ops::swiglu_backward(ctx, dh1, dg, dg, h1, h3);
  PT_EXPECT_ALLCLOSE(host(ctx, dg), host(ctx, dh3), 1e-15, 0);
}

TEST(Elementwise, ShapeMismatchIsAClearError) {
  Context ctx(Device::cpu());
  Tensor a = f64(ctx, {2, 3}, randn(6, 1)), b = f64(ctx, {3, 2}, randn(6, 2));
  Tensor out = Tensor::empty({2, 3}, DType::F64, ctx.device());
  const std::string msg = error_of([&] { ops::add(ctx, out, a, b); });
  EXPECT_NE(msg.find("add: b has shape (3, 2) but out has (2, 3)"), std::string::npos) << "got: '" << msg << "'";
  Tensor a32 = f32(ctx, {2, 3}, randn(6, 1));
  EXPECT_THROW(ops::add(ctx, out, a32, a), Error);  // the CPU computes in one type
}

TEST(Embedding, GatherAndScatterAdd) {
  Context ctx(Device::cpu());
  const int64_t vocab = 6, dim = 5;
  const std::vector<int32_t> idv = {3, 0, 3, 5, 1, 3};  // repeated ids accumulate
  const int64_t n = int64_t(idv.size());
  const auto wv = randn(vocab * dim, 12), gv = randn(n * dim, 13);
  Tensor ids = make_ids(ctx, {n}, idv), weight = f64(ctx, {vocab, dim}, wv);
  Tensor out = Tensor::empty({n, dim}, DType::F64, ctx.device());
  poison(ctx, out);
  ops::embedding_forward(ctx, out, ids, weight);
  auto forward = [&](const std::vector<double>& w) {
    std::vector<double> o(n * dim);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < dim; ++c) o[i * dim + c] = w[idv[i] * dim + c];
    return o;
  };
  PT_EXPECT_ALLCLOSE(host(ctx, out), forward(wv), 0, 0);

  Tensor dweight = f64(ctx, {vocab, dim}, std::vector<double>(vocab * dim, 0.5));
  ops::embedding_backward(ctx, dweight, f64(ctx, {n, dim}, gv), ids);
  auto got = host(ctx, dweight);
  for (double& g : got) g -= 0.5;  // dweight is accumulated into
  expect_gradient(forward, wv, gv, got);
}

TEST(Embedding, OutOfRangeIdIsAClearError) {
  Context ctx(Device::cpu());
  Tensor weight = f64(ctx, {4, 2}, randn(8, 1));
  Tensor ids = make_ids(ctx, {3}, {1, 4, 0});
  Tensor out = Tensor::empty({3, 2}, DType::F64, ctx.device());
  const std::string msg = error_of([&] { ops::embedding_forward(ctx, out, ids, weight); });
  EXPECT_NE(msg.find("token id 4 at position 1 is outside [0, 4)"), std::string::npos) << "got: '" << msg << "'";
}

}  // namespace
}  // namespace pt::test
