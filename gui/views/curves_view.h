// Error-sparsity curves: the selected head's L1 (deployed, and its sparsity and quantization parts) against
// total sparsity for every θ of a τ / top-k sweep, the estimated speed-up on a second axis, the budget, the
// current and tuned points and the Pareto front over θ; or every head as small multiples. A click on a
// point applies its parameters.
#pragma once

#include <memory>

#include "order_curves.h"
#include "view.h"
#include "widgets/plot.h"

namespace sparge::gui {

class CurvesView final : public View {
 public:
  void draw(Session& session, UiState& ui) override;

 private:
  void drawToolbar(Session& s);
  void sweepIfNeeded(Session& s);
  // One head's plot; `compact` for small multiples. Applies a clicked point.
  void drawHeadPlot(Session& s, UiState& ui, const CurveSet& set, const HeadCurves& hc, ImVec2 size,
                    bool compact);
  void drawLegend(const CurveSet& set);
  void drawSmallMultiples(Session& s, UiState& ui, const CurveSet& set);
  // Overlays (curves_orders.cpp): the selected head's front in each token order the entry allows, or
  // under each block predictor, on one plot.
  void drawOrderPlot(Session& s, ImVec2 size);
  OverlayKind overlayKind() const { return multiples_ == 3 ? OverlayKind::Methods : OverlayKind::Orders; }

  int multiples_ = 0;  // 0: the selected head, 1: every head as small multiples, 2: token orders, 3: methods
  std::shared_ptr<const OverlayCurveSet> shownOrderSweep_;
  int points_ = 16;
  int focusTheta_ = -1;
  std::shared_ptr<const CurveSet>
      shownSweep_;  // the sweep the mode was last set from  // the θ whose sparsity / quantization parts are
                    // drawn (-1: the head's own θ)
};

}  // namespace sparge::gui
