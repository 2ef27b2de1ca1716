// Stage 2 (block-sparse attention with PV skip) against a naive masked softmax written independently
// here in double precision.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "sparge/core/cpu_engine.h"
#include "sparge/core/stage1.h"

using namespace sparge::core;

namespace {

struct Problem {
  int64_t nQ, nKv, d, dv;
  bool causal;
  Geometry g;
  std::vector<float> q, k, v;
  int nq() const { return int((nQ + g.blockQ - 1) / g.blockQ); }
  int nk() const { return int((nKv + g.blockK - 1) / g.blockK); }
};

Problem makeProblem(int64_t nQ, int64_t nKv, int64_t d, bool causal, Geometry g, uint64_t seed,
                    double logitScale = 1.0) {
  Problem p{nQ, nKv, d, d, causal, g, {}, {}, {}};
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  p.q.resize(nQ * d);
  p.k.resize(nKv * d);
  p.v.resize(nKv * d);
  for (auto& x : p.q) x = n(rng) * float(logitScale);
  for (auto& x : p.k) x = n(rng);
  for (auto& x : p.v) x = n(rng);
  return p;
}

// Naive reference: softmax over the keys allowed for each query (key in a selected, not-skipped block;
// key < Nkv; causal: key <= query), in double. Rows with no allowed key are 0.
std::vector<double> naive(const Problem& p, const std::vector<uint8_t>& mask,
                          const std::vector<uint8_t>* skipped, double scale) {
  std::vector<double> out(p.nQ * p.dv, 0.0);
  for (int64_t t = 0; t < p.nQ; ++t) {
    const int i = int(t / p.g.blockQ);
    std::vector<double> logits(p.nKv, -INFINITY);
    double mx = -INFINITY;
    for (int64_t s = 0; s < p.nKv; ++s) {
      const int j = int(s / p.g.blockK);
      const size_t b = size_t(i) * p.nk() + j;
      if (!mask[b] || (skipped && (*skipped)[b]) || (p.causal && s > t)) continue;
      double dot = 0;
      for (int64_t c = 0; c < p.d; ++c) dot += double(p.q[t * p.d + c]) * p.k[s * p.d + c];
      logits[s] = dot * scale;
      mx = std::max(mx, logits[s]);
    }
    if (mx == -INFINITY) continue;
    double den = 0;
    for (int64_t s = 0; s < p.nKv; ++s)
      if (logits[s] > -INFINITY) den += std::exp(logits[s] - mx);
    for (int64_t s = 0; s < p.nKv; ++s) {
      if (logits[s] == -INFINITY) continue;
      const double w = std::exp(logits[s] - mx) / den;
      for (int64_t c = 0; c < p.dv; ++c) out[t * p.dv + c] += w * p.v[s * p.dv + c];
    }
  }
  return out;
}

std::vector<uint8_t> randomMask(const Problem& p, uint64_t seed, double density) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<uint8_t> m(size_t(p.nq()) * p.nk());
  for (int i = 0; i < p.nq(); ++i)
    for (int j = 0; j < p.nk(); ++j)
      m[size_t(i) * p.nk() + j] = blockValid(i, j, p.g, p.nQ, p.nKv, p.causal) && u(rng) < density;
  return m;
}

double maxAbsDiff(const std::vector<float>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}

}  // namespace

class Stage2Random : public ::testing::TestWithParam<std::tuple<bool, bool, int>> {};

TEST_P(Stage2Random, MatchesNaiveMaskedSoftmax) {
  const auto [causal, wide, seed] = GetParam();
  const Geometry g = wide ? kGeometry64x128 : kGeometry128x64;
  // Nq != Nkv and neither a multiple of the tile: exercises the zero-filled tails.
  Problem p = makeProblem(300, 333, 32, causal, g, 100 + seed);
  const double scale = 1.0 / std::sqrt(32.0);
  std::vector<uint8_t> mask = randomMask(p, 7 + seed, 0.6);
  AttentionOutput o =
      blockSparseAttention(p.q.data(), p.k.data(), p.v.data(), p.nQ, p.nKv, p.d, p.dv, scale, causal, g,
                           mask.data(), std::numeric_limits<double>::infinity(), false);
  for (uint8_t s : o.pvSkipped) EXPECT_EQ(s, 0);
  EXPECT_LT(maxAbsDiff(o.out, naive(p, mask, nullptr, scale)), 2e-5);
}

INSTANTIATE_TEST_SUITE_P(AllShapes, Stage2Random,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool(),
                                            ::testing::Values(1, 2, 3)));

