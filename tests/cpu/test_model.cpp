// The Transformer on the CPU: parameter names and order, named sizes, initialisation, forward
// against an independent fp64 recomputation written here, and whole-model gradients against
// finite differences. Listeners: test_model_listeners.cpp; recompute and the unfused step:
// test_model_step.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <variant>

#include "bench/model_bench.h"
#include "common/test_util.h"
#include "core/allocator.h"
#include "core/error.h"
#include "core/profiler.h"
#include "cpu/model_test_util.h"
#include "model/layers.h"
#include "model/transformer.h"
#include "optim/optimizer.h"

namespace pt {
namespace {

using model_test::model_loss;
using model_test::tiny_config;

// ---- an independent fp64 forward, written from the architecture's definition ---------------

using Mat = std::vector<double>;  // row-major

struct RefParams {
  const ParamStore& store;
  std::vector<double> flat;
  const double* get(const std::string& name) const {
    const Parameter* p = store.find(name);
    EXPECT_NE(p, nullptr) << name;
    return flat.data() + p->offset;
  }
};

// y (n, out) = x (n, in) · Wᵀ, W (out, in)
Mat linear(const Mat& x, const double* w, int64_t n, int64_t in, int64_t out) {
  Mat y(n * out, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < out; ++o) {
      double s = 0;
      for (int64_t k = 0; k < in; ++k) s += x[i * in + k] * w[o * in + k];
      y[i * out + o] = s;
    }
  return y;
}

Mat rmsnorm(const Mat& x, const double* g, int64_t n, int64_t c) {
  Mat y(x.size());
  for (int64_t i = 0; i < n; ++i) {
    double ms = 0;
    for (int64_t k = 0; k < c; ++k) ms += x[i * c + k] * x[i * c + k];
    const double r = 1.0 / std::sqrt(ms / c + 1e-5);
    for (int64_t k = 0; k < c; ++k) y[i * c + k] = x[i * c + k] * r * g[k];
  }
  return y;
}

// Loss and logits of the model with parameters `P` on ids/targets (B, T).
double reference_loss(const TransformerConfig& cfg, const RefParams& P, const std::vector<int32_t>& ids,
                      const std::vector<int32_t>& targets, int64_t B, int64_t T, Mat* logits_out) {
  const int64_t C = cfg.d_model, H = cfg.num_heads, D = C / H, F = cfg.d_ff, V = cfg.vocab_size, N = B * T;
  Mat x(N * C);
  const double* emb = P.get("token_embeddings.weight");
  for (int64_t i = 0; i < N; ++i)
    for (int64_t k = 0; k < C; ++k) x[i * C + k] = emb[ids[i] * C + k];
  auto rope = [&](Mat& m) {  // m (N, C), per head pairs (2i, 2i+1), position t = row % T
    for (int64_t r = 0; r < N; ++r) {
      const double t = static_cast<double>(r % T);
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < D / 2; ++i) {
          const double ang = t * std::pow(cfg.rope_theta, -2.0 * i / D);
          double& a = m[r * C + h * D + 2 * i];
          double& b = m[r * C + h * D + 2 * i + 1];
          const double a0 = a, b0 = b;
          a = a0 * std::cos(ang) - b0 * std::sin(ang);
          b = a0 * std::sin(ang) + b0 * std::cos(ang);
        }
    }
  };
  for (int64_t l = 0; l < cfg.num_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    Mat a = rmsnorm(x, P.get(p + "ln1.weight"), N, C);
    Mat q = linear(a, P.get(p + "attn.q_proj.weight"), N, C, C);
    Mat k = linear(a, P.get(p + "attn.k_proj.weight"), N, C, C);
    Mat v = linear(a, P.get(p + "attn.v_proj.weight"), N, C, C);
    rope(q);
    rope(k);
    Mat o(N * C, 0.0);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < T; ++i) {
          std::vector<double> s(i + 1);
          double mx = -1e300;
          for (int64_t j = 0; j <= i; ++j) {
            double dot = 0;
            for (int64_t d = 0; d < D; ++d) dot += q[(b * T + i) * C + h * D + d] * k[(b * T + j) * C + h * D + d];
            s[j] = dot / std::sqrt(static_cast<double>(D));
            mx = std::max(mx, s[j]);
          }
          double z = 0;
          for (auto& e : s) z += (e = std::exp(e - mx));
          for (int64_t j = 0; j <= i; ++j)
            for (int64_t d = 0; d < D; ++d) o[(b * T + i) * C + h * D + d] += s[j] / z * v[(b * T + j) * C + h * D + d];
        }
    Mat attn = linear(o, P.get(p + "attn.output_proj.weight"), N, C, C);
    for (int64_t i = 0; i < N * C; ++i) x[i] += attn[i];
    Mat bnorm = rmsnorm(x, P.get(p + "ln2.weight"), N, C);
    Mat h1 = linear(bnorm, P.get(p + "ffn.w1.weight"), N, C, F);
    Mat h3 = linear(bnorm, P.get(p + "ffn.w3.weight"), N, C, F);
    for (int64_t i = 0; i < N * F; ++i) h1[i] = h1[i] / (1.0 + std::exp(-h1[i])) * h3[i];
    Mat f = linear(h1, P.get(p + "ffn.w2.weight"), N, F, C);
    for (int64_t i = 0; i < N * C; ++i) x[i] += f[i];
  }
  Mat xf = rmsnorm(x, P.get("ln_final.weight"), N, C);
  Mat logits = linear(xf, P.get("lm_head.weight"), N, C, V);
  double loss = 0;
  for (int64_t i = 0; i < N; ++i) {
    double mx = -1e300;
    for (int64_t j = 0; j < V; ++j) mx = std::max(mx, logits[i * V + j]);
    double z = 0;
    for (int64_t j = 0; j < V; ++j) z += std::exp(logits[i * V + j] - mx);
    loss += (std::log(z) + mx) - logits[i * V + targets[i]];
  }
  if (logits_out) *logits_out = logits;
  return loss / static_cast<double>(N);
}

