// Would a CUTLASS GEMM carrying SwiGLU's backward in its epilogue beat cuBLAS + paratrain's pass at
// XL's shapes? The measurement before building one (issue 16). The Triton probe
// (dev/probe_swiglu_epilogue.py) answered "not with Triton's GEMM": its plain GEMMs ran at 512–530
// TFLOP/s where cuBLAS ran 650–730, so any epilogue saving drowned. This probe asks the same of
// CUTLASS 4 (sm90 TMA warp-specialised kernels, the epilogue as an epilogue visitor tree):
//   1. cuBLAS against CUTLASS, plain, on the two FFN GEMMs whose outputs SwiGLU reads:
//        forward  h13 = x · [W1;W3]ᵀ   M 2048, N 12800, K 1600  (A row-major, B K-major)
//        backward dg  = dy · W2        M 2048, N 6400,  K 1600  (A row-major, B N-major)
//   2. the backward fused: dg's GEMM whose epilogue loads h1 and h3 at the tile and stores dh1 (as D),
//      dh3 and g (auxiliary stores), so dg is never written or read (52 MB a layer fewer), against
//      cuBLAS dg + one pass (dg, h1, h3 → dh1, dh3, g) as cuda/elementwise.cu runs it.
//   3. the forward fused: W1's and W3's rows interleaved, so each tile holds column pairs (h1ⱼ, h3ⱼ);
//      the epilogue stores them as D and g = silu(h1)·h3 at half the width through a store node of
//      its own (SwigluPairStore), so the pass's 52 MB read of h1, h3 is gone; against cuBLAS + the
//      forward pass.
// Every fused output is checked against the cuBLAS + pass result before anything is timed.
// Build: dev/build_probe_cutlass.sh (CUTLASS 4.2's headers from the `nvidia-cutlass` wheel, sm_90a);
// run: dev/experiments/probes.sh probe-cutlass-swiglu. Not part of the tests.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda/dev_check.h"
#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/sm90_visitor_tma_warpspecialized.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"
#include "cutlass/version.h"

using namespace cute;

#define CHECK_CUDA(x) DEV_CHECK_CUDA(x)
#define CHECK_CUBLAS(x)                                                                        \
  do {                                                                                         \
    const cublasStatus_t s_ = (x);                                                             \
    dev_check(s_ == CUBLAS_STATUS_SUCCESS, #x, cublasGetStatusString(s_), __FILE__, __LINE__); \
  } while (0)

using bf16 = cutlass::bfloat16_t;
constexpr int kTokens = 2048, kModel = 1600, kHidden = 6400, kLayers = 48;

// ---- the SwiGLU backward's element-wise parts (fp32; silu(a) = a·σ(a)) ----
// The pass uses the accurate σ; the epilogue's nodes the fast one (__expf, __frcp_rn), σ once a
// element (its own node), since the epilogue's arithmetic runs on the GEMM's own warps.
__host__ __device__ inline float sigmoid_f(float a) { return 1.f / (1.f + expf(-a)); }

// An epilogue node's arithmetic: Op on each element of its input fragments (Sm90Compute's ComputeFn).
template <class Op>
struct PerElement {
  template <class T>
  struct Fn {
    template <class... Ts>
    CUTLASS_DEVICE T operator()(T const& a, Ts const&... b) const {
      T out;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < int(T::kElements); ++i) out[i] = Op{}(a[i], b[i]...);
      return out;
    }
  };
};
struct SigmoidOp {  // (h1) → σ(h1)
  CUTLASS_DEVICE float operator()(float h1) const { return __frcp_rn(1.f + __expf(-h1)); }
};
struct SwigluDh3Op {  // (dg, h1, σ) → dh3 = dg · h1 · σ
  CUTLASS_DEVICE float operator()(float dg, float h1, float s) const { return dg * h1 * s; }
};
struct SwigluGOp {  // (h1, h3, σ) → g = h1 · σ · h3, remade for W2's gradient
  CUTLASS_DEVICE float operator()(float h1, float h3, float s) const { return h1 * s * h3; }
};
struct SwigluDh1Op {  // (dg, h1, h3, σ, dh3 stored, g stored) → dh1 = dg · h3 · σ(1 + h1(1 − σ))
  CUTLASS_DEVICE float operator()(float dg, float h1, float h3, float s, float, float) const {
    return dg * h3 * s * (1.f + h1 * (1.f - s));
  }
};

