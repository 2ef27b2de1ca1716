// Timings: per-stage min / median / max, sparse vs dense speedup, TOPS, device and clock source.
#pragma once

#include "view.h"

namespace sparge::gui {

class TimingsView final : public View {
 public:
  void draw(Session& session, UiState& ui) override;

 private:
  static constexpr int kWarmupSliderMs = 2000;  // longer ones: `--action profile=N,T`
  void drawWarmupSlider(UiState& ui);
  void drawFigures(const TimingSummary& t);
};

}  // namespace sparge::gui
