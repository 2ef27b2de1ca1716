// Host TMA descriptors (tma_map.h).
#include "attention/sm90/tma_map.h"

#include <cuda_runtime.h>

#include <string>

#include "common/cuda_util.h"
#include "sparge/core/error.h"

namespace sparge::cuda {
namespace {

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*,
                                 CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                 CUtensorMapFloatOOBfill);

EncodeTiled encodeTiled() {
  static EncodeTiled fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    check(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q),
          "cudaGetDriverEntryPointByVersion(cuTensorMapEncodeTiled)");
    if (!f || q != cudaDriverEntryPointSuccess)
      throw Error("CUDA engine", "the driver has no cuTensorMapEncodeTiled (TMA); update the NVIDIA driver");
    return reinterpret_cast<EncodeTiled>(f);
  }();
  return fn;
}

}  // namespace

CUtensorMap tensorMap3d(const void* base, CUtensorMapDataType type, int elemBytes, uint64_t d0, uint64_t d1,
                        uint64_t d2, uint32_t box0, uint32_t box1, uint32_t box2) {
  CUtensorMap map;
  const cuuint64_t dims[3] = {d0, d1, d2};
  const cuuint64_t strides[2] = {d0 * elemBytes, d0 * d1 * elemBytes};
  const cuuint32_t box[3] = {box0, box1, box2};
  const cuuint32_t elemStrides[3] = {1, 1, 1};
  const CUtensorMapSwizzle sw =
      box0 * elemBytes == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B;
  const CUresult r = encodeTiled()(&map, type, 3, const_cast<void*>(base), dims, strides, box, elemStrides,
                                   CU_TENSOR_MAP_INTERLEAVE_NONE, sw, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                   CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw Error("CUDA engine", "cuTensorMapEncodeTiled failed (error " + std::to_string(int(r)) + ")");
  return map;
}

}  // namespace sparge::cuda
