// What ranks send to rank 0: run results (every per-head figure and mask) and tuned groups (every
// head with its trace), encoded losslessly so that rank 0 prints and writes exactly what one process
// would.
#pragma once

#include <string>

#include "sparge/core/result.h"
#include "sparge/core/tuner.h"

namespace sparge::scaleout {

std::string encodeResult(const core::EntryResult& result);
// Throws sparge::Error naming `source` (for example "rank 3") when `data` is not a whole result.
core::EntryResult decodeResult(const std::string& data, const std::string& source);

std::string encodeGroup(const core::TunedGroup& group);
core::TunedGroup decodeGroup(const std::string& data, const std::string& source);

}  // namespace sparge::scaleout
