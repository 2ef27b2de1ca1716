// buildReport on synthetic runs: per-stage statistics, per-kernel statistics, warm-up exclusion, derived
// figures.
#include <gtest/gtest.h>

#include "report_fixture.h"

using namespace sparge::prof;

namespace {
const StageStat* findStage(const TimingReport& r, Stage s, TimingSource src) {
  for (const auto& st : r.stages)
    if (st.stage == s && st.source == src) return &st;
  return nullptr;
}
const KernelStat* findKernel(const TimingReport& r, const std::string& name) {
  for (const auto& k : r.kernels)
    if (k.name == name) return &k;
  return nullptr;
}
}  // namespace

TEST(Report, StageStatisticsSumKernelsPerRunAndSkipWarmup) {
  TimingReport r = buildReport(fixtures::syntheticInput());
  EXPECT_EQ(r.warmupRuns, 1);
  EXPECT_EQ(r.profiledRuns, 3);
  EXPECT_EQ(r.unattributedKernels, 1);
  EXPECT_EQ(r.source, TimingSource::Cupti);

  const StageStat* sparse = findStage(r, Stage::Sparse, TimingSource::Cupti);
  ASSERT_NE(sparse, nullptr);
  EXPECT_EQ(sparse->ms.count, 3);  // one value per run, not per launch
  EXPECT_NEAR(sparse->ms.median, 0.4, 1e-12);
  EXPECT_NEAR(sparse->ms.total, 1.2, 1e-12);

  const StageStat* dense = findStage(r, Stage::Dense, TimingSource::Cupti);
  ASSERT_NE(dense, nullptr);
  EXPECT_EQ(dense->ms.count, 3);  // the 5 ms warm-up is left out
  EXPECT_NEAR(dense->ms.min, 0.9, 1e-12);
  EXPECT_NEAR(dense->ms.median, 1.0, 1e-12);
  EXPECT_NEAR(dense->ms.max, 1.1, 1e-12);

  const StageStat* total = findStage(r, Stage::Total, TimingSource::Cupti);
  ASSERT_NE(total, nullptr);
  EXPECT_NEAR(total->ms.median, 0.1 + 0.4 + 1.0, 1e-12);
  const StageStat* wall = findStage(r, Stage::Total, TimingSource::WallClock);
  ASSERT_NE(wall, nullptr);
  EXPECT_NEAR(wall->ms.median, 5.0, 1e-12);  // runs 2..4 carry 4, 5, 6 ms
  EXPECT_EQ(findStage(r, Stage::Reference, TimingSource::Cupti), nullptr);
}

TEST(Report, KernelStatisticsArePerLaunch) {
  TimingReport r = buildReport(fixtures::syntheticInput());
  const KernelStat* sparse = findKernel(r, "sparge_sparse_attn<128>(float const*, float*)");
  ASSERT_NE(sparse, nullptr);
  EXPECT_EQ(sparse->stage, Stage::Sparse);
  // Runs 2 and 3 launch it twice (0.2 ms each), run 4 once (0.4 ms); the warm-up run's launches are left out.
  EXPECT_EQ(sparse->ms.count, 5);
  EXPECT_NEAR(sparse->ms.min, 0.2, 1e-12);
  EXPECT_NEAR(sparse->ms.median, 0.2, 1e-12);
  EXPECT_NEAR(sparse->ms.max, 0.4, 1e-12);
  EXPECT_NEAR(sparse->ms.total, 1.2, 1e-12);
  const KernelStat* dense = findKernel(r, "sparge_dense_fwd");
  ASSERT_NE(dense, nullptr);
  EXPECT_EQ(dense->stage, Stage::Dense);
  EXPECT_EQ(dense->ms.count, 3);
  EXPECT_EQ(findKernel(r, "ampere_sgemm"), nullptr);  // unattributed: counted, not in statistics
}

TEST(Report, DerivedFigures) {
  TimingReport r = buildReport(fixtures::syntheticInput());
  const DerivedFigures& d = r.derived;
  EXPECT_EQ(d.source, TimingSource::Cupti);
  ASSERT_TRUE(d.sparseMs && d.denseMs && d.speedup);
  EXPECT_NEAR(*d.sparseMs, 0.5, 1e-12);
  EXPECT_NEAR(*d.denseMs, 1.0, 1e-12);
  EXPECT_EQ(d.speedupBaseline, "dense");
  EXPECT_NEAR(*d.speedup, 2.0, 1e-12);
  // 4 * 1 * 2 * 1024 * 1024 * 64 = 536870912 flop in 0.5 ms.
  ASSERT_TRUE(d.denseEquivalentTops);
  EXPECT_NEAR(*d.denseEquivalentTops, 536870912.0 / 0.5e-3 / 1e12, 1e-9);
  // (100 + 80) blocks * 128 * 64 * 64 * 2 = 188743680 flop in 0.5 ms.
  ASSERT_TRUE(d.executedTops);
  EXPECT_NEAR(*d.executedTops, 188743680.0 / 0.5e-3 / 1e12, 1e-9);
  ASSERT_TRUE(d.denseTops);
  EXPECT_NEAR(*d.denseTops, 536870912.0 / 1.0e-3 / 1e12, 1e-9);
}

