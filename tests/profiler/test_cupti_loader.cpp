// The run-time CUPTI loader on explicit candidate lists (no global state): failures name what was tried, and
// the toolkit's libcupti, when this machine has one, resolves every symbol. Runs without a GPU.
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "cupti_loader.h"
#include "scoped_env.h"

using sparge::prof::cuptiCandidates;
using sparge::prof::CuptiLoadResult;
using sparge::prof::loadCuptiFrom;

namespace {

// The toolkit copy this machine is known to have; CUDA 13 is what the tree builds against.
constexpr const char* kToolkitCupti = "/usr/local/cuda/lib64/libcupti.so.13";

void expectAllNull(const CuptiLoadResult& r) {
  EXPECT_EQ(r.handle, nullptr);
  EXPECT_EQ(r.api.activityEnable, nullptr);
  EXPECT_EQ(r.api.getVersion, nullptr);
  EXPECT_TRUE(r.path.empty());
}

}  // namespace

TEST(CuptiLoader, MissingFileFailsAndNamesThePath) {
  CuptiLoadResult r = loadCuptiFrom({"/nonexistent/libcupti.so"});
  EXPECT_FALSE(r.ok);
  expectAllNull(r);
  EXPECT_NE(r.error.find("/nonexistent/libcupti.so"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("dlopen"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("libcupti"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("SPARGE_CUPTI_LIBRARY"), std::string::npos) << r.error;
}

TEST(CuptiLoader, EveryFailedCandidateIsListed) {
  CuptiLoadResult r = loadCuptiFrom({"/nonexistent/a/libcupti.so", "/nonexistent/b/libcupti.so.13"});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("/nonexistent/a/libcupti.so"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("/nonexistent/b/libcupti.so.13"), std::string::npos) << r.error;
}

TEST(CuptiLoader, LibraryWithoutTheSymbolsIsRefused) {
  // libm loads everywhere and has no CUPTI function.
  CuptiLoadResult r = loadCuptiFrom({"libm.so.6"});
  EXPECT_FALSE(r.ok);
  expectAllNull(r);
  EXPECT_NE(r.error.find("libm.so.6"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("missing symbols"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("cuptiActivityEnable"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("cuptiGetVersion"), std::string::npos) << r.error;
}

TEST(CuptiLoader, NoCandidatesIsAFailureNotACrash) {
  CuptiLoadResult r = loadCuptiFrom({});
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.error.empty());
}

TEST(CuptiLoader, EnvironmentOverrideIsTheOnlyCandidate) {
  std::vector<std::string> withEnv, without;
  {
    const sparge::test::ScopedEnv env("SPARGE_CUPTI_LIBRARY", "/opt/custom/libcupti.so.13");
    withEnv = cuptiCandidates();
  }
  {
    const sparge::test::ScopedEnv env("SPARGE_CUPTI_LIBRARY", std::nullopt);
    without = cuptiCandidates();
  }

  ASSERT_EQ(withEnv.size(), 1u);
  EXPECT_EQ(withEnv[0], "/opt/custom/libcupti.so.13");
  ASSERT_GE(without.size(), 3u);  // soname, unversioned name, the toolkit path known at build time
  EXPECT_EQ(without[0], "libcupti.so.13");
  EXPECT_EQ(without[1], "libcupti.so");
  EXPECT_EQ(without.back().front(), '/') << without.back();
  EXPECT_NE(without.back().find("libcupti.so.13"), std::string::npos) << without.back();
}

TEST(CuptiLoader, ToolkitLibraryResolvesEverySymbol) {
  if (!std::filesystem::exists(kToolkitCupti)) GTEST_SKIP() << kToolkitCupti << " not on this machine";
  // A bad candidate first: the loader must go on to the next one.
  CuptiLoadResult r = loadCuptiFrom({"/nonexistent/libcupti.so", kToolkitCupti});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.path, kToolkitCupti);
  EXPECT_NE(r.handle, nullptr);
  EXPECT_TRUE(r.error.empty());
  const auto& a = r.api;
  EXPECT_NE(a.activityDisable, nullptr);
  EXPECT_NE(a.activityEnable, nullptr);
  EXPECT_NE(a.activityFlushAll, nullptr);
  EXPECT_NE(a.activityGetNextRecord, nullptr);
  EXPECT_NE(a.activityGetNumDroppedRecords, nullptr);
  EXPECT_NE(a.activityPopExternalCorrelationId, nullptr);
  EXPECT_NE(a.activityPushExternalCorrelationId, nullptr);
  EXPECT_NE(a.activityRegisterCallbacks, nullptr);
  EXPECT_NE(a.getResultString, nullptr);
  EXPECT_NE(a.getTimestamp, nullptr);
  EXPECT_NE(a.getVersion, nullptr);

  // Neither call needs a device.
  uint32_t version = 0;
  ASSERT_EQ(a.getVersion(&version), CUPTI_SUCCESS);
  EXPECT_GE(version, 130000u);  // CUDA 13 numbering: xxyyzz
  const char* text = nullptr;
  ASSERT_EQ(a.getResultString(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES, &text), CUPTI_SUCCESS);
  ASSERT_NE(text, nullptr);
  EXPECT_NE(std::string(text).size(), 0u);
}
