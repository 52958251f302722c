#include "model/transformer.h"
#include "core/enum_names.h"

#include <cmath>
#include <cstdio>
#include <iterator>
#include <random>
#include <utility>

#include "core/error.h"
#include "core/profiler.h"
#include "model/layers.h"
#include "ops/attention.h"
#include "ops/elementwise.h"
#include "ops/flash_attention.h"
#include "ops/loss.h"
#include "ops/rope.h"

namespace pt {

// ---- configuration ------------------------------------------------------------------------

namespace {
constexpr EnumName<AttentionImpl> kAttentionImpls[] = {{AttentionImpl::Naive, "naive"},
                                                       {AttentionImpl::Flash, "flash"}};
constexpr EnumName<Recompute> kRecomputeNames[] = {
    {Recompute::All, "on"}, {Recompute::Swiglu, "swiglu"}, {Recompute::Off, "off"}};
}  // namespace

Recompute recompute_from_name(const std::string& name) { return enum_from_name(kRecomputeNames, name, "--recompute"); }
const char* recompute_name(Recompute r) { return enum_name(kRecomputeNames, r); }

AttentionImpl attention_impl_from_name(const std::string& name) {
  return enum_from_name(kAttentionImpls, name, "attention");
}
const char* attention_impl_name(AttentionImpl a) { return enum_name(kAttentionImpls, a); }

namespace {
struct NamedSize {
  const char* name;
  int64_t d_model, d_ff, layers, heads;
};
constexpr NamedSize kSizes[] = {
    {"tiny", 128, 384, 4, 4},  // not a reference size: CPU smoke runs and `paratrain train`'s default
    {"small", 768, 3072, 12, 12}, {"medium", 1024, 4096, 24, 16}, {"large", 1280, 5120, 36, 20},
    {"xl", 1600, 6400, 48, 25},   {"2.7b", 2560, 10240, 32, 32},
};
}  // namespace

const std::vector<std::string>& TransformerConfig::size_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& s : kSizes) v.push_back(s.name);
    return v;
  }();
  return names;
}

TransformerConfig TransformerConfig::named(const std::string& size) {
  for (const auto& s : kSizes)
    if (size == s.name) {
      TransformerConfig c;
      c.d_model = s.d_model;
      c.d_ff = s.d_ff;
      c.num_layers = s.layers;
      c.num_heads = s.heads;
      return c;
    }
  std::string known;
  for (const auto& s : kSizes) known += std::string(known.empty() ? "" : ", ") + s.name;
  PT_FAIL("unknown model size '" + size + "' (known: " + known + ")");
}

namespace {
long double exact_num_params(const TransformerConfig& c) {
  const long double C = c.d_model, F = c.d_ff, V = c.vocab_size, L = c.num_layers;
  return 2 * V * C + L * (4 * C * C + 3 * C * F + 2 * C) + C;
}
}  // namespace

void TransformerConfig::validate() const {
  PT_CHECK(vocab_size > 0, "vocab_size must be positive");
  PT_CHECK(context_length > 0, "context_length must be positive");
  PT_CHECK(d_model > 0 && num_layers > 0 && num_heads > 0 && d_ff > 0,
           "d_model, num_layers, num_heads and d_ff must be positive");
  PT_CHECK(d_model % num_heads == 0, "d_model (" + std::to_string(d_model) + ") must be divisible by num_heads (" +
                                         std::to_string(num_heads) + ")");
  PT_CHECK(d_head() % 2 == 0,
           "the head dimension d_model/num_heads = " + std::to_string(d_head()) + " must be even for RoPE");
  PT_CHECK(rope_theta > 0, "rope_theta must be positive");
  // num_params() counts in int64_t: a shape whose count would not fit is refused before anything
  // multiplies its sizes (the count in long double cannot overflow).
  char count[32];
  std::snprintf(count, sizeof count, "%.3Lg", exact_num_params(*this));
  PT_CHECK(exact_num_params(*this) < 0x1p62L, "the model is too large to count: vocab_size " +
                                                  std::to_string(vocab_size) + ", d_model " + std::to_string(d_model) +
                                                  ", num_layers " + std::to_string(num_layers) + " and d_ff " +
                                                  std::to_string(d_ff) + " give " + count + " parameters");
  PT_CHECK(attention != AttentionImpl::Flash || ops::flash_attention_supports_head_dim(d_head()),
           "flash attention covers head dimensions " + ops::flash_head_dims_text() + "; this model's is " +
               std::to_string(d_head()) + " (use --attention naive)");
}

