// Controls: θ, τ / top-k, λ, budget, geometry, smooth-k, sink, apply target, auto-tune, overrides.
#pragma once

#include <cstdint>
#include <string>

#include "view.h"

namespace sparge::gui {

class ControlsView final : public View {
 public:
  const char* title() const override { return "Controls"; }
  void draw(Session& session, UiState& ui) override;

 private:
  uint64_t seenTuneGeneration_ = 0;
  std::string seenEntry_;
};

}  // namespace sparge::gui
