// Summary table: per head θ, τ / top-k, λ, sparsity (stage 1, PV skip, total), L1, cos; sortable.
#pragma once

#include "view.h"

namespace sparge::gui {

class SummaryTable final : public View {
 public:
  const char* title() const override { return "Summary"; }
  void draw(Session& session, UiState& ui) override;

 private:
  std::vector<size_t> order_;
};

}  // namespace sparge::gui
