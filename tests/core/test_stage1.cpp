// Stage 1 rules (docs/method.md) and block validity on hand-made inputs whose answer is known.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "sparge/core/result.h"
#include "sparge/core/stage1.h"

using namespace sparge::core;

namespace {

// A block-statistics object with chosen scores and similarity, bypassing the pooling pass.
BlockStats handMade(int nq, int nk, Geometry g, bool causal, std::vector<float> scores, Window window = {}) {
  BlockStats st;
  st.nq = nq;
  st.nk = nk;
  st.geometry = g;
  st.causal = causal;
  st.window = window;
  st.selfSimQ.assign(nq, 1.0f);
  st.selfSimK.assign(nk, 1.0f);
  st.scores = std::move(scores);
  return st;
}

HeadParams cdf(double theta, double tau) {
  HeadParams p;
  p.theta = theta;
  p.tau = tau;
  return p;
}

HeadParams topk(double theta, double k) {
  HeadParams p;
  p.theta = theta;
  p.mode = SelectMode::TopK;
  p.topk = k;
  return p;
}

std::vector<float> logProbs(std::vector<double> p) {
  std::vector<float> s;
  for (double x : p) s.push_back(float(std::log(x)));
  return s;
}

// The visibility rule written out independently of core::visibleKeys: top-left aligned, causal keeps
// keys <= query, a window keeps query - left <= key <= query + right (-1 = no bound on that side).
bool seesRef(int64_t q, int64_t k, int64_t nKv, bool causal, Window w) {
  if (k < 0 || k >= nKv) return false;
  if (causal && k > q) return false;
  if (w.right >= 0 && k > q + w.right) return false;
  if (w.left >= 0 && k < q - w.left) return false;
  return true;
}

struct BlockRef {
  double area = 0;
  bool diagonal = false;
};

BlockRef bruteForce(int i, int j, Geometry g, int64_t nQ, int64_t nKv, bool causal, Window w) {
  BlockRef r;
  for (int64_t q = int64_t(i) * g.blockQ; q < std::min<int64_t>(nQ, int64_t(i + 1) * g.blockQ); ++q)
    for (int64_t k = int64_t(j) * g.blockK; k < int64_t(j + 1) * g.blockK; ++k) {
      if (!seesRef(q, k, nKv, causal, w)) continue;
      r.area += 1;
      r.diagonal = r.diagonal || k == q;
    }
  return r;
}

}  // namespace

TEST(Stage1, CdfKeepsBlocksWhileCumulativeSumStaysAtOrBelowTau) {
  // Probabilities 0.5, 0.3, 0.15, 0.05 (in shuffled column order 2, 0, 3, 1).
  BlockStats st = handMade(1, 4, kGeometry128x64, false, logProbs({0.3, 0.05, 0.5, 0.15}));
  auto m = selectBlocks(st, cdf(0.0, 0.85), {}, 128, 256);
  EXPECT_EQ(m.mask, (std::vector<uint8_t>{1, 0, 1, 0}));  // cdf 0.5, 0.8 <= 0.85; 0.95 is not taken
  m = selectBlocks(st, cdf(0.0, 0.96), {}, 128, 256);
  EXPECT_EQ(m.mask, (std::vector<uint8_t>{1, 0, 1, 1}));
  // τ below the largest probability still keeps one block.
  m = selectBlocks(st, cdf(0.0, 0.1), {}, 128, 256);
  EXPECT_EQ(m.mask, (std::vector<uint8_t>{0, 0, 1, 0}));
  EXPECT_NEAR(m.pooledProb[2], 0.5, 1e-3);
  EXPECT_TRUE(m.reasons[2] & kReasonSelected);
  EXPECT_FALSE(m.reasons[1] & kReasonSelected);
}

TEST(Stage1, TopKKeepsTruncatedFractionOfAllBlocksAndAtLeastOne) {
  std::vector<double> p;
  for (int j = 0; j < 10; ++j) p.push_back(double(j + 1) / 55.0);  // column 9 largest
  BlockStats st = handMade(1, 10, kGeometry128x64, false, logProbs(p));
  auto m = selectBlocks(st, topk(0.0, 0.25), {}, 128, 640);  // trunc(2.5) = 2
  EXPECT_EQ(m.mask, (std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 0, 0, 1, 1}));
  m = selectBlocks(st, topk(0.0, 0.05), {}, 128, 640);  // trunc(0.5) = 0 -> 1
  EXPECT_EQ(m.mask, (std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 0, 0, 0, 1}));
  m = selectBlocks(st, topk(0.0, 1.0), {}, 128, 640);
  EXPECT_EQ(std::count(m.mask.begin(), m.mask.end(), 1), 10);
}

