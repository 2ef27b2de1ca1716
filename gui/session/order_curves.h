// The curves view's comparison of token orders (docs/permutation.md): the selected head swept over θ and τ
// (or top-k) in each order its entry allows, with each order's Pareto front of deployed L1 against sparsity,
// so that the orders' error-sparsity curves can be overlaid on one plot.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "curves.h"

namespace sparge::gui {

struct OrderCurves {
  core::Permutation order = core::Permutation::None;
  std::vector<CurvePoint> points;  // [theta index * sels + sel index]
  std::vector<size_t> pareto;      // the front over θ, ascending sparsity
};

struct OrderCurveSet {
  std::string entry;
  int64_t head = 0;
  core::RunConfig config;
  SweepGrid grid;
  std::vector<OrderCurves> orders;  // the orders that apply to the entry (rowmajor is the capture's order)
  size_t done = 0, total = 0;
};

class OrderCurveController {
 public:
  OrderCurveController(SessionCore& core, RunController& runs) : core_(core), runs_(runs) {}

  // Sweeps the selected head in none, timemajor and hilbert order (the capture's entry, not the session's
  // order), on the worker's second engine, so that the interactive engine keeps its entry and caches.
  void sweep(int points = 12);
  void cancel();
  std::shared_ptr<const OrderCurveSet> data() const { return data_; }
  uint64_t generation() const { return generation_; }
  bool running() const { return running_; }
  void reset(ResetScope scope);

 private:
  SessionCore& core_;
  RunController& runs_;
  std::shared_ptr<OrderCurveSet> data_;
  uint64_t generation_ = 0, ticket_ = 0;
  bool running_ = false;
};

}  // namespace sparge::gui
