// Small ImGui helpers shared by the views: panel headers, help markers, number formatting.
#pragma once

#include <imgui.h>

#include <cstdint>
#include <string>
#include <vector>

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

// Corner marks of a head's cell (head grid, overview) in the rectangle [p0, p1): top-left for a head that
// runs in exact numerics, top-right for one that broke its budget on held-out inputs or in the evaluation.
void drawHeadMarks(ImDrawList* dl, ImVec2 p0, ImVec2 p1, bool exact, bool bad);
// The marks' sentences in a tooltip (exact in the accent colour, the others in red).
void headMarkLines(const std::vector<std::string>& lines, bool exactFirst);

// Theme colours used across views.
namespace colors {
inline constexpr ImU32 kAccent = IM_COL32(86, 156, 214, 255);
inline constexpr ImU32 kOverBudget = IM_COL32(150, 40, 40, 120);
inline constexpr ImU32 kWarn = IM_COL32(236, 170, 60, 255);
inline constexpr ImU32 kGood = IM_COL32(72, 196, 150, 255);
inline constexpr ImU32 kBad = IM_COL32(232, 84, 84, 255);
inline constexpr ImU32 kExact = IM_COL32(110, 170, 255, 255);  // heads in exact numerics (exact fallback)
// The panels' background. The frame is cleared to it and child windows draw no background of their own
// (style ChildBg is transparent): in a software renderer every full-panel layer costs a blended pass over
// the screen. A child window over another colour (in a popup) pushes this colour as ChildBg.
inline const ImVec4 kPanelBg(0.11f, 0.115f, 0.135f, 1);
}  // namespace colors

}  // namespace sparge::gui
