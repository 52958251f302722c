// `paratrain bench attention`: latency and memory of naive and flash attention over a sweep.
//
// Studies (presets; every dimension can be replaced by its flag):
//   naive         naive attention, batch 8, one head, d ∈ {16,32,64,128} × T ∈ {256 … 16384}, fp32
//   flash         flash vs naive, batch 1, causal, T = 128 … 65536 (powers of two),
//                 d ∈ {16,32,64,128} × {bf16, fp32}
//   leaderboard   flash only, batch 1, 16 heads, T 16384, d 64, bf16, causal, dO = ones
// Layouts (`--layout`): heads — q, k, v, out, dO and the gradients each a (B, H, T, D) tensor of
// its own; model — the transformer's: q, k, v the heads of one (B, T, 3, H, D) buffer (the QKV
// GEMM's output), out and dO (B, T, H, D), dq, dk, dv into one (B, T, 3, H, D) buffer, and flash's
// backward turning dq and dk back by RoPE's inverse as it stores them.
// Protocol per configuration and implementation: one forward, then the memory in use (the
// inputs, outputs and what the forward saved for backward: memory just before backward); then
// `--warmup` forward+backward passes; then `--steps` timed forward passes, backward passes and
// forward+backward passes, each timed alone with CUDA events and synchronised; medians
// reported. A configuration that runs out of memory is recorded as OOM with the bytes asked for,
// and the sweep goes on.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "bench/inputs.h"
#include "cli/bench_sweep.h"
#include "cli/options.h"
#include "cli/subcommands.h"
#include "core/allocator.h"
#include "core/context.h"
#include "core/error.h"
#include "core/timing.h"
#include "io/run_record.h"
#include "io/table.h"
#include "ops/attention.h"
#include "ops/flash_attention.h"
#include "ops/rope.h"
#include "parallel/runtime.h"

namespace pt::cli {

namespace {

struct Sweep {
  std::vector<std::string> impls;
  std::vector<int64_t> batch, heads, seq, head_dim;
  std::vector<std::string> dtypes;
  bool causal = false;
  std::string dout = "randn";    // randn | ones
  std::string layout = "heads";  // heads | model (the header comment)
};

Sweep preset(const std::string& study) {
  if (study == "naive")
    return {{"naive"}, {8}, {1}, {256, 1024, 4096, 8192, 16384}, {16, 32, 64, 128}, {"fp32"}, false};
  if (study == "flash") {
    std::vector<int64_t> seq;
    for (int64_t t = 128; t <= 65536; t *= 2) seq.push_back(t);
    return {{"flash", "naive"}, {1}, {1}, seq, {16, 32, 64, 128}, {"bf16", "fp32"}, true};
  }
  if (study == "leaderboard") return {{"flash"}, {1}, {16}, {16384}, {64}, {"bf16"}, true, "ones"};
  PT_FAIL("--study must be naive, flash or leaderboard (got '" + study + "')");
}

struct Config {
  std::string impl, kernel, dtype;
  int64_t B, H, T, D;
  bool causal;
  std::string layout;
};

// RoPE's base for the model layout's inverse rotation (the model's default; the time does not
// depend on it).
constexpr double kRopeTheta = 10000.0;

// The (B, H, T, D) view of slot `which` of a (B·T, slots·H·D) buffer laid out (B, T, slots, H, D):
// q, k or v in the QKV GEMM's output (slots 3), or O and dO (slots 1).
Tensor heads_view(const Tensor& buf, const Config& c, int64_t slots, int64_t which) {
  const int64_t C = c.H * c.D;
  return buf.as_strided({c.B, c.H, c.T, c.D}, {c.T * slots * C, c.D, slots * C, 1}, which * C);
}

// The tensors one configuration times, in its layout (the header comment).
struct AttentionTensors {
  Tensor q, k, v, dout, out, dq, dk, dv;
  std::optional<ops::RopeTable> unrotate;  // model layout: dq, dk turned back in flash's stores

