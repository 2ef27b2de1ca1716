// Kernels: every kernel of the last profile (name, stage, grid, block, registers per thread, shared memory,
// launches, duration min / median / max, executed and dense-equivalent TFLOPS), sortable, and a timeline
// strip of one run with hover details; the device, the clock and its source as the timings view shows them.
#pragma once

#include <vector>

#include "view.h"

namespace sparge::gui {

class KernelView final : public View {
 public:
  void draw(Session& session, UiState& ui) override;

 private:
  void drawTable(const ProfileData& d);
  void drawTimeline(const ProfileData& d);
  std::vector<size_t> order_;
};

}  // namespace sparge::gui
