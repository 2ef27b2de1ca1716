// Run-time loading of libcupti: dlopen + dlsym of the functions in CuptiApi, once per process.
#include "cupti_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#ifndef SPARGE_CUPTI_SONAME
#define SPARGE_CUPTI_SONAME "libcupti.so"
#endif

namespace sparge::prof {

namespace {

// From CUDA 13 CUPTI_API_VERSION is major * 10000 + minor * 100 + patch; earlier it was a plain counter.
constexpr uint32_t kMinCuptiVersion =
    CUPTI_API_VERSION >= 10000 ? CUPTI_API_VERSION / 10000 * 10000 : CUPTI_API_VERSION;

std::string dlError() {
  const char* e = dlerror();
  return e ? std::string(e) : std::string("unknown dlopen error");
}

// Fills `slot` from `handle`; on failure returns false and appends the missing name to `missing`.
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

bool resolveAll(void* h, CuptiApi& api, std::string& missing) {
  bool ok = true;
  ok &= resolve(h, "cuptiActivityDisable", api.activityDisable, missing);
  ok &= resolve(h, "cuptiActivityEnable", api.activityEnable, missing);
  ok &= resolve(h, "cuptiActivityFlushAll", api.activityFlushAll, missing);
  ok &= resolve(h, "cuptiActivityGetNextRecord", api.activityGetNextRecord, missing);
  ok &= resolve(h, "cuptiActivityGetNumDroppedRecords", api.activityGetNumDroppedRecords, missing);
  ok &= resolve(h, "cuptiActivityPopExternalCorrelationId", api.activityPopExternalCorrelationId, missing);
  ok &= resolve(h, "cuptiActivityPushExternalCorrelationId", api.activityPushExternalCorrelationId, missing);
  ok &= resolve(h, "cuptiActivityRegisterCallbacks", api.activityRegisterCallbacks, missing);
  ok &= resolve(h, "cuptiGetResultString", api.getResultString, missing);
  ok &= resolve(h, "cuptiGetTimestamp", api.getTimestamp, missing);
  ok &= resolve(h, "cuptiGetVersion", api.getVersion, missing);
  return ok;
}

}  // namespace

std::vector<std::string> cuptiCandidates() {
  const char* env = std::getenv("SPARGE_CUPTI_LIBRARY");
  if (env && *env) return {env};
  std::vector<std::string> c{SPARGE_CUPTI_SONAME, "libcupti.so"};
#ifdef SPARGE_CUPTI_BUILD_PATH
  c.emplace_back(SPARGE_CUPTI_BUILD_PATH);
#endif
  return c;
}

CuptiLoadResult loadCuptiFrom(const std::vector<std::string>& candidates) {
  CuptiLoadResult r;
  std::string tried;
  for (const std::string& path : candidates) {
    if (path.empty()) continue;
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      tried += (tried.empty() ? "" : "; ") + path + " (dlopen: " + dlError() + ")";
      continue;
    }
    CuptiApi api;
    std::string missing;
    if (!resolveAll(h, api, missing)) {
      tried += (tried.empty() ? "" : "; ") + path + " (missing symbols: " + missing + ")";
      dlclose(h);
      continue;
    }
    // The activity record structs come from the headers this was built with; a library of an older major
    // release lays them out differently, so it is refused rather than misread.
    uint32_t version = 0;
    if (api.getVersion(&version) != CUPTI_SUCCESS || version < kMinCuptiVersion) {
      tried += (tried.empty() ? "" : "; ") + path + " (CUPTI API version " + std::to_string(version) +
               " is older than " + std::to_string(kMinCuptiVersion) + ", the headers' major release)";
      dlclose(h);
      continue;
    }
    r.ok = true;
    r.api = api;
    r.path = path;
    r.handle = h;
    return r;
  }
  if (candidates.empty() || tried.empty()) tried = "no candidate paths";
  r.error =
      std::string(SPARGE_CUPTI_SONAME) + " not loaded: " + tried + "; set SPARGE_CUPTI_LIBRARY to its path";
  return r;
}

const CuptiLoadResult& cupti() {
  static std::once_flag once;
  static CuptiLoadResult result;
  std::call_once(once, [] {
    try {
      result = loadCuptiFrom(cuptiCandidates());
    } catch (...) {  // bad_alloc building messages: CUPTI just stays off
      result = CuptiLoadResult{};
      result.error = "libcupti not loaded (out of memory)";
    }
  });
  return result;
}

}  // namespace sparge::prof
