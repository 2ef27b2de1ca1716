#include "curves_view.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "widgets/ui_util.h"

namespace sparge::gui {

namespace {
constexpr ImU32 kFront = IM_COL32(245, 245, 245, 110);  // under the θ curves, which stay readable on it
constexpr ImU32 kSpeedup = IM_COL32(110, 180, 255, 230);
constexpr ImU32 kTuned = IM_COL32(250, 200, 60, 255);

// Bright, distinct colours on the dark background, one per θ.
ImU32 thetaColor(size_t t) {
  static const ImU32 palette[] = {IM_COL32(255, 127, 80, 230),  IM_COL32(102, 204, 102, 230),
                                  IM_COL32(204, 153, 255, 230), IM_COL32(255, 214, 102, 230),
                                  IM_COL32(102, 204, 230, 230), IM_COL32(255, 128, 191, 230),
                                  IM_COL32(180, 180, 120, 230), IM_COL32(150, 150, 255, 230)};
  return palette[t % (sizeof palette / sizeof palette[0])];
}

ImVec2 xy(const HeadFigures& f, double l1) {
  return ImVec2(float(f.sparsity.total()), float(l1));
}

// Done points of one θ as (sparsity, value) sorted by sparsity.
std::vector<ImVec2> series(const CurveSet& set, const HeadCurves& hc, size_t t, int part) {
  std::vector<ImVec2> out;
  size_t n = set.grid.sels.size();
  for (size_t k = t * n; k < (t + 1) * n && k < hc.points.size(); ++k) {
    const CurvePoint& p = hc.points[k];
    if (!p.done) continue;
    double v = part == 0   ? p.figures.error.l1()
               : part == 1 ? measuredL1(p.figures.errorSparse)
                           : measuredL1(p.figures.errorQuant);
    if (!std::isfinite(v)) continue;  // a part the engine did not measure is not drawn
    out.push_back(xy(p.figures, v));
  }
  std::sort(out.begin(), out.end(), [](ImVec2 a, ImVec2 b) { return a.x < b.x; });
  return out;
}

void pointTooltip(const CurveSet& set, const CurvePoint& p) {
  bool topk = set.grid.mode == core::SelectMode::TopK;
  ImGui::BeginTooltip();
  ImGui::Text("\xce\xb8 %.3f   %s %.4f   \xce\xbb %g", p.params.theta, topk ? "top-k" : "\xcf\x84",
              topk ? p.params.topk : p.params.tau, p.params.lambda);
  ImGui::Separator();
  const HeadFigures& f = p.figures;
  ImGui::Text("total sparsity %.1f %%  (stage 1 %.1f %%)", 100 * f.sparsity.total(),
              100 * f.sparsity.stage1());
  ImGui::Text("L1 %.5f deployed (%s)", f.error.l1(), core::toString(set.config.numerics));
  ImGui::Text("   %s sparsity alone, %s quantization alone", l1Text(f.errorSparse, 5).c_str(),
              l1Text(f.errorQuant, 5).c_str());
  ImGui::Text("estimated speed-up %.2fx (work ratio)",
              estimatedSpeedup(f.sparsity, set.info.headDim, set.info.headDimV));
  ImGui::TextDisabled("click: apply these parameters");
  ImGui::EndTooltip();
}

// The x range: the finished points' sparsities with a margin, so that curves bunched at high sparsity
// are not squeezed into a corner.
PlotRange sparsityRange(const HeadCurves& hc) {
  double lo = 1, hi = 0;
  for (const auto& p : hc.points) {
    if (!p.done) continue;
    lo = std::min(lo, p.figures.sparsity.total());
    hi = std::max(hi, p.figures.sparsity.total());
  }
  if (hi < lo) return PlotRange{0, 1};
  double pad = std::max(0.02, 0.05 * (hi - lo));
  return PlotRange{std::max(0.0, std::floor((lo - pad) * 20) / 20),
                   std::min(1.0, std::ceil((hi + pad) * 20) / 20)};
}

// The y range: the budget stays visible, far-off points are clipped at the top.
PlotRange errorRange(const HeadCurves& hc, const Budget& b) {
  double maxL = 0;
  for (const auto& p : hc.points) {
    if (p.done && std::isfinite(p.figures.error.l1())) maxL = std::max(maxL, p.figures.error.l1());
  }
  return PlotRange{0, std::max(1.25 * b.l2, std::min(maxL * 1.05, 3 * b.l2))};
}
}  // namespace

void CurvesView::drawToolbar(Session& s) {
  auto d = s.curves().data();
  char right[160] = "";
  if (d) {
    std::snprintf(right, sizeof right, "%s  %s  %s, %s  %zu/%zu points%s", d->entry.c_str(),
                  d->grid.mode == core::SelectMode::TopK ? "top-k sweep" : "\xcf\x84 sweep",
                  core::toString(d->config.numerics), d->config.geometry.label().c_str(), d->done, d->total,
                  s.curves().stale() ? "  (settings changed)" : "");
  }
  panelHeader("Error-sparsity curves", right);
  ImGui::RadioButton("selected head", &multiples_, 0);
  ImGui::SameLine();
  ImGui::RadioButton("all heads", &multiples_, 1);
  ImGui::SameLine();
  const core::EntryInfo* captured = s.capture().find(s.capture().entryName);
  ImGui::BeginDisabled(!captured || !captured->grid);
  ImGui::RadioButton("token orders", &multiples_, 2);
  ImGui::EndDisabled();
  itemTooltip(
      "The selected head's Pareto front in each token order its grid allows (none, timemajor, "
      "hilbert), overlaid; entries with a token grid only.");
  ImGui::SameLine();
  ImGui::RadioButton("methods", &multiples_, 3);
  itemTooltip(
      "The selected head under each block predictor, overlaid: SpargeAttn's front over theta and tau, and "
      "each other method's knob swept (docs/methods.md).");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 6);
  ImGui::SliderInt("##points", &points_, 6, 200, "%d per \xce\xb8");
  itemTooltip("Values of tau (or top-k) evaluated for each theta.");
  ImGui::SameLine();
  ImGui::BeginDisabled(!s.capture().info());
  if (ImGui::Button("Sweep")) {
    if (multiples_ >= 2)
      s.orderCurves().sweep(points_, overlayKind());
    else
      s.curves().sweep(multiples_ ? SweepScope::AllHeads : SweepScope::SelectedHead, points_);
  }
  ImGui::EndDisabled();
  itemTooltip(
      "Ctrl+W: the selected head; Ctrl+Shift+W: every head. Runs in the background, points appear as "
      "they finish.");
  if (s.curves().running() && d) {
    ImGui::SameLine();
    ImGui::ProgressBar(d->total ? float(d->done) / float(d->total) : 0.f,
                       ImVec2(ImGui::GetFontSize() * 8, 0));
    ImGui::SameLine();
    if (ImGui::SmallButton("stop")) s.curves().cancel();
  }
}

