// The GUI's data layer: loaded capture, selection, parameters, latest results, and the commands that
// change them. No ImGui and no GL here (Tracy's server/ idea): views read a Session and call commands.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sparge/core/capture.h"
#include "sparge/core/engine.h"
#include "sparge/core/params.h"
#include "sparge/core/result.h"
#include "sparge/core/tuner.h"
#include "worker.h"

namespace sparge::gui {

struct HeadRef {
  int64_t batch = 0;
  int64_t head = 0;  // query head
  bool operator==(const HeadRef&) const = default;
};

enum class ApplyTarget { SelectedHead, AllHeads };
enum class TuneScope { SelectedHead, Entry, AllEntries };

// Error budget of the auto-tuner: l1 bounds θ/τ (or top-k), l2 bounds λ (SPARGE_SPEC.md §5).
struct Budget {
  double l1 = 0.07;
  double l2 = 0.08;
  bool operator==(const Budget&) const = default;
};

// What an engine factory gives the session: the engine and, when `auto` fell back, why.
struct EngineBox {
  std::unique_ptr<core::Engine> engine;
  std::string message;
};
using EngineFactory = std::function<EngineBox()>;

// Progress of a long job (tuning), shown as a bar with a cancel button.
struct Progress {
  bool active = false;
  std::string label;
  int64_t done = 0;
  int64_t total = 0;
  double fraction = 0;  // [0, 1]
};

// One tuned head, for the tuning table.
struct TuneRow {
  std::string entry;
  int64_t head = 0;
  core::HeadParams params;
  bool isSparse = true;
  double stage1 = 0;
  double total = 0;
  double l1 = 0;
  int probes = 0;
  std::string decision;
};

// Repeated timing of the current configuration (Timings view): per-stage min / median / max.
struct StageSpan {
  std::string stage;
  double minMs = 0, medianMs = 0, maxMs = 0;
};
struct TimingSummary {
  bool valid = false;
  int runs = 0;
  std::string clock;        // "wall", "cuda-event", "cupti"
  std::string clockDetail;  // what that clock is, in words
  std::string device;
  std::vector<StageSpan> stages;
  double sparseMs = 0;      // predict + sparse, median
  double denseMs = 0;       // the same entry with every head dense, median (0 when not measured)
  double denseTops = 0;     // dense-equivalent TOPS of the sparse run
  double executedTops = 0;  // only computed blocks
  std::string note;
};

class Session {
 public:
  // The factory runs on the worker thread (a CUDA engine takes a while to start).
  explicit Session(EngineFactory factory);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // ---- commands (UI thread) ----
  // `entry`: the entry to select once open (empty: the first one).
  void openCapture(const std::string& path, const std::string& entry = {});
  // Uses an entry built in memory instead of a file (tests, benchmarks, synthetic data).
  void openEntryData(std::shared_ptr<const core::EntryData> entry);
  void selectEntry(const std::string& name);
  void selectHead(HeadRef head);
  // Parameters of the selected head (target SelectedHead: an override) or of every head (AllHeads:
  // new defaults, overrides cleared). Schedules a re-run of the heads concerned.
  void setParams(const core::HeadParams& p, ApplyTarget target);
  void setGeometry(const core::Geometry& g);
  void setSmoothK(bool on);
  void setSink(bool on);
  // Replaces the whole run configuration (automation: --set). perHead is resized on entry load.
  void setConfig(const core::RunConfig& config);
  void clearOverride(int64_t head);
  void clearAllOverrides();
  void setBudget(const Budget& b);  // with follow-budget on, re-tunes the selected head (coalesced)
  void setFollowBudget(bool on);
  void autoTune(TuneScope scope);
  void rerun();              // F5: all heads of the selected entry
  void cancel();             // cancels the running job and drops queued ones of the same kind
  void setCancelRunningOnChange(bool on) { cancelRunningOnChange_ = on; }

  // ---- per frame (UI thread) ----
  // Applies what the worker finished since the last call. Returns true when anything changed.
  bool poll();

  // ---- state (UI thread) ----
  const std::string& capturePath() const { return capturePath_; }
  const std::vector<core::EntryInfo>& entries() const { return entries_; }
  const std::vector<std::pair<std::string, std::string>>& rootAttributes() const { return rootAttributes_; }
  const std::string& entryName() const { return entryName_; }
  const core::EntryInfo* entryInfo() const { return entryLoaded_ ? &entryInfo_ : nullptr; }
  HeadRef selectedHead() const { return selected_; }
  const core::RunConfig& config() const { return config_; }
  core::HeadParams paramsFor(int64_t head) const { return config_.forHead(head); }
  bool hasOverride(int64_t head) const;
  int overrideCount() const;
  const Budget& budget() const { return budget_; }
  bool followBudget() const { return followBudget_; }
  // Latest results; heads may lag behind `config()` while a run is in flight.
  std::shared_ptr<const core::EntryResult> result() const { return result_; }
  uint64_t resultGeneration() const { return resultGeneration_; }  // changes whenever result() does
  const core::StageTimes& lastTimes() const { return lastTimes_; }
  double lastRunMs() const { return lastRunMs_; }     // wall time of the last finished run job
  int64_t lastRunHeads() const { return lastRunHeads_; }
  const std::string& engineName() const { return engineName_; }
  bool engineIsGpu() const { return engineGpu_; }
  const std::string& engineMessage() const { return engineMessage_; }
  bool engineReady() const { return engineReady_; }
  const Progress& progress() const { return progress_; }
  const std::vector<TuneRow>& tuned() const { return tuned_; }
  // Changes whenever a tuned head of the selected entry lands on its parameters (views follow it).
  uint64_t tuneGeneration() const { return tuneGeneration_; }
  // The last tuner output (for the parameters export); null before any tuning.
  std::shared_ptr<const core::TuneResult> lastTune() const { return lastTune_; }
  // Times the current configuration `runs` times (and a dense run for the speedup) on the worker.
  void profile(int runs);
  const TimingSummary& timing() const { return timing_; }
  // Exports (run on the worker from an immutable snapshot; a notice or an error says how it went).
  void exportMasks(const std::string& path);
  void exportReportJson(const std::string& path);
  void exportReportCsv(const std::string& path);
  void exportReportMarkdown(const std::string& path);  // PNG heatmaps beside it
  void exportParams(const std::string& path);
  void importParams(const std::string& path);
  const std::vector<std::string>& warnings() const { return warnings_; }
  int64_t gpuMemUsed() const { return gpuUsed_; }
  int64_t gpuMemTotal() const { return gpuTotal_; }
  // Human-readable description of what the worker is doing now ("" when idle).
  std::string activity() const;
  bool busy() const;

