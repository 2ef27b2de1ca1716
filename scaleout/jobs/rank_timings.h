// Timings of a job over several ranks: each rank's raw profiler runs travel to rank 0, which merges them
// into one report of the same format one process writes (runs labelled by rank when there are several).
#pragma once

#include <string>
#include <vector>

#include "sparge/profiler/report.h"

namespace sparge::scaleout {

std::string encodeTimings(const prof::ReportInput& input);
prof::ReportInput decodeTimings(const std::string& data, const std::string& source);

// One input from the inputs of ranks 0, 1, …: runs and kernels of every rank (run ids made unique,
// run labels prefixed with "rank r" when several ranks ran), rank 0's device, clock and workload; a
// rank that used another clock or device is named in the source reason. Empty payloads (ranks that
// failed) are skipped.
prof::ReportInput mergeTimings(const std::vector<std::string>& payloads);

}  // namespace sparge::scaleout
