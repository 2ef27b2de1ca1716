// Session commands on a small synthetic entry with the CPU engine: selection, overrides, coalescing,
// cancel, settings parsing, sorting, settings persistence.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "session.h"
#include "settings.h"
#include "small_entry.h"
#include "sparge/core/cpu_engine.h"
#include "sparge/core/error.h"

using namespace sparge;
using namespace sparge::gui;
using namespace std::chrono_literals;

namespace {
using session_tests::smallEntry;

std::unique_ptr<Session> makeSession() {
  auto s = std::make_unique<Session>([] {
    return engines::EngineSelection{std::make_unique<core::CpuEngine>(2), ""};
  });
  s->openEntryData(smallEntry());
  EXPECT_TRUE(s->waitIdle(120s));
  return s;
}
// The CPU engine dressed as a Hopper GPU: what the session does with an engine's device target.
class HopperLikeEngine final : public core::Engine {
 public:
  std::string name() const override { return cpu_.name(); }
  bool isGpu() const override { return false; }
  std::optional<core::Target> deviceTarget() const override { return core::Target::Sm90; }
  void setEntry(std::shared_ptr<const core::EntryData> e) override { cpu_.setEntry(std::move(e)); }
  std::shared_ptr<const core::EntryData> entry() const override { return cpu_.entry(); }
  core::EntryResult run(const core::RunConfig& c, const core::RunOptions& o) override {
    return cpu_.run(c, o);
  }

 private:
  core::CpuEngine cpu_{2};
};

std::unique_ptr<Session> makeHopperSession(bool follow) {
  auto s = std::make_unique<Session>([] {
    return engines::EngineSelection{std::make_unique<HopperLikeEngine>(), ""};
  });
  core::RunConfig sm89;
  sm89.geometry = core::kGeometry128x64;
  sm89.numerics = core::Numerics::Int8Fp8;
  s->runs().applyConfig(sm89);
  s->followDeviceTarget(follow);
  s->openEntryData(smallEntry());
  EXPECT_TRUE(s->waitIdle(120s));
  return s;
}
}  // namespace

TEST(Session, LoadsAndRunsEveryHead) {
  auto s = makeSession();
  ASSERT_TRUE(s->engine().ready);
  ASSERT_NE(s->capture().info(), nullptr);
  auto r = s->runs().result();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->heads.size(), 4u);
  EXPECT_EQ(s->runs().lastRun().heads, 4);
  EXPECT_FALSE(s->messages().hasError());
}

TEST(Session, SelectionIsClampedToTheEntry) {
  auto s = makeSession();
  s->selectHead({0, 3});
  EXPECT_EQ(s->capture().selected.head, 3);
  s->selectHead({5, 99});
  EXPECT_EQ(s->capture().selected.batch, 0);
  EXPECT_EQ(s->capture().selected.head, 3);
  s->selectHead({0, -4});
  EXPECT_EQ(s->capture().selected.head, 0);
}

TEST(Session, SelectedHeadOverrideChangesOnlyThatHead) {
  auto s = makeSession();
  auto before = s->runs().result();
  s->selectHead({0, 1});
  core::HeadParams p = s->runs().config().defaults;
  p.tau = 0.4;
  p.theta = -1;
  s->runs().setParams(p, ApplyTarget::SelectedHead);
  EXPECT_TRUE(s->runs().hasOverride(1));
  EXPECT_FALSE(s->runs().hasOverride(0));
  EXPECT_EQ(s->runs().overrideCount(), 1);
  ASSERT_TRUE(s->waitIdle(120s));
  EXPECT_EQ(s->runs().lastRun().heads, 1);  // only the overridden head re-ran
  auto r = s->runs().result();
  ASSERT_EQ(r->heads.size(), 4u);
  EXPECT_EQ(r->find(0, 1)->params.tau, 0.4);
  EXPECT_EQ(r->find(0, 0)->params.tau, 0.98);
  EXPECT_EQ(r->find(0, 0)->blockMask, before->find(0, 0)->blockMask);
  // τ = 0.4 with no forced blocks keeps fewer blocks than the defaults.
  EXPECT_LT(r->find(0, 1)->sparsity.selectedBlocks, before->find(0, 1)->sparsity.selectedBlocks);

  // "All heads" sets the defaults and clears the override.
  core::HeadParams q = s->runs().config().defaults;
  q.tau = 0.9;
  s->runs().setParams(q, ApplyTarget::AllHeads);
  EXPECT_EQ(s->runs().overrideCount(), 0);
  ASSERT_TRUE(s->waitIdle(120s));
  for (const auto& h : s->runs().result()->heads) EXPECT_EQ(h.params.tau, 0.9);
}

