// The data side of the overview, curves and kernel views, headless: overview cells equal the per-entry
// runs, curve points equal individual runs at those thresholds, kernel rows equal the profiler's records,
// the Pareto front of hand-placed points, and when colouring a result starts threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "heat_colors.h"
#include "session.h"
#include "sparge/core/capture.h"
#include "sparge/core/cpu_engine.h"
#include "sparge/core/synthetic.h"

using namespace sparge;
using namespace sparge::gui;
using namespace std::chrono_literals;

namespace {
std::unique_ptr<Session> cpuSession() {
  return std::make_unique<Session>([] {
    return engines::EngineSelection{std::make_unique<core::CpuEngine>(2), ""};
  });
}

core::EntryData synth(const char* name, bool causal, uint64_t seed, int64_t headsKV = 4) {
  core::SynthSpec spec;
  spec.name = name;
  spec.headsQ = 4;
  spec.headsKV = headsKV;
  spec.tokensQ = spec.tokensKV = 512;
  spec.headDim = spec.headDimV = 32;
  spec.segment = 128;
  spec.causal = causal;
  spec.seed = seed;
  return core::makeSyntheticEntry(spec);
}

// Every figure of a head, compared exactly: both sides are sums of the same engine's per-block work.
void expectSameFigures(const HeadFigures& a, const HeadFigures& b, const std::string& where) {
  EXPECT_EQ(a.sparsity.validBlocks, b.sparsity.validBlocks) << where;
  EXPECT_EQ(a.sparsity.selectedBlocks, b.sparsity.selectedBlocks) << where;
  EXPECT_EQ(a.sparsity.computedPvBlocks, b.sparsity.computedPvBlocks) << where;
  EXPECT_EQ(a.sparsity.skippedPvBlocks, b.sparsity.skippedPvBlocks) << where;
  EXPECT_DOUBLE_EQ(a.error.l1(), b.error.l1()) << where;
  EXPECT_DOUBLE_EQ(a.errorSparse.l1(), b.errorSparse.l1()) << where;
  EXPECT_DOUBLE_EQ(a.errorQuant.l1(), b.errorQuant.l1()) << where;
  EXPECT_DOUBLE_EQ(a.error.cosSim(), b.error.cosSim()) << where;
}

CurvePoint point(double sparsityTotal, double l1, bool done = true) {
  CurvePoint p;
  p.figures.sparsity.validBlocks = 1000;
  p.figures.sparsity.computedPvBlocks = static_cast<int64_t>(std::llround(1000 * (1 - sparsityTotal)));
  p.figures.error.absRef = 1;
  p.figures.error.absDiff = l1;
  p.done = done;
  return p;
}
}  // namespace

TEST(OverviewData, CellsEqualThePerEntryRuns) {
  const std::string path = ::testing::TempDir() + "sparge_overview.h5";
  const char* names[] = {"a", "b", "c"};
  {
    core::CaptureWriter w(path);
    for (int i = 0; i < 3; ++i) {
      core::EntryData e = synth(names[i], i == 1, 20 + i, i == 2 ? 2 : 4);
      w.addEntry(e.info, e.q, e.k, e.v);
    }
    w.close();
  }
  auto s = cpuSession();
  s->openCapture(path, "a");
  ASSERT_TRUE(s->waitIdle(120s));
  core::HeadParams p = s->runs().config().defaults;
  p.theta = -1;
  p.tau = 0.9;
  p.lambda = 5;
  s->runs().setParams(p, ApplyTarget::AllHeads);
  s->overview().setActive(true);
  ASSERT_TRUE(s->waitIdle(300s));
  ASSERT_FALSE(s->messages().hasError()) << s->messages().frontError();
  const auto& rows = s->overview().rows();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(s->overview().doneCount(), 3u);
  EXPECT_FALSE(s->overview().filling());

  auto compareEntry = [&](size_t i) {
    s->selectEntry(names[i]);
    ASSERT_TRUE(s->waitIdle(120s));
    auto r = s->runs().result();
    ASSERT_TRUE(r);
    ASSERT_EQ(r->info.name, names[i]);
    ASSERT_TRUE(rows[i].done && !rows[i].stale);
    ASSERT_EQ(rows[i].heads.size(), 4u);
    for (int64_t h = 0; h < 4; ++h) {
      expectSameFigures(rows[i].heads[h], figuresOf(*r, h),
                        std::string(names[i]) + " head " + std::to_string(h));
    }
  };
  for (size_t i = 0; i < 3; ++i) compareEntry(i);

  // An override on the selected entry refills its row only, with the override.
  core::HeadParams q = p;
  q.tau = 0.6;
  s->runs().setHeadParams(1, q);
  ASSERT_TRUE(s->waitIdle(300s));
  EXPECT_EQ(rows[2].config.forHead(1).tau, 0.6);
  EXPECT_TRUE(rows[0].config.perHead.empty());
  for (size_t i : {size_t{2}, size_t{0}}) compareEntry(i);
  std::remove(path.c_str());
}

