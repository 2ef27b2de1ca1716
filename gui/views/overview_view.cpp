#include "overview_view.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "heat_colors.h"
#include "views/capture_browser.h"
#include "widgets/colorbar.h"
#include "widgets/ui_util.h"

namespace sparge::gui {

namespace {
constexpr uint32_t kEmpty = packRgba(34, 37, 44);
constexpr uint32_t kFailed = packRgba(90, 30, 30);
constexpr uint32_t kYes = packRgba(72, 196, 150);
constexpr uint32_t kNo = packRgba(52, 56, 68);

// Errors are bad when high: they get the hot map; sparsity, speed-up and shares the cool one.
Colormap mapOf(OverviewMetric m) {
  return m == OverviewMetric::L1 || m == OverviewMetric::L1Sparse || m == OverviewMetric::L1Quant
             ? Colormap::Inferno
             : Colormap::Viridis;
}

uint32_t dim(uint32_t c) {
  uint32_t r = (c & 0xFF) / 2, g = ((c >> 8) & 0xFF) / 2, b = ((c >> 16) & 0xFF) / 2;
  return packRgba(uint8_t(r), uint8_t(g), uint8_t(b));
}
}  // namespace

bool OverviewView::tuned(const Session& s, size_t row, int64_t head) const {
  return s.tuning().row(s.overview().rows()[row].entry, head) != nullptr;
}

void OverviewView::rebuild(const Session& s) {
  const auto& o = s.overview();
  const auto& entries = s.capture().entries;
  const Budget& budget = s.tuning().budget();
  uint64_t tune = s.tuning().storedGeneration();
  if (o.generation() == builtGeneration_ && tune == builtTune_ && metric_ == builtMetric_ &&
      sort_ == builtSort_ && budget == builtBudget_ && o.rows().size() == builtRows_ &&
      s.checks().generation() == builtChecks_ && s.methodCompare().generation() == builtCompare_)
    return;
  builtChecks_ = s.checks().generation();
  builtGeneration_ = o.generation();
  builtTune_ = tune;
  builtCompare_ = s.methodCompare().generation();
  builtMetric_ = metric_;
  builtSort_ = sort_;
  builtBudget_ = budget;
  builtRows_ = o.rows().size();
  cols_ = static_cast<int>(std::max<int64_t>(1, o.maxHeads()));
  const size_t n = std::min(o.rows().size(), entries.size());
  std::vector<double> byEntry(n * cols_, NAN), means(n, NAN);
  for (size_t i = 0; i < n; ++i) {
    const OverviewRow& row = o.rows()[i];
    double sum = 0;
    for (size_t h = 0; h < row.heads.size() && h < size_t(cols_); ++h) {
      double v = metric_ == OverviewMetric::BestMethod
                     ? bestMethod(s, i, int64_t(h))
                     : cellValue(row.heads[h], metric_, entries[i], budget, tuned(s, i, int64_t(h)));
      byEntry[i * cols_ + h] = v;
      sum += std::isfinite(v) ? v : 0;
    }
    if (!row.heads.empty()) means[i] = sum / double(row.heads.size());
  }
  order_ = overviewOrder(entries, sort_, means);
  values_.assign(order_.size() * cols_, NAN);
  lo_ = metric_ == OverviewMetric::Speedup ? 1.0 : 0.0;
  hi_ = isCategorical(metric_) || metric_ == OverviewMetric::Stage1 || metric_ == OverviewMetric::Total ||
                metric_ == OverviewMetric::QuantShare
            ? 1.0
            : lo_;
  for (size_t r = 0; r < order_.size() && order_[r] < n; ++r) {
    for (int h = 0; h < cols_; ++h) values_[r * cols_ + h] = byEntry[order_[r] * cols_ + h];
  }
  if (hi_ == lo_) {  // open-ended metrics: up to the largest value seen
    for (double v : values_) {
      if (std::isfinite(v)) hi_ = std::max(hi_, v);
    }
    if (hi_ <= lo_) hi_ = lo_ + 1e-6;
  }
  rgba_.assign(values_.size(), kEmpty);
  for (size_t r = 0; r < order_.size(); ++r) {
    const OverviewRow& row = o.rows()[order_[r]];
    for (int h = 0; h < cols_; ++h) {
      double v = values_[r * cols_ + h];
      uint32_t c = !row.error.empty()  ? kFailed
                   : !std::isfinite(v) ? kEmpty
                   : metric_ == OverviewMetric::BestMethod
                       ? (v < 0 ? kNo : methodColor(core::kAllMethods[int(v)]))
                   : isCategorical(metric_) ? (v > 0.5 ? kYes : kNo)
                                            : colormap(mapOf(metric_), float((v - lo_) / (hi_ - lo_)));
      rgba_[r * cols_ + h] = row.stale && std::isfinite(v) ? dim(c) : c;
    }
  }
  if (!order_.empty())
    texture_.update(++textureVersion_, rgba_.data(), cols_, static_cast<int>(order_.size()));
  buildMarks(s);
}

void OverviewView::buildMarks(const Session& s) {
  const auto& entries = s.capture().entries;
  const auto& rows = s.overview().rows();
  marks_.assign(order_.size() * cols_, 0);
  for (size_t r = 0; r < order_.size(); ++r) {
    const size_t i = order_[r];
    if (i >= entries.size() || i >= rows.size()) continue;
    const core::RunConfig& c = rows[i].config;
    for (int h = 0; h < cols_ && h < entries[i].headsQ; ++h) {
      const HeadMarks m = s.checks().marks(entries[i].name, entries[i].layer, h);
      const bool exactRun = c.numerics != core::Numerics::None && c.numericsFor(h) == core::Numerics::None;
      marks_[r * cols_ + h] = uint8_t((m.exact || exactRun ? 1 : 0) | (m.bad() ? 2 : 0));
    }
  }
}

// The marks of the visible rows, where a cell is large enough to show them.
void OverviewView::drawMarks(ImDrawList* dl, ImVec2 p0, float cellW, float cellH, float top,
                             float bottom) const {
  if (cellW < 4 || cellH < 4) return;
  for (size_t r = 0; r < order_.size(); ++r) {
    const float y = p0.y + r * cellH;
    if (y + cellH < top || y > bottom) continue;
    for (int h = 0; h < cols_; ++h) {
      const uint8_t m = marks_[r * cols_ + h];
      if (!m) continue;
      const ImVec2 a(p0.x + h * cellW, y), b(p0.x + (h + 1) * cellW, y + cellH);
      drawHeadMarks(dl, a, b, m & 1, m & 2);
      if (m & 2) dl->AddRect(a, b, colors::kBad);
    }
  }
}

void OverviewView::drawToolbar(Session& s) {
  const auto& o = s.overview();
  char right[96];
  std::snprintf(right, sizeof right, "%zu entries x %lld heads", o.rows().size(), (long long)o.maxHeads());
  panelHeader("Model overview", right);
  int m = static_cast<int>(metric_);
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 11);
  if (ImGui::BeginCombo("metric", toString(metric_))) {
    for (int k = 0; k < static_cast<int>(OverviewMetric::Count); ++k) {
      if (ImGui::Selectable(toString(OverviewMetric(k)), k == m)) metric_ = OverviewMetric(k);
      itemTooltip(describe(OverviewMetric(k)));
    }
    ImGui::EndCombo();
  }
  itemTooltip(describe(metric_));
  ImGui::SameLine();
  const char* sorts[] = {"capture order", "layer", "step", "module kind", "mask", "metric"};
  int so = static_cast<int>(sort_);
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 8);
  if (ImGui::Combo("rows", &so, sorts, 6)) sort_ = OverviewSort(so);
  itemTooltip(
      "Row order: grouped by layer, step, module kind or mask, or by the metric's mean over heads (largest "
      "first).");
  if (o.filling()) {
    ImGui::SameLine();
    char overlay[48];
    std::snprintf(overlay, sizeof overlay, "%zu / %zu entries", o.doneCount(), o.rows().size());
    float frac = o.rows().empty() ? 0.f : float(o.doneCount()) / float(o.rows().size());
    ImGui::ProgressBar(frac, ImVec2(ImGui::GetFontSize() * 10, 0), overlay);
  }
  if (metric_ == OverviewMetric::BestMethod) {
    drawMethodLegend(s);
  } else if (isCategorical(metric_)) {
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kYes), "\xe2\x96\xa0 yes");
    ImGui::SameLine();
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kNo), "\xe2\x96\xa0 no");
  } else {
    drawColorbar(mapOf(metric_), float(lo_), float(hi_),
                 std::min(ImGui::GetContentRegionAvail().x, ImGui::GetFontSize() * 22),
                 metric_ == OverviewMetric::Speedup ? "x" : nullptr, false);
  }
}

