// A method's per-head parameters as JSON, with the names its reference code uses (docs/methods.md): written
// by parameter files and reports, read back strictly.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "sparge/core/params.h"

namespace sparge::core {

// {"threshold": 0.9, "stride": 8} (xattention), {"pattern": "vertical_slash", "vertical_size": …,
// "slash_size": …, "topk": …} (minference), {"gamma", "tau", "min_budget", "max_budget"} (flexprefill),
// {"topk"} (moba); null for SpargeAttn, whose parameters have keys of their own.
nlohmann::json methodParamsJson(Method m, const HeadParams& p);
// The object written by methodParamsJson onto `p`: every key required, of the right type and range; an
// unknown key is refused. Errors name `where` ("p.json:/groups/0/heads/3/xattention").
void readMethodParams(const nlohmann::json& j, Method m, HeadParams& p, const std::string& where);

}  // namespace sparge::core