TEST(Session, BurstOfChangesEndsWithTheLatestSettings) {
  auto s = makeSession();
  core::HeadParams p = s->runs().config().defaults;
  p.theta = -1;
  for (int i = 0; i < 20; ++i) {
    p.tau = 0.3 + 0.03 * i;
    s->runs().setParams(p, ApplyTarget::AllHeads);
  }
  ASSERT_TRUE(s->waitIdle(120s));
  for (const auto& h : s->runs().result()->heads) EXPECT_DOUBLE_EQ(h.params.tau, 0.3 + 0.03 * 19);
  // Far fewer runs than changes: pending runs were coalesced or cancelled.
  EXPECT_GT(s->worker().coalescedCount() + s->worker().cancelledCount(), 0u);
}

TEST(Session, MixedHeadAndAllChangesLoseNoHead) {
  auto s = makeSession();
  s->runs().setCancelRunningOnChange(true);
  core::HeadParams p = s->runs().config().defaults;
  p.tau = 0.5;
  s->runs().setParams(p, ApplyTarget::AllHeads);
  s->selectHead({0, 2});
  core::HeadParams q = p;
  q.tau = 0.7;
  s->runs().setParams(q, ApplyTarget::SelectedHead);  // coalesced into the pending all-heads run
  ASSERT_TRUE(s->waitIdle(120s));
  auto r = s->runs().result();
  EXPECT_EQ(r->find(0, 2)->params.tau, 0.7);
  EXPECT_EQ(r->find(0, 0)->params.tau, 0.5);
  EXPECT_EQ(r->find(0, 3)->params.tau, 0.5);
}

TEST(Session, CancelStopsWorkAndRerunRecovers) {
  auto s = makeSession();
  core::HeadParams p = s->runs().config().defaults;
  p.tau = 0.6;
  s->runs().setParams(p, ApplyTarget::AllHeads);
  s->cancel();
  ASSERT_TRUE(s->waitIdle(120s));
  EXPECT_FALSE(s->messages().hasError());
  s->runs().rerun();
  ASSERT_TRUE(s->waitIdle(120s));
  for (const auto& h : s->runs().result()->heads) EXPECT_EQ(h.params.tau, 0.6);
}

TEST(Session, BadFileReportsAnErrorAndKeepsTheEntry) {
  auto s = makeSession();
  auto before = s->runs().result();
  s->openCapture("/nonexistent/capture.h5");
  ASSERT_TRUE(s->waitIdle(60s));
  EXPECT_TRUE(s->messages().hasError());
  EXPECT_EQ(s->runs().result(), before);
  EXPECT_EQ(s->capture().entryName, "synth");
}

TEST(Session, InvalidParametersAreRejected) {
  auto s = makeSession();
  core::HeadParams p = s->runs().config().defaults;
  p.tau = 1.5;
  EXPECT_THROW(s->runs().setParams(p, ApplyTarget::AllHeads), sparge::Error);
  EXPECT_EQ(s->runs().config().defaults.tau, 0.98);
}

