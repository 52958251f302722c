// Optimizer arithmetic (AdamW, SGD, norm, clip) on the GPU against the fp64 CPU reference (conventions:
// test_ops_gpu_helpers.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "gpu/test_ops_gpu_helpers.h"
#include "ops/optim_kernels.h"

namespace pt::test {
namespace {

// ---- optimizer ------------------------------------------------------------------------------

TEST(GpuOptim, AdamWWithBf16CopyOverSteps) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0)), cpu(Device::cpu());
  for (int64_t n : {int64_t(4096), int64_t(1003)}) {
    Pair p = make_twin(gpu, cpu, {n}, DType::F32, randn(n, 33));
    Pair m = make_twin(gpu, cpu, {n}, DType::F32, std::vector<double>(n, 0.0));
    Pair v = make_twin(gpu, cpu, {n}, DType::F32, std::vector<double>(n, 0.0));
    Tensor lowp = Tensor::empty({n}, DType::BF16, gpu.device());
    ops::AdamWHyper h;
    h.weight_decay = 0.1f;
    for (int64_t step = 1; step <= 3; ++step) {
      h.step = step;
      Pair g = make_twin(gpu, cpu, {n}, DType::F32, randn(n, 40 + step));
      poison(gpu, lowp);
      ops::adamw_step(gpu, p.gpu, g.gpu, m.gpu, v.gpu, h, &lowp);
      ops::adamw_step(cpu, p.cpu, g.cpu, m.cpu, v.cpu, h);
    }
    // The update moves p by ~lr per step; fp32 against fp64 differs by a few ulps of p.
    PT_EXPECT_GPU_CLOSE(p.gpu, p.cpu, gpu, cpu, kTolF32, 1e-7);
    PT_EXPECT_GPU_CLOSE(m.gpu, m.cpu, gpu, cpu, kTolF32, 1e-7);
    PT_EXPECT_GPU_CLOSE(v.gpu, v.cpu, gpu, cpu, kTolF32, 1e-7);
    const auto pg = p.gpu.to_host_f64(gpu), lg = lowp.to_host_f64(gpu);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(lg[i], double(round_to_bf16(float(pg[i])))) << "at " << i;
  }
}