// `sparge run --repeat` under CUPTI profiles a dense baseline as its own run (predict + dense kernels, no
// sparse kernel): those runs must not enter the sparse figure.
TEST(Report, DenseBaselineRunsStayOutOfTheSparseFigure) {
  ReportInput in = fixtures::syntheticInput();
  for (uint64_t r = 5; r <= 7; ++r) {
    RunRecord run;
    run.id = r;
    run.index = int(r - 1);
    run.info.entry = "l0 (dense baseline)";
    run.clock = TimingSource::Cupti;
    run.startNs = r * 1000000;
    run.endNs = run.startNs + 800000;
    in.runs.push_back(run);
    const uint64_t t = r * 1000000 + 1000;
    in.kernels.push_back(fixtures::makeKernel("sparge_predict_pool", Stage::Predict, r, t, 100000));
    in.kernels.push_back(fixtures::makeKernel("sparge_dense_fwd", Stage::Dense, r, t + 100000, 1000000));
  }
  TimingReport r = buildReport(in);
  ASSERT_TRUE(r.derived.sparseMs);
  EXPECT_NEAR(*r.derived.sparseMs, 0.5, 1e-12);  // predict 0.1 + sparse 0.4 of the three sparse runs only
  ASSERT_TRUE(r.derived.denseMs);
  EXPECT_NEAR(*r.derived.denseMs, 1.0, 1e-12);
}

TEST(Report, CausalHalvesDenseFlops) {
  Workload w = fixtures::syntheticInput().workload;
  EXPECT_DOUBLE_EQ(w.denseFlops(), 536870912.0);
  w.causal = true;
  EXPECT_DOUBLE_EQ(w.denseFlops(), 268435456.0);
  EXPECT_DOUBLE_EQ(w.executedFlops(), 188743680.0);  // executed blocks are counted as they are
}

TEST(Report, SpeedupFallsBackToReferenceAndReportsMissingFigures) {
  ReportInput in;
  in.source = TimingSource::WallClock;
  for (int i = 0; i < 2; ++i) {
    RunRecord run;
    run.id = uint64_t(i + 1);
    run.index = i;
    run.samples = {{Stage::Predict, 1.0, TimingSource::WallClock},
                   {Stage::Sparse, 3.0, TimingSource::WallClock},
                   {Stage::Reference, 12.0, TimingSource::WallClock}};
    in.runs.push_back(run);
  }
  TimingReport r = buildReport(in);
  ASSERT_TRUE(r.derived.speedup);
  EXPECT_EQ(r.derived.speedupBaseline, "reference");
  EXPECT_NEAR(*r.derived.speedup, 3.0, 1e-12);
  EXPECT_FALSE(r.derived.denseEquivalentTops.has_value());  // no workload
  EXPECT_NE(r.derived.note.find("workload"), std::string::npos);

  ReportInput empty;
  TimingReport e = buildReport(empty);
  EXPECT_FALSE(e.derived.speedup.has_value());
  EXPECT_FALSE(e.derived.note.empty());
}

TEST(Report, TimelineHasRunsKernelsAndTracks) {
  TimingReport r = buildReport(fixtures::syntheticInput());
  int runs = 0, kernels = 0;
  for (const auto& e : r.timeline) {
    if (e.category == "run")
      ++runs;
    else
      ++kernels;
    EXPECT_GE(e.tsUs, 0.0);
    EXPECT_GE(e.durUs, 0.0);
  }
  EXPECT_EQ(runs, 3);
  EXPECT_EQ(kernels, 3 + 5 + 3);  // runs 2..4: predict x3, sparse 2+2+1, dense x3
  bool stream7 = false, stream8 = false;
  for (const auto& t : r.tracks) {
    stream7 = stream7 || (t.pid == 1 && t.tid == 7);
    stream8 = stream8 || (t.pid == 1 && t.tid == 8);
  }
  EXPECT_TRUE(stream7 && stream8);
  // Origin is the first profiled run's start (2e6 ns): its span starts at 0.
  EXPECT_DOUBLE_EQ(r.timeline.front().tsUs, 0.0);
}

