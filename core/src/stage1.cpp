// Stage 1 of SpargeAttn on the CPU, mirroring the reference implementation's precision step by step
// (docs/method.md): fp32 sums rounded to the input half type, fp16 unit vectors, half scores.
#include "sparge/core/stage1.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "sparge/core/half.h"
#include "sparge/core/quant.h"
#include "sparge/core/result.h"

namespace sparge::core {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct BlockPass {
  std::vector<float> pooled;   // [nBlocks * d], rounded to the input type
  std::vector<float> selfSim;  // [nBlocks]
};

// A row of Q (mean == nullptr) or of K smoothed: K smoothing happens in half arithmetic, computed in fp32 and
// rounded to the input type. One loop per type, so that each vectorises.
void smoothedRow(const float* src, int64_t d, const float* mean, DType t, float* row) {
  if (!mean)
    std::copy(src, src + d, row);
  else if (t == DType::BFloat16)
    for (int64_t c = 0; c < d; ++c) row[c] = roundToBf16(src[c] - mean[c]);
  else
    for (int64_t c = 0; c < d; ++c) row[c] = roundToHalf(src[c] - mean[c]);
}

// One pass over Q (mean == nullptr) or K (mean = the per-head token mean, already rounded).
BlockPass blockPass(const float* x, int64_t n, int64_t d, int blockSize, const float* mean, DType t) {
  const int64_t nBlocks = ceilDiv(n, blockSize);
  BlockPass out;
  out.pooled.assign(nBlocks * d, 0.0f);
  out.selfSim.assign(nBlocks, kNaN);
  std::vector<float> row(d), sum(d), unitSum(d);
  for (int64_t b = 0; b < nBlocks; ++b) {
    const int64_t r0 = b * blockSize, r1 = std::min<int64_t>(n, r0 + blockSize);
    const int64_t count = r1 - r0;
    std::fill(sum.begin(), sum.end(), 0.0f);
    std::fill(unitSum.begin(), unitSum.end(), 0.0f);
    bool zeroRow = false;
    for (int64_t r = r0; r < r1; ++r) {
      smoothedRow(x + r * d, d, mean, t, row.data());
      for (int64_t c = 0; c < d; ++c) sum[c] += row[c];
      float norm2 = 0.0f;  // in column order, a sum of its own (the loops above vectorise)
      for (int64_t c = 0; c < d; ++c) norm2 += row[c] * row[c];
      const float norm = std::sqrt(norm2);
      if (norm == 0.0f) zeroRow = true;
      // Unit vectors are stored as fp16 upstream, even for bf16 inputs.
      for (int64_t c = 0; c < d; ++c) unitSum[c] += roundToHalf(row[c] / norm);
    }
    for (int64_t c = 0; c < d; ++c) out.pooled[b * d + c] = roundToInput(sum[c] / float(count), t);
    // Padded rows of a partial block are zero, so upstream's Gram sum is NaN there (NaN rule).
    if (count < blockSize || zeroRow) continue;
    float s = 0.0f;
    for (int64_t c = 0; c < d; ++c) s += unitSum[c] * unitSum[c];
    out.selfSim[b] = s / float(count * count);
  }
  return out;
}

}  // namespace

namespace {

// Token ranges of block (i, j), clipped to the grid: queries [q0, q1), keys [k0, k1).
struct BlockSpan {
  int64_t q0, q1, k0, k1;
  bool empty() const { return q1 <= q0 || k1 <= k0; }
};

BlockSpan spanOf(int i, int j, const Geometry& g, int64_t nQ, int64_t nKv) {
  const int64_t q0 = int64_t(i) * g.blockQ, k0 = int64_t(j) * g.blockK;
  return {q0, std::min<int64_t>(nQ, q0 + g.blockQ), k0, std::min<int64_t>(nKv, k0 + g.blockK)};
}

// Keys of [k0, k1) that query `query` sees.
int64_t visibleInSpan(int64_t query, const BlockSpan& s, int64_t nKv, bool causal, const Window& w) {
  const KeyRange r = visibleKeys(query, nKv, causal, w);
  return std::max<int64_t>(0, std::min(r.last, s.k1 - 1) - std::max(r.first, s.k0) + 1);
}

bool unmasked(bool causal, const Window& w) {
  return !causal && !w.bounded();
}

}  // namespace

bool blockValid(int i, int j, const Geometry& g, int64_t nQ, int64_t nKv, bool causal, const Window& window) {
  const BlockSpan s = spanOf(i, j, g, nQ, nKv);
  if (s.empty()) return false;
  if (unmasked(causal, window)) return true;
  // Both ends of a query's visible range never decrease as the query grows (top-left alignment), so
  // the first query whose range reaches k0 is the one most likely to also start before k1.
  int64_t lo = s.q0, hi = s.q1;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (visibleKeys(mid, nKv, causal, window).last >= s.k0)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo < s.q1 && visibleInSpan(lo, s, nKv, causal, window) > 0;
}

