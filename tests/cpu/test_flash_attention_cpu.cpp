// The tiled CPU flash attention (forward and backward) against naive attention in fp64.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "core/error.h"
#include "cuda/flash/flash_params.h"
#include "ops/flash_attention.h"
#include "test_flash_reference.h"

namespace pt::test {
namespace {

using flash_ref::Dims;

struct Case {
  Dims m;
  bool causal;
  DType dtype;
  int block_q = 32, block_k = 32;  // tiles of the CPU algorithm
};

std::string name(const Case& c) {
  return std::string(dtype_name(c.dtype)) + " B" + std::to_string(c.m.B) + " H" + std::to_string(c.m.H) + " Tq" +
         std::to_string(c.m.tq) + " Tk" + std::to_string(c.m.tk) + " d" + std::to_string(c.m.d) +
         (c.causal ? " causal" : "") + " tiles " + std::to_string(c.block_q) + "x" + std::to_string(c.block_k);
}

// Tolerances: fp64 arithmetic is exact to ~1e-13 except where the fp32 lse enters (P in the
// backward); fp32 arithmetic lands near 1e-6.
struct Tol {
  double out, lse, grad;
};
Tol tolerance(DType t) { return t == DType::F64 ? Tol{1e-11, 1e-6, 1e-5} : Tol{2e-5, 1e-5, 5e-5}; }

void run_case(const Case& c, uint64_t seed) {
  SCOPED_TRACE(name(c));
  Context ctx(Device::cpu());
  const Dims& m = c.m;
  const auto q = randn(m.q_elems(), seed), k = randn(m.k_elems(), seed + 1), v = randn(m.k_elems(), seed + 2);
  const auto dout = randn(m.q_elems(), seed + 3);
  const auto ref = flash_ref::attention(m, q, k, v, &dout, c.causal);

  const Shape qs{m.B, m.H, m.tq, m.d}, ks{m.B, m.H, m.tk, m.d};
  Tensor tq = make_tensor(ctx, qs, c.dtype, q), tk = make_tensor(ctx, ks, c.dtype, k);
  Tensor tv = make_tensor(ctx, ks, c.dtype, v), tdo = make_tensor(ctx, qs, c.dtype, dout);
  Tensor out = Tensor::empty(qs, c.dtype, ctx.device(), "out");
  Tensor lse = Tensor::empty({m.B, m.H, m.tq}, DType::F32, ctx.device(), "lse");
  Tensor dq = Tensor::empty(qs, c.dtype, ctx.device(), "dq");
  Tensor dk = Tensor::empty(ks, c.dtype, ctx.device(), "dk"), dv = Tensor::empty(ks, c.dtype, ctx.device(), "dv");
  for (Tensor* t : {&out, &lse, &dq, &dk, &dv}) poison(ctx, *t);

  ops::flash_cpu::forward(out, lse, tq, tk, tv, c.causal, c.block_q, c.block_k);
  ops::flash_cpu::backward(dq, dk, dv, tdo, tq, tk, tv, out, lse, c.causal, c.block_q, c.block_k);

  const Tol tol = tolerance(c.dtype);
  PT_EXPECT_ALLCLOSE(out.to_host_f64(ctx), ref.o, tol.out, tol.out);
  PT_EXPECT_ALLCLOSE(lse.to_host_f64(ctx), ref.lse, tol.lse, tol.lse);
  PT_EXPECT_ALLCLOSE(dq.to_host_f64(ctx), ref.dq, tol.grad, tol.grad);
  PT_EXPECT_ALLCLOSE(dk.to_host_f64(ctx), ref.dk, tol.grad, tol.grad);
  PT_EXPECT_ALLCLOSE(dv.to_host_f64(ctx), ref.dv, tol.grad, tol.grad);
}

// The oracle itself: its analytic gradients equal finite differences of its forward.
TEST(FlashReference, GradientsMatchFiniteDifferences) {
  for (bool causal : {false, true}) {
    const Dims m{1, 2, 5, causal ? 5 : 7, 16};
    const auto q = randn(m.q_elems(), 11), k = randn(m.k_elems(), 12), v = randn(m.k_elems(), 13);
    const auto dout = randn(m.q_elems(), 14);
    const auto ref = flash_ref::attention(m, q, k, v, &dout, causal);
    // L(q, k, v) = Σ O ∘ dO, whose gradient is (dQ, dK, dV).
    auto loss = [&](const std::vector<double>& qq, const std::vector<double>& kk, const std::vector<double>& vv) {
      const auto o = flash_ref::attention(m, qq, kk, vv, nullptr, causal).o;
      double s = 0;
      for (size_t i = 0; i < o.size(); ++i) s += o[i] * dout[i];
      return s;
    };
    PT_EXPECT_ALLCLOSE(finite_difference([&](const std::vector<double>& x) { return loss(x, k, v); }, q), ref.dq, 1e-6,
                       1e-7);
    PT_EXPECT_ALLCLOSE(finite_difference([&](const std::vector<double>& x) { return loss(q, x, v); }, k), ref.dk, 1e-6,
                       1e-7);
    PT_EXPECT_ALLCLOSE(finite_difference([&](const std::vector<double>& x) { return loss(q, k, x); }, v), ref.dv, 1e-6,
                       1e-7);
  }
}

// The case: batch 4, sequence 128, d 64, causal and not, fp32 and fp64.
TEST(FlashCpu, Batch4Seq128D64) {
  for (DType t : {DType::F32, DType::F64})
    for (bool causal : {false, true}) run_case({{4, 1, 128, 128, 64}, causal, t}, 100);
}

TEST(FlashCpu, EveryHeadDim) {
  for (int64_t d : {16, 32, 64, 80, 128})
    for (DType t : {DType::F32, DType::F64})
      for (bool causal : {false, true}) run_case({{2, 2, 70, 70, d}, causal, t}, 200 + d);
}

TEST(FlashCpu, OddLengths) {
  for (int64_t T : {1, 31, 33, 97})
    for (bool causal : {false, true}) run_case({{1, 3, T, T, 32}, causal, DType::F32}, 300 + T);
}

TEST(FlashCpu, UnequalQueryKeyLengths) {
  for (auto [tq, tk] : {std::pair<int64_t, int64_t>{50, 77}, {128, 33}, {1, 65}, {65, 1}})
    for (DType t : {DType::F32, DType::F64}) run_case({{2, 2, tq, tk, 64}, false, t}, 400 + tq);
}

// Tiles that divide nothing: partial tiles everywhere, more key than query tiles per row.
TEST(FlashCpu, UnevenTiles) {
  for (bool causal : {false, true})
    for (auto [bq, bk] : {std::pair<int, int>{7, 5}, {5, 7}, {1, 3}, {64, 16}})
      run_case({{2, 1, 45, 45, 16}, causal, DType::F64, bq, bk}, 500 + bq);
  run_case({{1, 2, 23, 41, 32}, false, DType::F64, 6, 9}, 550);
}

// The q, k and v of a fused (B, T, 3, H, D) buffer as three logical (B, H, T, D) arrays.
std::array<std::vector<double>, 3> split_fused_qkv(const std::vector<double>& fused, int64_t B, int64_t T, int64_t H,
                                                   int64_t D) {
  std::array<std::vector<double>, 3> out;
  for (auto& o : out) o.resize(static_cast<size_t>(B * H * T * D));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t c = 0; c < D; ++c)
          for (int64_t which = 0; which < 3; ++which)
            out[which][((b * H + h) * T + t) * D + c] = fused[(((b * T + t) * 3 + which) * H + h) * D + c];
  return out;
}

// The model's layout on the CPU: q, k and v read in place from a fused (B, T, 3, H, D) fp64
// buffer, their gradients written into one (poisoned) too, forward already run; the fp64
// reference from logical copies.
struct FusedQkvRun {
  int64_t B, T, H, D;
  Dims m{B, H, T, T, D};
  std::vector<double> qkv = randn(B * T * 3 * H * D, 600), dout = randn(m.q_elems(), 601);
  flash_ref::Result ref;
  Tensor buf, tq, tk, tv, tdo, out, lse, grads, dq, dk, dv;

