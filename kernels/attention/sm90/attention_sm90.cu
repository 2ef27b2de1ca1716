// Stage 2 on Hopper (sm_90a): whether the Hopper kernel runs a launch, and the dispatch of a launch to the
// instantiation of its head dim and numerics. The kernel itself: kernel.cuh and the parts it includes.
#include <cuda_runtime.h>

#include <string>

#include "attention/sm90/launch_sm90.h"
#include "common/launch.h"
#include "sparge/core/error.h"

namespace sparge::cuda {
namespace sm90 {
int64_t gSm90Launches = 0;
}  // namespace sm90

using core::Numerics;

bool attentionSm90Selected(const Problem& p, core::Numerics n, AttnFamily family) {
  if (family == AttnFamily::Sm80) return false;
  // D 256 has no wgmma kernel: it runs the mma.sync family (kernel names end in _sm80), as do the quantized
  // numerics at 128x64.
  const bool g64x128 = p.BQ == 64 && p.BK == 128, g128x64 = p.BQ == 128 && p.BK == 64;
  if (!(g64x128 || (g128x64 && n == Numerics::None)) || (p.D != 64 && p.D != 128)) return false;
  if (n == Numerics::Int8Fp16) return false;  // fp16-accumulated P·V: the mma.sync family
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) return false;
  return major == 9 && minor == 0;
}

int64_t attentionSm90LaunchCount() {
  return sm90::gSm90Launches;
}

void launchAttentionSm90(ElemType t, const Problem& p, const AttnArgs& a, bool dense, cudaStream_t s) {
  if (a.numerics == Numerics::Int8Fp16)
    throw Error("CUDA engine", "the Hopper kernel has no int8-fp16 numerics (the mma.sync family runs it)");
  const bool fp8 = a.numerics == Numerics::Int8Fp8;
  if (p.D == 64) {
    if (fp8)
      sm90::launchSm90<64, Numerics::Int8Fp8>(t, p, a, dense, s);
    else
      sm90::launchSm90<64, Numerics::None>(t, p, a, dense, s);
  } else if (p.D == 128) {
    if (fp8)
      sm90::launchSm90<128, Numerics::Int8Fp8>(t, p, a, dense, s);
    else
      sm90::launchSm90<128, Numerics::None>(t, p, a, dense, s);
  } else {  // attentionSm90Selected sends other head dims (D 256) to the mma.sync family
    throw Error("CUDA engine", "the Hopper kernel runs head dim 64 or 128, not " + std::to_string(p.D) +
                                   " (the mma.sync family runs it)");
  }
}

}  // namespace sparge::cuda
