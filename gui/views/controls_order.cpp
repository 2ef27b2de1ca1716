// The Controls' token order (docs/permutation.md): the order Stage 1 walks on entries with a grid, and
// whether the head detail shows the maps in that order or in the capture's.
#include <imgui.h>

#include <string>

#include "controls_view.h"
#include "widgets/ui_util.h"

namespace sparge::gui {

void ControlsView::drawTokenOrder(Session& s, UiState& ui) {
  const core::EntryInfo* info = s.capture().info();
  const bool hasGrid = info && info->grid;
  ImGui::BeginDisabled(!hasGrid);
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 8);
  const core::Permutation current = s.permutation();
  if (ImGui::BeginCombo("token order", core::toString(current))) {
    for (core::Permutation p : {core::Permutation::None, core::Permutation::RowMajor,
                                core::Permutation::TimeMajor, core::Permutation::Hilbert}) {
      const std::string problem = s.permutationProblem(p);
      ImGui::BeginDisabled(!problem.empty());
      if (ImGui::Selectable(core::toString(p), p == current)) s.setPermutation(p);
      ImGui::EndDisabled();
      if (!problem.empty()) itemTooltip(problem.c_str());
    }
    ImGui::EndCombo();
  }
  ImGui::EndDisabled();
  if (hasGrid)
    itemTooltip(("Grid " + core::toString(*info->grid) +
                 ". The Q, K, V rows are reordered before Stage 1 and the output put back, so the error is "
                 "against the same dense reference. hilbert: a generalized Hilbert curve over T x H x W, so "
                 "that a block holds neighbouring patches.")
                    .c_str());
  else
    itemTooltip(
        "Only entries with a token grid (image / video tokens; sparge annotate --grid) can be permuted.");
  ImGui::BeginDisabled(!info || info->permutation == core::Permutation::None);
  ImGui::Checkbox("head detail in the capture's token order", &ui.captureOrder);
  ImGui::EndDisabled();
  itemTooltip(
      "Head detail in the capture's token order instead of the permuted order the kernel walks. A permuted "
      "block "
      "does not map onto one block of the capture, so each cell shows the fraction of its token pairs that "
      "lie "
      "in computed blocks (or their mean value), computed token by token.");
}

}  // namespace sparge::gui
