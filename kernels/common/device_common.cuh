// Device helpers shared by the kernel families: element conversions, exp2, e4m3 packing and the causal
// block rule of Stage 1.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
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

// m, or 0 where m is -inf: exp(x - finiteOr0(m)) is then exp(-inf) = 0 for the -inf scores of a run no
// query sees, without a branch and without -inf - -inf, and equal to exp(x - m) otherwise.
__device__ __forceinline__ float finiteOr0(float m) {
  return m == -INFINITY ? 0.f : m;
}

// Maximum and sum over the lane quad (lanes 4g .. 4g + 3) that holds a row of an MMA accumulator fragment.
__device__ __forceinline__ float quadMax(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quadSum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Four floats to e4m3 (round to nearest even, saturating to ±448), a in the lowest byte.
__device__ __forceinline__ uint32_t packE4m3x4(float a, float b, float c, float d) {
  const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
  const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(c, d), __NV_SATFINITE, __NV_E4M3);
  return lo | (hi << 16);
}

// core::blockValid on the device: block (i, j) holds at least one pair with key <= query (top-left).
__device__ __forceinline__ bool blockValidDev(int i, int j, int BQ, int BK, int Nq, bool causal) {
  if (!causal) return true;
  int lastQ = min((i + 1) * BQ, Nq) - 1;
  return j * BK <= lastQ;
}

}  // namespace sparge::cuda
