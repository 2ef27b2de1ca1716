// core::blockValid and core::blockOnDiagonal (core/src/stage1.cpp) for host and device code alike, so that
// the whole call derives a geometry's block flags on the device, step for step as the engines' host code
// does (tests/capi checks them against core's for many shapes and windows).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define SPARGE_HD __host__ __device__ __forceinline__
#else
#define SPARGE_HD inline
#endif

namespace sparge::cuda {

// core::visibleKeys: the keys [first, last] query `query` sees; window bounds -1 = unbounded.
struct KeySpan {
  int64_t first, last;
};
SPARGE_HD KeySpan visibleKeySpan(int64_t query, int64_t nKv, bool causal, int64_t left, int64_t right) {
  KeySpan r{0, nKv - 1};
  const int64_t rightBound = causal ? 0 : right;  // causal is right = 0, whatever the window says
  if (rightBound >= 0 && query + rightBound < r.last) r.last = query + rightBound;
  if (left >= 0 && query - left > 0) r.first = query - left;
  return r;
}

// The tile geometry and the visibility rule of an entry.
struct BlockRule {
  int BQ, BK;
  int64_t nQ, nKv;
  bool causal;
  int64_t left, right;  // window; -1 = unbounded

  SPARGE_HD KeySpan keys(int64_t q) const { return visibleKeySpan(q, nKv, causal, left, right); }

  // Block (i, j) holds a (query, key) pair the rule allows.
  SPARGE_HD bool valid(int i, int j) const {
    const int64_t q0 = int64_t(i) * BQ, k0 = int64_t(j) * BK;
    const int64_t q1 = q0 + BQ < nQ ? q0 + BQ : nQ, k1 = k0 + BK < nKv ? k0 + BK : nKv;
    if (q1 <= q0 || k1 <= k0) return false;
    if (!causal && left < 0 && right < 0) return true;
    // Both ends of a query's range never decrease as the query grows (top-left alignment): the first query
    // whose range reaches k0 is the one most likely to also start before k1.
    int64_t lo = q0, hi = q1;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (keys(mid).last >= k0)
        hi = mid;
      else
        lo = mid + 1;
    }
    if (lo >= q1) return false;
    const KeySpan r = keys(lo);
    const int64_t first = r.first > k0 ? r.first : k0, last = r.last < k1 - 1 ? r.last : k1 - 1;
    return last >= first;
  }

  // Block (i, j) holds a visible pair with key == query.
  SPARGE_HD bool onDiagonal(int i, int j) const {
    const int64_t q0 = int64_t(i) * BQ, k0 = int64_t(j) * BK;
    const int64_t q1 = q0 + BQ < nQ ? q0 + BQ : nQ, k1 = k0 + BK < nKv ? k0 + BK : nKv;
    const int64_t first = q0 > k0 ? q0 : k0, last = (q1 < k1 ? q1 : k1) - 1;
    for (int64_t t = first; t <= last; ++t) {
      const KeySpan r = keys(t);
      if (r.first <= t && t <= r.last) return true;
    }
    return false;
  }
};

}  // namespace sparge::cuda
