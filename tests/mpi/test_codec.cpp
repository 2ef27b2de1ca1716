// The message encoding: run results and tuned groups survive the trip to rank 0 field for field, and
// damaged messages are refused with an error instead of being read as wrong numbers.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "sparge/core/cpu_engine.h"
#include "sparge/core/error.h"
#include "sparge/core/exports.h"
#include "sparge/core/params_io.h"
#include "sparge/core/synthetic.h"
#include "sparge/scaleout/codec.h"
#include "sparge/scaleout/wire.h"

namespace sparge::scaleout {
namespace {

std::shared_ptr<const core::EntryData> entry(int64_t heads, int64_t tokens, uint64_t seed) {
  core::SynthSpec s;
  s.name = "e" + std::to_string(seed);
  s.headsQ = heads;
  s.headsKV = heads / 2;
  s.tokensQ = tokens;
  s.tokensKV = tokens;
  s.headDim = 32;
  s.headDimV = 32;
  s.causal = true;
  s.seed = seed;
  auto e = std::make_shared<core::EntryData>(core::makeSyntheticEntry(s));
  e->info.layer = 3;
  e->info.module = "model.layers.3.self_attn";
  return e;
}

core::EntryResult runResult() {
  core::CpuEngine engine(1);
  engine.setEntry(entry(4, 300, 7));
  core::RunConfig c;
  c.geometry = core::kGeometry64x128;
  c.sink = true;
  c.diagonal = true;
  c.perHead = {c.defaults, c.defaults, c.defaults, c.defaults};
  c.perHead[1].theta = -0.25;
  c.perHead[2].lambda = 2.5;
  c.perHead[3].dense = true;
  core::RunOptions o;
  o.keepOutput = true;
  core::EntryResult r = engine.run(c, o);
  r.warnings.push_back("a warning");
  r.splitPending = true;
  r.heads[1].hasNonFinite = true;
  return r;
}

void expectSameHead(const core::HeadResult& a, const core::HeadResult& b) {
  EXPECT_EQ(a.batch, b.batch);
  EXPECT_EQ(a.head, b.head);
  EXPECT_EQ(a.params, b.params);
  EXPECT_EQ(a.nq, b.nq);
  EXPECT_EQ(a.nk, b.nk);
  EXPECT_EQ(a.blockMask, b.blockMask);
  EXPECT_EQ(a.pvSkipped, b.pvSkipped);
  EXPECT_EQ(a.reasons, b.reasons);
  EXPECT_EQ(0, std::memcmp(a.pooledProb.data(), b.pooledProb.data(), a.pooledProb.size() * 4));  // NaN rows
  EXPECT_EQ(a.pooledProb.size(), b.pooledProb.size());
  EXPECT_EQ(a.similarQ, b.similarQ);
  EXPECT_EQ(a.similarK, b.similarK);
  EXPECT_EQ(a.selfSimQ.size(), b.selfSimQ.size());
  EXPECT_EQ(0, std::memcmp(a.selfSimQ.data(), b.selfSimQ.data(), a.selfSimQ.size() * 4));
  EXPECT_EQ(0, std::memcmp(a.selfSimK.data(), b.selfSimK.data(), a.selfSimK.size() * 4));
  EXPECT_EQ(a.refBlockMass, b.refBlockMass);
  EXPECT_EQ(a.qBlockL1, b.qBlockL1);
  EXPECT_EQ(a.output, b.output);
  EXPECT_EQ(a.sparsity.selectedBlocks, b.sparsity.selectedBlocks);
  EXPECT_EQ(a.sparsity.computedPvArea, b.sparsity.computedPvArea);
  EXPECT_EQ(a.error.absDiff, b.error.absDiff);
  EXPECT_EQ(a.error.count, b.error.count);
  EXPECT_EQ(a.errorSparse.sqDiff, b.errorSparse.sqDiff);
  EXPECT_EQ(a.errorQuant.dot, b.errorQuant.dot);
  EXPECT_EQ(a.emptyRows, b.emptyRows);
  EXPECT_EQ(a.hasNonFinite, b.hasNonFinite);
}

TEST(Codec, RunResultRoundTripsFieldForField) {
  core::EntryResult a = runResult();
  a.times.hostWaitMs = 1.25;  // the host's side, as the CUDA engine fills it in
  a.times.copyBytes = 123456789012;
  ASSERT_FALSE(a.heads[0].blockMask.empty());
  ASSERT_FALSE(a.heads[0].output.empty());
  const core::EntryResult b = decodeResult(encodeResult(a), "test");
  EXPECT_EQ(a.info.name, b.info.name);
  EXPECT_EQ(a.info.layer, b.info.layer);
  EXPECT_EQ(a.info.module, b.info.module);
  EXPECT_EQ(a.info.causal, b.info.causal);
  EXPECT_EQ(a.info.scale, b.info.scale);
  EXPECT_EQ(a.config.geometry, b.config.geometry);
  EXPECT_EQ(a.config.sink, b.config.sink);
  EXPECT_EQ(a.config.diagonal, b.config.diagonal);
  EXPECT_EQ(a.config.perHead, b.config.perHead);
  EXPECT_EQ(a.engine, b.engine);
  EXPECT_EQ(a.times.sparseMs, b.times.sparseMs);
  EXPECT_EQ(a.times.clock, b.times.clock);
  EXPECT_EQ(a.times.hostWaitMs, b.times.hostWaitMs);
  EXPECT_EQ(a.times.copyBytes, b.times.copyBytes);
  EXPECT_EQ(a.warnings, b.warnings);
  EXPECT_TRUE(b.splitPending);
  EXPECT_EQ(a.error.absRef, b.error.absRef);
  ASSERT_EQ(a.heads.size(), b.heads.size());
  for (size_t i = 0; i < a.heads.size(); ++i) expectSameHead(a.heads[i], b.heads[i]);
  // And what users see is unchanged: the report as written.
  EXPECT_EQ(core::reportJson({a}, "c.h5").dump(), core::reportJson({b}, "c.h5").dump());
}

TEST(Codec, TunedGroupRoundTripsWithItsTrace) {
  core::CpuEngine engine(1);
  core::TuneOptions o;
  o.l1 = 0.05;
  o.l2 = 0.06;
  o.thetaGrid = {-1.0, 0.0, 0.5};
  const core::TuneResult r = core::tuneEntry(engine, entry(2, 256, 11), o);
  ASSERT_EQ(r.groups.size(), 1u);
  ASSERT_FALSE(r.groups[0].heads[0].trace.empty());
  core::TuneResult copy = r;
  copy.groups[0] = decodeGroup(encodeGroup(r.groups[0]), "test");
  const core::TunedGroup& g = copy.groups[0];
  EXPECT_EQ(g.elapsedSeconds, r.groups[0].elapsedSeconds);
  EXPECT_EQ(g.heads[1].perEntry.size(), r.groups[0].heads[1].perEntry.size());
  EXPECT_EQ(g.heads[1].decision, r.groups[0].heads[1].decision);
  EXPECT_DOUBLE_EQ(g.heads[1].decision.l1Budget, 0.05);  // a filled-in decision, not two defaults
  // The parameter file with every trace is byte for byte the same.
  EXPECT_EQ(core::paramsToJson(core::toParamsFile(r, "c.h5"), &r),
            core::paramsToJson(core::toParamsFile(copy, "c.h5"), &copy));
}

TEST(Codec, DamagedMessagesAreRefused) {
  const std::string good = encodeResult(runResult());
  EXPECT_THROW(decodeResult(good.substr(0, good.size() / 2), "rank 1"), Error);
  EXPECT_THROW(decodeResult(good + "x", "rank 1"), Error);
  // A length prefix larger than the message (as from another build) is caught before allocating.
  WireWriter w;
  w.put(uint64_t(1) << 60);
  EXPECT_THROW(decode<std::vector<float>>(w.take(), "rank 2"), Error);
  try {
    decodeResult(good.substr(0, 10), "rank 3");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sparge::scaleout
