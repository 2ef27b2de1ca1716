// GPU test (skips without a device): CUPTI kernel durations agree with CUDA events within 10%, kernels are
// attributed to their run and stage, the collector's per-run overhead is printed, NVML reads the SM clock.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "busy_kernel.h"
#include "nvml_loader.h"
#include "sparge/profiler/event_timer.h"
#include "sparge/profiler/profiler.h"

using namespace sparge::prof;
using sparge::prof::fixtures::launchBusyKernel;
using sparge::prof::fixtures::outputCount;

namespace {

bool haveDevice() {
  int count = 0;
  bool ok = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  cudaGetLastError();
  return ok;
}

double medianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double hostMs(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

class GpuTiming : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!haveDevice()) GTEST_SKIP() << "no CUDA device";
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&out_), sizeof(float) * size_t(outputCount())),
              cudaSuccess);
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    if (stream_) cudaStreamDestroy(stream_);
    if (out_) cudaFree(out_);
  }
  // Event-timed single launch.
  double timeWithEvents(int64_t iterations) {
    EventTimer t;
    t.start(stream_);
    EXPECT_EQ(launchBusyKernel(stream_, iterations, out_), 0);
    t.stop(stream_);
    return t.elapsedMs();
  }
  float* out_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

TEST_F(GpuTiming, CuptiAgreesWithCudaEvents) {
  // Calibrate to about 2 ms so that launch latency (microseconds) is far below the 10% tolerance.
  timeWithEvents(1000);  // context and module load
  const int64_t probe = 200000;
  const double probeMs = timeWithEvents(probe);
  ASSERT_GT(probeMs, 0.0);
  const int64_t iterations = std::max<int64_t>(probe, int64_t(double(probe) * 2.0 / probeMs));

  Profiler prof({.warmup = 2});
  ASSERT_EQ(prof.source(), TimingSource::Cupti) << "CUPTI did not start: " << prof.sourceReason();
  std::vector<double> eventMs;
  const int runs = 12;
  for (int i = 0; i < runs; ++i) {
    prof.begin(RunInfo{"busy", "all", "iterations=" + std::to_string(iterations), "test"});
    double ms = timeWithEvents(iterations);
    prof.end();
    if (i >= 2) eventMs.push_back(ms);
  }
  TimingReport r = prof.report();
  EXPECT_EQ(r.source, TimingSource::Cupti);
  EXPECT_EQ(r.profiledRuns, runs - 2);
  EXPECT_EQ(r.droppedRecords, 0u);

  const KernelStat* busy = nullptr;
  for (const auto& k : r.kernels)
    if (k.name.find("sparge_sparse_test_busy") != std::string::npos) busy = &k;
  ASSERT_NE(busy, nullptr) << "the busy kernel was not recorded";
  EXPECT_EQ(busy->stage, Stage::Sparse);
  EXPECT_EQ(busy->ms.count, runs - 2);
  EXPECT_EQ(r.unattributedKernels, 0);

  // Every recorded kernel belongs to a run; say how it was matched.
  int byId = 0, byWindow = 0;
  for (const auto& e : r.timeline) {
    for (const auto& [k, v] : e.args) {
      if (k == "attribution") (v == "external-id" ? byId : byWindow)++;
    }
  }
  EXPECT_EQ(byId + byWindow, runs - 2);

  const double cupti = busy->ms.median, events = medianOf(eventMs);
  std::printf("[gpu] device: %s (max SM clock %.0f MHz)\n", r.device.name.c_str(),
              r.device.maxSmClockKHz / 1000.0);
  std::printf(
      "[gpu] busy kernel, %lld iterations: CUPTI median %.4f ms (min %.4f, max %.4f), CUDA events median "
      "%.4f ms, difference %.2f%%; attribution: %d by external id, %d by time window\n",
      (long long)iterations, cupti, busy->ms.min, busy->ms.max, events, 100.0 * (cupti - events) / events,
      byId, byWindow);
  EXPECT_GE(cupti, 1.0) << "kernel shorter than 1 ms: calibration failed";
  EXPECT_NEAR(cupti, events, 0.10 * events);
}

