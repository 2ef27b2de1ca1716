// A small x-y plot for the curves view (ImPlot is not packaged in Debian): axes with ticks, a second y
// axis on the right, lines and markers as draw-list line lists, and the data point nearest the mouse.
#pragma once

#include <imgui.h>

#include <vector>

namespace sparge::gui {

struct PlotRange {
  double lo = 0, hi = 1;
};

// One plot's frame: where it sits and how data maps to screen. Build with beginPlot().
struct PlotFrame {
  ImVec2 p0, p1;                               // the plotting area (inside the axes)
  PlotRange x, y, right;                       // right: the second y axis (right.hi <= right.lo: none)
  bool hovered = false;                        // the mouse is inside the plotting area
  ImVec2 at(double vx, double vy) const;       // data (x, y) -> screen
  ImVec2 atRight(double vx, double vr) const;  // data (x, right-axis y) -> screen
};

struct PlotLabels {
  const char* x = nullptr;
  const char* y = nullptr;
  const char* right = nullptr;
  bool percentX = false;  // x ticks as percentages of [0, 1]
};

// Reserves `size` at the cursor, draws the background, grid, ticks and labels (`compact`: ticks only on
// the edges, for small multiples) and clips further drawing to the plotting area until endPlot().
PlotFrame beginPlot(const char* id, ImVec2 size, PlotRange x, PlotRange y, PlotRange right,
                    const PlotLabels& labels, bool compact = false);
void endPlot();

// Points are data coordinates; drawn as one polyline (a line list), `dashed` as alternate segments.
void plotLine(const PlotFrame& f, const std::vector<ImVec2>& points, ImU32 color, float thickness = 1.5f,
              bool dashed = false, bool rightAxis = false);
void plotMarkers(const PlotFrame& f, const std::vector<ImVec2>& points, ImU32 color, float radius = 2.5f);
void plotHLine(const PlotFrame& f, double y, ImU32 color, const char* label = nullptr);
enum class MarkerShape { Ring, Diamond, Cross };
void plotMarker(const PlotFrame& f, double x, double y, ImU32 color, MarkerShape shape, float radius = 6);

// Index of the point nearest the mouse within `maxPixels`, or -1.
int nearestPoint(const PlotFrame& f, const std::vector<ImVec2>& points, float maxPixels = 8);

// Up to `count` round tick values covering [lo, hi].
std::vector<double> niceTicks(double lo, double hi, int count);

}  // namespace sparge::gui
