// Run-time loading of NVML: dlopen + dlsym of the functions in NvmlApi, once per process; SM clock reads.
#include "nvml_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace sparge::prof {

namespace {

constexpr const char* kNvmlSoname = "libnvidia-ml.so.1";

#ifdef SPARGE_PROF_HAVE_NVML_H
static_assert(NVML_SUCCESS == kNvmlSuccess && NVML_CLOCK_SM == kNvmlClockSm);
#endif

std::string dlError() {
  const char* e = dlerror();
  return e ? std::string(e) : std::string("unknown dlopen error");
}

template <typename Fn>
bool resolve(void* handle, const char* name, Fn& slot, std::string& missing) {
  dlerror();
  void* sym = dlsym(handle, name);
  if (!sym) {
    missing += (missing.empty() ? "" : ", ") + std::string(name);
    return false;
  }
  slot = reinterpret_cast<Fn>(sym);
  return true;
}

bool resolveAll(void* h, NvmlApi& api, std::string& missing) {
  bool ok = true;
  ok &= resolve(h, "nvmlInit_v2", api.init, missing);
  ok &= resolve(h, "nvmlShutdown", api.shutdown, missing);
  ok &= resolve(h, "nvmlDeviceGetHandleByIndex_v2", api.deviceGetHandleByIndex, missing);
  ok &= resolve(h, "nvmlDeviceGetHandleByPciBusId_v2", api.deviceGetHandleByPciBusId, missing);
  ok &= resolve(h, "nvmlDeviceGetClockInfo", api.deviceGetClockInfo, missing);
  ok &= resolve(h, "nvmlDeviceGetMaxClockInfo", api.deviceGetMaxClockInfo, missing);
  std::string optionalMissing;
  resolve(h, "nvmlErrorString", api.errorString, optionalMissing);
  return ok;
}

}  // namespace

std::string nvmlErrorText(const NvmlApi& api, NvmlReturn code) {
  const char* s = api.errorString ? api.errorString(code) : nullptr;
  std::string text = s ? std::string(s) : std::string("NVML error");
  return text + " (" + std::to_string(int(code)) + ")";
}

std::vector<std::string> nvmlCandidates() {
  const char* env = std::getenv("SPARGE_NVML_LIBRARY");
  if (env && *env) return {env};
  return {kNvmlSoname};
}

NvmlLoadResult loadNvmlFrom(const std::vector<std::string>& candidates) {
  NvmlLoadResult r;
  std::string tried;
  for (const std::string& path : candidates) {
    if (path.empty()) continue;
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      tried += (tried.empty() ? "" : "; ") + path + " (dlopen: " + dlError() + ")";
      continue;
    }
    NvmlApi api;
    std::string missing;
    if (!resolveAll(h, api, missing)) {
      tried += (tried.empty() ? "" : "; ") + path + " (missing symbols: " + missing + ")";
      dlclose(h);
      continue;
    }
    r.ok = true;
    r.api = api;
    r.path = path;
    r.handle = h;
    return r;
  }
  if (tried.empty()) tried = "no candidate paths";
  r.error = std::string(kNvmlSoname) + " not loaded: " + tried + "; set SPARGE_NVML_LIBRARY to its path";
  return r;
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
