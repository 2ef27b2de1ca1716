// MInference's block predictor (docs/methods.md): per head either vertical-slash lines from the last 64
// queries' attention, mapped onto the blocks they cross (with the token pairs they cover counted), or
// block-sparse top-k over pooled Q·Kᵀ.
#include <algorithm>
#include <cmath>

#include "method_common.h"
#include "method_predictors.h"
#include "sparge/core/quant.h"

namespace sparge::core::methods {
namespace {

// Upstream's constants: the last 64 queries are scored; the first 30 key columns and the 100 diagonals
// nearest the main one are always kept; at least 30 columns and 50 diagonals are chosen.
constexpr int64_t kLastQueries = 64, kInitColumns = 30, kLocalDiagonals = 100;
constexpr int64_t kMinVertical = 30, kMinSlash = 50;

struct MInferenceStats : PredictorStats {
  std::vector<float> vertical;  // [nKv]: attention of the last queries per key column (+inf: always kept)
  std::vector<float> slash;     // [nQ]: per diagonal o = query − key >= 0 (+inf: always kept)
  std::vector<float> pooled;    // [nq * nk]: block-sparse scores mean(Q tile) · mean(K tile), −inf invalid
};

void lineScores(const PredictInput& in, const std::vector<float>& q, const std::vector<float>& k,
                MInferenceStats& st) {
  const int64_t d = in.d, last = std::min(kLastQueries, in.nQ);
  st.vertical.assign(size_t(in.nKv), 0.0f);
  st.slash.assign(size_t(in.nQ), 0.0f);
  const float scale = float(in.scale);
  std::vector<float> p(static_cast<size_t>(in.nKv));
  for (int64_t qi = in.nQ - last; qi < in.nQ; ++qi) {
    const KeyRange r = visibleKeys(qi, in.nKv, in.causal, in.window);
    if (r.empty()) continue;
    float mx = -INFINITY;
    for (int64_t kj = r.first; kj <= r.last; ++kj) {
      // Upstream's einsum and division run in the input's half type.
      p[size_t(kj)] = roundToInput(
          roundToInput(dot(&q[size_t(qi * d)], &k[size_t(kj * d)], d), in.dtype) * scale, in.dtype);
      mx = std::max(mx, p[size_t(kj)]);
    }
    float sum = 0.0f;
    for (int64_t kj = r.first; kj <= r.last; ++kj) sum += std::exp(p[size_t(kj)] - mx);
    for (int64_t kj = r.first; kj <= r.last; ++kj) {
      const float prob = std::exp(p[size_t(kj)] - mx) / sum;
      st.vertical[size_t(kj)] += prob;
      if (qi - kj >= 0) st.slash[size_t(qi - kj)] += prob;
    }
  }
  for (int64_t c = 0; c < std::min(kInitColumns, in.nKv); ++c) st.vertical[size_t(c)] = INFINITY;
  for (int64_t o = 0; o < std::min(kLocalDiagonals, in.nQ); ++o) st.slash[size_t(o)] = INFINITY;
}

void pooledScores(const PredictInput& in, const std::vector<float>& q, const std::vector<float>& k,
                  MInferenceStats& st) {
  const Geometry& g = in.geometry;
  const int nq = blocksQ(in), nk = blocksK(in);
  // Upstream pads the sequence with zeros and averages over the whole tile.
  std::vector<std::vector<float>> pk(static_cast<size_t>(nk));
  for (int j = 0; j < nk; ++j)
    pk[size_t(j)] = meanRows(k.data(), int64_t(j) * g.blockK, std::min(in.nKv, int64_t(j + 1) * g.blockK),
                             in.d, float(g.blockK), in.dtype);
  st.pooled.assign(size_t(nq) * nk, -INFINITY);
  for (int i = 0; i < nq; ++i) {
    const std::vector<float> pq =
        meanRows(q.data(), int64_t(i) * g.blockQ, std::min(in.nQ, int64_t(i + 1) * g.blockQ), in.d,
                 float(g.blockQ), in.dtype);
    for (int j = 0; j < nk; ++j)
      if (in.validity->valid[size_t(i) * nk + j])
        st.pooled[size_t(i) * nk + j] = roundToInput(dot(pq.data(), pk[size_t(j)].data(), in.d), in.dtype);
  }
}

// The token pairs the chosen lines cover: columns plus diagonals minus the pairs on both.
double coveredPairs(const PredictInput& in, std::vector<int64_t> columns,
                    const std::vector<int64_t>& diagonals) {
  std::sort(columns.begin(), columns.end());
  double pairs = 0;
  for (int64_t c : columns) pairs += double(queriesSeeing(c, 0, in.nQ, in.nKv, in.causal, in.window));
  for (int64_t o : diagonals) {
    if (!diagonalVisible(o, in.causal, in.window)) continue;
    pairs += double(std::max<int64_t>(0, std::min(in.nQ, in.nKv + o) - o));
    // Pairs (c + o, c) with c a chosen column and c + o < nQ are on both lines.
    pairs -= double(std::lower_bound(columns.begin(), columns.end(), in.nQ - o) - columns.begin());
  }
  return pairs;
}

void markLines(const PredictInput& in, const MInferenceStats& st, const MInferenceParams& mp, Stage1Mask& m,
               std::vector<uint8_t>& selected, std::vector<uint8_t>& methodForced) {
  const Geometry& g = in.geometry;
  const int nq = blocksQ(in), nk = blocksK(in);
  const int64_t vs = std::min(in.nKv, std::max(mp.verticalSize, kMinVertical));
  const int64_t ss = std::min(in.nQ, std::max(mp.slashSize, kMinSlash));
  const std::vector<int> vOrder = rankDescending(st.vertical.data(), int(in.nKv));
  const std::vector<int> sOrder = rankDescending(st.slash.data(), int(in.nQ));
  std::vector<int64_t> columns(vOrder.begin(), vOrder.begin() + vs),
      diagonals(sOrder.begin(), sOrder.begin() + ss);
  std::vector<double> covered(size_t(nq) * nk, 0.0);
  for (int i = 0; i < nq; ++i) {
    const int64_t q0 = int64_t(i) * g.blockQ, q1 = std::min(in.nQ, q0 + g.blockQ);
    for (int64_t c : columns) {
      const size_t x = size_t(i) * nk + size_t(c / g.blockK);
      const int64_t seeing = queriesSeeing(c, q0, q1, in.nKv, in.causal, in.window);
      if (seeing == 0) continue;
      (c < kInitColumns ? methodForced : selected)[x] = 1;
      covered[x] += double(seeing);
    }
    for (int64_t o : diagonals) {
      if (!diagonalVisible(o, in.causal, in.window)) continue;
      const int64_t k0 = std::max<int64_t>(0, q0 - o), k1 = std::min(in.nKv - 1, q1 - 1 - o);
      for (int64_t j = k0 / g.blockK; k0 <= k1 && j <= k1 / g.blockK; ++j) {
        const size_t x = size_t(i) * nk + size_t(j);
        (o < kLocalDiagonals ? methodForced : selected)[x] = 1;
        covered[x] += double(std::min(k1, (j + 1) * g.blockK - 1) - std::max(k0, j * g.blockK) + 1);
      }
    }
  }
  for (size_t x = 0; x < covered.size(); ++x)
    m.pooledProb[x] =
        in.validity->area[x] > 0 ? float(std::min(1.0, covered[x] / in.validity->area[x])) : 0.0f;
  m.elementPairs = coveredPairs(in, columns, diagonals);
}

void markTopBlocks(const PredictInput& in, const MInferenceStats& st, int64_t topk, Stage1Mask& m,
                   std::vector<uint8_t>& selected) {
  const int nq = blocksQ(in), nk = blocksK(in);
  for (int i = 0; i < nq; ++i) {
    const float* row = st.pooled.data() + size_t(i) * nk;
    float mx = -INFINITY, sum = 0.0f;
    for (int j = 0; j < nk; ++j) mx = std::max(mx, row[j]);
    for (int j = 0; j < nk && mx > -INFINITY; ++j) sum += std::exp(row[j] - mx);
    for (int j = 0; j < nk; ++j)
      m.pooledProb[size_t(i) * nk + j] = sum > 0 ? std::exp(row[j] - mx) / sum : 0.0f;
    int64_t kept = 0;
    for (int j : rankDescending(row, nk)) {
      if (kept >= topk || row[j] == -INFINITY) break;
      selected[size_t(i) * nk + j] = 1;
      ++kept;
    }
  }
}

class MInferencePredictor : public Predictor {
 public:
  Method method() const override { return Method::MInference; }

