// SpargeAttn's quantized numerics on the CPU: INT8 Q/K per tile, FP8 e4m3 and fp16 rounding, FP8 V per
// channel. The semantics are written down in docs/numerics.md; the CUDA engine implements the same ones.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "sparge/core/half.h"
#include "sparge/core/types.h"

namespace sparge::core {

// The nearest FP8 e4m3 value (1 sign, 4 exponent bits with bias 7, 3 mantissa bits, no infinity), as the
// GPU's cvt.rn.satfinite.e4m3x2.f32 gives it: round to nearest, ties to even; |x| >= 448 saturates to ±448
// (±inf too); NaN stays NaN; values below 2^-6 land on the subnormal grid of 2^-9.
inline float roundToE4m3(float x) {
  // Branch-free so that loops over P vectorise; equal to a frexp/nearbyint formulation for every float.
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t sign = bits & 0x80000000u, a = bits & 0x7fffffffu;
  const float mag = std::bit_cast<float>(a);
  const float normal = std::bit_cast<float>((a + 0x7ffffu + ((a >> 20) & 1u)) & 0xfff00000u);
  // 1.5 * 2^23 added and removed rounds to an integer (ties to even) in the default rounding mode.
  const float subnormal = ((mag * 512.0f + 12582912.0f) - 12582912.0f) * (1.0f / 512.0f);
  float r = mag < 0x1p-6f ? subnormal : normal;
  r = r > 448.0f ? 448.0f : r;
  if (!(mag == mag)) return x;  // NaN
  return std::bit_cast<float>(std::bit_cast<uint32_t>(r) | sign);
}

// INT8 code of x for a block scale (upstream's Triton quantizer): t = x / scale in fp32, plus 0.5 away from
// zero, truncated toward zero, clamped to [-128, 127]; NaN gives 0 (the GPU's float-to-int conversion).
inline int8_t quantizeInt8(float x, float scale) {
  float t = x / scale;
  t += t >= 0.0f ? 0.5f : -0.5f;
  t = t != t ? 0.0f : std::trunc(t);
  return int8_t(t < -128.0f ? -128.0f : (t > 127.0f ? 127.0f : t));
}

// Block scale of the INT8 quantizer: amax / 127 + 1e-7 (an all-zero block gets 1e-7).
inline float int8Scale(float amax) {
  return amax / 127.0f + 1e-7f;
}

// Rows [0, n) of x [n, d] quantized in blocks of `blockRows` rows (the last block zero-padded), after
// subtracting `mean` [d] in the input precision when given (K smoothing): x' = round_T(x - mean).
// `codes` holds the INT8 codes as floats [nBlocks * blockRows, d] (products and sums of them are exact in
// fp32 up to D = 1040), `scales` one scale per block.
struct Int8Rows {
  std::vector<float> codes;
  std::vector<float> scales;
};
Int8Rows quantizeRowsInt8(const float* x, int64_t n, int64_t d, int blockRows, const float* mean,
                          DType input);
// The same into `out`, reusing its memory.
void quantizeRowsInt8(const float* x, int64_t n, int64_t d, int blockRows, const float* mean, DType input,
                      Int8Rows& out);

// V as the FP8 paths store it: cast to fp16 (bf16 V too, as upstream does), per channel c the scale
// amax_c / 2.25 and the e4m3 codes round(v · (2.25 / amax_c)) as floats [nPad, dv] (rows >= n are 0).
// An all-zero channel has amax 0 and codes 0 · inf = NaN, exactly as upstream's kernel.
struct Fp8Columns {
  std::vector<float> codes;
  std::vector<float> scales;          // [dv], multiplied into O at the end
  std::vector<int64_t> zeroChannels;  // channels whose amax is 0 (NaN codes: the output channel is NaN)
};
Fp8Columns quantizeColumnsFp8(const float* v, int64_t n, int64_t dv, int64_t nPad);
// The same into `out` (reusing its memory) with the codes' rows `ld` >= dv floats apart (columns past dv 0).
void quantizeColumnsFp8(const float* v, int64_t n, int64_t dv, int64_t nPad, int64_t ld, Fp8Columns& out);

// The SpargeAttn GPU family whose kernel a run imitates, for table headers and reports: "sm80", "sm89" or
// "sm90" when (geometry, numerics) is that family's, "none" for exact numerics, "custom" otherwise (for
// example int8-fp8 with 128x64 tiles on sm90 is not what SpargeAttn runs there).
std::string targetLabel(const Geometry& g, Numerics n);

// x rounded as the deployed kernel stores its inputs: fp16 for float16 and float32 captures (upstream casts
// float32 to float16), bfloat16 for bfloat16 ones.
inline float roundToInput(float x, DType input) {
  return input == DType::BFloat16 ? roundToBf16(x) : roundToHalf(x);
}

}  // namespace sparge::core
