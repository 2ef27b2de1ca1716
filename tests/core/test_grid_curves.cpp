// Tests of the grid orders behind --permute: bijections for every size (odd, prime, with and without tokens
// off the grid), the locality the generalized Hilbert construction guarantees, and the classic Hilbert curve
// for powers of two (an independent textbook oracle).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <tuple>
#include <vector>

#include "sparge/core/permutation.h"
#include "test_util.h"

using namespace sparge::core;
using sparge::test::expectError;

namespace {

struct Cell {
  int64_t t, h, w;
};
Cell cellOf(int64_t index, int64_t H, int64_t W) {
  return {index / (H * W), (index / W) % H, index % W};
}

// Every index 0 … n−1 exactly once.
bool isBijection(const std::vector<int64_t>& order, int64_t n) {
  if (int64_t(order.size()) != n) return false;
  std::vector<char> seen(size_t(n), 0);
  for (int64_t v : order) {
    if (v < 0 || v >= n || seen[size_t(v)]) return false;
    seen[size_t(v)] = 1;
  }
  return true;
}

// Steps of the curve that do not move to a face-adjacent cell (Manhattan distance 1), and the largest
// step (Chebyshev distance).
struct Steps {
  int notFaceAdjacent = 0;
  int64_t maxChebyshev = 0;
};
Steps stepsOf(const std::vector<int64_t>& order, int64_t H, int64_t W) {
  Steps s;
  for (size_t i = 1; i < order.size(); ++i) {
    const Cell a = cellOf(order[i - 1], H, W), b = cellOf(order[i], H, W);
    const int64_t dt = std::llabs(a.t - b.t), dh = std::llabs(a.h - b.h), dw = std::llabs(a.w - b.w);
    if (dt + dh + dw != 1) ++s.notFaceAdjacent;
    s.maxChebyshev = std::max({s.maxChebyshev, dt, dh, dw});
  }
  return s;
}

// The textbook Hilbert curve of an n × n grid (n a power of two): index d → (x, y), the iterative
// rotate-and-flip algorithm.
std::pair<int64_t, int64_t> hilbertD2xy(int64_t n, int64_t d) {
  int64_t x = 0, y = 0, t = d;
  for (int64_t s = 1; s < n; s *= 2) {
    const int64_t rx = 1 & (t / 2), ry = 1 & (t ^ rx);
    if (ry == 0) {
      if (rx == 1) {
        x = s - 1 - x;
        y = s - 1 - y;
      }
      std::swap(x, y);
    }
    x += s * rx;
    y += s * ry;
    t /= 4;
  }
  return {x, y};
}

}  // namespace

TEST(GridOrder, EveryOrderIsABijectionForOddPrimeAndEvenSizes) {
  for (Permutation p : {Permutation::RowMajor, Permutation::TimeMajor, Permutation::Hilbert})
    for (int64_t t : {1, 2, 3, 5, 7})
      for (int64_t h = 1; h <= 13; ++h)
        for (int64_t w : {1, 2, 3, 4, 5, 6, 7, 9, 11, 13, 16, 17}) {
          const std::vector<int64_t> order = gridOrder(t, h, w, p);
          ASSERT_TRUE(isBijection(order, t * h * w)) << toString(p) << " " << t << "x" << h << "x" << w;
        }
  // Sizes of real video latents (CogVideoX 13x30x45, Wan 21x30x52) and large primes.
  for (auto [t, h, w] : {std::tuple<int64_t, int64_t, int64_t>{13, 30, 45},
                         {21, 30, 52},
                         {7, 31, 37},
                         {1, 97, 89},
                         {29, 1, 31}})
    ASSERT_TRUE(isBijection(gridOrder(t, h, w, Permutation::Hilbert), t * h * w))
        << t << "x" << h << "x" << w;
}

TEST(GridOrder, RowMajorIsTheIdentityAndTimeMajorWalksFramesFastest) {
  const std::vector<int64_t> rm = gridOrder(3, 4, 5, Permutation::RowMajor);
  for (int64_t i = 0; i < 60; ++i) EXPECT_EQ(rm[size_t(i)], i);
  const std::vector<int64_t> tm = gridOrder(3, 4, 5, Permutation::TimeMajor);
  // Hand-computed: position 0..2 are (t, 0, 0) for t = 0, 1, 2 → indices 0, 20, 40; then (t, 0, 1).
  EXPECT_EQ(std::vector<int64_t>(tm.begin(), tm.begin() + 6), (std::vector<int64_t>{0, 20, 40, 1, 21, 41}));
  EXPECT_EQ(tm.back(), 59);
}

TEST(GridOrder, HilbertOnPowersOfTwoIsTheTextbookCurve) {
  for (int64_t n : {2, 4, 8, 16, 32}) {
    const std::vector<int64_t> order = gridOrder(1, n, n, Permutation::Hilbert);
    for (int64_t d = 0; d < n * n; ++d) {
      const auto [x, y] = hilbertD2xy(n, d);
      // Our index is h·W + w with w the curve's first axis.
      ASSERT_EQ(order[size_t(d)], y * n + x) << "n " << n << " d " << d;
    }
  }
}

// The 2-D construction moves to a face-adjacent cell at every step, except one diagonal step that no curve
// between those corners can avoid when the longer side is odd and the shorter even (docs/permutation.md).
TEST(GridOrder, HilbertInTwoDimensionsStepsToNeighbours) {
  for (int64_t h = 1; h <= 40; ++h)
    for (int64_t w = 1; w <= 40; ++w) {
      const Steps s = stepsOf(gridOrder(1, h, w, Permutation::Hilbert), h, w);
      const int64_t longer = std::max(h, w), shorter = std::min(h, w);
      const bool parityForcesDiagonal = longer % 2 == 1 && shorter % 2 == 0;
      EXPECT_LE(s.notFaceAdjacent, parityForcesDiagonal ? 1 : 0) << h << "x" << w;
      EXPECT_LE(s.maxChebyshev, 1) << h << "x" << w;
    }
}

// In 3-D the construction guarantees face-adjacent steps for even sides; every size still gives a
// bijection (above) whose steps stay short.
TEST(GridOrder, HilbertInThreeDimensionsStepsToNeighboursOnEvenSides) {
  for (int64_t t = 2; t <= 12; t += 2)
    for (int64_t h = 2; h <= 12; h += 2)
      for (int64_t w = 2; w <= 16; w += 2) {
        const Steps s = stepsOf(gridOrder(t, h, w, Permutation::Hilbert), h, w);
        EXPECT_EQ(s.notFaceAdjacent, 0) << t << "x" << h << "x" << w;
      }
}

TEST(GridOrder, HilbertStartsAtTheFirstCellAndIsDeterministic) {
  for (auto [t, h, w] : {std::tuple<int64_t, int64_t, int64_t>{13, 30, 45}, {4, 6, 8}, {1, 7, 5}}) {
    const std::vector<int64_t> a = gridOrder(t, h, w, Permutation::Hilbert);
    EXPECT_EQ(a.front(), 0);
    EXPECT_EQ(a, gridOrder(t, h, w, Permutation::Hilbert));
  }
}

TEST(GridOrder, BadSidesAreRefused) {
  expectError([] { gridOrder(0, 4, 4, Permutation::Hilbert); }, {"at least 1"});
}
