// Attribution of synthetic kernel records to runs: external correlation ids first, then time windows.
#include <gtest/gtest.h>

#include "sparge/profiler/activity.h"

using namespace sparge::prof;

namespace {
KernelActivity kernel(const char* name, uint64_t start, uint64_t end, uint32_t corr, uint32_t stream = 7) {
  KernelActivity k;
  k.name = name;
  k.startNs = start;
  k.endNs = end;
  k.correlationId = corr;
  k.streamId = stream;
  return k;
}
}  // namespace

TEST(ActivityLog, ExternalIdWins) {
  ActivityLog log;
  // Correlation record before and after its kernel: buffers complete in any order.
  log.add(ExternalCorrelation{11, 1});
  log.add(kernel("sparge_predict_pool", 1000, 2000, 11));
  log.add(kernel("_Z18sparge_sparse_attnv", 2500, 4500, 12));
  log.add(ExternalCorrelation{12, 2});
  // Windows deliberately disagree with the ids: the ids must win.
  std::vector<RunWindow> windows = {{1, 0, 3000}, {2, 3000, 9000}};
  auto samples = log.resolve(windows);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].runId, 1u);
  EXPECT_EQ(samples[0].attribution, Attribution::ExternalId);
  EXPECT_EQ(samples[0].stage, Stage::Predict);
  EXPECT_DOUBLE_EQ(samples[0].ms(), 0.001);
  EXPECT_EQ(samples[1].runId, 2u);
  EXPECT_EQ(samples[1].attribution, Attribution::ExternalId);
  EXPECT_EQ(samples[1].stage, Stage::Sparse);
  EXPECT_EQ(samples[1].name, "sparge_sparse_attn()");
  EXPECT_EQ(samples[1].rawName, "_Z18sparge_sparse_attnv");
  EXPECT_EQ(samples[1].source, TimingSource::Cupti);
}

TEST(ActivityLog, TimeWindowFallback) {
  ActivityLog log;
  log.add(kernel("sparge_dense_fwd", 5000, 6000, 21));         // no correlation record
  log.add(kernel("sparge_dense_fwd", 1500, 1600, 22));         // no correlation record
  log.add(kernel("sparge_reference_attn", 20000, 21000, 23));  // outside every window
  log.add(ExternalCorrelation{24, 99});                        // 99 is no known run: ignored
  log.add(kernel("sparge_error_reduce", 5500, 5600, 24));
  std::vector<RunWindow> windows = {{1, 1000, 2000}, {2, 4000, 8000}};
  auto samples = log.resolve(windows);
  ASSERT_EQ(samples.size(), 4u);
  // Sorted by start time.
  EXPECT_EQ(samples[0].startNs, 1500u);
  EXPECT_EQ(samples[0].runId, 1u);
  EXPECT_EQ(samples[0].attribution, Attribution::TimeWindow);
  EXPECT_EQ(samples[1].startNs, 5000u);
  EXPECT_EQ(samples[1].runId, 2u);
  EXPECT_EQ(samples[2].startNs, 5500u);
  EXPECT_EQ(samples[2].runId, 2u);
  EXPECT_EQ(samples[2].attribution, Attribution::TimeWindow);
  EXPECT_EQ(samples[2].stage, Stage::Metrics);
  EXPECT_EQ(samples[3].runId, 0u);
  EXPECT_EQ(samples[3].attribution, Attribution::None);
  EXPECT_EQ(samples[3].stage, Stage::Reference);
}

TEST(ActivityLog, ClearAndDropped) {
  ActivityLog log;
  log.add(kernel("a", 0, 1, 1));
  log.addDropped(3);
  EXPECT_EQ(log.kernelCount(), 1u);
  EXPECT_EQ(log.dropped(), 3u);
  log.clear();
  EXPECT_EQ(log.kernelCount(), 0u);
  EXPECT_EQ(log.dropped(), 0u);
  EXPECT_TRUE(log.resolve({}).empty());
}

TEST(ActivityLog, LaunchConfigurationTravelsWithTheSample) {
  ActivityLog log;
  KernelActivity k = kernel("sparge_quant_v_fp8", 100, 900, 5);
  k.launch.grid = {256, 32, 1};
  k.launch.block = {128, 1, 1};
  k.launch.registersPerThread = 40;
  k.launch.staticSharedBytes = 1024;
  k.launch.dynamicSharedBytes = 8192;
  log.add(k);
  const auto samples = log.resolve({{1, 0, 1000}});
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].stage, Stage::Quantize);
  EXPECT_EQ(samples[0].launch, k.launch);
  EXPECT_EQ(samples[0].launch.gridLabel(), "256x32x1");
  EXPECT_TRUE(samples[0].launch.known());
  EXPECT_FALSE(LaunchConfig{}.known());
}
