// What is left of a rectangle once others cover parts of it: the main window paints its background only
// there, around and between the panels, instead of under them too.
#pragma once

#include <vector>

namespace sparge::gui {

// An axis-aligned box [x0, x1) x [y0, y1) in screen pixels.
struct Box {
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  bool empty() const { return !(x1 > x0 && y1 > y0); }
  bool operator==(const Box&) const = default;
};

Box intersect(const Box& a, const Box& b);

// `area` minus the union of `covered`, as disjoint boxes: the area cut into bands at every covered box's
// top and bottom, each band split around the covered spans; equal neighbouring bands are merged.
std::vector<Box> uncoveredParts(const Box& area, const std::vector<Box>& covered);

}  // namespace sparge::gui