TEST(CurvesData, PointsEqualIndividualRunsAtThoseThresholds) {
  auto s = cpuSession();
  s->openEntryData(std::make_shared<const core::EntryData>(synth("synth", true, 5)));
  ASSERT_TRUE(s->waitIdle(120s));
  core::HeadParams base = s->runs().config().defaults;
  base.lambda = 4;  // the PV skip on, so the points' total sparsity includes it
  s->runs().setParams(base, ApplyTarget::AllHeads);
  ASSERT_TRUE(s->waitIdle(120s));
  s->curves().sweep(SweepScope::AllHeads, 5);
  ASSERT_TRUE(s->waitIdle(300s));
  ASSERT_FALSE(s->messages().hasError()) << s->messages().frontError();
  auto d = s->curves().data();
  ASSERT_TRUE(d);
  ASSERT_EQ(d->done, d->total);
  EXPECT_EQ(d->total, d->grid.thetas.size() * 5);
  EXPECT_NE(std::find(d->grid.thetas.begin(), d->grid.thetas.end(), -0.1), d->grid.thetas.end());
  EXPECT_NE(std::find(d->grid.thetas.begin(), d->grid.thetas.end(), base.theta), d->grid.thetas.end());
  EXPECT_TRUE(std::is_sorted(d->grid.sels.begin(), d->grid.sels.end()));
  ASSERT_EQ(d->heads.size(), 4u);
  for (int64_t h : {1, 3}) {
    for (size_t k : {size_t{0}, d->total / 2, d->total - 1}) {
      const CurvePoint& pt = d->heads[h].points[k];
      ASSERT_TRUE(pt.done);
      EXPECT_EQ(pt.params.lambda, 4);
      EXPECT_EQ(pt.params.theta, d->grid.thetas[k / 5]);
      EXPECT_EQ(pt.params.tau, d->grid.sels[k % 5]);
      s->runs().setHeadParams(h, pt.params);
      ASSERT_TRUE(s->waitIdle(120s));
      expectSameFigures(pt.figures, figuresOf(*s->runs().result(), h),
                        "head " + std::to_string(h) + " point " + std::to_string(k));
    }
  }
  // The sweep's own front is a subset of its points, ascending in sparsity and descending... never rising
  // in error while sparsity falls.
  const auto& front = d->heads[0].pareto;
  ASSERT_FALSE(front.empty());
  for (size_t i = 1; i < front.size(); ++i) {
    const auto& a = d->heads[0].points[front[i - 1]].figures;
    const auto& b = d->heads[0].points[front[i]].figures;
    EXPECT_LE(a.sparsity.total(), b.sparsity.total());
    EXPECT_LE(a.error.l1(), b.error.l1());
  }
}

