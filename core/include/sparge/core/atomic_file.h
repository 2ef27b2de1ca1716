// Writing exports safely: write to a temporary file beside the target, then rename over it, so that an
// interrupted export never leaves a broken file or destroys an existing one.
#pragma once

#include <functional>
#include <string>

namespace sparge::core {

// Calls `write(tempPath)` with a fresh temporary path in the target's folder, then renames it to
// `path`. If `write` throws, the temporary file is removed and the exception propagates; the existing
// `path` (if any) is untouched. Throws sparge::Error when the rename fails.
void writeAtomically(const std::string& path, const std::function<void(const std::string& tempPath)>& write);

// Convenience: writes `contents` atomically.
void writeTextAtomically(const std::string& path, const std::string& contents);

}  // namespace sparge::core
