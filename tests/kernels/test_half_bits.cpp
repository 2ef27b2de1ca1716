// The host conversion the CUDA engine uploads entries with (kernels/engine/half_bits.h) against CUDA's own host
// conversions, __float2half_rn and __float2bfloat16_rn: the same bits for every finite value and infinity
// (ties, subnormals, overflow, both signs), NaN stays NaN, and the NaN/Inf report. Runs without a GPU.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "engine/half_bits.h"

namespace sparge::cuda {
namespace {

float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t cudaHalf(float x) {
  const __half h = __float2half_rn(x);
  uint16_t b;
  std::memcpy(&b, &h, sizeof b);
  return b;
}

uint16_t cudaBfloat(float x) {
  const __nv_bfloat16 h = __float2bfloat16_rn(x);
  uint16_t b;
  std::memcpy(&b, &h, sizeof b);
  return b;
}

// Values where rounding is decided: halfway points of fp16 and bf16 (both tie directions), the subnormal
// ranges, the largest finite values and just past them, zeros and infinities; then random bit patterns.
// Lengths not a multiple of 8 exercise the tail after the eight-wide loop.
std::vector<float> hardValues() {
  std::vector<float> v = {0.f,
                          -0.f,
                          1.f,
                          -1.f,
                          65504.f,
                          65519.f,
                          65520.f,
                          -65520.f,
                          1e-8f,
                          -3e-8f,
                          6e-8f,
                          5.9604645e-8f,
                          2.9802322e-8f,
                          2.9802326e-8f,
                          6.1035156e-5f,
                          6.1035153e-5f,
                          std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()};
  for (uint32_t m = 0; m < 64; ++m) {
    v.push_back(fromBits(0x3f800000u | (m << 12) | 0x1000u));  // fp16 ties: the 13 dropped bits are 1000...
    v.push_back(fromBits(0x3f800000u | (m << 16) | 0x8000u));  // bf16 ties
    v.push_back(fromBits(0x33800000u + (m << 17)));            // fp16 subnormal range
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 100003; ++i) {
    const float f = fromBits(uint32_t(rng()));
    if (!std::isnan(f)) v.push_back(f);
  }
  return v;
}

TEST(HalfBits, Fp16EqualsCudaHostConversionBitForBit) {
  const std::vector<float> x = hardValues();
  std::vector<uint16_t> out(x.size());
  EXPECT_TRUE(toHalfBits(x.data(), x.size(), out.data(), ElemType::F16));  // holds ±Inf
  size_t differ = 0;
  for (size_t i = 0; i < x.size(); ++i) differ += out[i] != cudaHalf(x[i]);
  EXPECT_EQ(differ, 0u) << "of " << x.size();
}

TEST(HalfBits, Bf16EqualsCudaHostConversionBitForBit) {
  const std::vector<float> x = hardValues();
  std::vector<uint16_t> out(x.size());
  EXPECT_TRUE(toHalfBits(x.data(), x.size(), out.data(), ElemType::BF16));
  size_t differ = 0;
  for (size_t i = 0; i < x.size(); ++i) differ += out[i] != cudaBfloat(x[i]);
  EXPECT_EQ(differ, 0u) << "of " << x.size();
}

TEST(HalfBits, NanStaysNanAndIsReportedWherever) {
  for (ElemType t : {ElemType::F16, ElemType::BF16})
    for (size_t at : {0, 5, 8, 16, 22}) {  // in the eight-wide part and in the tail
      std::vector<float> x(23, 0.5f);
      x[at] = std::numeric_limits<float>::quiet_NaN();
      std::vector<uint16_t> out(x.size());
      EXPECT_TRUE(toHalfBits(x.data(), x.size(), out.data(), t)) << at;
      const bool isNan = t == ElemType::F16 ? (out[at] & 0x7c00) == 0x7c00 && (out[at] & 0x03ff) != 0
                                            : (out[at] & 0x7f80) == 0x7f80 && (out[at] & 0x007f) != 0;
      EXPECT_TRUE(isNan) << at << ": " << out[at];
    }
}

TEST(HalfBits, FiniteValuesReportNothingEvenWhenTheyRoundToInfinity) {
  std::vector<float> x(37, 70000.f);  // overflows fp16, but the input is finite
  std::vector<uint16_t> out(x.size());
  EXPECT_FALSE(toHalfBits(x.data(), x.size(), out.data(), ElemType::F16));
  EXPECT_EQ(out[36], 0x7c00);
  EXPECT_FALSE(toHalfBits(x.data(), x.size(), out.data(), ElemType::BF16));
  EXPECT_FALSE(toHalfBits(x.data(), 0, out.data(), ElemType::F16));
}

}  // namespace
}  // namespace sparge::cuda
