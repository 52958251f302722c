// Sizes from hostile options or checkpoints (issue 47): a model too large to count or to hold is
// refused before anything is built, an absurd tensor shape is refused instead of wrapping around,
// and building a model with many layers takes time linear in them (ParamStore::find by hash).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>

#include "common/test_util.h"
#include "core/device.h"
#include "core/tensor.h"
#include "model/param_store.h"
#include "model/transformer.h"

namespace pt {
namespace {

bool has(const std::string& text, const std::string& word) { return text.find(word) != std::string::npos; }

TransformerConfig small() { return test::test_transformer(100, 16, 32, 2, 2, 64); }

TEST(ParamStore, FindsParametersByNameAndRegistersManyInLinearTime) {
  ParamStore store;
  constexpr int kCount = 100000;  // a linear search per add would take seconds, not milliseconds
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kCount; ++i) store.add("layers." + std::to_string(i) + ".w", {2});
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 2.0) << "registering " << kCount << " parameters";
  for (int i : {0, 1, 4242, kCount - 1}) {
    const Parameter* p = store.find("layers." + std::to_string(i) + ".w");
    ASSERT_NE(p, nullptr) << i;
    EXPECT_EQ(p->index, i);
    EXPECT_EQ(p->offset, 2 * static_cast<int64_t>(i));
  }
  EXPECT_EQ(store.find("layers.x.w"), nullptr);
  EXPECT_TRUE(has(test::error_of([&] { store.add("layers.7.w", {1}); }), "duplicate parameter name 'layers.7.w'"));
  EXPECT_EQ(store.size(), static_cast<size_t>(kCount)) << "the refused duplicate was not added";
}

TEST(Tensor, AShapeWhoseSizeOverflowsIsRefusedBeforeAllocating) {
  const int64_t big = int64_t{1} << 40;
  const std::string e = test::error_of([&] { Tensor::empty({big, big}, DType::F32, Device::cpu(), "scores"); });
  EXPECT_TRUE(has(e, "'scores'") && has(e, "too large")) << e;
  // Elements fit int64_t, bytes do not.
  EXPECT_TRUE(has(
      test::error_of([&] { Tensor::empty({std::numeric_limits<int64_t>::max() / 2}, DType::F32, Device::cpu(), "x"); }),
      "too large"));
}

TEST(TransformerConfig, AModelTooLargeToCountIsRefusedNamingItsShape) {
  TransformerConfig c = small();
  c.num_layers = int64_t{1} << 62;  // --num-layers 4611686018427387904
  std::string e = test::error_of([&] { c.validate(); });
  EXPECT_TRUE(has(e, "too large to count") && has(e, "num_layers 4611686018427387904")) << e;
  c = small();
  c.d_model = int64_t{1} << 40;
  e = test::error_of([&] { c.validate(); });
  EXPECT_TRUE(has(e, "too large to count") && has(e, "d_model 1099511627776")) << e;
  c = small();
  c.vocab_size = std::numeric_limits<int64_t>::max();
  EXPECT_TRUE(has(test::error_of([&] { c.validate(); }), "too large to count"));
  small().validate();  // and a sane one passes
}

TEST(TransformerConfig, TheMemoryFloorCountsWeightsGradientsLogitsAndLayers) {
  const TransformerConfig c = small();
  const MemoryFloor f = training_memory_floor(c, 4, 4, false);
  EXPECT_EQ(f.parameters, static_cast<double>(c.num_params()));
  EXPECT_EQ(f.device_bytes, f.parameters * 8 + 4.0 * 16 * 100 * 4);
  EXPECT_EQ(f.host_bytes, 2.0 * kHostBytesPerLayer);
  const MemoryFloor mixed = training_memory_floor(c, 4, 2, true);  // bf16 gradients and mirror
  EXPECT_EQ(mixed.device_bytes, f.parameters * 8 + 4.0 * 16 * 100 * 2);
}

TEST(TransformerConfig, AModelThatCannotFitIsRefusedBeforeAnythingIsBuilt) {
  TransformerConfig c = small();
  c.num_layers = 100000000;  // a checkpoint's config.num-layers
  const auto t0 = std::chrono::steady_clock::now();
  const std::string e = test::error_of(
      [&] { check_memory_floor(c, 2, 4, false, Device::cpu(), "the size comes from the checkpoint x"); });
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  EXPECT_TRUE(has(e, "100000000 layers") && has(e, "GiB") && has(e, "of cpu") && has(e, "the checkpoint x")) << e;
  c = small();
  c.context_length = int64_t{1} << 50;  // the logits of one micro-batch alone
  EXPECT_TRUE(has(test::error_of([&] { check_memory_floor(c, 2, 4, false, Device::cpu(), "--context-length"); }),
                  "--context-length"));
  check_memory_floor(small(), 2, 4, false, Device::cpu(), "");  // fits
  EXPECT_GT(memory_capacity_bytes(Device::cpu()), 1e8);
}

}  // namespace
}  // namespace pt
