// XAttention's block predictor (docs/methods.md): strided antidiagonal scoring, a softmax over each strided
// query row, block sums, and per query block the blocks kept by cumulative threshold τ.
#include <cmath>

#include "method_common.h"
#include "method_predictors.h"
#include "sparge/core/error.h"

namespace sparge::core::methods {
namespace {

struct XAttentionStats : PredictorStats {
  std::vector<float> block;  // [nq * nk]: the antidiagonal probability mass of each block
};

// The strided rows: query row a holds Q[aS + S-1-t] for t = 0..S-1 side by side, key row b holds K[bS + t],
// so that their dot product sums the antidiagonal of the S x S sub-tile (a, b). Rows past the end are zero.
std::vector<float> strided(const std::vector<float>& x, int64_t n, int64_t d, int s, bool reversed) {
  const int64_t rows = ceilDiv(n, s);
  std::vector<float> out(size_t(rows * s * d), 0.0f);
  for (int64_t a = 0; a < rows; ++a)
    for (int t = 0; t < s; ++t) {
      const int64_t src = a * s + (reversed ? s - 1 - t : t);
      if (src >= n) continue;
      std::copy(x.begin() + src * d, x.begin() + (src + 1) * d, out.begin() + (a * s + t) * d);
    }
  return out;
}

class XAttentionPredictor : public Predictor {
 public:
  Method method() const override { return Method::XAttention; }
  int64_t statsKey(const HeadParams& p) const override { return p.xattention.stride; }

  std::unique_ptr<PredictorStats> computeStats(const PredictInput& in, const HeadParams& p) const override {
    const int s = p.xattention.stride;
    const Geometry& g = in.geometry;
    if (g.blockQ % s != 0 || g.blockK % s != 0)
      throw Error("XAttention", "stride " + std::to_string(s) + " does not divide the " + g.label() +
                                    " tiles: use a power of two up to " +
                                    std::to_string(std::min(g.blockQ, g.blockK)));
    const int64_t d = in.d, width = int64_t(s) * d;
    const std::vector<float> qs = strided(roundedRows(in.q, in.nQ, d, in.dtype), in.nQ, d, s, true);
    const std::vector<float> ks = strided(roundedRows(in.k, in.nKv, d, in.dtype), in.nKv, d, s, false);
    const int64_t rows = ceilDiv(in.nQ, s), cols = ceilDiv(in.nKv, s);
    const int nk = blocksK(in), rowsPerBlock = g.blockQ / s, colsPerBlock = g.blockK / s;
    auto out = std::make_unique<XAttentionStats>();
    out->block.assign(size_t(blocksQ(in)) * nk, 0.0f);
    const float scale = float(in.scale / s);
    std::vector<float> score(static_cast<size_t>(cols));
    for (int64_t a = 0; a < rows; ++a) {
      // Strided keys whose S x S sub-tile holds a visible pair.
      const KeyRange seen = keysSeenBy(a * s, std::min(in.nQ, (a + 1) * s), in.nKv, in.causal, in.window);
      if (seen.empty()) continue;  // no key: the row adds nothing (upstream's softmax would be NaN)
      const int64_t b0 = seen.first / s, b1 = seen.last / s;
      float rowMax = -INFINITY;
      for (int64_t b = b0; b <= b1; ++b) {
        score[size_t(b)] = dot(qs.data() + a * width, ks.data() + b * width, width) * scale;
        rowMax = std::max(rowMax, score[size_t(b)]);
      }
      float sum = 0.0f;
      for (int64_t b = b0; b <= b1; ++b) sum += std::exp(score[size_t(b)] - rowMax);
      float* blockRow = out->block.data() + size_t(a / rowsPerBlock) * nk;
      for (int64_t b = b0; b <= b1; ++b)
        blockRow[b / colsPerBlock] += std::exp(score[size_t(b)] - rowMax) / sum;
    }
    return out;
  }

  Stage1Mask select(const PredictorStats& stats, const PredictInput& in, const HeadParams& p,
                    const ForcedBlocks& forced) const override {
    const auto& st = static_cast<const XAttentionStats&>(stats);
    const int nq = blocksQ(in), nk = blocksK(in);
    Stage1Mask m;
    m.pooledProb.assign(size_t(nq) * nk, 0.0f);
    std::vector<uint8_t> selected(size_t(nq) * nk, 0), methodForced(size_t(nq) * nk, 0);
    std::vector<uint8_t> isForced(static_cast<size_t>(nk));
    std::vector<double> others(static_cast<size_t>(nk));
    for (int i = 0; i < nq; ++i) {
      const float* row = st.block.data() + size_t(i) * nk;
      double total = 0, forcedSum = 0;
      for (int j = 0; j < nk; ++j) total += row[j];
      for (int j = 0; j < nk; ++j) {
        // Causal entries: key block 0 and the diagonal blocks are kept first and count toward τ. Otherwise
        // key block 0 is kept after the selection (upstream's index padding turns it on), not counted.
        isForced[size_t(j)] =
            j == 0 || (in.causal && blockOnDiagonal(i, j, in.geometry, in.nQ, in.nKv, in.causal, in.window));
        if (in.causal && isForced[size_t(j)]) forcedSum += row[j];
        others[size_t(j)] = in.causal && isForced[size_t(j)] ? NAN : double(row[j]);
        m.pooledProb[size_t(i) * nk + j] = total > 0 ? float(row[j] / total) : 0.0f;
        methodForced[size_t(i) * nk + j] = isForced[size_t(j)];
      }
      const double required = p.xattention.threshold * total;
      double cumulative = forcedSum;
      for (int j : rankDescending(others.data(), nk)) {
        if (std::isnan(others[size_t(j)]) || !(cumulative < required)) break;
        selected[size_t(i) * nk + j] = 1;
        cumulative += others[size_t(j)];
      }
    }
    finishMask(m, in, selected, methodForced, p.dense, forced);
    return m;
  }
};

}  // namespace

const Predictor& xattentionPredictor() {
  static const XAttentionPredictor p;
  return p;
}

}  // namespace sparge::core::methods