  std::unique_ptr<PredictorStats> computeStats(const PredictInput& in, const HeadParams&) const override {
    const std::vector<float> q = roundedRows(in.q, in.nQ, in.d, in.dtype);
    const std::vector<float> k = roundedRows(in.k, in.nKv, in.d, in.dtype);
    auto st = std::make_unique<MInferenceStats>();
    lineScores(in, q, k, *st);
    pooledScores(in, q, k, *st);
    return st;
  }

  Stage1Mask select(const PredictorStats& stats, const PredictInput& in, const HeadParams& p,
                    const ForcedBlocks& forced) const override {
    const auto& st = static_cast<const MInferenceStats&>(stats);
    const size_t blocks = size_t(blocksQ(in)) * blocksK(in);
    Stage1Mask m;
    m.pooledProb.assign(blocks, 0.0f);
    std::vector<uint8_t> selected(blocks, 0), methodForced(blocks, 0);
    if (p.minference.pattern == MInferencePattern::VerticalSlash)
      markLines(in, st, p.minference, m, selected, methodForced);
    else
      markTopBlocks(in, st, p.minference.topk, m, selected);
    finishMask(m, in, selected, methodForced, p.dense, forced);
    return m;
  }
};

}  // namespace

const Predictor& minferencePredictor() {
  static const MInferencePredictor p;
  return p;
}

}  // namespace sparge::core::methods
