// Atomic exports: write a uniquely named temporary beside the target, fsync, rename over the target.
#include "sparge/core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "sparge/core/error.h"

namespace sparge::core {
namespace {

std::string errnoText(int err) {
  return std::strerror(err);
}

// Creates the temporary file (O_EXCL so that concurrent exports never share one) and returns its
// path. The file is created with mode 0666 so that the umask, not us, decides the final permissions.
std::string createTemp(const std::filesystem::path& target) {
  static std::atomic<unsigned> counter{0};
  std::filesystem::path dir = target.parent_path();
  if (dir.empty()) dir = ".";
  std::random_device rd;
  for (int attempt = 0; attempt < 100; ++attempt) {
    // snprintf rather than `"." + std::string`: the latter trips a GCC 12 -Wrestrict false positive.
    char suffix[64];
    std::snprintf(suffix, sizeof suffix, ".tmp-%ld-%u-%u", static_cast<long>(::getpid()), counter++,
                  static_cast<unsigned>(rd() % 1000000));
    std::string name = ".";
    name.append(target.filename().string()).append(suffix);
    const std::filesystem::path temp = dir / name;
    const int fd = ::open(temp.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666);
    if (fd >= 0) {
      ::close(fd);
      return temp.string();
    }
    if (errno != EEXIST) {
      throw Error(target.string(), "cannot create a temporary file in " + dir.string() + " (" +
                                       errnoText(errno) + ") — check that the folder exists and is writable");
    }
  }
  throw Error(target.string(), "cannot find a free temporary file name in " + dir.string() +
                                   " — remove stale .tmp files there");
}

void syncPath(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return;  // best effort: durability, not correctness, depends on it
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

void writeAtomically(const std::string& path, const std::function<void(const std::string& tempPath)>& write) {
  const std::filesystem::path target(path);
  const std::string temp = createTemp(target);
  try {
    write(temp);
    syncPath(temp, O_RDONLY);
    if (std::rename(temp.c_str(), path.c_str()) != 0) {
      const int err = errno;
      throw Error(path, "cannot rename the temporary file " + temp + " over it (" + errnoText(err) +
                            ") — check permissions of the target and its folder");
    }
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove(temp, ec);
    throw;
  }
  std::filesystem::path dir = target.parent_path();
  syncPath(dir.empty() ? std::string(".") : dir.string(), O_RDONLY | O_DIRECTORY);
}

void writeTextAtomically(const std::string& path, const std::string& contents) {
  writeAtomically(path, [&](const std::string& tempPath) {
    std::ofstream out(tempPath, std::ios::binary | std::ios::trunc);
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    out.close();
    if (!out) throw Error(path, "cannot write " + tempPath + " — check free disk space and permissions");
  });
}

}  // namespace sparge::core
