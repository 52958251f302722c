// The CUDA flash-attention kernels (bf16 tensor-core and fp32 CUDA-core) against naive
// attention in fp64 on the CPU: O, L, dQ, dK, dV, every output poisoned (NaN) before each run.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "core/cuda_arch.h"
#include "core/error.h"
#include "cpu/test_flash_reference.h"
#include "ops/flash_attention.h"

namespace pt::test {
namespace {

using flash_ref::Dims;

// How the (B, H, T, D) views sit in memory: their own contiguous buffers, or the model's
// layout (q, k, v and their gradients in place in (B, T, 3, H, D); out in (B, T, H, D)).
enum class Layout { Contiguous, FusedQkv };

struct Case {
  Dims m;
  bool causal;
  DType dtype;
  Layout layout = Layout::Contiguous;
  // The backward asked for dq and dk rotated back by RoPE's inverse (the model's fused path).
  bool unrotate = false;
};

constexpr double kRopeTheta = 10000.0;

std::string describe(const Case& c) {
  std::ostringstream os;
  os << dtype_name(c.dtype) << " B" << c.m.B << " H" << c.m.H << " Tq" << c.m.tq << " Tk" << c.m.tk << " d" << c.m.d
     << (c.causal ? " causal" : "") << (c.layout == Layout::FusedQkv ? " fused-qkv" : "")
     << (c.unrotate ? " unrotated" : "");
  return os.str();
}

// A strided (B, H, T, D) view into a buffer; the host mirrors place and gather logical values.
struct Placed {
  Shape buf_shape, strides;
  int64_t offset = 0;
  int64_t at(int64_t b, int64_t h, int64_t t, int64_t c) const {
    return offset + b * strides[0] + h * strides[1] + t * strides[2] + c;
  }
};

Placed contiguous(int64_t B, int64_t H, int64_t T, int64_t D) { return {{B, H, T, D}, {H * T * D, T * D, D, 1}, 0}; }
Placed fused_slot(int64_t B, int64_t H, int64_t T, int64_t D, int slot) {
  return {{B, T, 3, H, D}, {T * 3 * H * D, D, 3 * H * D, 1}, slot * H * D};
}
Placed bthd(int64_t B, int64_t H, int64_t T, int64_t D) { return {{B, T, H, D}, {T * H * D, D, H * D, 1}, 0}; }

void scatter(std::vector<double>& phys, const Placed& p, const std::vector<double>& logical, int64_t B, int64_t H,
             int64_t T, int64_t D) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < D; ++c) phys[p.at(b, h, t, c)] = logical[((b * H + h) * T + t) * D + c];
}
std::vector<double> gather(const std::vector<double>& phys, const Placed& p, int64_t B, int64_t H, int64_t T,
                           int64_t D) {
  std::vector<double> out(B * H * T * D);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < D; ++c) out[((b * H + h) * T + t) * D + c] = phys[p.at(b, h, t, c)];
  return out;
}

std::vector<double> round_bf16(std::vector<double> v) {
  for (auto& x : v) x = round_to_bf16(static_cast<float>(x));
  return v;
}

// allclose with a diagnosis on failure: how many elements miss, the worst one's (row, column)
// in the logical (B·H·T, D) layout — fragment-layout bugs show as a pattern there.
void expect_close(const char* what, const std::vector<double>& got, const std::vector<double>& ref, double tol,
                  int64_t d) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  int64_t bad = 0, nan = 0, worst = -1;
  double worst_ratio = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) {
      ++nan;
      if (worst < 0 || std::isfinite(worst_ratio)) worst = static_cast<int64_t>(i), worst_ratio = INFINITY;
      continue;
    }
    const double r = std::fabs(got[i] - ref[i]) / (tol + tol * std::fabs(ref[i]));
    if (r > 1) ++bad;
    if (r > worst_ratio) worst_ratio = r, worst = static_cast<int64_t>(i);
  }
  EXPECT_TRUE(bad == 0 && nan == 0) << what << ": " << bad << " elements outside rtol = atol = " << tol << ", " << nan
                                    << " not finite, of " << got.size() << "; worst at row " << worst / d << " col "
                                    << worst % d << ": got " << got[worst] << ", want " << ref[worst]
                                    << "; relative error " << rel_error(got, ref);
}

struct Outputs {
  std::vector<double> o, lse, dq, dk, dv;
};

