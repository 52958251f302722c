// Flash attention: argument checks (one clear message per misuse) and dispatch to the tiled
// CPU implementation or the CUDA kernels.
#include "ops/flash_attention.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <vector>

#include "core/enum_names.h"
#include "core/error.h"
#include "core/profiler.h"
#include "cuda/flash/flash_params.h"

namespace pt::ops {

namespace {

constexpr int kCpuTile = 32;

// Default wgmma tile shapes: the fastest compiled shapes on an H100 that the determinism asked for
// allows; docs/FLASH_ATTENTION.md gives each row's measurement and its report.
//   - Short lengths: one-warpgroup cp.async blocks, several to an SM, fill the machine better than
//     one 384-thread block per SM on a few short tiles.
//   - d 64 at T 1024: the warp-specialised passes once the call has 2^18 query rows (B·H·T).
//   - From 1024 (d 128) or 2048 (d 64): the warp-specialised passes; from 2048 with --deterministic
//     off, the single pass adding dQ in fp32, whose varying order breaks the bit-for-bit promises
//     of resume and CUDA graphs.
//   - From 4096, reproducible: the single pass adding dQ in 32-bit fixed point.
//   - d 64 from 4096 keys with 2^16 query rows: the forward with three math warpgroups (192 query
//     rows a block); with fewer rows its blocks do not fill the machine.
struct DefaultTilesRow {
  int64_t head_dim;  // 0: every head dimension
  int64_t from_length;
  int64_t from_rows;  // B·H·T, the query rows of the whole call
  bool reproducible;  // bit for bit the same from run to run (else only with --deterministic off)
  const char* tiles;
};
// The last row that matches the head dimension and the determinism asked for and whose length and
// rows have been reached wins. Head dimensions the wgmma kernels do not cover keep the first row (a
// name for the record; they run the mma.sync kernels).
constexpr DefaultTilesRow kDefaultWgmmaTiles[] = {
    {0, 0, 0, true, "1x64/1/1"},
    {64, 1024, int64_t{1} << 18, true, "ws2x128/ws2/ws2"},
    {64, 2048, 0, true, "ws2x128/ws2/ws2"},
    {128, 1024, 0, true, "ws2x128/ws2/ws2"},
    {64, 4096, 0, true, "ws2x128/ws2/fxp"},
    {64, 4096, int64_t{1} << 16, true, "ws3x128/ws2/fxp"},
    {128, 4096, 0, true, "ws2x128/ws2/fxp"},
    {64, 2048, 0, false, "ws2x128/ws2/acc"},
    {64, 4096, int64_t{1} << 16, false, "ws3x128/ws2/acc"},
    {128, 2048, 0, false, "ws2x128/ws2/acc"},
};
WgmmaTiles default_wgmma_tiles(int64_t head_dim, int64_t seqlen, int64_t batch_heads, bool deterministic) {
  // Parsed once: this runs for every attention call.
  static const std::vector<WgmmaTiles> parsed = [] {
    std::vector<WgmmaTiles> v;
    for (const DefaultTilesRow& r : kDefaultWgmmaTiles) v.push_back(wgmma_tiles_from_name(r.tiles));
    return v;
  }();
  size_t best = 0;
  for (size_t i = 0; i < parsed.size(); ++i) {
    const DefaultTilesRow& r = kDefaultWgmmaTiles[i];
    if ((r.head_dim == 0 || r.head_dim == head_dim) && r.from_length <= seqlen && r.from_rows <= batch_heads * seqlen &&
        (r.reproducible || !deterministic))
      best = i;
  }
  return parsed[best];
}

// The Q field of a tile name that selects dQ accumulation in the dK/dV pass: in fp32, or (the
// warp-specialised pass only) in 32-bit fixed point, reproducible.
constexpr const char* kDqAccumulateName = "acc";
constexpr const char* kDqFixedPointName = "fxp";
// The prefix of a field that selects that pass's warp-specialised TMA kernel, e.g. "ws2x128/ws2/ws2".
constexpr const char* kWarpSpecializedName = "ws";

// A 3-D (B, T, D) tensor as the (B, 1, T, D) view; 4-D tensors unchanged.
Tensor as_4d(const Tensor& t, const char* what) {
  if (t.dim() == 4) return t;
  PT_CHECK(t.dim() == 3,
           std::string("flash attention: ") + what + " must be (B, H, T, D) or (B, T, D), got " + t.describe());
  return t.as_strided({t.size(0), 1, t.size(1), t.size(2)},
                      {t.stride(0), t.size(1) * t.stride(1), t.stride(1), t.stride(2)});
}
Tensor lse_as_3d(const Tensor& t) {
  if (t.dim() == 2) return t.reshape({t.size(0), 1, t.size(1)});
  return t;
}

struct Dims {
  int64_t B, H, tq, tk, d;
};

void check_layout(const Tensor& t, const Shape& shape, DType dtype, Device device, const char* what) {
  check_shape(t, shape, what);
  check_dtype(t, dtype, what);
  PT_CHECK(t.device() == device, std::string("flash attention: ") + what + " is on " + t.device().str() +
                                     ", the context runs on " + device.str());
  PT_CHECK(t.stride(3) == 1, std::string("flash attention: ") + what +
                                 " must have a contiguous last (head) dimension, got strides of " + t.describe());
  if (device.is_cuda() && dtype == DType::BF16) {
    // The kernels copy 16-byte row chunks asynchronously: rows must start 16-byte aligned.
    bool aligned = reinterpret_cast<uintptr_t>(t.data()) % 16 == 0;
    for (int i = 0; i < 3; ++i) aligned = aligned && (t.size(i) == 1 || t.stride(i) % 8 == 0);
    PT_CHECK(aligned, std::string("flash attention: ") + what +
                          " rows must start on 16-byte boundaries (bf16 strides a multiple of 8), got " + t.describe());
  }
}

Dims check_inputs(const Context& ctx, const Tensor& q, const Tensor& k, const Tensor& v, bool causal) {
  const Dims dm{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
  PT_CHECK(flash_attention_supports_head_dim(dm.d),
           "flash attention supports head dimensions " + flash_head_dims_text() + ", got " + std::to_string(dm.d));
  PT_CHECK(dm.B > 0 && dm.H > 0 && dm.tq > 0 && dm.tk > 0,
           "flash attention: empty input " + q.describe() + " / " + k.describe());
  PT_CHECK(!causal || dm.tq == dm.tk, "flash attention: causal attention needs as many queries as keys, got Tq = " +
                                          std::to_string(dm.tq) + ", Tk = " + std::to_string(dm.tk));
  const DType dt = q.dtype();
  if (ctx.is_cuda())
    PT_CHECK(dt == DType::BF16 || dt == DType::F32,
             std::string("flash attention on the GPU takes bf16 or fp32, got ") + dtype_name(dt));
  else
    PT_CHECK(dt == DType::F32 || dt == DType::F64,
             std::string("flash attention on the CPU takes fp32 or fp64, got ") + dtype_name(dt));
  PT_CHECK(dm.tq < (int64_t(1) << 31) && dm.tk < (int64_t(1) << 31) && dm.H <= 65535 && dm.B <= 65535,
           "flash attention: sizes beyond the kernels' grid limits: " + q.describe());
  check_layout(q, {dm.B, dm.H, dm.tq, dm.d}, dt, ctx.device(), "q");
  check_layout(k, {dm.B, dm.H, dm.tk, dm.d}, dt, ctx.device(), "k");
  check_layout(v, {dm.B, dm.H, dm.tk, dm.d}, dt, ctx.device(), "v");
  return dm;
}

void check_lse(const Tensor& lse, const Dims& dm, Device device) {
  check_shape(lse, {dm.B, dm.H, dm.tq}, "lse");
  check_dtype(lse, DType::F32, "lse");
  check_contiguous(lse, "lse");
  PT_CHECK(lse.device() == device,
           "flash attention: lse is on " + lse.device().str() + ", the context runs on " + device.str());
}

cuda::RowStrides row_strides(const Tensor& t) { return {t.stride(0), t.stride(1), t.stride(2)}; }

// (query, key) pairs the kernels compute per (batch entry, head): every pair, or with the causal
// mask the keys j ≤ i of query i (the kernels' top-left alignment; they skip tiles past the
// diagonal), min(i + 1, Tk) keys for query i.
double attended_pairs(const Dims& dm, bool causal) {
  const double tq = static_cast<double>(dm.tq), tk = static_cast<double>(dm.tk);
  if (!causal) return tq * tk;
  const double diag = std::min(tq, tk);  // queries i < Tk see i + 1 keys, the rest all Tk
  return diag * (diag + 1) / 2 + (tq - diag) * tk;
}

cuda::FlashParams make_params(const Context& ctx, const Dims& dm, const Tensor& q, const Tensor& k, const Tensor& v,
                              bool causal) {
  cuda::FlashParams p;
  p.q = q.data();
  p.k = k.data();
  p.v = v.data();
  p.q_s = row_strides(q);
  p.k_s = row_strides(k);
  p.v_s = row_strides(v);
  p.batch = static_cast<int>(dm.B);
  p.heads = static_cast<int>(dm.H);
  p.seqlen_q = static_cast<int>(dm.tq);
  p.seqlen_k = static_cast<int>(dm.tk);
  p.head_dim = static_cast<int>(dm.d);
  p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dm.d)));
  p.causal = causal;
  p.block_group = cuda::flash_block_group(dm.B * dm.H, std::max(dm.tq, dm.tk));
  if (q.dtype() == DType::BF16) {
    p.kernels = choose_flash_kernels(ctx.flash().kernels, ctx.target(), dm.d);
    p.tiles = flash_wgmma_tiles(ctx.flash(), dm.d, std::max(dm.tq, dm.tk), dm.B * dm.H);
  }
  return p;
}

}  // namespace

