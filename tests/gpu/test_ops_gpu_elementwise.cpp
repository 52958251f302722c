// Elementwise maps, casts, SwiGLU and bias on the GPU against the fp64 CPU reference (conventions:
// test_ops_gpu_helpers.h); SwiGLU's amax outputs against ops::fp8_amax of what it stored.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "gpu/test_ops_gpu_helpers.h"
#include "ops/elementwise.h"
#include "ops/fp8.h"

namespace pt::test {
namespace {

// A GPU tensor of n elements starting one element into its buffer: never 16-byte aligned,
// so kernels take their scalar path.
Tensor misaligned(Context& gpu, DType dtype, const std::vector<double>& v) {
  std::vector<double> padded(v.size() + 1, 0.0);
  std::copy(v.begin(), v.end(), padded.begin() + 1);
  return make_tensor(gpu, {int64_t(padded.size())}, dtype, padded).narrow(0, 1, int64_t(v.size()));
}

// ---- elementwise ------------------------------------------------------------------------

class GpuElementwise : public ::testing::TestWithParam<int64_t> {};  // element count

TEST_P(GpuElementwise, MixedTypesMatchCpu) {
  PT_REQUIRE_GPU();
  const int64_t n = GetParam();
  Context gpu(Device::cuda(0)), cpu(Device::cpu());
  const auto av = randn(n, 1), bv = randn(n, 2), cv = randn(n, 3, 2.0);
  for (DType ta : {DType::F32, DType::BF16})
    for (DType tb : {DType::F32, DType::BF16})
      for (DType to : {DType::F32, DType::BF16}) {
        SCOPED_TRACE(std::string(dtype_name(to)) + " = " + dtype_name(ta) + " + " + dtype_name(tb));
        Pair a = make_twin(gpu, cpu, {n}, ta, av), b = make_twin(gpu, cpu, {n}, tb, bv);
        Pair out = make_output(gpu, cpu, {n}, to);
        ops::add(gpu, out.gpu, a.gpu, b.gpu);
        ops::add(cpu, out.cpu, a.cpu, b.cpu);
        PT_EXPECT_GPU_CLOSE(out.gpu, out.cpu, gpu, cpu, tol_for(to), 1e-6);
      }
  // x += alpha·y (fp32 residual stream += bf16 branch), x *= alpha, relu, relu backward in place.
  Pair x = make_twin(gpu, cpu, {n}, DType::F32, av), y = make_twin(gpu, cpu, {n}, DType::BF16, bv);
  ops::add_inplace(gpu, x.gpu, y.gpu, 0.5f);
  ops::add_inplace(cpu, x.cpu, y.cpu, 0.5f);
  PT_EXPECT_GPU_CLOSE(x.gpu, x.cpu, gpu, cpu, kTolF32, 1e-7);
  ops::scale_inplace(gpu, x.gpu, -3.0f);
  ops::scale_inplace(cpu, x.cpu, -3.0f);
  PT_EXPECT_GPU_CLOSE(x.gpu, x.cpu, gpu, cpu, kTolF32, 1e-7);
  Pair r = make_output(gpu, cpu, {n}, DType::F32);
  ops::relu_forward(gpu, r.gpu, x.gpu);
  ops::relu_forward(cpu, r.cpu, x.cpu);
  PT_EXPECT_GPU_CLOSE(r.gpu, r.cpu, gpu, cpu, kTolF32, 1e-7);  // x itself differs by fp32 rounding
  Pair dr = make_twin(gpu, cpu, {n}, DType::F32, cv);
  ops::relu_backward(gpu, dr.gpu, dr.gpu, r.gpu);
  ops::relu_backward(cpu, dr.cpu, dr.cpu, r.cpu);
  PT_EXPECT_GPU_CLOSE(dr.gpu, dr.cpu, gpu, cpu, 0.0, 0.0);  // a mask of identical values: exact
}

INSTANTIATE_TEST_SUITE_P(Sizes, GpuElementwise, ::testing::Values(int64_t(4096), int64_t(1001), int64_t(7)));

TEST(GpuCast, RoundsToNearestEven) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0)), cpu(Device::cpu());
  const int64_t n = 1003;
  const auto v = randn(n, 4, 100.0);
  Tensor src = make_tensor(gpu, {n}, DType::F32, v);
  Tensor bf = Tensor::empty({n}, DType::BF16, gpu.device()), back = Tensor::empty({n}, DType::F32, gpu.device());
  poison(gpu, bf);
  poison(gpu, back);
  ops::cast(gpu, bf, src);
  ops::cast(gpu, back, bf);
  const auto got_bf = bf.to_host_f64(gpu), got_back = back.to_host_f64(gpu);
  for (int64_t i = 0; i < n; ++i) {
    const double want = double(round_to_bf16(float(v[i])));
    EXPECT_EQ(got_bf[i], want) << "at " << i;
    EXPECT_EQ(got_back[i], want) << "at " << i;
  }
  // Misaligned source and destination (scalar path) give the same bits.
  Tensor src_m = misaligned(gpu, DType::F32, v);
  Tensor bf_storage = Tensor::empty({n + 1}, DType::BF16, gpu.device());
  Tensor bf_m = bf_storage.narrow(0, 1, n);
  ops::cast(gpu, bf_m, src_m);
  const auto got_m = bf_storage.to_host_f64(gpu);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(got_m[i + 1], got_bf[i]) << "at " << i;
  // Scaled casts (the bf16 gradient sync's way back): one rounding of the fp32 product, on the
  // vector path and on a misaligned view.
  ops::cast(gpu, back, bf, 1.0f / 3.0f);
  Tensor back_storage = Tensor::empty({n + 1}, DType::F32, gpu.device());
  Tensor back_m = back_storage.narrow(0, 1, n);
  ops::cast(gpu, back_m, bf_m, 0.5f);
  const auto got_scaled = back.to_host_f64(gpu), got_scaled_m = back_storage.to_host_f64(gpu);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(got_scaled[i], double(float(got_bf[i]) * (1.0f / 3.0f))) << "at " << i;
    EXPECT_EQ(got_scaled_m[i + 1], double(float(got_bf[i]) * 0.5f)) << "at " << i;
  }
}