// Single-head mode keeps its sweep current on its own; all-heads sweeps start only on request.
void CurvesView::sweepIfNeeded(Session& s) {
  if (multiples_ >= 2) {
    auto o = s.orderCurves().data();
    if (!s.orderCurves().running() && s.capture().info() &&
        (!o || o->entry != s.capture().entryName || o->head != s.capture().selected.head ||
         o->kind != overlayKind()))
      s.orderCurves().sweep(points_, overlayKind());
    return;
  }
  if (multiples_ || s.curves().running() || !s.capture().info() || !s.runs().result()) return;
  auto d = s.curves().data();
  bool haveHead = d && std::any_of(d->heads.begin(), d->heads.end(),
                                   [&](const HeadCurves& h) { return h.head == s.capture().selected.head; });
  if (!d || !haveHead || s.curves().stale() || d->entry != s.capture().entryName)
    s.curves().sweep(SweepScope::SelectedHead, points_);
}

void CurvesView::drawLegend(const CurveSet& set) {
  for (size_t t = 0; t < set.grid.thetas.size(); ++t) {
    if (t) ImGui::SameLine();
    ImGui::PushStyleColor(ImGuiCol_Text, thetaColor(t));
    char label[32];
    std::snprintf(label, sizeof label, "\xce\xb8 %.2f", set.grid.thetas[t]);
    if (ImGui::Selectable(label, focusTheta_ == int(t), 0, ImGui::CalcTextSize(label))) focusTheta_ = int(t);
    ImGui::PopStyleColor();
  }
  ImGui::PushTextWrapPos(0);
  ImGui::TextDisabled(
      "wide white: Pareto front over \xce\xb8; ring: current; diamond: tuned; dashed: L1 of sparsity "
      "alone (\xce\xb8's colour), of quantization alone (red), estimated speed-up (blue, right axis)");
  ImGui::PopTextWrapPos();
}

