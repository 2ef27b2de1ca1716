// Run-time loading of NVML (dlopen of libnvidia-ml.so.1) to read the SM clock a GPU actually ran at.
// No link-time dependency and no nvml.h needed: the few types used are declared here when it is absent.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#if __has_include(<nvml.h>)
#include <nvml.h>  // types only: every call goes through NvmlApi
#define SPARGE_PROF_HAVE_NVML_H 1
#endif

#include "sparge/core/dl_library.h"

namespace sparge::prof {

namespace dl = core::dl;

#ifdef SPARGE_PROF_HAVE_NVML_H
using NvmlReturn = nvmlReturn_t;
using NvmlDevice = nvmlDevice_t;
using NvmlClockType = nvmlClockType_t;
#else
// Same ABI as nvml.h: the enums are int-sized, a device is an opaque pointer.
enum NvmlReturn : int {};
struct NvmlDeviceOpaque;
using NvmlDevice = NvmlDeviceOpaque*;
enum NvmlClockType : int {};
#endif

inline constexpr int kNvmlSuccess = 0;
inline constexpr int kNvmlClockSm = 1;  // NVML_CLOCK_SM

// Exactly the NVML functions the profiler calls. All non-null once loaded, except errorString (optional:
// only used to word failures).
struct NvmlApi {
  NvmlReturn (*init)() = nullptr;  // nvmlInit_v2
  NvmlReturn (*shutdown)() = nullptr;
  NvmlReturn (*deviceGetHandleByIndex)(unsigned int, NvmlDevice*) = nullptr;    // _v2
  NvmlReturn (*deviceGetHandleByPciBusId)(const char*, NvmlDevice*) = nullptr;  // _v2
  NvmlReturn (*deviceGetClockInfo)(NvmlDevice, NvmlClockType, unsigned int*) = nullptr;
  NvmlReturn (*deviceGetMaxClockInfo)(NvmlDevice, NvmlClockType, unsigned int*) = nullptr;
  const char* (*errorString)(NvmlReturn) = nullptr;
};

using NvmlLoadResult =
    dl::LoadResult<NvmlApi>;  // handle kept open for the process: handles from it may outlive any one user

// $SPARGE_NVML_LIBRARY alone when set and non-empty (an explicit choice is not second-guessed, and a bad
// path turns NVML off), else libnvidia-ml.so.1 (the driver's soname; there is no unversioned name without
// the -dev package).
std::vector<std::string> nvmlCandidates();

// Opens the first candidate that dlopens and resolves every symbol. No global state: for tests.
NvmlLoadResult loadNvmlFrom(const std::vector<std::string>& candidates);

// The process-wide NVML table, loaded once (thread-safe) from nvmlCandidates(). Never throws.
const NvmlLoadResult& nvml();

// One GPU's SM clock through NVML. open() initialises NVML (reference-counted by NVML; the destructor shuts
// its reference down) and finds the device by PCI bus id, which is stable where CUDA ordinals and NVML
// indices differ (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER). Never throws.
class NvmlSmClock {
 public:
  // `pciBusId` from cudaDeviceGetPCIBusId ("0000:01:00.0"); when empty, `nvmlIndex` is used instead and
  // the caller must say the match is by index. On failure returns null and sets `why`.
  static std::unique_ptr<NvmlSmClock> open(const NvmlLoadResult& lib, const std::string& pciBusId,
                                           int nvmlIndex, std::string& why);
  ~NvmlSmClock();
  NvmlSmClock(const NvmlSmClock&) = delete;
  NvmlSmClock& operator=(const NvmlSmClock&) = delete;

  // The current SM clock in MHz, or nullopt with `why` set (e.g. NVML_ERROR_NOT_SUPPORTED).
  std::optional<unsigned> currentMHz(std::string& why) const;
  // nvmlDeviceGetMaxClockInfo(SM), 0 when NVML does not say.
  unsigned maxMHz() const { return maxMHz_; }
  const std::string& matchedBy() const { return matchedBy_; }  // "PCI bus id 0000:01:00.0" / "index 0"

 private:
  NvmlSmClock() = default;
  const NvmlApi* api_ = nullptr;
  NvmlDevice device_{};
  unsigned maxMHz_ = 0;
  std::string matchedBy_;
};

// "NVML_ERROR_NOT_SUPPORTED"-style text for `code` (the library's own string when it has one).
std::string nvmlErrorText(const NvmlApi& api, NvmlReturn code);

}  // namespace sparge::prof