  AttentionTensors(Context& ctx, const Config& c, DType dt, uint64_t seed, const std::string& dout_kind) {
    using bench::bench_values;
    using bench::filled;
    const Shape shape{c.B, c.H, c.T, c.D};
    const int64_t n = shape_numel(shape), C = c.H * c.D;
    const std::vector<double> dout_values =
        dout_kind == "ones" ? std::vector<double>(n, 1.0) : bench_values(n, seed + 3);
    if (c.layout == "heads") {
      q = filled(ctx, shape, dt, bench_values(n, seed), "q");
      k = filled(ctx, shape, dt, bench_values(n, seed + 1), "k");
      v = filled(ctx, shape, dt, bench_values(n, seed + 2), "v");
      dout = filled(ctx, shape, dt, dout_values, "dout");
      out = Tensor::empty(shape, dt, ctx.device(), "out");
      return;
    }
    Tensor qkv = filled(ctx, {c.B * c.T, 3 * C}, dt, bench_values(3 * n, seed), "qkv");
    q = heads_view(qkv, c, 3, 0), k = heads_view(qkv, c, 3, 1), v = heads_view(qkv, c, 3, 2);
    dout = heads_view(filled(ctx, {c.B * c.T, C}, dt, dout_values, "dout"), c, 1, 0);
    out = heads_view(Tensor::empty({c.B * c.T, C}, dt, ctx.device(), "out"), c, 1, 0);
    unrotate = ops::rope_table(ctx, c.T, c.D, kRopeTheta);
  }
  // The gradients' buffers, allocated after the forward (memory before backward excludes them).
  void allocate_gradients(Context& ctx, const Config& c, DType dt) {
    const Shape shape{c.B, c.H, c.T, c.D};
    if (c.layout == "heads") {
      dq = Tensor::empty(shape, dt, ctx.device(), "dq");
      dk = Tensor::empty(shape, dt, ctx.device(), "dk");
      dv = Tensor::empty(shape, dt, ctx.device(), "dv");
      return;
    }
    Tensor dqkv = Tensor::empty({c.B * c.T, 3 * c.H * c.D}, dt, ctx.device(), "dqkv");
    dq = heads_view(dqkv, c, 3, 0), dk = heads_view(dqkv, c, 3, 1), dv = heads_view(dqkv, c, 3, 2);
  }
};

// The standard count: forward 4·Tq·Tk·d per head (two matmuls), halved when causal; backward 2.5×.
double forward_flops(const Config& c) {
  const double f = 4.0 * static_cast<double>(c.T) * static_cast<double>(c.T) * c.D * c.B * c.H;
  return c.causal ? f / 2 : f;
}

double median(const std::vector<double>& v) { return summarize(v).median; }

struct Protocol {
  int warmup = 10, iters = 100;
  double budget_ms = 0;  // per timed phase; 0 = no limit
};

struct Measurement {
  std::string status = "ok";
  double fwd_ms = NAN, bwd_ms = NAN, fwdbwd_ms = NAN;
  int64_t iters = 0;
  int64_t mem_before_bwd = -1, peak = -1, oom_request = 0;
};

// Timed repetitions of f: up to `iters`, fewer when the phase has used up its budget.
template <typename F>
std::vector<double> repeat(StreamClock& timer, const Protocol& pr, F&& f) {
  std::vector<double> ms;
  double total = 0;
  for (int i = 0; i < pr.iters; ++i) {
    ms.push_back(timer.time_ms(f));
    total += ms.back();
    if (pr.budget_ms > 0 && total > pr.budget_ms) break;
  }
  return ms;
}

Measurement measure(Context& ctx, const Config& c, const std::string& dout_kind, const Protocol& pr, uint64_t seed) {
  Measurement r;
  auto& alloc = TrackingAllocator::instance();
  const DeviceKind kind = ctx.device().kind;
  alloc.empty_cache();
  alloc.reset_peak(kind);
  const int64_t base = alloc.stats(kind).in_use;  // the context's own buffers (cuBLAS workspace)
  try {
    TrackingAllocator::Scope scope("bench_attention", MemCategory::Activations);
    const DType dt = dtype_from_name(c.dtype);
    AttentionTensors a(ctx, c, dt, seed, dout_kind);
    Tensor &q = a.q, &k = a.k, &v = a.v, &dout = a.dout, &out = a.out, &dq = a.dq, &dk = a.dk, &dv = a.dv;
    const ops::RopeTable* unrotate = a.unrotate ? &*a.unrotate : nullptr;
    const bool flash = c.impl == "flash";
    // Saved for backward: the logsumexp (flash) or the probabilities (naive, q's dtype as autocast).
    Tensor saved = flash ? Tensor::empty({c.B, c.H, c.T}, DType::F32, ctx.device(), "lse")
                         : Tensor::empty({c.B, c.H, c.T, c.T}, dt, ctx.device(), "probs");
    auto forward = [&] {
      if (flash)
        ops::flash_attention_forward(ctx, out, saved, q, k, v, c.causal);
      else
        ops::naive_attention_forward(ctx, out, saved, q, k, v, c.causal);
    };
    auto backward = [&] {
      if (flash)
        ops::flash_attention_backward(ctx, dq, dk, dv, dout, q, k, v, out, saved, c.causal, unrotate);
      else
        ops::naive_attention_backward(ctx, dq, dk, dv, dout, q, k, v, saved, c.causal);
    };
    forward();
    ctx.synchronize();
    r.mem_before_bwd = alloc.stats(kind).in_use - base;
    a.allocate_gradients(ctx, c, dt);
    for (int i = 0; i < pr.warmup; ++i) {
      forward();
      backward();
    }
    ctx.synchronize();
    StreamClock timer(ctx, 2);
    const auto f = repeat(timer, pr, forward);
    const auto b = repeat(timer, pr, backward);
    const auto fb = repeat(timer, pr, [&] {
      forward();
      backward();
    });
    r.fwd_ms = median(f);
    r.bwd_ms = median(b);
    r.fwdbwd_ms = median(fb);
    r.iters = static_cast<int64_t>(std::min({f.size(), b.size(), fb.size()}));
  } catch (const OutOfMemory& e) {
    r.status = "OOM";
    r.oom_request = static_cast<int64_t>(e.requested_bytes);
  }
  if (ctx.is_cuda()) ctx.synchronize();
  r.peak = alloc.stats(kind).peak - base;
  alloc.empty_cache();
  return r;
}

// The phases timed per configuration: <name>_ms and <name>_tflops, with FLOPs a multiple of
// the forward's.
struct TimedPhase {
  const char* name;
  double Measurement::*ms;
  double flops_factor;
  const char* latency;  // descriptions
  const char* flops;
};
constexpr TimedPhase kTimedPhases[] = {
    {"fwd", &Measurement::fwd_ms, 1.0, "forward latency, median, ms",
     "4·T²·d·B·H (halved if causal) / fwd time, TFLOP/s"},
    {"bwd", &Measurement::bwd_ms, 2.5, "backward latency, median, ms", "2.5 × forward FLOPs / bwd time, TFLOP/s"},
    {"fwdbwd", &Measurement::fwdbwd_ms, 3.5, "forward + backward latency, median, ms",
     "3.5 × forward FLOPs / fwd+bwd time, TFLOP/s"}};

io::ResultTable make_table() {
  io::ResultTable t("attention", "latency (median over timed passes) and memory of naive and flash attention");
  t.add_string("impl", "naive | flash")
      .add_string("kernel",
                  "the kernels that ran: wgmma <tiles F/K/Q> | mma.sync (bf16), simt (fp32), cpu; naive for naive")
      .add_string("dtype", "element type of q, k, v, out and the gradients")
      .add_int("batch", "batch size B")
      .add_int("heads", "heads H")
      .add_int("seq", "sequence length T (queries = keys)")
      .add_int("head_dim", "head dimension d")
      .add_int("causal", "1 = causal mask")
      .add_string("layout", "heads (q, k, v each (B, H, T, D)) | model (the transformer's fused QKV, RoPE undone in "
                            "flash's backward stores)")
      .add_string("status", "ok | OOM (see oom_request_bytes)");
  for (const TimedPhase& p : kTimedPhases) t.add_double(std::string(p.name) + "_ms", p.latency, 3);
  for (const TimedPhase& p : kTimedPhases) t.add_double(std::string(p.name) + "_tflops", p.flops, 1);
  t.add_int("iters", "timed passes per phase")
      .add_double("mem_before_bwd_MiB",
                  "memory the configuration holds just before backward (q, k, v, dO, out and what forward saved; "
                  "the context's cuBLAS workspace not counted), MiB",
                  1)
      .add_double("peak_MiB", "peak memory of the configuration (workspace not counted), MiB", 1)
      .add_int("oom_request_bytes", "bytes the failing allocation asked for (0 unless OOM)");
  return t;
}

void add_row(io::ResultTable& t, const Config& c, const Measurement& m) {
  const double f = forward_flops(c);
  auto tflops = [](double flops, double ms) { return std::isfinite(ms) ? flops / (ms * 1e9) : NAN; };
  const double mib = 1.0 / (1 << 20);
  auto row = t.add_row();
  row.set("impl", c.impl)
      .set("kernel", c.kernel)
      .set("dtype", c.dtype)
      .set("batch", c.B)
      .set("heads", c.H)
      .set("seq", c.T)
      .set("head_dim", c.D)
      .set("causal", static_cast<int64_t>(c.causal))
      .set("layout", c.layout)
      .set("status", m.status);
  for (const TimedPhase& p : kTimedPhases) row.set(std::string(p.name) + "_ms", m.*p.ms);
  for (const TimedPhase& p : kTimedPhases)
    row.set(std::string(p.name) + "_tflops", tflops(p.flops_factor * f, m.*p.ms));
  row.set("iters", m.iters)
      .set("mem_before_bwd_MiB", m.mem_before_bwd < 0 ? NAN : m.mem_before_bwd * mib)
      .set("peak_MiB", m.peak < 0 ? NAN : m.peak * mib)
      .set("oom_request_bytes", m.oom_request);
}

// A configuration that could never be measured is refused before anything is allocated: one
// whose element counts overflow 64 bits, or whose inputs, staged on the host as doubles
// (bench::bench_values: q, k, v and dO), exceed this machine's memory. One that merely does not
// fit the device is measured as OOM.
void check_sizes(const Sweep& s) {
  auto largest = [](const std::vector<int64_t>& v) { return *std::max_element(v.begin(), v.end()); };
  const int64_t B = largest(s.batch), H = largest(s.heads), T = largest(s.seq), D = largest(s.head_dim);
  const std::string sizes = "--batch-size " + std::to_string(B) + " --num-heads " + std::to_string(H) +
                            " --context-length " + std::to_string(T) + " --head-dim " + std::to_string(D);
  int64_t rows = 0, n = 0, staged = 0, scores = 0;  // B·H·T, B·H·T·D, its bytes staged, naive's B·H·T·T
  const bool overflow = __builtin_mul_overflow(B, H, &rows) || __builtin_mul_overflow(rows, T, &rows) ||
                        __builtin_mul_overflow(rows, D, &n) || __builtin_mul_overflow(n, int64_t{4 * 8}, &staged) ||
                        __builtin_mul_overflow(rows, T, &scores);
  PT_CHECK(!overflow, "bench attention: " + sizes + " is too large: its tensors' element counts overflow 64 bits");
  const double host = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
  PT_CHECK(host <= 0 || static_cast<double>(staged) <= host,
           "bench attention: " + sizes + " is too large: its inputs take " +
               std::to_string(static_cast<double>(staged) / 1e9) + " GB as doubles on the host before they reach " +
               "the device, and this machine has " + std::to_string(host / 1e9) + " GB");
}

void check_sweep(const Sweep& s, const Context& ctx) {
  const std::set<std::string> impls{"flash", "naive"};
  for (const auto& i : s.impls) PT_CHECK(impls.count(i), "--attention: '" + i + "' is not naive or flash");
  for (const auto& d : s.dtypes) {
    const DType t = dtype_from_name(d);
    if (ctx.is_cuda())
      PT_CHECK(t == DType::BF16 || t == DType::F32, "--precision on the GPU: bf16 or fp32 (got " + d + ")");
    else
      PT_CHECK(t == DType::F32 || t == DType::F64, "--precision on the CPU: fp32 or fp64 (got " + d + ")");
  }
  for (int64_t d : s.head_dim)
    PT_CHECK(ops::flash_attention_supports_head_dim(d),
             "--head-dim: 16, 32, 64, 80 or 128 (got " + std::to_string(d) + ")");
  for (const auto* list : {&s.batch, &s.heads, &s.seq})
    for (int64_t x : *list) PT_CHECK(x > 0, "bench attention: sizes must be positive (got " + std::to_string(x) + ")");
  check_sizes(s);
  PT_CHECK(s.dout == "ones" || s.dout == "randn", "--dout must be ones or randn (got '" + s.dout + "')");
  PT_CHECK(s.layout == "heads" || s.layout == "model", "--layout must be heads or model (got '" + s.layout + "')");
  if (s.layout == "model")
    for (const auto& i : s.impls)
      PT_CHECK(i == "flash", "--layout model times flash attention only (got --attention " + i +
                                 "; the model's naive path turns dq, dk back in a pass of its own)");
}

}  // namespace

int run_bench_attention(const std::vector<std::string>& args) {
  RunOptions ro;
  std::string study = "flash", dout, layout;
  std::vector<std::string> impl_w, dtype_w, batch_w, heads_w, seq_w, dim_w, kernels_w, tiles_w;
  std::string causal_s;
  Protocol pr;
  po::options_description desc("paratrain bench attention");
  LogOptions log_opt;
  add_run_options(desc, ro, nullptr);  // --precision is the list of element types below
  add_gemm_option(desc, ro);
  add_deterministic_option(desc, ro);
  add_log_options(desc, log_opt);
  // clang-format off
  desc.add_options()
      ("study", po::value(&study)->default_value(study),
       "preset: naive (naive attention sweep), flash (flash against naive, B 1, causal) or "
       "leaderboard (B 1, 16 heads, T 16384, d 64)")
      ("attention", po::value(&impl_w)->multitoken(), "implementations: naive,flash (overrides the study's)")
      ("precision", po::value(&dtype_w)->multitoken(), "element types: bf16,fp32 (GPU) or fp32,fp64 (CPU)")
      ("batch-size", po::value(&batch_w)->multitoken(), "batch sizes")
      ("num-heads", po::value(&heads_w)->multitoken(), "head counts")
      ("context-length", po::value(&seq_w)->multitoken(), "sequence lengths")
      ("head-dim", po::value(&dim_w)->multitoken(), "head dimensions (16, 32, 64, 80, 128)")
      ("causal", po::value(&causal_s), "causal mask: 1/0 (overrides the study's)")
      ("dout", po::value(&dout), "upstream gradient: randn or ones (as o.sum().backward())")
      ("layout", po::value(&layout),
       "heads (default: each tensor (B, H, T, D)) or model (the transformer's fused QKV buffer and "
       "RoPE; --attention flash)")
      ("flash-kernels", po::value(&kernels_w)->multitoken(),
       "bf16 flash kernels to time: auto, mma, wgmma (a list compares them; default auto)")
      ("wgmma-tiles", po::value(&tiles_w)->multitoken(),
       "wgmma tile shapes to time, F/K/Q each, e.g. 1x64/1/1,ws2x128/ws2/fxp "
       "(docs/FLASH_ATTENTION.md)")
      ("warmup", po::value(&pr.warmup)->default_value(pr.warmup), "untimed forward+backward passes first")
      ("steps", po::value(&pr.iters)->default_value(pr.iters), "timed passes per phase (forward, backward, both)")
      ("budget-ms", po::value(&pr.budget_ms)->default_value(pr.budget_ms),
       "stop a phase's timed passes once they add up to this many ms (0: always --steps)");
  // clang-format on
  auto vm = parse_or_help(desc, args, "paratrain bench attention [options]");
  if (!vm) return 0;
  PT_CHECK(pr.iters > 0 && pr.warmup >= 0, "--steps must be positive and --warmup not negative");

  Sweep s = preset(study);
  if (!impl_w.empty()) s.impls = split_list(impl_w);
  if (!dtype_w.empty()) s.dtypes = split_list(dtype_w);
  if (!batch_w.empty()) s.batch = parse_int_list(batch_w, "batch-size");
  if (!heads_w.empty()) s.heads = parse_int_list(heads_w, "num-heads");
  if (!seq_w.empty()) s.seq = parse_int_list(seq_w, "context-length");
  if (!dim_w.empty()) s.head_dim = parse_int_list(dim_w, "head-dim");
  if (!causal_s.empty()) {
    PT_CHECK(causal_s == "1" || causal_s == "0" || causal_s == "true" || causal_s == "false",
             "--causal must be 1 or 0 (got '" + causal_s + "')");
    s.causal = causal_s == "1" || causal_s == "true";
  }
  if (!dout.empty()) s.dout = dout;
  if (!layout.empty()) s.layout = layout;
  std::vector<ops::FlashKernels> kernels;
  for (const auto& k : split_list(kernels_w)) kernels.push_back(ops::flash_kernels_from_name(k));
  if (kernels.empty()) kernels.push_back(ops::FlashKernels::Auto);
  std::vector<std::optional<ops::WgmmaTiles>> tiles;  // nullopt: each head dimension's default
  for (const auto& t : split_list(tiles_w)) tiles.push_back(ops::wgmma_tiles_from_name(t));
  if (tiles.empty()) tiles.push_back(std::nullopt);
  const bool deterministic = deterministic_of(ro);

  auto& rt = parallel::Runtime::get();
  PT_CHECK(rt.world_size() == 1, "bench attention runs on one device: start it without mpirun -np > 1");
  Context ctx(resolve_device(ro));
  apply_gemm_option(ctx, ro);
  check_sweep(s, ctx);
  BenchSweep sweep("bench attention", ro, log_opt);  // fails now, not after the sweep
  io::RunRecord& record = sweep.record();
  record.collect_environment(ctx);
  record.set_attr("study", study);
  record.set_attr("dout", s.dout);
  record.set_attr("layout", s.layout);
  record.set_options(options_as_strings(*vm));
  record.set_attr("timing", std::string("median of per-pass event timings after warm-up; memory before backward "
                                        "from the tracking allocator after one forward"));

  // Every configuration first (the sweep's size for its progress), then each measured.
  struct Planned {
    std::string impl, dtype;
    int64_t B, H, T, D;
    ops::FlashKernels family;
    std::optional<ops::WgmmaTiles> tiles;
  };
  std::vector<Planned> plan;
  for (int64_t D : s.head_dim)
    for (const auto& dt : s.dtypes)
      for (int64_t B : s.batch)
        for (int64_t H : s.heads)
          for (int64_t T : s.seq)
            for (const auto& impl : s.impls) {
              // Flash in bf16 on the GPU: once per requested kernel family that covers d, and
              // the wgmma family once per requested tile shape.
              if (!(impl == "flash" && ctx.is_cuda() && dt == "bf16")) {
                plan.push_back({impl, dt, B, H, T, D, ops::FlashKernels::Auto, tiles.front()});
                continue;
              }
              const bool wgmma_covers = cuda::flash_covers_head_dim(D, /*wgmma_only=*/true);
              for (auto k : kernels) {
                if (k == ops::FlashKernels::MmaSync || !wgmma_covers) {
                  if (k != ops::FlashKernels::Wgmma) plan.push_back({impl, dt, B, H, T, D, k, tiles.front()});
                } else {
                  for (const auto& t : tiles) plan.push_back({impl, dt, B, H, T, D, k, t});
                }
              }
            }
  sweep.set_configurations(static_cast<int64_t>(plan.size()));
  sweep.start();

  io::ResultTable table = make_table();
  uint64_t seed = ro.seed;
  for (const Planned& p : plan) {
    ctx.set_flash({p.family, p.tiles, deterministic});
    const std::string kernel =
        p.impl == "naive" ? "naive" : ops::flash_kernel_used(ctx, dtype_from_name(p.dtype), p.D, p.T, p.B * p.H);
    const Config c{p.impl, kernel, p.dtype, p.B, p.H, p.T, p.D, s.causal, s.layout};
    const Measurement m = measure(ctx, c, s.dout, pr, seed++);
    ctx.set_flash({});
    add_row(table, c, m);
    std::string summary = m.status;
    if (m.status == "ok") summary += ", fwd+bwd " + std::to_string(m.fwdbwd_ms) + " ms";
    if (m.status == "OOM") summary += " (" + std::to_string(m.oom_request) + " bytes asked)";
    const std::string name = p.impl + " (" + kernel + ") " + p.dtype + " B" + std::to_string(p.B) + " H" +
                             std::to_string(p.H) + " T" + std::to_string(p.T) + " d" + std::to_string(p.D);
    sweep.done(name, summary, {{"status", m.status}, {"fwdbwd_ms", m.fwdbwd_ms}}, {&table});
  }
  sweep.finish({&table});
  return 0;
}

}  // namespace pt::cli
