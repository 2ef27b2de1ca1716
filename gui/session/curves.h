// The error-sparsity curves' data: the selected entry swept over τ or top-k at several θ in the
// background, per head: sparsity against the deployed L1 and its sparsity and quantization parts, the
// estimated speed-up, and the Pareto front over θ.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "metrics.h"
#include "run_controller.h"
#include "session_core.h"

namespace sparge::gui {

// One evaluated point of one head (batch items summed).
struct CurvePoint {
  core::HeadParams params;  // exactly what ran
  HeadFigures figures;
  bool done = false;
};

struct HeadCurves {
  int64_t head = 0;
  std::vector<CurvePoint> points;  // [theta index * sels + sel index]
  std::vector<size_t> pareto;      // indices of the front over every θ, ascending sparsity
};

// What a sweep evaluates: for every θ, every τ (or top-k fraction); λ and the rest stay each head's own.
struct SweepGrid {
  core::SelectMode mode = core::SelectMode::Cdf;
  std::vector<double> thetas;
  std::vector<double> sels;  // τ (CDF) or top-k fractions, ascending
};
// θ: the filter off (−0.1), 0.2, 0.4, 0.6, 0.8 and `currentTheta`; `points` values of τ (dense near 1)
// or top-k (geometric from 0.02 to 1).
SweepGrid defaultGrid(core::SelectMode mode, double currentTheta, int points);
// `base` with θ and τ / top-k of grid point (t, s).
core::HeadParams pointParams(const core::HeadParams& base, const SweepGrid& grid, size_t t, size_t s);

// Points not dominated by another point (at least as sparse and at most as much L1, one of them strictly),
// in ascending sparsity. Only finished points count.
std::vector<size_t> paretoFront(const std::vector<CurvePoint>& points);

struct CurveSet {
  std::string entry;
  core::EntryInfo info;
  core::RunConfig config;  // the settings the sweep started from
  SweepGrid grid;
  std::vector<HeadCurves> heads;  // swept heads, ascending
  size_t done = 0, total = 0;     // grid points finished (each covers every swept head)
};

enum class SweepScope { SelectedHead, AllHeads };

class CurveController {
 public:
  CurveController(SessionCore& core, RunController& runs) : core_(core), runs_(runs) {}

  // Sweeps the selected entry (the selected head, or every head for small multiples) with `points`
  // values of τ / top-k per θ. A new sweep replaces a running one.
  void sweep(SweepScope scope, int points = 16);
  void cancel();
  // Null before the first sweep of this entry.
  std::shared_ptr<const CurveSet> data() const { return data_; }
  uint64_t generation() const { return generation_; }
  bool running() const { return running_; }
  // True when the settings or the entry changed since the sweep started.
  bool stale() const;

  void reset(ResetScope scope);

 private:
  SessionCore& core_;
  RunController& runs_;
  std::shared_ptr<CurveSet> data_;
  uint64_t generation_ = 0;
  uint64_t ticket_ = 0;
  bool running_ = false;
};

}  // namespace sparge::gui
