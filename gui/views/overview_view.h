// Model overview: one row per entry (grouped and sorted by layer, step or module kind), one column per
// head, coloured by a chosen metric and drawn as one texture; colour bar, a tooltip per cell, and a click
// opens that entry and head. Filled in the background entry by entry.
#pragma once

#include <cstdint>
#include <vector>

#include "view.h"
#include "widgets/heatmap.h"

namespace sparge::gui {

class OverviewView final : public View {
 public:
  void draw(Session& session, UiState& ui) override;

 private:
  void drawToolbar(Session& s);
  void rebuild(const Session& s);  // order, values and the texture, when anything they depend on changed
  void drawMatrix(Session& s);
  void cellTooltip(const Session& s, size_t row, int64_t head) const;
  void buildMarks(const Session& s);
  void drawMarks(ImDrawList* dl, ImVec2 p0, float cellW, float cellH, float top, float bottom) const;
  bool tuned(const Session& s, size_t row, int64_t head) const;
  // Best method (overview_methods.cpp): the winner's index in core::kAllMethods, -1 when no method is
  // sparse, NaN when the entry was not compared; the legend with the Compare button; the tooltip's lines.
  double bestMethod(const Session& s, size_t row, int64_t head) const;
  void drawMethodLegend(Session& s);
  void methodTooltip(const Session& s, size_t row, int64_t head) const;

  OverviewMetric metric_ = OverviewMetric::Total;
  uint64_t seenCompare_ = 0;
  OverviewSort sort_ = OverviewSort::Capture;
  // What the texture was built from.
  uint64_t builtGeneration_ = ~uint64_t{0}, builtTune_ = ~uint64_t{0}, builtCompare_ = ~uint64_t{0};
  OverviewMetric builtMetric_ = OverviewMetric::Count;
  OverviewSort builtSort_ = OverviewSort::Capture;
  Budget builtBudget_{-1, -1};
  size_t builtRows_ = 0;
  uint64_t builtChecks_ = ~uint64_t{0};
  std::vector<size_t> order_;   // display row -> capture entry index
  std::vector<double> values_;  // [display row * cols + head], NaN when not computed
  double lo_ = 0, hi_ = 1;
  int cols_ = 0;
  HeatmapTexture texture_;
  uint64_t textureVersion_ = 0;
  std::vector<uint32_t> rgba_;
  // [display row * cols + head]: 1 = runs in exact numerics, 2 = over budget on held-out inputs or in the
  // evaluation report (ChecksModel).
  std::vector<uint8_t> marks_;
};

}  // namespace sparge::gui
