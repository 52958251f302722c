#include "cli/subcommands.h"

namespace pt::cli {

const std::vector<Subcommand>& bench_subcommands() {
  static const std::vector<Subcommand> table = {
      {"model", "time the Transformer: sizes x contexts x precision x attention", run_bench_model},
      {"attention", "naive vs flash attention sweeps", run_bench_attention},
      {"allreduce", "collective bandwidth table (nccl-tests style)", run_bench_allreduce},
      {"ddp", "data-parallel strategies, bucket sizes and optimizer sharding", run_bench_ddp},
      {"gemm", "the train step's GEMM shapes: cuBLAS against cuBLASLt's candidates", run_bench_gemm},
  };
  return table;
}

}  // namespace pt::cli
