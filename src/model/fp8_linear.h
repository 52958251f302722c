#pragma once
// The GEMMs of a Linear layer under --precision fp8 (Context::fp8_linear; the Transformer's
// table says which layers): forward y = x·Wᵀ with x and W in E4M3 (precision); backward
// dX = dy·W and dW = dyᵀ·x with dy in E5M2 (range) and W, x in E4M3. fp32 accumulation, outputs
// in the layer's types. Each operand is cast with its current amax where it is read
// (ops/fp8_gemm.h); dy, which both backward GEMMs read, is cast once for the two.
#include <vector>

#include "core/context.h"
#include "core/fp8.h"
#include "core/tensor.h"
#include "model/param_store.h"
#include "ops/fp8_gemm.h"

namespace pt {

constexpr Fp8Format kFp8Input = Fp8Format::E4M3, kFp8Weight = Fp8Format::E4M3, kFp8Gradient = Fp8Format::E5M2;

// amax when the context reuses what is known of FP8 operands (Context::fp8_reuse), else none:
// the cast then measures it.
inline Tensor fp8_known_amax(const Context& ctx, const Tensor& amax) { return ctx.fp8_reuse() ? amax : Tensor(); }

// The FP8 casts of a layer's output gradient dy between the two halves of its backward, which
// the model may call apart (dX first, dW after an input is recomputed) or together.
class Fp8GradCasts {
 public:
  // Slice i of dy — dy itself (2-D, i = 0) or dy[i] of a batched (batch, N, d_out) dy — in E5M2.
  // Cast on first use: as stored and transposed in one read when `both` (dX reads the first, dW
  // the second), else transposed only. Another dy starts over. amax: the slice's max |value| as
  // the kernel that wrote dy found it (fp8_operand's), if it did.
  const ops::Fp8Operand& of(Context& ctx, const Tensor& dy, int64_t i, bool both, const Tensor& amax = Tensor());
  // The casts made from now until clear() go into `space`'s bytes, as far as they fit (each
  // slice's layouts whole, 16-byte aligned), instead of new allocations: a buffer nothing reads
  // any more, so that they add nothing to the memory peak (SwiGLU's h1|h3 for dh1's and dh3's).
  void place_in(Tensor space) {
    space_ = std::move(space);
    space_used_ = 0;
  }
  // After dX, when only dW is left: each slice keeps its transposed cast alone (dX read the layout
  // as stored), and dy's storage is let go. Until clear(), of() returns these casts whatever dy
  // it is given (undefined too): the caller may drop dy.
  void keep_transposed_only();
  void clear() {
    dy_ = space_ = Tensor();
    casts_.clear();
    transposed_only_ = false;
  }

 private:
  Tensor dy_;  // holds dy's storage, so that its address identifies it while the casts are kept
  std::vector<ops::Fp8Operand> casts_;
  bool transposed_only_ = false;  // keep_transposed_only's
  Tensor space_;                  // place_in's, or undefined
  int64_t space_used_ = 0;        // bytes of space_ given to casts
};

// A weight's FP8 casts. Where the store keeps them (ParamStore::fp8_weight: made by the update,
// in the bf16 mirror's bytes) they are the store's, and nothing below applies: the casts made
// here are for a store without them (no mirror, Context::fp8_reuse off, a sharded optimizer).
// In a step of several micro-batches they are made at the weight's first use, in both layouts
// from one read (as stored for the forward, transposed for dX), and kept while its values cannot
// change (ParamStore::values_fixed): every later micro-batch reuses them, and they go when the
// weight's gradient is final (the update follows). A step of one micro-batch casts the layout
// each use needs instead: keeping the casts from forward to backward would hold a byte per
// weight at the memory peak to save one read of it. Only the amax is kept from forward to
// backward then (the values are the same), so dX's cast skips the pass that would measure it
// again.
class Fp8WeightCasts {
 public:
  // w: p's values as the GEMM reads them (the bf16 mirror), (d_out, d_in); `transposed`: the
  // layout this use needs (dX's).
  ops::Fp8Operand of(Context& ctx, const Tensor& w, const ParamStore& store, const Parameter& p, bool transposed);
  // Drops the kept casts once p's values may change.
  void release_unless_fixed(const ParamStore& store, const Parameter& p) {
    if (!store.values_fixed(p)) {
      kept_ = ops::Fp8Operand();
      kept_step_ = 0;
    }
  }

 private:
  ops::Fp8Operand kept_;    // both layouts (several micro-batches), or only its amax (one)
  uint64_t kept_step_ = 0;  // ParamStore::steps() when kept_ was cast (0: nothing kept)
};

// y (N, d_out) = beta·(residual or y) + x·Wᵀ: x (N, d_in) cast as stored, W (d_out, d_in) as stored.
void fp8_linear_forward(Context& ctx, Tensor& y, const ops::Fp8Operand& x, const ops::Fp8Operand& w, float beta,
                        const Tensor* residual = nullptr);

// What a Linear or BatchedLinear keeps of its input from forward to dW: the input, or under FP8
// where the model asks (keep_cast) its transposed cast in the input's place; and forward's amax
// of it, which dW's cast of the same input takes.
struct SavedInput {
  Tensor x;
  ops::Fp8Operand kept_xt;  // fp8_forward_input's kept layout, or undefined
  Tensor amax;              // FP8: forward's amax of x
  bool keep_cast = false;   // the layer's keep_fp8_input_cast
  bool present() const { return x.defined() || kept_xt.transposed.defined(); }
  // After forward's GEMMs: x, unless its kept cast stands for it.
  void keep(const Tensor& input) { x = kept_xt.transposed.defined() ? Tensor() : input; }
  // The input goes (drop_input); its amax stays: a restored input must cast as forward's did.
  void drop() {
    x = Tensor();
    kept_xt = ops::Fp8Operand();
  }
  void clear() {
    drop();
    amax = Tensor();
  }
};

// A layer's input for dW under FP8. A layer that keeps its input's cast (the model sets it where the
// layer is the input's only holder and backward does not recompute it; with Context::fp8_reuse)
// has forward cast x in both layouts from one read and keeps the transposed one instead of x: a
// byte a value where x took two, and no cast at dW. fp8_forward_input: forward's operand; it sets
// saved.amax, and saved.kept_xt to the transposed layout alone when it is kept (else undefined).
// fp8_dw_input: dW's operand: the kept layout, else a cast of saved.x now (into `space` if given:
// ops::fp8_operand).
ops::Fp8Operand fp8_forward_input(Context& ctx, const Tensor& x, const Tensor& x_amax, SavedInput& saved);
ops::Fp8Operand fp8_dw_input(Context& ctx, const SavedInput& saved, const Tensor& space = Tensor());

// dx (N, d_in) = beta·dx + dy·W: dy cast as stored (Fp8GradCasts), W transposed.
void fp8_linear_dx(Context& ctx, Tensor& dx, const ops::Fp8Operand& dy, const ops::Fp8Operand& w, float beta);
// dw (d_out, d_in) = beta·dw + dyᵀ·x: dy and x (N, d_in) cast transposed.
void fp8_linear_dw(Context& ctx, Tensor& dw, const ops::Fp8Operand& dy, const ops::Fp8Operand& x, float beta);

}  // namespace pt
