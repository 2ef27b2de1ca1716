// The Hopper attention kernel's launchers per (head dim, numerics), each compiled in its own instantiation
// file (instantiations/) so that builds run them in parallel.
#pragma once

#include <cuda_runtime.h>

#include "common/launch.h"
#include "sparge/core/types.h"

namespace sparge::cuda::sm90 {

// Launches the kernel of head dim D and numerics N for element type t (launchAttentionSm90 dispatches).
template <int D, core::Numerics N>
void launchSm90(ElemType t, const Problem& p, const AttnArgs& a, bool dense, cudaStream_t s);

extern template void launchSm90<64, core::Numerics::None>(ElemType, const Problem&, const AttnArgs&, bool,
                                                          cudaStream_t);
extern template void launchSm90<64, core::Numerics::Int8Fp8>(ElemType, const Problem&, const AttnArgs&, bool,
                                                             cudaStream_t);
extern template void launchSm90<128, core::Numerics::None>(ElemType, const Problem&, const AttnArgs&, bool,
                                                           cudaStream_t);
extern template void launchSm90<128, core::Numerics::Int8Fp8>(ElemType, const Problem&, const AttnArgs&, bool,
                                                              cudaStream_t);

}  // namespace sparge::cuda::sm90
