// What the CPU engine keeps from run to run (operands, the query tiles whose mask rows did not change, their
// error sums) never shows in a result: after any sequence of runs — masks, λ, numerics, smooth_k, geometry,
// head subsets, deferred and skipped error splits, a cancelled run — every figure and output equals that of a
// fresh engine making the same run.
#include <gtest/gtest.h>

#include <functional>
#include <memory>

#include "sparge/core/cpu_engine.h"
#include "sparge/core/synthetic.h"

using namespace sparge::core;

namespace {

std::shared_ptr<const EntryData> entry() {
  SynthSpec s;
  s.headsQ = 4;
  s.headsKV = 2;
  s.tokensQ = s.tokensKV = 700;  // a partial last tile and key block
  s.headDim = s.headDimV = 32;
  s.causal = true;
  s.segment = 128;
  return std::make_shared<const EntryData>(makeSyntheticEntry(s));
}

RunOptions withOutput(std::vector<int64_t> heads = {}) {
  RunOptions o;
  o.keepOutput = true;
  o.heads = std::move(heads);
  return o;
}

void expectSameHeads(const EntryResult& got, const EntryResult& want, const std::string& step) {
  ASSERT_EQ(got.heads.size(), want.heads.size()) << step;
  for (size_t i = 0; i < want.heads.size(); ++i) {
    const HeadResult &a = got.heads[i], &b = want.heads[i];
    SCOPED_TRACE(step + ", head " + std::to_string(b.head));
    EXPECT_EQ(a.output, b.output);
    EXPECT_EQ(a.pvSkipped, b.pvSkipped);
    EXPECT_EQ(a.emptyRows, b.emptyRows);
    EXPECT_EQ(a.qBlockL1, b.qBlockL1);
    for (auto [x, y] :
         {std::pair{&a.error, &b.error}, {&a.errorSparse, &b.errorSparse}, {&a.errorQuant, &b.errorQuant}}) {
      EXPECT_EQ(x->absDiff, y->absDiff);
      EXPECT_EQ(x->dot, y->dot);
      EXPECT_EQ(x->count, y->count);
    }
  }
}

EntryResult fresh(const std::shared_ptr<const EntryData>& e, const RunConfig& c, const RunOptions& o) {
  CpuEngine cold(2);
  cold.setEntry(e);
  RunOptions plain = o;
  plain.onDeployed = nullptr;
  return cold.run(c, plain);
}

}  // namespace

TEST(EngineReuse, EveryRunEqualsAFreshEnginesRun) {
  const auto e = entry();
  CpuEngine warm(2);
  warm.setEntry(e);
  RunConfig c;
  c.numerics = Numerics::Int8Fp8;
  c.defaults.theta = -0.1;
  struct Step {
    std::string name;
    std::function<void(RunConfig&)> change;
    std::vector<int64_t> heads;
  };
  const std::vector<Step> steps = {
      {"first", [](RunConfig&) {}, {}},
      {"tau 0.90", [](RunConfig& r) { r.defaults.tau = 0.90; }, {}},
      {"tau 0.905", [](RunConfig& r) { r.defaults.tau = 0.905; }, {}},
      {"same again", [](RunConfig&) {}, {}},
      {"lambda 1", [](RunConfig& r) { r.defaults.lambda = 1.0; }, {}},
      {"head 2 only, tau 0.7", [](RunConfig& r) { r.defaults.tau = 0.7; }, {2}},
      {"all heads, tau 0.7", [](RunConfig&) {}, {}},
      {"one head dense",
       [](RunConfig& r) {
         r.perHead.assign(4, r.defaults);
         r.perHead[1].dense = true;
       },
       {}},
      {"exact numerics", [](RunConfig& r) { r.numerics = Numerics::None; }, {}},
      {"int8-fp16", [](RunConfig& r) { r.numerics = Numerics::Int8Fp16; }, {}},
      {"no smooth_k", [](RunConfig& r) { r.smoothK = false; }, {}},
      {"64x128", [](RunConfig& r) { r.geometry = kGeometry64x128; }, {}},
      {"int8-fp8 again, tau 0.95",
       [](RunConfig& r) {
         r.numerics = Numerics::Int8Fp8;
         r.defaults.tau = 0.95;
       },
       {}},
  };
  for (const Step& s : steps) {
    s.change(c);
    // A viewer's run: the deployed figures first, then the split.
    RunOptions o = withOutput(s.heads);
    o.onDeployed = [](std::shared_ptr<const EntryResult>) { return true; };
    expectSameHeads(warm.run(c, o), fresh(e, c, o), s.name);
  }
}

TEST(EngineReuse, SkippedAndCancelledSplitsLeaveNothingStale) {
  const auto e = entry();
  CpuEngine warm(2);
  warm.setEntry(e);
  RunConfig c;
  c.numerics = Numerics::Int8Fp8;
  c.defaults.theta = -0.1;
  c.defaults.tau = 0.9;
  warm.run(c, {});  // the dense outputs, cached: later runs defer their split
  // A newer change was waiting: the split is skipped.
  c.defaults.tau = 0.93;
  RunOptions skip;
  skip.onDeployed = [](std::shared_ptr<const EntryResult>) { return false; };
  EXPECT_TRUE(warm.run(c, skip).heads.empty());
  // The run is cancelled as its split starts.
  c.defaults.tau = 0.96;
  CancelFlag cancel{false};
  RunOptions stop;
  stop.cancel = &cancel;
  stop.onDeployed = [&](std::shared_ptr<const EntryResult>) {
    cancel = true;
    return true;
  };
  EXPECT_THROW(warm.run(c, stop), Cancelled);
  for (double tau : {0.96, 0.93, 0.9}) {
    c.defaults.tau = tau;
    RunOptions o = withOutput();
    o.onDeployed = [](std::shared_ptr<const EntryResult>) { return true; };
    expectSameHeads(warm.run(c, o), fresh(e, c, o), "tau " + std::to_string(tau));
  }
}

TEST(EngineReuse, KeptTilesCanBeTurnedOff) {
  const auto e = entry();
  CpuEngine raw(2);
  raw.setKeepTiles(false);
  raw.setEntry(e);
  RunConfig c;
  c.defaults.theta = -0.1;
  for (double tau : {0.9, 0.92}) {
    c.defaults.tau = tau;
    expectSameHeads(raw.run(c, withOutput()), fresh(e, c, withOutput()), "tau " + std::to_string(tau));
  }
}