// An update of a range that meets kept FP8 weight runs (Fp8WeightRuns, the store's under
// --precision fp8): p, m and v bit for bit the plain update's; the bf16 copy written outside the
// runs only; each run's amax the max |bf16(p)| of its elements in the range, folded onto what an
// earlier range left (run 0 began before the range) and zeroed first for the others. Runs shorter
// than a block, one ending off a 4-element group, one not kept (empty), one past the range's end
// (the scalar tail's launch); with a non-finite norm (the guard) nothing changes and the amax is
// that of the values as they were.
TEST(GpuOptim, UpdateMeasuresKeptFp8RunsInsteadOfTheirCopies) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0));
  const int64_t n = 10007, base = 100;  // the range: flat [100, 10107)
  const std::vector<double> bounds = {40, 700, 704, 1500, 2000, 2000, 2000, 2003, 2008, 9000, 9500, 10200};
  const int count = 6, stride = 4;
  const float earlier = 50.0f;  // run 0's amax from the range before
  Tensor b = make_tensor(gpu, {2 * count}, DType::I64, bounds);
  int64_t elements = 0;
  for (int j = 0; j < count; ++j)
    elements +=
        std::max<int64_t>(0, std::min<int64_t>(bounds[2 * j + 1], base + n) - std::max<int64_t>(bounds[2 * j], base));
  const double nan = std::nan("");
  for (bool sgd : {false, true})
    for (bool guard : {false, true}) {
      const std::string what = std::string(sgd ? "sgd" : "adamw") + (guard ? ", guarded" : "");
      const auto p0 = randn(n, 60), g0 = randn(n, 61);
      const std::vector<double> zeros(size_t(n), 0.0), sevens(size_t(n), 7.0);
      Tensor p = make_tensor(gpu, {n}, DType::F32, p0), p2 = make_tensor(gpu, {n}, DType::F32, p0);
      Tensor g = make_tensor(gpu, {n}, DType::F32, g0);
      Tensor m = make_tensor(gpu, {n}, DType::F32, zeros), m2 = make_tensor(gpu, {n}, DType::F32, zeros);
      Tensor v = make_tensor(gpu, {n}, DType::F32, zeros), v2 = make_tensor(gpu, {n}, DType::F32, zeros);
      Tensor lowp = make_tensor(gpu, {n}, DType::BF16, sevens), lowp2 = make_tensor(gpu, {n}, DType::BF16, sevens);
      std::vector<double> slots(size_t(count * stride), 1e9);
      slots[0] = earlier;
      Tensor amax = make_tensor(gpu, {count * stride}, DType::F32, slots);
      Tensor sumsq = make_tensor(gpu, {1}, DType::F32, {guard ? nan : 4.0});
      const GradClip clip{&sumsq, 1.0f};
      Fp8WeightRuns runs;
      runs.bounds = b.data_as<const int64_t>();
      runs.amax = amax.data_as<float>();
      runs.count = count;
      runs.amax_stride = stride;
      runs.zero_from = 1;
      runs.base = base;
      runs.elements = elements;
      if (sgd) {
        ops::sgd_step(gpu, p, g, 0.1f, 0.01f, &lowp, clip, {}, nullptr, runs);
        ops::sgd_step(gpu, p2, g, 0.1f, 0.01f, &lowp2, clip);
      } else {
        ops::AdamWHyper h;
        ops::adamw_step(gpu, p, g, m, v, h, &lowp, clip, {}, nullptr, runs);
        ops::adamw_step(gpu, p2, g, m2, v2, h, &lowp2, clip);
      }
      const auto pv = p.to_host_f64(gpu);
      ASSERT_EQ(pv, p2.to_host_f64(gpu)) << what;
      ASSERT_EQ(m.to_host_f64(gpu), m2.to_host_f64(gpu)) << what;
      ASSERT_EQ(v.to_host_f64(gpu), v2.to_host_f64(gpu)) << what;
      if (guard) ASSERT_EQ(pv, stored(p0, DType::F32)) << what;
      const auto lg = lowp.to_host_f64(gpu), lg2 = lowp2.to_host_f64(gpu);
      std::vector<float> want(size_t(count), 0.0f);
      want[0] = earlier;
      for (int64_t i = 0; i < n; ++i) {
        int run = -1;
        for (int j = 0; j < count; ++j)
          if (base + i >= bounds[2 * j] && base + i < bounds[2 * j + 1]) run = j;
        if (run >= 0) {
          want[size_t(run)] = std::max(want[size_t(run)], std::fabs(round_to_bf16(float(pv[size_t(i)]))));
          ASSERT_EQ(lg[size_t(i)], 7.0) << what << ": a kept run's bytes written at " << i;
        } else {
          ASSERT_EQ(lg[size_t(i)], lg2[size_t(i)]) << what << ": the bf16 copy at " << i;
        }
      }
      const auto got = amax.to_host_f64(gpu);
      for (int j = 0; j < count; ++j)
        EXPECT_EQ(got[size_t(j * stride)], double(want[size_t(j)])) << what << ", run " << j;
      EXPECT_GT(want[3], 0.0f);  // the 3-element run holds values
    }
}

// The squared norm of 16M elements (every block of the capped grid busy, both the packed and the
// misaligned scalar path) gives the same bits in 20 runs, in fp32 and fp64: the blocks' sums meet
// in a fixed order. With one atomic add per block they arrive in whatever order the blocks end.
TEST(GpuOptim, SquaredNormRepeatsBitForBit) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0));
  const int64_t n = int64_t(1) << 24;
  Tensor x = make_tensor(gpu, {n}, DType::F32, randn(n, 52));
  for (DType acc : {DType::F32, DType::F64})
    for (int64_t offset : {0, 1}) {
      std::vector<double> first;
      for (int run = 0; run < 20; ++run) {
        Tensor sumsq = make_tensor(gpu, {1}, acc, {0.0});
        ops::squared_norm_accumulate(gpu, sumsq, x.narrow(0, offset, n - offset));
        const std::vector<double> got = sumsq.to_host_f64(gpu);
        if (run == 0)
          first = got;
        else
          ASSERT_EQ(got, first) << dtype_name(acc) << ", offset " << offset << ", run " << run;
      }
    }
}

