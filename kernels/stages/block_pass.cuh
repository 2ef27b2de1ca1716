// One pass over a block of BS rows of Q or K, shared by Stage 1's statistics kernel and the fused
// statistics-and-quantization kernel so that both compute the same bits: the pooled row (fp32 sums in row
// order, rounded to the input type), the self-similarity (NaN rule) and, for the fused kernel, the largest
// |value| that the block's INT8 scale comes from. Also the INT8 rounding of the quantized numerics.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

#include "common/device_common.cuh"

namespace sparge::cuda {

__device__ __forceinline__ float warpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// NC consecutive elements of a row (one 4-, 8- or 16-byte load), as floats.
template <typename T, int NC>
__device__ __forceinline__ void loadConsecutive(const T* p, float (&v)[NC]) {
  struct alignas(sizeof(T) * NC) Pack {
    T e[NC];
  };
  const Pack pk = *reinterpret_cast<const Pack*>(p);
#pragma unroll
  for (int c = 0; c < NC; ++c) v[c] = Elem<T>::toF(pk.e[c]);
}

// The register holding NC consecutive elements of T (one 4-, 8- or 16-byte load).
template <typename T, int NC>
using RawOf =
    std::conditional_t<sizeof(T) * NC == 16, uint4, std::conditional_t<sizeof(T) * NC == 8, uint2, uint32_t>>;

// NC consecutive elements of a row as loaded (raw) less the key mean in the input precision, as floats
// (kmRaw: the mean's NC elements, or null). fp16 subtracts in pairs with HSUB2: the difference of two fp16
// values rounded once to fp16 is the fp32 difference rounded to fp16 (fp32's 24 bits are at least twice
// fp16's 11 plus 2, so the double rounding is innocuous), the bits smoothed() gives. bf16 takes smoothed()'s
// path.
template <typename T, int NC>
__device__ __forceinline__ void smoothRaw(RawOf<T, NC> raw, const T* kmRaw, float (&v)[NC]) {
  static_assert(sizeof(RawOf<T, NC>) == sizeof(T) * NC, "one register load a row part");
  if constexpr (std::is_same_v<T, __half>) {
    __half2* h = reinterpret_cast<__half2*>(&raw);
    if (kmRaw) {
      const RawOf<T, NC> m = *reinterpret_cast<const RawOf<T, NC>*>(kmRaw);
      const __half2* mh = reinterpret_cast<const __half2*>(&m);
#pragma unroll
      for (int c = 0; c < NC / 2; ++c) h[c] = __hsub2(h[c], mh[c]);
    }
#pragma unroll
    for (int c = 0; c < NC / 2; ++c) {
      const float2 f = __half22float2(h[c]);
      v[2 * c] = f.x;
      v[2 * c + 1] = f.y;
    }
  } else {
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      v[c] = Elem<T>::toF(e[c]);
      if (kmRaw) v[c] = roundT<T>(v[c] - Elem<T>::toF(kmRaw[c]));
    }
  }
}

// smoothRaw of the NC elements at p (one wide load).
template <typename T, int NC>
__device__ __forceinline__ void loadSmoothed(const T* p, const T* kmRaw, float (&v)[NC]) {
  smoothRaw<T, NC>(*reinterpret_cast<const RawOf<T, NC>*>(p), kmRaw, v);
}

// The value SpargeAttn quantizes: the input in fp32, K smoothed in the input precision.
template <typename T>
__device__ __forceinline__ float smoothed(T x, const T* km, int d) {
  if (!km) return Elem<T>::toF(x);
  return roundT<T>(Elem<T>::toF(x) - Elem<T>::toF(km[d]));
}

// SpargeAttn's INT8 rounding: round half away from zero of v = x / scale (the fp32 quotient), as v + 0.5 with
// v's sign, truncated (one bit operation for the signed half instead of a compare and a select; for -0 and
// NaN the truncation gives 0 either way).
__device__ __forceinline__ int8_t roundToInt8(float v) {
  const uint32_t pointFive = 0x3f000000u;  // in a register, so that one LOP3 makes the signed half
  uint32_t half;
  asm("lop3.b32 %0, %1, 0x80000000, %2, 0xEA;" : "=r"(half) : "r"(__float_as_uint(v)), "r"(pointFive));
  return (int8_t)__float2int_rz(v + __uint_as_float(half));
}

// Eight values of one tile quantized with its scale.
template <typename T>
__device__ __forceinline__ uint2 toInt8x8(const float (&x)[8], const Quotient& byScale) {
  uint2 packed;
  int8_t* b = reinterpret_cast<int8_t*>(&packed);
#pragma unroll
  for (int u = 0; u < 8; ++u) b[u] = roundToInt8(quotient<T>(x[u], byScale));
  return packed;
}

