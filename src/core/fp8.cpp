#include "core/fp8.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace pt {

namespace {
// The fields of a format (OCP FP8 specification, table 1).
struct Fp8Layout {
  int mant_bits;  // stored mantissa bits
  int bias;       // exponent bias
  int min_exp;    // exponent of the smallest normal value: 1 − bias
  float max;      // largest finite magnitude
  uint8_t max_code;
};
constexpr Fp8Layout kE4M3{3, 7, -6, kFp8E4M3Max, 0x7e};
constexpr Fp8Layout kE5M2{2, 15, -14, kFp8E5M2Max, 0x7b};
const Fp8Layout& layout(Fp8Format f) { return f == Fp8Format::E4M3 ? kE4M3 : kE5M2; }
constexpr uint8_t kCanonicalNaN = 0x7f;  // a NaN in both formats
}  // namespace

Fp8Format fp8_format(DType t) {
  if (t == DType::F8E4M3) return Fp8Format::E4M3;
  if (t == DType::F8E5M2) return Fp8Format::E5M2;
  PT_FAIL(std::string(dtype_name(t)) + " is not an FP8 type");
}

float fp8_max(Fp8Format f) { return layout(f).max; }

uint8_t float_to_fp8_bits(float f, Fp8Format fmt) {
  if (std::isnan(f)) return kCanonicalNaN;
  const Fp8Layout& l = layout(fmt);
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  const double a = std::fabs(static_cast<double>(f));
  // Rounding is monotone, so everything at or above max (±inf too) saturates to it.
  if (a >= l.max) return sign | l.max_code;
  if (a == 0.0) return sign;
  // The quantum (spacing of representable values) at a's binade; subnormals share the smallest
  // normal binade's. a / q is exact (q is a power of two) and nearbyint rounds it to nearest even
  // in the default rounding mode.
  int e = 0;
  std::frexp(a, &e);  // a = m · 2^e, m in [0.5, 1): a's binade exponent is e − 1
  const int binade = std::max(e - 1, l.min_exp);
  const double q = std::ldexp(1.0, binade - l.mant_bits);
  const double steps = std::nearbyint(a / q);  // integer multiple of q; may carry to the next binade
  const double v = steps * q;
  if (v >= l.max) return sign | l.max_code;
  if (v == 0.0) return sign;  // underflow (at most half the smallest subnormal, ties to even = 0)
  std::frexp(v, &e);
  const int vexp = e - 1;
  if (vexp < l.min_exp)  // subnormal: exponent field 0, mantissa = v / smallest subnormal
    return sign | static_cast<uint8_t>(std::ldexp(v, -(l.min_exp - l.mant_bits)));
  const auto mant = static_cast<uint8_t>(std::ldexp(v, l.mant_bits - vexp) - std::ldexp(1.0, l.mant_bits));
  const auto exp_field = static_cast<uint8_t>(vexp + l.bias);
  return sign | static_cast<uint8_t>(exp_field << l.mant_bits) | mant;
}

float fp8_bits_to_float(uint8_t bits, Fp8Format fmt) {
  const Fp8Layout& l = layout(fmt);
  const bool negative = (bits & 0x80) != 0;
  const int mant_mask = (1 << l.mant_bits) - 1;
  const int exp_field = (bits & 0x7f) >> l.mant_bits, mant = bits & mant_mask;
  const int exp_all_ones = 0x7f >> l.mant_bits;
  float v = 0.0f;
  if (fmt == Fp8Format::E4M3 && exp_field == exp_all_ones && mant == mant_mask)
    v = std::numeric_limits<float>::quiet_NaN();  // E4M3 gives only S.1111.111 up, for range
  else if (fmt == Fp8Format::E5M2 && exp_field == exp_all_ones)
    v = mant == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  else if (exp_field == 0)
    v = std::ldexp(static_cast<float>(mant), l.min_exp - l.mant_bits);
  else
    v = std::ldexp(1.0f + std::ldexp(static_cast<float>(mant), -l.mant_bits), exp_field - l.bias);
  return negative ? -v : v;
}

float fp8_scale_from_amax(float amax, Fp8Format fmt) { return amax > 0.0f ? fp8_max(fmt) / amax : 1.0f; }

std::string fp8_unsupported_reason(const CudaTarget& t) {
  if (t.cc_major > 8 || (t.cc_major == 8 && t.cc_minor >= 9)) return "";
  return (t.name.empty() ? std::string("this GPU") : t.name) + " (compute capability " + std::to_string(t.cc_major) +
         "." + std::to_string(t.cc_minor) +
         ") has no FP8 tensor cores: FP8 GEMMs need compute capability 8.9 or newer (Ada, Hopper, Blackwell)";
}

}  // namespace pt