// ---- paratrain's pass beside cuBLAS (8 bf16 a thread, as cuda/elementwise.cu's vector path) ----
__global__ void swiglu_backward_pass(const __nv_bfloat16* dg, const __nv_bfloat16* h1, const __nv_bfloat16* h3,
                                     __nv_bfloat16* dh1, __nv_bfloat16* dh3, __nv_bfloat16* g, int64_t n) {
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 8;
  if (i >= n) return;
  uint4 vdg = *reinterpret_cast<const uint4*>(dg + i), v1 = *reinterpret_cast<const uint4*>(h1 + i),
        v3 = *reinterpret_cast<const uint4*>(h3 + i);
  const __nv_bfloat16 *pdg = reinterpret_cast<const __nv_bfloat16*>(&vdg),
                      *p1 = reinterpret_cast<const __nv_bfloat16*>(&v1),
                      *p3 = reinterpret_cast<const __nv_bfloat16*>(&v3);
  uint4 o1, o3, og;
  __nv_bfloat16 *q1 = reinterpret_cast<__nv_bfloat16*>(&o1), *q3 = reinterpret_cast<__nv_bfloat16*>(&o3),
                *qg = reinterpret_cast<__nv_bfloat16*>(&og);
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const float d = __bfloat162float(pdg[k]), a = __bfloat162float(p1[k]), b = __bfloat162float(p3[k]);
    const float s = sigmoid_f(a);
    q1[k] = __float2bfloat16(d * b * s * (1.f + a * (1.f - s)));
    q3[k] = __float2bfloat16(d * a * s);
    qg[k] = __float2bfloat16(a * s * b);
  }
  *reinterpret_cast<uint4*>(dh1 + i) = o1;
  *reinterpret_cast<uint4*>(dh3 + i) = o3;
  *reinterpret_cast<uint4*>(g + i) = og;
}

// The forward pass: g = silu(h1)·h3, h1 and h3 the two halves of each (2F)-wide row of h13.
__global__ void swiglu_forward_pass(const __nv_bfloat16* h13, __nv_bfloat16* g, int rows, int f) {
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 8;
  if (i >= int64_t(rows) * f) return;
  const int64_t r = i / f, c = i % f;
  uint4 v1 = *reinterpret_cast<const uint4*>(h13 + r * 2 * f + c),
        v3 = *reinterpret_cast<const uint4*>(h13 + r * 2 * f + f + c);
  const __nv_bfloat16 *p1 = reinterpret_cast<const __nv_bfloat16*>(&v1),
                      *p3 = reinterpret_cast<const __nv_bfloat16*>(&v3);
  uint4 og;
  __nv_bfloat16* qg = reinterpret_cast<__nv_bfloat16*>(&og);
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const float a = __bfloat162float(p1[k]), b = __bfloat162float(p3[k]);
    qg[k] = __float2bfloat16(a * sigmoid_f(a) * b);
  }
  *reinterpret_cast<uint4*>(g + i) = og;
}

// ---- CUTLASS kernels ----
namespace fusion = cutlass::epilogue::fusion;
constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;
constexpr int kAlign = 8;  // 16 bytes of bf16: TMA

