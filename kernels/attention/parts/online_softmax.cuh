// Base-2 online softmax on MMA accumulator fragments, shared by the mma.sync and wgmma families.
// A fragment is one 16-row slice of a warp: float s[NT][4], element [nt][e] at row row0 + 8 * (e / 2) and
// column col0 + 8 * nt + (e % 2), where row0 = 16-row base + lane / 4 and col0 = 2 * (lane % 4) (the C layout
// of mma.sync m16n8 and of wgmma m64nN per warp). Each thread owns two rows; a row lives in a lane quad.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>

#include "common/device_common.cuh"
#include "attention/parts/block_walk.cuh"

namespace sparge::cuda {

// FP8 P·V: P = exp2(s - m + kFp8POffset) lies in [0, 448] (the e4m3 maximum) before it is rounded to e4m3;
// the denominator carries the same factor, so it cancels.
constexpr float kFp8POffset = 8.807f;

// Integer Q·Kᵀ accumulators to float. |S| <= 127² · D < 2^22 (D <= 256), so the value is exact (any rounding
// mode). sm_86 and later convert on the integer pipe (I2FP); sm_80's I2F is a quarter-rate instruction, so
// there the value is placed in the mantissa of 1.5 · 2^23 and the bias removed (two full-rate ops).
template <int NT>
__device__ __forceinline__ void intToFloat(const int32_t (&si)[NT][4], float (&s)[NT][4]) {
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 860
      s[nt][e] = __int2float_rn(si[nt][e]);
#else
      constexpr int kBiasBits = 0x4B400000;  // 12582912.0f = 1.5 · 2^23
      s[nt][e] = __int_as_float(si[nt][e] + kBiasBits) - 12582912.f;
#endif
    }
}

// Row maxima of integer Q·Kᵀ accumulators in a block whose keys are all visible, as floats: the conversion
// is exact and monotone, so these are rowMax of the converted scores, bit for bit. Taken from the integers,
// the maxima do not wait for the 64 conversions (half-rate instructions), which ptxas can then place
// among the exponentials.
template <int NT>
__device__ __forceinline__ void rowMaxInt(const int32_t (&si)[NT][4], float (&rmax)[2]) {
  int mx[2] = {max(si[0][0], si[0][1]), max(si[0][2], si[0][3])};
#pragma unroll
  for (int nt = 1; nt < NT; ++nt) {
    mx[0] = max(mx[0], max(si[nt][0], si[nt][1]));
    mx[1] = max(mx[1], max(si[nt][2], si[nt][3]));
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    mx[r] = max(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
    mx[r] = max(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
    rmax[r] = __int2float_rn(mx[r]);
  }
}

// Keys a row may not see become -inf (only called for blocks that are not fully visible).
template <int NT>
__device__ __forceinline__ void maskFragment(float (&s)[NT][4], int row0, int col0, const Visibility& vis) {
  int lo[2], hi[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    lo[r] = vis.first(row0 + 8 * r);
    hi[r] = vis.last(row0 + 8 * r);
  }
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = e >> 1, col = col0 + 8 * nt + (e & 1);
      if (col < lo[r] || col > hi[r]) s[nt][e] = -INFINITY;
    }
}

// Row maxima of the raw scores, reduced over the lane quad that holds a row.
template <int NT>
__device__ __forceinline__ void rowMax(const float (&s)[NT][4], float (&rmax)[2]) {
  rmax[0] = rmax[1] = -INFINITY;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    rmax[0] = fmaxf(rmax[0], fmaxf(s[nt][0], s[nt][1]));
    rmax[1] = fmaxf(rmax[1], fmaxf(s[nt][2], s[nt][3]));
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) rmax[r] = quadMax(rmax[r]);
}

// The PV-skip statistic of this thread's rows: max of (new block max - running max), +inf for a row that has
// no running max yet; rows with no visible key in the block do not vote. Rows past nQ (the padding of a
// partial last query tile) do not vote in exact numerics; in quantized numerics (kPaddedRowsVote) they vote
// with a rise of 0, as SpargeAttn's kernels and the CPU emulation do (docs/numerics.md, Stage 2 step 3):
// their INT8 Q rows are zero, so their scores are 0 and their maxima stop rising after the first block, and
// such a tile skips only when λ = 0. The block is skipped iff the tile-wide maximum + λ <= 0.
// Written without branches: it runs once a block on the softmax's critical path, and the branches of the
// earlier form (a convergence region per row) cost issue slots that the Hopper int8-fp8 kernel, bound by
// them, lacks (kernels/NOTES.md). The plain difference gives
// every case its rise, so no select tells them apart: a row with no max yet (m = -inf) rises by +inf once it
// sees a key; a row with no visible key in the block (rmax = -inf) rises by -inf, or by NaN (-inf + inf)
// while it has no max either; fmaxf drops a NaN (also that of NaN scores) like the -inf of a row that does
// not vote.
template <bool kPaddedRowsVote>
__device__ __forceinline__ float maxRise(const float (&rmax)[2], const float (&m)[2], int row0, int nQ) {
  float d = -INFINITY;
#pragma unroll
  for (int r = 0; r < 2; ++r)
    d = fmaxf(d, row0 + 8 * r >= nQ ? (kPaddedRowsVote ? 0.f : -INFINITY) : rmax[r] - m[r]);
  return d;
}

