// The Hopper attention kernels of head dim 64 in exact fp16/bf16 numerics (both element types).
#include "attention/sm90/launch_template.cuh"

namespace sparge::cuda::sm90 {
template void launchSm90<64, core::Numerics::None>(ElemType, const Problem&, const AttnArgs&, bool,
                                                   cudaStream_t);
}  // namespace sparge::cuda::sm90
