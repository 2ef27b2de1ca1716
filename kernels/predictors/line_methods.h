// Stage 1 of MInference and FlexPrefill on the GPU (docs/methods.md): the last queries' attention against
// every key, its per-column (vertical) and per-diagonal (slash) sums, pooled block scores and the methods'
// selections, written into the shared MethodRows layout for the finish kernel.
#pragma once

#include "common/cuda_util.h"
#include "predictors/method_rows.h"

namespace sparge::cuda::predictors {

// For every head of launch.problem.heads (and every batch item), fills out.selected, out.methodForced,
// out.score, out.denseHead and out.elementPairs as core's MInference / FlexPrefill predictors do, with the
// per-head parameters of (*launch.params)[query head]. `scratch` grows to what the launch needs and is
// reused across calls; everything is queued on launch.stream (the per-head parameters travel as kernel
// arguments). FlexPrefill runs its line and pooled statistics on two streams of its own, forked from and
// joined back into launch.stream by events, so that what follows on launch.stream still sees all of its
// work.
void predictMInference(const MethodLaunch& launch, MethodRows& out, DeviceBuffer& scratch);
void predictFlexPrefill(const MethodLaunch& launch, MethodRows& out, DeviceBuffer& scratch);

// What a benchmark installs to hear where the predictors spend their time: mark(phase, stream) is called on
// the host at the end of each phase, with the predictor's stream (an event recorded there closes the phase;
// work on FlexPrefill's second stream shows only as the wait where it joins).
// None is installed by default; install one only while no predictor runs on another thread.
struct LinePhaseProbe {
  virtual ~LinePhaseProbe() = default;
  virtual void mark(const char* phase, cudaStream_t stream) = 0;
};
void setLinePhaseProbe(LinePhaseProbe* probe);

}  // namespace sparge::cuda::predictors