std::vector<ParamShape> transformer_param_shapes(const TransformerConfig& cfg) {
  const int64_t C = cfg.d_model, F = cfg.d_ff, V = cfg.vocab_size;
  std::vector<ParamShape> out = {{"token_embeddings.weight", V * C}};
  for (int64_t l = 0; l < cfg.num_layers; ++l) {
    const std::string p = "layers." + std::to_string(l);
    for (const ParamShape& s : std::vector<ParamShape>{{p + ".ln1.weight", C},
                                                       {p + ".attn.q_proj.weight", C * C},
                                                       {p + ".attn.k_proj.weight", C * C},
                                                       {p + ".attn.v_proj.weight", C * C},
                                                       {p + ".attn.output_proj.weight", C * C},
                                                       {p + ".ln2.weight", C},
                                                       {p + ".ffn.w1.weight", F * C},
                                                       {p + ".ffn.w2.weight", C * F},
                                                       {p + ".ffn.w3.weight", F * C}})
      out.push_back(s);
  }
  out.push_back({"ln_final.weight", C});
  out.push_back({"lm_head.weight", V * C});
  return out;
}

int64_t TransformerConfig::num_params() const {
  const int64_t per_layer = 4 * d_model * d_model + 3 * d_model * d_ff + 2 * d_model;
  return 2 * vocab_size * d_model + num_layers * per_layer + d_model;
}

MemoryFloor training_memory_floor(const TransformerConfig& cfg, int64_t rows, size_t grad_bytes, bool lowp_mirror) {
  MemoryFloor f;
  f.parameters = static_cast<double>(exact_num_params(cfg));
  const double logits = static_cast<double>(rows) * static_cast<double>(cfg.context_length) *
                        static_cast<double>(cfg.vocab_size) * (lowp_mirror ? 2 : 4);
  f.device_bytes = f.parameters * (4.0 + static_cast<double>(grad_bytes) + (lowp_mirror ? 2 : 0)) + logits;
  f.host_bytes = static_cast<double>(kHostBytesPerLayer) * static_cast<double>(cfg.num_layers);
  return f;
}

void check_memory_floor(const TransformerConfig& cfg, int64_t rows, size_t grad_bytes, bool lowp_mirror,
                        const Device& device, const std::string& source) {
  const MemoryFloor f = training_memory_floor(cfg, rows, grad_bytes, lowp_mirror);
  const double host = memory_capacity_bytes(Device::cpu());
  const double dev = device.is_cpu() ? host : memory_capacity_bytes(device);
  auto gib = [](double bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g GiB", bytes / (1024.0 * 1024.0 * 1024.0));
    return std::string(buf);
  };
  char params[32];
  std::snprintf(params, sizeof params, "%.4g", f.parameters);
  const std::string shape = "the model (" + std::to_string(cfg.num_layers) + " layers, d_model " +
                            std::to_string(cfg.d_model) + ", d_ff " + std::to_string(cfg.d_ff) + ", vocabulary " +
                            std::to_string(cfg.vocab_size) + ": " + params + " parameters)";
  const double need = device.is_cpu() ? f.device_bytes + f.host_bytes : f.device_bytes;
  PT_CHECK(need <= dev, shape + " needs at least " + gib(need) +
                            " for its weights, gradients and one micro-batch's logits, more than the " + gib(dev) +
                            " of " + device.str() + ": " + source);
  PT_CHECK(f.host_bytes <= host, shape + " needs at least " + gib(f.host_bytes) +
                                     " of host memory for its layers' records, more than the " + gib(host) +
                                     " this process may use: " + source);
}

double TransformerConfig::train_flops_per_token(int64_t seq_len) const {
  // 6 FLOPs per parameter per token for the GEMMs (embedding lookups are not GEMMs) plus the
  // attention score and value products: 2·2·T·d_model forward per layer, ×3 with backward.
  const double n_gemm = static_cast<double>(num_params() - vocab_size * d_model);
  return 6.0 * n_gemm +
         12.0 * static_cast<double>(num_layers) * static_cast<double>(seq_len) * static_cast<double>(d_model);
}

// ---- the residual gradient as a GEMM operand ----------------------------------------------

