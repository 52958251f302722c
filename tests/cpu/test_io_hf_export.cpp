// The Hugging Face export's parts: the safetensors writer read back by an independent parse of
// its header and bytes, the tensor names, and the RoPE row permutation (paratrain's RoPE op on
// a q projection's output equals Hugging Face's rotate-half RoPE on the permuted projection's).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>

#include "common/test_util.h"
#include "core/error.h"
#include "io/hf_export.h"
#include "io/safetensors.h"
#include "ops/rope.h"

namespace pt::test {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(Safetensors, WrittenFileParsesBackWithEveryTensorsBytes) {
  const std::string path = scratch_dir("safetensors_roundtrip") + "/t.safetensors";
  const std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 1e-30f, -7.0f};
  const std::vector<uint16_t> b = {0x3f80, 0xc000, 0x7f7f};
  {
    io::SafetensorsWriter w(path, {{"a.weight", "F32", {2, 3}}, {"b", "BF16", {3}}}, {{"format", "pt"}});
    w.write_next(a.data(), a.size() * 4);
    w.write_next(b.data(), b.size() * 2);
    w.close();
  }
  const std::string file = read_all(path);
  ASSERT_GE(file.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(file[size_t(i)]);
  EXPECT_EQ((8 + n) % 8, 0u);  // the data start aligned
  const nlohmann::json h = nlohmann::json::parse(file.substr(8, n));
  EXPECT_EQ(h["__metadata__"]["format"], "pt");
  EXPECT_EQ(h["a.weight"]["dtype"], "F32");
  EXPECT_EQ(h["a.weight"]["shape"], nlohmann::json({2, 3}));
  EXPECT_EQ(h["a.weight"]["data_offsets"], nlohmann::json({0, 24}));
  EXPECT_EQ(h["b"]["dtype"], "BF16");
  EXPECT_EQ(h["b"]["data_offsets"], nlohmann::json({24, 30}));
  const std::string data = file.substr(8 + n);
  ASSERT_EQ(data.size(), 30u);
  EXPECT_EQ(std::memcmp(data.data(), a.data(), 24), 0);
  EXPECT_EQ(std::memcmp(data.data() + 24, b.data(), 6), 0);
}

TEST(Safetensors, WriterRefusesWrongSizesAndMissingTensors) {
  const std::string dir = scratch_dir("safetensors_refusals");
  io::SafetensorsWriter w(dir + "/t.safetensors", {{"a", "F32", {2}}, {"b", "F32", {1}}}, {});
  const float v[2] = {1, 2};
  EXPECT_NE(error_of([&] { w.write_next(v, 4); }).find("has 4 bytes, its header says 8"), std::string::npos);
  EXPECT_NE(error_of([&] { w.close(); }).find("not written"), std::string::npos);
  EXPECT_NE(error_of([] { io::safetensors_header({{"x", "F16", {1}}}, {}); }).find("F32 and BF16"), std::string::npos);
  EXPECT_NE(error_of([] {
              io::safetensors_header({{"x", "F32", {1}}, {"x", "F32", {1}}}, {});
            }).find("twice"),
            std::string::npos);
}

TEST(HfExport, EveryTensorHasADistinctLlamaName) {
  TransformerConfig cfg = test_transformer(11, 8, 16, 3, 2, 24);
  std::set<std::string> names;
  for (const ParamShape& p : transformer_param_shapes(cfg)) names.insert(io::hf_llama_name(p.name));
  EXPECT_EQ(names.size(), transformer_param_shapes(cfg).size());
  EXPECT_EQ(io::hf_llama_name("token_embeddings.weight"), "model.embed_tokens.weight");
  EXPECT_EQ(io::hf_llama_name("layers.2.ffn.w1.weight"), "model.layers.2.mlp.gate_proj.weight");
  EXPECT_EQ(io::hf_llama_name("layers.2.ffn.w3.weight"), "model.layers.2.mlp.up_proj.weight");
  EXPECT_EQ(io::hf_llama_name("layers.0.ffn.w2.weight"), "model.layers.0.mlp.down_proj.weight");
  EXPECT_EQ(io::hf_llama_name("layers.1.attn.output_proj.weight"), "model.layers.1.self_attn.o_proj.weight");
  EXPECT_EQ(io::hf_llama_name("layers.1.ln2.weight"), "model.layers.1.post_attention_layernorm.weight");
  EXPECT_EQ(io::hf_llama_name("ln_final.weight"), "model.norm.weight");
  EXPECT_EQ(io::hf_llama_name("lm_head.weight"), "lm_head.weight");
  EXPECT_THROW(io::hf_llama_name("layers.1.attn.bias"), Error);
  EXPECT_TRUE(io::rope_rotates("layers.0.attn.k_proj.weight"));
  EXPECT_FALSE(io::rope_rotates("layers.0.attn.v_proj.weight"));
}

// Hugging Face's Llama RoPE on (H, T, D): x·cos + rotate_half(x)·sin, where element j and j + D/2
// share the angle t·θ^(−2j/D) and rotate_half(x) = (−x[D/2:], x[:D/2]).
std::vector<double> rope_halves(const std::vector<double>& x, int64_t H, int64_t T, int64_t D, double theta) {
  std::vector<double> y(x.size());
  for (int64_t h = 0; h < H; ++h)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < D; ++j) {
        const int64_t half = D / 2, f = j % half, o = (h * T + t) * D;
        const double angle = double(t) * std::pow(theta, -double(2 * f) / double(D));
        const double rotated = j < half ? -x[size_t(o + j + half)] : x[size_t(o + j - half)];
        y[size_t(o + j)] = x[size_t(o + j)] * std::cos(angle) + rotated * std::sin(angle);
      }
  return y;
}

