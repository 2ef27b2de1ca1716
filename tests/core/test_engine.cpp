// CpuEngine: determinism across thread counts, per-head parameters, GQA, exact sparsity denominators,
// error metrics against the cached dense reference; the sum of the stage times of runs over disjoint heads.
#include <gtest/gtest.h>

#include <cmath>

#include "sparge/core/cpu_engine.h"
#include "sparge/core/error.h"
#include "sparge/core/synthetic.h"

using namespace sparge::core;

namespace {

std::shared_ptr<EntryData> entry(bool causal, int64_t hq = 4, int64_t hkv = 2, int64_t n = 640) {
  SynthSpec s;
  s.headsQ = hq;
  s.headsKV = hkv;
  s.tokensQ = n;
  s.tokensKV = n + 64;
  s.headDim = 32;
  s.headDimV = 32;
  s.causal = causal;
  s.segment = 128;
  s.seed = 42;
  return std::make_shared<EntryData>(makeSyntheticEntry(s));
}

}  // namespace

TEST(CpuEngine, ResultsDoNotDependOnThreadCount) {
  auto e = entry(true);
  RunConfig cfg;
  cfg.defaults.tau = 0.9;
  cfg.defaults.lambda = 2.0;
  CpuEngine one(1), three(3);
  one.setEntry(e);
  three.setEntry(e);
  EntryResult a = one.run(cfg, {}), b = three.run(cfg, {});
  ASSERT_EQ(a.heads.size(), b.heads.size());
  for (size_t i = 0; i < a.heads.size(); ++i) {
    EXPECT_EQ(a.heads[i].blockMask, b.heads[i].blockMask);
    EXPECT_EQ(a.heads[i].pvSkipped, b.heads[i].pvSkipped);
    EXPECT_EQ(a.heads[i].error.absDiff, b.heads[i].error.absDiff);  // bitwise identical
  }
}

TEST(CpuEngine, PerHeadParametersApplyToTheirHeadOnly) {
  auto e = entry(false);
  CpuEngine eng(2);
  eng.setEntry(e);
  RunConfig cfg;
  cfg.defaults.tau = 0.5;
  cfg.perHead.assign(4, cfg.defaults);
  cfg.perHead[2].dense = true;
  EntryResult r = eng.run(cfg, {});
  EXPECT_DOUBLE_EQ(r.heads[2].sparsity.total(), 0.0);
  EXPECT_EQ(r.heads[2].error.absDiff, 0.0);  // a dense head reproduces the reference exactly
  EXPECT_GT(r.heads[3].sparsity.stage1(), 0.2);
  EXPECT_GT(r.heads[3].error.l1(), 0.0);
  EXPECT_TRUE(r.heads[2].params.dense);
  EXPECT_FALSE(r.heads[3].params.dense);
}

TEST(CpuEngine, SparsityUsesExactCausalDenominators) {
  auto e = entry(true, 2, 2, 640);  // Nq = 640, Nkv = 704
  CpuEngine eng(2);
  eng.setEntry(e);
  RunConfig cfg;
  EntryResult r = eng.run(cfg, {});
  // 128x64: row i (queries 128i..128i+127) sees key blocks 0..2i+1.
  int64_t valid = 0;
  for (int i = 0; i < 5; ++i) valid += 2 * i + 2;
  EXPECT_EQ(r.heads[0].sparsity.validBlocks, valid);
  EXPECT_DOUBLE_EQ(r.heads[0].sparsity.validArea, 640.0 * 641.0 / 2.0);
  EXPECT_LE(r.heads[0].sparsity.selectedBlocks, valid);
}

TEST(CpuEngine, GqaUsesTheSharedKvHead) {
  // Hq = 4, Hkv = 1: every query head attends to the same K/V; heads 0..3 differ only in Q.
  auto e = entry(false, 4, 1, 384);
  CpuEngine eng(2);
  eng.setEntry(e);
  RunConfig cfg;
  cfg.defaults.dense = true;
  RunOptions opt;
  opt.keepOutput = true;
  EntryResult r = eng.run(cfg, opt);
  ASSERT_EQ(r.heads.size(), 4u);
  // Check head 3 against a direct softmax over K/V head 0.
  const EntryInfo& in = e->info;
  const float* q = e->qHead(0, 3);
  const float* k = e->kHead(0, 0);
  const float* v = e->vHead(0, 0);
  const int64_t t = 200;
  std::vector<double> w(in.tokensKV);
  double mx = -INFINITY, den = 0;
  for (int64_t s = 0; s < in.tokensKV; ++s) {
    double dot = 0;
    for (int64_t c = 0; c < in.headDim; ++c) dot += double(q[t * in.headDim + c]) * k[s * in.headDim + c];
    w[s] = dot * in.scale;
    mx = std::max(mx, w[s]);
  }
  for (auto& x : w) den += (x = std::exp(x - mx));
  for (int64_t c = 0; c < in.headDimV; ++c) {
    double o = 0;
    for (int64_t s = 0; s < in.tokensKV; ++s) o += w[s] / den * v[s * in.headDimV + c];
    EXPECT_NEAR(r.heads[3].output[t * in.headDimV + c], o, 1e-4);
  }
}

TEST(CpuEngine, ErrorGrowsAsTauShrinksAndReferenceIsCached) {
  auto e = entry(false);
  CpuEngine eng(2);
  eng.setEntry(e);
  RunConfig cfg;
  cfg.defaults.theta = -1.0;  // similarity filter off
  double lastL1 = -1, lastSparsity = -1;
  for (double tau : {0.999, 0.95, 0.8, 0.5}) {
    cfg.defaults.tau = tau;
    EntryResult r = eng.run(cfg, {});
    EXPECT_GE(r.error.l1(), lastL1);
    EXPECT_GE(r.sparsity.stage1(), lastSparsity);
    if (lastL1 >= 0) {
      EXPECT_TRUE(r.times.referenceCached);
    }
    lastL1 = r.error.l1();
    lastSparsity = r.sparsity.stage1();
    EXPECT_LE(r.error.cosSim(), 1.0 + 1e-12);
  }
  EXPECT_GT(lastL1, 0.0);
}

