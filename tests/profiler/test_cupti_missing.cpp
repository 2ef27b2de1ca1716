// A process whose SPARGE_CUPTI_LIBRARY (and SPARGE_NVML_LIBRARY) points nowhere: the process-wide loader
// fails once, with the path in its reason, and the Profiler falls back without crashing. Own executable: the
// variable is set before the first load, and that load is cached for the process. Runs with or without a GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "cupti_loader.h"
#include "sparge/profiler/cupti_collector.h"
#include "sparge/profiler/profiler.h"

namespace {

constexpr const char* kMissing = "/nonexistent/libcupti.so";
constexpr const char* kMissingNvml = "/nonexistent/libnvidia-ml.so.1";

}  // namespace

using namespace sparge::prof;

TEST(CuptiMissing, LoaderFailsAndNamesThePath) {
  const CuptiLoadResult& r = cupti();
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find(kMissing), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("SPARGE_CUPTI_LIBRARY"), std::string::npos) << r.error;
  EXPECT_EQ(r.api.activityEnable, nullptr);
}

TEST(CuptiMissing, CollectorDoesNotStart) {
  CuptiCollector c;
  EXPECT_FALSE(c.start());
  EXPECT_FALSE(c.active());
  EXPECT_NE(c.reason().find("libcupti"), std::string::npos) << c.reason();
  EXPECT_NE(c.reason().find(kMissing), std::string::npos) << c.reason();
  // Inactive calls stay off CUPTI (all its pointers are null).
  c.push(7);
  c.pop();
  c.flush();
  EXPECT_GT(c.timestampNs(), 0u);
  c.stop();
}

TEST(CuptiMissing, ProfilerFallsBackAndSaysWhy) {
  Profiler prof(ProfilerOptions{});  // CUPTI wanted
  EXPECT_NE(prof.source(), TimingSource::Cupti);
  EXPECT_NE(prof.sourceReason().find("libcupti"), std::string::npos) << prof.sourceReason();
  EXPECT_NE(prof.sourceReason().find(kMissing), std::string::npos) << prof.sourceReason();
  EXPECT_EQ(prof.device().cuptiVersion, 0);
  for (int i = 0; i < 2; ++i) {
    prof.begin(RunInfo{"l0", "all", "theta=0.6", "cpu"});
    prof.end();
  }
  TimingReport r = prof.report();
  EXPECT_NE(r.source, TimingSource::Cupti);
  EXPECT_EQ(r.sourceReason, prof.sourceReason());
  EXPECT_EQ(r.profiledRuns, 2);
  // NVML is pointed nowhere as well: the report has no SM clock and says why (no GPU, or the path).
  EXPECT_FALSE(r.smClockMHz.has_value());
  if (prof.device().gpu) {
    EXPECT_NE(r.smClockMissing.find(kMissingNvml), std::string::npos) << r.smClockMissing;
    EXPECT_NE(r.device.clockNote.find(kMissingNvml), std::string::npos) << r.device.clockNote;
  } else {
    EXPECT_EQ(r.smClockMissing, "no GPU");
  }
}

int main(int argc, char** argv) {
  setenv("SPARGE_CUPTI_LIBRARY", kMissing, 1);
  setenv("SPARGE_NVML_LIBRARY", kMissingNvml, 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
