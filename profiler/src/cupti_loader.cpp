// Run-time loading of libcupti: dlopen + dlsym of the functions in CuptiApi, once per process.
#include "cupti_loader.h"

#include <mutex>

#ifndef SPARGE_CUPTI_SONAME
#define SPARGE_CUPTI_SONAME "libcupti.so"
#endif

namespace sparge::prof {

namespace {

// From CUDA 13 CUPTI_API_VERSION is major * 10000 + minor * 100 + patch; earlier it was a plain counter.
constexpr uint32_t kMinCuptiVersion =
    CUPTI_API_VERSION >= 10000 ? CUPTI_API_VERSION / 10000 * 10000 : CUPTI_API_VERSION;

bool resolveAll(void* h, CuptiApi& api, std::string& missing) {
  bool ok = true;
  ok &= dl::resolve(h, "cuptiActivityDisable", api.activityDisable, missing);
  ok &= dl::resolve(h, "cuptiActivityEnable", api.activityEnable, missing);
  ok &= dl::resolve(h, "cuptiActivityFlushAll", api.activityFlushAll, missing);
  ok &= dl::resolve(h, "cuptiActivityGetNextRecord", api.activityGetNextRecord, missing);
  ok &= dl::resolve(h, "cuptiActivityGetNumDroppedRecords", api.activityGetNumDroppedRecords, missing);
  ok &=
      dl::resolve(h, "cuptiActivityPopExternalCorrelationId", api.activityPopExternalCorrelationId, missing);
  ok &= dl::resolve(h, "cuptiActivityPushExternalCorrelationId", api.activityPushExternalCorrelationId,
                    missing);
  ok &= dl::resolve(h, "cuptiActivityRegisterCallbacks", api.activityRegisterCallbacks, missing);
  ok &= dl::resolve(h, "cuptiGetResultString", api.getResultString, missing);
  ok &= dl::resolve(h, "cuptiGetTimestamp", api.getTimestamp, missing);
  ok &= dl::resolve(h, "cuptiGetVersion", api.getVersion, missing);
  return ok;
}

}  // namespace

std::vector<std::string> cuptiCandidates() {
  std::vector<std::string> c{SPARGE_CUPTI_SONAME, "libcupti.so"};
#ifdef SPARGE_CUPTI_BUILD_PATH
  c.emplace_back(SPARGE_CUPTI_BUILD_PATH);
#endif
  return dl::candidates("SPARGE_CUPTI_LIBRARY", c);
}

CuptiLoadResult loadCuptiFrom(const std::vector<std::string>& candidates) {
  return dl::openFirst<CuptiApi>(
      candidates, SPARGE_CUPTI_SONAME, "SPARGE_CUPTI_LIBRARY", [](void* h, CuptiApi& api) -> std::string {
        std::string missing;
        if (!resolveAll(h, api, missing)) return "missing symbols: " + missing;
        // The activity record structs come from the headers this was built with;
        // a library of an older major release lays them out differently, so it
        // is refused rather than misread.
        uint32_t version = 0;
        if (api.getVersion(&version) != CUPTI_SUCCESS || version < kMinCuptiVersion)
          return "CUPTI API version " + std::to_string(version) + " is older than " +
                 std::to_string(kMinCuptiVersion) + ", the headers' major release";
        return {};
      });
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
