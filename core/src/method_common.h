// Private: what the block predictors of method.h share: rounded copies of a head's rows, which queries see
// which keys, ranking with deterministic ties, and the final mask with its reasons.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "sparge/core/predictor.h"

namespace sparge::core::methods {

// Rows [n, d] rounded to the run's input type (float32 captures to float16), as the GPU holds them.
std::vector<float> roundedRows(const float* x, int64_t n, int64_t d, DType t);

// Σ a[c]·b[c] in float, in index order.
float dot(const float* a, const float* b, int64_t d);

// The mean of rows [r0, r1) of x [n, d], summed in float and divided by `divisor`, rounded to `t`.
std::vector<float> meanRows(const float* x, int64_t r0, int64_t r1, int64_t d, float divisor, DType t);

// How many queries of [q0, q1) see key k (visibleKeys, top-left aligned).
int64_t queriesSeeing(int64_t k, int64_t q0, int64_t q1, int64_t nKv, bool causal, const Window& w);
// The keys visible to at least one query of [q0, q1): [first, last] (empty when first > last). Consecutive
// queries' ranges overlap or touch, so their union is one range.
KeyRange keysSeenBy(int64_t q0, int64_t q1, int64_t nKv, bool causal, const Window& w);
// True when pair (q, q - o) is allowed by causal and the window whatever q is (it lies on diagonal o).
bool diagonalVisible(int64_t o, bool causal, const Window& w);

// rankDescending's order of two values: larger first, NaN last.
template <class T>
bool rankedBefore(T a, T b) {
  return !std::isnan(a) && (std::isnan(b) || a > b);
}
// Indices [0, n) ordered by value descending, ties to the lower index (NaN last).
std::vector<int> rankDescending(const float* values, int n);
std::vector<int> rankDescending(const double* values, int n);

// The final mask of one head: `selected` and `methodForced` ([nq * nk]) as the method chose them, then the
// dense head, the sink, the diagonal, and invalid blocks off, with their reason bits (as selectBlocks).
void finishMask(Stage1Mask& m, const PredictInput& in, const std::vector<uint8_t>& selected,
                const std::vector<uint8_t>& methodForced, bool denseHead, const ForcedBlocks& forced);

// Grid sizes of the run's geometry.
inline int blocksQ(const PredictInput& in) {
  return int(ceilDiv(in.nQ, in.geometry.blockQ));
}
inline int blocksK(const PredictInput& in) {
  return int(ceilDiv(in.nKv, in.geometry.blockK));
}

}  // namespace sparge::core::methods