// The forward, and unless `backward` is off the backward (dq, dk, dv left empty then).
Outputs run_flash(Context& ctx, const Case& c, const std::vector<double>& q, const std::vector<double>& k,
                  const std::vector<double>& v, const std::vector<double>& dout, bool backward = true) {
  const Dims& m = c.m;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Placed pq, pk, pv, po, pg[3];
  if (c.layout == Layout::FusedQkv) {
    pq = fused_slot(m.B, m.H, m.tq, m.d, 0), pk = fused_slot(m.B, m.H, m.tk, m.d, 1),
    pv = fused_slot(m.B, m.H, m.tk, m.d, 2);
    po = bthd(m.B, m.H, m.tq, m.d);
    for (int s = 0; s < 3; ++s) pg[s] = fused_slot(m.B, m.H, m.tq, m.d, s);
  } else {
    pq = contiguous(m.B, m.H, m.tq, m.d), pk = contiguous(m.B, m.H, m.tk, m.d), pv = pk;
    po = pq;
    pg[0] = pq, pg[1] = pk, pg[2] = pk;
  }
  const Shape qs{m.B, m.H, m.tq, m.d}, ks{m.B, m.H, m.tk, m.d};
  Tensor tq, tk, tv, dq, dk, dv, gbuf[3];
  if (c.layout == Layout::FusedQkv) {
    std::vector<double> buf(shape_numel(pq.buf_shape), nan);
    scatter(buf, pq, q, m.B, m.H, m.tq, m.d);
    scatter(buf, pk, k, m.B, m.H, m.tk, m.d);
    scatter(buf, pv, v, m.B, m.H, m.tk, m.d);
    Tensor qkv = make_tensor(ctx, pq.buf_shape, c.dtype, buf);
    tq = qkv.as_strided(qs, pq.strides, pq.offset), tk = qkv.as_strided(ks, pk.strides, pk.offset);
    tv = qkv.as_strided(ks, pv.strides, pv.offset);
    Tensor g = make_tensor(ctx, pq.buf_shape, c.dtype, std::vector<double>(buf.size(), nan));  // poisoned
    gbuf[0] = gbuf[1] = gbuf[2] = g;
    dq = g.as_strided(qs, pg[0].strides, pg[0].offset), dk = g.as_strided(ks, pg[1].strides, pg[1].offset);
    dv = g.as_strided(ks, pg[2].strides, pg[2].offset);
  } else {
    tq = make_tensor(ctx, qs, c.dtype, q), tk = make_tensor(ctx, ks, c.dtype, k), tv = make_tensor(ctx, ks, c.dtype, v);
    gbuf[0] = dq = make_tensor(ctx, qs, c.dtype, std::vector<double>(m.q_elems(), nan));
    gbuf[1] = dk = make_tensor(ctx, ks, c.dtype, std::vector<double>(m.k_elems(), nan));
    gbuf[2] = dv = make_tensor(ctx, ks, c.dtype, std::vector<double>(m.k_elems(), nan));
  }
  Tensor obuf = make_tensor(ctx, po.buf_shape, c.dtype, std::vector<double>(shape_numel(po.buf_shape), nan));
  Tensor out = obuf.as_strided(qs, po.strides, po.offset);
  Tensor lse = make_tensor(ctx, {m.B, m.H, m.tq}, DType::F32, std::vector<double>(m.rows(), nan));
  Tensor tdo = make_tensor(ctx, qs, c.dtype, dout);

  ops::flash_attention_forward(ctx, out, lse, tq, tk, tv, c.causal);
  ops::RopeTable table;
  if (c.unrotate) table = ops::rope_table(ctx, std::max(m.tq, m.tk), m.d, kRopeTheta);
  if (backward)
    ops::flash_attention_backward(ctx, dq, dk, dv, tdo, tq, tk, tv, out, lse, c.causal, c.unrotate ? &table : nullptr);
  ctx.synchronize();

  Outputs r;
  r.o = gather(obuf.to_host_f64(ctx), po, m.B, m.H, m.tq, m.d);
  r.lse = lse.to_host_f64(ctx);
  if (!backward) return r;
  r.dq = gather(gbuf[0].to_host_f64(ctx), pg[0], m.B, m.H, m.tq, m.d);
  r.dk = gather(gbuf[1].to_host_f64(ctx), pg[1], m.B, m.H, m.tk, m.d);
  r.dv = gather(gbuf[2].to_host_f64(ctx), pg[2], m.B, m.H, m.tk, m.d);
  return r;
}

// bf16: the bar users know (rtol = atol = 1e-2). fp32: CUDA-core fp32 arithmetic, far tighter.
double tolerance(DType t) { return t == DType::BF16 ? 1e-2 : 1e-4; }

// The device's target (compute capability, whether its image has sm_90a features).
const CudaTarget& device_target() {
  static Context ctx(Device::cuda(0));
  return ctx.target();
}

// Every bf16 case runs on each kernel family that covers it (wgmma: its head dimensions, and only
// where the device runs an sm_90a image — not in an 80-virtual build, say).
// PT_FLASH_TEST_KERNELS=mma or =wgmma restricts the bf16 cases to one family, so that a fault in
// one family (a sticky CUDA error ends the process's context) cannot hide the other's results.
std::vector<ops::FlashKernels> families(const Case& c) {
  const char* only = std::getenv("PT_FLASH_TEST_KERNELS");
  const std::string sel = only ? only : "";
  std::vector<ops::FlashKernels> out;
  if (c.dtype == DType::BF16) {
    if (sel != "wgmma") out.push_back(ops::FlashKernels::MmaSync);
    if (sel != "mma" && device_target().sm90a_features && cuda::flash_covers_head_dim(c.m.d, true))
      out.push_back(ops::FlashKernels::Wgmma);
  } else if (sel != "wgmma") {
    out.push_back(ops::FlashKernels::Auto);
  }
  return out;
}

