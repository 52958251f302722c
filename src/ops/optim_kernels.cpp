#include "ops/optim_kernels.h"

#include <cmath>

#include "core/profiler.h"
#include "cuda/optim_kernels.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/op_common.h"

namespace pt::ops {

using detail::ArgCheck;

namespace {
// A flat optimizer operand: 1-D, contiguous, the master type (fp32; fp64 too on the CPU).
void check_flat(const ArgCheck& chk, const Context& ctx, const Tensor& t, const char* name, const Tensor* ref) {
  if (ctx.is_cuda())
    chk.dtype_is(t, name, {DType::F32});
  else
    chk.float_storage(t, name);
  chk.rank_is(t, name, 1);
  chk.contiguous(t, name);
  if (ref) {
    chk.same_dtype(t, name, *ref, "p");
    chk.shape_is(t, name, ref->shape());
  }
}
// The gradient operand: as check_flat, but bf16 too on the GPU (--grad-dtype bf16).
void check_grad(const ArgCheck& chk, const Context& ctx, const Tensor& g, const Tensor& p) {
  if (!ctx.is_cuda() || g.dtype() != DType::BF16) return check_flat(chk, ctx, g, "g", &p);
  chk.rank_is(g, "g", 1);
  chk.contiguous(g, "g");
  chk.shape_is(g, "g", p.shape());
  chk.require(p.dtype() == DType::F32, "bf16 gradients update fp32 parameters");
}
Tensor* check_lowp(const ArgCheck& chk, Tensor* p_lowp, const Tensor& p) {
  if (!p_lowp || !p_lowp->defined()) return nullptr;
  chk.dtype_is(*p_lowp, "p_lowp", {DType::BF16});
  chk.shape_is(*p_lowp, "p_lowp", p.shape());
  chk.contiguous(*p_lowp, "p_lowp");
  return p_lowp;
}
void check_sumsq(const ArgCheck& chk, const Tensor& sumsq) {
  chk.dtype_is(sumsq, "sumsq", {DType::F32, DType::F64});
  chk.require(sumsq.numel() == 1, "sumsq must have exactly one element, got shape " + shape_str(sumsq.shape()));
}
void check_runs(const ArgCheck& chk, const Context& ctx, const Fp8WeightRuns& runs, const Tensor* p_lowp,
                const Tensor& p) {
  if (runs.count == 0) return;
  chk.require(ctx.is_cuda(), "kept FP8 weight runs are updated on the GPU only");
  chk.require(p_lowp != nullptr, "kept FP8 weight runs need the update to write the bf16 mirror");
  chk.require(runs.bounds && runs.amax && runs.amax_stride > 0 && runs.elements >= 0 && runs.elements <= p.numel(),
              "Fp8WeightRuns: bounds and amax must be set, amax_stride > 0, elements within the range");
}
// What the update writes of the bf16 copy: the range's, less the kept runs' elements.
void cost_lowp(OpCost& cost, const Tensor* p_lowp, const Fp8WeightRuns& runs) {
  if (!p_lowp) return;
  cost.write(*p_lowp);
  cost.bytes -= 2.0 * static_cast<double>(runs.elements);
}
void check_clip(const ArgCheck& chk, const GradClip& clip) {
  if (!clip.sumsq) return;
  check_sumsq(chk, *clip.sumsq);
  chk.require(clip.max_norm > 0, "clip.max_norm must be > 0 (+inf: guard only), got " + std::to_string(clip.max_norm));
}
}  // namespace

AdamWStepScalars adamw_step_scalars(const AdamWHyper& h) {
  const double t = double(h.step);
  AdamWStepScalars sc;
  sc.decay = float(1.0 - double(h.lr) * double(h.weight_decay));
  sc.step_size = float(double(h.lr) / (1.0 - std::pow(double(h.beta1), t)));
  sc.bc2_sqrt = float(std::sqrt(1.0 - std::pow(double(h.beta2), t)));
  sc.one_minus_beta1 = 1.0f - h.beta1;
  sc.beta2 = h.beta2;
  sc.one_minus_beta2 = 1.0f - h.beta2;
  sc.eps = h.eps;
  return sc;
}

namespace {
void check_device_scalars(const ArgCheck& chk, const Context& ctx, DeviceScalars d, size_t bytes) {
  if (!d.scalars) return;
  chk.require(ctx.is_cuda(), "device scalars are for the GPU");
  chk.on_device(*d.scalars, "device scalars");
  chk.require(d.scalars->nbytes() >= bytes, "device scalars: " + std::to_string(d.scalars->nbytes()) +
                                                " bytes, the update needs " + std::to_string(bytes));
}

// An optimizer op: gpu(s) on `stream` (detail::run_on_stream), cpu() on the CPU.
template <typename Gpu, typename Cpu>
void run_optimizer_op(Context& ctx, cudaStream_t stream, const char* name, const OpCost& cost, Gpu gpu, Cpu cpu) {
  if (ctx.is_cuda()) return detail::run_on_stream(ctx, stream, name, OpFamily::Optimizer, cost, gpu);
  OpScope scope(ctx, name, OpFamily::Optimizer, cost);
  cpu();
}
}  // namespace

void adamw_step(Context& ctx, Tensor& p, const Tensor& g, Tensor& m, Tensor& v, const AdamWHyper& h, Tensor* p_lowp,
                const GradClip& clip, DeviceScalars device, cudaStream_t stream, const Fp8WeightRuns& runs) {
  ArgCheck chk(ctx, "adamw_step");
  check_clip(chk, clip);
  check_flat(chk, ctx, p, "p", nullptr);
  check_grad(chk, ctx, g, p);
  check_flat(chk, ctx, m, "m", &p);
  check_flat(chk, ctx, v, "v", &p);
  p_lowp = check_lowp(chk, p_lowp, p);
  chk.require(h.step >= 1, "step must count from 1 (it is " + std::to_string(h.step) + ")");
  chk.require(h.beta1 >= 0 && h.beta1 < 1 && h.beta2 >= 0 && h.beta2 < 1, "betas must lie in [0, 1)");
  check_device_scalars(chk, ctx, device, sizeof(AdamWStepScalars));
  check_runs(chk, ctx, runs, p_lowp, p);
  if (p.numel() == 0) return;
  // Read g, update p, m and v, write the bf16 copy when asked; read the folded clip's sum.
  OpCost cost;
  cost.read(g).update(p).update(m).update(v);
  cost_lowp(cost, p_lowp, runs);
  if (clip.sumsq) cost.read(*clip.sumsq);
  const void* scalars = device.scalars ? device.scalars->data() : nullptr;
  // Device scalars replace the host's: the GPU reads the step's values from them.
  const AdamWStepScalars sc = scalars ? AdamWStepScalars{} : adamw_step_scalars(h);
  run_optimizer_op(
      ctx, stream, "adamw_step", cost,
      [&](cudaStream_t s) { cuda::adamw_step(s, p, g, m, v, sc, p_lowp, clip, scalars, runs); },
      [&] { cpu::adamw_step(p, g, m, v, h, p_lowp, clip); });
}

void sgd_step(Context& ctx, Tensor& p, const Tensor& g, float lr, float weight_decay, Tensor* p_lowp,
              const GradClip& clip, DeviceScalars device, cudaStream_t stream, const Fp8WeightRuns& runs) {
  ArgCheck chk(ctx, "sgd_step");
  check_clip(chk, clip);
  check_flat(chk, ctx, p, "p", nullptr);
  check_grad(chk, ctx, g, p);
  check_device_scalars(chk, ctx, device, sizeof(SgdStepScalars));
  p_lowp = check_lowp(chk, p_lowp, p);
  check_runs(chk, ctx, runs, p_lowp, p);
  if (p.numel() == 0) return;
  OpCost cost;
  cost.read(g).update(p);
  cost_lowp(cost, p_lowp, runs);
  if (clip.sumsq) cost.read(*clip.sumsq);
  const void* scalars = device.scalars ? device.scalars->data() : nullptr;
  run_optimizer_op(
      ctx, stream, "sgd_step", cost,
      [&](cudaStream_t s) { cuda::sgd_step(s, p, g, lr, weight_decay, p_lowp, clip, scalars, runs); },
      [&] { cpu::sgd_step(p, g, lr, weight_decay, p_lowp, clip); });
}

Tensor squared_norm_scratch(Context& ctx) {
  if (!ctx.is_cuda()) return Tensor();
  return Tensor::empty({cuda::squared_norm_partials()}, DType::F32, ctx.device(), "squared_norm_partials",
                       MemCategory::Workspace);
}

void squared_norm_accumulate(Context& ctx, Tensor& sumsq, const Tensor& x) {
  Tensor scratch = squared_norm_scratch(ctx);  // freed in the compute stream's order
  squared_norm_accumulate(ctx, sumsq, x, ctx.stream(), scratch);
}

void squared_norm_accumulate(Context& ctx, Tensor& sumsq, const Tensor& x, cudaStream_t stream, Tensor& scratch) {
  ArgCheck chk(ctx, "squared_norm_accumulate");
  check_sumsq(chk, sumsq);
  chk.float_storage(x, "x");
  chk.contiguous(x, "x");
  if (x.numel() == 0) return;
  run_optimizer_op(
      ctx, stream, "squared_norm", OpCost().read(x).update(sumsq),
      [&](cudaStream_t s) { cuda::squared_norm_accumulate(s, sumsq, x, scratch); },
      [&] { cpu::squared_norm_accumulate(sumsq, x); });
}

void clip_by_norm(Context& ctx, Tensor& x, const Tensor& sumsq, float max_norm) {
  ArgCheck chk(ctx, "clip_by_norm");
  check_sumsq(chk, sumsq);
  chk.float_storage(x, "x");
  chk.contiguous(x, "x");
  chk.require(max_norm > 0, "max_norm must be positive");
  if (x.numel() == 0) return;
  OpScope scope(ctx, "clip_by_norm", OpFamily::Optimizer, OpCost().update(x).read(sumsq));
  PT_OP_DISPATCH(ctx, clip_by_norm, x, sumsq, max_norm);
}

}  // namespace pt::ops