std::string flash_head_dims_text(bool wgmma_only) {
  std::vector<int> dims;
  for (const cuda::FlashHeadDim& e : cuda::kFlashHeadDims)
    if (e.wgmma || !wgmma_only) dims.push_back(e.d);
  std::string text;
  for (size_t i = 0; i < dims.size(); ++i)
    text += (i == 0 ? "" : i + 1 == dims.size() ? " and " : ", ") + std::to_string(dims[i]);
  return text;
}

FlashKernels choose_flash_kernels(FlashKernels requested, const CudaTarget& target, int64_t head_dim) {
  const bool wgmma_covers = cuda::flash_covers_head_dim(head_dim, /*wgmma_only=*/true);
  switch (requested) {
    case FlashKernels::MmaSync: return FlashKernels::MmaSync;
    case FlashKernels::Wgmma:
      PT_CHECK(target.sm90a_features, wgmma_unavailable_message(target));
      PT_CHECK(wgmma_covers, "flash attention: the wgmma kernels cover head dimensions " + flash_head_dims_text(true) +
                                 ", not " + std::to_string(head_dim) + " (use --flash-kernels auto or mma)");
      return FlashKernels::Wgmma;
    case FlashKernels::Auto: break;
  }
  return target.sm90a_features && wgmma_covers ? FlashKernels::Wgmma : FlashKernels::MmaSync;
}

