// The CUDA engine's per-head results cut from host arrays (kernels/engine/head_results.h) against
// hand-computed values: the reference's block mass per geometry, the slices of a head, its sparsity and its
// error split. Plain host code: runs without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/head_results.h"

namespace sparge::cuda {
namespace {

// mass64[qt][kt] = 10·qt + kt + 1 over a 4 x 3 grid of 64x64 tiles (Nq 200, Nkv 130).
std::vector<float> tileMass() {
  std::vector<float> m;
  for (int qt = 0; qt < 4; ++qt)
    for (int kt = 0; kt < 3; ++kt) m.push_back(float(10 * qt + kt + 1));
  return m;
}

TEST(HeadResults, BlockMassIsTheMeanTileMassPerQueryRowOfEachBlock) {
  const std::vector<float> m = tileMass();
  // 128x64: block (i, j) holds tiles qt 2i, 2i+1 and kt j; its rows are 128, then 200 - 128 = 72.
  const std::vector<float> a = blockMassOf(m.data(), 200, 130, core::kGeometry128x64, 2, 3);
  ASSERT_EQ(a.size(), 6u);
  EXPECT_FLOAT_EQ(a[0], (1.f + 11.f) / 128.f);
  EXPECT_FLOAT_EQ(a[2], (3.f + 13.f) / 128.f);
  EXPECT_FLOAT_EQ(a[5], (23.f + 33.f) / 72.f);
  // 64x128: block (i, j) holds tile qt i and kt 2j, 2j+1 (kt 3 does not exist); the last block has 8 rows.
  const std::vector<float> b = blockMassOf(m.data(), 200, 130, core::kGeometry64x128, 4, 2);
  ASSERT_EQ(b.size(), 8u);
  EXPECT_FLOAT_EQ(b[0], (1.f + 2.f) / 64.f);
  EXPECT_FLOAT_EQ(b[3], 13.f / 64.f);
  EXPECT_FLOAT_EQ(b[7], 33.f / 8.f);
}

// Two query heads sharing one KV head, a 2 x 2 grid per head; head 1 is the one checked.
struct TinyRun {
  core::RunConfig config;
  core::BlockValidity validity;
  std::vector<uint8_t> nonFinite{0, 0}, mask{1, 1, 0, 1, 1, 0, 1, 1}, reasons{1, 1, 16, 1, 1, 2, 1, 1};
  std::vector<uint8_t> skip{0, 0, 0, 0, 0, 0, 1, 0};
  std::vector<float> prob{.5f, .5f, 0, 1, .7f, .3f, .2f, .8f}, simQ{.9f, .1f, .4f, .8f}, simK{.2f, .6f};
  std::vector<int> empty{0, 3};
  std::vector<double> deployed, sparse;
  QuantErrorCache quant;
  std::vector<std::vector<float>> blockMass{{}, {1.f, 2.f, 3.f, 4.f}};
  HostRun run;