// An epilogue node for a tile whose column pairs (2j, 2j+1) are (h1ⱼ, h3ⱼ): it keeps the thread's
// values of each epilogue sub-tile (rounded to bf16, as D stores them, so g is the pass's g) and,
// once the sub-tile is visited, stores gⱼ = silu(h1ⱼ)·h3ⱼ at g[m, n/2] from the thread's registers.
// CUTLASS has no store node narrower than the tile. Its input passes through to D (h13, interleaved).
// A thread's fragment holds each pair side by side (the accumulator's column pairs); where it does
// not, g gets NaN and the probe's check fails.
struct SwigluPairStore {
  struct SharedStorage {};
  struct Arguments {
    bf16* ptr_g = nullptr;
    int64_t ld_g = 0;
  };
  using Params = Arguments;
  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const&, Arguments const& a, void*) {
    return a;
  }
  template <class ProblemShape>
  static bool can_implement(ProblemShape const&, Arguments const&) {
    return true;
  }
  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const&, Arguments const&) {
    return 0;
  }
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const&, Arguments const&, void*, cudaStream_t,
                                              cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }
  CUTLASS_HOST_DEVICE SwigluPairStore() {}
  CUTLASS_HOST_DEVICE SwigluPairStore(Params const& params, SharedStorage const&) : params_ptr(&params) {}
  Params const* params_ptr = nullptr;
  CUTLASS_DEVICE bool is_producer_load_needed() const { return false; }
  CUTLASS_DEVICE bool is_C_load_needed() const { return false; }
  template <class... Args>
  CUTLASS_DEVICE auto get_producer_load_callbacks(fusion::ProducerLoadArgs<Args...> const&) {
    return fusion::EmptyProducerLoadCallbacks{};
  }

  template <class RTensor, class CTensor, class ShapeMNL>
  struct ConsumerStoreCallbacks : fusion::EmptyConsumerStoreCallbacks {
    CUTLASS_DEVICE ConsumerStoreCallbacks(RTensor&& r, CTensor&& c, ShapeMNL shape, Params const* params)
        : tC_rH(cute::forward<RTensor>(r)), tC_cH(cute::forward<CTensor>(c)), shape_mnl(shape), params_ptr(params) {}
    RTensor tC_rH;  // (CPY, CPY_M, CPY_N): this sub-tile's values, bf16
    CTensor tC_cH;  // (CPY, CPY_M, CPY_N, EPI_M, EPI_N): their (m, n, l)
    ShapeMNL shape_mnl;
    Params const* params_ptr;

    template <typename ElementAccumulator, typename ElementInput, int FragmentSize>
    CUTLASS_DEVICE auto visit(cutlass::Array<ElementAccumulator, FragmentSize> const&, int epi_v, int, int,
                              cutlass::Array<ElementInput, FragmentSize> const& frg_input) {
      using Convert = cutlass::NumericArrayConverter<bf16, ElementInput, FragmentSize, kRound>;
      Tensor frg = recast<cutlass::Array<bf16, FragmentSize>>(coalesce(tC_rH));
      frg(epi_v) = Convert{}(frg_input);
      return frg_input;
    }

    // A thread holds rows r0 and r0 + 8 of the sub-tile, columns n0 + 8i + {0, 1} (i < 4): the
    // accumulator's layout, checked against the coordinates (NaN where it does not hold). Its g
    // values are columns n0/2 + 4i of g; a 4 × 4 transpose among the quad's lanes (same rows,
    // t = lane % 4) gives each lane g's columns 4t … 4t + 3 (relative), one 8-byte store a row:
    // each quad writes 32 contiguous bytes a row, whole sectors.
    CUTLASS_DEVICE void end_loop(int epi_m, int epi_n) {
      Tensor c = tC_cH(_, _, _, epi_m, epi_n);
      const int M = int(get<0>(shape_mnl)), N = int(get<1>(shape_mnl));
      const int m0 = int(get<0>(c(0))), n0 = int(get<1>(c(0)));
      const int lane = int(threadIdx.x % 32), t = lane % 4;
      bool ok = n0 % 2 == 0 && int(size(tC_rH)) == 16;
      float v[2][4];
      CUTLASS_PRAGMA_UNROLL
      for (int k = 0; k < 8; ++k) v[k / 4][k % 4] = NAN;
      CUTLASS_PRAGMA_UNROLL
      for (int e = 0; e < int(size(tC_rH)); e += 2) {
        const int dm = int(get<0>(c(e))) - m0, dn = int(get<1>(c(e))) - n0;
        ok = ok && (dm == 0 || dm == 8) && dn >= 0 && dn % 8 == 0 && dn < 32 && int(get<0>(c(e + 1))) == m0 + dm &&
             int(get<1>(c(e + 1))) == n0 + dn + 1;
        const float h1 = float(tC_rH(e)), h3 = float(tC_rH(e + 1));
        const float g = h1 * __frcp_rn(1.f + __expf(-h1)) * h3;
        CUTLASS_PRAGMA_UNROLL
        for (int k = 0; k < 8; ++k) v[k / 4][k % 4] = (dm == 8 * (k / 4) && dn == 8 * (k % 4)) ? g : v[k / 4][k % 4];
      }
      CUTLASS_PRAGMA_UNROLL
      for (int a = 0; a < 2; ++a) {
        float w[4];
        CUTLASS_PRAGMA_UNROLL
        for (int r = 0; r < 4; ++r) {
          // Round r: lane t reads lane (t + r) % 4's value for column block t, which that lane
          // sends as its v[(s − r) % 4].
          const int send_i = (t - r) & 3, src = (t + r) & 3;
          float send = v[a][0];
          CUTLASS_PRAGMA_UNROLL
          for (int b = 1; b < 4; ++b) send = send_i == b ? v[a][b] : send;
          const float got = __shfl_sync(0xffffffffu, send, (lane & ~3) | src);
          CUTLASS_PRAGMA_UNROLL
          for (int b = 0; b < 4; ++b) w[b] = src == b ? got : (r == 0 ? NAN : w[b]);
        }
        const int m = m0 + 8 * a;
        if (m >= M || n0 >= N) continue;
        __nv_bfloat162 lo = __floats2bfloat162_rn(ok ? w[0] : NAN, w[1]), hi = __floats2bfloat162_rn(w[2], w[3]);
        uint2 packed;
        packed.x = *reinterpret_cast<uint32_t*>(&lo);
        packed.y = *reinterpret_cast<uint32_t*>(&hi);
        *reinterpret_cast<uint2*>(params_ptr->ptr_g + int64_t(m) * params_ptr->ld_g + n0 / 2 + 3 * t) = packed;
      }
    }
  };

  template <bool ReferenceSrc, class... Args>
  CUTLASS_DEVICE auto get_consumer_store_callbacks(fusion::ConsumerStoreArgs<Args...> const& args) {
    auto [M, N, K, L] = args.problem_shape_mnkl;
    auto shape_mnl = make_shape(M, N, L);
    Tensor tC_cH = fusion::sm90_partition_for_epilogue<ReferenceSrc>(make_identity_tensor(shape_mnl),
                                                                     args.tile_shape_mnk, args.tile_coord_mnkl,
                                                                     args.epi_tile, args.tiled_copy, args.thread_idx);
    Tensor tC_rH = make_tensor<bf16>(take<0, 3>(shape(tC_cH)));
    return ConsumerStoreCallbacks<decltype(tC_rH), decltype(tC_cH), decltype(shape_mnl)>(
        cute::move(tC_rH), cute::move(tC_cH), shape_mnl, params_ptr);
  }
};

