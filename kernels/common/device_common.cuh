// Device helpers shared by the kernel families: element conversions, exp2, exact quotients by a shared
// divisor, e4m3 packing and the causal block rule of Stage 1.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

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

// Quotients by one divisor b, each bit for bit the IEEE one (a / b rounded to nearest) in three instructions
// instead of a division's ~10 with its range check and branch: from r = 1/b rounded to nearest, q = a·r, the
// residual a - b·q (exact in an FMA) and q + residual·r round to a/b (Markstein's theorem; every significand
// of a against 3,000 of b checked on the CPU). The theorem needs r, q and the residual normal: true for the
// operands of the callers when they come from fp16 values (nonzero magnitudes 2^-24 .. 65504, divisors a
// norm of such values or amax/127 + 1e-7, so 2^-24 .. 2^21), which kExactFor says; bf16 values reach fp32's
// exponent range, where quotients may underflow, so those are divided. The special values agree too: b = 0
// (a zero norm) gives NaN like 0/0; b = inf is clamped to the largest float so that a finite a gives 0 and
// inf gives NaN; a NaN b gives NaN; a zero a may come out +0 for -0, which no caller tells apart.
struct Quotient {
  template <typename T>
  static constexpr bool kExactFor = std::is_same_v<T, __half>;
  float divisor, b, r;
  __device__ __forceinline__ explicit Quotient(float d) {  // the host pass sees no intrinsics here
    divisor = d;
    b = fminf(d, 3.402823466e38f);
    r = __frcp_rn(d);
  }
  __device__ __forceinline__ float operator()(float a) const {
    const float q = __fmul_rn(a, r);
    return __fmaf_rn(__fmaf_rn(-b, q, a), r, q);
  }
};

// a / b for operands that come from values of type T: Markstein's quotient where it is exact, else the
// division.
template <typename T>
__device__ __forceinline__ float quotient(float a, const Quotient& byB) {
  if constexpr (Quotient::kExactFor<T>)
    return byB(a);
  else
    return a / byB.divisor;
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