TEST_F(GpuTiming, CollectorOverheadPerRun) {
  const int n = 200;
  // Baseline: a tiny launch + device sync, no collector in the process.
  timeWithEvents(10);
  auto a = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    launchBusyKernel(stream_, 10, out_);
    cudaDeviceSynchronize();
  }
  auto b = std::chrono::steady_clock::now();
  const double baseUs = hostMs(a, b) * 1e3 / n;

  Profiler prof;
  ASSERT_EQ(prof.source(), TimingSource::Cupti) << prof.sourceReason();
  a = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    prof.begin(RunInfo{"tiny", "all", "", "test"});
    launchBusyKernel(stream_, 10, out_);
    prof.end();
  }
  b = std::chrono::steady_clock::now();
  const double scopedUs = hostMs(a, b) * 1e3 / n;
  auto c = std::chrono::steady_clock::now();
  TimingReport r = prof.report();
  auto d = std::chrono::steady_clock::now();
  const double reportUs = hostMs(c, d) * 1e3;

  int64_t kernels = 0;
  for (const auto& k : r.kernels) kernels += k.ms.count;
  EXPECT_EQ(kernels, n);
  std::printf(
      "[gpu] per run: %.1f us without collector, %.1f us inside begin()/end() with CUPTI -> overhead "
      "%.1f us/run; report() (flush + attribution + statistics) for %d runs: %.1f us (%.2f us/run)\n",
      baseUs, scopedUs, scopedUs - baseUs, n, reportUs, reportUs / n);
}

TEST_F(GpuTiming, CudaEventFallbackWhenCuptiIsOff) {
  Profiler prof({.useCupti = false});
  ASSERT_EQ(prof.source(), TimingSource::CudaEvent) << prof.sourceReason();
  for (int i = 0; i < 3; ++i) {
    prof.begin({});
    timeWithEvents(100000);
    prof.end();
  }
  TimingReport r = prof.report();
  bool sawEventTotal = false;
  for (const auto& s : r.stages)
    sawEventTotal = sawEventTotal || (s.stage == Stage::Total && s.source == TimingSource::CudaEvent);
  EXPECT_TRUE(sawEventTotal);
  EXPECT_NE(r.sourceReason.find("CUPTI disabled"), std::string::npos);
}

TEST_F(GpuTiming, SmClockSampledAfterABusyKernel) {
  // The reader alone, on the CUDA device found by its PCI bus id.
  const NvmlLoadResult& lib = nvml();
  ASSERT_TRUE(lib.ok) << lib.error;
  char busId[64] = {};
  ASSERT_EQ(cudaDeviceGetPCIBusId(busId, int(sizeof busId), 0), cudaSuccess);
  std::string why;
  auto clock = NvmlSmClock::open(lib, busId, -1, why);
  ASSERT_NE(clock, nullptr) << why;
  timeWithEvents(1000);
  timeWithEvents(200000);  // busy: the clock is up
  auto t0 = std::chrono::steady_clock::now();
  std::optional<unsigned> mhz = clock->currentMHz(why);
  auto t1 = std::chrono::steady_clock::now();
  ASSERT_TRUE(mhz.has_value()) << why;
  EXPECT_GT(*mhz, 0u);
  ASSERT_GT(clock->maxMHz(), 0u);
  EXPECT_LE(*mhz, clock->maxMHz());

  // Through the Profiler: every profiled run carries a sample and the note says so.
  Profiler prof({.warmup = 1});
  for (int i = 0; i < 5; ++i) {
    prof.begin(RunInfo{"busy", "all", "", "test"});
    timeWithEvents(200000);
    prof.end();
  }
  TimingReport r = prof.report();
  ASSERT_TRUE(r.smClockMHz.has_value()) << r.smClockMissing;
  EXPECT_EQ(r.smClockMHz->count, 4);
  EXPECT_GT(r.smClockMHz->min, 0.0);
  EXPECT_LE(r.smClockMHz->max, double(clock->maxMHz()));
  EXPECT_EQ(r.smClockSource, "nvml");
  std::printf(
      "[gpu] %s (%s): SM clock after busy kernel %u MHz, NVML max %u MHz, cudaDevAttrClockRate %.0f MHz; one "
      "sample %.1f us (profiler median %.1f us)\n[gpu] clock note: %s\n",
      r.device.name.c_str(), clock->matchedBy().c_str(), *mhz, clock->maxMHz(),
      r.device.maxSmClockKHz / 1000.0, hostMs(t0, t1) * 1e3, r.smClockSampleUs, r.device.clockNote.c_str());
}
