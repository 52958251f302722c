#include "io/safetensors.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace pt::io {

namespace {

size_t entry_bytes(const SafetensorsEntry& e) {
  size_t n = safetensors_dtype_size(e.dtype);
  PT_CHECK(n > 0, "safetensors: tensor '" + e.name + "' has dtype '" + e.dtype + "'; this writer knows F32 and BF16");
  for (const int64_t d : e.shape) {
    PT_CHECK(d >= 0, "safetensors: tensor '" + e.name + "' has a negative dimension");
    n *= static_cast<size_t>(d);
  }
  return n;
}

}  // namespace

size_t safetensors_dtype_size(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "BF16") return 2;
  return 0;
}

std::string safetensors_header(const std::vector<SafetensorsEntry>& entries,
                               const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t offset = 0;
  for (const SafetensorsEntry& e : entries) {
    PT_CHECK(!header.contains(e.name) && e.name != "__metadata__",
             "safetensors: tensor name '" + e.name + "' is given twice or reserved");
    const size_t bytes = entry_bytes(e);
    header[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string json = header.dump();
  json.append((8 - (8 + json.size()) % 8) % 8, ' ');  // the data start at a multiple of 8
  std::string out(8, '\0');
  const uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[size_t(i)] = static_cast<char>((n >> (8 * i)) & 0xff);  // little-endian
  return out + json;
}

SafetensorsWriter::SafetensorsWriter(const std::string& path, std::vector<SafetensorsEntry> entries,
                                     const std::map<std::string, std::string>& metadata)
    : path_(path), entries_(std::move(entries)) {
  const std::string header = safetensors_header(entries_, metadata);
  file_ = std::fopen(path.c_str(), "wb");
  PT_CHECK(file_ != nullptr, "cannot create '" + path + "': " + std::strerror(errno));
  PT_CHECK(std::fwrite(header.data(), 1, header.size(), file_) == header.size(),
           "cannot write '" + path + "': " + std::strerror(errno));
}

SafetensorsWriter::~SafetensorsWriter() {
  if (file_) std::fclose(file_);
}

void SafetensorsWriter::write_next(const void* bytes, size_t size) {
  PT_CHECK(file_ != nullptr && next_ < entries_.size(), "safetensors '" + path_ + "': more tensors than declared");
  const SafetensorsEntry& e = entries_[next_++];
  PT_CHECK(size == entry_bytes(e), "safetensors '" + path_ + "': tensor '" + e.name + "' has " + std::to_string(size) +
                                       " bytes, its header says " + std::to_string(entry_bytes(e)));
  PT_CHECK(std::fwrite(bytes, 1, size, file_) == size, "cannot write '" + path_ + "': " + std::strerror(errno));
}

void SafetensorsWriter::close() {
  PT_CHECK(file_ != nullptr, "safetensors '" + path_ + "': closed twice");
  PT_CHECK(next_ == entries_.size(), "safetensors '" + path_ + "': " + std::to_string(entries_.size() - next_) +
                                         " declared tensors were not written");
  const bool flushed = std::fflush(file_) == 0 && fsync(fileno(file_)) == 0;
  const int err = errno;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  PT_CHECK(flushed && closed, "cannot write '" + path_ + "': " + std::strerror(flushed ? errno : err));
}

}  // namespace pt::io
