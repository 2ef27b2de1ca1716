// float <-> IEEE half (fp16) and float <-> bfloat16 conversions, round-to-nearest-even.
#pragma once

#include <bit>
#include <cstdint>

namespace sparge::core {

// fp16 bits -> float. Exact for every input (subnormals, ±0, ±inf; NaN payloads are kept). Masks instead of
// branches, so that loops converting whole heads vectorise.
inline float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t magnitude = h & 0x7fffu;  // exponent and mantissa
  // Normal: the exponent rebiased from 15 to 127 (+112); inf / NaN (exponent 31) on to 255 (+112 more).
  const uint32_t special = 0u - static_cast<uint32_t>(magnitude >= 0x7c00u);
  const uint32_t normal = (magnitude << 13) + (112u << 23) + (special & (112u << 23));
  // Zero or subnormal (exponent 0): mant * 2^-24 is exact in float (mant < 2^10).
  const uint32_t subnormal =
      std::bit_cast<uint32_t>(static_cast<float>(static_cast<int32_t>(magnitude)) * 0x1p-24f);
  const uint32_t small = 0u - static_cast<uint32_t>(magnitude < 0x400u);
  return std::bit_cast<float>((subnormal & small) | (normal & ~small) | sign);
}

// float -> fp16 bits, round-to-nearest-even; overflow gives ±inf, NaN stays NaN (quiet).
inline uint16_t floatToHalf(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) {
    if (a == 0x7f800000u) return sign | 0x7c00u;
    return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  }
  // 65520 is the halfway point between 65504 (odd mantissa) and 2^16: ties go to the even one, inf.
  if (a >= 0x477ff000u) return sign | 0x7c00u;
  if (a < 0x38800000u) {  // below 2^-14: the result is subnormal (or zero)
    const uint32_t e = a >> 23;
    if (e < 102) return sign;  // < 2^-25 rounds to zero (2^-25 itself is a tie, handled below)
    const uint32_t m = (a & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // value = m * 2^(e-150); result unit is 2^-24
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (r & 1u))) ++r;  // may carry into the smallest normal: fine
    return static_cast<uint16_t>(sign | r);
  }
  const uint32_t r = a - 0x38000000u;  // rebias the exponent from 127 to 15
  uint32_t h = r >> 13;
  const uint32_t rem = r & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

inline float bf16ToFloat(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

// float -> bfloat16 bits, round-to-nearest-even; NaN stays NaN (quiet), overflow gives ±inf.
inline uint16_t floatToBf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);
  const uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

// The float nearest to `f` that fp16 / bfloat16 can represent (what storing it would give).
// roundToHalf equals halfToFloat(floatToHalf(f)) for every float (checked over all 2^32 inputs) but has no
// branches, so loops over it vectorise: it rounds the mantissa to 10 bits in the normal range and to the
// fixed 2^-24 step below 2^-14, and overflows to infinity above 65504.
inline float roundToHalf(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = x & 0x80000000u, a = x & 0x7fffffffu;
  const float mag = std::bit_cast<float>(a);
  const float normal = std::bit_cast<float>((a + 0xfffu + ((a >> 13) & 1u)) & 0xffffe000u);
  // 1.5 * 2^23 added and removed rounds to an integer (ties to even) in the default rounding mode.
  const float subnormal = ((mag * 0x1p24f + 12582912.0f) - 12582912.0f) * 0x1p-24f;
  float r = mag < 0x1p-14f ? subnormal : normal;
  r = r > 65504.0f ? std::bit_cast<float>(0x7f800000u) : r;
  if (!(mag == mag)) return std::bit_cast<float>(sign | 0x7fc00000u | (a & 0x007fe000u));  // quiet NaN
  return std::bit_cast<float>(std::bit_cast<uint32_t>(r) | sign);
}
inline float roundToBf16(float f) {
  return bf16ToFloat(floatToBf16(f));
}

}  // namespace sparge::core
