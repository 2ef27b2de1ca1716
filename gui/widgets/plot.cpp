#include "plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace sparge::gui {

namespace {
constexpr ImU32 kAxis = IM_COL32(90, 96, 110, 255);
constexpr ImU32 kGrid = IM_COL32(48, 52, 62, 255);
constexpr ImU32 kTickText = IM_COL32(150, 156, 168, 255);

void tickLabel(char* buf, size_t n, double v, bool percent) {
  if (percent) {
    std::snprintf(buf, n, "%.0f%%", 100 * v);
  } else {
    std::snprintf(buf, n, "%.3g", v);
  }
}

void drawAxes(ImDrawList* dl, const PlotFrame& f, const PlotLabels& labels, bool compact) {
  dl->AddRectFilled(f.p0, f.p1, IM_COL32(24, 26, 32, 255));
  char buf[32];
  float th = ImGui::GetTextLineHeight();
  for (double t : niceTicks(f.x.lo, f.x.hi, compact ? 3 : 6)) {
    float sx = f.at(t, f.y.lo).x;
    dl->AddLine(ImVec2(sx, f.p0.y), ImVec2(sx, f.p1.y), kGrid);
    tickLabel(buf, sizeof buf, t, labels.percentX);
    float w = ImGui::CalcTextSize(buf).x;
    dl->AddText(ImVec2(sx - w * 0.5f, f.p1.y + 2), kTickText, buf);
  }
  for (double t : niceTicks(f.y.lo, f.y.hi, compact ? 3 : 5)) {
    float sy = f.at(f.x.lo, t).y;
    dl->AddLine(ImVec2(f.p0.x, sy), ImVec2(f.p1.x, sy), kGrid);
    tickLabel(buf, sizeof buf, t, false);
    float w = ImGui::CalcTextSize(buf).x;
    dl->AddText(ImVec2(f.p0.x - w - 4, sy - th * 0.5f), kTickText, buf);
  }
  if (f.right.hi > f.right.lo && !compact) {
    for (double t : niceTicks(f.right.lo, f.right.hi, 5)) {
      float sy = f.atRight(f.x.lo, t).y;
      std::snprintf(buf, sizeof buf, "%.3gx", t);
      dl->AddText(ImVec2(f.p1.x + 4, sy - th * 0.5f), kTickText, buf);
    }
  }
  dl->AddRect(f.p0, f.p1, kAxis);
  if (compact) return;
  if (labels.x) {
    float w = ImGui::CalcTextSize(labels.x).x;
    dl->AddText(ImVec2((f.p0.x + f.p1.x - w) * 0.5f, f.p1.y + th + 4), kTickText, labels.x);
  }
  if (labels.y) dl->AddText(ImVec2(f.p0.x + 4, f.p0.y + 2), kTickText, labels.y);
  if (labels.right && f.right.hi > f.right.lo) {
    float w = ImGui::CalcTextSize(labels.right).x;
    dl->AddText(ImVec2(f.p1.x - w - 4, f.p0.y + 2), kTickText, labels.right);
  }
}
}  // namespace

ImVec2 PlotFrame::at(double vx, double vy) const {
  double fx = x.hi > x.lo ? (vx - x.lo) / (x.hi - x.lo) : 0;
  double fy = y.hi > y.lo ? (vy - y.lo) / (y.hi - y.lo) : 0;
  return ImVec2(p0.x + float(fx) * (p1.x - p0.x), p1.y - float(fy) * (p1.y - p0.y));
}

ImVec2 PlotFrame::atRight(double vx, double vr) const {
  double fy = right.hi > right.lo ? (vr - right.lo) / (right.hi - right.lo) : 0;
  return ImVec2(at(vx, y.lo).x, p1.y - float(fy) * (p1.y - p0.y));
}

std::vector<double> niceTicks(double lo, double hi, int count) {
  std::vector<double> ticks;
  if (!(hi > lo) || count < 1 || !std::isfinite(lo) || !std::isfinite(hi)) return ticks;
  double raw = (hi - lo) / count;
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  }
  return ticks;
}

