// One instruction-set variant of the Stage-2 inner loops (core/src/tile_kernels.h). This file is compiled
// three times (core/CMakeLists.txt) with -march=x86-64-v4, x86-64-v3 and the baseline; SPARGE_TILE_LANES is
// the vector width in floats, SPARGE_TILE_ROWS the rows of a product's register block and SPARGE_TILE_VARIANT
// the namespace that keeps the variants apart at link time. The loops are written with GCC's vector
// extensions, so the same source serves every width.
#include "tile_kernels.h"

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "sparge/core/half.h"
#include "sparge/core/quant.h"

namespace sparge::core::tile::SPARGE_TILE_VARIANT {
namespace {

constexpr int W = SPARGE_TILE_LANES;
constexpr int kRows = SPARGE_TILE_ROWS;
constexpr int kFp16Step = 16;  // keys per m16n8k16 step of the sm80 P·V
constexpr float kInf = std::numeric_limits<float>::infinity();

typedef float F __attribute__((vector_size(W * sizeof(float))));
typedef int32_t I __attribute__((vector_size(W * sizeof(float))));
typedef uint32_t U __attribute__((vector_size(W * sizeof(float))));
typedef float H __attribute__((vector_size(W / 2 * sizeof(float))));
typedef double D __attribute__((vector_size(W / 2 * sizeof(double))));

[[gnu::always_inline]] inline F load(const float* p) {
  F v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
[[gnu::always_inline]] inline void store(float* p, F v) {
  std::memcpy(p, &v, sizeof v);
}
[[gnu::always_inline]] inline F splat(float x) {
  return x - F{};  // x - 0 is x for every x (unlike x + 0 for -0), so this compiles to one broadcast
}
[[gnu::always_inline]] inline D loadWide(const float* p) {
  H h;
  std::memcpy(&h, p, sizeof h);
  return __builtin_convertvector(h, D);
}
[[gnu::always_inline]] inline float sumOf(F v) {
  float s = 0.0f;
  for (int k = 0; k < W; ++k) s += v[k];
  return s;
}
[[gnu::always_inline]] inline double sumOf(D v) {
  double s = 0.0;
  for (int k = 0; k < W / 2; ++k) s += v[k];
  return s;
}
[[gnu::always_inline]] inline float maxOf(F v) {
  float m = -kInf;
  for (int k = 0; k < W; ++k) m = v[k] > m ? v[k] : m;
  return m;
}

// 2^x as core's scalar exp2 of the engine (degree-6 polynomial on [-0.5, 0.5], relative error ~2e-7),
// exactly 0 below -126 (masked logits are -inf).
[[gnu::always_inline]] inline F exp2v(F x) {
  const F lowest = splat(-126.0f), magic = splat(12582912.0f);  // 1.5 * 2^23 rounds to an integer
  const F xc = x < lowest ? lowest : x;
  const F n = (xc + magic) - magic;
  const F f = xc - n;
  F p = splat(1.5403530393381606e-4f);
  p = p * f + 1.3333558146428443e-3f;
  p = p * f + 9.6181291076284772e-3f;
  p = p * f + 5.5504108664821580e-2f;
  p = p * f + 2.4022650695910071e-1f;
  p = p * f + 6.9314718055994531e-1f;
  p = p * f + 1.0f;
  const F scale = (F)((__builtin_convertvector(n, I) + 127) << 23);
  return x < lowest ? F{} : p * scale;
}

// roundToHalf (half.h) on every lane: the F16C conversions where the instruction set has them (round to
// nearest even, overflow to inf, NaN quieted with its upper payload: the same bits), else the same in bits.
[[gnu::always_inline]] inline F roundHalf(F x) {
#if SPARGE_TILE_LANES == 16 && defined(__AVX512F__)
  return (F)_mm512_cvtph_ps(_mm512_cvtps_ph((__m512)x, _MM_FROUND_TO_NEAREST_INT));
#elif SPARGE_TILE_LANES == 8 && defined(__F16C__)
  return (F)_mm256_cvtph_ps(_mm256_cvtps_ph((__m256)x, _MM_FROUND_TO_NEAREST_INT));
#else
  const U bits = (U)x, sign = bits & 0x80000000u, a = bits & 0x7fffffffu;
  const F mag = (F)a;
  const F normal = (F)((a + 0xfffu + ((a >> 13) & 1u)) & 0xffffe000u);
  const F magic = splat(12582912.0f);
  const F subnormal = ((mag * 0x1p24f + magic) - magic) * 0x1p-24f;
  F r = mag < 0x1p-14f ? subnormal : normal;
  r = r > 65504.0f ? splat(kInf) : r;
  const U rounded = (U)r | sign, quiet = sign | 0x7fc00000u | (a & 0x007fe000u);
  return (F)(mag == mag ? rounded : quiet);
#endif
}

// roundToBf16 (half.h) on every lane.
[[gnu::always_inline]] inline F roundBf16(F x) {
  const U bits = (U)x;
  const U rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  const U quiet = (bits & 0xffff0000u) | 0x00400000u;
  return (F)(x == x ? rounded : quiet);
}

// roundToE4m3 (quant.h) on every lane.
[[gnu::always_inline]] inline F roundE4m3(F x) {
  const U bits = (U)x, sign = bits & 0x80000000u, a = bits & 0x7fffffffu;
  const F mag = (F)a;
  const F normal = (F)((a + 0x7ffffu + ((a >> 20) & 1u)) & 0xfff00000u);
  const F magic = splat(12582912.0f);
  const F subnormal = ((mag * 512.0f + magic) - magic) * (1.0f / 512.0f);
  F r = mag < 0x1p-6f ? subnormal : normal;
  r = r > 448.0f ? splat(448.0f) : r;
  return mag == mag ? (F)((U)r | sign) : x;
}

// roundE4m3 for P (>= 0 or NaN): adding and removing 2^(e + 20), e the exponent of p (at least -6, the
// subnormal step), rounds p to 3 mantissa bits, ties to even, in the FP unit; p is capped first so that the
// power stays finite, and the result saturates at 448.
[[gnu::always_inline]] inline F roundE4m3Positive(F p) {
  p = p > 512.0f ? splat(512.0f) : p;
  F big = (F)(((U)p & 0x7f800000u) + (20u << 23));
  big = big < 0x1p14f ? splat(0x1p14f) : big;  // NaN's exponent wraps negative: 2^14, and NaN stays NaN
  const F r = (p + big) - big;
  return r > 448.0f ? splat(448.0f) : r;
}

[[gnu::always_inline]] inline F roundInput(F x, DType input) {
  return input == DType::BFloat16 ? roundBf16(x) : roundHalf(x);
}

// ---- Products -------------------------------------------------------------------------------------------

// c[r][0, 2W) of R rows: the sums stay in registers (R x 2 vectors) over the whole depth.
template <int R, bool kFp16Steps>
[[gnu::always_inline]] inline void panel(int depth, const float* a, int lda, const float* b, int ldb,
                                         float factor, float* c, int ldc) {
  F acc[R][2];
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = F{};
  const int step = kFp16Steps ? kFp16Step : depth;
  for (int k0 = 0; k0 < depth; k0 += step) {
    for (int k = k0; k < k0 + step; ++k) {
      const F b0 = load(b + size_t(k) * ldb), b1 = load(b + size_t(k) * ldb + W);
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) {
        const F x = splat(a[size_t(i) * lda + k]);
        acc[i][0] += x * b0;
        acc[i][1] += x * b1;
      }
    }
    if constexpr (kFp16Steps) {
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) {
        acc[i][0] = roundHalf(acc[i][0]);
        acc[i][1] = roundHalf(acc[i][1]);
      }
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
    store(c + size_t(i) * ldc, acc[i][0] * factor);
    store(c + size_t(i) * ldc + W, acc[i][1] * factor);
  }
}

// The last rows (fewer than kRows) of a column panel.
template <int R, bool kFp16Steps>
[[gnu::always_inline]] inline void lastRows(int rows, int depth, const float* a, int lda, const float* b,
                                            int ldb, float factor, float* c, int ldc) {
  if constexpr (R > 0) {
    if (rows == R) return panel<R, kFp16Steps>(depth, a, lda, b, ldb, factor, c, ldc);
    lastRows<R - 1, kFp16Steps>(rows, depth, a, lda, b, ldb, factor, c, ldc);
  }
}

template <bool kFp16Steps>
void multiplyPanels(int rows, int cols, int depth, const float* a, int lda, const float* b, int ldb,
                    float factor, float* c, int ldc) {
  for (int j = 0; j < cols; j += 2 * W) {
    int r = 0;
    for (; r + kRows <= rows; r += kRows)
      panel<kRows, kFp16Steps>(depth, a + size_t(r) * lda, lda, b + j, ldb, factor, c + size_t(r) * ldc + j,
                               ldc);
    lastRows<kRows - 1, kFp16Steps>(rows - r, depth, a + size_t(r) * lda, lda, b + j, ldb, factor,
                                    c + size_t(r) * ldc + j, ldc);
  }
}

// Σ over the two int16 halves of every 32-bit lane of a · b, in int32 (pmaddwd): two INT8 products a lane.
[[gnu::always_inline]] inline I madd(I a, I b) {
#if SPARGE_TILE_LANES == 16 && defined(__AVX512BW__)
  return (I)_mm512_madd_epi16((__m512i)a, (__m512i)b);
#elif SPARGE_TILE_LANES == 8 && defined(__AVX2__)
  return (I)_mm256_madd_epi16((__m256i)a, (__m256i)b);
#elif SPARGE_TILE_LANES == 4
  return (I)_mm_madd_epi16((__m128i)a, (__m128i)b);
#else  // a width this instruction set has no pmaddwd for (the tests build one): the same sums, spelled out
  return ((a << 16) >> 16) * ((b << 16) >> 16) + (a >> 16) * (b >> 16);
#endif
}

[[gnu::always_inline]] inline I loadInts(const int32_t* p) {
  I v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// panel() for INT8 codes stored as int16 pairs: exact int32 sums, converted to float at the end.
template <int R>
[[gnu::always_inline]] inline void pairPanel(int pairs, const int32_t* a, int lda, const int32_t* b, int ldb,
                                             float factor, float* c, int ldc) {
  I acc[R][2];
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = I{};
  for (int k = 0; k < pairs; ++k) {
    const I b0 = loadInts(b + size_t(k) * ldb), b1 = loadInts(b + size_t(k) * ldb + W);
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const I x = a[size_t(i) * lda + k] - I{};
      acc[i][0] += madd(x, b0);
      acc[i][1] += madd(x, b1);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
    store(c + size_t(i) * ldc, __builtin_convertvector(acc[i][0], F) * factor);
    store(c + size_t(i) * ldc + W, __builtin_convertvector(acc[i][1], F) * factor);
  }
}

template <int R>
[[gnu::always_inline]] inline void lastPairRows(int rows, int pairs, const int32_t* a, int lda,
                                                const int32_t* b, int ldb, float factor, float* c, int ldc) {
  if constexpr (R > 0) {
    if (rows == R) return pairPanel<R>(pairs, a, lda, b, ldb, factor, c, ldc);
    lastPairRows<R - 1>(rows, pairs, a, lda, b, ldb, factor, c, ldc);
  }
}

void multiplyInt8(int rows, int cols, int pairs, const int32_t* a, int lda, const int32_t* b, int ldb,
                  float factor, float* c, int ldc) {
  for (int j = 0; j < cols; j += 2 * W) {
    int r = 0;
    for (; r + kRows <= rows; r += kRows)
      pairPanel<kRows>(pairs, a + size_t(r) * lda, lda, b + j, ldb, factor, c + size_t(r) * ldc + j, ldc);
    lastPairRows<kRows - 1>(rows - r, pairs, a + size_t(r) * lda, lda, b + j, ldb, factor,
                            c + size_t(r) * ldc + j, ldc);
  }
}

void multiply(int rows, int cols, int depth, const float* a, int lda, const float* b, int ldb, float factor,
              bool fp16Steps, float* c, int ldc) {
  if (fp16Steps)
    multiplyPanels<true>(rows, cols, depth, a, lda, b, ldb, factor, c, ldc);
  else
    multiplyPanels<false>(rows, cols, depth, a, lda, b, ldb, factor, c, ldc);
}

// ---- Softmax pieces -------------------------------------------------------------------------------------

[[gnu::always_inline]] inline I lanesFrom(int first) {
  I v;
  for (int k = 0; k < W; ++k) v[k] = first + k;
  return v;
}

bool maskAndMax(float* s, int lds, int rows, int cols, const int* lo, const int* hi, float* rowMax) {
  F probe{};  // NaN once a visible score is NaN or infinite (x · 0)
  const F none = splat(-kInf);
  for (int r = 0; r < rows; ++r) {
    float* row = s + size_t(r) * lds;
    const int first = lo[r] > 0 ? lo[r] : 0, last = hi[r] < cols - 1 ? hi[r] : cols - 1;
    F m = none;
    if (first == 0 && last == cols - 1) {
      for (int j = 0; j < cols; j += W) {
        const F v = load(row + j);
        m = v > m ? v : m;
        probe += v * 0.0f;
      }
    } else if (first <= last) {
      for (int j = 0; j < cols; j += W) {
        const I at = lanesFrom(j);
        const I keep = (at >= first) & (at <= last);
        const F v = keep ? load(row + j) : none;
        store(row + j, v);
        m = v > m ? v : m;
        probe += keep ? v * 0.0f : F{};
      }
    } else {
      for (int j = 0; j < cols; j += W) store(row + j, none);
    }
    rowMax[r] = maxOf(m);
  }
  return !(sumOf(probe) == sumOf(probe));
}

template <PRounding R>
void exponentiateRows(const float* s, int lds, float* p, int ldp, int rows, int cols, const float* offset,
                      float* rowSum) {
  for (int r = 0; r < rows; ++r) {
    const float* srow = s + size_t(r) * lds;
    float* prow = p + size_t(r) * ldp;
    const F off = splat(offset[r]);
    F sum{};
    for (int j = 0; j < cols; j += W) {
      F e = exp2v(load(srow + j) + off);
      if constexpr (R == PRounding::Fp16) e = roundHalf(e);
      sum += e;
      if constexpr (R == PRounding::E4m3) e = roundE4m3Positive(e);
      store(prow + j, e);
    }
    rowSum[r] = sumOf(sum);
  }
}

void exponentiate(const float* s, int lds, float* p, int ldp, int rows, int cols, const float* offset,
                  PRounding rounding, float* rowSum) {
  switch (rounding) {
    case PRounding::None:
      return exponentiateRows<PRounding::None>(s, lds, p, ldp, rows, cols, offset, rowSum);
    case PRounding::Fp16:
      return exponentiateRows<PRounding::Fp16>(s, lds, p, ldp, rows, cols, offset, rowSum);
    case PRounding::E4m3:
      return exponentiateRows<PRounding::E4m3>(s, lds, p, ldp, rows, cols, offset, rowSum);
  }
}

bool advanceMaxima(const float* m, const float* rowMax, int rows, float* mNew, float* alpha) {
  I any{};
  int r = 0;
  for (; r + W <= rows; r += W) {
    const F a = load(m + r), b = load(rowMax + r);
    const F n = a > b ? a : b;
    store(mNew + r, n);
    store(alpha + r, n == -kInf ? splat(1.0f) : exp2v(a - n));
    any |= n != -kInf;
  }
  bool seen = false;
  for (int k = 0; k < W; ++k) seen |= any[k] != 0;
  for (; r < rows; ++r) {
    mNew[r] = m[r] > rowMax[r] ? m[r] : rowMax[r];
    alpha[r] = mNew[r] == -kInf ? 1.0f : exp2v(splat(m[r] - mNew[r]))[0];
    seen |= mNew[r] != -kInf;
  }
  return seen;
}

void rescaleAdd(float* acc, const float* g, int ld, const float* alpha, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    const F a = splat(alpha[r]);
    float* arow = acc + size_t(r) * ld;
    const float* grow = g + size_t(r) * ld;
    for (int j = 0; j < cols; j += W) store(arow + j, load(arow + j) * a + load(grow + j));
  }
}

int normalizeRows(const float* acc, int lda, const float* l, int rows, int cols, const float* scales,
                  bool rounded, DType input, float* out, int ldo) {
  int empty = 0;
  for (int r = 0; r < rows; ++r) {
    float* dst = out + size_t(r) * ldo;
    const float* src = acc + size_t(r) * lda;
    if (!(l[r] > 0.0f)) {
      ++empty;
      for (int e = 0; e < cols; ++e) dst[e] = 0.0f;
      continue;
    }
    const float inv = 1.0f / l[r];
    int e = 0;
    for (; e + W <= cols; e += W) {
      F o = load(src + e) * inv;
      if (scales) o *= load(scales + e);
      store(dst + e, rounded ? roundInput(o, input) : o);
    }
    for (; e < cols; ++e) {
      float o = src[e] * inv;
      if (scales) o *= scales[e];
      dst[e] = rounded ? roundToInput(o, input) : o;
    }
  }
  return empty;
}

void blockMass(const float* partSum, const float* partMax, int blocks, const float* m, const float* l,
               int rows, float* mass) {
  for (int b = 0; b < blocks; ++b) mass[b] = 0.0f;
  for (int r = 0; r < rows; ++r) {
    if (!(l[r] > 0.0f)) continue;
    const float inv = 1.0f / l[r];
    const F mr = splat(m[r]);
    const float* sum = partSum + size_t(r) * blocks;
    const float* max = partMax + size_t(r) * blocks;
    int b = 0;
    for (; b + W <= blocks; b += W) {
      const F pm = load(max + b);
      const F share = load(sum + b) * exp2v(pm - mr) * inv;
      store(mass + b, load(mass + b) + (pm == -kInf ? F{} : share));
    }
    for (; b < blocks; ++b)
      if (max[b] != -kInf) mass[b] += sum[b] * exp2v(splat(max[b] - m[r]))[0] * inv;
  }
}

// ---- Error sums -----------------------------------------------------------------------------------------

CompareSums compare(const float* o, const float* ref, size_t n) {
  D absDiff{}, absRef{}, dot{}, normO{}, normRef{}, sqDiff{}, probe{};
  size_t i = 0;
  for (; i + W / 2 <= n; i += W / 2) {
    const D a = loadWide(o + i), b = loadWide(ref + i), d = a - b;
    absDiff += d < 0 ? -d : d;
    absRef += b < 0 ? -b : b;
    dot += a * b;
    normO += a * a;
    normRef += b * b;
    sqDiff += d * d;
    probe += (a + b) * 0.0;
  }
  CompareSums c{sumOf(absDiff), sumOf(absRef), sumOf(dot), sumOf(normO),
                sumOf(normRef), sumOf(sqDiff), false};
  double pr = sumOf(probe);
  for (; i < n; ++i) {
    const double a = o[i], b = ref[i], d = a - b;
    c.absDiff += std::fabs(d);
    c.absRef += std::fabs(b);
    c.dot += a * b;
    c.normO += a * a;
    c.normRef += b * b;
    c.sqDiff += d * d;
    pr += (a + b) * 0.0;
  }
  c.nonFinite = !(pr == pr);
  return c;
}

// ---- Quantizers -----------------------------------------------------------------------------------------

float quantizeTileInt8(const float* x, int rows, int d, const float* mean, DType input, float* codes) {
  F amax{};
  float amaxTail = 0.0f;
  for (int r = 0; r < rows; ++r) {
    const float* src = x + size_t(r) * d;
    float* dst = codes + size_t(r) * d;
    int c = 0;
    for (; c + W <= d; c += W) {
      F v = roundInput(load(src + c), input);
      if (mean) v = roundInput(v - load(mean + c), input);
      store(dst + c, v);
      const F mag = (F)((U)v & 0x7fffffffu);
      amax = mag > amax ? mag : amax;  // NaN is ignored here and coded 0 below
    }
    for (; c < d; ++c) {
      float v = roundToInput(src[c], input);
      if (mean) v = roundToInput(v - mean[c], input);
      dst[c] = v;
      amaxTail = std::fabs(v) > amaxTail ? std::fabs(v) : amaxTail;
    }
  }
  const float am = maxOf(amax) > amaxTail ? maxOf(amax) : amaxTail;
  const float scale = int8Scale(am > 0.0f ? am : 0.0f);
  const size_t n = size_t(rows) * d;
  size_t i = 0;
  for (; i + W <= n; i += W) {
    F t = load(codes + i) / scale;
    const I number = t == t;  // NaN gives 0, as the GPU's float-to-int conversion
    t += t >= 0.0f ? splat(0.5f) : splat(-0.5f);
    t = t < -129.0f ? splat(-129.0f) : (t > 128.0f ? splat(128.0f) : t);  // so that trunc fits an int32
    t = __builtin_convertvector(__builtin_convertvector(t, I), F);
    t = t < -128.0f ? splat(-128.0f) : (t > 127.0f ? splat(127.0f) : t);
    store(codes + i, number ? t : F{});
  }
  for (; i < n; ++i) codes[i] = float(quantizeInt8(codes[i], scale));
  return scale;
}

void channelAmax(const float* v, int64_t n, int dv, float* amax) {
  for (int64_t r = 0; r < n; ++r) {
    const float* row = v + r * dv;
    int c = 0;
    for (; c + W <= dv; c += W) {
      const F h = roundHalf(load(row + c));
      const F mag = (F)((U)h & 0x7fffffffu), m = load(amax + c);
      store(amax + c, mag > m ? mag : m);  // NaN is ignored, as fmaxf does
    }
    for (; c < dv; ++c) amax[c] = std::fmax(amax[c], std::fabs(roundToHalf(row[c])));
  }
}

void channelCodesFp8(const float* v, int64_t n, int dv, const float* recip, float* codes, int ldc) {
  for (int64_t r = 0; r < n; ++r) {
    const float* row = v + r * dv;
    float* out = codes + r * ldc;
    int c = 0;
    for (; c + W <= dv; c += W) store(out + c, roundE4m3(roundHalf(load(row + c)) * load(recip + c)));
    for (; c < dv; ++c) out[c] = roundToE4m3(roundToHalf(row[c]) * recip[c]);
  }
}

}  // namespace

const Kernels& kernels() {
  static const Kernels k{.isa = SPARGE_TILE_ISA_NAME,
                         .columnStep = 2 * W,
                         .multiply = multiply,
                         .multiplyInt8 = multiplyInt8,
                         .maskAndMax = maskAndMax,
                         .exponentiate = exponentiate,
                         .advanceMaxima = advanceMaxima,
                         .rescaleAdd = rescaleAdd,
                         .normalizeRows = normalizeRows,
                         .blockMass = blockMass,
                         .compare = compare,
                         .quantizeTileInt8 = quantizeTileInt8,
                         .channelAmax = channelAmax,
                         .channelCodesFp8 = channelCodesFp8};
  return k;
}

}  // namespace sparge::core::tile::SPARGE_TILE_VARIANT