namespace {
// "mma.sync" is what a record shows; "mma" is accepted as its short form.
constexpr EnumName<FlashKernels> kFlashKernels[] = {{FlashKernels::Auto, "auto"},
                                                    {FlashKernels::MmaSync, "mma.sync"},
                                                    {FlashKernels::MmaSync, "mma"},
                                                    {FlashKernels::Wgmma, "wgmma"}};
}  // namespace

const char* flash_kernels_name(FlashKernels kernels) { return enum_name(kFlashKernels, kernels); }
FlashKernels flash_kernels_from_name(const std::string& name) {
  return enum_from_name(kFlashKernels, name, "--flash-kernels");
}

WgmmaTiles flash_wgmma_tiles(const FlashChoice& choice, int64_t head_dim, int64_t seqlen, int64_t batch_heads) {
  return choice.tiles ? *choice.tiles : default_wgmma_tiles(head_dim, seqlen, batch_heads, choice.deterministic);
}

std::string wgmma_tiles_name(const WgmmaTiles& t) {
  auto ws = [](bool on) { return std::string(on ? kWarpSpecializedName : ""); };
  return ws(t.fwd_warp_specialized) + std::to_string(t.fwd_warpgroups) + "x" + std::to_string(t.fwd_block_n) + "/" +
         ws(t.dkdv_warp_specialized) + std::to_string(t.dkdv_warpgroups) + "/" +
         (t.dq_accumulate ? std::string(t.dq_fixed_point ? kDqFixedPointName : kDqAccumulateName)
                          : ws(t.dq_warp_specialized) + std::to_string(t.dq_warpgroups));
}