// A kernel family (and wgmma tile shapes, when given) for a context. Without `tiles`,
// PT_FLASH_TEST_WGMMA_TILES (e.g. "1x128/1/1") runs the wgmma family with those tile shapes.
FlashChoice choice(ops::FlashKernels k, const char* tiles = nullptr) {
  FlashChoice c;
  c.kernels = k;
  if (tiles == nullptr) tiles = std::getenv("PT_FLASH_TEST_WGMMA_TILES");
  if (tiles != nullptr) c.tiles = ops::wgmma_tiles_from_name(tiles);
  return c;
}

#define PT_REQUIRE_SM90A()                                                                          \
  do {                                                                                              \
    if (!device_target().sm90a_features) GTEST_SKIP() << "the device runs no sm_90a image (wgmma)"; \
  } while (0)

void check_case_with(const Case& c, uint64_t seed, const FlashChoice& flash);

void check_case(const Case& c, uint64_t seed) {
  for (ops::FlashKernels k : families(c)) {
    SCOPED_TRACE(std::string("kernels ") + ops::flash_kernels_name(k));
    check_case_with(c, seed, choice(k));
  }
}

void check_inputs_with(const Case& c, std::vector<double> q, std::vector<double> k, std::vector<double> v,
                       std::vector<double> dout, const FlashChoice& flash, bool check_gradients = true);

void check_case_with(const Case& c, uint64_t seed, const FlashChoice& flash) {
  const Dims& m = c.m;
  check_inputs_with(c, randn(m.q_elems(), seed), randn(m.k_elems(), seed + 1), randn(m.k_elems(), seed + 2),
                    randn(m.q_elems(), seed + 3), flash);
}

// One case on these inputs (logical (B, H, T, D) order) against the fp64 reference: O and L, and
// unless check_gradients is off dQ, dK and dV.
void check_inputs_with(const Case& c, std::vector<double> q, std::vector<double> k, std::vector<double> v,
                       std::vector<double> dout, const FlashChoice& flash, bool check_gradients) {
  SCOPED_TRACE(describe(c));
  Context ctx(Device::cuda(0));
  ctx.set_flash(flash);
  const Dims& m = c.m;
  if (c.dtype == DType::BF16) {  // the reference sees exactly the inputs the kernel sees
    q = round_bf16(q), k = round_bf16(k), v = round_bf16(v), dout = round_bf16(dout);
  }
  // Without gradients to check, neither side runs a backward.
  auto ref = flash_ref::attention(m, q, k, v, check_gradients ? &dout : nullptr, c.causal);
  if (c.unrotate && check_gradients) {
    ref.dq = flash_ref::unrotate(ref.dq, m.B, m.H, m.tq, m.d, kRopeTheta);
    ref.dk = flash_ref::unrotate(ref.dk, m.B, m.H, m.tk, m.d, kRopeTheta);
  }
  const Outputs got = run_flash(ctx, c, q, k, v, dout, check_gradients);
  const double tol = tolerance(c.dtype);
  expect_close("O", got.o, ref.o, tol, m.d);
  expect_close("L", got.lse, ref.lse, tol, 1);
  if (!check_gradients) return;
  expect_close("dQ", got.dq, ref.dq, tol, m.d);
  expect_close("dK", got.dk, ref.dk, tol, m.d);
  expect_close("dV", got.dv, ref.dv, tol, m.d);
}

const DType kTypes[] = {DType::BF16, DType::F32};

TEST(FlashGpu, Batch4Seq128D64) {
  PT_REQUIRE_GPU();
  for (DType t : kTypes)
    for (bool causal : {false, true}) check_case({{4, 2, 128, 128, 64}, causal, t}, 1000);
}

TEST(FlashGpu, EveryHeadDim) {
  PT_REQUIRE_GPU();
  for (int64_t d : {16, 32, 64, 80, 128})
    for (DType t : kTypes)
      for (bool causal : {false, true}) check_case({{1, 2, 200, 200, d}, causal, t}, 2000 + d);
}

// Tail tiles in queries and keys: lengths below, at and around the tile sizes (32 … 128).
TEST(FlashGpu, OddLengths) {
  PT_REQUIRE_GPU();
  for (int64_t T : {1, 17, 63, 65, 127, 129, 333})
    for (DType t : kTypes)
      for (bool causal : {false, true}) check_case({{2, 1, T, T, 64}, causal, t}, 3000 + T);
}