// The GemmUniversal plumbing both runners share: D (M × N) = A (M × K) · B with packed strides,
// the workspace, the launch.
template <class Kernel>
struct GemmLauncher {
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  Gemm gemm;
  void* workspace = nullptr;

  static typename Gemm::Arguments arguments(int M, int N, int K, const bf16* a, const bf16* b, bf16* d) {
    using SA = typename Kernel::StrideA;
    using SB = typename Kernel::StrideB;
    using SD = typename Kernel::StrideD;
    SA sa = cutlass::make_cute_packed_stride(SA{}, make_shape(M, K, 1));
    SB sb = cutlass::make_cute_packed_stride(SB{}, make_shape(N, K, 1));
    SD sd = cutlass::make_cute_packed_stride(SD{}, make_shape(M, N, 1));
    return {cutlass::gemm::GemmUniversalMode::kGemm, {M, N, K, 1}, {a, sa, b, sb}, {{}, nullptr, sd, d, sd}};
  }
  bool start(typename Gemm::Arguments const& args) {  // false: CUTLASS cannot run this configuration
    if (gemm.can_implement(args) != cutlass::Status::kSuccess) return false;
    CHECK_CUDA(cudaMalloc(&workspace, std::max<size_t>(Gemm::get_workspace_size(args), 16)));
    return gemm.initialize(args, workspace) == cutlass::Status::kSuccess;
  }
  void run(cudaStream_t s) {
    if (gemm.run(s) != cutlass::Status::kSuccess) {
      std::fprintf(stderr, "CUTLASS run failed\n");
      std::exit(1);
    }
  }
};

// D (M × N, h13 interleaved) = A · B (K-major B: x · W13ᵢᵀ), g (M × N/2) by SwigluPairStore.
template <class Tile, class Cluster, class MainSchedule, class EpiSchedule>
struct ForwardFusedRunner {
  using LayoutD = cutlass::layout::RowMajor;
  using Tree = fusion::Sm90EVT<fusion::Sm90Compute<cutlass::epilogue::thread::Identity, bf16, float, kRound>,
                               fusion::Sm90EVT<SwigluPairStore, fusion::Sm90AccFetch>>;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD, kAlign, bf16, LayoutD, kAlign,
      EpiSchedule, Tree>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, bf16, cutlass::layout::RowMajor, kAlign, bf16,
      cutlass::layout::ColumnMajor, kAlign, float, Tile, Cluster,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      MainSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue>;
  GemmLauncher<Kernel> launcher;

  bool init(int M, int N, int K, const bf16* a, const bf16* b, bf16* d, bf16* g) {
    auto args = launcher.arguments(M, N, K, a, b, d);
    args.epilogue.thread = {{{}, {g, int64_t(N / 2)}}, {}};
    return launcher.start(args);
  }
  void run(cudaStream_t s) { launcher.run(s); }
};

// kDirect: h1, h3 loaded and dh3, g stored by the epilogue's own threads (CUTLASS's Stages = 0
// nodes), not by TMA through shared memory: the TMA loads are the producer warp's, which then
// cannot run ahead into the next tile's mainloop until this tile's epilogue has taken them.
template <class Tile, class Cluster, class MainSchedule, class EpiSchedule, class LayoutB, bool kFused,
          class EpiTile = cutlass::epilogue::collective::EpilogueTileAuto, bool kDirect = false>
