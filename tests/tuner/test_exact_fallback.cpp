// The exact fallback: heads whose quantization alone breaks l1 (planted outlier keys) are tuned and recorded
// in exact numerics at the chosen granularity, the rest keep the chosen numerics, and the parameters meet the
// budget on every head when run back from the file; with the fallback off, the hint names quantization.
#include <gtest/gtest.h>

#include <filesystem>

#include "sparge/core/cpu_engine.h"
#include "sparge/core/dense_hint.h"
#include "sparge/core/digest.h"
#include "sparge/core/params_io.h"
#include "sparge/core/synthetic.h"
#include "sparge/core/tuner.h"

namespace sparge::core {
namespace {

// Four heads; KV heads in `outliers` have outlier keys (Q·Kᵀ in INT8 loses its precision there).
std::shared_ptr<const EntryData> entryWith(std::vector<int64_t> outliers, const std::string& name,
                                           std::optional<int64_t> layer, uint64_t seed) {
  SynthSpec s;
  s.headsQ = s.headsKV = 4;
  s.tokensQ = s.tokensKV = 512;
  s.headDim = s.headDimV = 64;
  s.segment = 128;
  s.sharpness = 2.0;
  s.outlierKvHeads = std::move(outliers);
  s.seed = seed;
  auto e = std::make_shared<EntryData>(makeSyntheticEntry(s));
  e->info.name = name;
  e->info.layer = layer;
  return e;
}

TuneOptions quantOptions(ExactFallback f) {
  TuneOptions o;
  o.l1 = 0.05;
  o.l2 = 0.06;
  o.numerics = Numerics::Int8Fp8;
  o.exactFallback = f;
  // The synthetic heads are too concentrated for the CDF search (its half-precision cliff): top-k finds
  // their sparsity.
  o.mode = SelectMode::TopK;
  return o;
}

const TunedGroup& onlyGroup(const TuneResult& r) {
  EXPECT_EQ(r.groups.size(), 1u);
  return r.groups.at(0);
}

// Every head of `entry` run back from the written file meets l2, in the numerics the file gives it.
void expectBudgetsMetFromFile(const TuneResult& r, const std::shared_ptr<const EntryData>& entry) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "sparge_exact_fallback_test.json").string();
  writeParams(path, toParamsFile(r, "mem"));
  const ParamsFile f = readParams(path);
  std::filesystem::remove(path);
  RunConfig c;
  applyParams(f, path, entry->info, c);
  CpuEngine engine(2);
  engine.setEntry(entry);
  for (const HeadResult& h : engine.run(c, {}).heads)
    EXPECT_LT(h.error.l1(), r.options.l2) << "head " << h.head << " in " << toString(c.numericsFor(h.head));
}

TEST(ExactFallback, OutlierHeadsRunExactTheOthersQuantized) {
  auto entry = entryWith({1, 3}, "e", std::nullopt, 21);
  CpuEngine engine(2);
  const TuneResult r = tuneEntry(engine, entry, quantOptions(ExactFallback::Head));
  const TunedGroup& g = onlyGroup(r);
  ASSERT_EQ(g.heads.size(), 4u);
  for (const TunedHead& h : g.heads) {
    const bool outlier = h.head == 1 || h.head == 3;
    EXPECT_EQ(h.exact, outlier) << "head " << h.head;
    // l1_quant stays the chosen numerics' figure: the reason for the fallback.
    if (outlier) {
      EXPECT_GE(h.l1Quant, 0.05) << "head " << h.head;
      EXPECT_EQ(h.decision.exactCause, TuneDecision::ExactCause::OwnQuantization);
      EXPECT_NE(describe(h.decision).find("exact numerics"), std::string::npos) << describe(h.decision);
    } else {
      EXPECT_LT(h.l1Quant, 0.05) << "head " << h.head;
      EXPECT_EQ(h.decision.exactCause, TuneDecision::ExactCause::None);
    }
    EXPECT_LT(h.l1, 0.06) << "head " << h.head;
  }
  // The outlier heads are sparse now: exact numerics leave room for sparsity.
  EXPECT_TRUE(g.heads[1].isSparse) << g.heads[1].decision;
  ASSERT_EQ(g.tunedOn.size(), 1u);
  EXPECT_EQ(g.tunedOn[0].digest, entryDigest(*entry));
  EXPECT_NE(exactFallbackNote(r).find("2 of 4 heads"), std::string::npos) << exactFallbackNote(r);
  // The exact heads are not a reason for the quantization hint any more.
  const auto hint = denseTuneHint(r, false);
  EXPECT_TRUE(!hint || !hint->quantization) << hint->why;
  expectBudgetsMetFromFile(r, entry);
}

TEST(ExactFallback, OffNamesQuantizationAsTheCause) {
  auto entry = entryWith({1, 3}, "e", std::nullopt, 21);
  CpuEngine engine(2);
  const TuneResult r = tuneEntry(engine, entry, quantOptions(ExactFallback::Off));
  const TunedGroup& g = onlyGroup(r);
  for (const TunedHead& h : g.heads) EXPECT_FALSE(h.exact);
  EXPECT_FALSE(g.heads[1].isSparse);
  EXPECT_EQ(exactFallbackNote(r), "");
  const auto hint = denseTuneHint(r, false);
  ASSERT_TRUE(hint.has_value());
  EXPECT_TRUE(hint->quantization);
  EXPECT_NE(hint->why.find("2 of 4 heads"), std::string::npos) << hint->why;
  EXPECT_NE(hint->why.find("e head 1"), std::string::npos) << hint->why;
  EXPECT_NE(hint->fix.find("--exact-fallback"), std::string::npos) << hint->fix;
}

TEST(ExactFallback, EntryGranularityTakesTheWholeEntry) {
  auto entry = entryWith({2}, "e", std::nullopt, 22);
  CpuEngine engine(2);
  const TuneResult r = tuneEntry(engine, entry, quantOptions(ExactFallback::Entry));
  for (const TunedHead& h : onlyGroup(r).heads) {
    EXPECT_TRUE(h.exact) << "head " << h.head;
    EXPECT_EQ(h.decision.exactCause,
              h.head == 2 ? TuneDecision::ExactCause::OwnQuantization : TuneDecision::ExactCause::SameEntry);
  }
  expectBudgetsMetFromFile(r, entry);
}

TEST(ExactFallback, LayerGranularityReachesTheOtherEntriesOfTheLayer) {
  auto a = entryWith({0}, "a", 3, 23), b = entryWith({}, "b", 3, 24), c = entryWith({}, "c", 4, 25);
  const std::vector<TuneGroupInput> groups =
      makeGroups({TuneInput::fromData(a), TuneInput::fromData(b), TuneInput::fromData(c)}, false);
  ASSERT_EQ(groups.size(), 3u);
  ASSERT_EQ(groups[1].layerPeers.size(), 1u);  // b's peer: a
  EXPECT_TRUE(groups[2].layerPeers.empty());
  TuneOptions o = quantOptions(ExactFallback::Layer);
  o.heads = {0, 1};  // enough to see the rule, half the time
  CpuEngine engine(2);
  const TuneResult r = tune(engine, groups, o);
  ASSERT_EQ(r.groups.size(), 3u);
  for (const TunedHead& h : r.groups[1].heads) {
    EXPECT_TRUE(h.exact) << "b head " << h.head;
    EXPECT_EQ(h.decision.exactCause, TuneDecision::ExactCause::SameLayer);
  }
  for (const TunedHead& h : r.groups[2].heads) EXPECT_FALSE(h.exact) << "c head " << h.head;
}

}  // namespace
}  // namespace sparge::core
