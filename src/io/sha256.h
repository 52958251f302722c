#pragma once
// SHA-256 through OpenSSL's libcrypto: the checksums of token shards that prepare_data.py writes
// into its manifest (Python's hashlib), verified here and listed in the run record.
#include <cstddef>
#include <string>

namespace pt::io {

// The digest of `bytes` bytes at `data`, as 64 lowercase hex digits.
std::string sha256_hex(const void* data, size_t bytes);

}  // namespace pt::io
