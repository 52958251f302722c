#include "io/sha256.h"

#include <openssl/evp.h>

#include "core/error.h"

namespace pt::io {

std::string sha256_hex(const void* data, size_t bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  PT_CHECK(EVP_Digest(data, bytes, digest, &len, EVP_sha256(), nullptr) == 1 && len == 32,
           "OpenSSL's SHA-256 (EVP_Digest) failed");
  static const char* kHex = "0123456789abcdef";
  std::string out(2 * len, '0');
  for (unsigned int i = 0; i < len; ++i) {
    out[2 * i] = kHex[digest[i] >> 4];
    out[2 * i + 1] = kHex[digest[i] & 15];
  }
  return out;
}

}  // namespace pt::io
