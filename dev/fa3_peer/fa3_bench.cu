// FlashAttention-3 (Dao-AILab/flash-attention, hopper/) as issue 18's peer, without PyTorch:
// its own forward and backward launchers (run_mha_fwd_ / run_mha_bwd_, instantiated from its
// hopper/instantiations files by dev/build_fa3.sh) called on the leaderboard-style case, timed as
// `paratrain bench attention` times: warm-up forward+backward passes, then --steps forward passes,
// backward passes and forward+backward passes, each timed alone with CUDA events and synchronised;
// medians. Inputs as paratrain's benchmark draws them (unit-variance uniform q, k, v; dO = ones or
// the same uniform), layout (B, T, H, d) contiguous, bf16, causal or not.
//
// Before timing it checks what it times, against an fp64 reference on the host for a few rows of
// head 0: O and the log-sum-exp for sampled queries, and dV for sampled keys (from the checked
// log-sum-exp). A wrong launch (a field left unset) fails here instead of timing garbage.
//
//   fa3_bench --batch B --heads H --seq T --head-dim 64|128 [--causal 1] [--dout ones|randn]
//             [--warmup 3] [--iters 20] [--deterministic 0]
// Output: one line `fa3 B H T d causal fwd_ms bwd_ms fwdbwd_ms fwd_TFLOPs fwdbwd_TFLOPs`.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "cutlass/numeric_types.h"
#include "flash.h"

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "fa3_bench: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}
[[noreturn]] void fail(const std::string& m) {
  std::fprintf(stderr, "fa3_bench: %s\n", m.c_str());
  std::exit(2);
}

struct Args {
  int batch = 1, heads = 16, seq = 16384, d = 64, warmup = 3, iters = 20;
  bool causal = true, deterministic = false, dout_ones = true;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--help" || k == "-h") {
      std::puts("fa3_bench --batch B --heads H --seq T --head-dim 64|128 [--causal 0|1] [--dout ones|randn]\n"
                "          [--warmup N] [--iters N] [--deterministic 0|1]\n"
                "FlashAttention-3's hopper kernels timed like `paratrain bench attention` (medians, ms).");
      std::exit(0);
    }
    if (i + 1 >= argc) fail("option " + k + " needs a value");
    const std::string v = argv[++i];
    auto num = [&] {
      char* end = nullptr;
      const long x = std::strtol(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0' || x < 0) fail("option " + k + ": not a count: " + v);
      return static_cast<int>(x);
    };
    // Count options, and the two 0|1 switches (read as counts, then tested for non-zero).
    const std::pair<const char*, int*> counts[] = {{"--batch", &a.batch},   {"--heads", &a.heads},
                                                   {"--seq", &a.seq},       {"--head-dim", &a.d},
                                                   {"--warmup", &a.warmup}, {"--iters", &a.iters}};
    const std::pair<const char*, bool*> switches[] = {{"--causal", &a.causal}, {"--deterministic", &a.deterministic}};
    bool known = false;
    for (const auto& [name, field] : counts)
      if (k == name) *field = num(), known = true;
    for (const auto& [name, field] : switches)
      if (k == name) *field = num() != 0, known = true;
    if (k == "--dout") {
      if (v != "ones" && v != "randn") fail("--dout must be ones or randn");
      a.dout_ones = v == "ones";
      known = true;
    }
    if (!known) fail("unknown option " + k);
  }
  if (a.d != 64 && a.d != 128) fail("--head-dim must be 64 or 128 (the instantiations built)");
  if (a.batch < 1 || a.heads < 1 || a.seq < 1 || a.iters < 1) fail("sizes and --iters must be positive");
  return a;
}

// Unit-variance uniform values on ±√3 from a 64-bit LCG (the distribution of src/bench/inputs.cpp).
std::vector<float> uniform_values(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const double u = static_cast<double>(s >> 11) * (1.0 / 9007199254740992.0);  // [0, 1)
    x = static_cast<float>((2.0 * u - 1.0) * std::sqrt(3.0));
  }
  return v;
}

