// Session auto-tune and profiling on a small synthetic entry with the CPU engine: tuned values reach the
// parameters and the results, follow-budget bursts end on the last budget, cancel clears the progress bar.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "session.h"
#include "sparge/core/capture.h"
#include "sparge/core/cpu_engine.h"
#include "sparge/core/synthetic.h"

using namespace sparge;
using namespace sparge::gui;
using namespace std::chrono_literals;

namespace {
std::unique_ptr<Session> tunedSession() {
  core::SynthSpec spec;
  spec.name = "synth";
  spec.headsQ = 4;
  spec.headsKV = 4;
  spec.tokensQ = spec.tokensKV = 512;
  spec.headDim = spec.headDimV = 32;
  spec.segment = 128;
  spec.seed = 11;
  auto entry = std::make_shared<const core::EntryData>(core::makeSyntheticEntry(spec));
  auto s = std::make_unique<Session>([] {
    return engines::EngineSelection{std::make_unique<core::CpuEngine>(2), ""};
  });
  s->openEntryData(entry);
  EXPECT_TRUE(s->waitIdle(120s));
  return s;
}
}  // namespace

TEST(SessionTune, EntryTuneLandsOnParametersAndResults) {
  auto s = tunedSession();
  s->tuning().setBudget(Budget{0.05, 0.06});
  s->tuning().autoTune(TuneScope::Entry);
  EXPECT_TRUE(s->progress().active);
  ASSERT_TRUE(s->waitIdle(300s));
  ASSERT_FALSE(s->messages().hasError()) << s->messages().frontError();
  EXPECT_FALSE(s->progress().active);
  ASSERT_TRUE(s->tuning().lastTune());
  EXPECT_FALSE(s->tuning().lastTune()->cancelled);
  ASSERT_EQ(s->tuning().rows().size(), 4u);
  for (size_t i = 0; i < s->tuning().rows().size(); ++i) {
    const TuneRow& row = s->tuning().rows()[i];
    EXPECT_EQ(row.head, static_cast<int64_t>(i)) << "tuning table not ordered by head";
    EXPECT_EQ(s->runs().paramsFor(row.head), row.params);
    const core::HeadResult* h = s->runs().result()->find(0, row.head);
    ASSERT_NE(h, nullptr);
    EXPECT_EQ(h->params, row.params) << "head " << row.head << " was not re-run with its tuned values";
    EXPECT_NEAR(h->error.l1(), row.l1, 1e-9 + 1e-6 * row.l1);
    EXPECT_LT(h->error.l1(), 0.06);
  }
  EXPECT_GT(s->tuning().generation(), 0u);
}

TEST(SessionTune, FollowBudgetBurstEndsWithTheLastBudget) {
  auto s = tunedSession();
  s->selectHead({0, 1});
  s->tuning().setFollowBudget(true);
  for (double l1 : {0.09, 0.07, 0.05, 0.03, 0.02}) s->tuning().setBudget(Budget{l1, l1 * 1.2});
  ASSERT_TRUE(s->waitIdle(300s));
  ASSERT_FALSE(s->messages().hasError()) << s->messages().frontError();
  EXPECT_FALSE(s->progress().active);
  ASSERT_TRUE(s->tuning().lastTune());
  EXPECT_FALSE(s->tuning().lastTune()->cancelled) << "a replaced live tune must not become the last result";
  EXPECT_DOUBLE_EQ(s->tuning().lastTune()->options.l1, 0.02);
  ASSERT_EQ(s->tuning().lastTune()->headsFinished(), 1);
  EXPECT_EQ(s->runs().result()->find(0, 1)->params,
            s->tuning().lastTune()->groups.front().heads.front().params);
}

TEST(SessionTune, CancelStopsProfilingAndClearsProgress) {
  auto s = tunedSession();
  s->profiling().profile(100);
  EXPECT_TRUE(s->progress().active);
  auto before = s->worker().cancelledCount();
  // Cancel while it runs (a queued job would only be dropped): after the warm-up run has reported.
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (s->progress().done < 1 && std::chrono::steady_clock::now() < deadline) {
    s->poll();
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(s->worker().runningKey(), "profile");
  s->cancel();
  ASSERT_TRUE(s->waitIdle(60s)) << "profiling went on after cancel";
  EXPECT_FALSE(s->progress().active);
  EXPECT_FALSE(s->profiling().timing().valid);
  EXPECT_EQ(s->worker().cancelledCount(), before + 1);
  s->profiling().profile(2);
  ASSERT_TRUE(s->waitIdle(120s));
  EXPECT_TRUE(s->profiling().timing().valid);
  EXPECT_FALSE(s->progress().active);
}

TEST(SessionTune, CancelledTuneClearsProgressAndKeepsResultsConsistent) {
  auto s = tunedSession();
  s->tuning().autoTune(TuneScope::Entry);
  s->cancel();
  ASSERT_TRUE(s->waitIdle(120s));
  EXPECT_FALSE(s->progress().active);
  for (const auto& row : s->tuning().rows())
    EXPECT_EQ(s->runs().result()->find(0, row.head)->params, row.params);
}

// Tuned values belong to their entry: they do not follow to an entry that was not tuned, and come back
// when their entry is selected again.
TEST(SessionTune, TunedValuesStayWithTheirEntry) {
  const std::string path = ::testing::TempDir() + "sparge_two_entries.h5";
  {
    core::CaptureWriter w(path);
    for (const char* name : {"a", "b"}) {
      core::SynthSpec spec;
      spec.name = name;
      spec.headsQ = spec.headsKV = 4;
      spec.tokensQ = spec.tokensKV = 512;
      spec.headDim = spec.headDimV = 32;
      spec.segment = 128;
      spec.seed = name[0];
      core::EntryData e = core::makeSyntheticEntry(spec);
      w.addEntry(e.info, e.q, e.k, e.v);
    }
    w.close();
  }
  auto s = std::make_unique<Session>([] {
    return engines::EngineSelection{std::make_unique<core::CpuEngine>(2), ""};
  });
  s->openCapture(path, "a");
  ASSERT_TRUE(s->waitIdle(120s));
  ASSERT_EQ(s->capture().entryName, "a");
  s->tuning().setBudget(Budget{0.05, 0.06});
  s->tuning().autoTune(TuneScope::Entry);
  ASSERT_TRUE(s->waitIdle(300s));
  ASSERT_FALSE(s->messages().hasError()) << s->messages().frontError();
  ASSERT_EQ(s->tuning().rows().size(), 4u);
  std::vector<core::HeadParams> tunedA;
  for (int64_t h = 0; h < 4; ++h) tunedA.push_back(s->runs().paramsFor(h));
  ASSERT_GT(s->runs().overrideCount(), 0);

  s->selectEntry("b");
  ASSERT_TRUE(s->waitIdle(120s));
  EXPECT_EQ(s->runs().overrideCount(), 0) << "entry a's tuned values must not carry over to entry b";
  const core::HeadResult* h0 = s->runs().result() ? s->runs().result()->find(0, 0) : nullptr;
  ASSERT_NE(h0, nullptr);
  EXPECT_EQ(h0->params, core::HeadParams{});

  s->selectEntry("a");
  ASSERT_TRUE(s->waitIdle(120s));
  for (int64_t h = 0; h < 4; ++h) EXPECT_EQ(s->runs().paramsFor(h), tunedA[h]) << "head " << h;
  std::remove(path.c_str());
}