namespace {

// The fp32 residual gradient as a GEMM operand: itself in fp32, a bf16 copy in bf16 mode.
Tensor as_act(Context& ctx, const Tensor& x, DType act) {
  if (x.dtype() == act) return x;
  Tensor y = Tensor::empty(x.shape(), act, ctx.device(), "grad_cast");
  ops::cast(ctx, y, x);
  return y;
}

// Room for the amax of an FP8 GEMM's operand (fp32 (n) on the device; ops::fp8_operand), which
// the kernel that writes the operand fills as it stores it.
Tensor fp8_amax_slot(Context& ctx, int64_t n = 1) {
  return Tensor::empty({n}, DType::F32, ctx.device(), "fp8_amax", MemCategory::Workspace);
}

// The operand of the GEMMs that read the residual gradient `dout` next: the bf16 copy an RMSNorm
// backward wrote beside it (`copy`, taken: undefined on return), else as_act's.
Tensor take_act_operand(Context& ctx, Tensor& copy, const Tensor& dout, DType act) {
  if (copy.defined()) return std::exchange(copy, Tensor());
  return as_act(ctx, dout, act);
}

// An RMSNorm backward that finishes the residual gradient dout (adds into it, or writes it when
// not `accumulate`). Where a GEMM reads dout next (`copy`) and the step is fused bf16 on a GPU,
// the norm writes dout's bf16 copy in the same pass and it is returned (unfused keeps the cast
// pass, as PyTorch eager); otherwise an undefined tensor. When that GEMM runs in FP8 (`amax` set)
// the norm also writes the operand's amax there (the copy's, or dout's without one).
Tensor finish_residual_grad(Context& ctx, RMSNorm& norm, const Tensor& d, Tensor& dout, bool accumulate, DType act,
                            bool fused, bool copy, Tensor* amax = nullptr) {
  Tensor dout_act;
  if (copy && fused && act == DType::BF16 && dout.dtype() != act && ctx.is_cuda())
    dout_act = Tensor::empty(dout.shape(), act, ctx.device(), "grad_cast");
  // The amax is the operand's when the norm writes the operand: the copy, or dout read as it is.
  const bool writes_operand = dout_act.defined() || dout.dtype() == act;
  if (amax) *amax = copy && writes_operand ? fp8_amax_slot(ctx) : Tensor();
  norm.backward(ctx, d, dout, accumulate, dout_act.defined() ? &dout_act : nullptr,
                amax && amax->defined() ? amax : nullptr);
  return dout_act;
}

}  // namespace

// ---- which Linear layers run in FP8 ------------------------------------------------------

// The one place a layer moves between bf16 and FP8 GEMMs under --precision fp8 (Context::
// fp8_linear), as the float8 recipes of torchtitan and Transformer Engine choose: the block's
// projections in FP8, the LM head in bf16 (its logits feed the loss, and its gradient is the
// loss's). The embedding (a gather) and attention (flash, bf16) are no Linear and stay bf16.
enum class Fp8Layer { Qkv, OutProj, W13, W2, LmHead };
struct Fp8Choice {
  Fp8Layer layer;
  bool fp8;
};
constexpr Fp8Choice kFp8Layers[] = {
    {Fp8Layer::Qkv, true}, {Fp8Layer::OutProj, true}, {Fp8Layer::W13, true},
    {Fp8Layer::W2, true},  {Fp8Layer::LmHead, false},
};
constexpr bool runs_in_fp8(Fp8Layer l) {
  for (const Fp8Choice& c : kFp8Layers)
    if (c.layer == l) return c.fp8;
  return false;
}

double TransformerConfig::fp8_train_flops_per_token() const {
  const double C = static_cast<double>(d_model), F = static_cast<double>(d_ff), L = static_cast<double>(num_layers);
  double weights = 0;
  for (auto [layer, n] : {std::pair{Fp8Layer::Qkv, 3 * C * C * L},
                          {Fp8Layer::OutProj, C * C * L},
                          {Fp8Layer::W13, 2 * C * F * L},
                          {Fp8Layer::W2, C * F * L},
                          {Fp8Layer::LmHead, static_cast<double>(vocab_size) * C}})
    if (runs_in_fp8(layer)) weights += n;
  return 6.0 * weights;
}

// ---- one block ----------------------------------------------------------------------------

// h = x + output_proj(Attn(RoPE(q), RoPE(k), v)) with q, k, v from one stacked GEMM on
// ln1(x) (three GEMMs unfused); out = h + w2(silu(w1·ln2(h)) ⊙ w3·ln2(h)), w1 and w3 one
// batched GEMM (two unfused).
class TransformerBlock {
 public:
  TransformerBlock(ParamStore& store, const TransformerConfig& cfg, int index)
      : cfg_(cfg),
        prefix_("layers." + std::to_string(index)),
        ln1_(store, prefix_ + ".ln1", cfg.d_model),
        q_(&store.add(prefix_ + ".attn.q_proj.weight", {cfg.d_model, cfg.d_model})),
        k_(&store.add(prefix_ + ".attn.k_proj.weight", {cfg.d_model, cfg.d_model})),
        v_(&store.add(prefix_ + ".attn.v_proj.weight", {cfg.d_model, cfg.d_model})),
        qkv_(store, {q_, k_, v_}, /*bias=*/nullptr, /*split=*/!cfg.fused),
        out_proj_(store, prefix_ + ".attn.output_proj", cfg.d_model, cfg.d_model),
        ln2_(store, prefix_ + ".ln2", cfg.d_model),
        w1_(&store.add(prefix_ + ".ffn.w1.weight", {cfg.d_ff, cfg.d_model})),
        w2_(store, prefix_ + ".ffn.w2", cfg.d_ff, cfg.d_model),
        w3_(&store.add(prefix_ + ".ffn.w3.weight", {cfg.d_ff, cfg.d_model})),
        w13_(store, {w1_, w3_}, /*split=*/!cfg.fused) {
    qkv_.set_fp8(runs_in_fp8(Fp8Layer::Qkv));
    out_proj_.set_fp8(runs_in_fp8(Fp8Layer::OutProj));
    w13_.set_fp8(runs_in_fp8(Fp8Layer::W13));
    w2_.set_fp8(runs_in_fp8(Fp8Layer::W2));
    // Under FP8 a GEMM input that only its Linear holds and backward does not recompute is kept
    // as its dW cast (one byte a value): the norms' outputs unless --recompute on, g only with
    // --recompute off. attn_out stays: flash's backward reads it.
    qkv_.keep_fp8_input_cast(!recompute_norms());
    w13_.keep_fp8_input_cast(!recompute_norms());
    w2_.keep_fp8_input_cast(cfg.recompute == Recompute::Off);
  }

