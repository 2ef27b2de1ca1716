// The Hopper attention kernels of head dim 64 in int8-fp8 numerics (both element types).
#include "attention/sm90/launch_template.cuh"

namespace sparge::cuda::sm90 {
template void launchSm90<64, core::Numerics::Int8Fp8>(ElemType, const Problem&, const AttnArgs&, bool,
                                                      cudaStream_t);
}  // namespace sparge::cuda::sm90
