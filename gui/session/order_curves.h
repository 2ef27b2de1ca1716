// The curves view's overlays: the selected head's error-sparsity curves under several variants on one plot,
// either token orders (docs/permutation.md: SpargeAttn swept over θ and τ or top-k in each order the entry
// allows) or block predictors (docs/methods.md: SpargeAttn's θ × τ grid, and each other method's knob), with
// each variant's Pareto front of deployed L1 against sparsity.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "curves.h"

namespace sparge::gui {

enum class OverlayKind { Orders, Methods };

struct OverlaySeries {
  std::string label;  // "hilbert", "XAttention"
  core::Permutation order = core::Permutation::None;
  core::Method method = core::Method::SpargeAttn;
  std::vector<core::HeadParams> params;  // what each point runs
  std::vector<CurvePoint> points;        // one per params
  std::vector<size_t> pareto;            // the front, ascending sparsity
};

struct OverlayCurveSet {
  OverlayKind kind = OverlayKind::Orders;
  std::string entry;
  int64_t head = 0;
  core::RunConfig config;
  std::vector<OverlaySeries> series;  // orders: those that apply to the entry (rowmajor is the capture's)
  size_t done = 0, total = 0;
};

class OrderCurveController {
 public:
  OrderCurveController(SessionCore& core, RunController& runs) : core_(core), runs_(runs) {}

  // Sweeps the selected head in none, timemajor and hilbert order (the capture's entry, not the session's
  // order), or under each block predictor in the session's order, on the worker's second engine, so that
  // the interactive engine keeps its entry and caches. `points`: τ (or top-k) values per θ, and knob values
  // per method.
  void sweep(int points = 12, OverlayKind kind = OverlayKind::Orders);
  void cancel();
  std::shared_ptr<const OverlayCurveSet> data() const { return data_; }
  uint64_t generation() const { return generation_; }
  bool running() const { return running_; }
  void reset(ResetScope scope);

 private:
  std::shared_ptr<OverlayCurveSet> makeSet(int points, OverlayKind kind) const;

  SessionCore& core_;
  RunController& runs_;
  std::shared_ptr<OverlayCurveSet> data_;
  uint64_t generation_ = 0, ticket_ = 0;
  bool running_ = false;
};

}  // namespace sparge::gui
