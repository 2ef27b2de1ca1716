// Small ImGui helpers shared by the views: panel headers, help markers, number formatting.
#pragma once

#include <imgui.h>

#include <cstdint>
#include <string>

namespace sparge::gui {

// A title strip across the top of a panel, with optional right-aligned dim text.
void panelHeader(const char* title, const char* right = nullptr);
// "(?)" that shows `text` on hover.
void helpMarker(const char* text);
// Tooltip for the previous item.
void itemTooltip(const char* text);
// Between the items of a line of figures: a dim "|" and the next item on the same line when an item of
// `width` still fits there, else nothing (the next item starts a new line instead of being clipped).
void separatorIfFits(float width);
std::string formatBytes(int64_t bytes);
std::string formatTokens(int64_t n);  // 32768 -> "32K"

// Theme colours used across views.
namespace colors {
inline constexpr ImU32 kAccent = IM_COL32(86, 156, 214, 255);
inline constexpr ImU32 kOverBudget = IM_COL32(150, 40, 40, 120);
inline constexpr ImU32 kWarn = IM_COL32(236, 170, 60, 255);
inline constexpr ImU32 kGood = IM_COL32(72, 196, 150, 255);
inline constexpr ImU32 kBad = IM_COL32(232, 84, 84, 255);
}  // namespace colors

}  // namespace sparge::gui
