// The Hopper attention kernel's tile scheduler: which query tiles a CTA holds (longest causal rows first),
// their block walks, and whether the CTA splits its stages into one ring per tile.
#pragma once

#include "attention/parts/block_walk.cuh"
#include "attention/sm90/kernel_traits.cuh"

namespace sparge::cuda::sm90 {

#ifdef SPARGE_SM90A_DEVICE

// The value of a per-tile array for tile w: constant indices keep such arrays in registers (a runtime index
// put them in local memory).
template <class A, int N>
__device__ __forceinline__ A pick(const A (&a)[N], int w) {
  A r = a[0];
#pragma unroll
  for (int x = 1; x < N; ++x)
    if (w == x) r = a[x];
  return r;
}

// The CTA's N adjacent 64-row query tiles and their walks, computed the same way by every thread. Tile i
// lies in LUT row i / Tr::kTilesPerRow.
template <class Tr, bool kDense>
struct CtaTiles {
  static constexpr int N = Tr::kConsumers;
  int i[N];
  BlockWalk<kDense> walk[N];
  int bhq, bhk, hq, tiles;  // tiles: 64-row query tiles of a head

  __device__ __forceinline__ static CtaTiles make(const KParams<typename Tr::T>& p) {
    CtaTiles tp;
    const int c = gridDim.x - 1 - blockIdx.x;  // longest causal rows first
    tp.hq = p.heads[blockIdx.y];
    tp.bhq = blockIdx.z * p.Hq + tp.hq;
    tp.bhk = blockIdx.z * p.Hkv + tp.hq / (p.Hq / p.Hkv);
    tp.tiles = (p.Nq + kBQ - 1) / kBQ;
#pragma unroll
    for (int w = 0; w < N; ++w) {
      tp.i[w] = N * c + w;
      const int q0 = tp.i[w] * kBQ, q1 = min(q0 + kBQ, p.Nq) - 1;
      const size_t row = tp.lutRow(p, w);
      if (tp.walks(p, w))
        tp.walk[w] = BlockWalk<kDense>::make(p.vis, q0, q1, Tr::kBK, kDense ? nullptr : p.lut + row * p.nk,
                                             kDense ? nullptr : p.validCount + row);
      else
        tp.walk[w].n = 0;
    }
    return tp;
  }
  // Whether tile w walks: every tile of the head in dense walks; in sparse ones also the padding tile of a
  // 128-row block whose second half lies past the last query, which walks its row with its partner (it has
  // no rows that vote and stores nothing) so that both halves meet at every vote.
  __device__ __forceinline__ bool walks(const KParams<typename Tr::T>& p, int w) const {
    const int x = pick(i, w);
    return kDense ? x < tiles : x / Tr::kTilesPerRow < p.nq;
  }
  // Index of tile w's LUT row over all heads (its validCount, PV-skip map row and int8 Q scale).
  __device__ __forceinline__ size_t lutRow(const KParams<typename Tr::T>& p, int w) const {
    return (size_t)bhq * p.nq + pick(i, w) / Tr::kTilesPerRow;
  }
  __device__ __forceinline__ int n(int w) const {
    int x[N];
#pragma unroll
    for (int v = 0; v < N; ++v) x[v] = walk[v].n;
    return pick(x, w);
  }
  __device__ __forceinline__ bool empty() const {
    bool any = false;
#pragma unroll
    for (int w = 0; w < N; ++w) any |= walk[w].n > 0;
    return !any;
  }
  // The tiles as the producer of tile w's ring sees them in split walks: the other tiles' walks empty.
  __device__ __forceinline__ CtaTiles only(int w) const {
    CtaTiles tp = *this;
#pragma unroll
    for (int x = 0; x < N; ++x)
      if (x != w) tp.walk[x].n = 0;
    return tp;
  }
};

// Does the CTA split its stages into one ring per tile? Where its tiles visit less than Tr::kSplitBelow of
// their visible blocks (the rule is per CTA, so rows that agree, as in dense regions of real masks, keep the
// union's single loads). The same answer in every thread; the shuffle tells the compiler so.
template <class Tr, bool kDense>
__device__ __forceinline__ bool splitWalks(const Sm90Params<typename Tr::T>& prm,
                                           const CtaTiles<Tr, kDense>& tp) {
  if constexpr (!Tr::kSplittable) {
    return false;
  } else {
    const KParams<typename Tr::T>& p = prm.k;
    int visited = 0, visible = 0;
#pragma unroll
    for (int w = 0; w < Tr::kConsumers; ++w) {
      if (tp.i[w] >= tp.tiles) continue;
      const int q0 = tp.i[w] * kBQ, q1 = min(q0 + kBQ, p.Nq) - 1;
      visited += tp.walk[w].n;
      visible += BlockWalk<true>::make(p.vis, q0, q1, Tr::kBK, nullptr, nullptr).n;
    }
    return __shfl_sync(0xffffffffu, (int)(visited < prm.splitBelow * visible), 0) != 0;
  }
}

#endif  // SPARGE_SM90A_DEVICE

}  // namespace sparge::cuda::sm90