namespace {
// The synthetic runs with SM clock samples: the warm-up's 900 MHz must not count.
ReportInput withClockSamples() {
  ReportInput in = fixtures::syntheticInput();
  const double mhz[] = {900, 1755, 1980, 1980};
  for (size_t i = 0; i < in.runs.size(); ++i) in.runs[i].smClockMHz = mhz[i];
  in.smClockSampleUs = 12.5;
  return in;
}
}  // namespace

TEST(Report, SmClockStatisticsOverProfiledRuns) {
  TimingReport r = buildReport(withClockSamples());
  ASSERT_TRUE(r.smClockMHz.has_value());
  EXPECT_EQ(r.smClockMHz->count, 3);
  EXPECT_DOUBLE_EQ(r.smClockMHz->min, 1755);
  EXPECT_DOUBLE_EQ(r.smClockMHz->median, 1980);
  EXPECT_DOUBLE_EQ(r.smClockMHz->max, 1980);
  EXPECT_EQ(r.smClockSource, "nvml");
  EXPECT_TRUE(r.smClockMissing.empty());
  EXPECT_DOUBLE_EQ(r.smClockSampleUs, 12.5);
  EXPECT_EQ(r.device.clockNote, "SM clock during runs 1980 MHz median (1755-1980), max 1980 MHz (NVML)");
}

TEST(Report, SmClockPartialSamplesSaySoAndMissingSamplesSayWhy) {
  ReportInput in = withClockSamples();
  in.runs[2].smClockMHz.reset();
  TimingReport partial = buildReport(in);
  ASSERT_TRUE(partial.smClockMHz.has_value());
  EXPECT_EQ(partial.smClockMHz->count, 2);
  EXPECT_NE(partial.device.clockNote.find("in 2 of 3 runs"), std::string::npos) << partial.device.clockNote;

  ReportInput none = fixtures::syntheticInput();
  none.smClockMissing = "NVML unavailable: libnvidia-ml.so.1 not loaded: /x (dlopen: no such file)";
  TimingReport r = buildReport(none);
  EXPECT_FALSE(r.smClockMHz.has_value());
  EXPECT_EQ(r.smClockMissing, none.smClockMissing);
  EXPECT_EQ(r.device.clockNote.rfind("max SM clock", 0), 0u) << r.device.clockNote;  // kept, then why
  EXPECT_NE(r.device.clockNote.find("SM clock during runs not sampled: NVML unavailable"), std::string::npos)
      << r.device.clockNote;

  none.smClockMissing.clear();
  EXPECT_FALSE(buildReport(none).smClockMissing.empty()) << "a missing clock is always explained";
}

namespace {
// Three profiled rounds under CUPTI as profileEntry makes them: a sparse run (predict 0.1 + quantize 0.05 +
// sparse 0.4 ms), a dense run (predict 0.1 + quantize 0.05 + dense 1.0 ms) and a cuDNN run whose kernel
// carries no sparge_ prefix (0.8 ms) next to a set-up kernel of ours named sparge_other_, ids 10.. in that
// order.
ReportInput profiledRounds() {
  ReportInput in;
  in.source = TimingSource::Cupti;
  in.workload = fixtures::syntheticInput().workload;
  LaunchConfig sparseLaunch;
  sparseLaunch.grid = {8, 2, 1};
  sparseLaunch.block = {128, 1, 1};
  sparseLaunch.registersPerThread = 168;
  sparseLaunch.dynamicSharedBytes = 49152;
  uint64_t id = 10;
  for (int round = 0; round < 3; ++round) {
    for (const char* kind : {"sparse", "dense", "cudnn"}) {
      RunRecord run;
      run.id = id;
      run.index = int(id - 10);
      run.info.entry = std::string("l0 (") + kind + ")";
      if (std::string(kind) == "cudnn") run.info.otherKernels = Stage::Cudnn;
      run.clock = TimingSource::Cupti;
      run.startNs = id * 1000000;
      run.endNs = run.startNs + 900000;
      in.runs.push_back(run);
      const uint64_t t = run.startNs + 1000;
      if (std::string(kind) == "cudnn") {
        in.kernels.push_back(
            fixtures::makeKernel("cudnn_generated_fort_native_sdpa_sm90", Stage::Other, id, t, 800000));
        // Set-up work of our own in the same run: named as "other", it is not cuDNN's.
        in.kernels.push_back(fixtures::makeKernel("sparge_other_random_fill", Stage::Other, id, t, 300000));
      } else {
        in.kernels.push_back(fixtures::makeKernel("sparge_predict_select", Stage::Predict, id, t, 100000));
        in.kernels.push_back(fixtures::makeKernel("sparge_quant_qk", Stage::Quantize, id, t + 100000, 50000));
        const bool sparse = std::string(kind) == "sparse";
        KernelSample k = fixtures::makeKernel(sparse ? "sparge_sparse_attn" : "sparge_dense_attn",
                                              sparse ? Stage::Sparse : Stage::Dense, id, t + 150000,
                                              sparse ? 400000 : 1000000);
        // The sparse kernel of the last round runs with another launch configuration.
        if (sparse && round < 2) k.launch = sparseLaunch;
        in.kernels.push_back(k);
      }
      ++id;
    }
  }
  return in;
}
}  // namespace