TEST(FlashGpu, UnequalQueryKeyLengths) {
  PT_REQUIRE_GPU();
  for (auto [tq, tk] : {std::pair<int64_t, int64_t>{100, 257}, {300, 45}, {1, 130}, {130, 1}})
    for (int64_t d : {32, 128})
      for (DType t : kTypes) check_case({{2, 2, tq, tk, d}, false, t}, 4000 + tq + tk);
}

// The model's fused QKV buffer read in place; out (B, T, H, D); gradients into a fused buffer.
TEST(FlashGpu, FusedQkvStrides) {
  PT_REQUIRE_GPU();
  for (int64_t d : {16, 64, 128})
    for (DType t : kTypes)
      for (bool causal : {false, true}) check_case({{2, 3, 150, 150, d}, causal, t, Layout::FusedQkv}, 5000 + d);
}

// Many key tiles per query tile: the two-stage copy pipeline turns over many times.
TEST(FlashGpu, LongSequences) {
  PT_REQUIRE_GPU();
  for (int64_t d : {64, 128})
    for (bool causal : {false, true}) check_case({{1, 2, 1031, 1031, d}, causal, DType::BF16}, 6000 + d);
  check_case({{1, 1, 700, 700, 64}, true, DType::F32}, 6100);
}

// Shapes for the wgmma tile variants: tails in queries and keys, Tq ≠ Tk, the fused QKV layout,
// many key tiles per query tile.
std::vector<Case> wgmma_variant_cases() {
  const DType bf = DType::BF16;
  return {{{4, 2, 128, 128, 64}, false, bf},
          {{4, 2, 128, 128, 64}, true, bf},
          {{2, 1, 1, 1, 64}, true, bf},
          {{2, 1, 17, 17, 64}, true, bf},
          {{2, 1, 65, 65, 64}, false, bf},
          {{2, 1, 333, 333, 64}, true, bf},
          {{1, 2, 200, 200, 128}, false, bf},
          {{2, 1, 129, 129, 128}, true, bf},
          {{2, 2, 100, 257, 64}, false, bf},
          {{2, 2, 300, 45, 128}, false, bf},
          {{2, 2, 1, 130, 64}, false, bf},
          {{2, 2, 130, 1, 128}, false, bf},
          {{2, 3, 150, 150, 64}, true, bf, Layout::FusedQkv},
          {{2, 3, 150, 150, 128}, false, bf, Layout::FusedQkv},
          {{1, 2, 1031, 1031, 64}, true, bf},
          {{1, 2, 1031, 1031, 128}, true, bf}};
}

// Every case of wgmma_variant_cases against the fp64 reference with each of these tile shapes.
void check_wgmma_variants(std::initializer_list<const char*> tile_names, uint64_t seed) {
  const std::vector<Case> cases = wgmma_variant_cases();
  for (const char* tiles : tile_names) {
    SCOPED_TRACE(std::string("wgmma tiles ") + tiles);
    for (size_t i = 0; i < cases.size(); ++i)
      check_case_with(cases[i], seed + 10 * i, choice(ops::FlashKernels::Wgmma, tiles));
  }
}

// The single-pass backward (tiles "…/acc": the dK/dV pass adds each tile's dS·K into an fp32 dQ
// buffer by bulk reductions) with every warpgroup count of that pass, and in the warp-specialised
// dK/dV kernel.
TEST(FlashGpu, SinglePassBackwardAccumulatesDq) {
  PT_REQUIRE_GPU();
  PT_REQUIRE_SM90A();
  check_wgmma_variants({"1x64/1/acc", "1x64/2/acc", "2x128/1/acc", "2x128/2/acc", "ws2x128/ws2/acc"}, 8000);
}

// The single pass with dQ in 32-bit fixed point (tiles "ws2x128/ws2/fxp", cuda/flash/flash_dq_fixed.cuh)
// on every variant shape against the fp64 reference.
TEST(FlashGpu, FixedPointDqSinglePass) {
  PT_REQUIRE_GPU();
  PT_REQUIRE_SM90A();
  check_wgmma_variants({"ws2x128/ws2/fxp", "ws3x128/ws2/fxp"}, 8500);  // the second: d 64's default from 4096 keys
}

