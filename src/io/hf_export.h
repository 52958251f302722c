#pragma once
// A checkpoint as a Hugging Face LlamaForCausalLM folder: model.safetensors, config.json and,
// given a tokenizer, tokenizer.json with tokenizer_config.json. The model is the Llama shape
// (RMSNorm eps 1e-5 with weight w, RoPE, SwiGLU silu(w1·x) ⊙ w3·x, untied head, no biases) and
// every weight is stored [out_features, in_features] as Hugging Face's, so the export renames
// tensors and, for RoPE, reorders the rows of q_proj and k_proj (rope_halves_source_row).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "model/transformer.h"

namespace pt::io {

// The model shape in a checkpoint's root attributes (model.*, as train writes them); one error
// naming `path` and the first attribute missing.
TransformerConfig model_config_of(const CheckpointInfo& info, const std::string& path);

// Hugging Face's name for paratrain tensor `name` ("layers.3.ffn.w1.weight" →
// "model.layers.3.mlp.gate_proj.weight"); throws for a name it does not know.
std::string hf_llama_name(const std::string& name);
// Whether RoPE rotates the outputs of tensor `name` (a q or k projection).
bool rope_rotates(const std::string& name);

// paratrain rotates pairs (2i, 2i+1) of each head by angle t·θ^(-2i/D); Hugging Face's Llama
// rotates (i, i + D/2) by the same angle. So row j of a head in Hugging Face's q or k projection
// is row rope_halves_source_row(j, D) of paratrain's: 2j for j < D/2, else 2(j − D/2) + 1 (rows
// of other heads keep their head). Both q and k move alike, so their dot products, and
// attention, are unchanged.
int64_t rope_halves_source_row(int64_t row, int64_t head_dim);
// The (rows, cols) matrix w with its rows reordered as above.
std::vector<float> rope_rows_to_halves(const std::vector<float>& w, int64_t rows, int64_t cols, int64_t head_dim);

// config.json for LlamaForCausalLM; bos/eos ids where the tokenizer names them.
std::string hf_llama_config_json(const TransformerConfig& cfg, bool bf16, std::optional<int64_t> bos_id,
                                 std::optional<int64_t> eos_id);

struct HfExportOptions {
  std::string checkpoint;
  std::string out;        // the folder to create
  std::string tokenizer;  // a `tokenizers` JSON to copy in, or ""
  bool bf16 = false;      // weights as bf16 (rounded to nearest even) instead of fp32
  bool overwrite = false;
};
// Writes the folder: into "<out>.tmp-XXXXXX" beside it, then renamed into place (an existing
// folder is swapped out and removed only with overwrite), so `out` is never half-written.
// Returns how many tensors it wrote.
int64_t export_hf(const HfExportOptions& o);

// A .npy file (NumPy format 1.0, little-endian fp32, C order) of `values` with `shape`.
// Written atomically; an existing file is replaced only when `replace`.
void write_npy_f32(const std::string& path, const std::vector<int64_t>& shape, const std::vector<float>& values,
                   bool replace);

}  // namespace pt::io