struct Runner {
  using LayoutA = cutlass::layout::RowMajor;
  using LayoutD = cutlass::layout::RowMajor;
  using EpiDesc = cutlass::epilogue::collective::detail::EpilogueDescriptor<Tile, EpiTile, bf16, bf16, EpiSchedule>;
  using AuxLoadDesc = cutlass::epilogue::collective::detail::AuxLoadDescriptor<EpiDesc, LayoutD, bf16>;
  using AuxStoreDesc = cutlass::epilogue::collective::detail::AuxStoreDescriptor<EpiDesc, LayoutD, bf16>;
  using AuxLoadTma =
      fusion::Sm90AuxLoad<AuxLoadDesc::Stages, typename AuxLoadDesc::EpilogueTile, bf16, typename AuxLoadDesc::Stride,
                          typename AuxLoadDesc::SmemLayoutAtom, typename AuxLoadDesc::CopyOpS2R>;
  using AuxStoreTma = fusion::Sm90AuxStore<AuxStoreDesc::Stages, typename AuxStoreDesc::EpilogueTile, bf16, kRound,
                                           typename AuxStoreDesc::Stride, typename AuxStoreDesc::SmemLayoutAtom,
                                           typename AuxStoreDesc::CopyOpR2S>;
  using AuxLoad = std::conditional_t<
      kDirect, fusion::Sm90AuxLoad<0, typename EpiDesc::EpilogueTile, bf16, LayoutD, void, void, kAlign>, AuxLoadTma>;
  using AuxStore = std::conditional_t<
      kDirect, fusion::Sm90AuxStore<0, typename EpiDesc::EpilogueTile, bf16, kRound, LayoutD, void, void, kAlign>,
      AuxStoreTma>;
  // DAG, in topological order: 0 acc, 1 h1, 2 h3, 3 σ(h1), 4 dh3 = f(acc, h1, σ), 5 store dh3,
  // 6 g = f(h1, h3, σ), 7 store g, 8 dh1 = f(acc, h1, h3, σ; 5 and 7 only ordered before it) → D.
  using SwigluBackwardDag = fusion::Sm90TopologicalVisitor<
      float,
      cute::tuple<cute::seq<>, cute::seq<>, cute::seq<>, cute::seq<1>, cute::seq<0, 1, 3>, cute::seq<4>,
                  cute::seq<1, 2, 3>, cute::seq<6>, cute::seq<0, 1, 2, 3, 5, 7>>,
      fusion::Sm90AccFetch, AuxLoad, AuxLoad, fusion::Sm90Compute<PerElement<SigmoidOp>::Fn, float, float, kRound>,
      fusion::Sm90Compute<PerElement<SwigluDh3Op>::Fn, float, float, kRound>, AuxStore,
      fusion::Sm90Compute<PerElement<SwigluGOp>::Fn, float, float, kRound>, AuxStore,
      fusion::Sm90Compute<PerElement<SwigluDh1Op>::Fn, bf16, float, kRound>>;
  using Plain = fusion::LinearCombination<bf16, float, void, float, kRound>;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster, EpiTile, float, float,
      std::conditional_t<kFused, bf16, void>, LayoutD, kAlign, bf16, LayoutD, kAlign, EpiSchedule,
      std::conditional_t<kFused, SwigluBackwardDag, Plain>>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, bf16, LayoutA, kAlign, bf16, LayoutB, kAlign, float, Tile,
      Cluster,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      MainSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue>;
  GemmLauncher<Kernel> launcher;

  // D (M × N) = A (M × K, row-major) · B (K × N, LayoutB); for kFused the SwiGLU outputs as above.
  bool init(int M, int N, int K, const bf16* a, const bf16* b, bf16* d, const bf16* h1 = nullptr,
            const bf16* h3 = nullptr, bf16* dh3 = nullptr, bf16* g = nullptr) {
    auto args = launcher.arguments(M, N, K, a, b, d);
    if constexpr (kFused) {
      using AS = typename AuxLoadDesc::Stride;
      AS s_aux = cutlass::make_cute_packed_stride(AS{}, make_shape(M, N, 1));
      args.epilogue.ptr_C = d;  // unread: no node fetches C
      args.epilogue.thread = {
          {},                    // 0 acc
          {h1, bf16(0), s_aux},  // 1 h1
          {h3, bf16(0), s_aux},  // 2 h3
          {},                    // 3 σ
          {},                    // 4 dh3
          {dh3, s_aux},          // 5 store dh3
          {},                    // 6 g
          {g, s_aux},            // 7 store g
          {},                    // 8 dh1
      };
    } else {
      args.epilogue.thread.alpha = 1.f;
      args.epilogue.thread.beta = 0.f;
    }
    return launcher.start(args);
  }
  void run(cudaStream_t s) { launcher.run(s); }
};