TEST(GpuOptim, SgdNormAndClip) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0)), cpu(Device::cpu());
  const int64_t n = 100003;
  Pair p = make_twin(gpu, cpu, {n}, DType::F32, randn(n, 50)), g = make_twin(gpu, cpu, {n}, DType::F32, randn(n, 51));
  ops::sgd_step(gpu, p.gpu, g.gpu, 0.1f, 0.01f);
  ops::sgd_step(cpu, p.cpu, g.cpu, 0.1f, 0.01f);
  PT_EXPECT_GPU_CLOSE(p.gpu, p.cpu, gpu, cpu, kTolF32, 1e-7);

  for (DType acc : {DType::F32, DType::F64}) {
    Tensor sumsq = make_tensor(gpu, {1}, acc, {2.0});  // accumulates onto what is there
    ops::squared_norm_accumulate(gpu, sumsq, g.gpu);
    ops::squared_norm_accumulate(gpu, sumsq, p.gpu.narrow(0, 1, n - 1));  // misaligned
    Tensor ref = make_tensor(cpu, {1}, DType::F64, {2.0});
    ops::squared_norm_accumulate(cpu, ref, g.cpu);
    ops::squared_norm_accumulate(cpu, ref, p.cpu.narrow(0, 1, n - 1));
    // fp32 partial sums over ~1e5 squares: 1e-5 relative.
    PT_EXPECT_GPU_CLOSE(sumsq, ref, gpu, cpu, 1e-5, 0.0);

    // Clip to a tenth of the norm; the CPU clips by its own (fp64) sum.
    Pair x = make_twin(gpu, cpu, {n}, DType::F32, randn(n, 52));
    const float max_norm = float(std::sqrt(ref.to_host_f64(cpu)[0]) / 10);
    ops::clip_by_norm(gpu, x.gpu, sumsq, max_norm);
    ops::clip_by_norm(cpu, x.cpu, ref, max_norm);
    PT_EXPECT_GPU_CLOSE(x.gpu, x.cpu, gpu, cpu, 1e-5, 1e-7);
  }
}

// The GPU update is the same arithmetic whether a range takes the 16-byte packed path or the
// scalar one (sharded optimizers step ranges at any alignment), and a folded clip equals
// clip_by_norm followed by the plain update, bit for bit.
TEST(GpuOptim, PackedAndScalarPathsAndFoldedClipAgreeBitForBit) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0));
  const int64_t n = 4099;
  const auto p0 = randn(n + 1, 70), g0 = randn(n + 1, 71), m0 = randn(n + 1, 72);
  std::vector<double> v0 = randn(n + 1, 73);
  for (double& x : v0) x = x * x;
  ops::AdamWHyper h;
  h.lr = 0.01f;
  h.weight_decay = 0.1f;
  h.step = 3;
  Tensor sumsq = make_tensor(gpu, {1}, DType::F32, {0.0});
  Tensor g_all = make_tensor(gpu, {n + 1}, DType::F32, g0);
  ops::squared_norm_accumulate(gpu, sumsq, g_all.narrow(0, 1, n));
  const float max_norm = float(std::sqrt(sumsq.to_host_f64(gpu)[0]) / 4);
  // Runs the update on elements [1, n + 1) of fresh buffers, either as views at offset 1
  // (misaligned: scalar path) or as copies at offset 0 (aligned: packed path).
  auto run = [&](bool misaligned, bool fold, bool sgd) {
    Tensor p = make_tensor(gpu, {n + 1}, DType::F32, p0), g = make_tensor(gpu, {n + 1}, DType::F32, g0);
    Tensor m = make_tensor(gpu, {n + 1}, DType::F32, m0), v = make_tensor(gpu, {n + 1}, DType::F32, v0);
    Tensor pv = p.narrow(0, 1, n), gv = g.narrow(0, 1, n), mv = m.narrow(0, 1, n), vv = v.narrow(0, 1, n);
    if (!misaligned)
      for (Tensor* t : {&pv, &gv, &mv, &vv}) {
        Tensor fresh = Tensor::empty({n}, DType::F32, gpu.device());  // allocator: 16-byte aligned
        fresh.copy_from(*t, gpu);
        *t = fresh;
      }
    if (!fold) ops::clip_by_norm(gpu, gv, sumsq, max_norm);
    const GradClip clip = fold ? GradClip{&sumsq, max_norm} : GradClip{};
    if (sgd)
      ops::sgd_step(gpu, pv, gv, 0.1f, 0.01f, nullptr, clip);
    else
      ops::adamw_step(gpu, pv, gv, mv, vv, h, nullptr, clip);
    auto out = pv.to_host_f64(gpu);
    const auto mh = mv.to_host_f64(gpu);
    out.insert(out.end(), mh.begin(), mh.end());
    return out;
  };
  for (bool sgd : {false, true}) {
    const auto ref = run(false, false, sgd);
    EXPECT_EQ(run(true, false, sgd), ref) << (sgd ? "sgd" : "adamw") << ": scalar path differs from packed";
    EXPECT_EQ(run(false, true, sgd), ref) << (sgd ? "sgd" : "adamw") << ": folded clip (packed) differs";
    EXPECT_EQ(run(true, true, sgd), ref) << (sgd ? "sgd" : "adamw") << ": folded clip (scalar) differs";
  }
}