TEST(TransformerModel, ParameterNamesOrderAndShapesFollowTheStateDict) {
  Context ctx(Device::cpu());
  TransformerConfig cfg = tiny_config();
  TransformerLM m(cfg, ctx);
  std::vector<std::pair<std::string, Shape>> expected = {{"token_embeddings.weight", {11, 8}}};
  for (int l = 0; l < 2; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    expected.push_back({p + "ln1.weight", {8}});
    for (const char* w : {"q_proj", "k_proj", "v_proj", "output_proj"})
      expected.push_back({p + "attn." + w + ".weight", {8, 8}});
    expected.push_back({p + "ln2.weight", {8}});
    expected.push_back({p + "ffn.w1.weight", {12, 8}});
    expected.push_back({p + "ffn.w2.weight", {8, 12}});
    expected.push_back({p + "ffn.w3.weight", {12, 8}});
  }
  expected.push_back({"ln_final.weight", {8}});
  expected.push_back({"lm_head.weight", {11, 8}});
  ASSERT_EQ(m.store().size(), expected.size());
  int64_t offset = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(m.store()[i].name, expected[i].first);
    EXPECT_EQ(m.store()[i].shape, expected[i].second) << expected[i].first;
    EXPECT_EQ(m.store()[i].offset, offset) << "flat buffer in registration order";
    offset += m.store()[i].numel;
  }
  EXPECT_EQ(m.store().numel(), cfg.num_params());
}

