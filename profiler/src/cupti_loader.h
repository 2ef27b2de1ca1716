// Run-time loading of libcupti (dlopen), so the profiler starts on machines whose CUDA install lacks CUPTI.
// Only the CUPTI headers' types are used at build time; every CUPTI call goes through CuptiApi.
#pragma once

#include <cupti.h>

#include <string>
#include <vector>

#include "sparge/core/dl_library.h"

namespace sparge::prof {

namespace dl = core::dl;

// Exactly the CUPTI functions the profiler calls. All non-null once loaded.
struct CuptiApi {
  CUptiResult(CUPTIAPI* activityDisable)(CUpti_ActivityKind) = nullptr;
  CUptiResult(CUPTIAPI* activityEnable)(CUpti_ActivityKind) = nullptr;
  CUptiResult(CUPTIAPI* activityFlushAll)(uint32_t) = nullptr;
  CUptiResult(CUPTIAPI* activityGetNextRecord)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
  CUptiResult(CUPTIAPI* activityGetNumDroppedRecords)(CUcontext, uint32_t, size_t*) = nullptr;
  CUptiResult(CUPTIAPI* activityPopExternalCorrelationId)(CUpti_ExternalCorrelationKind, uint64_t*) = nullptr;
  CUptiResult(CUPTIAPI* activityPushExternalCorrelationId)(CUpti_ExternalCorrelationKind, uint64_t) = nullptr;
  CUptiResult(CUPTIAPI* activityRegisterCallbacks)(CUpti_BuffersCallbackRequestFunc,
                                                   CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult(CUPTIAPI* getResultString)(CUptiResult, const char**) = nullptr;
  CUptiResult(CUPTIAPI* getTimestamp)(uint64_t*) = nullptr;
  CUptiResult(CUPTIAPI* getVersion)(uint32_t*) = nullptr;
};

using CuptiLoadResult =
    dl::LoadResult<CuptiApi>;  // handle never closed: CUPTI keeps threads and callbacks alive until exit

// The candidates in search order: $SPARGE_CUPTI_LIBRARY alone when it is set and non-empty (an explicit
// choice is not second-guessed, and a bad path is a way to turn CUPTI off), else the soname, the unversioned
// name and the toolkit path known at build time.
std::vector<std::string> cuptiCandidates();

// Opens the first candidate that dlopens and resolves every symbol. No global state: for tests.
CuptiLoadResult loadCuptiFrom(const std::vector<std::string>& candidates);

// The process-wide CUPTI table, loaded once (thread-safe) from cuptiCandidates(). Never throws.
const CuptiLoadResult& cupti();

}  // namespace sparge::prof
