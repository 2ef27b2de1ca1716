// Which blocks a query tile visits and which keys each of its rows sees: core::visibleKeys on the device
// (causal top-left and a local window), the dense walk over every visible block, the delta-LUT walk of
// Stage 1, and the PV-skip eligibility rule. Shared by every attention family.
#pragma once

#include <cstdint>

#include "common/launch.h"

namespace sparge::cuda {

// The keys [first(q), last(q)] query q may see; -1 = unbounded on that side (see core::visibleKeys).
struct Visibility {
  int nKv = 0;
  int left = -1;
  int right = -1;  // causal is right = 0, whatever the window says

  static Visibility make(const Problem& p) {
    Visibility v;
    v.nKv = p.Nkv;
    // Bounds beyond every token are unbounded; that keeps q ± bound inside int range.
    const int64_t big = int64_t(p.Nq) + int64_t(p.Nkv);
    v.left = p.window.left < 0 || p.window.left >= big ? -1 : int(p.window.left);
    v.right = p.causal ? 0 : (p.window.right < 0 || p.window.right >= big ? -1 : int(p.window.right));
    return v;
  }
  __device__ __forceinline__ int first(int q) const { return left >= 0 ? max(0, q - left) : 0; }
  __device__ __forceinline__ int last(int q) const { return right >= 0 ? min(nKv - 1, q + right) : nKv - 1; }
  // Rows q0..q1 (q1 = last real row of the tile) all see every key of [k0, k0 + bk)? first() and last()
  // never decrease with q, so the extreme rows decide. Blocks that are not fully visible get element masks,
  // with a window the first blocks of a row as well as the tail.
  __device__ __forceinline__ bool fullyVisible(int q0, int q1, int k0, int bk) const {
    return k0 >= first(q1) && k0 + bk - 1 <= last(q0);
  }
};

// The key blocks one query tile visits, in order: the delta LUT of Stage 1 (first entry absolute, then
// differences) or, for the dense path, every block that holds a visible key of the tile.
template <bool kDense>
struct BlockWalk {
  const int32_t* lut = nullptr;
  int n = 0;   // number of visited blocks
  int j0 = 0;  // first block (dense)

  __device__ __forceinline__ static BlockWalk make(const Visibility& vis, int q0, int q1, int bk,
                                                   const int32_t* lutRow, const int32_t* validCount) {
    BlockWalk w;
    if constexpr (kDense) {
      w.j0 = vis.first(q0) / bk;
      const int j1 = vis.last(q1) / bk;
      w.n = vis.last(q1) < vis.first(q0) ? 0 : max(0, j1 - w.j0 + 1);
    } else {
      w.lut = lutRow;
      w.n = *validCount;
    }
    return w;
  }
  __device__ __forceinline__ int first() const {
    if constexpr (kDense) return j0;
    return lut[0];
  }
  // Block of iteration t, given block j of iteration t - 1.
  __device__ __forceinline__ int advance(int j, int t) const {
    if constexpr (kDense) return j + 1;
    return j + lut[t];
  }
};

// PV skip eligibility (docs/method.md): never the first visited block (no running max yet), never the last
// `tail` visited blocks (they carry the diagonal and kv-length element masks).
__device__ __forceinline__ bool skipEligible(int t, int n, int tail) {
  return t >= 1 && t < n - tail;
}

}  // namespace sparge::cuda