namespace {
// One field of a tile name: an optional "ws" prefix, then digits and, in the forward field (block_n
// given), "x" and more digits. Returns false when the text is not of that form.
bool parse_tile_field(const std::string& field, bool& ws, int& warpgroups, int* block_n = nullptr) {
  const bool forward = block_n != nullptr;
  const std::string prefix = kWarpSpecializedName;
  ws = field.compare(0, prefix.size(), prefix) == 0;
  const std::string rest = ws ? field.substr(prefix.size()) : field;
  const size_t x = rest.find('x');
  const std::string count = forward ? rest.substr(0, x) : rest,
                    keys = forward && x != std::string::npos ? rest.substr(x + 1) : "";
  auto all_digits = [](const std::string& t) {
    return !t.empty() && t.size() <= 3 &&
           std::all_of(t.begin(), t.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); });
  };
  if (!all_digits(count) || (forward && !all_digits(keys)) || (!forward && x != std::string::npos)) return false;
  warpgroups = std::stoi(count);
  if (forward) *block_n = std::stoi(keys);
  return true;
}
}  // namespace

WgmmaTiles wgmma_tiles_from_name(const std::string& name) {
  WgmmaTiles t;
  const std::string ws = kWarpSpecializedName;
  std::vector<std::string> fields;
  for (size_t begin = 0;;) {
    const size_t slash = name.find('/', begin);
    fields.push_back(name.substr(begin, slash == std::string::npos ? std::string::npos : slash - begin));
    if (slash == std::string::npos) break;
    begin = slash + 1;
  }
  bool ok = fields.size() == 3 &&
            parse_tile_field(fields[0], t.fwd_warp_specialized, t.fwd_warpgroups, &t.fwd_block_n) &&
            parse_tile_field(fields[1], t.dkdv_warp_specialized, t.dkdv_warpgroups);
  if (ok) {
    t.dq_fixed_point = fields[2] == kDqFixedPointName;
    t.dq_accumulate = t.dq_fixed_point || fields[2] == kDqAccumulateName;
    ok = t.dq_accumulate || parse_tile_field(fields[2], t.dq_warp_specialized, t.dq_warpgroups);
  }
  auto one_or_two = [](int w) { return w == 1 || w == 2; };
  // The compiled shapes: cp.async kernels 1|2 × 64|128, 1|2, 1|2; warp-specialised forward
  // 2|3 × 128, backward passes 2; the single pass (acc) with either dK/dV kernel, in fixed point
  // (fxp) with the warp-specialised one.
  ok = ok &&
       (t.fwd_warp_specialized ? (t.fwd_warpgroups == 2 || t.fwd_warpgroups == 3) && t.fwd_block_n == 128
                               : one_or_two(t.fwd_warpgroups) && (t.fwd_block_n == 64 || t.fwd_block_n == 128)) &&
       (t.dkdv_warp_specialized ? t.dkdv_warpgroups == 2 : one_or_two(t.dkdv_warpgroups)) &&
       (t.dq_accumulate || (t.dq_warp_specialized ? t.dq_warpgroups == 2 : one_or_two(t.dq_warpgroups))) &&
       (!t.dq_fixed_point || t.dkdv_warp_specialized);
  PT_CHECK(ok, "wgmma tiles '" + name + "': expected F/K/Q with F = 1|2 x 64|128, K = 1|2 and Q = 1|2 or " +
                   kDqAccumulateName + " (dQ accumulated in the dK/dV pass); " + ws +
                   " before a field selects that pass's warp-specialised TMA kernel: F = " + ws + "2|" + ws +
                   "3 x 128, K = " + ws + "2, Q = " + ws + "2 or, after K = " + ws + "2, " + kDqFixedPointName +
                   " (dQ accumulated in fixed point, reproducible). E.g. 2x64/2/2, 1x64/1/" + kDqAccumulateName + ", " +
                   ws + "2x128/" + ws + "2/" + ws + "2, " + ws + "2x128/" + ws + "2/" + kDqFixedPointName);
  return t;
}

