// Writing exports safely: every output appears complete or not at all, never over an open input.
#pragma once

#include <functional>
#include <string>

namespace sparge::core {

// Calls `write(tempPath)` with a temporary file in the target's folder, then moves it over `path` in one
// rename, so that readers see the old file or the new one and never a part. The temporary has no name
// while it is written (Linux O_TMPFILE; `tempPath` is its /proc/self/fd link), so an interrupted or
// killed process leaves nothing behind; on file systems without O_TMPFILE a hidden named temporary is
// used and removed on failure. Rules for the target:
// - a symbolic link is followed: the file it points to is replaced and the link stays;
// - an existing file keeps its permission bits; a new file gets 0666 minus the umask;
// - a read-only file (no write permission bit) is refused, as are folders, FIFOs and devices;
// - a file that is open as an input (see InputFileGuard) is refused.
// If `write` throws, the exception propagates and `path` is untouched. Throws sparge::Error naming
// `path` for every refusal and failure.
void writeAtomically(const std::string& path, const std::function<void(const std::string& tempPath)>& write);

// Convenience: writes `contents` atomically.
void writeTextAtomically(const std::string& path, const std::string& contents);

// Checks, without writing anything, that writeAtomically(path, ...) can succeed as far as the target
// and its folder go (the folder exists and accepts new files, the target is not a folder, not read-only,
// not an open input). Throws sparge::Error naming `what` (for example "--report out.json") otherwise.
void checkWritableTarget(const std::string& path, const std::string& what);

// While alive, marks a file (by device and inode, so hard links and symbolic links count too) as an
// input that no export may replace. Captures register themselves while they are open.
class InputFileGuard {
 public:
  explicit InputFileGuard(const std::string& path);
  ~InputFileGuard();
  InputFileGuard(const InputFileGuard&) = delete;
  InputFileGuard& operator=(const InputFileGuard&) = delete;

 private:
  unsigned long long device_ = 0, inode_ = 0;
  bool active_ = false;
};

}  // namespace sparge::core
