// Early results of quantized numerics (RunOptions::onDeployed): the session shows the deployed figures
// first and the error split when its pass lands, and lets a newer change take the place of that pass. The
// engine here is the CPU engine, which hands out the deployed figures itself once the entry's dense outputs
// are cached; the wrapper records its answers and can hold a run. The expected figures come from a plain
// CPU run.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "session.h"
#include "small_entry.h"
#include "sparge/core/cpu_engine.h"

using namespace sparge;
using namespace sparge::gui;
using namespace std::chrono_literals;

namespace {

using session_tests::smallEntry;

// What the engine saw: per call with an early delivery, the τ it ran and what the callback answered.
struct Deliveries {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::pair<double, bool>> answers;
  bool holdNextRun = false, inRun = false;
  bool holdAfterEarly = false, earlyDelivered = false;  // the split of the next run waits
};

// Lets a held run go when the test ends, also on a failed assertion (before the session waits for it).
struct ReleaseAtExit {
  std::shared_ptr<Deliveries> d;
  ~ReleaseAtExit() {
    {
      std::lock_guard lock(d->mutex);
      d->holdAfterEarly = d->holdNextRun = false;
    }
    d->changed.notify_all();
  }
};

class EarlyDeliveringEngine final : public core::Engine {
 public:
  explicit EarlyDeliveringEngine(std::shared_ptr<Deliveries> d) : seen_(std::move(d)) {}
  std::string name() const override { return cpu_.name(); }
  bool isGpu() const override { return false; }
  void setEntry(std::shared_ptr<const core::EntryData> e) override { cpu_.setEntry(std::move(e)); }
  std::shared_ptr<const core::EntryData> entry() const override { return cpu_.entry(); }

  core::EntryResult run(const core::RunConfig& c, const core::RunOptions& o) override {
    if (!o.onDeployed || c.numerics == core::Numerics::None) return cpu_.run(c, o);
    waitWhileHeld();
    core::RunOptions recorded = o;
    recorded.onDeployed = [&](std::shared_ptr<const core::EntryResult> early) {
      const bool go = o.onDeployed(std::move(early));
      std::unique_lock lock(seen_->mutex);
      seen_->answers.push_back({c.defaults.tau, go});
      seen_->earlyDelivered = true;
      seen_->changed.notify_all();
      seen_->changed.wait(lock, [&] { return !seen_->holdAfterEarly; });
      return go;
    };
    return cpu_.run(c, recorded);
  }

 private:
  // A test holds a run between its start and its early result to queue a newer change meanwhile.
  void waitWhileHeld() {
    std::unique_lock lock(seen_->mutex);
    seen_->inRun = true;
    seen_->changed.notify_all();
    seen_->changed.wait(lock, [&] { return !seen_->holdNextRun; });
    seen_->inRun = false;
  }

  core::CpuEngine cpu_{2};
  std::shared_ptr<Deliveries> seen_;
};

std::unique_ptr<Session> makeSession(std::shared_ptr<Deliveries> d) {
  auto s = std::make_unique<Session>([d] {
    return engines::EngineSelection{std::make_unique<EarlyDeliveringEngine>(d), ""};
  });
  core::RunConfig quantized;
  quantized.numerics = core::Numerics::Int8Fp8;
  s->runs().applyConfig(quantized);
  s->openEntryData(smallEntry());
  EXPECT_TRUE(s->waitIdle(120s));
  return s;
}

core::HeadParams withTau(double tau) {
  core::HeadParams p;
  p.tau = tau;
  return p;
}

// The figures a plain CPU run gives for τ on every head.
core::EntryResult plainRun(double tau) {
  core::CpuEngine cpu(2);
  cpu.setEntry(smallEntry());
  core::RunConfig c;
  c.numerics = core::Numerics::Int8Fp8;
  c.defaults = withTau(tau);
  core::RunOptions o;
  o.computeError = true;
  return cpu.run(c, o);
}

}  // namespace