// New running max from the block maxima (base-2 units) and the factor `alpha` that takes what was summed so
// far to it; l is rescaled here, unless kScaleL is false (its caller rescales l with O, later). Returns in
// `muse` the max the exponentials subtract (0 for a row that has seen no key yet: its scores are -inf).
template <bool kScaleL = true>
__device__ __forceinline__ void updateRowMax(float (&m)[2], float (&l)[2], const float (&rmax)[2],
                                             float (&muse)[2], float (&alpha)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float mnew = fmaxf(m[r], rmax[r]);
    muse[r] = finiteOr0(mnew);
    alpha[r] = ex2(m[r] - muse[r]);  // m = -inf gives 0: nothing accumulated yet
    m[r] = mnew;
    if constexpr (kScaleL) l[r] *= alpha[r];
  }
}

// The DT output tiles times their rows' alpha.
template <int DT>
__device__ __forceinline__ void scaleRows(float (&acc)[DT][4], const float (&alpha)[2]) {
#pragma unroll
  for (int dt = 0; dt < DT; ++dt) {
    acc[dt][0] *= alpha[0];
    acc[dt][1] *= alpha[0];
    acc[dt][2] *= alpha[1];
    acc[dt][3] *= alpha[1];
  }
}

// updateRowMax, and the DT output tiles rescaled at once. Once the running maxima settle, no row of a warp
// changes its max in most blocks: with kSkipOnes the warp then skips the multiplications by 1 (same bits).
// Call from warp-uniform code.
template <bool kSkipOnes, int DT>
__device__ __forceinline__ void rescaleRows(float (&m)[2], float (&l)[2], float (&acc)[DT][4],
                                            const float (&rmax)[2], float (&muse)[2]) {
  float alpha[2];
  updateRowMax(m, l, rmax, muse, alpha);
  if (kSkipOnes && __all_sync(0xffffffffu, alpha[0] == 1.f && alpha[1] == 1.f)) return;
  scaleRows(acc, alpha);
}

// How the denominator sums P: the unrounded fp32 values, P rounded to fp16 (what the fp16 P·V sees), or not
// here (None: the tensor cores sum it beside P·V).
enum class RowSum { Fp32, Half, None };

// s <- P = exp2(s · scale - m + offset); l += Σ P per row (but for RowSum::None).
template <RowSum kSum, int NT>
__device__ __forceinline__ void exponentiate(float (&s)[NT][4], const float (&muse)[2], float scale,
                                             float offset, float (&l)[2]) {
  const float neg[2] = {offset - muse[0], offset - muse[1]};
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) s[nt][e] = ex2(fmaf(s[nt][e], scale, neg[e >> 1]));
    if constexpr (kSum == RowSum::Half) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] = __half2float(__float2half_rn(s[nt][e]));
    }
    if constexpr (kSum != RowSum::None) {
      l[0] += s[nt][0] + s[nt][1];
      l[1] += s[nt][2] + s[nt][3];
    }
  }
}

// P as the A operand of a k16 MMA in 16-bit type T: pf[k][0..3] for keys 16k .. 16k + 15.
template <typename T, int NT>
__device__ __forceinline__ void packP16(const float (&s)[NT][4], uint32_t (&pf)[NT / 2][4]) {
#pragma unroll
  for (int k = 0; k < NT / 2; ++k) {
    pf[k][0] = Elem<T>::pack(s[2 * k][0], s[2 * k][1]);
    pf[k][1] = Elem<T>::pack(s[2 * k][2], s[2 * k][3]);
    pf[k][2] = Elem<T>::pack(s[2 * k + 1][0], s[2 * k + 1][1]);
    pf[k][3] = Elem<T>::pack(s[2 * k + 1][2], s[2 * k + 1][3]);
  }
}

// P rounded to e4m3 (nearest, saturating) as the A operand of a k32 MMA: register k of a 16-key group holds
// keys {2c, 2c+1, 8+2c, 9+2c} (c = lane % 4) of the group, which is why the FP8 V layout permutes tokens
// inside every group of 16 (see quantize.cu).
template <int NT>
__device__ __forceinline__ void packPE4m3(const float (&s)[NT][4], uint32_t (&pf)[NT / 4][4]) {
#pragma unroll
  for (int k = 0; k < NT / 4; ++k)
#pragma unroll
    for (int g = 0; g < 2; ++g) {
      const int a = 4 * k + 2 * g, b = a + 1;
      pf[k][2 * g] = packE4m3x4(s[a][0], s[a][1], s[b][0], s[b][1]);
      pf[k][2 * g + 1] = packE4m3x4(s[a][2], s[a][3], s[b][2], s[b][3]);
    }
}

// Two-level accumulation: the block's P·V (fresh accumulator) is added to the fp32 output, whose rescale by
// the block's alpha (updateRowMax) was deferred to this add: O = O · alpha + block, one FMA an element.
template <int DT, int DB>
__device__ __forceinline__ void addBlockRescaled(float (&acc)[DT][4], const float (&alpha)[2],
                                                 const float (&blk)[DB][4]) {
#pragma unroll
  for (int dt = 0; dt < DT; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[dt][e] = fmaf(acc[dt][e], alpha[e >> 1], blk[dt][e]);
}

}  // namespace sparge::cuda