void CurvesView::drawHeadPlot(Session& s, UiState& ui, const CurveSet& set, const HeadCurves& hc, ImVec2 size,
                              bool compact) {
  const Budget& budget = s.tuning().budget();
  std::vector<ImVec2> front;
  for (size_t i : hc.pareto) front.push_back(xy(hc.points[i].figures, hc.points[i].figures.error.l1()));
  std::vector<ImVec2> speed;
  double maxSpeed = 2;
  for (size_t i : hc.pareto) {
    double v = estimatedSpeedup(hc.points[i].figures.sparsity, set.info.headDim, set.info.headDimV);
    if (!std::isfinite(v)) continue;
    speed.emplace_back(float(hc.points[i].figures.sparsity.total()), float(v));
    maxSpeed = std::max(maxSpeed, std::min(v, 50.0));
  }
  char id[32];
  std::snprintf(id, sizeof id, "##plot%lld", (long long)hc.head);
  PlotLabels labels{"total sparsity", "L1", "estimated speed-up (blue)", true};
  PlotFrame f =
      beginPlot(id, size, sparsityRange(hc), errorRange(hc, budget), {1, maxSpeed}, labels, compact);
  plotHLine(f, budget.l1, IM_COL32(236, 170, 60, 200), compact ? nullptr : "l1");
  plotHLine(f, budget.l2, IM_COL32(232, 84, 84, 200), compact ? nullptr : "l2");
  const size_t nt = set.grid.thetas.size();
  int focus = focusTheta_;
  if (focus < 0 || focus >= int(nt)) {
    auto it = std::find(set.grid.thetas.begin(), set.grid.thetas.end(), s.runs().paramsFor(hc.head).theta);
    focus = it == set.grid.thetas.end() ? 0 : int(it - set.grid.thetas.begin());
  }
  plotLine(f, front, kFront, compact ? 3.0f : 6.0f);
  for (size_t t = 0; t < nt; ++t) {
    auto pts = series(set, hc, t, 0);
    plotLine(f, pts, thetaColor(t), compact ? 1.0f : 1.5f);
    if (!compact) plotMarkers(f, pts, thetaColor(t), 2.0f);
  }
  if (!compact) {
    plotLine(f, series(set, hc, size_t(focus), 1), thetaColor(size_t(focus)), 1.0f, true);
    plotLine(f, series(set, hc, size_t(focus), 2), IM_COL32(255, 90, 90, 230), 1.0f, true);
    plotLine(f, speed, kSpeedup, 1.0f, true, true);
  }
  if (auto r = s.runs().result(); r && r->info.name == set.entry) {
    HeadFigures cur = figuresOf(*r, hc.head);
    plotMarker(f, cur.sparsity.total(), cur.error.l1(), IM_COL32(255, 255, 255, 255), MarkerShape::Ring,
               compact ? 4 : 6);
  }
  if (const TuneRow* t = s.tuning().row(set.entry, hc.head)) {
    plotMarker(f, t->total, t->l1, kTuned, MarkerShape::Diamond, compact ? 4 : 6);
  }
  std::vector<ImVec2> all;
  std::vector<size_t> index;
  for (size_t k = 0; k < hc.points.size(); ++k) {
    if (!hc.points[k].done) continue;
    all.push_back(xy(hc.points[k].figures, hc.points[k].figures.error.l1()));
    index.push_back(k);
  }
  int hit = nearestPoint(f, all);
  if (hit >= 0) plotMarker(f, all[hit].x, all[hit].y, IM_COL32(255, 255, 255, 255), MarkerShape::Cross, 5);
  endPlot();
  if (hit < 0) return;
  const CurvePoint& p = hc.points[index[hit]];
  pointTooltip(set, p);
  if (!ImGui::IsItemClicked()) return;
  s.selectHead({s.capture().selected.batch, hc.head});
  try {
    s.runs().setParams(p.params, ui.applyTarget);
  } catch (const std::exception& e) {
    s.messages().pushError(e.what());
  }
}

