// Type check of input files (regular files only), shared by the capture and parameter readers.
#include "input_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "sparge/core/error.h"

namespace sparge::core {

void checkRegularInputFile(const std::string& path, const std::string& kind) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) throw Error(path, "file not found — check the path");
    throw Error(path,
                std::string("cannot read the file (") + std::strerror(errno) + ") — check its permissions");
  }
  if (S_ISDIR(st.st_mode)) throw Error(path, "is a folder, not a " + kind + " — pass the file itself");
  if (!S_ISREG(st.st_mode)) {
    const char* type = S_ISFIFO(st.st_mode)   ? "a FIFO (named pipe)"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "a device";
    throw Error(path, std::string("is ") + type + ", not a regular file — pass the " + kind +
                          " as a regular file (copy the data to one first)");
  }
}

}  // namespace sparge::core
