// Interactive runs of the selected entry: the run configuration (defaults and per-head overrides), the
// coalesced re-runs a change schedules, and the latest merged results.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <vector>

#include "session_core.h"
#include "sparge/core/params.h"
#include "sparge/core/result.h"

namespace sparge::gui {

enum class ApplyTarget { SelectedHead, AllHeads };

// The last finished run job: its stage times, wall time and how many heads it ran, and when it started on
// the worker, finished and was applied on the UI thread (a slider move's latency splits into queueing, the
// engine, the wait for the next frame and the frame that shows it).
struct LastRun {
  using TimePoint = std::chrono::steady_clock::time_point;
  core::StageTimes times;
  double wallMs = 0;
  int64_t heads = 0;
  TimePoint started, finished, applied;
};

class RunController {
 public:
  explicit RunController(SessionCore& core) : core_(core) {}

  // ---- commands (UI thread); each re-runs exactly the heads whose parameters changed ----
  // The selected head's parameters (an override) or every head's (new defaults, overrides cleared).
  // Throws sparge::Error for out-of-range values.
  void setParams(const core::HeadParams& p, ApplyTarget target);
  // One head's parameters as an override (tuned values, a clicked curve point).
  void setHeadParams(int64_t head, const core::HeadParams& p);
  // The whole configuration: a change of geometry, numerics, smooth-k or sink re-runs every head.
  void applyConfig(const core::RunConfig& config);
  void clearOverride(int64_t head);
  void clearAllOverrides();
  void rerun();  // F5: all heads of the selected entry
  // Whether a change cancels a running run job (only when runs are slow, see schedule()).
  void setCancelRunningOnChange(bool on) { cancelRunningOnChange_ = on; }

  // ---- state (UI thread) ----
  const core::RunConfig& config() const { return config_; }
  core::HeadParams paramsFor(int64_t head) const { return config_.forHead(head); }
  bool hasOverride(int64_t head) const;
  int overrideCount() const;
  // Latest results; heads may lag behind config() while a run is in flight.
  std::shared_ptr<const core::EntryResult> result() const { return result_; }
  uint64_t resultGeneration() const { return resultGeneration_; }  // changes whenever result() does
  // Changes whenever the per-block maps of result() may have: not when the split of an early result lands
  // (the same run's maps, one more figure), so views colour their textures once a run.
  uint64_t mapsGeneration() const { return mapsGeneration_; }
  const LastRun& lastRun() const { return lastRun_; }
  uint64_t configGeneration() const { return configGeneration_; }  // changes with config()

  // ---- for the session and its controllers ----
  void reset(ResetScope scope);
  // The selected entry finished loading: overrides that fit it stay, `stored` (its tuned or loaded
  // values, if any) replaces them; then every head runs.
  // `exact`: the heads those values run in exact numerics (null: none).
  void onEntryLoaded(const std::vector<core::HeadParams>* stored,
                     const std::vector<uint8_t>* exact = nullptr);
  // Drops the overrides when they are exactly `set` (tuned values of the entry being left).
  void dropOverridesEqualTo(const std::vector<core::HeadParams>& set);
  bool owesRuns() const { return owedAll_ || !owedHeads_.empty(); }
  void runOwed() { schedule({}, false); }
  void showResult(std::shared_ptr<const core::EntryResult> result);

 private:
  void schedule(const std::set<int64_t>& heads, bool all);
  void apply(std::shared_ptr<const core::EntryResult> r, uint64_t epoch, uint64_t runId, double wallMs,
             LastRun stamps);
  std::shared_ptr<const core::EntryResult> merge(std::shared_ptr<const core::EntryResult> r) const;
  void fitPerHead(core::RunConfig& config) const;

  SessionCore& core_;
  core::RunConfig config_;
  bool cancelRunningOnChange_ = true;
  static constexpr double kFinishRunsBelowMs = 1000.0;  // see schedule()

  std::shared_ptr<const core::EntryResult> result_;
  uint64_t resultGeneration_ = 0, mapsGeneration_ = 0;
  uint64_t shownRunId_ = 0;  // the run job whose result (or early result) is result()
  LastRun lastRun_;
  // Heads owed a re-run: union of everything requested since the last finished run, so that
  // coalescing a "head 3" job into an "all heads" job (or the reverse) never loses a head.
  std::set<int64_t> owedHeads_;
  bool owedAll_ = false;
  uint64_t latestRunId_ = 0;
  uint64_t configGeneration_ = 0;
};

// Same settings, parameters and numerics for every head.
bool sameConfig(const core::RunConfig& a, const core::RunConfig& b);
// Runs the heads marked 1 in `exact` in exact numerics and the others in config.numerics (the exact
// fallback of a loaded parameter file); clears the per-head numerics when none differs.
void setExactHeads(core::RunConfig& config, const std::vector<uint8_t>* exact);
// The heads of `config` that run in exact numerics while its own are quantized.
std::vector<uint8_t> exactHeadsOf(const core::RunConfig& config);

}  // namespace sparge::gui
