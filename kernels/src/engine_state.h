// The CUDA engine's per-entry device state and the stages of one run, split over cuda_engine.cpp (upload,
// prediction, quantization, attention), engine_errors.cpp (reference and the three errors) and
// engine_results.cpp (per-head results).
#pragma once

#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "cudnn_sdpa.h"
#include "device_stages.h"
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

// CUDA-event pairs around the stages of a run (the engine's StageTimes).
struct StageClock {
  prof::EventTimer total, predict, quantize, sparse, reference, errors;
  bool referenceRan = false;
};

// errorQuant of one (geometry, numerics, smooth-K): dense, every valid block, chosen numerics. Fixed for
// an entry, so computed once per head.
struct QuantErrorCache {
  std::vector<core::ErrorSums> sums;  // [B*Hq]
  std::vector<uint8_t> nonFinite;     // [B*Hq]: NaN/Inf in that output or its reference
  std::vector<uint8_t> done;          // [Hq]
};

// launchError's layout: per (b*Hq+hq, q-block) kSums doubles {Σ|O-R|, Σ|R|, Σ O·R, Σ O², Σ R², Σ(O-R)²,
// count, non-finite count}.
constexpr int kSums = 8;
// The sums of one head (nq q-blocks from perBlock) and whether any of them is non-finite.
core::ErrorSums headSums(const double* perBlock, int nq);
bool nonFiniteIn(const double* perBlock, int nq);

// Error sums of a run as downloaded, in launchError's layout.
struct RunErrors {
  std::vector<double> deployed;
  std::vector<double> sparse;              // exact numerics; empty when not quantized
  const QuantErrorCache* quant = nullptr;  // null when not quantized
  std::vector<float> mass64;               // reference mass per 64x64 tile
};

struct CudaEngine::State {
  // The entry on the device, uploaded by the first run.
  DeviceBuffer q, k, v;
  DeviceQkv qkv;
  int B = 0, Hq = 0, Hkv = 0, Nq = 0, Nkv = 0, D = 0;
  bool uploaded = false;
  std::vector<uint8_t> inputNonFinite;  // [B*Hq]: NaN/Inf in Q of this head or K/V of its KV head

  // Caches of the entry: K mean, Stage-1 statistics per (BQ, BK, smooth-K), validity per geometry, the fp32
  // reference per head, errorQuant per (BQ, BK, numerics, smooth-K).
  KeyMean keyMean;
  std::map<std::tuple<int, int, bool>, std::unique_ptr<Stage1Stats>> stats;
  std::map<std::tuple<int, int>, core::BlockValidity> validity;
  std::map<std::tuple<int, int>, std::vector<uint8_t>> blockFlags;  // per geometry, as the selection reads them
  DeviceBuffer oref, mass64;
  std::vector<uint8_t> refDone;  // per query head (all batch items)
  std::map<std::tuple<int, int, int, bool>, QuantErrorCache> quantErrors;

  // Buffers of a run, reused.
  DeviceSelection selection;
  DeviceQuant quant;
  DeviceBuffer heads, params, o, pvSkipped, emptyRows, errSums;
  // The extra attention runs of the error split (exact sparse, quantized dense) write here.
  DeviceBuffer scratchO, scratchSkip, scratchEmpty, scratchSums, scratchHeads;

  // cuDNN's fused attention on this entry (built on first use).
  std::unique_ptr<CudnnSdpa> cudnn;
  std::string cudnnError;  // why the plan could not be built
  DeviceBuffer cudnnO;
};

// engine_errors.cpp: the fp32 reference for the plan's heads (cached), then the deployed error and, for
// quantized numerics, the exact-numerics sparse error and the (cached) quantized dense error.
RunErrors computeErrors(CudaEngine::State& st, const core::EntryData& entry, const RunPlan& plan,
                        const QuantOperands* quant, StageClock& clock);

// engine_results.cpp: downloads masks and maps and builds the per-head results.
core::EntryResult collectResults(CudaEngine::State& st, const core::EntryData& entry, const RunPlan& plan,
                                 const RunErrors* errors, const std::string& engineName);

}  // namespace sparge::cuda
