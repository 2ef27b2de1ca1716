#include "ui_util.h"

#include <algorithm>
#include <cstdio>

namespace sparge::gui {

void panelHeader(const char* title, const char* right) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  ImVec2 p = ImGui::GetCursorScreenPos();
  float w = ImGui::GetContentRegionAvail().x;
  float h = ImGui::GetTextLineHeight() + 4;
  dl->AddRectFilled(ImVec2(p.x - 4, p.y - 2), ImVec2(p.x + w + 4, p.y + h), IM_COL32(44, 52, 68, 255));
  ImGui::SetCursorScreenPos(ImVec2(p.x + 2, p.y + 1));
  ImGui::TextUnformatted(title);
  if (right) {
    float tw = ImGui::CalcTextSize(right).x;
    ImGui::SameLine();
    ImGui::SetCursorScreenPos(ImVec2(p.x + w - tw - 2, p.y + 1));
    ImGui::TextDisabled("%s", right);
  }
  ImGui::SetCursorScreenPos(ImVec2(p.x, p.y + h + 3));
}

void helpMarker(const char* text) {
  ImGui::SameLine();
  ImGui::TextDisabled("(?)");
  itemTooltip(text);
}

void separatorIfFits(float width) {
  const ImGuiStyle& style = ImGui::GetStyle();
  const float right = ImGui::GetWindowPos().x + ImGui::GetContentRegionMax().x;
  const float sep = ImGui::CalcTextSize("|").x + 2 * style.ItemSpacing.x;
  if (ImGui::GetItemRectMax().x + sep + width > right) return;
  ImGui::SameLine();
  ImGui::TextDisabled("|");
  ImGui::SameLine();
}

void itemTooltip(const char* text) {
  if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled)) {
    ImGui::BeginTooltip();
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 32);
    ImGui::TextUnformatted(text);
    ImGui::PopTextWrapPos();
    ImGui::EndTooltip();
  }
}

std::string formatBytes(int64_t b) {
  char buf[32];
  double v = static_cast<double>(b);
  if (v >= 1024.0 * 1024 * 1024) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", v / (1024.0 * 1024 * 1024));
  } else if (v >= 1024.0 * 1024) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", v / (1024.0 * 1024));
  } else if (v >= 1024.0) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", v / 1024.0);
  } else {
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  }
  return buf;
}

std::string formatTokens(int64_t n) {
  char buf[32];
  if (n >= 1024 && n % 1024 == 0) {
    std::snprintf(buf, sizeof buf, "%lldK", static_cast<long long>(n / 1024));
  } else {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(n));
  }
  return buf;
}

void drawHeadMarks(ImDrawList* dl, ImVec2 p0, ImVec2 p1, bool exact, bool bad) {
  const float side = std::min({(p1.x - p0.x) * 0.45f, (p1.y - p0.y) * 0.45f, ImGui::GetFontSize() * 0.7f});
  if (side < 2) return;
  if (exact) dl->AddTriangleFilled(p0, ImVec2(p0.x + side, p0.y), ImVec2(p0.x, p0.y + side), colors::kExact);
  if (bad)
    dl->AddTriangleFilled(ImVec2(p1.x, p0.y), ImVec2(p1.x, p0.y + side), ImVec2(p1.x - side, p0.y),
                          colors::kBad);
}

void headMarkLines(const std::vector<std::string>& lines, bool exactFirst) {
  for (size_t i = 0; i < lines.size(); ++i) {
    const ImU32 c = exactFirst && i == 0 ? colors::kExact : colors::kBad;
    ImGui::PushStyleColor(ImGuiCol_Text, c);
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 36);
    ImGui::TextUnformatted(lines[i].c_str());
    ImGui::PopTextWrapPos();
    ImGui::PopStyleColor();
  }
}

}  // namespace sparge::gui
