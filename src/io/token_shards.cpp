#include "io/token_shards.h"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/input_file.h"
#include "io/sha256.h"

namespace pt::io {

namespace fs = std::filesystem;

namespace {

bool is_glob(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

// The spec's matches, in byte order of their names (glob(3)'s own order follows the locale).
std::vector<std::string> glob_matches(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &g);
  std::vector<std::string> out;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  PT_CHECK(rc == 0 || rc == GLOB_NOMATCH, "token data '" + pattern + "': the glob cannot be read");
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> directory_shards(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.' ||
        !(fs::path(name).extension() == ".bin" || fs::path(name).extension() == ".npy"))
      continue;
    out.push_back(it->path().string());
  }
  PT_CHECK(!ec, "token data directory '" + dir + "': cannot list: " + ec.message());
  PT_CHECK(!out.empty(), "token data directory '" + dir + "' holds no .bin or .npy file (and no manifest.json)");
  std::sort(out.begin(), out.end());
  return out;
}

nlohmann::json read_manifest(const std::string& file) {
  const std::string what = "token manifest '" + file + "'";
  try {
    return nlohmann::json::parse(read_text_file(file, what));
  } catch (const nlohmann::json::exception& e) {
    PT_FAIL(what + ": not JSON (" + e.what() + ")");
  }
}

// The tokenizer file a manifest names, resolved beside it, or "".
std::string tokenizer_beside(const nlohmann::json& j, const std::string& file) {
  if (!j.contains("tokenizer") || !j["tokenizer"].is_object() || !j["tokenizer"].contains("file") ||
      !j["tokenizer"]["file"].is_string())
    return "";
  return (fs::path(file).parent_path() / j["tokenizer"]["file"].get<std::string>()).string();
}
}  // namespace

std::vector<std::string> data_specs(const std::string& value) {
  std::error_code ec;
  if (value.find(',') == std::string::npos || fs::exists(value, ec)) return {value};
  std::vector<std::string> out;
  for (size_t at = 0;;) {
    const size_t comma = value.find(',', at);
    out.push_back(value.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) return out;
    at = comma + 1;
  }
}

TokenShards::TokenShards(const std::vector<std::string>& specs, int64_t vocab_size, BinTokens headerless,
                         ShardSplit split)
    : vocab_(vocab_size) {
  PT_CHECK(!specs.empty(), "no token data named");
  for (const std::string& s : specs) name_ += (name_.empty() ? "" : ",") + s;
  std::vector<std::string> paths;
  std::vector<Expected> expected;
  for (const std::string& s : specs) add_spec(s, split, paths, expected);

  std::set<std::string> seen;
  for (size_t i = 0; i < paths.size(); ++i) {
    std::error_code ec;
    const std::string key = fs::weakly_canonical(paths[i], ec).string();
    PT_CHECK(seen.insert(ec ? paths[i] : key).second,
             "token shard '" + paths[i] + "' is named twice in the token data '" + name_ + "'");
    auto f = std::make_unique<TokenFile>(paths[i], vocab_size, headerless, TokenAccess::Mapped, true);
    const std::string what = "token shard '" + paths[i] + "'";
    PT_CHECK(f->size() > 0, what + " holds no tokens");
    const Expected& e = expected[i];
    if (e.tokens >= 0)
      PT_CHECK(f->size() == e.tokens, what + " holds " + std::to_string(f->size()) + " tokens; its manifest '" +
                                          e.manifest + "' says " + std::to_string(e.tokens));
    if (!e.sha256.empty())
      PT_CHECK(f->sha256() == e.sha256, what + ": its sha256 " + f->sha256() + " is not the " + e.sha256 +
                                            " its manifest '" + e.manifest + "' lists (the file changed since)");
    offsets_.push_back(offsets_.back() + f->size());
    files_.push_back(std::move(f));
  }
  if (files_.size() == 1) {
    identity_ = files_[0]->identity();
  } else {
    std::string all;
    for (const auto& f : files_) all += std::to_string(f->size()) + " " + f->sha256() + "\n";
    identity_ = std::to_string(files_.size()) + " shards, " + std::to_string(size()) + " tokens, sha256 " +
                sha256_hex(all.data(), all.size());
  }
}