TEST(GpuMisaligned, ViewsTakeTheScalarPath) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0)), cpu(Device::cpu());
  const int64_t n = 1000;
  const auto av = randn(n, 5);
  Tensor a = misaligned(gpu, DType::F32, av);
  Tensor out_storage = Tensor::empty({n + 1}, DType::F32, gpu.device());
  poison(gpu, out_storage);
  Tensor out = out_storage.narrow(0, 1, n);
  ops::swiglu_forward(gpu, out, a, a);
  Tensor ac = make_tensor(cpu, {n}, DType::F64, stored(av, DType::F32));
  Tensor ref = Tensor::empty({n}, DType::F64, cpu.device());
  ops::swiglu_forward(cpu, ref, ac, ac);
  const auto got = out_storage.to_host_f64(gpu);
  const auto want = ref.to_host_f64(cpu);
  EXPECT_TRUE(std::isnan(got[0]));  // the element before the view is untouched
  EXPECT_LE(allclose_ratio(std::vector<double>(got.begin() + 1, got.end()), want, kTolF32, 1e-7), 1.0);
}

class GpuSwiglu : public ::testing::TestWithParam<std::tuple<DType, int64_t>> {};

TEST_P(GpuSwiglu, ForwardAndBackward) {
  PT_REQUIRE_GPU();
  const auto [dt, cols] = GetParam();
  Context gpu(Device::cuda(0)), cpu(Device::cpu());
  const int64_t rows = 5, n = rows * cols;
  Pair h1 = make_twin(gpu, cpu, {rows, cols}, dt, randn(n, 7, 2.0)),
       h3 = make_twin(gpu, cpu, {rows, cols}, dt, randn(n, 8));
  Pair g = make_output(gpu, cpu, {rows, cols}, dt);
  ops::swiglu_forward(gpu, g.gpu, h1.gpu, h3.gpu);
  ops::swiglu_forward(cpu, g.cpu, h1.cpu, h3.cpu);
  PT_EXPECT_GPU_CLOSE(g.gpu, g.cpu, gpu, cpu, tol_for(dt), 1e-6);
  Pair dg = make_twin(gpu, cpu, {rows, cols}, dt, randn(n, 9));
  Pair dh1 = make_output(gpu, cpu, {rows, cols}, dt);
  ops::swiglu_backward(gpu, dh1.gpu, dg.gpu, dg.gpu, h1.gpu, h3.gpu);  // dh3 overwrites dg
  ops::swiglu_backward(cpu, dh1.cpu, dg.cpu, dg.cpu, h1.cpu, h3.cpu);
  PT_EXPECT_GPU_CLOSE(dh1.gpu, dh1.cpu, gpu, cpu, tol_for(dt), 1e-6);
  PT_EXPECT_GPU_CLOSE(dg.gpu, dg.cpu, gpu, cpu, tol_for(dt), 1e-6);
}

