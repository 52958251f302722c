#pragma once
// `paratrain bench gemm`'s shapes of the train step, shared by its bf16 sweep (bench_gemm.cpp)
// and its FP8 one (bench_gemm_fp8.cpp).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cli/options.h"
#include "core/context.h"
#include "io/run_log.h"
#include "io/table.h"
#include "model/transformer.h"

namespace pt::cli {

// Which GEMM of a Linear a shape is (Attention: naive attention's batched GEMMs).
enum class GemmRole { Forward, WeightGrad, InputGrad, Attention };

// One GEMM of the step, row-major as ops::matmul takes it: C (m, n) = op(A) (m, k) · op(B) (k, n).
struct GemmShape {
  std::string name;
  int64_t m, n, k;
  bool trans_a, trans_b;
  int64_t batch;        // batched (attention: B·H), strided contiguously
  int64_t per_step;     // how often the step runs it
  bool c_fp32_in_bf16;  // weight gradients (and the residual-fused outputs) stay fp32 in bf16 mode
  GemmRole role;
  bool fp8_candidate;  // a Linear that FP8 training would move (not the LM head, not attention)
};

// The Linear GEMMs (forward, weight gradient, input gradient) and naive attention's batched ones.
std::vector<GemmShape> step_shapes(const TransformerConfig& c, int64_t batch, int64_t T);

// The columns that name a shape (gemm, m, n, k, per_step), first in both sweeps' tables, and a
// row that sets them; `product` says how that table's C is formed from A and B.
io::ResultTable& add_shape_columns(io::ResultTable& table, const std::string& product);
io::ResultTable::RowBuilder shape_row(io::ResultTable& table, const GemmShape& s);

// The FP8 sweep: every fp8_candidate shape as an FP8 GEMM beside the bf16 one ctx selects, with
// the amax and cast kernels its operands need. ctx is in bf16 mode.
int bench_gemm_fp8(Context& ctx, const RunOptions& run, const io::LogOptions& log_opt,
                   const std::map<std::string, std::string>& options, const std::vector<GemmShape>& shapes, int iters);

}  // namespace pt::cli
