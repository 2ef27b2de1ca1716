// The vectorised inner loops of the CPU engine's Stage 2 (core/src/isa/tile_kernels.cpp): block products,
// masks, 2^x with the P roundings, the online-softmax update, the quantizers and the error sums, compiled
// once per instruction set (AVX-512, AVX2+FMA, baseline x86-64) and chosen once at run time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sparge/core/types.h"

namespace sparge::core::tile {

// How P is rounded as the P·V operand (docs/numerics.md): not at all (exact), to fp16 (sm80), to e4m3 (FP8).
enum class PRounding { None, Fp16, E4m3 };

// Error sums of one stretch of an output against the reference, in double (see ErrorSums).
struct CompareSums {
  double absDiff = 0, absRef = 0, dot = 0, normO = 0, normRef = 0, sqDiff = 0;
  bool nonFinite = false;  // some value of either was NaN or infinite
};

struct Kernels {
  const char* isa;  // "avx512", "avx2" or "x86-64"
  // Columns of every product and of every masked / exponentiated row come in multiples of `columnStep`
  // floats (the caller pads key blocks and value widths to it).
  int columnStep;

  // c[r][j] = factor · Σ_k a[r·lda + k] · b[k·ldb + j] for r < rows, j < cols (a multiple of columnStep),
  // summed in fp32. With `fp16Steps` the sums are rounded to fp16 after every 16 k (the sm80 kernel's fp16
  // accumulator, one rounding per m16n8k16 step); depth is then a multiple of 16.
  void (*multiply)(int rows, int cols, int depth, const float* a, int lda, const float* b, int ldb,
                   float factor, bool fp16Steps, float* c, int ldc);
  // multiply() for INT8 codes held as int16 pairs: a [rows][lda] and b [pairs][ldb] are 32-bit words each
  // holding (code 2k, code 2k+1) of a row (a) or of a column (b); the sums are exact in int32, then
  // converted to fp32 and multiplied by `factor`.
  void (*multiplyInt8)(int rows, int cols, int pairs, const int32_t* a, int lda, const int32_t* b, int ldb,
                       float factor, float* c, int ldc);
  // Scores s[r][j] outside [lo[r], hi[r]] (inclusive; empty when lo > hi) become -inf and rowMax[r] is the
  // largest remaining one (-inf when none). Returns true when a remaining score is NaN or infinite.
  bool (*maskAndMax)(float* s, int lds, int rows, int cols, const int* lo, const int* hi, float* rowMax);
  // p[r][j] = 2^(s[r][j] + offset[r]), rounded as `rounding` says; rowSum[r] = Σ_j p before the rounding
  // (None, E4m3: the FP8 kernels sum the fp32 P) or after it (Fp16: the sm80 kernel sums the fp16 P).
  void (*exponentiate)(const float* s, int lds, float* p, int ldp, int rows, int cols, const float* offset,
                       PRounding rounding, float* rowSum);
  // m_new[r] = max(m[r], rowMax[r]) and alpha[r] = 2^(m[r] - m_new[r]) (1 while m_new is -inf). Returns
  // whether some row has seen a key (m_new > -inf).
  bool (*advanceMaxima)(const float* m, const float* rowMax, int rows, float* mNew, float* alpha);
  // acc[r][e] = acc[r][e] · alpha[r] + g[r][e] for e < cols (a multiple of columnStep).
  void (*rescaleAdd)(float* acc, const float* g, int ld, const float* alpha, int rows, int cols);
  // out[r][e] = acc[r][e] / l[r] (times scales[e] when given, then rounded to the input type when `rounded`)
  // for e < cols; rows with l <= 0 (no visible key) are 0. Returns the number of such rows.
  int (*normalizeRows)(const float* acc, int lda, const float* l, int rows, int cols, const float* scales,
                       bool rounded, DType input, float* out, int ldo);
  // mass[b] = Σ_r partSum[r][b] · 2^(partMax[r][b] - m[r]) / l[r] over rows with l > 0 and partMax > -inf:
  // how much of each row's softmax the b-th visited block holds, summed over the rows.
  void (*blockMass)(const float* partSum, const float* partMax, int blocks, const float* m, const float* l,
                    int rows, float* mass);
  // The sums of o against ref over n values.
  CompareSums (*compare)(const float* o, const float* ref, size_t n);
  // One INT8 tile (docs/numerics.md): x [rows, d] rounded to the input type (minus `mean` [d] in that
  // precision when given), codes [rows, d] written as floats; returns the tile's scale.
  float (*quantizeTileInt8)(const float* x, int rows, int d, const float* mean, DType input, float* codes);
  // FP8 V of one head: amax [dv] is raised to the largest |fp16(v)| of each channel over rows [0, n)
  // (NaN ignored), then codes[r][c] = e4m3(fp16(v[r][c]) · recip[c]) when recip is given (both [n, dv]).
  void (*channelAmax)(const float* v, int64_t n, int dv, float* amax);
  void (*channelCodesFp8)(const float* v, int64_t n, int dv, const float* recip, float* codes, int ldc);
};

// The variant in use: the best this CPU runs, unless SPARGE_CPU_ISA=avx512|avx2|x86-64 asks for another at
// the first call or useVariant() switches (benchmarks, tests). A variant the CPU cannot run is an error.
const Kernels& kernels();
void useVariant(const std::string& isa);
std::vector<std::string> variants();  // the variants this CPU runs, best first

}  // namespace sparge::core::tile
