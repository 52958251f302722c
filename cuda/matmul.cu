// GEMM on the GPU: cublasGemmStridedBatchedEx covers every case the op allows (transposes, row
// strides, batch strides including 0, bf16 or fp32 operands with fp32 accumulation, fp32 or
// bf16 C) in one call. With GemmSelect::Autotune (the default) each new GEMM shape is timed
// once through that call and through cuBLASLt's heuristic candidates, and the fastest is kept
// for the shape (`paratrain bench gemm` measures what that buys:
// docs/reports/2026-11-23_gemm-autotune_h100.md).
#include <cublasLt.h>
#include <cublas_v2.h>

#include <array>
#include <limits>
#include <map>
#include <memory>
#include <mutex>

#include "core/allocator.h"
#include "core/error.h"
#include "core/fp8.h"
#include "core/timing.h"
#include "cuda/matmul.h"

namespace pt::cuda {

namespace {

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::F8E4M3: return CUDA_R_8F_E4M3;
    case DType::F8E5M2: return CUDA_R_8F_E5M2;
    default: PT_FAIL(std::string("matmul on the GPU does not take ") + dtype_name(t));
  }
}
// True FP32 unless the run asked for TF32; bf16 operands always accumulate in fp32.
cublasComputeType_t compute_type(const Context& ctx, const GemmDesc& g) {
  return (g.ab_dtype == DType::F32 && ctx.precision() == Precision::TF32) ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                          : CUBLAS_COMPUTE_32F;
}

void cublas_matmul(Context& ctx, const GemmDesc& g) {
  const cudaDataType_t ab = cuda_type(g.ab_dtype), c = cuda_type(g.c_dtype);
  // cublasGemmEx reads C where it writes it: a separate C input is copied there first (2-D).
  if (g.c_in) {
    const size_t esize = dtype_size(g.c_dtype);
    PT_CUDA_CHECK(cudaMemcpy2DAsync(g.c, size_t(g.ldc) * esize, g.c_in, size_t(g.ldc) * esize, size_t(g.n) * esize,
                                    size_t(g.m), cudaMemcpyDeviceToDevice, ctx.stream()));
  }
  // Column-major view: the roles of A and B swap, and m/n swap.
  PT_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      ctx.cublas(), g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, int(g.n), int(g.m),
      int(g.k), &g.alpha, g.b, ab, int(g.ldb), g.stride_b, g.a, ab, int(g.lda), g.stride_a, &g.beta, g.c, c, int(g.ldc),
      g.stride_c, int(g.batch), compute_type(ctx, g), CUBLAS_GEMM_DEFAULT));
}

// The largest power of two (at most 256, cuBLASLt's default assumption) dividing every address
// the GEMM touches in one operand: its base and each batch entry's.
uint32_t alignment(const void* p, int64_t batch_stride, DType t) {
  uint64_t a = reinterpret_cast<uint64_t>(p) | 256u;
  if (batch_stride != 0) a |= static_cast<uint64_t>(batch_stride) * dtype_size(t);
  return static_cast<uint32_t>(a & (~a + 1));
}

// Where the GEMM reads C: c_in when set (always apart from the output), else the output.
const void* c_read(const GemmDesc& g) { return g.c_in ? g.c_in : g.c; }

// cuBLASLt descriptors of g in matmul's column-major view (A_lt = B, B_lt = A, C_lt = Cᵀ) and
// the preference its heuristic is asked with; they depend on the shape, not on the pointers.
struct LtProblem {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  LtProblem() = default;
  LtProblem(const LtProblem&) = delete;
  LtProblem& operator=(const LtProblem&) = delete;
  ~LtProblem() {
    if (op) cublasLtMatmulDescDestroy(op);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
  }
};

void set_batch(cublasLtMatrixLayout_t l, int64_t batch, int64_t stride) {
  const int count = static_cast<int>(batch);
  PT_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
  PT_CUBLAS_CHECK(
      cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
}

template <typename T>
void set_pref(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, T value) {
  PT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)));
}

