// Controls: θ, τ / top-k, λ, presets, target / numerics / tiles, smooth-k, sink, budget, auto-tune,
// overrides and the tuned values.
#pragma once

#include <cstdint>
#include <string>

#include "view.h"

namespace sparge::gui {

class ControlsView final : public View {
 public:
  void draw(Session& session, UiState& ui) override;

 private:
  void followTunedHead(Session& s, UiState& ui);
  void drawApplyTarget(Session& s, UiState& ui);
  void drawParameters(Session& s, UiState& ui);
  bool drawSpargeParameters(core::HeadParams& p);  // true when changed
  void drawPresets(Session& s);
  void drawRunSettings(Session& s);
  void drawTokenOrder(Session& s, UiState& ui);                // controls_order.cpp
  void drawMethod(Session& s);                                 // controls_method.cpp
  bool drawMethodParameters(Session& s, core::HeadParams& p);  // true when changed
  void drawOverrides(Session& s);
  void drawBudget(Session& s);
  void drawTuning(Session& s);
  void drawTunedTable(Session& s);

  uint64_t seenTuneGeneration_ = 0;
  std::string seenEntry_;
};

}  // namespace sparge::gui