TEST(OverviewData, UnmeasuredErrorPartsAreShownAsMissingNotZero) {
  core::ErrorSums none;  // the engine measured nothing: no element counted
  EXPECT_EQ(l1Text(none), "-");
  EXPECT_TRUE(std::isnan(measuredL1(none)));
  core::ErrorSums sparse;
  sparse.count = 8;
  sparse.absRef = 2;
  sparse.absDiff = 0.1;
  EXPECT_EQ(l1Text(sparse), "0.0500");
  core::ErrorSums quant = sparse;
  quant.absDiff = 0.3;  // L1 0.15: three quarters of the parts
  EXPECT_DOUBLE_EQ(quantShare(sparse, quant), 0.75);
  EXPECT_DOUBLE_EQ(quantShare(sparse, none), 0.0);  // nothing quantized: exact numerics
  EXPECT_TRUE(std::isnan(quantShare(none, quant)));
  HeadFigures f;
  f.error = sparse;
  core::EntryInfo info;
  EXPECT_TRUE(std::isnan(cellValue(f, OverviewMetric::L1Sparse, info, Budget{}, false)));
  EXPECT_DOUBLE_EQ(cellValue(f, OverviewMetric::L1, info, Budget{}, false), 0.05);
}

TEST(OverviewData, RowsGroupByLayerKindAndMask) {
  auto entry = [](const char* name, std::optional<int64_t> layer, const char* stack, const char* kind,
                  bool causal, core::Window window) {
    core::EntryInfo e;
    e.name = name;
    e.layer = layer;
    e.stack = stack;
    e.kind = kind;
    e.causal = causal;
    e.window = window;
    return e;
  };
  std::vector<core::EntryInfo> es = {
      entry("d1", 1, "decoder", "cross", true, {}), entry("e0", 0, "encoder", "self", false, {}),
      entry("x", std::nullopt, "", "", true, {512, 0}), entry("d0", 0, "decoder", "self", true, {})};
  EXPECT_EQ(overviewOrder(es, OverviewSort::Capture), (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(overviewOrder(es, OverviewSort::Layer), (std::vector<size_t>{1, 3, 0, 2}));  // no layer last
  EXPECT_EQ(groupOf(es[0], OverviewSort::Kind), "decoder cross");
  EXPECT_EQ(groupOf(es[2], OverviewSort::Kind), "kind not recorded");
  EXPECT_EQ(overviewOrder(es, OverviewSort::Kind), (std::vector<size_t>{0, 3, 1, 2}));
  EXPECT_EQ(groupOf(es[2], OverviewSort::Mask), "window [512, 0] causal");
  EXPECT_EQ(groupOf(es[1], OverviewSort::Mask), "full");
  EXPECT_EQ(overviewOrder(es, OverviewSort::Metric, {0.1, 0.5, NAN, 0.3}), (std::vector<size_t>{1, 3, 0, 2}));
}

TEST(CurvesData, ParetoFrontOfHandPlacedPoints) {
  // (sparsity, L1): A (0.1, 0.01), B (0.5, 0.02), C (0.4, 0.03) and D (0.5, 0.05) lie behind B,
  // E (0.9, 0.2), F (0.95, 0.0) unfinished, G (0.1, 0.01) equal to A.
  std::vector<CurvePoint> pts = {point(0.1, 0.01), point(0.5, 0.02), point(0.4, 0.03),
                                 point(0.5, 0.05), point(0.9, 0.2),  point(0.95, 0.0, false),
                                 point(0.1, 0.01)};
  std::vector<size_t> front = paretoFront(pts);
  ASSERT_EQ(front.size(), 4u);
  EXPECT_TRUE((front[0] == 0 && front[1] == 6) || (front[0] == 6 && front[1] == 0));
  EXPECT_EQ(front[2], 1u);
  EXPECT_EQ(front[3], 4u);
}

TEST(KernelData, RowsEqualTheProfilersRecords) {
  prof::ReportInput in;
  in.source = prof::TimingSource::Cupti;
  in.device.gpu = true;
  in.device.name = "Test GPU";
  const double sparseMs[] = {1.0, 3.0, 2.0};
  const std::string sparse = "sparge_sparse_attn", predict = "sparge_predict_pool";
  for (uint64_t r = 1; r <= 3; ++r) {
    prof::RunRecord run;
    run.id = r;
    run.index = int(r - 1);
    run.clock = prof::TimingSource::Cupti;
    run.startNs = r * 10000000;
    run.endNs = run.startNs + 5000000;
    in.runs.push_back(run);
    auto kernel = [&](const std::string& name, prof::Stage stage, uint64_t offsetNs, double ms) {
      prof::KernelSample k;
      k.name = k.rawName = name;
      k.stage = stage;
      k.runId = r;
      k.attribution = prof::Attribution::ExternalId;
      k.startNs = run.startNs + offsetNs;
      k.endNs = k.startNs + uint64_t(ms * 1e6);
      k.streamId = 7;
      if (stage == prof::Stage::Sparse) {
        k.launch.grid = {8, 2, 1};
        k.launch.block = {128, 1, 1};
        k.launch.registersPerThread = 168;
        k.launch.staticSharedBytes = 1024;
        k.launch.dynamicSharedBytes = 65536;
      }
      in.kernels.push_back(k);
    };
    kernel(predict, prof::Stage::Predict, 1000, 0.1);
    kernel(sparse, prof::Stage::Sparse, 200000, sparseMs[r - 1]);
  }
  in.workload = prof::Workload{1, 2, 1024, 1024, 64, 64, false, 128, 64, 100, 80};
  prof::TimingReport rep = prof::buildReport(in);
  std::vector<KernelRow> rows = kernelRows(rep);
  ASSERT_EQ(rows.size(), rep.kernels.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].name, rep.kernels[i].name);
    EXPECT_EQ(rows[i].stage, prof::toString(rep.kernels[i].stage));
    EXPECT_EQ(rows[i].launches, rep.kernels[i].ms.count);
    EXPECT_EQ(rows[i].minMs, rep.kernels[i].ms.min);
    EXPECT_EQ(rows[i].medianMs, rep.kernels[i].ms.median);
    EXPECT_EQ(rows[i].maxMs, rep.kernels[i].ms.max);
    EXPECT_EQ(rows[i].source, "cupti");
    EXPECT_EQ(rows[i].launch, rep.kernels[i].launch);
  }
  auto row = [&](const std::string& name) {
    for (const auto& r : rows) {
      if (r.name == name) return r;
    }
    ADD_FAILURE() << name;
    return KernelRow{};
  };
  KernelRow a = row(sparse), p = row(predict);
  // Hand-computed: one launch per run of 1, 3, 2 ms; (100 + 80) blocks x 128 x 64 x 64 x 2 flop executed,
  // 4 x 2 x 1024 x 1024 x 64 flop dense-equivalent, over the median 2 ms.
  EXPECT_EQ(a.launches, 3);
  EXPECT_DOUBLE_EQ(a.launchesPerRun, 1.0);
  EXPECT_NEAR(a.minMs, 1.0, 1e-9);
  EXPECT_NEAR(a.medianMs, 2.0, 1e-9);
  EXPECT_NEAR(a.maxMs, 3.0, 1e-9);
  EXPECT_NEAR(a.executedTflops, 188743680.0 / 2e-3 / 1e12, 1e-9);
  EXPECT_NEAR(a.denseEquivalentTflops, 536870912.0 / 2e-3 / 1e12, 1e-9);
  EXPECT_TRUE(std::isnan(p.executedTflops));
  EXPECT_EQ(a.launch.gridLabel(), "8x2x1");
  EXPECT_EQ(a.launch.blockLabel(), "128x1x1");
  EXPECT_EQ(a.launch.registersPerThread, 168);
  EXPECT_EQ(a.launch.dynamicSharedBytes, 65536);
  EXPECT_FALSE(p.launch.known());
  // The first run laid out: predict at 1 us, the attention kernel at 200 us, both on GPU stream track 1.
  std::vector<TimelineBar> bars = runTimeline(rep);
  ASSERT_EQ(bars.size(), 2u);
  EXPECT_EQ(bars[0].name, predict);
  EXPECT_NEAR(bars[0].startMs, 0.001, 1e-9);
  EXPECT_NEAR(bars[0].durMs, 0.1, 1e-9);
  EXPECT_EQ(bars[1].name, sparse);
  EXPECT_NEAR(bars[1].startMs, 0.2, 1e-9);
  EXPECT_NEAR(bars[1].durMs, 1.0, 1e-9);
  EXPECT_EQ(bars[0].track, 1);
  EXPECT_EQ(bars[1].track, 1);
}