  // Registration order must be the state_dict's: ln1, q, k, v, output_proj, ln2, w1, w2, w3.
  // The member initialisers above run in declaration order, which is that order.

  void init(Context& ctx, std::mt19937_64& rng) {
    auto trunc = [&](Parameter& p) {
      const double std = std::sqrt(2.0 / static_cast<double>(p.shape[0] + p.shape[1]));
      init_trunc_normal(ctx, p, std, -3 * std, 3 * std, rng);
    };
    init_constant(ctx, ln1_.weight(), 1.0);
    trunc(*q_);
    trunc(*k_);
    trunc(*v_);
    trunc(out_proj_.weight());
    init_constant(ctx, ln2_.weight(), 1.0);
    trunc(*w1_);
    trunc(w2_.weight());
    trunc(*w3_);
  }

  // x (N, C) residual stream (fp32, or bf16: --residual-dtype) → out (N, C) in x's dtype. B·T = N.
  Tensor forward(Context& ctx, const Tensor& x, int64_t B, int64_t T, DType act, bool save) {
    NvtxRange range(prefix_);
    TrackingAllocator::Scope scope(prefix_, MemCategory::Activations);
    const int64_t N = B * T, C = cfg_.d_model, H = cfg_.num_heads, D = cfg_.d_head();
    Tensor h;
    {
      TrackingAllocator::Scope s("attn", MemCategory::Activations);
      Tensor a_amax = amax_for(ctx, Fp8Layer::Qkv);              // FP8: the norm finds its output's amax
      Tensor a = ln1_.forward(ctx, x, act, if_defined(a_amax));  // (N, C)
      qkv_buf_ = qkv_.forward(ctx, a, a_amax);                   // (N, 3C) = (B, T, 3, H, D)
      if (recompute_norms()) qkv_.drop_input();                  // backward recomputes a from x
      Tensor qk = head_view(qkv_buf_, 0, B, T, 2);               // q's heads then k's: one rotation for both
      ops::rope(ctx, qk, qk, cfg_.rope_theta, false);
      Tensor q = head_view(qkv_buf_, 0, B, T), k = head_view(qkv_buf_, 1, B, T);
      Tensor v = head_view(qkv_buf_, 2, B, T);
      attn_out_ = Tensor::empty({N, C}, act, ctx.device(), "attn_out");  // (B, T, H, D)
      Tensor o = attn_out_.as_strided({B, H, T, D}, {T * C, D, C, 1});
      if (cfg_.attention == AttentionImpl::Flash) {
        lse_ = Tensor::empty({B, H, T}, DType::F32, ctx.device(), "attn_lse");
        ops::flash_attention_forward(ctx, o, lse_, q, k, v, /*causal=*/true);
      } else {
        probs_ = Tensor::empty({B, H, T, T}, act, ctx.device(), "attn_probs");
        ops::naive_attention_forward(ctx, o, probs_, q, k, v, /*causal=*/true);
      }
      h = residual(ctx, x, out_proj_, attn_out_, "residual_h");  // h = x + attn_out · Woᵀ
    }
    Tensor out;
    {
      TrackingAllocator::Scope s("ffn", MemCategory::Activations);
      Tensor b_amax = amax_for(ctx, Fp8Layer::W13);
      Tensor b = ln2_.forward(ctx, h, act, if_defined(b_amax));  // (N, C)
      h13_ = w13_.forward(ctx, b, b_amax);                       // (2, N, F): h1, h3
      const Tensor h1 = h13_.select(0, 0), h3 = h13_.select(0, 1);
      Tensor g = Tensor::empty(h1.shape(), act, ctx.device(), "swiglu_out");
      Tensor g_amax = amax_for(ctx, Fp8Layer::W2);
      ops::swiglu_forward(ctx, g, h1, h3, if_defined(g_amax));
      out = residual(ctx, h, w2_, g, "residual_out", g_amax);  // out = h + g · W2ᵀ
      if (recompute_norms()) w13_.drop_input();                // backward recomputes b from h
      if (cfg_.recompute != Recompute::Off) w2_.drop_input();  // and g from h1, h3
    }
    if (!save) release();
    return out;
  }