std::string flash_kernel_used(const Context& ctx, DType dtype, int64_t head_dim, int64_t seqlen, int64_t batch_heads) {
  if (!ctx.is_cuda()) return "cpu";
  if (dtype != DType::BF16) return "simt";
  if (choose_flash_kernels(ctx.flash().kernels, ctx.target(), head_dim) == FlashKernels::Wgmma)
    return "wgmma " + wgmma_tiles_name(flash_wgmma_tiles(ctx.flash(), head_dim, seqlen, batch_heads));
  return "mma.sync";
}

void flash_attention_forward(Context& ctx, Tensor& out_in, Tensor& lse_in, const Tensor& q_in, const Tensor& k_in,
                             const Tensor& v_in, bool causal) {
  const Tensor q = as_4d(q_in, "q"), k = as_4d(k_in, "k"), v = as_4d(v_in, "v");
  Tensor out = as_4d(out_in, "out"), lse = lse_as_3d(lse_in);
  const Dims dm = check_inputs(ctx, q, k, v, causal);
  check_layout(out, {dm.B, dm.H, dm.tq, dm.d}, q.dtype(), ctx.device(), "out");
  check_lse(lse, dm, ctx.device());
  // Read Q, K, V once, write O and the logsumexp; per unmasked pair S = QKᵀ and O += PV, 2·d
  // FLOPs each. (K and V are re-read per query tile, mostly from L2: not counted.)
  OpCost cost;
  cost.read(q).read(k).read(v).write(out).write(lse);
  cost.flops = 4.0 * static_cast<double>(dm.d) * attended_pairs(dm, causal) * static_cast<double>(dm.B * dm.H);
  OpScope scope(ctx, "flash attention forward", OpFamily::Attention, cost);
  if (!ctx.is_cuda()) {
    flash_cpu::forward(out, lse, q, k, v, causal, kCpuTile, kCpuTile);
    return;
  }
  cuda::FlashParams p = make_params(ctx, dm, q, k, v, causal);
  p.o = out.data();
  p.o_s = row_strides(out);
  p.lse = lse.data_as<float>();
  if (q.dtype() == DType::BF16)
    cuda::flash_fwd_bf16(p, ctx.stream());
  else
    cuda::flash_fwd_fp32(p, ctx.stream());
}