void describe(const Context& ctx, const GemmDesc& g, LtProblem& p) {
  PT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, compute_type(ctx, g), CUDA_R_32F));
  const cublasOperation_t ta = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  PT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  PT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  if (ctx.reserved_sms() > 0) {  // as cublasSetSmCountTarget does for the cuBLAS path
    const int32_t sms = ctx.sm_count() - ctx.reserved_sms();
    PT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sms, sizeof(sms)));
  }
  const cudaDataType_t ab = cuda_type(g.ab_dtype), c = cuda_type(g.c_dtype);
  PT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, ab, g.trans_b ? g.k : g.n, g.trans_b ? g.n : g.k, g.ldb));
  PT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, ab, g.trans_a ? g.m : g.k, g.trans_a ? g.k : g.m, g.lda));
  PT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, c, g.n, g.m, g.ldc));
  if (g.batch > 1) {
    set_batch(p.a, g.batch, g.stride_b);
    set_batch(p.b, g.batch, g.stride_a);
    set_batch(p.c, g.batch, g.stride_c);
  }
  PT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&p.pref));
  set_pref(p.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, ctx.workspace_bytes());
  // Views into the flat buffers need not sit on 256 bytes; the candidates must not assume it.
  set_pref(p.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment(g.b, g.stride_b, g.ab_dtype));
  set_pref(p.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignment(g.a, g.stride_a, g.ab_dtype));
  set_pref(p.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignment(c_read(g), g.stride_c, g.c_dtype));
  set_pref(p.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignment(g.c, g.stride_c, g.c_dtype));
}

std::vector<cublasLtMatmulHeuristicResult_t> candidates(Context& ctx, const LtProblem& p, int max_algos) {
  std::vector<cublasLtMatmulHeuristicResult_t> found(static_cast<size_t>(max_algos));
  int n = 0;
  const cublasStatus_t s =
      cublasLtMatmulAlgoGetHeuristic(ctx.cublaslt(), p.op, p.a, p.b, p.c, p.c, p.pref, max_algos, found.data(), &n);
  if (s == CUBLAS_STATUS_NOT_SUPPORTED)
    n = 0;  // no algorithm for this problem: cuBLAS serves it
  else
    PT_CUBLAS_CHECK(s);
  found.resize(static_cast<size_t>(n));
  return found;
}

// d: the output (g.c, or the autotuner's scratch); C is read from c_read(g) when it is elsewhere.
cublasStatus_t lt_matmul(Context& ctx, const LtProblem& p, const cublasLtMatmulAlgo_t& algo, const GemmDesc& g,
                         void* d) {
  const void* c = g.c_in ? g.c_in : d;
  return cublasLtMatmul(ctx.cublaslt(), p.op, &g.alpha, g.b, p.a, g.a, p.b, &g.beta, c, p.c, d, p.c, &algo,
                        ctx.workspace(), ctx.workspace_bytes(), ctx.stream());
}

// What a shape runs: cuBLAS (lt empty) or a cuBLASLt algorithm with its descriptors.
struct Plan {
  std::unique_ptr<LtProblem> lt;
  cublasLtMatmulAlgo_t algo{};
};

// Everything the choice depends on: device, shape, layouts, types, SM target, alignments and
// whether C is read (beta ≠ 0 changes the fastest kernel).
using PlanKey = std::array<int64_t, 20>;
PlanKey plan_key(const Context& ctx, const GemmDesc& g) {
  // clang-format off
  return {ctx.device().index, g.batch, g.m, g.n, g.k, g.trans_a, g.trans_b, static_cast<int64_t>(g.ab_dtype),
          static_cast<int64_t>(g.c_dtype), g.lda, g.ldb, g.ldc, g.stride_a, g.stride_b, g.stride_c,
          static_cast<int64_t>(compute_type(ctx, g)), ctx.reserved_sms(), g.beta != 0.0f,
          (int64_t{alignment(g.a, g.stride_a, g.ab_dtype)} << 16) | alignment(g.b, g.stride_b, g.ab_dtype),
          (int64_t{alignment(c_read(g), g.stride_c, g.c_dtype)} << 16) | alignment(g.c, g.stride_c, g.c_dtype) |
              (int64_t{g.c_in != nullptr} << 40)};
  // clang-format on
}

// Elements from C's first to one past its last, the size of a scratch copy.
int64_t c_extent(const GemmDesc& g) { return (g.batch - 1) * g.stride_c + (g.m - 1) * g.ldc + g.n; }

// A cuBLASLt candidate must beat cuBLAS by this factor in the idle timing to be kept: near-ties
// keep the default, so runs differ less, and smaller leads did not hold in the step
// (docs/reports/2026-11-27_rmsnorm-persistent-autotune_h100.md).
constexpr double kCublasHeadStart = 0.97;

