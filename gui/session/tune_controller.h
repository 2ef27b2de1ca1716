// Auto-tuning from the GUI: the error budget, follow-budget re-tunes, tune jobs for a head, an entry or
// the whole capture, and the tuned (or loaded) values each entry keeps.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "metrics.h"
#include "run_controller.h"
#include "session_core.h"
#include "sparge/core/tuner.h"

namespace sparge::gui {

enum class TuneScope { SelectedHead, Entry, AllEntries };

// One tuned head, for the tuning table.
struct TuneRow {
  std::string entry;
  int64_t head = 0;
  core::HeadParams params;
  bool isSparse = true;
  double stage1 = 0;
  double total = 0;
  double l1 = 0;  // deployed, in the numerics tuned with
  int probes = 0;
  std::string decision;
  // The same parameters in exact numerics, and every valid block in the tuned numerics (NaN: not measured).
  double l1Sparse = std::numeric_limits<double>::quiet_NaN();
  double l1Quant = std::numeric_limits<double>::quiet_NaN();
};

// The tuner's options for the session's run settings and budget (one conversion, used by every tune).
core::TuneOptions tuneOptionsFor(const core::RunConfig& config, const Budget& budget);

class TuneController {
 public:
  TuneController(SessionCore& core, RunController& runs) : core_(core), runs_(runs) {}

  void setBudget(const Budget& b);  // with follow-budget on, re-tunes the selected head (coalesced)
  void setFollowBudget(bool on);
  void autoTune(TuneScope scope);

  const Budget& budget() const { return budget_; }
  bool followBudget() const { return followBudget_; }
  const std::vector<TuneRow>& rows() const { return rows_; }  // ordered by entry, then head
  const TuneRow* row(const std::string& entry, int64_t head) const;
  // Changes whenever a tuned head of the selected entry lands on its parameters (views follow it).
  uint64_t generation() const { return generation_; }
  // The last tuner output (for the parameters export); null before any tuning.
  std::shared_ptr<const core::TuneResult> lastTune() const { return lastTune_; }
  // The per-head values an entry was tuned to or loaded with; null when it has none.
  const std::vector<core::HeadParams>* storedParams(const std::string& entry) const;
  const std::map<std::string, std::vector<core::HeadParams>>& allStored() const { return stored_; }
  // Keeps `params` as the entry's own values (a parameters file was loaded for it), with the heads that file
  // runs in exact numerics (1; empty: none).
  void store(const std::string& entry, std::vector<core::HeadParams> params, std::vector<uint8_t> exact = {});
  // The heads an entry's loaded values run in exact numerics (the exact fallback); null when none.
  const std::vector<uint8_t>* storedExact(const std::string& entry) const;
  uint64_t storedGeneration() const { return storedGeneration_; }  // changes with any stored values

  // ---- for the session ----
  void onSelectionChanged();  // follow budget re-tunes the newly selected head
  void reset(ResetScope scope);

 private:
  void submit(TuneScope scope, bool live);
  void onHeadTuned(const std::string& entry, const core::TunedHead& h, uint64_t epoch);
  void onFinished(std::shared_ptr<const core::TuneResult> result, uint64_t epoch, bool live, uint64_t id);

  SessionCore& core_;
  RunController& runs_;
  Budget budget_;
  bool followBudget_ = false;
  std::vector<TuneRow> rows_;
  uint64_t generation_ = 0;
  uint64_t latestTuneId_ = 0;  // the tune job whose end clears the progress bar (older ones were replaced)
  std::shared_ptr<const core::TuneResult> lastTune_;
  std::map<std::string, std::vector<core::HeadParams>> stored_;  // applied when an entry loads
  std::map<std::string, std::vector<uint8_t>> storedExact_;      // their exact heads, where any
  uint64_t storedGeneration_ = 0;
};

}  // namespace sparge::gui
