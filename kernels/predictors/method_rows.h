// What every device block predictor other than SpargeAttn's Stage 1 (core/predictor.h's other methods)
// hands to the shared finish: per block its own selection and the blocks it keeps regardless, its block
// score, and per head whether it ended dense and the token pairs it chose. One layout for all methods, so
// that the final mask, reasons, LUT and counts are built by one kernel as core's finishMask builds them.
#pragma once

#include <cstdint>
#include <vector>

#include "common/cuda_util.h"
#include "common/launch.h"
#include "engine/device_stages.h"
#include "sparge/core/params.h"

namespace sparge::cuda::predictors {

// Device outputs, [B*Hq][nq][nk] row-major unless noted; only the heads of Problem::heads are written.
struct MethodRows {
  uint8_t* selected = nullptr;      // the method's own choice (core::kReasonSelected)
  uint8_t* methodForced = nullptr;  // blocks the method keeps whatever it selects (core::kReasonMethod)
  float* score = nullptr;           // the method's block score (Stage1Mask::pooledProb of the CPU predictor)
  uint8_t* denseHead = nullptr;     // [B*Hq]: 1 where the method itself ends the head dense
  double* elementPairs = nullptr;   // [B*Hq]: Stage1Mask::elementPairs (NaN where the method counts blocks)
};

// Everything a method's launch reads. `params` is host memory indexed by query head (Hq entries); a method
// uploads what its kernels need of it into its own scratch. `blockFlags` is the geometry's [nq][nk]
// BlockFlags on the device (validity and diagonal, the same for every head).
struct MethodLaunch {
  DeviceQkv qkv;
  Problem problem;
  double scale = 0;  // the entry's softmax scale (PredictInput::scale)
  const uint8_t* blockFlags = nullptr;
  const std::vector<core::HeadParams>* params = nullptr;
  cudaStream_t stream = nullptr;
  // Added for methods whose statistics the engine caches (DevicePredictor::stats): the host copy of
  // Problem::heads, and the cached statistics a selection reads (null for methods without).
  const std::vector<int>* heads = nullptr;
  const DeviceBuffer* stats = nullptr;
};

}  // namespace sparge::cuda::predictors