// Autotune: times cuBLAS and every heuristic candidate on g's operands and keeps the fastest,
// cuBLAS with kCublasHeadStart. C is a scratch buffer when beta ≠ 0 (the real C must be read
// once, by the real call); when the scratch cannot be had the shape stays with cuBLAS. Lt: the
// heuristic's first choice, untimed (tests reach cuBLASLt with it).
Plan choose(Context& ctx, const GemmDesc& g, GemmSelect select) {
  Plan plan;
  auto p = std::make_unique<LtProblem>();
  describe(ctx, g, *p);
  const auto found = candidates(ctx, *p, select == GemmSelect::Lt ? 1 : 8);
  if (found.empty()) return plan;
  if (select == GemmSelect::Lt) {
    plan.algo = found.front().algo;
    plan.lt = std::move(p);
    return plan;
  }
  void* scratch = nullptr;
  if (g.beta != 0.0f) {
    try {
      scratch = TrackingAllocator::instance().allocate(static_cast<size_t>(c_extent(g)) * dtype_size(g.c_dtype),
                                                       DeviceKind::CUDA, "gemm_autotune_c", MemCategory::Workspace);
    } catch (const OutOfMemory&) {
      return plan;
    }
  }
  std::unique_ptr<void, void (*)(void*)> scratch_guard(scratch, [](void* q) {
    if (q) TrackingAllocator::instance().release(q);
  });
  GemmDesc probe = g;
  if (scratch) probe.c = scratch;
  constexpr int kIters = 5;
  auto run_cublas = [&] { cublas_matmul(ctx, probe); };
  double best_ms = kCublasHeadStart * per_run_ms(ctx, kIters, run_cublas, 1);
  const cublasLtMatmulAlgo_t* best = nullptr;
  for (const auto& r : found) {
    cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
    auto run_candidate = [&] {
      if (status == CUBLAS_STATUS_SUCCESS) status = lt_matmul(ctx, *p, r.algo, probe, probe.c);
    };
    const double t = per_run_ms(ctx, kIters, run_candidate, 1);
    if (status == CUBLAS_STATUS_SUCCESS && t < best_ms) {
      best_ms = t;
      best = &r.algo;
    }
  }
  if (best) {
    plan.algo = *best;
    plan.lt = std::move(p);
  }
  return plan;
}

// One plan per key and selection mode for the process (a rank drives one device; the lock
// only guards against test threads).
const Plan& plan_for(Context& ctx, const GemmDesc& g) {
  static std::mutex mutex;
  static std::map<std::pair<PlanKey, GemmSelect>, Plan> plans;
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_pair(plan_key(ctx, g), ctx.gemm_select());
  auto it = plans.find(key);
  if (it == plans.end()) it = plans.emplace(key, choose(ctx, g, ctx.gemm_select())).first;
  return it->second;
}

// Autotuning leaves GEMMs under 2^30 FLOP (a few µs) with cuBLAS: what they
// could gain is small beside the timing noise that would decide it, and every rank of a data-
// parallel job would time its way into its own kernel. Ranks holding the same data must compute
// the same gradients to the last bit where nothing averages them (the sharded-optimizer tests
// hold the toy models to rtol 1e-7, which Adam turns a last-bit difference into breaking).
bool worth_tuning(const GemmDesc& g) {
  return 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k) *
             static_cast<double>(g.batch) >=
         1073741824.0;
}

// ---- FP8 ---------------------------------------------------------------------------------
// In the column-major view (A_lt = B, B_lt = A, D_lt = Cᵀ) the scale pointers swap with the
// operands. They are set on the cached descriptor before each call (a host-side write that
// cublasLtMatmul reads when it enqueues), so that a plan serves every pair of scale tensors of
// its shape.
void set_fp8_scales(const LtProblem& p, const Fp8GemmDesc& g) {
  PT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &g.b_scale_inv,
                                                 sizeof(g.b_scale_inv)));
  PT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &g.a_scale_inv,
                                                 sizeof(g.a_scale_inv)));
}

const void* c_read(const Fp8GemmDesc& g) { return g.c_in ? g.c_in : g.c; }

// A_lt stored k×n read transposed and B_lt stored k×m read as it is: cuBLASLt's "TN", the only
// FP8 layout on Ada and Hopper (sm_100 takes any, but one layout keeps one path).
void describe_fp8(const Context& ctx, const Fp8GemmDesc& g, LtProblem& p) {
  PT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  PT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  PT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  set_fp8_scales(p, g);
  const int8_t fast = g.fast_accum ? 1 : 0;
  PT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast)));
  if (ctx.reserved_sms() > 0) {
    const int32_t sms = ctx.sm_count() - ctx.reserved_sms();
    PT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sms, sizeof(sms)));
  }
  PT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, cuda_type(g.b_dtype), g.k, g.n, g.ldb));
  PT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, cuda_type(g.a_dtype), g.k, g.m, g.lda));
  PT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, cuda_type(g.c_dtype), g.n, g.m, g.ldc));
  PT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&p.pref));
  set_pref(p.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, ctx.workspace_bytes());
  set_pref(p.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment(g.b, 0, g.b_dtype));
  set_pref(p.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignment(g.a, 0, g.a_dtype));
  set_pref(p.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignment(c_read(g), 0, g.c_dtype));
  set_pref(p.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignment(g.c, 0, g.c_dtype));
}