TEST(TransformerModel, NamedSizesHaveTheDocumentedShapes) {
  const TransformerConfig xl = TransformerConfig::named("xl");
  EXPECT_EQ(xl.d_model, 1600);
  EXPECT_EQ(xl.d_ff, 6400);
  EXPECT_EQ(xl.num_layers, 48);
  EXPECT_EQ(xl.num_heads, 25);
  // small: 2·10000·768 + 12·(4·768² + 3·768·3072 + 2·768) + 768 parameters
  EXPECT_EQ(TransformerConfig::named("small").num_params(),
            2LL * 10000 * 768 + 12LL * (4LL * 768 * 768 + 3LL * 768 * 3072 + 2 * 768) + 768);
  EXPECT_THROW(TransformerConfig::named("huge"), Error);
  TransformerConfig bad = tiny_config();
  bad.num_heads = 3;
  EXPECT_THROW(bad.validate(), Error);
}

TEST(TransformerModel, InitialisationFollowsTheReference) {
  Context ctx(Device::cpu());
  TransformerConfig cfg = TransformerConfig::named("small");
  cfg.num_layers = 1;
  TransformerLM m(cfg, ctx);
  m.init_weights(ctx, 7);
  auto stats = [&](const std::string& name) {
    std::vector<double> v = m.store().find(name)->data().to_host_f64(ctx);
    double s = 0, s2 = 0, mx = 0;
    for (double x : v) s += x, s2 += x * x, mx = std::max(mx, std::fabs(x));
    const double mean = s / v.size();
    return std::make_tuple(mean, std::sqrt(s2 / v.size() - mean * mean), mx);
  };
  auto [em, es, emax] = stats("token_embeddings.weight");
  EXPECT_NEAR(em, 0.0, 0.01);
  EXPECT_NEAR(es, 0.98, 0.02);  // std of N(0,1) truncated at ±3 is 0.9866
  EXPECT_LE(emax, 3.0);
  auto [qm, qs, qmax] = stats("layers.0.attn.q_proj.weight");
  const double std_q = std::sqrt(2.0 / (768 + 768));
  EXPECT_NEAR(qs, 0.9866 * std_q, 0.02 * std_q);
  EXPECT_LE(qmax, 3 * std_q);
  auto [gm, gs, gmax] = stats("layers.0.ln1.weight");
  EXPECT_EQ(gm, 1.0);
  EXPECT_EQ(gs, 0.0);
}

// An InitBatch makes the draws later and on every core, not different ones: each initialiser's
// values, and the generator after them, equal those of the initialisers run one by one. The
// parameters mix sizes below and above one chunk of draws (2^20) so that small ones draw from the
// generator while large ones wait for their seeds' turn.
TEST(TransformerModel, InitialisationInOneBatchDrawsTheSameValues) {
  Context ctx(Device::cpu());
  auto make = [](ParamStore& store) {
    for (const auto& [name, n] : std::vector<std::pair<std::string, int64_t>>{
             {"a", 3000}, {"b", (int64_t{5} << 20) + 17}, {"c", 1000}, {"d", (int64_t{3} << 20) + 1}, {"e", 7}})
      store.add(name, {n});
  };
  ParamStore one_by_one, batched;
  make(one_by_one);
  make(batched);
  one_by_one.finalize(ctx, false);
  batched.finalize(ctx, false);
  auto init = [&](ParamStore& store, std::mt19937_64& rng) {
    init_trunc_normal(ctx, *store.find("a"), 0.5, -1.0, 1.0, rng);
    init_trunc_normal(ctx, *store.find("b"), 0.02, -0.06, 0.06, rng);
    init_uniform(ctx, *store.find("c"), 0.3, rng);
    init_uniform(ctx, *store.find("d"), 0.1, rng);
    init_constant(ctx, *store.find("e"), 1.5);
  };
  std::mt19937_64 rng_a(11), rng_b(11);
  init(one_by_one, rng_a);
  {
    InitBatch batch(ctx);
    init(batched, rng_b);
    batch.close();
  }
  EXPECT_EQ(rng_a(), rng_b()) << "the generator advanced differently";
  for (const char* name : {"a", "b", "c", "d", "e"}) {
    const auto want = one_by_one.find(name)->data().to_host_f64(ctx);
    const auto got = batched.find(name)->data().to_host_f64(ctx);
    ASSERT_EQ(got.size(), want.size());
    int64_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += got[i] != want[i];
    EXPECT_EQ(differ, 0) << name;
    if (std::string(name) != "e") EXPECT_NE(got.front(), got.back()) << name << ": not drawn";
  }
}

