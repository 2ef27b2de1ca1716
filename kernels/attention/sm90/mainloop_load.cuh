// The Hopper attention kernel's producer (mainloop load): the sorted union of the tiles' walks, and the TMA
// loads of Q, K and V into the stage ring.
#pragma once

#include <climits>

#include "attention/sm90/hopper_sync.cuh"
#include "attention/sm90/pipeline.cuh"
#include "attention/sm90/tile_scheduler.cuh"

namespace sparge::cuda::sm90 {

#ifdef SPARGE_SM90A_DEVICE

// One step of the union of the tiles' walks: its key block and which tiles visit it (bit w: tile w).
struct UnionStep {
  int j;
  int mask;
};

// The sorted union of the tiles' block walks, run by the producer; each step goes into the next stage of the
// ring, with the record the consumers walk by (StepRecord).
template <class Tr, bool kDense>
struct UnionCursor {
  static constexpr int N = Tr::kConsumers;
  BlockWalk<kDense> walk[N];
  int t[N], j[N];

  __device__ __forceinline__ explicit UnionCursor(const CtaTiles<Tr, kDense>& tp) {
#pragma unroll
    for (int w = 0; w < N; ++w) {
      walk[w] = tp.walk[w];
      t[w] = 0;
      j[w] = walk[w].n > 0 ? walk[w].first() : INT_MAX;
    }
  }
  __device__ __forceinline__ int nextBlock() const {
    int m = j[0];
#pragma unroll
    for (int w = 1; w < N; ++w) m = min(m, j[w]);
    return m;
  }
  __device__ __forceinline__ bool done() const {
    return nextBlock() == INT_MAX;
  }
  // The next step (the caller checks done() first).
  __device__ __forceinline__ UnionStep next() {
    UnionStep st{nextBlock(), 0};
#pragma unroll
    for (int w = 0; w < N; ++w)
      if (j[w] == st.j) {
        st.mask |= 1 << w;
        j[w] = ++t[w] < walk[w].n ? walk[w].advance(j[w], t[w]) : INT_MAX;
      }
    return st;
  }
};

// ---------------------------------------------------------------------------------------------
// Producer: one thread merges the tiles' walks and streams Q once, then K and V per union step; in split
// walks one thread per tile streams its Q and its own blocks into its ring.

template <class Tr>
__device__ __forceinline__ void loadKV(const Sm90Params<typename Tr::T>& prm, const Pipe<Tr>& pp, int s,
                                       int j, int bhk) {
  mbarArriveExpectTx(pp.fullK(s), Tr::kKTileBytes);
#pragma unroll
  for (int x = 0; x < Tr::kSlabs; ++x)
    tmaLoad3d(pp.k(s) + x * Tr::kBK * Tr::kSlabBytes, &prm.kmap, pp.fullK(s),
              x * Tr::kSlabBytes / Tr::kElemBytes, j * Tr::kBK, bhk);
}

template <class Tr>
__device__ __forceinline__ void loadV(const Sm90Params<typename Tr::T>& prm, const Pipe<Tr>& pp, int s, int j,
                                      int bhk) {
  mbarArriveExpectTx(pp.fullV(s), Tr::kVTileBytes);
  if constexpr (Tr::kFp8) {
    tmaLoad3d(pp.v(s), &prm.v, pp.fullV(s), j * Tr::kBK, 0, bhk);
  } else {
#pragma unroll
    for (int x = 0; x < Tr::D / 64; ++x)
      tmaLoad3d(pp.v(s) + x * Tr::kBK * 128, &prm.v, pp.fullV(s), x * 64, j * Tr::kBK, bhk);
  }
}

template <class Tr, bool kDense>
__device__ __forceinline__ void produce(const Sm90Params<typename Tr::T>& prm, const Pipe<Tr>& pp,
                                        const CtaTiles<Tr, kDense>& tp, bool split) {
  const KParams<typename Tr::T>& p = prm.k;
  const float* kScale = Tr::kFp8 ? p.kScale + (size_t)tp.bhk * p.nk : nullptr;
  prefetchTensorMap(&prm.kmap);
  prefetchTensorMap(&prm.v);
  // Union walk: every tile of the CTA (the last CTA may have fewer); split walk: the tile with blocks.
  bool load[Tr::kConsumers];
  int tiles = 0;
#pragma unroll
  for (int w = 0; w < Tr::kConsumers; ++w) {
    load[w] = split ? tp.walk[w].n > 0 : tp.walks(p, w);
    tiles += load[w];
  }
  mbarArriveExpectTx(pp.fullQ(), tiles * Tr::kQTileBytes);
#pragma unroll
  for (int w = 0; w < Tr::kConsumers; ++w)
#pragma unroll
    for (int x = 0; x < Tr::kSlabs; ++x)
      if (load[w])
        tmaLoad3d(pp.q(w) + x * kBQ * Tr::kSlabBytes, &prm.q, pp.fullQ(), x * Tr::kSlabBytes / Tr::kElemBytes,
                  tp.i[w] * kBQ, tp.bhq);
  UnionCursor<Tr, kDense> cur(tp);
  for (StageCursor at; !cur.done(); pp.advance(at)) {
    const UnionStep st = cur.next();
    const int s = at.s;
    const uint32_t phase = at.phase;
    const float kScaleJ = Tr::kFp8 ? kScale[st.j] : 1.f;
    mbarWait(pp.emptyK(s), phase ^ 1);  // every consumer has read the stage's previous record, too
    // The record goes out with K: the arrive on fullK(s) in loadKV releases it to the consumers.
    stShared16(pp.step(s), st.j, st.mask, __float_as_int(kScaleJ), cur.done());
    loadKV<Tr>(prm, pp, s, st.j, tp.bhk);
    mbarWait(pp.emptyV(s), phase ^ 1);
    loadV<Tr>(prm, pp, s, st.j, tp.bhk);
  }
}

#endif  // SPARGE_SM90A_DEVICE

}  // namespace sparge::cuda::sm90
