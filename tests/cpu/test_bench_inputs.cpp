// Benchmark inputs (bench/inputs.h): repeat_rows, which gives bench model's captured step its
// --grad-accum micro-batches of the same rows (TrainStep splits a step's rows into micro-batches).
#include <gtest/gtest.h>

#include <cstdint>

#include "bench/inputs.h"
#include "core/error.h"
#include "core/tensor.h"

namespace pt {
namespace {

Tensor host_i32(const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::I32, Device::cpu(), "rows");
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<int32_t>()[i] = static_cast<int32_t>(100 + 7 * i);
  return t;
}

// (R, C) → (N·R, C): micro-batch k of N (rows k·R … k·R + R − 1, as TrainStep narrows them) is the
// original rows, value for value.
TEST(BenchInputs, RepeatRowsGivesEveryMicroBatchTheSameRows) {
  const int64_t R = 3, C = 5, N = 4;
  const Tensor rows = host_i32({R, C});
  const Tensor out = bench::repeat_rows(rows, N);
  ASSERT_EQ(out.shape(), (Shape{N * R, C}));
  ASSERT_EQ(out.dtype(), DType::I32);
  for (int64_t k = 0; k < N; ++k) {
    const Tensor micro = out.narrow(0, k * R, R);
    for (int64_t i = 0; i < R * C; ++i)
      EXPECT_EQ(micro.data_as<int32_t>()[i], rows.data_as<int32_t>()[i]) << "micro-batch " << k << ", element " << i;
  }
  EXPECT_EQ(bench::repeat_rows(rows, 1).shape(), rows.shape());
}

TEST(BenchInputs, RepeatRowsRefusesACountBelowOne) { EXPECT_THROW(bench::repeat_rows(host_i32({2, 2}), 0), Error); }

}  // namespace
}  // namespace pt
