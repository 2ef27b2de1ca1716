// Device parts shared by SpargeAttn's Stage 1 (predict.cu) and the other methods' predictors
// (kernels/predictors): mma fragments read straight from row-major rows, CTA reductions, the bitonic sort of
// a row in a warp's registers (descending, ties to the lower index), the n-th smallest or largest of a warp's
// keys and the n smallest marked without a sort, and the delta-encoded LUT of a final mask row.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/sort_key.h"
#include "stages/block_pass.cuh"

namespace sparge::cuda {

// Two consecutive elements (col even) of row `row` of a [n][D] array as one 32-bit fragment register; rows
// past n read as zero.
template <typename T, int D>
__device__ __forceinline__ uint32_t pairAt(const T* base, int row, int col, int n) {
  return row < n ? *reinterpret_cast<const uint32_t*>(base + (size_t)row * D + col) : 0u;
}

__device__ __forceinline__ bool before(float ka, int ia, float kb, int ib) {
  return ka > kb || (ka == kb && ia < ib);
}

// A bitonic compare-exchange of the pair at positions (lower, upper): swap when the pair is out of order
// for its direction (descending when bit k of the lower position is clear). Both kinds of step use it.
__device__ __forceinline__ bool outOfOrder(bool descending, float ka, int ia, float kb, int ib) {
  return descending ? before(kb, ib, ka, ia) : before(ka, ia, kb, ib);
}

// Reductions over the whole CTA through red[8] (one slot per warp). Every thread gets the result; the final
// barrier lets the caller reuse red at once.
__device__ __forceinline__ float ctaMax(float v, float* red) {
  const int warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warpMax(v);
  if ((threadIdx.x & 31) == 0) red[warp] = v;
  __syncthreads();
  v = red[0];
  for (int w = 1; w < nw; ++w) v = fmaxf(v, red[w]);
  __syncthreads();
  return v;
}

__device__ __forceinline__ float ctaSum(float v, float* red) {
  const int warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warpSum(v);
  if ((threadIdx.x & 31) == 0) red[warp] = v;
  __syncthreads();
  v = 0.f;
  for (int w = 0; w < nw; ++w) v += red[w];
  __syncthreads();
  return v;
}

// One compare-exchange of a bitonic merge between this thread's element t and element t ^ j, held by lane
// lane ^ laneMask of the same warp, in registers. Both threads of a pair evaluate the shared-memory step's
// swap test on the same (lower, upper) pair, so the outcome is that step's, NaN keys (never swapped)
// included.
__device__ __forceinline__ void exchangeInWarp(float& key, int& id, int t, int k, int j, int laneMask) {
  const float otherKey = __shfl_xor_sync(0xffffffffu, key, laneMask);
  const int otherId = __shfl_xor_sync(0xffffffffu, id, laneMask);
  const bool lower = (t & j) == 0;
  const float ka = lower ? key : otherKey, kb = lower ? otherKey : key;
  const int ia = lower ? id : otherId, ib = lower ? otherId : id;
  if (outOfOrder((t & k) == 0, ka, ia, kb, ib)) {
    key = otherKey;
    id = otherId;
  }
}

// One step j of merge k: lane l's position t = l*E + e pairs with t ^ j. Inside a thread (j < E, known at
// compile time: register indices must be) or across lanes (j >= E).
template <int E>
__device__ __forceinline__ void exchangeInThread(float (&key)[E], int (&id)[E], int k, int j) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int o = e ^ j;
    if ((e & j) == 0 && outOfOrder(((lane * E + e) & k) == 0, key[e], id[e], key[o], id[o])) {
      const float kt = key[e];
      const int it = id[e];
      key[e] = key[o];
      id[e] = id[o];
      key[o] = kt;
      id[o] = it;
    }
  }
}
template <int E>
__device__ __forceinline__ void exchangeAcrossLanes(float (&key)[E], int (&id)[E], int k, int j) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int e = 0; e < E; ++e) exchangeInWarp(key[e], id[e], lane * E + e, k, j, j / E);
}

