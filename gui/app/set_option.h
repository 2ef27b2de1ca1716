// The `key=value` settings of sparge-studio's command line (--set) and of the `set=` automation action.
#pragma once

#include <string>

#include "metrics.h"
#include "sparge/core/params.h"

namespace sparge::gui {

// Applies one setting to a run configuration and budget. Keys: theta, tau, topk, lambda, mode (cdf|topk),
// dense (0|1), geometry (128x64|64x128), quant (none|int8-fp16|int8-fp8), target (sm80|sm89|sm90: tiles
// and numerics as SpargeAttn on that GPU), smooth_k, sink, l1, l2. Throws sparge::Error naming the
// setting for unknown keys or bad values.
void applySetting(const std::string& keyValue, core::RunConfig& config, Budget& budget);
// The keys and their values, one line for usage texts.
const char* settingKeys();

// The GUI's starting configuration: SpargeAttn's CDF defaults on the sm89 target (128x64 tiles, INT8
// Q·Kᵀ and FP8 P·V), the numerics a user deploying on Ada gets.
core::RunConfig defaultAppConfig();

}  // namespace sparge::gui
