// The job protocol with ranks as threads of one process (an in-memory transport): results reach rank 0,
// a failing rank is reported with its host and entry and stops the others, a rank that ignores the stop
// ends the job instead of hanging it; the queue: answers in order, none once empty or stopped, fast ranks
// taking more pieces than a slow one, every piece done once; the in-order collector; resuming.
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "sparge/core/error.h"
#include "sparge/scaleout/collector.h"
#include "sparge/scaleout/job.h"
#include "sparge/scaleout/partition.h"
#include "sparge/scaleout/resume.h"
#include "sparge/scaleout/wire.h"

namespace sparge::scaleout {
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
  job.hello(RankInfo{rank, "", "cpu", "1 thread", ""});
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

TEST(Job, ProgressIsCostDoneOverTheJobsAndEtaUsesTheRanksRates) {
  Hub hub(2);
  HubTransport t0(hub, 0), t1(hub, 1);
  std::vector<JobProgress> seen;
  JobHandlers h;
  h.progress = [&](const JobProgress& p) { seen.push_back(p); };
  Job root(t0, h), other(t1);
  root.setSchedule("a queue of 2 pieces", 4.0, 8);
  other.progress(RankProgress{0.5, 2, 7, "l9", 10.0});  // 0.5 done in 10 s: 0.05 a second
  root.service();
  root.progress(RankProgress{0.75, 1, 5, "l0", 2.0});  // 0.75 done in 2 s: 0.375 a second
  ASSERT_FALSE(seen.empty());
  const JobProgress& p = seen.back();
  EXPECT_DOUBLE_EQ(p.fraction, 1.25 / 4.0);
  EXPECT_EQ(p.unitsDone, 3);
  EXPECT_EQ(p.unitsTotal, 8);
  EXPECT_EQ(p.probes, 12);
  EXPECT_DOUBLE_EQ(p.etaSeconds, 2.75 / 0.425);  // 4 - 1.25 left at 0.05 + 0.375 a second
  EXPECT_NE(p.current.find("[2/2 ranks busy]"), std::string::npos) << p.current;
}

// The rank of `job` receives what was sent to it, as a rank does between engine runs.
void deliver(Job& job) {
  job.service();
}

TEST(Queue, RequestsAreAnsweredInOrderAndWithNoneOnceEmpty) {
  Hub hub(2);
  HubTransport t0(hub, 0), t1(hub, 1);
  Job root(t0), other(t1);
  root.serve({7, 3, 9});
  other.askForPiece();
  EXPECT_FALSE(other.takeGrant());  // not answered yet
  deliver(root);
  deliver(other);
  EXPECT_EQ(other.takeGrant(), 7);
  root.askForPiece();  // rank 0 answers itself at once
  EXPECT_EQ(root.takeGrant(), 3);
  other.askForPiece();
  other.askForPiece();
  other.askForPiece();
  deliver(root);
  deliver(other);
  EXPECT_EQ(other.takeGrant(), 9);
  EXPECT_EQ(other.takeGrant(), kNoPiece);
  EXPECT_EQ(other.takeGrant(), kNoPiece);
  EXPECT_FALSE(other.takeGrant());
  root.askForPiece();
  EXPECT_EQ(root.takeGrant(), kNoPiece);
}

TEST(Queue, ARankWithAnotherScheduleFailsTheJobAndItsPiecesAreDropped) {
  Hub hub(2);
  HubTransport t0(hub, 0), t1(hub, 1);
  std::vector<int> pieces;
  std::vector<RankFailure> failures;
  JobHandlers h;
  h.piece = [&](int, int piece, const std::string&) { pieces.push_back(piece); };
  h.failure = [&](const RankFailure& f) { failures.push_back(f); };
  Job root(t0, h), other(t1);
  root.setSchedule("a queue of 9 pieces", 9, 9);
  other.setSchedule("a fixed plan of 4 pieces", 9, 9);  // e.g. SPARGE_STATIC_PLAN=1 on that host only
  root.hello(RankInfo{});
  other.hello(RankInfo{});
  other.submit(3, "heads of another job's piece 3");
  deliver(root);
  EXPECT_TRUE(pieces.empty());
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].rank, 1);
  EXPECT_EQ(failures[0].host, "node1");
  EXPECT_NE(failures[0].problem.find("a fixed plan of 4 pieces, rank 0's a queue of 9 pieces"),
            std::string::npos)
      << failures[0].problem;
  EXPECT_TRUE(root.stopFlag().load());
}

TEST(Queue, AFailureStopsTheGrants) {
  Hub hub(3);
  HubTransport t0(hub, 0), t1(hub, 1), t2(hub, 2);
  Job root(t0), failing(t1), other(t2);
  root.serve({0, 1, 2, 3});
  failing.fail("entry bad", "cannot read");
  deliver(root);
  other.askForPiece();
  deliver(root);
  deliver(other);
  EXPECT_EQ(other.takeGrant(), kNoPiece);
  root.askForPiece();
  EXPECT_EQ(root.takeGrant(), kNoPiece);
}