  // dout (N, C) fp32 (whatever the stream's type), the gradient of this block's output, becomes the gradient of its
  // input in place (the residual path is the identity; each branch adds its part). dout_act:
  // dout as the GEMMs' operand (act), or undefined for a cast here; on return the same for the
  // block's input gradient (fused bf16: the RMSNorm backward that finishes dout writes it too)
  // when a GEMM reads it next (`act_out`: not after the first block, whose is the embedding's).
  // dout_amax: that operand's amax when its GEMM runs in FP8 (the norm wrote it), else undefined;
  // on return the same for the input gradient's.
  // unrotate: RoPE's angle table when flash attention rotates dq and dk back as it stores them
  // (fused), null for the inverse rope pass of its own.
  void backward(Context& ctx, Tensor& dout, Tensor& dout_act, Tensor& dout_amax, int64_t B, int64_t T, DType act,
                bool act_out, const ops::RopeTable* unrotate) {
    NvtxRange range(prefix_);
    TrackingAllocator::Scope scope(prefix_, MemCategory::Activations);
    const int64_t N = B * T, C = cfg_.d_model, H = cfg_.num_heads, D = cfg_.d_head();
    {
      TrackingAllocator::Scope s("ffn", MemCategory::Activations);
      Tensor dy = take_act_operand(ctx, dout_act, dout, act);
      const Tensor dy_amax = std::exchange(dout_amax, Tensor());
      Tensor dh13 = Tensor::empty(h13_.shape(), act, ctx.device(), "swiglu_dh");  // (2, N, F): dh1, dh3
      Tensor dh1 = dh13.select(0, 0), dh3 = dh13.select(0, 1);
      const Tensor h1 = h13_.select(0, 0), h3 = h13_.select(0, 1);
      Tensor dh_amax = amax_for(ctx, Fp8Layer::W13, 2);  // FP8: dh1's and dh3's, from swiglu_backward
      if (cfg_.recompute != Recompute::Off) {
        // dg = dy·W2 first (it needs no g), into dh1's place; then one pass over h1 and h3 makes
        // dh1 (over dg), dh3 and the recomputed g, which W2's gradient reads last.
        // Under FP8 what W2's gradient reads is cast by then: dy's transposed cast (dy and the
        // layout dX read go), and g's, into h1|h3's bytes once SwiGLU's backward has read them. So
        // the FP8 operands take no memory that bf16's dy and g do not.
        const bool w2_fp8 = fp8(ctx, Fp8Layer::W2);
        w2_.input_backward_into(ctx, dy, dh1, 0.0f, dy_amax);
        if (w2_fp8) {
          w2_.keep_grad_casts_for_dw();
          dy = Tensor();
        }
        Tensor g = Tensor::empty(h1.shape(), act, ctx.device(), "swiglu_recompute");
        ops::swiglu_backward(ctx, dh1, dh3, dh1, h1, h3, &g, if_defined(dh_amax));
        w2_.restore_input(g);
        if (w2_fp8) w2_.place_input_cast(h13_);
        w2_.weight_backward_and_release(ctx, dy, dy_amax);
      } else {
        Tensor dg = w2_.backward(ctx, dy, true, dy_amax);  // (N, F)
        ops::swiglu_backward(ctx, dh1, dh3, dg, h1, h3, nullptr, if_defined(dh_amax));
      }
      // Under FP8, dh1's and dh3's casts (both layouts: 4·N·F bytes) take h1|h3's bytes (as many),
      // which nothing reads now: the casts then add nothing to the peak, as bf16 GEMMs need none.
      if (fp8(ctx, Fp8Layer::W13)) w13_.place_grad_casts(h13_);
      h13_ = Tensor();
      // db (N, C) = Σ dh_b·W_b. Under FP8 dX goes first: it casts dh13 in both layouts, which dW's
      // GEMMs reuse; otherwise dW first, so w1 and w3's gradients are ready one GEMM sooner (overlap).
      Tensor db;
      if (fp8(ctx, Fp8Layer::W13)) db = w13_.input_backward(ctx, dh13, dh_amax);
      if (recompute_norms()) w13_.restore_input(ln2_.recompute_output(ctx, act));
      w13_.weight_backward_and_release(ctx, dh13, dh_amax);
      if (!db.defined()) db = w13_.input_backward(ctx, dh13);
      dout_act = finish_residual_grad(ctx, ln2_, db, dout, /*accumulate=*/true, act, cfg_.fused, true,
                                      fp8(ctx, Fp8Layer::OutProj) ? &dout_amax : nullptr);  // dL/dh
    }
    {
      TrackingAllocator::Scope s("attn", MemCategory::Activations);
      Tensor dy = take_act_operand(ctx, dout_act, dout, act);
      const Tensor dy_amax = std::exchange(dout_amax, Tensor());
      Tensor dattn = out_proj_.backward(ctx, dy, true, dy_amax);  // (N, C) = (B, T, H, D)
      Tensor dqkv = Tensor::empty({N, 3 * C}, act, ctx.device(), "attn_dqkv");
      Tensor dq = head_view(dqkv, 0, B, T), dk = head_view(dqkv, 1, B, T), dv = head_view(dqkv, 2, B, T);
      Tensor q = head_view(qkv_buf_, 0, B, T), k = head_view(qkv_buf_, 1, B, T), v = head_view(qkv_buf_, 2, B, T);
      Tensor dO = dattn.as_strided({B, H, T, D}, {T * C, D, C, 1});
      if (cfg_.attention == AttentionImpl::Flash) {
        Tensor o = attn_out_.as_strided({B, H, T, D}, {T * C, D, C, 1});
        ops::flash_attention_backward(ctx, dq, dk, dv, dO, q, k, v, o, lse_, /*causal=*/true, unrotate);
        lse_ = Tensor();
      } else {
        ops::naive_attention_backward(ctx, dq, dk, dv, dO, q, k, v, probs_, /*causal=*/true);
        probs_ = Tensor();
      }
      qkv_buf_ = Tensor();
      attn_out_ = Tensor();
      if (unrotate == nullptr) {  // set only with flash attention, whose stores then turned dq, dk back
        Tensor dqk = head_view(dqkv, 0, B, T, 2);
        ops::rope(ctx, dqk, dqk, cfg_.rope_theta, /*inverse=*/true);
      }
      if (recompute_norms()) qkv_.restore_input(ln1_.recompute_output(ctx, act));
      Tensor da = qkv_.backward(ctx, dqkv);  // (N, C)
      dout_act = finish_residual_grad(ctx, ln1_, da, dout, /*accumulate=*/true, act, cfg_.fused, act_out,
                                      fp8(ctx, Fp8Layer::W2) ? &dout_amax : nullptr);  // dL/dx
    }
  }

