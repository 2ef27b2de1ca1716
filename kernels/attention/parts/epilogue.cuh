// Epilogue of every attention family: normalise the output rows of one fragment by their denominator l,
// multiply the per-channel V scale of the FP8 numerics, store in the output type, and count rows that saw no
// key (written as 0). Fragment layout as in online_softmax.cuh.
#pragma once

#include <cstdint>

#include "common/device_common.cuh"

namespace sparge::cuda {

// acc[dt][e]: row row0 + 8 * (e / 2), column 8 * dt + col0 + (e % 2); gO points at row 0 of the head.
// vScale (may be null) holds one factor per column.
template <typename T, int DT>
__device__ __forceinline__ void storeRows(T* gO, int D, const float (&acc)[DT][4], const float (&l)[2],
                                          int row0, int col0, int nQ, const float* vScale, int* emptyRows) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float lr = quadSum(l[r]);
    const int row = row0 + 8 * r;
    if (row >= nQ) continue;
    const float inv = lr > 0.f ? 1.f / lr : 0.f;  // a row with no attended key is written as 0
    if (lr == 0.f && col0 == 0 && emptyRows) atomicAdd(emptyRows, 1);
#pragma unroll
    for (int dt = 0; dt < DT; ++dt) {
      const int col = dt * 8 + col0;
      float a = acc[dt][2 * r] * inv, b = acc[dt][2 * r + 1] * inv;
      if (vScale) {
        a *= vScale[col];
        b *= vScale[col + 1];
      }
      *reinterpret_cast<uint32_t*>(gO + (size_t)row * D + col) = Elem<T>::pack(a, b);
    }
  }
}

}  // namespace sparge::cuda
