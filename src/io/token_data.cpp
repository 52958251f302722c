#include "io/token_data.h"
#include "core/enum_names.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include "core/error.h"
#include "io/input_file.h"
#include "io/sha256.h"

namespace pt::io {

namespace {

// ---- .npy header: "\x93NUMPY", version, header length, then a Python dict literal like
// {'descr': '<u2', 'fortran_order': False, 'shape': (1000,), }
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
  size_t data_offset = 0;
};

// Just enough of Python's literal syntax for the three keys numpy writes.
class DictParser {
 public:
  DictParser(const std::string& text, const std::string& what) : s_(text), what_(what) {}

  std::map<std::string, std::string> strings;
  std::map<std::string, bool> bools;
  std::map<std::string, std::vector<int64_t>> tuples;

  void parse() {
    expect('{');
    while (true) {
      skip_ws();
      if (peek() == '}') break;
      const std::string key = string_literal();
      expect(':');
      skip_ws();
      const char c = peek();
      if (c == '\'' || c == '"') {
        strings[key] = string_literal();
      } else if (c == '(' || c == '[') {
        tuples[key] = int_tuple();
      } else if (s_.compare(i_, 4, "True") == 0) {
        bools[key] = true;
        i_ += 4;
      } else if (s_.compare(i_, 5, "False") == 0) {
        bools[key] = false;
        i_ += 5;
      } else {
        bad("unexpected value for key '" + key + "'");
      }
      skip_ws();
      if (peek() == ',') ++i_;
    }
  }

 private:
  const std::string& s_;
  const std::string& what_;
  size_t i_ = 0;

  [[noreturn]] void bad(const std::string& msg) const { PT_FAIL(what_ + ": bad .npy header (" + msg + "): " + s_); }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_ws() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  void expect(char c) {
    skip_ws();
    if (peek() != c) bad(std::string("expected '") + c + "'");
    ++i_;
  }
  std::string string_literal() {
    skip_ws();
    const char q = peek();
    if (q != '\'' && q != '"') bad("expected a quoted string");
    const size_t end = s_.find(q, i_ + 1);
    if (end == std::string::npos) bad("unterminated string");
    std::string out = s_.substr(i_ + 1, end - i_ - 1);
    i_ = end + 1;
    return out;
  }
  std::vector<int64_t> int_tuple() {
    const char close = peek() == '(' ? ')' : ']';
    ++i_;
    std::vector<int64_t> out;
    while (true) {
      skip_ws();
      if (peek() == close) {
        ++i_;
        return out;
      }
      if (!std::isdigit(static_cast<unsigned char>(peek()))) bad("shape must be a tuple of integers");
      int64_t v = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        if (v > (INT64_MAX - 9) / 10) bad("dimension too large");
        v = v * 10 + (s_[i_++] - '0');
      }
      if (peek() == 'L') ++i_;  // Python 2 longs
      out.push_back(v);
      skip_ws();
      if (peek() == ',') ++i_;
    }
  }
};

uint32_t le_u32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

constexpr unsigned char kNpyMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

bool has_npy_magic(const unsigned char* p, size_t bytes) { return bytes >= 6 && std::memcmp(p, kNpyMagic, 6) == 0; }

NpyHeader parse_npy(const unsigned char* p, size_t bytes, const std::string& what) {
  PT_CHECK(has_npy_magic(p, bytes), what + ": not a .npy file (the NumPy magic string \\x93NUMPY is missing)");
  PT_CHECK(bytes >= 10, what + ": truncated .npy header");
  const int major = p[6];
  PT_CHECK(major >= 1 && major <= 3, what + ": unsupported .npy format version " + std::to_string(major));
  // Version 1 stores the header length in 2 bytes, versions 2 and 3 in 4.
  const size_t prefix = major == 1 ? 10 : 12;
  PT_CHECK(bytes >= prefix, what + ": truncated .npy header");
  const size_t hlen = major == 1 ? (static_cast<size_t>(p[8]) | static_cast<size_t>(p[9]) << 8) : le_u32(p + 8);
  PT_CHECK(bytes >= prefix + hlen, what + ": truncated .npy header (the file ends inside it)");
  const std::string text(reinterpret_cast<const char*>(p + prefix), hlen);
  DictParser d(text, what);
  d.parse();
  PT_CHECK(d.strings.count("descr"), what + ": .npy header has no 'descr'");
  PT_CHECK(d.bools.count("fortran_order"), what + ": .npy header has no 'fortran_order'");
  PT_CHECK(d.tuples.count("shape"), what + ": .npy header has no 'shape'");
  return {d.strings["descr"], d.bools["fortran_order"], d.tuples["shape"], prefix + hlen};
}