TEST(Queue, AFeedKeepsOnePieceAheadAndStopsWithPiecesInHand) {
  Hub hub(2);
  HubTransport t0(hub, 0), t1(hub, 1);
  Job root(t0), other(t1);
  root.serve({4, 5});
  PieceFeed feed(other, {1, 2}, true);
  EXPECT_EQ(feed.ahead(), 1);
  EXPECT_EQ(feed.next(), 1);  // 2 is still in hand: no request
  EXPECT_EQ(feed.ahead(), 2);
  EXPECT_EQ(hub.boxes[0].size(), 0u);
  EXPECT_EQ(feed.next(), 2);  // nothing left in hand: it asks
  EXPECT_EQ(feed.ahead(), std::nullopt);
  EXPECT_EQ(hub.boxes[0].size(), 1u);
  deliver(root);
  EXPECT_EQ(feed.ahead(), std::nullopt);  // the answer is there, but not yet received
  deliver(other);
  EXPECT_EQ(feed.ahead(), 4);
  EXPECT_EQ(feed.started(), 2);
  root.requestStop();  // e.g. Ctrl-C: piece 4, claimed but not started, is not done
  deliver(other);
  EXPECT_EQ(feed.next(), kNoPiece);
  EXPECT_EQ(feed.started(), 2);
}

// A rank of a queued job: takes pieces until none is left, "working" `msPerHead` ms a head while serving
// the job every millisecond (as the tuner does between engine runs); sends each piece's unit and heads.
// Returns the pieces of its own schedule (computed here, as every rank does).
std::vector<Piece> queueWorker(Job& job, const std::vector<WorkUnit>& units, int msPerHead) {
  const Schedule s = queueSchedule(queueOrder(planWork(units, job.size())), job.size());
  if (job.root()) job.serve(s.shared);
  PieceFeed feed(job, s.initial[size_t(job.rank())], !s.shared.empty());
  for (int piece = feed.next(); piece != kNoPiece; piece = feed.next()) {
    const Piece& p = s.pieces[size_t(piece)];
    const auto end =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(msPerHead * int64_t(p.heads.size()));
    while (std::chrono::steady_clock::now() < end) {
      job.service();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    WireWriter w;
    w.put(int32_t(p.unit));
    w.put(p.heads);
    job.submit(piece, w.take());
  }
  job.finish(std::to_string(feed.started()));
  return s.pieces;
}

TEST(Queue, FastRanksTakeMorePiecesAndEveryPieceIsDoneOnce) {
  // 24 one-head units on 3 ranks: each starts with 2, the other 18 go to whoever asks. Rank 1 is 10 times
  // slower than ranks 0 and 2.
  const std::vector<WorkUnit> units(24, WorkUnit{1.0, {0}});
  Hub hub(3);
  std::map<int, int> doneTimes;                             // piece -> times received
  std::map<int, std::pair<int, std::vector<int64_t>>> got;  // piece -> (unit, heads) as sent
  std::vector<int> taken(3, -1);
  JobHandlers h;
  h.piece = [&](int rank, int piece, const std::string& payload) {
    WireReader r(payload, "rank " + std::to_string(rank));
    got[piece].first = r.read<int32_t>();
    got[piece].second = r.read<std::vector<int64_t>>();
    ++doneTimes[piece];
  };
  h.final = [&](int rank, const std::string& payload) { taken[size_t(rank)] = std::stoi(payload); };
  std::vector<Piece> seen1, seen2;
  std::thread w1([&] {
    HubTransport t(hub, 1);
    Job job(t);
    seen1 = queueWorker(job, units, 20);
  });
  std::thread w2([&] {
    HubTransport t(hub, 2);
    Job job(t);
    seen2 = queueWorker(job, units, 2);
  });
  HubTransport t0(hub, 0);
  Job root(t0, h);
  const std::vector<Piece> pieces = queueWorker(root, units, 2);
  w1.join();
  w2.join();
  ASSERT_EQ(pieces.size(), 24u);
  for (int i = 0; i < 24; ++i) {
    EXPECT_EQ(doneTimes[i], 1) << "piece " << i;
    EXPECT_EQ(got[i].first, pieces[size_t(i)].unit) << "piece " << i;
    EXPECT_EQ(got[i].second, pieces[size_t(i)].heads) << "piece " << i;
  }
  for (const std::vector<Piece>* other : {&seen1, &seen2}) {
    ASSERT_EQ(other->size(), pieces.size());
    for (size_t i = 0; i < pieces.size(); ++i) EXPECT_EQ((*other)[i].heads, pieces[i].heads);
  }
  EXPECT_EQ(taken[0] + taken[1] + taken[2], 24);
  EXPECT_GE(taken[1], 2);  // the two it started with
  EXPECT_LT(taken[1], taken[0]);
  EXPECT_LT(taken[1], taken[2]);
}

TEST(Collector, HandsOverWholeUnitsInOrder) {
  Plan plan;
  plan.ranks = 2;
  plan.pieces = {{0, {0, 1}, 1, 0}, {0, {2, 3}, 1, 1}, {1, {0}, 1, 1}, {2, {0}, 1, 0}};
  UnitCollector c(plan.pieces, 4);  // unit 3 has no piece (nothing to do)
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
  core::TuneGroupInput same{"l00", std::nullopt, {core::TuneInput{"l00", std::nullopt, 4, {}, {}}}, {}};
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
      {core::TuneInput{"l00", std::nullopt, 4, {}, {}}, core::TuneInput{"l01", std::nullopt, 4, {}, {}}},
      {}};
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
  o.geometry = f.geometry;
  // The diagonal blocks (an extension) change every probe: heads tuned with and without them cannot mix.
  o.diagonal = true;
  try {
    checkResumable(f, "p.json", o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("diagonal blocks (--diagonal) off, this run uses on"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace sparge::scaleout
