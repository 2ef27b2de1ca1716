// The job protocol with ranks as threads of one process (an in-memory transport): results reach rank 0,
// a failing rank is reported with its host and entry and stops the others, a rank that ignores the stop
// ends the job instead of hanging it; the in-order collector; resuming.
#include <gtest/gtest.h>

#include <deque>
#include <mutex>
#include <thread>

#include "sparge/core/error.h"
#include "sparge/dist/collector.h"
#include "sparge/dist/job.h"
#include "sparge/dist/resume.h"

namespace sparge::dist {
namespace {

struct Aborted {
  int code;
};

// Mailboxes shared by the ranks of one test.
struct Hub {
  std::mutex mutex;
  std::vector<std::deque<Message>> boxes;
  explicit Hub(int ranks) : boxes(size_t(ranks)) {}
};

class HubTransport : public Transport {
 public:
  HubTransport(Hub& hub, int rank) : hub_(hub), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return int(hub_.boxes.size()); }
  int localRank() const override { return rank_; }
  int localSize() const override { return size(); }
  std::string host() const override { return "node" + std::to_string(rank_); }
  std::string name() const override { return "hub"; }
  void send(int dest, int tag, std::string payload) override {
    std::lock_guard lock(hub_.mutex);
    hub_.boxes[size_t(dest)].push_back(Message{rank_, tag, std::move(payload)});
  }
  std::optional<Message> poll() override {
    std::lock_guard lock(hub_.mutex);
    auto& box = hub_.boxes[size_t(rank_)];
    if (box.empty()) return std::nullopt;
    Message m = std::move(box.front());
    box.pop_front();
    return m;
  }
  bool sendsDone() override { return true; }
  [[noreturn]] void abort(int code) override { throw Aborted{code}; }