// Fixed point rounds each partial to a grid set by a bound on the row's sum (2 ‖dO‖ · max ‖V‖ ·
// max |K|): dQ must stay as close to the fp64 reference as the fp32 sum's where that bound is loose
// or the magnitudes far from 1 — keys and values scaled up with gradients scaled down, and one key
// 1000 times the others (a "massive activation"), which loosens every row's bound a thousandfold.
// The norm-wise relative error of dQ, fixed point against fp32 accumulation, the same inputs.
TEST(FlashGpu, FixedPointDqIsAsAccurateAsFp32Accumulation) {
  PT_REQUIRE_GPU();
  PT_REQUIRE_SM90A();
  struct Scaled {
    Case c;
    double kv, dout;      // K and V times kv, dO times dout
    int64_t outlier_key;  // this key's K times 1000 (-1: none)
  };
  const DType bf = DType::BF16;
  const Scaled cases[] = {{{{1, 2, 1031, 1031, 64}, true, bf}, 1.0, 1.0, -1},
                          {{{1, 2, 777, 777, 128}, false, bf}, 16.0, 1e-4, -1},
                          {{{2, 2, 333, 333, 64}, true, bf}, 1.0, 1e3, 40},
                          {{{1, 2, 1031, 1031, 128}, true, bf}, 1.0, 1.0, 500}};
  Context ctx(Device::cuda(0));
  for (size_t i = 0; i < std::size(cases); ++i) {
    const Scaled& sc = cases[i];
    const Dims& m = sc.c.m;
    SCOPED_TRACE(describe(sc.c) + " K, V x" + std::to_string(sc.kv) + ", dO x" + std::to_string(sc.dout) +
                 (sc.outlier_key >= 0 ? ", one key x1000" : ""));
    auto q = randn(m.q_elems(), 16000 + 10 * i), k = randn(m.k_elems(), 16001 + 10 * i, sc.kv);
    auto v = randn(m.k_elems(), 16002 + 10 * i, sc.kv), dout = randn(m.q_elems(), 16003 + 10 * i, sc.dout);
    if (sc.outlier_key >= 0)
      for (int64_t bh = 0; bh < m.B * m.H; ++bh)
        for (int64_t c = 0; c < m.d; ++c) k[(bh * m.tk + sc.outlier_key) * m.d + c] *= 1000.0;
    q = round_bf16(q), k = round_bf16(k), v = round_bf16(v), dout = round_bf16(dout);
    const auto ref = flash_ref::attention(m, q, k, v, &dout, sc.c.causal);
    double err[2];
    const char* tiles[2] = {"ws2x128/ws2/acc", "ws2x128/ws2/fxp"};
    for (int t = 0; t < 2; ++t) {
      ctx.set_flash(choice(ops::FlashKernels::Wgmma, tiles[t]));
      const Outputs got = run_flash(ctx, sc.c, q, k, v, dout);
      err[t] = rel_error(got.dq, ref.dq);
      EXPECT_LT(rel_error(got.dk, ref.dk), 2e-2) << tiles[t];
    }
    std::printf("  dQ relative error: fp32 accumulation %.3e, fixed point %.3e\n", err[0], err[1]);
    EXPECT_LT(err[0], 5e-2);  // the fp32 sum's own error: bf16's rounding of dS (2.5e-2 with the outlier key)
    EXPECT_LE(err[1], 1.1 * err[0] + 1e-5) << "fixed point's dQ against the fp32 sum's";
  }
}

// Fixed point keeps non-finite inputs visible in dQ: a row whose dO is not finite has a NaN dQ row,
// as the fp32 sum would, while the other rows stay finite; a head with a non-finite key has NaN in
// every dQ row (its bound cannot say which rows the key reaches). Rounding alone would have turned
// those NaN partials into zeros.
TEST(FlashGpu, FixedPointDqKeepsNaN) {
  PT_REQUIRE_GPU();
  PT_REQUIRE_SM90A();
  const Case c{{1, 2, 300, 300, 64}, true, DType::BF16};
  const Dims& m = c.m;
  Context ctx(Device::cuda(0));
  ctx.set_flash(choice(ops::FlashKernels::Wgmma, "ws2x128/ws2/fxp"));
  auto q = randn(m.q_elems(), 17000), k = randn(m.k_elems(), 17001), v = randn(m.k_elems(), 17002);
  auto dout = randn(m.q_elems(), 17003);
  const int64_t bad_row = 200;  // head 0
  dout[bad_row * m.d + 3] = std::numeric_limits<double>::quiet_NaN();
  k[(m.tk + 250) * m.d + 7] = std::numeric_limits<double>::infinity();  // head 1, key 250
  const Outputs got = run_flash(ctx, c, q, k, v, dout);
  auto row_finite = [&](int64_t h, int64_t t) {
    int64_t finite = 0;
    for (int64_t col = 0; col < m.d; ++col) finite += std::isfinite(got.dq[(h * m.tq + t) * m.d + col]);
    return finite;
  };
  EXPECT_EQ(row_finite(0, bad_row), 0) << "the row whose dO has a NaN";
  for (int64_t t : {int64_t{0}, bad_row - 1, bad_row + 1, m.tq - 1}) EXPECT_EQ(row_finite(0, t), m.d) << "row " << t;
  for (int64_t t : {int64_t{0}, int64_t{249}, int64_t{299}}) EXPECT_EQ(row_finite(1, t), 0) << "head 1, row " << t;
}