  FusedQkvRun(Context& ctx, int64_t B_, int64_t T_, int64_t H_, int64_t D_) : B(B_), T(T_), H(H_), D(D_) {
    const auto [q, k, v] = split_fused_qkv(qkv, B, T, H, D);
    ref = flash_ref::attention(m, q, k, v, &dout, true);
    buf = make_tensor(ctx, {B, T, 3, H, D}, DType::F64, qkv);
    const Shape shape{B, H, T, D}, strides{T * 3 * H * D, D, 3 * H * D, 1};
    tq = buf.as_strided(shape, strides, 0), tk = buf.as_strided(shape, strides, H * D);
    tv = buf.as_strided(shape, strides, 2 * H * D);
    tdo = make_tensor(ctx, shape, DType::F64, dout);
    out = Tensor::empty(shape, DType::F64, ctx.device(), "out");
    lse = Tensor::empty({B, H, T}, DType::F32, ctx.device(), "lse");
    grads = Tensor::empty({B, T, 3, H, D}, DType::F64, ctx.device(), "dqkv");
    poison(ctx, grads);
    dq = grads.as_strided(shape, strides, 0), dk = grads.as_strided(shape, strides, H * D);
    dv = grads.as_strided(shape, strides, 2 * H * D);
    ops::flash_attention_forward(ctx, out, lse, tq, tk, tv, true);
  }
  void backward(Context& ctx, const ops::RopeTable* unrotate = nullptr) {
    ops::flash_attention_backward(ctx, dq, dk, dv, tdo, tq, tk, tv, out, lse, true, unrotate);
  }
};

// dq and dk asked for rotated back (the model's backward): the CPU runs rope(inverse) after the
// tiled backward; against the fp64 reference's gradients turned back independently, in the
// fused QKV layout. A table too short for the call is one error.
TEST(FlashCpu, BackwardRotatesDqAndDkBack) {
  Context ctx(Device::cpu());
  const double theta = 10000.0;
  FusedQkvRun r(ctx, 2, 40, 3, 32);
  const int64_t B = r.B, T = r.T, H = r.H, D = r.D;
  const ops::RopeTable table = ops::rope_table(ctx, T, D, theta);
  r.backward(ctx, &table);
  const auto [gq, gk, gv] = split_fused_qkv(r.grads.to_host_f64(ctx), B, T, H, D);
  PT_EXPECT_ALLCLOSE(gq, flash_ref::unrotate(r.ref.dq, B, H, T, D, theta), 1e-5, 1e-5);
  PT_EXPECT_ALLCLOSE(gk, flash_ref::unrotate(r.ref.dk, B, H, T, D, theta), 1e-5, 1e-5);
  PT_EXPECT_ALLCLOSE(gv, r.ref.dv, 1e-5, 1e-5);
  // The CPU table: (cos, sin) of t · theta^(-2i/D).
  const auto angles = table.cos_sin.to_host_f64(ctx);
  const double a = 39.0 * std::pow(theta, -2.0 * 5 / double(D));
  EXPECT_NEAR(angles[2 * (39 * D / 2 + 5)], std::cos(a), 1e-7);
  EXPECT_NEAR(angles[2 * (39 * D / 2 + 5) + 1], std::sin(a), 1e-7);
  const ops::RopeTable shorter = ops::rope_table(ctx, T - 1, D, theta);
  const std::string msg = error_of([&] { r.backward(ctx, &shorter); });
  EXPECT_NE(msg.find("RoPE table covers 39 positions"), std::string::npos) << (msg.empty() ? "accepted" : msg);
}

// A fused QKV buffer (B, T, 3, H, D) read in place through the public entry points, gradients
// written into a fused buffer too; 3-D (B, T, D) inputs as the H = 1 case.
TEST(FlashCpu, StridedAndThreeDimensionalViews) {
  Context ctx(Device::cpu());
  FusedQkvRun r(ctx, 2, 40, 3, 32);
  const int64_t B = r.B, T = r.T, H = r.H, D = r.D;
  r.backward(ctx);
  PT_EXPECT_ALLCLOSE(r.out.to_host_f64(ctx), r.ref.o, 1e-11, 1e-11);
  const auto [gq, gk, gv] = split_fused_qkv(r.grads.to_host_f64(ctx), B, T, H, D);
  PT_EXPECT_ALLCLOSE(gq, r.ref.dq, 1e-5, 1e-5);
  PT_EXPECT_ALLCLOSE(gk, r.ref.dk, 1e-5, 1e-5);
  PT_EXPECT_ALLCLOSE(gv, r.ref.dv, 1e-5, 1e-5);

  // 3-D: (B, T, D) with lse (B, T) is the one-head case.
  const Dims m1{B, 1, T, T, D};
  const auto q1 = randn(m1.q_elems(), 610), k1 = randn(m1.q_elems(), 611), v1 = randn(m1.q_elems(), 612);
  const auto ref1 = flash_ref::attention(m1, q1, k1, v1, nullptr, false);
  Tensor q3 = make_tensor(ctx, {B, T, D}, DType::F64, q1), k3 = make_tensor(ctx, {B, T, D}, DType::F64, k1);
  Tensor v3 = make_tensor(ctx, {B, T, D}, DType::F64, v1);
  Tensor o3 = Tensor::empty({B, T, D}, DType::F64, ctx.device(), "o3");
  Tensor l3 = Tensor::empty({B, T}, DType::F32, ctx.device(), "l3");
  ops::flash_attention_forward(ctx, o3, l3, q3, k3, v3, false);
  PT_EXPECT_ALLCLOSE(o3.to_host_f64(ctx), ref1.o, 1e-11, 1e-11);
  PT_EXPECT_ALLCLOSE(l3.to_host_f64(ctx), ref1.lse, 1e-6, 1e-6);
}

TEST(FlashCpu, KernelFamilyNames) {
  for (auto k : {ops::FlashKernels::Auto, ops::FlashKernels::MmaSync, ops::FlashKernels::Wgmma})
    EXPECT_EQ(ops::flash_kernels_from_name(ops::flash_kernels_name(k)), k);
  EXPECT_EQ(ops::flash_kernels_from_name("mma"), ops::FlashKernels::MmaSync);
  EXPECT_THROW(ops::flash_kernels_from_name("cudnn"), Error);
  Context ctx(Device::cpu());
  EXPECT_EQ(ops::flash_kernel_used(ctx, DType::F32, 64, 512, 1), "cpu");
  for (const char* name :
       {"2x64/2/2", "1x128/1/2", "2x128/1/1", "1x64/1/acc", "2x128/2/acc", "ws3x128/1/1", "ws2x128/2/acc",
        "ws2x128/ws2/ws2", "1x64/ws2/1", "2x128/1/ws2", "2x64/ws2/acc", "ws2x128/ws2/fxp", "1x64/ws2/fxp"})
    EXPECT_EQ(ops::wgmma_tiles_name(ops::wgmma_tiles_from_name(name)), name);
  EXPECT_TRUE(ops::wgmma_tiles_from_name("1x64/2/acc").dq_accumulate);
  EXPECT_FALSE(ops::wgmma_tiles_from_name("1x64/2/1").dq_accumulate);
  EXPECT_TRUE(ops::wgmma_tiles_from_name("ws2x128/1/1").fwd_warp_specialized);
  EXPECT_FALSE(ops::wgmma_tiles_from_name("2x128/1/1").fwd_warp_specialized);
  const WgmmaTiles ws = ops::wgmma_tiles_from_name("1x64/ws2/ws2");
  EXPECT_TRUE(ws.dkdv_warp_specialized && ws.dq_warp_specialized && !ws.fwd_warp_specialized);
  EXPECT_EQ(ws.dkdv_warpgroups, 2);
  const WgmmaTiles single_pass = ops::wgmma_tiles_from_name("ws2x128/ws2/acc");
  EXPECT_TRUE(single_pass.dkdv_warp_specialized && single_pass.dq_accumulate && !single_pass.dq_warp_specialized);
  EXPECT_FALSE(single_pass.dq_fixed_point);
  const WgmmaTiles fixed = ops::wgmma_tiles_from_name("ws2x128/ws2/fxp");
  EXPECT_TRUE(fixed.dkdv_warp_specialized && fixed.dq_accumulate && fixed.dq_fixed_point);
  for (const char* bad :
       {"2x64",         "3x64/2/2",   "2x96/2/2",      "2x64/2/2x",   "2x64/0/1",     "2x64/2/acc2", "2x64/2/ac",
        "2x64/2/11",    "2x64/2/0",   "2x64/3/acc",    "ws1x128/1/1", "ws2x64/1/1",   "ws4x128/1/1", "wsx128/1/1",
        "ws-2x128/1/1", "w2x128/1/1", "-1x64/1/1",     "2x64/ws1/1",  "2x64/ws3/acc", "2x64/2/ws1",  "2x64/wsws2/2",
        "2x64/2/2/2",   "2x64//2",    "ws2x128x1/1/1", "2x64/2x64/1", "2x64/2/fxp",   "1x64/1/fxp",  "ws2x128/ws2/fx"})
    EXPECT_THROW(ops::wgmma_tiles_from_name(bad), Error) << bad;
}

// The default tile shapes: the table in ops/flash_attention.cpp (measured on an H100); a choice
// that names tiles runs them at every length.
TEST(FlashCpu, DefaultWgmmaTilesFollowHeadDimLengthAndRows) {
  auto name = [](const FlashChoice& c, int64_t d, int64_t t, int64_t bh) {
    return ops::wgmma_tiles_name(ops::flash_wgmma_tiles(c, d, t, bh));
  };
  ASSERT_TRUE(FlashChoice{}.deterministic);  // --deterministic on unless asked otherwise
  // deterministic: reproducible kernels only (from 4096 keys the single pass in fixed point); off also
  // the single pass in fp32 (dQ summed in a varying order).
  // bh: batch × heads; XL's heads are 25, at micro-batch 4 (the bench default) and 16 (llm.c's point).
  struct Expected {
    bool deterministic;
    int64_t d, t, bh;
    const char* tiles;
  };
  for (const Expected& e : std::initializer_list<Expected>{
           {true, 64, 512, 1, "1x64/1/1"},
           {true, 64, 2047, 1, "1x64/1/1"},
           {true, 64, 2048, 1, "ws2x128/ws2/ws2"},
           {true, 64, 4095, 1, "ws2x128/ws2/ws2"},
           {true, 64, 4096, 1, "ws2x128/ws2/fxp"},   // the single pass in fixed point: reproducible
           {true, 64, 32768, 1, "ws2x128/ws2/fxp"},  // 2^15 rows: too few blocks of 192 rows
           {true, 64, 65536, 1, "ws3x128/ws2/fxp"},  // 2^16 rows: three math warpgroups forward
           {true, 64, 4096, 16, "ws3x128/ws2/fxp"},
           {true, 64, 16384, 16, "ws3x128/ws2/fxp"},  // the leaderboard case
           {true, 64, 2048, 64, "ws2x128/ws2/ws2"},   // 2^17 rows, but 2048 keys
           {true, 64, 512, 16 * 25, "1x64/1/1"},      // 2^17 · 1.6 rows, but 512 keys
           {true, 64, 1024, 4 * 25, "1x64/1/1"},      // 2^17 · 0.8 rows
           {true, 64, 1024, 256, "ws2x128/ws2/ws2"},  // exactly 2^18 rows
           {true, 64, 1024, 16 * 25, "ws2x128/ws2/ws2"},
           {true, 64, 1023, 16 * 25, "1x64/1/1"},
           {true, 128, 512, 1, "1x64/1/1"},
           {true, 128, 1023, 1, "1x64/1/1"},
           {true, 128, 1024, 1, "ws2x128/ws2/ws2"},
           {true, 128, 4095, 1, "ws2x128/ws2/ws2"},
           {true, 128, 16384, 1, "ws2x128/ws2/fxp"},
           {true, 16, 16384, 1, "1x64/1/1"},  // not a wgmma head dimension: a name only
           {true, 80, 4096, 400, "1x64/1/1"},
           {false, 64, 2047, 1, "1x64/1/1"},
           {false, 64, 1024, 16 * 25, "ws2x128/ws2/ws2"},  // the single pass loses at 1024 keys
           {false, 64, 2048, 1, "ws2x128/ws2/acc"},
           {false, 64, 16384, 1, "ws2x128/ws2/acc"},
           {false, 64, 16384, 16, "ws3x128/ws2/acc"},
           {false, 64, 2048, 64, "ws2x128/ws2/acc"},
           {false, 128, 16384, 1, "ws2x128/ws2/acc"},
           {false, 128, 512, 1, "1x64/1/1"},
           {false, 128, 2047, 1, "ws2x128/ws2/ws2"},
           {false, 128, 2048, 1, "ws2x128/ws2/acc"},
           {false, 80, 4096, 1, "1x64/1/1"}}) {
    FlashChoice c;
    c.deterministic = e.deterministic;
    EXPECT_EQ(name(c, e.d, e.t, e.bh), e.tiles)
        << "deterministic " << e.deterministic << ", d " << e.d << ", T " << e.t << ", B·H " << e.bh;
  }
  FlashChoice pinned;
  pinned.tiles = ops::wgmma_tiles_from_name("2x64/2/2");
  EXPECT_EQ(name(pinned, 64, 16384, 1), "2x64/2/2");
  EXPECT_EQ(name(pinned, 128, 512, 400), "2x64/2/2");
  pinned.tiles = ops::wgmma_tiles_from_name("1x64/1/acc");  // named tiles run as named, deterministic or not
  EXPECT_EQ(name(pinned, 64, 512, 1), "1x64/1/acc");
}

// The order the GPU kernels' blocks take their tiles in (cuda/flash/flash_params.h): every (tile, head,
// batch) exactly once; within a group of (batch, head) pairs, every pair's longest tile before any
// pair's next (the last tile for query passes, the first for dK/dV); groups one after another;
// group 1 is the plain head-by-head order. A partial last group (pairs not a multiple) included.
TEST(FlashCpu, BlockOrderTakesLongestTilesFirstWithinGroups) {
  struct Grid {
    unsigned tiles, heads, batch, group;
  };
  for (const Grid g : {Grid{8, 25, 4, 100}, Grid{8, 25, 4, 7}, Grid{256, 16, 1, 6}, Grid{5, 3, 2, 1}, Grid{1, 4, 1, 4}})
    for (bool last_longest : {true, false}) {
      SCOPED_TRACE(std::to_string(g.tiles) + " tiles, " + std::to_string(g.heads) + " heads, " +
                   std::to_string(g.batch) + " batch, group " + std::to_string(g.group));
      const unsigned pairs = g.heads * g.batch, n = g.tiles * pairs;
      std::vector<int> seen(n, 0);
      int last_group = 0, last_rank = -1;
      for (unsigned linear = 0; linear < n; ++linear) {
        const cuda::FlashBlock blk = cuda::flash_block_order(linear, g.tiles, g.heads, pairs, g.group, last_longest);
        ASSERT_TRUE(blk.tile >= 0 && blk.tile < int(g.tiles) && blk.h >= 0 && blk.h < int(g.heads) && blk.b >= 0 &&
                    blk.b < int(g.batch))
            << "position " << linear;
        ++seen[(unsigned(blk.b) * g.heads + unsigned(blk.h)) * g.tiles + unsigned(blk.tile)];
        const int pair = blk.b * int(g.heads) + blk.h, group = pair / int(g.group);
        const int rank = last_longest ? int(g.tiles) - 1 - blk.tile : blk.tile;
        ASSERT_GE(group, last_group) << "position " << linear << ": groups run one after another";
        if (group != last_group) last_rank = -1;
        ASSERT_GE(rank, last_rank) << "position " << linear << ": a longer tile after a shorter one in its group";
        last_group = group;
        last_rank = rank;
        if (g.group == 1) {
          EXPECT_EQ(unsigned(pair), linear / g.tiles);
          EXPECT_EQ(unsigned(rank), linear % g.tiles);
        }
      }
      for (unsigned i = 0; i < n; ++i) ASSERT_EQ(seen[i], 1) << "block " << i << " taken " << seen[i] << " times";
    }
}

// The group: every (batch, head) pair up to 2048 rows (longest first over the whole grid), one
// pair beyond (head by head, as measured faster at 16 k).
TEST(FlashCpu, BlockGroupIsEveryPairUpTo2048Rows) {
  EXPECT_EQ(cuda::flash_block_group(100, 512), 100);  // XL
  EXPECT_EQ(cuda::flash_block_group(64, 2048), 64);
  EXPECT_EQ(cuda::flash_block_group(64, 2049), 1);
  EXPECT_EQ(cuda::flash_block_group(16, 16384), 1);  // the leaderboard
}

// Misuse gets one clear pt::Error, never a crash or a silent answer.
TEST(FlashCpu, RejectsBadArguments) {
  Context ctx(Device::cpu());
  auto t = [&](Shape s, DType dt = DType::F32) { return Tensor::zeros(s, dt, ctx); };
  Tensor lse = t({1, 1, 8});
  auto expect_error = [&](const Tensor& q, const Tensor& k, const Tensor& v, Tensor out, Tensor l, bool causal,
                          const char* what) {
    try {
      ops::flash_attention_forward(ctx, out, l, q, k, v, causal);
      ADD_FAILURE() << "no error for " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect_error(t({1, 1, 8, 48}), t({1, 1, 8, 48}), t({1, 1, 8, 48}), t({1, 1, 8, 48}), lse, false, "head dimension");
  expect_error(t({1, 1, 8, 16}), t({1, 1, 9, 16}), t({1, 1, 9, 16}), t({1, 1, 8, 16}), lse, true, "causal");
  expect_error(t({1, 1, 8, 16}), t({1, 1, 9, 16}), t({1, 1, 8, 16}), t({1, 1, 8, 16}), lse, false, "v: expected shape");
  expect_error(t({1, 1, 8, 16}), t({1, 1, 8, 16}, DType::F64), t({1, 1, 8, 16}), t({1, 1, 8, 16}), lse, false,
               "k: expected fp32");
  expect_error(t({1, 1, 8, 16}, DType::BF16), t({1, 1, 8, 16}, DType::BF16), t({1, 1, 8, 16}, DType::BF16),
               t({1, 1, 8, 16}, DType::BF16), lse, false, "fp32 or fp64");
  expect_error(t({1, 1, 8, 16}), t({1, 1, 8, 16}), t({1, 1, 8, 16}), t({1, 1, 8, 16}), t({1, 2, 8}), false,
               "lse: expected shape");
  Tensor wide = t({1, 1, 8, 32});
  Tensor strided_d = wide.as_strided({1, 1, 8, 16}, {256, 256, 32, 2});
  expect_error(strided_d, t({1, 1, 8, 16}), t({1, 1, 8, 16}), t({1, 1, 8, 16}), lse, false, "contiguous last");
}

}  // namespace
}  // namespace pt::test
