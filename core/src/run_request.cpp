// Run-request resolution: validation of per-head parameters and the head list, once for every engine.
#include "sparge/core/run_request.h"

#include <algorithm>
#include <string>

#include "sparge/core/error.h"

namespace sparge::core {

std::vector<int64_t> resolveRunHeads(const EntryInfo& info, const RunConfig& config,
                                     const std::vector<int64_t>& requested) {
  const std::string where = "entry " + info.name;
  if (!config.perHead.empty() && int64_t(config.perHead.size()) != info.headsQ)
    throw Error(where, "per-head parameters given for " + std::to_string(config.perHead.size()) +
                           " heads, but the entry has " + std::to_string(info.headsQ) + " query heads");
  std::vector<int64_t> heads = requested;
  if (heads.empty())
    for (int64_t h = 0; h < info.headsQ; ++h) heads.push_back(h);
  for (int64_t h : heads)
    if (h < 0 || h >= info.headsQ)
      throw Error(where, "head " + std::to_string(h) + " out of range (the entry has " +
                             std::to_string(info.headsQ) + " query heads: 0 to " +
                             std::to_string(info.headsQ - 1) + ")");
  // A head asked for twice is run once: totals must count every head once.
  std::sort(heads.begin(), heads.end());
  heads.erase(std::unique(heads.begin(), heads.end()), heads.end());
  for (int64_t h : heads) validate(config.forHead(h), where + " head " + std::to_string(h), config.method);
  return heads;
}

}  // namespace sparge::core