TEST(KernelData, ShortNames) {
  EXPECT_EQ(shortKernelName("void sparge::cuda::(anonymous namespace)::attn_fwd<128, 64, (bool)1>"
                            "(sparge::cuda::KParams, int)"),
            "attn_fwd<...>");
  EXPECT_EQ(shortKernelName("sparge_predict_pool(float const*, int)"), "sparge_predict_pool");
  EXPECT_EQ(shortKernelName("cudnn_generated_fort_native_sdpa_sm90"),
            "cudnn_generated_fort_native_sdpa_sm90");
}

TEST(KernelData, ProfileWarmsUpByCountOrForTheTimeAsked) {
  auto s = cpuSession();
  s->openEntryData(std::make_shared<const core::EntryData>(synth("synth", false, 9)));
  ASSERT_TRUE(s->waitIdle(120s));
  s->profiling().profile(1);
  ASSERT_TRUE(s->waitIdle(120s));
  const TimingSummary byCount = s->profiling().timing();
  ASSERT_TRUE(byCount.valid);
  EXPECT_EQ(byCount.warmupMs, 0);
  // The run with the error metrics, then one round: the sparse run and at least our dense one.
  const int perRound = byCount.warmupRuns - 1;
  ASSERT_GE(perRound, 2);

  const auto start = std::chrono::steady_clock::now();
  s->profiling().profile(1, 400);
  ASSERT_TRUE(s->waitIdle(120s));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 400ms);
  const TimingSummary& byTime = s->profiling().timing();
  ASSERT_TRUE(byTime.valid);
  EXPECT_EQ(byTime.warmupMs, 400);
  EXPECT_EQ(byTime.runs, 1);
  EXPECT_GE(byTime.warmupRuns, 1 + perRound);
  EXPECT_EQ((byTime.warmupRuns - 1) % perRound, 0) << byTime.warmupRuns;  // whole rounds
  EXPECT_FALSE(s->progress().active);
}