TEST(Stage1, NonSimilarRowsAndColumnsAreForcedOn) {
  BlockStats st = handMade(3, 4, kGeometry128x64, false,
                           logProbs({0.97, 0.01, 0.01, 0.01,  //
                                     0.97, 0.01, 0.01, 0.01,  //
                                     0.97, 0.01, 0.01, 0.01}));
  st.selfSimK[2] = 0.2f;  // column 2 not similar at θ = 0.5
  st.selfSimQ[1] = 0.4f;  // row 1 not similar
  auto m = selectBlocks(st, cdf(0.5, 0.9), {}, 384, 256);
  EXPECT_EQ(m.mask, (std::vector<uint8_t>{1, 0, 1, 0,  //
                                          1, 1, 1, 1,  //
                                          1, 0, 1, 0}));
  EXPECT_TRUE(m.reasons[2] & kReasonForcedCol);
  EXPECT_TRUE(m.reasons[4 + 3] & kReasonForcedRow);
  EXPECT_EQ(m.similarK[2], 0);
  EXPECT_EQ(m.similarQ[1], 0);
  // The similarity test is strict: s == θ is not similar.
  st.selfSimK[3] = 0.5f;
  m = selectBlocks(st, cdf(0.5, 0.9), {}, 384, 256);
  EXPECT_EQ(m.mask[3], 1);
}

TEST(Stage1, CausalRuleAppliesAfterForcingBothGeometries) {
  // 128x64, Nq = Nkv = 256: row 0 covers queries 0..127 -> key blocks 0, 1 valid.
  BlockStats st = handMade(2, 4, kGeometry128x64, true, std::vector<float>(8, 0.0f));
  st.selfSimK[3] = 0.0f;  // forced column 3: must still be removed from row 0
  auto m = selectBlocks(st, cdf(0.5, 1.0), {}, 256, 256);
  EXPECT_EQ(m.mask, (std::vector<uint8_t>{1, 1, 0, 0,  //
                                          1, 1, 1, 1}));
  EXPECT_TRUE(m.reasons[3] & kReasonCausalOff);
  EXPECT_TRUE(m.reasons[3] & kReasonForcedCol);
  // 64x128, Nq = 256, Nkv = 512: row i covers queries 64i..64i+63; key block j starts at 128j.
  BlockStats st2 = handMade(4, 4, kGeometry64x128, true, std::vector<float>(16, 0.0f));
  auto m2 = selectBlocks(st2, cdf(0.5, 1.0), {}, 256, 512);
  EXPECT_EQ(m2.mask, (std::vector<uint8_t>{1, 0, 0, 0,  //
                                           1, 0, 0, 0,  //
                                           1, 1, 0, 0,  //
                                           1, 1, 0, 0}));
  // Nq = 130 (partial last Q block): block (1, 3) starts at key 192 > last query 129 -> invalid.
  EXPECT_TRUE(blockValid(1, 2, kGeometry128x64, 130, 256, true));
  EXPECT_FALSE(blockValid(1, 3, kGeometry128x64, 130, 256, true));
}

TEST(Stage1, RowWithEveryKeyBlockForcedReportsForcedNotSelected) {
  // Every K block non-similar: the masked row is all -inf (NaN probabilities), every valid block is on,
  // and the reason shown to users is the forced column, not a selection.
  BlockStats st = handMade(2, 4, kGeometry128x64, true, logProbs({0.4, 0.3, 0.2, 0.1, 0.4, 0.3, 0.2, 0.1}));
  st.selfSimK.assign(4, 0.1f);
  auto m = selectBlocks(st, cdf(0.5, 0.5), {}, 256, 256);
  EXPECT_EQ(m.mask, (std::vector<uint8_t>{1, 1, 0, 0, 1, 1, 1, 1}));
  for (int x = 0; x < 8; ++x) {
    EXPECT_FALSE(m.reasons[x] & kReasonSelected) << x;
    EXPECT_TRUE(m.reasons[x] & kReasonForcedCol) << x;
  }
  EXPECT_TRUE(std::isnan(m.pooledProb[0]));
}

