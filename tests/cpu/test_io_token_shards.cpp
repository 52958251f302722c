// Sharded token sets (io/token_shards.h) and the validation batches: batches against a naive
// reference (one file holding the shards' concatenation), one file giving exactly today's
// batches, determinism from the seed, a restored sampler state continuing the stream, manifests
// and their checksums, and every hostile shard refused with its file named.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>
#include <random>

#include "common/test_util.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "io/sha256.h"
#include "io/token_shards.h"

namespace pt::io {
namespace {

using test::bytes_of;

constexpr int64_t kVocab = 5000;

std::string llmc_shard(const std::vector<uint16_t>& tokens, int32_t count = -1, int32_t version = 1) {
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520;
  header[1] = version;
  header[2] = count < 0 ? static_cast<int32_t>(tokens.size()) : count;
  return bytes_of(header) + bytes_of(tokens);
}

void write(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

SamplerConfig config(Sampling s, uint64_t seed, int rank = 0, int world = 1) {
  SamplerConfig c;
  c.global_batch = 8;
  c.context_length = 32;
  c.sampling = s;
  c.seed = seed;
  c.rank = rank;
  c.world = world;
  return c;
}

bool same_batches(const TokenSource& a, const TokenSource& b, const SamplerConfig& c, int64_t from, int64_t to) {
  BatchSampler sa(a, c), sb(b, c);
  for (int64_t step = from; step < to; ++step) {
    const TokenBatch x = sa.batch(step), y = sb.batch(step);
    if (x.inputs != y.inputs || x.targets != y.targets) return false;
  }
  return true;
}

class IoTokenShards : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::scratch_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::mt19937 rng(7);
    // Uneven sizes, one shorter than a window, so windows cross one and even two boundaries.
    for (int64_t n : {300, 20, 650, 131}) {
      std::vector<uint16_t> t(static_cast<size_t>(n));
      for (auto& v : t) v = static_cast<uint16_t>(rng() % kVocab);
      shards_.push_back(t);
      all_.insert(all_.end(), t.begin(), t.end());
    }
    ::mkdir(path("set").c_str(), 0755);
    for (size_t i = 0; i < shards_.size(); ++i)
      write(path("set/part_" + std::to_string(i) + ".bin"), llmc_shard(shards_[i]));
    test::write_npy(path("concat.npy"), all_, "<u2");  // the naive reference
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  std::string shard(size_t i) const { return path("set/part_" + std::to_string(i) + ".bin"); }
  std::string dir_;
  std::vector<std::vector<uint16_t>> shards_;
  std::vector<uint16_t> all_;
};

TEST_F(IoTokenShards, BatchesEqualTheOnesOfOneFileHoldingTheConcatenation) {
  TokenShards set({path("set/part_*.bin")}, kVocab);
  TokenFile concat(path("concat.npy"), kVocab);
  ASSERT_EQ(set.size(), static_cast<int64_t>(all_.size()));
  std::vector<int32_t> got(all_.size());
  set.read(0, set.size(), got.data());
  EXPECT_TRUE(std::equal(got.begin(), got.end(), all_.begin()));
  int crossing = 0;
  for (Sampling s : {Sampling::Random, Sampling::Sequential})
    for (int world : {1, 2, 4})
      for (int rank = 0; rank < world; ++rank) {
        EXPECT_TRUE(same_batches(set, concat, config(s, 42, rank, world), 0, 40)) << sampling_name(s);
        BatchSampler sampler(set, config(s, 42, rank, world));
        for (int64_t step = 0; step < 40; ++step)
          for (int64_t j = 0; j < 8; ++j) {
            const int64_t a = sampler.window_start(step, j);
            crossing += (a < 300 && a + 32 >= 300) || (a < 320 && a + 32 >= 320) || (a < 970 && a + 32 >= 970);
          }
      }
  EXPECT_GT(crossing, 0) << "no window crossed a shard boundary: the test proves nothing";
}

TEST_F(IoTokenShards, OneFileGivesExactlyTodaysBatchesAndIdentity) {
  const std::string sample = test::source_path("data/sample_tokens.npy");
  TokenFile today(sample, 10000);
  TokenShards set({sample}, 10000);
  EXPECT_EQ(set.identity(), today.identity());
  for (Sampling s : {Sampling::Random, Sampling::Sequential})
    for (uint64_t seed : {0ull, 1234ull}) EXPECT_TRUE(same_batches(set, today, config(s, seed, 1, 2), 0, 30));
}

TEST_F(IoTokenShards, EverySpellingOfTheSetGivesTheSameBatchesFromTheSeed) {
  TokenShards glob({path("set/part_*.bin")}, kVocab), dir({path("set")}, kVocab),
      list({shard(0), shard(1), shard(2), shard(3)}, kVocab);
  EXPECT_EQ(glob.identity(), dir.identity());
  EXPECT_EQ(glob.identity(), list.identity());
  EXPECT_TRUE(same_batches(glob, dir, config(Sampling::Random, 9), 0, 20));
  EXPECT_TRUE(same_batches(glob, list, config(Sampling::Random, 9), 0, 20));
  // Another seed, another stream; another order, other data.
  BatchSampler a(glob, config(Sampling::Random, 9)), b(glob, config(Sampling::Random, 10));
  EXPECT_NE(a.batch(0).inputs, b.batch(0).inputs);
  TokenShards reordered({shard(1), shard(0), shard(2), shard(3)}, kVocab);
  EXPECT_NE(reordered.identity(), glob.identity());
}

TEST_F(IoTokenShards, ACommaSeparatedValueIsAListUnlessItNamesAFile) {
  const std::string list = shard(0) + "," + shard(1) + "," + shard(2) + "," + shard(3);
  EXPECT_EQ(data_specs(list), (std::vector<std::string>{shard(0), shard(1), shard(2), shard(3)}));
  EXPECT_EQ(TokenShards(data_specs(list), kVocab).identity(), TokenShards({path("set")}, kVocab).identity());
  EXPECT_EQ(data_specs(shard(0)), std::vector<std::string>{shard(0)});
  write(path("a,b.bin"), llmc_shard(shards_[0]));  // a file whose name holds a comma is one file
  EXPECT_EQ(data_specs(path("a,b.bin")), std::vector<std::string>{path("a,b.bin")});
  EXPECT_EQ(data_specs("x,,y"), (std::vector<std::string>{"x", "", "y"}));
  EXPECT_THROW(TokenShards(data_specs(shard(0) + ","), kVocab), Error);  // an empty part
}

TEST_F(IoTokenShards, ARestoredSamplerStateContinuesTheStreamExactly) {
  TokenShards set({path("set")}, kVocab);
  const SamplerConfig run = config(Sampling::Random, 77);
  BatchSampler uninterrupted(set, run);
  CheckpointInfo saved;  // what a checkpoint at step 13 holds: the step and the sampler's attributes
  saved.step = 13;
  add_sampler_state(saved, run);
  saved.text["data.identity"] = set.identity();

  TokenShards reopened({path("set/part_*.bin")}, kVocab);  // a new process, the set named another way
  EXPECT_EQ(reopened.identity(), saved.text["data.identity"]);
  SamplerConfig resumed = config(Sampling::Sequential, 1);  // overwritten by the restore
  restore_sampler_state(saved, resumed);
  BatchSampler after(reopened, resumed);
  for (int64_t step = saved.step; step < saved.step + 25; ++step) {
    const TokenBatch x = uninterrupted.batch(step), y = after.batch(step);
    EXPECT_EQ(x.inputs, y.inputs) << "step " << step;
    EXPECT_EQ(x.targets, y.targets) << "step " << step;
  }
}

TEST_F(IoTokenShards, Sha256MatchesTheStandardsVectors) {
  EXPECT_EQ(sha256_hex("abc", 3), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

std::string manifest_json(const std::vector<std::pair<std::string, std::string>>& train, const std::string& val,
                          int64_t vocab = kVocab) {
  std::string t;
  for (const auto& [file, sha] : train)
    t += std::string(t.empty() ? "" : ",") + "{\"file\": \"" + file + "\", \"sha256\": \"" + sha + "\"}";
  return "{\"vocab_size\": " + std::to_string(vocab) +
         ", \"eot_id\": 3, \"tokenizer\": {\"file\": \"tokenizer.json\"}, \"train\": [" + t +
         "], \"val\": [{\"file\": \"" + val + "\"}]}";
}

TEST_F(IoTokenShards, AManifestListsItsSplitsAndItsChecksumsAreVerified) {
  const std::string s0 = sha256_hex(llmc_shard(shards_[0]).data(), llmc_shard(shards_[0]).size());
  const std::string s2 = sha256_hex(llmc_shard(shards_[2]).data(), llmc_shard(shards_[2]).size());
  write(path("set/manifest.json"), manifest_json({{"part_0.bin", s0}, {"part_2.bin", s2}}, "part_3.bin"));
  TokenShards train({path("set")}, kVocab), val({path("set/manifest.json")}, kVocab, BinTokens::U16, ShardSplit::Val);
  EXPECT_EQ(train.size(), 950);
  EXPECT_EQ(val.size(), 131);
  ASSERT_EQ(train.shards().size(), 2u);
  EXPECT_EQ(train.shards()[1].sha256, s2);
  EXPECT_EQ(train.shards()[1].tokens, 650);
  EXPECT_EQ(train.eot_id(), 3);
  EXPECT_EQ(train.tokenizer_file(), path("set/tokenizer.json"));
  // A shard that is not the one the manifest lists is named, with the manifest.
  write(path("set/manifest.json"), manifest_json({{"part_0.bin", s0}, {"part_1.bin", s2}}, "part_3.bin"));
  const std::string part0 = shard(0), part1 = shard(1);  // (alive while the macro reads them)
  EXPECT_ERROR_HAS(TokenShards({path("set")}, kVocab), part1.c_str(), "sha256", "manifest.json");
  write(path("set/manifest.json"), manifest_json({{"part_0.bin", s0}}, "part_3.bin", 50257));
  EXPECT_ERROR_HAS(TokenShards({path("set")}, kVocab), "manifest.json", "50257");
  write(path("set/manifest.json"), "{\"train\": [{\"file\": \"part_0.bin\", \"tokens\": 301}], \"val\": []}");
  EXPECT_ERROR_HAS(TokenShards({path("set")}, kVocab), part0.c_str(), "301");
  EXPECT_ERROR_HAS(TokenShards({path("set")}, kVocab, BinTokens::U16, ShardSplit::Val), "manifest.json",
                   "\"val\" list is empty");
  write(path("set/manifest.json"), "{\"train\": [");
  EXPECT_ERROR_HAS(TokenShards({path("set")}, kVocab), "manifest.json", "not JSON");
  write(path("set/manifest.json"), "{\"train\": [{\"file\": 3}]}");
  EXPECT_ERROR_HAS(TokenShards({path("set")}, kVocab), "manifest.json", "without a \"file\"");
}

TEST_F(IoTokenShards, EachHostileShardIsRefusedWithItsFileNamed) {
  const std::string bad = path("set/part_2.bin");
  auto refused = [&](const std::string& bytes, const char* cause) {
    write(bad, bytes);
    EXPECT_ERROR_HAS(TokenShards({path("set")}, kVocab), bad.c_str(), cause);
  };
  refused("", "is empty");
  refused(llmc_shard({}), "holds no tokens");
  refused(llmc_shard(shards_[2], 700), "promises 700 tokens but 650 follow");
  refused(llmc_shard(shards_[2], -1, 3), "version 3");
  refused(llmc_shard({1, 2, 5000}), "token id 5000 at position 2");
  refused(llmc_shard(shards_[2]).substr(0, 100), "shorter than its 1024-byte header");
  write(bad, llmc_shard(shards_[2]));
  write(path("set/stray.dat"), "junk");
  const std::string stray = path("set/stray.dat");
  EXPECT_ERROR_HAS(TokenShards({path("set/*")}, kVocab), stray.c_str(), "unknown format");
  EXPECT_ERROR_HAS(TokenShards({shard(0), path("set/../set/part_0.bin")}, kVocab), "part_0.bin", "named twice");
  EXPECT_ERROR_HAS(TokenShards({path("nothing_*.bin")}, kVocab), "nothing_*.bin", "no file matches");
  EXPECT_ERROR_HAS(TokenShards({path("missing.bin")}, kVocab), "missing.bin");
  ::mkdir(path("empty_dir").c_str(), 0755);
  EXPECT_ERROR_HAS(TokenShards({path("empty_dir")}, kVocab), "empty_dir", "no .bin or .npy file");
}

TEST_F(IoTokenShards, AShardChangedAfterOpeningIsNamed) {
  TokenShards set({path("set")}, kVocab);
  set.check_unchanged();
  write(shard(3) + ".new", llmc_shard(shards_[0]));
  ASSERT_EQ(::rename((shard(3) + ".new").c_str(), shard(3).c_str()), 0);  // replaced: the map still reads the old
  const std::string part3 = shard(3);
  EXPECT_ERROR_HAS(set.check_unchanged(), part3.c_str(), "changed while training");
  std::vector<int32_t> tail(131);
  set.read(set.size() - 131, 131, tail.data());
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), shards_[3].begin()));
}

TEST_F(IoTokenShards, ValidationBatchesAreFixedAndTheSameSetOnAnyRankCount) {
  TokenShards set({path("set")}, kVocab);  // 1101 tokens: 34 windows of 32, 4 batches of 8
  ValidationBatches all(set, 8, 32, 0);
  ASSERT_EQ(all.count(), 4);
  for (int64_t i = 0; i < all.count(); ++i) {
    const TokenBatch b = all.batch(i);
    for (int64_t j = 0; j < 8; ++j) {
      const int64_t start = (i * 8 + j) * 32;
      EXPECT_EQ(all.window_start(i, j), start);
      for (int64_t t = 0; t < 32; ++t) {
        EXPECT_EQ(b.inputs[j * 32 + t], all_[start + t]);
        EXPECT_EQ(b.targets[j * 32 + t], all_[start + t + 1]);
      }
    }
  }
  // The ranks' rows, put together, are world 1's batch.
  for (int world : {2, 4}) {
    for (int64_t i = 0; i < all.count(); ++i) {
      std::vector<int32_t> joined;
      for (int rank = 0; rank < world; ++rank) {
        ValidationBatches part(set, 8, 32, 0, rank, world);
        ASSERT_EQ(part.count(), all.count());
        const TokenBatch b = part.batch(i);
        joined.insert(joined.end(), b.inputs.begin(), b.inputs.end());
      }
      EXPECT_EQ(joined, all.batch(i).inputs) << "world " << world << ", batch " << i;
    }
  }
  EXPECT_EQ(ValidationBatches(set, 8, 32, 600).count(), 2);  // 600 tokens: 18 windows, 2 batches
  EXPECT_ERROR_HAS(ValidationBatches(set, 8, 32, 200), "--eval-tokens 200", "8 × 32");
  EXPECT_ERROR_HAS(ValidationBatches(set, 64, 32, 0), "validation data", "1101 tokens", "64 × 32");
  EXPECT_ERROR_HAS(all.batch(4), "validation batch 4");
}

}  // namespace
}  // namespace pt::io
