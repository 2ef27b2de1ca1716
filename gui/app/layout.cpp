#include "layout.h"

#include <imgui.h>

#include <algorithm>

namespace sparge::gui {

bool splitter(const char* id, bool vertical, float thickness, float length, float total, float* ratio, float lo, float hi,
              bool invert) {
  ImVec2 size = vertical ? ImVec2(thickness, length) : ImVec2(length, thickness);
  ImVec2 p = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton(id, size);
  bool active = ImGui::IsItemActive();
  bool hovered = ImGui::IsItemHovered();
  if (hovered || active) ImGui::SetMouseCursor(vertical ? ImGuiMouseCursor_ResizeEW : ImGuiMouseCursor_ResizeNS);
  if (active && total > 0) {
    float d = vertical ? ImGui::GetIO().MouseDelta.x : ImGui::GetIO().MouseDelta.y;
    *ratio = std::clamp(*ratio + (invert ? -d : d) / total, lo, hi);
  }
  ImU32 col = active ? IM_COL32(86, 156, 214, 255) : hovered ? IM_COL32(86, 156, 214, 140) : IM_COL32(30, 33, 40, 255);
  ImGui::GetWindowDrawList()->AddRectFilled(p, ImVec2(p.x + size.x, p.y + size.y), col);
  return active;
}

}  // namespace sparge::gui
