// Annotating an existing capture in place: the token grid of one entry (`sparge annotate`), the one change
// Sparge Studio makes to a capture.
#pragma once

#include <optional>
#include <string>

#include "sparge/core/token_grid.h"

namespace sparge::core {

// Sets the grid attributes of entry `entryName` of the capture at `path` (removes them when `grid` is
// empty), in place: the whole capture and the grid are validated first, the attributes written and flushed,
// and the file is read back and checked. Throws sparge::Error naming the file, the entry and the problem: a
// bad capture, an unknown entry, a grid that does not fit the entry's tokens, a file HDF5 cannot open for
// writing (read-only, or locked because another program has it open), or a read-back that differs.
void setEntryGrid(const std::string& path, const std::string& entryName,
                  const std::optional<TokenGrid>& grid);

}  // namespace sparge::core
