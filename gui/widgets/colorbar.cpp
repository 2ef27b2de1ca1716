#include "colorbar.h"

#include <cmath>
#include <cstdio>

namespace sparge::gui {

void drawColorbar(Colormap map, float vmin, float vmax, float width, const char* unit, bool logScale) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  ImVec2 p = ImGui::GetCursorScreenPos();
  float h = ImGui::GetTextLineHeight() * 0.6f;
  const int steps = 64;
  for (int i = 0; i < steps; ++i) {
    float x0 = p.x + width * i / steps, x1 = p.x + width * (i + 1) / steps + 0.5f;
    dl->AddRectFilled(ImVec2(x0, p.y), ImVec2(x1, p.y + h), colormap(map, (i + 0.5f) / steps));
  }
  dl->AddRect(p, ImVec2(p.x + width, p.y + h), IM_COL32(90, 96, 110, 255));
  ImGui::Dummy(ImVec2(width, h));
  char a[32], m[32], b[32];
  if (logScale) {
    float mid = std::sqrt(std::max(vmin, 1e-30f) * std::max(vmax, 1e-30f));
    std::snprintf(a, sizeof a, "%.1e", vmin);
    std::snprintf(m, sizeof m, "%.1e (log)", mid);
    std::snprintf(b, sizeof b, "%.1e%s%s", vmax, unit ? " " : "", unit ? unit : "");
  } else {
    std::snprintf(a, sizeof a, "%.3g", vmin);
    std::snprintf(m, sizeof m, "%.3g", 0.5f * (vmin + vmax));
    std::snprintf(b, sizeof b, "%.3g%s%s", vmax, unit ? " " : "", unit ? unit : "");
  }
  float y = ImGui::GetCursorPosY();
  float x = ImGui::GetCursorPosX();
  ImGui::TextDisabled("%s", a);
  ImGui::SetCursorPos(ImVec2(x + (width - ImGui::CalcTextSize(m).x) * 0.5f, y));
  ImGui::TextDisabled("%s", m);
  ImGui::SetCursorPos(ImVec2(x + width - ImGui::CalcTextSize(b).x, y));
  ImGui::TextDisabled("%s", b);
}

void drawMaskLegend(const MaskCell* cells, int count) {
  float avail = ImGui::GetContentRegionAvail().x;
  float used = 0;
  float sw = ImGui::GetTextLineHeight() * 0.8f;
  for (int i = 0; i < count; ++i) {
    const char* label = maskCellLabel(cells[i]);
    float itemW = sw + ImGui::GetStyle().ItemInnerSpacing.x + ImGui::CalcTextSize(label).x +
                  ImGui::GetStyle().ItemSpacing.x * 2;
    if (i > 0 && used + itemW < avail) {
      ImGui::SameLine(0, ImGui::GetStyle().ItemSpacing.x * 2);
    } else if (i > 0) {
      used = 0;
    }
    ImVec2 p = ImGui::GetCursorScreenPos();
    float dy = (ImGui::GetTextLineHeight() - sw) * 0.5f;
    ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(p.x, p.y + dy), ImVec2(p.x + sw, p.y + dy + sw),
                                              maskCellColor(cells[i]));
    ImGui::Dummy(ImVec2(sw, ImGui::GetTextLineHeight()));
    ImGui::SameLine(0, ImGui::GetStyle().ItemInnerSpacing.x);
    ImGui::TextUnformatted(label);
    used += itemW;
  }
}

}  // namespace sparge::gui
