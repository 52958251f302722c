// SwiGLU's amax outputs on the CPU (FP8 current scaling's max |x| written by the op that writes
// x): each equals max |.| of the output it belongs to, as stored, the outputs are the same as
// without it, and a bad amax tensor is one clear error.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "cpu/test_ops_helpers.h"
#include "ops/elementwise.h"

namespace pt::test {
namespace {

// max |v| rounded to fp32, as the op's amax is held.
float amax_of(const std::vector<double>& v) {
  double m = 0.0;
  for (double x : v) m = std::fmax(m, std::fabs(x));
  return float(m);
}
// An amax tensor of n fp32 elements filled with NaN: an op that does not write it fails.
Tensor amax_tensor(Context& ctx, int64_t n) {
  Tensor t = Tensor::empty({n}, DType::F32, ctx.device());
  poison(ctx, t);
  return t;
}

class CpuSwigluAmax : public ::testing::TestWithParam<DType> {};

// The largest |g| and |dh1| are planted negative at the last element (a missing |.| misses them);
// dh3's maximum differs from dh1's (swapped slots show).
TEST_P(CpuSwigluAmax, EqualsMaxAbsOfTheOutputs) {
  const DType dt = GetParam();
  Context ctx(Device::cpu());
  const int64_t rows = 3, cols = 7, n = rows * cols;
  auto h1v = randn(n, 21, 2.0), h3v = randn(n, 22), dgv = randn(n, 23);
  h1v[n - 1] = 3.0;
  h3v[n - 1] = -40.0;
  dgv[n - 1] = 1.0;
  auto make = [&](const std::vector<double>& v) { return make_tensor(ctx, {rows, cols}, dt, v); };
  auto empty = [&] { return Tensor::empty({rows, cols}, dt, ctx.device()); };
  Tensor h1 = make(h1v), h3 = make(h3v);

  Tensor g_ref = empty(), g = empty(), g_amax = amax_tensor(ctx, 1);
  ops::swiglu_forward(ctx, g_ref, h1, h3);
  ops::swiglu_forward(ctx, g, h1, h3, &g_amax);
  const auto gv = host(ctx, g);
  EXPECT_EQ(gv, host(ctx, g_ref));
  EXPECT_LT(gv[n - 1], 0.0);
  EXPECT_EQ(host(ctx, g_amax)[0], double(amax_of(gv)));

  Tensor dg = make(dgv), dh1_ref = empty(), dh3_ref = empty();
  ops::swiglu_backward(ctx, dh1_ref, dh3_ref, dg, h1, h3);
  for (bool recompute : {false, true}) {
    SCOPED_TRACE(recompute ? "with g" : "without g");
    Tensor dh1 = make(dgv), dh3 = empty(), g2 = empty(), dh_amax = amax_tensor(ctx, 2);
    ops::swiglu_backward(ctx, dh1, dh3, dh1, h1, h3, recompute ? &g2 : nullptr, &dh_amax);  // dh1 over dg
    const auto d1 = host(ctx, dh1), d3 = host(ctx, dh3), am = host(ctx, dh_amax);
    EXPECT_EQ(d1, host(ctx, dh1_ref));
    EXPECT_EQ(d3, host(ctx, dh3_ref));
    if (recompute) EXPECT_EQ(host(ctx, g2), gv);
    EXPECT_LT(d1[n - 1], 0.0);
    EXPECT_NE(amax_of(d1), amax_of(d3));
    EXPECT_EQ(am[0], double(amax_of(d1)));
    EXPECT_EQ(am[1], double(amax_of(d3)));
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CpuSwigluAmax, ::testing::Values(DType::F32, DType::F64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// An empty tensor's amax is 0: the op writes it even with nothing to scan.
TEST(CpuSwigluAmaxEdges, EmptyTensorsGiveZero) {
  Context ctx(Device::cpu());
  Tensor e = Tensor::empty({0, 4}, DType::F32, ctx.device()), e3 = Tensor::empty({0, 4}, DType::F32, ctx.device());
  Tensor g_amax = amax_tensor(ctx, 1), dh_amax = amax_tensor(ctx, 2);
  ops::swiglu_forward(ctx, e, e3, e3, &g_amax);
  ops::swiglu_backward(ctx, e, e, e, e3, e3, nullptr, &dh_amax);
  EXPECT_EQ(host(ctx, g_amax), std::vector<double>{0.0});
  EXPECT_EQ(host(ctx, dh_amax), (std::vector<double>{0.0, 0.0}));
}

TEST(CpuSwigluAmaxEdges, BadAmaxTensorIsOneClearError) {
  Context ctx(Device::cpu());
  Tensor h = f32(ctx, {2, 8}, randn(16, 1)), out = f32(ctx, {2, 8}, randn(16, 2)), dh3 = f32(ctx, {2, 8}, randn(16, 3));
  Tensor wrong_type = Tensor::empty({1}, DType::F64, ctx.device());
  Tensor two = amax_tensor(ctx, 2), one = amax_tensor(ctx, 1), four = amax_tensor(ctx, 4);
  Tensor strided = four.as_strided({2}, {2});
  EXPECT_ERROR_HAS(ops::swiglu_forward(ctx, out, h, h, &wrong_type), "swiglu_forward: g_amax is fp64, expected fp32");
  EXPECT_ERROR_HAS(ops::swiglu_forward(ctx, out, h, h, &two),
                   "swiglu_forward: g_amax must hold 1 element, got shape (2,)");
  EXPECT_ERROR_HAS(ops::swiglu_backward(ctx, out, dh3, out, h, h, nullptr, &one),
                   "swiglu_backward: dh_amax must hold 2 elements, got shape (1,)");
  EXPECT_ERROR_HAS(ops::swiglu_backward(ctx, out, dh3, out, h, h, nullptr, &strided),
                   "swiglu_backward: dh_amax must be contiguous");
  EXPECT_ERROR_HAS(ops::swiglu_backward(ctx, out, dh3, out, h, h, nullptr, &wrong_type),
                   "swiglu_backward: dh_amax is fp64, expected fp32");
}

}  // namespace
}  // namespace pt::test
