#pragma once
// Token files, validated once at open and read with pread, and the batch sampler that cuts
// (input, target) windows. Formats, recognised by content first (docs/HDF5_SCHEMA.md, "Token
// files"): .npy (1-D <u2, <u4, <i4 or <i8) by its magic; llm.c's .bin (a header of 256 int32:
// magic, version, token count; gpt-2's uint16 and llama-3's uint32 tokens) by its magic; and,
// with neither magic, a file named .bin as raw little-endian tokens, uint16 as nanoGPT writes
// them unless --bin-dtype uint32 says otherwise.
#include <sys/types.h>

#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace pt::io {

// Element type of a headerless .bin token file (--bin-dtype).
enum class BinTokens { U16, U32 };
BinTokens bin_tokens_from_name(const std::string& name);  // "uint16" | "uint32"
const char* bin_tokens_name(BinTokens b);

// A token file, checked once at open (through a memory map) and read with pread after that.
// Opening refuses anything but a regular file (a FIFO
// would block, a device never end), checks the format and scans every token once: each must
// lie in [0, vocab_size). A headerless file read as uint16 whose every second value is 0 is
// refused as what it plainly is, uint32 tokens. Errors name the file and what is wrong.
class TokenFile {
 public:
  TokenFile(const std::string& path, int64_t vocab_size, BinTokens headerless = BinTokens::U16);
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  const std::string& path() const { return path_; }
  int64_t size() const { return count_; }  // number of tokens
  DType dtype() const { return dtype_; }   // U16, U32, I32 or I64 as stored
  int64_t vocab_size() const { return vocab_; }
  int64_t token(int64_t i) const;
  // The file's identity for comparing ranks (and, later, resumed runs): its byte size, token
  // type and count, and a 64-bit FNV-1a hash of its first, middle and last 64 KiB.
  const std::string& identity() const { return identity_; }
  // out[k] = token(start + k) for k < n, read from the file (pread: a file another process
  // truncated is an error naming it, never a SIGBUS).
  void read(int64_t start, int64_t n, int32_t* out) const;
  // Fails, naming the file, when its size or modification time is not what they were at open:
  // another process truncated or rewrote it while this run trains on it.
  void check_unchanged() const;

 private:
  std::string path_;
  int64_t vocab_ = 0;
  DType dtype_ = DType::U16;
  int64_t count_ = 0;
  int fd_ = -1;
  off_t opened_size_ = 0;
  struct timespec opened_mtime_ {};
  size_t data_offset_ = 0;  // of the first token (after the header)
  std::string identity_;
  // Only while the constructor checks the file:
  void* map_ = nullptr;  // whole file
  size_t map_bytes_ = 0;
  const unsigned char* data_ = nullptr;  // first token
};

enum class Sampling { Random, Sequential };
Sampling sampling_from_name(const std::string& name);  // "random" | "sequential"
const char* sampling_name(Sampling s);

struct SamplerConfig {
  int64_t global_batch = 0;    // --batch-size: sequences per step over all ranks
  int64_t context_length = 0;  // T
  Sampling sampling = Sampling::Random;
  uint64_t seed = 0;
  int rank = 0, world = 1;  // this rank takes rows [rank·B/W, (rank+1)·B/W) of the batch
};

// Host int32 token windows of one step for this rank: row b is the window starting at s_b,
// inputs[b][t] = file[s_b + t] and targets[b][t] = file[s_b + t + 1] (the next token).
struct TokenBatch {
  int64_t rows = 0, cols = 0;    // (B_local, T)
  std::vector<int32_t> inputs;   // (B_local, T)
  std::vector<int32_t> targets;  // (B_local, T)
};

// Windows of T+1 tokens from a TokenFile. It has no state but its config: the windows of
// step i are a pure function of (seed, i), so a resumed run draws exactly the batches an
// uninterrupted one would, and the global batch is the same for every world size.
//   random:     window j of step i starts at a uniform draw from [0, n − T − 1], from a
//               counter-based generator keyed by (seed, i, j).
//   sequential: window j of step i starts at ((i·B + j)·T) mod (n − T): consecutive,
//               non-overlapping inputs that walk through the file and wrap around.
class BatchSampler {
 public:
  // Keeps a reference to `data`, which must outlive the sampler. Checks B % W == 0 and that
  // the file holds at least T + 1 tokens.
  BatchSampler(const TokenFile& data, const SamplerConfig& cfg);
  const SamplerConfig& config() const { return cfg_; }
  int64_t local_batch() const { return cfg_.global_batch / cfg_.world; }
  // Start offset in the file of window j ∈ [0, global_batch) of step `step`.
  int64_t window_start(int64_t step, int64_t j) const;
  TokenBatch batch(int64_t step) const;
  // The same into caller buffers of local_batch()·T elements each.
  void fill(int64_t step, int32_t* inputs, int32_t* targets) const;

 private:
  const TokenFile& data_;
  SamplerConfig cfg_;
};

}  // namespace pt::io