DType dtype_of_descr(const std::string& descr, const std::string& what) {
  if (descr == "<u2") return DType::U16;
  if (descr == "<u4") return DType::U32;
  if (descr == "<i4") return DType::I32;
  if (descr == "<i8") return DType::I64;
  PT_CHECK(descr.empty() || descr[0] != '>',
           what + ": big-endian dtype '" + descr + "' is not supported (save it as little-endian)");
  PT_FAIL(what + ": unsupported dtype '" + descr + "' (token files hold uint16, uint32, int32 or int64)");
}

// llm.c's token files (dev/data/data_common.py): 256 little-endian int32, of which [0] is the
// magic, [1] the version and [2] the token count; the tokens follow.
struct LlmcFormat {
  int32_t magic, version;
  DType tokens;
  const char* model;
};
constexpr LlmcFormat kLlmcFormats[] = {{20240520, 1, DType::U16, "gpt-2"}, {20240801, 7, DType::U32, "llama-3"}};
constexpr size_t kLlmcHeaderBytes = 256 * 4;

// The llm.c format whose magic the file starts with, whatever its length (a file too short for the
// header is refused as such, not read as raw tokens).
const LlmcFormat* llmc_format_of_magic(const unsigned char* p, size_t bytes) {
  if (bytes < 4) return nullptr;
  for (const LlmcFormat& f : kLlmcFormats)
    if (static_cast<int32_t>(le_u32(p)) == f.magic) return &f;
  return nullptr;
}

template <typename T>
T load(const unsigned char* p, int64_t i) {
  T v;
  std::memcpy(&v, p + i * static_cast<int64_t>(sizeof(T)), sizeof(T));  // any alignment
  return v;
}

template <typename T>
void check_range(const unsigned char* p, int64_t n, int64_t vocab, const std::string& what) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = static_cast<int64_t>(load<T>(p, i));
    if (v < 0 || v >= vocab)
      PT_FAIL(what + ": token id " + std::to_string(v) + " at position " + std::to_string(i) +
              (v < 0 ? " is negative" : " is not below the vocabulary size " + std::to_string(vocab)));
  }
}

template <typename T>
void convert(const unsigned char* p, int64_t start, int64_t n, int32_t* out) {
  for (int64_t k = 0; k < n; ++k) out[k] = static_cast<int32_t>(load<T>(p, start + k));
}