 private:
  Hub& hub_;
  int rank_;
};

// A worker rank: `pieces` results, or a failure on "entry bad" after them.
void worker(Hub& hub, int rank, int pieces, bool fail) {
  HubTransport t(hub, rank);
  Job job(t);
  job.hello(RankInfo{rank, "", "cpu", "1 thread"});
  for (int i = 0; i < pieces; ++i)
    job.submit(rank * 10 + i, "r" + std::to_string(rank) + "p" + std::to_string(i));
  if (fail) job.fail("entry bad", "cannot read");
  job.finish("final " + std::to_string(rank));
}

TEST(Job, PiecesAndFinalPayloadsReachRankZero) {
  Hub hub(3);
  std::vector<std::pair<int, std::string>> pieces;
  std::vector<std::string> finals(3);
  JobHandlers h;
  h.piece = [&](int, int piece, const std::string& payload) { pieces.emplace_back(piece, payload); };
  h.final = [&](int rank, const std::string& payload) { finals[size_t(rank)] = payload; };
  std::thread w1(worker, std::ref(hub), 1, 2, false), w2(worker, std::ref(hub), 2, 1, false);
  HubTransport t(hub, 0);
  Job job(t, h);
  job.submit(0, "r0p0");
  const JobOutcome out = job.finish("final 0");
  w1.join();
  w2.join();
  EXPECT_TRUE(out.failures.empty());
  EXPECT_FALSE(out.stopped);
  std::sort(pieces.begin(), pieces.end());
  const std::vector<std::pair<int, std::string>> want{{0, "r0p0"}, {10, "r1p0"}, {11, "r1p1"}, {20, "r2p0"}};
  EXPECT_EQ(pieces, want);
  EXPECT_EQ(finals, (std::vector<std::string>{"final 0", "final 1", "final 2"}));
}

TEST(Job, AFailingRankIsNamedAndStopsTheOthers) {
  Hub hub(3);
  std::vector<RankFailure> failures;
  JobHandlers h;
  h.failure = [&](const RankFailure& f) { failures.push_back(f); };
  // Rank 2 works until it is told to stop.
  std::atomic<bool> rank2Stopped{false};
  std::thread w2([&] {
    HubTransport t(hub, 2);
    Job job(t);
    while (!job.service()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    rank2Stopped = true;
    job.finish();
  });
  std::thread w1(worker, std::ref(hub), 1, 1, true);
  HubTransport t(hub, 0);
  Job job(t, h);
  while (!job.service()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const JobOutcome out = job.finish();
  w1.join();
  w2.join();
  EXPECT_TRUE(out.stopped);
  ASSERT_EQ(out.failures.size(), 1u);
  EXPECT_EQ(out.failures[0].rank, 1);
  EXPECT_EQ(out.failures[0].host, "node1");
  EXPECT_EQ(out.failures[0].where, "entry bad");
  EXPECT_EQ(out.failures[0].problem, "cannot read");
  EXPECT_EQ(failures.size(), 1u);
  EXPECT_TRUE(rank2Stopped);
}

TEST(Job, ARankThatIgnoresTheStopEndsTheJob) {
  Hub hub(2);
  HubTransport t(hub, 0);
  Job job(t, {}, std::chrono::seconds(0));
  job.fail("entry x", "boom");  // rank 0 fails; rank 1 never answers
  try {
    job.finish();
    FAIL() << "finish() must end the job";
  } catch (const Aborted& a) {
    EXPECT_EQ(a.code, 1);
  }
}

TEST(Job, ProgressIsWeightedByShareAndEtaFollowsTheSlowestRank) {
  Hub hub(2);
  HubTransport t0(hub, 0), t1(hub, 1);
  std::vector<JobProgress> seen;
  JobHandlers h;
  h.progress = [&](const JobProgress& p) { seen.push_back(p); };
  Job root(t0, h), other(t1);
  root.setShares({{3.0, 3}, {1.0, 1}});
  other.progress(RankProgress{0.5, 0, 1, 7, "l9", 10.0});  // half of its share after 10 s: 10 s left
  root.service();
  root.progress(RankProgress{0.25, 1, 3, 5, "l0", 2.0});  // a quarter of 3 after 2 s: 6 s left
  ASSERT_FALSE(seen.empty());
  const JobProgress& p = seen.back();
  EXPECT_DOUBLE_EQ(p.fraction, 0.75 * 0.25 + 0.25 * 0.5);
  EXPECT_EQ(p.unitsDone, 1);
  EXPECT_EQ(p.unitsTotal, 4);
  EXPECT_EQ(p.probes, 12);
  EXPECT_DOUBLE_EQ(p.etaSeconds, 10.0);
}

TEST(Collector, HandsOverWholeUnitsInOrder) {
  Plan plan;
  plan.ranks = 2;
  plan.pieces = {{0, {0, 1}, 1, 0}, {0, {2, 3}, 1, 1}, {1, {0}, 1, 1}, {2, {0}, 1, 0}};
  UnitCollector c(plan, 4);  // unit 3 has no piece (nothing to do)
  std::vector<std::pair<size_t, std::vector<std::string>>> got;
  auto take = [&](size_t u, std::vector<std::string>& p) { got.emplace_back(u, p); };
  c.add(2, "u1");
  c.drain(take);
  EXPECT_TRUE(got.empty());  // unit 0 is not complete yet
  c.add(1, "u0b");
  c.add(0, "u0a");
  c.drain(take);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].first, 0u);
  EXPECT_EQ(got[0].second, (std::vector<std::string>{"u0a", "u0b"}));
  EXPECT_EQ(got[1].first, 1u);
  EXPECT_THROW(c.add(0, "again"), Error);
  EXPECT_THROW(c.add(9, "unknown"), Error);
  std::vector<std::pair<size_t, bool>> rest;
  c.remaining([&](size_t u, std::vector<std::string>& p, bool all) {
    rest.emplace_back(u, all);
    EXPECT_TRUE(p.empty());
  });
  EXPECT_EQ(rest, (std::vector<std::pair<size_t, bool>>{{2, false}, {3, true}}));
}

core::ParamsFile resumeFile() {
  core::ParamsFile f;
  f.l1 = 0.05;
  f.l2 = 0.06;
  core::ParamsGroup g;
  g.name = "l00";
  g.entries = {"l00"};
  g.headsQ = 4;
  g.complete = false;
  for (int h : {0, 2}) {
    core::ParamsHead ph;
    ph.head = h;
    ph.params.theta = 0.125 * h;
    g.heads.push_back(ph);
  }
  f.groups.push_back(g);
  g.name = "other";
  g.entries = {"other"};
  f.groups.push_back(g);
  return f;
}

TEST(Resume, KeepsTheHeadsOfMatchingGroupsOnly) {
  const core::ParamsFile f = resumeFile();
  core::TuneGroupInput same{"l00", std::nullopt, {core::TuneInput{"l00", std::nullopt, 4, {}}}};
  std::string note;
  const std::vector<core::TunedHead> kept = finishedHeads(f, same, 4, &note);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[1].head, 2);
  EXPECT_DOUBLE_EQ(kept[1].params.theta, 0.25);
  EXPECT_TRUE(note.empty());
  // Same name, other entries: tuned again, with a note.
  core::TuneGroupInput changed{
      "l00",
      std::nullopt,
      {core::TuneInput{"l00", std::nullopt, 4, {}}, core::TuneInput{"l01", std::nullopt, 4, {}}}};
  EXPECT_TRUE(finishedHeads(f, changed, 4, &note).empty());
  EXPECT_FALSE(note.empty());
  // Groups this run does not tune are kept.
  const std::vector<core::TunedGroup> others = otherGroups(f, {same});
  ASSERT_EQ(others.size(), 1u);
  EXPECT_EQ(others[0].name, "other");
}

TEST(Resume, RefusesOtherSettings) {
  const core::ParamsFile f = resumeFile();
  core::TuneOptions o;
  o.l1 = 0.05;
  o.l2 = 0.06;
  EXPECT_NO_THROW(checkResumable(f, "p.json", o));
  o.l1 = 0.04;
  try {
    checkResumable(f, "p.json", o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("p.json"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("--l1"), std::string::npos);
  }
  o.l1 = 0.05;
  o.geometry = core::kGeometry64x128;
  EXPECT_THROW(checkResumable(f, "p.json", o), Error);
}

}  // namespace
}  // namespace sparge::dist
