// `paratrain bench ddp`: its options, turned into a sweep (bench/ddp_bench.h), and the progress
// line and record after each configuration.
#include <algorithm>
#include <string>
#include <vector>

#include "bench/ddp_bench.h"
#include "bench/ddp_tables.h"
#include "cli/bench_sweep.h"
#include "cli/ddp_options.h"
#include "cli/options.h"
#include "cli/subcommands.h"
#include "core/context.h"
#include "core/error.h"
#include "io/run_record.h"
#include "io/table.h"
#include "model/transformer.h"
#include "parallel/runtime.h"
#include "parallel/strategies.h"

namespace pt::cli {

int run_bench_ddp(const std::vector<std::string>& args) {
  RunOptions run;
  ModelSizeOptions size{"xl"};
  std::string attention = "naive", optimizer = "adamw";
  int64_t context = 512, batch = 4, vocab = 0;
  int steps = 10, warmup = 3;
  int64_t grad_accum = 1;
  std::vector<std::string> ddp_words, bucket_words, shard_words, sms_words, engine_words, grad_comm_words,
      prefetch_words;
  LogOptions log_opt;
  po::options_description desc = bench_options("bench ddp options", run, log_opt);
  add_storage_dtype_options(desc, run);
  add_gemm_option(desc, run);
  add_flash_options(desc, run);
  add_model_size_options(desc, size);
  // clang-format off
  desc.add_options()
      ("vocab-size", po::value(&vocab)->default_value(0), "override the vocabulary (0: keep)")
      ("context-length", po::value(&context)->default_value(context), "sequence length")
      ("batch-size", po::value(&batch)->default_value(batch), "sequences per rank per micro-batch")
      ("grad-accum", po::value(&grad_accum)->default_value(grad_accum),
       "micro-batches per step into the same gradients, synchronised once, in the last")
      ("attention", po::value(&attention)->default_value(attention), "naive or flash")
      ("optimizer", po::value(&optimizer)->default_value(optimizer), "adamw or sgd")
      ("ddp", po::value(&ddp_words)->multitoken(),
       ("strategies to time (default: all of " + parallel::strategy_names_text() + "); none is the floor").c_str())
      ("bucket-mb", po::value(&bucket_words)->multitoken(),
       "bucket caps for bucketed, MiB (default 1,10,100,1000; 0 = one bucket per parameter)")
      ("shard-optimizer", po::value(&shard_words)->multitoken(),
       "sharding modes to add (default none): broadcast (with bucketed 25 MiB), zero1 (with flat "
       "and with bucketed 25 MiB)")
      ("comm-sms", po::value(&sms_words)->multitoken(),
       "values to time (default auto): NCCL's CTAs a collective, kept from GEMMs while gradients sync")
      ("comm-engine", po::value(&engine_words)->multitoken(),
       "values to time (default nccl), each with its own communicator: nccl, ce or auto")
      ("grad-comm", po::value(&grad_comm_words)->multitoken(),
       "values to time (default fp32): gradients on the wire, fp32 or bf16 (as bf16_compress_hook)")
      ("zero1-prefetch", po::value(&prefetch_words)->multitoken(),
       "values to time with zero1 (default on): all-gathers left for the next forward, or waited for")
      ("steps", po::value(&steps)->default_value(steps), "timed steps per configuration")
      ("warmup", po::value(&warmup)->default_value(warmup), "untimed steps first");
  // clang-format on
  auto vm = parse_or_help(desc, args, "mpirun -np N paratrain bench ddp [options]   (one rank per GPU)");
  if (!vm) return 0;
  PT_CHECK(steps >= 1 && warmup >= 1, "--steps and --warmup must be at least 1");
  PT_CHECK(context >= 1 && batch >= 1, "--context-length and --batch-size must be positive");
  bench::DdpSweep sweep_values;
  for (const auto& d : split_list(ddp_words.empty() ? parallel::grad_sync_names() : ddp_words))
    sweep_values.ddps.push_back(&parallel::strategy(d));  // one clear error for a name not in the table
  sweep_values.buckets =
      parse_double_list(bucket_words.empty() ? std::vector<std::string>{"1,10,100,1000"} : bucket_words, "bucket-mb");
  for (double mb : sweep_values.buckets) PT_CHECK(mb >= 0, "--bucket-mb values must be >= 0");
  // as asked (kCommSmsAuto for auto); rows show what it resolved to
  for (const auto& w : split_list(sms_words.empty() ? std::vector<std::string>{"auto"} : sms_words))
    sweep_values.comm_sms.push_back(parse_comm_sms(w));
  for (const auto& w : split_list(engine_words.empty() ? std::vector<std::string>{"nccl"} : engine_words))
    sweep_values.engines.push_back(parallel::comm_engine_from_name(w));
  for (const auto& w : split_list(grad_comm_words.empty() ? std::vector<std::string>{"fp32"} : grad_comm_words))
    sweep_values.grad_comms.push_back(parallel::grad_comm_from_name(w));
  for (const auto& w : split_list(prefetch_words.empty() ? std::vector<std::string>{"on"} : prefetch_words))
    sweep_values.prefetches.push_back(parse_on_off(w, "zero1-prefetch"));
  for (const auto& w : split_list(shard_words.empty() ? std::vector<std::string>{"none"} : shard_words))
    sweep_values.shards.push_back(shard_mode_from_name(w));
  const auto plan = bench::ddp_configs(sweep_values);
  const DType grad_dtype = grad_dtype_for_precision(run);
  const DType residual_dtype = residual_dtype_for_precision(run);

  TransformerConfig cfg = size.config();
  if (vocab) cfg.vocab_size = vocab;
  cfg.context_length = std::max(cfg.context_length, context);
  cfg.attention = attention_impl_from_name(attention);
  cfg.validate();

  auto& rt = parallel::Runtime::get();
  const Device device = resolve_device(run);
  check_memory_floor(
      cfg, batch, dtype_size(grad_dtype), is_bf16_mixed(precision_from_name(run.precision)) && device.is_cuda(), device,
      "the size comes from --model, --num-layers, --d-model, --d-ff, --vocab-size, --batch-size and --context-length");
  BenchSweep sweep("bench ddp", run, log_opt, static_cast<int64_t>(plan.size()));
  io::RunRecord& record = sweep.record();  // --out checked now, not after the sweep
  Context ctx(device, precision_from_name(run.precision));
  ctx.set_grad_dtype(grad_dtype);
  ctx.set_residual_dtype(residual_dtype);
  apply_gemm_option(ctx, run);
  apply_flash_options(ctx, run);
  bench::DdpBenchSetup setup;
  setup.model = cfg;
  setup.batch = batch;
  setup.context = context;
  setup.micro_batches = static_cast<int>(grad_accum);
  setup.optimizer.kind = optimizer_kind_from_name(optimizer);
  setup.optimizer.adamw.lr = 1e-4f;
  setup.warmup = warmup;
  setup.steps = steps;
  setup.seed = run.seed;
  setup.comm_sms = sweep_values.comm_sms.front();
  setup.engine = sweep_values.engines.front();
  bench::DdpBench bench(ctx, setup);
  record.collect_environment(ctx);
  record.set_options(options_as_strings(*vm));
  record.set_attr("backend", bench.comm().name());
  record.set_attr("device", device.str());
  record.set_attr("model.d_model", cfg.d_model);
  record.set_attr("model.num_layers", cfg.num_layers);
  record.set_attr("model.num_heads", cfg.num_heads);
  record.set_attr("model.d_ff", cfg.d_ff);
  record.set_attr("model.vocab_size", cfg.vocab_size);
  record.set_attr("model.parameters", cfg.num_params());
  sweep.start();

  std::vector<bench::DdpResult> results;
  record.set_attr("ddp_order", parallel::strategy_report_order());  // the report lists rows in this order
  const bench::DdpRun ddp_run{rt.world_size(),
                              run.precision,
                              dtype_name(grad_dtype),
                              dtype_name(residual_dtype),
                              grad_accum,
                              static_cast<double>(rt.world_size() * batch * grad_accum * context)};
  for (const auto& c : plan) {
    results.push_back(bench.run(c));
    const bench::DdpResult& r = results.back();
    const std::string name = r.sync_name + " bucket_mb " + std::to_string(c.bucket_mb) + " shard " +
                             shard_mode_name(c.shard) + " comm_sms " + std::to_string(r.comm_sms) + " " +
                             r.comm_engine + " grad_comm " + parallel::grad_comm_name(c.grad_comm) +
                             " zero1_prefetch " + bench::zero1_prefetch_word(c);
    // The record's tables from every configuration measured so far, written after each one: a
    // long or interrupted sweep keeps what it has measured.
    const bench::DdpTables tables = bench::ddp_tables(results, ddp_run);
    sweep.done(name,
               std::to_string(r.step_ms) + " ms/step, exposed communication " + std::to_string(r.exposed_ms) + " ms",
               {{"step_ms", r.step_ms}, {"exposed_comm_ms", r.exposed_ms}}, {&tables.ddp, &tables.events});
  }
  const bench::DdpTables tables = bench::ddp_tables(results, ddp_run);
  sweep.finish({&tables.ddp});
  return 0;
}

}  // namespace pt::cli
