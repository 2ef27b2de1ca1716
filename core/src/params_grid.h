// Private: the "grid" object of a parameter-file group ({"shape": [T, H, W], "offset": N, "tokens": "qkv"}),
// shared by the parameter-file writer and reader.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "sparge/core/token_grid.h"

namespace sparge::core {

nlohmann::json gridJson(const TokenGrid& g);
// Throws sparge::Error("<source>:<path>", problem) for anything but a valid grid object.
TokenGrid parseGridJson(const nlohmann::json& j, const std::string& path, const std::string& source);

}  // namespace sparge::core
