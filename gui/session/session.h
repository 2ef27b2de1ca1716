// The GUI's data layer: a small facade over the loaded capture and the run, tune, profile, overview,
// curve and file controllers. No ImGui and no GL here (Tracy's server/ idea): views read a Session and
// call its commands; engine work runs on the worker thread.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "curves.h"
#include "file_controller.h"
#include "method_compare.h"
#include "metrics.h"
#include "order_curves.h"
#include "overview.h"
#include "profile_controller.h"
#include "run_controller.h"
#include "session_core.h"
#include "sparge/core/dense_hint.h"
#include "tune_controller.h"
#include "worker.h"

namespace sparge::gui {

class Session {
 public:
  explicit Session(EngineFactory factory);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // ---- data (UI thread) ----
  // `entry`: the entry to select once open (empty: the first one). A bad file changes nothing.
  void openCapture(const std::string& path, const std::string& entry = {});
  // Uses an entry built in memory instead of a file (tests, benchmarks, synthetic data).
  void openEntryData(std::shared_ptr<const core::EntryData> entry);
  void selectEntry(const std::string& name);
  void selectHead(HeadRef head);  // clamped to the entry
  void cancel();                  // Esc: the running run, tune, profile or sweep and queued ones of its kind
  // Every head's parameters from a preset; Tuned: the selected entry's tuned or loaded values.
  void applyPreset(core::Preset preset);
  bool presetAvailable(core::Preset preset) const;
  // When on, the engine's GPU picks the target once it has started (sm90 on Hopper, sm80 on Ampere): the
  // tiles and numerics SpargeAttn runs there, with a notice. Off when the user chose a target.
  void followDeviceTarget(bool on) { followDeviceTarget_ = on; }
  // The token order Stage 1 walks on entries with a grid (docs/permutation.md). The loaded entry is put in
  // that order on the worker (each order built once per entry) and re-run; entries it cannot apply to (no
  // grid, causal, windowed) run in the capture's order, with a notice. gui/session/session_order.cpp.
  void setPermutation(core::Permutation p);
  core::Permutation permutation() const { return permutation_; }
  // Why `p` cannot apply to the selected entry ("" when it can, or no entry is selected).
  std::string permutationProblem(core::Permutation p) const;

  const CaptureModel& capture() const { return core_.capture; }
  const EngineStatus& engine() const { return core_.engine; }
  Messages& messages() { return core_.messages; }
  const Messages& messages() const { return core_.messages; }
  const Progress& progress() const { return core_.progress; }

  RunController& runs() { return runs_; }
  const RunController& runs() const { return runs_; }
  TuneController& tuning() { return tuning_; }
  const TuneController& tuning() const { return tuning_; }
  ProfileController& profiling() { return profiling_; }
  const ProfileController& profiling() const { return profiling_; }
  OverviewController& overview() { return overview_; }
  const OverviewController& overview() const { return overview_; }
  CurveController& curves() { return curves_; }
  const CurveController& curves() const { return curves_; }
  OrderCurveController& orderCurves() { return orderCurves_; }
  const OrderCurveController& orderCurves() const { return orderCurves_; }
  MethodCompareController& methodCompare() { return methodCompare_; }
  const MethodCompareController& methodCompare() const { return methodCompare_; }
  FileController& files() { return files_; }
  // The loaded parameter file and evaluation report, as marks per head.
  const ChecksModel& checks() const { return core_.checks; }

  // ---- per frame (UI thread) ----
  // Applies what the worker finished since the last call. Returns true when anything changed.
  bool poll();
  // Whether poll() has anything to apply (any thread's results posted since the last one).
  bool hasResults() const { return !core_.inboxEmpty(); }
  // Called from the worker whenever a result is posted, to wake a UI thread that sleeps between frames.
  void setWake(std::function<void()> wake) { core_.setWake(std::move(wake)); }
  bool busy() const { return !worker_.idle(); }
  std::optional<JobKind> runningJob() const { return jobKindOf(worker_.runningKey()); }
  std::string activity() const;  // what the worker is doing, in words ("" when idle)

  // Blocks (polling) until the worker is idle and every result has been applied, or until `timeout`.
  // For automation and tests only: the interactive UI never calls it.
  bool waitIdle(std::chrono::milliseconds timeout);
  Worker& worker() { return worker_; }
  // Shows `result` as if a run had produced it (benchmarks and view tests; no engine involved).
  void showResultForTesting(std::shared_ptr<const core::EntryResult> result);
  // Shows a capture of `entries` whose overview holds `rows` (benchmarks; no engine involved).
  void showOverviewForTesting(std::vector<core::EntryInfo> entries, std::vector<OverviewRow> rows);

 private:
  void startEngine();
  void adoptDeviceTarget();
  void submitLoad(const std::string& name);
  // Worker thread: makes the engine's entry `base` in the token order `p` (None where it cannot apply).
  void adoptOrder(const std::shared_ptr<const core::EntryData>& base, core::Permutation p);
  void onEntryLoaded(const core::EntryInfo& info, const std::string& digest,
                     std::vector<std::string> warnings, uint64_t epoch);
  // The one reset: what a new capture (or a new entry) invalidates, in every controller.
  void reset(ResetScope scope);

  // First member: constructed before anything that submits to it. The destructor stops it before the
  // controllers that its jobs post to go away.
  Worker worker_;
  SessionCore core_;
  RunController runs_;
  TuneController tuning_;
  ProfileController profiling_;
  OverviewController overview_;
  CurveController curves_;
  OrderCurveController orderCurves_;
  MethodCompareController methodCompare_;
  FileController files_;
  bool followDeviceTarget_ = false;
  core::Permutation permutation_ = core::Permutation::None;
};

}  // namespace sparge::gui