// The recompute backward's single pass (g written beside dh1 and dh3, dh1 in dg's place) gives
// what swiglu_forward then swiglu_backward give, bit for bit.
TEST_P(GpuSwiglu, BackwardWithTheForwardProductInOnePass) {
  PT_REQUIRE_GPU();
  const auto [dt, cols] = GetParam();
  Context gpu(Device::cuda(0));
  const int64_t rows = 5, n = rows * cols;
  Tensor h1 = make_tensor(gpu, {rows, cols}, dt, randn(n, 7, 2.0)),
         h3 = make_tensor(gpu, {rows, cols}, dt, randn(n, 8));
  Tensor g_ref = Tensor::empty({rows, cols}, dt, gpu.device());
  ops::swiglu_forward(gpu, g_ref, h1, h3);
  Tensor dg = make_tensor(gpu, {rows, cols}, dt, randn(n, 9));
  Tensor dh1_ref = Tensor::empty({rows, cols}, dt, gpu.device()),
         dh3_ref = Tensor::empty({rows, cols}, dt, gpu.device());
  ops::swiglu_backward(gpu, dh1_ref, dh3_ref, dg, h1, h3);
  Tensor g = Tensor::empty({rows, cols}, dt, gpu.device()), dh3 = Tensor::empty({rows, cols}, dt, gpu.device());
  poison(gpu, g);
  poison(gpu, dh3);
  ops::swiglu_backward(gpu, dg, dh3, dg, h1, h3, &g);  // dh1 overwrites dg
  EXPECT_EQ(g.to_host_f64(gpu), g_ref.to_host_f64(gpu));
  EXPECT_EQ(dg.to_host_f64(gpu), dh1_ref.to_host_f64(gpu));
  EXPECT_EQ(dh3.to_host_f64(gpu), dh3_ref.to_host_f64(gpu));
  EXPECT_THROW(ops::swiglu_backward(gpu, dg, dh3, dg, h1, h3, &dg), pt::Error);  // g may not alias
}

INSTANTIATE_TEST_SUITE_P(TypesAndWidths, GpuSwiglu,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16),
                                            ::testing::Values(int64_t(64), int64_t(13))));

// ---- SwiGLU's amax outputs ----------------------------------------------------------------

// A tensor's bytes, for bit-for-bit comparisons.
std::vector<uint8_t> bytes_of(Context& ctx, const Tensor& t) {
  std::vector<uint8_t> out(t.nbytes());
  copy_bytes(ctx, out.data(), DeviceKind::CPU, t.data(), t.device().kind, out.size());
  return out;
}
// n fp32 elements filled with NaN: an amax the op does not zero, or does not write, shows.
Tensor poisoned_amax(Context& gpu, int64_t n) {
  Tensor t = Tensor::empty({n}, DType::F32, gpu.device());
  poison(gpu, t);
  return t;
}

struct AmaxCase {
  DType dt;
  int64_t n;
  bool misaligned;  // every tensor one element into its buffer: the element-by-element path only
};
std::string case_name(const AmaxCase& c) {
  return std::string(dtype_name(c.dt)) + "_n" + std::to_string(c.n) + (c.misaligned ? "_misaligned" : "");
}
void PrintTo(const AmaxCase& c, std::ostream* os) { *os << case_name(c); }
class GpuSwigluAmax : public ::testing::TestWithParam<AmaxCase> {};

// The amax the op writes beside g (forward) and beside dh1, dh3 (backward, with and without the
// recomputed g, dh1 written over dg) equals ops::fp8_amax of the stored output bit for bit, and
// the outputs are the bytes of the call without an amax. The largest |g| and |dh1| are planted,
// negative, at the last element (the tail when n is not a multiple of the pack).
TEST_P(GpuSwigluAmax, EqualsFp8AmaxOfTheStoredOutput) {
  PT_REQUIRE_GPU();
  const AmaxCase c = GetParam();
  Context gpu(Device::cuda(0));
  const int64_t n = c.n;
  auto h1v = randn(n, 31, 2.0), h3v = randn(n, 32), dgv = randn(n, 33);
  h1v[size_t(n - 1)] = 3.0;
  h3v[size_t(n - 1)] = -40.0;
  dgv[size_t(n - 1)] = 1.0;
  auto input = [&](const std::vector<double>& v) {
    return c.misaligned ? misaligned(gpu, c.dt, v) : make_tensor(gpu, {n}, c.dt, v);
  };
  auto output = [&] {
    Tensor t = c.misaligned ? Tensor::empty({n + 1}, c.dt, gpu.device()).narrow(0, 1, n)
                            : Tensor::empty({n}, c.dt, gpu.device());
    poison(gpu, t);
    return t;
  };
  Tensor h1 = input(h1v), h3 = input(h3v);

  Tensor g_ref = output(), g = output(), g_amax = poisoned_amax(gpu, 1), want = poisoned_amax(gpu, 1);
  ops::swiglu_forward(gpu, g_ref, h1, h3);
  ops::swiglu_forward(gpu, g, h1, h3, &g_amax);
  EXPECT_EQ(bytes_of(gpu, g), bytes_of(gpu, g_ref));
  ops::fp8_amax(gpu, want, g);
  EXPECT_EQ(bytes_of(gpu, g_amax), bytes_of(gpu, want));
  EXPECT_GT(g_amax.to_host_f64(gpu)[0], 100.0);  // the plant: silu(3)·40

  Tensor dg = input(dgv), dh1_ref = output(), dh3_ref = output();
  ops::swiglu_backward(gpu, dh1_ref, dh3_ref, dg, h1, h3);
  for (bool recompute : {false, true}) {
    SCOPED_TRACE(recompute ? "with g" : "without g");
    Tensor dh1 = input(dgv), dh3 = output(), g2 = output();
    Tensor dh_amax = poisoned_amax(gpu, 2), want2 = poisoned_amax(gpu, 2);
    ops::swiglu_backward(gpu, dh1, dh3, dh1, h1, h3, recompute ? &g2 : nullptr, &dh_amax);  // dh1 over dg
    EXPECT_EQ(bytes_of(gpu, dh1), bytes_of(gpu, dh1_ref));
    EXPECT_EQ(bytes_of(gpu, dh3), bytes_of(gpu, dh3_ref));
    if (recompute) EXPECT_EQ(bytes_of(gpu, g2), bytes_of(gpu, g_ref));
    Tensor want_dh1 = want2.narrow(0, 0, 1), want_dh3 = want2.narrow(0, 1, 1);
    ops::fp8_amax(gpu, want_dh1, dh1);
    ops::fp8_amax(gpu, want_dh3, dh3);
    EXPECT_EQ(bytes_of(gpu, dh_amax), bytes_of(gpu, want2));
    const auto got = dh_amax.to_host_f64(gpu);
    EXPECT_GT(got[0], 40.0);  // the plant: 40·silu'(3)
    EXPECT_NE(got[0], got[1]);
  }
}