// Fixed point makes the single pass reproducible: repeated backward passes give the same dQ bit
// for bit on shapes where the fp32 sum's order shows (non-causal, many key tiles per query tile;
// the fp32 single pass differed there in most runs: docs/reports/2026-11-27_flash-ordered-dq_h200.md). The
// fp32 pass's own differences are printed to show the shapes would catch them;
// PT_FLASH_TEST_REPRODUCIBLE_TILES=ws2x128/ws2/acc runs the checks on it instead (and fails).
TEST(FlashGpu, FixedPointDqIsReproducible) {
  PT_REQUIRE_GPU();
  PT_REQUIRE_SM90A();
  const char* env = std::getenv("PT_FLASH_TEST_REPRODUCIBLE_TILES");
  const std::string checked = env ? env : "ws2x128/ws2/fxp";
  Context ctx(Device::cuda(0));
  const Case cases[] = {{{1, 4, 2048, 2048, 64}, false, DType::BF16},
                        {{1, 4, 2048, 2048, 128}, false, DType::BF16},
                        {{1, 8, 4096, 4096, 64}, true, DType::BF16}};
  for (size_t i = 0; i < std::size(cases); ++i) {
    const Case& c = cases[i];
    SCOPED_TRACE(describe(c));
    const auto q = randn(c.m.q_elems(), 18000 + 10 * i), k = randn(c.m.k_elems(), 18001 + 10 * i);
    const auto v = randn(c.m.k_elems(), 18002 + 10 * i), dout = randn(c.m.q_elems(), 18003 + 10 * i);
    for (const std::string& tiles : {checked, std::string("ws2x128/ws2/acc")}) {
      ctx.set_flash(choice(ops::FlashKernels::Wgmma, tiles.c_str()));
      const Outputs first = run_flash(ctx, c, q, k, v, dout);
      int differed = 0;
      constexpr int kRepeats = 3;
      for (int r = 0; r < kRepeats; ++r) {
        const Outputs again = run_flash(ctx, c, q, k, v, dout);
        differed += again.dq != first.dq;
        if (tiles == checked) {
          EXPECT_EQ(again.dq, first.dq) << tiles << ", repeat " << r;
          EXPECT_EQ(again.dk, first.dk) << tiles << ", repeat " << r;
          EXPECT_EQ(again.dv, first.dv) << tiles << ", repeat " << r;
        }
      }
      std::printf("  %s: dQ differed from the first run in %d of %d repeats\n", tiles.c_str(), differed, kRepeats);
      if (tiles == "ws2x128/ws2/acc") break;
    }
  }
}

// The warp-specialised TMA kernels (tiles "ws…"), each pass alone and all together, on the same
// shapes; their backward, with one writer per gradient element, is bit-for-bit reproducible.
TEST(FlashGpu, WarpSpecializedKernels) {
  PT_REQUIRE_GPU();
  PT_REQUIRE_SM90A();
  check_wgmma_variants({"ws2x128/ws2/ws2", "ws3x128/1/1", "1x64/ws2/1", "1x64/1/ws2"}, 9000);
  Context ctx(Device::cuda(0));
  ctx.set_flash(choice(ops::FlashKernels::Wgmma, "ws2x128/ws2/ws2"));
  for (int64_t d : {64, 128}) {
    const Case c{{2, 3, 777, 777, d}, true, DType::BF16};
    const auto q = randn(c.m.q_elems(), 9900), k = randn(c.m.k_elems(), 9901), v = randn(c.m.k_elems(), 9902);
    const auto dout = randn(c.m.q_elems(), 9903);
    const Outputs x = run_flash(ctx, c, q, k, v, dout), y = run_flash(ctx, c, q, k, v, dout);
    EXPECT_EQ(x.dq, y.dq) << "d " << d;
    EXPECT_EQ(x.dk, y.dk) << "d " << d;
    EXPECT_EQ(x.dv, y.dv) << "d " << d;
  }
}

// Scores that climb along the keys, so the forward's running max rises tile after tile: by about
// 0.5, 3 and 20 (log2 units) a 128-key tile in heads 0, 1 and 2. Random scores set the max in the
// first tile and seldom move it, so only here do the kernels raise it mid-row: below the threshold
// (flash_softmax.cuh, 8) they keep the stale max and P grows up to 2^8, above it they rescale O and
// l. Every kernel family and forward tile shape, d 64 and 128, causal and not. O and L only: the
// climb puts keys of size up to 450 in one column, and dQ there sums them against dS, whose terms
// cancel (Σ dS = 0 along a row), so bf16's rounding of dS alone leaves dQ 1e-2 off the reference
// in any backward (seen on the GPU); the backward reads L, which is checked.
TEST(FlashGpu, ForwardRaisesItsMaxAlongTheKeys) {
  PT_REQUIRE_GPU();
  const double climb_per_tile[] = {0.5, 3.0, 20.0};  // log2 units a 128-key tile
  const double q_lift = 2.0;                         // every query's first component
  for (int64_t d : {64, 128})
    for (bool causal : {false, true}) {
      const Case c{{1, 3, 1031, 1031, d}, causal, DType::BF16};
      const Dims& m = c.m;
      auto q = randn(m.q_elems(), 15000 + d), k = randn(m.k_elems(), 15001 + d);
      const auto v = randn(m.k_elems(), 15002 + d), dout = randn(m.q_elems(), 15003 + d);
      const double scale_log2 = 1.0 / std::sqrt(static_cast<double>(d)) / std::log(2.0);
      for (int64_t h = 0; h < m.H; ++h)
        for (int64_t t = 0; t < m.tk; ++t) {
          const int64_t row = h * m.tk + t;  // B = 1
          q[row * d] = q_lift;
          k[row * d] = 0.1 * k[row * d] + climb_per_tile[h] / 128.0 / (scale_log2 * q_lift) * static_cast<double>(t);
        }
      for (ops::FlashKernels kf : families(c)) {
        SCOPED_TRACE(ops::flash_kernels_name(kf));
        check_inputs_with(c, q, k, v, dout, choice(kf), /*check_gradients=*/false);
        if (kf != ops::FlashKernels::Wgmma) continue;
        for (const char* tiles : {"1x64/1/1", "2x128/1/1", "ws2x128/1/1", "ws3x128/1/1"}) {
          SCOPED_TRACE(std::string("wgmma tiles ") + tiles);
          check_inputs_with(c, q, k, v, dout, choice(kf, tiles), /*check_gradients=*/false);
        }
      }
    }
}

