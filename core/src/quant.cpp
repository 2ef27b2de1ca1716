// Scalar rounding of the quantized numerics (e4m3, INT8) and the per-head operand quantizers.
#include "sparge/core/quant.h"

#include <algorithm>
#include <cmath>

#include "sparge/core/half.h"

namespace sparge::core {

std::string targetLabel(const Geometry& g, Numerics n) {
  if (n == Numerics::None) return "none";
  const std::optional<Target> t = targetOf(g, n);
  return t ? toString(*t) : "custom";
}

Int8Rows quantizeRowsInt8(const float* x, int64_t n, int64_t d, int blockRows, const float* mean,
                          DType input) {
  const int64_t nBlocks = ceilDiv(n, blockRows);
  Int8Rows out;
  out.codes.assign(size_t(nBlocks * blockRows * d), 0.0f);
  out.scales.assign(size_t(nBlocks), 0.0f);
  std::vector<float> block(size_t(blockRows * d));
  for (int64_t b = 0; b < nBlocks; ++b) {
    const int64_t r0 = b * blockRows, rows = std::min<int64_t>(blockRows, n - r0);
    float amax = 0.0f;
    for (int64_t i = 0; i < rows * d; ++i) {
      const float v = roundToInput(x[r0 * d + i], input);
      block[size_t(i)] = mean ? roundToInput(v - mean[i % d], input) : v;
      amax = std::max(amax, std::fabs(block[size_t(i)]));  // NaN is ignored here and coded 0 below
    }
    const float scale = int8Scale(amax);
    out.scales[size_t(b)] = scale;
    for (int64_t i = 0; i < rows * d; ++i)
      out.codes[size_t(r0 * d + i)] = float(quantizeInt8(block[size_t(i)], scale));
  }
  return out;
}

Fp8Columns quantizeColumnsFp8(const float* v, int64_t n, int64_t dv, int64_t nPad) {
  Fp8Columns out;
  out.codes.assign(size_t(nPad * dv), 0.0f);
  out.scales.assign(size_t(dv), 0.0f);
  std::vector<float> amax(size_t(dv), 0.0f);
  // Upstream's channel scan starts from max -1e6 / min 1e6 over fp16 values and the zero padding, so the
  // range is max(|max|, |min|) >= 0; fmaxf/fminf ignore NaN.
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < dv; ++c)
      amax[size_t(c)] = std::fmax(amax[size_t(c)], std::fabs(roundToHalf(v[r * dv + c])));
  std::vector<float> recip(static_cast<size_t>(dv));
  for (int64_t c = 0; c < dv; ++c) {
    out.scales[size_t(c)] = amax[size_t(c)] / 2.25f;
    recip[size_t(c)] = 2.25f / amax[size_t(c)];  // inf for an all-zero channel
    if (amax[size_t(c)] == 0.0f) out.zeroChannels.push_back(c);
  }
  // Padding rows stay 0: their probabilities are 0 (keys past the end are masked).
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < dv; ++c)
      out.codes[size_t(r * dv + c)] = roundToE4m3(roundToHalf(v[r * dv + c]) * recip[size_t(c)]);
  return out;
}

}  // namespace sparge::core
