// Scalar rounding of the quantized numerics (e4m3, INT8) and the per-head operand quantizers.
#include "sparge/core/quant.h"

#include <algorithm>
#include <cmath>

#include "sparge/core/half.h"
#include "tile_kernels.h"

namespace sparge::core {

std::string targetLabel(const Geometry& g, Numerics n) {
  if (n == Numerics::None) return "none";
  const std::optional<Target> t = targetOf(g, n);
  return t ? toString(*t) : "custom";
}

// Both quantizers run the tile kernels that Stage 2 uses (tile_kernels.h), so the numpy oracles of
// tests/core/test_numerics.py check the engine's own code.
void quantizeRowsInt8(const float* x, int64_t n, int64_t d, int blockRows, const float* mean, DType input,
                      Int8Rows& out) {
  const int64_t nBlocks = ceilDiv(n, blockRows);
  out.codes.assign(size_t(nBlocks * blockRows * d), 0.0f);
  out.scales.assign(size_t(nBlocks), 0.0f);
  for (int64_t b = 0; b < nBlocks; ++b) {
    const int64_t r0 = b * blockRows, rows = std::min<int64_t>(blockRows, n - r0);
    out.scales[size_t(b)] = tile::kernels().quantizeTileInt8(x + r0 * d, int(rows), int(d), mean, input,
                                                             out.codes.data() + r0 * d);
  }
}

Int8Rows quantizeRowsInt8(const float* x, int64_t n, int64_t d, int blockRows, const float* mean,
                          DType input) {
  Int8Rows out;
  quantizeRowsInt8(x, n, d, blockRows, mean, input, out);
  return out;
}

void quantizeColumnsFp8(const float* v, int64_t n, int64_t dv, int64_t nPad, int64_t ld, Fp8Columns& out) {
  out.codes.assign(size_t(nPad * ld), 0.0f);
  // Upstream's channel scan starts from max -1e6 / min 1e6 over fp16 values and the zero padding, so the
  // range is max(|max|, |min|) >= 0; NaN is ignored.
  out.scales.assign(size_t(dv), 0.0f);
  tile::kernels().channelAmax(v, n, int(dv), out.scales.data());
  std::vector<float> recip(static_cast<size_t>(dv));
  out.zeroChannels.clear();
  for (int64_t c = 0; c < dv; ++c) {
    const float amax = out.scales[size_t(c)];
    out.scales[size_t(c)] = amax / 2.25f;
    recip[size_t(c)] = 2.25f / amax;  // inf for an all-zero channel
    if (amax == 0.0f) out.zeroChannels.push_back(c);
  }
  // Padding rows stay 0: their probabilities are 0 (keys past the end are masked).
  tile::kernels().channelCodesFp8(v, n, int(dv), recip.data(), out.codes.data(), int(ld));
}

Fp8Columns quantizeColumnsFp8(const float* v, int64_t n, int64_t dv, int64_t nPad) {
  Fp8Columns out;
  quantizeColumnsFp8(v, n, dv, nPad, dv, out);
  return out;
}

}  // namespace sparge::core