// splitmix64: a full-period 64-bit mixer, enough to key one draw per (seed, step, row).
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The file's identity (TokenFile::identity) from its bytes.
std::string hash_identity(const unsigned char* bytes, size_t size, int64_t count, DType dtype) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  auto mix = [&](size_t from, size_t n) {
    for (size_t i = from; i < from + n && i < size; ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  };
  constexpr size_t kPiece = size_t(64) << 10;
  mix(0, kPiece);
  mix(size / 2, kPiece);
  mix(size > kPiece ? size - kPiece : 0, kPiece);
  char buf[128];
  std::snprintf(buf, sizeof buf, "%zu bytes, %lld %s tokens, hash %016llx", size, static_cast<long long>(count),
                dtype_name(dtype), static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace

namespace {
constexpr EnumName<BinTokens> kBinTokens[] = {{BinTokens::U16, "uint16"}, {BinTokens::U32, "uint32"}};
}

BinTokens bin_tokens_from_name(const std::string& name) { return enum_from_name(kBinTokens, name, "--bin-dtype"); }
const char* bin_tokens_name(BinTokens b) { return enum_name(kBinTokens, b); }

TokenFile::TokenFile(const std::string& path, int64_t vocab_size, BinTokens headerless, TokenAccess access, bool sha256)
    : path_(path), vocab_(vocab_size) {
  const std::string what = "token file '" + path + "'";
  PT_CHECK(vocab_size > 0, what + ": vocabulary size must be positive");
  // Refused before it is opened (io/input_file.h); O_NONBLOCK and the fstat below cover a path
  // swapped since.
  require_regular_file(path, what, "a token file");
  struct stat st {};
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK);
  PT_CHECK(fd >= 0, what + ": cannot open: " + std::strerror(errno));
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    PT_FAIL(what + ": is not a regular file (it changed while being opened)");
  }
  map_bytes_ = static_cast<size_t>(st.st_size);
  if (map_bytes_ == 0) {
    ::close(fd);
    PT_FAIL(what + ": is empty");
  }
  opened_size_ = st.st_size;
  opened_mtime_ = st.st_mtim;
  fd_ = fd;  // kept for reading batches (TokenFile::read)
  map_ = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map_ == MAP_FAILED) {
    const int map_errno = errno;
    map_ = nullptr;
    ::close(fd_);
    PT_FAIL(what + ": cannot memory-map: " + std::strerror(map_errno));
  }
  try {
    const auto* bytes = static_cast<const unsigned char*>(map_);
    // The format by content first (data/README.md, "Token formats"): the NumPy magic, then an
    // llm.c magic, whatever the name; a name ending in .npy must have the NumPy magic; only a file
    // with neither magic and a name ending in .bin is headerless raw tokens.
    const bool npy_magic = has_npy_magic(bytes, map_bytes_);
    const LlmcFormat* llmc = npy_magic ? nullptr : llmc_format_of_magic(bytes, map_bytes_);
    const bool npy = npy_magic || (!llmc && std::filesystem::path(path).extension() ==
                                                ".npy");  // the latter: refused, magic missing
    // A whole number of elements of `dtype_` from `offset` on, `count_` of them.
    auto take_raw = [&](size_t offset, const std::string& format) {
      const size_t have = map_bytes_ - offset, elem = dtype_size(dtype_);
      PT_CHECK(have % elem == 0, what + ": " + std::to_string(have) + " bytes of " + format +
                                     " are not a whole number of " + std::to_string(elem) +
                                     "-byte tokens, so the file is truncated");
      count_ = static_cast<int64_t>(have / elem);
      data_ = bytes + offset;
    };
    if (npy) {
      const NpyHeader h = parse_npy(bytes, map_bytes_, what);
      PT_CHECK(!h.fortran_order, what + ": Fortran-order arrays are not supported (save a C-order array)");
      PT_CHECK(h.shape.size() == 1,
               what + ": array is " + std::to_string(h.shape.size()) + "-D; a token file must be 1-D");
      dtype_ = dtype_of_descr(h.descr, what);
      count_ = h.shape[0];
      const size_t have = map_bytes_ - h.data_offset;
      PT_CHECK(static_cast<size_t>(count_) <= have / dtype_size(dtype_),
               what + ": truncated: the header promises " + std::to_string(count_) + " tokens of " +
                   std::to_string(dtype_size(dtype_)) + " bytes but only " + std::to_string(have) +
                   " bytes of data follow");
      const size_t need = static_cast<size_t>(count_) * dtype_size(dtype_);
      PT_CHECK(have == need,
               what + ": " + std::to_string(have - need) + " unexpected bytes after the array the header describes");
      data_ = bytes + h.data_offset;
    } else if (const LlmcFormat* f = llmc) {
      PT_CHECK(map_bytes_ >= kLlmcHeaderBytes, what + ": starts with llm.c's magic " + std::to_string(f->magic) + " (" +
                                                   f->model + " tokens) but is " + std::to_string(map_bytes_) +
                                                   " bytes, shorter than its " + std::to_string(kLlmcHeaderBytes) +
                                                   "-byte header: a truncated file");
      const int32_t version = static_cast<int32_t>(le_u32(bytes + 4)),
                    promised = static_cast<int32_t>(le_u32(bytes + 8));
      PT_CHECK(version == f->version, what + ": llm.c token file (magic " + std::to_string(f->magic) + ", " + f->model +
                                          ") of version " + std::to_string(version) + "; version " +
                                          std::to_string(f->version) + " is the one known");
      dtype_ = f->tokens;
      take_raw(kLlmcHeaderBytes, "tokens after the llm.c header");
      PT_CHECK(promised >= 0 && count_ == promised, what + ": the llm.c header promises " + std::to_string(promised) +
                                                        " tokens but " + std::to_string(count_) + " follow");
    } else {
      PT_CHECK(std::filesystem::path(path).extension() == ".bin",
               what + ": unknown format: expected a .npy file (NumPy magic) or a "
                      ".bin file (llm.c's header, or raw uint16 / uint32 tokens)");
      dtype_ = headerless == BinTokens::U32 ? DType::U32 : DType::U16;
      take_raw(0, std::string("raw ") + bin_tokens_name(headerless) + " tokens (a headerless .bin; --bin-dtype)");
      if (dtype_ == DType::U16 && count_ >= 16) {
        // uint32 ids below 65536 read as uint16 come out as id, 0, id, 0, ...: refuse that
        // rather than train on twice as many tokens, half of them 0.
        bool odd_all_zero = true, even_any = false;
        for (int64_t i = 0; i < count_ && odd_all_zero; ++i) {
          const uint16_t v = load<uint16_t>(data_, i);
          if (i % 2)
            odd_all_zero = v == 0;
          else
            even_any = even_any || v != 0;
        }
        PT_CHECK(!(odd_all_zero && even_any),
                 what + ": read as uint16, every second token is 0: the file holds uint32 tokens. Pass "
                        "--bin-dtype uint32 (or save it as .npy, which records its type)");
      }
    }
    switch (dtype_) {
      case DType::U16: check_range<uint16_t>(data_, count_, vocab_, what); break;
      case DType::U32: check_range<uint32_t>(data_, count_, vocab_, what); break;
      case DType::I32: check_range<int32_t>(data_, count_, vocab_, what); break;
      default: check_range<int64_t>(data_, count_, vocab_, what); break;
    }
    identity_ = hash_identity(static_cast<const unsigned char*>(map_), map_bytes_, count_, dtype_);
    if (sha256) sha256_ = sha256_hex(map_, map_bytes_);
    data_offset_ = static_cast<size_t>(data_ - static_cast<const unsigned char*>(map_));
  } catch (...) {
    ::munmap(map_, map_bytes_);
    ::close(fd_);
    throw;
  }
  if (access == TokenAccess::Mapped) {  // read from the map from now on; no descriptor held
    ::close(fd_);
    fd_ = -1;
    return;
  }
  // Checked: from here batches are read with pread, which reports a file another process
  // truncated as a short read, where a mapping would kill the process with SIGBUS.
  ::munmap(map_, map_bytes_);
  map_ = nullptr;
  data_ = nullptr;
}