  void release() {
    ln1_.release();
    qkv_.release();
    out_proj_.release();
    ln2_.release();
    w2_.release();
    w13_.release();
    qkv_buf_ = attn_out_ = probs_ = lse_ = h13_ = Tensor();
  }

 private:
  // Whether layer l's GEMMs run in FP8 here, and room for an amax its operand's writer fills
  // (n of them: one per weight of a batched layer), or none.
  static bool fp8(const Context& ctx, Fp8Layer l) { return ctx.fp8_linear() && runs_in_fp8(l); }
  static Tensor amax_for(Context& ctx, Fp8Layer l, int64_t n = 1) {
    return fp8(ctx, l) ? fp8_amax_slot(ctx, n) : Tensor();
  }
  static Tensor* if_defined(Tensor& t) { return t.defined() ? &t : nullptr; }
  // Whether backward remakes the RMSNorm outputs (the q/k/v and w1/w3 GEMMs' inputs) rather than
  // keeping them: --recompute on only.
  bool recompute_norms() const { return cfg_.recompute == Recompute::All; }
  // (B, H, T, D) view of q (which = 0), k (1) or v (2) inside a (B, T, 3, H, D) buffer; with
  // count = 2 the (B, 2H, T, D) view of two of them (q and k: k's heads follow q's in a token).
  Tensor head_view(const Tensor& qkv, int which, int64_t B, int64_t T, int count = 1) const {
    const int64_t C = cfg_.d_model, D = cfg_.d_head();
    return qkv.as_strided({B, count * cfg_.num_heads, T, D}, {T * 3 * C, D, 3 * C, 1}, which * C);
  }
  // x + in · Wᵀ (N, C) in x's dtype (the residual stream's). Fused: the GEMM reads x as its
  // C (beta = 1) and writes the sum to a new buffer (x stays: backward's RMSNorm reads it).
  // Unfused: the GEMM writes its own activation-dtype output (bf16 in bf16 mode, as autocast's
  // linear) and an elementwise add makes the sum, as PyTorch eager.
  // in_amax: in's amax for an FP8 GEMM (Linear::forward_into), if its writer found it.
  Tensor residual(Context& ctx, const Tensor& x, Linear& proj, const Tensor& in, const char* name,
                  const Tensor& in_amax = Tensor()) const {
    Tensor out = Tensor::empty(x.shape(), x.dtype(), ctx.device(), name);
    if (cfg_.fused) {
      proj.forward_into(ctx, in, out, 1.0f, &x, in_amax);
    } else {
      Tensor branch = proj.forward(ctx, in);  // (N, C) act
      ops::add(ctx, out, x, branch);
    }
    return out;
  }