double blockValidArea(int i, int j, const Geometry& g, int64_t nQ, int64_t nKv, bool causal,
                      const Window& window) {
  const BlockSpan s = spanOf(i, j, g, nQ, nKv);
  if (s.empty()) return 0.0;
  if (unmasked(causal, window)) return double(s.q1 - s.q0) * double(s.k1 - s.k0);
  double area = 0;
  for (int64_t q = s.q0; q < s.q1; ++q) area += double(visibleInSpan(q, s, nKv, causal, window));
  return area;
}

bool blockOnDiagonal(int i, int j, const Geometry& g, int64_t nQ, int64_t nKv, bool causal,
                     const Window& window) {
  const BlockSpan s = spanOf(i, j, g, nQ, nKv);
  const int64_t first = std::max(s.q0, s.k0), last = std::min(s.q1, s.k1) - 1;
  for (int64_t t = first; t <= last; ++t) {
    const KeyRange r = visibleKeys(t, nKv, causal, window);
    if (r.first <= t && t <= r.last) return true;
  }
  return false;
}

BlockValidity computeBlockValidity(const Geometry& g, int64_t nQ, int64_t nKv, bool causal,
                                   const Window& window) {
  BlockValidity v;
  v.nq = int(ceilDiv(nQ, g.blockQ));
  v.nk = int(ceilDiv(nKv, g.blockK));
  v.valid.resize(size_t(v.nq) * v.nk);
  v.area.resize(v.valid.size());
  for (int i = 0; i < v.nq; ++i)
    for (int j = 0; j < v.nk; ++j) {
      v.area[size_t(i) * v.nk + j] = blockValidArea(i, j, g, nQ, nKv, causal, window);
      v.valid[size_t(i) * v.nk + j] = v.area[size_t(i) * v.nk + j] > 0;
    }
  return v;
}

SparsityCounts countSparsity(const BlockValidity& validity, const uint8_t* mask, const uint8_t* pvSkipped) {
  SparsityCounts sc;
  for (size_t x = 0; x < validity.valid.size(); ++x) {
    if (!validity.valid[x]) continue;
    const double area = validity.area[x];
    ++sc.validBlocks;
    sc.validArea += area;
    if (!mask[x]) continue;
    ++sc.selectedBlocks;
    sc.selectedArea += area;
    if (pvSkipped[x]) {
      ++sc.skippedPvBlocks;
    } else {
      ++sc.computedPvBlocks;
      sc.computedPvArea += area;
    }
  }
  return sc;
}

std::vector<float> keyTokenMean(const float* k, int64_t nKv, int64_t d, DType inputType) {
  // Upstream casts float32 inputs to float16 first, so float32 captures are rounded like float16 ones.
  std::vector<double> acc(d, 0.0);
  for (int64_t r = 0; r < nKv; ++r) {
    const float* row = k + r * d;
    if (inputType == DType::BFloat16)  // one loop per type, so that each vectorises
      for (int64_t c = 0; c < d; ++c) acc[c] += roundToBf16(row[c]);
    else
      for (int64_t c = 0; c < d; ++c) acc[c] += roundToHalf(row[c]);
  }
  std::vector<float> mean(d);
  for (int64_t c = 0; c < d; ++c) mean[c] = roundToInput(float(acc[c] / double(nKv)), inputType);
  return mean;
}

BlockStats computeBlockStats(const float* q, int64_t nQ, const float* k, int64_t nKv, int64_t d,
                             DType inputType, const Geometry& geometry, bool smoothK, bool causal,
                             const Window& window) {
  BlockStats st;
  st.geometry = geometry;
  st.causal = causal;
  st.window = window;
  st.nq = int(ceilDiv(nQ, geometry.blockQ));
  st.nk = int(ceilDiv(nKv, geometry.blockK));

  if (smoothK) st.keyMean = keyTokenMean(k, nKv, d, inputType);
  BlockPass pq = blockPass(q, nQ, d, geometry.blockQ, nullptr, inputType);
  BlockPass pk = blockPass(k, nKv, d, geometry.blockK, smoothK ? st.keyMean.data() : nullptr, inputType);
  st.selfSimQ = std::move(pq.selfSim);
  st.selfSimK = std::move(pk.selfSim);

  // The predictor always scales by D^-0.5, whatever softmax scale the attention uses.
  const float predictorScale = float(1.0 / std::sqrt(double(d)));
  st.scores.resize(size_t(st.nq) * st.nk);
  for (int i = 0; i < st.nq; ++i) {
    const float* a = pq.pooled.data() + size_t(i) * d;
    for (int j = 0; j < st.nk; ++j) {
      const float* b = pk.pooled.data() + size_t(j) * d;
      float dot = 0.0f;
      for (int64_t c = 0; c < d; ++c) dot += a[c] * b[c];
      st.scores[size_t(i) * st.nk + j] =
          roundToInput(roundToInput(dot, inputType) * predictorScale, inputType);
    }
  }
  return st;
}

