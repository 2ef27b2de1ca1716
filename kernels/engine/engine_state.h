// The CUDA engine's per-entry device state and the stages of one run, split over cuda_engine.cpp (upload,
// prediction, quantization, attention), engine_errors.cpp (reference and the three errors),
// engine_results.cpp (copies to the host, per-head results) and head_results.cpp (one head's result).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "engine/cudnn_sdpa.h"
#include "engine/device_stages.h"
#include "engine/entry_upload.h"
#include "engine/head_results.h"
#include "predictors/predictors.h"
#include "sparge/core/engine.h"
#include "sparge/kernels/cuda_engine.h"
#include "sparge/profiler/event_timer.h"

namespace sparge::cuda {

// One run's resolved inputs: the heads, the problem the kernels read, the device-side head parameters.
struct RunPlan {
  const core::RunConfig& config;
  const core::RunOptions& options;
  std::vector<int> heads;  // query heads, ascending
  Problem p;               // p.heads points at the uploaded list
  size_t BH = 0;           // (batch, query head) pairs
  size_t grid = 0;         // blocks per head
  bool allDense = false;   // every head dense: the dense kernel runs (the dense baseline)
  bool quantized() const { return config.numerics != core::Numerics::None; }
};

// The host's side of a run is timed with the steady clock.
using HostClock = std::chrono::steady_clock;
inline double msSince(HostClock::time_point t0) {
  return std::chrono::duration<double, std::milli>(HostClock::now() - t0).count();
}

// CUDA-event pairs around the stages of a run (the engine's StageTimes) and around the copies of its arrays
// (whose stop events tell the host that the arrays have arrived).
struct StageClock {
  prof::EventTimer total, predict, quantize, sparse, reference, errors;
  prof::EventTimer selectionCopy, attentionCopy;
  prof::EventTimer split;  // the exact-numerics pass of a split that followed an early result
  bool referenceRan = false;
};

// What the error stage of a run computed beyond the sums that travel in HostCopies.
struct RunErrors {
  const QuantErrorCache* quant = nullptr;  // errorQuant; null when not quantized
  bool split = false;  // quantized: the exact-numerics pass behind errorSparse ran (its sums in scratchSums)
};

// Page-locked host copies of a run's arrays, reused across runs: the selection's maps are copied on a side
// stream as soon as the selection ran, beside the attention kernel, so that the host cuts them per head while
// it runs; the PV skips, empty rows and error sums once the attention and the errors ran.
struct HostCopies {
  SideStream side;                   // the selection's copies; the next selection waits for them
  PinnedBuffer mask, reasons, prob;  // [B*Hq][nq][nk]
  PinnedBuffer elementPairs;         // [B*Hq] doubles, methods other than SpargeAttn
  PinnedBuffer skip, emptyRows, deployedSums, sparseSums;  // launchError's layout for the sums
  int64_t bytes = 0;                                       // copied by the current run
};

// Host copies of data cached for the entry: self-similarity per (BQ, BK, smooth-K), the reference's mass per
// 64x64 tile, and refBlockMass per geometry and head, each computed once.
struct HostCaches {
  struct Similarity {
    std::vector<float> q, k;  // [B*Hq][nq], [B*Hkv][nk]
  };
  std::map<std::tuple<int, int, bool>, Similarity> similarity;
  std::vector<float> mass64;  // [B*Hq][ceil(Nq/64)][ceil(Nkv/64)], for heads with a reference
  std::map<std::tuple<int, int>, std::vector<std::vector<float>>> blockMass;  // per geometry: [B*Hq]
};

struct CudaEngine::State {
  KernelSwitches switches;  // read from the environment once, when the engine was created
  // The entry on the device, uploaded by the first run.
  DeviceBuffer q, k, v;
  std::unique_ptr<UploadStaging> staging = std::make_unique<UploadStaging>();  // kept for the next entry
  DeviceQkv qkv;
  int B = 0, Hq = 0, Hkv = 0, Nq = 0, Nkv = 0, D = 0;
  bool uploaded = false;
  std::vector<uint8_t> inputNonFinite;  // [B*Hq]: NaN/Inf in Q of this head or K/V of its KV head

  // Caches of the entry: K mean, Stage-1 statistics per (BQ, BK, smooth-K), validity per geometry, the fp32
  // reference per head, errorQuant per (BQ, BK, numerics, smooth-K).
  KeyMean keyMean;
  std::map<std::tuple<int, int, bool>, std::unique_ptr<Stage1Stats>> stats;
  std::map<std::tuple<int, int>, core::BlockValidity> validity;
  // Per geometry, as the selection reads them.
  std::map<std::tuple<int, int>, std::vector<uint8_t>> blockFlags;
  DeviceBuffer oref, mass64;
  std::vector<uint8_t> refDone;  // per query head (all batch items)
  std::map<std::tuple<int, int, int, bool>, QuantErrorCache> quantErrors;
  HostCaches host;

  // Buffers of a run, reused.
  DeviceSelection selection;
  predictors::MethodStage1 methodStage1;  // the other methods' Stage 1, with their cached statistics
  DeviceQuant quant;
  DeviceBuffer heads, params, o, pvSkipped, emptyRows, errSums;
  // The extra attention runs of the error split (exact sparse, quantized dense) write here.
  DeviceBuffer scratchO, scratchSkip, scratchEmpty, scratchSums, scratchHeads;
  HostCopies copies;

  // Takes the buffers of `old` that do not depend on its entry's contents (every upload or run rewrites
  // them): the staging always, the entry, output and reference buffers when the entries are alike (the same
  // sizes), so a tuner going from entry to entry does not free and allocate them again.
  void keepBuffersOf(State& old, bool sameShape);

  // cuDNN's fused attention on this entry (built on first use).
  std::unique_ptr<CudnnSdpa> cudnn;
  std::string cudnnError;  // why the plan could not be built
  DeviceBuffer cudnnO;
};

// engine_errors.cpp: the fp32 reference for the plan's heads (cached, its block mass kept on the host), then
// the deployed error and, for quantized numerics, the exact-numerics sparse error and the (cached) quantized
// dense error.
RunErrors computeErrors(CudaEngine::State& st, const core::EntryData& entry, const RunPlan& plan,
                        const QuantOperands* quant, StageClock& clock, bool withSplit = true);
// The exact-numerics pass of the split that computeErrors(withSplit = false) left out, into scratchSums.
void computeSplit(CudaEngine::State& st, const core::EntryData& entry, const RunPlan& plan,
                  StageClock& clock);

// engine_results.cpp: asynchronous copies of the run's arrays into st.copies (the selection's as soon as it
// ran, the rest after the attention and the errors), then the per-head results cut from them on several
// threads, with the host's side of the run (since `start`) in the result's times.
void queueSelectionCopies(CudaEngine::State& st, const RunPlan& plan, StageClock& clock);
void queueAttentionCopies(CudaEngine::State& st, const RunPlan& plan, const RunErrors* errors,
                          StageClock& clock);
// errorSparse of every head of an early result `res` from the split's sums (computeSplit), then the
// entry's sums again; clears res.splitPending.
void addSplit(CudaEngine::State& st, const RunPlan& plan, core::EntryResult& res);
core::EntryResult collectResults(CudaEngine::State& st, const core::EntryData& entry, const RunPlan& plan,
                                 const RunErrors* errors, const std::string& engineName, StageClock& clock,
                                 HostClock::time_point start);

}  // namespace sparge::cuda
