// Token files (.npy of each dtype, llm.c's headered .bin, headerless .bin of uint16 or uint32)
// and every bad-input case (paths that are not regular files included); the batch sampler's
// determinism, sequential order and rank slicing.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <fstream>
#include <limits>
#include <map>

#include "common/test_util.h"
#include "core/error.h"
#include "io/token_data.h"

namespace pt::io {
namespace {

using test::bytes_of;
using test::write_npy;
using test::write_npy_raw;

class IoTokenFile : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::scratch_dir(::testing::UnitTest::GetInstance()->current_test_info()->name()); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  std::string dir_;
};

TEST_F(IoTokenFile, ReadsEachNpyDtype) {
  const std::vector<uint16_t> u16 = {0, 1, 65535, 7, 9999};
  const std::vector<int32_t> i32 = {3, 0, 70000, 2};
  const std::vector<int64_t> i64 = {5, 123456, 0};
  write_npy(path("u16.npy"), u16, "<u2");
  write_npy(path("i32.npy"), i32, "<i4");
  write_npy(path("i64.npy"), i64, "<i8", 2);  // format 2.0 header too
  TokenFile a(path("u16.npy"), 65536), b(path("i32.npy"), 70001), c(path("i64.npy"), 123457);
  EXPECT_EQ(a.dtype(), DType::U16);
  EXPECT_EQ(b.dtype(), DType::I32);
  EXPECT_EQ(c.dtype(), DType::I64);
  ASSERT_EQ(a.size(), 5);
  ASSERT_EQ(b.size(), 4);
  ASSERT_EQ(c.size(), 3);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(a.token(i), u16[i]);
  std::vector<int32_t> out(3, -1);
  b.read(1, 3, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{0, 70000, 2}));
  c.read(0, 3, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{5, 123456, 0}));
  EXPECT_ERROR_HAS(a.read(3, 3, out.data()), "outside its 5 tokens");
}

