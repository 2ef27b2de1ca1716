#include "app/uncovered.h"

#include <algorithm>
#include <utility>

namespace sparge::gui {

Box intersect(const Box& a, const Box& b) {
  return {std::max(a.x0, b.x0), std::max(a.y0, b.y0), std::min(a.x1, b.x1), std::min(a.y1, b.y1)};
}

namespace {
// The spans of [x0, x1) that no box covering the whole band [y0, y1) covers.
std::vector<std::pair<float, float>> freeSpans(float x0, float x1, float y0, float y1,
                                               const std::vector<Box>& covered) {
  std::vector<std::pair<float, float>> taken;
  for (const Box& c : covered) {
    if (c.y0 <= y0 && c.y1 >= y1) taken.emplace_back(std::max(c.x0, x0), std::min(c.x1, x1));
  }
  std::sort(taken.begin(), taken.end());
  std::vector<std::pair<float, float>> spans;
  float x = x0;
  for (const auto& [a, b] : taken) {
    if (a > x) spans.emplace_back(x, a);
    x = std::max(x, b);
  }
  if (x < x1) spans.emplace_back(x, x1);
  return spans;
}
}  // namespace

std::vector<Box> uncoveredParts(const Box& area, const std::vector<Box>& coveredIn) {
  if (area.empty()) return {};
  std::vector<Box> covered;
  std::vector<float> ys = {area.y0, area.y1};
  for (const Box& c : coveredIn) {
    const Box k = intersect(c, area);
    if (k.empty()) continue;
    covered.push_back(k);
    ys.push_back(k.y0);
    ys.push_back(k.y1);
  }
  std::sort(ys.begin(), ys.end());
  ys.erase(std::unique(ys.begin(), ys.end()), ys.end());
  std::vector<Box> out;
  size_t previousBand = 0;  // first box of the band above
  for (size_t i = 0; i + 1 < ys.size(); ++i) {
    const size_t band = out.size();
    for (const auto& [a, b] : freeSpans(area.x0, area.x1, ys[i], ys[i + 1], covered))
      out.push_back({a, ys[i], b, ys[i + 1]});
    // The same spans as the band above: grow those boxes down instead.
    const size_t n = out.size() - band;
    bool same = n > 0 && band - previousBand == n;
    for (size_t k = 0; same && k < n; ++k) {
      const Box &up = out[previousBand + k], &down = out[band + k];
      same = up.x0 == down.x0 && up.x1 == down.x1 && up.y1 == down.y0;
    }
    if (same) {
      for (size_t k = 0; k < n; ++k) out[previousBand + k].y1 = ys[i + 1];
      out.resize(band);
    } else {
      previousBand = band;
    }
  }
  return out;
}

}  // namespace sparge::gui
