// TMA descriptors on the host: cuTensorMapEncodeTiled through the runtime's driver entry point, so that no
// target links libcuda. Used by the Hopper attention kernels and the TMA streaming benchmark.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace sparge::cuda {

// A [d2][d1][d0] tensor of `elemBytes` elements read in boxes of box2 x box1 x box0 elements, 128-byte
// swizzled when a box row is 128 bytes wide, else 64-byte; L2 promotion of 256 bytes; reads past the extent
// are zero. Throws sparge::Error when the driver has no TMA or refuses the layout.
CUtensorMap tensorMap3d(const void* base, CUtensorMapDataType type, int elemBytes, uint64_t d0, uint64_t d1,
                        uint64_t d2, uint32_t box0, uint32_t box1, uint32_t box2 = 1);

}  // namespace sparge::cuda
