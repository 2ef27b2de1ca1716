// Locating the bundled data: the override, the executable-relative layout, and errors that say what to do.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "scoped_env.h"
#include "sparge/core/data_dir.h"
#include "sparge/core/error.h"

namespace fs = std::filesystem;
using namespace sparge::core;

namespace {

fs::path freshDir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / (name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "fonts");
  return dir;
}

TEST(DataDir, OverrideIsTheOnlyCandidate) {
  const fs::path dir = freshDir("sparge_data_override");
  std::ofstream(dir / "fonts" / "x.ttf") << "font";
  sparge::test::ScopedEnv env(kDataDirVariable, dir.string());
  ASSERT_EQ(dataDirCandidates().size(), 1u);
  EXPECT_EQ(dataDirCandidates()[0], dir);
  EXPECT_EQ(findDataFile("fonts/x.ttf"), dir / "fonts" / "x.ttf");
  // The sample is not there: no silent fallback to the build tree's copy.
  EXPECT_FALSE(findDataFile(kSampleCaptureFile).has_value());
  try {
    sampleCapturePath();
    FAIL() << "a missing sample must throw";
  } catch (const sparge::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(kSampleCaptureFile), std::string::npos) << what;
    EXPECT_NE(what.find(dir.string()), std::string::npos) << what;
    EXPECT_NE(what.find(kDataDirVariable), std::string::npos) << what;
  }
  fs::remove_all(dir);
}

// Without the override the folders sit beside the executable's folder and one level higher, so this test
// program (<build>/tests/core/) finds the build tree's share/sparge-studio.
TEST(DataDir, BesideTheExecutable) {
  if (const char* env = std::getenv(kDataDirVariable); env && *env) GTEST_SKIP() << "SPARGE_DATA_DIR is set";
  const fs::path exe = executablePath();
  ASSERT_FALSE(exe.empty());
  const fs::path binDir = exe.parent_path();
  const auto candidates = dataDirCandidates();
  ASSERT_EQ(candidates.size(), 2u);
  EXPECT_EQ(candidates[0], binDir.parent_path() / "share" / "sparge-studio");
  EXPECT_EQ(candidates[1], binDir.parent_path().parent_path() / "share" / "sparge-studio");
  const std::optional<fs::path> sample = findDataFile(kSampleCaptureFile);
  ASSERT_TRUE(sample.has_value()) << "the build tree's share/sparge-studio holds the sample";
  EXPECT_TRUE(fs::exists(*sample));
  EXPECT_EQ(sampleCapturePath(), *sample);
}

}  // namespace
