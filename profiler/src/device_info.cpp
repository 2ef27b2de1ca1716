// Device facts for reports: GPU name, max SM clock (the Profiler samples the actual one), versions, host CPU.
#include <fstream>
#include <string>

#include "sparge/profiler/report.h"

#ifdef SPARGE_PROF_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#ifdef SPARGE_PROF_HAVE_CUPTI
#include "cupti_loader.h"
#endif

namespace sparge::prof {

namespace {

std::string hostCpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        auto start = line.find_first_not_of(' ', colon + 1);
        return start == std::string::npos ? std::string() : line.substr(start);
      }
    }
  }
  return {};
}

}  // namespace

DeviceInfo queryDevice(int index) {
  DeviceInfo d;
  d.hostCpu = hostCpuModel();
  d.name = d.hostCpu.empty() ? std::string("host CPU") : d.hostCpu;
  d.clockNote = "no GPU: host wall clock";
#ifdef SPARGE_PROF_HAVE_CUDA
  cudaRuntimeGetVersion(&d.runtimeVersion);
  cudaDriverGetVersion(&d.driverVersion);  // 0 when no driver is installed
#ifdef SPARGE_PROF_HAVE_CUPTI
  // libcupti is optional at run time: without it the version stays 0.
  uint32_t version = 0;
  if (cupti().ok && cupti().api.getVersion(&version) == CUPTI_SUCCESS) d.cuptiVersion = int(version);
#endif
  // Without a driver cudaGetDeviceCount fails and leaves its output untouched.
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count <= 0) {
    d.probeError = err != cudaSuccess ? std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err)
                                      : std::string("no CUDA device");
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return d;
  }
  if (index < 0 || index >= count) {
    d.probeError =
        "device " + std::to_string(index) + " out of range (" + std::to_string(count) + " devices)";
    return d;
  }
  cudaDeviceProp prop{};
  if ((err = cudaGetDeviceProperties(&prop, index)) != cudaSuccess) {
    d.probeError = std::string("cudaGetDeviceProperties: ") + cudaGetErrorString(err);
    cudaGetLastError();
    return d;
  }
  d.gpu = true;
  d.index = index;
  d.name = prop.name;
  d.ccMajor = prop.major;
  d.ccMinor = prop.minor;
  int khz = 0;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, index) == cudaSuccess && khz > 0) {
    d.maxSmClockKHz = khz;
    d.clockNote = "max SM clock " + std::to_string(khz / 1000) + " MHz (cudaDevAttrClockRate)";
  } else {
    cudaGetLastError();
    d.clockNote = "SM clock not readable";
  }
#else
  (void)index;
  d.probeError = "built without CUDA";
#endif
  return d;
}

}  // namespace sparge::prof
