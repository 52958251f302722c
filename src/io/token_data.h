#pragma once
// Token files, validated once at open and read with pread (or from a memory map), the batch
// sampler that cuts (input, target) windows, and the validation batches. Formats, recognised by
// content first (data/README.md, "Token formats"): .npy (1-D <u2, <u4, <i4 or <i8) by its magic;
// llm.c's .bin (a header of 256 int32: magic, version, token count; gpt-2's uint16 and llama-3's
// uint32 tokens) by its magic; and, with neither magic, a file named .bin as raw little-endian
// tokens, uint16 as nanoGPT writes them unless --bin-dtype uint32 says otherwise.
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

// Where batches come from: one token file, or a set of shards read as their concatenation
// (io/token_shards.h). Token i is an int32 in [0, vocab_size()).
class TokenSource {
 public:
  virtual ~TokenSource() = default;
  virtual const std::string& path() const = 0;  // the file, or the set as it was named
  virtual std::string what() const = 0;         // "token file 'x'": how errors name it
  virtual int64_t size() const = 0;             // number of tokens
  virtual int64_t vocab_size() const = 0;
  // The data's identity for comparing ranks and resumed runs.
  virtual const std::string& identity() const = 0;
  // out[k] = token(start + k) for k < n.
  virtual void read(int64_t start, int64_t n, int32_t* out) const = 0;
  // Fails, naming the file, when a file changed (size or modification time) since it was opened.
  virtual void check_unchanged() const = 0;
};

// How a TokenFile reads its tokens after the checks at open.
//   Pread:  through its file descriptor; a file another process truncates is an error naming
//           it, never a SIGBUS.
//   Mapped: from a read-only memory map kept open (the descriptor is closed, so a set of many
//           shards holds no descriptors). check_unchanged() before a read narrows, but cannot
//           close, the window in which a file truncated in place kills the process with SIGBUS;
//           a file replaced by a rename (as prepare_data.py writes) leaves the mapping intact.
enum class TokenAccess { Pread, Mapped };

// A token file, checked once at open (through a memory map). Opening refuses anything but a
// regular file (a FIFO would block, a device never end), checks the format and scans every
// token once: each must lie in [0, vocab_size). A headerless file read as uint16 whose every
// second value is 0 is refused as what it plainly is, uint32 tokens. Errors name the file and
// what is wrong. With `sha256`, the file's SHA-256 is computed at open from the same map.
class TokenFile final : public TokenSource {
 public:
  TokenFile(const std::string& path, int64_t vocab_size, BinTokens headerless = BinTokens::U16,
            TokenAccess access = TokenAccess::Pread, bool sha256 = false);
  ~TokenFile() override;
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  const std::string& path() const override { return path_; }
  std::string what() const override { return "token file '" + path_ + "'"; }
  int64_t size() const override { return count_; }  // number of tokens
  DType dtype() const { return dtype_; }            // U16, U32, I32 or I64 as stored
  int64_t vocab_size() const override { return vocab_; }
  int64_t token(int64_t i) const;
  // The file's identity: its byte size, token type and count, and a 64-bit FNV-1a hash of its
  // first, middle and last 64 KiB.
  const std::string& identity() const override { return identity_; }
  // The whole file's SHA-256 (64 hex digits); empty unless asked for at open.
  const std::string& sha256() const { return sha256_; }
  void read(int64_t start, int64_t n, int32_t* out) const override;
  void check_unchanged() const override;

 private:
  std::string path_;
  int64_t vocab_ = 0;
  DType dtype_ = DType::U16;
  int64_t count_ = 0;
  int fd_ = -1;  // Pread only
  off_t opened_size_ = 0;
  struct timespec opened_mtime_ {};
  size_t data_offset_ = 0;  // of the first token (after the header)
  std::string identity_, sha256_;
  // While the constructor checks the file, and for good with TokenAccess::Mapped:
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

// Windows of T+1 tokens from a TokenSource (a file, or shards read as their concatenation). It has no state but its
// config: the windows of step i are a pure function of (seed, i), so a resumed run draws exactly the batches an
// uninterrupted one would, and the global batch is the same for every world size.
//   random:     window j of step i starts at a uniform draw from [0, n − T − 1], from a
//               counter-based generator keyed by (seed, i, j).
//   sequential: window j of step i starts at ((i·B + j)·T) mod (n − T): consecutive,
//               non-overlapping inputs that walk through the file and wrap around.
class BatchSampler {
 public:
  // Keeps a reference to `data`, which must outlive the sampler. Checks B % W == 0 and that
  // the file holds at least T + 1 tokens.
  BatchSampler(const TokenSource& data, const SamplerConfig& cfg);
  const SamplerConfig& config() const { return cfg_; }
  int64_t local_batch() const { return cfg_.global_batch / cfg_.world; }
  // Start offset in the file of window j ∈ [0, global_batch) of step `step`.
  int64_t window_start(int64_t step, int64_t j) const;
  TokenBatch batch(int64_t step) const;
  // The same into caller buffers of local_batch()·T elements each.
  void fill(int64_t step, int32_t* inputs, int32_t* targets) const;

 private:
  const TokenSource& data_;
  SamplerConfig cfg_;
};

// A fixed set of validation batches, the same on any rank count: window k holds tokens
// [k·T, k·T + T] of the source (consecutive, non-overlapping inputs from its start), batch i is
// windows [i·B, (i+1)·B), and this rank takes rows [rank·B/W, (rank+1)·B/W) of each, as in
// training. The mean loss over all rows of all batches is then one number whatever W is.
// `max_tokens` (0: all) bounds the input tokens, B·T per batch; the set must hold at least one
// batch, else the constructor fails with one line naming the data.
class ValidationBatches {
 public:
  ValidationBatches(const TokenSource& data, int64_t global_batch, int64_t context_length, int64_t max_tokens,
                    int rank = 0, int world = 1);
  int64_t count() const { return count_; }  // number of batches
  int64_t local_batch() const { return sampler_.local_batch(); }
  // Start offset in the source of window j ∈ [0, global_batch) of batch i: (i·B + j)·T.
  int64_t window_start(int64_t i, int64_t j) const;
  TokenBatch batch(int64_t i) const;
  void fill(int64_t i, int32_t* inputs, int32_t* targets) const;

 private:
  void check(int64_t i) const;  // i is a batch of the set
  BatchSampler sampler_;        // sequential: batch i is step i, never wrapping within count_ batches
  int64_t count_ = 0;
};

}  // namespace pt::io
