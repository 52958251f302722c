// Host side of flash_tma.cuh: the tensor maps the warp-specialised flash kernels load through.
#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <string>

#include "core/error.h"
#include "cuda/flash/flash_tma.cuh"

namespace pt::cuda::flash {

// cuTensorMapEncodeTiled through the runtime's driver entry point (no link against libcuda).
namespace {
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    PT_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &found));
    PT_CHECK(found == cudaDriverEntryPointSuccess && f != nullptr,
             "flash attention: the CUDA driver has no cuTensorMapEncodeTiled (TMA needs a 12.0+ driver)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}
}  // namespace

// The (B, H, rows, D) bf16 view at base with strides s, read in boxes of box_rows × 64.
// ops::flash_attention already requires 16-byte aligned rows, so every stride of a dimension
// longer than 1 is a multiple of 16 bytes, as TMA needs; dimensions of length 1 get a stride
// that is (their coordinate is always 0).
TmaRows flash_tma_rows(const void* base, const RowStrides& s, int batch, int heads, int rows, int head_dim,
                       int box_rows) {
  struct Outer {
    int64_t stride_bytes;
    int extent, role;  // role: 0 rows, 1 heads, 2 batch
  } outer[3] = {{s.row * 2, rows, 0}, {s.head * 2, heads, 1}, {s.batch * 2, batch, 2}};
  int64_t widest = int64_t{head_dim} * 2;
  for (const Outer& o : outer)
    if (o.extent > 1) widest = std::max(widest, o.stride_bytes);
  for (Outer& o : outer)
    if (o.extent == 1) o.stride_bytes = widest;
  std::stable_sort(outer, outer + 3, [](const Outer& x, const Outer& y) { return x.stride_bytes < y.stride_bytes; });

  TmaRows m;
  cuuint64_t dims[4] = {static_cast<cuuint64_t>(head_dim), 0, 0, 0};
  cuuint64_t strides[3];
  cuuint32_t box[4] = {64, 1, 1, 1}, unit[4] = {1, 1, 1, 1};
  for (int i = 0; i < 3; ++i) {
    dims[i + 1] = static_cast<cuuint64_t>(outer[i].extent);
    strides[i] = static_cast<cuuint64_t>(outer[i].stride_bytes);
    if (outer[i].role == 0) m.row_dim = i + 1, box[i + 1] = static_cast<cuuint32_t>(box_rows);
    if (outer[i].role == 1) m.head_dim = i + 1;
    if (outer[i].role == 2) m.batch_dim = i + 1;
  }
  const CUresult r = tensor_map_encoder()(&m.map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, const_cast<void*>(base), dims,
                                          strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                          CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  PT_CHECK(r == CUDA_SUCCESS, "flash attention: cuTensorMapEncodeTiled refused a (" + std::to_string(batch) + ", " +
                                  std::to_string(heads) + ", " + std::to_string(rows) + ", " +
                                  std::to_string(head_dim) + ") view with strides (" + std::to_string(s.batch) + ", " +
                                  std::to_string(s.head) + ", " + std::to_string(s.row) + ", 1): CUresult " +
                                  std::to_string(static_cast<int>(r)));
  return m;
}

}  // namespace pt::cuda::flash
