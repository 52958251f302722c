// `paratrain plan`: memory, communication and step time of a training job from its shape alone
// (plan/plan.h), as a table, JSON, and optionally an HDF5 record. CPU only, instant.
#include <cmath>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <tuple>
#include <utility>

#include "cli/ddp_options.h"
#include "cli/options.h"
#include "cli/subcommands.h"
#include "core/accelerator_specs.h"
#include "core/error.h"
#include "io/run_record.h"
#include "io/table.h"
#include "parallel/strategies.h"
#include "plan/plan.h"

namespace pt::cli {

namespace {

constexpr double kGB = 1e9;

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}
std::string num(double v) {
  if (!std::isfinite(v)) return "null";
  std::ostringstream o;
  o << std::setprecision(10) << v;
  return o.str();
}

void print_json(const plan::Result& r, std::ostream& os) {
  const plan::Memory& m = r.memory;
  os << "{\"model\": {\"d_model\": " << r.job.model.d_model << ", \"d_ff\": " << r.job.model.d_ff
     << ", \"num_layers\": " << r.job.model.num_layers << ", \"num_heads\": " << r.job.model.num_heads
     << ", \"vocab_size\": " << r.job.model.vocab_size << ", \"context_length\": " << r.job.model.context_length
     << ", \"params\": " << r.job.model.num_params() << "},\n \"layout\": {\"devices\": " << r.job.devices()
     << ", \"dp\": " << r.job.dp << ", \"tp\": " << r.job.tp << ", \"pp\": " << r.job.pp << ", \"ddp\": \""
     << r.job.strategy << "\", \"sharding\": \"" << plan::sharding_name(r.job.sharding)
     << "\", \"batch_size\": " << r.job.batch << ", \"grad_accum\": " << r.job.grad_accum << ", \"precision\": \""
     << precision_name(r.job.precision) << "\", \"implemented\": " << (r.implemented ? "true" : "false")
     << "},\n \"cluster\": {\"preset\": \"" << r.cluster.device.preset
     << "\", \"memory_gb\": " << num(r.cluster.device.memory_gb) << ", \"gpus_per_node\": " << r.cluster.gpus_per_node
     << "},\n \"memory_bytes\": {\"parameters\": " << m.params << ", \"parameters_bf16\": " << m.params_lowp
     << ", \"gradients\": " << m.grads << ", \"optimizer_state\": " << m.optstate
     << ", \"activations\": " << m.activations << ", \"activations_saved\": " << m.activations_saved
     << ", \"workspace\": " << m.workspace << ", \"total\": " << m.total() << ", \"activations_by_choice\": {";
  for (int i = 0; i < kNumRecompute; ++i)
    for (int j = 0; j < plan::kNumAttentionChoices; ++j)
      os << (i + j ? ", " : "") << "\"recompute_" << recompute_name(kRecomputeChoices[i]) << "_"
         << attention_impl_name(plan::kAttentionChoices[j]) << "\": " << m.activations_by_choice[i][j];
  os << "}},\n \"collectives\": [";
  for (size_t i = 0; i < r.comm.size(); ++i) {
    const plan::Collective& c = r.comm[i];
    os << (i ? ", " : "") << "{\"collective\": \"" << c.name << "\", \"what\": \"" << json_escape(c.what)
       << "\", \"calls\": " << c.calls << ", \"bytes\": " << c.bytes << ", \"bus_factor\": " << num(c.bus_factor)
       << ", \"seconds\": " << num(c.seconds) << "}";
  }
  os << "],\n \"time_s\": {\"compute\": " << num(r.compute_s) << ", \"optimizer_hbm\": " << num(r.hbm_s)
     << ", \"communication\": " << num(r.comm_s) << ", \"exposed_communication\": " << num(r.exposed_comm_s)
     << ", \"step\": " << num(r.step_s) << "},\n \"flops_per_step\": " << num(r.flops_per_step)
     << ", \"fp8_flops_per_step\": " << num(r.fp8_flops_per_step) << ", \"mfu\": " << num(r.mfu)
     << ", \"mfu_fp8\": " << num(r.mfu_fp8) << ", \"hiding_batch\": " << r.hiding_batch
     << ", \"fits\": " << (r.fits ? "true" : "false") << ", \"min_devices_to_fit\": " << r.min_devices_to_fit
     << ",\n \"notes\": [";
  for (size_t i = 0; i < r.notes.size(); ++i) os << (i ? ", " : "") << "\"" << json_escape(r.notes[i]) << "\"";
  os << "]}\n";
}

void fill_tables(const plan::Result& r, io::ResultTable& memory, io::ResultTable& comm, io::ResultTable& time) {
  const plan::Memory& m = r.memory;
  auto mem_row = [&](const char* what, int64_t bytes) {
    memory.add_row().set("category", what).set("bytes", bytes).set("GB", static_cast<double>(bytes) / kGB);
  };
  mem_row("parameters (fp32)", m.params);
  mem_row("parameters (bf16 copy)", m.params_lowp);
  mem_row("gradients", m.grads);
  mem_row("optimizer state", m.optstate);
  mem_row("activations (peak)", m.activations);
  mem_row("activations (saved by forward)", m.activations_saved);
  mem_row("workspace", m.workspace);
  mem_row("total", m.total());
  for (int i = 0; i < kNumRecompute; ++i)
    for (int j = 0; j < plan::kNumAttentionChoices; ++j)
      if (m.activations_by_choice[i][j] > 0)
        mem_row(("activations (peak) with --recompute " + std::string(recompute_name(kRecomputeChoices[i])) +
                 ", --attention " + attention_impl_name(plan::kAttentionChoices[j]))
                    .c_str(),
                m.activations_by_choice[i][j]);
  for (const plan::Collective& c : r.comm)
    comm.add_row()
        .set("collective", c.name)
        .set("what", c.what)
        .set("calls", c.calls)
        .set("bytes", c.bytes)
        .set("bus_factor", c.bus_factor)
        .set("ms", c.seconds * 1e3);
  time.add_row()
      .set("devices", static_cast<int64_t>(r.job.devices()))
      .set("compute_ms", r.compute_s * 1e3)
      .set("optimizer_ms", r.hbm_s * 1e3)
      .set("comm_ms", r.comm_s * 1e3)
      .set("exposed_comm_ms", r.exposed_comm_s * 1e3)
      .set("step_ms", r.step_s * 1e3)
      .set("mfu", r.mfu)
      .set("mfu_fp8", r.mfu_fp8)
      .set("hiding_batch", r.hiding_batch)
      .set("fits", r.fits ? "yes" : "no")
      .set("min_devices_to_fit", static_cast<int64_t>(r.min_devices_to_fit))
      .set("implemented", r.implemented ? "yes" : "no (estimate)");
}

struct PlanTables {
  io::ResultTable memory, comm, time;
};

// The record's /plan_memory, /plan_comm and /plan_time of a plan.
PlanTables plan_tables(const plan::Result& r) {
  io::ResultTable memory("plan_memory", "memory per device by category (bytes as the tracking allocator counts them)");
  memory.add_string("category", "what").add_int("bytes", "bytes per device").add_double("GB", "bytes / 1e9", 3);
  io::ResultTable comm("plan_comm", "collectives per optimizer step, per device");
  comm.add_string("collective", "all_reduce, reduce_scatter, all_gather, broadcast, p2p")
      .add_string("what", "gradients, parameters, activations")
      .add_int("calls", "calls per step")
      .add_int("bytes", "this rank's buffer bytes per step (bench ddp's comm_MB counts these)")
      .add_double("bus_factor", "bytes on the wire per buffer byte (nccl-tests' busbw factor)", 3)
      .add_double("ms", "bytes × bus_factor / bandwidth", 3);
  io::ResultTable time("plan_time", "roofline step time: compute at the dense peak, the optimizer at HBM speed, "
                                    "communication not hidden behind backward");
  time.add_int("devices", "devices in all")
      .add_double("compute_ms", "FLOPs / dense peak (fp8: FP8 GEMMs' FLOPs / FP8 peak + the rest / bf16 peak)", 3)
      .add_double("optimizer_ms", "optimizer bytes / HBM bandwidth", 3)
      .add_double("comm_ms", "all collectives", 3)
      .add_double("exposed_comm_ms", "not hidden behind backward", 3)
      .add_double("step_ms", "compute + optimizer + exposed communication (+ pipeline bubble)", 3)
      .add_double("mfu", "FLOPs / (step × peak); the peak is bf16's for fp8", 3)
      .add_double("mfu_fp8", "fp8: FLOPs / (step × FP8 peak); NaN otherwise", 3)
      .add_int("hiding_batch", "smallest per-device batch whose backward hides the gradient sync (0: nothing to hide)")
      .add_string("fits", "whether the memory total fits the device")
      .add_int("min_devices_to_fit",
               "smallest power-of-two data-parallel device count (× tp × pp) that fits; 0: none up to 65536")
      .add_string("implemented", "yes: paratrain runs this layout; no: an estimate");
  fill_tables(r, memory, comm, time);
  return {std::move(memory), std::move(comm), std::move(time)};
}

}  // namespace

