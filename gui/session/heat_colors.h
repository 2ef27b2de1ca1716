// Colours of masks and heatmaps, shared by the GL textures and the PNG report (no GL here).
#pragma once

#include <cstdint>
#include <vector>

#include "sparge/core/result.h"

namespace sparge::gui {

// Packed as ImGui's IM_COL32 and as RGBA bytes in memory on little-endian: R | G<<8 | B<<16 | A<<24.
constexpr uint32_t packRgba(uint8_t r, uint8_t g, uint8_t b, uint8_t a = 255) {
  return uint32_t(r) | (uint32_t(g) << 8) | (uint32_t(b) << 16) | (uint32_t(a) << 24);
}

enum class Colormap { Viridis, Inferno };
uint32_t colormap(Colormap map, float t);  // t clamped to [0, 1]

// What one block of a head's grid is, for colouring and legends. PvSkipped wins over the reasons.
enum class MaskCell : uint8_t {
  Invalid,
  Off,
  Selected,
  ForcedRow,
  ForcedCol,
  Sink,
  Diagonal,
  Dense,
  PvSkipped,
  Count
};
MaskCell classifyBlock(const core::HeadResult& h, size_t index);
uint32_t maskCellColor(MaskCell c);
const char* maskCellLabel(MaskCell c);

enum class HeadLayer {
  Combined,     // the grid's thumbnail: stage-1 reasons with PV-skipped blocks marked
  Mask,         // stage-1 mask by reason (PV skip not shown)
  PvSkipped,    // computed / PV skipped / off
  DroppedMass,  // reference attention mass of blocks whose PV was not computed (log scale)
  PooledProb,   // P̂, the compressed attention map (log scale)
};
const char* headLayerLabel(HeadLayer l);
bool headLayerIsContinuous(HeadLayer l);

// Renders one layer of a head as nq rows x nk columns of packed RGBA. For continuous layers the
// colour scale is log10 between *vmin and *vmax (chosen from the data, returned for the colorbar).
void renderHeadLayer(const core::HeadResult& h, HeadLayer layer, std::vector<uint32_t>& rgba, float* vmin,
                     float* vmax);

// The Combined layer at most `maxSide` texels wide and high, each texel the block at its position (what
// nearest-neighbour sampling of the full grid shows at thumbnail size, for a fraction of the work).
void renderHeadThumbnail(const core::HeadResult& h, int maxSide, std::vector<uint32_t>& rgba, int* cols,
                         int* rows);

// Threads for colouring `blocks` blocks of heads after a run (heads and layers are independent; a 32-head
// 32K entry is 4M blocks to classify, most of a result frame's work on one thread). One below
// kThreadedColouringBlocks: starting threads costs more than such work, and far more on a loaded CPU,
// where the frame waits until each new thread is scheduled.
inline constexpr int64_t kThreadedColouringBlocks = int64_t{1} << 16;
int colouringThreads(int64_t blocks);

// Attention mass that query block `row` loses: Σ refBlockMass over its blocks whose PV was not computed.
double droppedMassOfRow(const core::HeadResult& h, int row);

}  // namespace sparge::gui