void OverviewView::cellTooltip(const Session& s, size_t r, int64_t head) const {
  size_t i = order_[r];
  const OverviewRow& row = s.overview().rows()[i];
  const core::EntryInfo& e = s.capture().entries[i];
  ImGui::BeginTooltip();
  ImGui::Text("%s, head %lld", row.entry.c_str(), (long long)head);
  ImGui::TextDisabled("%s", maskText(e).c_str());
  std::string id = identityText(e);
  if (!id.empty()) ImGui::TextDisabled("%s", id.substr(0, id.size() - 1).c_str());
  ImGui::Separator();
  if (!row.error.empty()) {
    ImGui::TextColored(ImVec4(1, 0.5f, 0.5f, 1), "could not run: %s", row.error.c_str());
  } else if (head >= static_cast<int64_t>(row.heads.size())) {
    ImGui::TextDisabled(head >= e.headsQ ? "this entry has %lld heads" : "not computed yet",
                        (long long)e.headsQ);
  } else {
    const HeadFigures& f = row.heads[head];
    ImGui::Text("stage-1 %.1f %%   total %.1f %%", 100 * f.sparsity.stage1(), 100 * f.sparsity.total());
    ImGui::Text("L1 %.5f deployed (%s, %s)", f.error.l1(), core::toString(row.config.numerics),
                row.config.geometry.label().c_str());
    ImGui::Text("   %s sparsity alone, %s quantization alone", l1Text(f.errorSparse, 5).c_str(),
                l1Text(f.errorQuant, 5).c_str());
    ImGui::Text("cos %.6f   estimated speed-up %.2fx", f.error.cosSim(),
                estimatedSpeedup(f.sparsity, e.headDim, e.headDimV));
    const Budget& b = s.tuning().budget();
    if (overBudget(f.sparsity, f.error, b)) ImGui::TextColored(ImVec4(0.9f, 0.35f, 0.35f, 1), "over budget");
    if (tuned(s, i, head)) ImGui::TextColored(ImVec4(0.45f, 0.85f, 0.6f, 1), "tuned");
    if (metric_ == OverviewMetric::BestMethod) methodTooltip(s, i, head);
    if (row.config.numericsFor(head) != row.config.numerics)
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kExact), "runs in exact numerics here");
    const HeadMarks marks = s.checks().marks(e.name, e.layer, head);
    if (marks.any()) headMarkLines(marks.lines, marks.exact);
    if (row.stale) ImGui::TextDisabled("from earlier settings: refilling");
    if (f.nonFinite) ImGui::TextColored(ImVec4(1, 0.5f, 0.5f, 1), "NaN/Inf in this head's data");
  }
  ImGui::TextDisabled("click: open this entry and head");
  ImGui::EndTooltip();
}