TEST(Report, CudnnRunsQuantizationAndTheFastestDenseBaseline) {
  const TimingReport r = buildReport(profiledRounds());
  const DerivedFigures& d = r.derived;
  ASSERT_TRUE(d.sparseMs && d.denseMs && d.cudnnMs && d.speedup && d.speedupOverDense);
  EXPECT_NEAR(*d.sparseMs, 0.1 + 0.05 + 0.4, 1e-12);  // the whole call
  EXPECT_NEAR(*d.denseMs, 0.05 + 1.0, 1e-12);         // its quantization counts, its predict does not
  EXPECT_NEAR(*d.cudnnMs, 0.8, 1e-12);
  EXPECT_EQ(d.speedupBaseline, "cudnn");
  EXPECT_NEAR(*d.speedup, 0.8 / 0.55, 1e-12);
  EXPECT_NEAR(*d.speedupOverDense, 1.05 / 0.55, 1e-12);
  const StageStat* cudnn = findStage(r, Stage::Cudnn, TimingSource::Cupti);
  ASSERT_NE(cudnn, nullptr);
  EXPECT_EQ(cudnn->ms.count, 3);
  const KernelStat* k = findKernel(r, "cudnn_generated_fort_native_sdpa_sm90");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->stage, Stage::Cudnn);  // claimed by its run, not by its name
  const KernelStat* fill = findKernel(r, "sparge_other_random_fill");
  ASSERT_NE(fill, nullptr);
  EXPECT_EQ(fill->stage, Stage::Other);  // named as ours: the run does not claim it
  ASSERT_TRUE(k->denseEquivalentTops);
  EXPECT_NEAR(*k->denseEquivalentTops, 536870912.0 / 0.8e-3 / 1e12, 1e-9);
}

TEST(Report, KernelStatisticsKeepLaunchConfigurationsApartAndRecordsCarryThem) {
  const TimingReport r = buildReport(profiledRounds());
  std::vector<const KernelStat*> sparse;
  for (const auto& k : r.kernels)
    if (k.name == "sparge_sparse_attn") sparse.push_back(&k);
  ASSERT_EQ(sparse.size(), 2u);
  const KernelStat* configured = sparse[0]->launch.known() ? sparse[0] : sparse[1];
  const KernelStat* unknown = sparse[0]->launch.known() ? sparse[1] : sparse[0];
  EXPECT_EQ(configured->ms.count, 2);
  EXPECT_EQ(unknown->ms.count, 1);
  EXPECT_EQ(configured->launch.gridLabel(), "8x2x1");
  EXPECT_EQ(configured->launch.blockLabel(), "128x1x1");
  EXPECT_EQ(configured->launch.registersPerThread, 168);
  EXPECT_EQ(configured->launch.dynamicSharedBytes, 49152);
  // One launch per run: executed work is the workload's computed blocks, (100 + 80) * 128 * 64 * 64 * 2 flop.
  ASSERT_TRUE(configured->executedTops);
  EXPECT_NEAR(*configured->executedTops, 188743680.0 / 0.4e-3 / 1e12, 1e-9);
  EXPECT_FALSE(findKernel(r, "sparge_predict_select")->denseEquivalentTops.has_value());  // not attention

  EXPECT_EQ(r.records.size(), 3u * 8u);  // 3 rounds: 3 + 3 + 2 kernels
  int withLaunch = 0;
  for (const auto& rec : r.records) withLaunch += rec.launch.known();
  EXPECT_EQ(withLaunch, 2);
  bool argsInTimeline = false;
  for (const auto& e : r.timeline)
    for (const auto& [key, value] : e.args)
      argsInTimeline = argsInTimeline || (key == "grid" && value == "8x2x1");
  EXPECT_TRUE(argsInTimeline);
}
