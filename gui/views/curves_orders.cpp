// The curves view's token orders: the selected head's error-sparsity front in each order, overlaid on one
// plot, with each order's sparsity within the budget in the legend.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "curves_view.h"
#include "widgets/ui_util.h"

namespace sparge::gui {

namespace {

ImU32 orderColor(core::Permutation p) {
  switch (p) {
    case core::Permutation::Hilbert:
      return IM_COL32(102, 204, 102, 240);
    case core::Permutation::TimeMajor:
      return IM_COL32(204, 153, 255, 240);
    default:
      return IM_COL32(255, 127, 80, 240);
  }
}

// The sparsest finished point of an order whose deployed L1 is below `l1` (-1 when none).
double sparsestWithin(const OrderCurves& o, double l1) {
  double best = -1;
  for (const CurvePoint& p : o.points)
    if (p.done && p.figures.error.l1() < l1) best = std::max(best, p.figures.sparsity.total());
  return best;
}

std::vector<ImVec2> frontPoints(const OrderCurves& o) {
  std::vector<ImVec2> out;
  for (size_t i : o.pareto)
    out.push_back(ImVec2(float(o.points[i].figures.sparsity.total()), float(o.points[i].figures.error.l1())));
  return out;
}

}  // namespace

void CurvesView::drawOrderPlot(Session& s, ImVec2 size) {
  auto d = s.orderCurves().data();
  if (!d) {
    ImGui::TextDisabled("Sweeping the selected head in each token order...");
    return;
  }
  const double l1 = s.tuning().budget().l1;
  ImGui::Text(
      "Head %lld of %s, each token order's front over \xce\xb8 (%zu/%zu points%s). Sparsest within l1:",
      (long long)d->head, d->entry.c_str(), d->done, d->total, s.orderCurves().running() ? ", sweeping" : "");
  bool first = true;
  for (const OrderCurves& o : d->orders) {
    const double best = sparsestWithin(o, l1);
    char text[64] = "-";
    if (best >= 0) std::snprintf(text, sizeof text, "%.1f %%", 100 * best);
    if (!first) ImGui::SameLine();
    first = false;
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(orderColor(o.order)), "  %s: %s",
                       core::toString(o.order), text);
  }
  itemTooltip("The sparsest point of each order whose L1 is below the budget l1.");
  // Up to four budgets high: the fronts' ends at high sparsity leave the plot rather than flatten it.
  double yHi = 0;
  for (const OrderCurves& o : d->orders)
    for (size_t i : o.pareto) yHi = std::max(yHi, o.points[i].figures.error.l1());
  yHi = std::clamp(yHi, l1 * 1.5, l1 * 4);
  PlotLabels labels;
  labels.x = "total sparsity";
  labels.y = "L1 (deployed)";
  labels.percentX = true;
  size.y -= ImGui::GetTextLineHeightWithSpacing();
  const PlotFrame f = beginPlot("##orders", size, PlotRange{0, 1}, PlotRange{0, std::min(yHi * 1.05, 1.0)},
                                PlotRange{0, 0}, labels);
  plotHLine(f, l1, IM_COL32(230, 80, 80, 200), "l1");
  for (const OrderCurves& o : d->orders) {
    std::vector<ImVec2> all;
    for (const CurvePoint& p : o.points)
      if (p.done && std::isfinite(p.figures.error.l1()))
        all.push_back(ImVec2(float(p.figures.sparsity.total()), float(p.figures.error.l1())));
    plotMarkers(f, all, (orderColor(o.order) & 0x00FFFFFF) | 0x50000000, 2.0f);
    const std::vector<ImVec2> front = frontPoints(o);
    plotLine(f, front, orderColor(o.order), 2.5f);
    plotMarkers(f, front, orderColor(o.order), 3.0f);
  }
  endPlot();
}

}  // namespace sparge::gui
