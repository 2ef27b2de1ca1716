#include "bar_chart.h"

#include <imgui.h>

#include <algorithm>
#include <cstdio>

namespace sparge::gui {

void drawRangeBars(const char* id, const std::vector<RangeBar>& bars, const char* unit) {
  if (bars.empty()) return;
  ImGui::PushID(id);
  double top = 0;
  float labelW = 0;
  for (const auto& b : bars) {
    top = std::max(top, b.max);
    labelW = std::max(labelW, ImGui::CalcTextSize(b.label.c_str()).x);
  }
  if (top <= 0) top = 1;
  float valueW = ImGui::CalcTextSize("00000.00 ms").x;
  float avail = ImGui::GetContentRegionAvail().x;
  float barW = std::max(40.0f, avail - labelW - valueW - ImGui::GetStyle().ItemSpacing.x * 3);
  float rowH = ImGui::GetTextLineHeight();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  for (size_t i = 0; i < bars.size(); ++i) {
    const RangeBar& b = bars[i];
    ImGui::TextUnformatted(b.label.c_str());
    ImGui::SameLine(labelW + ImGui::GetStyle().ItemSpacing.x + ImGui::GetCursorStartPos().x);
    ImVec2 p = ImGui::GetCursorScreenPos();
    ImGui::PushID(static_cast<int>(i));
    ImGui::InvisibleButton("bar", ImVec2(barW, rowH));
    ImGui::PopID();
    unsigned col = b.color ? b.color : IM_COL32(86, 156, 214, 255);
    float xm = static_cast<float>(b.median / top) * barW;
    float x0 = static_cast<float>(b.min / top) * barW;
    float x1 = static_cast<float>(b.max / top) * barW;
    dl->AddRectFilled(ImVec2(p.x, p.y + 2), ImVec2(p.x + barW, p.y + rowH - 2), IM_COL32(40, 44, 54, 255));
    dl->AddRectFilled(ImVec2(p.x, p.y + 2), ImVec2(p.x + std::max(1.0f, xm), p.y + rowH - 2), col);
    float cy = p.y + rowH * 0.5f;
    dl->AddLine(ImVec2(p.x + x0, cy), ImVec2(p.x + x1, cy), IM_COL32(230, 230, 230, 220), 1.5f);
    dl->AddLine(ImVec2(p.x + x0, cy - 4), ImVec2(p.x + x0, cy + 4), IM_COL32(230, 230, 230, 220), 1.5f);
    dl->AddLine(ImVec2(p.x + x1, cy - 4), ImVec2(p.x + x1, cy + 4), IM_COL32(230, 230, 230, 220), 1.5f);
    if (ImGui::IsItemHovered()) {
      ImGui::SetTooltip("%s\nmin %.3f %s\nmedian %.3f %s\nmax %.3f %s", b.label.c_str(), b.min, unit,
                        b.median, unit, b.max, unit);
    }
    ImGui::SameLine();
    ImGui::Text("%.2f %s", b.median, unit);
  }
  ImGui::PopID();
}

}  // namespace sparge::gui
