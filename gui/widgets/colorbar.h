// Colorbars for continuous heatmaps (log scale) and legends for categorical masks.
#pragma once

#include <imgui.h>

#include "heat_colors.h"

namespace sparge::gui {

// Horizontal colorbar of `width` (log10 or linear scale), with min / mid / max labels under it.
void drawColorbar(Colormap map, float vmin, float vmax, float width, const char* unit = nullptr,
                  bool logScale = true);

// Compact legend: a swatch and a label per mask category, wrapped to the available width.
void drawMaskLegend(const MaskCell* cells, int count);

}  // namespace sparge::gui
