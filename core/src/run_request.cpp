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
  if (!config.perHeadNumerics.empty() && int64_t(config.perHeadNumerics.size()) != info.headsQ)
    throw Error(where, "per-head numerics given for " + std::to_string(config.perHeadNumerics.size()) +
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

EntryResult runByNumerics(Engine& engine, const RunConfig& config, const RunOptions& options) {
  if (!engine.entry()) throw Error(engine.name(), "no entry loaded");
  const std::vector<int64_t> heads = resolveRunHeads(engine.entry()->info, config, options.heads);
  std::vector<EntryResult> parts;
  for (Numerics n : {Numerics::None, Numerics::Int8Fp16, Numerics::Int8Fp8}) {
    RunOptions part = options;
    part.heads.clear();
    for (int64_t h : heads)
      if (config.numericsFor(h) == n) part.heads.push_back(h);
    if (part.heads.empty()) continue;
    part.onDeployed = nullptr;
    RunConfig uniform = config;
    uniform.numerics = n;
    uniform.perHeadNumerics.clear();
    parts.push_back(engine.run(uniform, part));
    parts.back().config = config;
  }
  return joinHeadRuns(std::move(parts));
}

}  // namespace sparge::core
