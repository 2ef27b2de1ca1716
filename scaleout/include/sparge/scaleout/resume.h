// `sparge tune --resume FILE`: which heads a previous (interrupted or failed) run already finished, so
// that only the missing ones are tuned. A head's result does not depend on which other heads were tuned
// with it, so a resumed file equals the file of an uninterrupted run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparge/core/params_io.h"
#include "sparge/core/tuner.h"

namespace sparge::scaleout {

// Throws sparge::Error naming `path` and the setting when `file` was tuned with other settings than
// `options` (mode, budgets, λ search, geometry, numerics, smooth-k, sink, diagonal): its heads could not be
// mixed with new ones.
void checkResumable(const core::ParamsFile& file, const std::string& path, const core::TuneOptions& options);

// The heads of `group` that `file` already holds (all of them, so that resuming into the same file never
// drops results): those of the file's group with the same name, entries (in order) and head count.
// Empty when the file has no such group; `note` then says why when a group of that name differs.
std::vector<core::TunedHead> finishedHeads(const core::ParamsFile& file, const core::TuneGroupInput& group,
                                           int64_t headsQ, std::string* note = nullptr);

// Groups of `file` that are not among `groups` (other entries than this run's): kept in the output.
std::vector<core::TunedGroup> otherGroups(const core::ParamsFile& file,
                                          const std::vector<core::TuneGroupInput>& groups);

}  // namespace sparge::scaleout
