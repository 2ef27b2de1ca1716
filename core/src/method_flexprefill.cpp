// FlexPrefill's block predictor (docs/methods.md) on square blocks of the larger tile side, each of which
// covers whole tiles of the run's geometry: vertical and slash blocks covering γ of the last query block's
// attention, or, for query-aware heads, pooled block scores covering γ.
#include <algorithm>
#include <cmath>
#include <limits>

#include "method_common.h"
#include "method_predictors.h"
#include "sparge/core/cover_sum.h"
#include "sparge/core/quant.h"

namespace sparge::core::methods {
namespace {

struct FlexStats : PredictorStats {
  int64_t block = 0;                    // B: the square block side
  int nbq = 0, nbk = 0;                 // blocks of B
  std::vector<float> sortedV, sortedS;  // per-token vertical / slash scores, descending
  std::vector<float> vBlock, sBlock;    // [nbk]: per key block / per block diagonal (0 = the main one)
  double js = 0;                        // √JS(pooled, true) of the last query block
  std::vector<float> pooled;            // [nbq * nbk]: row softmax of the pooled scores (0 where invalid)
};

// Softmax over the visible keys of the last min(B, nQ) queries: per key column and per diagonal o = q − k
// (0 <= o < nKv), each averaged over those queries.
void lastBlockLines(const PredictInput& in, const std::vector<float>& qs, const std::vector<float>& k,
                    int64_t last, std::vector<float>& vertical, std::vector<float>& slash) {
  const int64_t d = in.d;
  vertical.assign(size_t(in.nKv), 0.0f);
  slash.assign(size_t(in.nKv), 0.0f);
  std::vector<float> s(static_cast<size_t>(in.nKv));
  for (int64_t qi = in.nQ - last; qi < in.nQ; ++qi) {
    const KeyRange r = visibleKeys(qi, in.nKv, in.causal, in.window);
    if (r.empty()) continue;
    float mx = -INFINITY, sum = 0.0f;
    for (int64_t kj = r.first; kj <= r.last; ++kj) {
      s[size_t(kj)] = roundToInput(dot(&qs[size_t(qi * d)], &k[size_t(kj * d)], d), in.dtype);
      mx = std::max(mx, s[size_t(kj)]);
    }
    for (int64_t kj = r.first; kj <= r.last; ++kj) sum += std::exp(s[size_t(kj)] - mx);
    for (int64_t kj = r.first; kj <= r.last; ++kj) {
      const float p = std::exp(s[size_t(kj)] - mx) / sum;
      vertical[size_t(kj)] += p;
      if (qi - kj >= 0 && qi - kj < in.nKv) slash[size_t(qi - kj)] += p;
    }
  }
  for (float& v : vertical) v /= float(last);
  for (float& v : slash) v /= float(last);
}

std::vector<float> softmaxRow(const std::vector<float>& x) {
  float mx = -INFINITY, sum = 0.0f;
  for (float v : x) mx = std::max(mx, v);
  std::vector<float> p(x.size(), 0.0f);
  if (mx == -INFINITY) return p;
  for (float v : x) sum += std::exp(v - mx);
  for (size_t j = 0; j < x.size(); ++j) p[j] = std::exp(x[j] - mx) / sum;
  return p;
}

// Square-root Jensen-Shannon divergence (natural log; 0·log 0 = 0).
double jsDistance(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0;
  for (size_t j = 0; j < a.size(); ++j) {
    const double p = a[j], q = b[j], m = 0.5 * (p + q);
    if (p > 0) sum += 0.5 * p * std::log(p / m);
    if (q > 0) sum += 0.5 * q * std::log(q / m);
  }
  return std::sqrt(std::max(0.0, sum));
}

void blockScores(const PredictInput& in, const std::vector<float>& q, const std::vector<float>& k,
                 const std::vector<float>& qs, int64_t last, FlexStats& st) {
  const int64_t B = st.block, d = in.d;
  const float scale = float(in.scale);
  std::vector<std::vector<float>> avgK(static_cast<size_t>(st.nbk));
  for (int j = 0; j < st.nbk; ++j) {
    const int64_t r0 = j * B, r1 = std::min(in.nKv, r0 + B);
    avgK[size_t(j)] = meanRows(k.data(), r0, r1, d, float(r1 - r0), in.dtype);
  }
  // The last query block's mean query against each mean key, over the key blocks it sees.
  const std::vector<float> meanQ = meanRows(qs.data(), in.nQ - last, in.nQ, d, float(last), in.dtype);
  const KeyRange seen = keysSeenBy(in.nQ - last, in.nQ, in.nKv, in.causal, in.window);
  std::vector<float> lastRow(size_t(st.nbk), -INFINITY);
  for (int j = 0; j < st.nbk; ++j)
    if (!seen.empty() && j * B <= seen.last && (j + 1) * B - 1 >= seen.first)
      lastRow[size_t(j)] = roundToInput(dot(meanQ.data(), avgK[size_t(j)].data(), d), in.dtype);
  st.js = jsDistance(softmaxRow(lastRow), st.vBlock);
  const Geometry square{int(B), int(B)};
  st.pooled.assign(size_t(st.nbq) * st.nbk, 0.0f);
  for (int i = 0; i < st.nbq; ++i) {
    const int64_t r0 = i * B, r1 = std::min(in.nQ, r0 + B);
    std::vector<float> aq = meanRows(q.data(), r0, r1, d, float(r1 - r0), in.dtype);
    for (float& v : aq) v = roundToInput(v * scale, in.dtype);
    std::vector<float> row(size_t(st.nbk), -INFINITY);
    for (int j = 0; j < st.nbk; ++j)
      if (blockValid(i, j, square, in.nQ, in.nKv, in.causal, in.window))
        row[size_t(j)] = roundToInput(dot(aq.data(), avgK[size_t(j)].data(), d), in.dtype);
    const std::vector<float> p = softmaxRow(row);
    std::copy(p.begin(), p.end(), st.pooled.begin() + ptrdiff_t(i) * st.nbk);
  }
}

// Upstream's count of top scores covering γ: the scores whose running sum stays <= γ, plus one. The sums
// are exact (sparge/core/cover_sum.h), so ties and the order of equal values do not move the count.
int64_t coverCount(const std::vector<float>& sortedDesc, double gamma) {
  const int shift = coverShift(1.0);
  const int64_t limit = coverLimit(gamma, shift);
  uint64_t running = 0;
  int64_t n = 0;
  for (float v : sortedDesc) {
    running += coverWeight(v, shift);  // stops at the first sum past the limit (< 2 · kCoverCap)
    if (limit < 0 || running > uint64_t(limit)) break;
    ++n;
  }
  return n + 1;
}

// The top `count` of `scores` (entry 0 first: it is always kept), as flags.
std::vector<uint8_t> topBlocks(std::vector<float> scores, int64_t count) {
  scores[0] = INFINITY;
  std::vector<uint8_t> on(scores.size(), 0);
  const std::vector<int> order = rankDescending(scores.data(), int(scores.size()));
  for (int64_t r = 0; r < std::min<int64_t>(count, int64_t(order.size())); ++r)
    on[size_t(order[size_t(r)])] = 1;
  return on;
}

class FlexPrefillPredictor : public Predictor {
 public:
  Method method() const override { return Method::FlexPrefill; }

