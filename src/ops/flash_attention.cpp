// Flash attention: argument checks (one clear message per misuse) and dispatch to the tiled
// CPU implementation or the CUDA kernels.
#include "ops/flash_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/enum_names.h"
#include "core/error.h"
#include "core/profiler.h"
#include "cuda/flash_params.h"

namespace pt::ops {

namespace {

constexpr int kCpuTile = 32;

// Default wgmma tile shapes per head dimension: the fastest of the compiled shapes on an H100
// (docs/FLASH_ATTENTION.md, run 3; B 1, H 16, causal, T 8192 and 16384). d = 64: one warpgroup
// per block in every pass (3-4 independent blocks per SM instead of one or two lock-stepped
// pairs); d = 128: the forward with two warpgroups and 128 keys per step, the backward shapes
// within noise of each other.
WgmmaTiles default_wgmma_tiles(int64_t head_dim) {
  return wgmma_tiles_from_name(head_dim == 128 ? "2x128/2/1" : "1x64/1/1");
}

// The Q field of a tile name that selects dQ accumulation in the dK/dV pass.
constexpr const char* kDqAccumulateName = "acc";

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
  if (q.dtype() == DType::BF16) {
    p.kernels = choose_flash_kernels(ctx.flash().kernels, ctx.target(), dm.d);
    p.tiles = flash_wgmma_tiles(ctx.flash(), dm.d);
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

WgmmaTiles flash_wgmma_tiles(const FlashChoice& choice, int64_t head_dim) {
  return choice.tiles ? *choice.tiles : default_wgmma_tiles(head_dim);
}

std::string wgmma_tiles_name(const WgmmaTiles& t) {
  return std::to_string(t.fwd_warpgroups) + "x" + std::to_string(t.fwd_block_n) + "/" +
         std::to_string(t.dkdv_warpgroups) + "/" +
         (t.dq_accumulate ? std::string(kDqAccumulateName) : std::to_string(t.dq_warpgroups));
}

WgmmaTiles wgmma_tiles_from_name(const std::string& name) {
  WgmmaTiles t;
  char dq[8] = {0}, tail = 0;
  const int n = std::sscanf(name.c_str(), "%dx%d/%d/%7[a-z0-9]%c", &t.fwd_warpgroups, &t.fwd_block_n,
                            &t.dkdv_warpgroups, dq, &tail);
  t.dq_accumulate = std::string(dq) == kDqAccumulateName;
  if (!t.dq_accumulate) t.dq_warpgroups = std::atoi(dq);
  auto one_or_two = [](int w) { return w == 1 || w == 2; };
  PT_CHECK(n == 4 && one_or_two(t.fwd_warpgroups) && (t.fwd_block_n == 64 || t.fwd_block_n == 128) &&
               one_or_two(t.dkdv_warpgroups) &&
               (t.dq_accumulate || (one_or_two(t.dq_warpgroups) && std::string(dq).size() == 1)),
           "wgmma tiles '" + name + "': expected F/K/Q with F = 1|2 x 64|128, K = 1|2 and Q = 1|2 or " +
               kDqAccumulateName + " (dQ accumulated in the dK/dV pass), e.g. 2x64/2/2 or 1x64/1/" + kDqAccumulateName);
  return t;
}

std::string flash_kernel_used(const Context& ctx, DType dtype, int64_t head_dim) {
  if (!ctx.is_cuda()) return "cpu";
  if (dtype != DType::BF16) return "simt";
  if (choose_flash_kernels(ctx.flash().kernels, ctx.target(), head_dim) == FlashKernels::Wgmma)
    return "wgmma " + wgmma_tiles_name(flash_wgmma_tiles(ctx.flash(), head_dim));
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
                              const Tensor& lse_in, bool causal) {
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
  // Read Q, K, V, O, dO and the logsumexp, write dQ, dK, dV; per unmasked pair QKᵀ recomputed,
  // dV += PᵀdO, dP = dO Vᵀ, dQ += dS K, dK += dSᵀQ: 2·d FLOPs each. The kernels move more by
  // design: rowsum(O ∘ dO) goes through a (B, H, Tq) workspace, and with dQ accumulated in the
  // dK/dV pass an fp32 dQ buffer; K and V are re-read per query tile (L2 mostly) — not counted.
  OpCost cost;
  cost.read(q).read(k).read(v).read(out).read(dout).read(lse).write(dq).write(dk).write(dv);
  cost.flops = 10.0 * static_cast<double>(dm.d) * attended_pairs(dm, causal) * static_cast<double>(dm.B * dm.H);
  OpScope scope(ctx, "flash attention backward", OpFamily::Attention, cost);
  if (!ctx.is_cuda()) {
    flash_cpu::backward(dq, dk, dv, dout, q, k, v, out, lse, causal, kCpuTile, kCpuTile);
    return;
  }
  Tensor delta = Tensor::empty({dm.B, dm.H, dm.tq}, DType::F32, ctx.device(), "flash_delta", MemCategory::Workspace);
  cuda::FlashParams p = make_params(ctx, dm, q, k, v, causal);
  Tensor dq_accum;  // fp32 dQ summed over key tiles, when the wgmma backward accumulates it
  if (dt == DType::BF16 && p.kernels == FlashKernels::Wgmma && p.tiles.dq_accumulate) {
    dq_accum = Tensor::empty({cuda::flash_dq_accum_numel(dm.B, dm.H, dm.tq, dm.d)}, DType::F32, ctx.device(),
                             "flash_dq_accum", MemCategory::Workspace);
    p.dq_accum = dq_accum.data_as<float>();
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
  if (dt == DType::BF16)
    cuda::flash_bwd_bf16(p, ctx.stream());
  else
    cuda::flash_bwd_fp32(p, ctx.stream());
  // delta and dq_accum go back to the allocator's cache; the stream orders their reuse after
  // the kernels.
}

bool flash_attention_supports_head_dim(int64_t d) { return cuda::flash_covers_head_dim(d); }

}  // namespace pt::ops
