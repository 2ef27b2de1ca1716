// The MoBA-style gate (docs/methods.md): each query token scores the key blocks it can see by q · mean(K
// block) and keeps its own block plus the best others, top-k in all; a tile is computed when any of its
// queries chose it, and the token pairs the per-token choice covers are counted.
#include <algorithm>
#include <cmath>

#include "method_common.h"
#include "method_predictors.h"

namespace sparge::core::methods {
namespace {

struct MobaStats : PredictorStats {
  int nk = 0;
  // Per query token: the key blocks it can choose from, best first (its own block leads), as block indices.
  std::vector<std::vector<int>> ranked;
  std::vector<int> own;  // per query token: its own block (the one holding key == query), −1 when none
};

class MobaPredictor : public Predictor {
 public:
  Method method() const override { return Method::Moba; }

  std::unique_ptr<PredictorStats> computeStats(const PredictInput& in, const HeadParams&) const override {
    const int64_t bk = in.geometry.blockK, d = in.d;
    const std::vector<float> q = roundedRows(in.q, in.nQ, d, in.dtype);
    const std::vector<float> k = roundedRows(in.k, in.nKv, d, in.dtype);
    auto st = std::make_unique<MobaStats>();
    st->nk = blocksK(in);
    std::vector<std::vector<float>> gateKey(static_cast<size_t>(st->nk));
    for (int j = 0; j < st->nk; ++j) {
      const int64_t r0 = j * bk, r1 = std::min(in.nKv, r0 + bk);
      gateKey[size_t(j)] = meanRows(k.data(), r0, r1, d, float(r1 - r0), in.dtype);
    }
    st->ranked.resize(size_t(in.nQ));
    st->own.assign(size_t(in.nQ), -1);
    std::vector<float> gate(static_cast<size_t>(st->nk));
    for (int64_t t = 0; t < in.nQ; ++t) {
      const KeyRange r = visibleKeys(t, in.nKv, in.causal, in.window);
      const int own = t < in.nKv && !r.empty() && r.first <= t && t <= r.last ? int(t / bk) : -1;
      st->own[size_t(t)] = own;
      for (int j = 0; j < st->nk; ++j) {
        // Candidates: blocks holding a visible key; the own block ranks first (upstream's +inf).
        const bool visible = !r.empty() && j * bk <= r.last && (j + 1) * bk - 1 >= r.first;
        gate[size_t(j)] = j == own  ? INFINITY
                          : visible ? dot(&q[size_t(t * d)], gateKey[size_t(j)].data(), d)
                                    : NAN;
      }
      std::vector<int> order = rankDescending(gate.data(), st->nk);
      order.erase(
          std::find_if(order.begin(), order.end(), [&](int j) { return std::isnan(gate[size_t(j)]); }),
          order.end());
      st->ranked[size_t(t)] = std::move(order);
    }
    return st;
  }

  Stage1Mask select(const PredictorStats& stats, const PredictInput& in, const HeadParams& p,
                    const ForcedBlocks& forced) const override {
    const auto& st = static_cast<const MobaStats&>(stats);
    const Geometry& g = in.geometry;
    const int nq = blocksQ(in), nk = st.nk;
    Stage1Mask m;
    m.pooledProb.assign(size_t(nq) * nk, 0.0f);
    std::vector<uint8_t> selected(size_t(nq) * nk, 0), methodForced(size_t(nq) * nk, 0);
    double pairs = 0;
    for (int64_t t = 0; t < in.nQ; ++t) {
      const int i = int(t / g.blockQ);
      const KeyRange r = visibleKeys(t, in.nKv, in.causal, in.window);
      const std::vector<int>& order = st.ranked[size_t(t)];
      const size_t keep = size_t(std::min<int64_t>(p.moba.topk, int64_t(order.size())));
      for (size_t x = 0; x < keep; ++x) {
        const int j = order[x];
        const size_t cell = size_t(i) * nk + size_t(j);
        (j == st.own[size_t(t)] ? methodForced : selected)[cell] = 1;
        m.pooledProb[cell] += 1.0f;
        const int64_t k0 = std::max<int64_t>(r.first, int64_t(j) * g.blockK);
        const int64_t k1 = std::min<int64_t>(r.last, int64_t(j + 1) * g.blockK - 1);
        pairs += double(std::max<int64_t>(0, k1 - k0 + 1));
      }
    }
    // The share of the tile's queries that chose each block.
    for (int i = 0; i < nq; ++i) {
      const float rows = float(std::min<int64_t>(g.blockQ, in.nQ - int64_t(i) * g.blockQ));
      for (int j = 0; j < nk; ++j) m.pooledProb[size_t(i) * nk + j] /= rows;
    }
    m.elementPairs = pairs;
    finishMask(m, in, selected, methodForced, p.dense, forced);
    return m;
  }
};

}  // namespace

const Predictor& mobaPredictor() {
  static const MobaPredictor p;
  return p;
}

}  // namespace sparge::core::methods
