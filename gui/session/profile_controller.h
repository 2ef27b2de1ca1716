// Profiling from the GUI: the current configuration timed N times next to the dense baselines (our dense
// kernels, cuDNN where the engine offers it) by prof::profileEntry, summarised per stage (Timings view) and
// per kernel with one run's timeline (Kernels view).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernel_table.h"
#include "run_controller.h"
#include "session_core.h"

namespace sparge::gui {

struct StageSpan {
  std::string stage;
  double minMs = 0, medianMs = 0, maxMs = 0;
};

// Per-stage min / median / max of the repeated runs and the headline figures.
struct TimingSummary {
  bool valid = false;
  int runs = 0;
  int warmupRuns = 0;  // runs left out of the figures (every kind, the first run with the error metrics too)
  int warmupMs = 0;    // the warm-up went on until this long had passed (0: one round)
  std::string clock;        // "wall", "cuda-event", "cupti"
  std::string clockDetail;  // what that clock is, in words
  std::string device;
  std::string numerics;  // numerics and tile geometry of the timed runs, e.g. "int8-fp8, 128x64"
  std::vector<StageSpan> stages;
  double sparseMs = 0;             // the whole call (predict + quantize + sparse), median
  double denseMs = 0;              // our dense kernels on the same entry, median (0 when not measured)
  double cudnnMs = 0;              // cuDNN's fused attention on the same entry, median (0 when not measured)
  double speedup = 0;              // over the fastest dense measured (0 when none)
  std::string speedupBaseline;     // which one: "cudnn", "dense" or "reference"
  double denseTops = 0;            // dense-equivalent TOPS of the sparse call
  double executedTops = 0;         // only computed blocks
  std::string note;                // why the clock is what it is
  std::vector<std::string> notes;  // what the figures leave out (e.g. why cuDNN was not timed)
};

// Everything one profile produced.
struct ProfileData {
  TimingSummary summary;
  std::vector<KernelRow> kernels;     // every kernel of the profiled runs (sparse, dense, cuDNN)
  std::vector<TimelineBar> timeline;  // the first timed sparse run
};

class ProfileController {
 public:
  static constexpr int kMaxRuns = 100;        // the most profiled runs taken
  static constexpr int kMaxWarmupMs = 10000;  // the longest warm-up taken (`--action profile=N,T`)
  ProfileController(SessionCore& core, RunController& runs) : core_(core), runs_(runs) {}

  // Times the current configuration `runs` times, each next to the dense baselines, on the worker, after
  // one warm-up round, or warm-up rounds until `warmupMs` have passed (the GPU under sustained load).
  void profile(int runs, int warmupMs = 0);
  const TimingSummary& timing() const { return data_ ? data_->summary : empty_; }
  std::shared_ptr<const ProfileData> last() const { return data_; }
  void reset(ResetScope scope);

 private:
  SessionCore& core_;
  RunController& runs_;
  std::shared_ptr<const ProfileData> data_;
  TimingSummary empty_;
};

}  // namespace sparge::gui
