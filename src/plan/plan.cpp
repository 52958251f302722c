#include "plan/plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/context_memory.h"
#include "core/enum_names.h"
#include "core/error.h"
#include "cuda/flash/flash_params.h"
#include "optim/sharded_optimizer.h"
#include "parallel/grad_sync.h"
#include "parallel/strategies.h"
#include "parallel/zero1.h"

namespace pt::plan {

namespace {

constexpr EnumName<Sharding> kShardings[] = {{Sharding::None, "none"},
                                             {Sharding::Broadcast, "broadcast"},
                                             {Sharding::Zero1, "zero1"},
                                             {Sharding::Zero2, "zero2"},
                                             {Sharding::Zero3, "zero3"}};

// Bytes and calls are counted in int64_t: a job whose figure (one tensor, a memory category
// summed over layers and micro-batches, a collective's calls or bytes) reaches this is refused as
// too large to count, computed in double before any product could overflow.
constexpr double kMaxCounted = 0x1p58;

int64_t counted(double n) {
  if (n < kMaxCounted) return static_cast<int64_t>(n);
  char figure[32];
  std::snprintf(figure, sizeof figure, "%.3g", n);
  PT_FAIL(std::string("plan: the job needs ") + figure +
          " bytes (or calls) of one kind per device, too many to count: lower --batch-size, --grad-accum, "
          "--context-length or the model's size");
}

// The tracking allocator's accounting of one allocation (core/allocator.cpp).
struct Rounding {
  int64_t granularity;
  int64_t operator()(double bytes) const {
    const int64_t b = counted(std::ceil(bytes));
    return b <= 0 ? 0 : (b + granularity - 1) / granularity * granularity;
  }
};

std::vector<parallel::GradSpan> spans_of(const std::vector<ParamShape>& shapes) {
  std::vector<parallel::GradSpan> out;
  int64_t offset = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    out.push_back({static_cast<int>(i), offset, shapes[i].numel, true});
    offset += shapes[i].numel;
  }
  return out;
}

// Activations of one micro-batch (transformer.cpp's saved tensors and its backward's two
// largest moments): the peak of the step and what forward leaves for backward.
struct Activations {
  int64_t peak = 0, saved = 0;
};
// residual: bytes of a residual-stream element (4, or 2 with --residual-dtype bf16). fp8: the
// inputs only their Linear holds (the norms' outputs, the SwiGLU product) are saved as their dW
// casts, a byte a value (model/fp8_linear.h: fp8_forward_input).
Activations activations(const TransformerConfig& m, int64_t batch, bool lowp, bool fp8, double residual,
                        const Rounding& r, int tp, int pp) {
  const double B = static_cast<double>(batch), T = static_cast<double>(m.context_length);
  const double N = B * T, C = static_cast<double>(m.d_model), F = static_cast<double>(m.d_ff / tp),
               V = static_cast<double>(m.vocab_size), H = static_cast<double>(m.num_heads / tp);
  const double Cl = C / tp;         // the tensor-parallel share of q/k/v and attention output columns
  const double a = lowp ? 2 : 4;    // GEMM activations: bf16 in bf16 mode, else fp32
  const double kept = fp8 ? 1 : a;  // a Linear's own saved input
  // Summed in double (each term is a counted int64_t), then counted: no sum overflows.
  double block = r(N * C * residual)  // the block's output (the next block's input), the residual stream
                 + r(N * 4)           // ln1's rstd
                 + r(N * 3 * Cl * a)  // q, k (rotated), v
                 + r(N * Cl * a)      // attention output
                 + (m.attention == AttentionImpl::Flash ? r(B * H * T * 4)       // logsumexp
                                                        : r(B * H * T * T * a))  // softmax
                 + r(N * C * residual)                                           // h = x + attention branch
                 + r(N * 4)                                                      // ln2's rstd
                 + 2 * r(N * F * a);                                             // SwiGLU inputs h1, h3
  if (m.recompute != Recompute::All) block += 2 * r(N * C * kept);               // ln1 and ln2 outputs
  if (m.recompute == Recompute::Off) block += r(N * F * kept);                   // SwiGLU product
  const double layers = static_cast<double>(m.num_layers / pp);
  const double head = r(N * C * residual)                        // the embedding output (block 0's input)
                      + r(N * 4) + r(N * C * a) + r(N * V * a);  // ln_final rstd, its output, logits
  Activations out;
  out.saved = counted(layers * block + head);
  // Backward's two largest moments: the lm_head's input gradient beside the logits, or the
  // last block's SwiGLU gradients (dy cast, dg, dh1, dh3) once the logits are gone.
  const double at_head = static_cast<double>(out.saved) + r(N * C * a);
  const double at_ffn = static_cast<double>(out.saved) - r(N * V * a) - r(N * C * a) - r(N * 4) +
                        (lowp ? r(N * C * a) : 0) + 3.0 * r(N * F * a);
  out.peak = counted(std::max(at_head, at_ffn));
  return out;
}

// Optimizer state on rank 0: AdamW's two moments over each range its optimizer steps.
int64_t optimizer_state(const Job& job, const std::vector<ParamShape>& shapes, int64_t numel, const Rounding& r) {
  auto moments = [&](double elems) { return 2 * r(elems * 4); };
  switch (job.sharding) {
    case Sharding::None: return moments(static_cast<double>(numel));  // one range: the whole buffer
    case Sharding::Broadcast: {
      std::vector<int64_t> numels;
      for (const ParamShape& s : shapes) numels.push_back(s.numel);
      const std::vector<int> owner = broadcast_owners(numels, job.dp);
      int64_t bytes = 0;
      for (size_t i = 0; i < numels.size(); ++i)
        if (owner[i] == 0) bytes += moments(static_cast<double>(numels[i]));
      return bytes;
    }
    case Sharding::Zero1: {
      const parallel::Zero1Layout layout(spans_of(shapes), job.dp,
                                         job.dp == 1 ? parallel::Zero1Layout::kOneBucket
                                                     : parallel::strategy(job.strategy).zero1_bucket_mb(job.bucket_mb));
      int64_t bytes = 0;
      for (const auto& [lo, hi] : layout.owned(0)) bytes += moments(static_cast<double>(hi - lo));
      return bytes;
    }
    case Sharding::Zero2:
    case Sharding::Zero3: return moments(static_cast<double>(numel) / job.dp);
  }
  return 0;
}

double bandwidth_gbps(const Job& job, const Cluster& c, int group) {
  // A group of ranks inside one node talks over the node's links; one spanning nodes is held to
  // the network. Data-parallel groups span nodes first (tensor and pipeline groups are inner).
  const bool within_node = job.devices() <= c.gpus_per_node || group * job.tp * job.pp <= c.gpus_per_node;
  return within_node ? c.device.link_gbps : std::min(c.device.link_gbps, c.inter_node_gbps);
}

void validate(const Job& j) {
  const TransformerConfig& m = j.model;
  PT_CHECK(j.batch >= 1, "plan: --batch-size must be at least 1 (got " + std::to_string(j.batch) + ")");
  PT_CHECK(j.grad_accum >= 1, "plan: --grad-accum must be at least 1 (got " + std::to_string(j.grad_accum) + ")");
  PT_CHECK(j.dp >= 1 && j.tp >= 1 && j.pp >= 1, "plan: device counts and parallel degrees must be at least 1");
  PT_CHECK(m.num_heads % j.tp == 0 && m.d_ff % j.tp == 0, "plan: tensor-parallel degree " + std::to_string(j.tp) +
                                                              " must divide the heads (" + std::to_string(m.num_heads) +
                                                              ") and d_ff (" + std::to_string(m.d_ff) + ")");
  // The parameters are laid out one by one (buckets, shards): a bound on the layers keeps plan instant.
  PT_CHECK(m.num_layers <= kMaxPlanLayers, "plan: --num-layers " + std::to_string(m.num_layers) + " is above the " +
                                               std::to_string(kMaxPlanLayers) +
                                               " layers plan lays out (the deepest models have a few hundred)");
  PT_CHECK(m.num_layers % j.pp == 0, "plan: pipeline degree " + std::to_string(j.pp) + " must divide the " +
                                         std::to_string(m.num_layers) + " layers");
  parallel::strategy(j.strategy);  // names every strategy when the name is unknown
  PT_CHECK(j.bucket_mb >= 0, "plan: --bucket-mb must be >= 0");
  // The byte counts below are int64: a job whose memory a device could exceed 2^60 bytes (an
  // upper bound, in double: every parameter's 16 bytes, every activation at 4 bytes, the naive
  // scores, the logits) is refused before any of them could overflow.
  const double B = static_cast<double>(j.batch), T = static_cast<double>(m.context_length),
               C = static_cast<double>(m.d_model), F = static_cast<double>(m.d_ff),
               V = static_cast<double>(m.vocab_size), H = static_cast<double>(m.num_heads),
               L = static_cast<double>(m.num_layers);
  const double params = 2 * V * C + L * (4 * C * C + 3 * C * F + 2 * C) + C;
  const double activations = L * B * T * (16 * C + 6 * F + 4 + H * T) * 4 + B * T * (3 * C + V + 1) * 4;
  PT_CHECK(params * 16 + activations < 0x1p60,
           "plan: the job is too large to plan: a device's memory could exceed 2^60 bytes (--batch-size " +
               std::to_string(j.batch) + ", --context-length " + std::to_string(m.context_length) + ", --d-model " +
               std::to_string(m.d_model) + ", --num-layers " + std::to_string(m.num_layers) + ", --num-heads " +
               std::to_string(m.num_heads) + ", --d-ff " + std::to_string(m.d_ff) + ", --vocab-size " +
               std::to_string(m.vocab_size) + ")");
}

// The data-parallel collectives of one optimizer step over n = job.dp ranks, handed to add
// (name, what, calls, bytes, bus factor, GB/s); local: this device's parameter elements.
template <class Add>
void add_data_parallel_collectives(const Job& job, const parallel::StrategySpec& spec,
                                   const std::vector<ParamShape>& shapes, double local, double grad_wire, bool lowp,
                                   double dp_bw, Add&& add) {
  const TransformerConfig& m = job.model;
  const int n = job.dp;
  if (n <= 1 || spec.buckets == parallel::BucketPolicy::None) return;
  const double ring = 2.0 * (n - 1) / n, half = double(n - 1) / n;
  const std::vector<parallel::GradSpan> spans = spans_of(shapes);
  const double grad_bytes = local * grad_wire;
  switch (job.sharding) {
    case Sharding::None:
    case Sharding::Broadcast: {
      const int64_t calls = spec.buckets == parallel::BucketPolicy::One ? 1
                            : spec.buckets == parallel::BucketPolicy::Capped
                                ? static_cast<int64_t>(parallel::plan_buckets(spans, job.sharding == Sharding::Broadcast
                                                                                         ? parallel::kDefaultBucketMB
                                                                                         : job.bucket_mb)
                                                           .size())
                                : static_cast<int64_t>(shapes.size());
      add("all_reduce", "gradients", calls, grad_bytes, ring, dp_bw);
      if (job.sharding == Sharding::Broadcast)
        add("broadcast", "parameters", static_cast<int64_t>(shapes.size()), local * 4, half, dp_bw);
      break;
    }
    case Sharding::Zero1: {
      const parallel::Zero1Layout layout(spans, n, spec.zero1_bucket_mb(job.bucket_mb));
      const double tail = static_cast<double>(layout.numel - layout.tail_begin);
      add("reduce_scatter", "gradients", static_cast<int64_t>(layout.buckets.size()),
          static_cast<double>(layout.tail_begin) * grad_wire, half, dp_bw);
      if (tail > 0) add("all_reduce", "gradient tail", 1, tail * grad_wire, ring, dp_bw);
      // With a bf16 mirror the gathers move the mirror (optim/zero1_optimizer.h).
      add("all_gather", "parameters", static_cast<int64_t>(layout.buckets.size()), local * (lowp ? 2 : 4), half, dp_bw);
      break;
    }
    case Sharding::Zero2:
      add("reduce_scatter", "gradients", 1, grad_bytes, half, dp_bw);
      add("all_gather", "parameters", 1, local * 4, half, dp_bw);
      break;
    case Sharding::Zero3:  // parameters gathered in forward and again in backward (bf16 copies in bf16)
      add("all_gather", "parameters", 2 * m.num_layers / job.pp, 2 * local * (lowp ? 2 : 4), half, dp_bw);
      add("reduce_scatter", "gradients", m.num_layers / job.pp, grad_bytes, half, dp_bw);
      break;
  }
}

}  // namespace