TEST(Stage1, SinkTurnsOnKeyBlockZeroForEveryRow) {
  BlockStats st =
      handMade(2, 4, kGeometry128x64, false, logProbs({0.01, 0.01, 0.01, 0.97, 0.01, 0.01, 0.01, 0.97}));
  auto m = selectBlocks(st, cdf(0.5, 0.5), {.sink = true}, 256, 256);
  EXPECT_EQ(m.mask, (std::vector<uint8_t>{1, 0, 0, 1, 1, 0, 0, 1}));
  EXPECT_TRUE(m.reasons[0] & kReasonSink);
  m = selectBlocks(st, cdf(0.5, 0.5), {}, 256, 256);
  EXPECT_EQ(m.mask[0], 0);
}

TEST(Stage1, DenseHeadSelectsEveryValidBlock) {
  BlockStats st =
      handMade(2, 4, kGeometry128x64, true, logProbs({0.97, 0.01, 0.01, 0.01, 0.97, 0.01, 0.01, 0.01}));
  HeadParams p = cdf(0.5, 0.5);
  p.dense = true;
  auto m = selectBlocks(st, p, {}, 256, 256);
  EXPECT_EQ(m.mask, (std::vector<uint8_t>{1, 1, 0, 0, 1, 1, 1, 1}));
}

TEST(Stage1, PartialAndZeroRowBlocksAreNotSimilar) {
  // 200 identical rows: every full block has s = 1; the partial last block is NaN (non-similar).
  const int64_t n = 200, d = 8;
  std::vector<float> q(n * d), k(n * d);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < d; ++c) {
      q[r * d + c] = c == 0 ? 1.0f : 0.5f;
      k[r * d + c] = c == 1 ? 1.0f : 0.25f;
    }
  BlockStats st =
      computeBlockStats(q.data(), n, k.data(), n, d, DType::Float16, kGeometry128x64, false, false);
  ASSERT_EQ(st.nq, 2);
  ASSERT_EQ(st.nk, 4);
  EXPECT_NEAR(st.selfSimQ[0], 1.0f, 1e-3);
  EXPECT_TRUE(std::isnan(st.selfSimQ[1]));  // rows 128..199: partial
  EXPECT_NEAR(st.selfSimK[2], 1.0f, 1e-3);
  EXPECT_TRUE(std::isnan(st.selfSimK[3]));  // rows 192..199: partial
  // A zero row inside a full block makes it non-similar too.
  for (int64_t c = 0; c < d; ++c) k[70 * d + c] = 0.0f;
  st = computeBlockStats(q.data(), n, k.data(), n, d, DType::Float16, kGeometry128x64, false, false);
  EXPECT_TRUE(std::isnan(st.selfSimK[1]));
  EXPECT_NEAR(st.selfSimK[0], 1.0f, 1e-3);
}

TEST(Stage1, SmoothKRemovesTheCommonMean) {
  // K = common mean + alternating ±e: unsmoothed rows are nearly parallel (s ~ 1); after subtracting
  // the mean the rows alternate ±e, whose unit vectors cancel (s ~ 0).
  const int64_t n = 128, d = 4;
  std::vector<float> q(n * d, 1.0f), k(n * d);
  for (int64_t r = 0; r < n; ++r) {
    k[r * d + 0] = 8.0f;
    k[r * d + 1] = 8.0f;
    k[r * d + 2] = (r % 2) ? 0.5f : -0.5f;
    k[r * d + 3] = 0.0f;
  }
  BlockStats off =
      computeBlockStats(q.data(), n, k.data(), n, d, DType::Float16, kGeometry128x64, false, false);
  BlockStats on =
      computeBlockStats(q.data(), n, k.data(), n, d, DType::Float16, kGeometry128x64, true, false);
  EXPECT_GT(off.selfSimK[0], 0.99f);
  EXPECT_LT(on.selfSimK[0], 0.01f);
}

TEST(Stage1, PooledScoresUseTheBlockMeansAndPredictorScale) {
  const int64_t n = 128, d = 4;
  std::vector<float> q(n * d), k(n * d);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < d; ++c) {
      q[r * d + c] = float(c + 1);          // mean row (1, 2, 3, 4)
      k[r * d + c] = r < 64 ? 1.0f : 2.0f;  // block 0 mean (1,1,1,1), block 1 mean (2,2,2,2)
    }
  BlockStats st =
      computeBlockStats(q.data(), n, k.data(), n, d, DType::Float16, kGeometry128x64, false, false);
  // (1+2+3+4)·1 / sqrt(4) = 5, and 10·2 / 2 = 10.
  EXPECT_FLOAT_EQ(st.scores[0], 5.0f);
  EXPECT_FLOAT_EQ(st.scores[1], 10.0f);
}

