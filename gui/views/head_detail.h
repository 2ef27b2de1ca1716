// Head detail: linked zoom/pan panels of one head (mask, PV skip, dropped mass, pooled P̂) with tooltips.
#pragma once

#include <memory>
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
  // `captureOrder`: the permutation of the run's entry, to show its maps in the capture's token order.
  void sync(const core::HeadResult& h, uint64_t generation, const core::EntryResult& r,
            const core::TokenPermutation* captureOrder);
  void tooltip(const Session& s, const core::HeadResult& h, int row, int col) const;
  void drawHeadline(const Session& s, const core::HeadResult& h) const;
  void drawPanels(const Session& s, const core::HeadResult& h, const core::EntryResult& r, bool mapped);

  HeatmapTexture tex_[kPanels];
  float vmin_[kPanels] = {}, vmax_[kPanels] = {};
  uint64_t syncedGeneration_ = ~uint64_t{0};
  HeadRef syncedHead_{-1, -1};
  bool syncedCaptureOrder_ = false;
  ZoomPan zoom_;
  int hoverRow_ = -1, hoverCol_ = -1;  // last frame's hover, outlined in every panel
  std::vector<uint32_t> scratch_[kPanels];
  core::TokenPermutation capturePerm_;  // of capturePermOf_'s entry
  std::shared_ptr<const core::EntryResult> capturePermOf_;
};

}  // namespace sparge::gui
