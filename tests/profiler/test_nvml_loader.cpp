// The run-time NVML loader and SM clock reader on explicit candidates: a missing library fails with the
// path named, a library without the symbols is refused, and a stand-in libnvidia-ml (fake_nvml.c) is read
// through the same calls the Profiler makes. Runs without a GPU.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "nvml_loader.h"
#include "scoped_env.h"

using namespace sparge::prof;

namespace {

constexpr const char* kMissing = "/nonexistent/libnvidia-ml.so.1";

int fakeInitCount(const NvmlLoadResult& r) {
  auto fn = reinterpret_cast<int (*)()>(dlsym(r.handle, "fakeNvmlInitCount"));
  return fn ? fn() : -1;
}

}  // namespace

TEST(NvmlLoader, EnvironmentOverrideIsTheOnlyCandidateAndAMissingPathIsNamed) {
  std::vector<std::string> withEnv, without;
  NvmlLoadResult r;
  {
    sparge::test::ScopedEnv env("SPARGE_NVML_LIBRARY", kMissing);
    withEnv = nvmlCandidates();
    r = loadNvmlFrom(withEnv);
  }
  {
    sparge::test::ScopedEnv env("SPARGE_NVML_LIBRARY", std::nullopt);
    without = nvmlCandidates();
  }

  ASSERT_EQ(withEnv.size(), 1u);
  EXPECT_EQ(withEnv[0], kMissing);
  ASSERT_EQ(without.size(), 1u);
  EXPECT_EQ(without[0], "libnvidia-ml.so.1");

  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.handle, nullptr);
  EXPECT_EQ(r.api.init, nullptr);
  EXPECT_EQ(r.api.deviceGetClockInfo, nullptr);
  EXPECT_NE(r.error.find(kMissing), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("dlopen"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("SPARGE_NVML_LIBRARY"), std::string::npos) << r.error;

  // The clock reader passes the reason on instead of failing harder.
  std::string why;
  EXPECT_EQ(NvmlSmClock::open(r, "0000:01:00.0", -1, why), nullptr);
  EXPECT_NE(why.find(kMissing), std::string::npos) << why;
}

TEST(NvmlLoader, LibraryWithoutTheSymbolsIsRefused) {
  NvmlLoadResult r = loadNvmlFrom({"libm.so.6"});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("missing symbols"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("nvmlInit_v2"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("nvmlDeviceGetHandleByPciBusId_v2"), std::string::npos) << r.error;
  EXPECT_FALSE(loadNvmlFrom({}).ok);
}

TEST(NvmlLoader, StandInLibraryIsReadByPciBusId) {
  NvmlLoadResult r = loadNvmlFrom({kMissing, SPARGE_FAKE_NVML_PATH});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.path, SPARGE_FAKE_NVML_PATH);
  {
    std::string why;
    auto clock = NvmlSmClock::open(r, "0000:01:00.0", -1, why);
    ASSERT_NE(clock, nullptr) << why;
    EXPECT_EQ(fakeInitCount(r), 1);
    EXPECT_EQ(clock->maxMHz(), 1980u);
    EXPECT_EQ(clock->matchedBy(), "PCI bus id 0000:01:00.0");
    auto mhz = clock->currentMHz(why);
    ASSERT_TRUE(mhz.has_value()) << why;
    EXPECT_EQ(*mhz, 1755u);
  }
  EXPECT_EQ(fakeInitCount(r), 0) << "the destructor must release its nvmlInit reference";

  // Another GPU's bus id: a reason naming the id and NVML's error, and no init reference left behind.
  std::string why;
  EXPECT_EQ(NvmlSmClock::open(r, "0000:81:00.0", -1, why), nullptr);
  EXPECT_NE(why.find("0000:81:00.0"), std::string::npos) << why;
  EXPECT_NE(why.find("Not Found"), std::string::npos) << why;
  EXPECT_EQ(fakeInitCount(r), 0);

  // Without a bus id the index is used, and the match says so.
  auto byIndex = NvmlSmClock::open(r, "", 0, why);
  ASSERT_NE(byIndex, nullptr) << why;
  EXPECT_EQ(byIndex->matchedBy(), "index 0");
}