void TokenShards::add_spec(const std::string& spec, ShardSplit split, std::vector<std::string>& paths,
                           std::vector<Expected>& expected) {
  PT_CHECK(!spec.empty(), "token data: an empty path");
  std::error_code ec;
  const fs::file_status st = fs::status(spec, ec);
  std::vector<std::string> found;
  if (fs::is_directory(st)) {
    const std::string manifest = (fs::path(spec) / "manifest.json").string();
    if (fs::exists(manifest)) return add_manifest(manifest, split, paths, expected);
    found = directory_shards(spec);
  } else if (fs::exists(st)) {
    if (fs::path(spec).extension() == ".json") return add_manifest(spec, split, paths, expected);
    found = {spec};
  } else if (is_glob(spec)) {
    found = glob_matches(spec);
    PT_CHECK(!found.empty(), "token data '" + spec + "': no file matches the glob");
  } else {
    found = {spec};  // TokenFile names the cause (no such file, permission)
  }
  for (const std::string& p : found) {
    paths.push_back(p);
    expected.emplace_back();
  }
}

void TokenShards::add_manifest(const std::string& file, ShardSplit split, std::vector<std::string>& paths,
                               std::vector<Expected>& expected) {
  const std::string what = "token manifest '" + file + "'";
  const nlohmann::json j = read_manifest(file);
  const char* key = split == ShardSplit::Train ? "train" : "val";
  try {
    PT_CHECK(j.is_object() && j.contains(key) && j[key].is_array(), what + ": no \"" + key + "\" list of shards");
    PT_CHECK(!j[key].empty(), what + ": its \"" + key + "\" list is empty");
    if (j.contains("vocab_size")) {
      const int64_t v = j["vocab_size"].get<int64_t>();
      PT_CHECK(v <= vocab_, what + " is for a vocabulary of " + std::to_string(v) + " tokens, more than the model's " +
                                std::to_string(vocab_));
    }
    const fs::path dir = fs::path(file).parent_path();
    for (const auto& s : j[key]) {
      PT_CHECK(s.is_object() && s.contains("file") && s["file"].is_string(),
               what + ": a \"" + key + "\" entry without a \"file\" name");
      const fs::path rel = s["file"].get<std::string>();
      paths.push_back(rel.is_absolute() ? rel.string() : (dir / rel).string());
      Expected e;
      e.manifest = file;
      if (s.contains("tokens")) e.tokens = s["tokens"].get<int64_t>();
      if (s.contains("sha256")) e.sha256 = s["sha256"].get<std::string>();
      expected.push_back(e);
    }
    manifest_ = file;
    eot_id_ = j.contains("eot_id") ? j["eot_id"].get<int64_t>() : -1;
    tokenizer_file_ = tokenizer_beside(j, file);
  } catch (const nlohmann::json::exception& e) {
    PT_FAIL(what + ": a field of the wrong type (" + e.what() + ")");
  }
}

std::string TokenShards::what() const {
  return files_.size() == 1 ? files_[0]->what()
                            : "token data '" + name_ + "' (" + std::to_string(files_.size()) + " shards)";
}

void TokenShards::read(int64_t start, int64_t n, int32_t* out) const {
  PT_CHECK(start >= 0 && n >= 0 && start + n <= size(), what() + ": read of [" + std::to_string(start) + ", " +
                                                            std::to_string(start + n) + ") is outside its " +
                                                            std::to_string(size()) + " tokens");
  // The shard holding `start`, then on through the next ones.
  size_t s = static_cast<size_t>(std::upper_bound(offsets_.begin(), offsets_.end(), start) - offsets_.begin()) - 1;
  while (n > 0) {
    const int64_t local = start - offsets_[s], take = std::min(n, files_[s]->size() - local);
    files_[s]->read(local, take, out);
    out += take;
    start += take;
    n -= take;
    ++s;
  }
}

void TokenShards::check_unchanged() const {
  for (const auto& f : files_) f->check_unchanged();
}

std::vector<ShardInfo> TokenShards::shards() const {
  std::vector<ShardInfo> out;
  for (const auto& f : files_) out.push_back({f->path(), f->size(), f->sha256()});
  return out;
}

std::string manifest_tokenizer(const std::string& value) {
  for (const std::string& spec : data_specs(value)) {
    std::error_code ec;
    std::string file = spec;
    if (fs::is_directory(spec, ec)) file = (fs::path(spec) / "manifest.json").string();
    if (fs::path(file).extension() != ".json" || !fs::is_regular_file(file, ec)) continue;
    return tokenizer_beside(read_manifest(file), file);
  }
  return "";
}

}  // namespace pt::io
