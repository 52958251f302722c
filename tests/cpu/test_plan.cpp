// `paratrain plan`: each formula against values worked out by hand for a small model, and the
// whole plan against records of real runs kept as fixtures (tests/fixtures/plan/): bench ddp on
// 2 CPU ranks for every strategy and sharding, bench model's memory profile — bytes exactly,
// activations within 2 %. An XL record from 2 H200s is checked the same way when present.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <string>

#include "common/test_util.h"
#include "core/context.h"
#include "core/error.h"
#include "cpu/test_io_h5.h"
#include "model/transformer.h"
#include "plan/plan.h"

namespace pt::test {
namespace {

using namespace pt::test::h5read;  // test_io_h5.h

TransformerConfig small_config() { return test_transformer(11, 4, 8, 2, 2, 12); }  // naive: head dim 4

plan::Job job_of(const TransformerConfig& m, int dp, const std::string& ddp, plan::Sharding s) {
  plan::Job j;
  j.model = m;
  j.precision = Precision::FP32;
  j.batch = 2;
  j.dp = dp;
  j.strategy = ddp;
  j.sharding = s;
  return j;
}

int64_t up(int64_t bytes, int64_t g) { return (bytes + g - 1) / g * g; }

TEST(Plan, ParameterListIsTheBuiltModels) {
  Context ctx(Device::cpu());
  for (const TransformerConfig& cfg : {small_config(), TransformerConfig::named("tiny")}) {
    TransformerLM m(cfg, ctx);
    const auto shapes = transformer_param_shapes(cfg);
    ASSERT_EQ(shapes.size(), m.store().size());
    for (size_t i = 0; i < shapes.size(); ++i) {
      EXPECT_EQ(shapes[i].name, m.store()[i].name);
      EXPECT_EQ(shapes[i].numel, m.store()[i].numel) << shapes[i].name;
    }
  }
}

TEST(Plan, MemoryByHand) {
  // d 8, ff 12, 2 layers, vocab 11: 2·11·8 + 2·(4·64 + 3·96 + 16) + 8 = 176 + 1120 + 8 = 1304.
  const TransformerConfig m = small_config();
  EXPECT_EQ(m.num_params(), 1304);
  const plan::Cluster cpu = plan::cluster_preset("cpu");
  const plan::Result r = plan::plan(job_of(m, 1, "none", plan::Sharding::None), cpu);
  EXPECT_EQ(r.memory.params, up(1304 * 4, 64));
  EXPECT_EQ(r.memory.params_lowp, 0);
  EXPECT_EQ(r.memory.grads, up(1304 * 4, 64));
  EXPECT_EQ(r.memory.optstate, 2 * up(1304 * 4, 64));
  EXPECT_EQ(r.memory.workspace, 0);
  // Saved by forward, B 2, T 4 (N 8), fp32, naive attention, recompute: per block the output
  // (N·C·4 = 256), ln1 rstd (32 → 64), qkv (768), attention output (256), softmax (B·H·T·T·4 =
  // 256), h (256), ln2 rstd (64), h1 and h3 (N·F·4 = 384 each); the embedding output (256),
  // ln_final rstd (64), its output (256) and the logits (N·V·4 = 352 → 384).
  const int64_t block = 256 + 64 + 768 + 256 + 256 + 256 + 64 + 2 * 384;
  const int64_t saved = 2 * block + 256 + 64 + 256 + 384;
  EXPECT_EQ(r.memory.activations_saved, saved);
  // Peak: the logits' gradient pass (saved + the (N, C) input gradient, 256) or the last block's
  // SwiGLU gradients (saved − logits − ln_final's output and rstd + 3 · N·F·4).
  EXPECT_EQ(r.memory.activations, std::max(saved + 256, saved - 384 - 256 - 64 + 3 * 384));
  // Without recompute each block also keeps both norm outputs and the SwiGLU product;
  // recomputing the SwiGLU product alone keeps the norm outputs.
  plan::Job keep = job_of(m, 1, "none", plan::Sharding::None), norms = keep;
  keep.model.recompute = Recompute::Off;
  norms.model.recompute = Recompute::Swiglu;
  EXPECT_EQ(plan::plan(keep, cpu).memory.activations_saved, saved + 2 * (256 + 256 + 384));
  EXPECT_EQ(plan::plan(norms, cpu).memory.activations_saved, saved + 2 * (256 + 256));
  // Flash keeps the (B, H, T) logsumexp instead of the softmax (a model whose heads it covers).
  TransformerConfig wide = m;
  wide.d_model = 32;  // head dimension 16
  plan::Job naive = job_of(wide, 1, "none", plan::Sharding::None), flash = naive;
  flash.model.attention = AttentionImpl::Flash;
  EXPECT_EQ(plan::plan(naive, cpu).memory.activations_saved - plan::plan(flash, cpu).memory.activations_saved,
            2 * (up(2 * 2 * 4 * 4 * 4, 64) - up(2 * 2 * 4 * 4, 64)));
  // The peak under each --recompute × --attention choice: the job's own one equals its peak,
  // keeping the norms and SwiGLU costs more, the materialised softmax more than the logsumexp.
  const plan::Result alt = plan::plan(flash, cpu);
  EXPECT_EQ(alt.memory.activations_by_choice[0][0], alt.memory.activations);
  EXPECT_GT(alt.memory.activations_by_choice[1][0], alt.memory.activations_by_choice[0][0]);
  EXPECT_GT(alt.memory.activations_by_choice[2][0], alt.memory.activations_by_choice[1][0]);
  EXPECT_GT(alt.memory.activations_by_choice[0][1], alt.memory.activations_by_choice[0][0]);
  EXPECT_EQ(r.memory.activations_by_choice[0][0], 0) << "head dimension 4: no flash kernel";
  EXPECT_EQ(r.memory.activations_by_choice[0][1], r.memory.activations);
  // bf16 on a GPU: a bf16 copy of the parameters, 512-byte rounding, cuBLAS's 32 MiB workspace.
  plan::Job bf = job_of(m, 1, "none", plan::Sharding::None);
  bf.precision = Precision::BF16;
  const plan::Result g = plan::plan(bf, plan::cluster_preset("h100-sxm"));
  EXPECT_EQ(g.memory.params, 5632);
  EXPECT_EQ(g.memory.params_lowp, 3072);
  EXPECT_EQ(g.memory.workspace, 32 << 20);
  // --residual-dtype bf16: the embedding output and each block's h and output (N·C = 64 values)
  // at 2 bytes instead of 4, each rounded to 512 B: 256 → 512 and 128 → 512 on a GPU, so the
  // rounding hides it here; at N·C = 64 · 64 values each saves N·C·2 bytes exactly.
  plan::Job big = bf;
  big.model.d_model = 64;
  big.model.num_heads = 4;
  big.batch = 16;  // N = 64, N·C = 4096 values: 16 KiB fp32, 8 KiB bf16
  plan::Job big_bf16 = big;
  big_bf16.residual_bf16 = true;
  const plan::Result r32 = plan::plan(big, plan::cluster_preset("h100-sxm")),
                     r16 = plan::plan(big_bf16, plan::cluster_preset("h100-sxm"));
  EXPECT_EQ(r32.memory.activations_saved - r16.memory.activations_saved, (2 * m.num_layers + 1) * 64 * 64 * 2);
  big_bf16.precision = Precision::FP32;
  EXPECT_THROW(plan::plan(big_bf16, plan::cluster_preset("h100-sxm")), Error);
}

TEST(Plan, CommunicationAndTimeByHand) {
  TransformerConfig m = TransformerConfig::named("xl");
  plan::Cluster c = plan::cluster_preset("h100-sxm");
  plan::Job j = job_of(m, 8, "bucketed", plan::Sharding::None);
  j.precision = Precision::BF16;
  j.batch = 4;
  const plan::Result r = plan::plan(j, c);
  const int64_t n = m.num_params();
  ASSERT_EQ(r.comm.size(), 1u);
  EXPECT_EQ(r.comm[0].name, "all_reduce");
  EXPECT_EQ(r.comm[0].bytes, n * 4);
  EXPECT_DOUBLE_EQ(r.comm[0].bus_factor, 2.0 * 7 / 8);
  EXPECT_NEAR(r.comm[0].seconds, n * 4 * 1.75 / 450e9, 1e-12);  // within one node: NVLink, 450 GB/s each way
  // FLOPs as bench model counts them; compute at the dense bf16 peak.
  const int64_t T = m.context_length;
  const double flops = m.train_flops_per_token(T) * T * 4;
  EXPECT_DOUBLE_EQ(r.flops_per_step, flops);
  EXPECT_NEAR(r.compute_s, flops / 989.4e12, 1e-12);
  // Overlapped: exposed = what backward (2/3 of compute) does not cover.
  EXPECT_NEAR(r.exposed_comm_s, std::max(0.0, r.comm_s - r.compute_s * 2 / 3), 1e-12);
  EXPECT_NEAR(r.step_s, r.compute_s + r.hbm_s + r.exposed_comm_s, 1e-12);
  EXPECT_NEAR(r.mfu, flops / (r.step_s * 989.4e12), 1e-9);
  // The batch that hides the sync: backward of b sequences ≥ the all-reduce, and b − 1 does not.
  const double per_seq = m.train_flops_per_token(T) * T / 989.4e12 * 2 / 3;
  EXPECT_GE(r.hiding_batch * per_seq, r.comm_s);
  EXPECT_LT((r.hiding_batch - 1) * per_seq, r.comm_s);
  // bf16 on the wire halves the bytes; zero1 adds the parameter all-gather; across nodes the
  // network bounds the time.
  j.grad_comm_bf16 = true;
  EXPECT_EQ(plan::plan(j, c).comm[0].bytes, n * 2);
  j.grad_comm_bf16 = false;
  // bf16 gradients end to end: half the gradient bytes in memory and on the wire, and the
  // optimizer's pass reads 2 bytes a gradient instead of 4 (28 + 2 = 30 → 28 bytes a parameter).
  {
    plan::Job b = j;
    b.grad_bf16 = true;
    const plan::Result rb = plan::plan(b, c);
    EXPECT_NEAR(double(rb.memory.grads) * 2, double(r.memory.grads), 1024);  // each rounded to 512 B
    EXPECT_EQ(rb.comm[0].bytes, n * 2);
    EXPECT_NEAR(rb.hbm_s, r.hbm_s * 28 / 30, 1e-12);
    b.precision = Precision::FP32;
    EXPECT_THROW(plan::plan(b, c), Error);
  }
  // bf16: the all-gather moves the bf16 mirror (2 bytes a parameter); fp32 gathers fp32.
  j.sharding = plan::Sharding::Zero1;
  int64_t total = 0;
  for (const auto& col : plan::plan(j, c).comm) total += col.bytes;
  EXPECT_EQ(total, n * 4 + n * 2);
  j.precision = Precision::FP32;
  total = 0;
  for (const auto& col : plan::plan(j, c).comm) total += col.bytes;
  EXPECT_EQ(total, 2 * n * 4);
  j.precision = Precision::BF16;
  j.sharding = plan::Sharding::None;
  j.dp = 64;
  EXPECT_NEAR(plan::plan(j, c).comm[0].seconds, n * 4 * 2.0 * 63 / 64 / 50e9, 1e-12);
  // ZeRO-3 divides parameters, gradients and state by the ranks, and is marked an estimate.
  j.sharding = plan::Sharding::Zero3;
  const plan::Result z3 = plan::plan(j, c);
  EXPECT_FALSE(z3.implemented);
  EXPECT_NEAR(static_cast<double>(z3.memory.params), n * 4.0 / 64, 512);
  EXPECT_NEAR(static_cast<double>(z3.memory.optstate), 2 * n * 4.0 / 64, 1024);
}

// fp8: the FP8 table's Linear GEMMs (the block's projections, 6 FLOPs a weight a token) at the
// FP8 peak, attention and the LM head at bf16's; MFU on the bf16 scale and against the FP8 peak.
// A GPU without FP8 tensor cores is one clear error.
TEST(Plan, Fp8SplitsTheComputeBetweenTheFp8AndBf16Peaks) {
  const TransformerConfig m = TransformerConfig::named("xl");
  const plan::Cluster c = plan::cluster_preset("h100-sxm");
  plan::Job j = job_of(m, 1, "none", plan::Sharding::None);
  j.precision = Precision::FP8;
  j.batch = 4;
  const plan::Result r = plan::plan(j, c);
  const double C = m.d_model, F = m.d_ff, T = m.context_length;
  const double fp8 = 6 * (4 * C * C + 3 * C * F) * m.num_layers * T * 4;
  const double flops = m.train_flops_per_token(m.context_length) * T * 4;
  EXPECT_DOUBLE_EQ(r.flops_per_step, flops);
  EXPECT_NEAR(r.fp8_flops_per_step, fp8, fp8 * 1e-12);
  EXPECT_NEAR(r.compute_s, (flops - fp8) / 989.4e12 + fp8 / 1978.9e12, 1e-12);
  EXPECT_NEAR(r.mfu, flops / (r.step_s * 989.4e12), 1e-9);
  EXPECT_NEAR(r.mfu_fp8, flops / (r.step_s * 1978.9e12), 1e-9);
  j.precision = Precision::BF16;
  const plan::Result b = plan::plan(j, c);
  EXPECT_EQ(b.fp8_flops_per_step, 0.0);
  EXPECT_TRUE(std::isnan(b.mfu_fp8));
  EXPECT_NEAR(b.compute_s, flops / 989.4e12, 1e-12);
  j.precision = Precision::FP8;
  const std::string err = error_of([&] { plan::plan(j, plan::cluster_preset("a100-sxm")); });
  EXPECT_NE(err.find("a100-sxm has none"), std::string::npos) << err;
}

// fp8: the inputs only their Linear holds are saved as their dW casts, a byte a value where bf16
// saves two (model/fp8_linear.h): both norms' outputs unless --recompute on, and the SwiGLU
// product with --recompute off; with --recompute on fp8 saves what bf16 does.
TEST(Plan, Fp8SavesTheKeptInputsAtAByteAValue) {
  const TransformerConfig m = TransformerConfig::named("xl");
  const plan::Cluster c = plan::cluster_preset("h100-sxm");
  const int64_t L = m.num_layers, N = 4 * m.context_length, C = m.d_model, F = m.d_ff;  // N·C, N·F: 512 | bytes
  for (const Recompute rc : {Recompute::All, Recompute::Swiglu, Recompute::Off}) {
    plan::Job j = job_of(m, 1, "none", plan::Sharding::None);
    j.batch = 4;
    j.model.recompute = rc;
    j.precision = Precision::BF16;
    const int64_t bf16 = plan::plan(j, c).memory.activations_saved;
    j.precision = Precision::FP8;
    const int64_t fp8 = plan::plan(j, c).memory.activations_saved;
    const int64_t kept = (rc == Recompute::All ? 0 : 2 * N * C) + (rc == Recompute::Off ? N * F : 0);
    EXPECT_EQ(bf16 - fp8, L * kept) << recompute_name(rc);
  }
}

TEST(Plan, FitAndTheSmallestDeviceCount) {
  // The course's XXL model does not fit one H100 unsharded; ZeRO-3 finds the device count.
  TransformerConfig m = TransformerConfig::named("xl");
  m.d_model = 16384;
  m.d_ff = 53248;
  m.num_layers = 126;
  m.num_heads = 128;
  plan::Job j = job_of(m, 1, "bucketed", plan::Sharding::None);
  j.precision = Precision::BF16;
  j.batch = 1;
  const plan::Cluster c = plan::cluster_preset("h100-sxm");
  const plan::Result none = plan::plan(j, c);
  EXPECT_FALSE(none.fits);
  EXPECT_EQ(none.min_devices_to_fit, 0) << "unsharded state never shrinks with more ranks";
  j.sharding = plan::Sharding::Zero3;
  const plan::Result z3 = plan::plan(j, c);
  ASSERT_GT(z3.min_devices_to_fit, 1);
  j.dp = z3.min_devices_to_fit;
  EXPECT_TRUE(plan::plan(j, c).fits);
  j.dp = z3.min_devices_to_fit / 2;
  EXPECT_FALSE(plan::plan(j, c).fits);
}

// Absurd sizes (issue 47) are refused at once: a layer count plan would lay out for minutes, and
// a batch or context whose memory no longer fits int64_t (it wrapped to a negative total that
// "fit" before).
TEST(Plan, AbsurdSizesAreRefusedInsteadOfOverflowing) {
  plan::Job j = job_of(small_config(), 1, "none", plan::Sharding::None);
  j.model.num_layers = 100000000;
  EXPECT_NE(error_of([&] { plan::plan(j, plan::cluster_preset("cpu")); }).find("above the 100000 layers"),
            std::string::npos);
  for (auto [batch, context] : {std::pair<int64_t, int64_t>{int64_t{1} << 62, 4}, {1000000000, 1000000000}}) {
    j = job_of(small_config(), 1, "none", plan::Sharding::None);
    j.batch = batch;
    j.model.context_length = context;
    // Refused by the 2^60-byte bound up front, or by the count that would overflow.
    const std::string e = error_of([&] { plan::plan(j, plan::cluster_preset("h100-sxm")); });
    EXPECT_TRUE(e.find("too large to plan") != std::string::npos || e.find("too many to count") != std::string::npos)
        << batch << " × " << context << ": " << e;
  }
  j = job_of(small_config(), 2, "bucketed", plan::Sharding::None);
  j.dp = 1;
  j.pp = 2;
  j.grad_accum = int64_t{1} << 62;
  EXPECT_NE(error_of([&] { plan::plan(j, plan::cluster_preset("h100-sxm")); }).find("too many to count"),
            std::string::npos);
}

TEST(Plan, BadLayoutsAreOneClearError) {
  const TransformerConfig m = small_config();
  plan::Job j = job_of(m, 1, "none", plan::Sharding::None);
  j.tp = 3;
  EXPECT_NE(error_of([&] { plan::plan(j, plan::cluster_preset("cpu")); }).find("must divide the heads"),
            std::string::npos);
  j.tp = 1;
  j.pp = 3;
  EXPECT_NE(error_of([&] { plan::plan(j, plan::cluster_preset("cpu")); }).find("must divide the 2 layers"),
            std::string::npos);
  EXPECT_NE(error_of([] { plan::cluster_preset("h300"); }).find("unknown cluster preset 'h300'"), std::string::npos);
  EXPECT_NE(error_of([] { plan::sharding_from_name("zero4"); }).find("zero1"), std::string::npos);
  for (const char* bad : {"--devices 6 --tp 5", "--cluster h300", "--tp 3 --devices 3", "--format xml",
                          "--batch-size 0", "--d-model 0", "--precision bf16 --cluster cpu", "--memory-gb -1"}) {
    const CliResult res = run_paratrain(std::string("plan --model xl ") + bad);
    EXPECT_NE(res.rc, 0) << bad << ": " << res.output;
    EXPECT_NE(res.output.find("error"), std::string::npos) << bad << ": " << res.output;
  }
  const CliResult ok = run_paratrain("plan --model xl --devices 20 --tp 5 --shard-optimizer zero3 --format json");
  EXPECT_EQ(ok.rc, 0) << ok.output;
  EXPECT_NE(ok.output.find("\"implemented\": false"), std::string::npos) << ok.output;
}

// ---- against records of real runs ------------------------------------------------------------

double option_number(hid_t f, const std::string& name) { return std::stod(string_attr(f, "option." + name)); }

// The numeric columns `names` of a record's table, each read as doubles (integer columns
// converted by HDF5; exact below 2^53).
template <size_t N>
std::array<std::vector<double>, N> numeric_columns(hid_t d, const char* const (&names)[N]) {
  std::array<std::vector<double>, N> out;
  for (size_t i = 0; i < N; ++i) out[i] = read_field<double>(d, names[i], H5T_NATIVE_DOUBLE);
  return out;
}

// Every row of a bench ddp record: parameters, gradients, optimizer state and communicated bytes
// exactly (the MB columns are bytes / 1e6), activations at the step's peak within 2 %.
void check_bench_ddp(const std::string& path, const plan::Cluster& cluster) {
  Handle f = open_file(path);
  Handle d = open_dataset(f, "ddp");
  const auto ddp = read_string_field(d, "ddp"), shard = read_string_field(d, "shard"),
             precision = read_string_field(d, "precision"), grad_comm = read_string_field(d, "grad_comm");
  const auto [bucket, ranks, params, grads, opt, acts, comm] = numeric_columns(
      d,
      {"bucket_mb", "ranks", "init_params_MB", "init_grads_MB", "init_optstate_MB", "before_step_acts_MB", "comm_MB"});
  TransformerConfig m = TransformerConfig::named(string_attr(f, "option.model"));
  m.context_length = static_cast<int64_t>(option_number(f, "context-length"));
  m.attention = attention_impl_from_name(string_attr(f, "option.attention"));
  ASSERT_FALSE(ddp.empty());
  for (size_t i = 0; i < ddp.size(); ++i) {
    SCOPED_TRACE(path + ": " + ddp[i] + " " + shard[i] + " bucket " + std::to_string(bucket[i]));
    plan::Job j;
    j.model = m;
    j.precision = precision_from_name(precision[i]);
    j.batch = static_cast<int64_t>(option_number(f, "batch-size"));
    j.dp = static_cast<int>(ranks[i]);
    j.sharding = plan::sharding_from_name(shard[i]);
    j.grad_comm_bf16 = grad_comm[i] == "bf16";
    // bench ddp names zero1's syncs by what they run: one reduce-scatter, or one per bucket.
    j.strategy = ddp[i] == "reduce_scatter" ? "flat" : ddp[i] == "bucketed_reduce_scatter" ? "bucketed" : ddp[i];
    j.bucket_mb = std::isnan(bucket[i]) ? 25 : bucket[i];
    const plan::Result r = plan::plan(j, cluster);
    EXPECT_NEAR(static_cast<double>(r.memory.params + r.memory.params_lowp), params[i] * 1e6, 0.5);
    EXPECT_NEAR(static_cast<double>(r.memory.grads), grads[i] * 1e6, 0.5);
    EXPECT_NEAR(static_cast<double>(r.memory.optstate), opt[i] * 1e6, 0.5);
    EXPECT_NEAR(static_cast<double>(r.memory.activations), acts[i] * 1e6, 0.02 * acts[i] * 1e6);
    int64_t bytes = 0;
    for (const auto& c : r.comm) bytes += c.bytes;
    EXPECT_NEAR(static_cast<double>(bytes), comm[i] * 1e6, 0.5);
  }
}

TEST(Plan, MatchesBenchDdpOnTwoCpuRanks) {
  check_bench_ddp(source_path("tests/fixtures/plan/bench_ddp_tiny_cpu_2ranks.h5"), plan::cluster_preset("cpu"));
}

TEST(Plan, MatchesBenchDdpXlOnTwoH200s) {
  const std::string path = source_path("tests/fixtures/plan/bench_ddp_xl_2xh200.h5");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "fixture " << path << " not recorded yet";
  check_bench_ddp(path, plan::cluster_preset("h200"));
}

TEST(Plan, MatchesBenchModelMemoryProfiles) {
  for (const char* name : {"bench_model_tiny_cpu.h5", "bench_model_tiny_cpu_keep.h5"}) {
    const std::string path = source_path(std::string("tests/fixtures/plan/") + name);
    Handle f = open_file(path);
    Handle d = open_dataset(f, "model_memory");
    const auto size = read_string_field(d, "size"), attention = read_string_field(d, "attention"),
               precision = read_string_field(d, "precision");
    const auto [context, batch, params, grads, opt, acts] =
        numeric_columns(d, {"context_length", "batch_size", "peak_parameters_bytes", "peak_gradients_bytes",
                            "peak_optimizer_state_bytes", "peak_activations_bytes"});
    const Recompute recompute = recompute_from_name(string_attr(f, "option.recompute"));
    ASSERT_FALSE(size.empty());
    for (size_t i = 0; i < size.size(); ++i) {
      SCOPED_TRACE(std::string(name) + ": " + size[i] + " ctx " + std::to_string(static_cast<int64_t>(context[i])) +
                   " " + attention[i]);
      plan::Job j;
      j.model = TransformerConfig::named(size[i]);
      j.model.context_length = static_cast<int64_t>(context[i]);
      j.model.attention = attention_impl_from_name(attention[i]);
      j.model.recompute = recompute;
      j.precision = precision_from_name(precision[i]);
      j.batch = static_cast<int64_t>(batch[i]);
      j.strategy = "none";
      const plan::Result r = plan::plan(j, plan::cluster_preset("cpu"));
      EXPECT_EQ(static_cast<double>(r.memory.params + r.memory.params_lowp), params[i]);
      EXPECT_EQ(static_cast<double>(r.memory.grads), grads[i]);
      EXPECT_EQ(static_cast<double>(r.memory.optstate), opt[i]);
      EXPECT_NEAR(static_cast<double>(r.memory.activations), acts[i], 0.02 * acts[i]);
    }
  }
}

}  // namespace
}  // namespace pt::test