// The tiny model in fp64 on the CPU; each test initialises its weights.
class TransformerModelFp64 : public ::testing::Test {
 protected:
  Context ctx{Device::cpu()};
  TransformerConfig cfg = tiny_config();
  TransformerLM m{cfg, ctx, DType::F64};
};

TEST_F(TransformerModelFp64, ForwardMatchesAnIndependentFp64Recomputation) {
  m.init_weights(ctx, 3);
  const int64_t B = 2, T = 6;
  auto ids = test::random_ids(B * T, 11, 1), targets = test::random_ids(B * T, 11, 2);
  RefParams P{m.store(), m.store().params_to_host_f64(ctx)};
  Mat ref_logits;
  const double ref = reference_loss(cfg, P, ids, targets, B, T, &ref_logits);
  EXPECT_NEAR(model_loss(ctx, m, ids, targets, B, T, false), ref, 1e-12 * std::fabs(ref));
  Tensor logits = m.forward_logits(ctx, test::make_ids(ctx, {B, T}, ids));
  EXPECT_EQ(logits.shape(), (Shape{B, T, 11}));
  EXPECT_LE(test::rel_error(logits.to_host_f64(ctx), ref_logits), 1e-12);
  // fp32 model from the same weights: the same function to fp32 rounding.
  TransformerLM m32(cfg, ctx);
  m32.store().params_from_host_f64(ctx, P.flat);
  EXPECT_NEAR(model_loss(ctx, m32, ids, targets, B, T, false), ref, 1e-5 * std::fabs(ref));
}

TEST_F(TransformerModelFp64, ShorterSequencesThanTheContextWork) {
  m.init_weights(ctx, 4);
  auto ids = test::random_ids(3, 11, 5), targets = test::random_ids(3, 11, 6);
  RefParams P{m.store(), m.store().params_to_host_f64(ctx)};
  EXPECT_NEAR(model_loss(ctx, m, ids, targets, 1, 3, false), reference_loss(cfg, P, ids, targets, 1, 3, nullptr),
              1e-12);
  auto long_ids = test::random_ids(7, 11, 5);
  EXPECT_THROW(model_loss(ctx, m, long_ids, long_ids, 1, 7, false), Error);
}

TEST_F(TransformerModelFp64, GradientsMatchFiniteDifferences) {
  m.init_weights(ctx, 11);
  const int64_t B = 2, T = 5;
  auto ids = test::random_ids(B * T, 11, 21), targets = test::random_ids(B * T, 11, 22);
  const std::vector<double> w0 = m.store().params_to_host_f64(ctx);
  m.store().zero_grad(ctx);
  model_loss(ctx, m, ids, targets, B, T, true);
  m.backward(ctx);
  const std::vector<double> grad = m.store().flat_grads().to_host_f64(ctx);
  auto f = [&](const std::vector<double>& w) {
    m.store().params_from_host_f64(ctx, w);
    return model_loss(ctx, m, ids, targets, B, T, false);
  };
  const std::vector<double> fd = test::finite_difference(f, w0, 1e-6);
  // Every parameter of this model is trainable, so the gradient buffer lines up with the
  // parameter buffer. Compare parameter by parameter so a failure names the tensor.
  for (size_t i = 0; i < m.store().size(); ++i) {
    const Parameter& p = m.store()[i];
    std::vector<double> g(grad.begin() + p.grad_offset, grad.begin() + p.grad_offset + p.numel);
    std::vector<double> r(fd.begin() + p.offset, fd.begin() + p.offset + p.numel);
    EXPECT_LE(test::rel_error(g, r), 1e-6) << p.name;
  }
}

}  // namespace
}  // namespace pt
