// Run-time loading of NVML: dlopen + dlsym of the functions in NvmlApi, once per process; SM clock reads.
#include "nvml_loader.h"

#include <mutex>

namespace sparge::prof {

namespace {

constexpr const char* kNvmlSoname = "libnvidia-ml.so.1";

#ifdef SPARGE_PROF_HAVE_NVML_H
static_assert(NVML_SUCCESS == kNvmlSuccess && NVML_CLOCK_SM == kNvmlClockSm);
#endif

bool resolveAll(void* h, NvmlApi& api, std::string& missing) {
  bool ok = true;
  ok &= dl::resolve(h, "nvmlInit_v2", api.init, missing);
  ok &= dl::resolve(h, "nvmlShutdown", api.shutdown, missing);
  ok &= dl::resolve(h, "nvmlDeviceGetHandleByIndex_v2", api.deviceGetHandleByIndex, missing);
  ok &= dl::resolve(h, "nvmlDeviceGetHandleByPciBusId_v2", api.deviceGetHandleByPciBusId, missing);
  ok &= dl::resolve(h, "nvmlDeviceGetClockInfo", api.deviceGetClockInfo, missing);
  ok &= dl::resolve(h, "nvmlDeviceGetMaxClockInfo", api.deviceGetMaxClockInfo, missing);
  std::string optionalMissing;
  dl::resolve(h, "nvmlErrorString", api.errorString, optionalMissing);
  return ok;
}

}  // namespace

std::string nvmlErrorText(const NvmlApi& api, NvmlReturn code) {
  const char* s = api.errorString ? api.errorString(code) : nullptr;
  std::string text = s ? std::string(s) : std::string("NVML error");
  return text + " (" + std::to_string(int(code)) + ")";
}

std::vector<std::string> nvmlCandidates() {
  return dl::candidates("SPARGE_NVML_LIBRARY", {kNvmlSoname});
}

NvmlLoadResult loadNvmlFrom(const std::vector<std::string>& candidates) {
  return dl::openFirst<NvmlApi>(
      candidates, kNvmlSoname, "SPARGE_NVML_LIBRARY", [](void* h, NvmlApi& api) -> std::string {
        std::string missing;
        return resolveAll(h, api, missing) ? std::string() : "missing symbols: " + missing;
      });
}

const NvmlLoadResult& nvml() {
  static std::once_flag once;
  static NvmlLoadResult result;
  std::call_once(once, [] {
    try {
      result = loadNvmlFrom(nvmlCandidates());
    } catch (...) {  // bad_alloc building messages: NVML just stays off
      result = NvmlLoadResult{};
      result.error = "libnvidia-ml not loaded (out of memory)";
    }
  });
  return result;
}

std::unique_ptr<NvmlSmClock> NvmlSmClock::open(const NvmlLoadResult& lib, const std::string& pciBusId,
                                               int nvmlIndex, std::string& why) {
  try {
    if (!lib.ok) {
      why = lib.error.empty() ? std::string("NVML not loaded") : lib.error;
      return nullptr;
    }
    const NvmlApi& api = lib.api;
    NvmlReturn rc = api.init();
    if (int(rc) != kNvmlSuccess) {
      why = "nvmlInit_v2: " + nvmlErrorText(api, rc);
      return nullptr;
    }
    std::unique_ptr<NvmlSmClock> c(new NvmlSmClock());
    c->api_ = &api;  // from here on the destructor releases the init reference
    if (!pciBusId.empty()) {
      rc = api.deviceGetHandleByPciBusId(pciBusId.c_str(), &c->device_);
      c->matchedBy_ = "PCI bus id " + pciBusId;
    } else if (nvmlIndex >= 0) {
      rc = api.deviceGetHandleByIndex(unsigned(nvmlIndex), &c->device_);
      c->matchedBy_ = "index " + std::to_string(nvmlIndex);
    } else {
      why = "no PCI bus id or index to find the NVML device by";
      return nullptr;
    }
    if (int(rc) != kNvmlSuccess) {
      why = "NVML device for " + c->matchedBy_ + ": " + nvmlErrorText(api, rc);
      return nullptr;
    }
    unsigned mhz = 0;
    if (int(api.deviceGetMaxClockInfo(c->device_, NvmlClockType(kNvmlClockSm), &mhz)) == kNvmlSuccess)
      c->maxMHz_ = mhz;
    return c;
  } catch (...) {
    why = "NVML setup failed (out of memory)";
    return nullptr;
  }
}

NvmlSmClock::~NvmlSmClock() {
  if (api_) api_->shutdown();
}

std::optional<unsigned> NvmlSmClock::currentMHz(std::string& why) const {
  unsigned mhz = 0;
  NvmlReturn rc = api_->deviceGetClockInfo(device_, NvmlClockType(kNvmlClockSm), &mhz);
  if (int(rc) != kNvmlSuccess) {
    why = "nvmlDeviceGetClockInfo(SM): " + nvmlErrorText(*api_, rc);
    return std::nullopt;
  }
  if (mhz == 0) {
    why = "nvmlDeviceGetClockInfo(SM) returned 0 MHz";
    return std::nullopt;
  }
  return mhz;
}

}  // namespace sparge::prof