void flash_attention_backward(Context& ctx, Tensor& dq_in, Tensor& dk_in, Tensor& dv_in, const Tensor& dout_in,
                              const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Tensor& out_in,
                              const Tensor& lse_in, bool causal, const RopeTable* unrotate) {
  const Tensor q = as_4d(q_in, "q"), k = as_4d(k_in, "k"), v = as_4d(v_in, "v");
  const Tensor out = as_4d(out_in, "out"), dout = as_4d(dout_in, "dout"), lse = lse_as_3d(lse_in);
  Tensor dq = as_4d(dq_in, "dq"), dk = as_4d(dk_in, "dk"), dv = as_4d(dv_in, "dv");
  const Dims dm = check_inputs(ctx, q, k, v, causal);
  const DType dt = q.dtype();
  check_layout(out, {dm.B, dm.H, dm.tq, dm.d}, dt, ctx.device(), "out");
  check_layout(dout, {dm.B, dm.H, dm.tq, dm.d}, dt, ctx.device(), "dout");
  check_layout(dq, {dm.B, dm.H, dm.tq, dm.d}, dt, ctx.device(), "dq");
  check_layout(dk, {dm.B, dm.H, dm.tk, dm.d}, dt, ctx.device(), "dk");
  check_layout(dv, {dm.B, dm.H, dm.tk, dm.d}, dt, ctx.device(), "dv");
  check_lse(lse, dm, ctx.device());
  if (unrotate != nullptr) {
    const Tensor& t = unrotate->cos_sin;
    PT_CHECK(t.defined() && t.dtype() == DType::F32 && t.is_contiguous() && t.device() == ctx.device(),
             "flash attention: the RoPE table must be a contiguous fp32 tensor on " + ctx.device().str() +
                 " (ops::rope_table)");
    PT_CHECK(unrotate->head_dim() == dm.d && unrotate->positions() >= std::max(dm.tq, dm.tk),
             "flash attention: the RoPE table covers " + std::to_string(unrotate->positions()) +
                 " positions at head dimension " + std::to_string(unrotate->head_dim()) + "; the call needs " +
                 std::to_string(std::max(dm.tq, dm.tk)) + " at " + std::to_string(dm.d));
  }
  // The bf16 kernels rotate dQ and dK back as they store them; elsewhere rope() follows.
  const bool unrotate_in_kernel = unrotate != nullptr && ctx.is_cuda() && dt == DType::BF16;
  const auto unrotate_after = [&] {
    if (unrotate == nullptr || unrotate_in_kernel) return;
    ops::rope(ctx, dq, dq, unrotate->theta, /*inverse=*/true);
    ops::rope(ctx, dk, dk, unrotate->theta, /*inverse=*/true);
  };
  // Read Q, K, V, O, dO and the logsumexp, write dQ, dK, dV; per unmasked pair QKᵀ recomputed,
  // dV += PᵀdO, dP = dO Vᵀ, dQ += dS K, dK += dSᵀQ: 2·d FLOPs each. The kernels move more by
  // design: rowsum(O ∘ dO) goes through a (B, H, Tq) workspace, and with dQ accumulated in the
  // dK/dV pass an fp32 dQ buffer; K and V are re-read per query tile (L2 mostly) — not counted.
  OpCost cost;
  cost.read(q).read(k).read(v).read(out).read(dout).read(lse).write(dq).write(dk).write(dv);
  cost.flops = 10.0 * static_cast<double>(dm.d) * attended_pairs(dm, causal) * static_cast<double>(dm.B * dm.H);
  std::optional<OpScope> scope;  // ended before a rope pass, which the breakdown counts as its own op
  scope.emplace(ctx, "flash attention backward", OpFamily::Attention, cost);
  if (!ctx.is_cuda()) {
    flash_cpu::backward(dq, dk, dv, dout, q, k, v, out, lse, causal, kCpuTile, kCpuTile);
    scope.reset();
    unrotate_after();
    return;
  }
  Tensor delta = Tensor::empty({dm.B, dm.H, dm.tq}, DType::F32, ctx.device(), "flash_delta", MemCategory::Workspace);
  cuda::FlashParams p = make_params(ctx, dm, q, k, v, causal);
  Tensor dq_accum;  // dQ summed over key tiles (fp32 or fixed point), when the wgmma backward accumulates it
  if (dt == DType::BF16 && p.kernels == FlashKernels::Wgmma && p.tiles.dq_accumulate) {
    dq_accum = Tensor::empty({cuda::flash_dq_workspace_numel(p)}, DType::F32, ctx.device(), "flash_dq_accum",
                             MemCategory::Workspace);
    cuda::flash_point_dq_workspace(p, dq_accum.data_as<float>());
  }
  p.o = const_cast<void*>(out.data());
  p.o_s = row_strides(out);
  p.lse = const_cast<float*>(lse.data_as<float>());
  p.dout = dout.data();
  p.do_s = row_strides(dout);
  p.dq = dq.data();
  p.dq_s = row_strides(dq);
  p.dk = dk.data();
  p.dk_s = row_strides(dk);
  p.dv = dv.data();
  p.dv_s = row_strides(dv);
  p.delta = delta.data_as<float>();
  if (unrotate_in_kernel) p.rope_cos_sin = unrotate->cos_sin.data_as<const float>();
  if (dt == DType::BF16)
    cuda::flash_bwd_bf16(p, ctx.stream());
  else
    cuda::flash_bwd_fp32(p, ctx.stream());
  scope.reset();
  unrotate_after();
  // delta and dq_accum go back to the allocator's cache; the stream orders their reuse after
  // the kernels.
}

bool flash_attention_supports_head_dim(int64_t d) { return cuda::flash_covers_head_dim(d); }

}  // namespace pt::ops