  std::unique_ptr<PredictorStats> computeStats(const PredictInput& in, const HeadParams&) const override {
    auto st = std::make_unique<FlexStats>();
    st->block = std::max(in.geometry.blockQ, in.geometry.blockK);
    st->nbq = int(ceilDiv(in.nQ, st->block));
    st->nbk = int(ceilDiv(in.nKv, st->block));
    const std::vector<float> q = roundedRows(in.q, in.nQ, in.d, in.dtype);
    const std::vector<float> k = roundedRows(in.k, in.nKv, in.d, in.dtype);
    std::vector<float> qs = q;  // upstream scales Q (by D^-1/2: the entry's scale) in the input type first
    const float scale = float(in.scale);
    for (float& v : qs) v = roundToInput(v * scale, in.dtype);
    const int64_t last = std::min(st->block, in.nQ);
    std::vector<float> vertical, slash;
    lastBlockLines(in, qs, k, last, vertical, slash);
    st->vBlock.assign(size_t(st->nbk), 0.0f);
    st->sBlock.assign(size_t(st->nbk), 0.0f);
    for (int64_t c = 0; c < in.nKv; ++c) st->vBlock[size_t(c / st->block)] += vertical[size_t(c)];
    // Upstream pools the diagonals in the order t = nKv − 1 − o; block t / B is diagonal block nbk − 1 − t /
    // B.
    for (int64_t o = 0; o < in.nKv; ++o)
      st->sBlock[size_t(st->nbk - 1 - (in.nKv - 1 - o) / st->block)] += slash[size_t(o)];
    st->sortedV = vertical;
    st->sortedS = slash;
    std::sort(st->sortedV.begin(), st->sortedV.end(), rankedBefore<float>);
    std::sort(st->sortedS.begin(), st->sortedS.end(), rankedBefore<float>);
    blockScores(in, q, k, qs, last, *st);
    return st;
  }

