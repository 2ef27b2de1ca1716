// Head detail: linked zoom/pan panels of one head (mask, PV skip, dropped mass, pooled P̂) with tooltips.
#pragma once

#include <vector>

#include "heat_colors.h"
#include "view.h"
#include "widgets/heatmap.h"

namespace sparge::gui {

class HeadDetail final : public View {
 public:
  void draw(Session& session, UiState& ui) override;

 private:
  static constexpr int kPanels = 4;
  void sync(const core::HeadResult& h, uint64_t generation);
  void tooltip(const Session& s, const core::HeadResult& h, int row, int col) const;
  void drawHeadline(const Session& s, const core::HeadResult& h) const;

  HeatmapTexture tex_[kPanels];
  float vmin_[kPanels] = {}, vmax_[kPanels] = {};
  uint64_t syncedGeneration_ = ~uint64_t{0};
  HeadRef syncedHead_{-1, -1};
  ZoomPan zoom_;
  int hoverRow_ = -1, hoverCol_ = -1;  // last frame's hover, outlined in every panel
  std::vector<uint32_t> scratch_[kPanels];
};

}  // namespace sparge::gui