const char* sharding_name(Sharding s) { return enum_name(kShardings, s); }
Sharding sharding_from_name(const std::string& name) { return enum_from_name(kShardings, name, "--shard-optimizer"); }
bool sharding_runs_in_paratrain(Sharding s) { return s != Sharding::Zero2 && s != Sharding::Zero3; }

Result plan(const Job& job, const Cluster& cluster) {
  validate(job);
  job.model.validate();
  Result res;
  res.job = job;
  res.cluster = cluster;
  const TransformerConfig& m = job.model;
  const bool bf16 = is_bf16_mixed(job.precision);
  PT_CHECK(!(bf16 && cluster.cpu), "plan: bf16 runs on GPUs only (the CPU backend computes in fp32)");
  const bool lowp = bf16 && !cluster.cpu;
  const Rounding r{cluster.cpu ? 64 : 512};
  const int model_par = job.tp * job.pp;
  res.implemented = sharding_runs_in_paratrain(job.sharding) && model_par == 1;
  if (!sharding_runs_in_paratrain(job.sharding))
    res.notes.push_back(std::string(sharding_name(job.sharding)) + " is not implemented in paratrain: estimate");
  if (job.tp > 1) res.notes.push_back("tensor parallelism is not implemented in paratrain: estimate");
  if (job.pp > 1) res.notes.push_back("pipeline parallelism is not implemented in paratrain: estimate");
  // Unsharded, the FP8 weights' casts take their bf16 copies' bytes (ParamStore::fp8_weight);
  // sharded, the layers cast at use and keep the casts through a step of several micro-batches.
  if (job.precision == Precision::FP8 && job.grad_accum > 1 && job.sharding != Sharding::None)
    res.notes.push_back("fp8: the FP8 weight casts a sharded step of several micro-batches keeps (2 bytes per FP8 "
                        "weight) are not counted");

  // ---- memory ----
  const std::vector<ParamShape> shapes = transformer_param_shapes(m);
  int64_t numel = 0;
  for (const ParamShape& s : shapes) numel += s.numel;
  const double local = static_cast<double>(numel) / model_par;  // this device's share under TP/PP
  Memory& mem = res.memory;
  // Parameters, their bf16 copy, gradients and optimizer state for `dp` data-parallel ranks: the
  // part of the memory that sharding divides (the fit search below varies dp alone).
  PT_CHECK(!job.grad_bf16 || lowp, "plan: bf16 gradients need bf16 precision on GPUs (--grad-dtype bf16)");
  const double grad_bytes = job.grad_bf16 ? 2 : 4;  // per gradient element, in memory
  auto set_model_state = [&](Memory& into, int dp) {
    Job j = job;
    j.dp = dp;
    const double fsdp = j.sharding == Sharding::Zero3 ? dp : 1;
    into.params = r(local * 4 / fsdp);
    into.params_lowp = lowp ? r(local * 2 / fsdp) : 0;
    into.grads = r(local * grad_bytes / (j.sharding == Sharding::Zero2 || j.sharding == Sharding::Zero3 ? dp : 1));
    into.optstate = model_par == 1 ? optimizer_state(j, shapes, numel, r)
                                   : 2 * r(local * 4 / (j.sharding == Sharding::None ? 1 : dp));
  };
  set_model_state(mem, job.dp);
  PT_CHECK(!job.residual_bf16 || lowp,
           "plan: a bf16 residual stream needs bf16 precision on GPUs (--residual-dtype bf16)");
  const double residual_bytes = job.residual_bf16 ? 2 : 4;
  const bool fp8_act = job.precision == Precision::FP8 && lowp;
  const Activations act = activations(m, job.batch, lowp, fp8_act, residual_bytes, r, job.tp, job.pp);
  // 1F1B pipelining keeps up to pp micro-batches of a stage's activations alive.
  const int64_t in_flight = job.pp > 1 ? std::min<int64_t>(job.pp, job.grad_accum) : 1;
  mem.activations = counted(act.peak + static_cast<double>(in_flight - 1) * act.saved);
  mem.activations_saved = counted(static_cast<double>(act.saved) * in_flight);
  // cuBLAS's workspace, GPUs only (core/context_memory.h).
  mem.workspace = cluster.cpu || cluster.device.cc_major == 0 ? 0 : int64_t(kCublasWorkspaceBytes);
  for (int rc = 0; rc < kNumRecompute; ++rc)
    for (int at = 0; at < kNumAttentionChoices; ++at) {
      TransformerConfig alt = m;
      alt.recompute = kRecomputeChoices[rc];
      alt.attention = kAttentionChoices[at];
      const bool flash_ok = m.d_model % m.num_heads == 0 && cuda::flash_covers_head_dim(m.d_head());
      if (at == 0 && !flash_ok) continue;
      const Activations x = activations(alt, job.batch, lowp, fp8_act, residual_bytes, r, job.tp, job.pp);
      mem.activations_by_choice[rc][at] = counted(x.peak + static_cast<double>(in_flight - 1) * x.saved);
    }

  // ---- communication, per optimizer step ----
  const double grad_wire = job.grad_comm_bf16 || job.grad_bf16 ? 2 : 4;
  const int n = job.dp;
  auto add = [&](const char* name, const char* what, int64_t calls, double bytes, double factor, double gbps) {
    Collective c{name, what, calls, counted(bytes), factor, 0.0};
    c.seconds = gbps > 0 ? bytes * factor / (gbps * 1e9) : 0;
    res.comm.push_back(c);
  };
  const parallel::StrategySpec& spec = parallel::strategy(job.strategy);
  const double dp_bw = bandwidth_gbps(job, cluster, n);
  add_data_parallel_collectives(job, spec, shapes, local, grad_wire, lowp, dp_bw, add);
  const double a = lowp ? 2 : 4;
  const double N = static_cast<double>(job.batch) * static_cast<double>(m.context_length);
  if (job.tp > 1) {  // Megatron: 2 all-reduces of (N, C) per layer in forward, 2 in backward
    const double t = job.tp;
    add("all_reduce", "tensor-parallel activations", counted(4.0 * (m.num_layers / job.pp) * job.grad_accum),
        4.0 * m.num_layers / job.pp * N * m.d_model * a * job.grad_accum, 2.0 * (t - 1) / t, cluster.device.link_gbps);
  }
  if (job.pp > 1)  // each micro-batch's activations forward and their gradients back, per stage boundary
    add("p2p", "pipeline activations", counted(2.0 * job.grad_accum), 2.0 * N * m.d_model * a * job.grad_accum, 1.0,
        bandwidth_gbps(job, cluster, job.pp));

  // ---- time ----
  // fp8: the FP8 table's Linear GEMMs at the FP8 peak, the rest (attention, the LM head) at
  // bf16's; MFU on the bf16 scale (mfu_scale), and against the FP8 peak beside it.
  const bool fp8 = job.precision == Precision::FP8;
  const double peak = cluster.device.peak_tflops(mfu_scale(job.precision)) * 1e12;
  const double fp8_peak = fp8 ? cluster.device.peak_tflops(Precision::FP8) * 1e12 : 0;
  PT_CHECK(!fp8 || fp8_peak > 0, "plan: --precision fp8 needs FP8 tensor cores, and " + cluster.device.preset +
                                     " has none (its fp8_tflops in src/core/accelerators.tsv is 0)");
  const double seq_flops = m.train_flops_per_token(m.context_length) * m.context_length / model_par;
  const double seq_fp8_flops = fp8 ? m.fp8_train_flops_per_token() * m.context_length / model_par : 0;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Seconds of one sequence's FLOPs at the peaks.
  const double seq_s = peak > 0 ? (seq_flops - seq_fp8_flops) / peak + (fp8 ? seq_fp8_flops / fp8_peak : 0) : nan;
  const double seqs = static_cast<double>(job.batch * job.grad_accum);
  res.flops_per_step = seq_flops * seqs;
  res.fp8_flops_per_step = seq_fp8_flops * seqs;
  res.compute_s = seq_s * seqs;
  // The optimizer's pass: fp32 weight, two moments and the gradient (fp32 or bf16) read; weight,
  // moments written; bf16 copy.
  const double opt_elems = local / (job.sharding == Sharding::None ? 1 : n);
  res.hbm_s = cluster.device.hbm_gbps > 0
                  ? opt_elems * (12 + grad_bytes + 12 + (lowp ? 2 : 0)) / (cluster.device.hbm_gbps * 1e9)
                  : nan;
  double dp_comm = 0, other_comm = 0;
  for (const Collective& c : res.comm)
    (c.what.find("tensor") != std::string::npos || c.what.find("pipeline") != std::string::npos ? other_comm
                                                                                                : dp_comm) += c.seconds;
  res.comm_s = dp_comm + other_comm;
  const bool overlapped = spec.overlapped;
  const double backward_s = std::isnan(res.compute_s) ? 0 : res.compute_s * 2.0 / 3.0;
  res.exposed_comm_s = (overlapped ? std::max(0.0, dp_comm - backward_s) : dp_comm) + other_comm;
  const double bubble = job.pp > 1 ? res.compute_s * (job.pp - 1) / static_cast<double>(job.grad_accum) : 0;
  res.step_s = res.compute_s + res.hbm_s + res.exposed_comm_s + bubble;
  res.mfu = mfu_of(res.flops_per_step / res.step_s, peak);
  res.mfu_fp8 = fp8 ? mfu_of(res.flops_per_step / res.step_s, fp8_peak) : nan;
  if (dp_comm > 0 && peak > 0) {
    const double backward_per_seq = seq_s * job.grad_accum * 2.0 / 3.0;
    res.hiding_batch = static_cast<int64_t>(std::ceil(dp_comm / backward_per_seq));
  }

  // ---- fit ----
  const double capacity = cluster.device.memory_gb * 1e9;
  res.fits = static_cast<double>(mem.total()) <= capacity;
  for (int d = 1; d <= 65536 && res.min_devices_to_fit == 0; d *= 2) {
    Memory mm = mem;
    set_model_state(mm, d);
    if (static_cast<double>(mm.total()) <= capacity) res.min_devices_to_fit = d * model_par;
  }
  return res;
}

