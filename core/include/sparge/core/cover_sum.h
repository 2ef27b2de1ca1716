// Exact running sums for FlexPrefill's γ counts ("how many of the largest scores keep their running sum
// <= γ"), shared by the CPU predictor and the CUDA kernels (constexpr, so device code calls it too).
//
// Each score v >= 0 becomes the integer floor(v · 2^k), k chosen from the threshold's multiplier so that the
// threshold lies near 2^39, and sums are exact 64-bit integer sums: the count does not depend on the order in
// which values are added, so a GPU can find it with a block-wide prefix sum instead of a sequential fp32
// chain, and both engines agree bit for bit. Against real sums the truncation errs by under 2^-k a value
// (2^-39 for the line scores, whose threshold is γ itself), far below an fp32 running sum's rounding.
// Scores whose weight would reach kCoverCap (and +inf, NaN) weigh kCoverCap, more than any threshold: such a
// score ends the count where it is reached. A count stops at the first sum past the threshold, so its sums
// stay under 2 · kCoverCap, and a sum over any chunk of up to 2^23 weights fits 64 bits.
#pragma once

#include <cstdint>

namespace sparge::core {

constexpr uint64_t kCoverCap = uint64_t(1) << 40;

// k for a threshold γ · mul with γ <= 1: 39 less the bits of mul (mul >= 1; 1 for the lines, the query block
// count for the pooled scores).
constexpr int coverShift(double mul) {
  int bits = 0;
  while (bits < 39 && double(uint64_t(1) << bits) < mul) ++bits;
  return 39 - bits;
}

// The weight of one score: floor(v · 2^k), kCoverCap from kCoverCap on (and for +inf and NaN), 0 for v <= 0.
constexpr uint64_t coverWeight(float v, int shift) {
  if (v != v) return kCoverCap;
  if (!(v > 0.f)) return 0;
  const float scaled = v * float(uint64_t(1) << shift);  // exact: a power of two, and no overflow below 2^40
  return scaled >= float(kCoverCap) ? kCoverCap : uint64_t(scaled);
}

// The threshold in weights: floor(t · 2^k), capped below kCoverCap; -1 (nothing fits) for t < 0 or NaN.
constexpr int64_t coverLimit(double threshold, int shift) {
  const double scaled = threshold * double(uint64_t(1) << shift);
  if (!(scaled >= 0.0)) return -1;
  return scaled >= double(kCoverCap) ? int64_t(kCoverCap) - 1 : int64_t(scaled);
}

}  // namespace sparge::core
