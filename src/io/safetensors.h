#pragma once
// Writes the safetensors format (https://huggingface.co/docs/safetensors): an 8-byte
// little-endian header length N, N bytes of JSON (padded with spaces to a multiple of 8, so the
// data starts aligned) naming each tensor's dtype, shape and [begin, end) byte range in the data
// that follows, then the tensors' bytes back to back. Tensors are streamed one at a time: the
// header depends on their shapes alone.
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace pt::io {

struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // "F32" or "BF16"
  std::vector<int64_t> shape;
};

// Bytes per element of a safetensors dtype name this writer knows ("F32" 4, "BF16" 2), else 0.
size_t safetensors_dtype_size(const std::string& dtype);

// The file's first bytes: the length word, then the JSON header (with `metadata` as
// "__metadata__" when not empty), padded. Tensors' data follow in the order of `entries`.
std::string safetensors_header(const std::vector<SafetensorsEntry>& entries,
                               const std::map<std::string, std::string>& metadata);

// Writes `path` (an ordinary file: the caller makes it appear atomically). The constructor
// writes the header; write_next takes each entry's bytes in order; close checks that every
// entry came and flushes. Errors name `path`.
class SafetensorsWriter {
 public:
  SafetensorsWriter(const std::string& path, std::vector<SafetensorsEntry> entries,
                    const std::map<std::string, std::string>& metadata);
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  void write_next(const void* bytes, size_t size);
  void close();

 private:
  std::string path_;
  std::vector<SafetensorsEntry> entries_;
  size_t next_ = 0;
  std::FILE* file_ = nullptr;
};

}  // namespace pt::io
