// One resolution of "which heads, with which parameters" for a run, shared by both engines and the tuner.
#pragma once

#include <cstdint>
#include <vector>

#include "sparge/core/engine.h"

namespace sparge::core {

// Checks a run against its entry and returns the query heads to run, ascending and without repeats
// (an empty request means every head). Throws sparge::Error naming the entry for a per-head parameter
// list of the wrong length, a head out of range, or a head whose parameters are out of range.
std::vector<int64_t> resolveRunHeads(const EntryInfo& info, const RunConfig& config,
                                     const std::vector<int64_t>& requested);

// A run whose heads use different numerics (RunConfig::perHeadNumerics), as one run per numerics over its
// heads, joined (joinHeadRuns) under `config`: for engines whose kernels take one numerics per call. The
// parts run without RunOptions::onDeployed (no early result).
EntryResult runByNumerics(Engine& engine, const RunConfig& config, const RunOptions& options);

}  // namespace sparge::core
