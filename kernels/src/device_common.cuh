// Device helpers shared by the kernel families: element conversions and the causal block rule.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace sparge::cuda {

template <typename T>
struct Elem;
template <>
struct Elem<__half> {
  static __device__ __forceinline__ float toF(__half x) { return __half2float(x); }
  static __device__ __forceinline__ __half fromF(float x) { return __float2half_rn(x); }
  static __device__ __forceinline__ uint32_t pack(float a, float b) {
    __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<uint32_t*>(&h);
  }
};
template <>
struct Elem<__nv_bfloat16> {
  static __device__ __forceinline__ float toF(__nv_bfloat16 x) { return __bfloat162float(x); }
  static __device__ __forceinline__ __nv_bfloat16 fromF(float x) { return __float2bfloat16_rn(x); }
  static __device__ __forceinline__ uint32_t pack(float a, float b) {
    __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<uint32_t*>(&h);
  }
};

// Rounds to the input precision (SpargeAttn keeps Stage-1 intermediates in the input half dtype).
template <typename T>
__device__ __forceinline__ float roundT(float x) {
  return Elem<T>::toF(Elem<T>::fromF(x));
}

// core::blockValid on the device: block (i, j) holds at least one pair with key <= query (top-left).
__device__ __forceinline__ bool blockValidDev(int i, int j, int BQ, int BK, int Nq, bool causal) {
  if (!causal) return true;
  int lastQ = min((i + 1) * BQ, Nq) - 1;
  return j * BK <= lastQ;
}

}  // namespace sparge::cuda