  // Errors for the error dialog, oldest first; the UI pops them.
  bool hasError() const { return !errors_.empty(); }
  const std::string& frontError() const { return errors_.front(); }
  void popError() { errors_.pop_front(); }
  void pushError(std::string message) { errors_.push_back(std::move(message)); }
  // Informational messages (exports done...), newest last.
  std::vector<std::string>& notices() { return notices_; }
  void addNotice(std::string message);

  // Blocks (polling) until the worker is idle and every result has been applied, or until `timeout`.
  // For automation and tests only: the interactive UI never calls it.
  bool waitIdle(std::chrono::milliseconds timeout);

  Worker& worker() { return worker_; }
  // Shows `result` as if a run had produced it (benchmarks and view tests; no engine involved).
  void showResultForTesting(std::shared_ptr<const core::EntryResult> result);

 private:
  struct Backend;
  using Apply = std::function<void(Session&)>;
  void post(Apply fn);
  void scheduleRun(const std::set<int64_t>& heads, bool all);
  void submitLoad(const std::string& name);
  void applyResult(std::shared_ptr<core::EntryResult> r, uint64_t epoch, uint64_t runId, double wallMs);
  void ensurePerHead();
  int64_t headsQ() const { return entryLoaded_ ? entryInfo_.headsQ : 0; }
  void retuneSelectedForBudget();
  void submitTune(TuneScope scope, bool live);
  void onHeadTuned(const std::string& entry, const core::TunedHead& h, uint64_t epoch);
  void exportJob(const std::string& what, const std::string& path,
                 std::function<void(const core::EntryResult&, const std::string&)> write);

  std::shared_ptr<Backend> backend_;  // touched only on the worker thread

  std::mutex inboxMutex_;
  std::vector<Apply> inbox_;

  std::string capturePath_;
  std::vector<core::EntryInfo> entries_;
  std::vector<std::pair<std::string, std::string>> rootAttributes_;
  std::string entryName_;
  core::EntryInfo entryInfo_;
  bool entryLoaded_ = false;
  uint64_t epoch_ = 0;  // bumped when the capture or entry changes: late results of the old one are dropped
  HeadRef selected_;
  core::RunConfig config_;
  Budget budget_;
  bool followBudget_ = false;
  bool cancelRunningOnChange_ = true;
  static constexpr double kFinishRunsBelowMs = 1000.0;  // see scheduleRun

  std::shared_ptr<const core::EntryResult> result_;
  uint64_t resultGeneration_ = 0;
  core::StageTimes lastTimes_;
  double lastRunMs_ = 0;
  int64_t lastRunHeads_ = 0;

  // Heads owed a re-run: union of everything requested since the last finished run, so that
  // coalescing a "head 3" job into an "all heads" job (or the reverse) never loses a head.
  std::set<int64_t> owedHeads_;
  bool owedAll_ = false;
  uint64_t latestRunId_ = 0;

  std::string engineName_ = "starting engine...";
  std::string engineMessage_;
  bool engineGpu_ = false;
  bool engineReady_ = false;
  Progress progress_;
  std::vector<TuneRow> tuned_;
  uint64_t tuneGeneration_ = 0;
  uint64_t latestTuneId_ = 0;  // the tune job whose end clears the progress bar (older ones were replaced)
  std::shared_ptr<const core::TuneResult> lastTune_;
  std::map<std::string, std::vector<core::HeadParams>> tunedPerEntry_;  // applied when an entry loads
  TimingSummary timing_;
  std::vector<std::string> warnings_;
  std::deque<std::string> errors_;
  std::vector<std::string> notices_;
  int64_t gpuUsed_ = 0, gpuTotal_ = 0;
  // Last member: destroyed first, so its thread is joined before anything a job may post to goes away.
  Worker worker_;
};

// Applies one `key=value` setting (automation's --set) to a run configuration and budget. Keys:
// theta, tau, topk, lambda, mode (cdf|topk), dense (0|1), geometry (128x64|64x128), smooth_k, sink,
// l1, l2. Throws sparge::Error naming the setting for unknown keys or bad values.
void applySetting(const std::string& keyValue, core::RunConfig& config, Budget& budget);

enum class HeadSort { Index, Sparsity, Error };
// Order of result heads for the grid and the table: indices into result.heads.
std::vector<size_t> sortHeads(const core::EntryResult& result, HeadSort key, bool descending);

// True when a head's error exceeds the budget (L1 > l1, or > l2 when its PV skip is active).
bool overBudget(const core::HeadResult& h, const Budget& b);

}  // namespace sparge::gui
