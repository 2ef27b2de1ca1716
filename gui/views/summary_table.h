// Summary table: per head θ, τ / top-k, λ, sparsity (stage 1, PV skip, total), the deployed L1 and its
// sparsity and quantization parts, cos; sortable.
#pragma once

#include <vector>

#include "view.h"

namespace sparge::gui {

class SummaryTable final : public View {
 public:
  void draw(Session& session, UiState& ui) override;

 private:
  void sortRows(const core::EntryResult& r);
  void drawRow(Session& s, const core::HeadResult& h, size_t index, bool multiBatch);
  void drawChecks(const Session& s, const core::EntryResult& r) const;

  std::vector<size_t> order_;
};

}  // namespace sparge::gui