TEST(KernelData, ProfileOnTheCpuEngineLaysOutTheEngineStages) {
  auto s = cpuSession();
  s->openEntryData(std::make_shared<const core::EntryData>(synth("synth", false, 9)));
  ASSERT_TRUE(s->waitIdle(120s));
  s->profiling().profile(2);
  ASSERT_TRUE(s->waitIdle(120s));
  auto d = s->profiling().last();
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->kernels.empty());  // the CPU engine launches no kernels
  ASSERT_FALSE(d->timeline.empty());
  double end = 0;
  for (const auto& b : d->timeline) {
    EXPECT_EQ(b.track, 0);
    EXPECT_GE(b.startMs, end - 1e-9);  // stages laid end to end
    end = b.startMs + b.durMs;
  }
  EXPECT_EQ(d->summary.numerics, std::string(core::toString(s->runs().config().numerics)) + ", 128x64");
}

TEST(HeatColors, SmallResultsAreColouredWithoutStartingThreads) {
  EXPECT_EQ(colouringThreads(9 * 16 * 32), 1) << "the bundled sample's 9 heads of 16 x 32 blocks";
  EXPECT_EQ(colouringThreads(4 * 16 * 32), 1) << "its head detail's four layers";
  EXPECT_EQ(colouringThreads(kThreadedColouringBlocks - 1), 1);
  // A 32-head 32K entry at 128x64 (256 x 512 blocks a head): every core, at most eight.
  const unsigned cores = std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
  EXPECT_EQ(colouringThreads(int64_t{32} * 256 * 512), int(cores));
}
