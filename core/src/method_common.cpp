// What the block predictors share (method_common.h).
#include "method_common.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "sparge/core/quant.h"
#include "sparge/core/result.h"

namespace sparge::core::methods {

std::vector<float> roundedRows(const float* x, int64_t n, int64_t d, DType t) {
  std::vector<float> out(static_cast<size_t>(n * d));
  for (int64_t i = 0; i < n * d; ++i) out[size_t(i)] = roundToInput(x[i], t);
  return out;
}

float dot(const float* a, const float* b, int64_t d) {
  float s = 0.0f;
  for (int64_t c = 0; c < d; ++c) s += a[c] * b[c];
  return s;
}

std::vector<float> meanRows(const float* x, int64_t r0, int64_t r1, int64_t d, float divisor, DType t) {
  std::vector<float> sum(size_t(d), 0.0f);
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t c = 0; c < d; ++c) sum[size_t(c)] += x[r * d + c];
  for (float& v : sum) v = roundToInput(v / divisor, t);
  return sum;
}

namespace {

// The first query of [q0, q1) whose last visible key is >= k (q1 when none): visible ranges only move right
// as the query grows.
int64_t firstReaching(int64_t q0, int64_t q1, int64_t k, int64_t nKv, bool causal, const Window& w) {
  int64_t lo = q0, hi = q1;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (visibleKeys(mid, nKv, causal, w).last >= k)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

// The last query of [q0, q1) whose first visible key is <= k (q0 - 1 when none).
int64_t lastStarting(int64_t q0, int64_t q1, int64_t k, int64_t nKv, bool causal, const Window& w) {
  int64_t lo = q0, hi = q1;  // the first query whose first key is > k
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (visibleKeys(mid, nKv, causal, w).first > k)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo - 1;
}

}  // namespace

int64_t queriesSeeing(int64_t k, int64_t q0, int64_t q1, int64_t nKv, bool causal, const Window& w) {
  const int64_t first = firstReaching(q0, q1, k, nKv, causal, w);
  const int64_t last = lastStarting(q0, q1, k, nKv, causal, w);
  return std::max<int64_t>(0, last - first + 1);
}

KeyRange keysSeenBy(int64_t q0, int64_t q1, int64_t nKv, bool causal, const Window& w) {
  KeyRange out{0, -1};
  bool any = false;
  for (int64_t q = q0; q < q1; ++q) {
    const KeyRange r = visibleKeys(q, nKv, causal, w);
    if (r.empty()) continue;
    out.first = any ? std::min(out.first, r.first) : r.first;
    out.last = any ? std::max(out.last, r.last) : r.last;
    any = true;
  }
  return out;
}

bool diagonalVisible(int64_t o, bool causal, const Window& w) {
  const int64_t right = causal ? 0 : w.right;
  return (right < 0 || o >= -right) && (w.left < 0 || o <= w.left);
}

namespace {

template <class T>
std::vector<int> rank(const T* v, int n) {
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [v](int a, int b) { return rankedBefore(v[a], v[b]); });
  return order;
}

}  // namespace

std::vector<int> rankDescending(const float* values, int n) {
  return rank(values, n);
}
std::vector<int> rankDescending(const double* values, int n) {
  return rank(values, n);
}

void finishMask(Stage1Mask& m, const PredictInput& in, const std::vector<uint8_t>& selected,
                const std::vector<uint8_t>& methodForced, bool denseHead, const ForcedBlocks& forced) {
  const int nq = blocksQ(in), nk = blocksK(in);
  m.mask.assign(size_t(nq) * nk, 0);
  m.reasons.assign(size_t(nq) * nk, 0);
  constexpr uint8_t kOn = kReasonSelected | kReasonMethod | kReasonDenseHead | kReasonSink | kReasonDiagonal;
  for (int i = 0; i < nq; ++i)
    for (int j = 0; j < nk; ++j) {
      const size_t x = size_t(i) * nk + j;
      uint8_t r = (selected[x] ? kReasonSelected : 0) | (methodForced[x] ? kReasonMethod : 0) |
                  (denseHead ? kReasonDenseHead : 0) | (forced.sink && j == 0 ? kReasonSink : 0);
      if (forced.diagonal && blockOnDiagonal(i, j, in.geometry, in.nQ, in.nKv, in.causal, in.window))
        r |= kReasonDiagonal;
      bool on = (r & kOn) != 0;
      if (!in.validity->valid[x]) {
        r |= kReasonCausalOff;
        on = false;
      }
      m.reasons[x] = r;
      m.mask[x] = on ? 1 : 0;
    }
}

}  // namespace sparge::core::methods
