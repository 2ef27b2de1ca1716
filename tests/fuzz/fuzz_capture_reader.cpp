// libFuzzer target: the capture reader (HDF5 parsing, metadata validation, head reads) on arbitrary bytes.
// Every input must end in a sparge::Error or success; anything else (a crash, a sanitizer report, another
// exception such as std::bad_alloc) is a bug.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "sparge/core/capture.h"
#include "sparge/core/error.h"
#include "sparge/core/memory_guard.h"

namespace {

// HDF5 opens files by name: each input goes to one temporary file per process, rewritten every time.
std::string inputPath() {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/sparge-fuzz-capture-" + std::to_string(::getpid()) +
         ".h5";
}

void exercise(const std::string& path) {
  sparge::core::CaptureReader reader(path);
  (void)reader.rootAttributes();
  for (const sparge::core::EntryInfo& e : reader.entries()) {
    (void)e.bytesOnDisk();
    try {
      sparge::core::loadEntry(reader, e.name);  // the memory guard limits what may be allocated
    } catch (const sparge::Error&) {
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  sparge::core::setMemoryLimit(256.0 * 1024 * 1024);  // a fuzzer's RSS limit, not the machine's memory
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = inputPath();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    exercise(path);
  } catch (const sparge::Error&) {
    // a clear error is the right answer to a bad file
  }
  return 0;
}
