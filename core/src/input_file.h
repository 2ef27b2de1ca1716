// Input files are checked by type before anything opens them.
#pragma once

#include <string>

namespace sparge::core {

// Throws sparge::Error(path, ...) unless `path` names a regular file (symbolic links followed): a
// missing file, a folder, and FIFOs, sockets and devices (opening a FIFO blocks until a writer comes;
// a device never ends) are refused. `kind` words the message ("capture", "parameter file").
void checkRegularInputFile(const std::string& path, const std::string& kind);

}  // namespace sparge::core
