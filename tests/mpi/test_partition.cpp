// The plan: whole units when they balance, head splits when units are fewer than ranks, hand-computed
// loads, determinism; the queue: the plan's pieces in hand-computed hand-out order; the cost model against closed
// forms; rank placement.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>

#include "sparge/scaleout/partition.h"
#include "sparge/scaleout/placement.h"

namespace sparge::scaleout {
namespace {

std::vector<int64_t> heads(int64_t n) {
  std::vector<int64_t> h(size_t(n), 0);
  std::iota(h.begin(), h.end(), int64_t(0));
  return h;
}

// Every requested head of every unit is in exactly one piece.
void expectCovers(const std::vector<Piece>& pieces, const std::vector<WorkUnit>& units) {
  for (size_t u = 0; u < units.size(); ++u) {
    std::multiset<int64_t> got;
    for (const Piece& p : pieces)
      if (p.unit == int(u)) got.insert(p.heads.begin(), p.heads.end());
    EXPECT_EQ(got, std::multiset<int64_t>(units[u].heads.begin(), units[u].heads.end())) << "unit " << u;
  }
}

void expectCovers(const Plan& plan, const std::vector<WorkUnit>& units) {
  expectCovers(plan.pieces, units);
}

TEST(Plan, EqualEntriesGoWholeAndEvenly) {
  // 28 layers x 32 heads on 4 ranks: 7 whole entries each, no split.
  std::vector<WorkUnit> units(28, WorkUnit{1.0, heads(32)});
  const Plan plan = planWork(units, 4);
  ASSERT_EQ(plan.pieces.size(), 28u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(plan.piecesOf(r).size(), 7u);
    EXPECT_DOUBLE_EQ(plan.load[size_t(r)], 7 * 32.0);
  }
  for (const Piece& p : plan.pieces) EXPECT_EQ(p.heads.size(), 32u);
  EXPECT_DOUBLE_EQ(plan.imbalance(), 1.0);
  expectCovers(plan, units);
}

TEST(Plan, OneEntryIsSplitByHeadsOverRanks) {
  std::vector<WorkUnit> units{{2.0, heads(9)}};
  const Plan plan = planWork(units, 3);
  ASSERT_EQ(plan.pieces.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(plan.piecesOf(r).size(), 1u);
    EXPECT_EQ(plan.pieces[size_t(plan.piecesOf(r)[0])].heads.size(), 3u);
    EXPECT_DOUBLE_EQ(plan.load[size_t(r)], 6.0);
  }
  expectCovers(plan, units);
}

TEST(Plan, FewerEntriesThanRanksReachesTheBestWholeHeadSplit) {
  // 2 entries x 4 heads on 3 ranks: 8 heads cannot split 8/3; the best is 3, 3, 2 heads.
  std::vector<WorkUnit> units{{1.0, heads(4)}, {1.0, heads(4)}};
  const Plan plan = planWork(units, 3);
  EXPECT_DOUBLE_EQ(plan.makespan(), 3.0);
  EXPECT_DOUBLE_EQ(std::accumulate(plan.load.begin(), plan.load.end(), 0.0), 8.0);
  for (int r = 0; r < 3; ++r) EXPECT_FALSE(plan.piecesOf(r).empty()) << "rank " << r << " idle";
  expectCovers(plan, units);
  // Pieces of one unit on one rank are merged: at most one piece per (unit, rank).
  std::set<std::pair<int, int>> seen;
  for (const Piece& p : plan.pieces) EXPECT_TRUE(seen.insert({p.unit, p.rank}).second);
}

TEST(Plan, UnevenCostsAreBalancedLargestFirst) {
  // Costs 5, 4, 3, 3, 3 (one head each) on 2 ranks, largest first onto the least loaded rank: 5 | 4,
  // 3 -> 7, 3 -> 8, 3 -> 10. Loads 8 and 10 (the optimum 9 | 9 is missed; single heads cannot be split).
  std::vector<WorkUnit> units{{5, {0}}, {4, {0}}, {3, {0}}, {3, {0}}, {3, {0}}};
  const Plan plan = planWork(units, 2);
  std::vector<double> loads = plan.load;
  std::sort(loads.begin(), loads.end());
  EXPECT_DOUBLE_EQ(loads[0], 8.0);
  EXPECT_DOUBLE_EQ(loads[1], 10.0);
  expectCovers(plan, units);
}

TEST(Plan, IsDeterministicAndSkipsUnitsWithoutHeads) {
  std::vector<WorkUnit> units{{3.0, heads(5)}, {1.0, {}}, {2.0, heads(7)}, {0.5, heads(2)}};
  const Plan a = planWork(units, 4), b = planWork(units, 4);
  ASSERT_EQ(a.pieces.size(), b.pieces.size());
  for (size_t i = 0; i < a.pieces.size(); ++i) {
    EXPECT_EQ(a.pieces[i].unit, b.pieces[i].unit);
    EXPECT_EQ(a.pieces[i].heads, b.pieces[i].heads);
    EXPECT_EQ(a.pieces[i].rank, b.pieces[i].rank);
    EXPECT_NE(a.pieces[i].unit, 1);
  }
  expectCovers(a, units);
}

TEST(Plan, WholeUnitsOnlyWhenSplittingIsOff) {
  std::vector<WorkUnit> units{{1.0, heads(8)}};
  PlanOptions o;
  o.splitHeads = false;
  const Plan plan = planWork(units, 4, o);
  ASSERT_EQ(plan.pieces.size(), 1u);
  EXPECT_EQ(plan.pieces[0].heads, heads(8));
}

std::vector<Piece> queued(const std::vector<WorkUnit>& units, int ranks) {
  return queueOrder(planWork(units, ranks));
}

TEST(Queue, EqualEntriesStayWholeInTheirOrder) {
  // 28 entries x 32 heads on 4 ranks: whole entries balance (7 a rank), so the queue holds the 28 entries,
  // in unit order (equal costs). Ranks 0-3 start with entries 0-3, ranks 3-0 hold entries 4-7 next; the
  // other 20 are handed out on request.
  std::vector<WorkUnit> units(28, WorkUnit{1.0, heads(32)});
  const Schedule s = queueSchedule(queued(units, 4), 4);
  ASSERT_EQ(s.pieces.size(), 28u);
  for (size_t i = 0; i < s.pieces.size(); ++i) {
    EXPECT_EQ(s.pieces[i].unit, int(i));
    EXPECT_EQ(s.pieces[i].heads, heads(32));
  }
  EXPECT_EQ(s.initial, (std::vector<std::vector<int>>{{0, 7}, {1, 6}, {2, 5}, {3, 4}}));
  std::vector<int> rest(20);
  std::iota(rest.begin(), rest.end(), 8);
  EXPECT_EQ(s.shared, rest);
  EXPECT_EQ(s.pieces[5].rank, 2);
  EXPECT_EQ(s.pieces[8].rank, -1);
}

TEST(Queue, LargestFirstAndTheHandOutOrderSurvivesTheIndexing) {
  // Costs 16 (unit 0: 4 heads of 4), 2 (unit 1: 2 heads of 1), 3 (unit 2: 3 heads of 1), 1 (unit 3); total
  // 22 on 2 ranks, ideal 11. Whole units give 16 / 6, so the plan halves unit 0 ({0, 1} and {2, 3}, 8
  // each): 8 + 3 and 8 + 2 + 1. The queue: 8, 8, 3, 2, 1, i.e. indices (unit, first head) 0, 1, 3, 2, 4:
  // rank 0 takes 0, rank 1 takes 1, then rank 1 takes 3 and rank 0 takes 2; 4 is handed out on request.
  std::vector<WorkUnit> units{{4.0, heads(4)}, {1.0, heads(2)}, {1.0, heads(3)}, {1.0, heads(1)}};
  const std::vector<Piece> order = queued(units, 2);
  ASSERT_EQ(order.size(), 5u);
  const std::vector<std::pair<int, std::vector<int64_t>>> want{
      {0, {0, 1}}, {0, {2, 3}}, {2, {0, 1, 2}}, {1, {0, 1}}, {3, {0}}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(order[i].unit, want[i].first) << i;
    EXPECT_EQ(order[i].heads, want[i].second) << i;
  }
  EXPECT_DOUBLE_EQ(order[0].cost, 8.0);
  const Schedule s = queueSchedule(order, 2);
  EXPECT_TRUE(s.queue);
  ASSERT_EQ(s.pieces.size(), 5u);
  EXPECT_EQ(s.pieces[2].unit, 1);
  EXPECT_EQ(s.pieces[3].heads, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(s.initial, (std::vector<std::vector<int>>{{0, 2}, {1, 3}}));
  EXPECT_EQ(s.shared, (std::vector<int>{4}));
  EXPECT_EQ(s.pieces[3].rank, 1);
  EXPECT_EQ(s.pieces[4].rank, -1);
  expectCovers(s.pieces, units);
}

TEST(Queue, OneEntryIsSplitOverTheRanks) {
  // 8 heads on 4 ranks: the plan cuts the entry into 4 pieces of 2 heads, one a rank, nothing to ask for.
  std::vector<WorkUnit> units{{1.0, heads(8)}};
  const Schedule s = queueSchedule(queued(units, 4), 4);
  ASSERT_EQ(s.pieces.size(), 4u);
  EXPECT_TRUE(s.shared.empty());
  EXPECT_EQ(s.initial, (std::vector<std::vector<int>>{{0}, {1}, {2}, {3}}));
  for (size_t i = 0; i < 4; ++i)
    EXPECT_EQ(s.pieces[i].heads, (std::vector<int64_t>{int64_t(2 * i), int64_t(2 * i + 1)}));
}

TEST(Queue, FewerPiecesThanRanksLeaveNothingToAskFor) {
  std::vector<WorkUnit> units{{1.0, {0, 1, 2}}};
  const Schedule s = queueSchedule(queued(units, 4), 4);  // 3 heads cannot make more than 3 pieces
  ASSERT_EQ(s.pieces.size(), 3u);
  EXPECT_EQ(s.initial, (std::vector<std::vector<int>>{{0}, {1}, {2}, {}}));
  EXPECT_TRUE(s.shared.empty());
}

TEST(Queue, IsTheSameOnEveryRankAndCoversEveryHead) {
  std::vector<WorkUnit> units{{3.0, heads(5)}, {1.0, {}}, {2.0, heads(7)}, {0.5, heads(2)}, {2.0, {1, 4, 6}}};
  for (int ranks : {2, 3, 8}) {
    const Schedule a = queueSchedule(queued(units, ranks), ranks);
    const Schedule b = queueSchedule(queued(units, ranks), ranks);
    ASSERT_EQ(a.pieces.size(), b.pieces.size());
    for (size_t i = 0; i < a.pieces.size(); ++i) {
      EXPECT_EQ(a.pieces[i].unit, b.pieces[i].unit);
      EXPECT_EQ(a.pieces[i].heads, b.pieces[i].heads);
      if (i > 0) {  // unit order, then first head: the order the collector hands heads over in
        EXPECT_TRUE(a.pieces[i - 1].unit < a.pieces[i].unit ||
                    (a.pieces[i - 1].unit == a.pieces[i].unit &&
                     a.pieces[i - 1].heads.front() < a.pieces[i].heads.front()));
      }
    }
    EXPECT_EQ(a.initial, b.initial);
    EXPECT_EQ(a.shared, b.shared);
    // Every piece is handed out exactly once, to start with or on request.
    std::multiset<int> handed(a.shared.begin(), a.shared.end());
    for (const auto& mine : a.initial) handed.insert(mine.begin(), mine.end());
    std::multiset<int> all;
    for (size_t i = 0; i < a.pieces.size(); ++i) all.insert(int(i));
    EXPECT_EQ(handed, all);
    expectCovers(a.pieces, units);
  }
}

TEST(Queue, AFixedScheduleIsThePlan) {
  std::vector<WorkUnit> units{{1.0, heads(4)}, {1.0, heads(4)}};
  const Plan plan = planWork(units, 3);
  const Schedule s = fixedSchedule(plan);
  EXPECT_FALSE(s.queue);
  EXPECT_TRUE(s.shared.empty());
  ASSERT_EQ(s.initial.size(), 3u);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(s.initial[size_t(r)], plan.piecesOf(r));
  EXPECT_DOUBLE_EQ(s.imbalance, plan.imbalance());
}

TEST(Cost, CausalAndWindowFollowVisibleKeys) {
  core::EntryInfo e;
  e.batch = 2;
  e.tokensQ = 1000;
  e.tokensKV = 1000;
  e.headDim = 64;
  // Full attention: B · Nq · Nkv · D.
  EXPECT_DOUBLE_EQ(headCost(e), 2.0 * 1000 * 1000 * 64);
  // Causal, top-left aligned: query i sees i + 1 keys, Σ = N(N+1)/2.
  e.causal = true;
  EXPECT_DOUBLE_EQ(headCost(e), 2.0 * (1000.0 * 1001 / 2) * 64);
  // Sliding window of 100 to the left, causal: min(i, 100) + 1 keys.
  e.window = core::Window{100, 0};
  double pairs = 0;
  for (int i = 0; i < 1000; ++i) pairs += std::min(i, 100) + 1;
  EXPECT_DOUBLE_EQ(headCost(e), 2.0 * pairs * 64);
}

TEST(Cost, LongSequencesAreSampledClosely) {
  core::EntryInfo e;
  e.batch = 1;
  e.tokensQ = 75000;
  e.tokensKV = 75000;
  e.headDim = 128;
  e.causal = true;
  const double exact = (75000.0 * 75001 / 2) * 128;
  EXPECT_NEAR(headCost(e) / exact, 1.0, 1e-3);
}

TEST(Placement, OneProcessKeepsEverything) {
  const Placement p = placeRank(0, 1, {"0", "1"}, 16, 16, 0);
  EXPECT_TRUE(p.visibleDevices.empty());
  EXPECT_EQ(p.threads, 0);
}

TEST(Placement, RanksTakeTheGpuOfTheirLocalRank) {
  const std::vector<std::string> gpus{"2", "3", "5", "7"};  // e.g. CUDA_VISIBLE_DEVICES=2,3,5,7
  for (int r = 0; r < 4; ++r) EXPECT_EQ(placeRank(r, 4, gpus, 16, 16, 0).visibleDevices, gpus[size_t(r)]);
  EXPECT_TRUE(placeRank(3, 4, gpus, 16, 16, 0).note.empty());
  const Placement shared = placeRank(5, 6, gpus, 16, 16, 0);
  EXPECT_EQ(shared.visibleDevices, "3");
  EXPECT_FALSE(shared.note.empty());
}

TEST(Placement, CpuThreadsAreShared) {
  EXPECT_EQ(placeRank(0, 4, {}, 16, 16, 0).threads, 4);  // unbound: cores / local ranks
  EXPECT_EQ(placeRank(0, 3, {}, 2, 2, 0).threads, 1);    // never below one
  EXPECT_EQ(placeRank(0, 4, {}, 16, 2, 0).threads, 2);   // bound by the launcher to 2 cores
  EXPECT_EQ(placeRank(0, 4, {}, 16, 16, 6).threads, 6);  // --threads wins
}

std::vector<int> range(int first, int last) {
  std::vector<int> v(size_t(last - first + 1));
  std::iota(v.begin(), v.end(), first);
  return v;
}

TEST(CpuList, ParsesLinuxRangesAndRejectsMalformedOnes) {
  EXPECT_EQ(parseCpuList("0-3,8,10-11"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parseCpuList("7"), (std::vector<int>{7}));
  EXPECT_EQ(parseCpuList("4,0-1,1"), (std::vector<int>{0, 1, 4}));  // sorted, once each
  for (const char* bad : {"", "3-1", "a", "1-", "1-2-3", "-1", "2,x"})
    EXPECT_TRUE(parseCpuList(bad).empty()) << bad;
  EXPECT_EQ(formatCpuList({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(formatCpuList({5}), "5");
  EXPECT_EQ(formatCpuList({}), "");
}

// A sysfs tree of PCI devices: two GPUs on different NUMA nodes (listed out of bus order), an NVSwitch and
// another vendor's device.
class FakeSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() / ("sparge_sysfs_" + std::to_string(getpid()));
    device("0000:c1:00.0", "0x10de", "0x030200", "0x2335", "32-63");
    device("0000:41:00.0", "0x10de", "0x030200", "0x2335", "0-31");
    device("0000:05:00.0", "0x10de", "0x068000", "0x22a3", "0-63");  // NVSwitch
    device("0000:01:00.0", "0x8086", "0x030000", "0x1234", "0-63");
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void device(const std::string& addr, const std::string& vendor, const std::string& cls,
              const std::string& model, const std::string& cpus) {
    const auto dir = root_ / "bus/pci/devices" / addr;
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "vendor") << vendor << "\n";
    std::ofstream(dir / "class") << cls << "\n";
    std::ofstream(dir / "device") << model << "\n";
    std::ofstream(dir / "local_cpulist") << cpus << "\n";
  }
  std::string root() const { return root_.string(); }
  std::filesystem::path root_;
};

TEST_F(FakeSysfs, GpusAreCountedInBusOrder) {
  EXPECT_EQ(gpuLocalCpus(root(), "0", false), range(0, 31));
  EXPECT_EQ(gpuLocalCpus(root(), "1", false), range(32, 63));
  EXPECT_TRUE(gpuLocalCpus(root(), "2", false).empty());  // the NVSwitch is not a GPU
  EXPECT_TRUE(gpuLocalCpus(root(), "GPU-8f3a", false).empty());
  EXPECT_TRUE(gpuLocalCpus(root(), "", false).empty());
  EXPECT_TRUE(gpuLocalCpus(root() + "/missing", "0", false).empty());
}

TEST_F(FakeSysfs, MixedModelsNeedPciBusOrder) {
  device("0000:81:00.0", "0x10de", "0x030000", "0x2684", "0-31");
  EXPECT_TRUE(gpuLocalCpus(root(), "0", false).empty());  // CUDA's fastest-first order is unknown
  EXPECT_EQ(gpuLocalCpus(root(), "2", true), range(32, 63));
}

TEST(Placement, UnboundRanksBindNearTheirGpu) {
  const GpuCpus near = [](const std::string& gpu) {
    return gpu == "0" || gpu == "1" ? range(0, 15) : range(16, 31);
  };
  const std::vector<std::string> gpus{"0", "1", "2", "3"};
  const Placement p = placeRank(2, 4, gpus, 32, 32, 0, near);
  EXPECT_EQ(p.visibleDevices, "2");
  EXPECT_EQ(p.cpus, range(16, 31));
  EXPECT_EQ(p.threads, 8);  // 16 CPUs shared by the ranks of GPUs 2 and 3
  EXPECT_EQ(placeRank(0, 4, gpus, 32, 32, 6, near).threads, 6);  // --threads wins, the binding stays
  EXPECT_EQ(placeRank(0, 4, gpus, 32, 32, 6, near).cpus, range(0, 15));
  EXPECT_TRUE(placeRank(2, 4, gpus, 32, 8, 0, near).cpus.empty());  // the launcher bound it
  EXPECT_EQ(placeRank(2, 4, gpus, 32, 8, 0, near).threads, 8);
  const GpuCpus unknown = [](const std::string&) { return std::vector<int>{}; };
  EXPECT_TRUE(placeRank(1, 4, gpus, 32, 32, 0, unknown).cpus.empty());
  EXPECT_EQ(placeRank(1, 4, gpus, 32, 32, 0, unknown).threads, 8);
  EXPECT_TRUE(placeRank(0, 1, gpus, 32, 32, 0, near).cpus.empty());            // one process stays as it is
  const GpuCpus everything = [](const std::string&) { return range(0, 31); };  // one NUMA node
  EXPECT_TRUE(placeRank(1, 4, gpus, 32, 32, 0, everything).cpus.empty());
  EXPECT_EQ(placeRank(1, 4, gpus, 32, 32, 0, everything).threads, 8);
}

}  // namespace
}  // namespace sparge::scaleout