PlotFrame beginPlot(const char* id, ImVec2 size, PlotRange x, PlotRange y, PlotRange right,
                    const PlotLabels& labels, bool compact) {
  PlotFrame f;
  f.x = x;
  f.y = y;
  f.right = right;
  ImVec2 pos = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton(id, size);
  float th = ImGui::GetTextLineHeight();
  float left = ImGui::CalcTextSize("0.000").x + 6;
  float rightPad = compact || right.hi <= right.lo ? 4 : ImGui::CalcTextSize("00.0x").x + 8;
  float bottom = compact ? th + 2 : th * 2 + 6;
  f.p0 = ImVec2(pos.x + left, pos.y + 2);
  f.p1 = ImVec2(pos.x + size.x - rightPad, pos.y + size.y - bottom);
  if (f.p1.x < f.p0.x + 4) f.p1.x = f.p0.x + 4;
  if (f.p1.y < f.p0.y + 4) f.p1.y = f.p0.y + 4;
  ImVec2 m = ImGui::GetIO().MousePos;
  f.hovered = ImGui::IsItemHovered() && m.x >= f.p0.x && m.x <= f.p1.x && m.y >= f.p0.y && m.y <= f.p1.y;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  drawAxes(dl, f, labels, compact);
  dl->PushClipRect(f.p0, f.p1, true);
  return f;
}

void endPlot() {
  ImGui::GetWindowDrawList()->PopClipRect();
}

void plotLine(const PlotFrame& f, const std::vector<ImVec2>& points, ImU32 color, float thickness,
              bool dashed, bool rightAxis) {
  if (points.size() < 2) return;
  std::vector<ImVec2> screen;
  screen.reserve(points.size());
  for (const ImVec2& p : points) screen.push_back(rightAxis ? f.atRight(p.x, p.y) : f.at(p.x, p.y));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  if (!dashed) {
    dl->AddPolyline(screen.data(), static_cast<int>(screen.size()), color, 0, thickness);
    return;
  }
  for (size_t i = 0; i + 1 < screen.size(); i += 2) dl->AddLine(screen[i], screen[i + 1], color, thickness);
}

void plotMarkers(const PlotFrame& f, const std::vector<ImVec2>& points, ImU32 color, float radius) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  for (const ImVec2& p : points) dl->AddCircleFilled(f.at(p.x, p.y), radius, color, 8);
}

void plotHLine(const PlotFrame& f, double y, ImU32 color, const char* label) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  float sy = f.at(f.x.lo, y).y;
  for (float x = f.p0.x; x < f.p1.x; x += 8)
    dl->AddLine(ImVec2(x, sy), ImVec2(std::min(x + 4, f.p1.x), sy), color, 1.0f);
  if (label)
    dl->AddText(ImVec2(f.p1.x - ImGui::CalcTextSize(label).x - 4, sy - ImGui::GetTextLineHeight()), color,
                label);
}

void plotMarker(const PlotFrame& f, double x, double y, ImU32 color, MarkerShape shape, float r) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  ImVec2 c = f.at(x, y);
  switch (shape) {
    case MarkerShape::Ring:
      dl->AddCircle(c, r, color, 16, 2.0f);
      break;
    case MarkerShape::Diamond:
      dl->AddQuadFilled(ImVec2(c.x, c.y - r), ImVec2(c.x + r, c.y), ImVec2(c.x, c.y + r),
                        ImVec2(c.x - r, c.y), color);
      break;
    case MarkerShape::Cross:
      dl->AddLine(ImVec2(c.x - r, c.y - r), ImVec2(c.x + r, c.y + r), color, 2.0f);
      dl->AddLine(ImVec2(c.x - r, c.y + r), ImVec2(c.x + r, c.y - r), color, 2.0f);
      break;
  }
}

int nearestPoint(const PlotFrame& f, const std::vector<ImVec2>& points, float maxPixels) {
  if (!f.hovered) return -1;
  ImVec2 m = ImGui::GetIO().MousePos;
  int best = -1;
  float bestD = maxPixels * maxPixels;
  for (size_t i = 0; i < points.size(); ++i) {
    ImVec2 s = f.at(points[i].x, points[i].y);
    float d = (s.x - m.x) * (s.x - m.x) + (s.y - m.y) * (s.y - m.y);
    if (d <= bestD) {
      bestD = d;
      best = static_cast<int>(i);
    }
  }
  return best;
}

}  // namespace sparge::gui