// ---- helpers ----
template <class F>
float time_us(F&& f, cudaStream_t s, int reps = 50) {
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  for (int i = 0; i < 5; ++i) f();
  CHECK_CUDA(cudaEventRecord(a, s));
  for (int i = 0; i < reps; ++i) f();
  CHECK_CUDA(cudaEventRecord(b, s));
  CHECK_CUDA(cudaEventSynchronize(b));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
  CHECK_CUDA(cudaGetLastError());
  return 1000.f * ms / reps;
}

bf16* device_random(size_t n, float scale, unsigned seed) {
  std::vector<bf16> h(n);
  unsigned x = seed;
  for (auto& v : h) {
    x = x * 1664525u + 1013904223u;
    v = bf16(scale * ((x >> 8) * (1.f / 16777216.f) - 0.5f));
  }
  bf16* d;
  CHECK_CUDA(cudaMalloc(&d, n * sizeof(bf16)));
  CHECK_CUDA(cudaMemcpy(d, h.data(), n * sizeof(bf16), cudaMemcpyHostToDevice));
  return d;
}
bf16* device_empty(size_t n) {
  bf16* d;
  CHECK_CUDA(cudaMalloc(&d, n * sizeof(bf16)));
  CHECK_CUDA(cudaMemset(d, 0xFF, n * sizeof(bf16)));  // NaN: an unwritten element fails the check
  return d;
}
// max |got − want| / max |want|; NaN counts as a failure.
double rel_err(const bf16* got, const bf16* want, size_t n) {
  std::vector<bf16> g(n), w(n);
  CHECK_CUDA(cudaMemcpy(g.data(), got, n * sizeof(bf16), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(w.data(), want, n * sizeof(bf16), cudaMemcpyDeviceToHost));
  double e = 0, m = 0;
  for (size_t i = 0; i < n; ++i) {
    const double a = float(g[i]), b = float(w[i]);
    if (!std::isfinite(a)) return INFINITY;
    e = std::max(e, std::fabs(a - b));
    m = std::max(m, std::fabs(b));
  }
  return e / std::max(m, 1e-30);
}

double tflops(double m, double n, double k, float us) { return 2 * m * n * k / (us * 1e-6) / 1e12; }

// Tiles and schedules tried (one kernel each; the epilogue schedule matches the mainloop's).
using Coop = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using CoopEpi = cutlass::epilogue::TmaWarpSpecializedCooperative;
using Ping = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
using PingEpi = cutlass::epilogue::TmaWarpSpecialized;
using KMajorB = cutlass::layout::ColumnMajor;  // B (K × N) with K contiguous: x · Wᵀ
using NMajorB = cutlass::layout::RowMajor;     // B (K × N) with N contiguous: dy · W2

// The buffers and the cuBLAS references of one round.
struct Probe {
  cudaStream_t s;
  int M, C, F;
  size_t nf;
  bf16 *x, *w13, *dy, *w2, *h1, *h3;   // inputs
  bf16 *h13, *dg, *dh1, *dh3, *g;      // cuBLAS (+ pass) results
  bf16 *out, *fdh1, *fdh3, *fg;        // CUTLASS results
  float t_both;                        // cuBLAS dg + pass, us
  bf16 *w13i, *g_fwd, *h13i, *fg_fwd;  // forward: W13 interleaved, the pass's g; CUTLASS's h13, g
  float t_fwd_both;                    // cuBLAS x·W13ᵀ + forward pass, us

  template <class Tile, class Cluster, class MS, class ES>
  void forward_fused(const char* name) {
    ForwardFusedRunner<Tile, Cluster, MS, ES> r;
    if (!r.init(M, 2 * F, C, x, w13i, h13i, fg_fwd)) {
      std::printf("  fwd  CUTLASS fused %-20s    cannot run\n", name);
      return;
    }
    r.run(s);
    CHECK_CUDA(cudaStreamSynchronize(s));
    // h13i's column 2j is h13's column j (h1), 2j+1 its column F + j (h3); g against the pass's.
    std::vector<bf16> got(2 * nf), want(2 * nf);
    CHECK_CUDA(cudaMemcpy(got.data(), h13i, 2 * nf * sizeof(bf16), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(want.data(), h13, 2 * nf * sizeof(bf16), cudaMemcpyDeviceToHost));
    double eh = 0, mh = 0;
    for (size_t r0 = 0; r0 < size_t(M); ++r0)
      for (int j = 0; j < F; ++j)
        for (int half = 0; half < 2; ++half) {
          const double a = float(got[r0 * 2 * F + 2 * j + half]), b = float(want[r0 * 2 * F + half * F + j]);
          eh = std::isfinite(a) ? std::max(eh, std::fabs(a - b)) : INFINITY;
          mh = std::max(mh, std::fabs(b));
        }
    const double eg = rel_err(fg_fwd, g_fwd, nf);
    const float t = time_us([&] { r.run(s); }, s);
    std::printf("  fwd  CUTLASS fused %-20s    %7.1f us  (%+.1f against cuBLAS + pass)  err h13 %.1e g %.1e\n", name, t,
                t - t_fwd_both, eh / mh, eg);
  }

  template <class Tile, class Cluster, class MS, class ES, bool kPlain = true,
            class EpiTile = cutlass::epilogue::collective::EpilogueTileAuto, bool kDirect = false>
  void config(const char* name) {
    if constexpr (kPlain) {
      Runner<Tile, Cluster, MS, ES, KMajorB, false> r;
      if (r.init(M, 2 * F, C, x, w13, out)) {
        r.run(s);
        CHECK_CUDA(cudaStreamSynchronize(s));
        const double e = rel_err(out, h13, 2 * nf);
        const float t = time_us([&] { r.run(s); }, s);
        std::printf("  fwd  CUTLASS %-20s          %7.1f us  %5.0f TFLOP/s  err %.1e\n", name, t,
                    tflops(M, 2 * F, C, t), e);
      } else {
        std::printf("  fwd  CUTLASS %-20s          cannot run\n", name);
      }
    }
    if constexpr (kPlain) {
      Runner<Tile, Cluster, MS, ES, NMajorB, false> r;
      if (r.init(M, F, C, dy, w2, out)) {
        r.run(s);
        CHECK_CUDA(cudaStreamSynchronize(s));
        const double e = rel_err(out, dg, nf);
        const float t = time_us([&] { r.run(s); }, s);
        std::printf("  bwd  CUTLASS dg %-20s       %7.1f us  %5.0f TFLOP/s  err %.1e\n", name, t, tflops(M, F, C, t),
                    e);
      } else {
        std::printf("  bwd  CUTLASS dg %-20s       cannot run\n", name);
      }
    }
    {
      Runner<Tile, Cluster, MS, ES, NMajorB, true, EpiTile, kDirect> r;
      if (r.init(M, F, C, dy, w2, fdh1, h1, h3, fdh3, fg)) {
        r.run(s);
        CHECK_CUDA(cudaStreamSynchronize(s));
        const double e1 = rel_err(fdh1, dh1, nf), e3 = rel_err(fdh3, dh3, nf), eg = rel_err(fg, g, nf);
        const float t = time_us([&] { r.run(s); }, s);
        std::printf(
            "  bwd  CUTLASS fused %-20s    %7.1f us  (%+.1f against cuBLAS + pass)  err dh1 %.1e dh3 %.1e g %.1e\n",
            name, t, t - t_both, e1, e3, eg);
      } else {
        std::printf("  bwd  CUTLASS fused %-20s    cannot run\n", name);
      }
    }
  }
};

int main() {
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, CUTLASS %d.%d.%d\n", prop.name, CUTLASS_MAJOR, CUTLASS_MINOR, CUTLASS_PATCH);
  Probe p{};
  CHECK_CUDA(cudaStreamCreate(&p.s));
  cublasHandle_t h;
  CHECK_CUBLAS(cublasCreate(&h));
  CHECK_CUBLAS(cublasSetStream(h, p.s));

  const int M = kTokens, C = kModel, F = kHidden;
  const size_t nf = size_t(M) * F;
  p.M = M, p.C = C, p.F = F, p.nf = nf;
  p.x = device_random(size_t(M) * C, 2.f, 1);
  p.w13 = device_random(size_t(2) * F * C, 0.1f, 2);  // [W1; W3], (2F, C) row-major
  p.dy = device_random(size_t(M) * C, 2.f, 3);
  p.w2 = device_random(size_t(C) * F, 0.1f, 4);  // (C, F) row-major
  p.h1 = device_random(nf, 6.f, 5);
  p.h3 = device_random(nf, 6.f, 6);
  p.h13 = device_empty(2 * nf);
  p.dg = device_empty(nf), p.dh1 = device_empty(nf), p.dh3 = device_empty(nf), p.g = device_empty(nf);
  p.out = device_empty(2 * nf), p.fdh1 = device_empty(nf), p.fdh3 = device_empty(nf), p.fg = device_empty(nf);
  p.g_fwd = device_empty(nf), p.h13i = device_empty(2 * nf), p.fg_fwd = device_empty(nf);
  {  // W13 with W1's and W3's rows interleaved: row 2j is W1's row j, row 2j + 1 W3's
    std::vector<bf16> w(size_t(2) * F * C), wi(w.size());
    CHECK_CUDA(cudaMemcpy(w.data(), p.w13, w.size() * sizeof(bf16), cudaMemcpyDeviceToHost));
    for (int j = 0; j < F; ++j)
      for (int half = 0; half < 2; ++half)
        std::copy_n(w.begin() + (size_t(half) * F + j) * C, C, wi.begin() + (size_t(2) * j + half) * C);
    CHECK_CUDA(cudaMalloc(&p.w13i, wi.size() * sizeof(bf16)));
    CHECK_CUDA(cudaMemcpy(p.w13i, wi.data(), wi.size() * sizeof(bf16), cudaMemcpyHostToDevice));
  }
  const float one = 1.f, zero = 0.f;
  cudaStream_t s = p.s;

  // cuBLAS is column-major: row-major D (M × N) = A · B is Dᵀ (N × M) = Bᵀ · Aᵀ.
  auto cublas_fwd = [&] {  // h13 (M × 2F) = x · w13ᵀ
    CHECK_CUBLAS(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, 2 * F, M, C, &one, p.w13, CUDA_R_16BF, C, p.x, CUDA_R_16BF,
                              C, &zero, p.h13, CUDA_R_16BF, 2 * F, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  };
  auto cublas_dg = [&] {  // dg (M × F) = dy · w2
    CHECK_CUBLAS(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, F, M, C, &one, p.w2, CUDA_R_16BF, F, p.dy, CUDA_R_16BF, C,
                              &zero, p.dg, CUDA_R_16BF, F, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  };
  auto as_nv = [](bf16* q) { return reinterpret_cast<__nv_bfloat16*>(q); };
  auto pass = [&] {
    const int64_t n8 = nf / 8;
    swiglu_backward_pass<<<(n8 + 255) / 256, 256, 0, s>>>(as_nv(p.dg), as_nv(p.h1), as_nv(p.h3), as_nv(p.dh1),
                                                          as_nv(p.dh3), as_nv(p.g), nf);
  };
  auto fwd_pass = [&] { swiglu_forward_pass<<<(nf / 8 + 255) / 256, 256, 0, s>>>(as_nv(p.h13), as_nv(p.g_fwd), M, F); };
  cublas_fwd();
  fwd_pass();
  cublas_dg();
  pass();
  CHECK_CUDA(cudaStreamSynchronize(s));

  for (int round = 0; round < 2; ++round) {
    std::printf("round %d (us per layer; x %d layers for the XL step)\n", round, kLayers);
    const float t_fwd = time_us(cublas_fwd, s), t_dg = time_us(cublas_dg, s), t_pass = time_us(pass, s);
    p.t_both = time_us(
        [&] {
          cublas_dg();
          pass();
        },
        s);
    const float t_fwd_pass = time_us(fwd_pass, s);
    p.t_fwd_both = time_us(
        [&] {
          cublas_fwd();
          fwd_pass();
        },
        s);
    std::printf("  fwd  cuBLAS x.[W1;W3]^T                       %7.1f us  %5.0f TFLOP/s\n", t_fwd,
                tflops(M, 2 * F, C, t_fwd));
    std::printf("  fwd  SwiGLU forward pass                      %7.1f us\n", t_fwd_pass);
    std::printf("  fwd  cuBLAS x.[W1;W3]^T + pass                %7.1f us\n", p.t_fwd_both);
    std::printf("  bwd  cuBLAS dg = dy.W2                        %7.1f us  %5.0f TFLOP/s\n", t_dg,
                tflops(M, F, C, t_dg));
    std::printf("  bwd  SwiGLU backward pass                     %7.1f us\n", t_pass);
    std::printf("  bwd  cuBLAS dg + pass                         %7.1f us\n", p.t_both);
    // On an H100 (docs/reports/2026-11-25_swiglu-epilogue-fp32-sizes_h100.md): the plain forward
    // at cuBLAS's rate only with
    // ping_64x256 (116 us); plain dg best with ping_128x128_c2x1 (70 us against cuBLAS's 66); the fused
    // backward's epilogue (TMA aux nodes) cost about the pass (+53 us over its plain GEMM) with every
    // tile and form tried (σ once or thrice, 64 × 64 sub-tiles, Stages = 0 direct nodes: 193 us).
    p.config<Shape<_128, _128, _64>, Shape<_2, _1, _1>, Ping, PingEpi>("ping_128x128_c2x1");
    p.forward_fused<Shape<_64, _256, _64>, Shape<_1, _1, _1>, Ping, PingEpi>("ping_64x256_c1");
#ifndef PROBE_QUICK
    p.forward_fused<Shape<_128, _256, _64>, Shape<_1, _1, _1>, Coop, CoopEpi>("coop_128x256_c1");
    p.forward_fused<Shape<_128, _128, _64>, Shape<_2, _1, _1>, Ping, PingEpi>("ping_128x128_c2x1");
#endif
  }
  return 0;
}
