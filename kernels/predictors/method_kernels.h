// Host-side launchers of the device block predictors of kernels/predictors (XAttention, the MoBA-style gate)
// and of the finish every method shares; plain C++ so that the dispatch compiles as C++.
#pragma once

#include "predictors/method_rows.h"

namespace sparge::cuda::predictors {

// The outputs the finish writes (DeviceSelection's) and what it reads beside MethodRows.
struct FinishArgs {
  const HeadParamsDev* params = nullptr;  // per query head: `dense` (is_sparse = false)
  ForcedOn forced;                        // the sink and the diagonal
  uint8_t* mask = nullptr;                // [B*Hq][nq][nk]
  uint8_t* reasons = nullptr;             // [B*Hq][nq][nk], core::BlockReason bits
  float* prob = nullptr;                  // [B*Hq][nq][nk]: the method's score
  int32_t* lut = nullptr;                 // [B*Hq][nq][nk] delta LUT
  int32_t* validCount = nullptr;          // [B*Hq][nq]
};
// The final mask, reasons, score, LUT and counts of the launch's heads, as core's finishMask builds them:
// selected | method-forced | dense head (the parameters' or the method's) | sink | diagonal, invalid blocks
// off (kReasonCausalOff).
void launchFinish(const MethodLaunch& l, const MethodRows& rows, const FinishArgs& a);

// XAttention (core/src/method_xattention.cpp). Statistics: the antidiagonal probability mass of every block,
// float [B*Hq][nq][nk] in `stats` (the heads of the launch; the stride of their parameters, one for all).
void xattentionStats(const MethodLaunch& l, DeviceBuffer& stats, DeviceBuffer& scratch);
// The per-row cumulative-threshold selection from MethodLaunch::stats.
void xattentionSelect(const MethodLaunch& l, MethodRows& rows, DeviceBuffer& scratch);

// The MoBA-style gate (core/src/method_moba.cpp): the block-mean keys, each query token's choice and the
// tiles and token pairs it covers. Nothing is cached: the per-token gate scores of a 32K-token head would
// take Nq x nk floats.
void mobaSelect(const MethodLaunch& l, MethodRows& rows, DeviceBuffer& scratch);

}  // namespace sparge::cuda::predictors
