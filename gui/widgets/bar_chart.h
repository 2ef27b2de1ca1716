// A small horizontal bar chart with min / median / max per row (timings), no plotting library needed.
#pragma once

#include <string>
#include <vector>

namespace sparge::gui {

struct RangeBar {
  std::string label;
  double min = 0, median = 0, max = 0;
  unsigned color = 0;  // IM_COL32; 0 = default
};

// Bars scaled to the largest max. The bar is the median; a whisker spans min..max. Hover shows numbers.
void drawRangeBars(const char* id, const std::vector<RangeBar>& bars, const char* unit);

}  // namespace sparge::gui