TEST(Stage1, LutIsDeltaEncoded) {
  // Columns {0, 3, 4, 7} of 8: first index absolute, then gaps.
  const uint8_t row[8] = {1, 0, 0, 1, 1, 0, 0, 1};
  int32_t lut[8], count = -1;
  encodeLutRow(row, 8, lut, &count);
  EXPECT_EQ(count, 4);
  EXPECT_EQ(std::vector<int32_t>(lut, lut + 8), (std::vector<int32_t>{0, 3, 1, 3, 0, 0, 0, 0}));
}

TEST(Stage1, ValidAreaCountsRealTokenPairs) {
  // Causal, N = 256, 128x64: total valid pairs N(N+1)/2; non-causal partial blocks by real size.
  double causalArea = 0;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) causalArea += blockValidArea(i, j, kGeometry128x64, 256, 256, true);
  EXPECT_DOUBLE_EQ(causalArea, 256.0 * 257.0 / 2.0);
  EXPECT_DOUBLE_EQ(blockValidArea(1, 3, kGeometry128x64, 200, 250, false), 72.0 * 58.0);
}

TEST(BlockValidity, MatchesBruteForceForWindowsCausalAndShapes) {
  const std::vector<std::pair<int64_t, int64_t>> shapes{{256, 256}, {300, 300}, {200, 520}, {520, 200},
                                                        {1, 64},    {130, 70},  {640, 640}};
  const std::vector<Window> windows{{-1, -1}, {0, 0},   {64, 0},      {100, -1}, {-1, 37},
                                    {5, 200}, {127, 0}, {1000, 1000}, {0, -1}};
  for (Geometry g : {kGeometry128x64, kGeometry64x128})
    for (auto [nQ, nKv] : shapes)
      for (bool causal : {false, true})
        for (Window w : windows) {
          const BlockValidity all = computeBlockValidity(g, nQ, nKv, causal, w);
          ASSERT_EQ(all.nq, int(ceilDiv(nQ, g.blockQ)));
          ASSERT_EQ(all.nk, int(ceilDiv(nKv, g.blockK)));
          for (int i = 0; i < all.nq; ++i)
            for (int j = 0; j < all.nk; ++j) {
              const BlockRef ref = bruteForce(i, j, g, nQ, nKv, causal, w);
              const std::string at = g.label() + " N=" + std::to_string(nQ) + "x" + std::to_string(nKv) +
                                     (causal ? " causal" : "") + " window [" + std::to_string(w.left) + ", " +
                                     std::to_string(w.right) + "] block " + std::to_string(i) + "," +
                                     std::to_string(j);
              ASSERT_EQ(blockValid(i, j, g, nQ, nKv, causal, w), ref.area > 0) << at;
              ASSERT_EQ(blockValidArea(i, j, g, nQ, nKv, causal, w), ref.area) << at;
              ASSERT_EQ(blockOnDiagonal(i, j, g, nQ, nKv, causal, w), ref.diagonal) << at;
              ASSERT_EQ(all.valid[size_t(i) * all.nk + j], ref.area > 0) << at;
              ASSERT_EQ(all.area[size_t(i) * all.nk + j], ref.area) << at;
            }
        }
}

TEST(BlockValidity, SlidingWindowByHand) {
  // Causal, window [64, 0], N = 512, 128x64: queries 256..383 (row 2) see keys q-64..q, i.e. 192..383:
  // key blocks 3, 4, 5. Block (2, 3) holds 64 + 63 + ... + 1 pairs (queries 256..319).
  const Window w{64, 0};
  for (int j = 0; j < 8; ++j)
    EXPECT_EQ(blockValid(2, j, kGeometry128x64, 512, 512, true, w), j >= 3 && j <= 5) << j;
  EXPECT_DOUBLE_EQ(blockValidArea(2, 3, kGeometry128x64, 512, 512, true, w), 64.0 * 65.0 / 2.0);
  // Without the window the same block is full (all 128 x 64 pairs).
  EXPECT_DOUBLE_EQ(blockValidArea(2, 3, kGeometry128x64, 512, 512, true), 128.0 * 64.0);
  // Total pairs: every query sees min(q, 64) + 1 keys.
  double total = 0;
  const BlockValidity v = computeBlockValidity(kGeometry128x64, 512, 512, true, w);
  for (double a : v.area) total += a;
  EXPECT_DOUBLE_EQ(total, 64.0 * 65.0 / 2.0 + (512.0 - 64.0) * 65.0);
}

