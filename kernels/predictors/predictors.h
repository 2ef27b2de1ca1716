// Stage 1 of the block predictors other than SpargeAttn's on the CUDA engine (docs/methods.md): which
// methods have one, one table row per method (its kernels), and the run that calls them for a run's heads,
// caches their threshold-independent statistics and finishes the mask, reasons, scores and LUT.
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "engine/device_stages.h"
#include "predictors/method_rows.h"
#include "sparge/core/method.h"

namespace sparge::cuda::predictors {

// A method's device predictor. `stats` computes what does not depend on the knob (the CPU predictor's
// computeStats) into a buffer the run caches per geometry, statsKey and head, null when the method caches
// nothing; `select` writes MethodRows for the launch's heads, reading MethodLaunch::stats.
struct DevicePredictor {
  core::Method method;
  void (*stats)(const MethodLaunch&, DeviceBuffer& stats, DeviceBuffer& scratch);
  void (*select)(const MethodLaunch&, MethodRows&, DeviceBuffer& scratch);
  // The selection writes the selected, method-forced and score entries of every block of its heads' rows, so
  // they need no clearing first (MoBA's gate only adds to them).
  bool writesEveryBlock;
};

// True when the CUDA engine runs Stage 1 of `m` (SpargeAttn's own Stage 1 not counted: it is predict.cu).
bool hasDevicePredictor(core::Method m);

// One run's Stage 1 of a method.
struct MethodRun {
  core::Method method = core::Method::XAttention;
  DeviceQkv qkv;
  Problem problem;  // its `heads` are not read: `heads` below are
  double scale = 0;
  std::vector<int> heads;                                 // query heads
  const std::vector<core::HeadParams>* params = nullptr;  // per query head
  const HeadParamsDev* paramsDev = nullptr;               // per query head, on the device (the dense flag)
  ForcedOn forced;
  cudaStream_t stream = nullptr;
};

class MethodStage1 {
 public:
  // The method's kernels for the run's heads (grouped by the CPU predictor's statsKey), then the finish into
  // sel's mask, reasons, prob (the method's score), LUT and counts. sel's block flags must be those of the
  // run's geometry (DeviceSelection::setBlocks).
  void run(const MethodRun& r, DeviceSelection& sel);
  // The next run computes every statistic again, in the buffers it has (a benchmark times a fresh Stage 1).
  void invalidateStats() {
    for (auto& [key, cached] : stats_) cached.done.assign(cached.done.size(), 0);
  }
  // [B*Hq] doubles: Stage1Mask::elementPairs of the last run's heads (NaN where the method counts blocks).
  const DeviceBuffer& elementPairs() const { return elementPairs_; }

 private:
  struct Cached {
    DeviceBuffer stats;
    std::vector<uint8_t> done;  // per query head
  };
  const DeviceBuffer* cachedStats(const DevicePredictor& dp, const MethodRun& r, const MethodLaunch& l,
                                  int64_t key);
  // Zeroes the dense-head flags, and the block rows where the method does not write every entry.
  void clearRows(const MethodRun& r, bool blocksWritten);

  std::map<std::tuple<int, int, int, int64_t>, Cached> stats_;  // (BQ, BK, method, statsKey)
  DeviceBuffer selected_, methodForced_, score_, denseHead_, elementPairs_, scratch_, heads_;
  std::vector<int> uploadedHeads_;  // what heads_ holds
  int pairsOf_ = -1;                // the method whose pairs elementPairs_ holds (-1: none; NaN to fill)
};

}  // namespace sparge::cuda::predictors