using bf16 = cutlass::bfloat16_t;

struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(size_t bytes) { check(cudaMalloc(&p, std::max<size_t>(bytes, 16)), "cudaMalloc"); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

int round_up(int x, int m) { return (x + m - 1) / m * m; }

// The fields FlashAttention-3's own hopper/flash_api.cpp sets for a dense, non-varlen call.
void set_forward(Flash_fwd_params& p, const Args& a, void* q, void* k, void* v, void* o, void* lse, int* semaphore,
                 int num_sm) {
  std::memset(&p, 0, sizeof(p));
  const int64_t row = int64_t(a.heads) * a.d, batch = row * a.seq;
  p.is_bf16 = true;
  p.q_ptr = q, p.k_ptr = k, p.v_ptr = v, p.o_ptr = o;
  p.q_row_stride = p.k_row_stride = p.v_row_stride = p.o_row_stride = row;
  p.q_head_stride = p.k_head_stride = p.v_head_stride = p.o_head_stride = a.d;
  p.q_batch_stride = p.k_batch_stride = p.v_batch_stride = p.o_batch_stride = batch;
  p.v_dim_stride = 1;
  p.softmax_lse_ptr = lse;
  p.b = p.b_k = a.batch;
  p.h = p.h_k = a.heads;
  p.seqlen_q = p.seqlen_k = a.seq;
  p.seqlen_q_rounded = p.seqlen_k_rounded = round_up(a.seq, 128);
  p.d = p.d_rounded = p.dv = p.dv_rounded = a.d;
  p.total_q = p.total_k = a.batch * a.seq;
  p.scale_softmax = 1.0f / std::sqrt(static_cast<float>(a.d));
  p.p_dropout = 1.0f;  // the probability of keeping
  p.p_dropout_in_uint8_t = 255;
  p.rp_dropout = 1.0f;
  p.is_causal = a.causal;
  p.window_size_left = a.seq - 1;
  p.window_size_right = a.causal ? 0 : a.seq - 1;
  p.arch = 90;
  p.num_sm = num_sm;
  p.num_splits = 1;
  p.varlen_sort_batches = true;
  p.head_swizzle = a.causal;
  p.tile_count_semaphore = a.causal ? semaphore : nullptr;  // the persistent scheduler's, causal only
}

// The persistent scheduler's tile counter starts at zero every call; FA3's Python API zeroes a fresh
// one each call too, so the memset is timed with the forward (about 2 us).
void run_forward(Flash_fwd_params& p, int d, cudaStream_t s) {
  if (p.tile_count_semaphore) check(cudaMemsetAsync(p.tile_count_semaphore, 0, sizeof(int), s), "memset");
  if (d == 64)
    run_mha_fwd_<90, bf16, 64, 64, false, false, false, false>(p, s);
  else
    run_mha_fwd_<90, bf16, 128, 128, false, false, false, false>(p, s);
}
void run_backward(Flash_bwd_params& p, int d, cudaStream_t s) {
  if (d == 64)
    run_mha_bwd_<90, bf16, 64, false>(p, s);
  else
    run_mha_bwd_<90, bf16, 128, false>(p, s);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

template <class F>
double time_ms(F f, cudaStream_t s) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  check(cudaEventRecord(a, s), "record");
  f();
  check(cudaGetLastError(), "launch");
  check(cudaEventRecord(b, s), "record");
  check(cudaEventSynchronize(b), "synchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, a, b), "elapsed");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms;
}

float to_float(bf16 x) { return static_cast<float>(x); }

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  int dev = 0, num_sm = 0, major = 0;
  check(cudaGetDevice(&dev), "device");
  check(cudaDeviceGetAttribute(&num_sm, cudaDevAttrMultiProcessorCount, dev), "attribute");
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), "attribute");
  if (major != 9) fail("FlashAttention-3's kernels here are built for sm_90a; this GPU is not a Hopper");

  const size_t n = size_t(a.batch) * a.seq * a.heads * a.d;
  const size_t rows = size_t(a.batch) * a.heads * round_up(a.seq, 128);
  std::vector<float> hq = uniform_values(n, 1), hk = uniform_values(n, 2), hv = uniform_values(n, 3);
  std::vector<float> hdo = a.dout_ones ? std::vector<float>(n, 1.0f) : uniform_values(n, 4);
  auto to_bf16 = [](const std::vector<float>& x) {
    std::vector<bf16> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = bf16(x[i]);
    return y;
  };
  const std::vector<bf16> bq = to_bf16(hq), bk = to_bf16(hk), bv = to_bf16(hv), bdo = to_bf16(hdo);

  DeviceBuffer q(n * 2), k(n * 2), v(n * 2), o(n * 2), dout(n * 2), dq(n * 2), dk(n * 2), dv(n * 2);
  DeviceBuffer lse(rows * 4), dsum(rows * 4), lse_log2(rows * 4), dq_accum(rows * a.d * 4), semaphore(64);
  const int bwd_block_m = a.d == 64 ? 128 : 64;  // hopper/flash_api.cpp's kBlockM_sm90, causal or not
  DeviceBuffer dq_semaphore(size_t((a.seq + bwd_block_m - 1) / bwd_block_m) * a.batch * a.heads * 4);
  check(cudaMemcpy(q.p, bq.data(), n * 2, cudaMemcpyHostToDevice), "copy");
  check(cudaMemcpy(k.p, bk.data(), n * 2, cudaMemcpyHostToDevice), "copy");
  check(cudaMemcpy(v.p, bv.data(), n * 2, cudaMemcpyHostToDevice), "copy");
  check(cudaMemcpy(dout.p, bdo.data(), n * 2, cudaMemcpyHostToDevice), "copy");

  Flash_bwd_params p;
  set_forward(p, a, q.p, k.p, v.p, o.p, lse.p, static_cast<int*>(semaphore.p), num_sm);
  const int64_t row = int64_t(a.heads) * a.d, batch = row * a.seq;
  p.do_ptr = dout.p, p.dq_ptr = dq.p, p.dk_ptr = dk.p, p.dv_ptr = dv.p;
  p.do_row_stride = p.dq_row_stride = p.dk_row_stride = p.dv_row_stride = row;
  p.do_head_stride = p.dq_head_stride = p.dk_head_stride = p.dv_head_stride = a.d;
  p.do_batch_stride = p.dq_batch_stride = p.dk_batch_stride = p.dv_batch_stride = batch;
  p.dq_accum_ptr = dq_accum.p;
  p.dsoftmax_sum = dsum.p;
  p.softmax_lse_log2_ptr = lse_log2.p;
  p.dq_semaphore = static_cast<int*>(dq_semaphore.p);  // zeroed by the backward's preprocess kernel
  p.deterministic = a.deterministic;
  Flash_fwd_params& pf = p;
  Flash_bwd_params pb = p;
  // The backward's own rounding of the query rows (its block of bwd_block_m rows).
  pb.seqlen_q_rounded = round_up(a.seq, bwd_block_m);
  pb.seqlen_k_rounded = round_up(a.seq, 128);
  pb.tile_count_semaphore = nullptr;

  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  auto fwd = [&] { run_forward(pf, a.d, s); };
  auto bwd = [&] { run_backward(pb, a.d, s); };
  fwd();
  bwd();
  check(cudaStreamSynchronize(s), "first pass");

  // The check: O and L for sampled queries of head 0, batch 0; dV for sampled keys (fp64 host).
  {
    std::vector<bf16> ho(n), hdv(n);
    std::vector<float> hl(rows);
    check(cudaMemcpy(ho.data(), o.p, n * 2, cudaMemcpyDeviceToHost), "copy");
    check(cudaMemcpy(hdv.data(), dv.p, n * 2, cudaMemcpyDeviceToHost), "copy");
    check(cudaMemcpy(hl.data(), lse.p, rows * 4, cudaMemcpyDeviceToHost), "copy");
    const int T = a.seq, D = a.d, H = a.heads;
    auto at = [&](const std::vector<bf16>& x, int t, int c) { return double(to_float(x[(size_t(t) * H) * D + c])); };
    const double scale = 1.0 / std::sqrt(double(D));
    double worst_o = 0, worst_l = 0, worst_dv = 0;
    const int samples[] = {0, 1, T / 3, T / 2 + 7, T - 1};
    std::vector<double> sc(T);
    for (int i : samples) {
      const int last = a.causal ? i : T - 1;
      double m = -1e300;
      for (int j = 0; j <= last; ++j) {
        double dot = 0;
        for (int c = 0; c < D; ++c) dot += at(bq, i, c) * at(bk, j, c);
        sc[j] = dot * scale;
        m = std::max(m, sc[j]);
      }
      double l = 0;
      for (int j = 0; j <= last; ++j) l += std::exp(sc[j] - m);
      worst_l = std::max(worst_l, std::fabs((m + std::log(l)) - double(hl[i])));
      for (int c = 0; c < D; ++c) {
        double x = 0;
        for (int j = 0; j <= last; ++j) x += std::exp(sc[j] - m) * at(bv, j, c);
        worst_o = std::max(worst_o, std::fabs(x / l - at(ho, i, c)));
      }
    }
    for (int j : {0, T / 2, T - 1}) {  // dV_j = Σ_i P_ij dO_i with P from the checked L
      std::vector<double> acc(D, 0.0);
      for (int i = a.causal ? j : 0; i < T; ++i) {
        double dot = 0;
        for (int c = 0; c < D; ++c) dot += at(bq, i, c) * at(bk, j, c);
        const double pij = std::exp(dot * scale - double(hl[i]));
        for (int c = 0; c < D; ++c) acc[c] += pij * at(bdo, i, c);
      }
      double norm = 0;
      for (int c = 0; c < D; ++c) norm = std::max(norm, std::fabs(acc[c]));
      for (int c = 0; c < D; ++c)
        worst_dv = std::max(worst_dv, std::fabs(acc[c] - at(hdv, j, c)) / std::max(1.0, norm));
    }
    std::printf("check (head 0): max |O - ref| %.3g, max |L - ref| %.3g, max |dV - ref| / max(1, |dV|) %.3g\n", worst_o,
                worst_l, worst_dv);
    if (!(worst_o < 2e-2 && worst_l < 1e-3 && worst_dv < 3e-2)) fail("FlashAttention-3's output is off: not timed");
  }

  for (int i = 0; i < a.warmup; ++i) {
    fwd();
    bwd();
  }
  check(cudaStreamSynchronize(s), "warm-up");
  std::vector<double> f, b, fb;
  for (int i = 0; i < a.iters; ++i) f.push_back(time_ms(fwd, s));
  for (int i = 0; i < a.iters; ++i) b.push_back(time_ms(bwd, s));
  for (int i = 0; i < a.iters; ++i) fb.push_back(time_ms([&] { fwd(), bwd(); }, s));
  const double mf = median(f), mb = median(b), mfb = median(fb);
  // FLOPs as paratrain counts them: 4·B·H·Tq·Tk·d forward, halved when causal; backward 2.5×.
  const double flop = 4.0 * a.batch * a.heads * double(a.seq) * a.seq * a.d * (a.causal ? 0.5 : 1.0);
  std::printf("fa3 %d %d %d %d %d %.3f %.3f %.3f %.1f %.1f\n", a.batch, a.heads, a.seq, a.d, int(a.causal), mf, mb, mfb,
              flop / (mf * 1e9), 3.5 * flop / (mfb * 1e9));
  check(cudaStreamDestroy(s), "stream");
  return 0;
}