  const TransformerConfig& cfg_;
  std::string prefix_;
  RMSNorm ln1_;
  Parameter *q_, *k_, *v_;
  Linear qkv_;
  Linear out_proj_;
  RMSNorm ln2_;
  Parameter* w1_;  // (F, C), registered before w2 and w3 (state-dict order); run through w13_
  Linear w2_;
  Parameter* w3_;
  BatchedLinear w13_;  // w1 and w3 as one batched GEMM on ln2's output
  Tensor qkv_buf_;     // (N, 3C) act: q, k (rotated) and v, saved for attention backward
  Tensor attn_out_;    // (N, C) act = (B, T, H, D): attention output O (flash backward reads it)
  Tensor probs_;       // (B, H, T, T) act: naive attention's softmax, saved
  Tensor lse_;         // (B, H, T) fp32: flash attention's logsumexp, saved
  Tensor h13_;         // (2, N, F) act: SwiGLU inputs h1, h3, saved
};

// ---- the model ----------------------------------------------------------------------------

struct TransformerLM::Impl {
  std::unique_ptr<Embedding> embedding;
  std::vector<std::unique_ptr<TransformerBlock>> blocks;
  std::unique_ptr<RMSNorm> ln_final;
  std::unique_ptr<Linear> lm_head;
  DType act = DType::F32;
  DType residual = DType::F32;  // the residual stream's type (Context::residual_dtype; fp64 with fp64 parameters)
  // Saved by forward for backward:
  int64_t B = 0, T = 0;
  Tensor logits;  // (N, V): after a training forward it holds dloss/dlogits (in place)
  bool have_grad = false;
  // RoPE's (cos, sin) over the whole context, built at the first backward that uses it (fused
  // flash attention: dq and dk rotated back in the kernel's stores) and kept: a CUDA graph
  // captured later reads the same buffer.
  ops::RopeTable rope;
};

namespace {
// FP8 GEMMs read 16-byte rows of K-major operands: every k (d_model, d_ff, and the tokens of a
// micro-batch in the weight gradients) a multiple of 16. The unfused comparison's per-weight
// column slices are not contiguous operands.
void check_fp8_shapes(const TransformerConfig& cfg) {
  PT_CHECK(cfg.fused, "--precision fp8 runs the fused model only: leave out --fused off");
  PT_CHECK(cfg.d_model % 16 == 0 && cfg.d_ff % 16 == 0,
           "--precision fp8 needs --d-model and --d-ff to be multiples of 16 (FP8 GEMMs read 16-byte rows), got " +
               std::to_string(cfg.d_model) + " and " + std::to_string(cfg.d_ff));
}
}  // namespace

TransformerLM::TransformerLM(const TransformerConfig& cfg, Context& ctx, DType param_dtype)
    : cfg_(cfg), impl_(std::make_unique<Impl>()) {
  cfg_.validate();
  Impl& m = *impl_;
  m.embedding = std::make_unique<Embedding>(store_, "token_embeddings", cfg_.vocab_size, cfg_.d_model);
  for (int i = 0; i < cfg_.num_layers; ++i) m.blocks.push_back(std::make_unique<TransformerBlock>(store_, cfg_, i));
  m.ln_final = std::make_unique<RMSNorm>(store_, "ln_final", cfg_.d_model);
  m.lm_head = std::make_unique<Linear>(store_, "lm_head", cfg_.d_model, cfg_.vocab_size);
  m.lm_head->set_fp8(runs_in_fp8(Fp8Layer::LmHead));
  if (ctx.fp8_linear()) check_fp8_shapes(cfg_);
  const bool mirror = ctx.is_cuda() && is_bf16_mixed(ctx.precision());
  store_.finalize(ctx, mirror, param_dtype);
  m.act = param_dtype == DType::F64 ? DType::F64 : ctx.act_dtype();
  m.residual = param_dtype == DType::F64 ? DType::F64 : ctx.residual_dtype();
}

TransformerLM::~TransformerLM() = default;

void TransformerLM::init_weights(Context& ctx, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Impl& m = *impl_;
  InitBatch batch(ctx);  // every weight's draws at once, on every core
  init_trunc_normal(ctx, m.embedding->weight(), 1.0, -3.0, 3.0, rng);
  for (auto& b : m.blocks) b->init(ctx, rng);
  init_constant(ctx, m.ln_final->weight(), 1.0);
  const double std = std::sqrt(2.0 / static_cast<double>(cfg_.d_model + cfg_.vocab_size));
  init_trunc_normal(ctx, m.lm_head->weight(), std, -3 * std, 3 * std, rng);
  batch.close();
  store_.refresh_lowp(ctx);
}

