// The people-facing report: the CLI's Markdown report with two PNG heatmaps per head (mask + PV skip,
// dropped mass) and the colour legend.
#pragma once

#include <string>

#include "sparge/core/result.h"

namespace sparge::gui {

// Writes one head layer as a PNG (nearest-neighbour upscaled so that small grids stay visible).
// Throws sparge::Error when the file cannot be written.
void writeHeadPng(const std::string& path, const core::HeadResult& head, int layer /* HeadLayer */);

// Writes `path` (Markdown) and, in the folder `<stem>_img/` beside it, two PNGs per head. The Markdown
// links them relatively, so the folder can be moved as a whole. Written atomically (Markdown last).
void writeReportMarkdown(const std::string& path, const core::EntryResult& result,
                         const std::string& capturePath);

}  // namespace sparge::gui
