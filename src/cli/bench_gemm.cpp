// `paratrain bench gemm`: every GEMM shape of the Transformer's train step, timed through the
// cuBLAS call the model makes and through each of cuBLASLt's heuristic candidates, so one run
// says how much a per-shape algorithm choice could take off the step (issue 6's "heuristics
// chosen once per shape"), and what the model's own choice (--gemm, default autotune) runs at.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "bench/inputs.h"
#include "cli/bench_gemm.h"
#include "cli/bench_sweep.h"
#include "cli/options.h"
#include "cli/subcommands.h"
#include "core/context.h"
#include "core/error.h"
#include "core/gemm_desc.h"
#include "cuda/matmul.h"
#include "io/run_record.h"
#include "io/table.h"
#include "model/transformer.h"
#include "parallel/runtime.h"

namespace pt::cli {

io::ResultTable& add_shape_columns(io::ResultTable& table, const std::string& product) {
  return table.add_string("gemm", "which GEMM of the step (row-major C (m, n) = " + product + ")")
      .add_int("m", "rows of C")
      .add_int("n", "columns of C")
      .add_int("k", "inner dimension")
      .add_int("per_step", "calls per train step");
}

io::ResultTable::RowBuilder shape_row(io::ResultTable& table, const GemmShape& s) {
  auto row = table.add_row();
  row.set("gemm", s.name).set("m", s.m).set("n", s.n).set("k", s.k).set("per_step", s.per_step);
  return row;
}

// The Linear GEMMs (forward, weight gradient, input gradient) and naive attention's batched ones.
std::vector<GemmShape> step_shapes(const TransformerConfig& c, int64_t batch, int64_t T) {
  const int64_t N = batch * T, C = c.d_model, F = c.d_ff, V = c.vocab_size, L = c.num_layers;
  const int64_t BH = batch * c.num_heads, D = c.d_head();
  std::vector<GemmShape> out;
  auto linear = [&](const std::string& name, int64_t d_in, int64_t d_out, int64_t count, bool fwd_fp32) {
    const bool fp8 = name != "lm_head";  // the LM head stays bf16 (issue 50's table)
    out.push_back({name + " forward", N, d_out, d_in, false, true, 1, count, fwd_fp32, GemmRole::Forward, fp8});
    out.push_back({name + " dW", d_out, d_in, N, true, false, 1, count, true, GemmRole::WeightGrad, fp8});
    out.push_back({name + " dX", N, d_in, d_out, false, false, 1, count, false, GemmRole::InputGrad, fp8});
  };
  linear("qkv", C, 3 * C, L, false);
  linear("out_proj", C, C, L, true);
  linear("w1|w3", C, F, 2 * L, false);
  linear("w2", F, C, L, true);
  linear("lm_head", C, V, 1, true);
  const GemmRole att = GemmRole::Attention;
  out.push_back({"attn QKᵀ (and dP = dO·Vᵀ)", T, T, D, false, true, BH, 2 * L, false, att, false});
  out.push_back({"attn P·V (and dQ = dS·K)", T, D, T, false, false, BH, 2 * L, false, att, false});
  out.push_back({"attn dV = Pᵀ·dO (and dK)", T, D, T, true, false, BH, 2 * L, false, att, false});
  return out;
}

int run_bench_gemm(const std::vector<std::string>& args) {
  RunOptions run;
  std::string size = "xl";
  int64_t context = 512, batch = 4;
  int algos = 16, iters = 20;
  LogOptions log_opt;
  po::options_description desc = bench_options("bench gemm options", run, log_opt);
  // clang-format off
  desc.add_options()
      ("model", po::value(&size)->default_value(size), "named size whose GEMM shapes to time")
      ("context-length", po::value(&context)->default_value(context), "sequence length")
      ("batch-size", po::value(&batch)->default_value(batch), "sequences per step")
      ("algos", po::value(&algos)->default_value(algos), "cuBLASLt heuristic candidates to time per shape")
      ("steps", po::value(&iters)->default_value(iters), "timed runs per candidate");
  // clang-format on
  add_gemm_option(desc, run);
  auto vm = parse_or_help(desc, args,
                          "paratrain bench gemm [options]   (one GPU; --precision fp8 times the Linear GEMMs in FP8 "
                          "beside bf16, with their casts)");
  if (!vm) return 0;
  PT_CHECK(algos >= 1 && iters >= 1 && context >= 1 && batch >= 1,
           "--algos, --steps, --context-length and --batch-size must be >= 1");
  const Device device = resolve_device(run);
  PT_CHECK(device.is_cuda(), "bench gemm times cuBLAS kernels: it needs a GPU");
  TransformerConfig cfg = TransformerConfig::named(size);
  const bool fp8 = run.precision == "fp8";
  Context ctx(device, fp8 ? Precision::BF16 : precision_from_name(run.precision));
  apply_gemm_option(ctx, run);
  const auto shapes = step_shapes(cfg, batch, context);
  if (fp8) return bench_gemm_fp8(ctx, run, log_opt, options_as_strings(*vm), shapes, iters);
  BenchSweep sweep("bench gemm", run, log_opt, static_cast<int64_t>(shapes.size()));
  io::RunRecord& record = sweep.record();
  record.collect_environment(ctx);
  record.set_options(options_as_strings(*vm));
  sweep.start();

  const DType ab = ctx.act_dtype();
  io::ResultTable table("gemm", "every GEMM shape of the train step: cuBLAS, cuBLASLt's heuristic candidates, "
                                "and --gemm's choice");
  add_shape_columns(table, "op(A) · op(B)")
      .add_string("op", "N/T of A and B as stored")
      .add_int("batch", "batched GEMMs per call")
      .add_string("precision", "fp32, tf32 or bf16")
      .add_double("cublas_ms", "cublasGemmStridedBatchedEx per call, ms", 4)
      .add_double("lt_first_ms", "cuBLASLt's first heuristic choice per call, ms", 4)
      .add_double("lt_best_ms", "fastest cuBLASLt candidate per call, ms", 4)
      .add_int("lt_best_index", "its rank in the heuristic's list (0 = first)")
      .add_int("lt_candidates", "candidates the heuristic offered")
      .add_double("cublas_tflops", "2·m·n·k·batch / cublas_ms, TFLOP/s", 1)
      .add_double("selected_ms", "ops::matmul as --gemm selects it (what the model runs) per call, ms", 4)
      .add_double("gain_ms_per_step", "(cublas_ms − min(cublas_ms, lt_best_ms)) · per_step, ms", 3);
  double total_cublas = 0, total_best = 0, total_selected = 0;
  for (const GemmShape& s : shapes) {
    const DType c_dtype = (ab == DType::BF16 && !s.c_fp32_in_bf16) ? DType::BF16 : DType::F32;
    Tensor a = bench::filled(ctx, {s.batch * s.m * s.k}, ab, bench::bench_values(s.batch * s.m * s.k, 1), "gemm_a");
    Tensor b = bench::filled(ctx, {s.batch * s.k * s.n}, ab, bench::bench_values(s.batch * s.k * s.n, 2), "gemm_b");
    Tensor c = Tensor::zeros({s.batch * s.m * s.n}, c_dtype, ctx, "gemm_c");
    // clang-format off
    GemmDesc g{s.batch, s.m, s.n, s.k, s.trans_a, s.trans_b, ab, c_dtype, 1.0f, 0.0f,
                    a.data(), s.trans_a ? s.m : s.k, s.m * s.k,
                    b.data(), s.trans_b ? s.k : s.n, s.k * s.n,
                    c.data(), s.n, s.m * s.n};
    // clang-format on
    const double cublas = cuda::time_cublas(ctx, g, iters);
    const std::vector<double> lt = cuda::time_cublaslt_algos(ctx, g, algos, iters);
    const double selected = cuda::time_matmul(ctx, g, iters);
    total_selected += selected * static_cast<double>(s.per_step);
    const auto best = std::min_element(lt.begin(), lt.end());
    const double best_ms = best == lt.end() ? std::nan("") : *best;
    const double gain =
        std::isnan(best_ms) ? 0.0 : (cublas - std::min(cublas, best_ms)) * static_cast<double>(s.per_step);
    total_cublas += cublas * static_cast<double>(s.per_step);
    total_best += cublas * static_cast<double>(s.per_step) - gain;
    shape_row(table, s)
        .set("op", std::string(s.trans_a ? "T" : "N") + (s.trans_b ? "T" : "N"))
        .set("batch", s.batch)
        .set("precision", run.precision)
        .set("cublas_ms", cublas)
        .set("lt_first_ms", lt.empty() ? std::nan("") : lt.front())
        .set("lt_best_ms", best_ms)
        .set("lt_best_index", static_cast<int64_t>(best == lt.end() ? -1 : best - lt.begin()))
        .set("lt_candidates", static_cast<int64_t>(lt.size()))
        .set("cublas_tflops", 2.0 * double(s.m) * double(s.n) * double(s.k) * double(s.batch) / (cublas * 1e-3) / 1e12)
        .set("selected_ms", selected)
        .set("gain_ms_per_step", gain);
    sweep.done(s.name + " " + std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k),
               "cuBLAS " + std::to_string(cublas) + " ms, best cuBLASLt " + std::to_string(best_ms) + " ms",
               {{"cublas_ms", cublas}, {"lt_best_ms", best_ms}, {"selected_ms", selected}}, {&table});
  }
  record.set_attr("gemm_ms_per_step.cublas", total_cublas);
  record.set_attr("gemm_ms_per_step.best", total_best);
  record.set_attr("gemm_ms_per_step.selected", total_selected);
  sweep.finish({&table});
  if (!sweep.log().jsonl() && parallel::Runtime::get().is_root())
    std::cout << "GEMM time per step: cuBLAS " << total_cublas << " ms, with the fastest candidate per shape "
              << total_best << " ms (" << 100.0 * (1.0 - total_best / total_cublas) << " % less); as --gemm "
              << run.gemm << " selects " << total_selected << " ms" << std::endl;
  return 0;
}

}  // namespace pt::cli