Cluster cluster_preset(const std::string& name) {
  Cluster c;
  if (name == "cpu") {  // paratrain's CPU backend (this project's CI machines: 24 GB)
    c.device.preset = "cpu";
    c.device.description = "CPU ranks over MPI";
    c.device.memory_gb = 24;
    c.cpu = true;
    c.gpus_per_node = 1;
    return c;
  }
  const AcceleratorSpec* s = find_accelerator_spec(name);
  if (!s)
    PT_FAIL("plan: unknown cluster preset '" + name +
            "' (known: cpu and every accelerator of "
            "src/core/accelerators.tsv: see paratrain plan --help)");
  c.device = *s;
  // Node sizes and networks as clusters of each kind are commonly built: HGX/DGX nodes of 8
  // GPUs with one 400 Gb/s NIC per GPU; PCIe cards 4 per node on 200 Gb/s; TPU v5p 4 chips per
  // host, hosts joined by the same ICI torus.
  const std::string p = s->preset;
  if (p == "tpu-v5p") {
    c.gpus_per_node = 4;
    c.inter_node_gbps = s->link_gbps;
  } else if (p == "l40s" || p.find("pcie") != std::string::npos) {
    c.gpus_per_node = 4;
    c.inter_node_gbps = 25;
  } else {
    c.gpus_per_node = 8;
    c.inter_node_gbps = 50;
  }
  return c;
}

std::vector<std::string> cluster_preset_names() {
  std::vector<std::string> out = {"cpu"};
  for (const AcceleratorSpec& s : accelerator_specs()) out.push_back(s.preset);
  return out;
}

}  // namespace pt::plan
