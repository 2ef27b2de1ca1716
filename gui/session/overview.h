// The model overview's data: every entry of the capture run with the session's settings (and each entry's
// own tuned or loaded values), one cell per query head, filled in the background entry by entry.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "metrics.h"
#include "run_controller.h"
#include "session_core.h"
#include "tune_controller.h"

namespace sparge::gui {

// One query head of one entry.
using OverviewCell = HeadFigures;

struct OverviewRow {
  std::string entry;
  bool done = false;                // filled with the current settings
  bool stale = false;               // holds values of earlier settings (shown until replaced)
  std::vector<OverviewCell> heads;  // [headsQ], empty until first filled
  core::RunConfig config;           // the settings of the cells (or of the fill under way)
  std::string error;                // why the entry could not be run (its cells stay empty)
};

enum class OverviewMetric {
  Stage1,
  Total,
  L1,
  L1Sparse,
  L1Quant,
  QuantShare,
  Speedup,
  Tuned,
  OverBudget,
  BestMethod,  // from MethodCompareController, not from the cells
  Count
};
const char* toString(OverviewMetric m);
const char* describe(OverviewMetric m);  // one sentence for tooltips
bool isCategorical(OverviewMetric m);    // tuned / over budget: yes or no

// The cell's value for `metric` (tuned: 1 when the head has a tuner result, else 0).
double cellValue(const OverviewCell& cell, OverviewMetric metric, const core::EntryInfo& info,
                 const Budget& budget, bool tuned);

enum class OverviewSort { Capture, Layer, Step, Kind, Mask, Metric };
const char* toString(OverviewSort s);
// The group an entry belongs to under `sort` ("layer 3", "step 12", "encoder self", "window [512, 0]");
// empty for none.
std::string groupOf(const core::EntryInfo& info, OverviewSort sort);
// Row order: by the sort key (then capture order); Metric sorts by `metricMeans` descending.
std::vector<size_t> overviewOrder(const std::vector<core::EntryInfo>& entries, OverviewSort sort,
                                  const std::vector<double>& metricMeans = {});

class OverviewController {
 public:
  OverviewController(SessionCore& core, RunController& runs, TuneController& tuning)
      : core_(core), runs_(runs), tuning_(tuning) {}

  // While active (the view is open) the overview keeps itself filled: any change of settings or of an
  // entry's tuned values refills it in the background.
  void setActive(bool on);
  bool active() const { return active_; }
  void refresh();  // refill every entry now

  const std::vector<OverviewRow>& rows() const { return rows_; }  // capture order
  uint64_t generation() const { return generation_; }             // changes with any row
  size_t doneCount() const { return done_; }
  bool filling() const { return filling_; }
  int64_t maxHeads() const;

  // ---- for the session ----
  void update();  // every poll: starts a refill when the settings it was filled with changed
  void reset(ResetScope scope);
  void showRows(std::vector<OverviewRow> rows);  // benchmarks: rows as if filled with the current settings

 private:
  // The settings an entry runs with in the overview: the session's, with the entry's own tuned or loaded
  // values (the selected entry: its overrides as they are now).
  core::RunConfig configFor(const core::EntryInfo& info) const;
  void startFill();

  SessionCore& core_;
  RunController& runs_;
  TuneController& tuning_;
  bool active_ = false;
  bool filling_ = false;
  uint64_t seenConfig_ = ~uint64_t{0}, seenStored_ = ~uint64_t{0};  // generations the rows were checked at
  uint64_t ticket_ = 0;  // of the fill under way; a new fill supersedes it
  uint64_t generation_ = 0;
  size_t done_ = 0;
  std::vector<OverviewRow> rows_;
};

}  // namespace sparge::gui