TEST(HfExport, PermutedProjectionUnderHalvesRopeEqualsPairRope) {
  const int64_t H = 3, D = 8, C = 5, T = 7;
  const double theta = 500.0;
  Context ctx{Device::cpu()};
  const std::vector<double> w = randn(H * D * C, 1), x = randn(T * C, 2);
  // q (1, H, T, D) = x Wᵀ split into heads, with W as given and with its rows permuted.
  auto project = [&](const std::vector<double>& weight) {
    std::vector<double> q(size_t(H * T * D));
    for (int64_t r = 0; r < H * D; ++r)
      for (int64_t t = 0; t < T; ++t) {
        double s = 0;
        for (int64_t c = 0; c < C; ++c) s += weight[size_t(r * C + c)] * x[size_t(t * C + c)];
        q[size_t(((r / D) * T + t) * D + r % D)] = s;
      }
    return q;
  };
  std::vector<double> w_hf(w.size());
  for (int64_t r = 0; r < H * D; ++r)
    for (int64_t c = 0; c < C; ++c) w_hf[size_t(r * C + c)] = w[size_t(io::rope_halves_source_row(r, D) * C + c)];
  Tensor q = make_tensor(ctx, {1, H, T, D}, DType::F64, project(w));
  ops::rope(ctx, q, q, theta, /*inverse=*/false);  // paratrain's own op: pairs (2i, 2i+1)
  const std::vector<double> ours = q.to_host_f64(ctx), theirs = rope_halves(project(w_hf), H, T, D, theta);
  // Hugging Face's element (h, t, j) is paratrain's (h, t, source(j)).
  double worst = 0;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < D; ++j)
        worst = std::max(worst, std::fabs(theirs[size_t((h * T + t) * D + j)] -
                                          ours[size_t((h * T + t) * D + io::rope_halves_source_row(j, D))]));
  EXPECT_LE(worst, 1e-12);
  // And the float version moves rows the same way.
  const std::vector<float> wf(w.begin(), w.end());
  const std::vector<float> moved = io::rope_rows_to_halves(wf, H * D, C, D);
  for (size_t i = 0; i < w_hf.size(); ++i) EXPECT_EQ(moved[i], static_cast<float>(w_hf[i]));
}

}  // namespace
}  // namespace pt::test
