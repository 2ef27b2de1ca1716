// The curves view's overlays: the selected head's error-sparsity front in each token order or under each
// block predictor, on one plot, with each variant's sparsity within the budget in the legend.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "curves_view.h"
#include "widgets/ui_util.h"

namespace sparge::gui {

namespace {

ImU32 seriesColor(const OverlayCurveSet& d, const OverlaySeries& s) {
  if (d.kind == OverlayKind::Methods) return methodColor(s.method);
  switch (s.order) {
    case core::Permutation::Hilbert:
      return IM_COL32(102, 204, 102, 240);
    case core::Permutation::TimeMajor:
      return IM_COL32(204, 153, 255, 240);
    default:
      return IM_COL32(255, 127, 80, 240);
  }
}

// The sparsest finished point of an order whose deployed L1 is below `l1` (-1 when none).
double sparsestWithin(const OverlaySeries& o, double l1) {
  double best = -1;
  for (const CurvePoint& p : o.points)
    if (p.done && p.figures.error.l1() < l1) best = std::max(best, p.figures.sparsity.total());
  return best;
}

std::vector<ImVec2> frontPoints(const OverlaySeries& o) {
  std::vector<ImVec2> out;
  for (size_t i : o.pareto)
    out.push_back(ImVec2(float(o.points[i].figures.sparsity.total()), float(o.points[i].figures.error.l1())));
  return out;
}

}  // namespace

void CurvesView::drawOrderPlot(Session& s, ImVec2 size) {
  auto d = s.orderCurves().data();
  const bool methods = d && d->kind == OverlayKind::Methods;
  if (!d) {
    ImGui::TextDisabled("Sweeping the selected head...");
    return;
  }
  const double l1 = s.tuning().budget().l1;
  ImGui::Text("Head %lld of %s, %s (%zu/%zu points%s). Sparsest within l1:", (long long)d->head,
              d->entry.c_str(),
              methods ? "each block predictor (SpargeAttn: front over \xce\xb8; others: their knob)"
                      : "each token order's front over \xce\xb8",
              d->done, d->total, s.orderCurves().running() ? ", sweeping" : "");
  bool first = true;
  for (const OverlaySeries& o : d->series) {
    const double best = sparsestWithin(o, l1);
    char text[64] = "-";
    if (best >= 0) std::snprintf(text, sizeof text, "%.1f %%", 100 * best);
    if (!first) ImGui::SameLine();
    first = false;
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(seriesColor(*d, o)), "  %s: %s", o.label.c_str(), text);
  }
  itemTooltip(methods
                  ? "The sparsest point of each method whose L1 is below the budget l1 (the method's other "
                    "parameters and lambda as in the Controls)."
                  : "The sparsest point of each order whose L1 is below the budget l1.");
  // Up to four budgets high: the fronts' ends at high sparsity leave the plot rather than flatten it.
  double yHi = 0;
  for (const OverlaySeries& o : d->series)
    for (size_t i : o.pareto) yHi = std::max(yHi, o.points[i].figures.error.l1());
  yHi = std::clamp(yHi, l1 * 1.5, l1 * 4);
  PlotLabels labels;
  labels.x = "total sparsity";
  labels.y = "L1 (deployed)";
  labels.percentX = true;
  size.y -= ImGui::GetTextLineHeightWithSpacing();
  const PlotFrame f = beginPlot("##overlay", size, PlotRange{0, 1}, PlotRange{0, std::min(yHi * 1.05, 1.0)},
                                PlotRange{0, 0}, labels);
  plotHLine(f, l1, IM_COL32(230, 80, 80, 200), "l1");
  for (const OverlaySeries& o : d->series) {
    const ImU32 color = seriesColor(*d, o);
    std::vector<ImVec2> all;
    for (const CurvePoint& p : o.points)
      if (p.done && std::isfinite(p.figures.error.l1()))
        all.push_back(ImVec2(float(p.figures.sparsity.total()), float(p.figures.error.l1())));
    plotMarkers(f, all, (color & 0x00FFFFFF) | 0x50000000, 2.0f);
    const std::vector<ImVec2> front = frontPoints(o);
    plotLine(f, front, color, 2.5f);
    plotMarkers(f, front, color, 3.0f);
  }
  endPlot();
}

}  // namespace sparge::gui
