#pragma once
// The pre-norm Transformer LM of the PyTorch reference: token embedding, num_layers blocks
// h = x + Attn(RMSNorm(x)); out = h + SwiGLU(RMSNorm(h)), final RMSNorm, untied lm_head,
// mean cross-entropy. Explicit forward/backward; parameters in one ParamStore.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/tensor.h"
#include "model/param_store.h"

namespace pt {

enum class AttentionImpl { Naive, Flash };
AttentionImpl attention_impl_from_name(const std::string& name);  // "naive" | "flash"
const char* attention_impl_name(AttentionImpl a);

// What backward recomputes instead of keeping from forward (--recompute), most memory saved
// first. All ("on"): both RMSNorm outputs and the SwiGLU product, 2·d_model + d_ff values per
// token and layer less (XL fp32: 3.8 GB). Swiglu: the SwiGLU product only — it is remade inside
// SwiGLU's backward, which reads h1 and h3 anyway, while each norm output costs a pass of its own
// (d_model values per token and layer kept twice). Off: nothing. The same gradients bit for bit.
enum class Recompute { All, Swiglu, Off };
inline constexpr Recompute kRecomputeChoices[] = {Recompute::All, Recompute::Swiglu, Recompute::Off};
inline constexpr int kNumRecompute = sizeof(kRecomputeChoices) / sizeof(kRecomputeChoices[0]);
Recompute recompute_from_name(const std::string& name);  // "on" | "swiglu" | "off"
const char* recompute_name(Recompute r);

struct TransformerConfig {
  int64_t vocab_size = 10000;
  int64_t context_length = 256;
  int64_t d_model = 512;
  int64_t num_layers = 4;
  int64_t num_heads = 16;
  int64_t d_ff = 1344;
  double rope_theta = 10000.0;
  AttentionImpl attention = AttentionImpl::Naive;
  Recompute recompute = Recompute::All;
  // The fused forms of the step (on, the default) or one kernel per primitive as PyTorch eager
  // runs the reference model (off: the comparison torch.compile on/off gives there). Off splits
  // exactly: (1) the stacked q, k, v projection into three GEMMs (backward: three dW GEMMs and
  // dx as the sum of three GEMMs); (2) each residual add out of its GEMM (the output projection
  // and w2 write their own activation-dtype tensor, then an elementwise add makes the residual
  // in the stream's dtype, Context::residual_dtype); (3) with flash attention, backward's inverse
  // RoPE on dq and dk out of the flash kernels' stores into a pass of its own. The optimizer's
  // half is OptimizerConfig::fused. RMSNorm, the forward's RoPE in place, the SwiGLU kernel, the
  // fused softmax-cross-entropy and flash attention stay as they are in both. The same function
  // either way: only rounding differs.
  bool fused = true;

  // Named sizes (vocabulary 10000): tiny 128/384/4/4 (CPU smoke runs), small 768/3072/12/12, medium 1024/4096/24/16,
  // large 1280/5120/36/20, xl 1600/6400/48/25, 2.7b 2560/10240/32/32 (d_model/d_ff/layers/heads).
  static TransformerConfig named(const std::string& size);
  static const std::vector<std::string>& size_names();
  int64_t d_head() const { return d_model / num_heads; }
  void validate() const;  // throws with a clear message for shapes that do not fit
  int64_t num_params() const;
  // Training FLOPs per token: 6·N (N without the embedding) + the attention term 12·L·T·d_model.
  double train_flops_per_token(int64_t seq_len) const;
  // The part of it in FP8 GEMMs under --precision fp8: 6 per weight of the Linear layers the
  // model's FP8 table moves (the block's projections; not the LM head, not attention).
  double fp8_train_flops_per_token() const;
};

// The least memory that training `cfg` holds on one rank, whatever the optimizer and its
// sharding: on the device, fp32 weights, their gradients (grad_bytes each), the bf16 copy
// (lowp_mirror) and the logits of one micro-batch of `rows` sequences; on the host, the records
// of each layer's parameters and modules. In floating point: absurd sizes give large numbers,
// never an overflow.
struct MemoryFloor {
  double parameters = 0;
  double device_bytes = 0;
  double host_bytes = 0;
};
// A lower bound of the host memory one layer's records take (its parameters' names and views,
// its modules), whatever its width.
inline constexpr int64_t kHostBytesPerLayer = 2048;
MemoryFloor training_memory_floor(const TransformerConfig& cfg, int64_t rows, size_t grad_bytes, bool lowp_mirror);
// Refuses, with one line ending in `source` (where the shape came from: the options, a checkpoint), a
// model whose floor exceeds what `device` (and the host) can hold (core/device.h): checked
// before anything is built, so an absurd size fails at once instead of building for minutes.
void check_memory_floor(const TransformerConfig& cfg, int64_t rows, size_t grad_bytes, bool lowp_mirror,
                        const Device& device, const std::string& source);

class TransformerBlock;  // model/transformer.cpp

// The model's parameters from its shape alone, in registration (state_dict) order, every one
// trainable: what TransformerLM's store holds, without building it (plan/ sizes any model with
// it; a test checks it against the built model).
struct ParamShape {
  std::string name;
  int64_t numel = 0;
};
std::vector<ParamShape> transformer_param_shapes(const TransformerConfig& cfg);

class TransformerLM {
 public:
  // Registers every parameter in PyTorch state_dict order and finalizes the store on ctx's
  // device (with the bf16 mirror when ctx is in bf16 mode on the GPU). Weights are zero until
  // init_weights or a checkpoint load. param_dtype fp64 (CPU only) runs the whole model in
  // fp64: the finite-difference tests use it.
  TransformerLM(const TransformerConfig& cfg, Context& ctx, DType param_dtype = DType::F32);
  ~TransformerLM();

  // Truncated-normal init as the reference (host RNG: identical on CPU and GPU).
  void init_weights(Context& ctx, uint64_t seed);

  const TransformerConfig& config() const { return cfg_; }
  ParamStore& store() { return store_; }

  // ids, targets: (B, T) int32 on the model's device, 1 ≤ T ≤ context_length. Returns the
  // mean cross-entropy as a 1-element fp32 device tensor (no host sync). With
  // save_for_backward the activations backward needs are kept (and dlogits is computed in the
  // loss kernel, scaled by grad_scale: 1/M for one of M accumulated micro-batches); without,
  // they are released as soon as they are used.
  Tensor forward(Context& ctx, const Tensor& ids, const Tensor& targets, bool save_for_backward = true,
                 float grad_scale = 1.0f);
  // Logits (B, T, V) for ids (B, T): inference, nothing saved. fp32 (bf16 in bf16 mode).
  Tensor forward_logits(Context& ctx, const Tensor& ids);
  // Backward of the last forward (d loss = 1). Gradients are added to the store's flat buffer;
  // the store's listener hears each parameter the moment its gradient is final, in reverse
  // registration order. Activations are released on the way.
  void backward(Context& ctx);
  void release_activations();

 private:
  Tensor embed_and_blocks(Context& ctx, const Tensor& ids, bool save);
  TransformerConfig cfg_;
  ParamStore store_;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pt
