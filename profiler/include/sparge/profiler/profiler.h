// The profiler facade the CLI and GUI use: begin()/end() around each engine run, then report().
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "sparge/profiler/export.h"
#include "sparge/profiler/report.h"
#include "sparge/profiler/stage.h"

namespace sparge::core {
struct EntryResult;
}

namespace sparge::prof {

struct ProfilerOptions {
  int warmup = 0;             // the first `warmup` runs are measured but left out of every statistic
  bool useCupti = true;       // false: skip CUPTI, go straight to CUDA events / wall clock
  bool useCudaEvents = true;  // false: never use CUDA events (wall clock when CUPTI is off)
  bool sampleSmClock = true;  // read the SM clock (NVML, loaded at run time) after each run on a GPU
  int device = 0;
};

// Picks the best source at construction: CUPTI (kernels timed on the GPU and attributed to stages), else CUDA
// events (a whole-run event pair; stage times from the engine), else wall clock (host steady_clock; stage
// times from the engine). source() and sourceReason() say which and why. Not thread-safe: one thread drives
// runs.
class Profiler {
 public:
  explicit Profiler(ProfilerOptions options = {});
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  TimingSource source() const;
  const std::string& sourceReason() const;
  const DeviceInfo& device() const;

  // Starts a run: tags its kernel launches (CUPTI external correlation) and starts its clocks. `warmup`
  // overrides ProfilerOptions::warmup for this run (a warm-up run is measured but left out of the report).
  // Throws sparge::Error when a run is already open.
  void begin(const RunInfo& info, std::optional<bool> warmup = std::nullopt);
  // Ends the open run: synchronises the device, stops the clocks, then (untimed) samples the SM clock. With
  // `result`, takes the workload (TOPS)
  // and, unless CUPTI times the kernels, the engine's per-stage times (core::StageTimes, source from its
  // clock).
  void end(const core::EntryResult* result = nullptr);
  // Adds a stage time measured by the caller to the open run (or the last run when none is open).
  void recordWall(Stage stage, double ms);
  void record(Stage stage, double ms, TimingSource source);
  void setWorkload(const Workload& workload);
  // A sentence for the report's notes (e.g. why a baseline was not timed); repeated notes are kept once.
  void addNote(const std::string& note);

  int runs() const;  // begun and ended, warm-up included
  // Flushes CUPTI and builds the report of every run so far. Can be called more than once.
  TimingReport report();
  // What report() builds from: every finished run and its attributed kernels (for merging the runs of
  // several processes into one report with buildReport).
  ReportInput collect();
  // Runs, kernels and workload are forgotten; the source stays.
  void reset();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// RAII run scope: begin() now; end(&result) when the run succeeded, or end() without a result when the scope
// is left by an exception (errors in end() are swallowed in the destructor).
class ProfileScope {
 public:
  ProfileScope(Profiler& profiler, const RunInfo& info, std::optional<bool> warmup = std::nullopt)
      : profiler_(profiler) {
    profiler_.begin(info, warmup);
  }
  ~ProfileScope() {
    if (!ended_) {
      try {
        profiler_.end();
      } catch (...) {
      }
    }
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;
  // Ends now (exceptions propagate). `result` is read here only, so it may die before the scope does.
  void end(const core::EntryResult* result = nullptr) {
    ended_ = true;
    profiler_.end(result);
  }

 private:
  Profiler& profiler_;
  bool ended_ = false;
};

}  // namespace sparge::prof
