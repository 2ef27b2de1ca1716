// Private: the optional window and identity attributes of a capture entry (window, module, kind, stack),
// read with validation and written back; shared by the capture reader and writer.
#pragma once

#include <hdf5.h>

#include <optional>
#include <string>

#include "sparge/core/types.h"

namespace sparge::core {

// What is wrong with `window` for an entry with the given causal flag ("" when nothing): values below -1,
// or a causal entry whose window reaches past the query (right > 0).
std::string windowProblem(const Window& window, bool causal);
// What is wrong with a `kind` value ("" when nothing): it must be "self", "cross" or empty.
std::string kindProblem(const std::string& kind);

// Reads window, module, kind and stack from the entry group into `info` (info.causal must be set).
// Returns the first problem found ("" when the attributes are absent or valid), for the reader to report
// with the group's path.
std::string readEntryExtras(hid_t group, EntryInfo& info);

// The token grid (grid, grid_offset, grid_tokens; info.tokensQ / tokensKV must be set): "" when absent or
// valid (then info.grid is set), otherwise the first problem (core/src/grid_attrs.cpp).
std::string readGridAttributes(hid_t group, EntryInfo& info);
// Replaces the grid attributes of the entry group by `grid` (removes them when it is empty).
bool writeGridAttributes(hid_t group, const std::optional<TokenGrid>& grid);

// Writes the attributes that carry information (a bounded window, non-empty strings). False when HDF5
// fails.
bool writeEntryExtras(hid_t group, const EntryInfo& info);

}  // namespace sparge::core
