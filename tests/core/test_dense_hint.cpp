// The dense-run hint on hand-built results: which cause it names, in which words, and the preset or
// option it offers; and the presets themselves.
#include <gtest/gtest.h>

#include "sparge/core/dense_hint.h"

using namespace sparge::core;

namespace {
// One head on an nq x nk grid, every block valid and on with `reason`; `similarK` K blocks self-similar.
HeadResult head(int nq, int nk, uint8_t reason, int similarK, const HeadParams& p = {}) {
  HeadResult h;
  h.params = p;
  h.nq = nq;
  h.nk = nk;
  h.blockMask.assign(size_t(nq) * nk, 1);
  h.pvSkipped.assign(size_t(nq) * nk, 0);
  h.reasons.assign(size_t(nq) * nk, reason);
  h.similarQ.assign(nq, 1);
  h.similarK.assign(nk, 0);
  h.selfSimQ.assign(nq, 0.9f);
  h.selfSimK.assign(nk, 0.3f);
  for (int j = 0; j < similarK; ++j) h.similarK[j] = 1, h.selfSimK[j] = 0.8f;
  h.sparsity.validBlocks = h.sparsity.selectedBlocks = h.sparsity.computedPvBlocks = int64_t(nq) * nk;
  return h;
}

EntryResult entry(std::vector<HeadResult> heads) {
  EntryResult r;
  r.heads = std::move(heads);
  aggregate(r);
  return r;
}
}  // namespace

TEST(DenseHint, SparseRunsGetNone) {
  EntryResult r = entry({head(8, 16, kReasonSelected, 16)});
  r.heads[0].sparsity.computedPvBlocks = 100;  // 28 of 128 valid blocks left out: 22 %
  aggregate(r);
  EXPECT_FALSE(denseRunHint(std::span<const EntryResult>(&r, 1)));
}

TEST(DenseHint, EveryColumnForcedOffersTheFilterOff) {
  EntryResult r = entry({head(8, 16, kReasonForcedCol, 0), head(8, 16, kReasonForcedCol, 0)});
  auto h = denseRunHint(std::span<const EntryResult>(&r, 1));
  ASSERT_TRUE(h);
  EXPECT_EQ(h->why,
            "no K block is self-similar at θ 0.6 (median self-similarity 0.30): every column is forced on");
  ASSERT_TRUE(h->preset);
  EXPECT_EQ(*h->preset, Preset::FilterOff);
  EXPECT_EQ(h->fix, "--theta=-0.1");
}

TEST(DenseHint, MostColumnsForcedCountsThem) {
  EntryResult r = entry({head(8, 16, kReasonForcedCol, 4)});
  auto h = denseRunHint(std::span<const EntryResult>(&r, 1));
  ASSERT_TRUE(h);
  EXPECT_EQ(h->why,
            "12 of 16 K blocks are not self-similar at θ 0.6 (median self-similarity 0.30): their columns "
            "are forced on");
}

TEST(DenseHint, ColumnsForcedAndOnAsDiagonalBlocksAreNotBlamedOnTheFilter) {
  // Every block is forced by its K column, but more than half are also diagonal blocks (the --diagonal
  // extension): switching the filter off would not turn those off, so the selection is named instead.
  HeadParams p;
  p.theta = -0.1;
  EntryResult r = entry({head(8, 16, kReasonForcedCol | kReasonDiagonal, 0, p)});
  auto h = denseRunHint(std::span<const EntryResult>(&r, 1));
  ASSERT_TRUE(h);
  EXPECT_EQ(h->why.rfind("τ 0.98 keeps 100 % of the valid blocks", 0), 0u) << h->why;
}

TEST(DenseHint, ASelectionThatKeepsEverythingOffersTopk) {
  HeadParams p;
  p.theta = -0.1;
  EntryResult r = entry({head(8, 16, kReasonSelected, 16, p)});
  auto h = denseRunHint(std::span<const EntryResult>(&r, 1));
  ASSERT_TRUE(h);
  EXPECT_EQ(h->why.rfind("τ 0.98 keeps 100 % of the valid blocks", 0), 0u) << h->why;
  ASSERT_TRUE(h->preset);
  EXPECT_EQ(*h->preset, Preset::TopkDefaults);
  EXPECT_EQ(h->fix, "--theta=-0.1 --topk 0.5 --lambda 50");
}

