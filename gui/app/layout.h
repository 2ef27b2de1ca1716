// The tiled layout of the main window (no docking branch): three columns, each split in two, with
// draggable splitters whose positions are saved in the app settings.
#pragma once

#include "settings.h"

namespace sparge::gui {

// A draggable splitter of `thickness` x `length` at the cursor; `vertical` moves along x. Changes
// `*ratio` by the drag distance over `total`, clamped to [lo, hi]. Returns true while dragging.
bool splitter(const char* id, bool vertical, float thickness, float length, float total, float* ratio, float lo, float hi,
              bool invert = false);

}  // namespace sparge::gui