TEST(SessionEarlyResults, TheSplitFollowsTheDeployedFiguresAsASecondResult) {
  auto d = std::make_shared<Deliveries>();
  auto s = makeSession(d);
  const uint64_t before = s->runs().resultGeneration(), mapsBefore = s->runs().mapsGeneration();
  s->runs().setParams(withTau(0.8), ApplyTarget::AllHeads);
  ASSERT_TRUE(s->waitIdle(120s));
  EXPECT_EQ(s->runs().resultGeneration(), before + 2);    // the early result, then the complete one
  EXPECT_EQ(s->runs().mapsGeneration(), mapsBefore + 1);  // one run's maps: coloured once
  const auto r = s->runs().result();
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->splitPending);
  const core::EntryResult want = plainRun(0.8);
  ASSERT_EQ(r->heads.size(), want.heads.size());
  for (size_t i = 0; i < want.heads.size(); ++i) {
    EXPECT_EQ(r->heads[i].params.tau, 0.8);
    EXPECT_GT(r->heads[i].errorSparse.count, 0);
    EXPECT_EQ(r->heads[i].errorSparse.absDiff, want.heads[i].errorSparse.absDiff);
    EXPECT_EQ(r->heads[i].error.absDiff, want.heads[i].error.absDiff);
  }
  std::lock_guard lock(d->mutex);
  ASSERT_FALSE(d->answers.empty());
  EXPECT_EQ(d->answers.back(), std::make_pair(0.8, true));
}

TEST(SessionEarlyResults, ANewerChangeTakesThePlaceOfTheSplitPass) {
  auto d = std::make_shared<Deliveries>();
  auto s = makeSession(d);
  ReleaseAtExit release{d};
  {
    std::lock_guard lock(d->mutex);
    d->holdNextRun = true;
    d->answers.clear();
  }
  s->runs().setParams(withTau(0.7), ApplyTarget::AllHeads);
  {
    std::unique_lock lock(d->mutex);
    ASSERT_TRUE(d->changed.wait_for(lock, 60s, [&] { return d->inRun; }));
  }
  s->runs().setParams(withTau(0.85), ApplyTarget::AllHeads);  // queued while the first run is held
  {
    std::lock_guard lock(d->mutex);
    d->holdNextRun = false;
  }
  d->changed.notify_all();
  ASSERT_TRUE(s->waitIdle(120s));
  {
    std::lock_guard lock(d->mutex);
    const std::vector<std::pair<double, bool>> want = {{0.7, false}, {0.85, true}};
    EXPECT_EQ(d->answers, want);  // the first run stopped at its early result
  }
  const auto r = s->runs().result();
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->splitPending);
  for (const core::HeadResult& h : r->heads) {
    EXPECT_EQ(h.params.tau, 0.85);
    EXPECT_GT(h.errorSparse.count, 0);
  }
}

TEST(SessionEarlyResults, ExportsWaitForTheSplit) {
  auto d = std::make_shared<Deliveries>();
  auto s = makeSession(d);
  ReleaseAtExit release{d};
  const std::string dir = ::testing::TempDir();
  std::filesystem::remove(dir + "/early_params.json");
  {
    std::lock_guard lock(d->mutex);
    d->holdAfterEarly = true;
    d->earlyDelivered = false;
  }
  s->runs().setParams(withTau(0.75), ApplyTarget::AllHeads);
  {
    std::unique_lock lock(d->mutex);
    ASSERT_TRUE(d->changed.wait_for(lock, 60s, [&] { return d->earlyDelivered; }));
  }
  for (int i = 0; i < 1000 && !(s->runs().result() && s->runs().result()->splitPending); ++i) {
    s->poll();
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_TRUE(s->runs().result()->splitPending);
  s->files().exportReport(dir + "/early.json");
  s->files().exportParams(dir + "/early_params.json");
  ASSERT_TRUE(s->messages().hasError());
  EXPECT_NE(s->messages().frontError().find("still being computed"), std::string::npos);
  s->messages().popError();
  ASSERT_TRUE(s->messages().hasError());  // both exports refused
  s->messages().popError();
  {
    std::lock_guard lock(d->mutex);
    d->holdAfterEarly = false;
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/early_params.json"));
  d->changed.notify_all();
  ASSERT_TRUE(s->waitIdle(120s));
  EXPECT_FALSE(s->runs().result()->splitPending);
  s->files().exportParams(dir + "/early_params.json");
  EXPECT_FALSE(s->messages().hasError());
  EXPECT_TRUE(std::filesystem::exists(dir + "/early_params.json"));
  std::filesystem::remove(dir + "/early_params.json");
}