TokenFile::~TokenFile() {
  if (map_) ::munmap(map_, map_bytes_);
  if (fd_ >= 0) ::close(fd_);
}

void TokenFile::check_unchanged() const {
  struct stat st {};
  // A mapped file has no descriptor: its path is checked (a file replaced under it is a change).
  PT_CHECK((fd_ >= 0 ? ::fstat(fd_, &st) : ::stat(path_.c_str(), &st)) == 0,
           "token file '" + path_ + "': " + std::strerror(errno));
  PT_CHECK(st.st_size == opened_size_, "token file '" + path_ + "' changed while training: it is now " +
                                           std::to_string(st.st_size) + " bytes, " + std::to_string(opened_size_) +
                                           " when the run opened it (truncated or rewritten by another process)");
  PT_CHECK(st.st_mtim.tv_sec == opened_mtime_.tv_sec && st.st_mtim.tv_nsec == opened_mtime_.tv_nsec,
           "token file '" + path_ + "' changed while training: another process wrote to it (its modification " +
               "time is not the one it had when the run opened it)");
}

void TokenFile::read(int64_t start, int64_t n, int32_t* out) const {
  PT_CHECK(start >= 0 && n >= 0 && start + n <= count_, "token file '" + path_ + "': read of [" +
                                                            std::to_string(start) + ", " + std::to_string(start + n) +
                                                            ") is outside its " + std::to_string(count_) + " tokens");
  if (data_) {  // TokenAccess::Mapped
    switch (dtype_) {
      case DType::U16: convert<uint16_t>(data_, start, n, out); break;
      case DType::U32: convert<uint32_t>(data_, start, n, out); break;
      case DType::I32: convert<int32_t>(data_, start, n, out); break;
      default: convert<int64_t>(data_, start, n, out); break;
    }
    return;
  }
  const size_t elem = dtype_size(dtype_), bytes = static_cast<size_t>(n) * elem;
  std::vector<unsigned char> buf(bytes);
  const off_t at = static_cast<off_t>(data_offset_ + static_cast<size_t>(start) * elem);
  for (size_t done = 0; done < bytes;) {
    const ssize_t got = ::pread(fd_, buf.data() + done, bytes - done, at + static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    PT_CHECK(got >= 0, "token file '" + path_ + "': cannot read: " + std::strerror(errno));
    if (got == 0) check_unchanged();  // names the change; a file of the same size would be a bug here
    PT_CHECK(got > 0, "token file '" + path_ + "' ended early while training (changed by another process)");
    done += static_cast<size_t>(got);
  }
  switch (dtype_) {
    case DType::U16: convert<uint16_t>(buf.data(), 0, n, out); break;
    case DType::U32: convert<uint32_t>(buf.data(), 0, n, out); break;
    case DType::I32: convert<int32_t>(buf.data(), 0, n, out); break;
    default: convert<int64_t>(buf.data(), 0, n, out); break;
  }
}

int64_t TokenFile::token(int64_t i) const {
  int32_t v = 0;
  read(i, 1, &v);
  return v;
}

namespace {
constexpr EnumName<Sampling> kSamplings[] = {{Sampling::Random, "random"}, {Sampling::Sequential, "sequential"}};
}

Sampling sampling_from_name(const std::string& name) { return enum_from_name(kSamplings, name, "--sampling"); }
const char* sampling_name(Sampling s) { return enum_name(kSamplings, s); }

BatchSampler::BatchSampler(const TokenSource& data, const SamplerConfig& cfg) : data_(data), cfg_(cfg) {
  PT_CHECK(cfg.global_batch > 0, "--batch-size must be positive");
  PT_CHECK(cfg.context_length > 0, "--context-length must be positive");
  PT_CHECK(cfg.world >= 1 && cfg.rank >= 0 && cfg.rank < cfg.world, "sampler: bad rank/world");
  PT_CHECK(cfg.global_batch % cfg.world == 0, "--batch-size " + std::to_string(cfg.global_batch) +
                                                  " is not divisible by the number of ranks (" +
                                                  std::to_string(cfg.world) + "); the global batch is split evenly");
  PT_CHECK(data.size() > cfg.context_length,  // (not size >= T + 1: T may be as large as int64_t goes)
           data.what() + " has " + std::to_string(data.size()) + " tokens; context length " +
               std::to_string(cfg.context_length) + " needs more than " + std::to_string(cfg.context_length));
}

int64_t BatchSampler::window_start(int64_t step, int64_t j) const {
  PT_CHECK(step >= 0 && j >= 0 && j < cfg_.global_batch, "sampler: window index out of range");
  const int64_t T = cfg_.context_length;
  const uint64_t starts = static_cast<uint64_t>(data_.size() - T);  // valid starts: [0, n − T − 1]
  if (cfg_.sampling == Sampling::Sequential) {
    const unsigned __int128 pos =
        (static_cast<unsigned __int128>(step) * cfg_.global_batch + static_cast<uint64_t>(j)) * T;
    return static_cast<int64_t>(pos % starts);
  }
  const uint64_t key = mix64(mix64(mix64(cfg_.seed) ^ static_cast<uint64_t>(step)) ^ static_cast<uint64_t>(j));
  // Multiply-shift maps 64 random bits onto [0, starts) (bias ≤ starts / 2^64).
  return static_cast<int64_t>((static_cast<unsigned __int128>(key) * starts) >> 64);
}

void BatchSampler::fill(int64_t step, int32_t* inputs, int32_t* targets) const {
  data_.check_unchanged();
  const int64_t T = cfg_.context_length, rows = local_batch();
  std::vector<int32_t> window(static_cast<size_t>(T + 1));
  for (int64_t r = 0; r < rows; ++r) {
    data_.read(window_start(step, cfg_.rank * rows + r), T + 1, window.data());
    std::copy(window.begin(), window.end() - 1, inputs + r * T);
    std::copy(window.begin() + 1, window.end(), targets + r * T);
  }
}

TokenBatch BatchSampler::batch(int64_t step) const {
  TokenBatch b;
  b.rows = local_batch();
  b.cols = cfg_.context_length;
  b.inputs.resize(static_cast<size_t>(b.rows * b.cols));
  b.targets.resize(b.inputs.size());
  fill(step, b.inputs.data(), b.targets.data());
  return b;
}

}  // namespace pt::io