// dq and dk rotated back by RoPE's inverse (the model's fused backward): every kernel family and
// tile variant turns each pair before it stores it, the fp32 kernels run the rope pass after;
// against the fp64 reference's gradients turned back in fp64. Odd lengths, Tq ≠ Tk, the fused
// QKV layout, every head dimension.
TEST(FlashGpu, BackwardRotatesDqAndDkBack) {
  PT_REQUIRE_GPU();
  const DType bf = DType::BF16;
  std::vector<Case> cases;
  for (int64_t d : {16, 32, 64, 80, 128}) cases.push_back({{2, 2, 77, 77, d}, true, bf, Layout::FusedQkv, true});
  cases.push_back({{1, 2, 1031, 1031, 64}, true, bf, Layout::Contiguous, true});
  cases.push_back({{2, 2, 100, 257, 64}, false, bf, Layout::Contiguous, true});
  cases.push_back({{2, 2, 300, 45, 128}, false, bf, Layout::Contiguous, true});
  cases.push_back({{2, 2, 77, 77, 64}, true, DType::F32, Layout::FusedQkv, true});
  for (size_t i = 0; i < cases.size(); ++i) check_case(cases[i], 12000 + 10 * i);
  if (!device_target().sm90a_features) return;
  for (const char* tiles : {"1x64/1/1", "2x128/2/2", "1x64/1/acc", "2x128/2/acc", "ws2x128/ws2/ws2", "ws2x128/ws2/acc",
                            "ws2x128/ws2/fxp", "ws3x128/ws2/fxp"}) {
    SCOPED_TRACE(std::string("wgmma tiles ") + tiles);
    for (size_t i = 0; i < cases.size(); ++i)
      if (cases[i].dtype == bf && cuda::flash_covers_head_dim(cases[i].m.d, true))
        check_case_with(cases[i], 12500 + 10 * i, choice(ops::FlashKernels::Wgmma, tiles));
  }
}

// A RoPE table shorter than the call's sequence, or for another head dimension, is one error.
TEST(FlashGpu, BackwardRefusesAMismatchedRopeTable) {
  PT_REQUIRE_GPU();
  Context ctx(Device::cuda(0));
  const Shape s{1, 1, 8, 64};
  Tensor q = Tensor::zeros(s, DType::BF16, ctx), k = Tensor::zeros(s, DType::BF16, ctx);
  Tensor v = Tensor::zeros(s, DType::BF16, ctx), out = Tensor::zeros(s, DType::BF16, ctx);
  Tensor dq = Tensor::zeros(s, DType::BF16, ctx), dk = Tensor::zeros(s, DType::BF16, ctx);
  Tensor dv = Tensor::zeros(s, DType::BF16, ctx), lse = Tensor::zeros({1, 1, 8}, DType::F32, ctx);
  for (const auto& [positions, d] : {std::pair<int64_t, int64_t>{7, 64}, {8, 32}}) {
    const ops::RopeTable t = ops::rope_table(ctx, positions, d, kRopeTheta);
    const std::string msg =
        error_of([&] { ops::flash_attention_backward(ctx, dq, dk, dv, out, q, k, v, out, lse, true, &t); });
    EXPECT_NE(msg.find("RoPE table covers"), std::string::npos) << (msg.empty() ? "accepted" : msg);
  }
}

