// Host conversion to fp16/bf16 bits. The CUDA headers' host __float2half_rn is a software routine of
// several ns a value; an entry of 32 heads x 16K tokens x D 128 holds 200 M values, converted for every
// entry a tuner visits. x86-64 CPUs with F16C convert eight values an instruction with the same rounding.
#include "engine/half_bits.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace sparge::cuda {
namespace {

uint32_t bitsOf(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

bool nonFinite(uint32_t u) {
  return (u & 0x7f800000u) == 0x7f800000u;
}

uint16_t halfBits(float x) {
  const __half h = __float2half_rn(x);
  uint16_t b;
  std::memcpy(&b, &h, sizeof b);
  return b;
}

// Round to nearest even by adding 0x7fff plus the kept part's lowest bit; a NaN keeps its sign and top
// payload bits with the quiet bit set (rounding could carry it into infinity).
uint16_t bfloatBits(uint32_t u) {
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x0040u);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

bool toHalfScalar(const float* x, size_t n, uint16_t* out) {
  bool bad = false;
  for (size_t i = 0; i < n; ++i) {
    bad |= nonFinite(bitsOf(x[i]));
    out[i] = halfBits(x[i]);
  }
  return bad;
}

bool toBfloat(const float* x, size_t n, uint16_t* out) {
  uint32_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t u = bitsOf(x[i]);
    bad |= uint32_t(nonFinite(u));
    out[i] = bfloatBits(u);
  }
  return bad != 0;
}

#if defined(__x86_64__)
// Eight values at a time; a value is non-finite when its magnitude is not below infinity (NaN compares
// unordered, which counts too).
__attribute__((target("avx,f16c"))) bool toHalfF16c(const float* x, size_t n, uint16_t* out) {
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 inf = _mm256_set1_ps(__builtin_inff());
  __m256 bad = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    bad = _mm256_or_ps(bad, _mm256_cmp_ps(_mm256_and_ps(v, magnitude), inf, _CMP_NLT_UQ));
    const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  const bool tailBad = toHalfScalar(x + i, n - i, out + i);
  return _mm256_movemask_ps(bad) != 0 || tailBad;
}

bool hasF16c() {
  static const bool yes = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  return yes;
}
#endif

}  // namespace

bool toHalfBits(const float* x, size_t n, uint16_t* out, ElemType t) {
  if (t == ElemType::BF16) return toBfloat(x, n, out);
#if defined(__x86_64__)
  if (hasF16c()) return toHalfF16c(x, n, out);
#endif
  return toHalfScalar(x, n, out);
}

}  // namespace sparge::cuda
