// `sparge tune --validate`: the parameters just tuned, run on captures they were not tuned on; per head the
// budget violations there, printed and recorded in the parameter file ("held_out").
#pragma once

#include <string>
#include <vector>

#include "sparge/core/engine.h"

namespace sparge::cli {

// Runs every entry of each capture in `captures` that has a group in the parameter file at `paramsPath`
// (entries the group was tuned on are skipped: they are not held out), prints per group the heads' held-out
// figures and writes them into the file. Returns the exit code (0; errors are thrown).
int validateHeldOut(const std::string& paramsPath, const std::vector<std::string>& captures,
                    core::EngineChoice engine, int threads);

}  // namespace sparge::cli