TEST_F(IoTokenFile, ReadsRawUint16Bin) {
  const std::vector<uint16_t> v = {10, 20, 30, 40};
  std::ofstream(path("t.bin"), std::ios::binary) << bytes_of(v);
  TokenFile f(path("t.bin"), 100);
  EXPECT_EQ(f.dtype(), DType::U16);
  ASSERT_EQ(f.size(), 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(f.token(i), v[i]);
}

TEST_F(IoTokenFile, OtherExtensionIsAcceptedWhenItHasTheNumpyMagic) {
  write_npy(path("t.tokens"), std::vector<uint16_t>{1, 2}, "<u2");
  TokenFile f(path("t.tokens"), 10);
  EXPECT_EQ(f.size(), 2);
  std::ofstream(path("t.dat"), std::ios::binary) << "abcd";
  EXPECT_ERROR_HAS(TokenFile(path("t.dat"), 10), "t.dat", "unknown format");
}

TEST_F(IoTokenFile, MissingDirectoryOrEmpty) {
  EXPECT_ERROR_HAS(TokenFile(path("nope.npy"), 10), "nope.npy", "cannot open", "No such file");
  EXPECT_ERROR_HAS(TokenFile(dir_, 10), "is a directory");
  std::ofstream(path("empty.bin"), std::ios::binary);
  EXPECT_ERROR_HAS(TokenFile(path("empty.bin"), 10), "empty.bin", "is empty");
}

TEST_F(IoTokenFile, BadMagicAndBadHeaders) {
  std::ofstream(path("magic.npy"), std::ios::binary) << "NOTNUMPY and some more bytes";
  EXPECT_ERROR_HAS(TokenFile(path("magic.npy"), 10), "magic.npy", "magic");
  write_npy_raw(path("garbage.npy"), "{'descr' '<u2'}", bytes_of(std::vector<uint16_t>{1}));
  EXPECT_ERROR_HAS(TokenFile(path("garbage.npy"), 10), "garbage.npy", "bad .npy header");
  write_npy_raw(path("noshape.npy"), "{'descr': '<u2', 'fortran_order': False, }", bytes_of(std::vector<uint16_t>{1}));
  EXPECT_ERROR_HAS(TokenFile(path("noshape.npy"), 10), "no 'shape'");
  // A header length that runs past the end of the file.
  std::ofstream(path("short.npy"), std::ios::binary) << std::string("\x93NUMPY\x01\x00\xff\x00{'descr'", 18);
  EXPECT_ERROR_HAS(TokenFile(path("short.npy"), 10), "short.npy", "truncated .npy header");
  write_npy_raw(path("v9.npy"), "{}", "", 1);
  {
    std::fstream f(path("v9.npy"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(6);
    f.put(9);
  }
  EXPECT_ERROR_HAS(TokenFile(path("v9.npy"), 10), "version 9");
}

TEST_F(IoTokenFile, RejectsWrongShapeDtypeAndOrder) {
  const std::string four = bytes_of(std::vector<uint16_t>{1, 2, 3, 4});
  write_npy_raw(path("2d.npy"), "{'descr': '<u2', 'fortran_order': False, 'shape': (2, 2), }", four);
  EXPECT_ERROR_HAS(TokenFile(path("2d.npy"), 10), "2d.npy", "2-D", "must be 1-D");
  write_npy_raw(path("0d.npy"), "{'descr': '<u2', 'fortran_order': False, 'shape': (), }", four.substr(0, 2));
  EXPECT_ERROR_HAS(TokenFile(path("0d.npy"), 10), "0-D");
  write_npy_raw(path("f4.npy"), "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", four);
  EXPECT_ERROR_HAS(TokenFile(path("f4.npy"), 10), "f4.npy", "unsupported dtype '<f4'",
                   "uint16, uint32, int32 or int64");
  write_npy_raw(path("be.npy"), "{'descr': '>u2', 'fortran_order': False, 'shape': (4,), }", four);
  EXPECT_ERROR_HAS(TokenFile(path("be.npy"), 10), "big-endian");
  write_npy_raw(path("fo.npy"), "{'descr': '<u2', 'fortran_order': True, 'shape': (4,), }", four);
  EXPECT_ERROR_HAS(TokenFile(path("fo.npy"), 10), "fo.npy", "Fortran");
}

TEST_F(IoTokenFile, TruncatedOrPaddedData) {
  const std::string four = bytes_of(std::vector<uint16_t>{1, 2, 3, 4});
  write_npy_raw(path("trunc.npy"), "{'descr': '<u2', 'fortran_order': False, 'shape': (5,), }", four);
  EXPECT_ERROR_HAS(TokenFile(path("trunc.npy"), 10), "trunc.npy", "truncated", "5 tokens", "8 bytes");
  write_npy_raw(path("long.npy"), "{'descr': '<u2', 'fortran_order': False, 'shape': (3,), }", four);
  EXPECT_ERROR_HAS(TokenFile(path("long.npy"), 10), "2 unexpected bytes");
  std::ofstream(path("odd.bin"), std::ios::binary) << "abc";
  EXPECT_ERROR_HAS(TokenFile(path("odd.bin"), 10), "odd.bin", "3 bytes", "not a whole number of 2-byte tokens",
                   "truncated");
}

TEST_F(IoTokenFile, TokenIdsOutsideTheVocabularyNamePositionAndValue) {
  write_npy(path("big.npy"), std::vector<uint16_t>{1, 2, 3, 10000, 5}, "<u2");
  EXPECT_ERROR_HAS(TokenFile(path("big.npy"), 10000), "big.npy", "token id 10000 at position 3",
                   "vocabulary size 10000");
  EXPECT_NO_THROW(TokenFile(path("big.npy"), 10001));
  write_npy(path("neg.npy"), std::vector<int32_t>{4, -1}, "<i4");
  EXPECT_ERROR_HAS(TokenFile(path("neg.npy"), 10), "token id -1 at position 1", "negative");
  write_npy(path("neg64.npy"), std::vector<int64_t>{int64_t{1} << 40}, "<i8");
  EXPECT_ERROR_HAS(TokenFile(path("neg64.npy"), 10), "token id 1099511627776 at position 0");
}

// llm.c's .bin: 256 int32 of header (magic, version, count), then the tokens.
std::string llmc_bin(int32_t magic, int32_t version, int32_t count, const std::string& tokens) {
  std::vector<int32_t> header(256, 0);
  header[0] = magic;
  header[1] = version;
  header[2] = count;
  return bytes_of(header) + tokens;
}

TEST_F(IoTokenFile, ReadsUint32NpyForVocabulariesAbove65535) {
  const std::vector<uint32_t> v = {0, 65536, 128255, 7};
  write_npy(path("u32.npy"), v, "<u4");
  TokenFile f(path("u32.npy"), 128256);
  EXPECT_EQ(f.dtype(), DType::U32);
  ASSERT_EQ(f.size(), 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(f.token(i), int64_t(v[i]));
  EXPECT_ERROR_HAS(TokenFile(path("u32.npy"), 128255), "token id 128255 at position 2");
}

TEST_F(IoTokenFile, ReadsLlmcHeaderedBinFiles) {
  const std::vector<uint16_t> g = {50256, 1, 2, 3, 4};
  std::ofstream(path("gpt2.bin"), std::ios::binary) << llmc_bin(20240520, 1, 5, bytes_of(g));
  TokenFile a(path("gpt2.bin"), 50257);
  EXPECT_EQ(a.dtype(), DType::U16);
  ASSERT_EQ(a.size(), 5);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(a.token(i), g[i]);
  const std::vector<uint32_t> l = {128000, 9, 128255};
  std::ofstream(path("llama.bin"), std::ios::binary) << llmc_bin(20240801, 7, 3, bytes_of(l));
  TokenFile b(path("llama.bin"), 128256);
  EXPECT_EQ(b.dtype(), DType::U32);
  ASSERT_EQ(b.size(), 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(b.token(i), int64_t(l[i]));
  std::ofstream(path("v3.bin"), std::ios::binary) << llmc_bin(20240520, 3, 5, bytes_of(g));
  EXPECT_ERROR_HAS(TokenFile(path("v3.bin"), 50257), "v3.bin", "llm.c", "version 3", "version 1");
  std::ofstream(path("count.bin"), std::ios::binary) << llmc_bin(20240520, 1, 9, bytes_of(g));
  EXPECT_ERROR_HAS(TokenFile(path("count.bin"), 50257), "count.bin", "promises 9 tokens but 5 follow");
}

// The format comes from the content first (data/README.md, "Token formats"): a magic decides,
// whatever the name; only a file with no magic and a name ending in .bin is raw tokens.
TEST_F(IoTokenFile, FormatIsRecognisedByContentBeforeName) {
  const std::vector<uint16_t> ids = {7, 8, 9, 10, 11};
  write_npy(path("npy.bin"), ids, "<u2");  // a .npy renamed: not its header bytes as tokens
  TokenFile npy(path("npy.bin"), 65536);
  ASSERT_EQ(npy.size(), 5);
  EXPECT_EQ(npy.token(0), 7);
  const std::string llmc = llmc_bin(20240520, 1, 5, bytes_of(ids));
  for (const char* name : {"gpt2.dat", "gpt2.npy", "gpt2.tokens"}) {
    std::ofstream(path(name), std::ios::binary) << llmc;
    TokenFile f(path(name), 50257);
    ASSERT_EQ(f.size(), 5) << name;
    EXPECT_EQ(f.token(4), 11) << name;
  }
  // llm.c's magic in a file too short for its header: refused, not read as 200 raw tokens.
  std::ofstream(path("short.bin"), std::ios::binary) << llmc.substr(0, 400);
  EXPECT_ERROR_HAS(TokenFile(path("short.bin"), 65536), "short.bin", "llm.c", "400 bytes", "1024-byte header");
  std::ofstream(path("magic_only.bin"), std::ios::binary) << llmc.substr(0, 4);
  EXPECT_ERROR_HAS(TokenFile(path("magic_only.bin"), 65536), "magic_only.bin", "1024-byte header");
  // No magic: raw tokens for .bin only.
  std::ofstream(path("raw.bin"), std::ios::binary) << bytes_of(ids);
  EXPECT_EQ(TokenFile(path("raw.bin"), 100).size(), 5);
  std::ofstream(path("raw.npy"), std::ios::binary) << bytes_of(ids);
  EXPECT_ERROR_HAS(TokenFile(path("raw.npy"), 100), "raw.npy", "magic");
}

TEST_F(IoTokenFile, HeaderlessBinIsUint16UnlessToldUint32AndPlainUint32IsRefusedAsUint16) {
  std::vector<uint32_t> ids(20000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = uint32_t(1 + i % 9000);
  std::ofstream(path("raw32.bin"), std::ios::binary) << bytes_of(ids);
  TokenFile f(path("raw32.bin"), 9001, BinTokens::U32);
  EXPECT_EQ(f.dtype(), DType::U32);
  ASSERT_EQ(f.size(), 20000);
  EXPECT_EQ(f.token(19999), int64_t(ids[19999]));
  // Read as uint16 it would be 40 000 tokens, every second one 0.
  EXPECT_ERROR_HAS(TokenFile(path("raw32.bin"), 9001), "raw32.bin", "every second token is 0", "--bin-dtype uint32");
  EXPECT_EQ(bin_tokens_from_name("uint32"), BinTokens::U32);
  EXPECT_ERROR_HAS(bin_tokens_from_name("int8"), "--bin-dtype", "int8");
  std::ofstream(path("odd32.bin"), std::ios::binary) << "abcdef";
  EXPECT_ERROR_HAS(TokenFile(path("odd32.bin"), 10, BinTokens::U32), "6 bytes", "4-byte tokens");
}

// A FIFO would block open() until a writer came; a device would never end: both are refused
// at once, by kind. (This test hangs on the code before the check: CTest's timeout ends it.)
TEST_F(IoTokenFile, PathsThatAreNotRegularFilesAreRefusedAtOnceByKind) {
  ASSERT_EQ(::mkfifo(path("pipe.bin").c_str(), 0600), 0);
  EXPECT_ERROR_HAS(TokenFile(path("pipe.bin"), 10), "pipe.bin", "FIFO", "regular file");
  EXPECT_ERROR_HAS(TokenFile("/dev/zero", 10), "/dev/zero", "character device");
  EXPECT_ERROR_HAS(TokenFile(dir_, 10), "a directory");
}

// Another process truncating or rewriting the file under a run: reads and the sampler's check
// before each step fail naming the file, where a memory map would have raised SIGBUS.
TEST_F(IoTokenFile, AFileChangedAfterOpeningIsAnErrorNamingIt) {
  const std::vector<uint16_t> ids(4096, 7);
  write_npy(path("t.npy"), ids, "<u2");
  TokenFile f(path("t.npy"), 10);
  std::vector<int32_t> out(16);
  f.read(4000, 16, out.data());
  EXPECT_EQ(out[0], 7);
  ASSERT_EQ(::truncate(path("t.npy").c_str(), 1024), 0);
  EXPECT_ERROR_HAS(f.read(4000, 16, out.data()), "t.npy", "changed while training", "now 1024 bytes");
  EXPECT_ERROR_HAS(f.check_unchanged(), "t.npy", "changed while training");

  write_npy(path("u.npy"), ids, "<u2");
  TokenFile g(path("u.npy"), 10);
  g.check_unchanged();
  const struct timespec later[2] = {{0, UTIME_OMIT}, {1, 0}};  // the same size, another time
  ASSERT_EQ(::utimensat(AT_FDCWD, path("u.npy").c_str(), later, 0), 0);
  EXPECT_ERROR_HAS(g.check_unchanged(), "u.npy", "changed while training", "modification time");
}

// ---- sampler ----------------------------------------------------------------------------

class IoSampler : public IoTokenFile {
 protected:
  void SetUp() override {
    IoTokenFile::SetUp();
    const auto ids = test::random_ids(n_, 1000, 7);
    tokens_.assign(ids.begin(), ids.end());
    std::vector<uint16_t> u(ids.begin(), ids.end());
    write_npy(path("data.npy"), u, "<u2");
    file_ = std::make_unique<TokenFile>(path("data.npy"), 1000);
  }
  SamplerConfig config(Sampling s, int rank = 0, int world = 1) const {
    SamplerConfig c;
    c.global_batch = 4;
    c.context_length = 16;
    c.sampling = s;
    c.seed = 1234;
    c.rank = rank;
    c.world = world;
    return c;
  }
  // Every row must be a real window of the file: inputs at s, targets at s + 1.
  void expect_windows(const TokenBatch& b, const BatchSampler& s, int64_t step) const {
    const auto& c = s.config();
    ASSERT_EQ(b.rows, c.global_batch / c.world);
    ASSERT_EQ(b.cols, c.context_length);
    for (int64_t r = 0; r < b.rows; ++r) {
      const int64_t start = s.window_start(step, c.rank * b.rows + r);
      ASSERT_GE(start, 0);
      ASSERT_LE(start + c.context_length, n_ - 1);
      for (int64_t t = 0; t < b.cols; ++t) {
        EXPECT_EQ(b.inputs[r * b.cols + t], tokens_[start + t]);
        EXPECT_EQ(b.targets[r * b.cols + t], tokens_[start + t + 1]);
      }
    }
  }
  const int64_t n_ = 1000;
  std::vector<int32_t> tokens_;
  std::unique_ptr<TokenFile> file_;
};

TEST_F(IoSampler, SequentialWalksConsecutiveWindowsAndWraps) {
  BatchSampler s(*file_, config(Sampling::Sequential));
  const int64_t B = 4, T = 16;
  for (int64_t step : {0, 1, 2, 15, 16, 100}) {
    for (int64_t j = 0; j < B; ++j) EXPECT_EQ(s.window_start(step, j), ((step * B + j) * T) % (n_ - T));
    expect_windows(s.batch(step), s, step);
  }
  // Step 1's first window continues exactly where step 0's last one ended.
  EXPECT_EQ(s.window_start(1, 0), s.window_start(0, 3) + T);
}

TEST_F(IoSampler, RandomIsAFunctionOfSeedAndStep) {
  BatchSampler a(*file_, config(Sampling::Random));
  BatchSampler b(*file_, config(Sampling::Random));  // "resumed": a fresh sampler
  SamplerConfig other = config(Sampling::Random);
  other.seed = 99;
  BatchSampler c(*file_, other);
  int differ_step = 0, differ_seed = 0;
  for (int64_t step = 0; step < 20; ++step) {
    const TokenBatch x = a.batch(step), y = b.batch(step);
    EXPECT_EQ(x.inputs, y.inputs);
    EXPECT_EQ(x.targets, y.targets);
    expect_windows(x, a, step);
    differ_step += a.batch(step + 1).inputs != x.inputs;
    differ_seed += c.batch(step).inputs != x.inputs;
  }
  EXPECT_EQ(differ_step, 20);
  EXPECT_EQ(differ_seed, 20);
}

TEST_F(IoSampler, RandomStartsCoverTheWholeValidRange) {
  // n = T + 3 leaves exactly three valid starts: 0, 1, 2; every one must be drawn.
  write_npy(path("tiny.npy"), std::vector<uint16_t>(19, 1), "<u2");
  TokenFile tiny(path("tiny.npy"), 10);
  BatchSampler s(tiny, config(Sampling::Random));
  std::map<int64_t, int> seen;
  for (int64_t step = 0; step < 300; ++step)
    for (int64_t j = 0; j < 4; ++j) ++seen[s.window_start(step, j)];
  ASSERT_EQ(seen.size(), 3u);
  for (const auto& [start, count] : seen) {
    EXPECT_GE(start, 0);
    EXPECT_LE(start, 2);
    EXPECT_GT(count, 300) << "start " << start << " drawn " << count << " of 1200 times";
  }
}

TEST_F(IoSampler, RanksTakeContiguousSlicesOfTheGlobalBatch) {
  for (Sampling mode : {Sampling::Random, Sampling::Sequential}) {
    BatchSampler whole(*file_, config(mode));
    BatchSampler r0(*file_, config(mode, 0, 2)), r1(*file_, config(mode, 1, 2));
    EXPECT_EQ(r0.local_batch(), 2);
    for (int64_t step : {0, 3, 7}) {
      const TokenBatch g = whole.batch(step), a = r0.batch(step), b = r1.batch(step);
      std::vector<int32_t> joined = a.inputs, joined_t = a.targets;
      joined.insert(joined.end(), b.inputs.begin(), b.inputs.end());
      joined_t.insert(joined_t.end(), b.targets.begin(), b.targets.end());
      EXPECT_EQ(joined, g.inputs) << sampling_name(mode) << " step " << step;
      EXPECT_EQ(joined_t, g.targets);
      expect_windows(b, r1, step);
    }
  }
}

TEST_F(IoSampler, RejectsBadConfigurations) {
  SamplerConfig c = config(Sampling::Random, 0, 3);
  EXPECT_ERROR_HAS(BatchSampler(*file_, c), "--batch-size 4 is not divisible by the number of ranks (3)");
  c = config(Sampling::Random);
  c.context_length = n_;
  EXPECT_ERROR_HAS(BatchSampler(*file_, c), "data.npy", "has 1000 tokens", "needs more than 1000");
  c.context_length = std::numeric_limits<int64_t>::max();  // T + 1 would overflow: still refused
  EXPECT_ERROR_HAS(BatchSampler(*file_, c), "has 1000 tokens", "needs more than 9223372036854775807");
  c.context_length = n_;
  c.context_length = n_ - 1;  // exactly T + 1 tokens: one window
  BatchSampler one(*file_, c);
  EXPECT_EQ(one.window_start(5, 2), 0);
  c = config(Sampling::Random);
  c.global_batch = 0;
  EXPECT_ERROR_HAS(BatchSampler(*file_, c), "--batch-size must be positive");
  EXPECT_ERROR_HAS(sampling_from_name("shuffled"), "random or sequential", "shuffled");
  EXPECT_EQ(sampling_from_name("sequential"), Sampling::Sequential);
}

}  // namespace
}  // namespace pt::io

namespace pt::io {
namespace {

// The shipped sample file is what `paratrain train` reads with no arguments.
TEST(IoSampleData, ShippedTokensLoadWithTheDefaultVocabulary) {
  TokenFile f(test::source_path("data/sample_tokens.npy"), 10000);
  EXPECT_EQ(f.dtype(), DType::U16);
  EXPECT_EQ(f.size(), 966156);
  EXPECT_EQ(f.token(f.size() - 1), 0);  // <|endoftext|>
  SamplerConfig c;
  c.global_batch = 8;
  c.context_length = 1024;
  BatchSampler s(f, c);
  const TokenBatch b = s.batch(0);
  EXPECT_EQ(b.inputs.size(), 8u * 1024u);
}

}  // namespace
}  // namespace pt::io
