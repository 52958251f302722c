#pragma once
// FP8 element formats (OCP 8-bit floating point, as Hopper's tensor cores read them): host
// conversions, and whether a GPU has FP8 tensor cores.
//  E4M3: 1 sign, 4 exponent bits (bias 7), 3 mantissa bits; no infinities, S.1111.111 is NaN;
//        largest finite 448, smallest subnormal 2^-9. Forward GEMM operands (weights, activations).
//  E5M2: 1 sign, 5 exponent bits (bias 15), 2 mantissa bits; IEEE-like infinities and NaNs;
//        largest finite 57344, smallest subnormal 2^-16. Gradients (range before precision).
#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/flash_choice.h"

namespace pt {

enum class Fp8Format : uint8_t { E4M3, E5M2 };
// Largest finite magnitudes, for host and device code alike.
constexpr float kFp8E4M3Max = 448.0f, kFp8E5M2Max = 57344.0f;

// The format of DType::F8E4M3 / F8E5M2; throws for any other type. fp8_dtype: the other way.
Fp8Format fp8_format(DType t);
constexpr DType fp8_dtype(Fp8Format f) { return f == Fp8Format::E4M3 ? DType::F8E4M3 : DType::F8E5M2; }
// Largest finite magnitude: 448 (E4M3), 57344 (E5M2). Current scaling maps a tensor's amax here.
float fp8_max(Fp8Format f);

// float → fp8 bits as the "satfinite" conversions (PTX cvt.rn.satfinite, OCP's saturating
// mode) do: round to nearest, ties to even; a magnitude beyond the largest finite one (±inf
// included) becomes ±max, since a scaled tensor's overflow is rounding at its amax, not an
// infinity; NaN becomes the canonical NaN 0x7F; the sign of a zero (and of an underflow to
// zero) is kept.
uint8_t float_to_fp8_bits(float f, Fp8Format fmt);
// fp8 bits → float: exact (every fp8 value is a float); E5M2's infinities stay infinite.
float fp8_bits_to_float(uint8_t bits, Fp8Format fmt);

// Current scaling: the factor that maps amax onto the format's largest value, fp8_max / amax
// rounded once in fp32 (the division the device does), and 1 for amax 0 (an all-zero tensor
// stays zero under any scale, and 1 keeps its inverse finite).
float fp8_scale_from_amax(float amax, Fp8Format fmt);

// FP8 tensor cores: compute capability 8.9 (Ada) and newer (Hopper 9.0, Blackwell 10.x).
// Empty when t has them, else the one-line reason naming the GPU and its compute capability.
std::string fp8_unsupported_reason(const CudaTarget& t);

}  // namespace pt
