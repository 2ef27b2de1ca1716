// profileEntry with a scripted engine (no GPU): which runs it makes, how they are labelled and marked, and
// the figures the report derives from them, computed here by hand from the engine's scripted stage times.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "sparge/core/error.h"
#include "sparge/profiler/profile_entry.h"

using namespace sparge;
using namespace sparge::prof;

namespace {

// Stage times on the engine's clock: a sparse call is predict 1 + quantize 0.5 + sparse 2 ms; a dense call
// is quantize 0.5 + dense 8 ms; cuDNN takes 4 ms; "other" is never available.
class ScriptedEngine final : public core::Engine {
 public:
  explicit ScriptedEngine(bool cudnn = true) : cudnn_(cudnn) {
    auto e = std::make_shared<core::EntryData>();
    e->info.name = "l0";
    e->info.batch = 1;
    e->info.headsQ = e->info.headsKV = 2;
    e->info.tokensQ = e->info.tokensKV = 1024;
    e->info.headDim = e->info.headDimV = 64;
    entry_ = e;
  }
  std::string name() const override { return "scripted"; }
  bool isGpu() const override { return true; }
  void setEntry(std::shared_ptr<const core::EntryData> e) override { entry_ = std::move(e); }
  std::shared_ptr<const core::EntryData> entry() const override { return entry_; }

  core::EntryResult run(const core::RunConfig& config, const core::RunOptions& options) override {
    calls.push_back({config.defaults.dense, options.computeError, options.heads});
    core::EntryResult r;
    r.info = entry_->info;
    r.config = config;
    r.heads.resize(2);
    for (auto& h : r.heads) {
      h.sparsity.selectedBlocks = 10;
      h.sparsity.computedPvBlocks = 8;
    }
    r.times.clock = "cuda-event";
    r.times.predictMs = 1.0;
    r.times.quantizeMs = 0.5;
    r.times.sparseMs = config.defaults.dense ? 8.0 : 2.0;
    return r;
  }
  std::vector<core::DenseBaseline> denseBaselines() override {
    return {{"cudnn", "scripted cuDNN", cudnn_, cudnn_ ? "" : "no libcudnn here"},
            {"other", "other library", false, "not on this machine"}};
  }
  double runDenseBaseline(const std::string& name) override {
    baselineRuns.push_back(name);
    return 4.0;
  }

  struct Call {
    bool dense;
    bool computeError;
    std::vector<int64_t> heads;
  };
  std::vector<Call> calls;
  std::vector<std::string> baselineRuns;