  Stage1Mask select(const PredictorStats& stats, const PredictInput& in, const HeadParams& p,
                    const ForcedBlocks& forced) const override;
};

Stage1Mask FlexPrefillPredictor::select(const PredictorStats& stats, const PredictInput& in,
                                        const HeadParams& p, const ForcedBlocks& forced) const {
  const auto& st = static_cast<const FlexStats&>(stats);
  const FlexPrefillParams& fp = p.flexprefill;
  const int64_t B = st.block;
  const int nbq = st.nbq, nbk = st.nbk;
  std::vector<uint8_t> flexSel(size_t(nbq) * nbk, 0), flexForced(size_t(nbq) * nbk, 0);
  std::vector<float> flexScore(size_t(nbq) * nbk, 0.0f);
  const int64_t minBlocks = std::max<int64_t>(1, ceilDiv(fp.minBudget, B));
  if (in.nQ <= std::max(2 * B, minBlocks * B)) {
    std::fill(flexForced.begin(), flexForced.end(), 1);  // upstream runs short sequences dense
  } else {
    const int64_t maxBlocks = std::min<int64_t>(nbk, fp.maxBudget > 0 ? ceilDiv(fp.maxBudget, B) : nbk);
    auto clampBlocks = [&](int64_t n) { return std::min(std::max(n, minBlocks), maxBlocks); };
    const bool queryAware = st.js < fp.tau;
    const int64_t nV = queryAware ? minBlocks : clampBlocks(coverCount(st.sortedV, fp.gamma) / B + 1);
    const int64_t nS = queryAware ? minBlocks : clampBlocks(coverCount(st.sortedS, fp.gamma) / B + 1);
    const std::vector<uint8_t> vOn = topBlocks(st.vBlock, nV), sOn = topBlocks(st.sBlock, nS);
    for (int I = 0; I < nbq; ++I)
      for (int J = 0; J < nbk; ++J) {
        const size_t x = size_t(I) * nbk + J;
        // Diagonal blocks exist for offsets below nbk only (more query than key blocks: cross-attention).
        const bool slash = I - J >= 0 && I - J < nbk && sOn[size_t(I - J)];
        (J == 0 || I == J ? flexForced : flexSel)[x] |= uint8_t(vOn[size_t(J)] || slash);
        flexScore[x] = queryAware ? st.pooled[x] : st.vBlock[size_t(J)];
      }
    if (queryAware) {
      const std::vector<int> order = rankDescending(st.pooled.data(), nbq * nbk);
      const int shift = coverShift(double(nbq));
      const int64_t limit = coverLimit(fp.gamma * nbq, shift);
      uint64_t running = 0;
      for (int x : order) {
        running += coverWeight(st.pooled[size_t(x)], shift);
        if (limit < 0 || running > uint64_t(limit)) break;
        flexSel[size_t(x)] = 1;
      }
      flexForced[0] = 1;  // upstream's index padding keeps block (0, 0)
    }
  }
  const Geometry& g = in.geometry;
  const int nq = blocksQ(in), nk = blocksK(in);
  Stage1Mask m;
  m.pooledProb.assign(size_t(nq) * nk, 0.0f);
  std::vector<uint8_t> selected(size_t(nq) * nk), methodForced(size_t(nq) * nk);
  for (int i = 0; i < nq; ++i)
    for (int j = 0; j < nk; ++j) {
      const size_t fx = size_t(int64_t(i) * g.blockQ / B) * nbk + size_t(int64_t(j) * g.blockK / B);
      const size_t x = size_t(i) * nk + j;
      selected[x] = flexSel[fx];
      methodForced[x] = flexForced[fx];
      m.pooledProb[x] = flexScore[fx];
    }
  finishMask(m, in, selected, methodForced, p.dense, forced);
  return m;
}

}  // namespace

const Predictor& flexprefillPredictor() {
  static const FlexPrefillPredictor p;
  return p;
}

}  // namespace sparge::core::methods