namespace {

// One q-block row of Stage 1: the softmax of its predicted scores `row` (masked blocks -inf, largest
// `rowMax`) rounded to float16 into `prob`, its blocks by descending probability into `order`, and how
// many of them the row keeps (CDF up to tau, or top-k), at least one.
int rankRowBlocks(const std::vector<float>& row, float rowMax, const HeadParams& p, float* prob,
                  std::vector<int>& order) {
  const int nk = int(row.size());
  int keep = nk;
  if (rowMax == kNegInf) {
    // softmax of an all -inf row is NaN everywhere, and searchsorted on NaN keeps every block.
    std::fill(prob, prob + nk, std::numeric_limits<float>::quiet_NaN());
    std::iota(order.begin(), order.end(), 0);
  } else {
    float denom = 0.0f;
    for (int j = 0; j < nk; ++j) denom += std::exp(row[j] - rowMax);
    for (int j = 0; j < nk; ++j) prob[j] = roundToHalf(std::exp(row[j] - rowMax) / denom);
    std::iota(order.begin(), order.end(), 0);
    // Descending by probability; ties broken by index so results are deterministic.
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return prob[a] > prob[b]; });
    if (p.mode == SelectMode::Cdf) {
      float cdf = 0.0f;
      keep = 0;
      const float tau = float(p.tau);
      for (int r = 0; r < nk; ++r) {
        cdf += prob[order[r]];
        if (roundToHalf(cdf) <= tau)
          keep = r + 1;
        else
          break;
      }
    } else {
      keep = int(std::trunc(float(p.topk) * float(nk)));
    }
  }
  // An all-masked row only happens when every valid block of the row is forced on anyway.
  if (rowMax == kNegInf) keep = nk;
  return std::clamp(keep, 1, nk);
}

}  // namespace

Stage1Mask selectBlocks(const BlockStats& st, const HeadParams& p, const ForcedBlocks& forced, int64_t nQ,
                        int64_t nKv) {
  const int nq = st.nq, nk = st.nk;
  const Geometry& g = st.geometry;
  // Probabilities are rounded to float16 (the softmax output dtype of fp16 inputs; for bf16 inputs
  // upstream rounds to bf16, which only moves near-ties).
  Stage1Mask m;
  m.mask.assign(size_t(nq) * nk, 0);
  m.reasons.assign(size_t(nq) * nk, 0);
  m.pooledProb.assign(size_t(nq) * nk, 0.0f);
  m.similarQ.resize(nq);
  m.similarK.resize(nk);
  // NaN compares false, so partial and zero-row blocks are never similar.
  for (int i = 0; i < nq; ++i) m.similarQ[i] = st.selfSimQ[i] > float(p.theta);
  for (int j = 0; j < nk; ++j) m.similarK[j] = st.selfSimK[j] > float(p.theta);

  std::vector<float> row(nk);
  std::vector<int> order(nk);
  for (int i = 0; i < nq; ++i) {
    uint8_t* mrow = m.mask.data() + size_t(i) * nk;
    uint8_t* rrow = m.reasons.data() + size_t(i) * nk;
    float* prow = m.pooledProb.data() + size_t(i) * nk;
    float rowMax = kNegInf;
    for (int j = 0; j < nk; ++j) {
      const bool masked = !m.similarK[j] || !blockValid(i, j, g, nQ, nKv, st.causal, st.window);
      row[j] = masked ? kNegInf : st.scores[size_t(i) * nk + j];
      rowMax = std::max(rowMax, row[j]);
    }
    const int keep = rankRowBlocks(row, rowMax, p, prow, order);

    // In an all-masked row upstream's searchsorted keeps every block, but the blocks that end up on are
    // exactly the forced (non-similar) valid columns, so they are reported as forced, not as selected.
    if (rowMax != kNegInf)
      for (int r = 0; r < keep; ++r) rrow[order[r]] |= kReasonSelected;
    for (int j = 0; j < nk; ++j) {
      if (!m.similarK[j]) rrow[j] |= kReasonForcedCol;
      if (!m.similarQ[i]) rrow[j] |= kReasonForcedRow;
      if (p.dense) rrow[j] |= kReasonDenseHead;
      if (forced.sink && j == 0) rrow[j] |= kReasonSink;
      if (forced.diagonal && blockOnDiagonal(i, j, g, nQ, nKv, st.causal, st.window))
        rrow[j] |= kReasonDiagonal;
      bool on = (rrow[j] & (kReasonSelected | kReasonForcedCol | kReasonForcedRow | kReasonDenseHead |
                            kReasonSink | kReasonDiagonal)) != 0;
      // Invalid blocks (causal rule or window) go off after forcing, whatever put them on.
      if (!blockValid(i, j, g, nQ, nKv, st.causal, st.window)) {
        rrow[j] |= kReasonCausalOff;
        on = false;
      }
      mrow[j] = on ? 1 : 0;
    }
  }
  return m;
}

void encodeLutRow(const uint8_t* maskRow, int nk, int32_t* lut, int32_t* validCount) {
  int32_t count = 0, prev = 0;
  for (int j = 0; j < nk; ++j) lut[j] = 0;
  for (int j = 0; j < nk; ++j) {
    if (!maskRow[j]) continue;
    lut[count] = count == 0 ? j : j - prev;
    prev = j;
    ++count;
  }
  *validCount = count;
}

}  // namespace sparge::core