TEST(Stage2, DenseMaskEqualsFullAttentionAndMassSumsToOne) {
  Problem p = makeProblem(256, 512, 16, true, kGeometry128x64, 5);
  std::vector<uint8_t> all(size_t(p.nq()) * p.nk());
  for (int i = 0; i < p.nq(); ++i)
    for (int j = 0; j < p.nk(); ++j) all[size_t(i) * p.nk() + j] = blockValid(i, j, p.g, p.nQ, p.nKv, true);
  AttentionOutput o =
      blockSparseAttention(p.q.data(), p.k.data(), p.v.data(), p.nQ, p.nKv, p.d, p.dv, 0.25, true, p.g,
                           all.data(), std::numeric_limits<double>::infinity(), true);
  EXPECT_LT(maxAbsDiff(o.out, naive(p, all, nullptr, 0.25)), 2e-5);
  for (int i = 0; i < p.nq(); ++i) {
    double rowMass = 0;
    for (int j = 0; j < p.nk(); ++j) rowMass += o.blockMass[size_t(i) * p.nk() + j];
    EXPECT_NEAR(rowMass, 1.0, 1e-4);
  }
  EXPECT_EQ(o.emptyRows, 0);
}

// λ = 0 must skip exactly the skip-eligible blocks (not the first, not the last tail blocks of the
// row) where no row of the Q tile raises its running max; the skipped blocks then contribute nothing.
TEST(Stage2, LambdaZeroSkipsExactlyTheBlocksThatDoNotRaiseAnyRowMax) {
  for (bool wide : {false, true}) {
    const Geometry g = wide ? kGeometry64x128 : kGeometry128x64;
    // Large logits so that row maxima vary strongly between blocks.
    Problem p = makeProblem(256, 1024, 16, false, g, 11, 2.0);
    // Make the first key block dominant so that most later blocks raise no row's max (skippable),
    // while a few strong keys further on still raise some (not skippable).
    for (int64_t s = 0; s < g.blockK * p.d; ++s) p.k[s] *= 4.0f;
    for (int64_t c = 0; c < p.d; ++c) p.k[(5 * g.blockK / 2 + 3) * p.d + c] *= 6.0f;
    const double scale = 0.25;
    std::vector<uint8_t> mask(size_t(p.nq()) * p.nk(), 1);
    AttentionOutput o = blockSparseAttention(p.q.data(), p.k.data(), p.v.data(), p.nQ, p.nKv, p.d, p.dv,
                                             scale, false, g, mask.data(), 0.0, false);
    const int tail = g.blockQ > g.blockK ? 2 : 1;
    int expectedSkips = 0;
    for (int i = 0; i < p.nq(); ++i) {
      std::vector<double> running(g.blockQ, -INFINITY);
      for (int j = 0; j < p.nk(); ++j) {
        bool raises = false;
        std::vector<double> blockMax(g.blockQ, -INFINITY);
        for (int r = 0; r < g.blockQ; ++r) {
          const int64_t t = int64_t(i) * g.blockQ + r;
          for (int s = 0; s < g.blockK; ++s) {
            double dot = 0;
            for (int c = 0; c < p.d; ++c)
              dot += double(p.q[t * p.d + c]) * p.k[(int64_t(j) * g.blockK + s) * p.d + c];
            blockMax[r] = std::max(blockMax[r], dot);
          }
          if (blockMax[r] > running[r]) raises = true;
        }
        const bool eligible = j > 0 && j < p.nk() - tail;
        const bool expectSkip = eligible && !raises;
        expectedSkips += expectSkip;
        EXPECT_EQ(o.pvSkipped[size_t(i) * p.nk() + j], expectSkip ? 1 : 0) << "tile " << i << " block " << j;
        for (int r = 0; r < g.blockQ; ++r) running[r] = std::max(running[r], blockMax[r]);
      }
    }
    EXPECT_GT(expectedSkips, 0) << "the problem should have skippable blocks";
    EXPECT_LT(expectedSkips, p.nq() * (p.nk() - 1 - tail)) << "and blocks that must not be skipped";
    // Skipped blocks add nothing to O or the denominator.
    EXPECT_LT(maxAbsDiff(o.out, naive(p, mask, &o.pvSkipped, scale)), 2e-5);

    AttentionOutput none = blockSparseAttention(p.q.data(), p.k.data(), p.v.data(), p.nQ, p.nKv, p.d, p.dv,
                                                scale, false, g, mask.data(), 1e9, false);
    for (uint8_t s : none.pvSkipped) EXPECT_EQ(s, 0);
  }
}

TEST(Stage2, RowsWithoutVisibleKeysAreZero) {
  // Causal, Q tile 1 (queries 128..255) keeps only key block 3 (keys 192..255): queries 128..191 see
  // nothing in it.
  Problem p = makeProblem(256, 256, 8, true, kGeometry128x64, 3);
  std::vector<uint8_t> mask = {1, 0, 0, 0, 0, 0, 0, 1};
  AttentionOutput o =
      blockSparseAttention(p.q.data(), p.k.data(), p.v.data(), p.nQ, p.nKv, p.d, p.dv, 0.3, true, p.g,
                           mask.data(), std::numeric_limits<double>::infinity(), false);
  EXPECT_EQ(o.emptyRows, 64);
  for (int64_t c = 0; c < p.dv; ++c) EXPECT_EQ(o.out[130 * p.dv + c], 0.0f);
  EXPECT_LT(maxAbsDiff(o.out, naive(p, mask, nullptr, 0.3)), 2e-5);
}
