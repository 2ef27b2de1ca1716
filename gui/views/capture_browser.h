// Capture browser: the entries of the open capture (layers / steps / module kinds) with shapes, dtype,
// causal or windowed attention, GQA, memory; grouped by layer, step or module kind.
#pragma once

#include "overview.h"
#include "view.h"

namespace sparge::gui {

class CaptureBrowser final : public View {
 public:
  void draw(Session& session, UiState& ui) override;

 private:
  void drawRow(Session& s, const core::EntryInfo& e);
  OverviewSort group_ = OverviewSort::Capture;
};

// One line describing an entry's attention mask: "causal", "window [512, 0] (causal)", "full".
std::string maskText(const core::EntryInfo& e);
// The entry's identity (module path, kind, stack), one item per line; empty when none is recorded.
std::string identityText(const core::EntryInfo& e);

}  // namespace sparge::gui
