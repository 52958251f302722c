#pragma once
// Element types, their sizes and names, and host-side bf16/fp16 conversions.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace pt {

// F8E4M3 / F8E5M2: OCP 8-bit floats, storage only (GEMM operands; conversions in core/fp8.h).
enum class DType : uint8_t { F32, F64, BF16, F16, I32, I64, U16, U32, F8E4M3, F8E5M2 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);
DType dtype_from_name(const std::string& name);  // "fp32", "bf16", ...; throws on unknown
inline bool is_fp8(DType t) { return t == DType::F8E4M3 || t == DType::F8E5M2; }
inline bool is_floating(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::BF16 || t == DType::F16 || is_fp8(t);
}

// Host bf16: the top 16 bits of an IEEE float, rounded to nearest even (NaN kept quiet).
inline uint16_t float_to_bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_bits_to_float(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// Round a float to the nearest bf16 value and back: what a bf16 store then load does.
inline float round_to_bf16(float f) { return bf16_bits_to_float(float_to_bf16_bits(f)); }

// Host IEEE half conversions (used by the accumulation demo and fp16 tensors on the CPU).
uint16_t float_to_half_bits(float f);
float half_bits_to_float(uint16_t h);

}  // namespace pt
