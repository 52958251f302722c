#pragma once
// A set of token shards read as one stream, their concatenation in order: what `--data` names
// when it is a glob, a directory, a list or the manifest.json of scripts/prepare_data.py
// (data/README.md describes the formats and the manifest). Every shard is a TokenFile, checked
// at open and then memory-mapped (TokenAccess::Mapped); BatchSampler and ValidationBatches take
// the set as they take one file, so a set of one file gives exactly that file's batches.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/token_data.h"

namespace pt::io {

// The list a manifest's set comes from: its training shards or its validation shards.
enum class ShardSplit { Train, Val };

// One shard, as the run record lists it.
struct ShardInfo {
  std::string path;
  int64_t tokens = 0;
  std::string sha256;  // of the whole file, 64 hex digits
};

// The specs of one --data or --val-data value: its comma-separated parts, or the whole value when
// it names an existing path (a file name with a comma in it).
std::vector<std::string> data_specs(const std::string& value);
// The tokenizer file the first manifest among `value`'s specs names, resolved beside it (a
// manifest: a .json file, or a directory holding manifest.json), or "" when none names one; the
// shards are not read. What `paratrain export` ships with a run trained on prepared data.
std::string manifest_tokenizer(const std::string& value);

class TokenShards final : public TokenSource {
 public:
  // Each spec, in order, is one of:
  //   a manifest: a .json file, or a directory holding manifest.json; its `split` list, each
  //     shard's token count and SHA-256 checked against the file;
  //   a directory: its .bin and .npy files (not hidden, not recursive) in name order;
  //   a file; or a glob (a spec with * ? [ that names no file): its matches in name order.
  // Fails with one line naming the file: a spec that names nothing, a shard listed twice, a
  // shard without tokens, and everything TokenFile refuses (a header that lies about the count,
  // a bad magic or version, a token outside the vocabulary).
  TokenShards(const std::vector<std::string>& specs, int64_t vocab_size, BinTokens headerless = BinTokens::U16,
              ShardSplit split = ShardSplit::Train);

  const std::string& path() const override { return name_; }  // the specs, comma-separated
  std::string what() const override;
  int64_t size() const override { return offsets_.back(); }
  int64_t vocab_size() const override { return vocab_; }
  // One shard: that file's TokenFile::identity (so one file is the same data as before); more:
  // the shard count, the token count and a SHA-256 over every shard's token count and SHA-256.
  const std::string& identity() const override { return identity_; }
  void read(int64_t start, int64_t n, int32_t* out) const override;
  void check_unchanged() const override;

  std::vector<ShardInfo> shards() const;
  // What the last manifest among the specs says (empty / -1 without one): its path, the
  // tokenizer file it names (resolved beside it) and its end-of-text token.
  const std::string& manifest() const { return manifest_; }
  const std::string& tokenizer_file() const { return tokenizer_file_; }
  int64_t eot_id() const { return eot_id_; }

 private:
  struct Expected {  // what a manifest promises about one shard
    int64_t tokens = -1;
    std::string sha256, manifest;
  };
  void add_spec(const std::string& spec, ShardSplit split, std::vector<std::string>& paths,
                std::vector<Expected>& expected);
  void add_manifest(const std::string& file, ShardSplit split, std::vector<std::string>& paths,
                    std::vector<Expected>& expected);

  std::string name_;
  int64_t vocab_ = 0;
  std::vector<std::unique_ptr<TokenFile>> files_;
  std::vector<int64_t> offsets_{0};  // offsets_[i]: shard i's first token in the stream; back(): total
  std::string identity_, manifest_, tokenizer_file_;
  int64_t eot_id_ = -1;
};

}  // namespace pt::io