// The pooled row of the block from the four warps' column sums in shared memory (warp order, as the CPU
// engine adds them), written to pooled[bh][blk]; given sUnit, also each dim's squared sum of units into sSq.
template <typename T, int D>
__device__ __forceinline__ void writePooled(const float (&sCol)[4][D], const float (*sUnit)[D], float* sSq,
                                            T* __restrict__ pooled, int nValid, int blk, int bh, int nb) {
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float cs = sCol[0][d] + sCol[1][d] + sCol[2][d] + sCol[3][d];
    pooled[((size_t)bh * nb + blk) * D + d] = Elem<T>::fromF(cs / (float)nValid);
    if (sUnit) {
      const float us = sUnit[0][d] + sUnit[1][d] + sUnit[2][d] + sUnit[3][d];
      sSq[d] = us * us;
    }
  }
}

// The statistics of block `blk` of head `bh` (x: [BH][N][D], D = 32·NC), called by all 128 threads of the
// CTA (4 warps). Lane l of a warp holds dims NC·l .. NC·l + NC - 1 of a row (one wide load). Each (warp, dim)
// sums its rows in row order, so the pooled sums do not depend on the lanes' layout; a row's squared norm is
// summed in another order than with one dim a lane (the CPU engine's order differs from both; the
// self-similarities agree with it within 1e-4). With kAmax, returns the largest |value| of the block (after
// smoothing; rows past N are zero) to every thread; else 0.
template <typename T, int NC, bool kAmax>
__device__ __forceinline__ float blockStatsPass(const T* __restrict__ x, int N, int BS,
                                                const T* __restrict__ km, T* __restrict__ pooled,
                                                float* __restrict__ selfSim, int blk, int bh, int nb) {
  constexpr int D = NC * 32;
  __shared__ float sCol[4][D];
  __shared__ float sUnit[4][D];
  __shared__ float sSq[D];
  __shared__ float sMax[4];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int row0 = blk * BS;
  const int nValid = min(BS, N - row0);
  const T* base = x + (size_t)bh * N * D + NC * lane;
  float col[NC], unit[NC], kmv[NC], amax = 0.f;
#pragma unroll
  for (int c = 0; c < NC; ++c) col[c] = unit[c] = kmv[c] = 0.f;
  if (km) loadConsecutive<T, NC>(km + (size_t)bh * D + NC * lane, kmv);
  // The warp's rows r = warp, warp + 4, ... in groups of kRows, whose norms' shuffle chains interleave (one
  // row at a time, each row waited for its five dependent shuffles); the sums still take the rows in order.
  constexpr int kRows = 4;
  for (int r0 = warp; r0 < BS; r0 += 4 * kRows) {
    float v[kRows][NC], ss[kRows];
#pragma unroll
    for (int g = 0; g < kRows; ++g) {
      const int gr = row0 + r0 + 4 * g;
      const bool present = r0 + 4 * g < BS && gr < N;
      if (present) {
        loadConsecutive<T, NC>(base + (size_t)gr * D, v[g]);
      } else {
#pragma unroll
        for (int c = 0; c < NC; ++c) v[g][c] = 0.f;
      }
      ss[g] = 0.f;
#pragma unroll
      for (int c = 0; c < NC; ++c) {
        if (km && present) v[g][c] = roundT<T>(v[g][c] - kmv[c]);  // smoothing in half arithmetic
        ss[g] += v[g][c] * v[g][c];
        if (kAmax) amax = fmaxf(amax, fabsf(v[g][c]));
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
      for (int g = 0; g < kRows; ++g) ss[g] += __shfl_xor_sync(0xffffffffu, ss[g], o);
#pragma unroll
    for (int g = 0; g < kRows; ++g) {
      if (r0 + 4 * g >= BS) break;
      const Quotient byNorm(sqrtf(ss[g]));  // zero (padded or zero) rows give 0/0 = NaN: the NaN rule
#pragma unroll
      for (int c = 0; c < NC; ++c) {
        col[c] += v[g][c];
        unit[c] += __half2float(__float2half_rn(quotient<T>(v[g][c], byNorm)));  // fp16 even for bf16
      }
    }
  }
#pragma unroll
  for (int c = 0; c < NC; ++c) {
    sCol[warp][NC * lane + c] = col[c];
    sUnit[warp][NC * lane + c] = unit[c];
  }
  if (kAmax) {
    amax = warpMax(amax);
    if (lane == 0) sMax[warp] = amax;
  }
  __syncthreads();
  writePooled<T, D>(sCol, sUnit, sSq, pooled, nValid, blk, bh, nb);
  __syncthreads();
  if (warp == 0) {
    float s = 0.f;
    for (int d = lane; d < D; d += 32) s += sSq[d];
    s = warpSum(s);
    if (lane == 0) selfSim[(size_t)bh * nb + blk] = s / ((float)nValid * (float)nValid);
  }
  return kAmax ? fmaxf(fmaxf(sMax[0], sMax[1]), fmaxf(sMax[2], sMax[3])) : 0.f;
}

// blockStatsPass for a caller that reads the self-similarity s only as the flag s > θ with every θ < 0
// (SpargeAttn's top-k default θ = -0.1): there s >= 0 always passes, and only a NaN s (a zero row, or a
// non-finite value) fails. A block whose rows each hold some |value| >= 2^-40 and whose values are all finite
// cannot give a NaN: every row's norm is then at least its largest |value| (1 - 2^-17), so no unit value
// exceeds 1 + 2^-16 and every sum stays finite. Such a block is written s = 0, which passes every θ < 0 as
// its value would, without the norms, units and their sums (most of the pass's instructions); any other block
// (the partial last one, zero rows, NaN or inf) runs blockStatsPass again for its exact s. The pooled row
// and the amax are the same bits as blockStatsPass's.
template <typename T, int NC, bool kAmax>
__device__ __forceinline__ float blockStatsPassSimFlag(const T* __restrict__ x, int N, int BS,
                                                       const T* __restrict__ km, T* __restrict__ pooled,
                                                       float* __restrict__ selfSim, int blk, int bh, int nb) {
  constexpr int D = NC * 32;
  __shared__ float sCol[4][D];
  __shared__ float sMax[4];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int row0 = blk * BS;
  const int nValid = min(BS, N - row0);
  const T* base = x + (size_t)bh * N * D + NC * lane;
  float col[NC], amax = 0.f;
  bool rowsNonZero = true;  // every row of the warp holds some |value| >= 2^-40 (the same in every lane)
#pragma unroll
  for (int c = 0; c < NC; ++c) col[c] = 0.f;
  RawOf<T, NC> kmRaw{};  // the lane's mean elements, kept as loaded for loadSmoothed
  if (km) kmRaw = *reinterpret_cast<const RawOf<T, NC>*>(km + (size_t)bh * D + NC * lane);
  // Rows r = warp, warp + 4, ..., each (warp, dim) summing them in row order as blockStatsPass does; a
  // group's loads all go out before its first use (the work a row is short, so more rows a group than there).
  constexpr int kRows = 8;
  for (int r0 = warp; r0 < BS; r0 += 4 * kRows) {
    float v[kRows][NC];
#pragma unroll
    for (int g = 0; g < kRows; ++g) {
      const int gr = row0 + r0 + 4 * g;
      const bool present = r0 + 4 * g < BS && gr < N;
      if (present) {
        loadSmoothed<T, NC>(base + (size_t)gr * D, km ? reinterpret_cast<const T*>(&kmRaw) : nullptr, v[g]);
      } else {
#pragma unroll
        for (int c = 0; c < NC; ++c) v[g][c] = 0.f;
      }
    }
#pragma unroll
    for (int g = 0; g < kRows; ++g) {
      if (r0 + 4 * g >= BS) break;
      float rowMax = 0.f;
#pragma unroll
      for (int c = 0; c < NC; ++c) {
        rowMax = fmaxf(rowMax, fabsf(v[g][c]));
        col[c] += v[g][c];
      }
      amax = fmaxf(amax, rowMax);
      rowsNonZero = rowsNonZero && __any_sync(0xffffffffu, rowMax >= 0x1p-40f);
    }
  }
  bool regular = rowsNonZero;
#pragma unroll
  for (int c = 0; c < NC; ++c) {
    sCol[warp][NC * lane + c] = col[c];
    regular = regular && isfinite(col[c]);  // a NaN or inf value leaves its column's sum non-finite
  }
  amax = warpMax(amax);
  if (lane == 0) sMax[warp] = amax;
  if (!__syncthreads_and(regular))
    return blockStatsPass<T, NC, kAmax>(x, N, BS, km, pooled, selfSim, blk, bh, nb);
  writePooled<T, D>(sCol, nullptr, nullptr, pooled, nValid, blk, bh, nb);
  if (threadIdx.x == 0) selfSim[(size_t)bh * nb + blk] = 0.f;
  return kAmax ? fmaxf(fmaxf(sMax[0], sMax[1]), fmaxf(sMax[2], sMax[3])) : 0.f;
}

}  // namespace sparge::cuda
