// Locating the bundled data relative to the executable (with an environment override).
#include "sparge/core/data_dir.h"

#include <cstdlib>
#include <system_error>

#include "sparge/core/error.h"

namespace sparge::core {

namespace fs = std::filesystem;

fs::path executablePath() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe;
}

std::vector<fs::path> dataDirCandidates() {
  if (const char* env = std::getenv(kDataDirVariable); env && *env) return {fs::path(env)};
  const fs::path exe = executablePath();
  if (exe.empty()) return {};
  const fs::path up1 = exe.parent_path().parent_path();
  return {up1 / "share" / "sparge-studio", up1.parent_path() / "share" / "sparge-studio"};
}

std::optional<fs::path> findDataFile(const std::string& relative) {
  for (const fs::path& dir : dataDirCandidates()) {
    std::error_code ec;
    const fs::path p = dir / relative;
    if (fs::exists(p, ec)) return p;
  }
  return std::nullopt;
}

fs::path dataFile(const std::string& relative) {
  if (std::optional<fs::path> p = findDataFile(relative)) return *p;
  std::string tried;
  for (const fs::path& dir : dataDirCandidates()) tried += (tried.empty() ? "" : ", ") + dir.string();
  if (tried.empty()) tried = "none (the executable's location is unknown)";
  throw Error("bundled data", "'" + relative + "' was not found in the data folders tried: " + tried +
                                  " — reinstall, or set " + kDataDirVariable +
                                  " to the folder that holds it (share/sparge-studio of an installed tree)");
}

fs::path sampleCapturePath() {
  return dataFile(kSampleCaptureFile);
}

}  // namespace sparge::core
