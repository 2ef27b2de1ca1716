// Capture browser: the entries of the open capture (layers / steps) with shapes, dtype, causal, GQA, memory.
#pragma once

#include "view.h"

namespace sparge::gui {

class CaptureBrowser final : public View {
 public:
  const char* title() const override { return "Capture"; }
  void draw(Session& session, UiState& ui) override;
};

}  // namespace sparge::gui