TEST(CpuEngine, RejectsBadParametersAndHeads) {
  auto e = entry(false);
  CpuEngine eng(1);
  eng.setEntry(e);
  RunConfig cfg;
  cfg.defaults.lambda = -1;
  EXPECT_THROW(eng.run(cfg, {}), sparge::Error);
  cfg.defaults.lambda = 10;
  cfg.defaults.tau = 1.5;
  EXPECT_THROW(eng.run(cfg, {}), sparge::Error);
  cfg.defaults.tau = 0.9;
  RunOptions o;
  o.heads = {7};
  try {
    eng.run(cfg, o);
    FAIL() << "expected an error";
  } catch (const sparge::Error& err) {
    EXPECT_NE(std::string(err.what()).find("head 7 out of range"), std::string::npos);
  }
  CpuEngine empty(1);
  EXPECT_THROW(empty.run(cfg, {}), sparge::Error);
}

TEST(CpuEngine, CancelStopsTheRun) {
  auto e = entry(false);
  CpuEngine eng(1);
  eng.setEntry(e);
  CancelFlag flag{true};
  RunOptions o;
  o.cancel = &flag;
  EXPECT_THROW(eng.run(RunConfig{}, o), Cancelled);
}

// The ranks of one entry run disjoint heads; their times add up, and the reference counts as cached only when
// every rank had it.
TEST(StageTimes, RunsOverDisjointHeadsAddUp) {
  StageTimes a, b;
  a.predictMs = 1, a.quantizeMs = 2, a.sparseMs = 3, a.referenceMs = 4, a.metricsMs = 5, a.totalMs = 6;
  a.hostMs = 7, a.hostQueueMs = 8, a.hostWaitMs = 9, a.hostResultsMs = 10, a.copyMs = 11, a.copyBytes = 12;
  a.referenceCached = true;
  b.predictMs = 0.5, b.quantizeMs = 0.25, b.sparseMs = 2, b.referenceMs = 0, b.metricsMs = 1, b.totalMs = 3;
  b.hostMs = 1, b.hostQueueMs = 2, b.hostWaitMs = 3, b.hostResultsMs = 4, b.copyMs = 0.5, b.copyBytes = 100;
  b.referenceCached = false;
  StageTimes s = a;
  s += b;
  EXPECT_DOUBLE_EQ(s.predictMs, 1.5);
  EXPECT_DOUBLE_EQ(s.quantizeMs, 2.25);
  EXPECT_DOUBLE_EQ(s.sparseMs, 5);
  EXPECT_DOUBLE_EQ(s.referenceMs, 4);
  EXPECT_DOUBLE_EQ(s.metricsMs, 6);
  EXPECT_DOUBLE_EQ(s.totalMs, 9);
  EXPECT_DOUBLE_EQ(s.hostMs, 8);
  EXPECT_DOUBLE_EQ(s.hostQueueMs, 10);
  EXPECT_DOUBLE_EQ(s.hostWaitMs, 12);
  EXPECT_DOUBLE_EQ(s.hostResultsMs, 14);
  EXPECT_DOUBLE_EQ(s.copyMs, 11.5);
  EXPECT_EQ(s.copyBytes, 112);
  EXPECT_FALSE(s.referenceCached);
  StageTimes both = a;
  both += a;
  EXPECT_TRUE(both.referenceCached);
}

// The kernel family SpargeAttn's dispatcher picks per compute capability (Ampere, Ada, Hopper, Blackwell).
TEST(Target, FollowsSpargeAttnsDispatchPerComputeCapability) {
  EXPECT_EQ(targetForComputeCapability(80), Target::Sm80);   // A100
  EXPECT_EQ(targetForComputeCapability(86), Target::Sm80);   // RTX 30xx, A40
  EXPECT_EQ(targetForComputeCapability(87), Target::Sm80);   // Orin
  EXPECT_EQ(targetForComputeCapability(89), Target::Sm89);   // RTX 40xx, L40
  EXPECT_EQ(targetForComputeCapability(90), Target::Sm90);   // H100, H200
  EXPECT_EQ(targetForComputeCapability(100), Target::Sm89);  // B200: the generic path
  EXPECT_EQ(targetForComputeCapability(120), Target::Sm89);  // RTX 50xx
  EXPECT_FALSE(CpuEngine(1).deviceTarget().has_value());
}

// Tiles and numerics back to the target that uses them (the `--target` table in docs/cli.md).
TEST(Target, NamesTheTargetOfTilesAndNumerics) {
  EXPECT_EQ(targetOf(kGeometry128x64, Numerics::Int8Fp16), Target::Sm80);
  EXPECT_EQ(targetOf(kGeometry128x64, Numerics::Int8Fp8), Target::Sm89);
  EXPECT_EQ(targetOf(kGeometry64x128, Numerics::Int8Fp8), Target::Sm90);
  EXPECT_FALSE(targetOf(kGeometry64x128, Numerics::Int8Fp16).has_value());
  EXPECT_FALSE(targetOf(kGeometry128x64, Numerics::None).has_value());
  RunConfig c;
  c.setTarget(Target::Sm90);
  EXPECT_EQ(c.geometry, kGeometry64x128);
  EXPECT_EQ(c.numerics, Numerics::Int8Fp8);
}