  TinyRun() {
    config.defaults.theta = 0.5;
    validity.nq = validity.nk = 2;
    validity.valid = {1, 1, 0, 1};  // block (1, 0) is invalid
    validity.area = {10, 20, 0, 40};
    // Per (head, q-block): {Σ|O-R|, Σ|R|, Σ O·R, Σ O², Σ R², Σ(O-R)², count, non-finite}.
    deployed = {0, 0, 0, 0, 0, 0, 0,   0, 0, 0, 0, 0, 0, 0, 0,  0,  // head 0
                1, 4, 5, 6, 7, 8, 100, 0, 3, 6, 1, 1, 1, 1, 50, 0};
    sparse = deployed;
    sparse[16] = 0.5;
    quant.sums.resize(2);
    quant.sums[1].absDiff = 9;
    quant.nonFinite = {0, 0};
    run.B = 1, run.Hq = 2, run.Hkv = 1, run.nq = 2, run.nk = 2;
    run.config = &config;
    run.validity = &validity;
    run.inputNonFinite = nonFinite.data();
    run.mask = mask.data(), run.reasons = reasons.data(), run.prob = prob.data();
    run.simQ = simQ.data(), run.simK = simK.data();
    run.skip = skip.data(), run.emptyRows = empty.data();
    run.errors = true;
    run.deployed = deployed.data();
    run.blockMass = &blockMass;
  }
};

TEST(HeadResults, AHeadIsCutFromItsOwnSliceOfEveryArray) {
  TinyRun t;
  core::HeadResult hr;
  fillSelection(hr, t.run, 0, 1);
  fillAttention(hr, t.run, 0, 1);
  EXPECT_EQ(hr.head, 1);
  EXPECT_EQ(hr.blockMask, (std::vector<uint8_t>{1, 0, 1, 1}));
  EXPECT_EQ(hr.reasons, (std::vector<uint8_t>{1, 2, 1, 1}));
  EXPECT_EQ(hr.pooledProb, (std::vector<float>{.7f, .3f, .2f, .8f}));
  EXPECT_EQ(hr.selfSimQ, (std::vector<float>{.4f, .8f}));
  EXPECT_EQ(hr.selfSimK, (std::vector<float>{.2f, .6f}));  // the KV head both query heads share
  EXPECT_EQ(hr.similarQ, (std::vector<uint8_t>{0, 1}));    // s > θ = 0.5
  EXPECT_EQ(hr.similarK, (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(hr.pvSkipped, (std::vector<uint8_t>{0, 0, 1, 0}));
  EXPECT_EQ(hr.refBlockMass, (std::vector<float>{1.f, 2.f, 3.f, 4.f}));
  EXPECT_EQ(hr.emptyRows, 3);
  // Valid blocks 0, 1, 3 (areas 10, 20, 40); selected 0 and 3 (block 2 is selected but invalid); none of
  // the valid selected ones skipped (block 2's skip does not count).
  EXPECT_EQ(hr.sparsity.validBlocks, 3);
  EXPECT_EQ(hr.sparsity.selectedBlocks, 2);
  EXPECT_EQ(hr.sparsity.computedPvBlocks, 2);
  EXPECT_EQ(hr.sparsity.skippedPvBlocks, 0);
  EXPECT_DOUBLE_EQ(hr.sparsity.validArea, 70);
  EXPECT_DOUBLE_EQ(hr.sparsity.computedPvArea, 50);
  EXPECT_DOUBLE_EQ(hr.error.absDiff, 4);
  EXPECT_DOUBLE_EQ(hr.error.absRef, 10);
  EXPECT_EQ(hr.error.count, 150);
  EXPECT_EQ(hr.qBlockL1, (std::vector<float>{0.25f, 0.5f}));
  // Exact numerics: the sparsity part is the deployed error, no quantization part.
  EXPECT_DOUBLE_EQ(hr.errorSparse.absDiff, 4);
  EXPECT_EQ(hr.errorQuant.count, 0);
  EXPECT_FALSE(hr.hasNonFinite);
}

// Another method's run: no self-similarity (as the CPU engine gives none), the head's own token pairs.
TEST(HeadResults, AnotherMethodCarriesItsPairsAndNoSimilarity) {
  TinyRun t;
  const std::vector<double> pairs{1234, 5678};
  t.run.simQ = t.run.simK = nullptr;
  t.run.elementPairs = pairs.data();
  core::HeadResult hr;
  fillSelection(hr, t.run, 0, 1);
  EXPECT_DOUBLE_EQ(hr.elementPairs, 5678);
  EXPECT_TRUE(hr.selfSimQ.empty());
  EXPECT_TRUE(hr.similarK.empty());
  EXPECT_EQ(hr.pooledProb, (std::vector<float>{.7f, .3f, .2f, .8f}));  // the method's score
  core::HeadResult sparge;  // SpargeAttn's run leaves the pairs NaN
  fillSelection(sparge, TinyRun().run, 0, 1);
  EXPECT_TRUE(std::isnan(sparge.elementPairs));
}

TEST(HeadResults, QuantizedNumericsTakeEachPartOfTheSplitFromItsOwnPass) {
  TinyRun t;
  t.run.quantized = true;
  t.run.sparse = t.sparse.data();
  t.run.quant = &t.quant;
  core::HeadResult split;
  fillSelection(split, t.run, 0, 1);
  fillAttention(split, t.run, 0, 1);
  EXPECT_DOUBLE_EQ(split.error.absDiff, 4);          // 1 + 3 from the deployed sums
  EXPECT_DOUBLE_EQ(split.errorSparse.absDiff, 3.5);  // 0.5 + 3 from the exact-numerics sums
  EXPECT_EQ(split.errorSparse.count, 150);
  EXPECT_DOUBLE_EQ(split.errorQuant.absDiff, 9);                 // the cached dense run's sums of head 1
  EXPECT_EQ(split.qBlockL1, (std::vector<float>{0.25f, 0.5f}));  // of the deployed output
  EXPECT_FALSE(split.hasNonFinite);
  // A non-finite count in the exact-numerics pass, or a non-finite quantized dense run, flags the head.
  t.sparse[16 + 7] = 1;
  core::HeadResult bad;
  fillSelection(bad, t.run, 0, 1);
  fillAttention(bad, t.run, 0, 1);
  EXPECT_TRUE(bad.hasNonFinite);
  t.sparse[16 + 7] = 0;
  t.quant.nonFinite[1] = 1;
  core::HeadResult badQuant;
  fillSelection(badQuant, t.run, 0, 1);
  fillAttention(badQuant, t.run, 0, 1);
  EXPECT_TRUE(badQuant.hasNonFinite);
}

// Two batch items of two query heads on one KV head, one block per head: head (b, h) reads slot 2b + h of
// the per-query-head arrays and slot b of the per-KV-head ones.
TEST(HeadResults, BatchItemsIndexTheirOwnSlots) {
  core::RunConfig config;
  core::BlockValidity validity;
  validity.nq = validity.nk = 1;
  validity.valid = {1};
  validity.area = {5};
  const std::vector<uint8_t> nonFinite{0, 0, 1, 0}, mask{1, 0, 0, 1}, reasons{1, 2, 4, 8}, skip{0, 0, 0, 1};
  const std::vector<float> prob{.1f, .2f, .3f, .4f}, simQ{.1f, .2f, .3f, .4f}, simK{.5f, .6f};
  const std::vector<int> empty{0, 1, 2, 3};
  HostRun r;
  r.B = 2, r.Hq = 2, r.Hkv = 1, r.nq = 1, r.nk = 1;
  r.config = &config;
  r.validity = &validity;
  r.inputNonFinite = nonFinite.data();
  r.mask = mask.data(), r.reasons = reasons.data(), r.prob = prob.data();
  r.simQ = simQ.data(), r.simK = simK.data(), r.skip = skip.data(), r.emptyRows = empty.data();
  core::HeadResult a, b;
  fillSelection(a, r, 1, 0);
  fillAttention(a, r, 1, 0);
  fillSelection(b, r, 1, 1);
  fillAttention(b, r, 1, 1);
  EXPECT_EQ(a.batch, 1);
  EXPECT_EQ(a.reasons, std::vector<uint8_t>{4});
  EXPECT_EQ(a.pooledProb, std::vector<float>{.3f});
  EXPECT_EQ(a.selfSimK, std::vector<float>{.6f});
  EXPECT_EQ(a.emptyRows, 2);
  EXPECT_TRUE(a.hasNonFinite);
  EXPECT_EQ(a.sparsity.selectedBlocks, 0);
  EXPECT_EQ(b.reasons, std::vector<uint8_t>{8});
  EXPECT_EQ(b.selfSimQ, std::vector<float>{.4f});
  EXPECT_EQ(b.selfSimK, std::vector<float>{.6f});
  EXPECT_EQ(b.pvSkipped, std::vector<uint8_t>{1});
  EXPECT_EQ(b.sparsity.skippedPvBlocks, 1);
  EXPECT_FALSE(b.hasNonFinite);
  EXPECT_TRUE(b.refBlockMass.empty());  // no errors computed: no reference mass
}

}  // namespace
}  // namespace sparge::cuda