namespace pt::io {

namespace {
SamplerConfig validation_config(int64_t global_batch, int64_t context_length, int rank, int world) {
  SamplerConfig c;
  c.global_batch = global_batch;
  c.context_length = context_length;
  c.sampling = Sampling::Sequential;
  c.rank = rank;
  c.world = world;
  return c;
}
}  // namespace

ValidationBatches::ValidationBatches(const TokenSource& data, int64_t global_batch, int64_t context_length,
                                     int64_t max_tokens, int rank, int world)
    : sampler_(data, validation_config(global_batch, context_length, rank, world)) {
  PT_CHECK(max_tokens >= 0, "--eval-tokens must not be negative");
  const int64_t T = context_length, B = global_batch;
  // Window k needs tokens up to k·T + T, so the source holds (n − 1) / T windows; batch i is
  // step i of the sequential sampler, whose windows then never wrap.
  const int64_t windows = (data.size() - 1) / T;
  const int64_t budget = max_tokens > 0 ? max_tokens / T : windows;
  count_ = std::min(windows, budget) / B;
  const std::string batch = std::to_string(B) + " × " + std::to_string(T);
  PT_CHECK(windows >= B, "validation data " + data.what() + " has " + std::to_string(data.size()) +
                             " tokens, less than one batch of " + batch + " (it needs " + std::to_string(B * T + 1) +
                             ")");
  PT_CHECK(count_ > 0, "--eval-tokens " + std::to_string(max_tokens) + " is less than one validation batch of " +
                           batch + " = " + std::to_string(B * T) + " tokens");
}

void ValidationBatches::check(int64_t i) const {
  PT_CHECK(i >= 0 && i < count_,
           "validation batch " + std::to_string(i) + " is outside [0, " + std::to_string(count_) + ")");
}

int64_t ValidationBatches::window_start(int64_t i, int64_t j) const {
  check(i);
  return sampler_.window_start(i, j);
}

void ValidationBatches::fill(int64_t i, int32_t* inputs, int32_t* targets) const {
  check(i);
  sampler_.fill(i, inputs, targets);
}

TokenBatch ValidationBatches::batch(int64_t i) const {
  check(i);
  return sampler_.batch(i);
}

}  // namespace pt::io