void CurvesView::drawSmallMultiples(Session& s, UiState& ui, const CurveSet& set) {
  // As many columns as it takes for every head to fit the panel, down to a readable plot size; beyond that
  // the plots scroll.
  ImVec2 avail = ImGui::GetContentRegionAvail();
  const float gap = ImGui::GetStyle().ItemSpacing.x, title = ImGui::GetTextLineHeightWithSpacing();
  const float minW = ImGui::GetFontSize() * 9;
  const int n = static_cast<int>(set.heads.size());
  int cols = 1;
  float w = avail.x, h = 0;
  for (;; ++cols) {
    w = std::floor((avail.x - (cols - 1) * gap) / cols);
    h = std::floor(w * 0.72f);
    int rowsNeeded = (n + cols - 1) / cols;
    if (rowsNeeded * (h + title + ImGui::GetStyle().ItemSpacing.y) <= avail.y || cols >= n) break;
    float nextW = std::floor((avail.x - cols * gap) / (cols + 1));
    if (nextW < minW) break;
  }
  int rows = int((set.heads.size() + cols - 1) / cols);
  ImGui::BeginChild("multiples");
  ImGuiListClipper clipper;
  clipper.Begin(rows, h + ImGui::GetTextLineHeightWithSpacing() + ImGui::GetStyle().ItemSpacing.y);
  while (clipper.Step()) {
    for (int row = clipper.DisplayStart; row < clipper.DisplayEnd; ++row) {
      for (int c = 0; c < cols; ++c) {
        size_t k = size_t(row) * cols + c;
        if (k >= set.heads.size()) break;
        if (c) ImGui::SameLine();
        ImGui::BeginGroup();
        const HeadCurves& hc = set.heads[k];
        bool sel = hc.head == s.capture().selected.head;
        ImGui::TextColored(sel ? ImVec4(1, 1, 1, 1) : ImVec4(0.7f, 0.72f, 0.78f, 1), "h%lld",
                           (long long)hc.head);
        drawHeadPlot(s, ui, set, hc, ImVec2(w, h), true);
        ImGui::EndGroup();
      }
    }
  }
  clipper.End();
  ImGui::EndChild();
}

void CurvesView::draw(Session& s, UiState& ui) {
  // A new sweep is shown as it was asked for: every head as small multiples, one head alone.
  if (auto d = s.curves().data(); d && d != shownSweep_) {
    shownSweep_ = d;
    multiples_ = d->heads.size() > 1 ? 1 : 0;
  }
  if (auto o = s.orderCurves().data(); o && o != shownOrderSweep_) {
    shownOrderSweep_ = o;
    multiples_ = o->kind == OverlayKind::Methods ? 3 : 2;
  }
  drawToolbar(s);
  sweepIfNeeded(s);
  if (multiples_ >= 2) {
    drawOrderPlot(s, ImGui::GetContentRegionAvail());
    return;
  }
  auto d = s.curves().data();
  if (!d) {
    ImGui::TextDisabled(s.capture().info() ? "Sweeping..." : "Open a capture to sweep its curves.");
    return;
  }
  drawLegend(*d);
  if (multiples_) {
    drawSmallMultiples(s, ui, *d);
    return;
  }
  auto it = std::find_if(d->heads.begin(), d->heads.end(),
                         [&](const HeadCurves& h) { return h.head == s.capture().selected.head; });
  if (it == d->heads.end()) {
    ImGui::TextDisabled("No sweep of head %lld yet.", (long long)s.capture().selected.head);
    return;
  }
  drawHeadPlot(s, ui, *d, *it, ImGui::GetContentRegionAvail(), false);
}

}  // namespace sparge::gui
