// Float to 16-bit float bits on the host, as the CUDA engine uploads an entry. Plain host code (no device
// needed), tested against CUDA's own host conversions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/launch.h"  // ElemType

namespace sparge::cuda {

// Writes n values of x as fp16 or bf16 bits, rounded to nearest even: the bits of __float2half_rn /
// __float2bfloat16_rn for every finite value and infinity (a NaN stays a NaN). Returns whether any value
// was NaN or ±Inf, found in the same pass.
bool toHalfBits(const float* x, size_t n, uint16_t* out, ElemType t);

}  // namespace sparge::cuda