TEST(Stage1, WindowMasksScoresBeforeTheSoftmaxAndRemovesForcedBlocksOutsideIt) {
  // 4 x 8 blocks (128x64, N = 512), causal, window [64, 0]. Row 3 (queries 384..511) sees keys 320..511:
  // blocks 5, 6, 7. Block 0 has the largest score and is a forced column, but lies outside the window.
  std::vector<float> scores(32, std::log(0.01f));
  scores[3 * 8 + 0] = std::log(0.9f);
  scores[3 * 8 + 5] = std::log(0.5f);
  scores[3 * 8 + 6] = std::log(0.3f);
  scores[3 * 8 + 7] = std::log(0.2f);
  BlockStats st = handMade(4, 8, kGeometry128x64, true, scores, Window{64, 0});
  st.selfSimK[0] = 0.0f;
  auto m = selectBlocks(st, cdf(0.5, 0.5), {}, 512, 512);
  const uint8_t* row = m.mask.data() + 3 * 8;
  EXPECT_EQ(std::vector<uint8_t>(row, row + 8), (std::vector<uint8_t>{0, 0, 0, 0, 0, 1, 0, 0}));
  // The softmax runs over the window's blocks only: 0.5 / (0.5 + 0.3 + 0.2).
  EXPECT_NEAR(m.pooledProb[3 * 8 + 5], 0.5f, 1e-3);
  EXPECT_EQ(m.pooledProb[3 * 8 + 0], 0.0f);
  EXPECT_TRUE(m.reasons[3 * 8 + 0] & kReasonForcedCol);
  EXPECT_TRUE(m.reasons[3 * 8 + 0] & kReasonCausalOff);
}

TEST(Stage1, DiagonalKeepsTheBlocksHoldingKeyEqualsQuery) {
  // Non-causal 2 x 4 (128x64, N = 256), selection keeps only block 3 of each row: the diagonal blocks
  // (row 0: 0, 1; row 1: 2, 3) come on only with `diagonal`.
  std::vector<float> scores = logProbs({0.01, 0.01, 0.01, 0.97, 0.01, 0.01, 0.01, 0.97});
  BlockStats st = handMade(2, 4, kGeometry128x64, false, scores);
  EXPECT_EQ(selectBlocks(st, cdf(0.5, 0.5), {}, 256, 256).mask,
            (std::vector<uint8_t>{0, 0, 0, 1, 0, 0, 0, 1}));
  auto m = selectBlocks(st, cdf(0.5, 0.5), {.diagonal = true}, 256, 256);
  EXPECT_EQ(m.mask, (std::vector<uint8_t>{1, 1, 0, 1, 0, 0, 1, 1}));
  EXPECT_TRUE(m.reasons[0] & kReasonDiagonal);
  EXPECT_FALSE(m.reasons[3] & kReasonDiagonal);
  // 64x128: query block i holds its diagonal in key block i / 2.
  BlockStats st2 = handMade(4, 2, kGeometry64x128, true, std::vector<float>(8, 0.0f));
  auto m2 = selectBlocks(st2, topk(0.5, 0.01), {.diagonal = true}, 256, 256);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j)
      EXPECT_EQ(bool(m2.reasons[i * 2 + j] & kReasonDiagonal), j == i / 2) << i << j;
}

TEST(Stage1, RowsThatSeeNoKeyStayEmpty) {
  // Window [0, 0] (each query sees only its own key) with Nq = 256 > Nkv = 64: queries 64..255 see
  // nothing, so query block 1 has no valid block; forced, sink and diagonal blocks stay off there.
  BlockStats st = handMade(2, 1, kGeometry128x64, false, {0.0f, 0.0f}, Window{0, 0});
  st.selfSimK[0] = 0.0f;
  auto m = selectBlocks(st, cdf(0.5, 0.5), {.sink = true, .diagonal = true}, 256, 64);
  EXPECT_EQ(m.mask, (std::vector<uint8_t>{1, 0}));
  EXPECT_TRUE(m.reasons[1] & kReasonCausalOff);
  EXPECT_FALSE(blockValid(1, 0, kGeometry128x64, 256, 64, false, Window{0, 0}));
}