// Without dQ accumulation every gradient element has one writer, so two backward passes agree
// bit for bit; so does the fixed-point single pass ("…/fxp"). The fp32 single pass ("…/acc", e.g.
// through PT_FLASH_TEST_WGMMA_TILES) sums dQ in a varying order, but dK and dV still have one
// writer each.
TEST(FlashGpu, BackwardIsDeterministic) {
  PT_REQUIRE_GPU();
  const Case c{{2, 4, 777, 777, 64}, true, DType::BF16};
  const Dims& m = c.m;
  Context ctx(Device::cuda(0));
  const auto q = randn(m.q_elems(), 7000), k = randn(m.k_elems(), 7001), v = randn(m.k_elems(), 7002);
  const auto dout = randn(m.q_elems(), 7003);
  for (ops::FlashKernels kf : families(c)) {
    ctx.set_flash(choice(kf));
    SCOPED_TRACE(ops::flash_kernels_name(kf));
    const Outputs a = run_flash(ctx, c, q, k, v, dout), b = run_flash(ctx, c, q, k, v, dout);
    const WgmmaTiles tiles = ops::flash_wgmma_tiles(ctx.flash(), m.d, std::max(m.tq, m.tk), m.B * m.H);
    if (kf != ops::FlashKernels::Wgmma || !tiles.dq_accumulate || tiles.dq_fixed_point) EXPECT_EQ(a.dq, b.dq);
    EXPECT_EQ(a.dk, b.dk);
    EXPECT_EQ(a.dv, b.dv);
    EXPECT_EQ(a.o, b.o);
  }
}

TEST(FlashGpu, WgmmaRejectsUncoveredHeadDim) {
  PT_REQUIRE_GPU();
  PT_REQUIRE_SM90A();
  Context ctx(Device::cuda(0));
  ctx.set_flash(choice(ops::FlashKernels::Wgmma));
  Tensor q = Tensor::zeros({1, 1, 8, 32}, DType::BF16, ctx), k = Tensor::zeros({1, 1, 8, 32}, DType::BF16, ctx);
  Tensor v = Tensor::zeros({1, 1, 8, 32}, DType::BF16, ctx), out = Tensor::zeros({1, 1, 8, 32}, DType::BF16, ctx);
  Tensor lse = Tensor::zeros({1, 1, 8}, DType::F32, ctx);
  const std::string msg = error_of([&] { ops::flash_attention_forward(ctx, out, lse, q, k, v, false); });
  EXPECT_NE(msg.find("wgmma"), std::string::npos) << (msg.empty() ? "wgmma accepted head dimension 32" : msg);
}

TEST(FlashGpu, RejectsMisalignedBf16Rows) {
  PT_REQUIRE_GPU();
  Context ctx(Device::cuda(0));
  // Rows 68 elements apart: 136 bytes, not a multiple of 16.
  Tensor buf = Tensor::zeros({1, 1, 8, 68}, DType::BF16, ctx);
  Tensor q = buf.as_strided({1, 1, 8, 64}, {8 * 68, 8 * 68, 68, 1});
  Tensor k = Tensor::zeros({1, 1, 8, 64}, DType::BF16, ctx), v = Tensor::zeros({1, 1, 8, 64}, DType::BF16, ctx);
  Tensor out = Tensor::zeros({1, 1, 8, 64}, DType::BF16, ctx), lse = Tensor::zeros({1, 1, 8}, DType::F32, ctx);
  const std::string msg = error_of([&] { ops::flash_attention_forward(ctx, out, lse, q, k, v, false); });
  EXPECT_NE(msg.find("16-byte"), std::string::npos) << (msg.empty() ? "misaligned rows accepted" : msg);
}

// The run-time choice on this device: auto runs wgmma exactly where the device runs an sm_90a
// image (a 90a build on a Hopper GPU; not an 80-virtual build JIT-compiled there), and an
// explicit wgmma request elsewhere is one error naming the GPU, its compute capability and the
// architectures compiled in.
TEST(FlashGpu, KernelChoiceFollowsTheDeviceAndTheBinary) {
  PT_REQUIRE_GPU();
  Context ctx(Device::cuda(0));
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  const CudaTarget& t = ctx.target();
  EXPECT_EQ(t.cc_major, prop.major);
  EXPECT_EQ(t.cc_minor, prop.minor);
  const bool sm90a =
      prop.major == 9 && prop.minor == 0 && compiled_cuda_architectures().find("90a") != std::string::npos;
  EXPECT_EQ(t.sm90a_features, sm90a) << compiled_cuda_architectures();
  const std::string used = ops::flash_kernel_used(ctx, DType::BF16, 64, 512, 1);
  EXPECT_EQ(used.rfind("wgmma", 0) == 0, sm90a) << used;
  EXPECT_EQ(ops::flash_kernel_used(ctx, DType::BF16, 80, 512, 1), "mma.sync");
  if (!sm90a) {
    try {
      ctx.set_flash(choice(ops::FlashKernels::Wgmma));
      ADD_FAILURE() << "explicit wgmma accepted without an sm_90a image";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(prop.name), std::string::npos) << what;
      EXPECT_NE(what.find("compute capability " + std::to_string(prop.major) + "." + std::to_string(prop.minor)),
                std::string::npos)
          << what;
      EXPECT_NE(what.find(compiled_cuda_architectures()), std::string::npos) << what;
    }
  }
}

}  // namespace
}  // namespace pt::test
