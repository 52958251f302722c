#include "core/dtype.h"

#include <cmath>

#include "core/error.h"

namespace pt {

namespace {
struct DTypeInfo {
  DType type;
  size_t size;
  const char* name;
};
// One row per DType, in enum order.
constexpr DTypeInfo kInfo[] = {
    {DType::F32, 4, "fp32"},       {DType::F64, 8, "fp64"},       {DType::BF16, 2, "bf16"},  {DType::F16, 2, "fp16"},
    {DType::I32, 4, "int32"},      {DType::I64, 8, "int64"},      {DType::U16, 2, "uint16"}, {DType::U32, 4, "uint32"},
    {DType::F8E4M3, 1, "fp8e4m3"}, {DType::F8E5M2, 1, "fp8e5m2"},
};
}  // namespace

size_t dtype_size(DType t) { return kInfo[static_cast<int>(t)].size; }
const char* dtype_name(DType t) { return kInfo[static_cast<int>(t)].name; }

DType dtype_from_name(const std::string& name) {
  for (const auto& info : kInfo)
    if (name == info.name) return info.type;
  PT_FAIL("unknown element type '" + name + "'");
}

uint16_t float_to_half_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow → inf
  if (absx < 0x38800000u) {                      // subnormal half (or zero): scale and round to nearest even
    const float a = std::fabs(f) * 16777216.0f;  // 2^24: one half subnormal ulp becomes 1
    const float r = std::nearbyint(a);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(r));
  }
  uint32_t mant = absx & 0x7fffffu;
  uint32_t exp = (absx >> 23) - 112;  // rebias 127 → 15
  uint32_t h = (exp << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // round to nearest even
  return static_cast<uint16_t>(sign | h);
}

float half_bits_to_float(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  float f;
  if (exp == 0) {
    f = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -f : f;
  }
  uint32_t x;
  if (exp == 31)
    x = sign | 0x7f800000u | (mant << 13);
  else
    x = sign | ((exp + 112) << 23) | (mant << 13);
  std::memcpy(&f, &x, 4);
  return f;
}

}  // namespace pt
