// The overview's best-method colouring (docs/methods.md): each head coloured by the block predictor that
// reaches the most sparsity within the budget, from the session's method comparison.
#include <imgui.h>

#include <cmath>
#include <cstdio>

#include "overview_view.h"
#include "widgets/ui_util.h"

namespace sparge::gui {

double OverviewView::bestMethod(const Session& s, size_t row, int64_t head) const {
  const MethodWinners* w = s.methodCompare().find(s.overview().rows()[row].entry);
  if (!w || head < 0 || size_t(head) >= w->winner.size()) return NAN;
  return w->winner[size_t(head)];
}

void OverviewView::drawMethodLegend(Session& s) {
  MethodCompareController& mc = s.methodCompare();
  ImGui::BeginDisabled(mc.running() || s.capture().entries.empty());
  if (ImGui::SmallButton("Compare methods")) mc.compareAll();
  ImGui::EndDisabled();
  itemTooltip(
      "Tune every block predictor per head on every entry against the budget l1 / l2 (as sparge compare "
      "--methods; slow: minutes per entry on a CPU), then colour each head by the sparsest one.");
  if (mc.running()) {
    ImGui::SameLine();
    char overlay[48];
    std::snprintf(overlay, sizeof overlay, "%zu / %zu entries", mc.done(), mc.total());
    ImGui::ProgressBar(mc.total() ? float(mc.done()) / float(mc.total()) : 0.f,
                       ImVec2(ImGui::GetFontSize() * 9, 0), overlay);
    ImGui::SameLine();
    if (ImGui::SmallButton("stop")) mc.cancel();
  }
  for (core::Method m : core::kAllMethods) {
    ImGui::SameLine();
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(methodColor(m)), "\xe2\x96\xa0 %s",
                       core::methodLabel(m));
  }
  ImGui::SameLine();
  ImGui::TextDisabled("\xe2\x96\xa0 none sparse");
}

void OverviewView::methodTooltip(const Session& s, size_t row, int64_t head) const {
  const MethodWinners* w = s.methodCompare().find(s.overview().rows()[row].entry);
  if (!w || head < 0 || size_t(head) >= w->sparsity.size()) {
    ImGui::TextDisabled("methods not compared yet (Compare methods)");
    return;
  }
  ImGui::Separator();
  ImGui::TextUnformatted("tuned against the budget, total sparsity:");
  const std::vector<double>& sp = w->sparsity[size_t(head)];
  for (size_t m = 0; m < sp.size() && m < std::size(core::kAllMethods); ++m)
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(methodColor(core::kAllMethods[m])), "  %s%s %.1f %%",
                       core::methodLabel(core::kAllMethods[m]),
                       int(m) == w->winner[size_t(head)] ? " (best)" : "", 100 * sp[m]);
}

}  // namespace sparge::gui
