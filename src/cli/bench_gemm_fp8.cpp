// `paratrain bench gemm --precision fp8`: each Linear GEMM of the step (forward E4M3×E4M3,
// input gradient E5M2×E4M3, weight gradient E5M2×E4M3 with K = tokens) as an FP8 GEMM beside
// the bf16 GEMM the model runs, plus the amax and cast(+transpose) kernels that produce its
// operands, so one run says what FP8 GEMMs would take off the step, casts included.
#include <iostream>
#include <string>

#include "bench/inputs.h"
#include "cli/bench_gemm.h"
#include "cli/bench_sweep.h"
#include "core/error.h"
#include "core/fp8.h"
#include "core/gemm_desc.h"
#include "core/timing.h"
#include "cuda/matmul.h"
#include "io/run_record.h"
#include "io/table.h"
#include "ops/fp8.h"
#include "parallel/runtime.h"

namespace pt::cli {

namespace {

// How a role's operands come to be, with the model's sharing: the forward casts X and W (and
// takes both amaxes); dX casts dY and reads W transposed (W's amax is the forward's); dW reads
// dY and X transposed (both amaxes already taken). Weight casts are counted with every call,
// an upper bound: the model casts the weights once per step.
struct OperandPlan {
  DType a, b;           // fp8 types of A (m, k) and B (n, k)
  bool a_t, b_t;        // cast from a (k, m) / (k, n) source, transposed
  bool a_amax, b_amax;  // the row pays for the amax of that source
};
OperandPlan operand_plan(GemmRole role) {
  switch (role) {
    case GemmRole::Forward: return {DType::F8E4M3, DType::F8E4M3, false, false, true, true};
    case GemmRole::InputGrad: return {DType::F8E5M2, DType::F8E4M3, false, true, true, false};
    case GemmRole::WeightGrad: return {DType::F8E5M2, DType::F8E4M3, true, true, false, false};
    case GemmRole::Attention: break;
  }
  PT_FAIL("bench gemm: attention GEMMs stay bf16");
}

// One operand: its bf16 source, the fp8 cast, amax and scale_inv, and the time of producing it.
struct TimedOperand {
  Tensor fp8, amax, scale_inv;
  double amax_ms = 0, cast_ms = 0;
};
TimedOperand make_operand(Context& ctx, int64_t rows, int64_t k, DType fmt, bool transposed, bool count_amax,
                          uint64_t seed, int iters) {
  const Shape src_shape = transposed ? Shape{k, rows} : Shape{rows, k};
  Tensor src = bench::filled(ctx, src_shape, DType::BF16, bench::bench_values(rows * k, seed), "fp8_source");
  TimedOperand o{Tensor::empty({rows, k}, fmt, ctx.device(), "fp8_operand", MemCategory::Activations),
                 Tensor::empty({1}, DType::F32, ctx.device(), "fp8_amax", MemCategory::Workspace),
                 Tensor::empty({1}, DType::F32, ctx.device(), "fp8_scale_inv", MemCategory::Workspace)};
  const double amax_ms = per_run_ms(ctx, iters, [&] { ops::fp8_amax(ctx, o.amax, src); });
  if (count_amax) o.amax_ms = amax_ms;
  o.cast_ms = per_run_ms(ctx, iters, [&] {
    if (transposed)
      ops::fp8_cast_transpose(ctx, o.fp8, o.scale_inv, src, o.amax);
    else
      ops::fp8_cast(ctx, o.fp8, o.scale_inv, src, o.amax);
  });
  return o;
}

io::ResultTable fp8_table() {
  io::ResultTable table("gemm_fp8", "each Linear GEMM of the train step in FP8 (cuBLASLt, per-tensor current "
                                    "scaling) beside the bf16 GEMM --gemm selects, with the casts it needs");
  add_shape_columns(table, "A (m, k) · B (n, k)ᵀ in FP8")
      .add_string("types", "A × B fp8 types → C type")
      .add_double("bf16_ms", "the bf16 GEMM as --gemm selects it, ms per call", 4)
      .add_double("fp8_ms", "the FP8 GEMM, fp32 accumulation promoted (no fast accumulation), ms per call", 4)
      .add_double("fp8_fast_ms", "the FP8 GEMM with CUBLASLT_MATMUL_DESC_FAST_ACCUM, ms per call", 4)
      .add_double("amax_ms", "amax kernels this GEMM's operands need (shared ones counted once), ms per call", 4)
      .add_double("cast_ms", "cast / cast+transpose kernels of its operands, ms per call", 4)
      .add_double("speedup_gemm", "bf16_ms / fp8_ms", 3)
      .add_double("speedup_with_casts", "bf16_ms / (fp8_ms + amax_ms + cast_ms)", 3)
      .add_double("saved_ms_per_step", "(bf16_ms − fp8_ms − amax_ms − cast_ms) · per_step", 3);
  return table;
}

}  // namespace

int bench_gemm_fp8(Context& ctx, const RunOptions& run, const io::LogOptions& log_opt,
                   const std::map<std::string, std::string>& options, const std::vector<GemmShape>& shapes, int iters) {
  const std::string why = fp8_unsupported_reason(ctx.target());
  PT_CHECK(why.empty(), "bench gemm --precision fp8: " + why);
  std::vector<GemmShape> linear;
  for (const GemmShape& s : shapes)
    if (s.fp8_candidate) linear.push_back(s);
  BenchSweep sweep("bench gemm", run, log_opt, static_cast<int64_t>(linear.size()));
  io::RunRecord& record = sweep.record();
  record.collect_environment(ctx);
  record.set_options(options);
  sweep.start();
  io::ResultTable table = fp8_table();
  double total_bf16 = 0, total_fp8 = 0, total_casts = 0;
  for (const GemmShape& s : linear) {
    const OperandPlan p = operand_plan(s.role);
    const DType c_dtype = s.c_fp32_in_bf16 ? DType::F32 : DType::BF16;
    // The bf16 GEMM exactly as bench gemm's bf16 sweep times it.
    Tensor a16 = bench::filled(ctx, {s.m * s.k}, DType::BF16, bench::bench_values(s.m * s.k, 1), "gemm_a");
    Tensor b16 = bench::filled(ctx, {s.k * s.n}, DType::BF16, bench::bench_values(s.k * s.n, 2), "gemm_b");
    Tensor c = Tensor::zeros({s.m, s.n}, c_dtype, ctx, "gemm_c");
    // clang-format off
    const GemmDesc g16{1, s.m, s.n, s.k, s.trans_a, s.trans_b, DType::BF16, c_dtype, 1.0f, 0.0f,
                       a16.data(), s.trans_a ? s.m : s.k, 0, b16.data(), s.trans_b ? s.k : s.n, 0, c.data(), s.n, 0};
    // clang-format on
    const double bf16_ms = cuda::time_matmul(ctx, g16, iters);
    const TimedOperand a = make_operand(ctx, s.m, s.k, p.a, p.a_t, p.a_amax, 3, iters);
    const TimedOperand b = make_operand(ctx, s.n, s.k, p.b, p.b_t, p.b_amax, 4, iters);
    Fp8GemmDesc g8{s.m,
                   s.n,
                   s.k,
                   p.a,
                   p.b,
                   c_dtype,
                   a.fp8.data(),
                   s.k,
                   b.fp8.data(),
                   s.k,
                   c.data(),
                   s.n,
                   a.scale_inv.data_as<float>(),
                   b.scale_inv.data_as<float>(),
                   false};
    const double fp8_ms = cuda::time_matmul_fp8(ctx, g8, iters);
    g8.fast_accum = true;
    const double fast_ms = cuda::time_matmul_fp8(ctx, g8, iters);
    const double amax_ms = a.amax_ms + b.amax_ms, cast_ms = a.cast_ms + b.cast_ms;
    const double per_step = static_cast<double>(s.per_step);
    total_bf16 += bf16_ms * per_step;
    total_fp8 += fp8_ms * per_step;
    total_casts += (amax_ms + cast_ms) * per_step;
    shape_row(table, s)
        .set("types", std::string(dtype_name(p.a)) + " × " + dtype_name(p.b) + " → " + dtype_name(c_dtype))
        .set("bf16_ms", bf16_ms)
        .set("fp8_ms", fp8_ms)
        .set("fp8_fast_ms", fast_ms)
        .set("amax_ms", amax_ms)
        .set("cast_ms", cast_ms)
        .set("speedup_gemm", bf16_ms / fp8_ms)
        .set("speedup_with_casts", bf16_ms / (fp8_ms + amax_ms + cast_ms))
        .set("saved_ms_per_step", (bf16_ms - fp8_ms - amax_ms - cast_ms) * per_step);
    sweep.done(s.name + " " + std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k),
               "bf16 " + std::to_string(bf16_ms) + " ms, fp8 " + std::to_string(fp8_ms) + " ms + casts " +
                   std::to_string(amax_ms + cast_ms) + " ms",
               {{"bf16_ms", bf16_ms}, {"fp8_ms", fp8_ms}, {"cast_ms", amax_ms + cast_ms}}, {&table});
  }
  record.set_attr("fp8_linear_ms_per_step.bf16", total_bf16);
  record.set_attr("fp8_linear_ms_per_step.fp8_gemm", total_fp8);
  record.set_attr("fp8_linear_ms_per_step.casts", total_casts);
  sweep.finish({&table});
  if (!sweep.log().jsonl() && parallel::Runtime::get().is_root())
    std::cout << "Linear GEMMs per step (LM head excluded): bf16 " << total_bf16 << " ms; FP8 " << total_fp8
              << " ms + casts " << total_casts << " ms = " << total_fp8 + total_casts << " ms ("
              << total_bf16 / (total_fp8 + total_casts) << "× with casts, " << total_bf16 / total_fp8
              << "× GEMMs alone)" << std::endl;
  return 0;
}

}  // namespace pt::cli
