// A head's maps of a run on a permuted entry, seen in the capture's token order (docs/permutation.md): each
// cell of the capture's tiling holds, token pair by token pair, the fraction that lies in computed blocks
// (or the mean value of the blocks its pairs lie in).
#pragma once

#include <cstdint>
#include <vector>

#include "heat_colors.h"
#include "sparge/core/permutation.h"

namespace sparge::gui {

// Renders `layer` of `h` (a run on an entry in info.permutation order) in the capture's order, as nq x nk
// packed RGBA, linear in [*vmin, *vmax]: the fraction of token pairs in selected blocks (Mask), in blocks
// whose P·V ran (PvSkipped), or the mean over pairs of the blocks' dropped mass or pooled probability.
void renderHeadLayerInCaptureOrder(const core::HeadResult& h, HeadLayer layer, const core::EntryInfo& info,
                                   const core::Geometry& g, const core::TokenPermutation& perm,
                                   std::vector<uint32_t>& rgba, float* vmin, float* vmax);

}  // namespace sparge::gui