 private:
  bool cudnn_;
  std::shared_ptr<const core::EntryData> entry_;
};

ProfilerOptions wallOnly() {
  ProfilerOptions o;
  o.useCupti = false;
  o.useCudaEvents = false;
  o.sampleSmClock = false;
  return o;
}

bool hasNote(const TimingReport& r, const std::string& part) {
  for (const auto& n : r.notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(ProfileEntry, RunsLabelsAndFigures) {
  ScriptedEngine engine;
  Profiler profiler(wallOnly());
  ProfileRequest req;
  req.entry = "l0";
  req.warmup = 2;
  req.repeat = 3;
  std::vector<std::pair<int, int>> progress;
  req.progress = [&](int done, int total) { progress.push_back({done, total}); };
  const core::EntryResult result = profileEntry(engine, profiler, req);
  EXPECT_EQ(result.info.name, "l0");

  // One untimed run with the error metrics, then 5 rounds of sparse + dense (+ cuDNN) without them.
  ASSERT_EQ(engine.calls.size(), 1u + 5u * 2u);
  EXPECT_TRUE(engine.calls[0].computeError);
  EXPECT_FALSE(engine.calls[0].dense);
  for (size_t i = 1; i < engine.calls.size(); ++i) {
    EXPECT_FALSE(engine.calls[i].computeError) << i;
    EXPECT_EQ(engine.calls[i].dense, i % 2 == 0) << i;
  }
  EXPECT_EQ(engine.baselineRuns, std::vector<std::string>(5, "cudnn"));
  ASSERT_EQ(progress.size(), 16u);
  EXPECT_EQ(progress.back(), std::make_pair(16, 16));
  EXPECT_EQ(profileRunCount(req, 1), 16);

  const TimingReport r = profiler.report();
  EXPECT_EQ(r.warmupRuns, 1 + 2 * 3);  // the run with the error metrics is a warm-up run too
  EXPECT_EQ(r.profiledRuns, 3 * 3);
  const DerivedFigures& d = r.derived;
  EXPECT_EQ(d.source, TimingSource::CudaEvent);
  ASSERT_TRUE(d.sparseMs && d.denseMs && d.cudnnMs && d.speedup && d.speedupOverDense);
  EXPECT_DOUBLE_EQ(*d.sparseMs, 1.0 + 0.5 + 2.0);
  EXPECT_DOUBLE_EQ(*d.denseMs, 8.0 + 0.5);
  EXPECT_DOUBLE_EQ(*d.cudnnMs, 4.0);
  EXPECT_EQ(d.speedupBaseline, "cudnn");
  EXPECT_DOUBLE_EQ(*d.speedup, 4.0 / 3.5);
  EXPECT_DOUBLE_EQ(*d.speedupOverDense, 8.5 / 3.5);
  // 4 * 1 * 2 * 1024 * 1024 * 64 flop over 4 ms.
  ASSERT_TRUE(d.cudnnTops);
  EXPECT_NEAR(*d.cudnnTops, 536870912.0 / 4e-3 / 1e12, 1e-12);
  EXPECT_TRUE(hasNote(r, "other library not timed: not on this machine"));
  int cudnnLabels = 0, denseLabels = 0;
  for (const auto& row : r.runs) {
    cudnnLabels += row.label.find("l0 (cudnn)") == 0;
    denseLabels += row.label.find("l0 (dense)") == 0;
  }
  EXPECT_EQ(cudnnLabels, 3);
  EXPECT_EQ(denseLabels, 3);
}

TEST(ProfileEntry, WarmUpByTimeGrowsTheProgressTotalAndLeavesTheProfiledRoundsAlone) {
  ScriptedEngine engine;
  Profiler profiler(wallOnly());
  ProfileRequest req;
  req.entry = "l0";
  req.warmup = 1;
  req.warmupMs = 30;
  req.repeat = 2;
  std::vector<std::pair<int, int>> progress;
  req.progress = [&](int done, int total) { progress.push_back({done, total}); };
  const auto start = std::chrono::steady_clock::now();
  profileEntry(engine, profiler, req);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(30));

  // Rounds of sparse + dense + cuDNN: the run with the error metrics, then warm-up rounds, then 2 profiled.
  ASSERT_EQ((engine.calls.size() - 1) % 2, 0u);
  const int rounds = int(engine.calls.size() - 1) / 2;
  const int warmupRounds = rounds - 2;
  EXPECT_GE(warmupRounds, 1);
  const TimingReport r = profiler.report();
  EXPECT_EQ(r.warmupRuns, 1 + 3 * warmupRounds);
  EXPECT_EQ(r.profiledRuns, 3 * 2);
  ASSERT_EQ(progress.size(), size_t(1 + 3 * rounds));
  for (size_t i = 0; i < progress.size(); ++i) {
    EXPECT_EQ(progress[i].first, int(i) + 1);
    EXPECT_LE(progress[i].first, progress[i].second) << i;
    if (i > 0) {
      EXPECT_GE(progress[i].second, progress[i - 1].second) << i;
    }
  }
  EXPECT_EQ(progress.back().first, progress.back().second);
  EXPECT_EQ(progress.front().second, profileRunCount(req, 1));
}

TEST(ProfileEntry, BaselinesCanBeLeftOutAndAreNotComparedWithAHeadSubset) {
  {
    ScriptedEngine engine;
    Profiler profiler(wallOnly());
    ProfileRequest req;
    req.warmup = 0;
    req.repeat = 2;
    req.denseBaseline = false;
    req.engineBaselines = false;
    profileEntry(engine, profiler, req);
    EXPECT_EQ(engine.calls.size(), 3u);
    EXPECT_TRUE(engine.baselineRuns.empty());
    const TimingReport r = profiler.report();
    EXPECT_TRUE(r.derived.speedupBaseline.empty());
    EXPECT_FALSE(r.derived.speedup.has_value());
  }
  {
    ScriptedEngine engine;
    Profiler profiler(wallOnly());
    ProfileRequest req;
    req.warmup = 0;
    req.repeat = 2;
    req.heads = {1};
    profileEntry(engine, profiler, req);
    EXPECT_TRUE(engine.baselineRuns.empty());
    for (const auto& c : engine.calls) EXPECT_EQ(c.heads, std::vector<int64_t>{1});
    const TimingReport r = profiler.report();
    EXPECT_TRUE(hasNote(r, "scripted cuDNN not timed: it runs every head"));
    EXPECT_EQ(r.derived.speedupBaseline, "dense");
  }
  {
    ScriptedEngine engine(false);
    Profiler profiler(wallOnly());
    ProfileRequest req;
    req.warmup = 0;
    req.repeat = 1;
    profileEntry(engine, profiler, req);
    EXPECT_TRUE(hasNote(profiler.report(), "scripted cuDNN not timed: no libcudnn here"));
  }
}

TEST(ProfileEntry, CancelledRunClosesItsProfilerRun) {
  class Cancelling final : public core::Engine {
   public:
    std::string name() const override { return "cancelling"; }
    bool isGpu() const override { return false; }
    void setEntry(std::shared_ptr<const core::EntryData>) override {}
    std::shared_ptr<const core::EntryData> entry() const override { return nullptr; }
    core::EntryResult run(const core::RunConfig&, const core::RunOptions& o) override {
      if (!o.computeError) throw core::Cancelled();
      return {};
    }
  } engine;
  Profiler profiler(wallOnly());
  ProfileRequest req;
  EXPECT_THROW(profileEntry(engine, profiler, req), core::Cancelled);
  EXPECT_EQ(profiler.runs(), 2);        // the run with the error metrics, and the cancelled one, closed
  EXPECT_NO_THROW(profiler.begin({}));  // nothing left open
  profiler.end();
}
