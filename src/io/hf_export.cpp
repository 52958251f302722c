#include "io/hf_export.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "core/dtype.h"
#include "core/error.h"
#include "io/atomic_file.h"
#include "io/input_file.h"
#include "io/safetensors.h"

namespace pt::io {

namespace fs = std::filesystem;

TransformerConfig model_config_of(const CheckpointInfo& info, const std::string& path) {
  auto need_int = [&](const char* key) {
    const auto it = info.ints.find(key);
    PT_CHECK(it != info.ints.end(), "checkpoint '" + path + "' has no integer attribute '" + key +
                                        "' (the model's shape; was it written by paratrain train?)");
    return it->second;
  };
  TransformerConfig cfg;
  cfg.vocab_size = need_int("model.vocab_size");
  cfg.context_length = need_int("model.context_length");
  cfg.d_model = need_int("model.d_model");
  cfg.num_layers = need_int("model.num_layers");
  cfg.num_heads = need_int("model.num_heads");
  cfg.d_ff = need_int("model.d_ff");
  const auto theta = info.reals.find("model.rope_theta");
  PT_CHECK(theta != info.reals.end(), "checkpoint '" + path + "' has no attribute 'model.rope_theta'");
  cfg.rope_theta = theta->second;
  try {
    cfg.validate();
  } catch (const Error& e) {
    PT_FAIL("checkpoint '" + path + "': its model shape is not usable: " + e.what());
  }
  return cfg;
}

namespace {

// paratrain's per-layer tensor suffix → Hugging Face's, under "model.layers.N.".
const std::pair<const char*, const char*> kLayerNames[] = {
    {"ln1.weight", "input_layernorm.weight"},
    {"attn.q_proj.weight", "self_attn.q_proj.weight"},
    {"attn.k_proj.weight", "self_attn.k_proj.weight"},
    {"attn.v_proj.weight", "self_attn.v_proj.weight"},
    {"attn.output_proj.weight", "self_attn.o_proj.weight"},
    {"ln2.weight", "post_attention_layernorm.weight"},
    {"ffn.w1.weight", "mlp.gate_proj.weight"},  // silu(w1·x) ⊙ w3·x: w1 is the gated one
    {"ffn.w2.weight", "mlp.down_proj.weight"},
    {"ffn.w3.weight", "mlp.up_proj.weight"},
};

// The shape of paratrain tensor `name` in a model of shape `cfg` ([out, in] for matrices).
Shape shape_of(const std::string& name, const TransformerConfig& cfg) {
  const int64_t C = cfg.d_model, F = cfg.d_ff, V = cfg.vocab_size;
  if (name == "token_embeddings.weight" || name == "lm_head.weight") return {V, C};
  if (name.find("ffn.w2.") != std::string::npos) return {C, F};
  if (name.find("ffn.w") != std::string::npos) return {F, C};
  if (name.find("attn.") != std::string::npos) return {C, C};
  return {C};  // the norms
}

std::string errno_text() { return std::strerror(errno); }

// The parsed JSON file `path`, or one error naming it.
nlohmann::json read_json_file(const std::string& path, const std::string& what) {
  const std::string text = read_text_file(path, what + " '" + path + "'");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    PT_FAIL(what + " '" + path + "' is not valid JSON: " + e.what());
  }
}

// The id of the first special token in a `tokenizers` JSON whose text is one of `names`.
std::optional<int64_t> special_token_id(const nlohmann::json& tok, std::initializer_list<const char*> names) {
  const auto added = tok.find("added_tokens");
  if (added == tok.end() || !added->is_array()) return std::nullopt;
  for (const char* name : names)
    for (const auto& t : *added)
      if (t.is_object() && t.value("content", "") == name && t.contains("id") && t["id"].is_number_integer())
        return t["id"].get<int64_t>();
  return std::nullopt;
}

// Removes the temporary folder unless it was moved into place.
struct TempDir {
  std::string path;
  ~TempDir() {
    if (path.empty()) return;
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

std::string hf_llama_name(const std::string& name) {
  if (name == "token_embeddings.weight") return "model.embed_tokens.weight";
  if (name == "ln_final.weight") return "model.norm.weight";
  if (name == "lm_head.weight") return "lm_head.weight";
  static const std::regex layer(R"(layers\.([0-9]+)\.(.+))");
  std::smatch m;
  if (std::regex_match(name, m, layer))
    for (const auto& [ours, theirs] : kLayerNames)
      if (m[2] == ours) return "model.layers." + m[1].str() + "." + theirs;
  PT_FAIL("tensor '" + name + "' has no Hugging Face Llama name");
}

bool rope_rotates(const std::string& name) {
  return name.find(".attn.q_proj.") != std::string::npos || name.find(".attn.k_proj.") != std::string::npos;
}

int64_t rope_halves_source_row(int64_t row, int64_t head_dim) {
  const int64_t half = head_dim / 2, head = row / head_dim, j = row % head_dim;
  return head * head_dim + (j < half ? 2 * j : 2 * (j - half) + 1);
}

std::vector<float> rope_rows_to_halves(const std::vector<float>& w, int64_t rows, int64_t cols, int64_t head_dim) {
  PT_CHECK(head_dim > 0 && head_dim % 2 == 0 && rows % head_dim == 0 && int64_t(w.size()) == rows * cols,
           "rope_rows_to_halves: a (" + std::to_string(rows) + ", " + std::to_string(cols) +
               ") matrix does not split into heads of " + std::to_string(head_dim) + " rows");
  std::vector<float> out(w.size());
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t src = rope_halves_source_row(r, head_dim);
    std::copy(w.begin() + src * cols, w.begin() + (src + 1) * cols, out.begin() + r * cols);
  }
  return out;
}

std::string hf_llama_config_json(const TransformerConfig& cfg, bool bf16, std::optional<int64_t> bos_id,
                                 std::optional<int64_t> eos_id) {
  nlohmann::ordered_json j;
  j["architectures"] = {"LlamaForCausalLM"};
  j["model_type"] = "llama";
  j["hidden_size"] = cfg.d_model;
  j["intermediate_size"] = cfg.d_ff;
  j["num_hidden_layers"] = cfg.num_layers;
  j["num_attention_heads"] = cfg.num_heads;
  j["num_key_value_heads"] = cfg.num_heads;
  j["head_dim"] = cfg.d_head();
  j["vocab_size"] = cfg.vocab_size;
  j["max_position_embeddings"] = cfg.context_length;
  j["rms_norm_eps"] = 1e-5;  // model/layers.h's RMSNorm
  j["rope_theta"] = cfg.rope_theta;
  j["rope_scaling"] = nullptr;
  j["hidden_act"] = "silu";
  j["attention_bias"] = false;
  j["mlp_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["tie_word_embeddings"] = false;
  j["initializer_range"] = 0.02;
  j["pretraining_tp"] = 1;
  j["use_cache"] = true;
  j["torch_dtype"] = bf16 ? "bfloat16" : "float32";
  j["bos_token_id"] = bos_id ? nlohmann::ordered_json(*bos_id) : nlohmann::ordered_json(nullptr);
  j["eos_token_id"] = eos_id ? nlohmann::ordered_json(*eos_id) : nlohmann::ordered_json(nullptr);
  return j.dump(2) + "\n";
}

int64_t export_hf(const HfExportOptions& o) {
  PT_CHECK(!o.out.empty(), "--out: the folder to write is missing");
  nlohmann::json tokenizer;
  if (!o.tokenizer.empty()) tokenizer = read_json_file(o.tokenizer, "tokenizer");
  const CheckpointInfo info = read_checkpoint_info(o.checkpoint);
  const TransformerConfig cfg = model_config_of(info, o.checkpoint);

  const std::string out = fs::path(o.out).lexically_normal().string();
  struct stat st {};
  const bool exists = lstat(out.c_str(), &st) == 0;
  PT_CHECK(!exists || S_ISDIR(st.st_mode), "--out '" + o.out + "' is " + file_kind(st.st_mode) + ", not a folder");
  PT_CHECK(!exists || o.overwrite, "--out '" + o.out + "' exists (--overwrite replaces it)");
  std::string tmpl = (out.back() == '/' ? out.substr(0, out.size() - 1) : out) + ".tmp-XXXXXX";
  PT_CHECK(mkdtemp(tmpl.data()) != nullptr, "cannot create a folder beside --out '" + o.out + "': " + errno_text());
  TempDir tmp{tmpl};

  std::vector<std::pair<std::string, Shape>> wanted;
  std::vector<SafetensorsEntry> entries;
  for (const ParamShape& p : transformer_param_shapes(cfg)) {
    wanted.emplace_back(p.name, shape_of(p.name, cfg));
    entries.push_back({hf_llama_name(p.name), o.bf16 ? "BF16" : "F32", wanted.back().second});
  }
  SafetensorsWriter writer(tmp.path + "/model.safetensors", entries, {{"format", "pt"}});
  std::vector<uint16_t> half;
  read_tensors(o.checkpoint, wanted, [&](size_t k, const std::vector<float>& values) {
    const Shape& s = wanted[k].second;
    const std::vector<float> v =
        rope_rotates(wanted[k].first) ? rope_rows_to_halves(values, s[0], s[1], cfg.d_head()) : values;
    if (!o.bf16) return writer.write_next(v.data(), v.size() * sizeof(float));
    half.resize(v.size());
    for (size_t i = 0; i < v.size(); ++i) half[i] = float_to_bf16_bits(v[i]);
    writer.write_next(half.data(), half.size() * sizeof(uint16_t));
  });
  writer.close();

  std::optional<int64_t> bos, eos;
  if (!o.tokenizer.empty()) {
    eos = special_token_id(tokenizer, {"<|endoftext|>", "</s>", "<|end_of_text|>", "<eos>"});
    bos = special_token_id(tokenizer, {"<s>", "<|begin_of_text|>", "<bos>", "<|endoftext|>"});
    fs::copy_file(o.tokenizer, tmp.path + "/tokenizer.json");
    // PreTrainedTokenizerFast reads tokenizer.json as it is (no Llama-specific added tokens).
    nlohmann::ordered_json tc;
    tc["tokenizer_class"] = "PreTrainedTokenizerFast";
    tc["model_max_length"] = cfg.context_length;
    for (const auto& [key, id] : {std::pair{"bos_token", bos}, {"eos_token", eos}})
      if (id)
        for (const auto& t : tokenizer["added_tokens"])
          if (t.value("id", int64_t{-1}) == *id) tc[key] = t["content"];
    write_text_file(tmp.path + "/tokenizer_config.json", tc.dump(2) + "\n");
  }
  write_text_file(tmp.path + "/config.json", hf_llama_config_json(cfg, o.bf16, bos, eos));
  chmod(tmp.path.c_str(), 0755);  // mkdtemp's 0700 is for the half-written folder only

  // Into place: swapped with an existing folder (then removed with the temporary name), else
  // renamed where nothing may appear meanwhile.
  const unsigned flags = exists ? RENAME_EXCHANGE : RENAME_NOREPLACE;
  PT_CHECK(renameat2(AT_FDCWD, tmp.path.c_str(), AT_FDCWD, out.c_str(), flags) == 0,
           "cannot move the export into --out '" + o.out + "': " + errno_text());
  if (!exists) tmp.path.clear();
  return static_cast<int64_t>(entries.size());
}

void write_npy_f32(const std::string& path, const std::vector<int64_t>& shape, const std::vector<float>& values,
                   bool replace) {
  std::string dims;
  for (const int64_t d : shape) dims += std::to_string(d) + ",";
  if (shape.size() > 1) dims.pop_back();  // "(3,)" for one dimension, "(2, 3)" style otherwise
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  header.append(63 - (10 + header.size()) % 64, ' ');  // magic + version + length + header + \n: 64-aligned
  header += '\n';
  std::string bytes = "\x93NUMPY\x01";
  bytes += '\0';
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header;
  bytes.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  write_atomically(path, replace, "logits file", [&](const std::string& tmp) { write_text_file(tmp, bytes); });
}

}  // namespace pt::io
