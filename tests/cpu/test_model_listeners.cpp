// The events the data-parallel strategies rely on: gradient-ready listeners told in turn, every
// gradient announced once in reverse order, every parameter announced before forward reads it,
// and backward without forward refused.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <variant>

#include "bench/model_bench.h"
#include "common/test_util.h"
#include "core/allocator.h"
#include "core/error.h"
#include "core/profiler.h"
#include "cpu/model_test_util.h"
#include "model/transformer.h"
#include "optim/optimizer.h"

namespace pt {
namespace {

using model_test::model_loss;
using model_test::tiny_config;

class RecordingListener : public GradReadyListener {
 public:
  void on_grad_ready(Parameter& p) override { order.push_back(p.name); }
  std::vector<std::string> order;
};

// Several listeners at once (a sync, the timeline, a test): each hears every gradient once, the
// last added first; adding twice changes nothing; a removed one hears nothing more.
TEST(TransformerModel, GradientReadyListenersAreToldInTurn) {
  Context ctx(Device::cpu());
  TransformerLM m(tiny_config(), ctx);
  m.init_weights(ctx, 1);
  std::vector<std::string> log;
  struct Tagged : GradReadyListener {
    Tagged(std::vector<std::string>& log, const char* tag) : log(log), tag(tag) {}
    void on_grad_ready(Parameter& p) override { log.push_back(std::string(tag) + ":" + p.name); }
    std::vector<std::string>& log;
    const char* tag;
  } first(log, "first"), second(log, "second");
  m.store().add_listener(&first);
  m.store().add_listener(&second);
  m.store().add_listener(&first);
  ASSERT_EQ(m.store().listeners().size(), 2u);
  m.store().zero_grad(ctx);
  model_loss(ctx, m, test::random_ids(12, 11, 1), test::random_ids(12, 11, 2), 2, 6, true);
  m.backward(ctx);
  ASSERT_EQ(log.size(), 2 * m.store().size());
  for (size_t i = 0; i < log.size(); i += 2) {
    EXPECT_EQ(log[i].rfind("second:", 0), 0u) << log[i];
    EXPECT_EQ(log[i + 1].substr(6), log[i].substr(7)) << "the same parameter, told to both in turn";
  }
  m.store().remove_listener(&second);
  log.clear();
  m.store().zero_grad(ctx);
  model_loss(ctx, m, test::random_ids(12, 11, 1), test::random_ids(12, 11, 2), 2, 6, true);
  m.backward(ctx);
  EXPECT_EQ(log.size(), m.store().size());
  for (const auto& e : log) EXPECT_EQ(e.rfind("first:", 0), 0u) << e;
  m.store().remove_listener(&first);
}

TEST(TransformerModel, EveryGradientIsAnnouncedOnceInReverseOrder) {
  Context ctx(Device::cpu());
  TransformerConfig cfg = tiny_config();
  TransformerLM m(cfg, ctx);
  m.init_weights(ctx, 1);
  RecordingListener l;
  m.store().add_listener(&l);
  for (int step = 0; step < 2; ++step) {
    l.order.clear();
    m.store().zero_grad(ctx);
    model_loss(ctx, m, test::random_ids(12, 11, 1), test::random_ids(12, 11, 2), 2, 6, true);
    EXPECT_TRUE(l.order.empty()) << "no gradient is final before backward";
    m.backward(ctx);
    ASSERT_EQ(l.order.size(), m.store().size());
    std::map<std::string, int> count;
    for (const auto& n : l.order) count[n]++;
    for (const auto& [n, c] : count) EXPECT_EQ(c, 1) << n;
    EXPECT_EQ(l.order.front(), "lm_head.weight");
    EXPECT_EQ(l.order.back(), "token_embeddings.weight");
    // Block 1's parameters are all announced before block 0's.
    size_t last1 = 0, first0 = l.order.size();
    for (size_t i = 0; i < l.order.size(); ++i) {
      if (l.order[i].rfind("layers.1.", 0) == 0) last1 = std::max(last1, i);
      if (l.order[i].rfind("layers.0.", 0) == 0) first0 = std::min(first0, i);
    }
    EXPECT_LT(last1, first0);
  }
}

// A read listener that delivers each parameter's values only when it is announced (parameters
// start as NaN): what ZeRO-1's prefetched all-gathers rely on. A module that read a parameter it
// had not announced would compute with NaN.
struct LateDeliveryListener : ParamReadListener {
  LateDeliveryListener(Context& ctx, ParamStore& store, std::vector<double> values)
      : ctx(ctx), store(store), values(std::move(values)) {}
  void before_read(const Parameter& p) override {
    announced.push_back(p.name);
    std::vector<double> v(values.begin() + p.offset, values.begin() + p.offset + p.numel);
    Tensor host = Tensor::empty(p.shape, DType::F32, Device::cpu(), "test_values");
    for (int64_t i = 0; i < p.numel; ++i) host.data_as<float>()[i] = static_cast<float>(v[i]);
    p.data().copy_from(host, ctx);
  }
  void before_read_all() override { ++whole_buffer_reads; }
  Context& ctx;
  ParamStore& store;
  std::vector<double> values;
  std::vector<std::string> announced;
  int whole_buffer_reads = 0;
};

TEST(TransformerModel, ForwardAnnouncesEveryParameterBeforeReadingIt) {
  Context ctx(Device::cpu());
  TransformerConfig cfg = tiny_config();
  TransformerLM m(cfg, ctx);
  m.init_weights(ctx, 3);
  const auto ids = test::random_ids(12, 11, 5), targets = test::random_ids(12, 11, 6);
  m.store().zero_grad(ctx);
  const double loss = model_loss(ctx, m, ids, targets, 2, 6, true);
  m.backward(ctx);
  const auto grads = m.store().flat_grads().to_host_f64(ctx);

  LateDeliveryListener l(ctx, m.store(), m.store().params_to_host_f64(ctx));
  m.store().params_from_host_f64(ctx, std::vector<double>(m.store().numel(), std::nan("")));
  m.store().set_read_listener(&l);
  m.store().zero_grad(ctx);
  EXPECT_EQ(model_loss(ctx, m, ids, targets, 2, 6, true), loss);
  m.backward(ctx);
  EXPECT_EQ(m.store().flat_grads().to_host_f64(ctx), grads);
  ASSERT_FALSE(l.announced.empty());
  EXPECT_EQ(l.announced.front(), "token_embeddings.weight");  // in forward order
  EXPECT_EQ(l.announced.back(), "lm_head.weight");
  std::set<std::string> names(l.announced.begin(), l.announced.end());
  EXPECT_EQ(names.size(), m.store().size());
  // Whole-buffer access goes through before_read_all.
  const int before = l.whole_buffer_reads;
  m.store().params_to_host(ctx);
  m.store().refresh_lowp(ctx);  // no mirror on the CPU: nothing to refresh, nothing read
  EXPECT_EQ(l.whole_buffer_reads, before + 1);
  m.store().set_read_listener(nullptr);
}

TEST(TransformerModel, BackwardWithoutForwardIsAClearError) {
  Context ctx(Device::cpu());
  TransformerLM m(tiny_config(), ctx);
  EXPECT_THROW(m.backward(ctx), Error);
}

// Recomputing the RMSNorm outputs and the SwiGLU product in backward gives the gradients of

}  // namespace
}  // namespace pt
