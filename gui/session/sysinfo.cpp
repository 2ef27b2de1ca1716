#include "sysinfo.h"

#include <unistd.h>

#include <cstdio>

#ifdef SPARGE_GUI_HAVE_CUDART
#include <cuda_runtime_api.h>
#endif

namespace sparge::gui {

int64_t processRssBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  long long size = 0, resident = 0;
  int n = std::fscanf(f, "%lld %lld", &size, &resident);
  std::fclose(f);
  if (n != 2) return 0;
  return static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE);
}

bool gpuMemory(int64_t* usedBytes, int64_t* totalBytes) {
#ifdef SPARGE_GUI_HAVE_CUDART
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return false;
  size_t freeB = 0, totalB = 0;
  if (cudaMemGetInfo(&freeB, &totalB) != cudaSuccess) return false;
  *usedBytes = static_cast<int64_t>(totalB - freeB);
  *totalBytes = static_cast<int64_t>(totalB);
  return true;
#else
  (void)usedBytes;
  (void)totalBytes;
  return false;
#endif
}

}  // namespace sparge::gui