TEST(Settings, SortHeads) {
  core::EntryResult r;
  for (int h = 0; h < 3; ++h) {
    core::HeadResult hr;
    hr.head = h;
    hr.sparsity.validBlocks = 10;
    hr.sparsity.computedPvBlocks = (h == 1) ? 2 : (h == 0 ? 5 : 8);  // total sparsity 0.5, 0.8, 0.2
    hr.error.absRef = 1;
    hr.error.absDiff = (h == 2) ? 0.3 : 0.1 * h;
    r.heads.push_back(hr);
  }
  EXPECT_EQ(sortHeads(r, HeadSort::Index, false), (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(sortHeads(r, HeadSort::Sparsity, true), (std::vector<size_t>{1, 0, 2}));
  EXPECT_EQ(sortHeads(r, HeadSort::Error, false), (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(sortHeads(r, HeadSort::Error, true), (std::vector<size_t>{2, 1, 0}));
}

TEST(Settings, RoundTripAndRecentFiles) {
  auto dir = std::filesystem::temp_directory_path() / ("sparge_gui_settings_" + std::to_string(::getpid()));
  std::string path = (dir / "settings.json").string();
  AppSettings s;
  for (int i = 0; i < 15; ++i) s.addRecent("/tmp/f" + std::to_string(i) + ".h5");
  s.addRecent("/tmp/f3.h5");
  s.layout.leftWidth = 0.3f;
  s.budgetL1 = 0.02;
  s.profileRuns = 12;
  s.profileWarmupMs = 250;
  saveSettings(path, s);
  AppSettings t = loadSettings(path);
  EXPECT_EQ(t.profileRuns, 12);
  EXPECT_EQ(t.profileWarmupMs, 250);
  ASSERT_EQ(t.recentFiles.size(), AppSettings::kMaxRecent);
  EXPECT_EQ(t.recentFiles.front(), "/tmp/f3.h5");
  EXPECT_EQ(t.recentFiles[1], "/tmp/f14.h5");
  EXPECT_FLOAT_EQ(t.layout.leftWidth, 0.3f);
  EXPECT_DOUBLE_EQ(t.budgetL1, 0.02);
  // Out-of-range values give the defaults of those fields.
  s.profileRuns = 0;
  s.profileWarmupMs = -5;
  saveSettings(path, s);
  t = loadSettings(path);
  EXPECT_EQ(t.profileRuns, AppSettings{}.profileRuns);
  EXPECT_EQ(t.profileWarmupMs, AppSettings{}.profileWarmupMs);
  EXPECT_FLOAT_EQ(t.layout.leftWidth, 0.3f);
  // A corrupt file gives defaults, never an exception.
  { std::ofstream(path) << "{not json"; }
  EXPECT_FLOAT_EQ(loadSettings(path).layout.leftWidth, AppSettings{}.layout.leftWidth);
  std::filesystem::remove_all(dir);
}

TEST(Session, StartsWithTheTargetOfTheEnginesGpuWhenAsked) {
  auto s = makeHopperSession(true);
  // sm90: 64x128 tiles, INT8 Q·Kᵀ, FP8 P·V, and the run that is shown used them.
  EXPECT_EQ(s->runs().config().geometry, core::kGeometry64x128);
  EXPECT_EQ(s->runs().config().numerics, core::Numerics::Int8Fp8);
  auto r = s->runs().result();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->config.geometry, core::kGeometry64x128);
  EXPECT_EQ(r->heads.front().nq, 512 / 64);
  EXPECT_EQ(r->heads.front().nk, 512 / 128);
  bool noticed = false;
  for (const auto& n : s->messages().notices())
    noticed = noticed || n.find("target sm90") != std::string::npos;
  EXPECT_TRUE(noticed);
}

TEST(Session, KeepsTheChosenTargetWhenNotFollowingTheGpu) {
  auto s = makeHopperSession(false);
  EXPECT_EQ(s->runs().config().geometry, core::kGeometry128x64);
  auto r = s->runs().result();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->heads.front().nq, 512 / 128);
}