Tensor TransformerLM::embed_and_blocks(Context& ctx, const Tensor& ids, bool save) {
  Impl& m = *impl_;
  PT_CHECK(ids.dim() == 2, "model input must be (batch, seq), got " + ids.describe());
  PT_CHECK(ids.dtype() == DType::I32, "token ids must be int32");
  m.B = ids.size(0);
  m.T = ids.size(1);
  PT_CHECK(m.T >= 1 && m.T <= cfg_.context_length, "sequence length " + std::to_string(m.T) + " outside 1.." +
                                                       std::to_string(cfg_.context_length) +
                                                       " (the model's context length)");
  PT_CHECK(!ctx.fp8_linear() || (m.B * m.T) % 16 == 0,
           "--precision fp8 needs the tokens of a micro-batch (batch × context, " + std::to_string(m.B * m.T) +
               ") to be a multiple of 16: the weight gradients' FP8 GEMMs sum over them in 16-byte rows");
  Tensor x;
  {
    TrackingAllocator::Scope scope("token_embeddings", MemCategory::Activations);
    x = m.embedding->forward(ctx, ids, m.residual);  // (N, C)
    if (!save) m.embedding->release();
  }
  for (auto& b : m.blocks) {
    x = b->forward(ctx, x, m.B, m.T, m.act, save);
  }
  return x;
}

Tensor TransformerLM::forward(Context& ctx, const Tensor& ids, const Tensor& targets, bool save, float grad_scale) {
  NvtxRange range("forward");
  Impl& m = *impl_;
  PT_CHECK(targets.shape() == ids.shape(),
           "targets " + shape_str(targets.shape()) + " must have the shape of the inputs " + shape_str(ids.shape()));
  Tensor x = embed_and_blocks(ctx, ids, save);
  TrackingAllocator::Scope scope("lm_head", MemCategory::Activations);
  Tensor xf = m.ln_final->forward(ctx, x, m.act);  // (N, C)
  m.logits = m.lm_head->forward(ctx, xf);          // (N, V)
  Tensor loss = Tensor::empty({1}, m.act == DType::F64 ? DType::F64 : DType::F32, ctx.device(), "loss");
  Tensor flat_targets = targets.reshape({targets.numel()});
  ops::cross_entropy(ctx, loss, save ? &m.logits : nullptr, m.logits, flat_targets, grad_scale);
  m.have_grad = save;
  if (!save) {
    m.ln_final->release();
    m.lm_head->release();
    m.logits = Tensor();
  }
  return loss;
}

Tensor TransformerLM::forward_logits(Context& ctx, const Tensor& ids) {
  NvtxRange range("forward");
  Impl& m = *impl_;
  Tensor x = embed_and_blocks(ctx, ids, /*save=*/false);
  Tensor xf = m.ln_final->forward(ctx, x, m.act);
  Tensor logits = m.lm_head->forward(ctx, xf);
  m.ln_final->release();
  m.lm_head->release();
  m.have_grad = false;
  return logits.reshape({m.B, m.T, cfg_.vocab_size});
}

void TransformerLM::backward(Context& ctx) {
  NvtxRange range("backward");
  Impl& m = *impl_;
  PT_CHECK(m.have_grad, "backward() needs a forward() with save_for_backward");
  m.have_grad = false;
  // The residual gradient (fp32), its bf16 copy for the next GEMM (fused bf16) and that operand's
  // amax when the GEMM runs in FP8.
  Tensor dx, dx_act, dx_amax;
  {
    TrackingAllocator::Scope scope("lm_head", MemCategory::Activations);
    Tensor dxf = m.lm_head->backward(ctx, m.logits);  // (N, C) act
    m.logits = Tensor();
    dx = Tensor::empty({m.B * m.T, cfg_.d_model}, store_.dtype(), ctx.device(), "residual_grad");
    dx_act = finish_residual_grad(ctx, *m.ln_final, dxf, dx, /*accumulate=*/false, m.act, cfg_.fused,
                                  /*copy=*/!m.blocks.empty(),
                                  ctx.fp8_linear() && runs_in_fp8(Fp8Layer::W2) ? &dx_amax : nullptr);
  }
  const ops::RopeTable* unrotate = nullptr;
  if (cfg_.fused && cfg_.attention == AttentionImpl::Flash && !m.blocks.empty()) {
    if (!m.rope.cos_sin.defined()) {
      TrackingAllocator::Scope scope("rope_table", MemCategory::Workspace);
      m.rope = ops::rope_table(ctx, cfg_.context_length, cfg_.d_head(), cfg_.rope_theta);
    }
    unrotate = &m.rope;
  }
  for (auto it = m.blocks.rbegin(); it != m.blocks.rend(); ++it)
    (*it)->backward(ctx, dx, dx_act, dx_amax, m.B, m.T, m.act, /*act_out=*/std::next(it) != m.blocks.rend(), unrotate);
  dx_act = dx_amax = Tensor();
  TrackingAllocator::Scope scope("token_embeddings", MemCategory::Activations);
  m.embedding->backward(ctx, dx);
}

void TransformerLM::release_activations() {
  Impl& m = *impl_;
  m.embedding->release();
  for (auto& b : m.blocks) b->release();
  m.ln_final->release();
  m.lm_head->release();
  m.logits = Tensor();
  m.have_grad = false;
}

}  // namespace pt
