// The overview's "best method": every entry of the capture compared across the block predictors
// (docs/methods.md) in the background, each method tuned per head against the session's budget as
// `sparge compare --methods` does; per head the winner and each method's sparsity reached.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "run_controller.h"
#include "session_core.h"
#include "tune_controller.h"

namespace sparge::gui {

struct MethodWinners {
  std::vector<int> winner;                    // per head: index into core::kAllMethods, -1: none sparse
  std::vector<std::vector<double>> sparsity;  // per head, per method: total sparsity reached
};

// A method's colour in the overview and the curves overlay.
uint32_t methodColor(core::Method m);

class MethodCompareController {
 public:
  MethodCompareController(SessionCore& core, RunController& runs, TuneController& tuning)
      : core_(core), runs_(runs), tuning_(tuning) {}

  void compareAll();  // every entry, with the session's settings and budget
  void cancel();
  bool running() const { return running_; }
  size_t done() const { return done_; }
  size_t total() const { return total_; }
  const MethodWinners* find(const std::string& entry) const;
  uint64_t generation() const { return generation_; }  // changes with any result
  uint64_t started() const { return ticket_; }         // changes with each comparison (or cancel)
  void reset(ResetScope scope);

 private:
  SessionCore& core_;
  RunController& runs_;
  TuneController& tuning_;
  std::map<std::string, MethodWinners> results_;
  uint64_t generation_ = 0, ticket_ = 0;
  size_t done_ = 0, total_ = 0;
  bool running_ = false;
};

}  // namespace sparge::gui