int run_plan(const std::vector<std::string>& args) {
  ModelSizeOptions size{"xl"};
  std::string precision = "bf16", attention = "flash", recompute = "on";
  std::string preset = "h100-sxm", format = "table", out;
  DdpOptions ddp;
  RunOptions storage;  // --grad-dtype and --residual-dtype
  int64_t vocab = 0, context = 0;
  int64_t batch = 4, grad_accum = 1, devices = 1, tp = 1, pp = 1;
  double memory_gb = 0, peak_tflops = 0, hbm_gbps = 0, link_gbps = 0, inter_gbps = 0;
  int64_t gpus_per_node = 0;
  bool overwrite = false;
  std::string presets;
  for (const auto& p : plan::cluster_preset_names()) presets += (presets.empty() ? "" : ", ") + p;
  po::options_description desc("plan options");
  add_model_size_options(desc, size);
  // clang-format off
  desc.add_options()
      ("vocab-size", po::value(&vocab), "vocabulary")
      ("context-length", po::value(&context), "tokens per sequence (default: the named size's)")
      ("precision", po::value(&precision)->default_value(precision), "fp32, tf32, bf16 (mixed) or fp8 (bf16 with FP8 Linear GEMMs: those at the FP8 peak, the rest at bf16's)")
      ("attention", po::value(&attention)->default_value(attention), "flash or naive (materialised scores)")
      ("recompute", po::value(&recompute)->default_value(recompute), kRecomputeHelp)
      ("batch-size", po::value(&batch)->default_value(batch), "sequences per device per micro-batch")
      ("grad-accum", po::value(&grad_accum)->default_value(grad_accum), "micro-batches per optimizer step")
      ("devices", po::value(&devices)->default_value(devices), "devices in all: data-parallel ranks × tp × pp")
      ("tp", po::value(&tp)->default_value(tp), "tensor-parallel degree (not implemented in paratrain: estimate)")
      ("pp", po::value(&pp)->default_value(pp), "pipeline stages (not implemented in paratrain: estimate)")
      ("cluster", po::value(&preset)->default_value(preset), ("preset: " + presets).c_str())
      ("gpus-per-node", po::value(&gpus_per_node), "override the preset's devices per node")
      ("memory-gb", po::value(&memory_gb), "override the device memory (1e9 bytes)")
      ("peak-tflops", po::value(&peak_tflops), "override the dense peak for --precision (TFLOP/s; fp8: bf16's, FP8 twice it)")
      ("hbm-gbps", po::value(&hbm_gbps), "override the device-memory bandwidth (GB/s)")
      ("link-gbps", po::value(&link_gbps), "override the intra-node bandwidth, one direction per device (GB/s)")
      ("inter-node-gbps", po::value(&inter_gbps), "override the network bandwidth per device (GB/s)")
      ("format", po::value(&format)->default_value(format), "table or json (stdout)")
      ("out", po::value(&out), "also write an HDF5 record here")
      ("overwrite", po::bool_switch(&overwrite), "replace --out if it exists");
  // clang-format on
  // A plan sizes a job of several devices: bucketed unless --ddp says otherwise.
  add_ddp_strategy_options(desc, ddp, "bucketed");
  add_storage_dtype_options(desc, storage);
  auto vm = parse_or_help(desc, args, "paratrain plan [options]   (memory, communication and step time; no GPU)");
  if (!vm) return 0;
  PT_CHECK(format == "table" || format == "json", "--format must be table or json (got '" + format + "')");

  plan::Job job;
  job.model = size.config();
  std::string model_name = size.overridden() ? "custom" : size.model;
  for (auto [flag, value, field] :
       {std::tuple{"vocab-size", vocab, &job.model.vocab_size}, {"context-length", context, &job.model.context_length}})
    if (vm->count(flag)) {
      PT_CHECK(value >= 1, std::string("--") + flag + " must be at least 1 (got " + std::to_string(value) + ")");
      *field = value;
      model_name = "custom";
    }
  job.model.attention = attention_impl_from_name(attention);
  job.model.recompute = recompute_from_name(recompute);
  job.precision = precision_from_name(precision);
  job.batch = batch;
  job.grad_accum = grad_accum;
  PT_CHECK(devices >= 1 && tp >= 1 && pp >= 1, "--devices, --tp and --pp must be at least 1");
  PT_CHECK(devices % (tp * pp) == 0,
           "--devices " + std::to_string(devices) + " is not a multiple of tp × pp = " + std::to_string(tp * pp));
  job.tp = static_cast<int>(tp);
  job.pp = static_cast<int>(pp);
  job.dp = static_cast<int>(devices / (tp * pp));
  job.strategy = ddp.ddp ? ddp.ddp->name : job.dp > 1 ? "bucketed" : "none";
  job.bucket_mb = ddp.bucket_mb;
  job.sharding = ddp.sharding;
  job.grad_comm_bf16 = ddp.grad_comm == parallel::GradComm::BF16;
  job.grad_bf16 = grad_dtype_of(storage) == DType::BF16;
  job.residual_bf16 = residual_dtype_of(storage) == DType::BF16;

  plan::Cluster cluster = plan::cluster_preset(preset);
  auto positive = [&](const char* flag, double v) {
    PT_CHECK(std::isfinite(v) && v > 0, std::string("--") + flag + " must be a positive number");
  };
  if (vm->count("gpus-per-node")) {
    positive("gpus-per-node", static_cast<double>(gpus_per_node));
    cluster.gpus_per_node = static_cast<int>(gpus_per_node);
  }
  if (vm->count("memory-gb")) positive("memory-gb", cluster.device.memory_gb = memory_gb);
  if (vm->count("peak-tflops")) {
    positive("peak-tflops", peak_tflops);
    cluster.device.fp32_tflops = cluster.device.tf32_tflops = cluster.device.bf16_tflops = peak_tflops;
    cluster.device.fp8_tflops = kFp8PeakPerBf16 * peak_tflops;  // mfu_peaks' rule for --peak-tflops
  }
  if (vm->count("hbm-gbps")) positive("hbm-gbps", cluster.device.hbm_gbps = hbm_gbps);
  if (vm->count("link-gbps")) positive("link-gbps", cluster.device.link_gbps = link_gbps);
  if (vm->count("inter-node-gbps")) positive("inter-node-gbps", cluster.inter_node_gbps = inter_gbps);

  const plan::Result r = plan::plan(job, cluster);
  PlanTables tables = plan_tables(r);
  io::ResultTable &memory = tables.memory, &comm = tables.comm, &time = tables.time;
  if (format == "json") {
    print_json(r, std::cout);
  } else {
    std::cout << "plan: " << model_name << " (d_model " << r.job.model.d_model << ", d_ff " << r.job.model.d_ff << ", "
              << r.job.model.num_layers << " layers, " << r.job.model.num_heads << " heads, vocab "
              << r.job.model.vocab_size << "; " << r.job.model.num_params() << " parameters), context "
              << r.job.model.context_length << ", batch " << batch << " × " << grad_accum << " per device, "
              << precision << ", " << r.job.devices() << " × " << cluster.device.preset << " (dp " << r.job.dp
              << ", tp " << tp << ", pp " << pp << "), --ddp " << r.job.strategy << ", sharding "
              << plan::sharding_name(r.job.sharding) << "\n";
    for (const auto& n : r.notes) std::cout << "note: " << n << "\n";
    memory.print(std::cout);
    std::cout << "\n";
    if (!r.comm.empty()) {
      comm.print(std::cout);
      std::cout << "\n";
    }
    time.print(std::cout);
  }
  if (!out.empty()) {
    io::RunRecord record("plan", out, overwrite);
    Context ctx(Device::cpu());
    record.collect_environment(ctx);
    record.set_options(options_as_strings(*vm));
    record.add_table(memory);
    record.add_table(comm);
    record.add_table(time);
    record.commit();
    if (format == "table") std::cout << "results: " << record.path() << std::endl;
  }
  return 0;
}

}  // namespace pt::cli
