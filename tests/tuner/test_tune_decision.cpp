// The text of tuner decisions: every cause and λ source renders the numbers it carries, and the one-entry
// and together searches are told apart. Expected lines are written out by hand.
#include <gtest/gtest.h>

#include <sstream>

#include "sparge/core/tune_decision.h"

namespace sparge::core {
namespace {

TuneDecision oneEntry() {
  TuneDecision d;
  d.l1Budget = 0.05;
  d.l2Budget = 0.06;
  d.minSparsity = 0.1;
  d.thetaSwept = 17;
  d.thetaReused = 9;
  return d;
}

TuneDecision together() {
  TuneDecision d = oneEntry();
  d.entries = 3;
  d.basis = TuneDecision::Basis::BinPoint;
  d.binLow = 0.5;
  d.binHigh = 0.625;
  d.binPoints = 3;
  d.binMeanSparsity = 0.61;
  d.theta = 0.5625;
  d.sel = 0.97;
  return d;
}

TEST(TuneDecision, OneEntryBestPointWithBisectedLambda) {
  TuneDecision d = oneEntry();
  d.basis = TuneDecision::Basis::BestPoint;
  d.theta = -0.25;
  d.sel = 0.95;
  d.stage1 = 0.42;
  d.l1 = 0.031;
  d.lambdaSource = TuneDecision::LambdaSource::Bisection;
  d.lambda = 3.125;
  EXPECT_FALSE(d.dense());
  EXPECT_EQ(describe(d),
            "best of 17 θ swept (9 reused as mask-identical): θ=-0.25 τ=0.95 stage-1 sparsity 0.42 L1 0.031; "
            "λ=3.125 (smallest passing L1 < l2=0.06)");
  d.mode = SelectMode::TopK;
  d.lambdaSource = TuneDecision::LambdaSource::PvSkipOff;
  EXPECT_EQ(
      describe(d),
      "best of 17 θ swept (9 reused as mask-identical): θ=-0.25 topk=0.95 stage-1 sparsity 0.42 L1 0.031; "
      "λ verification failed: PV skip off");
}

TEST(TuneDecision, OneEntryDenseCauses) {
  TuneDecision d = oneEntry();
  d.denseCause = TuneDecision::DenseCause::NoPointMetL1;
  EXPECT_TRUE(d.dense());
  EXPECT_EQ(describe(d), "dense: no θ met l1 < 0.05; 17 θ swept (9 reused as mask-identical)");
  d.basis = TuneDecision::Basis::BestPoint;
  d.denseCause = TuneDecision::DenseCause::LowSparsity;
  d.theta = 0.75;
  d.stage1 = 0.0625;
  EXPECT_EQ(describe(d),
            "dense: best stage-1 sparsity 0.0625 <= 0.1 at θ=0.75; 17 θ swept (9 reused as mask-identical)");
}

TEST(TuneDecision, TogetherBinFallbackAndLambda) {
  TuneDecision d = together();
  d.lambdaSource = TuneDecision::LambdaSource::LargestOfEntries;
  d.lambda = 4.5;
  EXPECT_EQ(describe(d),
            "bin [0.5, 0.625) of 3 points, mean sparsity 0.61: θ=0.5625 τ=0.97; λ=4.5 (largest of the "
            "per-entry λ)");
  d.basis = TuneDecision::Basis::FallbackPoint;
  d.theta = 0.5;
  d.sel = 0.96;
  d.lambdaSource = TuneDecision::LambdaSource::Max;
  d.lambda = 50;
  EXPECT_EQ(
      describe(d),
      "bin [0.5, 0.625) of 3 points, mean sparsity 0.61; the bin point failed l1 on some entry, fell back "
      "to the single point θ=0.5 τ=0.96; no smaller λ met l2=0.06: λ=50");
  std::ostringstream os;
  os << d;
  EXPECT_EQ(os.str(), describe(d));
}

TEST(TuneDecision, TogetherDenseCauses) {
  TuneDecision d = together();
  d.denseCause = TuneDecision::DenseCause::NoCandidateMetL1;
  d.singlePointsTried = 2;
  EXPECT_EQ(describe(d),
            "bin [0.5, 0.625) of 3 points, mean sparsity 0.61: θ=0.5625 τ=0.97; neither the bin point nor 2 "
            "single points met l1 on every entry: dense");
  d.denseCause = TuneDecision::DenseCause::LowAchievedSparsity;
  d.achievedSparsity = 0.08;
  EXPECT_EQ(
      describe(d),
      "bin [0.5, 0.625) of 3 points, mean sparsity 0.61: θ=0.5625 τ=0.97; achieved mean sparsity 0.08 <= "
      "0.1: dense");
  d.denseCause = TuneDecision::DenseCause::LowSparsity;
  d.binMeanSparsity = 0.05;
  EXPECT_EQ(describe(d), "dense: bin [0.5, 0.625) mean sparsity 0.05 <= 0.1");
  d.denseCause = TuneDecision::DenseCause::NoPointMetL1;
  EXPECT_EQ(describe(d), "dense: no θ met l1 < 0.05 on any entry");
}

TEST(TuneDecision, EnumNamesAreDistinct) {
  EXPECT_STREQ(toString(TuneDecision::Basis::FallbackPoint), "fallback-point");
  EXPECT_STREQ(toString(TuneDecision::DenseCause::FinalCheckFailed), "final-check-failed");
  EXPECT_STREQ(toString(TuneDecision::LambdaSource::LargestOfEntries), "largest-of-entries");
}

}  // namespace
}  // namespace sparge::core
