// Quantized operands (INT8 Q/K per tile, FP8 or fp16 V) for the int8-fp16 and int8-fp8 numerics. Until the
// quantization kernels are part of this build, quantized numerics are refused with a clear error.
#include "launch.h"
#include "sparge/core/error.h"

namespace sparge::cuda {

size_t quantWorkspaceBytes(const Problem&, core::Numerics) {
  return 0;
}

QuantOperands launchQuantize(ElemType, const Problem&, core::Numerics n, const void*, const void*,
                             const void*, const void*, void*, cudaStream_t) {
  throw Error(std::string("--quant ") + core::toString(n),
              "this build of the CUDA engine has no quantization kernels: use --quant none or --engine cpu");
}

}  // namespace sparge::cuda