// The heuristic's first choice per FP8 problem, for the process: shape, layouts, types, SM
// target, alignments and whether C is read (beta ≠ 0), as for the bf16 plans.
const Plan& fp8_plan_for(Context& ctx, const Fp8GemmDesc& g) {
  using Key = std::array<int64_t, 15>;
  // clang-format off
  const Key key{ctx.device().index, g.m, g.n, g.k, static_cast<int64_t>(g.a_dtype), static_cast<int64_t>(g.b_dtype),
                static_cast<int64_t>(g.c_dtype), g.lda, g.ldb, g.ldc, g.fast_accum, ctx.reserved_sms(),
                (int64_t{alignment(g.a, 0, g.a_dtype)} << 16) | alignment(g.b, 0, g.b_dtype),
                (int64_t{alignment(c_read(g), 0, g.c_dtype)} << 16) | alignment(g.c, 0, g.c_dtype),
                int64_t{g.beta != 0.0f} | (int64_t{g.c_in != nullptr} << 1)};
  // clang-format on
  static std::mutex mutex;
  static std::map<Key, Plan> plans;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = plans.find(key);
  if (it != plans.end()) return it->second;
  const std::string why = fp8_unsupported_reason(ctx.target());  // once per problem, not per call
  PT_CHECK(why.empty(), "matmul_fp8: " + why);
  Plan plan;
  plan.lt = std::make_unique<LtProblem>();
  describe_fp8(ctx, g, *plan.lt);
  const auto found = candidates(ctx, *plan.lt, 1);
  PT_CHECK(!found.empty(), std::string("matmul_fp8: cuBLASLt has no FP8 kernel for C (") + std::to_string(g.m) + ", " +
                               std::to_string(g.n) + ") " + dtype_name(g.c_dtype) + " = A (" + std::to_string(g.m) +
                               ", " + std::to_string(g.k) + ") " + dtype_name(g.a_dtype) + " · B (" +
                               std::to_string(g.n) + ", " + std::to_string(g.k) + ")ᵀ " + dtype_name(g.b_dtype) +
                               " on " + ctx.target().name);
  plan.algo = found.front().algo;
  return plans.emplace(key, std::move(plan)).first->second;
}

}  // namespace

void matmul(Context& ctx, const GemmDesc& g) {
  if (ctx.gemm_select() == GemmSelect::Cublas) return cublas_matmul(ctx, g);
  if (ctx.gemm_select() == GemmSelect::Autotune && !worth_tuning(g)) return cublas_matmul(ctx, g);
  const Plan& plan = plan_for(ctx, g);
  if (!plan.lt) return cublas_matmul(ctx, g);
  PT_CUBLAS_CHECK(lt_matmul(ctx, *plan.lt, plan.algo, g, g.c));
}

std::vector<double> time_cublaslt_algos(Context& ctx, const GemmDesc& g, int max_algos, int iters) {
  LtProblem p;
  describe(ctx, g, p);
  std::vector<double> ms;
  for (const auto& r : candidates(ctx, p, max_algos)) {
    cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
    const double t = per_run_ms(ctx, iters, [&] {
      if (status == CUBLAS_STATUS_SUCCESS) status = lt_matmul(ctx, p, r.algo, g, g.c);
    });
    ms.push_back(status == CUBLAS_STATUS_SUCCESS ? t : std::numeric_limits<double>::infinity());
  }
  return ms;
}

double time_cublas(Context& ctx, const GemmDesc& g, int iters) {
  return per_run_ms(ctx, iters, [&] { cublas_matmul(ctx, g); });
}

double time_matmul(Context& ctx, const GemmDesc& g, int iters) {
  return per_run_ms(ctx, iters, [&] { matmul(ctx, g); });
}

void matmul_fp8(Context& ctx, const Fp8GemmDesc& g) {
  const Plan& plan = fp8_plan_for(ctx, g);
  set_fp8_scales(*plan.lt, g);  // the scales come through the scale pointers, alpha on top
  PT_CUBLAS_CHECK(cublasLtMatmul(ctx.cublaslt(), plan.lt->op, &g.alpha, g.b, plan.lt->a, g.a, plan.lt->b, &g.beta,
                                 c_read(g), plan.lt->c, g.c, plan.lt->c, &plan.algo, ctx.workspace(),
                                 ctx.workspace_bytes(), ctx.stream()));
}

double time_matmul_fp8(Context& ctx, const Fp8GemmDesc& g, int iters) {
  return per_run_ms(ctx, iters, [&] { matmul_fp8(ctx, g); });
}

}  // namespace pt::cuda