// The guard on the GPU: a non-finite folded squared norm (fp32 or fp64) leaves parameters,
// moments and the bf16 copy as they were, on the packed and the scalar path.
// bf16 gradients (--grad-dtype bf16) are read as their fp32 values: an update from a bf16 g
// equals the update from an fp32 g holding the same values, bit for bit — AdamW and SGD, the
// packed and the scalar path (odd offsets), with a folded clip.
TEST(GpuOptim, Bf16GradientsUpdateAsTheirFp32Values) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0));
  const int64_t n = 4099;
  const auto g0 = stored(randn(n, 81), DType::BF16);  // values a bf16 gradient can hold
  std::vector<double> v0 = randn(n, 84);
  for (double& x : v0) x = x * x;
  Tensor g32 = make_tensor(gpu, {n}, DType::F32, g0), g16 = make_tensor(gpu, {n}, DType::BF16, g0);
  Tensor sumsq = make_tensor(gpu, {1}, DType::F32, {0.0});
  ops::squared_norm_accumulate(gpu, sumsq, g32);
  for (int64_t off : {int64_t(0), int64_t(1)})
    for (bool clip : {false, true}) {
      SCOPED_TRACE("offset " + std::to_string(off) + (clip ? ", clip" : ""));
      const int64_t len = n - off;
      const GradClip gc{clip ? &sumsq : nullptr, 0.5f};
      std::vector<Tensor> p(2), m(2), v(2), lowp(2), ps(2);
      for (int k = 0; k < 2; ++k) {
        p[k] = make_tensor(gpu, {n}, DType::F32, randn(n, 82));
        m[k] = make_tensor(gpu, {n}, DType::F32, randn(n, 83));
        v[k] = make_tensor(gpu, {n}, DType::F32, v0);
        lowp[k] = Tensor::empty({n}, DType::BF16, gpu.device());
        ps[k] = make_tensor(gpu, {n}, DType::F32, randn(n, 85));
        Tensor g = (k == 0 ? g32 : g16).narrow(0, off, len);
        Tensor pk = p[k].narrow(0, off, len), mk = m[k].narrow(0, off, len), vk = v[k].narrow(0, off, len);
        Tensor lk = lowp[k].narrow(0, off, len), sk = ps[k].narrow(0, off, len);
        ops::AdamWHyper h;
        h.step = 3;
        ops::adamw_step(gpu, pk, g, mk, vk, h, &lk, gc);
        ops::sgd_step(gpu, sk, g, 0.1f, 0.01f, nullptr, gc);
      }
      for (auto* t : {&p, &m, &v, &lowp, &ps}) EXPECT_EQ((*t)[0].to_host_f64(gpu), (*t)[1].to_host_f64(gpu));
    }
}

TEST(GpuOptim, NonFiniteNormLeavesEverythingAsItWas) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0));
  for (int64_t n : {int64_t(4096), int64_t(1003)})
    for (DType acc : {DType::F32, DType::F64})
      for (float max_norm : {1.0f, kNoClip}) {
        const auto p0 = randn(n, 80);
        Tensor sumsq = make_tensor(gpu, {1}, acc, {std::nan("")});
        Tensor p = make_tensor(gpu, {n}, DType::F32, p0), g = make_tensor(gpu, {n}, DType::F32, randn(n, 81));
        Tensor m = make_tensor(gpu, {n}, DType::F32, std::vector<double>(n, 0.5));
        Tensor v = make_tensor(gpu, {n}, DType::F32, std::vector<double>(n, 0.25));
        Tensor lowp = make_tensor(gpu, {n}, DType::BF16, std::vector<double>(n, 3.0));
        ops::AdamWHyper h;
        ops::adamw_step(gpu, p, g, m, v, h, &lowp, {&sumsq, max_norm});
        ops::sgd_step(gpu, p, g, 0.1f, 0.0f, &lowp, {&sumsq, max_norm});
        EXPECT_EQ(p.to_host_f64(gpu), make_tensor(gpu, {n}, DType::F32, p0).to_host_f64(gpu)) << n;
        EXPECT_EQ(m.to_host_f64(gpu), std::vector<double>(n, 0.5));
        EXPECT_EQ(v.to_host_f64(gpu), std::vector<double>(n, 0.25));
        EXPECT_EQ(lowp.to_host_f64(gpu), std::vector<double>(n, 3.0));
      }
}

}  // namespace
}  // namespace pt::test
