// `sparge run` over several ranks: entries as units of a job (cost per head from the cost model), and
// rank 0 joining the pieces of an entry that ranks ran head by head back into one result.
#pragma once

#include <string>
#include <vector>

#include "piece_job.h"
#include "sparge/core/capture.h"
#include "sparge/core/result.h"

namespace sparge::scaleout {

// One unit per entry (in order) with the requested query heads (`heads` empty = all).
PieceJobSpec entryJobSpec(const core::CaptureReader& reader, const std::vector<std::string>& names,
                          const std::vector<int64_t>& heads);

// The entry result of one piece, or of several pieces (disjoint heads of one entry) joined: heads in
// (batch, head) order, entry totals recomputed, warnings kept once, stage times summed (with a warning
// that says so). Throws sparge::Error naming the entry when a payload is not a result of it.
core::EntryResult mergeEntryPieces(std::vector<std::string>& payloads, const std::string& entry);

}  // namespace sparge::scaleout