void OverviewView::drawMatrix(Session& s) {
  const float lineH = ImGui::GetTextLineHeight();
  const auto& entries = s.capture().entries;
  float labelW = ImGui::GetFontSize() * 7;
  ImVec2 avail = ImGui::GetContentRegionAvail();
  float cellW = std::max(2.0f, std::floor((avail.x - labelW - 8) / float(cols_)));
  float cellH = std::clamp(std::floor((avail.y - lineH) / float(order_.size())), 2.0f, lineH * 2.5f);
  // Head numbers above the columns when they fit.
  char num[16];
  std::snprintf(num, sizeof num, "%d", cols_ - 1);
  bool headNumbers = cellW >= ImGui::CalcTextSize(num).x + 2;
  ImVec2 head = ImGui::GetCursorScreenPos();
  if (headNumbers) {
    for (int h = 0; h < cols_; ++h) {
      std::snprintf(num, sizeof num, "%d", h);
      float x = head.x + labelW + (h + 0.5f) * cellW - ImGui::CalcTextSize(num).x * 0.5f;
      ImGui::GetWindowDrawList()->AddText(ImVec2(x, head.y), IM_COL32(150, 156, 168, 255), num);
    }
    ImGui::Dummy(ImVec2(0, lineH));
  }
  ImGui::BeginChild("matrix", ImVec2(0, 0), false, ImGuiWindowFlags_HorizontalScrollbar);
  ImVec2 origin = ImGui::GetCursorScreenPos();
  ImVec2 p0(origin.x + labelW, origin.y), size(cellW * cols_, cellH * order_.size());
  ImGui::SetCursorScreenPos(p0);
  ImGui::InvisibleButton("cells", size);
  bool hovered = ImGui::IsItemHovered(), clicked = ImGui::IsItemClicked();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  if (texture_.valid()) dl->AddImage(texture_.id(), p0, ImVec2(p0.x + size.x, p0.y + size.y));
  // Labels and group lines for the visible rows only: a thousand entries stay cheap.
  float top = ImGui::GetWindowPos().y, bottom = top + ImGui::GetWindowHeight();
  drawMarks(dl, p0, cellW, cellH, top, bottom);
  std::string lastGroup;
  for (size_t r = 0; r < order_.size(); ++r) {
    float y = origin.y + r * cellH;
    std::string grp = groupOf(entries[order_[r]], sort_);
    if (grp != lastGroup && r > 0)
      dl->AddLine(ImVec2(origin.x, y), ImVec2(p0.x + size.x, y), IM_COL32(230, 230, 230, 160));
    lastGroup = grp;
    if (cellH < lineH || y + cellH < top || y > bottom) continue;
    const char* name = entries[order_[r]].name.c_str();
    dl->PushClipRect(ImVec2(origin.x, y), ImVec2(p0.x - 4, y + cellH), true);
    dl->AddText(ImVec2(origin.x, y + (cellH - lineH) * 0.5f), IM_COL32(200, 204, 212, 255), name);
    dl->PopClipRect();
  }
  if (hovered) {
    ImVec2 m = ImGui::GetIO().MousePos;
    size_t r = std::min(order_.size() - 1, size_t((m.y - p0.y) / cellH));
    int64_t head = std::min<int64_t>(cols_ - 1, int64_t((m.x - p0.x) / cellW));
    dl->AddRect(ImVec2(p0.x + head * cellW, p0.y + r * cellH),
                ImVec2(p0.x + (head + 1) * cellW, p0.y + (r + 1) * cellH), IM_COL32(255, 255, 255, 255));
    cellTooltip(s, r, head);
    if (clicked && head < entries[order_[r]].headsQ) {
      s.selectEntry(entries[order_[r]].name);
      s.selectHead({s.capture().selected.batch, head});
    }
  }
  ImGui::EndChild();
}

void OverviewView::draw(Session& s, UiState&) {
  // A comparison is shown as it was asked for: coloured by the best method.
  if (s.methodCompare().running() && s.methodCompare().started() != seenCompare_) {
    seenCompare_ = s.methodCompare().started();
    metric_ = OverviewMetric::BestMethod;
  }
  drawToolbar(s);
  if (s.capture().entries.empty()) {
    ImGui::TextDisabled("Open a capture: every entry is run with the current settings, head by head.");
    return;
  }
  rebuild(s);
  if (order_.empty()) return;
  drawMatrix(s);
}

}  // namespace sparge::gui
