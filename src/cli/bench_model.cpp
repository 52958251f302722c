// `paratrain bench model`: options → bench::run_model_bench → stdout tables + HDF5 record.
#include <algorithm>
#include <iostream>

#include "bench/model_bench.h"
#include "cli/bench_sweep.h"
#include "cli/options.h"
#include "cli/subcommands.h"
#include "core/context.h"
#include "core/error.h"
#include "io/run_record.h"
#include "parallel/runtime.h"

namespace pt::cli {

int run_bench_model(const std::vector<std::string>& args) {
  bench::ModelBenchOptions o;
  RunOptions run;
  std::vector<std::string> sizes{"small"}, contexts{"128,256,512,1024"}, precisions{"fp32,bf16"},
      attention{"naive,flash"}, warmups{"5"};
  std::string mode = "train-step", recompute = "on", fused = "on", cuda_graph = "off", update_overlap = "auto";
  po::options_description desc("paratrain bench model options");
  // clang-format off
  desc.add_options()
      ("model", po::value(&sizes)->multitoken()->default_value(sizes, "small"),
       "model sizes: tiny small medium large xl 2.7b (list)")
      ("context-length", po::value(&contexts)->multitoken()->default_value(contexts, "128,256,512,1024"),
       "context lengths (list)")
      ("precision", po::value(&precisions)->multitoken()->default_value(precisions, "fp32,bf16"),
       "fp32, tf32, bf16, fp8 (list; fp8: bf16 with FP8 Linear GEMMs, sm_89+)")
      ("attention", po::value(&attention)->multitoken()->default_value(attention, "naive,flash"),
       "naive, flash (list)")
      ("batch-size", po::value(&o.batch_size)->default_value(o.batch_size), "sequences per step (per micro-batch with --grad-accum)")
      ("grad-accum", po::value(&o.grad_accum)->default_value(o.grad_accum),
       "micro-batches per step, into the same gradients; tokens, TFLOP/s and MFU count all of "
       "them")
      ("vocab-size", po::value(&o.vocab_size)->default_value(o.vocab_size), "vocabulary size")
      ("mode", po::value(&mode)->default_value(mode), "forward | forward-backward | train-step")
      ("warmup", po::value(&warmups)->multitoken()->default_value(warmups, "5"),
       "warm-up steps before measuring (list; 0, 1, 2 are allowed and meaningful)")
      ("steps", po::value(&o.steps)->default_value(o.steps), "measured steps")
      ("recompute", po::value(&recompute)->default_value(recompute), kRecomputeHelp)
      ("fused", po::value(&fused)->default_value(fused), kFusedHelp)
      ("cuda-graph", po::value(&cuda_graph)->default_value(cuda_graph), kCudaGraphHelp)
      ("update-overlap", po::value(&update_overlap)->default_value(update_overlap), kUpdateOverlapHelp)
      ("update-sms", po::value(&o.update_sms)->default_value(o.update_sms), kUpdateSmsHelp)
      ("breakdown", po::bool_switch(&o.breakdown),
       "GPU time per phase and op family, and its roofline (floor at the peak FLOP/s and copy "
       "rate), once per configuration")
      ("memory-profile", po::bool_switch(&o.memory_profile),
       "peak memory (forward, train step), its breakdown and timeline, once per configuration")
      ("profile-steps", po::bool_switch(&o.profile_steps),
       "bracket the measured steps with cudaProfilerStart/Stop (nsys --capture-range=cudaProfilerApi)")
      ("peak-tflops", po::value(&o.peak_tflops)->default_value(0), "device peak for MFU (0: from the device name)");
  // clang-format on
  LogOptions log_opt;
  add_run_options(desc, run, nullptr);
  add_storage_dtype_options(desc, run);
  add_gemm_option(desc, run);
  add_flash_options(desc, run);
  add_log_options(desc, log_opt);
  auto vm = parse_or_help(desc, args, "paratrain bench model [options]");
  if (!vm) return 0;
  o.sizes = split_list(sizes);
  o.contexts = parse_int_list(contexts, "context-length");
  o.precisions.clear();
  for (const auto& p : split_list(precisions)) o.precisions.push_back(precision_from_name(p));
  o.attention = split_list(attention);
  o.warmups = parse_int_list(warmups, "warmup");
  o.mode = bench::model_bench_mode_from_name(mode);
  o.recompute = recompute_from_name(recompute);
  o.fused = parse_on_off(fused, "fused");
  o.cuda_graph = parse_on_off(cuda_graph, "cuda-graph");
  o.update_overlap = update_overlap_from_name(update_overlap);
  PT_CHECK(!(o.cuda_graph && o.breakdown), "--breakdown times every kernel on its own; it cannot run inside a CUDA "
                                           "graph: leave out --cuda-graph on, or --breakdown");
  const bool has_bf16 = std::count_if(o.precisions.begin(), o.precisions.end(), is_bf16_mixed) > 0;
  o.grad_dtype = grad_dtype_of(run);
  PT_CHECK(o.grad_dtype == DType::F32 || has_bf16,
           "--grad-dtype bf16 applies to the bf16 configurations, and --precision has none");
  o.residual_dtype = residual_dtype_of(run);
  PT_CHECK(o.residual_dtype == DType::F32 || has_bf16,
           "--residual-dtype bf16 applies to the bf16 configurations, and --precision has none");
  o.seed = run.seed;
  o.gemm = gemm_select_from_name(run.gemm);
  o.flash = flash_choice_of(run);

  auto& rt = parallel::Runtime::get();
  PT_CHECK(rt.world_size() == 1, "bench model runs as one process (use bench ddp for several ranks)");
  const Device device = resolve_device(run);
  // The rig's own rule (defers_update), so that no configuration records update_sms 0 in silence.
  PT_CHECK(o.update_sms == 0 || (o.mode == bench::ModelBenchMode::TrainStep &&
                                 defers_update(o.update_overlap, device.is_cuda(), o.fused, o.cuda_graph)),
           "--update-sms keeps SMs for the update under the forward: it needs --mode train-step and the update "
           "deferred (--update-overlap on or auto, on a GPU, with --fused on and no --cuda-graph)");
  BenchSweep sweep("bench model", run, log_opt, bench::model_bench_configurations(o));
  io::RunRecord& record = sweep.record();  // --out checked now, not after the sweep
  {
    Context env_ctx(device);
    record.collect_environment(env_ctx);
  }
  record.set_options(options_as_strings(*vm));
  sweep.start();
  auto tables = [&](const bench::ModelBenchResults& r) {
    std::vector<const io::ResultTable*> out{&r.timings};
    if (o.breakdown && r.breakdown.rows()) out.push_back(&r.breakdown);
    if (o.breakdown && r.roofline.rows()) out.push_back(&r.roofline);
    if (o.memory_profile && r.memory.rows()) out.push_back(&r.memory);
    return out;
  };
  bench::ModelBenchResults r = bench::run_model_bench(
      o, device, &record, [&](const auto& partial, const std::string& name, const std::string& summary) {
        sweep.done(name, summary, {}, tables(partial));
      });
  sweep.finish(tables(r));
  return 0;
}

}  // namespace pt::cli
