// Timings: per-stage min / median / max, sparse vs dense speedup, TOPS, device and clock source.
#pragma once

#include "view.h"

namespace sparge::gui {

class TimingsView final : public View {
 public:
  const char* id() const override { return "timings"; }
  const char* title() const override { return "Timings"; }
  void draw(Session& session, UiState& ui) override;

 private:
  void drawFigures(const TimingSummary& t);
};

}  // namespace sparge::gui