TEST(DenseHint, DenseHeadsAndTinyGrids) {
  HeadParams dense;
  dense.dense = true;
  EntryResult r = entry({head(8, 16, kReasonDenseHead, 16, dense)});
  auto h = denseRunHint(std::span<const EntryResult>(&r, 1));
  ASSERT_TRUE(h);
  EXPECT_EQ(h->why, "every head is marked dense (is_sparse false): every valid block is computed");
  EntryResult tiny = entry({head(1, 4, kReasonSelected, 4)});
  h = denseRunHint(std::span<const EntryResult>(&tiny, 1));
  ASSERT_TRUE(h);
  EXPECT_EQ(h->why, "each head has only 4 valid blocks: too few for a selection to leave any out");
  EXPECT_FALSE(h->preset);
}

// A tune of budget `l1` in which every head came out dense; head i's quantization error is l1Quant[i].
TuneResult denseTune(double l1, std::vector<double> l1Quant) {
  TuneResult t;
  t.options.l1 = l1;
  TunedGroup g;
  for (size_t i = 0; i < l1Quant.size(); ++i) {
    TunedHead h;
    h.head = int64_t(i);
    h.isSparse = false;
    h.l1Quant = l1Quant[i];
    g.heads.push_back(h);
  }
  t.groups.push_back(g);
  return t;
}

TEST(DenseHint, TuneWithEveryHeadDenseNamesTheSinkOnCausalCaptures) {
  TuneResult t = denseTune(0.05, {0, 0, 0});
  auto h = denseTuneHint(t, true);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->fix, "--sink");
  EXPECT_NE(h->why.find("no θ and τ kept L1 below 0.05 while leaving out more than 10 % of the blocks"),
            std::string::npos)
      << h->why;
  // Not causal: no row can lose every key, so the sink is not what would change the result.
  EXPECT_EQ(denseTuneHint(t, false)->fix, "--topk-mode");
  // The diagonal blocks (an extension) keep every causal row's own key on, as the sink keeps key 0.
  t.options.diagonal = true;
  EXPECT_EQ(denseTuneHint(t, true)->fix, "--topk-mode");
  t.options.diagonal = false;
  t.options.sink = true;
  EXPECT_EQ(denseTuneHint(t, true)->fix, "--topk-mode");
  t.groups[0].heads[1].isSparse = true;
  EXPECT_FALSE(denseTuneHint(t, true));
}

TEST(DenseHint, TuneUnderAQuantizationFloorNamesQuantizationFirst) {
  TuneResult t = denseTune(0.01, {0.012, 0.034});
  t.options.numerics = Numerics::Int8Fp8;
  t.groups[0].name = "e";
  auto h = denseTuneHint(t, true);
  ASSERT_TRUE(h);
  EXPECT_TRUE(h->quantization);
  EXPECT_EQ(
      h->why,
      "in int8-fp8 quantization alone costs 2 of 2 heads at least l1 0.01 (dense L1: e head 1 (0.034), e "
      "head 0 (0.012)), so no θ, τ or λ can meet the budget there; they are marked dense and still run "
      "quantized");
  EXPECT_NE(h->fix.find("--exact-fallback head"), std::string::npos) << h->fix;
  // One head under the floor: quantization is still the first cause, for the other one.
  t.groups[0].heads[0].l1Quant = 0.004;
  h = denseTuneHint(t, true);
  ASSERT_TRUE(h);
  EXPECT_TRUE(h->quantization);
  EXPECT_NE(h->why.find("costs 1 of 2 heads"), std::string::npos) << h->why;
  // Tuned exact by the fallback, that head is no cause any more: the sink is named for the dense rest.
  t.groups[0].heads[1].exact = true;
  h = denseTuneHint(t, true);
  ASSERT_TRUE(h);
  EXPECT_FALSE(h->quantization);
  EXPECT_EQ(h->fix, "--sink");
  EXPECT_NE(exactFallbackNote(t).find("1 of 2 heads tuned and recorded in exact numerics"), std::string::npos)
      << exactFallbackNote(t);
  // Without quantized numerics there is no quantization cause at all.
  t.groups[0].heads[1].exact = false;
  t.options.numerics = Numerics::None;
  EXPECT_FALSE(denseTuneHint(t, true)->quantization);
}

TEST(DenseHint, Presets) {
  HeadParams cur;
  cur.tau = 0.9;
  cur.lambda = 7;
  cur.dense = true;
  HeadParams off = presetParams(Preset::FilterOff, cur);
  EXPECT_EQ(off.theta, -0.1);
  EXPECT_EQ(off.tau, 0.9);
  EXPECT_EQ(off.lambda, 7);
  EXPECT_FALSE(off.dense);
  HeadParams topk = presetParams(Preset::TopkDefaults, cur);
  EXPECT_EQ(topk.mode, SelectMode::TopK);
  EXPECT_EQ(topk.topk, 0.5);
  EXPECT_EQ(topk.theta, -0.1);
  EXPECT_EQ(topk.lambda, 50);
  EXPECT_EQ(presetParams(Preset::CdfDefaults, cur), HeadParams{});
}