template <int E>
__device__ __forceinline__ void bitonicSortFloatPairs(float (&key)[E], int (&id)[E]) {
#pragma unroll 1
  for (int k = 2; k <= 32 * E; k <<= 1) {
#pragma unroll 1
    for (int j = k >> 1; j >= E; j >>= 1) exchangeAcrossLanes<E>(key, id, k, j);
#pragma unroll
    for (int j = E / 2; j > 0; j >>= 1)
      if (j < k) exchangeInThread<E>(key, id, k, j);
  }
}

// (key, id) as one word whose ascending order is the sort's order (key descending, -0 equal to +0, ties to
// the lower id) for keys that are not NaN: descendingKey above the id. A compare-exchange of two words is one
// 64-bit minimum and maximum, where the pair takes a float and an int compare and six selects.
__device__ __forceinline__ uint64_t sortWord(float key, int id) {
  return (uint64_t(descendingKey(key)) << 32) | uint32_t(id);
}

// Position t of merge k keeps the smaller word of its pair where it is the lower position of a run in the
// sort's order ((t & k) == 0), or the upper one of a run the other way; else the larger.
__device__ __forceinline__ uint64_t exchangedWord(uint64_t mine, uint64_t other, bool lower, bool inOrder) {
  const uint64_t lo = mine < other ? mine : other, hi = mine < other ? other : mine;
  return lower == inOrder ? lo : hi;
}

template <int E>
__device__ __forceinline__ void bitonicSortWords(uint64_t (&w)[E]) {
  const int lane = threadIdx.x & 31;
#pragma unroll 1
  for (int k = 2; k <= 32 * E; k <<= 1) {
#pragma unroll 1
    for (int j = k >> 1; j >= E; j >>= 1) {
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const int t = lane * E + e;
        w[e] = exchangedWord(w[e], __shfl_xor_sync(0xffffffffu, w[e], j / E), (t & j) == 0, (t & k) == 0);
      }
    }
#pragma unroll
    for (int j = E / 2; j > 0; j >>= 1) {
      if (j >= k) continue;
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const int o = e ^ j;
        if ((e & j) != 0) continue;
        const bool inOrder = ((lane * E + e) & k) == 0;
        const uint64_t a = w[e], b = w[o];
        w[e] = exchangedWord(a, b, true, inOrder);
        w[o] = exchangedWord(b, a, false, inOrder);
      }
    }
  }
}

// Whether any of the warp's 32·E keys is NaN (a NaN compares unequal to itself). Called by the whole warp.
template <int E>
__device__ __forceinline__ bool warpHasNaN(const float (&key)[E]) {
  bool nan = false;
#pragma unroll
  for (int e = 0; e < E; ++e) nan = nan || key[e] != key[e];
  return __any_sync(0xffffffffu, nan);
}

// The warp's 32·E (key, id) pairs sorted by key descending, ties to the lower id, by a bitonic network in
// registers. Without NaN keys the network runs on sortWord's words (the same compare-exchanges, so the same
// order); a warp with a NaN key runs it on the pairs, whose compare never swaps a NaN (the CPU engine's
// order for such rows).
template <int E>
__device__ __forceinline__ void bitonicSortWarp(float (&key)[E], int (&id)[E]) {
  if (warpHasNaN<E>(key)) return bitonicSortFloatPairs<E>(key, id);
  uint64_t w[E];
#pragma unroll
  for (int e = 0; e < E; ++e) w[e] = sortWord(key[e], id[e]);
  bitonicSortWords<E>(w);
#pragma unroll
  for (int e = 0; e < E; ++e) {
    key[e] = fromDescendingKey(uint32_t(w[e] >> 32));
    id[e] = int(uint32_t(w[e]));
  }
}