std::vector<AmaxCase> amax_cases() {
  std::vector<AmaxCase> out;
  for (DType dt : {DType::F32, DType::BF16}) {
    // A multiple of the pack, not one, tiny, and millions (a grid of thousands of blocks).
    for (int64_t n : {int64_t{8 * 125}, int64_t{1001}, int64_t{3}, int64_t{1} << 22, (int64_t{1} << 21) + 5})
      out.push_back({dt, n, false});
    out.push_back({dt, 1001, true});
  }
  return out;
}
INSTANTIATE_TEST_SUITE_P(All, GpuSwigluAmax, ::testing::ValuesIn(amax_cases()),
                         [](const auto& info) { return case_name(info.param); });

// An amax tensor on the host (the model's buffers live on the GPU) is the one clear error.
TEST(GpuSwigluAmaxEdges, AmaxOnTheHostIsAClearError) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0)), cpu(Device::cpu());
  Tensor h = make_tensor(gpu, {16}, DType::BF16, randn(16, 34)), out = Tensor::empty({16}, DType::BF16, gpu.device());
  Tensor dh3 = Tensor::empty({16}, DType::BF16, gpu.device());
  Tensor host_one = Tensor::empty({1}, DType::F32, cpu.device()),
         host_two = Tensor::empty({2}, DType::F32, cpu.device());
  EXPECT_ERROR_HAS(ops::swiglu_forward(gpu, out, h, h, &host_one),
                   "swiglu_forward: g_amax is on cpu but the context runs on cuda:0");
  EXPECT_ERROR_HAS(ops::swiglu_backward(gpu, out, dh3, out, h, h, nullptr, &host_two),
                   "swiglu_backward: dh_amax is on cpu but the context runs on cuda:0");
}

TEST(GpuBias, ForwardAndBackward) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0)), cpu(Device::cpu());
  for (int64_t cols : {int64_t(48), int64_t(37)}) {
    const int64_t rows = 300;  // several row slices → several atomics per column
    Pair y = make_twin(gpu, cpu, {rows, cols}, DType::F32, randn(rows * cols, 10));
    Pair bias = make_twin(gpu, cpu, {cols}, DType::F32, randn(cols, 11));
    ops::add_bias(gpu, y.gpu, bias.gpu);
    ops::add_bias(cpu, y.cpu, bias.cpu);
    PT_EXPECT_GPU_CLOSE(y.gpu, y.cpu, gpu, cpu, kTolF32, 1e-7);
    Pair dbias = make_twin(gpu, cpu, {cols}, DType::F32, randn(cols, 12));  // accumulated into
    Pair dy = make_twin(gpu, cpu, {rows, cols}, DType::BF16, randn(rows * cols, 13));
    ops::bias_backward(gpu, dbias.gpu, dy.gpu);
    ops::bias_backward(cpu, dbias.cpu, dy.cpu);
    PT_EXPECT_GPU_CLOSE(dbias.gpu, dbias.cpu, gpu, cpu, kTolF32, 1e-6);
  }
}

}  // namespace
}  // namespace pt::test
