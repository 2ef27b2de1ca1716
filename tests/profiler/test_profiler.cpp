// The Profiler facade on its wall-clock path (works on any machine): runs, warm-up, engine stage times,
// scopes.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "sparge/core/error.h"
#include "sparge/core/result.h"
#include "sparge/profiler/profiler.h"

using namespace sparge::prof;

namespace {

ProfilerOptions wallOnly(int warmup) {
  ProfilerOptions o;
  o.warmup = warmup;
  o.useCupti = false;
  o.useCudaEvents = false;
  return o;
}

sparge::core::EntryResult fakeResult(bool referenceCached) {
  sparge::core::EntryResult r;
  r.info.name = "l0";
  r.info.batch = 1;
  r.info.headsQ = r.info.headsKV = 2;
  r.info.tokensQ = r.info.tokensKV = 256;
  r.info.headDim = r.info.headDimV = 64;
  r.heads.resize(2);
  for (auto& h : r.heads) {
    h.sparsity.selectedBlocks = 5;
    h.sparsity.computedPvBlocks = 4;
  }
  r.times.predictMs = 1.0;
  r.times.sparseMs = 3.0;
  r.times.referenceMs = 8.0;
  r.times.referenceCached = referenceCached;
  r.times.metricsMs = 0.5;
  r.times.clock = "wall";
  return r;
}

}  // namespace

TEST(ProfilerWall, ForcedWallClockRecordsEngineStages) {
  Profiler prof(wallOnly(1));
  EXPECT_EQ(prof.source(), TimingSource::WallClock);
  EXPECT_FALSE(prof.sourceReason().empty());
  for (int i = 0; i < 4; ++i) {
    prof.begin(RunInfo{"l0", "all", "theta=0.6", "cpu"});
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    auto result = fakeResult(/*referenceCached=*/false);
    prof.end(&result);
  }
  EXPECT_EQ(prof.runs(), 4);
  TimingReport r = prof.report();
  EXPECT_EQ(r.source, TimingSource::WallClock);
  EXPECT_EQ(r.warmupRuns, 1);
  EXPECT_EQ(r.profiledRuns, 3);
  bool sawTotal = false, sawPredict = false;
  for (const auto& s : r.stages) {
    EXPECT_EQ(s.source, TimingSource::WallClock);  // every number says where it came from
    EXPECT_EQ(s.ms.count, 3);
    if (s.stage == Stage::Total) {
      sawTotal = true;
      EXPECT_GE(s.ms.min, 2.0);  // slept 2 ms inside each run
    }
    if (s.stage == Stage::Predict) {
      sawPredict = true;
      EXPECT_DOUBLE_EQ(s.ms.median, 1.0);
    }
  }
  EXPECT_TRUE(sawTotal && sawPredict);
  ASSERT_TRUE(r.derived.speedup);
  EXPECT_EQ(r.derived.speedupBaseline, "reference");
  EXPECT_DOUBLE_EQ(*r.derived.speedup, 8.0 / 4.0);
  EXPECT_EQ(r.workload.computedQkBlocks, 10);
  EXPECT_EQ(r.workload.heads, 2);
  ASSERT_TRUE(r.derived.denseEquivalentTops);
  EXPECT_NEAR(*r.derived.denseEquivalentTops, 4.0 * 2 * 256 * 256 * 64 / 4e-3 / 1e12, 1e-12);

  // The exports say wall clock.
  auto j = nlohmann::json::parse(toJson(r));
  EXPECT_EQ(j["source"], "wall");
  EXPECT_NE(toCsv(r).find("# source: wall"), std::string::npos);
  auto t = nlohmann::json::parse(toChromeTrace(r));
  EXPECT_EQ(t["otherData"]["source"], "wall");
}

TEST(ProfilerWall, CachedReferenceIsNotATiming) {
  Profiler prof(wallOnly(0));
  auto first = fakeResult(false), later = fakeResult(true);
  prof.begin({});
  prof.end(&first);
  prof.begin({});
  prof.end(&later);
  TimingReport r = prof.report();
  for (const auto& s : r.stages) {
    if (s.stage == Stage::Reference) {
      EXPECT_EQ(s.ms.count, 1);
    }
  }
}