// The n-th smallest (kLargest: largest) of the keys the warp's lanes hold (1 <= n <= their count), read
// through `keys` (a lane may hold none): keys.each(f) hands each of the lane's keys to f, keys.count(p)
// counts those for which p holds. Bisection from the top over the bits in which the keys differ (the others
// are every key's, so the cut starts with them). The largest are the smallest of the complemented keys; the
// complement goes on the probe, not on every key. Called by the whole warp.
template <bool kLargest, class Keys>
__device__ __forceinline__ uint32_t warpNthOf(const Keys& keys, int n) {
  uint32_t every = 0xffffffffu, some = 0u;
  keys.each([&](uint32_t k) { every &= k, some |= k; });
  every = __reduce_and_sync(0xffffffffu, every);
  some = __reduce_or_sync(0xffffffffu, some);
  uint32_t cut = kLargest ? ~some : every;  // in complemented keys when kLargest
  for (uint32_t open = some ^ every; open;) {
    const uint32_t bit = 0x80000000u >> __clz(open);
    open ^= bit;
    const uint32_t probe = cut | bit, bound = kLargest ? ~probe : probe;
    const int before = keys.count([&](uint32_t k) { return kLargest ? k > bound : k < bound; });
    if (__reduce_add_sync(0xffffffffu, before) < n) cut = probe;
  }
  return kLargest ? ~cut : cut;
}

// A warp's keys held E a lane in registers, for warpNthOf.
template <int E>
struct KeysInRegisters {
  const uint32_t (&key)[E];

  template <class F>
  __device__ __forceinline__ void each(F&& f) const {
#pragma unroll
    for (int e = 0; e < E; ++e) f(key[e]);
  }
  // In four sums: one running sum chained every key's add behind the one before.
  template <class P>
  __device__ __forceinline__ int count(P&& p) const {
    int c[4] = {0, 0, 0, 0};
#pragma unroll
    for (int e = 0; e < E; ++e) c[e % 4] += p(key[e]);
    return (c[0] + c[1]) + (c[2] + c[3]);
  }
};

// Marks in sel[] the ids (lane·E + e) of the n smallest (key, id) pairs of the warp, ties to the lower id:
// the first n in bitonicSortWarp's order, without the sort. Ids from `count` on are padding, whose keys the
// caller keeps above every other. Called by the whole warp.
template <int E>
__device__ __forceinline__ void markSmallest(const uint32_t (&key)[E], int n, int count, uint8_t* sel) {
  const int lane = threadIdx.x & 31;
  const KeysInRegisters<E> keys{key};
  const uint32_t cut = warpNthOf<false>(keys, n);
  const int below = keys.count([&](uint32_t k) { return k < cut; });
  const int ties = keys.count([&](uint32_t k) { return k == cut; });
  const int tiesTaken = n - __reduce_add_sync(0xffffffffu, below);
  int before = ties;  // ties in this lane and the lanes below it, then below it only
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int t = __shfl_up_sync(0xffffffffu, before, o);
    if (lane >= o) before += t;
  }
  before -= ties;
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const bool tie = key[e] == cut;
    if ((key[e] < cut || (tie && before < tiesTaken)) && lane * E + e < count) sel[lane * E + e] = 1;
    before += tie;
  }
}

// The delta-encoded LUT of one row (first entry absolute, then gaps; zero padded to nk) and its block
// count, from the final mask row in shared memory. Called by one whole warp.
__device__ inline void writeDeltaLut(const uint8_t* fin, int nk, int32_t* lutRow, int32_t* validCount) {
  const int lane = threadIdx.x & 31;
  int count = 0, prev = -1;
  const unsigned lt = (1u << lane) - 1u;
  for (int base = 0; base < nk; base += 32) {
    int j = base + lane;
    bool f = j < nk && fin[j];
    unsigned bal = __ballot_sync(0xffffffffu, f);
    if (f) {
      int pos = count + __popc(bal & lt);
      unsigned lower = bal & lt;
      int pj = lower ? base + 31 - __clz(lower) : prev;
      lutRow[pos] = (pos == 0) ? j : j - pj;
    }
    count += __popc(bal);
    if (bal) prev = base + 31 - __clz(bal);
  }
  for (int p = count + lane; p < nk; p += 32) lutRow[p] = 0;
  if (lane == 0) *validCount = count;
}

}  // namespace sparge::cuda