TEST(ProfilerWall, RecordWallAndScopes) {
  Profiler prof(wallOnly(0));
  EXPECT_THROW(prof.recordWall(Stage::Predict, 1.0), sparge::Error);  // no run yet
  EXPECT_THROW(prof.end(), sparge::Error);
  {
    ProfileScope scope(prof, RunInfo{"l1", "0-3", "", "cpu"});
    EXPECT_THROW(prof.begin({}), sparge::Error);  // one run at a time
    prof.recordWall(Stage::Predict, 2.0);
    prof.recordWall(Stage::Sparse, 6.0);
    prof.record(Stage::Dense, 16.0, TimingSource::WallClock);
  }
  EXPECT_EQ(prof.runs(), 1);
  prof.recordWall(Stage::Metrics, 1.0);  // after end(): goes to the last run
  TimingReport r = prof.report();
  EXPECT_EQ(r.run.entry, "l1");
  EXPECT_EQ(r.run.heads, "0-3");
  ASSERT_TRUE(r.derived.speedup);
  EXPECT_EQ(r.derived.speedupBaseline, "dense");
  EXPECT_DOUBLE_EQ(*r.derived.speedup, 2.0);
  EXPECT_FALSE(r.derived.denseEquivalentTops.has_value());  // no workload given
  int metrics = 0;
  for (const auto& s : r.stages) metrics += s.stage == Stage::Metrics;
  EXPECT_EQ(metrics, 1);
  prof.reset();
  EXPECT_EQ(prof.runs(), 0);
  EXPECT_EQ(prof.report().profiledRuns, 0);
}

TEST(ProfilerWall, DefaultProfilerNeverThrowsAndExplains) {
  // On a machine without a GPU this is the wall clock; with one, CUPTI or CUDA events. Either way it must
  // come up and say which source it chose and why.
  Profiler prof;
  EXPECT_FALSE(prof.sourceReason().empty());
  if (!prof.device().gpu) {
    EXPECT_EQ(prof.source(), TimingSource::WallClock);
    EXPECT_FALSE(prof.device().probeError.empty());
  }
  prof.begin({});
  prof.end();
  EXPECT_EQ(prof.report().profiledRuns, 1);
}

TEST(MakeRunInfo, LabelsHeadsAndParams) {
  sparge::core::RunConfig config;
  RunInfo a = makeRunInfo("l0", config, {}, "cpu");
  EXPECT_EQ(a.heads, "all");
  EXPECT_EQ(a.params, "theta=0.6 tau=0.98 lambda=50 128x64");
  EXPECT_EQ(makeRunInfo("l0", config, {3, 1, 2}).heads, "1-3");
  EXPECT_EQ(makeRunInfo("l0", config, {0, 5}).heads, "0,5");
  config.defaults.mode = sparge::core::SelectMode::TopK;
  config.defaults.topk = 0.25;
  config.geometry = sparge::core::kGeometry64x128;
  EXPECT_EQ(makeRunInfo("l0", config, {}).params, "theta=0.6 topk=0.25 lambda=50 64x128");
  EXPECT_EQ(a.label(), "l0 heads all [theta=0.6 tau=0.98 lambda=50 128x64]");
}

TEST(ProfilerWall, ScopeEndTakesResultAndExceptionsCloseTheRun) {
  Profiler prof(wallOnly(0));
  {
    ProfileScope scope(prof, RunInfo{"l0", "all", "", "cpu"});
    auto result = fakeResult(false);
    scope.end(&result);
  }
  try {
    ProfileScope scope(prof, RunInfo{"l0", "all", "", "cpu"});
    throw std::runtime_error("engine failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(prof.runs(), 2);
  EXPECT_NO_THROW(prof.begin({}));  // the failed run was closed
  prof.end();
  TimingReport r = prof.report();
  EXPECT_EQ(r.profiledRuns, 3);
  EXPECT_EQ(r.workload.computedPvBlocks, 8);
  int predict = 0;
  for (const auto& s : r.stages)
    if (s.stage == Stage::Predict) predict = int(s.ms.count);
  EXPECT_EQ(predict, 1);  // only the run that handed over its result has engine stage times
}
